//! The coordinator's slice store: one file per finished slice (see [`zermelo_proto::wire`]),
//! written atomically, its content hash checked on the way in and on the way out, so that a
//! corrupted copy is never served nor written into a table.

use crate::check::Watch;
use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use zermelo_chess::index::SliceIndexer;
use zermelo_chess::SliceKey;
use zermelo_proto::wire::{
    decode_values_from, slice_file_name, SliceFile, ValuesDecoder, ValuesEncoder, WireError,
    SLICE_FILE_HEADER_LEN,
};
use zermelo_storage::SliceHasher;

use crate::schedule::{hex, Hash};

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
    #[error("slice {key} is finished: a finished slice is never replaced")]
    Finished { key: SliceKey },
    #[error("stored slice {key} is corrupt ({reason}); it is not served")]
    Corrupt { key: SliceKey, reason: String },
    #[error("slice {key} failed the coordinator's check of its values: {reason}")]
    FailedCheck { key: SliceKey, reason: String },
    #[error("slice store {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

/// A wire slice key, checked to name a canonical slice of a table: [`zermelo_proto::keys`], the
/// codec the workers use too, its refusal as a store error.
pub fn from_wire(key: &zermelo_proto::SliceKey) -> Result<SliceKey, StoreError> {
    zermelo_proto::keys::from_wire(key).map_err(|e| StoreError::BadKey(e.0))
}

pub use zermelo_proto::keys::to_wire;

/// Takes a slice's values, a piece at a time.
pub type ValueSink<'a> = dyn FnMut(&[u16]) -> Result<(), StoreError> + 'a;

/// Why the store reads one of its files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    /// To check it: its header's hash, or its values against the recorded hash (before it is
    /// served, for a table, for the check of an upload that leads into it).
    Check,
    /// To send its bytes to a worker, once checked.
    Serve,
}

/// A stored slice's file, open for reading from its start.
pub type FileReader = Box<dyn Read + Send>;

/// How the store opens its files for reading: [`Disk`] in real use. A test gives the service
/// another ([`crate::service::ServiceConfig::files`]), one that damages what it reads, to show
/// that the readers notice (the store's check of a stored copy, a worker's hash check of a
/// download). The binary has no such hook.
pub trait Files: Send + Sync + std::fmt::Debug {
    /// The file at `path`, opened to be read for `reading`.
    fn open(&self, path: &Path, reading: Reading) -> std::io::Result<FileReader>;
}

/// The files as they are on disk.
#[derive(Debug)]
pub struct Disk;

impl Files for Disk {
    fn open(&self, path: &Path, _: Reading) -> std::io::Result<FileReader> {
        Ok(Box::new(File::open(path)?))
    }
}

/// Finished slices in a directory.
#[derive(Debug)]
pub struct SliceStore {
    dir: PathBuf,
    files: Arc<dyn Files>,
    /// For each slice whose file this process wrote after checking its values, or found
    /// whole: the hash the file was found with and the BLAKE3 digest of its wire bytes. A
    /// file served again is checked by that digest (no decoding); any change to its bytes fails
    /// it, and the file is then checked in full ([`open_checked_blocking`](Self::open_checked_blocking)).
    intact: Digests,
}

impl SliceStore {
    /// The store in `dir` (created if need be), read from [`Disk`].
    #[cfg(test)]
    pub fn open(dir: &Path) -> Result<SliceStore, StoreError> {
        SliceStore::open_with(dir, Arc::new(Disk))
    }

    /// The store in `dir`, its files read through `files`.
    pub fn open_with(dir: &Path, files: Arc<dyn Files>) -> Result<SliceStore, StoreError> {
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
            path: dir.to_owned(),
            source,
        })?;
        Ok(SliceStore {
            dir: dir.to_owned(),
            files,
            intact: Arc::default(),
        })
    }

    fn path(&self, key: &SliceKey) -> PathBuf {
        self.dir.join(slice_file_name(key))
    }

    /// Checks an uploaded slice (positions, decoding, content hash) and stores it, replacing a
    /// copy already there. Blocking.
    #[cfg(test)]
    pub fn put_blocking(
        &self,
        key: &SliceKey,
        positions: u64,
        hash: &[u8],
        data: Vec<u8>,
    ) -> Result<Hash, StoreError> {
        let mut incoming = self.begin_put_blocking(key, positions, hash)?;
        incoming.push_blocking(&data)?;
        incoming.finish_blocking()
    }

    /// Stores a slice whose values come in pieces (a table's slice read a block at a time):
    /// `fill` hands every value, in order, to the sink it is given; they are encoded for the
    /// wire and checked like an upload. Blocking.
    pub fn put_values_blocking<E: From<StoreError>>(
        &self,
        key: &SliceKey,
        positions: u64,
        hash: &[u8],
        fill: &mut dyn FnMut(&mut ValueSink<'_>) -> Result<(), E>,
    ) -> Result<Hash, E> {
        let mut incoming = self.begin_put_blocking(key, positions, hash)?;
        let io = |source| StoreError::Io {
            path: self.dir.clone(),
            source,
        };
        let mut encoder = ValuesEncoder::new(Vec::new()).map_err(io)?;
        fill(&mut |values| {
            encoder.push(values).map_err(io)?;
            let encoded = encoder.get_mut();
            incoming.push_blocking(encoded)?;
            encoded.clear();
            Ok(())
        })?;
        let rest = encoder.finish().map_err(io)?;
        incoming.push_blocking(&rest)?;
        Ok(incoming.finish_blocking()?)
    }

    /// Starts storing a slice whose wire bytes arrive in pieces ([`IncomingSlice`]): checks
    /// its positions and the form of its hash first. Blocking.
    pub fn begin_put_blocking(
        &self,
        key: &SliceKey,
        positions: u64,
        hash: &[u8],
    ) -> Result<IncomingSlice, StoreError> {
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
        let io = |source| StoreError::Io {
            path: self.dir.clone(),
            source,
        };
        let mut file = tempfile::NamedTempFile::new_in(&self.dir).map_err(io)?;
        let header = SliceFile {
            hash: announced,
            positions,
            data: Vec::new(),
        };
        file.write_all(&header.to_bytes()).map_err(io)?;
        Ok(IncomingSlice {
            key: *key,
            announced,
            target: self.path(key),
            dir: self.dir.clone(),
            file: std::io::BufWriter::with_capacity(1 << 20, file),
            decoder: ValuesDecoder::new(positions)
                .map_err(|source| StoreError::Wire { key: *key, source })?,
            hasher: zermelo_proto::keys::slice_hasher(key, positions),
            bytes: blake3::Hasher::new(),
            intact: Arc::clone(&self.intact),
            watch: None,
        })
    }

    /// Makes the names of the slices put in place so far survive a crash (see
    /// [`IncomingSlice::finish_with_blocking`]). Blocking.
    pub fn sync_folder_blocking(&self) -> Result<(), StoreError> {
        sync_folder(&self.dir)
    }

    /// The content hash a stored slice's file claims (not checked against its values: see
    /// [`open_checked_blocking`](Self::open_checked_blocking)), `None` if it is not stored.
    /// Blocking.
    pub fn claimed_hash_blocking(&self, key: &SliceKey) -> Option<Hash> {
        // The file's header only: magic, hash, positions.
        let mut header = [0u8; SLICE_FILE_HEADER_LEN];
        let mut file = self.files.open(&self.path(key), Reading::Check).ok()?;
        file.read_exact(&mut header).ok()?;
        SliceFile::from_bytes(&header).ok().map(|f| f.hash)
    }

    /// Reads a stored slice's values in pieces, in bounded memory, checking them against the
    /// hash recorded for it: `sink` gets every value in order, and the call fails (after the
    /// last piece) if the hash differs. Blocking.
    pub fn for_each_value_blocking<E: From<StoreError>>(
        &self,
        key: &SliceKey,
        recorded: &Hash,
        sink: &mut impl FnMut(&[u16]) -> Result<(), E>,
    ) -> Result<(), E> {
        self.decode_checked(key, recorded, sink).map(|_| ())
    }

    /// [`for_each_value_blocking`](Self::for_each_value_blocking), returning the BLAKE3 digest
    /// of the wire bytes it read (the whole file past its header).
    fn decode_checked<E: From<StoreError>>(
        &self,
        key: &SliceKey,
        recorded: &Hash,
        sink: &mut impl FnMut(&[u16]) -> Result<(), E>,
    ) -> Result<[u8; 32], E> {
        let (file, positions) = self.open_file(key, recorded, Reading::Check)?;
        let corrupt = |reason: String| StoreError::Corrupt { key: *key, reason };
        let io = |source| StoreError::Io {
            path: self.path(key),
            source,
        };
        let mut hasher = zermelo_proto::keys::slice_hasher(key, positions);
        let mut reader = std::io::BufReader::new(Digesting {
            inner: file,
            digest: blake3::Hasher::new(),
        });
        let decoded = decode_values_from(&mut reader, positions, &mut |v: &[u16]| {
            hasher.update(v);
            sink(v).map_err(Decoding::Sink)
        });
        match decoded {
            Ok(()) => {}
            Err(Decoding::Sink(e)) => return Err(e),
            Err(Decoding::Wire(e)) => return Err(corrupt(e.to_string()).into()),
            Err(Decoding::Io(e)) => {
                return Err(StoreError::Io {
                    path: self.path(key),
                    source: e,
                }
                .into())
            }
        }
        let found = hasher.finalize();
        if &found != recorded {
            return Err(corrupt(format!(
                "content hash {} instead of the recorded {}",
                hex(&found),
                hex(recorded)
            ))
            .into());
        }
        // Whatever follows the values (served too) is in the digest as well.
        std::io::copy(&mut reader, &mut std::io::sink()).map_err(io)?;
        Ok(*reader.into_inner().digest.finalize().as_bytes())
    }

    /// A stored slice's file, its values checked against the hash recorded for it (read once
    /// in bounded memory; or, when this process wrote the file or checked it before, its bytes
    /// found unchanged by their digest), then opened to be served, positioned at its wire bytes:
    /// with its positions and the number of wire bytes. Blocking.
    pub fn open_checked_blocking(
        &self,
        key: &SliceKey,
        recorded: &Hash,
    ) -> Result<(FileReader, u64, u64), StoreError> {
        let known = lock(&self.intact).get(key).copied();
        let unchanged = match known {
            Some((hash, digest)) if hash == *recorded => self.wire_digest(key, recorded)? == digest,
            _ => false,
        };
        if !unchanged {
            // Never checked here, or its bytes changed since: decoded and hashed in full, then
            // known by the digest of the bytes that were checked.
            let digest = self.decode_checked(key, recorded, &mut |_| Ok::<(), StoreError>(()))?;
            lock(&self.intact).insert(*key, (*recorded, digest));
        }
        let path = self.path(key);
        let len = std::fs::metadata(&path)
            .map_err(|source| StoreError::Io { path, source })?
            .len();
        let (file, positions) = self.open_file(key, recorded, Reading::Serve)?;
        Ok((file, positions, len - SLICE_FILE_HEADER_LEN as u64))
    }

    /// The BLAKE3 digest of a stored slice's wire bytes (its file past the header, which must
    /// claim the recorded hash).
    fn wire_digest(&self, key: &SliceKey, recorded: &Hash) -> Result<[u8; 32], StoreError> {
        let (file, _) = self.open_file(key, recorded, Reading::Check)?;
        let mut reader = Digesting {
            inner: file,
            digest: blake3::Hasher::new(),
        };
        std::io::copy(&mut reader, &mut std::io::sink()).map_err(|source| StoreError::Io {
            path: self.path(key),
            source,
        })?;
        Ok(*reader.digest.finalize().as_bytes())
    }

    /// A stored slice's file past its header, checked to claim the recorded hash: with its
    /// positions.
    fn open_file(
        &self,
        key: &SliceKey,
        recorded: &Hash,
        reading: Reading,
    ) -> Result<(FileReader, u64), StoreError> {
        let path = self.path(key);
        let mut file = match self.files.open(&path, reading) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::Missing { key: *key })
            }
            Err(source) => return Err(StoreError::Io { path, source }),
        };
        let corrupt = |reason: String| StoreError::Corrupt { key: *key, reason };
        let mut header = [0u8; SLICE_FILE_HEADER_LEN];
        file.read_exact(&mut header)
            .map_err(|e| corrupt(format!("its header cannot be read: {e}")))?;
        let claimed = SliceFile::from_bytes(&header).map_err(|e| corrupt(e.to_string()))?;
        if claimed.hash != *recorded {
            return Err(corrupt(format!(
                "the file claims content hash {} instead of the recorded {}",
                hex(&claimed.hash),
                hex(recorded)
            )));
        }
        Ok((file, claimed.positions))
    }
}

/// Why [`decode_values_from`] stopped in [`SliceStore::for_each_value_blocking`]: the sink's
/// own error, or the file's.
enum Decoding<E> {
    Sink(E),
    Wire(WireError),
    Io(std::io::Error),
}

impl<E> From<WireError> for Decoding<E> {
    fn from(e: WireError) -> Self {
        Decoding::Wire(e)
    }
}

impl<E> From<std::io::Error> for Decoding<E> {
    fn from(e: std::io::Error) -> Self {
        Decoding::Io(e)
    }
}

/// A slice being stored as its wire bytes arrive: they go to a temporary file in the store and
/// through a decoder at once, so that a slice of any size takes a few megabytes of memory; the
/// file takes the slice's place in the store only once every byte arrived, the values number
/// the slice's positions and their hash is the announced one. Dropped unfinished, it leaves
/// nothing behind.
pub struct IncomingSlice {
    key: SliceKey,
    announced: Hash,
    target: PathBuf,
    dir: PathBuf,
    file: std::io::BufWriter<tempfile::NamedTempFile>,
    decoder: ValuesDecoder,
    hasher: SliceHasher,
    /// The digest of the wire bytes, recorded in the store's `intact` once the file is in place.
    bytes: blake3::Hasher,
    intact: Digests,
    /// What the values go through for the check, when asked ([`IncomingSlice::watch`]).
    watch: Option<Watch>,
}

impl IncomingSlice {
    /// Hands the values to `watch` as they arrive (kept, or checked as they stream: see
    /// [`crate::check`]), for the check handed to
    /// [`finish_with_blocking`](Self::finish_with_blocking). Call before the first bytes.
    pub fn watch(&mut self, watch: Watch) {
        self.watch = Some(watch);
    }

    /// The hash the slice was announced with (its values are found to have it, or it is not
    /// stored).
    pub fn announced(&self) -> Hash {
        self.announced
    }

    /// The next wire bytes. Blocking.
    pub fn push_blocking(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        let key = self.key;
        let hasher = &mut self.hasher;
        let watch = &mut self.watch;
        self.decoder
            .push(bytes, &mut |v: &[u16]| {
                hasher.update(v);
                match watch.as_mut() {
                    Some(w) => w.push(v).map_err(Pushed::Check),
                    None => Ok(()),
                }
            })
            .map_err(|e| match e {
                Pushed::Wire(source) => StoreError::Wire { key, source },
                Pushed::Check(reason) => StoreError::FailedCheck { key, reason },
            })?;
        self.bytes.update(bytes);
        self.file.write_all(bytes).map_err(|source| StoreError::Io {
            path: self.dir.clone(),
            source,
        })
    }

    /// Checks the whole slice and puts it in the store, replacing a copy already there.
    /// Blocking.
    pub fn finish_blocking(self) -> Result<Hash, StoreError> {
        let dir = self.dir.clone();
        let hash = self.finish_with_blocking(|_| Ok(()), |rename| rename())?;
        sync_folder(&dir)?;
        Ok(hash)
    }

    /// [`finish_blocking`](Self::finish_blocking), what watched the values (if asked) handed to
    /// `check` once their hash is found right, then the file put in place by `publish`, which is handed the
    /// rename: it runs it under whatever lock decides whether the slice may still be stored (not
    /// once it is finished), or refuses. The data is synced before; the folder is not synced:
    /// the caller calls [`SliceStore::sync_folder_blocking`] before it tells anyone that the
    /// slice is stored (once for all the slices of an upload). Blocking.
    pub fn finish_with_blocking(
        self,
        check: impl FnOnce(Option<Watch>) -> Result<(), StoreError>,
        publish: impl FnOnce(&mut Rename<'_>) -> Result<(), StoreError>,
    ) -> Result<Hash, StoreError> {
        let key = self.key;
        self.decoder
            .finish()
            .map_err(|source| StoreError::Wire { key, source })?;
        let found = self.hasher.finalize();
        if found != self.announced {
            return Err(StoreError::HashMismatch {
                key,
                announced: hex(&self.announced),
                found: hex(&found),
            });
        }
        check(self.watch)?;
        let io = |source| StoreError::Io {
            path: self.dir.clone(),
            source,
        };
        let file = self.file.into_inner().map_err(|e| io(e.into_error()))?;
        // Durable before the journal records the slice as finished: data, name and folder.
        file.as_file().sync_data().map_err(io)?;
        let mut file = Some(file);
        let target = &self.target;
        let (intact, digest) = (&self.intact, *self.bytes.finalize().as_bytes());
        publish(&mut || {
            let file = file
                .take()
                .ok_or_else(|| io(std::io::Error::other("renamed twice")))?;
            file.persist(target).map(|_| ()).map_err(|e| io(e.error))?;
            lock(intact).insert(key, (found, digest));
            Ok(())
        })?;
        Ok(found)
    }
}

/// Why an [`IncomingSlice`]'s bytes were refused as they came: they do not decode, or their
/// values fail the check watching them.
enum Pushed {
    Wire(WireError),
    Check(String),
}

impl From<WireError> for Pushed {
    fn from(e: WireError) -> Self {
        Pushed::Wire(e)
    }
}

/// Puts an [`IncomingSlice`]'s file in place (see [`IncomingSlice::finish_with_blocking`]).
pub type Rename<'a> = dyn FnMut() -> Result<(), StoreError> + 'a;

/// A reader that feeds what is read through it to a BLAKE3 hasher.
struct Digesting<R> {
    inner: R,
    digest: blake3::Hasher,
}

impl<R: Read> Read for Digesting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.digest.update(&buf[..n]);
        Ok(n)
    }
}

/// Per slice: the hash its file was found with and the BLAKE3 digest of its wire bytes (see
/// [`SliceStore::open_checked_blocking`]).
type Digests = Arc<Mutex<HashMap<SliceKey, (Hash, [u8; 32])>>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Syncs the store's folder `dir`.
fn sync_folder(dir: &Path) -> Result<(), StoreError> {
    zermelo_storage::durable::sync_dir(dir).map_err(|source| StoreError::Io {
        path: dir.to_owned(),
        source,
    })
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
        let hash = zermelo_proto::keys::slice_hash(&k, &values);
        let err = store
            .put_blocking(&k, n, &[0; 32], encode_values(&values))
            .unwrap_err();
        assert!(matches!(err, StoreError::HashMismatch { .. }), "{err}");
        assert_eq!(store.claimed_hash_blocking(&k), None);
        store.put_blocking(&k, n, &hash, encode_values(&values)).unwrap();
        assert_eq!(store.claimed_hash_blocking(&k), Some(hash));
        assert_eq!(read_all(&store, &k, &hash).unwrap(), values);
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
            read_all(&store, &k, &hash),
            Err(StoreError::Corrupt { .. })
        ));
        assert!(matches!(
            store.open_checked_blocking(&k, &hash),
            Err(StoreError::Corrupt { .. })
        ));
    }

    fn read_all(store: &SliceStore, k: &SliceKey, hash: &Hash) -> Result<Vec<u16>, StoreError> {
        let mut got = Vec::new();
        store.for_each_value_blocking(k, hash, &mut |v: &[u16]| {
            got.extend_from_slice(v);
            Ok::<(), StoreError>(())
        })?;
        Ok(got)
    }

    /// An empty store, and the values of KPK's slice (`i % modulus` at index `i`) with their hash.
    fn empty_store_and_slice(modulus: u64) -> (tempfile::TempDir, SliceStore, SliceKey, Vec<u16>, Hash) {
        let dir = tempfile::tempdir().unwrap();
        let store = SliceStore::open(dir.path()).unwrap();
        let k = kpk();
        let n = SliceIndexer::new(k).size();
        let values: Vec<u16> = (0..n).map(|i| (i % modulus) as u16).collect();
        let hash = zermelo_proto::keys::slice_hash(&k, &values);
        (dir, store, k, values, hash)
    }

    /// A slice uploaded in pieces is checked as a whole: a stream that stops early, holds too
    /// many values or hashes to another value is never stored, and leaves no file behind.
    #[test]
    fn a_slice_arriving_in_pieces_is_stored_only_whole_and_right() {
        let (dir, store, k, values, hash) = empty_store_and_slice(1000);
        let n = values.len() as u64;
        let wire = encode_values(&values);
        let files = || std::fs::read_dir(dir.path()).unwrap().count();

        let mut cut = store.begin_put_blocking(&k, n, &hash).unwrap();
        cut.push_blocking(&wire[..wire.len() / 2]).unwrap();
        assert!(cut.finish_blocking().is_err());
        let mut long = store.begin_put_blocking(&k, n, &hash).unwrap();
        long.push_blocking(&wire).unwrap();
        assert!(long.push_blocking(&encode_values(&[1, 2, 3])).is_err());
        drop(long);
        let mut other = values.clone();
        other[17] ^= 1;
        let mut wrong = store.begin_put_blocking(&k, n, &hash).unwrap();
        wrong.push_blocking(&encode_values(&other)).unwrap();
        assert!(matches!(
            wrong.finish_blocking(),
            Err(StoreError::HashMismatch { .. })
        ));
        assert_eq!(files(), 0, "no slice and no temporary file is left");

        let mut good = store.begin_put_blocking(&k, n, &hash).unwrap();
        for part in wire.chunks(1000) {
            good.push_blocking(part).unwrap();
        }
        assert_eq!(good.finish_blocking().unwrap(), hash);
        assert_eq!(read_all(&store, &k, &hash).unwrap(), values);
        let (mut file, positions, len) = store.open_checked_blocking(&k, &hash).unwrap();
        let mut served = Vec::new();
        file.read_to_end(&mut served).unwrap();
        assert_eq!((positions, len, served), (n, wire.len() as u64, wire));
    }

    /// A file served again is checked by the digest of its bytes, not decoded: a byte changed
    /// on disk since sends it to the full check, so it is served exactly when its values still
    /// decode to the recorded hash (a few bytes of a zstd frame's header can change without
    /// changing them), by this store and by one opened afresh (a restart), which checks in full
    /// first and knows the digest after.
    #[test]
    fn a_stored_slice_changed_on_disk_is_served_only_when_its_values_still_check() {
        let (dir, store, k, values, hash) = empty_store_and_slice(977);
        let n = values.len() as u64;
        let mut put = store.begin_put_blocking(&k, n, &hash).unwrap();
        put.push_blocking(&encode_values(&values)).unwrap();
        put.finish_blocking().unwrap();
        let serve = |store: &SliceStore| store.open_checked_blocking(&k, &hash).map(|_| ());
        serve(&store).unwrap();
        serve(&store).unwrap();
        let again = SliceStore::open(dir.path()).unwrap();
        serve(&again).unwrap();
        serve(&again).unwrap();

        // Every byte of the wire data, one at a time, changed and put back.
        let path = store.path(&k);
        let good = std::fs::read(&path).unwrap();
        let mut caught = 0;
        for at in SLICE_FILE_HEADER_LEN..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 0x10;
            std::fs::write(&path, &bad).unwrap();
            let whole = read_all(&store, &k, &hash).is_ok_and(|v| v == values);
            for s in [&store, &again] {
                match serve(s) {
                    Ok(()) => assert!(whole, "byte {at} changed: served, its values wrong"),
                    Err(StoreError::Corrupt { .. }) => assert!(!whole, "byte {at} changed: refused"),
                    Err(e) => panic!("byte {at} changed: {e}"),
                }
            }
            caught += usize::from(!whole);
        }
        assert!(caught * 10 > (good.len() - SLICE_FILE_HEADER_LEN) * 9, "{caught}");
        std::fs::write(&path, &good).unwrap();
        serve(&store).unwrap();
        serve(&again).unwrap();
    }
}
