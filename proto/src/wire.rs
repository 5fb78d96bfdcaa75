//! The bytes of a slice on the wire and in slice files.
//!
//! * On the wire (`SliceHeader::total_length` bytes), a slice's values are their little-endian
//!   `u16`s compressed as one zstd frame ([`encode_values`], [`decode_values`]).
//! * A *slice file* (a worker's cache, the coordinator's store) is a small header, then the wire
//!   bytes: `b"ZRMLSLC1"`, the content hash (32 bytes), the positions (u64 LE), the wire bytes.
//!   The hash in the file is what the file claims; readers check it against the decoded values.
//!
//! ```
//! use zermelo_proto::wire::{decode_values, encode_values, SliceFile};
//! let values: Vec<u16> = (0..1000).map(|i| i % 7).collect();
//! let wire = encode_values(&values);
//! assert_eq!(decode_values(&wire, 1000)?, values);
//! let file = SliceFile { hash: [9; 32], positions: 1000, data: wire.clone() }.to_bytes();
//! let back = SliceFile::from_bytes(&file)?;
//! assert_eq!((back.hash, back.positions, back.data), ([9; 32], 1000, wire));
//! # Ok::<(), zermelo_proto::wire::WireError>(())
//! ```

/// The zstd level of slices on the wire: fast, since every slice is compressed once and sent
/// a few times.
pub const WIRE_ZSTD_LEVEL: i32 = 1;

const FILE_MAGIC: [u8; 8] = *b"ZRMLSLC1";
/// The bytes of a slice file before its wire bytes.
pub const SLICE_FILE_HEADER_LEN: usize = 8 + 32 + 8;

/// Bytes that are not a slice's encoding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("slice bytes do not decompress: {0}")]
    Decompress(String),
    #[error("slice bytes hold {found} values, not the {expected} announced")]
    WrongCount { expected: u64, found: u64 },
    #[error("not a slice file (bad magic or shorter than its header)")]
    NotASliceFile,
}

/// A slice's values as they travel: zstd over their little-endian bytes.
pub fn encode_values(values: &[u16]) -> Vec<u8> {
    let mut raw = Vec::with_capacity(values.len() * 2);
    for v in values {
        raw.extend_from_slice(&v.to_le_bytes());
    }
    zstd::bulk::compress(&raw, WIRE_ZSTD_LEVEL).expect("zstd compression of a buffer in memory")
}

/// The values of [`encode_values`] back, checked to be `positions` many.
pub fn decode_values(bytes: &[u8], positions: u64) -> Result<Vec<u16>, WireError> {
    let capacity = usize::try_from(positions.saturating_mul(2)).unwrap_or(usize::MAX);
    let raw = zstd::bulk::decompress(bytes, capacity).map_err(|e| WireError::Decompress(e.to_string()))?;
    if raw.len() as u64 != positions * 2 {
        return Err(WireError::WrongCount {
            expected: positions,
            found: raw.len() as u64 / 2,
        });
    }
    Ok(raw
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect())
}

/// A slice file: what it claims the content hash is, its positions, and its wire bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceFile {
    pub hash: [u8; 32],
    pub positions: u64,
    pub data: Vec<u8>,
}

impl SliceFile {
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(SLICE_FILE_HEADER_LEN + self.data.len());
        out.extend_from_slice(&FILE_MAGIC);
        out.extend_from_slice(&self.hash);
        out.extend_from_slice(&self.positions.to_le_bytes());
        out.extend_from_slice(&self.data);
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<SliceFile, WireError> {
        if bytes.len() < SLICE_FILE_HEADER_LEN || bytes[..8] != FILE_MAGIC {
            return Err(WireError::NotASliceFile);
        }
        let hash: [u8; 32] = bytes[8..40].try_into().expect("32 bytes");
        let positions = u64::from_le_bytes(bytes[40..48].try_into().expect("8 bytes"));
        Ok(SliceFile {
            hash,
            positions,
            data: bytes[SLICE_FILE_HEADER_LEN..].to_vec(),
        })
    }
}

/// A file name for a slice: `KPvK-0000000000001000-0000000000000000.slice`.
pub fn slice_file_name(key: &crate::SliceKey) -> String {
    format!(
        "{}-{:016x}-{:016x}.slice",
        key.material, key.white_pawns, key.black_pawns
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damaged_bytes_are_refused() {
        let wire = encode_values(&[1, 2, 3]);
        assert!(matches!(
            decode_values(&wire, 4),
            Err(WireError::WrongCount {
                expected: 4,
                found: 3
            })
        ));
        assert!(decode_values(&wire, 2).is_err());
        assert!(decode_values(&wire[..wire.len() - 1], 3).is_err());
        assert_eq!(SliceFile::from_bytes(b"ZRMLSLC1"), Err(WireError::NotASliceFile));
    }
}
