//! The bijection between a position and its (slice, index).
//!
//! Index layout version 2 (see `storage/FORMAT.md`): the men other than pawns are listed White's
//! K Q R B N then Black's K Q R B N ([`Material::non_pawn_men`]); each is a field of 6 bits (its
//! square, 0 = a1), the first man (White's king) most significant. In a pawnless slice White's
//! king is kept on the triangle a1-d1-d4 by the eight symmetries of the board
//! ([`canonical_pawnless`]), and its field has 10 values (its place in [`TRIANGLE`]). With the
//! king on the diagonal a1-d4 a position and its mirror in that diagonal are both stored.
//! The side to move comes above all: `index = turn * per_side + fields`. Men of the same kind are
//! labelled, so a position with two rooks has two indices (both hold the same value).

use crate::material::Material;
use crate::position::{Board, Position};
use crate::slice::SliceKey;
use crate::types::{Bitboard, Color, Piece, Role, Square};

/// The layout version written into table files.
pub const INDEX_LAYOUT: u32 = 2;

/// The squares of White's king in a pawnless slice, in field order: a1 b1 c1 d1 b2 c2 d2 c3 d3 d4.
pub const TRIANGLE: [Square; 10] = {
    let mut t = [Square::A1; 10];
    let mut i = 0;
    let mut rank = 0;
    while rank < 4 {
        let mut file = rank;
        while file < 4 {
            t[i] = Square::from_coords(file, rank);
            i += 1;
            file += 1;
        }
        rank += 1;
    }
    t
};

/// The triangle as a bitboard.
pub const TRIANGLE_BB: Bitboard = {
    let mut b = 0u64;
    let mut i = 0;
    while i < 10 {
        b |= 1 << TRIANGLE[i].u8();
        i += 1;
    }
    Bitboard(b)
};

/// Field of White's king by square, 255 off the triangle.
const TRIANGLE_FIELD: [u8; 64] = {
    let mut f = [255u8; 64];
    let mut i = 0;
    while i < 10 {
        f[TRIANGLE[i].u8() as usize] = i as u8;
        i += 1;
    }
    f
};

/// The eight symmetries of the board, the identity first.
pub const SYMMETRIES: [fn(Square) -> Square; 8] = [
    |s| s,
    Square::flip_file,
    Square::flip_rank,
    |s| s.flip_file().flip_rank(),
    Square::flip_diagonal,
    |s| s.flip_file().flip_diagonal(),
    |s| s.flip_rank().flip_diagonal(),
    |s| s.flip_file().flip_rank().flip_diagonal(),
];

/// `SYMMETRY_TABLE[s][sq]` = `SYMMETRIES[s](sq)`, for hot loops.
pub const SYMMETRY_TABLE: [[Square; 64]; 8] = {
    let mut t = [[Square::A1; 64]; 8];
    let mut i = 0;
    while i < 64 {
        let sq = Square::new(i as u8);
        let (ff, fr, d) = (sq.flip_file(), sq.flip_rank(), sq.flip_diagonal());
        t[0][i] = sq;
        t[1][i] = ff;
        t[2][i] = fr;
        t[3][i] = ff.flip_rank();
        t[4][i] = d;
        t[5][i] = ff.flip_diagonal();
        t[6][i] = fr.flip_diagonal();
        t[7][i] = ff.flip_rank().flip_diagonal();
        i += 1;
    }
    t
};

/// `CANONICAL_SYMMETRY[wk]`: the index in [`SYMMETRIES`] of the symmetry that brings White's
/// king from `wk` onto [`TRIANGLE`] (see [`canonical_pawnless`]).
pub const CANONICAL_SYMMETRY: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        let wk = Square::new(i as u8);
        let ff = wk.file() >= 4;
        let wk1 = if ff { wk.flip_file() } else { wk };
        let fr = wk1.rank() >= 4;
        let wk2 = if fr { wk1.flip_rank() } else { wk1 };
        let fd = wk2.rank() > wk2.file();
        t[i] = ff as u8 + 2 * fr as u8 + 4 * fd as u8;
        i += 1;
    }
    t
};

/// The symmetry that brings a pawnless position into table form, chosen by White's king `wk`:
/// mirror a<->h if it stands on files e-h, then 1<->8 if on ranks 5-8, then in the a1-h8 diagonal
/// if above it. The king ends on [`TRIANGLE`]; on the diagonal a1-d4 nothing more is done.
#[inline]
pub fn canonical_pawnless(wk: Square) -> impl Fn(Square) -> Square {
    let table = &SYMMETRY_TABLE[CANONICAL_SYMMETRY[wk.index()] as usize];
    move |s: Square| table[s.index()]
}

/// Applies `SYMMETRIES[k]` to a whole bitboard: bit 0 of `k` mirrors a<->h, bit 1 mirrors 1<->8,
/// bit 2 then mirrors in the a1-h8 diagonal.
#[inline]
pub fn symmetry_bb(k: usize, b: Bitboard) -> Bitboard {
    let b = if k & 1 != 0 { b.flip_file() } else { b };
    let b = if k & 2 != 0 { b.flip_rank() } else { b };
    if k & 4 != 0 {
        b.flip_diagonal()
    } else {
        b
    }
}

/// True if a square is on the triangle where White's king stands in a pawnless slice.
#[inline]
pub fn on_triangle(sq: Square) -> bool {
    TRIANGLE_FIELD[sq.index()] != 255
}

/// Maps positions of one slice to indices and back.
#[derive(Clone, Debug)]
pub struct SliceIndexer {
    key: SliceKey,
    men: Vec<Piece>,
    pawnless: bool,
    per_side: u64,
    /// Board with only the pawns.
    pawn_board: Board,
}

/// A decoded index: squares of the non-pawn men (in [`SliceIndexer::men`] order) and the turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    pub squares: [Square; 8],
    pub turn: Color,
}

impl SliceIndexer {
    pub fn new(key: SliceKey) -> SliceIndexer {
        let men = key.material.non_pawn_men();
        let pawnless = !key.material.has_pawns();
        let n = men.len() as u32;
        let per_side = if pawnless {
            10 * 64u64.pow(n - 1)
        } else {
            64u64.pow(n)
        };
        let mut pawn_board = Board::empty();
        for sq in key.white_pawns {
            pawn_board.set(sq, Piece::new(Color::White, Role::Pawn));
        }
        for sq in key.black_pawns {
            pawn_board.set(sq, Piece::new(Color::Black, Role::Pawn));
        }
        SliceIndexer {
            key,
            men,
            pawnless,
            per_side,
            pawn_board,
        }
    }

    pub fn key(&self) -> &SliceKey {
        &self.key
    }

    /// The non-pawn men, in field order.
    pub fn men(&self) -> &[Piece] {
        &self.men
    }

    pub fn is_pawnless(&self) -> bool {
        self.pawnless
    }

    /// Indices per side to move.
    pub fn per_side(&self) -> u64 {
        self.per_side
    }

    /// Total number of indices (both sides to move).
    pub fn size(&self) -> u64 {
        2 * self.per_side
    }

    pub fn pawns(&self) -> Bitboard {
        self.pawn_board.occupied()
    }

    /// Splits an index into squares and turn. Does not check legality or overlaps.
    #[inline]
    pub fn placement(&self, index: u64) -> Placement {
        debug_assert!(index < self.size());
        let turn = if index >= self.per_side {
            Color::Black
        } else {
            Color::White
        };
        let mut rest = index % self.per_side;
        let n = self.men.len();
        let mut squares = [Square::A1; 8];
        for k in (1..n).rev() {
            squares[k] = Square::new((rest & 63) as u8);
            rest >>= 6;
        }
        squares[0] = if self.pawnless {
            TRIANGLE[rest as usize]
        } else {
            Square::new(rest as u8)
        };
        Placement { squares, turn }
    }

    /// The index of a placement; White's king must be on the triangle in a pawnless slice.
    #[inline]
    pub fn index_of(&self, squares: &[Square], turn: Color) -> u64 {
        let n = self.men.len();
        let mut idx = if self.pawnless {
            debug_assert!(on_triangle(squares[0]));
            TRIANGLE_FIELD[squares[0].index()] as u64
        } else {
            squares[0].u8() as u64
        };
        for sq in &squares[1..n] {
            idx = (idx << 6) | sq.u8() as u64;
        }
        idx + turn.index() as u64 * self.per_side
    }

    /// The position at an index, or `None` if two men (pawns included) share a square.
    /// The position may still be illegal (kings adjacent, side not to move in check).
    pub fn position(&self, index: u64) -> Option<Position> {
        let p = self.placement(index);
        self.position_of(&p.squares[..self.men.len()], p.turn)
    }

    /// The position with the non-pawn men on `squares` (field order) and the pawns of the slice,
    /// or `None` if two men share a square.
    #[inline]
    pub fn position_of(&self, squares: &[Square], turn: Color) -> Option<Position> {
        let mut board = self.pawn_board;
        for (&piece, &sq) in self.men.iter().zip(squares) {
            if board.occupied().contains(sq) {
                return None;
            }
            board.put(sq, piece);
        }
        Some(Position::new(board, turn))
    }

    /// The index of a position of this slice, given in the slice's own orientation (the
    /// material as the table names it, the pawns as in the key) with White's king already on the
    /// triangle for a pawnless slice; the en-passant square is ignored.
    /// Of men of the same kind, the one on the lower square takes the first label.
    pub fn index(&self, pos: &Position) -> Option<u64> {
        let mut squares = [Square::A1; 8];
        let mut k = 0;
        for c in Color::ALL {
            for r in [Role::King, Role::Queen, Role::Rook, Role::Bishop, Role::Knight] {
                for sq in pos.board.by_piece(Piece::new(c, r)) {
                    if k >= 8 || self.men.get(k) != Some(&Piece::new(c, r)) {
                        return None;
                    }
                    squares[k] = sq;
                    k += 1;
                }
            }
        }
        if k != self.men.len() {
            return None;
        }
        if self.pawnless && !on_triangle(squares[0]) {
            return None;
        }
        Some(self.index_of(&squares[..k], pos.turn))
    }
}

/// Where a position's value is stored: its slice and index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    pub slice: SliceKey,
    pub index: u64,
}

/// Maps any position (any orientation, any material with a table) to where its value is stored:
/// colours swapped if the material is stored the other way round, mirrored into the canonical
/// slice, and for a pawnless material White's king moved to the triangle a1-d1-d4.
/// `None` for bare kings. The en-passant square is ignored: resolve it first (see `probe`).
pub fn locate(pos: &Position) -> Option<Location> {
    let material = Material::of(&pos.board);
    if material.is_bare_kings() {
        return None;
    }
    let mut p = *pos;
    p.ep_square = None;
    if !material.is_normalized() {
        p = p.flip_colors();
    }
    let material = Material::of(&p.board);
    let wp = p.board.by_piece(Piece::new(Color::White, Role::Pawn));
    let bp = p.board.by_piece(Piece::new(Color::Black, Role::Pawn));
    let key = SliceKey {
        material,
        white_pawns: wp,
        black_pawns: bp,
    };
    let slice = if material.has_pawns() {
        let (canon, mirrored) = key.canonical();
        if mirrored {
            p = p.flip_file();
        }
        canon
    } else {
        let wk = p.board.king_of(Color::White)?;
        if !on_triangle(wk) {
            let k = CANONICAL_SYMMETRY[wk.index()] as usize;
            p.board = p.board.map(|b| symmetry_bb(k, b));
        }
        key
    };
    Some(Location {
        slice,
        index: index_of_board(&p, !material.has_pawns()),
    })
}

/// The index of a position already in table orientation (see [`SliceIndexer::index`]), without
/// building an indexer: used on every lookup.
#[inline]
fn index_of_board(pos: &Position, pawnless: bool) -> u64 {
    let mut idx: u64 = 0;
    let mut men = 0u32;
    for c in Color::ALL {
        for r in [Role::King, Role::Queen, Role::Rook, Role::Bishop, Role::Knight] {
            for sq in pos.board.by_piece(Piece::new(c, r)) {
                let field = if men == 0 && pawnless {
                    TRIANGLE_FIELD[sq.index()] as u64
                } else {
                    sq.u8() as u64
                };
                idx = (idx << 6) | field;
                men += 1;
            }
        }
    }
    let per_side = if pawnless {
        10u64 << (6 * (men - 1))
    } else {
        1u64 << (6 * men)
    };
    idx + pos.turn.index() as u64 * per_side
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        let kpk = SliceIndexer::new(SliceKey::all_of("KPvK".parse().unwrap())[0]);
        assert_eq!(kpk.size(), 8192);
        let kqrkr = SliceIndexer::new(SliceKey::pawnless("KQRvKR".parse().unwrap()));
        assert_eq!(kqrkr.size(), 2 * 10 * 64 * 64 * 64 * 64);
    }

    #[test]
    fn index_unindex_identity_over_whole_slices() {
        for name in ["KPvK", "KRvKP", "KBNvK", "KPvKP"] {
            let m: Material = name.parse().unwrap();
            for key in SliceKey::all_of(m).into_iter().take(5) {
                let ix = SliceIndexer::new(key);
                let mut positions = 0;
                for i in 0..ix.size() {
                    if let Some(pos) = ix.position(i) {
                        positions += 1;
                        let j = ix.index(&pos).unwrap();
                        // Labelled twins (none here) would map to the lower labelling.
                        assert_eq!(i, j, "{key} index {i}");
                        let loc = locate(&pos).unwrap();
                        assert_eq!(loc.slice, key);
                        assert_eq!(loc.index, i);
                        assert_eq!(index_of_board(&pos, ix.is_pawnless()), i);
                    }
                }
                assert!(positions > 0);
            }
        }
    }

    #[test]
    fn twins_map_to_lower_label() {
        let key = SliceKey::pawnless("KRRvK".parse().unwrap());
        let ix = SliceIndexer::new(key);
        let mut seen = 0;
        for i in (0..ix.size()).step_by(997) {
            if let Some(pos) = ix.position(i) {
                let j = ix.index(&pos).unwrap();
                assert_eq!(ix.position(j).unwrap(), pos);
                seen += 1;
            }
        }
        assert!(seen > 1000);
    }

    #[test]
    fn locate_uses_symmetry() {
        // KvKP with Black's pawn: stored as KPvK with colours swapped.
        let a: Position = "8/4p3/8/8/8/8/8/K6k w - - 0 1".parse().unwrap();
        let b: Position = "k6K/8/8/8/8/8/4P3/8 b - - 0 1".parse().unwrap();
        assert_eq!(locate(&a), locate(&b));
        // Mirror a <-> h.
        let c: Position = "k6K/8/8/8/8/8/3P4/8 b - - 0 1".parse().unwrap();
        let d: Position = "K6k/8/8/8/8/8/4P3/8 b - - 0 1".parse().unwrap();
        assert_eq!(locate(&c), locate(&d));
        // Pawnless: eight symmetries.
        let e: Position = "8/8/8/8/8/2k5/8/K6Q w - - 0 1".parse().unwrap();
        let f: Position = "K6Q/8/2k5/8/8/8/8/8 w - - 0 1".parse().unwrap();
        let g: Position = "8/8/8/8/8/5k2/8/Q6K w - - 0 1".parse().unwrap();
        assert_eq!(locate(&e), locate(&f));
        assert_eq!(locate(&e), locate(&g));
        // King off the diagonal: all eight images share one index.
        let p: Position = "8/8/8/3k4/8/1R6/2K5/8 w - - 0 1".parse().unwrap();
        let images: Vec<Position> = SYMMETRIES
            .iter()
            .map(|s| Position::new(p.board.transform(s), p.turn))
            .collect();
        for q in &images {
            assert_eq!(locate(q), locate(&p), "{q}");
        }
        // King on the diagonal: a position and its diagonal mirror are stored apart.
        let d: Position = "8/8/8/3k4/8/1R6/1K6/8 w - - 0 1".parse().unwrap();
        let dm = Position::new(d.board.transform(Square::flip_diagonal), d.turn);
        assert_ne!(locate(&d), locate(&dm));
    }

    #[test]
    fn bitboard_flips_agree_with_square_flips() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..1000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let b = Bitboard(x);
            let by_square =
                |f: fn(Square) -> Square| b.into_iter().fold(Bitboard::EMPTY, |acc, s| acc.with(f(s)));
            assert_eq!(b.flip_diagonal(), by_square(Square::flip_diagonal));
            assert_eq!(b.flip_file(), by_square(Square::flip_file));
            assert_eq!(b.flip_rank(), by_square(Square::flip_rank));
        }
    }

    #[test]
    fn symmetry_tables_agree_with_the_functions() {
        for sq in Square::all() {
            for (k, f) in SYMMETRIES.iter().enumerate() {
                assert_eq!(SYMMETRY_TABLE[k][sq.index()], f(sq));
            }
            // The table form: mirror a<->h if on files e-h, then 1<->8 if on ranks 5-8, then in
            // the diagonal if above it; written out here apart from the tables.
            let ff = sq.file() >= 4;
            let s1 = if ff { sq.flip_file() } else { sq };
            let fr = s1.rank() >= 4;
            let s2 = if fr { s1.flip_rank() } else { s1 };
            let fd = s2.rank() > s2.file();
            let step = |x: Square| {
                let x = if ff { x.flip_file() } else { x };
                let x = if fr { x.flip_rank() } else { x };
                if fd {
                    x.flip_diagonal()
                } else {
                    x
                }
            };
            let c = canonical_pawnless(sq);
            let k = CANONICAL_SYMMETRY[sq.index()] as usize;
            assert!(Square::all().all(|x| c(x) == step(x)), "{sq}");
            assert!(on_triangle(c(sq)));
            let b = Bitboard(0x1234_5678_9abc_def0);
            assert_eq!(
                symmetry_bb(k, b),
                b.into_iter().fold(Bitboard::EMPTY, |acc, x| acc.with(c(x)))
            );
        }
    }

    /// Every image of every position of a pawnless slice lands on an index holding one of its
    /// images, and the canonical form of a stored position is itself.
    #[test]
    fn canonical_pawnless_is_a_retraction() {
        let key = SliceKey::pawnless("KRvK".parse().unwrap());
        let ix = SliceIndexer::new(key);
        for i in 0..ix.size() {
            let Some(pos) = ix.position(i) else { continue };
            let wk = pos.board.king_of(Color::White).unwrap();
            let c = canonical_pawnless(wk);
            assert!(
                Square::all().all(|s| c(s) == s),
                "stored position {pos} is not in table form"
            );
            for sym in SYMMETRIES {
                let img = Position::new(pos.board.transform(sym), pos.turn);
                let loc = locate(&img).unwrap();
                let back = ix.position(loc.index).unwrap();
                let same = back == pos
                    || (wk.file() == wk.rank() && back.board == pos.board.transform(Square::flip_diagonal));
                assert!(same, "{img} -> {back}, expected {pos}");
            }
        }
    }
}
