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

/// Something that holds WDL50 classes (a WDL50 table, metric 4).
pub trait Wdl50Source {
    type Error;
    /// The WDL50 class stored at `loc`, python-chess's number (2 win, 1 cursed win, 0 draw, -1
    /// blessed loss, -2 loss), for a legal position.
    fn wdl50_at(&self, loc: &Location) -> Result<i8, Self::Error>;
}

/// The WDL50 class of a legal position for the side to move with the halfmove clock at 0,
/// python-chess's number. Bare kings are a draw and need no table.
///
/// A WDL50 table holds no distance, so en passant is resolved without one: the stored class of
/// the board (which has no en-passant square) is the best over every move but the en-passant
/// captures, and an en-passant capture zeroes the clock, so its class is the negation of the
/// class after it; the position's class is the better of the two (the captures alone where no
/// other move is legal).
pub fn wdl50<S: Wdl50Source + ?Sized>(pos: &Position, src: &S) -> Result<i8, S::Error> {
    let stored = |pos: &Position| match locate(pos) {
        None => Ok(0),
        Some(loc) => src.wdl50_at(&loc),
    };
    if pos.ep_square.is_none() {
        return stored(pos);
    }
    let moves = pos.legal_moves();
    let mut best: Option<i8> = None;
    for m in moves.iter().filter(|m| m.en_passant) {
        let v = -wdl50(&pos.play(m), src)?;
        best = Some(best.map_or(v, |b| b.max(v)));
    }
    if moves.iter().any(|m| !m.en_passant) {
        let v = stored(pos)?;
        best = Some(best.map_or(v, |b| b.max(v)));
    }
    // An en-passant square is only set when a capture is legal, so there is a move.
    Ok(best.unwrap_or(0))
}
