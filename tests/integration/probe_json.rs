//! The JSON of `zermelo probe` is the lichess tablebase API's answer (`GET /standard`): the same
//! fields with the same types, in the same move order, parsed here by a strict struct of that
//! shape (every field required, none optional); FENs with underscores for spaces.

use serde::Deserialize;

use crate::common::*;

/// A lichess tablebase answer: the position's fields and its moves.
#[derive(Deserialize, Debug)]
pub(crate) struct Lichess {
    #[serde(flatten)]
    pos: LichessPosition,
    moves: Vec<LichessMove>,
}

/// A move of the answer: the move, and the fields of the position after it.
#[derive(Deserialize, Debug)]
#[allow(dead_code)]
struct LichessMove {
    uci: String,
    san: String,
    zeroing: bool,
    conversion: bool,
    #[serde(flatten)]
    pos: LichessPosition,
}

/// The fields of a position in a lichess tablebase answer. `dtz`, `precise_dtz` and `dtm` are
/// numbers or null; the others are required and typed.
#[derive(Deserialize, Debug)]
#[allow(dead_code)]
struct LichessPosition {
    checkmate: bool,
    stalemate: bool,
    variant_win: bool,
    variant_loss: bool,
    insufficient_material: bool,
    dtz: Option<i64>,
    precise_dtz: Option<i64>,
    dtm: Option<i64>,
    dtw: Option<i64>,
    dtc: Option<i64>,
    category: Category,
}

/// The lichess category names (kebab-case); an unknown name fails to parse.
#[derive(Deserialize, Debug, PartialEq, Clone, Copy)]
#[serde(rename_all = "kebab-case")]
enum Category {
    Win,
    Unknown,
    SyzygyWin,
    MaybeWin,
    CursedWin,
    Draw,
    BlessedLoss,
    MaybeLoss,
    SyzygyLoss,
    Loss,
}

/// The answer parsed strictly; `dtz`, `precise_dtz` and `dtm` must be there, number or null (serde
/// would take a missing `Option` as `None`).
pub(crate) fn strict(line: &serde_json::Value) -> Lichess {
    for key in ["dtz", "precise_dtz", "dtm", "dtw", "dtc"] {
        assert!(line.get(key).is_some(), "{key} missing in {line}");
        for m in line["moves"].as_array().unwrap() {
            assert!(m.get(key).is_some(), "{key} missing in {m}");
        }
    }
    serde_json::from_value(line.clone()).unwrap_or_else(|e| panic!("{e}: {line}"))
}

#[test]
fn probe_answers_in_the_lichess_shape_and_order() {
    let dir = tables_with(&["KPvK"]);
    let fens = [
        // Promotion mates: c8=Q# and c8=R#, the queen first; then the other moves.
        "k7/2P5/1K6/8/8/8/8/8 w - - 0 1",
        // The black king takes the pawn: bare kings, insufficient material, zeroing.
        "8/8/8/8/8/8/kP6/7K b - - 0 1",
        // Underscores for spaces, as lichess accepts, and the same with spaces.
        "8/8/8/8/8/8/4P3/K1k5_w_-_-_0_1",
        "8/8/8/8/8/8/4P3/K1k5 w - - 0 1",
        // The halfmove clock is ignored: a win in 25 plies whatever it says.
        "8/8/8/8/8/8/4P3/K1k5 w - - 99 80",
    ];
    let answers = probe(&dir, &fens);
    let parsed: Vec<Lichess> = answers.iter().map(strict).collect();
    for (a, p) in answers.iter().zip(&parsed) {
        assert_eq!(a["ignores_50_move_rule"], true);
        assert!(p.pos.dtz.is_none() && p.pos.precise_dtz.is_none(), "no DTZ yet");
        assert!(!p.pos.variant_win && !p.pos.variant_loss);
        assert!(p.moves.iter().all(|m| m.pos.dtz.is_none() && !m.pos.variant_win));
    }

    let mate = &parsed[0];
    assert_eq!((mate.pos.category, mate.pos.dtm), (Category::Win, Some(1)));
    let first: Vec<(&str, &str, bool)> = mate.moves[..2]
        .iter()
        .map(|m| (m.uci.as_str(), m.san.as_str(), m.pos.checkmate))
        .collect();
    assert_eq!(first, [("c7c8q", "c8=Q#", true), ("c7c8r", "c8=R#", true)]);
    assert_eq!(
        (mate.moves[0].pos.category, mate.moves[0].pos.dtm),
        (Category::Loss, None)
    );
    assert!(mate.moves.iter().skip(2).all(|m| !m.pos.checkmate));
    // Best first: the opponent's category goes loss, then draw, then win.
    let rank = |c: Category| match c {
        Category::Loss => 0,
        Category::Draw => 1,
        _ => 2,
    };
    for p in &parsed {
        assert!(p
            .moves
            .windows(2)
            .all(|w| rank(w[0].pos.category) <= rank(w[1].pos.category)));
    }

    let bare = &parsed[1];
    let take = bare.moves.iter().find(|m| m.uci == "a2b2").expect("Kxb2");
    assert!(take.zeroing && take.pos.insufficient_material && take.pos.category == Category::Draw);
    // lichess's meaning: 0 for a draw.
    assert_eq!(take.pos.dtm, Some(0));
    assert_eq!(bare.moves[0].uci, "a2b2", "the only drawing move comes first");
    assert!(!bare.pos.insufficient_material);

    // Underscores: the same answer as with spaces.
    assert_eq!(answers[2]["moves"], answers[3]["moves"]);
    assert_eq!(answers[2]["dtm"], answers[3]["dtm"]);
    assert_eq!(answers[4]["dtm"], answers[3]["dtm"]);
    assert_eq!(answers[3]["dtm"], 25);
}

/// The fields come in the order lichess's server writes them (lila-tablebase a06a88b,
/// `src/response.rs` 13-33 and 86-103, and the captured answer in lichess-org/api), Zermelo's
/// own fields (`fen`, `ignores_50_move_rule`) aside.
#[test]
fn fields_come_in_lichess_order() {
    let dir = tables_with(&["KPvK"]);
    let o = run(&[
        "probe",
        "--tables",
        dir.to_str().unwrap(),
        "8/8/8/8/8/8/4P3/K1k5 w - - 0 1",
    ]);
    assert_ok(&o);
    let line = stdout(&o);
    let position = [
        "checkmate",
        "stalemate",
        "variant_win",
        "variant_loss",
        "insufficient_material",
        "dtz",
        "precise_dtz",
        "dtm",
        "dtw",
        "dtc",
        "category",
    ];
    // Where each key first appears, from `from` on.
    let order = |text: &str, keys: &[&str]| -> Vec<usize> {
        keys.iter()
            .map(|k| {
                text.find(&format!("\"{k}\":"))
                    .unwrap_or_else(|| panic!("{k} in {text}"))
            })
            .collect()
    };
    let (top, moves) = line.split_once("\"moves\":").unwrap();
    let mut keys = position.to_vec();
    let at = order(top, &keys);
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{top}");
    let first_move = moves.split('}').next().unwrap();
    keys.splice(0..0, ["uci", "san", "zeroing", "conversion"]);
    let at = order(first_move, &keys);
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{first_move}");
}
