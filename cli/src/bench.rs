//! `zermelo bench`: wall time, positions per second and peak memory of a build.

use std::path::Path;
use std::time::Instant;

use zermelo_chess::Material;

use crate::build::{build, build_in, BuildOptions};
use crate::memory;

/// Peak resident memory of this process so far, in bytes (Linux: VmHWM), if known.
pub fn peak_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Sets this process's peak resident memory back to its present size (Linux 4.0 and later: `5`
/// written to /proc/self/clear_refs), so that [`peak_memory_bytes`] then covers only what
/// follows. False where the system cannot.
fn reset_peak_memory() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Builds `materials` in a fresh directory (or `dir`) and prints the figures. With `alone`, the
/// sub-tables are built first, untimed, and only the named materials are timed and measured
/// (their peak memory too, where the system can reset the peak after the sub-tables).
pub fn run(materials: &[Material], alone: bool, threads: usize, dir: Option<&Path>) -> Result<(), String> {
    // A directory of our own is removed at the end; one given by the user is kept.
    let own = dir.is_none();
    let dir = match dir {
        Some(d) => d.to_path_buf(),
        None => std::env::temp_dir().join(format!("zermelo-bench-{}", std::process::id())),
    };
    let quiet = |_: u64, _: u64, _: &Material| {};
    if alone {
        // Build every sub-table: the plan of each material minus the material itself.
        let plan = zermelo_coordinator::plan::plan(materials);
        let subs: Vec<Material> = plan
            .materials
            .iter()
            .map(|m| m.material)
            .filter(|m| !materials.contains(m))
            .collect();
        build(&subs, &dir, threads, memory::default_budget(), &quiet).map_err(|e| e.to_string())?;
    }
    // The peak of the named materials alone, not of their sub-tables' build.
    let peak_of_subs = alone && !reset_peak_memory();
    let start = Instant::now();
    let outcomes =
        build(materials, &dir, threads, memory::default_budget(), &quiet).map_err(|e| e.to_string())?;
    let wall = start.elapsed().as_secs_f64();
    println!(
        "{:<10} {:>14} {:>10} {:>14}",
        "material", "positions", "seconds", "positions/s"
    );
    let mut positions = 0u64;
    for o in outcomes.iter().filter(|o| !o.skipped) {
        positions += o.positions;
        println!(
            "{:<10} {:>14} {:>10.3} {:>14.0}",
            o.material.to_string(),
            o.positions,
            o.seconds,
            o.positions as f64 / o.seconds.max(1e-9)
        );
    }
    println!(
        "{:<10} {:>14} {:>10.3} {:>14.0}",
        "total",
        positions,
        wall,
        positions as f64 / wall.max(1e-9)
    );
    println!("threads: {threads}");
    match peak_memory_bytes() {
        Some(b) => println!(
            "peak memory: {:.1} MiB{}",
            b as f64 / (1024.0 * 1024.0),
            if peak_of_subs {
                " (the sub-tables' build included: this system cannot reset the peak)"
            } else {
                ""
            }
        ),
        None => println!("peak memory: unknown"),
    }
    println!("positions are table indices (both sides to move, illegal ones included)");
    if own {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}

/// User + system CPU seconds of this process (`RUSAGE_SELF`) or of its waited-for children
/// (`RUSAGE_CHILDREN`).
fn cpu_seconds(who: libc::c_int) -> f64 {
    // SAFETY: getrusage only writes the struct we hand it.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(who, &mut u) } != 0 {
        return f64::NAN;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// One side of the comparison.
struct Side {
    wall: f64,
    cpu: f64,
}

/// `zermelo bench --cluster N`: builds `materials` (with their sub-tables) once with the
/// single-node build in this process (`threads` threads), then on a loopback cluster of a
/// coordinator and `workers` worker processes (`per_worker` threads each), each into a fresh
/// directory; prints wall time, total CPU time (this process plus every child process, from
/// getrusage), the slice bytes moved over gRPC per position, the ratios, and whether every
/// file is byte-identical. `check_sample` goes to the coordinator (`None`: its default).
///
/// With `runs` over 1 the pair is built that many times, one after the other, and the ratios
/// summed up at the end: the median CPU ratio of the pairs and the ratio of their summed CPU
/// (on a shared machine one pair's ratio can be off by a tenth either way).
pub fn run_cluster_comparison(
    materials: &[Material],
    workers: usize,
    threads: usize,
    per_worker: usize,
    check_sample: Option<usize>,
    runs: usize,
) -> Result<(), String> {
    let mut pairs = Vec::new();
    // Nothing is deleted before the end, neither a pair's files nor the folders of solved slices
    // `solve` deletes once its tables are written: deleting thousands of files makes the file
    // system slower to create files for minutes (ext4 without a journal steps over every inode
    // freed in the last 60 to 300 seconds), which whatever creates files next would pay: the
    // cluster (3 files per slice: the store's and two workers' caches) more than the solve.
    let mut scratches = Vec::new();
    let mut kept = Vec::new();
    for run in 1..=runs.max(1) {
        if runs > 1 {
            println!("pair {run} of {runs}");
        }
        let scratch = tempfile::Builder::new()
            .prefix("zermelo-bench-")
            .tempdir()
            .map_err(|e| format!("creating a temporary directory: {e}"))?;
        pairs.push(compare_once(
            materials,
            workers,
            threads,
            per_worker,
            check_sample,
            scratch.path(),
            &mut kept,
        )?);
        scratches.push(scratch);
    }
    if pairs.len() > 1 {
        let mut ratios: Vec<f64> = pairs.iter().map(|(s, c)| c.cpu / s.cpu).collect();
        ratios.sort_by(f64::total_cmp);
        let median = if ratios.len() % 2 == 1 {
            ratios[ratios.len() / 2]
        } else {
            (ratios[ratios.len() / 2 - 1] + ratios[ratios.len() / 2]) / 2.0
        };
        let (solve, cluster): (f64, f64) = pairs
            .iter()
            .map(|(s, c)| (s.cpu, c.cpu))
            .fold((0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1));
        let shown: Vec<String> = ratios.iter().map(|r| format!("{r:.3}")).collect();
        println!(
            "over {} pairs, cluster / solve CPU: median {median:.3}, of the summed CPU {:.3} (solve {solve:.2} s, cluster {cluster:.2} s); each, sorted: {}",
            pairs.len(),
            cluster / solve,
            shown.join(" ")
        );
    }
    Ok(())
}

/// One pair of [`run_cluster_comparison`], in `scratch`: its report printed, its two sides
/// returned, the solve's folders of solved slices handed to `kept` (see [`build_in`]).
fn compare_once(
    materials: &[Material],
    workers: usize,
    threads: usize,
    per_worker: usize,
    check_sample: Option<usize>,
    scratch: &Path,
    kept: &mut Vec<tempfile::TempDir>,
) -> Result<(Side, Side), String> {
    let (solve_dir, cluster_dir) = (scratch.join("solve"), scratch.join("cluster"));
    let quiet = |_: u64, _: u64, _: &Material| {};

    let (cpu0, start) = (cpu_seconds(libc::RUSAGE_SELF), Instant::now());
    let options = BuildOptions::new(threads, memory::default_budget());
    let outcomes =
        build_in(materials, &solve_dir, &[], &options, &quiet, Some(kept)).map_err(|e| e.to_string())?;
    let solve = Side {
        wall: start.elapsed().as_secs_f64(),
        cpu: cpu_seconds(libc::RUSAGE_SELF) - cpu0,
    };
    let positions: u64 = outcomes.iter().map(|o| o.positions).sum();

    let names: Vec<String> = materials.iter().map(|m| m.to_string()).collect();
    let (self0, children0) = (cpu_seconds(libc::RUSAGE_SELF), cpu_seconds(libc::RUSAGE_CHILDREN));
    let start = Instant::now();
    let memory = crate::memory::default_budget() / workers.max(1) as u64;
    let run = crate::cluster::run_cluster(
        workers,
        &names,
        &cluster_dir,
        (per_worker, memory),
        (check_sample, None),
        crate::cluster::Parts::for_workers(workers, memory),
        None,
    )
    .map_err(|e| e.message)?;
    let cluster = Side {
        wall: start.elapsed().as_secs_f64(),
        cpu: (cpu_seconds(libc::RUSAGE_SELF) - self0) + (cpu_seconds(libc::RUSAGE_CHILDREN) - children0),
    };

    // Byte-identical?
    let mut files: Vec<String> = std::fs::read_dir(&solve_dir)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".zmt"))
        .collect();
    files.sort();
    let differing: Vec<&String> = files
        .iter()
        .filter(|n| std::fs::read(solve_dir.join(n)).ok() != std::fs::read(cluster_dir.join(n)).ok())
        .collect();

    let moved = run.bytes_uploaded + run.bytes_fetched;
    let per = |b: u64| b as f64 / positions.max(1) as f64;
    println!(
        "materials: {} ({} tables, {} positions)",
        names.join(" "),
        files.len(),
        positions
    );
    println!(
        "{:<28} {:>10} {:>10} {:>14}",
        "run", "wall s", "CPU s", "positions/s"
    );
    let row = |name: String, s: &Side| {
        println!(
            "{:<28} {:>10.2} {:>10.2} {:>14.0}",
            name,
            s.wall,
            s.cpu,
            positions as f64 / s.wall.max(1e-9)
        )
    };
    row(format!("solve --threads {threads}"), &solve);
    row(
        format!("cluster {workers} worker(s) x {per_worker} thr"),
        &cluster,
    );
    println!(
        "cluster / solve: wall {:.3}, CPU {:.3} ({:+.1}% CPU)",
        cluster.wall / solve.wall,
        cluster.cpu / solve.cpu,
        (cluster.cpu / solve.cpu - 1.0) * 100.0
    );
    let each: Vec<String> = run
        .usage
        .iter()
        .map(|u| format!("{} {:.2}", u.name, u.cpu))
        .collect();
    println!("cluster CPU s by process: {}", each.join(", "));
    println!(
        "cluster job from submission to done: {:.2} s; {} slices",
        run.seconds, run.info.slices_total
    );
    println!(
        "gRPC slice bytes: uploaded {} ({:.3} B/position), fetched {} ({:.3} B/position), total {} ({:.3} B/position)",
        run.bytes_uploaded,
        per(run.bytes_uploaded),
        run.bytes_fetched,
        per(run.bytes_fetched),
        moved,
        per(moved)
    );
    if differing.is_empty() {
        println!("files: all {} byte-identical", files.len());
    } else {
        println!("files: DIFFERENT: {differing:?}");
    }
    println!(
        "CPU is user + system time of every process (getrusage: this one and its waited-for children); \
         gRPC bytes are slice data in upload and fetch chunks, without protobuf and HTTP/2 framing; \
         positions are table indices (both sides to move, illegal ones included)"
    );
    if differing.is_empty() {
        Ok((solve, cluster))
    } else {
        Err(format!("the cluster's tables differ from solve's: {differing:?}"))
    }
}
