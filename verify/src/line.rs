//! The line check: the 64 indices of a line, checked together.
//!
//! When the least significant field of a slice's index is a group of one man (the *line man*:
//! White's queen in KQRvKR, White's rook in KRPvKR), the 64 indices from a multiple of 64 up
//! stand for one placement of the other men with the line man on each square in turn (on a
//! square another man holds, the index is a collision). This module derives the values of such
//! a line at once, from the board of the other men:
//!
//! * a move of another man is found once for the line. With the line man on any square but the
//!   ones it passes over or lands on, it leads to the same placement of the other men, so its
//!   children form a line of their own table ([`locate_line`]), read in one go. Where the line
//!   man stands on its landing square, the move takes it (or, the line man being the mover's,
//!   does not exist);
//! * a move of the line man leads to the line with the same men and the other side to move,
//!   or, taking a man, to one position per man taken;
//! * the legal positions are the squares off the lines of every attack on the king of the
//!   side not to move, and off the squares from which the line man attacks it; the positions in
//!   check likewise.
//!
//! Moves are generated without looking at their legality: a move that leaves the mover's king
//! attacked leads to an illegal position, which its table stores as 0, and is then no move.
//! That reading is sound because a verification checks every index of the tables it reads: an
//! illegal index holding a value or a legal one holding 0 is reported where it stands (the
//! successor tables are verified on their own, see the crate's documentation). A verification
//! of a sample (`--sample`) therefore does not take this way; nor does a slice whose last group
//! has several men, nor a line that does not fit (a child with an en-passant right is derived
//! position by position). A line whose derived values disagree with the stored ones is checked
//! again position by position, which reports the first wrong index as before.

use super::board::{Color, Position, Pseudo, KING, PAWN};
use super::index::{locate, locate_line, LineLocation, Location, QuietFrame};
use super::{value, Fault, Successor, Worker};

/// Indices in a line.
pub(super) const LINE: u64 = 64;

/// A move's worth for the side to move, as a number that grows with it: 0 no move (an
/// illegal child), then losses (the slower the larger), the draw, wins (the quicker the larger).
const NO_MOVE: u32 = 0;
const DRAW_KEY: u32 = 0x1_0000;
/// Wins count down from here.
const WIN_BASE: u32 = 0x3_0000;

/// The worth, for the mover, of a move to a child that stores `child` (0: illegal).
fn key_of_child(child: u32) -> u32 {
    match child {
        value::ILLEGAL => NO_MOVE,
        value::DRAW => DRAW_KEY,
        v => {
            // The child's mover wins or loses in `plies`; the parent then loses or wins in one
            // more.
            let plies = v - 2;
            if plies % 2 == 0 {
                WIN_BASE - (plies + 1)
            } else {
                1 + (plies + 1)
            }
        }
    }
}

/// The value of a position whose best move has worth `key`, in check or not.
fn value_of_key(key: u32, in_check: bool) -> u32 {
    match key {
        NO_MOVE if in_check => value::CHECKMATED,
        NO_MOVE => value::DRAW,
        DRAW_KEY => value::DRAW,
        k if k > DRAW_KEY => 2 + (WIN_BASE - k),
        k => 2 + (k - 1),
    }
}

/// The squares of a set (bits of 0..64), ascending.
fn squares(mut set: u64) -> impl Iterator<Item = u8> {
    std::iter::from_fn(move || {
        (set != 0).then(|| {
            let s = set.trailing_zeros() as u8;
            set &= set - 1;
            s
        })
    })
}

impl Worker<'_> {
    /// The values derived for the line of indices `base..base + 64` (`base` a multiple of 64;
    /// the slice has a line man): 0 where the index is not a legal position. `None` when the
    /// line has to be checked position by position.
    pub(super) fn derive_line(&mut self, base: u64) -> Result<Option<[u32; LINE as usize]>, Fault> {
        let Some(line_man) = self.decoder.line_man() else {
            return Ok(None);
        };
        let per_side = self.decoder.len() / 2;
        let us = if base < per_side {
            Color::White
        } else {
            Color::Black
        };
        let them = us.other();
        let Ok((men, n, occupied)) = self.decoder.line_men(base % per_side) else {
            return Ok(None);
        };
        let board =
            Position::from_men(&men[..n], us).expect("a canonical key and distinct squares make a position");
        let empty = !occupied;
        let (lc, lk) = line_man;

        // Legal: the side not to move's king not attacked, with the line man on the square.
        let mut illegal = occupied | board.still_attacked(board.king_square(them), us);
        let mut check = board.still_attacked(board.king_square(us), them);
        if lc == us {
            illegal |= board.reach(lk, board.king_square(them));
        } else {
            check |= board.reach(lk, board.king_square(us));
        }
        let legal = !illegal;
        let mut best = [NO_MOVE; LINE as usize];
        if legal != 0 {
            // The quiet children's lines follow from this one's index: see `QuietFrame`. Its
            // position has the line man on a square that no other man holds.
            let free = legal.trailing_zeros() as u8;
            let frame = QuietFrame::new(&board.with_cell(free, Some(line_man)))
                .expect("a position with a piece has a table");
            let mut moves = std::mem::take(&mut self.line_moves);
            moves.clear();
            board.for_each_pseudo_move(|mv| moves.push(mv));
            let result = moves.iter().try_for_each(|mv| {
                self.other_man_moves(&board, mv, line_man, legal, &mut best, (&frame, free))
            });
            self.line_moves = moves;
            result?;
            if lc == us {
                let passed = frame.passed_line(free);
                // The men the line man may take: the other side's but its king.
                let targets = men[..n]
                    .iter()
                    .filter(|&&(c, kind, _)| c == them && kind != KING)
                    .fold(0u64, |set, &(_, _, sq)| set | 1 << sq);
                self.line_man_moves(&board, line_man, (legal, empty, targets), &mut best, &passed)?;
            }
        }
        let mut derived = [value::ILLEGAL; LINE as usize];
        for s in squares(legal) {
            derived[usize::from(s)] = value_of_key(best[usize::from(s)], check >> s & 1 == 1);
        }
        Ok(Some(derived))
    }

    /// Takes into `best` the children of move `mv` of a man other than the line man, for the
    /// line man on each square of `legal`.
    fn other_man_moves(
        &mut self,
        board: &Position,
        mv: &Pseudo,
        (lc, lk): (Color, u8),
        legal: u64,
        best: &mut [u32; LINE as usize],
        (frame, free): (&QuietFrame, u8),
    ) -> Result<(), Fault> {
        let to = 1u64 << mv.to;
        let takes_line_man = lc != board.turn() && (mv.needs_victim || (mv.kind != PAWN && mv.captured == 0));
        if takes_line_man && legal & to != 0 {
            // The line man on the landing square: taken.
            let key = self.child_key(&board.after_pseudo(mv))?;
            let b = &mut best[usize::from(mv.to)];
            *b = (*b).max(key);
        }
        if mv.needs_victim {
            return Ok(());
        }
        let mask = legal & !to & !mv.path;
        if mask == 0 {
            return Ok(());
        }
        if mv.captured == 0 && mv.kind != PAWN {
            let loc = frame.quiet_line(board.turn(), mv.kind, mv.from, mv.to, free);
            return self.take_line(&loc, mask, best);
        }
        let child = board.after_pseudo(mv);
        let double_push = mv.kind == PAWN && mv.path != 0;
        if double_push && child.pawn_beside(mv.to) {
            // An en-passant right may follow, and whether it does depends on the line man.
            let passed = mv.path.trailing_zeros() as u8;
            for s in squares(mask) {
                let c = child.with_cell(s, Some((lc, lk))).with_en_passant_after(passed);
                let key = self.child_key(&c)?;
                best[usize::from(s)] = best[usize::from(s)].max(key);
            }
            return Ok(());
        }
        let free = mask.trailing_zeros() as u8;
        match locate_line(&child, lc, lk, free) {
            Some(loc) => self.take_line(&loc, mask, best),
            None => {
                for s in squares(mask) {
                    let key = self.child_key(&child.with_cell(s, Some((lc, lk))))?;
                    best[usize::from(s)] = best[usize::from(s)].max(key);
                }
                Ok(())
            }
        }
    }

    /// Takes into `best` the moves of the line man (of the side to move) from each square of
    /// `legal`: to a square of `empty`, the line of the same men with the other side to move;
    /// onto a man of `targets` (the other side's men but the king), one child per man.
    fn line_man_moves(
        &mut self,
        board: &Position,
        (lc, lk): (Color, u8),
        (legal, empty, targets): (u64, u64, u64),
        best: &mut [u32; LINE as usize],
        passed: &LineLocation,
    ) -> Result<(), Fault> {
        let mut worth = [NO_MOVE; LINE as usize];
        let values = self.line_values(passed, empty)?;
        for s in squares(empty) {
            worth[usize::from(s)] = key_of_child(u32::from(values[usize::from(s)]));
        }
        for d in squares(targets) {
            let child = board.with_cell(d, Some((lc, lk))).passed();
            worth[usize::from(d)] = self.child_key(&child)?;
        }
        for s in squares(legal) {
            let reach = board.reach(lk, s) & (empty | targets);
            let b = &mut best[usize::from(s)];
            for t in squares(reach) {
                *b = (*b).max(worth[usize::from(t)]);
            }
        }
        Ok(())
    }

    /// Takes into `best` the children of line `loc` for the squares of `mask`.
    fn take_line(
        &mut self,
        loc: &LineLocation,
        mask: u64,
        best: &mut [u32; LINE as usize],
    ) -> Result<(), Fault> {
        let values = self.line_values(loc, mask)?;
        for s in squares(mask) {
            let b = &mut best[usize::from(s)];
            *b = (*b).max(key_of_child(u32::from(values[usize::from(s)])));
        }
        Ok(())
    }

    /// The stored values of line `loc` for the line man on the squares of `mask` (the others
    /// 0).
    fn line_values(&mut self, loc: &LineLocation, mask: u64) -> Result<[u16; LINE as usize], Fault> {
        let mut values = [0u16; LINE as usize];
        if loc.material == self.material && loc.key == self.key {
            if loc.is_straight() {
                let first = loc.index(0);
                if let (Some(a), Some(_)) = (self.half.place(first), self.half.place(first + LINE - 1)) {
                    if let Some(t) = &self.touched {
                        t.note(a);
                        t.note(a + LINE as usize - 1);
                    }
                    values.copy_from_slice(&self.half.values()[a..a + LINE as usize]);
                    return Ok(values);
                }
            }
            for s in squares(mask) {
                values[usize::from(s)] = self.stored(loc.material, loc.key, loc.index(s))? as u16;
            }
            return Ok(values);
        }
        let Some(first) = squares(mask).next() else {
            return Ok(values);
        };
        // The first read opens the successor; the others go to its values or its blocks.
        values[usize::from(first)] = self.stored(loc.material, loc.key, loc.index(first))? as u16;
        if let Some(Successor::Whole(whole)) = self.successors.get(&(loc.material, loc.key)) {
            for s in squares(mask) {
                values[usize::from(s)] = whole[loc.index(s) as usize];
            }
            return Ok(values);
        }
        // By blocks: a line's indices are mostly in one block, looked up once.
        let mut left = mask;
        while left != 0 {
            let s0 = left.trailing_zeros() as u8;
            let (block, start) = self.block(loc.material, loc.key, loc.index(s0))?;
            let end = start + block.len() as u64;
            for s in squares(left) {
                let index = loc.index(s);
                if (start..end).contains(&index) {
                    values[usize::from(s)] = block[(index - start) as usize];
                    left &= !(1 << s);
                }
            }
        }
        Ok(values)
    }

    /// The worth of a move to `child` for the mover: read, or derived when the child has an
    /// en-passant right (no table holds it).
    fn child_key(&mut self, child: &Position) -> Result<u32, Fault> {
        if child.ep().is_some() {
            if !child.is_legal() {
                return Ok(NO_MOVE);
            }
            let v = self.derive(&mut child.clone())?;
            return Ok(key_of_child(v));
        }
        match locate(child) {
            Location::BareKings => Ok(key_of_child(value::DRAW)),
            Location::Stored { material, key, index } => Ok(key_of_child(self.stored(material, key, index)?)),
        }
    }
}
