//! Same inputs, same bytes, whatever the number of threads.

use crate::common::*;

#[test]
fn one_and_two_threads_give_identical_files() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    for (dir, threads) in [(&a, "1"), (&b, "2")] {
        let o = run(&[
            "solve",
            "KPvK",
            "KRvKP",
            "--tables",
            dir.path().to_str().unwrap(),
            "--threads",
            threads,
        ]);
        assert_ok(&o);
    }
    let mut names: Vec<String> = std::fs::read_dir(a.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert!(names.len() >= 7, "{names:?}");
    for n in &names {
        let x = std::fs::read(a.path().join(n)).unwrap();
        let y = std::fs::read(b.path().join(n)).expect("same files in both");
        assert!(x == y, "{n} differs between --threads 1 and --threads 2");
    }
}

/// A pawnless slice solved as 3 parts that meet only through what crosses between them (`solve
/// --parts`, the exchange workers sharing a slice use) gives the same file as solved whole, and
/// the build says what crossed. KRBvKR: 210 M positions, 51 segments of 4 M, so that each part
/// owns some (a slice of one segment is one part's: KQvKR would be no test), and long wins
/// whose lines cross the parts' borders.
#[test]
fn a_slice_solved_in_parts_gives_the_same_file() {
    let reference = tables_with(&["KRBvKR"]);
    let dir = tempfile::tempdir().unwrap();
    let o = zermelo()
        .args([
            "solve",
            "KRBvKR",
            "--parts",
            "3",
            "--threads",
            "2",
            "--tables",
            dir.path().to_str().unwrap(),
        ])
        .env("ZERMELO_LOG", "info")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_ok(&o);
    let log = String::from_utf8_lossy(&o.stderr);
    let line = log
        .lines()
        .find(|l| l.contains("solved in parts slice=KRBvKR"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        log_field(line, "parts") == 3
            && log_field(line, "mark_bytes") > 0
            && log_field(line, "frontier_bytes") > 0,
        "{line}"
    );
    let name = "KRBvKR.zmt";
    let x = std::fs::read(dir.path().join(name)).unwrap();
    let y = std::fs::read(reference.join(name)).unwrap();
    assert!(
        x == y,
        "{name} differs between --parts 3 and the slice solved whole"
    );
    let o = run(&[
        "solve",
        "KQvK",
        "--parts",
        "0",
        "--tables",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "--parts 0 is refused");
}
