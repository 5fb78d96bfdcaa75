//! Probing positions: one JSON object per FEN, shaped like the lichess tablebase API.

use serde::Serialize;
use zermelo_chess::probe::{self, ValueSource};
use zermelo_chess::{Material, Move, Position, Value};
use zermelo_worker::tables::{TableDir, TableError};

/// One move and the value of the position after it, from the opponent's point of view.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MoveInfo {
    pub uci: String,
    pub san: String,
    pub category: &'static str,
    pub dtm: Option<i32>,
    pub checkmate: bool,
    pub stalemate: bool,
}

/// The answer for one position, from the side to move's point of view.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProbeInfo {
    pub fen: String,
    pub category: &'static str,
    pub dtm: Option<i32>,
    pub checkmate: bool,
    pub stalemate: bool,
    pub moves: Vec<MoveInfo>,
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
            )
        )
    }
}

/// Parses a FEN and checks it is a position tables of up to `max_men` men can answer.
pub fn parse_position(fen: &str, max_men: u32) -> Result<Position, ProbeFailure> {
    let pos = Position::from_fen(fen).map_err(|e| ProbeFailure::Input(format!("invalid FEN: {e}")))?;
    let men = Material::of(&pos.board).men();
    if men > max_men {
        return Err(ProbeFailure::Input(format!(
            "position has {men} men; tables of at most {max_men} men are supported"
        )));
    }
    Ok(pos)
}

/// Probes one FEN.
pub fn probe_fen(tables: &TableDir, fen: &str, max_men: u32) -> Result<ProbeInfo, ProbeFailure> {
    let pos = parse_position(fen, max_men)?;
    Ok(probe_position(fen, &pos, tables)?)
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
    Ok(ProbeInfo {
        fen: fen.to_string(),
        category: value.category(),
        dtm: value.dtm(),
        checkmate: pos.is_checkmate(),
        stalemate: pos.is_stalemate(),
        moves,
    })
}

/// One move and the value `v` of the position after it (for the side to move there).
pub fn move_info(pos: &Position, m: &Move, v: Value) -> MoveInfo {
    let after = pos.play(m);
    MoveInfo {
        uci: m.uci(),
        san: pos.san(m),
        category: v.category(),
        dtm: v.dtm(),
        checkmate: after.is_checkmate(),
        stalemate: after.is_stalemate(),
    }
}
