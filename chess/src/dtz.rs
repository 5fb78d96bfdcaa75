//! Values under the 50-move rule: WDL50 and exact DTZ50 for the side to move.
//!
//! The distance is Syzygy's DTZ50'': plies to the next zeroing move (a capture or a pawn move)
//! or to mate, along a line where the winner keeps the result the rule gives and the loser
//! holds out longest. A zeroing move starts the count again, so its value to the side that
//! makes it depends only on the class of the position after it (below): a move into a loss for
//! the opponent is a win in 1 ply, into a blessed loss a (cursed) win in 101, into a draw a
//! draw, into a cursed win a (blessed) loss in 101, into a win a loss in 1.
//!
//! With the halfmove clock at 0, a win in `n` plies is a win under the rule when `n <= 100`
//! and a *cursed* win (a draw by the rule) when `n > 100`; a loss in `n` is a loss when
//! `n <= 100` and a *blessed* loss when `n > 100`. With clock `c`, a win holds when
//! `n + c <= 100` ([`Dtz::wdl50_at`]).
//!
//! Stored as one `u16` per index, in tables of metric DTZ50: 0 = not a legal position, 1 =
//! draw, `2 * n` = win in `n` plies (`n >= 1`), `2 * n + 3` = loss in `n` plies (`n >= 0`, 0:
//! checkmated now); `n` at most [`MAX_DTZ`].

use std::cmp::Ordering;

/// Stored value of an index that is not a legal position.
pub const ILLEGAL: u16 = 0;
/// Stored value of a draw.
pub const DRAW: u16 = 1;
/// The largest distance in plies a stored DTZ50 value holds.
pub const MAX_DTZ: u16 = 0x7ffe;
/// The plies of a count the 50-move rule allows: 50 moves each.
pub const RULE_PLIES: u16 = 100;
/// What a WDL50 table's value adds to python-chess's WDL number (-2 ..= 2), so that 0 stays the
/// mark of no class (a WDL50 table fills an illegal index with the class before it).
pub const WDL50_OFFSET: u16 = 3;

/// The WDL50 class (python-chess's number) of a WDL50 table's value; `None` for an illegal
/// index and numbers no table holds.
#[inline]
pub const fn wdl50_of_code(code: u16) -> Option<i8> {
    match code {
        1..=5 => Some(code as i8 - WDL50_OFFSET as i8),
        _ => None,
    }
}

/// A position's value under the 50-move rule, for the side to move.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Dtz {
    /// The side to move wins: the next zeroing move (or mate) comes in this many plies (1 or
    /// more); cursed (a draw by the rule) above 100.
    Win(u16),
    Draw,
    /// The side to move loses: the next zeroing move (or mate) comes in this many plies (0:
    /// checkmated now); blessed (a draw by the rule) above 100.
    Loss(u16),
}

impl Dtz {
    /// Decodes a stored value; `None` for [`ILLEGAL`] and numbers no table holds.
    #[inline]
    pub const fn from_raw(raw: u16) -> Option<Dtz> {
        match raw {
            ILLEGAL => None,
            DRAW => Some(Dtz::Draw),
            r if r % 2 == 0 && r / 2 <= MAX_DTZ => Some(Dtz::Win(r / 2)),
            r if r % 2 == 1 && r >= 3 && (r - 3) / 2 <= MAX_DTZ => Some(Dtz::Loss((r - 3) / 2)),
            _ => None,
        }
    }

    /// Encodes for storage (the distance at most [`MAX_DTZ`]; a win's at least 1).
    #[inline]
    pub const fn raw(self) -> u16 {
        match self {
            Dtz::Draw => DRAW,
            Dtz::Win(n) => 2 * n,
            Dtz::Loss(n) => 2 * n + 3,
        }
    }

    /// The value of a WDL50 table (metric 4) for this position: [`Dtz::wdl50`] plus
    /// [`WDL50_OFFSET`] (1 loss ..= 5 win; never 0).
    #[inline]
    pub const fn wdl50_code(self) -> u16 {
        (self.wdl50() as i16 + WDL50_OFFSET as i16) as u16
    }

    /// WDL50 with the halfmove clock at 0, as python-chess and Syzygy number it: 2 win, 1
    /// cursed win, 0 draw, -1 blessed loss, -2 loss.
    #[inline]
    pub const fn wdl50(self) -> i8 {
        self.wdl50_at(0)
    }

    /// WDL50 with the halfmove clock at `clock` plies: a win in `n` holds if `n + clock <= 100`,
    /// else it is cursed; the same for a loss. Checkmate is a loss whatever the clock says.
    #[inline]
    pub const fn wdl50_at(self, clock: u16) -> i8 {
        match self {
            Dtz::Draw => 0,
            Dtz::Loss(0) => -2,
            Dtz::Win(n) if n as u32 + clock as u32 <= RULE_PLIES as u32 => 2,
            Dtz::Win(_) => 1,
            Dtz::Loss(n) if n as u32 + clock as u32 <= RULE_PLIES as u32 => -2,
            Dtz::Loss(_) => -1,
        }
    }

    /// Signed plies to the next zeroing move, Syzygy's sign convention: positive when the side
    /// to move wins, negative when it loses (0 for a draw, and for checkmate).
    #[inline]
    pub const fn signed(self) -> i32 {
        match self {
            Dtz::Win(n) => n as i32,
            Dtz::Draw => 0,
            Dtz::Loss(n) => -(n as i32),
        }
    }

    /// The value for the side that moved into a position of value `self` (seen from the side
    /// to move there): after a zeroing move by the class of `self` alone, else one ply more.
    #[inline]
    pub const fn after_move(self, zeroing: bool) -> Dtz {
        if zeroing {
            match self.wdl50() {
                2 => Dtz::Loss(1),
                1 => Dtz::Loss(RULE_PLIES + 1),
                0 => Dtz::Draw,
                -1 => Dtz::Win(RULE_PLIES + 1),
                _ => Dtz::Win(1),
            }
        } else {
            match self {
                Dtz::Win(n) => Dtz::Loss(n + 1),
                Dtz::Loss(n) => Dtz::Win(n + 1),
                Dtz::Draw => Dtz::Draw,
            }
        }
    }

    /// A number that grows with how good the value is for the side to move: a win sooner is
    /// better (so a win under the rule beats a cursed one), a loss later is better.
    #[inline]
    pub const fn goodness(self) -> i32 {
        match self {
            Dtz::Win(n) => 100_000 - n as i32,
            Dtz::Draw => 0,
            Dtz::Loss(n) => -100_000 + n as i32,
        }
    }

    /// lichess's category for the side to move: `"win"`, `"cursed-win"`, `"draw"`,
    /// `"blessed-loss"` or `"loss"`.
    pub const fn category(self) -> &'static str {
        match self.wdl50() {
            2 => "win",
            1 => "cursed-win",
            0 => "draw",
            -1 => "blessed-loss",
            _ => "loss",
        }
    }
}

impl PartialOrd for Dtz {
    #[inline]
    fn partial_cmp(&self, other: &Dtz) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Dtz {
    /// Greater is better for the side to move.
    #[inline]
    fn cmp(&self, other: &Dtz) -> Ordering {
        self.goodness().cmp(&other.goodness())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_round_trips_and_every_raw_is_one_value_or_none() {
        for v in [
            Dtz::Draw,
            Dtz::Win(1),
            Dtz::Win(100),
            Dtz::Win(MAX_DTZ),
            Dtz::Loss(0),
            Dtz::Loss(101),
            Dtz::Loss(MAX_DTZ),
        ] {
            assert_eq!(Dtz::from_raw(v.raw()), Some(v), "{v:?}");
        }
        for raw in 0..=u16::MAX {
            if let Some(v) = Dtz::from_raw(raw) {
                assert_eq!(v.raw(), raw);
            }
        }
        assert_eq!(Dtz::from_raw(0), None);
        assert_eq!(Dtz::from_raw(2), Some(Dtz::Win(1)));
        assert_eq!(Dtz::from_raw(3), Some(Dtz::Loss(0)));
    }

    #[test]
    fn classes_and_moves_follow_the_rule() {
        assert_eq!(Dtz::Win(100).wdl50(), 2);
        assert_eq!(Dtz::Win(101).wdl50(), 1);
        assert_eq!(Dtz::Loss(100).wdl50(), -2);
        assert_eq!(Dtz::Loss(101).wdl50(), -1);
        assert_eq!(Dtz::Loss(0).wdl50(), -2);
        assert_eq!(Dtz::Win(60).wdl50_at(40), 2);
        assert_eq!(Dtz::Win(60).wdl50_at(41), 1);
        assert_eq!(
            Dtz::Loss(0).wdl50_at(150),
            -2,
            "checkmate is a loss whatever the clock"
        );
        assert_eq!(Dtz::Loss(1).wdl50_at(100), -1);
        assert_eq!(Dtz::Loss(0).after_move(false), Dtz::Win(1));
        assert_eq!(Dtz::Loss(0).after_move(true), Dtz::Win(1));
        assert_eq!(Dtz::Loss(150).after_move(true), Dtz::Win(101));
        assert_eq!(Dtz::Loss(150).after_move(false), Dtz::Win(151));
        assert_eq!(Dtz::Win(7).after_move(true), Dtz::Loss(1));
        assert_eq!(Dtz::Win(170).after_move(true), Dtz::Loss(101));
        assert!(Dtz::Win(100) > Dtz::Win(101));
        assert!(Dtz::Win(5000) > Dtz::Draw);
        assert!(Dtz::Draw > Dtz::Loss(5000));
        assert!(Dtz::Loss(101) > Dtz::Loss(100));
        assert_eq!(Dtz::Win(101).category(), "cursed-win");
        assert_eq!(Dtz::Loss(101).category(), "blessed-loss");
    }
}
