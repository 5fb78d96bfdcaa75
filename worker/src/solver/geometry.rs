//! A slice's men and how its indices move: decoding an index into a placement, and the moves
//! and un-moves of a placement computed on the index (only the moving man's field changes).
//! Shared by the passes (`retrograde`) and the exits of slices with pawns (`pawn_exits`).

use std::ops::ControlFlow;

use zermelo_chess::attacks::{attacks, attacks_from_set, between, king_attacks, pawn_attacks};
use zermelo_chess::index::{
    group_rank, king_pair_field, on_triangle, pawnless_symmetry, ManField, Placement, SliceIndexer,
    SYMMETRY_TABLE, TRIANGLE_BB,
};
use zermelo_chess::slice::SliceKey;
use zermelo_chess::{Bitboard, Color, Piece, Role, Square};

/// No man of a slice: the captured "man" of a pawn's capture, or a man not to skip.
pub(super) const NO_MAN: usize = usize::MAX;

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
        self.decode_but(i, None)
    }

    /// The placement at `i` with the occupancy of every man but `skip`.
    #[inline(always)]
    fn decode_but(&self, i: u64, skip: Option<usize>) -> Option<Decoded> {
        let Placement { squares, turn } = self.ix.placement(i);
        let mut occupied = self.pawns[0] | self.pawns[1];
        for (k, &s) in squares[..self.n].iter().enumerate() {
            if Some(k) == skip {
                continue;
            }
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

    /// The squares of the line man `l` of line `d` ([`Geometry::decode_line`]) on which the
    /// mover's king on `king` is safe with `occupied` (without `l`), the other side's pawns
    /// `pawns` and its men but `skip`: none if a pawn attacks it; else the squares between it
    /// and each man that attacks it (where `l` shields it), and, if `l` is the other side's and
    /// not `skip`, those from which `l` does not attack it.
    #[inline]
    pub(super) fn line_king_safe(
        &self,
        l: usize,
        d: &Decoded,
        king: Square,
        occupied: Bitboard,
        pawns: Bitboard,
        skip: usize,
    ) -> Bitboard {
        let us = d.turn;
        if (pawn_attacks(us, king) & pawns).any() {
            return Bitboard::EMPTY;
        }
        let mut ok = Bitboard::ALL;
        for j in self.side(us.other()).filter(|&j| j != skip && j != l) {
            if attacks(self.men[j], d.squares[j], occupied).contains(king) {
                ok &= between(d.squares[j], king);
            }
        }
        if l != skip && !self.side(us).contains(&l) {
            ok &= !attacks(self.men[l], king, occupied);
        }
        ok
    }

    /// [`Geometry::has_inside_move`] for the positions of line `d` ([`Geometry::decode_line`],
    /// line man `l`) with `l` on the squares of `qs` (legal positions) at once: the squares of
    /// `qs` whose position has a legal move inside the slice. Each move of another man is
    /// looked at once, its legality a mask of the squares of `l` (not on its target nor in its
    /// way, and leaving the king safe: between it and a man that would then attack it, or, if
    /// `l` is the other side's, not attacking it); `l`'s own moves (if ours) all at once: from
    /// the squares that see a square where it would leave the king safe.
    pub(super) fn line_has_inside_move(&self, l: usize, d: &Decoded, qs: Bitboard) -> Bitboard {
        let us = d.turn;
        let (sq, occ, lp) = (&d.squares, d.occupied, self.men[l]);
        let our_king = sq[if us == Color::White { 0 } else { self.black_king }];
        let their_pawns = self.pawns[us.other().index()];
        let l_ours = self.side(us).contains(&l);
        let safe = |king, occupied| self.line_king_safe(l, d, king, occupied, their_pawns, NO_MAN);
        let mut found = Bitboard::EMPTY;
        if l_ours {
            // `l` moves from `q` to an empty square that leaves the king safe.
            let good = !occ & safe(our_king, occ);
            found |= qs & attacks_from_set(lp, good, occ);
        }
        for k in self.side(us).filter(|&k| k != l) {
            let from = sq[k];
            for to in attacks(self.men[k], from, occ) & !occ {
                let open = qs & !found & !Bitboard::EMPTY.with(to) & !between(from, to);
                if open.is_empty() {
                    continue;
                }
                let king = if self.is_king(k) { to } else { our_king };
                found |= open & safe(king, occ.without(from).with(to));
                if found == qs {
                    return found;
                }
            }
        }
        found
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
        if self.pawnless {
            self.for_each_image_unmove(j, d, &mut f);
        }
    }

    /// The un-moves of [`Geometry::for_each_unmove`] that come from an image of `j` (pawnless
    /// slices): a stored position `q` is a predecessor of `j` through every move that leads to
    /// an image `z` of position `j` whose table form is `j` itself. Beside `j`, such an image is
    /// not in table form, so its king pair is not stored: only a move of the mover's king can
    /// have led there from a stored position. Un-move that king from each distinct such image;
    /// each move from a stored position into `j` is found exactly once.
    fn for_each_image_unmove(&self, j: u64, d: &Decoded, f: &mut impl FnMut(u64) -> ControlFlow<()>) {
        let mover = d.turn.other();
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
        for (sym, table) in SYMMETRY_TABLE.iter().enumerate().skip(1) {
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
            let occupied = map_bb(sym, d.occupied);
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

    /// The line of 64 indices from `base` (a multiple of 64), which differ only in the square of
    /// man `l` (the [`Geometry::line_man`]): the other men's squares, with `l` on a1 and its
    /// field 0 in `fields` (so `fields` is the line's first index without the side to move),
    /// and `occupied` the squares of every man but `l`. `None` if two other men share a square.
    #[inline]
    pub(super) fn decode_line(&self, base: u64, l: usize) -> Option<Decoded> {
        debug_assert!(base.is_multiple_of(64) && self.line_man() == Some(l));
        self.decode_but(base, Some(l))
    }

    /// The position of line `d` ([`Geometry::decode_line`]) with its line man `l` on `q` (an
    /// empty square): what [`Geometry::decode`] gives for its index.
    #[inline]
    pub(super) fn line_position(&self, d: &Decoded, l: usize, q: Square) -> Decoded {
        // The eight squares as one word, `l`'s byte replaced: a byte stored into the array and
        // the array then read whole would stall the load (no store forwarding).
        debug_assert!(l < 8);
        let shift = 8 * l as u32;
        let word = u64::from_le_bytes(d.squares.map(Square::u8));
        let word = word & !(0xff << shift) | u64::from(q.u8()) << shift;
        Decoded {
            squares: word.to_le_bytes().map(Square::new),
            turn: d.turn,
            fields: d.fields + q.u8() as u64,
            occupied: d.occupied.with(q),
        }
    }

    /// [`Geometry::for_each_unmove`] for the positions of a line at once: `d` is the line
    /// ([`Geometry::decode_line`], man `l` the line man) and `from` the squares of `l` of its
    /// positions to un-move. Calls `f(line, squares)` with the first index of a line of
    /// predecessors and the squares of `l` of those predecessors in it: the predecessors of the
    /// positions of `from` are exactly the indices `line + q` so given (some perhaps more than
    /// once, some illegal, as with [`Geometry::for_each_unmove`]).
    pub(super) fn for_each_unmove_line(
        &self,
        l: usize,
        d: &Decoded,
        from: Bitboard,
        f: impl FnMut(u64, Bitboard),
    ) {
        self.unmove_line::<false>(l, d, from, f);
    }

    /// [`Geometry::for_each_unmove_line`], each predecessor given once per move into a position
    /// of `from`, as [`Geometry::for_each_unmove`] gives it (a count of moves needs them all):
    /// where `l` moved, a square it came from is given once for each square of `from` it
    /// attacks.
    pub(super) fn for_each_unmove_line_counted(
        &self,
        l: usize,
        d: &Decoded,
        from: Bitboard,
        f: impl FnMut(u64, Bitboard),
    ) {
        self.unmove_line::<true>(l, d, from, f);
    }

    #[inline(always)]
    fn unmove_line<const COUNTED: bool>(
        &self,
        l: usize,
        d: &Decoded,
        from: Bitboard,
        mut f: impl FnMut(u64, Bitboard),
    ) {
        let mover = d.turn.other();
        let occ = d.occupied;
        let from = from & !occ;
        if from.is_empty() {
            return;
        }
        let line_of = |turn: Color| d.fields + turn.index() as u64 * self.per_side;
        for k in self.side(mover) {
            if k == l && COUNTED {
                // `l` moved, inside its own line: to each square of `from` from any empty
                // square it attacks from there.
                for q in from {
                    let before = attacks(self.men[l], q, occ) & !occ;
                    if before.any() {
                        f(line_of(mover), before);
                    }
                }
                continue;
            }
            if k == l {
                // `l` moved, inside its own line: from any empty square it attacks.
                let before = attacks_from_set(self.men[l], from, occ) & !occ;
                if before.any() {
                    f(line_of(mover), before);
                }
                continue;
            }
            // Another man moved, from a square `t` it attacks on the board without `l`: for the
            // positions where `l` stands neither on `t` nor between.
            let now = d.squares[k];
            for t in attacks(self.men[k], now, occ) & !occ {
                let squares = from & !(between(now, t) | Bitboard::EMPTY.with(t));
                if squares.is_empty() {
                    continue;
                }
                let _ = self.for_each_shift(d, k, Bitboard::EMPTY.with(t), mover, &mut |p| {
                    f(p, squares);
                    ControlFlow::Continue(())
                });
            }
        }
        if !self.pawnless {
            return;
        }
        let bk = self.black_king;
        if [d.squares[0], d.squares[bk]].iter().all(|s| s.file() == s.rank()) {
            // Both kings on the long diagonal: images compared position by position.
            for q in from {
                let dq = self.line_position(d, l, q);
                let j = dq.fields + d.turn.index() as u64 * self.per_side;
                self.for_each_image_unmove(j, &dq, &mut |p| {
                    f(p & !63, Bitboard::EMPTY.with(Square::new((p & 63) as u8)));
                    ControlFlow::Continue(())
                });
            }
            return;
        }
        // Otherwise every image of a position of the line is distinct and goes back to it (see
        // `for_each_image_unmove`): the line's image under each symmetry, its king un-moved.
        let king = if mover == Color::White { 0 } else { bk };
        for (sym, table) in SYMMETRY_TABLE.iter().enumerate().skip(1) {
            let z0 = table[d.squares[0].index()];
            if mover == Color::Black && !on_triangle(z0) || (king_attacks(z0) & TRIANGLE_BB).is_empty() {
                continue;
            }
            let mut z = [Square::A1; 8];
            for (t, &s) in z.iter_mut().zip(&d.squares[..self.n]) {
                *t = table[s.index()];
            }
            z[l] = Square::A1;
            let occupied = map_bb(sym, occ);
            let from_z = map_bb(sym, from);
            for before in king_attacks(z[king]) & !occupied {
                let squares = from_z.without(before);
                if squares.is_empty() {
                    continue;
                }
                let mut q = z;
                q[king] = before;
                if let Some(p) = self.ix.index_of(&q[..self.n], mover) {
                    f(p, squares);
                }
            }
        }
    }

    /// The moves inside the slice of the positions of a line, but those of the line man `l`
    /// itself ([`Geometry::for_each_move`] for a line; `d` from [`Geometry::decode_line`]):
    /// calls `f(line, squares, sym)` for each move of another man of the side to move, with the
    /// first index of the line it leads to and the squares of `l` of the positions of `at` for
    /// which it is a move. Position `q` of them leads to index `line + s` where `s` is `q` mapped
    /// by symmetry `sym` ([`map_bb`]; 0 but for a king move of a pawnless slice brought back into
    /// table form), and `squares` is given mapped too. Stops when `f` breaks.
    pub(super) fn for_each_move_line(
        &self,
        l: usize,
        d: &Decoded,
        at: Bitboard,
        mut f: impl FnMut(u64, Bitboard, usize) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let us = d.turn;
        let them = us.other();
        let occ = d.occupied;
        let side = self.side(us);
        let king = side.start;
        // The king first (unlike `for_each_move`): the verification stops at the first move
        // to a position not won, and a king's is found sooner (KRPvKR on 1 thread, the
        // verification 7.2-7.3 s -> 6.9 s in three pairs; KQRvKR unchanged).
        for k in [king].into_iter().chain(side.skip(1)) {
            if k == l {
                continue;
            }
            let now = d.squares[k];
            for t in attacks(self.men[k], now, occ) & !occ {
                let squares = at & !(between(now, t) | Bitboard::EMPTY.with(t));
                if squares.is_empty() {
                    continue;
                }
                if self.pawnless && self.is_king(k) {
                    let (wk, bk) = (d.squares[0], d.squares[self.black_king]);
                    let (w, b) = if k == 0 { (t, bk) } else { (wk, t) };
                    let sym = pawnless_symmetry(w, b);
                    if sym != 0 {
                        let table = &SYMMETRY_TABLE[sym];
                        let mut q = d.squares;
                        q[k] = t;
                        for s in &mut q[..self.n] {
                            *s = table[s.index()];
                        }
                        q[l] = Square::A1;
                        if let Some(p) = self.ix.index_of(&q[..self.n], them) {
                            f(p, map_bb(sym, squares), sym)?;
                        }
                        continue;
                    }
                }
                self.for_each_shift(d, k, Bitboard::EMPTY.with(t), them, &mut |p| f(p, squares, 0))?;
            }
        }
        ControlFlow::Continue(())
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

/// A bitboard mapped square by square through symmetry `sym` (`SYMMETRY_TABLE[sym]`): the
/// file mirror if bit 0 is set, then the rank mirror if bit 1, then the a1-h8 diagonal if bit 2.
#[inline]
pub(super) fn map_bb(sym: usize, mut b: Bitboard) -> Bitboard {
    if sym & 1 != 0 {
        b = b.flip_file();
    }
    if sym & 2 != 0 {
        b = b.flip_rank();
    }
    if sym & 4 != 0 {
        b = b.flip_diagonal();
    }
    b
}

/// The inverse of [`map_bb`]: the same mirrors in the other order.
#[inline]
pub(super) fn unmap_bb(sym: usize, mut b: Bitboard) -> Bitboard {
    if sym & 4 != 0 {
        b = b.flip_diagonal();
    }
    if sym & 2 != 0 {
        b = b.flip_rank();
    }
    if sym & 1 != 0 {
        b = b.flip_file();
    }
    b
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The mirrors on bitboards are the symmetry tables' square by square, and unmapping undoes
    /// them.
    #[test]
    fn bitboard_symmetries_are_the_tables() {
        for (sym, table) in SYMMETRY_TABLE.iter().enumerate() {
            for s in 0..64u8 {
                let sq = Square::new(s);
                let one = Bitboard::EMPTY.with(sq);
                assert_eq!(
                    map_bb(sym, one),
                    Bitboard::EMPTY.with(table[sq.index()]),
                    "{sym} {sq:?}"
                );
                assert_eq!(unmap_bb(sym, map_bb(sym, one)), one);
            }
        }
    }

    /// Sampled lines of several slices (the line man White's or Black's, like men, pawns of
    /// either side): the squares where a line has a move inside the slice are exactly those
    /// whose position has one.
    #[test]
    fn a_line_has_an_inside_move_where_each_position_has_one() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut random = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut keys: Vec<SliceKey> = ["KQvKR", "KQRvK", "KBNvK", "KNvKQ", "KRvKR", "KNNvKR", "KQRvKR"]
            .iter()
            .map(|m| SliceKey::pawnless(m.parse().unwrap()))
            .collect();
        keys.extend(SliceKey::all_of("KRvKP".parse().unwrap()).into_iter().step_by(3));
        keys.extend(SliceKey::all_of("KRPvKR".parse().unwrap()).into_iter().step_by(5));
        let (mut lines, mut with, mut without) = (0u64, 0u64, 0u64);
        for key in keys {
            let g = Geometry::new(&key);
            let l = g.line_man().expect("a lone man lowest");
            let n = g.ix.size();
            let mut base = 0;
            while base < n {
                let line_base = base;
                base += 64 * (1 + random() % 97);
                let Some(d) = g.decode_line(line_base, l) else {
                    continue;
                };
                // The legal positions of the line (the side not to move not in check).
                let mut qs = Bitboard::EMPTY;
                for q in !d.occupied {
                    let dq = g.line_position(&d, l, q);
                    if !g.attacked(&dq, kings(&g, &dq).1, d.turn) {
                        qs = qs.with(q);
                    }
                }
                let found = g.line_has_inside_move(l, &d, qs);
                for q in qs {
                    let dq = g.line_position(&d, l, q);
                    let each = g.has_inside_move(&dq, kings(&g, &dq).0);
                    assert_eq!(
                        found.contains(q),
                        each,
                        "{key}: index {}",
                        line_base + q.u8() as u64
                    );
                    if each {
                        with += 1;
                    } else {
                        without += 1;
                    }
                }
                assert!((found & !qs).is_empty());
                lines += 1;
            }
        }
        assert!(
            lines > 5_000 && without > 1_000 && with > without,
            "{lines} lines, {with} with, {without} without"
        );
    }

    /// Lines of several slices (the line man White's or Black's, pawnless with both kings'
    /// images, with pawns), sampled, with random sets of squares of the line man: the un-moves
    /// and moves of a line are those of its positions one by one.
    #[test]
    fn line_moves_and_unmoves_are_those_of_each_position() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut random = move || {
            seed ^= seed >> 12;
            seed ^= seed << 25;
            seed ^= seed >> 27;
            seed.wrapping_mul(0x2545_f491_4f6c_dd1d)
        };
        let mut keys: Vec<SliceKey> = ["KQvKR", "KQRvK", "KBNvK", "KNvKQ", "KRvKR"]
            .iter()
            .map(|m| SliceKey::pawnless(m.parse().unwrap()))
            .collect();
        keys.extend(SliceKey::all_of("KRvKP".parse().unwrap()).into_iter().step_by(5));
        let mut lines_checked = 0u64;
        for key in keys {
            let g = Geometry::new(&key);
            let l = g.line_man().expect("a lone man lowest");
            let n = g.ix.size();
            let mut base = 0;
            while base < n {
                let line_base = base;
                base += 64 * (1 + random() % 61);
                let Some(d) = g.decode_line(line_base, l) else {
                    continue;
                };
                lines_checked += 1;
                for from in [Bitboard::ALL, Bitboard(random()), Bitboard(random() & random())] {
                    // Un-moves.
                    let mut by_line = BTreeSet::new();
                    g.for_each_unmove_line(l, &d, from, |p, squares| {
                        assert!(p.is_multiple_of(64));
                        by_line.extend(squares.into_iter().map(|q| p + q.u8() as u64));
                    });
                    let mut by_index = BTreeSet::new();
                    for q in from {
                        let j = line_base + q.u8() as u64;
                        if let Some(dj) = g.decode(j) {
                            g.for_each_unmove(j, &dj, |p| {
                                by_index.insert(p);
                            });
                        }
                    }
                    assert_eq!(
                        by_line, by_index,
                        "{key}: un-moves of line {line_base} from {from:?}"
                    );
                    // Un-moves counted: each once per move, as a list.
                    let mut by_line = Vec::new();
                    g.for_each_unmove_line_counted(l, &d, from, |p, squares| {
                        by_line.extend(squares.into_iter().map(|q| p + q.u8() as u64));
                    });
                    let mut by_index = Vec::new();
                    for q in from {
                        let j = line_base + q.u8() as u64;
                        if let Some(dj) = g.decode(j) {
                            g.for_each_unmove(j, &dj, |p| by_index.push(p));
                        }
                    }
                    by_line.sort_unstable();
                    by_index.sort_unstable();
                    assert_eq!(
                        by_line, by_index,
                        "{key}: un-moves counted of line {line_base} from {from:?}"
                    );
                    // Moves.
                    let at = from & !d.occupied;
                    // Moves, as lists: a king move brought back into table form may land on
                    // a position the line man's own move reaches too.
                    let mut by_line = Vec::new();
                    let _ = g.for_each_move_line(l, &d, at, |p, squares, sym| {
                        for s in squares {
                            let q = unmap_bb(sym, Bitboard::EMPTY.with(s)).first().unwrap();
                            assert!(at.contains(q));
                            by_line.push((q, p + s.u8() as u64));
                        }
                        ControlFlow::Continue(())
                    });
                    let mut by_index = Vec::new();
                    let them = d.turn.other();
                    for q in at {
                        let j = line_base + q.u8() as u64;
                        let dj = g.decode(j).expect("l on an empty square");
                        let lq = g.line_position(&d, l, q);
                        assert_eq!(
                            (lq.squares, lq.turn, lq.fields, lq.occupied),
                            (dj.squares, dj.turn, dj.fields, dj.occupied),
                            "{key}: index {j}"
                        );
                        let mut moves = Vec::new();
                        let _ = g.for_each_move(&dj, |s| {
                            moves.push(s);
                            ControlFlow::Continue(())
                        });
                        // The line man's own moves are not in `for_each_move_line`.
                        if g.side(d.turn).contains(&l) {
                            for t in attacks(g.men[l], q, d.occupied) & !d.occupied {
                                let own = d.fields + them.index() as u64 * g.per_side + t.u8() as u64;
                                let at = moves.iter().position(|&s| s == own).expect("an own move");
                                moves.swap_remove(at);
                            }
                        }
                        by_index.extend(moves.into_iter().map(|s| (q, s)));
                    }
                    by_line.sort_unstable();
                    by_index.sort_unstable();
                    assert_eq!(by_line, by_index, "{key}: moves of line {line_base} at {at:?}");
                }
            }
        }
        assert!(lines_checked > 5_000, "only {lines_checked} lines");
    }
}
