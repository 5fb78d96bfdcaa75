//! The coordinator's slice store: one file per finished slice (see [`zermelo_proto::wire`]),
//! written atomically, its content hash checked on the way in and on the way out, so that a
//! corrupted copy is never served nor written into a table.

use std::io::Write;
use std::path::{Path, PathBuf};

use zermelo_chess::index::SliceIndexer;
use zermelo_chess::{Bitboard, Material, SliceKey};
use zermelo_proto::wire::{decode_values, slice_file_name, SliceFile, WireError};
use zermelo_storage::slice_hash;

use crate::schedule::Hash;

/// Why a slice is not taken or not served.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0} is not a slice key of a table")]
    BadKey(String),
    #[error("slice {key} has {found} positions, not {expected}")]
    WrongPositions {
        key: SliceKey,
        expected: u64,
        found: u64,
    },
    #[error("slice {key}: content hash {found} differs from the announced {announced}")]
    HashMismatch {
        key: SliceKey,
        announced: String,
        found: String,
    },
    #[error("slice {key}: the content hash must be 32 bytes, not {len}")]
    BadHashLength { key: SliceKey, len: usize },
    #[error("slice {key}: {source}")]
    Wire { key: SliceKey, source: WireError },
    #[error("slice {key} is not in the store")]
    Missing { key: SliceKey },
    #[error("stored slice {key} is corrupt ({reason}); it is not served")]
    Corrupt { key: SliceKey, reason: String },
    #[error("slice store {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

/// A wire slice key, checked to name a canonical slice of a table (the material in table
/// orientation, the pawns where the material says, the canonical mirror half).
pub fn from_wire(key: &zermelo_proto::SliceKey) -> Result<SliceKey, StoreError> {
    let bad = || {
        StoreError::BadKey(format!(
            "{}[w={:#x} b={:#x}]",
            key.material, key.white_pawns, key.black_pawns
        ))
    };
    let material: Material = key.material.parse().map_err(|_| bad())?;
    if material.to_string() != key.material || material.is_bare_kings() {
        return Err(bad());
    }
    let (w, b) = (key.white_pawns, key.black_pawns);
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

/// A slice key for the wire.
pub fn to_wire(key: &SliceKey) -> zermelo_proto::SliceKey {
    zermelo_proto::SliceKey {
        material: key.material.to_string(),
        white_pawns: key.white_pawns.0,
        black_pawns: key.black_pawns.0,
    }
}

/// Finished slices in a directory.
#[derive(Debug)]
pub struct SliceStore {
    dir: PathBuf,
}

impl SliceStore {
    pub fn open(dir: &Path) -> Result<SliceStore, StoreError> {
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
            path: dir.to_owned(),
            source,
        })?;
        Ok(SliceStore { dir: dir.to_owned() })
    }

    fn path(&self, key: &SliceKey) -> PathBuf {
        self.dir.join(slice_file_name(&to_wire(key)))
    }

    /// Checks an uploaded slice (positions, decoding, content hash) and stores it, replacing a
    /// copy already there. Blocking.
    pub fn put_blocking(
        &self,
        key: &SliceKey,
        positions: u64,
        hash: &[u8],
        data: Vec<u8>,
    ) -> Result<Hash, StoreError> {
        let expected = SliceIndexer::new(*key).size();
        if positions != expected {
            return Err(StoreError::WrongPositions {
                key: *key,
                expected,
                found: positions,
            });
        }
        let announced: Hash = hash.try_into().map_err(|_| StoreError::BadHashLength {
            key: *key,
            len: hash.len(),
        })?;
        let values =
            decode_values(&data, positions).map_err(|source| StoreError::Wire { key: *key, source })?;
        let found = slice_hash(&key.material.to_string(), key.raw(), &values);
        if found != announced {
            return Err(StoreError::HashMismatch {
                key: *key,
                announced: hex(&announced),
                found: hex(&found),
            });
        }
        let bytes = SliceFile {
            hash: announced,
            positions,
            data,
        }
        .to_bytes();
        let io = |source| StoreError::Io {
            path: self.dir.clone(),
            source,
        };
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir).map_err(io)?;
        tmp.write_all(&bytes).map_err(io)?;
        tmp.as_file().sync_data().map_err(io)?;
        tmp.persist(self.path(key)).map_err(|e| io(e.error))?;
        Ok(found)
    }

    /// The content hash a stored slice's file claims (not checked against its values: see
    /// [`get_blocking`](Self::get_blocking)), `None` if it is not stored. Blocking.
    pub fn claimed_hash_blocking(&self, key: &SliceKey) -> Option<Hash> {
        use std::io::Read;
        // The file's header only: magic, hash, positions.
        let mut header = [0u8; zermelo_proto::wire::SLICE_FILE_HEADER_LEN];
        std::fs::File::open(self.path(key))
            .ok()?
            .read_exact(&mut header)
            .ok()?;
        SliceFile::from_bytes(&header).ok().map(|f| f.hash)
    }

    /// A stored slice, checked against the hash recorded for it: its file (wire bytes and all)
    /// and its values. Blocking.
    pub fn get_blocking(&self, key: &SliceKey, recorded: &Hash) -> Result<(SliceFile, Vec<u16>), StoreError> {
        let path = self.path(key);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::Missing { key: *key })
            }
            Err(source) => return Err(StoreError::Io { path, source }),
        };
        let corrupt = |reason: String| StoreError::Corrupt { key: *key, reason };
        let file = SliceFile::from_bytes(&bytes).map_err(|e| corrupt(e.to_string()))?;
        let values = decode_values(&file.data, file.positions).map_err(|e| corrupt(e.to_string()))?;
        let found = slice_hash(&key.material.to_string(), key.raw(), &values);
        if &found != recorded || file.hash != *recorded {
            return Err(corrupt(format!(
                "content hash {} instead of the recorded {}",
                hex(&found),
                hex(recorded)
            )));
        }
        Ok((file, values))
    }
}

pub(crate) fn hex(hash: &[u8]) -> String {
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use zermelo_proto::wire::encode_values;

    fn kpk() -> SliceKey {
        SliceKey::all_of("KPvK".parse().unwrap())[0]
    }

    #[test]
    fn wire_keys_round_trip_and_bad_ones_are_refused() {
        let k = kpk();
        assert_eq!(from_wire(&to_wire(&k)).unwrap(), k);
        let mut w = to_wire(&k);
        w.material = "KvKP".into();
        assert!(from_wire(&w).is_err());
        let mut w = to_wire(&k);
        w.white_pawns |= 1; // a pawn on a1
        assert!(from_wire(&w).is_err());
        let mut w = to_wire(&k);
        w.white_pawns = w.white_pawns.reverse_bits().swap_bytes(); // the mirror half
        assert!(from_wire(&w).is_err() || from_wire(&w).unwrap() == k);
    }

    #[test]
    fn a_slice_with_a_wrong_hash_is_refused_and_a_corrupted_copy_is_not_served() {
        let dir = tempfile::tempdir().unwrap();
        let store = SliceStore::open(dir.path()).unwrap();
        let k = kpk();
        let n = SliceIndexer::new(k).size();
        let values = vec![3u16; n as usize];
        let hash = slice_hash("KPvK", k.raw(), &values);
        let err = store
            .put_blocking(&k, n, &[0; 32], encode_values(&values))
            .unwrap_err();
        assert!(matches!(err, StoreError::HashMismatch { .. }), "{err}");
        assert_eq!(store.claimed_hash_blocking(&k), None);
        store.put_blocking(&k, n, &hash, encode_values(&values)).unwrap();
        assert_eq!(store.claimed_hash_blocking(&k), Some(hash));
        assert_eq!(store.get_blocking(&k, &hash).unwrap().1, values);
        // Damage the stored copy: it is detected, not served.
        let path = store.path(&k);
        let mut bytes = std::fs::read(&path).unwrap();
        let other = SliceFile {
            hash,
            positions: n,
            data: encode_values(&vec![4u16; n as usize]),
        };
        bytes.truncate(0);
        bytes.extend(other.to_bytes());
        std::fs::write(&path, bytes).unwrap();
        assert!(matches!(
            store.get_blocking(&k, &hash),
            Err(StoreError::Corrupt { .. })
        ));
    }
}
