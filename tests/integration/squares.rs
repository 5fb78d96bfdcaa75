//! `zermelo squares`: Church's co-ordinate squares, under COORD and under chess rules, checked
//! against textbook facts (Lasker–Reichhelm, the KPK opposition).

use std::collections::BTreeSet;

use crate::common::*;

const LASKER_REICHHELM: &str = "8/k7/3p4/p2P1p2/P2P1P2/8/8/K7 w - - 0 1";

fn squares_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["squares", "--json"];
    all.extend_from_slice(args);
    let o = run(&all);
    assert_ok(&o);
    serde_json::from_str(&stdout(&o)).expect("squares json")
}

/// The defender squares holding the draw against the attacker's king on `sq`.
fn holds(j: &serde_json::Value, sq: &str) -> BTreeSet<String> {
    j["squares"][sq]
        .as_array()
        .unwrap_or_else(|| panic!("no list for {sq}: {j}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// Square names in a1, b1, ..., h8 order.
fn board_order() -> Vec<String> {
    (1..=8)
        .flat_map(|r| (b'a'..=b'h').map(move |f| format!("{}{r}", f as char)))
        .collect()
}

#[test]
fn squares_coord_lasker_reichhelm_only_kb1_wins() {
    let o = run(&["squares", "--json", "--rules", "coord", LASKER_REICHHELM]);
    assert_ok(&o);
    let raw = stdout(&o);
    let j: serde_json::Value = serde_json::from_str(&raw).expect("squares json");
    assert_eq!(j["attacker"], "white");
    let map = j["squares"].as_object().unwrap();
    // Attacker squares in board order in the printed text (the parsed map sorts its keys), each
    // list sorted in board order.
    let order = board_order();
    let printed: Vec<&str> = raw.split("\":[").filter_map(|s| s.get(s.len() - 2..)).collect();
    let printed = &printed[..printed.len() - 1];
    let mut sorted = printed.to_vec();
    sorted.sort_by_key(|k| order.iter().position(|o| o == k));
    assert_eq!(printed.len(), map.len());
    assert_eq!(printed, sorted);
    for list in map.values() {
        let l: Vec<usize> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|s| order.iter().position(|o| o == s.as_str().unwrap()).unwrap())
            .collect();
        assert!(l.windows(2).all(|w| w[0] < w[1]), "{list}");
    }
    // Squares with a pawn are no king's squares.
    for pawn in ["a4", "d4", "d5", "f4", "a5", "d6", "f5"] {
        assert!(!map.contains_key(pawn), "{pawn}");
    }
    for k in ["a1", "b1", "c1", "d1", "b2", "c2", "d2", "b3", "c3", "d3", "c4"] {
        eprintln!("white king {k}: {:?}", holds(&j, k));
    }
    // White to move with Ka1 against Ka7 wins: a7 does not hold.
    assert!(!holds(&j, "a1").contains("a7"));
    // Black's king on a7 may go to a8, b8, b7, a6 or b6 (the white king is far, no pawn near).
    let replies = ["a8", "b8", "b7", "a6", "b6"];
    // 1.Kb1 wins: every reply leaves White to move against a square that does not hold.
    let b1 = holds(&j, "b1");
    assert!(replies.iter().all(|r| !b1.contains(*r)), "{b1:?}");
    // 1.Ka2 and 1.Kb2 draw: some reply reaches a square that holds.
    for k in ["a2", "b2"] {
        let h = holds(&j, k);
        assert!(replies.iter().any(|r| h.contains(*r)), "1.K{k}: {h:?}");
    }
    // With Black to move in the diagram, Black holds: some reply against Ka1 holds.
    let a1 = holds(&j, "a1");
    assert!(replies.iter().any(|r| a1.contains(*r)), "{a1:?}");
}

#[test]
fn squares_kpk_opposition() {
    let dir = tables_with(&["KPvK"]);
    let d = dir.to_str().unwrap();
    let j = squares_json(&["--tables", d, "4k3/8/8/4K3/4P3/8/8/8 w - - 0 1"]);
    assert_eq!(j["attacker"], "white");
    let e5 = holds(&j, "e5");
    // Ke5 (White to move) against Ke7: Black has the opposition and draws.
    assert!(e5.contains("e7"), "{e5:?}");
    // Against Kd7 or Kf7, Kf6 or Kd6 reaches a key square: White wins.
    assert!(!e5.contains("d7"), "{e5:?}");
    assert!(!e5.contains("f7"), "{e5:?}");
    // The summary: the opposition, numbered. With White to move, Ke5 is held only by Ke7, Kd5
    // by Kd7 and Kf5 by Kf7 (the corresponding squares of every KPK textbook), and the key
    // squares d6, e6 and f6 win wherever Black's king stands.
    let out = tempfile::tempdir().unwrap();
    let svg = out.path().join("kpk.svg");
    let o = run(&[
        "squares",
        "--tables",
        d,
        "--svg",
        svg.to_str().unwrap(),
        "4k3/8/8/4K3/4P3/8/8/8 w - - 0 1",
    ]);
    assert_ok(&o);
    let pairs: Vec<String> = stdout(&o)
        .lines()
        .filter(|l| l.contains(": white king "))
        .map(|l| l.trim().to_string())
        .collect();
    assert_eq!(
        pairs,
        [
            "1: white king d5, black king d7",
            "2: white king e5, black king e7",
            "3: white king f5, black king f7"
        ]
    );
    for key in ["d6", "e6", "f6"] {
        assert!(holds(&j, key).is_empty(), "{key}");
    }
    let drawn = std::fs::read_to_string(&svg).unwrap();
    check_well_formed(&drawn).unwrap();
    assert_eq!(drawn.matches("<circle").count(), 6);
    let plus = j["squares"]
        .as_object()
        .unwrap()
        .values()
        .filter(|h| h.as_array().unwrap().is_empty())
        .count();
    assert_eq!(drawn.matches(">+</text>").count(), plus);
    // The rules default to chess: the same answer with --rules chess.
    assert_eq!(
        squares_json(&[
            "--tables",
            d,
            "--rules",
            "chess",
            "4k3/8/8/4K3/4P3/8/8/8 b - - 0 1"
        ]),
        j
    );
    // Colours reversed (a black pawn on e5): Black attacks, and Ke4 against Ke2 is the opposition.
    let j = squares_json(&["--tables", d, "8/8/8/4p3/8/8/8/K6k w - - 0 1"]);
    assert_eq!(j["attacker"], "black");
    let e4 = holds(&j, "e4");
    assert!(e4.contains("e2"), "{e4:?}");
    assert!(!e4.contains("d2"), "{e4:?}");
    assert!(!e4.contains("f2"), "{e4:?}");
    // Without the full table the pawn's reachable slices are solved: the same squares.
    let empty = tempfile::tempdir().unwrap();
    let fen = "4k3/8/8/4K3/4P3/8/8/8 w - - 0 1";
    let solved = squares_json(&["--tables", empty.path().to_str().unwrap(), fen]);
    assert_eq!(solved, squares_json(&["--tables", d, fen]));
    assert!(empty.path().join("reachable").join("KPvK.zmt").is_file());
    // A pawn ending with no full table: KPvKP, solved through its reachable slices, agrees
    // with the full table wherever both are asked.
    let full = tables_with(&["KPvKP"]);
    let fen = "8/8/3k4/3p4/3P4/3K4/8/8 w - - 0 1";
    assert_eq!(
        squares_json(&["--tables", empty.path().to_str().unwrap(), fen]),
        squares_json(&["--tables", full.to_str().unwrap(), fen])
    );
}

/// `--tables` takes a list, searched in order, and `ZERMELO_TABLES` gives it: the KPvK table
/// in the second directory answers as it does on its own, and nothing is solved into the first.
#[test]
fn squares_read_a_list_of_directories_and_zermelo_tables() {
    let dir = tables_with(&["KPvK"]);
    let empty = tempfile::tempdir().unwrap();
    let fen = "4k3/8/8/4K3/4P3/8/8/8 w - - 0 1";
    let alone = squares_json(&["--tables", dir.to_str().unwrap(), fen]);
    let list = format!("{}:{}", empty.path().display(), dir.display());
    assert_eq!(squares_json(&["--tables", &list, fen]), alone);
    let o = zermelo()
        .args(["squares", "--json", fen])
        .env("ZERMELO_TABLES", &list)
        .output()
        .unwrap();
    assert_ok(&o);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&stdout(&o)).unwrap(),
        alone
    );
    assert_eq!(
        std::fs::read_dir(empty.path()).unwrap().count(),
        0,
        "nothing is written when a directory of the list has the table"
    );
}

#[test]
fn squares_text_and_svg() {
    let out = tempfile::tempdir().unwrap();
    let svg = out.path().join("lr.svg");
    let summary = out.path().join("lr-summary.svg");
    let o = run(&[
        "squares",
        "--rules",
        "coord",
        "--svg-sheet",
        svg.to_str().unwrap(),
        "--svg",
        summary.to_str().unwrap(),
        LASKER_REICHHELM,
    ]);
    assert_ok(&o);
    let text = stdout(&o);
    assert!(text.contains("attacker white"), "{text}");
    // One small board per attacker square: 8 rows of 8 boards, 8 lines each plus a header.
    assert!(text.lines().count() >= 8 * 9, "{text}");
    let sheet = std::fs::read_to_string(&svg).unwrap();
    assert!(sheet.contains("<svg"));
    check_well_formed(&sheet).unwrap_or_else(|e| panic!("{e}\n{sheet}"));
    // One board group per square of the board.
    assert_eq!(sheet.matches("<g>").count(), 64);
    // The summary diagram: one board, a disc per numbered square of either king.
    let one = std::fs::read_to_string(&summary).unwrap();
    check_well_formed(&one).unwrap_or_else(|e| panic!("{e}\n{one}"));
    let pairs = text.lines().filter(|l| l.contains(": white king ")).count();
    assert!(pairs > 0, "{text}");
    assert_eq!(one.matches("<circle").count(), 2 * pairs, "{one}");
    // And the checker itself refuses broken XML.
    assert!(check_well_formed("<svg><g></svg>").is_err());
    assert!(check_well_formed("<svg><rect x=1/></svg>").is_err());
    assert!(check_well_formed("<svg>a < b</svg>").is_err());
}

#[test]
fn squares_bad_input_exits_2_with_one_line() {
    let empty = tempfile::tempdir().unwrap();
    let e = empty.path().to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (
            &["squares", "--tables", e, "4k3/8/8/8/8/8/4P3/4K1N1 w - - 0 1"],
            "kings and pawns only",
        ),
        (
            &["squares", "--rules", "coord", "4k3/8/8/8/8/8/4P3/4K1N1 w - - 0 1"],
            "kings and pawns only",
        ),
        (&["squares", "--rules", "coord", "not a fen"], "invalid FEN"),
        (
            &["squares", "--rules", "draughts", LASKER_REICHHELM],
            "unknown rules 'draughts'",
        ),
        (
            &[
                "squares",
                "--rules",
                "coord",
                "--svg",
                "/nonexistent-dir/x.svg",
                LASKER_REICHHELM,
            ],
            "/nonexistent-dir/x.svg",
        ),
    ];
    for (args, needle) in cases {
        let o = run(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let o = run(&["squares", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    for flag in ["--tables", "--rules", "--svg", "--json"] {
        assert!(stdout(&o).contains(flag), "{flag}");
    }
}

/// A minimal XML well-formedness check: balanced and properly nested tags, quoted attributes,
/// no stray `<` or `&` in text.
fn check_well_formed(xml: &str) -> Result<(), String> {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = xml;
    let mut seen_root = false;
    while let Some(start) = rest.find(['<', '&']) {
        let (text, tail) = rest.split_at(start);
        if !text.trim().is_empty() && stack.is_empty() {
            return Err(format!("text outside the root: {text:?}"));
        }
        if tail.starts_with('&') {
            let end = tail.find(';').ok_or("unterminated entity")?;
            if !["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"].contains(&&tail[..=end]) {
                return Err(format!("bad entity {}", &tail[..=end]));
            }
            rest = &tail[end + 1..];
            continue;
        }
        let end = tail.find('>').ok_or("unterminated tag")?;
        let tag = &tail[1..end];
        rest = &tail[end + 1..];
        if tag.starts_with('?') && tag.ends_with('?') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            match stack.pop() {
                Some(open) if open == name.trim() => continue,
                other => return Err(format!("</{name}> closes {other:?}")),
            }
        }
        let self_closing = tag.ends_with('/');
        let body = tag.trim_end_matches('/');
        let name_end = body.find(char::is_whitespace).unwrap_or(body.len());
        let name = &body[..name_end];
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == ':')
        {
            return Err(format!("bad tag name in <{tag}>"));
        }
        let mut attrs = body[name_end..].trim();
        while !attrs.is_empty() {
            let eq = attrs
                .find('=')
                .ok_or(format!("attribute without value in <{tag}>"))?;
            let after = &attrs[eq + 1..];
            if !after.starts_with('"') {
                return Err(format!("unquoted attribute in <{tag}>"));
            }
            let close = after[1..].find('"').ok_or("unterminated attribute")?;
            if after[1..1 + close].contains('<') {
                return Err(format!("'<' in an attribute of <{tag}>"));
            }
            attrs = after[close + 2..].trim_start();
        }
        if stack.is_empty() && seen_root {
            return Err("a second root element".to_string());
        }
        seen_root = true;
        if !self_closing {
            stack.push(name.to_string());
        }
    }
    if !rest.trim().is_empty() && !stack.is_empty() {
        return Err("text after the last tag".to_string());
    }
    match stack.last() {
        None if seen_root => Ok(()),
        None => Err("no root element".to_string()),
        Some(open) => Err(format!("<{open}> never closed")),
    }
}
