//! Values of positions: win, draw or loss for the side to move, with the distance to mate in plies.
//!
//! Stored as one `u16` per index: 0 = no legal position, 1 = draw, `2 + n` = mate in `n` plies
//! (`n` even: the side to move is mated, 0 = checkmated now; `n` odd: the side to move mates).

use std::cmp::Ordering;

/// Stored value of an index that is not a legal position.
pub const ILLEGAL: u16 = 0;
/// Stored value of a draw.
pub const DRAW: u16 = 1;
/// The largest distance in plies a stored value can hold.
pub const MAX_PLIES: u16 = 0x7ffd;

/// The value of a position for the side to move.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Value {
    /// The side to move mates in this many plies (odd).
    Win(u16),
    Draw,
    /// The side to move is mated in this many plies (even; 0: checkmated now).
    Loss(u16),
}

impl Value {
    /// Decodes a stored value; `None` for [`ILLEGAL`] and for numbers no table holds.
    #[inline]
    pub const fn from_raw(raw: u16) -> Option<Value> {
        match raw {
            ILLEGAL => None,
            DRAW => Some(Value::Draw),
            r if r >= 2 && r - 2 <= MAX_PLIES => {
                let n = r - 2;
                if n % 2 == 1 {
                    Some(Value::Win(n))
                } else {
                    Some(Value::Loss(n))
                }
            }
            _ => None,
        }
    }

    /// Encodes for storage.
    #[inline]
    pub const fn raw(self) -> u16 {
        match self {
            Value::Draw => DRAW,
            Value::Win(n) | Value::Loss(n) => n + 2,
        }
    }

    /// The value for the side that moved into a position of value `self` (seen from the side to
    /// move there): a loss in n becomes a win in n + 1, a win in n a loss in n + 1.
    #[inline]
    pub const fn after_move(self) -> Value {
        match self {
            Value::Win(n) => Value::Loss(n + 1),
            Value::Loss(n) => Value::Win(n + 1),
            Value::Draw => Value::Draw,
        }
    }

    /// A number that grows with how good the value is for the side to move: a quick win is best,
    /// a slow loss is better than a quick one.
    #[inline]
    pub const fn goodness(self) -> i32 {
        match self {
            Value::Win(n) => 100_000 - n as i32,
            Value::Draw => 0,
            Value::Loss(n) => -100_000 + n as i32,
        }
    }

    /// `"win"`, `"draw"` or `"loss"`.
    pub const fn category(self) -> &'static str {
        match self {
            Value::Win(_) => "win",
            Value::Draw => "draw",
            Value::Loss(_) => "loss",
        }
    }

    /// Signed plies to mate: positive when the side to move mates, negative (or 0 when mated
    /// now) when it is mated, `None` for a draw.
    pub const fn dtm(self) -> Option<i32> {
        match self {
            Value::Win(n) => Some(n as i32),
            Value::Loss(n) => Some(-(n as i32)),
            Value::Draw => None,
        }
    }
}

impl PartialOrd for Value {
    #[inline]
    fn partial_cmp(&self, other: &Value) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Value {
    /// Greater is better for the side to move.
    #[inline]
    fn cmp(&self, other: &Value) -> Ordering {
        self.goodness().cmp(&other.goodness())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_round_trip_and_order() {
        for v in [
            Value::Draw,
            Value::Win(1),
            Value::Win(37),
            Value::Loss(0),
            Value::Loss(40),
        ] {
            assert_eq!(Value::from_raw(v.raw()), Some(v));
        }
        assert_eq!(Value::from_raw(ILLEGAL), None);
        assert_eq!(Value::from_raw(0xffff), None);
        assert!(Value::Win(1) > Value::Win(3));
        assert!(Value::Win(99) > Value::Draw);
        assert!(Value::Draw > Value::Loss(100));
        assert!(Value::Loss(10) > Value::Loss(2));
        assert_eq!(Value::Loss(0).after_move(), Value::Win(1));
        assert_eq!(Value::Win(1).after_move(), Value::Loss(2));
    }
}
