//! Materials (which men are on the board) and their slices, derived from the table format's
//! rules, not from `zermelo_chess`.

use std::fmt;

use super::board::{Color, BISHOP, KIND_LETTERS, KING, KNIGHT, PAWN, QUEEN, ROOK};

/// The groups of an index (the men of one colour and kind other than kings and pawns), in field
/// order from most to least significant: knights, bishops, rooks, queens, Black's group of a
/// kind before White's. White's queens are the least significant field.
pub(super) const GROUP_ORDER: [(Color, u8); 8] = [
    (Color::Black, KNIGHT),
    (Color::White, KNIGHT),
    (Color::Black, BISHOP),
    (Color::White, BISHOP),
    (Color::Black, ROOK),
    (Color::White, ROOK),
    (Color::Black, QUEEN),
    (Color::White, QUEEN),
];

/// How many men of each kind each side has: `counts[colour][kind]`, kinds in "KQRBNP" order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Material {
    counts: [[u8; 6]; 2],
}

/// Why a material name was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaterialNameError {
    /// Not exactly one `v` between the sides.
    NoSeparator,
    /// A letter other than K, Q, R, B, N, P (any case).
    BadLetter(char),
    /// A side without exactly one king.
    Kings,
    /// More than 8 pawns or 9 other men on a side: no index can hold that.
    TooMany,
    /// Bare kings: always a draw, there is no table.
    BareKings,
}

impl fmt::Display for MaterialNameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MaterialNameError::NoSeparator => f.write_str("expected two sides separated by one 'v'"),
            MaterialNameError::BadLetter(c) => write!(f, "{c:?} is not one of K, Q, R, B, N, P"),
            MaterialNameError::Kings => f.write_str("each side needs exactly one king"),
            MaterialNameError::TooMany => f.write_str("too many men on one side"),
            MaterialNameError::BareKings => f.write_str("bare kings are always a draw and have no table"),
        }
    }
}

impl Material {
    /// Parses a name such as `"KRPvKR"`, in any case and any order within a side. The result is
    /// what was written, not yet normalized.
    pub(super) fn parse(name: &str) -> Result<Material, MaterialNameError> {
        let upper = name.to_ascii_uppercase();
        let sides: Vec<&str> = upper.split('V').collect();
        let [white, black] = sides[..] else {
            return Err(MaterialNameError::NoSeparator);
        };
        let mut counts = [[0u8; 6]; 2];
        for (side, letters) in [white, black].into_iter().enumerate() {
            for ch in letters.chars() {
                let kind = KIND_LETTERS
                    .iter()
                    .position(|&l| l as char == ch)
                    .ok_or(MaterialNameError::BadLetter(ch))?;
                counts[side][kind] = counts[side][kind].saturating_add(1);
            }
            if counts[side][usize::from(KING)] != 1 {
                return Err(MaterialNameError::Kings);
            }
            let pieces: u8 = counts[side][..usize::from(PAWN)].iter().sum();
            if counts[side][usize::from(PAWN)] > 8 || pieces > 9 {
                return Err(MaterialNameError::TooMany);
            }
        }
        let material = Material { counts };
        if material.is_bare_kings() {
            return Err(MaterialNameError::BareKings);
        }
        Ok(material)
    }

    /// The material with these counts (`counts[colour][kind]`).
    pub(super) fn from_counts(counts: [[u8; 6]; 2]) -> Material {
        Material { counts }
    }

    pub(super) fn count(&self, color: Color, kind: u8) -> u8 {
        self.counts[color.index()][usize::from(kind)]
    }

    pub(super) fn is_bare_kings(&self) -> bool {
        self.counts.iter().all(|side| side[1..].iter().all(|&n| n == 0))
    }

    pub(super) fn has_pawns(&self) -> bool {
        self.count(Color::White, PAWN) + self.count(Color::Black, PAWN) > 0
    }

    /// Whether the table orientation has the colours the other way round. Syzygy's rule: the
    /// first side has more men; with as many, its letters (as indices in "KQRBNP") are
    /// lexicographically no larger.
    ///
    /// Two sorted lists of equal length first differ at the first kind whose counts differ, and
    /// the list with more of that kind is the smaller there: so with as many men a side, Black
    /// comes first iff it has more of the first kind where the counts differ.
    pub(super) fn needs_swap(&self) -> bool {
        let [w, b] = self.counts;
        let (wn, bn) = (w.iter().sum::<u8>(), b.iter().sum::<u8>());
        if wn != bn {
            return wn < bn;
        }
        match (0..6).find(|&k| w[k] != b[k]) {
            Some(k) => b[k] > w[k],
            None => false,
        }
    }

    /// The same men with the colours exchanged.
    pub(super) fn swapped(&self) -> Material {
        Material {
            counts: [self.counts[1], self.counts[0]],
        }
    }

    /// The table orientation of this material.
    pub(super) fn normalized(&self) -> Material {
        if self.needs_swap() {
            self.swapped()
        } else {
            *self
        }
    }

    /// The groups of the material, in field order: `(colour, kind, men)` for each colour and
    /// kind of [`GROUP_ORDER`] that the material has.
    pub(super) fn groups(self) -> impl Iterator<Item = (Color, u8, u8)> {
        GROUP_ORDER
            .into_iter()
            .map(move |(color, kind)| (color, kind, self.count(color, kind)))
            .filter(|&(_, _, men)| men > 0)
    }

    /// True if `key` is one of [`canonical_keys`](Material::canonical_keys), without listing
    /// them: as many pawns of each colour as the material has, on ranks 2 to 7, no square taken
    /// twice, and the key no greater than its mirror image.
    pub(super) fn is_canonical_key(&self, key: [u64; 2]) -> bool {
        const RANKS_2_TO_7: u64 = 0x00ff_ffff_ffff_ff00;
        let wanted = [self.count(Color::White, PAWN), self.count(Color::Black, PAWN)];
        key[0].count_ones() == u32::from(wanted[0])
            && key[1].count_ones() == u32::from(wanted[1])
            && (key[0] | key[1]) & !RANKS_2_TO_7 == 0
            && key[0] & key[1] == 0
            && key <= [mirror(key[0]), mirror(key[1])]
    }

    /// Every canonical slice key of this material, sorted.
    pub(super) fn canonical_keys(&self) -> Vec<[u64; 2]> {
        let mut keys = Vec::new();
        let wanted = [self.count(Color::White, PAWN), self.count(Color::Black, PAWN)];
        let mut key = [0u64; 2];
        place_pawns(&mut key, wanted, 0, 8, &mut |key| {
            if key <= [mirror(key[0]), mirror(key[1])] {
                keys.push(key);
            }
        });
        keys.sort_unstable();
        keys
    }
}

/// Puts the remaining pawns of side `side` (then Black's) on squares from `from` up to 55, in
/// every way, calling `f` with each complete key.
fn place_pawns(key: &mut [u64; 2], left: [u8; 2], side: usize, from: u8, f: &mut impl FnMut([u64; 2])) {
    if side == 2 {
        f(*key);
        return;
    }
    if left[side] == 0 {
        place_pawns(key, left, side + 1, 8, f);
        return;
    }
    for sq in from..56 {
        let bit = 1u64 << sq;
        if (key[0] | key[1]) & bit != 0 {
            continue;
        }
        key[side] |= bit;
        let mut rest = left;
        rest[side] -= 1;
        place_pawns(key, rest, side, sq + 1, f);
        key[side] &= !bit;
    }
}

/// A square set mirrored left to right (file a <-> h).
pub(super) fn mirror(bb: u64) -> u64 {
    // reverse_bits maps square i to 63 - i (both files and ranks flipped); swap_bytes flips the
    // ranks back.
    bb.reverse_bits().swap_bytes()
}

impl fmt::Display for Material {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for color in [Color::White, Color::Black] {
            if color == Color::Black {
                f.write_str("v")?;
            }
            for kind in 0..6u8 {
                for _ in 0..self.count(color, kind) {
                    write!(f, "{}", KIND_LETTERS[usize::from(kind)] as char)?;
                }
            }
        }
        Ok(())
    }
}

/// A slice key shown as its pawns: `wP a2 b3, bP c7`, or `no pawns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pawns(pub [u64; 2]);

impl fmt::Display for Pawns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == [0, 0] {
            return f.write_str("no pawns");
        }
        let mut first = true;
        for (side, name) in [(0, "wP"), (1, "bP")] {
            if self.0[side] == 0 {
                continue;
            }
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            f.write_str(name)?;
            for sq in (0..64u8).filter(|&s| self.0[side] >> s & 1 == 1) {
                write!(f, " {}{}", (b'a' + sq % 8) as char, sq / 8 + 1)?;
            }
        }
        Ok(())
    }
}
