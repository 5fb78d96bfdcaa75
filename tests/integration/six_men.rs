//! Six men (ZERMELO_SIX_MEN_TESTS=1: two hours or more on 2 cores, 9 GiB of memory and 15 GB of
//! disk, so out of CI): KRNvKNN built by `solve` and by a cluster of two workers within a memory
//! budget, the same bytes; its longest mate, the published one; `verify` passes on it.

use std::path::Path;

use crate::common::*;

/// The published longest KRNvKNN mate (Stiller, 1991: White mates in 262 moves, 523 plies).
const LONGEST: &str = "6k1/5n2/8/8/8/5n2/1RK5/1N6 w - - 0 1";

/// Each worker's `--memory` in the cluster run, and what a process holds beyond its budget
/// (code, thread stacks, the allocator's slack: see `material_memory` in `cli/src/build.rs`).
const WORKER_BUDGET: u64 = 10 << 30;
const FIXED_SHARE: u64 = 64 << 20;

/// The peaks of `zermelo cluster`'s last line, `zermelo: peak memory: coordinator 12.3 MiB, ...`,
/// in bytes (to the 0.1 of a unit it prints).
fn peaks(log: &str) -> Vec<(String, u64)> {
    let line = log
        .lines()
        .find_map(|l| l.strip_prefix("zermelo: peak memory: "))
        .unwrap_or_else(|| panic!("no peak memory line:\n{log}"));
    line.split(", ")
        .map(|part| {
            let mut words = part.split(' ');
            let name = words.next().unwrap().to_owned();
            let number: f64 = words.next().unwrap().parse().unwrap();
            let unit = match words.next().unwrap() {
                "KiB" => 1u64 << 10,
                "MiB" => 1 << 20,
                "GiB" => 1 << 30,
                other => panic!("unit {other}"),
            };
            (name, (number * unit as f64) as u64)
        })
        .collect()
}

fn copy_tables(from: &Path, to: &Path, except: &str) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if name.ends_with(".zmt") && name != except {
            std::fs::copy(&path, to.join(&name)).unwrap();
        }
    }
}

#[test]
fn krnvknn_by_solve_and_by_a_cluster_within_its_budget_is_the_same_exact_table() {
    if std::env::var_os("ZERMELO_SIX_MEN_TESTS").is_none() {
        eprintln!("skipped: set ZERMELO_SIX_MEN_TESTS=1");
        return;
    }
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let solved = tmp.path().join("solve");
    let d = solved.to_str().unwrap();
    assert_ok(&run(&["solve", "--threads", "2", "--tables", d, "KRNvKNN"]));

    // The longest mate is the published one, and the position's value says so.
    let s = stats(&solved, "KRNvKNN");
    assert_eq!(s["white"]["max_dtm"], 523, "{s}");
    assert_eq!(s["white"]["longest_fen"], LONGEST, "{s}");
    let p = &probe(&solved, &[LONGEST])[0];
    assert_eq!(
        (p["category"].as_str(), p["dtm"].as_i64()),
        (Some("win"), Some(523)),
        "{p}"
    );

    // A cluster of two workers, each within 10 GiB, writes the same bytes.
    let clustered = tmp.path().join("cluster");
    copy_tables(&solved, &clustered, "KRNvKNN.zmt");
    let c = clustered.to_str().unwrap();
    let o = run(&[
        "cluster",
        "--workers",
        "2",
        "--threads",
        "2",
        "--memory",
        "10GiB",
        "--tables",
        c,
        "KRNvKNN",
    ]);
    assert_ok(&o);
    assert!(
        std::fs::read(solved.join("KRNvKNN.zmt")).unwrap()
            == std::fs::read(clustered.join("KRNvKNN.zmt")).unwrap(),
        "KRNvKNN differs between `zermelo solve` and `zermelo cluster`"
    );
    let peaks = peaks(&stderr(&o));
    for (name, bytes) in &peaks {
        if name.starts_with("worker") {
            assert!(
                *bytes <= WORKER_BUDGET + FIXED_SHARE,
                "{name} peaked at {bytes} bytes, over its budget: {peaks:?}"
            );
        }
    }
    eprintln!("cluster peaks: {peaks:?}");

    // Every legal index re-derived by the independent verifier.
    let o = run(&["verify", "--threads", "2", "--tables", d, "KRNvKNN"]);
    assert_ok(&o);
    assert!(
        stdout(&o).lines().any(|l| l.starts_with("KRNvKNN: ok")),
        "{}",
        stdout(&o)
    );
}

/// The parser of the peaks line above, on the shape `zermelo cluster` prints (checked against a
/// real run in `cluster::cluster_of_two_workers_builds_kpk_byte_identical_to_solve`).
#[test]
fn the_peaks_line_is_read_to_the_byte_unit() {
    let log = "zermelo: cluster of 2 worker(s) finished\nzermelo: peak memory: coordinator 91.0 MiB, worker-0 8.3 GiB, worker-1 9.1 MiB\n";
    let p = peaks(log);
    assert_eq!(p.len(), 3);
    assert_eq!(p[0], ("coordinator".to_owned(), 91 << 20));
    assert_eq!(p[1].0, "worker-0");
    // 8.3 x 2^30 = 8,912,057,139.2 bytes.
    assert_eq!(p[1].1, 8_912_057_139);
    assert!(p[1].1 > WORKER_BUDGET - (2 << 30) && p[1].1 < WORKER_BUDGET);
}
