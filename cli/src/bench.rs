//! `zermelo bench`: wall time, positions per second and peak memory of a build.

use std::path::Path;
use std::time::Instant;

use zermelo_chess::Material;

use crate::build::build;

/// Peak resident memory of this process so far, in bytes (Linux: VmHWM), if known.
pub fn peak_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Builds `materials` in a fresh directory (or `dir`) and prints the figures. With `alone`, the
/// sub-tables are built first, untimed, and only the named materials are timed.
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
        build(&subs, &dir, threads, &quiet).map_err(|e| e.to_string())?;
    }
    let start = Instant::now();
    let outcomes = build(materials, &dir, threads, &quiet).map_err(|e| e.to_string())?;
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
        Some(b) => println!("peak memory: {:.1} MiB", b as f64 / (1024.0 * 1024.0)),
        None => println!("peak memory: unknown"),
    }
    println!("positions are table indices (both sides to move, illegal ones included)");
    if own {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}
