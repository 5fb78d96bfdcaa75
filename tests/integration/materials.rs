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

/// `materials` sums up every table of a directory: its counts are `stats`'s, its conversions
/// are the material's captures and promotions (listed here by hand), the sampled best moves
/// lead only into those, and the output does not depend on the threads.
#[test]
fn materials_sums_up_every_table_of_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    assert_ok(&run(&["solve", "KQvKR", "KPvK", "--tables", d]));
    let args = ["materials", "--tables", d, "--json", "--sample", "300"];
    let one = run(&[&args[..], &["--threads", "1"]].concat());
    assert_ok(&one);
    let two = run(&[&args[..], &["--threads", "2"]].concat());
    assert_eq!(stdout(&one), stdout(&two), "the threads change nothing");
    let doc: serde_json::Value = serde_json::from_str(&stdout(&one)).unwrap();
    let ms = doc["materials"].as_array().unwrap();
    let names: Vec<&str> = ms
        .iter()
        .map(|m| m["stats"]["material"].as_str().unwrap())
        .collect();
    // Every table built, fewer men first.
    assert_eq!(names, ["KBvK", "KNvK", "KPvK", "KQvK", "KRvK", "KQvKR"]);
    let targets = |m: &serde_json::Value| -> Vec<String> {
        let mut t: Vec<String> = m["conversions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["into"].as_str().unwrap().to_string())
            .collect();
        t.sort();
        t.dedup();
        t
    };
    for m in ms {
        let name = m["stats"]["material"].as_str().unwrap();
        assert_eq!(
            m["stats"],
            stats(dir.path(), name),
            "{name}: the counts of `stats`"
        );
        let (w, b) = (&m["stats"]["white"], &m["stats"]["black"]);
        let n = |v: &serde_json::Value| v.as_u64().unwrap() as f64;
        let share = (n(&w["draw"]) + n(&b["draw"])) / (n(&w["legal"]) + n(&b["legal"]));
        assert!(
            (m["draw_share"].as_f64().unwrap() - share).abs() < 1e-12,
            "{name}"
        );
        let bm = &m["best_moves"];
        assert_eq!(bm["sampled"], 300, "{name}");
        let t = targets(m);
        for (count, into) in [("won_converting", "won_into"), ("drawn_converting", "drawn_into")] {
            let sum: u64 = bm[into]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_u64().unwrap())
                .sum();
            assert_eq!(bm[count].as_u64(), Some(sum), "{name}: {bm}");
            for k in bm[into].as_object().unwrap().keys() {
                assert!(
                    t.contains(k),
                    "{name}: a best move into {k}, not a conversion of it: {t:?}"
                );
            }
        }
        assert!(bm["won_converting"].as_u64() <= bm["won"].as_u64());
        assert!(bm["won"].as_u64().unwrap() + bm["drawn"].as_u64().unwrap() <= 300);
    }
    let by = |name: &str| ms.iter().find(|m| m["stats"]["material"] == name).unwrap();
    // KPvK: White promotes (Q, R, B, N), Black takes the pawn into bare kings.
    assert_eq!(targets(by("KPvK")), ["KBvK", "KNvK", "KQvK", "KRvK", "KvK"]);
    // KQvKR: either side takes the other's piece.
    assert_eq!(targets(by("KQvKR")), ["KQvK", "KRvK"]);
    // KRvK: Black has nothing to take, White no pawn: no best move converts; a drawn position
    // (Black to move) keeps the draw only by taking the rook.
    let krk = &by("KRvK")["best_moves"];
    assert_eq!(krk["won_converting"].as_u64(), Some(0), "{krk}");
    assert!(
        krk["drawn_into"].as_object().unwrap().keys().all(|k| k == "KvK"),
        "{krk}"
    );
    // KQvKR: the queen often wins by taking the rook (a skewer, a rook en prise).
    assert!(by("KQvKR")["best_moves"]["won_into"]["KQvK"].as_u64() > Some(0));
    // The text: a header and a line a material.
    let text = run(&["materials", "--tables", d, "--sample", "0"]);
    assert_ok(&text);
    assert_eq!(
        stdout(&text).lines().count(),
        1 + names.len(),
        "{}",
        stdout(&text)
    );
    assert!(stdout(&text).lines().any(|l| l.starts_with("KQvKR ")));
    // Named materials only; without a sample, no best moves and no need of the others' tables.
    let alone = tempfile::tempdir().unwrap();
    std::fs::copy(dir.path().join("KQvKR.zmt"), alone.path().join("KQvKR.zmt")).unwrap();
    let a = alone.path().to_str().unwrap();
    let o = run(&["materials", "--tables", a, "--json", "--sample", "0", "kqvkr"]);
    assert_ok(&o);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(doc["materials"].as_array().unwrap().len(), 1);
    assert!(doc["materials"][0].get("best_moves").is_none());
    // A sample needs the tables the moves lead into: a clear error naming the one missing.
    let o = run(&["materials", "--tables", a, "--sample", "50"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("KQvK") || stderr(&o).contains("KRvK"),
        "{}",
        stderr(&o)
    );
    // An empty directory, a missing one.
    let empty = tempfile::tempdir().unwrap();
    let o = run(&["materials", "--tables", empty.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no table file"), "{}", stderr(&o));
    let o = run(&["materials", "--tables", "/nonexistent-zermelo-dir"]);
    assert_eq!(o.status.code(), Some(2));
}

/// Syzygy's statistics of these tables, as its generator prints them (`rtbgen --stats` /
/// `rtbgenp --stats` of syzygy1/tb 0bb8aee, built apart from this code base; its WDL files
/// carry the published checksums of the project's checksums/wdl345.txt): for White then Black
/// to move, wins (cursed ones included), draws, losses (cursed included), each position once
/// up to the board's symmetries with like men told apart.
const SYZYGY_STATS: &[(&str, [[u64; 3]; 2])] = &[
    ("KQvKR", [[1_108_111, 8_963, 2_142], [386_313, 78_518, 883_075]]),
    ("KRvKB", [[473_447, 874_459, 0], [0, 1_431_462, 47_736]]),
    ("KRvKN", [[651_492, 696_413, 1], [4, 1_396_546, 170_672]]),
    ("KBNvK", [[1_352_913, 6_665, 0], [0, 309_147, 1_398_741]]),
    ("KQvKQ", [[467_214, 646_911, 5_091], [467_214, 646_911, 5_091]]),
    (
        "KPvKP",
        [[1_606_514, 1_242_545, 868_985], [1_606_514, 1_242_545, 868_985]],
    ),
    ("KQQvK", [[707_175, 0, 0], [0, 35_294, 1_672_594]]),
    ("KNNvK", [[154, 1_437_574, 0], [0, 1_707_858, 30]]),
    ("KPPvK", [[3_555_030, 58_312, 0], [0, 302_686, 3_522_058]]),
];

/// `stats` JSON `s` of material `m` has Syzygy's figures (wins, draws, losses) for White and
/// Black to move.
fn assert_syzygy_counts(s: &serde_json::Value, m: &str, white: &[u64; 3], black: &[u64; 3]) {
    for (side, want) in [("white", white), ("black", black)] {
        let c = &s[side]["syzygy"];
        let got = [&c["win"], &c["draw"], &c["loss"]].map(|v| v.as_u64().unwrap());
        assert_eq!(&got, want, "{m}, {side} to move: {s}");
        assert_eq!(c["legal"].as_u64(), Some(want.iter().sum()), "{m}");
    }
}

/// `stats` counts as Syzygy's statistics do ("syzygy"), like men and diagonal positions
/// included, and up to symmetry with like men alike ("up_to_symmetry": the same where a
/// material has no like men, fewer where it has).
#[test]
fn counts_equal_syzygys_statistics() {
    let names: Vec<&str> = SYZYGY_STATS.iter().map(|(m, _)| *m).collect();
    let dir = tables_with(&names);
    for (m, [white, black]) in SYZYGY_STATS {
        let s = stats(&dir, m);
        assert_syzygy_counts(&s, m, white, black);
        for side in ["white", "black"] {
            let c = &s[side]["syzygy"];
            let like_men = ["KQQvK", "KNNvK", "KPPvK"].contains(m);
            let u = &s[side]["up_to_symmetry"];
            if like_men {
                // About half: each position once, not once per order of its two like men.
                let (a, b) = (u["legal"].as_u64().unwrap(), c["legal"].as_u64().unwrap());
                assert!(a < b && 2 * a >= b, "{m}: {u} against {c}");
            } else {
                assert_eq!(u, c, "{m}, {side}");
            }
        }
    }
}

/// Five-man figures of Syzygy's statistics, as [`SYZYGY_STATS`] (`rtbgen --stats`).
const SYZYGY_STATS_5: &[(&str, [[u64; 3]; 2])] = &[
    (
        "KBBvKN",
        [[37_043_906, 39_758_818, 88], [444, 62_159_080, 31_856_156]],
    ),
    (
        "KBNvKR",
        [
            [21_288_893, 60_414_628, 143_825],
            [3_053_277, 77_205_295, 1_284_722],
        ],
    ),
    (
        "KBBBvK",
        [[48_535_440, 17_100_318, 0], [0, 32_370_189, 70_085_451]],
    ),
    ("KNNvKN", [[68_360, 86_177_568, 112], [586, 94_005_009, 10_085]]),
    (
        "KQRvKR",
        [[53_076_012, 64_126, 16_938], [206_517, 14_397_580, 66_939_197]],
    ),
    (
        "KRPvKR",
        [
            [158_650_355, 78_681_546, 972_793],
            [49_187_154, 133_273_976, 62_586_644],
        ],
    ),
    (
        "KNNvKP",
        [
            [81_093_450, 171_983_556, 5_947_378],
            [38_373_504, 219_999_162, 40_517_574],
        ],
    ),
];

/// Every table of up to five men from an empty folder (about 30 minutes on 2 cores, so behind
/// ZERMELO_ALL5_TESTS=1): 145 tables, all verified; Syzygy's figures for a sample; and
/// `materials` sums every one up.
#[test]
fn every_table_of_five_men() {
    if std::env::var_os("ZERMELO_ALL5_TESTS").is_none() {
        eprintln!("skipped: set ZERMELO_ALL5_TESTS=1");
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let d = dir.path().to_str().unwrap();
    let o = run(&["solve", "--all", "5", "--tables", d]);
    assert_ok(&o);
    assert!(stderr(&o).contains("145 table(s) built"), "{}", stderr(&o));
    let v = run(&["verify", "--all", "5", "--tables", d]);
    assert_ok(&v);
    assert!(
        stderr(&v).contains("145 of 145 table(s) verified, 0 failed"),
        "{}",
        stderr(&v)
    );
    for (m, [white, black]) in SYZYGY_STATS.iter().chain(SYZYGY_STATS_5) {
        assert_syzygy_counts(&stats(dir.path(), m), m, white, black);
    }
    let o = run(&["materials", "--tables", d, "--json", "--sample", "200"]);
    assert_ok(&o);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(doc["materials"].as_array().unwrap().len(), 145);
}
