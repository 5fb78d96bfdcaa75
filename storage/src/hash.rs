use crate::SliceKey;

/// Domain tag that starts every slice hash, so that it never equals a hash of other data.
const SLICE_HASH_TAG: &[u8; 16] = b"zermelo slice v2";
/// The tag of format 1, whose hash did not cover the index layout.
const SLICE_HASH_TAG_V1: &[u8; 16] = b"zermelo slice v1";

/// A slice's identity: blake3 over a tag, the index layout, the material, the key, the count and
/// the values, as `FORMAT.md` spells out. Two slices with the same hash are the same slice, in
/// the same layout, with the same values.
///
/// ```
/// use zermelo_storage::slice_hash;
/// let a = slice_hash(3, "KPvK", [1 << 12, 0], &[0, 1, 2]);
/// assert_eq!(a, slice_hash(3, "KPvK", [1 << 12, 0], &[0, 1, 2]));
/// assert_ne!(a, slice_hash(3, "KPvK", [1 << 12, 0], &[0, 1, 3]));
/// assert_ne!(a, slice_hash(3, "KPvKP", [1 << 12, 0], &[0, 1, 2]));
/// assert_ne!(a, slice_hash(4, "KPvK", [1 << 12, 0], &[0, 1, 2]));
/// ```
pub fn slice_hash(layout: u32, material: &str, key: SliceKey, values: &[u16]) -> [u8; 32] {
    let mut h = SliceHasher::new(layout, material, key, values.len() as u64);
    h.update(values);
    h.finalize()
}

/// [`slice_hash`] fed piece by piece, for slices that arrive in blocks.
pub struct SliceHasher {
    hasher: blake3::Hasher,
}

impl SliceHasher {
    /// The hash of a slice of index layout `layout` (format 2 on).
    pub fn new(layout: u32, material: &str, key: SliceKey, count: u64) -> SliceHasher {
        let mut hasher = blake3::Hasher::new();
        hasher.update(SLICE_HASH_TAG);
        hasher.update(&layout.to_le_bytes());
        SliceHasher::rest(hasher, material, key, count)
    }

    /// The hash format-1 tables hold, which does not cover the layout (read, never written).
    pub fn format_1(material: &str, key: SliceKey, count: u64) -> SliceHasher {
        let mut hasher = blake3::Hasher::new();
        hasher.update(SLICE_HASH_TAG_V1);
        SliceHasher::rest(hasher, material, key, count)
    }

    fn rest(mut hasher: blake3::Hasher, material: &str, key: SliceKey, count: u64) -> SliceHasher {
        hasher.update(&(material.len() as u64).to_le_bytes());
        hasher.update(material.as_bytes());
        hasher.update(&key[0].to_le_bytes());
        hasher.update(&key[1].to_le_bytes());
        hasher.update(&count.to_le_bytes());
        SliceHasher { hasher }
    }

    /// Hashes `values`, each as its two little-endian bytes.
    pub fn update(&mut self, values: &[u16]) {
        #[cfg(target_endian = "little")]
        {
            // Safety: `u16` has no padding and every byte of it is initialised; on a
            // little-endian target the bytes of a `u16` in memory are its little-endian bytes.
            // The view covers exactly the slice's memory, borrowed for this call. Given at once,
            // the bytes are hashed many chunks at a time (blake3's SIMD), not 8 KiB by 8 KiB.
            let bytes = unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), values.len() * 2) };
            self.hasher.update(bytes);
        }
        #[cfg(not(target_endian = "little"))]
        {
            let mut buf = [0u8; 8192];
            for chunk in values.chunks(buf.len() / 2) {
                for (b, v) in buf.chunks_exact_mut(2).zip(chunk) {
                    b.copy_from_slice(&v.to_le_bytes());
                }
                self.hasher.update(&buf[..chunk.len() * 2]);
            }
        }
    }

    pub fn finalize(&self) -> [u8; 32] {
        *self.hasher.finalize().as_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slice hash is the one FORMAT.md spells out, built here byte by byte, whether the
    /// values are given at once or in uneven pieces.
    #[test]
    fn the_slice_hash_is_the_one_format_md_spells_out() {
        let values: Vec<u16> = (0..100_000u32).map(|i| (i * 7919 % 65_521) as u16).collect();
        let key = [0x0000_1000_0000_0000u64, 0x0010_0000_0000_0000u64];
        let mut bytes = Vec::new();
        bytes.extend_from_slice(b"zermelo slice v2");
        bytes.extend_from_slice(&3u32.to_le_bytes());
        bytes.extend_from_slice(&6u64.to_le_bytes());
        bytes.extend_from_slice(b"KRPvKR");
        bytes.extend_from_slice(&key[0].to_le_bytes());
        bytes.extend_from_slice(&key[1].to_le_bytes());
        bytes.extend_from_slice(&(values.len() as u64).to_le_bytes());
        for v in &values {
            bytes.push(*v as u8);
            bytes.push((*v >> 8) as u8);
        }
        let expected = *blake3::hash(&bytes).as_bytes();
        assert_eq!(slice_hash(3, "KRPvKR", key, &values), expected);
        let mut h = SliceHasher::new(3, "KRPvKR", key, values.len() as u64);
        for piece in [
            &values[..1],
            &values[1..4097],
            &values[4097..4098],
            &values[4098..],
        ] {
            h.update(piece);
        }
        assert_eq!(h.finalize(), expected);
    }
}
