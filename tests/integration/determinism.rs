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
