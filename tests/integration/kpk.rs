//! KPK, the reference case: published counts and textbook positions (tests/data/kpk.md and
//! tests/data/kpk-textbook.tsv, copied from the project's shared reference data).

use crate::common::*;

#[test]
fn kpk_counts_match_the_published_figures() {
    let dir = tables_with(&["KPvK"]);
    let s = stats(&dir, "KPvK");
    // Over all 8 files: twice the files a-d figures of kpk.md.
    assert_eq!(s["white"]["legal"], 163_328);
    assert_eq!(s["white"]["win"], 124_960);
    assert_eq!(s["white"]["draw"], 163_328 - 124_960);
    assert_eq!(s["white"]["loss"], 0);
    assert_eq!(s["black"]["legal"], 168_024);
    assert_eq!(s["black"]["loss"], 97_604);
    assert_eq!(s["black"]["draw"], 168_024 - 97_604);
    assert_eq!(s["black"]["win"], 0);
}

/// Asked with the colours swapped (`KvKP`), `stats` answers for the material as asked: the
/// published figures with the sides exchanged, the table it read named, and each longest-mate
/// FEN with colours swapped (Black's pawn, and a mate at that distance when probed).
#[test]
fn kpk_counts_asked_with_the_colours_swapped() {
    let dir = tables_with(&["KPvK"]);
    let s = stats(&dir, "kvkp");
    assert_eq!(s["material"], "KvKP");
    assert_eq!(s["table"], "KPvK");
    assert_eq!(s["black"]["legal"], 163_328);
    assert_eq!(s["black"]["win"], 124_960);
    assert_eq!(s["white"]["legal"], 168_024);
    assert_eq!(s["white"]["loss"], 97_604);
    assert_eq!(s["white"]["win"], 0);
    let straight = stats(&dir, "KPvK");
    assert_eq!(straight["material"], "KPvK");
    assert_eq!(straight["table"], "KPvK");
    for (side, to_move) in [("white", " w "), ("black", " b ")] {
        let fen = s[side]["longest_fen"].as_str().unwrap();
        assert!(
            fen.contains(to_move) && fen.contains('p') && !fen.contains('P'),
            "{fen}"
        );
        let a = &probe(&dir, &[fen])[0];
        assert_eq!(
            a["dtm"].as_i64().unwrap().abs(),
            s[side]["max_dtm"].as_i64().unwrap(),
            "{fen}"
        );
    }
}

#[test]
fn kpk_textbook_positions_probe_as_stated() {
    let dir = tables_with(&["KPvK"]);
    let text = std::fs::read_to_string(data("kpk-textbook.tsv")).unwrap();
    let rows: Vec<(&str, &str, &str)> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f[0], f[1], f[2])
        })
        .collect();
    assert_eq!(rows.len(), 23);
    let fens: Vec<&str> = rows.iter().map(|r| r.1).collect();
    let answers = probe(&dir, &fens);
    for ((name, fen, result), a) in rows.iter().zip(&answers) {
        let white_to_move = fen.split(' ').nth(1) == Some("w");
        let expected = match (*result, white_to_move) {
            ("white wins", true) => "win",
            ("white wins", false) => "loss",
            ("draw", _) => "draw",
            other => panic!("unknown result {other:?}"),
        };
        assert_eq!(a["category"], expected, "{name}: {fen}");
        assert_eq!(a["fen"], *fen);
    }
}

/// kpk.md: three positions are won only by promoting to a rook (a queen stalemates).
#[test]
fn kpk_underpromotion_wins() {
    let dir = tables_with(&["KPvK"]);
    // Ka4 Pb7 vs Ka6, Kb4 Pb7 vs Ka6, Ka5 Pc7 vs Ka7, White to move.
    let fens = [
        "8/1P6/k7/8/K7/8/8/8 w - - 0 1",
        "8/1P6/k7/8/1K6/8/8/8 w - - 0 1",
        "8/k1P5/8/K7/8/8/8/8 w - - 0 1",
    ];
    let answers = probe(&dir, &fens);
    for (fen, a) in fens.iter().zip(&answers) {
        assert_eq!(a["category"], "win", "{fen}");
        let best = &a["moves"][0];
        assert!(
            best["san"].as_str().unwrap().contains("=R"),
            "{fen}: best move {best}"
        );
        let queen = a["moves"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["san"].as_str().unwrap().contains("=Q"))
            .unwrap();
        assert_eq!(queen["category"], "draw", "{fen}: queening {queen}");
    }
    // Stalemate after queening in the first one.
    let q = answers[0]["moves"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["uci"] == "b7b8q")
        .unwrap();
    assert_eq!(q["stalemate"], true);
}

/// The probe output shape: a mate in one, the mating move first with `checkmate` set.
#[test]
fn probe_json_shape_for_mate_in_one() {
    let dir = tables_with(&["KQvK"]);
    // White: Kb6, Qc1; Black: Ka8. Qc8# mates.
    let a = &probe(&dir, &["k7/8/1K6/8/8/8/8/2Q5 w - - 0 1"])[0];
    assert_eq!(a["category"], "win");
    assert_eq!(a["dtm"], 1);
    assert_eq!(a["checkmate"], false);
    assert_eq!(a["stalemate"], false);
    let best = &a["moves"][0];
    assert_eq!(best["category"], "loss");
    // lichess's meaning: a position checkmated now has no distance (`null`).
    assert!(best["dtm"].is_null(), "{best}");
    assert_eq!(best["checkmate"], true);
    assert!(best["san"].as_str().unwrap().ends_with('#'), "{best}");
    // Every move is listed, from the opponent's point of view, best first.
    let moves = a["moves"].as_array().unwrap();
    assert!(moves.len() > 20);
    // A checkmated position: loss, dtm null (lichess's meaning), no moves.
    let m = &probe(&dir, &["k1Q5/8/1K6/8/8/8/8/8 b - - 0 1"])[0];
    assert_eq!(m["category"], "loss");
    assert!(m["dtm"].is_null(), "{m}");
    assert_eq!(m["checkmate"], true);
    assert_eq!(m["moves"].as_array().unwrap().len(), 0);
}

/// En passant in the FEN is honoured: the capture is listed and valued, and the position's value
/// is the best of its moves (the tables hold no en-passant square).
#[test]
fn en_passant_in_the_fen_is_honoured() {
    let dir = tables_with(&["KPvKP"]);
    // Black has just played d7-d5; White's e5 pawn may take en passant.
    let with_ep = "4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 1";
    let without = "4k3/8/8/3pP3/8/8/8/4K3 w - - 0 1";
    let a = &probe(&dir, &[with_ep, without]);
    let ep_moves = a[0]["moves"].as_array().unwrap();
    let ep = ep_moves
        .iter()
        .find(|m| m["uci"] == "e5d6")
        .expect("en-passant capture listed");
    assert_eq!(ep["san"], "exd6");
    assert!(a[1]["moves"]
        .as_array()
        .unwrap()
        .iter()
        .all(|m| m["uci"] != "e5d6"));
    assert_eq!(ep_moves.len(), a[1]["moves"].as_array().unwrap().len() + 1);
    // The value is the best move's, seen from the side to move.
    let best = &ep_moves[0];
    let flip = |c: &str| match c {
        "win" => "loss",
        "loss" => "win",
        _ => "draw",
    };
    assert_eq!(a[0]["category"], flip(best["category"].as_str().unwrap()));
    // A draw's dtm is 0 (lichess's meaning); a decisive one is one ply more than the best move's.
    if let Some(d) = best["dtm"].as_i64().filter(|_| best["category"] != "draw") {
        assert_eq!(
            a[0]["dtm"].as_i64().unwrap(),
            if d <= 0 { 1 - d } else { -(d + 1) }
        );
    }
}
