//! One codec of slice keys between the wire ([`crate::SliceKey`]) and the chess crate's
//! [`SliceKey`], for the coordinator and the workers alike: a key from the wire is checked to name
//! a canonical slice of a table, within the bounds any chess position and index size allow.

use zermelo_chess::index::INDEX_LAYOUT;
use zermelo_chess::{Bitboard, Material, SliceKey};
use zermelo_storage::SliceHasher;

/// A wire key that is not a slice key of a table (the key as received, and why).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0} is not a slice key of a table")]
pub struct BadKey(pub String);

/// A wire slice key, checked to name a canonical slice of a table (the material in table
/// orientation, the pawns where the material says, the canonical mirror half).
pub fn from_wire(key: &crate::SliceKey) -> Result<SliceKey, BadKey> {
    from_raw(&key.material, key.raw())
}

/// [`from_wire`] for a key as storage names it: the material's name and
/// `[white pawns, black pawns]`.
pub fn from_raw(name: &str, [w, b]: [u64; 2]) -> Result<SliceKey, BadKey> {
    let bad = || BadKey(format!("{name}[w={w:#x} b={b:#x}]"));
    if name.len() > MAX_MATERIAL_NAME {
        return Err(bad());
    }
    let material: Material = name.parse().map_err(|_| bad())?;
    if material.to_string() != name || material.is_bare_kings() {
        return Err(bad());
    }
    if let Err(why) = within_bounds(&material) {
        return Err(BadKey(format!("{}: {why}", bad().0)));
    }
    use zermelo_chess::{Color, Role};
    let pawn_squares = zermelo_chess::slice::PAWN_SQUARES.0;
    if w & b != 0
        || (w | b) & !pawn_squares != 0
        || w.count_ones() != u32::from(material.count(Color::White, Role::Pawn))
        || b.count_ones() != u32::from(material.count(Color::Black, Role::Pawn))
    {
        return Err(bad());
    }
    let normal = SliceKey::normalize(material, Bitboard(w), Bitboard(b)).ok_or_else(bad)?;
    if normal.raw() != [w, b] || normal.material != material {
        return Err(bad());
    }
    Ok(normal)
}

/// The longest material name a key may carry (a chess position's is under 40 characters).
const MAX_MATERIAL_NAME: usize = 40;

/// The most indices one slice of a key may have: past every table this project can build
/// (a 7-man pawnless slice has about 10^12), far below where index sizes overflow.
pub const MAX_SLICE_INDICES: u128 = 1 << 44;

/// Refuses a material no chess position has (more than 16 men a side, 8 pawns a side), or
/// whose slices would be too large to index ([`MAX_SLICE_INDICES`], counted without overflow).
pub fn within_bounds(material: &Material) -> Result<(), String> {
    use zermelo_chess::{Color, Role};
    for color in [Color::White, Color::Black] {
        let men: u32 = Role::ALL
            .iter()
            .map(|&r| u32::from(material.count(color, r)))
            .sum();
        if men > 16 || material.count(color, Role::Pawn) > 8 {
            return Err("more men than a side can have (16, of which 8 pawns)".into());
        }
    }
    let binomial = |k: u8| -> u128 { (0..u128::from(k)).fold(1, |acc, i| acc * (64 - i) / (i + 1)) };
    let mut indices: u128 = 2 * 3612;
    for color in [Color::White, Color::Black] {
        for role in [Role::Queen, Role::Rook, Role::Bishop, Role::Knight] {
            indices = indices.saturating_mul(binomial(material.count(color, role)));
        }
    }
    if indices > MAX_SLICE_INDICES {
        return Err(format!(
            "its slices would have about {indices:.3e} indices, past the {MAX_SLICE_INDICES} a key may name"
        ));
    }
    Ok(())
}

/// A slice key for the wire.
pub fn to_wire(key: &SliceKey) -> crate::SliceKey {
    crate::SliceKey {
        material: key.material.to_string(),
        white_pawns: key.white_pawns.0,
        black_pawns: key.black_pawns.0,
    }
}

/// The content hash of slice `key`'s values: storage's slice hash, in this build's index layout.
pub fn slice_hash(key: &SliceKey, values: &[u16]) -> [u8; 32] {
    let mut h = slice_hasher(key, values.len() as u64);
    h.update(values);
    h.finalize()
}

/// [`slice_hash`] fed piece by piece, for `positions` values.
pub fn slice_hasher(key: &SliceKey, positions: u64) -> SliceHasher {
    SliceHasher::new(INDEX_LAYOUT, &key.material.to_string(), key.raw(), positions)
}

/// Decodes slice `key`'s wire bytes (`positions` values) and checks that their hash is
/// `expected`: the values, or why they are not the slice.
pub fn decode_checked(
    key: &SliceKey,
    data: &[u8],
    positions: u64,
    expected: &[u8; 32],
) -> Result<Vec<u16>, String> {
    let values = crate::wire::decode_values(data, positions).map_err(|e| e.to_string())?;
    if slice_hash(key, &values) != *expected {
        return Err("its content hash is not the one announced".into());
    }
    Ok(values)
}
