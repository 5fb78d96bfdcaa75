//! Materials, named as Syzygy names them: `KRPvKR`.

use std::fmt;
use std::str::FromStr;

use crate::position::Board;
use crate::types::{Color, Piece, Role};

/// How many men of each kind each side has.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Material {
    /// `counts[color][role]`, roles in K Q R B N P order.
    counts: [[u8; 6]; 2],
}

/// Why a material name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MaterialError {
    #[error("material name '{0}' has no 'v' between the two sides (expected e.g. KRPvKR)")]
    NoSeparator(String),
    #[error("material name '{name}' has an unknown piece letter '{letter}' (use K Q R B N P)")]
    UnknownPiece { name: String, letter: char },
    #[error("material name '{name}': {side} has no king")]
    NoKing { name: String, side: &'static str },
    #[error("material name '{name}': {side} has more than one king")]
    ManyKings { name: String, side: &'static str },
    #[error("material '{0}' has only the two kings: it is a draw and not a table")]
    BareKings(String),
    #[error("material '{name}' has {men} men; at most {max} are supported")]
    TooManyMen { name: String, men: u32, max: u32 },
    #[error("material name '{name}': {side} has more than 8 pawns")]
    TooManyPawns { name: String, side: &'static str },
}

impl Material {
    /// The material of a board.
    pub fn of(board: &Board) -> Material {
        let mut counts = [[0u8; 6]; 2];
        for c in Color::ALL {
            for r in Role::ALL {
                counts[c.index()][r.index()] = board.by_piece(Piece::new(c, r)).count() as u8;
            }
        }
        Material { counts }
    }

    /// Builds a material from counts, `counts[color][role]`.
    pub const fn from_counts(counts: [[u8; 6]; 2]) -> Material {
        Material { counts }
    }

    #[inline]
    pub const fn count(&self, c: Color, r: Role) -> u8 {
        self.counts[c as usize][r as usize]
    }

    /// Number of men of both sides.
    pub fn men(&self) -> u32 {
        self.counts.iter().flatten().map(|&n| n as u32).sum()
    }

    pub fn pawns(&self) -> u32 {
        (self.count(Color::White, Role::Pawn) + self.count(Color::Black, Role::Pawn)) as u32
    }

    pub fn has_pawns(&self) -> bool {
        self.pawns() > 0
    }

    /// True if both sides have the same men (KPvKP, KRvKR).
    pub fn is_symmetric(&self) -> bool {
        self.counts[0] == self.counts[1]
    }

    /// True for KvK, which has no table (always a draw).
    pub fn is_bare_kings(&self) -> bool {
        self.men() == 2
            && self.count(Color::White, Role::King) == 1
            && self.count(Color::Black, Role::King) == 1
    }

    /// The same men with the colours swapped.
    pub fn flipped(&self) -> Material {
        Material {
            counts: [self.counts[1], self.counts[0]],
        }
    }

    /// The men other than pawns, kings first: White's K Q R B N, then Black's K Q R B N.
    /// This is the order of the fields of the position index.
    pub fn non_pawn_men(&self) -> Vec<Piece> {
        let mut v = Vec::new();
        for c in Color::ALL {
            for r in Role::ALL {
                if r != Role::Pawn {
                    for _ in 0..self.count(c, r) {
                        v.push(Piece::new(c, r));
                    }
                }
            }
        }
        v
    }

    /// The material after `c` loses one man of role `r`.
    pub fn without(&self, c: Color, r: Role) -> Material {
        let mut m = *self;
        debug_assert!(m.counts[c.index()][r.index()] > 0);
        m.counts[c.index()][r.index()] -= 1;
        m
    }

    /// The material after `c` gains one man of role `r`.
    pub fn with(&self, c: Color, r: Role) -> Material {
        let mut m = *self;
        m.counts[c.index()][r.index()] += 1;
        m
    }

    fn side_string(&self, c: Color) -> String {
        let mut s = String::new();
        for r in Role::ALL {
            for _ in 0..self.count(c, r) {
                s.push(r.upper());
            }
        }
        s
    }

    /// True if this material is in its table orientation: the stronger side is White.
    ///
    /// The rule is Syzygy's: the side with more men comes first; with as many men, the side whose
    /// men, listed K Q R B N P, compare smaller (stronger) comes first.
    #[inline]
    pub fn is_normalized(&self) -> bool {
        let w = &self.counts[0];
        let b = &self.counts[1];
        let (wn, bn): (u32, u32) = (
            w.iter().map(|&n| n as u32).sum(),
            b.iter().map(|&n| n as u32).sum(),
        );
        if wn != bn {
            return wn > bn;
        }
        // Equal length: compare the sorted role lists. The first role where the counts differ
        // decides: the side with more of that (earlier, stronger) role has the smaller list.
        for r in 0..6 {
            if w[r] != b[r] {
                return w[r] > b[r];
            }
        }
        true
    }

    /// The table orientation of this material, and whether the colours had to be swapped.
    pub fn normalized(&self) -> (Material, bool) {
        if self.is_normalized() {
            (*self, false)
        } else {
            (self.flipped(), true)
        }
    }

    /// Every material of 3 to `max_men` men in its table orientation (each once: a symmetric
    /// one, such as KPvKP, is its own flip), fewer men first, then by name: the tables a full
    /// set up to `max_men` men holds.
    pub fn all(max_men: u32) -> Vec<Material> {
        // Each side's men besides its king: counts of Q R B N P summing to at most `left`.
        fn sides(left: u32, role: usize, counts: &mut [u8; 6], out: &mut Vec<[u8; 6]>) {
            if role == 6 {
                out.push(*counts);
                return;
            }
            for n in 0..=left {
                counts[role] = n as u8;
                sides(left - n, role + 1, counts, out);
            }
            counts[role] = 0;
        }
        let left = max_men.saturating_sub(2);
        let mut one = Vec::new();
        sides(left, 1, &mut [1, 0, 0, 0, 0, 0], &mut one);
        // Each pair of sides once: of a pair and its flip only the normalized one (a symmetric
        // pair is its own flip).
        let mut all: Vec<Material> = one
            .iter()
            .flat_map(|w| one.iter().map(move |b| Material::from_counts([*w, *b])))
            .filter(|m| (3..=max_men).contains(&m.men()) && m.is_normalized())
            .collect();
        all.sort_by_cached_key(|m| (m.men(), m.to_string()));
        all
    }

    /// Parses a material name in any case and side order and returns it normalized,
    /// checking that it is a table this build supports (at most `max_men` men).
    pub fn parse_table(s: &str, max_men: u32) -> Result<Material, MaterialError> {
        let m: Material = s.parse()?;
        if m.is_bare_kings() {
            return Err(MaterialError::BareKings(s.to_string()));
        }
        if m.men() > max_men {
            return Err(MaterialError::TooManyMen {
                name: m.to_string(),
                men: m.men(),
                max: max_men,
            });
        }
        Ok(m)
    }
}

impl FromStr for Material {
    type Err = MaterialError;

    /// Parses `KRPvKR`, `krvkqp`, `RKPvRK`...; the result is normalized (stronger side White).
    fn from_str(s: &str) -> Result<Material, MaterialError> {
        let trimmed = s.trim();
        let lower = trimmed.to_ascii_lowercase();
        let Some(pos) = lower.find('v') else {
            return Err(MaterialError::NoSeparator(s.to_string()));
        };
        let (w, b) = (&lower[..pos], &lower[pos + 1..]);
        let mut counts = [[0u8; 6]; 2];
        for (side, text) in [(0usize, w), (1usize, b)] {
            for ch in text.chars() {
                let role = Role::from_char(ch).ok_or_else(|| MaterialError::UnknownPiece {
                    name: s.to_string(),
                    letter: ch,
                })?;
                let n = &mut counts[side][role.index()];
                *n = n.saturating_add(1);
            }
        }
        for (side, name) in [(0usize, "the first side"), (1usize, "the second side")] {
            match counts[side][Role::King.index()] {
                0 => {
                    return Err(MaterialError::NoKing {
                        name: s.to_string(),
                        side: name,
                    })
                }
                1 => {}
                _ => {
                    return Err(MaterialError::ManyKings {
                        name: s.to_string(),
                        side: name,
                    })
                }
            }
            if counts[side][Role::Pawn.index()] > 8 {
                return Err(MaterialError::TooManyPawns {
                    name: s.to_string(),
                    side: name,
                });
            }
        }
        Ok(Material { counts }.normalized().0)
    }
}

impl fmt::Display for Material {
    /// `KRPvKR`, White's men first.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}v{}",
            self.side_string(Color::White),
            self.side_string(Color::Black)
        )
    }
}

impl fmt::Debug for Material {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Material({self})")
    }
}

#[cfg(test)]
mod tests {

    /// A full set: 5 tables of 3 men, 30 of 4, 110 of 5, 365 of 6, 1,001 of 7 (the sizes of
    /// the Syzygy sets, counted by hand: with k men besides the kings, the multisets of Q R B N
    /// P split between the sides, each unordered pair of sides once), each in table
    /// orientation, named once, and read back from its name.
    #[test]
    fn all_materials_are_a_full_set() {
        let all = Material::all(7);
        let by_men: Vec<usize> = (3..=7)
            .map(|n| all.iter().filter(|m| m.men() == n).count())
            .collect();
        assert_eq!(by_men, [5, 30, 110, 365, 1001]);
        let names: std::collections::BTreeSet<String> = all.iter().map(|m| m.to_string()).collect();
        assert_eq!(names.len(), all.len());
        for m in &all {
            assert!(m.is_normalized(), "{m}");
            assert_eq!(m.to_string().parse::<Material>().unwrap(), *m);
        }
        assert_eq!(Material::all(5).len(), 145);
        assert_eq!(Material::all(5)[..5], all[..5]);
        assert!(Material::all(2).is_empty());
        let first: Vec<String> = Material::all(3).iter().map(|m| m.to_string()).collect();
        assert_eq!(first, ["KBvK", "KNvK", "KPvK", "KQvK", "KRvK"]);
    }

    use super::*;

    #[test]
    fn parses_and_normalizes_names() {
        for (input, normal) in [
            ("KRPvKR", "KRPvKR"),
            ("krvkqp", "KQPvKR"),
            ("KvKP", "KPvK"),
            ("KRvKQ", "KQvKR"),
            ("kqvkr", "KQvKR"),
            ("PKvK", "KPvK"),
            ("KPvKP", "KPvKP"),
            ("KNvKB", "KBvKN"),
            ("KBNvK", "KBNvK"),
            ("KvKBN", "KBNvK"),
            ("KRvKPP", "KPPvKR"),
            ("KNNvKQ", "KNNvKQ"),
        ] {
            let m: Material = input.parse().unwrap();
            assert_eq!(m.to_string(), normal, "{input}");
            assert!(m.is_normalized());
        }
    }

    #[test]
    fn refuses_bad_names() {
        assert!(matches!(
            "KXvK".parse::<Material>(),
            Err(MaterialError::UnknownPiece { letter: 'x', .. })
        ));
        assert!(matches!(
            "QvK".parse::<Material>(),
            Err(MaterialError::NoKing { .. })
        ));
        assert!(matches!(
            "KKvK".parse::<Material>(),
            Err(MaterialError::ManyKings { .. })
        ));
        assert!(matches!(
            "KQK".parse::<Material>(),
            Err(MaterialError::NoSeparator(_))
        ));
        assert!(matches!(
            Material::parse_table("KvK", 5),
            Err(MaterialError::BareKings(_))
        ));
        assert!(matches!(
            Material::parse_table("KQRvKRP", 5),
            Err(MaterialError::TooManyMen { men: 6, .. })
        ));
        assert!(Material::parse_table("KQRvKR", 5).is_ok());
    }

    #[test]
    fn counts_and_men() {
        let m: Material = "KRPvKR".parse().unwrap();
        assert_eq!(m.men(), 5);
        assert_eq!(m.pawns(), 1);
        assert_eq!(m.non_pawn_men().len(), 4);
        assert_eq!(m.without(Color::Black, Role::Rook).to_string(), "KRPvK");
    }
}
