//! The bijection between a position and its (slice, index).
//!
//! Index layout version 3 (see `storage/FORMAT.md`, the contract): the two kings make one field,
//! their place in a list of legal king pairs ([`KING_PAIRS_PAWNLESS`], 462 pairs with White's king
//! on the triangle a1-d1-d4, or [`KING_PAIRS_PAWNFUL`], 3,612 pairs); every other group of men of
//! one colour and kind (queens, rooks, bishops, knights) is one field, the set of its squares
//! ranked as a combination ([`BINOMIAL`]), so a position with two rooks has one index, not two.
//! Field order, most significant first: the king pair, then knights, bishops, rooks, queens,
//! Black's group of a kind before White's (White's queens lowest: the most mobile man moves
//! within the smallest stride). The side to move comes above all:
//! `index = turn * per_side + fields`.
//!
//! In a pawnless slice the eight symmetries of the board bring White's king onto the triangle,
//! and with White's king on the diagonal a1-d4, Black's king on or below it
//! ([`pawnless_symmetry`]). With both kings on the diagonal a position and its mirror in the
//! diagonal are both stored.

use crate::material::Material;
use crate::position::{Board, Position};
use crate::slice::SliceKey;
use crate::types::{Bitboard, Color, Piece, Role, Square};

/// The layout version written into table files.
pub const INDEX_LAYOUT: u32 = 3;

/// The index layout of a packed table (`zermelo pack`): layout 3 with the positions of one side
/// to move only, `turn`'s, each at its index less `turn * per_side` (so a slice holds
/// `per_side` values). The other side's values are found by a search of one ply.
pub const fn packed_layout(turn: Color) -> u32 {
    INDEX_LAYOUT | (1 + turn.index() as u32) << 8
}

/// The sides to move a table of index layout `layout` holds: `Some(None)` both (layout 3),
/// `Some(Some(turn))` only `turn`'s ([`packed_layout`]); `None` for a layout this build does
/// not read.
pub const fn stored_turn(layout: u32) -> Option<Option<Color>> {
    if layout == INDEX_LAYOUT {
        Some(None)
    } else if layout == packed_layout(Color::White) {
        Some(Some(Color::White))
    } else if layout == packed_layout(Color::Black) {
        Some(Some(Color::Black))
    } else {
        None
    }
}

/// Most like men in one group an index can rank: a side's 2 rooks (or knights, bishops) and 8
/// promoted ones. Tables stop long before; [`locate`] still names the slice of such a position.
pub const MAX_GROUP: usize = 10;

/// `BINOMIAL[n][k]` = C(n, k) for n <= 64, k <= [`MAX_GROUP`] (0 when k > n).
pub const BINOMIAL: [[u64; MAX_GROUP + 1]; 65] = {
    let mut t = [[0u64; MAX_GROUP + 1]; 65];
    let mut n = 0;
    while n <= 64 {
        t[n][0] = 1;
        let mut k = 1;
        while k <= MAX_GROUP {
            t[n][k] = if n == 0 { 0 } else { t[n - 1][k - 1] + t[n - 1][k] };
            k += 1;
        }
        n += 1;
    }
    t
};
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
/// king from `wk` onto [`TRIANGLE`]: mirror a<->h if it stands on files e-h, then 1<->8 if on
/// ranks 5-8, then in the a1-h8 diagonal if above it. [`pawnless_symmetry`] completes it with
/// Black's king.
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

/// True if two squares are the same or next to each other (kings there are never legal).
const fn touching(a: u8, b: u8) -> bool {
    let df = (a % 8) as i8 - (b % 8) as i8;
    let dr = (a / 8) as i8 - (b / 8) as i8;
    df >= -1 && df <= 1 && dr >= -1 && dr <= 1
}

/// Number of king pairs of a pawnless slice.
pub const PAWNLESS_KING_PAIRS: usize = 462;
/// Number of king pairs of a slice with pawns.
pub const PAWNFUL_KING_PAIRS: usize = 3612;

/// The king pairs `[white, black]` of a pawnless slice, in field order: White's king on
/// [`TRIANGLE`] in its order, Black's king ascending, not next to White's and, with White's
/// king on the diagonal a1-d4, not above the diagonal.
pub const KING_PAIRS_PAWNLESS: [[Square; 2]; PAWNLESS_KING_PAIRS] = {
    let mut t = [[Square::A1; 2]; PAWNLESS_KING_PAIRS];
    let mut n = 0;
    let mut w = 0;
    while w < 10 {
        let wk = TRIANGLE[w];
        let mut b = 0u8;
        while b < 64 {
            let bk = Square::new(b);
            let diagonal = wk.file() == wk.rank();
            if !touching(wk.u8(), b) && !(diagonal && bk.rank() > bk.file()) {
                t[n] = [wk, bk];
                n += 1;
            }
            b += 1;
        }
        w += 1;
    }
    assert!(n == PAWNLESS_KING_PAIRS);
    t
};

/// The king pairs `[white, black]` of a slice with pawns, in field order: White's king
/// ascending, then Black's, never next to each other.
pub const KING_PAIRS_PAWNFUL: [[Square; 2]; PAWNFUL_KING_PAIRS] = {
    let mut t = [[Square::A1; 2]; PAWNFUL_KING_PAIRS];
    let mut n = 0;
    let mut w = 0u8;
    while w < 64 {
        let mut b = 0u8;
        while b < 64 {
            if !touching(w, b) {
                t[n] = [Square::new(w), Square::new(b)];
                n += 1;
            }
            b += 1;
        }
        w += 1;
    }
    assert!(n == PAWNFUL_KING_PAIRS);
    t
};

/// No king-pair field: the pair is not stored.
const NO_PAIR: u16 = u16::MAX;

/// Inverts a list of king pairs: `[white][black]` -> field, [`NO_PAIR`] if not in the list.
const fn king_pair_fields<const N: usize>(pairs: &[[Square; 2]; N]) -> [[u16; 64]; 64] {
    let mut t = [[NO_PAIR; 64]; 64];
    let mut i = 0;
    while i < N {
        t[pairs[i][0].index()][pairs[i][1].index()] = i as u16;
        i += 1;
    }
    t
}

/// `[white king][black king]` -> king-pair field of a pawnless slice, or `u16::MAX`.
static KING_PAIR_FIELD_PAWNLESS: [[u16; 64]; 64] = king_pair_fields(&KING_PAIRS_PAWNLESS);
/// `[white king][black king]` -> king-pair field of a slice with pawns, or `u16::MAX`.
static KING_PAIR_FIELD_PAWNFUL: [[u16; 64]; 64] = king_pair_fields(&KING_PAIRS_PAWNFUL);

/// The king-pair field of a pawnless (`pawnless`) or pawnful slice, `None` if the pair is not
/// stored (kings touching, or off the table form of a pawnless slice).
#[inline]
pub fn king_pair_field(pawnless: bool, wk: Square, bk: Square) -> Option<u64> {
    let t = if pawnless {
        &KING_PAIR_FIELD_PAWNLESS
    } else {
        &KING_PAIR_FIELD_PAWNFUL
    };
    let f = t[wk.index()][bk.index()];
    (f != NO_PAIR).then_some(f as u64)
}

/// The index in [`SYMMETRIES`] of the symmetry that brings a pawnless position with its kings on
/// `wk` and `bk` into table form: [`CANONICAL_SYMMETRY`] of White's king, then, if that king is
/// on the diagonal a1-d4 and Black's king above it, the mirror in the diagonal. (A king brought
/// onto the diagonal by [`CANONICAL_SYMMETRY`] was not mirrored in it, so the two compose by
/// setting bit 2.)
#[inline]
pub fn pawnless_symmetry(wk: Square, bk: Square) -> usize {
    let k = CANONICAL_SYMMETRY[wk.index()] as usize;
    let table = &SYMMETRY_TABLE[k];
    let (w, b) = (table[wk.index()], table[bk.index()]);
    if w.file() == w.rank() && b.rank() > b.file() {
        k | 4
    } else {
        k
    }
}

/// The two squares (ascending) of each pair rank below C(64, 2): `PAIRS[r]`.
static PAIRS: [[u8; 2]; 2016] = {
    let mut t = [[0u8; 2]; 2016];
    let mut hi = 1;
    while hi < 64 {
        let mut lo = 0;
        while lo < hi {
            t[(BINOMIAL[hi][2] + lo as u64) as usize] = [lo as u8, hi as u8];
            lo += 1;
        }
        hi += 1;
    }
    t
};

/// The `k` squares (ascending) of combination rank `rank` (below C(64, k)): the highest square
/// of each is the largest `s` with C(s, j) <= what is left of the rank (a binary search), and
/// the last two are read from [`PAIRS`]. (A scan down from 63 took a third of the DTZ50 build of
/// KNNvKP, whose index unranks a pair of knights for every position it decodes.)
#[inline]
fn unrank(mut rank: u64, out: &mut [Square]) {
    let k = out.len();
    if k == 1 {
        out[0] = Square::new(rank as u8);
        return;
    }
    let mut hi = 63usize;
    for j in (3..=k).rev() {
        // The largest `s` in `j - 1..=hi` with C(s, j) <= rank (C(j - 1, j) is 0).
        let mut lo = j - 1;
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if BINOMIAL[mid][j] <= rank {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        rank -= BINOMIAL[lo][j];
        out[j - 1] = Square::new(lo as u8);
        hi = lo - 1;
    }
    let [a, b] = PAIRS[rank as usize];
    out[0] = Square::new(a);
    out[1] = Square::new(b);
}

/// One field of like men: `len` men from `first` in [`SliceIndexer::men`] order.
#[derive(Clone, Copy, Debug)]
struct Group {
    first: usize,
    len: usize,
    size: u64,
}

/// The groups of the men other than kings of `men` (in [`Material::non_pawn_men`] order), in
/// field order: knights, bishops, rooks, queens, Black before White.
fn groups_of(men: &[Piece]) -> Vec<Group> {
    let mut groups = Vec::new();
    for role in [Role::Knight, Role::Bishop, Role::Rook, Role::Queen] {
        for color in [Color::Black, Color::White] {
            let piece = Piece::new(color, role);
            if let Some(first) = men.iter().position(|&p| p == piece) {
                let len = men[first..].iter().take_while(|&&p| p == piece).count();
                assert!(len <= MAX_GROUP, "{len} like men in a group");
                groups.push(Group {
                    first,
                    len,
                    size: BINOMIAL[64][len],
                });
            }
        }
    }
    groups
}

/// Where a man's field sits in the index: see [`SliceIndexer::fields`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ManField {
    /// What one step of the field's value is worth in the index.
    pub stride: u64,
    /// The first man of its group in [`SliceIndexer::men`].
    pub first: usize,
    /// The number of like men in its group.
    pub len: usize,
}

/// The combination rank of a group of like men on `squares` (any order, distinct), as the index
/// stores it: `C(s1, 1) + C(s2, 2) + ...` over the squares in ascending order.
#[inline]
pub fn group_rank(squares: &[Square]) -> u64 {
    match squares {
        [a] => a.u8() as u64,
        [a, b] => {
            let (lo, hi) = if a < b { (a, b) } else { (b, a) };
            lo.u8() as u64 + BINOMIAL[hi.index()][2]
        }
        _ => {
            let mut s = [0u8; MAX_GROUP];
            let k = squares.len();
            for (d, q) in s.iter_mut().zip(squares) {
                *d = q.u8();
            }
            // Insertion sort: a handful of squares.
            for i in 1..k {
                let mut j = i;
                while j > 0 && s[j - 1] > s[j] {
                    s.swap(j - 1, j);
                    j -= 1;
                }
            }
            (0..k).map(|i| BINOMIAL[s[i] as usize][i + 1]).sum()
        }
    }
}

/// Maps positions of one slice to indices and back.
#[derive(Clone, Debug)]
pub struct SliceIndexer {
    key: SliceKey,
    men: Vec<Piece>,
    pawnless: bool,
    /// Groups of like men, in field order (the king pair comes before them).
    groups: Vec<Group>,
    /// Where Black's king is in [`SliceIndexer::men`] (White's is first).
    black_king: usize,
    per_side: u64,
    /// Board with only the pawns.
    pawn_board: Board,
}

/// A decoded index: squares of the non-pawn men (in [`SliceIndexer::men`] order, like men in
/// ascending square order) and the turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    pub squares: [Square; 8],
    pub turn: Color,
}

impl SliceIndexer {
    pub fn new(key: SliceKey) -> SliceIndexer {
        let men = key.material.non_pawn_men();
        let pawnless = !key.material.has_pawns();
        let groups = groups_of(&men);
        let black_king = men
            .iter()
            .position(|&p| p == Piece::new(Color::Black, Role::King))
            .expect("a material has Black's king");
        let pairs = if pawnless {
            PAWNLESS_KING_PAIRS
        } else {
            PAWNFUL_KING_PAIRS
        } as u64;
        let per_side = groups.iter().map(|g| g.size).product::<u64>() * pairs;
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
            groups,
            black_king,
            per_side,
            pawn_board,
        }
    }

    pub fn key(&self) -> &SliceKey {
        &self.key
    }

    /// The non-pawn men: White's K Q.. R.. B.. N.., then Black's.
    pub fn men(&self) -> &[Piece] {
        &self.men
    }

    /// Where Black's king is in [`SliceIndexer::men`].
    pub fn black_king(&self) -> usize {
        self.black_king
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

    /// Splits an index into squares and turn. Does not check overlaps or legality (the kings
    /// are never next to each other).
    #[inline]
    pub fn placement(&self, index: u64) -> Placement {
        debug_assert!(index < self.size());
        // The side to move is the top of the index: a comparison and a subtraction, not a
        // division (this runs for every position the solver looks at).
        let (turn, mut rest) = if index >= self.per_side {
            (Color::Black, index - self.per_side)
        } else {
            (Color::White, index)
        };
        // The eight squares as the bytes of one word, built in a register: bytes stored into
        // the array one by one and the array then read whole stalled every call (no store
        // forwarding; KRPvKR's passes decode a line per frontier line and per changed line).
        let mut word = 0u64;
        for g in self.groups.iter().rev() {
            if g.len == 1 {
                // A lone man: 64 values, a 6-bit field.
                word |= (rest & 63) << (8 * g.first);
                rest >>= 6;
            } else {
                let mut like = [Square::A1; 8];
                unrank(rest % g.size, &mut like[..g.len]);
                for (j, s) in like[..g.len].iter().enumerate() {
                    word |= u64::from(s.u8()) << (8 * (g.first + j));
                }
                rest /= g.size;
            }
        }
        let [wk, bk] = if self.pawnless {
            KING_PAIRS_PAWNLESS[rest as usize]
        } else {
            KING_PAIRS_PAWNFUL[rest as usize]
        };
        word |= u64::from(wk.u8()) | u64::from(bk.u8()) << (8 * self.black_king);
        let squares = word.to_le_bytes().map(Square::new);
        Placement { squares, turn }
    }

    /// For each man (in [`SliceIndexer::men`] order): the stride of its field (the product of
    /// the sizes of the fields below it; the two kings share the king-pair field) and the range
    /// of its group of like men in `men` (a king is a group of its own).
    pub fn fields(&self) -> [ManField; 8] {
        let mut out = [ManField {
            stride: 0,
            first: 0,
            len: 1,
        }; 8];
        let mut stride = 1u64;
        for g in self.groups.iter().rev() {
            for f in &mut out[g.first..g.first + g.len] {
                *f = ManField {
                    stride,
                    first: g.first,
                    len: g.len,
                };
            }
            stride *= g.size;
        }
        out[0] = ManField {
            stride,
            first: 0,
            len: 1,
        };
        out[self.black_king] = ManField {
            stride,
            first: self.black_king,
            len: 1,
        };
        out
    }

    /// The index of a placement (men in [`SliceIndexer::men`] order, like men in any order), or
    /// `None` if its king pair is not stored: kings next to each other, or in a pawnless slice
    /// a placement not in table form (see [`pawnless_symmetry`]).
    #[inline]
    pub fn index_of(&self, squares: &[Square], turn: Color) -> Option<u64> {
        let mut idx = king_pair_field(self.pawnless, squares[0], squares[self.black_king])?;
        for g in &self.groups {
            idx = idx * g.size + group_rank(&squares[g.first..g.first + g.len]);
        }
        Some(idx + turn.index() as u64 * self.per_side)
    }

    /// The position at an index, or `None` if two men (pawns included) share a square.
    /// The position may still be illegal (the side not to move in check).
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

    /// The index of a position of this slice, given in table form (the material as the table
    /// names it, the pawns as in the key, and for a pawnless slice the kings as
    /// [`pawnless_symmetry`] leaves them); the en-passant square is ignored. `None` if the
    /// position is not of this slice or not in table form.
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
        if k != self.men.len() || pos.board.by_role(Role::Pawn) != self.pawns() {
            return None;
        }
        self.index_of(&squares[..k], pos.turn)
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
/// slice, and for a pawnless material brought into table form ([`pawnless_symmetry`]).
/// `None` for bare kings, or kings next to each other. The en-passant square is ignored:
/// resolve it first (see `probe`).
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
        let bk = p.board.king_of(Color::Black)?;
        let k = pawnless_symmetry(wk, bk);
        if k != 0 {
            p.board = p.board.map(|b| symmetry_bb(k, b));
        }
        key
    };
    Some(Location {
        slice,
        index: index_of_board(&p, !material.has_pawns())?,
    })
}

/// The index of a position already in table form (see [`SliceIndexer::index`]), without
/// building an indexer: used on every lookup. `None` if its king pair is not stored.
#[inline]
fn index_of_board(pos: &Position, pawnless: bool) -> Option<u64> {
    let b = &pos.board;
    let wk = b.king_of(Color::White)?;
    let bk = b.king_of(Color::Black)?;
    let mut idx = king_pair_field(pawnless, wk, bk)?;
    let mut per_side = if pawnless {
        PAWNLESS_KING_PAIRS
    } else {
        PAWNFUL_KING_PAIRS
    } as u64;
    for role in [Role::Knight, Role::Bishop, Role::Rook, Role::Queen] {
        for color in [Color::Black, Color::White] {
            let men = b.by_piece(Piece::new(color, role));
            let k = men.count() as usize;
            if k == 0 {
                continue;
            }
            let size = BINOMIAL[64][k];
            let rank: u64 = men
                .into_iter()
                .enumerate()
                .map(|(i, s)| BINOMIAL[s.index()][i + 1])
                .sum();
            // Wrapping: past 6 men or so no table has this index, but the slice is still named.
            idx = idx.wrapping_mul(size).wrapping_add(rank);
            per_side = per_side.wrapping_mul(size);
        }
    }
    Some(idx.wrapping_add(pos.turn.index() as u64 * per_side))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        let kpk = SliceIndexer::new(SliceKey::all_of("KPvK".parse().unwrap())[0]);
        assert_eq!(kpk.size(), 2 * 3612);
        let kqrkr = SliceIndexer::new(SliceKey::pawnless("KQRvKR".parse().unwrap()));
        assert_eq!(kqrkr.size(), 2 * 462 * 64 * 64 * 64);
        let krrkr = SliceIndexer::new(SliceKey::pawnless("KRRvKR".parse().unwrap()));
        assert_eq!(krrkr.size(), 2 * 462 * 2016 * 64);
        let krnknn = SliceIndexer::new(SliceKey::pawnless("KRNvKNN".parse().unwrap()));
        assert_eq!(krnknn.size(), 2 * 462 * 64 * 64 * 2016);
    }

    /// The binomial table against a direct product formula, and combination ranking both ways.
    #[test]
    fn binomials_and_combination_ranks() {
        for n in 0..=64u64 {
            for k in 0..=MAX_GROUP as u64 {
                let direct = if k > n {
                    0
                } else {
                    (0..k).fold(1u128, |acc, i| acc * (n - i) as u128 / (i + 1) as u128) as u64
                };
                assert_eq!(BINOMIAL[n as usize][k as usize], direct, "C({n}, {k})");
            }
        }
        for k in 1..=4usize {
            let mut seen = 0u64;
            let mut out = [Square::A1; 4];
            for r in 0..BINOMIAL[64][k] {
                unrank(r, &mut out[..k]);
                assert!(
                    out[..k].windows(2).all(|w| w[0] < w[1]),
                    "k {k} rank {r}: {:?}",
                    &out[..k]
                );
                assert_eq!(group_rank(&out[..k]), r);
                // Any order of the same squares.
                let mut rev = out;
                rev[..k].reverse();
                assert_eq!(group_rank(&rev[..k]), r);
                seen += 1;
            }
            assert_eq!(seen, BINOMIAL[64][k]);
        }
    }

    /// The king-pair lists: legal pairs only, and exactly the table forms of their symmetry
    /// classes (pawnless) or every legal pair (with pawns).
    #[test]
    fn king_pairs() {
        let legal = |w: Square, b: Square| {
            w != b
                && (w.file() as i32 - b.file() as i32)
                    .abs()
                    .max((w.rank() as i32 - b.rank() as i32).abs())
                    > 1
        };
        let mut n = 0;
        for w in Square::all() {
            for b in Square::all() {
                let f = king_pair_field(false, w, b);
                assert_eq!(f.is_some(), legal(w, b));
                if let Some(f) = f {
                    assert_eq!(f, n);
                    assert_eq!(KING_PAIRS_PAWNFUL[f as usize], [w, b]);
                    n += 1;
                }
                // Pawnless: stored iff legal and fixed by its own table-form symmetry.
                let stored = king_pair_field(true, w, b);
                assert_eq!(
                    stored.is_some(),
                    legal(w, b) && pawnless_symmetry(w, b) == 0,
                    "{w} {b}"
                );
                if let Some(f) = stored {
                    assert_eq!(KING_PAIRS_PAWNLESS[f as usize], [w, b]);
                }
                // Every legal pair is brought onto a stored one.
                if legal(w, b) {
                    let t = &SYMMETRY_TABLE[pawnless_symmetry(w, b)];
                    assert!(
                        king_pair_field(true, t[w.index()], t[b.index()]).is_some(),
                        "{w} {b}"
                    );
                }
            }
        }
        assert_eq!(n, 3612);
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
                        assert_eq!(i, j, "{key} index {i}");
                        let loc = locate(&pos).unwrap();
                        assert_eq!(loc.slice, key);
                        assert_eq!(loc.index, i);
                        assert_eq!(index_of_board(&pos, ix.is_pawnless()), Some(i));
                    }
                }
                assert!(positions > 0);
            }
        }
    }

    /// Like men are one combination: every index of KRRvK that is a position is the one index of
    /// that position, and the number of positions is the number of placements of the rooks as a
    /// set.
    #[test]
    fn like_men_have_one_index() {
        let key = SliceKey::pawnless("KRRvK".parse().unwrap());
        let ix = SliceIndexer::new(key);
        let mut positions = 0u64;
        for i in 0..ix.size() {
            if let Some(pos) = ix.position(i) {
                assert_eq!(ix.index(&pos), Some(i), "{pos}");
                assert_eq!(locate(&pos).unwrap().index, i, "{pos}");
                positions += 1;
            }
        }
        // Per king pair, the rooks stand on 2 of the 62 free squares.
        assert_eq!(positions, 2 * 462 * 62 * 61 / 2);
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
        // Both kings on the diagonal: a position and its diagonal mirror are stored apart.
        let d: Position = "8/8/8/3k4/8/1R6/1K6/8 w - - 0 1".parse().unwrap();
        let dm = Position::new(d.board.transform(Square::flip_diagonal), d.turn);
        assert_eq!(d.board.king_of(Color::Black), Some(Square::from_coords(3, 4)));
        let d2: Position = "8/8/8/8/3k4/1R6/1K6/8 w - - 0 1".parse().unwrap();
        let d2m = Position::new(d2.board.transform(Square::flip_diagonal), d2.turn);
        assert_ne!(locate(&d2), locate(&d2m));
        // White's king on the diagonal, Black's off it: one index for both.
        assert_eq!(locate(&d), locate(&dm));
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
            let k = CANONICAL_SYMMETRY[sq.index()] as usize;
            let c = |x: Square| SYMMETRY_TABLE[k][x.index()];
            assert!(Square::all().all(|x| c(x) == step(x)), "{sq}");
            assert!(on_triangle(c(sq)));
            let b = Bitboard(0x1234_5678_9abc_def0);
            assert_eq!(
                symmetry_bb(k, b),
                b.into_iter().fold(Bitboard::EMPTY, |acc, x| acc.with(c(x)))
            );
        }
    }

    /// Every image of every position of a pawnless slice lands on the index of the position, or,
    /// with both kings on the diagonal, of its diagonal mirror; and every stored position is in
    /// table form.
    #[test]
    fn canonical_pawnless_is_a_retraction() {
        for name in ["KRvK", "KBNvK"] {
            let key = SliceKey::pawnless(name.parse().unwrap());
            let ix = SliceIndexer::new(key);
            for i in (0..ix.size()).step_by(if name == "KRvK" { 1 } else { 13 }) {
                let Some(pos) = ix.position(i) else { continue };
                let wk = pos.board.king_of(Color::White).unwrap();
                let bk = pos.board.king_of(Color::Black).unwrap();
                assert_eq!(
                    pawnless_symmetry(wk, bk),
                    0,
                    "stored position {pos} is not in table form"
                );
                let both_diagonal = wk.file() == wk.rank() && bk.file() == bk.rank();
                let mirror = Position::new(pos.board.transform(Square::flip_diagonal), pos.turn);
                for sym in SYMMETRIES {
                    let img = Position::new(pos.board.transform(sym), pos.turn);
                    let loc = locate(&img).unwrap();
                    let back = ix.position(loc.index).unwrap();
                    let same = back == pos || (both_diagonal && back == mirror);
                    assert!(same, "{img} -> {back}, expected {pos}");
                }
            }
        }
    }
}
