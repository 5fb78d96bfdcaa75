//! Attack tables.
//!
//! Every table is computed at compile time by a `const fn` into a `static`: there is no lazy
//! initialisation and no build script. Sliders use classical ray tables: the ray from a square in
//! one direction, cut at its first blocker, found with one bit scan. The scan is branch-free: a
//! sentinel bit on the far corner (h8 for the directions that increase the square index, a1 for
//! the others) stands in for "no blocker", and the ray from that corner in that direction is
//! empty.
//!
//! ```
//! use zermelo_chess::attacks::{between, rook_attacks};
//! use zermelo_chess::{Bitboard, Square};
//! let a1 = Square::parse("a1").unwrap();
//! let a4 = Square::parse("a4").unwrap();
//! let seen = rook_attacks(a1, a4.bb());
//! assert_eq!(seen.count(), 3 + 7); // a2, a3, a4 and b1..h1
//! assert_eq!(between(a1, a4).count(), 2);
//! ```

use crate::types::{Bitboard, Color, Piece, Role, Square};

/// File and rank steps of the eight ray directions. The first four increase the square index
/// (north, east, north-east, north-west), the last four decrease it (south, west, south-west,
/// south-east). Rooks use 0, 1, 4, 5; bishops 2, 3, 6, 7.
const DIRECTIONS: [(i8, i8); 8] = [
    (0, 1),
    (1, 0),
    (1, 1),
    (-1, 1),
    (0, -1),
    (-1, 0),
    (-1, -1),
    (1, -1),
];
const NORTH: usize = 0;
const EAST: usize = 1;
const NORTH_EAST: usize = 2;
const NORTH_WEST: usize = 3;
const SOUTH: usize = 4;
const WEST: usize = 5;
const SOUTH_WEST: usize = 6;
const SOUTH_EAST: usize = 7;

const KNIGHT_STEPS: [(i8, i8); 8] = [
    (1, 2),
    (2, 1),
    (2, -1),
    (1, -2),
    (-1, -2),
    (-2, -1),
    (-2, 1),
    (-1, 2),
];
const KING_STEPS: [(i8, i8); 8] = [
    (0, 1),
    (1, 1),
    (1, 0),
    (1, -1),
    (0, -1),
    (-1, -1),
    (-1, 0),
    (-1, 1),
];

/// The square `(file, rank)` stepped by `(df, dr)`, if it is on the board.
const fn offset(sq: usize, df: i8, dr: i8) -> Option<usize> {
    let f = (sq & 7) as i8 + df;
    let r = (sq >> 3) as i8 + dr;
    if f >= 0 && f < 8 && r >= 0 && r < 8 {
        Some((r * 8 + f) as usize)
    } else {
        None
    }
}

const fn step_table(steps: &[(i8, i8)]) -> [u64; 64] {
    let mut table = [0u64; 64];
    let mut sq = 0;
    while sq < 64 {
        let mut i = 0;
        while i < steps.len() {
            if let Some(to) = offset(sq, steps[i].0, steps[i].1) {
                table[sq] |= 1 << to;
            }
            i += 1;
        }
        sq += 1;
    }
    table
}

const fn pawn_table() -> [[u64; 64]; 2] {
    [step_table(&[(-1, 1), (1, 1)]), step_table(&[(-1, -1), (1, -1)])]
}

/// `RAYS[dir][sq]`: the squares from `sq` (exclusive) to the edge in direction `dir`.
const fn ray_table() -> [[u64; 64]; 8] {
    let mut table = [[0u64; 64]; 8];
    let mut dir = 0;
    while dir < 8 {
        let (df, dr) = DIRECTIONS[dir];
        let mut sq = 0;
        while sq < 64 {
            let mut cur = sq;
            while let Some(next) = offset(cur, df, dr) {
                table[dir][sq] |= 1 << next;
                cur = next;
            }
            sq += 1;
        }
        dir += 1;
    }
    table
}

/// `(BETWEEN, LINE)`: for two distinct aligned squares, the squares strictly between them and
/// the whole line through both; empty otherwise.
const fn line_tables() -> ([[u64; 64]; 64], [[u64; 64]; 64]) {
    let mut between = [[0u64; 64]; 64];
    let mut line = [[0u64; 64]; 64];
    let mut a = 0;
    while a < 64 {
        let mut dir = 0;
        while dir < 8 {
            let opposite = (dir + 4) % 8;
            let full = RAYS[dir][a] | RAYS[opposite][a] | (1 << a);
            let mut ray = RAYS[dir][a];
            while ray != 0 {
                let b = ray.trailing_zeros() as usize;
                ray &= ray - 1;
                between[a][b] = RAYS[dir][a] & RAYS[opposite][b];
                line[a][b] = full;
            }
            dir += 1;
        }
        a += 1;
    }
    (between, line)
}

static KNIGHT_ATTACKS: [u64; 64] = step_table(&KNIGHT_STEPS);
static KING_ATTACKS: [u64; 64] = step_table(&KING_STEPS);
static PAWN_ATTACKS: [[u64; 64]; 2] = pawn_table();
static RAYS: [[u64; 64]; 8] = ray_table();
static BETWEEN: [[u64; 64]; 64] = line_tables().0;
static LINE: [[u64; 64]; 64] = line_tables().1;

/// Squares a king on `sq` attacks.
#[inline]
pub fn king_attacks(sq: Square) -> Bitboard {
    Bitboard(KING_ATTACKS[sq.index()])
}

/// Squares a knight on `sq` attacks.
#[inline]
pub fn knight_attacks(sq: Square) -> Bitboard {
    Bitboard(KNIGHT_ATTACKS[sq.index()])
}

/// Squares a pawn of `color` on `sq` attacks (its capture squares).
#[inline]
pub fn pawn_attacks(color: Color, sq: Square) -> Bitboard {
    Bitboard(PAWN_ATTACKS[color.index()][sq.index()])
}

/// Squares attacked by all the pawns of `color` standing on `pawns`, at once.
#[inline]
pub fn pawn_attacks_all(color: Color, pawns: Bitboard) -> Bitboard {
    let p = pawns.0;
    Bitboard(match color {
        Color::White => ((p & NOT_FILE_A) << 7) | ((p & NOT_FILE_H) << 9),
        Color::Black => ((p & NOT_FILE_A) >> 9) | ((p & NOT_FILE_H) >> 7),
    })
}

/// The ray from `sq` in a direction that increases the square index, up to and including the
/// first blocker.
#[inline]
fn ray_up(dir: usize, sq: Square, occupied: Bitboard) -> u64 {
    let ray = RAYS[dir][sq.index()];
    let blocker = ((ray & occupied.0) | (1 << 63)).trailing_zeros() as usize;
    ray ^ RAYS[dir][blocker & 63]
}

/// The ray from `sq` in a direction that decreases the square index, up to and including the
/// first blocker.
#[inline]
fn ray_down(dir: usize, sq: Square, occupied: Bitboard) -> u64 {
    let ray = RAYS[dir][sq.index()];
    let blocker = 63 - ((ray & occupied.0) | 1).leading_zeros() as usize;
    ray ^ RAYS[dir][blocker & 63]
}

/// Squares a rook on `sq` attacks, given the occupied squares (blockers are included).
#[inline]
pub fn rook_attacks(sq: Square, occupied: Bitboard) -> Bitboard {
    Bitboard(
        ray_up(NORTH, sq, occupied)
            | ray_up(EAST, sq, occupied)
            | ray_down(SOUTH, sq, occupied)
            | ray_down(WEST, sq, occupied),
    )
}

/// Squares a bishop on `sq` attacks, given the occupied squares (blockers are included).
#[inline]
pub fn bishop_attacks(sq: Square, occupied: Bitboard) -> Bitboard {
    Bitboard(
        ray_up(NORTH_EAST, sq, occupied)
            | ray_up(NORTH_WEST, sq, occupied)
            | ray_down(SOUTH_WEST, sq, occupied)
            | ray_down(SOUTH_EAST, sq, occupied),
    )
}

/// Squares a queen on `sq` attacks, given the occupied squares (blockers are included).
#[inline]
pub fn queen_attacks(sq: Square, occupied: Bitboard) -> Bitboard {
    rook_attacks(sq, occupied) | bishop_attacks(sq, occupied)
}

/// Squares `piece` on `sq` attacks. For a pawn, only its capture squares. Always inlined: a
/// call site knows the piece's role more often than not, and the solver's loops call it per
/// move (left to itself, the compiler kept it a call in them).
#[inline(always)]
pub fn attacks(piece: Piece, sq: Square, occupied: Bitboard) -> Bitboard {
    match piece.role {
        Role::King => king_attacks(sq),
        Role::Queen => queen_attacks(sq, occupied),
        Role::Rook => rook_attacks(sq, occupied),
        Role::Bishop => bishop_attacks(sq, occupied),
        Role::Knight => knight_attacks(sq),
        Role::Pawn => pawn_attacks(piece.color, sq),
    }
}

/// The squares strictly between `a` and `b` if they share a rank, file or diagonal; empty
/// otherwise (and for `a == b`).
#[inline]
pub fn between(a: Square, b: Square) -> Bitboard {
    Bitboard(BETWEEN[a.index()][b.index()])
}

/// The whole line (edge to edge) through `a` and `b` if they share a rank, file or diagonal;
/// empty otherwise (and for `a == b`).
#[inline]
pub fn ray(a: Square, b: Square) -> Bitboard {
    Bitboard(LINE[a.index()][b.index()])
}

/// True if `c` lies on the line through `a` and `b` (which must be aligned for this to hold).
#[inline]
pub fn aligned(a: Square, b: Square, c: Square) -> bool {
    ray(a, b).contains(c)
}

/// The squares a man like `piece` attacks from any square of `from`, at once: the union of
/// [`attacks`] over the squares of `from` (which should not be in `occupied`), with the same
/// `occupied`. Sliders by occluded fills along each direction (Kogge-Stone), knights and kings
/// by shifts: a few dozen word operations for any number of squares.
#[inline]
pub fn attacks_from_set(piece: Piece, from: Bitboard, occupied: Bitboard) -> Bitboard {
    let f = from.0;
    let empty = !occupied.0;
    Bitboard(match piece.role {
        Role::King => {
            let sides = shift(f, 1, NOT_FILE_A) | shift(f, -1, NOT_FILE_H);
            let row = f | sides;
            sides | row << 8 | row >> 8
        }
        Role::Knight => {
            let one = shift(f, 1, NOT_FILE_A) | shift(f, -1, NOT_FILE_H);
            let two = shift(f, 2, NOT_FILE_AB) | shift(f, -2, NOT_FILE_GH);
            one << 16 | one >> 16 | two << 8 | two >> 8
        }
        Role::Pawn => pawn_attacks_all(piece.color, from).0,
        Role::Rook => rook_fill(f, empty),
        Role::Bishop => bishop_fill(f, empty),
        Role::Queen => rook_fill(f, empty) | bishop_fill(f, empty),
    })
}

const NOT_FILE_A: u64 = !0x0101_0101_0101_0101;
const NOT_FILE_H: u64 = !0x8080_8080_8080_8080;
const NOT_FILE_AB: u64 = !0x0303_0303_0303_0303;
const NOT_FILE_GH: u64 = !0xc0c0_c0c0_c0c0_c0c0;

/// `b` moved by `by` squares (up when positive), keeping only the squares of `keep` (the
/// files a move in that direction can land on).
#[inline(always)]
fn shift(b: u64, by: i32, keep: u64) -> u64 {
    (if by >= 0 { b << by } else { b >> -by }) & keep
}

/// The squares attacked from `gen` in direction `by` (one step; `keep` its landing files),
/// through the squares of `empty`: the occluded fill, then one step more onto the blocker.
#[inline(always)]
fn ray_fill(mut gen: u64, empty: u64, by: i32, keep: u64) -> u64 {
    let mut pro = empty & keep;
    gen |= pro & shift(gen, by, u64::MAX);
    pro &= shift(pro, by, u64::MAX);
    gen |= pro & shift(gen, 2 * by, u64::MAX);
    pro &= shift(pro, 2 * by, u64::MAX);
    gen |= pro & shift(gen, 4 * by, u64::MAX);
    shift(gen, by, keep)
}

#[inline(always)]
fn rook_fill(f: u64, empty: u64) -> u64 {
    ray_fill(f, empty, 8, u64::MAX)
        | ray_fill(f, empty, -8, u64::MAX)
        | ray_fill(f, empty, 1, NOT_FILE_A)
        | ray_fill(f, empty, -1, NOT_FILE_H)
}

#[inline(always)]
fn bishop_fill(f: u64, empty: u64) -> u64 {
    ray_fill(f, empty, 9, NOT_FILE_A)
        | ray_fill(f, empty, 7, NOT_FILE_H)
        | ray_fill(f, empty, -7, NOT_FILE_A)
        | ray_fill(f, empty, -9, NOT_FILE_H)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// xorshift64: a tiny deterministic generator for test occupancies.
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            x
        }
    }

    fn sq(s: &str) -> Square {
        Square::parse(s).unwrap()
    }

    /// Slider attacks by walking each direction square by square.
    fn naive_slider(sq: Square, occupied: Bitboard, dirs: &[(i8, i8)]) -> Bitboard {
        let mut result = Bitboard::EMPTY;
        for &(df, dr) in dirs {
            let (mut f, mut r) = (sq.file() as i8, sq.rank() as i8);
            loop {
                f += df;
                r += dr;
                if !(0..8).contains(&f) || !(0..8).contains(&r) {
                    break;
                }
                let to = Square::from_coords(f as u8, r as u8);
                result = result.with(to);
                if occupied.contains(to) {
                    break;
                }
            }
        }
        result
    }

    const ROOK_DIRS: [(i8, i8); 4] = [(0, 1), (0, -1), (1, 0), (-1, 0)];
    const BISHOP_DIRS: [(i8, i8); 4] = [(1, 1), (1, -1), (-1, 1), (-1, -1)];

    #[test]
    fn sliders_match_naive_walk_on_random_occupancies() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        for round in 0..2000 {
            // Mix dense and sparse boards.
            let occupied = match round % 3 {
                0 => Bitboard(rng.next()),
                1 => Bitboard(rng.next() & rng.next()),
                _ => Bitboard(rng.next() & rng.next() & rng.next()),
            };
            for s in Square::all() {
                let rook = naive_slider(s, occupied, &ROOK_DIRS);
                let bishop = naive_slider(s, occupied, &BISHOP_DIRS);
                assert_eq!(rook_attacks(s, occupied), rook, "rook on {s} with {occupied:?}");
                assert_eq!(
                    bishop_attacks(s, occupied),
                    bishop,
                    "bishop on {s} with {occupied:?}"
                );
                assert_eq!(queen_attacks(s, occupied), rook | bishop, "queen on {s}");
            }
        }
    }

    #[test]
    fn sliders_on_empty_and_full_boards() {
        for s in Square::all() {
            assert_eq!(rook_attacks(s, Bitboard::EMPTY).count(), 14);
            assert_eq!(
                rook_attacks(s, Bitboard::ALL),
                king_attacks(s) & rook_attacks(s, Bitboard::EMPTY)
            );
            assert_eq!(
                bishop_attacks(s, Bitboard::ALL),
                king_attacks(s) & bishop_attacks(s, Bitboard::EMPTY)
            );
        }
        assert_eq!(bishop_attacks(sq("a1"), Bitboard::EMPTY).count(), 7);
        assert_eq!(bishop_attacks(sq("d4"), Bitboard::EMPTY).count(), 13);
    }

    #[test]
    fn leaper_tables() {
        let knight: u32 = Square::all().map(|s| knight_attacks(s).count()).sum();
        let king: u32 = Square::all().map(|s| king_attacks(s).count()).sum();
        assert_eq!(knight, 336);
        assert_eq!(king, 420);
        assert_eq!(knight_attacks(sq("a1")), sq("b3").bb() | sq("c2").bb());
        assert_eq!(
            king_attacks(sq("h8")),
            sq("g8").bb() | sq("g7").bb() | sq("h7").bb()
        );
        assert_eq!(
            pawn_attacks(Color::White, sq("e4")),
            sq("d5").bb() | sq("f5").bb()
        );
        assert_eq!(
            pawn_attacks(Color::Black, sq("e4")),
            sq("d3").bb() | sq("f3").bb()
        );
        assert_eq!(pawn_attacks(Color::White, sq("a2")), sq("b3").bb());
        assert_eq!(pawn_attacks(Color::Black, sq("h7")), sq("g6").bb());
        assert!(pawn_attacks(Color::White, sq("c8")).is_empty());
        assert!(pawn_attacks(Color::Black, sq("c1")).is_empty());
    }

    #[test]
    fn pawn_attacks_all_is_the_union_of_single_pawns() {
        let mut rng = XorShift(12345);
        for _ in 0..500 {
            let pawns = Bitboard(rng.next() & rng.next());
            for color in Color::ALL {
                let union = pawns
                    .into_iter()
                    .fold(Bitboard::EMPTY, |acc, s| acc | pawn_attacks(color, s));
                assert_eq!(pawn_attacks_all(color, pawns), union);
            }
        }
    }

    #[test]
    fn attacks_dispatches_by_role() {
        let occ = sq("d6").bb() | sq("f4").bb();
        let d4 = sq("d4");
        let white = |role| Piece::new(Color::White, role);
        assert_eq!(attacks(white(Role::Rook), d4, occ), rook_attacks(d4, occ));
        assert_eq!(attacks(white(Role::Bishop), d4, occ), bishop_attacks(d4, occ));
        assert_eq!(attacks(white(Role::Queen), d4, occ), queen_attacks(d4, occ));
        assert_eq!(attacks(white(Role::Knight), d4, occ), knight_attacks(d4));
        assert_eq!(attacks(white(Role::King), d4, occ), king_attacks(d4));
        assert_eq!(
            attacks(white(Role::Pawn), d4, occ),
            pawn_attacks(Color::White, d4)
        );
        assert_eq!(
            attacks(Piece::new(Color::Black, Role::Pawn), d4, occ),
            pawn_attacks(Color::Black, d4)
        );
    }

    #[test]
    fn between_and_ray_match_naive_lines() {
        let all_dirs: Vec<(i8, i8)> = ROOK_DIRS.iter().chain(BISHOP_DIRS.iter()).copied().collect();
        for a in Square::all() {
            for b in Square::all() {
                // b is aligned with a iff some direction from a reaches b on an empty board.
                let dir = all_dirs
                    .iter()
                    .copied()
                    .find(|&d| naive_slider(a, Bitboard::EMPTY, &[d]).contains(b));
                match dir {
                    Some((df, dr)) => {
                        let expected_between = naive_slider(a, b.bb(), &[(df, dr)]).without(b);
                        assert_eq!(between(a, b), expected_between, "between {a} {b}");
                        assert_eq!(between(a, b), between(b, a));
                        let line = naive_slider(a, Bitboard::EMPTY, &[(df, dr), (-df, -dr)]).with(a);
                        assert_eq!(ray(a, b), line, "ray {a} {b}");
                        assert!(ray(a, b).contains(a) && ray(a, b).contains(b));
                        assert!(aligned(a, b, a));
                    }
                    None => {
                        assert!(between(a, b).is_empty(), "between {a} {b}");
                        assert!(ray(a, b).is_empty(), "ray {a} {b}");
                    }
                }
            }
        }
        assert_eq!(between(sq("a1"), sq("h8")).count(), 6);
        assert_eq!(between(sq("e1"), sq("e8")).count(), 6);
        assert!(between(sq("e1"), sq("e2")).is_empty());
        assert!(between(sq("a1"), sq("b3")).is_empty());
        assert_eq!(ray(sq("c1"), sq("d2")).count(), 6);
    }

    /// Attacks from a set of squares are the union of each square's, for every man, on random
    /// sets and occupancies (the set's squares left empty, as the callers leave them).
    #[test]
    fn attacks_from_a_set_are_the_union_of_each_squares() {
        let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
        for round in 0..3000 {
            let occupied = match round % 3 {
                0 => Bitboard(rng.next()),
                1 => Bitboard(rng.next() & rng.next()),
                _ => Bitboard(rng.next() & rng.next() & rng.next()),
            };
            let from = match round % 4 {
                0 => Bitboard(1 << (rng.next() % 64)),
                1 => Bitboard(rng.next()),
                _ => Bitboard(rng.next() & rng.next()),
            } & !occupied;
            for role in Role::ALL {
                for color in [Color::White, Color::Black] {
                    let piece = Piece::new(color, role);
                    let union = from
                        .into_iter()
                        .fold(Bitboard::EMPTY, |acc, s| acc | attacks(piece, s, occupied));
                    assert_eq!(
                        attacks_from_set(piece, from, occupied),
                        union,
                        "{piece:?} from {from:?} with {occupied:?}"
                    );
                }
            }
        }
    }
}
