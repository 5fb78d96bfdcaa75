//! The position index of layout 2, both ways: where a position's value is stored
//! ([`locate`]) and which position an index stands for ([`decode`]).

use super::board::{Color, Position, KING, PAWN};
use super::material::{mirror, Material};

/// The index layout this verifier reads.
pub(super) const LAYOUT: u32 = 2;

/// The squares White's king may stand on in a pawnless table (the triangle a1-d1-d4), in the order
/// of its field: by rank, then by file.
const TRIANGLE: [u8; 10] = [0, 1, 2, 3, 9, 10, 11, 18, 19, 27];

/// The field of White's king on a square of [`TRIANGLE`] (by square, 0..32; `u8::MAX` off it).
const TRIANGLE_FIELD: [u8; 32] = {
    let mut fields = [u8::MAX; 32];
    let mut i = 0;
    while i < TRIANGLE.len() {
        fields[TRIANGLE[i] as usize] = i as u8;
        i += 1;
    }
    fields
};

/// A square (0..64) mirrored in the a1-h8 diagonal: file and rank exchanged.
fn transpose(sq: u8) -> u8 {
    (sq & 7) << 3 | sq >> 3
}

/// More men than any material [`Material::parse`] accepts (9 pieces and 8 pawns a side).
const MAX_MEN: usize = 40;

/// Where a position's value lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Location {
    /// Bare kings: a draw, in no table.
    BareKings,
    /// Index `index` of the slice `key` of the table of `material` (normalized).
    Stored {
        material: Material,
        key: [u64; 2],
        index: u64,
    },
}

/// Where the value of `pos` (which must have no en-passant square) is stored.
///
/// The men are put in table orientation: colours swapped if the material is not normalized;
/// then with pawns the board is mirrored left to right if the pawn key is not canonical; without
/// pawns it is mirrored so that White's king is on files a-d, then on ranks 1-4, then (if the king
/// stands above the a1-h8 diagonal) in that diagonal, which puts the king on the triangle
/// a1-d1-d4. A king on the diagonal itself leaves the position as it is: the position and its
/// mirror image in the diagonal are both stored, at two indices. Men of one kind take their fields
/// in ascending square order (after the symmetries).
pub(super) fn locate(pos: &Position) -> Location {
    debug_assert!(
        pos.ep().is_none(),
        "a position with an en-passant square is not stored"
    );
    // (colour, kind, square) of each man.
    let mut men = [(Color::White, 0u8, 0u8); MAX_MEN];
    let mut n = 0;
    let mut counts = [[0u8; 6]; 2];
    pos.for_each_man(|color, kind, sq| {
        men[n] = (color, kind, sq);
        n += 1;
        counts[color.index()][usize::from(kind)] += 1;
    });
    let men = &mut men[..n];
    let mut material = Material::from_counts(counts);
    if material.is_bare_kings() {
        return Location::BareKings;
    }
    let mut turn = pos.turn();
    if material.needs_swap() {
        material = material.swapped();
        turn = turn.other();
        for man in men.iter_mut() {
            *man = (man.0.other(), man.1, man.2 ^ 56);
        }
    }

    let mut key = [0u64; 2];
    for &(color, kind, sq) in men.iter() {
        if kind == PAWN {
            key[color.index()] |= 1 << sq;
        }
    }
    let mut flip = 0u8;
    let mut transposed = false;
    if material.has_pawns() {
        let mirrored = [mirror(key[0]), mirror(key[1])];
        if mirrored < key {
            key = mirrored;
            flip = 7;
        }
    } else {
        let wk = men
            .iter()
            .find(|m| m.0 == Color::White && m.1 == KING)
            .map_or(0, |m| m.2);
        if wk % 8 >= 4 {
            flip ^= 7;
        }
        if (wk ^ flip) / 8 >= 4 {
            flip ^= 56;
        }
        let k = wk ^ flip;
        transposed = k / 8 > k % 8; // above the a1-h8 diagonal
    }
    let orient = |sq: u8| {
        let sq = sq ^ flip;
        if transposed {
            transpose(sq)
        } else {
            sq
        }
    };

    // Sort keys `(colour, kind, square)` packed in a u16; pawns have no field.
    let mut order = [0u16; MAX_MEN];
    let mut m = 0;
    for &(color, kind, sq) in men.iter() {
        if kind != PAWN {
            order[m] = (color as u16) << 9 | u16::from(kind) << 6 | u16::from(orient(sq));
            m += 1;
        }
    }
    let order = &mut order[..m];
    order.sort_unstable();
    let mut fields = 0u64;
    for (i, &o) in order.iter().enumerate() {
        let sq = u64::from(o & 63);
        fields = if i == 0 && !material.has_pawns() {
            // White's king, on the triangle: its place in TRIANGLE.
            let field = TRIANGLE_FIELD[sq as usize];
            debug_assert!(field < 10, "the symmetries put White's king on the triangle");
            u64::from(field)
        } else {
            fields * 64 + sq
        };
    }
    let index = turn.index() as u64 * material.per_side() + fields;
    Location::Stored { material, key, index }
}

/// What an index of a slice stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Decoded {
    /// A position (legal or not: ask [`Position::is_legal`]).
    Position(Position),
    /// Two men on one square (numbered 0..64): not a position at all.
    Collision { square: u8 },
}

/// Turns the indices of one slice into positions.
pub(super) struct Decoder {
    /// The men with a field, in field order.
    kinds: Vec<(Color, u8)>,
    /// The pawns of the slice, as `(colour, PAWN, square)`.
    pawns: Vec<(Color, u8, u8)>,
    /// The squares the pawns stand on.
    pawn_squares: u64,
    per_side: u64,
    pawnless: bool,
}

impl Decoder {
    /// The decoder of slice `key` of `material` (normalized). Pawns must stand on distinct
    /// squares of ranks 2 to 7, as in every canonical key.
    pub(super) fn new(material: &Material, key: [u64; 2]) -> Decoder {
        debug_assert!(key[0] & key[1] == 0 && (key[0] | key[1]) & 0xff00_0000_0000_00ff == 0);
        let mut pawns = Vec::new();
        for side in [Color::White, Color::Black] {
            for sq in (0..64u8).filter(|&s| key[side.index()] >> s & 1 == 1) {
                pawns.push((side, PAWN, sq));
            }
        }
        Decoder {
            kinds: material.indexed_men(),
            pawns,
            pawn_squares: key[0] | key[1],
            per_side: material.per_side(),
            pawnless: !material.has_pawns(),
        }
    }

    /// The number of indices in the slice.
    pub(super) fn len(&self) -> u64 {
        2 * self.per_side
    }

    /// The position at `index` (below [`len`](Decoder::len)).
    pub(super) fn decode(&self, index: u64) -> Decoded {
        debug_assert!(index < self.len());
        let turn = if index < self.per_side {
            Color::White
        } else {
            Color::Black
        };
        let mut rest = index % self.per_side;
        let mut men = [(Color::White, 0u8, 0u8); MAX_MEN];
        let n = self.kinds.len();
        for i in (0..n).rev() {
            let sq = if i == 0 && self.pawnless {
                // 0..10: the king's place in TRIANGLE.
                TRIANGLE[rest as usize]
            } else {
                let sq = (rest % 64) as u8;
                rest /= 64;
                sq
            };
            men[i] = (self.kinds[i].0, self.kinds[i].1, sq);
        }
        let mut taken = self.pawn_squares;
        for &(_, _, sq) in &men[..n] {
            if taken >> sq & 1 == 1 {
                return Decoded::Collision { square: sq };
            }
            taken |= 1 << sq;
        }
        men[n..n + self.pawns.len()].copy_from_slice(&self.pawns);
        let pos = Position::from_men(&men[..n + self.pawns.len()], turn);
        // Men on distinct squares, one king a side, pawns on ranks 2-7 (as in every canonical key).
        Decoded::Position(pos.expect("a canonical key and distinct squares make a position"))
    }
}
