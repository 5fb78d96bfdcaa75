//! Probing positions: one JSON object per FEN, shaped like the lichess tablebase API.

use serde::Serialize;
use zermelo_chess::dtz::Dtz;
use zermelo_chess::probe::{self, ValueSource};
use zermelo_chess::{Material, Move, Position, Role, Value};
use zermelo_worker::tables::{TableDir, TableError};

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
    pub dtm: Option<i32>,
    pub category: &'static str,
}

impl PositionInfo {
    /// `pos`, of value `v` for its side to move.
    pub fn new(pos: &Position, v: Value) -> PositionInfo {
        PositionInfo {
            checkmate: pos.is_checkmate(),
            stalemate: pos.is_stalemate(),
            variant_win: false,
            variant_loss: false,
            insufficient_material: insufficient_material(pos),
            dtz: None,
            precise_dtz: None,
            dtm: v.dtm(),
            category: v.category(),
        }
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
        MoveInfo {
            uci: m.uci(),
            san,
            zeroing: m.capture.is_some() || m.role == Role::Pawn,
            after: PositionInfo::new(&pos.play(m), v),
            taken: man_rank(m.capture),
            promoted: man_rank(m.promotion),
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
    /// Always true: the values are mates with best play whatever the halfmove clock says.
    pub ignores_50_move_rule: bool,
    /// Every legal move, best first, in the lichess order ([`lichess_order`]).
    pub moves: Vec<MoveInfo>,
}

impl ProbeInfo {
    /// The answer for `pos` (asked as `fen`), of value `v`, with its moves.
    pub fn new(fen: &str, pos: &Position, v: Value, mut moves: Vec<MoveInfo>) -> ProbeInfo {
        moves.sort_by(lichess_order);
        ProbeInfo {
            fen: fen.to_string(),
            pos: PositionInfo::new(pos, v),
            ignores_50_move_rule: true,
            moves,
        }
    }
}

/// The order of moves in a lichess tablebase answer, best for the side to move first: by the
/// value after the move (a loss for the opponent first, the fastest mate first; among losing
/// moves the slowest first); then checkmates, then stalemates and moves to insufficient
/// material; then, when the move does not lose, captures and pawn moves (zeroing) first, when
/// it loses last; then captures of the larger man and promotions to the larger man first.
/// Moves still tied go in UCI order.
pub fn lichess_order(a: &MoveInfo, b: &MoveInfo) -> std::cmp::Ordering {
    // The value for the side to move, from the opponent's category and dtm after the move.
    let rank = |m: &MoveInfo| -> (i32, i64) {
        let dtm = m.after.dtm.unwrap_or(0).unsigned_abs() as i64;
        match m.after.category {
            "loss" => (2, -dtm),
            "draw" => (1, 0),
            _ => (0, dtm),
        }
    };
    let losing = |m: &MoveInfo| m.after.category == "win";
    rank(b)
        .cmp(&rank(a))
        .then(b.after.checkmate.cmp(&a.after.checkmate))
        .then(b.after.stalemate.cmp(&a.after.stalemate))
        .then(b.after.insufficient_material.cmp(&a.after.insufficient_material))
        .then_with(|| {
            // Zeroing first unless the move loses.
            let z = |m: &MoveInfo| m.zeroing != losing(m);
            z(b).cmp(&z(a))
        })
        .then(b.taken.cmp(&a.taken))
        .then(b.promoted.cmp(&a.promoted))
        .then_with(|| a.uci.cmp(&b.uci))
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
    /// The FEN is not a position the tables can answer (bad syntax, illegal, castling, too many men).
    #[error("{0}")]
    Input(String),
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
                    | TableError::MissingSlice { .. }
                    | TableError::NotExact { .. }
                    | TableError::NotAdjudicated { .. }
                    | TableError::NotDtz { .. }
            )
        )
    }
}

/// Parses a FEN (underscores for spaces accepted, as lichess does) and checks it is a position
/// tables of up to `max_men` men can answer.
pub fn parse_position(fen: &str, max_men: u32) -> Result<Position, ProbeFailure> {
    let pos = Position::from_fen(&fen.replace('_', " "))
        .map_err(|e| ProbeFailure::Input(format!("invalid FEN: {e}")))?;
    let men = Material::of(&pos.board).men();
    if men > max_men {
        return Err(ProbeFailure::Input(format!(
            "position has {men} men; tables of at most {max_men} men are supported"
        )));
    }
    Ok(pos)
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

/// The halfmove clock of a FEN (its fifth field; 0 if it has none or it is not a number).
pub fn halfmove_clock(fen: &str) -> u16 {
    fen.replace('_', " ")
        .split_whitespace()
        .nth(4)
        .and_then(|f| f.parse::<u16>().ok())
        .unwrap_or(0)
}

/// Fills `dtz`, `precise_dtz` and the rule's `category` of `info` (the answer for `pos`) and of
/// each of its moves from the DTZ50 tables of `src`, with the halfmove clock `clock`; leaves
/// `info` as it is and returns false if a table is missing (an error for one that is damaged).
/// A win in `n` plies to the next zeroing move is a win if `n + clock <= 100`, else a cursed
/// win (a draw by the rule); the same for losses (blessed losses); checkmate is a loss. After
/// a move the clock is 0 if the move was a capture or a pawn move, else one more.
pub fn fill_dtz50<S: probe::DtzSource<Error = TableError> + ?Sized>(
    info: &mut ProbeInfo,
    pos: &Position,
    clock: u16,
    src: &S,
) -> Result<bool, TableError> {
    let missing = |e: &TableError| matches!(e, TableError::Missing { .. });
    let here = match probe::dtz(pos, src) {
        Ok(v) => v,
        Err(e) if missing(&e) => return Ok(false),
        Err(e) => return Err(e),
    };
    let mut after = Vec::with_capacity(info.moves.len());
    for m in pos.legal_moves().iter() {
        match probe::dtz(&pos.play(m), src) {
            Ok(v) => after.push((m.uci(), v, m.leaves_slice())),
            Err(e) if missing(&e) => return Ok(false),
            Err(e) => return Err(e),
        }
    }
    set_dtz(&mut info.pos, here, clock);
    info.ignores_50_move_rule = false;
    for mi in &mut info.moves {
        if let Some((_, v, zeroing)) = after.iter().find(|(u, _, _)| *u == mi.uci) {
            set_dtz(
                &mut mi.after,
                *v,
                if *zeroing { 0 } else { clock.saturating_add(1) },
            );
        }
    }
    info.moves.sort_by(dtz50_order);
    Ok(true)
}

/// The order of moves when DTZ50 is known, best for the side to move first: by the category
/// after the move under the rule (the opponent lost, blessed, drawn, cursed, won); among moves
/// that win, the next zeroing move soonest, among moves that lose, latest; then as
/// [`lichess_order`] (the mate distance, checkmates, ..., UCI).
pub fn dtz50_order(a: &MoveInfo, b: &MoveInfo) -> std::cmp::Ordering {
    let rank = |m: &MoveInfo| -> (i32, i64) {
        let dtz = m.after.dtz.unwrap_or(0).unsigned_abs() as i64;
        match m.after.category {
            "loss" => (4, -dtz),
            "blessed-loss" => (3, -dtz),
            "draw" => (2, 0),
            "cursed-win" => (1, dtz),
            _ => (0, dtz),
        }
    };
    rank(b).cmp(&rank(a)).then_with(|| lichess_order(a, b))
}

/// `dtz`, `precise_dtz` and the category under the rule of a position of DTZ50 `v` with the
/// halfmove clock `clock`.
fn set_dtz(info: &mut PositionInfo, v: Dtz, clock: u16) {
    info.dtz = Some(v.signed());
    info.precise_dtz = Some(v.signed());
    info.category = match v.wdl50_at(clock) {
        2 => "win",
        1 => "cursed-win",
        0 => "draw",
        -1 => "blessed-loss",
        _ => "loss",
    };
}

/// One move and the value `v` of the position after it (for the side to move there).
pub fn move_info(pos: &Position, m: &Move, v: Value) -> MoveInfo {
    MoveInfo::new(pos, m, pos.san(m), v)
}
