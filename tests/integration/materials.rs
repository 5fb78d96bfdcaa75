//! Every material of the acceptance list: built, verified independently, known longest mates.

use crate::common::*;

const MATERIALS: &[&str] = &[
    "KPvK", "KQvK", "KRvK", "KBvK", "KNvK", "KPvKP", "KPPvK", "KQvKP", "KRvKP", "KBNvK", "KQvKR", "KRRvK",
];

#[test]
fn verify_passes_on_every_built_table() {
    let dir = tables_with(MATERIALS);
    let mut args = vec!["verify", "--tables", dir.to_str().unwrap()];
    args.extend_from_slice(MATERIALS);
    let o = run(&args);
    assert_ok(&o);
    let out = stdout(&o);
    for m in MATERIALS {
        assert!(
            out.lines().any(|l| l.starts_with(&format!("{m}: ok"))),
            "{m} not verified:\n{out}"
        );
    }
    // The tables whose last index group is one man (the queen, the rook, the bishop) are
    // checked by lines of 64, and on these good tables no line disagrees with the check
    // position by position.
    let err = stderr(&o);
    for m in ["KQvK", "KRvK", "KQvKP", "KRvKP", "KBNvK", "KQvKR"] {
        let line = err
            .lines()
            .find(|l| l.contains("table verified") && l.contains(&format!("material={m} ")))
            .unwrap_or_else(|| panic!("no log line for {m}:\n{err}"));
        assert!(log_field(line, "lines") > 0, "{line}");
        assert_eq!(log_field(line, "disagreed"), 0, "{line}");
    }
}

/// Known longest mates: KQvK mate in 10 moves, KRvK in 16, KBNvK in 33 (plies: 2n - 1).
#[test]
fn known_longest_mates() {
    let dir = tables_with(&["KQvK", "KRvK", "KBNvK"]);
    for (m, moves) in [("KQvK", 10), ("KRvK", 16), ("KBNvK", 33)] {
        let s = stats(&dir, m);
        assert_eq!(s["white"]["max_dtm"], 2 * moves - 1, "{m}: {s}");
        // Black to move loses in an even number of plies, never more than one move longer.
        let black = s["black"]["max_dtm"].as_u64().unwrap();
        assert!(black.is_multiple_of(2) && black <= 2 * moves as u64, "{m}: {s}");
        // A position with each longest mate, probed: White mates in it, Black is mated in it.
        let white_fen = s["white"]["longest_fen"].as_str().unwrap();
        let black_fen = s["black"]["longest_fen"].as_str().unwrap();
        let p = probe(&dir, &[white_fen, black_fen]);
        assert_eq!(p[0]["dtm"], 2 * moves - 1, "{m}: {white_fen}: {}", p[0]);
        assert_eq!(p[1]["dtm"], -(black as i64), "{m}: {black_fen}: {}", p[1]);
    }
}

/// Legal positions of KQvK on the whole board, counted by brute force over every placement of
/// the three men (a Python loop apart from this code base: men on distinct squares, kings not
/// adjacent, the side not to move not in check): 144,508 with White to move, 223,944 with
/// Black. `stats` counts them from the stored indices, each standing for 8 or 4 positions
/// (FORMAT.md, "Counting real positions").
#[test]
fn kqk_legal_counts_match_a_brute_force_count() {
    let dir = tables_with(&["KQvK"]);
    let s = stats(&dir, "KQvK");
    assert_eq!(s["white"]["legal"], 144_508, "{s}");
    assert_eq!(s["black"]["legal"], 223_944, "{s}");
    assert_eq!(s["white"]["win"], 144_508, "{s}");
}

/// Minor pieces alone never win.
#[test]
fn lone_minor_pieces_draw() {
    let dir = tables_with(&["KBvK", "KNvK"]);
    for m in ["KBvK", "KNvK"] {
        let s = stats(&dir, m);
        assert_eq!(s["white"]["win"], 0);
        assert_eq!(s["white"]["loss"], 0);
        assert_eq!(s["black"]["win"], 0);
        assert_eq!(s["black"]["loss"], 0);
        assert!(s["white"]["legal"].as_u64().unwrap() > 0);
    }
}

/// `solve --all 3` builds the full set of 3 men, each table once, and nothing else; its KPvK
/// has the published counts. `--all` takes 3 to 7 men, and not with a list.
#[test]
fn solve_all_builds_the_full_set_of_three_men() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let o = run(&["solve", "--all", "3", "--tables", d, "--threads", "2"]);
    assert_ok(&o);
    let mut built: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.starts_with('.'))
        .collect();
    built.sort();
    assert_eq!(
        built,
        ["KBvK.zmt", "KNvK.zmt", "KPvK.zmt", "KQvK.zmt", "KRvK.zmt"]
    );
    assert!(stderr(&o).contains("5 table(s) built"), "{}", stderr(&o));
    let s = stats(dir.path(), "KPvK");
    assert_eq!(
        (s["white"]["legal"].as_u64(), s["white"]["win"].as_u64()),
        (Some(163_328), Some(124_960))
    );
    assert_eq!(
        (s["black"]["legal"].as_u64(), s["black"]["loss"].as_u64()),
        (Some(168_024), Some(97_604))
    );
    let v = run(&["verify", "--all", "3", "--tables", d]);
    assert_ok(&v);
    assert_eq!(
        stdout(&v).lines().filter(|l| l.contains(": ok (")).count(),
        5,
        "{}",
        stdout(&v)
    );
    assert!(
        stderr(&v).contains("5 of 5 table(s) verified, 0 failed"),
        "{}",
        stderr(&v)
    );
    // A second run finds them complete.
    let again = run(&["solve", "--all", "3", "--tables", d]);
    assert_ok(&again);
    assert!(
        stderr(&again).contains("0 table(s) built, 5 already complete"),
        "{}",
        stderr(&again)
    );
    for bad in [
        &["solve", "--all", "8", "--tables", d][..],
        &["solve", "--all", "3", "KPvK", "--tables", d],
    ] {
        let o = run(bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", stderr(&o));
    }
}
