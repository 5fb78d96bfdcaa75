//! A slice's men and how its indices move: decoding an index into a placement, and the moves
//! and un-moves of a placement computed on the index (only the moving man's field changes).
//! Shared by the passes (`retrograde`) and the exits of slices with pawns (`pawn_exits`).

use std::ops::ControlFlow;

use zermelo_chess::attacks::{attacks, king_attacks, pawn_attacks};
use zermelo_chess::index::{
    group_rank, king_pair_field, on_triangle, pawnless_symmetry, ManField, Placement, SliceIndexer,
    SYMMETRY_TABLE, TRIANGLE_BB,
};
use zermelo_chess::slice::SliceKey;
use zermelo_chess::{Bitboard, Color, Piece, Role, Square};

/// A slice's men and how its indices move: decoding, un-moves and moves on the index.
pub(super) struct Geometry {
    pub(super) ix: SliceIndexer,
    pub(super) men: [Piece; 8],
    pub(super) n: usize,
    /// Where Black's king is in `men` (White's is first).
    pub(super) black_king: usize,
    pub(super) pawnless: bool,
    per_side: u64,
    /// Each man's field in the index.
    fields: [ManField; 8],
    /// The pawns, by colour.
    pub(super) pawns: [Bitboard; 2],
}

/// A decoded index: the men's squares, who is to move, and the board's occupancy.
pub(super) struct Decoded {
    pub(super) squares: [Square; 8],
    pub(super) turn: Color,
    /// The index without its side to move (`index % per_side`).
    pub(super) fields: u64,
    /// Every man's square, pawns included.
    pub(super) occupied: Bitboard,
}

impl Geometry {
    pub(super) fn new(key: &SliceKey) -> Geometry {
        let ix = SliceIndexer::new(*key);
        let mut men = [Piece::new(Color::White, Role::King); 8];
        men[..ix.men().len()].copy_from_slice(ix.men());
        Geometry {
            n: ix.men().len(),
            black_king: ix.black_king(),
            pawnless: ix.is_pawnless(),
            per_side: ix.per_side(),
            fields: ix.fields(),
            pawns: [key.white_pawns, key.black_pawns],
            men,
            ix,
        }
    }

    /// The men of `color` in `men`: White's are before Black's king.
    #[inline]
    pub(super) fn side(&self, color: Color) -> std::ops::Range<usize> {
        match color {
            Color::White => 0..self.black_king,
            Color::Black => self.black_king..self.n,
        }
    }

    #[inline]
    pub(super) fn is_king(&self, k: usize) -> bool {
        k == 0 || k == self.black_king
    }

    /// The man whose field is the lowest of the index, when it is a lone man (not a king, no
    /// like man beside it): then the 64 indices from a multiple of 64 differ only in its square.
    pub(super) fn line_man(&self) -> Option<usize> {
        (0..self.n).find(|&k| !self.is_king(k) && self.fields[k].stride == 1 && self.fields[k].len == 1)
    }

    /// The placement at `i`, or `None` if two men (pawns included) share a square.
    #[inline]
    pub(super) fn decode(&self, i: u64) -> Option<Decoded> {
        let Placement { squares, turn } = self.ix.placement(i);
        let mut occupied = self.pawns[0] | self.pawns[1];
        for &s in &squares[..self.n] {
            if occupied.contains(s) {
                return None;
            }
            occupied = occupied.with(s);
        }
        Some(Decoded {
            squares,
            turn,
            fields: if turn == Color::Black {
                i - self.per_side
            } else {
                i
            },
            occupied,
        })
    }

    /// True if a man of `by` (pawns included) attacks `target` in `d`.
    #[inline]
    pub(super) fn attacked(&self, d: &Decoded, target: Square, by: Color) -> bool {
        if (pawn_attacks(by.other(), target) & self.pawns[by.index()]).any() {
            return true;
        }
        self.side(by)
            .any(|k| attacks(self.men[k], d.squares[k], d.occupied).contains(target))
    }

    /// True if the side to move in `d` (king on `our_king`) has a legal move inside the slice:
    /// a man other than a pawn to an empty square, leaving its king safe from the other side's
    /// men and pawns.
    pub(super) fn has_inside_move(&self, d: &Decoded, our_king: Square) -> bool {
        let us = d.turn;
        let them = us.other();
        let their_pawns = self.pawns[them.index()];
        self.side(us).any(|k| {
            let from = d.squares[k];
            let targets = attacks(self.men[k], from, d.occupied) & !d.occupied;
            targets.into_iter().any(|to| {
                let occupied = d.occupied.without(from).with(to);
                let king = if self.is_king(k) { to } else { our_king };
                (pawn_attacks(us, king) & their_pawns).is_empty()
                    && !self
                        .side(them)
                        .any(|j| attacks(self.men[j], d.squares[j], occupied).contains(king))
            })
        })
    }

    /// Calls `f` with the index of `d` with man `k` moved to each square of `targets` and `turn`
    /// to move, by arithmetic on the index: only the man's field changes. Skips a square that
    /// puts the kings side by side, or for a king of a pawnless slice out of table form. Stops
    /// when `f` breaks.
    #[inline]
    pub(super) fn for_each_shift(
        &self,
        d: &Decoded,
        k: usize,
        targets: Bitboard,
        turn: Color,
        f: &mut impl FnMut(u64) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let field = self.fields[k];
        let stride = field.stride;
        let now = d.squares[k];
        let base = d.fields + turn.index() as u64 * self.per_side;
        if self.is_king(k) {
            // Only the king-pair field changes; a pair not stored (kings side by side, or in a
            // pawnless slice out of table form) is skipped.
            let (wk, bk) = (d.squares[0], d.squares[self.black_king]);
            let old = king_pair_field(self.pawnless, wk, bk).expect("a decoded king pair is stored");
            let base = base.wrapping_sub(old * stride);
            for to in targets {
                let pair = if k == 0 {
                    king_pair_field(self.pawnless, to, bk)
                } else {
                    king_pair_field(self.pawnless, wk, to)
                };
                if let Some(new) = pair {
                    f(base.wrapping_add(new * stride))?;
                }
            }
        } else if field.len == 1 {
            // A lone man: its field is its square.
            let base = base.wrapping_sub(now.u8() as u64 * stride);
            for to in targets {
                f(base.wrapping_add(to.u8() as u64 * stride))?;
            }
        } else {
            let group = &d.squares[field.first..field.first + field.len];
            let base = base.wrapping_sub(group_rank(group) * stride);
            let mut moved = [Square::A1; 8];
            moved[..field.len].copy_from_slice(group);
            for to in targets {
                moved[k - field.first] = to;
                f(base.wrapping_add(group_rank(&moved[..field.len]) * stride))?;
            }
        }
        ControlFlow::Continue(())
    }

    /// Calls `f` with the index of every position reached from `d` by a move inside the slice
    /// (a man other than a pawn to an empty square), until `f` breaks (then it breaks too). Some
    /// may be illegal (the mover's king left in check): their value is 0.
    #[inline]
    pub(super) fn for_each_move(
        &self,
        d: &Decoded,
        mut f: impl FnMut(u64) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let them = d.turn.other();
        // The king last: its moves are the dearest to index, and the men's moves (smallest
        // strides first) the likeliest to be read from a line already in cache.
        let side = self.side(d.turn);
        let king = side.start;
        for k in side.skip(1).chain([king]) {
            let now = d.squares[k];
            let targets = attacks(self.men[k], now, d.occupied) & !d.occupied;
            if self.pawnless && self.is_king(k) {
                // The king pair may leave table form: such a move's position is brought back
                // into it; the others shift the king-pair field.
                let (wk, bk) = (d.squares[0], d.squares[self.black_king]);
                let mut in_form = Bitboard::EMPTY;
                for to in targets {
                    let (w, b) = if k == 0 { (to, bk) } else { (wk, to) };
                    if pawnless_symmetry(w, b) == 0 {
                        in_form = in_form.with(to);
                        continue;
                    }
                    let mut q = d.squares;
                    q[k] = to;
                    let t = &SYMMETRY_TABLE[pawnless_symmetry(w, b)];
                    for s in &mut q[..self.n] {
                        *s = t[s.index()];
                    }
                    if let Some(s) = self.ix.index_of(&q[..self.n], them) {
                        f(s)?;
                    }
                }
                self.for_each_shift(d, k, in_form, them, &mut f)?;
            } else {
                self.for_each_shift(d, k, targets, them, &mut f)?;
            }
        }
        ControlFlow::Continue(())
    }

    /// Calls `f` with the index of every stored position from which a move inside the slice
    /// leads to index `j` (decoded as `d`), once per such move. Some may be illegal (the side
    /// to move in `j` in check there): their value is 0.
    #[inline]
    pub(super) fn for_each_unmove(&self, j: u64, d: &Decoded, mut f: impl FnMut(u64)) {
        let mut f = |p| {
            f(p);
            ControlFlow::Continue(())
        };
        let mover = d.turn.other();
        // The position itself: every man of the mover may have come from any empty square it
        // attacks; the index changes in that man's field only.
        for k in self.side(mover) {
            let now = d.squares[k];
            let targets = attacks(self.men[k], now, d.occupied) & !d.occupied;
            let _ = self.for_each_shift(d, k, targets, mover, &mut f);
        }
        if !self.pawnless {
            return;
        }
        // Pawnless: a stored position `q` is a predecessor of `j` through every move that leads
        // to an image `z` of position `j` whose table form is `j` itself. Beside `j`, such an
        // image is not in table form, so its king pair is not stored: only a move of the
        // mover's king can have led there from a stored position. Un-move that king from each
        // distinct such image; each move from a stored position into `j` is found exactly once.
        let n = self.n;
        let bk = self.black_king;
        let king = if mover == Color::White { 0 } else { bk };
        let mut seen = [[Square::A1; 8]; 8];
        seen[0] = d.squares;
        sort_like_men(&self.men[..n], &mut seen[0][..n]);
        let mut n_seen = 1;
        // An image of `j` is in table form, and stored itself, only if it keeps both kings on
        // their squares: with both kings on the long diagonal (both diagonal images are stored).
        // Otherwise every image goes back to `j`, with no need to look.
        let both_on_diagonal = [d.squares[0], d.squares[bk]].iter().all(|s| s.file() == s.rank());
        for table in &SYMMETRY_TABLE[1..] {
            let z0 = table[d.squares[0].index()];
            // With Black's king moved, White's stays: it must be on the triangle already; with
            // White's moved, it must stand next to the triangle.
            if mover == Color::Black && !on_triangle(z0) || (king_attacks(z0) & TRIANGLE_BB).is_empty() {
                continue;
            }
            let mut z = [Square::A1; 8];
            for (t, &s) in z.iter_mut().zip(&d.squares[..n]) {
                *t = table[s.index()];
            }
            // The image must go back to `j` itself (its table form).
            if both_on_diagonal {
                let back = &SYMMETRY_TABLE[pawnless_symmetry(z[0], z[bk])];
                let mut w = [Square::A1; 8];
                for (t, &s) in w.iter_mut().zip(&z[..n]) {
                    *t = back[s.index()];
                }
                if self.ix.index_of(&w[..n], d.turn) != Some(j) {
                    continue;
                }
            }
            // Distinct images only (a position may be its own diagonal mirror): like men
            // compared as sets.
            let mut set = z;
            sort_like_men(&self.men[..n], &mut set[..n]);
            if seen[..n_seen].contains(&set) {
                continue;
            }
            seen[n_seen] = set;
            n_seen += 1;
            let occupied = symmetry_of_bb(table, d.occupied);
            let targets = king_attacks(z[king]) & !occupied;
            for before in targets {
                let mut q = z;
                q[king] = before;
                if let Some(p) = self.ix.index_of(&q[..n], mover) {
                    let _ = f(p);
                }
            }
        }
    }
}

/// The side to move's king, and the other king, in `d`.
#[inline]
pub(super) fn kings(g: &Geometry, d: &Decoded) -> (Square, Square) {
    match d.turn {
        Color::White => (d.squares[0], d.squares[g.black_king]),
        Color::Black => (d.squares[g.black_king], d.squares[0]),
    }
}

/// A bitboard mapped square by square through a symmetry table.
#[inline]
fn symmetry_of_bb(table: &[Square; 64], b: Bitboard) -> Bitboard {
    b.into_iter()
        .fold(Bitboard::EMPTY, |acc, s| acc.with(table[s.index()]))
}

/// Sorts the squares of each run of like men (same piece, next to each other in `men`), so that
/// two placements of one position compare equal.
pub(super) fn sort_like_men(men: &[Piece], squares: &mut [Square]) {
    let mut start = 0;
    while start < men.len() {
        let end = start + men[start..].iter().take_while(|&&p| p == men[start]).count();
        squares[start..end].sort_unstable();
        start = end;
    }
}
