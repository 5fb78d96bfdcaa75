//! Probing positions: one JSON object per FEN, shaped like the lichess tablebase API.

use serde::Serialize;
use zermelo_chess::dtz::{Dtz, RULE_PLIES};
use zermelo_chess::fen::FenError;
use zermelo_chess::probe::{self, ValueSource};
use zermelo_chess::{Material, Move, Position, Role, Value};
use zermelo_worker::tables::{TableDir, TableError};

use crate::lichess::{fen_fields, read_fen, Asked};

/// What the lichess tablebase API says of a position, for the side to move there: the fields
/// shared by the answer and by each of its moves, with the same names, types and meaning.
/// `dtz` and `precise_dtz` (always equal: Zermelo's DTZ50 is exact) are `null` where no DTZ50
/// table (`.zdz`) is found; then `category` follows the mates and ignores the 50-move rule.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PositionInfo {
    pub checkmate: bool,
    pub stalemate: bool,
    /// Always false: standard chess.
    pub variant_win: bool,
    /// Always false: standard chess.
    pub variant_loss: bool,
    pub insufficient_material: bool,
    pub dtz: Option<i32>,
    pub precise_dtz: Option<i32>,
    /// Signed plies to mate as lichess gives it: positive when the side to move mates, negative
    /// when it is mated, 0 for a draw, `null` for a position checkmated now (and where unknown).
    pub dtm: Option<i32>,
    /// Antichess's depth to win: always `null` (lichess's field, standard chess).
    pub dtw: Option<i32>,
    /// Depth to conversion of lichess's 8-man source: always `null`.
    pub dtc: Option<i32>,
    pub category: &'static str,
}

impl PositionInfo {
    /// `pos`, of value `v` for its side to move.
    pub fn new(pos: &Position, v: Value) -> PositionInfo {
        let checkmate = pos.is_checkmate();
        PositionInfo {
            checkmate,
            stalemate: pos.is_stalemate(),
            variant_win: false,
            variant_loss: false,
            insufficient_material: insufficient_material(pos),
            dtz: None,
            precise_dtz: None,
            dtm: lichess_dtm(v, checkmate),
            dtw: None,
            dtc: None,
            category: v.category(),
        }
    }
}

/// `dtm` as lichess's server gives it (lila-tablebase `src/prophet.rs`: a draw is 0, a
/// position checkmated now `null`), from Zermelo's value.
pub fn lichess_dtm(v: Value, checkmate: bool) -> Option<i32> {
    match v {
        _ if checkmate => None,
        Value::Draw => Some(0),
        v => v.dtm(),
    }
}

/// `dtz` as lichess's server and python-chess give it: Zermelo's exact DTZ50, with a position
/// checkmated now at -1 (Syzygy's convention: the loss's zeroing "move" counted as one ply).
pub fn lichess_dtz(v: Dtz) -> i32 {
    match v {
        Dtz::Loss(0) => -1,
        v => v.signed(),
    }
}

/// One move and the value of the position after it, from the opponent's point of view: a move
/// of the lichess tablebase API's answer (`GET /standard`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MoveInfo {
    pub uci: String,
    pub san: String,
    /// A capture or a pawn move (it resets the halfmove clock).
    pub zeroing: bool,
    /// A capture or a promotion (it changes the material).
    pub conversion: bool,
    /// The position after the move.
    #[serde(flatten)]
    pub after: PositionInfo,
    /// The man taken, larger first in the order (5 queen .. 1 pawn, 0 none): not in the JSON.
    #[serde(skip)]
    pub taken: u8,
    /// The man promoted to, the same way: not in the JSON.
    #[serde(skip)]
    pub promoted: u8,
}

/// A man's rank in the lichess move order: the larger first.
fn man_rank(role: Option<Role>) -> u8 {
    match role {
        Some(Role::Queen) => 5,
        Some(Role::Rook) => 4,
        Some(Role::Bishop) => 3,
        Some(Role::Knight) => 2,
        Some(Role::Pawn) => 1,
        Some(Role::King) | None => 0,
    }
}

impl MoveInfo {
    /// The move `m` of `pos` (written `san`, which may be shortened by a caller) into a position
    /// of value `v` for the side to move there.
    pub fn new(pos: &Position, m: &Move, san: String, v: Value) -> MoveInfo {
        MoveInfo::with(
            m.uci(),
            san,
            m.capture.is_some() || m.role == Role::Pawn,
            m.capture,
            m.promotion,
            PositionInfo::new(&pos.play(m), v),
        )
    }

    /// A move written `uci` and `san`, zeroing or not, taking `capture` and promoting to
    /// `promotion`, into a position described by `after`.
    pub fn with(
        uci: String,
        san: String,
        zeroing: bool,
        capture: Option<Role>,
        promotion: Option<Role>,
        after: PositionInfo,
    ) -> MoveInfo {
        MoveInfo {
            uci,
            san,
            zeroing,
            conversion: capture.is_some() || promotion.is_some(),
            after,
            taken: man_rank(capture),
            promoted: man_rank(promotion),
        }
    }
}

/// The answer for one position, from the side to move's point of view: the response of the
/// lichess tablebase API (`GET /standard`), with the same names, types and meaning, and the FEN
/// asked. `dtm` is the exact mate that ignores the 50-move rule. With DTZ50 tables, `dtz` and
/// `precise_dtz` are filled and `category` follows the rule with the FEN's halfmove clock
/// (`ignores_50_move_rule` false; see [`fill_dtz50`]); without, they are `null` and the
/// category ignores the rule.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProbeInfo {
    pub fen: String,
    #[serde(flatten)]
    pub pos: PositionInfo,
    /// True when the categories are the mates' and ignore the 50-move rule (no DTZ50 table).
    pub ignores_50_move_rule: bool,
    /// Every legal move, best first, in the lichess order ([`lichess_order`]).
    pub moves: Vec<MoveInfo>,
}

impl ProbeInfo {
    /// The answer for `pos` (asked as `fen`), of value `v`, with its moves.
    pub fn new(fen: &str, pos: &Position, v: Value, moves: Vec<MoveInfo>) -> ProbeInfo {
        let mut info = ProbeInfo {
            fen: fen.to_string(),
            pos: PositionInfo::new(pos, v),
            ignores_50_move_rule: true,
            moves,
        };
        settle(&mut info);
        info
    }
}

/// Puts the moves in [`lichess_order`] and, as lichess's server does, gives the position the
/// category opposite to its best move's (a position without moves keeps its own).
pub fn settle(info: &mut ProbeInfo) {
    info.moves.sort_by(lichess_order);
    if let Some(best) = info.moves.first() {
        info.pos.category = crate::lichess::negated(best.after.category);
    }
}

/// The order of moves in a lichess tablebase answer, best for the side to move first, as
/// lichess's server sorts them (lila-tablebase, `MoveInfo::sort_key` in `src/response.rs`):
/// 1. by the category after the move, from the opponent's side: loss, unknown, blessed loss,
///    draw, cursed win, win (so the move that wins under the rule first);
/// 2. checkmates first, then stalemates, then moves to insufficient material;
/// 3. by the mate distance after the move: the opponent mated soonest first, then draws, then
///    the opponent mating latest first;
/// 4. captures and promotions (conversions) first unless the move loses (then last);
/// 5. captures and pawn moves (zeroing) first unless the move loses (then last), then by DTZ
///    after the move, the largest first (the winner's next zeroing move soonest, the loser's
///    latest); a move without DTZ first;
/// 6. captures of the larger man first, then promotions to the larger man.
///
/// Moves still tied go in UCI order (lichess leaves their order unspecified).
pub fn lichess_order(a: &MoveInfo, b: &MoveInfo) -> std::cmp::Ordering {
    lichess_key(a)
        .cmp(&lichess_key(b))
        .then_with(|| a.uci.cmp(&b.uci))
}

/// [`lichess_order`]'s key: smaller is better for the side to move.
fn lichess_key(m: &MoveInfo) -> impl Ord {
    use std::cmp::Reverse;
    let after = &m.after;
    // lichess's order of categories (lila-tablebase's `Category`, `src/response.rs`); unknown
    // comes right after a loss, and the ones Zermelo never gives (rounded or maybe) hold
    // their places.
    let category = match after.category {
        "loss" => 0,
        "unknown" => 1,
        "blessed-loss" => 4,
        "draw" => 5,
        "cursed-win" => 6,
        _ => 9,
    };
    // The opponent wins after it: the move loses (under the rule or not).
    let positive = category >= 6;
    // A metric that tightens: the opponent's losses, nearest first, then none and 0, then
    // the opponent's wins, farthest first.
    let dtm = after.dtm;
    let tightening = (
        Reverse(dtm.filter(|&d| d < 0)),
        dtm.filter(|&d| d > 0).map(Reverse),
    );
    let conversion = m.taken > 0 || m.promoted > 0;
    (
        category,
        (!after.checkmate, !after.stalemate, !after.insufficient_material),
        tightening,
        conversion ^ !positive,
        (m.zeroing ^ !positive, after.dtz.map(Reverse)),
        (Reverse(m.taken), Reverse(m.promoted)),
    )
}

/// True if neither side can mate by any sequence of legal moves (the lichess API's
/// `insufficient_material`): no pawn, rook or queen, and at most one other man besides the
/// kings, or only bishops, all on squares of one colour.
pub fn insufficient_material(pos: &Position) -> bool {
    let mut men = 0;
    let mut bishop_squares = [false; 2];
    let mut only_bishops = true;
    for (sq, p) in pos.board.pieces() {
        match p.role {
            Role::King => continue,
            Role::Pawn | Role::Rook | Role::Queen => return false,
            Role::Bishop => bishop_squares[((sq.file() + sq.rank()) % 2) as usize] = true,
            Role::Knight => only_bishops = false,
        }
        men += 1;
    }
    men <= 1 || only_bishops && !(bishop_squares[0] && bishop_squares[1])
}

/// Why a FEN could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum ProbeFailure {
    /// The FEN is not a legal position (bad syntax, an illegal position).
    #[error("{0}")]
    Input(String),
    /// A legal position that no table holds: castling rights, or more men than tables have.
    #[error("{0}")]
    NotInTables(String),
    /// A table is missing or unreadable.
    #[error(transparent)]
    Table(#[from] TableError),
}

impl ProbeFailure {
    /// True for a table that is corrupt or unreadable, not just absent.
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            ProbeFailure::Table(
                TableError::Storage(_)
                    | TableError::IllegalValue { .. }
                    | TableError::WrongTable { .. }
                    | TableError::WrongLayout { .. }
                    | TableError::Packed { .. }
                    | TableError::MissingSlice { .. }
                    | TableError::NotExact { .. }
                    | TableError::NotAdjudicated { .. }
                    | TableError::NotDtz { .. }
            )
        )
    }
}

/// Parses a FEN as lichess reads it ([`read_fen`]: `_` or `+` for spaces, only the board
/// required, castling rights and en-passant squares the board does not allow dropped) and
/// checks it is a position tables of up to `max_men` men hold: no castling rights stand.
pub fn parse_position(fen: &str, max_men: u32) -> Result<Position, ProbeFailure> {
    let asked = read_fen(fen).map_err(ProbeFailure::Input)?;
    whole(&asked, max_men).copied()
}

/// The position of `asked` if tables of up to `max_men` men hold it whole: no castling rights
/// stand and it has no more men than that (else `NotInTables`, saying which).
pub fn whole(asked: &Asked, max_men: u32) -> Result<&Position, ProbeFailure> {
    if !asked.castling.is_empty() {
        return Err(ProbeFailure::NotInTables(format!(
            "invalid FEN: {}",
            FenError::CastlingRights
        )));
    }
    let men = Material::of(&asked.pos.board).men();
    if men > max_men {
        return Err(ProbeFailure::NotInTables(format!(
            "too many men: the position has {men} men, tables hold at most {max_men}"
        )));
    }
    Ok(&asked.pos)
}

/// Probes one FEN: the mates of `tables`, and DTZ50 from `dtz` where its tables are.
pub fn probe_fen(
    tables: &TableDir,
    dtz: &TableDir,
    fen: &str,
    max_men: u32,
) -> Result<ProbeInfo, ProbeFailure> {
    let pos = parse_position(fen, max_men)?;
    let mut info = probe_position(fen, &pos, tables)?;
    fill_dtz50(&mut info, &pos, halfmove_clock(fen), dtz)?;
    Ok(info)
}

/// The value of a position and of each of its moves, read from any value source.
pub fn probe_position<S: ValueSource + ?Sized>(
    fen: &str,
    pos: &Position,
    src: &S,
) -> Result<ProbeInfo, S::Error> {
    let value = probe::value(pos, src)?;
    let moves = probe::moves(pos, src)?
        .into_iter()
        .map(|(m, v)| move_info(pos, &m, v))
        .collect();
    Ok(ProbeInfo::new(fen, pos, value, moves))
}

/// The halfmove clock of a FEN (its fifth field, fields parted as [`read_fen`] parts them): 0
/// if it has none, the largest clock if it is past what 16 bits hold (as [`read_fen`] reads it).
pub fn halfmove_clock(fen: &str) -> u16 {
    fen_fields(fen)
        .get(4)
        .map_or(0, |f| f.parse::<u16>().unwrap_or(u16::MAX))
}

/// Fills `dtz`, `precise_dtz` and the rule's `category` of `info` (the answer for `pos`) and of
/// each of its moves from the DTZ50 tables of `src`, with the halfmove clock `clock`; leaves
/// `info` as it is and returns false if a table is missing (an error for one that is damaged).
/// A win in `n` plies to the next zeroing move is a win if `n + clock <= 100`, else a cursed
/// win (a draw by the rule); the same for losses (blessed losses); checkmate is a loss. After
/// a move the clock is 0 if the move was a capture or a pawn move, else one more; from a
/// position whose clock is 100 or more every decisive move is cursed or blessed ([`set_dtz`]).
/// The moves are then in [`lichess_order`] under the rule.
pub fn fill_dtz50<S: probe::DtzSource<Error = TableError> + ?Sized>(
    info: &mut ProbeInfo,
    pos: &Position,
    clock: u16,
    src: &S,
) -> Result<bool, TableError> {
    let missing = |e: &TableError| matches!(e, TableError::Missing { .. });
    let here = match probe::dtz(pos, src) {
        Ok(v) => v,
        Err(e) if missing(&e) => {
            late_mates(info, clock);
            return Ok(false);
        }
        Err(e) => return Err(e),
    };
    let mut after = Vec::with_capacity(info.moves.len());
    for m in pos.legal_moves().iter() {
        match probe::dtz(&pos.play(m), src) {
            Ok(v) => after.push((m.uci(), v, m.leaves_slice())),
            Err(e) if missing(&e) => {
                late_mates(info, clock);
                return Ok(false);
            }
            Err(e) => return Err(e),
        }
    }
    set_dtz(&mut info.pos, here, clock, clock.saturating_sub(1));
    info.ignores_50_move_rule = false;
    for mi in &mut info.moves {
        if let Some((_, v, zeroing)) = after.iter().find(|(u, _, _)| *u == mi.uci) {
            let after = if *zeroing { 0 } else { clock.saturating_add(1) };
            set_dtz(&mut mi.after, *v, after, clock);
        }
    }
    settle(info);
    Ok(true)
}

/// Without DTZ50 tables the categories are the mates', but a checkmate given once the clock
/// had reached 100 is a blessed loss, as lichess reads the rule whatever tables it has: the
/// position asked about if it is checkmated with `clock - 1 >= 100`, and each move that mates
/// from a position whose clock is 100 or more.
fn late_mates(info: &mut ProbeInfo, clock: u16) {
    if info.pos.checkmate && clock.saturating_sub(1) >= RULE_PLIES {
        info.pos.category = "blessed-loss";
    }
    if clock >= RULE_PLIES {
        for m in info.moves.iter_mut().filter(|m| m.after.checkmate) {
            m.after.category = "blessed-loss";
        }
        settle(info);
    }
}

/// `dtz`, `precise_dtz` and the category under the rule of a position of DTZ50 `v` with the
/// halfmove clock `clock`, reached from a position whose clock was `before` (for the position
/// asked about, its clock less one). As lichess reads the rule: once the clock before the last
/// move was 100 or more the game was drawn by it, so any decisive result is cursed or blessed,
/// even a checkmate; else a win in `n` holds if `n + clock <= 100` (the same for losses), and
/// checkmate is a loss.
pub(crate) fn set_dtz(info: &mut PositionInfo, v: Dtz, clock: u16, before: u16) {
    info.dtz = Some(lichess_dtz(v));
    info.precise_dtz = Some(lichess_dtz(v));
    let wdl = match v.wdl50_at(clock) {
        2 | 1 if before >= RULE_PLIES => 1,
        -2 | -1 if before >= RULE_PLIES => -1,
        w => w,
    };
    info.category = match wdl {
        2 => "win",
        1 => "cursed-win",
        0 => "draw",
        -1 => "blessed-loss",
        _ => "loss",
    };
}

/// Best play from `pos` to mate, the line to mate that ignores the 50-move rule: at each ply
/// the best move for the side to move (the fastest mate, or the slowest loss; ties in UCI
/// order) with the value after it, for the side to move there; empty for a draw.
pub fn dtm_line<S: ValueSource + ?Sized>(pos: &Position, src: &S) -> Result<Vec<(Move, Value)>, S::Error> {
    let plies = match probe::value(pos, src)? {
        Value::Draw => 0,
        Value::Win(n) | Value::Loss(n) => n,
    };
    let mut line = Vec::with_capacity(plies as usize);
    let mut p = *pos;
    for _ in 0..plies {
        let Some((m, after)) = probe::moves(&p, src)?.into_iter().next() else {
            break;
        };
        line.push((m, after));
        p = p.play(&m);
    }
    Ok(line)
}

/// How many moves [`text_line`] names before it says how many more there are.
const TEXT_MOVES: usize = 8;

/// The answer as a person reads it at a terminal: the FEN, the value for the side to move,
/// then the moves, best first, each with what it leads to. Distances are plies (half-moves)
/// counted from the position asked, unsigned, with the words saying who mates:
///
/// `8/8/8/8/8/8/4P3/K1k5 w - - 0 1: White to move wins, mate in 25 plies. Moves: e4 mates in 25,
/// Kb2 mates in 27, Kb1 draws, ...`
pub fn text_line(info: &ProbeInfo) -> String {
    let fen = info.fen.replace('_', " ");
    let side = match fen.split_whitespace().nth(1) {
        Some("b") => "Black",
        _ => "White",
    };
    let p = &info.pos;
    let plies = |d: Option<i32>| d.map_or(0, i32::unsigned_abs);
    let mut line = format!("{fen}: ");
    line += &if p.checkmate {
        format!("{side} is checkmated")
    } else if p.stalemate {
        format!("{side} is stalemated: a draw")
    } else {
        match p.category {
            "win" => format!("{side} to move wins, mate in {} plies", plies(p.dtm)),
            "cursed-win" => format!(
                "{side} to move mates in {} plies, but the 50-move rule draws it (a cursed win)",
                plies(p.dtm)
            ),
            "blessed-loss" => format!(
                "{side} to move is mated in {} plies, but the 50-move rule draws it (a blessed loss)",
                plies(p.dtm)
            ),
            "loss" => format!("{side} to move loses, mated in {} plies", plies(p.dtm)),
            _ if p.insufficient_material => "a draw: neither side can mate".to_string(),
            _ => "a draw".to_string(),
        }
    };
    if let Some(d) = p.dtz.filter(|_| !p.checkmate && !p.stalemate) {
        line += &format!(" (DTZ50 {d})");
    }
    line += ".";
    if info.moves.is_empty() {
        return line;
    }
    let described: Vec<String> = info
        .moves
        .iter()
        .take(TEXT_MOVES)
        .map(|m| {
            let a = &m.after;
            // What the move leads to, for the side that plays it: the opposite of `a`'s.
            let mates = plies(a.dtm) + 1;
            let what = if a.checkmate {
                "mates".to_string()
            } else if a.stalemate {
                "stalemates".to_string()
            } else {
                match a.category {
                    "loss" => format!("mates in {mates}"),
                    "blessed-loss" => format!("mates in {mates} (cursed)"),
                    "cursed-win" => format!("is mated in {mates} (blessed)"),
                    "win" => format!("is mated in {mates}"),
                    _ => "draws".to_string(),
                }
            };
            format!("{} {what}", m.san)
        })
        .collect();
    line += &format!(" Moves: {}", described.join(", "));
    if info.moves.len() > TEXT_MOVES {
        line += &format!(" (+{} more)", info.moves.len() - TEXT_MOVES);
    }
    line + "."
}

/// One move and the value `v` of the position after it (for the side to move there).
pub fn move_info(pos: &Position, m: &Move, v: Value) -> MoveInfo {
    MoveInfo::new(pos, m, pos.san(m), v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A move `uci` into a position of `category`, `dtm` and `dtz` for the opponent.
    fn mv(uci: &str, category: &'static str, dtm: Option<i32>, dtz: Option<i32>) -> MoveInfo {
        MoveInfo {
            uci: uci.to_string(),
            san: uci.to_string(),
            zeroing: false,
            conversion: false,
            after: PositionInfo {
                checkmate: false,
                stalemate: false,
                variant_win: false,
                variant_loss: false,
                insufficient_material: false,
                dtz,
                precise_dtz: dtz,
                dtm,
                dtw: None,
                dtc: None,
                category,
            },
            taken: 0,
            promoted: 0,
        }
    }

    fn sorted(mut moves: Vec<MoveInfo>) -> Vec<String> {
        // Shuffled both ways first: the order does not depend on the input's.
        moves.reverse();
        moves.sort_by(lichess_order);
        moves.into_iter().map(|m| m.uci).collect()
    }

    /// The order lichess's server gives (lila-tablebase's `sort_key`), case by case, written
    /// from its rules rather than from this code's key.
    #[test]
    fn moves_go_in_lichess_order() {
        // The category under the rule first: the opponent lost, blessed, drawn, cursed, won.
        let by_category = vec![
            mv("a1a2", "win", Some(5), Some(5)),
            mv("a1a3", "cursed-win", Some(301), Some(150)),
            mv("a1a4", "draw", None, Some(0)),
            mv("a1a5", "blessed-loss", Some(-9), Some(-120)),
            mv("a1a6", "loss", Some(-40), Some(-40)),
        ];
        assert_eq!(sorted(by_category), ["a1a6", "a1a5", "a1a4", "a1a3", "a1a2"]);

        // Within a category, the mate distance comes before DTZ: the opponent mated soonest
        // first; among losing moves, the mate latest first.
        let wins = vec![
            mv("b1b2", "loss", Some(-9), Some(-1)),
            mv("b1b3", "loss", Some(-3), Some(-3)),
            mv("b1b4", "loss", Some(-7), Some(-2)),
        ];
        assert_eq!(sorted(wins), ["b1b3", "b1b4", "b1b2"]);
        let losses = vec![
            mv("c1c2", "win", Some(2), Some(2)),
            mv("c1c3", "win", Some(10), Some(1)),
            mv("c1c4", "win", Some(6), Some(6)),
        ];
        assert_eq!(sorted(losses), ["c1c3", "c1c4", "c1c2"]);

        // Checkmate first, then stalemate, then insufficient material.
        let mut mate = mv("d1d8", "loss", Some(0), Some(0));
        mate.after.checkmate = true;
        let mut stale = mv("d1d2", "draw", None, Some(0));
        stale.after.stalemate = true;
        let mut bare = mv("d1d3", "draw", None, Some(0));
        bare.after.insufficient_material = true;
        let plain = mv("d1d4", "draw", None, Some(0));
        assert_eq!(
            sorted(vec![plain.clone(), bare.clone(), stale.clone()]),
            ["d1d2", "d1d3", "d1d4"]
        );
        assert_eq!(
            sorted(vec![mv("d1d5", "loss", Some(-1), Some(-1)), mate])[0],
            "d1d8"
        );

        // Tied on the mate: a winning move converts (captures or promotes) first, then zeroes,
        // then has the larger DTZ after it (the opponent's next zeroing move nearest).
        let mut capture = mv("e1e2", "loss", Some(-5), Some(-5));
        capture.taken = 1;
        capture.zeroing = true;
        let mut push = mv("e1e3", "loss", Some(-5), Some(-1));
        push.zeroing = true;
        let near = mv("e1e4", "loss", Some(-5), Some(-2));
        let far = mv("e1e5", "loss", Some(-5), Some(-4));
        assert_eq!(
            sorted(vec![far.clone(), near.clone(), push.clone(), capture.clone()]),
            ["e1e2", "e1e3", "e1e4", "e1e5"]
        );
        // A losing move the other way round: no conversion, no zeroing, the larger DTZ first.
        let flip = |mut m: MoveInfo| {
            m.after.category = "win";
            m.after.dtm = m.after.dtm.map(|d| -d);
            m.after.dtz = m.after.dtz.map(|d| -d);
            m
        };
        assert_eq!(
            sorted(vec![flip(capture), flip(push), flip(near), flip(far)]),
            ["e1e5", "e1e4", "e1e3", "e1e2"]
        );

        // Then captures of the larger man, promotions to the larger man; then UCI.
        let mut q = mv("f7f8q", "loss", Some(-3), None);
        q.promoted = man_rank(Some(Role::Queen));
        let mut n = mv("f7f8n", "loss", Some(-3), None);
        n.promoted = man_rank(Some(Role::Knight));
        let mut takes_rook = mv("f7g8q", "loss", Some(-3), None);
        takes_rook.taken = man_rank(Some(Role::Rook));
        takes_rook.promoted = man_rank(Some(Role::Queen));
        assert_eq!(sorted(vec![n, q, takes_rook]), ["f7g8q", "f7f8q", "f7f8n"]);
        assert_eq!(
            sorted(vec![plain.clone(), mv("a2a3", "draw", None, Some(0))]),
            ["a2a3", "d1d4"]
        );
    }

    /// The rule's categories as lichess reads the clock: a win holds if its DTZ plus the clock
    /// is at most 100, checkmate is a loss, and once the clock before the move was 100 or more
    /// every decisive result is cursed or blessed.
    #[test]
    fn categories_follow_the_clock_as_lichess_reads_it() {
        let category = |v: Dtz, clock: u16, before: u16| {
            let mut info = mv("a1a1", "draw", None, None).after;
            set_dtz(&mut info, v, clock, before);
            info.category
        };
        assert_eq!(category(Dtz::Win(30), 70, 69), "win");
        assert_eq!(category(Dtz::Win(30), 71, 70), "cursed-win");
        assert_eq!(category(Dtz::Loss(30), 71, 70), "blessed-loss");
        assert_eq!(category(Dtz::Loss(0), 100, 99), "loss");
        assert_eq!(category(Dtz::Draw, 100, 100), "draw");
        // After a zeroing move from a position at 100 or more: the clock is 0, but the game
        // was drawn already.
        assert_eq!(category(Dtz::Win(1), 0, 100), "cursed-win");
        assert_eq!(category(Dtz::Loss(0), 0, 100), "blessed-loss");
        assert_eq!(category(Dtz::Loss(3), 0, 99), "loss");
    }
}
