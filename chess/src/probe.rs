//! Reading the value of any position from stored tables, en passant included.
//!
//! Tables hold no en-passant square. A position where an en-passant capture is legal is
//! resolved here by looking one move ahead: its value is the best over all its legal moves,
//! each read from the tables (which hold every position after them).

use crate::index::{locate, Location};
use crate::position::{Move, Position};
use crate::value::Value;

/// Something that holds stored values.
pub trait ValueSource {
    type Error;
    /// The value stored at `loc`, for a legal position. An illegal mark there is an error of the
    /// source (the table does not hold what it should).
    fn value_at(&self, loc: &Location) -> Result<Value, Self::Error>;
}

/// The value of a legal position (any orientation, en passant honoured) for the side to move.
/// Bare kings are a draw and need no table.
pub fn value<S: ValueSource + ?Sized>(pos: &Position, src: &S) -> Result<Value, S::Error> {
    if pos.ep_square.is_some() {
        let mut best: Option<Value> = None;
        for m in pos.legal_moves().iter() {
            let v = value(&pos.play(m), src)?.after_move();
            best = Some(best.map_or(v, |b| b.max(v)));
        }
        // An en-passant square is only set when a capture is legal, so there is a move.
        if let Some(b) = best {
            return Ok(b);
        }
    }
    match locate(pos) {
        None => Ok(Value::Draw),
        Some(loc) => src.value_at(&loc),
    }
}

/// Every legal move with the value of the position after it (seen from the opponent, who is to
/// move there), best move for the side to move first; ties in UCI order.
pub fn moves<S: ValueSource + ?Sized>(pos: &Position, src: &S) -> Result<Vec<(Move, Value)>, S::Error> {
    let mut out = Vec::new();
    for m in pos.legal_moves().iter() {
        out.push((*m, value(&pos.play(m), src)?));
    }
    out.sort_by(|a, b| {
        b.1.after_move()
            .cmp(&a.1.after_move())
            .then_with(|| a.0.uci().cmp(&b.0.uci()))
    });
    Ok(out)
}

/// Something that holds stored DTZ50 values.
pub trait DtzSource {
    type Error;
    /// The DTZ50 value stored at `loc`, for a legal position.
    fn dtz_at(&self, loc: &Location) -> Result<crate::dtz::Dtz, Self::Error>;
}

/// The DTZ50 value of a legal position (any orientation, en passant honoured) for the side to
/// move, with the halfmove clock at 0. Bare kings are a draw and need no table.
pub fn dtz<S: DtzSource + ?Sized>(pos: &Position, src: &S) -> Result<crate::dtz::Dtz, S::Error> {
    if pos.ep_square.is_some() {
        let mut best: Option<crate::dtz::Dtz> = None;
        for m in pos.legal_moves().iter() {
            let v = dtz(&pos.play(m), src)?.after_move(m.leaves_slice());
            best = Some(best.map_or(v, |b| b.max(v)));
        }
        if let Some(b) = best {
            return Ok(b);
        }
    }
    match locate(pos) {
        None => Ok(crate::dtz::Dtz::Draw),
        Some(loc) => src.dtz_at(&loc),
    }
}
