//! Building within a memory budget (`solve --memory`): the same bytes, and the process's peak
//! resident memory within the budget plus its fixed share.

use std::path::Path;
use std::process::Stdio;

use crate::common::{assert_ok, run, stdout, tables_with, zermelo};

/// The process's own share that a budget does not count: code, libraries, thread stacks, the
/// allocator's slack (see `material_memory` in `cli/src/build.rs`).
const FIXED_SHARE: u64 = 32 << 20;

/// Runs `zermelo args` to the end and returns its exit code, stderr and peak resident memory in
/// bytes (`wait4`'s `ru_maxrss`, for this child alone).
// The child is reaped by `wait4`, which std's `Child::wait` cannot replace (it drops the usage).
#[allow(clippy::zombie_processes)]
fn run_measured(args: &[&str]) -> (Option<i32>, String, u64) {
    let child = zermelo()
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start zermelo");
    let pid = child.id() as libc::pid_t;
    let mut stderr_pipe = child.stderr.expect("piped stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stderr_pipe, &mut s).ok();
        s
    });
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value; wait4 only writes `status` and `usage`.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet waited for (std's `Child` was consumed above without a
    // wait), so wait4 reaps exactly it.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (code, reader.join().unwrap(), usage.ru_maxrss as u64 * 1024)
}

fn same_tables(built: &Path, reference: &Path) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir(built).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "zmt") {
            let name = path.file_name().unwrap();
            assert_eq!(
                std::fs::read(&path).unwrap(),
                std::fs::read(reference.join(name)).unwrap(),
                "{name:?} differs from the build with the default budget"
            );
            n += 1;
        }
    }
    n
}

/// KPvKP and every table it converts into, on 2 threads, within 40 MiB: its slices are then
/// solved one at a time (two at once would pass the budget), its successors read from their
/// files a block at a time. The same bytes as the default build, and the peak resident memory
/// within the budget plus the fixed share; no file of solved slices is left behind.
#[test]
fn a_build_within_a_small_budget_gives_the_same_bytes_in_that_memory() {
    let reference = tables_with(&["KPvKP"]);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let budget: u64 = 40 << 20;
    let (code, err, peak) = run_measured(&[
        "solve",
        "KPvKP",
        "--tables",
        d,
        "--threads",
        "2",
        "--memory",
        "40MiB",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        same_tables(dir.path(), &reference),
        20,
        "KPvKP and its 19 sub-tables"
    );
    eprintln!("peak resident memory {} MiB, budget 40 MiB", peak >> 20);
    assert!(
        peak <= budget + FIXED_SHARE,
        "peak resident memory {peak} bytes is past the budget {budget} + {FIXED_SHARE}"
    );
    assert_only_tables(dir.path());

    // One slice at a time does not fit 8 MiB: refused before any work, naming the size needed.
    let small = tempfile::tempdir().unwrap();
    let (code, err, _) = run_measured(&[
        "solve",
        "KPvKP",
        "--tables",
        small.path().to_str().unwrap(),
        "--memory",
        "8MiB",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("needs about") && err.contains("budget is 8.0 MiB"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(small.path()).unwrap().count(),
        0,
        "no work done"
    );
}

/// Asserts that `dir` holds nothing but tables: no build folder, scratch or state file is left.
fn assert_only_tables(dir: &std::path::Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| !n.to_string_lossy().ends_with(".zmt"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A pawnless table whose state does not fit the budget is built with its state paged through
/// the build folder ([`zermelo_worker`]'s `solver::paging`): KRvKN within a budget a little over
/// the least `--plan-only` gives for it paged (under what it needs in memory, by either
/// solver), by the compact solver, its three bitmaps paged (3/8 byte a position of files); and
/// with `--byte-solver` under the compact solver's need in memory, by the byte solver, its
/// byte and bit a position paged (9/8 byte). The same bytes as the build in memory, the peak
/// resident memory within the budget plus the fixed share, and nothing left in the tables
/// directory but the tables.
#[test]
fn a_pawnless_table_over_the_budget_is_paged_to_the_same_bytes() {
    let reference = tables_with(&["KRvKN"]);
    let plan = tempfile::tempdir().unwrap();
    let d = plan.path().to_str().unwrap();
    let (in_memory, compact) = (krvkn_need(d, "1TiB", true).0, krvkn_need(d, "1TiB", false).0);
    let (paged, _) = krvkn_need(d, "1MiB", false);
    let positions = krvkn_plan(d, "1TiB", false)["positions"].as_u64().unwrap();
    let ways = [
        ((paged + (1 << 20)).min(compact - 1), false, positions * 3 / 8),
        (compact - 1, true, positions * 9 / 8),
    ];
    for (budget, byte_solver, files) in ways {
        assert!(
            budget >= paged && budget < compact && compact < in_memory,
            "paged {paged} bytes, compact {compact}, in memory {in_memory}"
        );
        let row = krvkn_plan(d, &format!("{budget}B"), byte_solver);
        assert_eq!(row["compact"], !byte_solver, "{row}");
        assert_eq!(row["paged_bytes"], files, "{row}");
        let dir = tempfile::tempdir().unwrap();
        let more: &[&str] = if byte_solver { &["--byte-solver"] } else { &[] };
        let peak = krvkn_within(
            dir.path(),
            budget,
            more,
            "paged through the build folder",
            &reference,
        );
        eprintln!(
            "KRvKN paged (byte solver {byte_solver}): peak resident memory {} MiB, budget {} MiB (in memory it needs {} MiB)",
            peak >> 20,
            budget >> 20,
            in_memory >> 20
        );
        assert!(
            peak <= budget + FIXED_SHARE,
            "peak {peak} bytes, budget {budget} + {FIXED_SHARE}"
        );
        assert_only_tables(dir.path());
    }
}

/// Builds KRvKN in `dir` on 2 threads within `budget` bytes (and the options `more`): it
/// succeeds, its log says `how` it was solved, and its tables (KRvKN, KRvK and KNvK) are those of `reference`. Returns the
/// process's peak resident memory.
fn krvkn_within(dir: &Path, budget: u64, more: &[&str], how: &str, reference: &Path) -> u64 {
    let memory = format!("{budget}B");
    let d = dir.to_str().unwrap();
    let mut args = vec![
        "solve",
        "KRvKN",
        "--tables",
        d,
        "--threads",
        "2",
        "--memory",
        &memory,
    ];
    args.extend_from_slice(more);
    let (code, err, peak) = run_measured(&args);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains(how), "{err}");
    assert_eq!(same_tables(dir, reference), 3, "KRvKN, KRvK and KNvK");
    peak
}

/// The memory `solve --plan-only KRvKN` gives for KRvKN within `memory` (with `--byte-solver`
/// if `byte_solver`), the tables in `d`, and whether it is built by the compact solver.
fn krvkn_need(d: &str, memory: &str, byte_solver: bool) -> (u64, bool) {
    let row = krvkn_plan(d, memory, byte_solver);
    (
        row["memory_bytes"].as_u64().unwrap(),
        row["compact"].as_bool().unwrap(),
    )
}

/// KRvKN's row of the plan of [`krvkn_need`].
fn krvkn_plan(d: &str, memory: &str, byte_solver: bool) -> serde_json::Value {
    let mut args = vec!["solve", "--plan-only", "KRvKN", "--memory", memory, "--tables", d];
    if byte_solver {
        args.push("--byte-solver");
    }
    let o = run(&args);
    let plan: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let rows = plan["materials"].as_array().unwrap();
    let row = rows.iter().find(|r| r["material"] == "KRvKN").unwrap();
    assert!(!crate::common::stderr(&o).is_empty());
    row.clone()
}

/// A pawnless table by lines is built by the compact solver (`solver::bits`, three bits a
/// position) whenever that fits: KRvKN within a little more than the compact solver's need
/// (under the byte solver's), the same bytes as the reference build, the peak resident memory
/// within the budget plus the fixed share. `--byte-solver` asks for the byte solver, which the
/// plan then gives with its larger need: the same bytes again; and within the budget above,
/// too small for it, the compact solver is still taken rather than paging.
#[test]
fn a_pawnless_table_is_built_by_the_compact_solver_unless_the_byte_solver_is_asked_for() {
    use crate::common::stderr;
    let reference = tables_with(&["KRvKN"]);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let (compact, by_bits) = krvkn_need(d, "1TiB", false);
    let (in_memory, by_bits_asked_bytes) = krvkn_need(d, "1TiB", true);
    assert!(by_bits && !by_bits_asked_bytes);
    let budget = compact + (256 << 10);
    assert!(
        budget < in_memory,
        "compact {compact} bytes, in memory {in_memory}"
    );
    let budget_text = format!("{budget}B");
    assert_eq!(krvkn_need(d, &budget_text, true), (compact, true));
    let peak = krvkn_within(
        dir.path(),
        budget,
        &[],
        "solved by the compact solver",
        &reference,
    );
    assert!(
        peak <= budget + FIXED_SHARE,
        "peak {peak} bytes, budget {budget} + {FIXED_SHARE}"
    );
    assert_only_tables(dir.path());
    let bytes = tempfile::tempdir().unwrap();
    let b = bytes.path().to_str().unwrap();
    let o = run(&["solve", "KRvKN", "--tables", b, "--threads", "1", "--byte-solver"]);
    assert_ok(&o);
    assert!(
        !stderr(&o).contains("solved by the compact solver"),
        "{}",
        stderr(&o)
    );
    assert_eq!(same_tables(bytes.path(), &reference), 3);
}

/// `solve --plan-only` says what a build would do without doing it: every material with its
/// positions (KQvK's counted by hand: 2 sides x 462 king pairs x 64 queen squares), what is
/// already complete, and whether the memory it needs fits the budget
/// (exit 1 when not); it writes nothing.
#[test]
fn plan_only_reports_sizes_memory_and_what_is_complete_and_writes_nothing() {
    use crate::common::stderr;
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("none");
    let o = run(&[
        "solve",
        "--plan-only",
        "KPvK",
        "--tables",
        empty.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!empty.exists(), "--plan-only created the tables directory");
    let plan: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let row = |plan: &serde_json::Value, m: &str| {
        plan["materials"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["material"] == m)
            .unwrap_or_else(|| panic!("{m} missing from {plan}"))
            .clone()
    };
    assert_eq!(row(&plan, "KQvK")["positions"], 2 * 462 * 64);
    assert_eq!(row(&plan, "KPvK")["slices"], 24);
    assert_eq!(plan["materials"].as_array().unwrap().len(), 5);
    let kpk = row(&plan, "KPvK")["positions"].as_u64().unwrap();
    assert_eq!(plan["positions"], kpk + 4 * 2 * 462 * 64);
    assert!(
        stderr(&o).contains("5 materials to build (0 already complete)"),
        "{}",
        stderr(&o)
    );

    let o = run(&[
        "solve",
        "--plan-only",
        "--memory",
        "1MiB",
        "KPvK",
        "--tables",
        empty.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("NOT enough"), "{}", stderr(&o));
    assert_eq!(
        row(&serde_json::from_str(&stdout(&o)).unwrap(), "KQvK")["fits"],
        false
    );

    let built = tables_with(&["KPvK"]);
    let o = run(&[
        "solve",
        "--plan-only",
        "KPvK",
        "--tables",
        built.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let plan: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(plan["positions"], 0);
    assert_eq!(row(&plan, "KPvK")["complete"], true);
    // Nothing to build takes no time: 0, not the -0 of a float sum of nothing.
    assert_eq!(plan["seconds"].as_f64(), Some(0.0));
    assert!(plan["seconds"].as_f64().unwrap().is_sign_positive(), "{plan}");
    assert!(stderr(&o).contains("about 0 s on"), "{}", stderr(&o));
}

/// `zermelo bench --alone` gives the peak memory of the named materials' build alone: on Linux
/// the peak is reset after the sub-tables are built (a system that cannot says so on the line).
#[test]
fn bench_alone_gives_the_peak_of_the_named_materials() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let o = run(&[
        "bench",
        "KPvK",
        "--alone",
        "--threads",
        "1",
        "--tables",
        tmp.path().to_str().expect("utf-8 path"),
    ]);
    assert_ok(&o);
    let out = stdout(&o);
    let peak = out
        .lines()
        .find_map(|l| l.strip_prefix("peak memory: "))
        .unwrap_or_else(|| panic!("no peak line in {out}"));
    let mib: f64 = peak
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no figure in {peak:?}"));
    assert!(mib > 0.0, "{peak}");
    if cfg!(target_os = "linux") {
        assert!(
            !peak.contains("included"),
            "the peak was not reset on Linux: {peak}"
        );
    }
}

/// Seven men are planned and built like six, within the memory budget and the disk: KNNNNvKQ
/// (2 sides x 462 king pairs x C(64,4) knight sets x 64 queen squares) is planned for the
/// compact solver within 16 GiB (3 bits a position), with its bitmaps paged within 4 GiB (or
/// with `--byte-solver`, the byte solver's byte and bit a position paged), refused before any
/// work below its least paged need, and refused for its disk where the disk is too small for it
/// (the folder of the test, or /dev/shm, whichever is).
#[test]
fn seven_men_are_planned_and_refused_past_the_memory_or_the_disk() {
    use crate::common::stderr;
    let tmp = tempfile::tempdir().unwrap();
    let plan_with = |dir: &Path, memory: &str, more: &[&str]| {
        let mut args = vec!["solve", "--plan-only", "KNNNNvKQ", "--memory", memory, "--tables"];
        args.push(dir.to_str().unwrap());
        args.extend_from_slice(more);
        let o = run(&args);
        let plan: serde_json::Value =
            serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)));
        (o, plan)
    };
    let plan_in = |dir: &Path| plan_with(dir, "16GiB", &[]);
    let (o, plan) = plan_in(&tmp.path().join("none"));
    let rows = plan["materials"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["material"].as_str().unwrap()).collect();
    for m in ["KNNNNvK", "KNNNvKQ", "KNNvKQ", "KQvKN", "KNvK", "KQvK"] {
        assert!(names.contains(&m), "{m} missing from {names:?}");
    }
    let top = rows.last().unwrap();
    assert_eq!(top["material"], "KNNNNvKQ");
    let positions = 2 * 462 * (64 * 63 * 62 * 61 / 24) * 64u64;
    assert_eq!(top["positions"], positions);
    assert_eq!(top["compact"], true, "{top}");
    assert_eq!(top["paged_bytes"], 0, "{top}");
    let memory = top["memory_bytes"].as_u64().unwrap();
    assert!(memory < 16 << 30 && memory >= positions / 8 * 3, "{top}");
    let (_, within_4) = plan_with(&tmp.path().join("none"), "4GiB", &[]);
    let top4 = within_4["materials"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(top4["compact"], true, "{top4}");
    assert_eq!(top4["paged_bytes"], positions / 8 * 3, "three bits a position");
    assert!(top4["memory_bytes"].as_u64().unwrap() < 4 << 30, "{top4}");
    let (_, bytes_4) = plan_with(&tmp.path().join("none"), "4GiB", &["--byte-solver"]);
    let bytes4 = bytes_4["materials"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(bytes4["compact"], false, "{bytes4}");
    assert_eq!(
        bytes4["paged_bytes"],
        positions + positions / 8,
        "a byte and a bit a position"
    );
    assert!(bytes4["memory_bytes"].as_u64().unwrap() < 4 << 30, "{bytes4}");
    let free = plan["free_disk_bytes"]
        .as_u64()
        .expect("the free disk is known here");
    let need = plan["disk_bytes"].as_u64().unwrap() + plan["scratch_bytes"].as_u64().unwrap();
    let need4 = within_4["disk_bytes"].as_u64().unwrap() + within_4["scratch_bytes"].as_u64().unwrap();
    assert!(
        need4 > top4["paged_bytes"].as_u64().unwrap() && need4 > need,
        "{within_4}"
    );
    assert_eq!(plan["disk_fits"], need <= free, "{plan}");
    assert_eq!(plan["fits"], need <= free, "{plan}");
    assert_eq!(o.status.code(), Some(if need <= free { 0 } else { 1 }));

    // Below its least paged need (about 1.2 GiB): refused before any work, with both needs.
    let d = tmp.path().join("small");
    let o = run(&[
        "solve",
        "KNNNNvKQ",
        "--memory",
        "1GiB",
        "--tables",
        d.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("building KNNNNvKQ needs about"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("with its state paged"), "{}", stderr(&o));
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0, "something was written");

    // Past the disk: refused before any work, naming the disk it needs and what is free.
    let shm = Path::new("/dev/shm");
    let shm = shm.is_dir().then(|| tempfile::tempdir_in(shm).ok()).flatten();
    let mut refused = 0;
    for dir in std::iter::once(tmp.path()).chain(shm.as_ref().map(|s| s.path())) {
        let d = dir.join("disk");
        let (_, plan) = plan_in(&d);
        if plan["disk_fits"] == true {
            continue;
        }
        let o = run(&[
            "solve",
            "KNNNNvKQ",
            "--memory",
            "16GiB",
            "--tables",
            d.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("building KNNNNvKQ needs about") && stderr(&o).contains("of disk in"),
            "{}",
            stderr(&o)
        );
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0, "something was written");
        refused += 1;
    }
    if refused == 0 {
        eprintln!("note: every disk here holds KNNNNvKQ's build; the refusal for disk was not tried");
    }
}
