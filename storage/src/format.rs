//! The bytes of a table file; `storage/FORMAT.md` is the prose version of this module.
//!
//! ```text
//! header       128 bytes
//! blocks       block_count zstd frames, back to back
//! slice table  slice_count x 64 bytes
//! block table  block_count x 16 bytes
//! tables hash  32 bytes: blake3(slice table || block table)
//! footer       40 bytes: blake3(every byte before the footer), FOOTER_MAGIC
//! ```

use crate::{Metric, SliceEntry, TableMeta};

/// The version of the file format this build writes. It reads this one, version 2 (whose blocks
/// hold the values' bytes interleaved, not as two planes) and version 1 (as 2, and its slice
/// hashes do not cover the index layout): see `FORMAT.md`.
pub const FORMAT_VERSION: u32 = 3;
/// The first version whose blocks hold two byte planes ([`encode_block`]).
pub(crate) const PLANAR_FROM_VERSION: u32 = 3;
/// The oldest version this build reads.
pub const OLDEST_FORMAT_VERSION: u32 = 1;
/// Values per block when [`WriteOptions`](crate::WriteOptions) says nothing else: 128 KiB raw.
pub const DEFAULT_BLOCK_VALUES: u32 = 1 << 16;
/// The largest block a reader accepts (2 MiB raw), which bounds the memory one block can take.
pub const MAX_BLOCK_VALUES: u32 = 1 << 20;
/// The zstd level of the canonical table bytes (see `FORMAT.md`, "Compression level").
pub const DEFAULT_ZSTD_LEVEL: i32 = 1;
/// The longest material name, in bytes.
pub const MAX_MATERIAL_LEN: usize = 31;

pub(crate) const HEADER_MAGIC: [u8; 8] = *b"ZRMLTB\r\n";
pub(crate) const FOOTER_MAGIC: [u8; 8] = *b"ZRMLEND\n";
pub(crate) const HEADER_LEN: u64 = 128;
pub(crate) const SLICE_ENTRY_LEN: u64 = 64;
pub(crate) const BLOCK_ENTRY_LEN: u64 = 16;
pub(crate) const TABLES_HASH_LEN: u64 = 32;
pub(crate) const FOOTER_LEN: u64 = 40;

const MATERIAL_AT: usize = 24;
const HEADER_CRC_AT: usize = 124;

/// The fixed-size header at offset 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    /// The format version: [`FORMAT_VERSION`] for a header this build made.
    pub version: u32,
    pub meta: TableMeta,
    pub block_values: u32,
    pub slice_count: u64,
    pub value_count: u64,
    pub block_count: u64,
}

/// Why a header was refused; the caller adds the file name.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum HeaderError {
    NotATable,
    Version(u32),
    Metric(u32),
    Corrupt(String),
}

impl Header {
    /// The hasher of a slice of this table: its content hash as this table's version defines it.
    pub fn slice_hasher(&self, key: crate::SliceKey, count: u64) -> crate::SliceHasher {
        if self.version == 1 {
            crate::SliceHasher::format_1(&self.meta.material, key, count)
        } else {
            crate::SliceHasher::new(self.meta.index_layout, &self.meta.material, key, count)
        }
    }

    pub fn new(meta: TableMeta, block_values: u32, slice_count: u64, value_count: u64) -> Header {
        let block_count = block_count(value_count, block_values);
        Header {
            version: FORMAT_VERSION,
            meta,
            block_values,
            slice_count,
            value_count,
            block_count,
        }
    }

    /// The header's bytes. The material must be valid ([`validate_material`]).
    pub fn encode(&self) -> [u8; HEADER_LEN as usize] {
        let mut b = [0u8; HEADER_LEN as usize];
        b[0..8].copy_from_slice(&HEADER_MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&self.meta.metric.code().to_le_bytes());
        b[16..20].copy_from_slice(&self.meta.index_layout.to_le_bytes());
        b[20..24].copy_from_slice(&self.block_values.to_le_bytes());
        let name = self.meta.material.as_bytes();
        debug_assert!(validate_material(&self.meta.material).is_ok());
        let n = name.len().min(MAX_MATERIAL_LEN);
        b[MATERIAL_AT] = n as u8;
        b[MATERIAL_AT + 1..MATERIAL_AT + 1 + n].copy_from_slice(&name[..n]);
        b[56..64].copy_from_slice(&self.slice_count.to_le_bytes());
        b[64..72].copy_from_slice(&self.value_count.to_le_bytes());
        b[72..80].copy_from_slice(&self.block_count.to_le_bytes());
        let crc = crc32fast::hash(&b[..HEADER_CRC_AT]);
        b[HEADER_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses and checks a header: magic, then version, then checksum, then every field.
    pub fn decode(b: &[u8; HEADER_LEN as usize]) -> Result<Header, HeaderError> {
        if b[0..8] != HEADER_MAGIC {
            return Err(HeaderError::NotATable);
        }
        let version = u32_at(b, 8);
        if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(HeaderError::Version(version));
        }
        let crc = u32_at(b, HEADER_CRC_AT);
        if crc != crc32fast::hash(&b[..HEADER_CRC_AT]) {
            return Err(HeaderError::Corrupt("header checksum mismatch".to_owned()));
        }
        let metric_code = u32_at(b, 12);
        let metric = Metric::from_code(metric_code).ok_or(HeaderError::Metric(metric_code))?;
        let index_layout = u32_at(b, 16);
        let block_values = u32_at(b, 20);
        if block_values == 0 || block_values > MAX_BLOCK_VALUES {
            return Err(HeaderError::Corrupt(format!(
                "block size {block_values} values is outside 1..={MAX_BLOCK_VALUES}"
            )));
        }
        let n = usize::from(b[MATERIAL_AT]);
        if n > MAX_MATERIAL_LEN {
            return Err(HeaderError::Corrupt(format!(
                "material name length {n} exceeds {MAX_MATERIAL_LEN}"
            )));
        }
        let name_field = &b[MATERIAL_AT + 1..MATERIAL_AT + 1 + MAX_MATERIAL_LEN];
        if name_field[n..].iter().any(|&x| x != 0) {
            return Err(HeaderError::Corrupt(
                "material name padding is not zero".to_owned(),
            ));
        }
        let material = String::from_utf8(name_field[..n].to_vec())
            .map_err(|_| HeaderError::Corrupt("material name is not ascii".to_owned()))?;
        validate_material(&material).map_err(HeaderError::Corrupt)?;
        if b[80..HEADER_CRC_AT].iter().any(|&x| x != 0) {
            return Err(HeaderError::Corrupt(
                "reserved header bytes are not zero".to_owned(),
            ));
        }
        let slice_count = u64_at(b, 56);
        let value_count = u64_at(b, 64);
        let block_count_stored = u64_at(b, 72);
        let expected = block_count(value_count, block_values);
        if block_count_stored != expected {
            return Err(HeaderError::Corrupt(format!(
                "header says {block_count_stored} blocks, but {value_count} values in blocks of \
                 {block_values} make {expected}"
            )));
        }
        Ok(Header {
            version,
            meta: TableMeta {
                material,
                metric,
                index_layout,
            },
            block_values,
            slice_count,
            value_count,
            block_count: expected,
        })
    }

    /// The number of values in block `block` (all blocks are full but the last).
    pub fn block_len(&self, block: u64) -> u64 {
        let start = block * u64::from(self.block_values);
        (self.value_count - start).min(u64::from(self.block_values))
    }
}

/// `Ok` if `material` can name a table: 1 to [`MAX_MATERIAL_LEN`] bytes of ASCII letters, digits,
/// `_` or `-` (so it is also a safe file name).
pub(crate) fn validate_material(material: &str) -> Result<(), String> {
    if material.is_empty() || material.len() > MAX_MATERIAL_LEN {
        return Err(format!(
            "material name {material:?} must be 1 to {MAX_MATERIAL_LEN} bytes long"
        ));
    }
    if !material
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
    {
        return Err(format!(
            "material name {material:?} must be ascii letters, digits, '_' or '-'"
        ));
    }
    Ok(())
}

pub(crate) fn block_count(value_count: u64, block_values: u32) -> u64 {
    value_count.div_ceil(u64::from(block_values))
}

/// One row of the block table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockEntry {
    /// Offset of the zstd frame in the file.
    pub offset: u64,
    /// Length of the zstd frame in bytes.
    pub len: u32,
    /// crc32 (IEEE) of the frame's bytes.
    pub crc: u32,
}

impl BlockEntry {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&self.crc.to_le_bytes());
    }

    pub fn decode(b: &[u8; BLOCK_ENTRY_LEN as usize]) -> BlockEntry {
        BlockEntry {
            offset: u64_at(b, 0),
            len: u32_at(b, 8),
            crc: u32_at(b, 12),
        }
    }
}

pub(crate) fn encode_slice_entry(e: &SliceEntry, out: &mut Vec<u8>) {
    out.extend_from_slice(&e.key[0].to_le_bytes());
    out.extend_from_slice(&e.key[1].to_le_bytes());
    out.extend_from_slice(&e.first.to_le_bytes());
    out.extend_from_slice(&e.count.to_le_bytes());
    out.extend_from_slice(&e.hash);
}

pub(crate) fn decode_slice_entry(b: &[u8; SLICE_ENTRY_LEN as usize]) -> SliceEntry {
    let mut hash = [0u8; 32];
    hash.copy_from_slice(&b[32..64]);
    SliceEntry {
        key: [u64_at(b, 0), u64_at(b, 8)],
        first: u64_at(b, 16),
        count: u64_at(b, 24),
        hash,
    }
}

/// The raw bytes of a block of `values` as this build writes them (what its zstd frame holds),
/// in place of what `out` held: two planes, the low byte of every value then the high byte of
/// every value.
pub(crate) fn encode_block(values: &[u16], out: &mut Vec<u8>) {
    out.clear();
    out.resize(values.len() * 2, 0);
    let (low, high) = out.split_at_mut(values.len());
    for ((l, h), v) in low.iter_mut().zip(high.iter_mut()).zip(values) {
        *l = *v as u8;
        *h = (*v >> 8) as u8;
    }
}

/// The values of a block's raw bytes (of even length) in place of what `out` held: two planes
/// from format [`PLANAR_FROM_VERSION`] on ([`encode_block`]), little-endian values one after
/// the other before it.
pub(crate) fn decode_block(version: u32, bytes: &[u8], out: &mut Vec<u16>) {
    out.clear();
    if version >= PLANAR_FROM_VERSION {
        let (low, high) = bytes.split_at(bytes.len() / 2);
        out.extend(low.iter().zip(high).map(|(&l, &h)| u16::from_le_bytes([l, h])));
    } else {
        out.extend(bytes.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])));
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        let meta = TableMeta {
            material: "KRPvKR".to_owned(),
            metric: Metric::Dtm,
            index_layout: 7,
        };
        Header::new(meta, 1000, 3, 2500)
    }

    #[test]
    fn header_round_trips() {
        let h = header();
        assert_eq!(h.block_count, 3);
        assert_eq!(Header::decode(&h.encode()), Ok(h));
    }

    #[test]
    fn header_checks_magic_then_version_then_checksum() {
        let good = header().encode();
        let mut b = good;
        b[0] ^= 1;
        assert_eq!(Header::decode(&b), Err(HeaderError::NotATable));
        let mut b = good;
        b[8] = 4;
        assert_eq!(Header::decode(&b), Err(HeaderError::Version(4)));
        b[8] = 0;
        assert_eq!(Header::decode(&b), Err(HeaderError::Version(0)));
        for at in 12..HEADER_LEN as usize {
            let mut b = good;
            b[at] ^= 0x40;
            assert!(
                matches!(Header::decode(&b), Err(HeaderError::Corrupt(_))),
                "byte {at}"
            );
        }
    }

    #[test]
    fn header_refuses_bad_fields_even_with_a_good_checksum() {
        let reseal = |mut b: [u8; HEADER_LEN as usize]| {
            let crc = crc32fast::hash(&b[..HEADER_CRC_AT]);
            b[HEADER_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
            b
        };
        let good = header().encode();
        let mut b = good;
        b[12] = 9;
        assert_eq!(Header::decode(&reseal(b)), Err(HeaderError::Metric(9)));
        for (at, byte) in [
            (20, 0u8),
            (23, 0xff),
            (24, 32),
            (24, 0),
            (26, b'/'),
            (40, 1),
            (72, 9),
            (100, 1),
        ] {
            let mut b = good;
            if at == 20 {
                b[20..24].fill(byte);
            } else {
                b[at] = byte;
            }
            assert!(
                matches!(Header::decode(&reseal(b)), Err(HeaderError::Corrupt(_))),
                "byte {at}"
            );
        }
    }

    #[test]
    fn materials() {
        assert!(validate_material("KRPvKR").is_ok());
        assert!(validate_material("KQQQQQQQQQQQQQQQQQQQQQQQQQQQvKR").is_ok());
        assert!(validate_material("KQQQQQQQQQQQQQQQQQQQQQQQQQQQQvKR").is_err());
        assert!(validate_material("").is_err());
        assert!(validate_material("../KPvK").is_err());
        assert!(validate_material("KPvK\0").is_err());
    }

    #[test]
    fn block_lengths() {
        let h = header();
        assert_eq!(
            [h.block_len(0), h.block_len(1), h.block_len(2)],
            [1000, 1000, 500]
        );
    }
}
