//! The worker's slice cache: one slice file per slice ([`zermelo_proto::wire::SliceFile`], the
//! values zstd-compressed) in a directory, read through a memory map, each file's content hash
//! checked on every read (a damaged file is removed, and the slice fetched again), and kept
//! under a byte budget by evicting the least recently used files, never one the task in hand
//! needs.
//!
//! ```
//! use std::collections::BTreeSet;
//! use zermelo_chess::SliceKey;
//! use zermelo_proto::wire::{encode_values, SliceFile};
//! use zermelo_worker::node::cache::{ByteSize, SliceCache};
//!
//! let dir = tempfile::tempdir()?;
//! let budget: ByteSize = "1MiB".parse()?;
//! let cache = SliceCache::open_blocking(dir.path(), budget.0)?;
//! let key = SliceKey::pawnless("KQvK".parse()?);
//! let values = vec![3u16; 100];
//! let hash = zermelo_proto::keys::slice_hash(&key, &values);
//! cache.put_blocking(&key, &SliceFile { hash, positions: 100, data: encode_values(&values) })?;
//! assert_eq!(cache.get_blocking(&key, &hash).as_deref().map(|v| &v[..]), Some(&values[..]));
//! // A copy true to itself but not the slice the coordinator recorded is not used (and removed).
//! assert_eq!(cache.get_blocking(&key, &[0; 32]), None);
//! assert!(cache.evict_blocking(&BTreeSet::new()).is_empty()); // under budget
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use memmap2::Mmap;
use tracing::{info, warn};
use zermelo_chess::index::{SliceIndexer, INDEX_LAYOUT};
use zermelo_chess::SliceKey;
use zermelo_proto::wire::{slice_file_name, SliceFile, ValuesEncoder, SLICE_FILE_HEADER_LEN};
use zermelo_storage::{Metric, SliceHasher, Table, TableMeta, TableWriter, WriteOptions};

/// The end of the name of a slice's table form: `KRNvKNN-0000000000000000-0000000000000000.slice.zmt`.
const TABLE_SUFFIX: &str = ".zmt";

use crate::tables::SliceValues;

/// The default cache budget: 4 GiB.
pub const DEFAULT_CACHE_BYTES: u64 = 4 << 30;

pub use crate::bytes::{human_bytes, BadSize, ByteSize};

/// The cache directory failed (not a damaged file: those are removed and fetched again).
#[derive(Debug, thiserror::Error)]
#[error("slice cache {path}: {source}")]
pub struct CacheError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    bytes: u64,
    /// The tick of the last read or write: the smallest is the least recently used.
    used: u64,
}

#[derive(Debug, Default)]
struct Index {
    /// By file name; files of other names in the directory are not the cache's.
    files: HashMap<String, Entry>,
    bytes: u64,
    tick: u64,
}

impl Index {
    fn touch(&mut self, name: &str, bytes: u64) {
        self.tick += 1;
        let used = self.tick;
        if let Some(old) = self.files.insert(name.to_owned(), Entry { bytes, used }) {
            self.bytes -= old.bytes;
        }
        self.bytes += bytes;
    }

    fn forget(&mut self, name: &str) {
        if let Some(old) = self.files.remove(name) {
            self.bytes -= old.bytes;
        }
    }
}

/// A file evicted from the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evicted {
    pub file: String,
    pub bytes: u64,
}

/// What the cache has done since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheCounters {
    /// Reads that found the slice intact.
    pub hits: u64,
    /// Files found damaged on a read (removed).
    pub damaged: u64,
    /// Files evicted to stay under the budget.
    pub evicted: u64,
}

/// The slice cache of one worker. Share it with an `Arc`; every method is blocking.
#[derive(Debug)]
pub struct SliceCache {
    dir: PathBuf,
    budget: u64,
    index: Mutex<Index>,
    hits: AtomicU64,
    damaged: AtomicU64,
    evicted: AtomicU64,
}

impl SliceCache {
    /// Opens (creating) the cache directory with a budget in bytes. Slice files already there
    /// are kept, least recently modified first in line for eviction. Blocking.
    pub fn open_blocking(dir: &Path, budget: u64) -> Result<SliceCache, CacheError> {
        let err = |source| CacheError {
            path: dir.to_owned(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(err)?;
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(err)? {
            let entry = entry.map_err(err)?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if !name.ends_with(".slice") && !name.ends_with(TABLE_SUFFIX) {
                continue;
            }
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_file() {
                found.push((meta.modified().ok(), name, meta.len()));
            }
        }
        found.sort();
        let mut index = Index::default();
        for (_, name, bytes) in &found {
            index.touch(name, *bytes);
        }
        info!(
            dir = %dir.display(),
            files = found.len(),
            bytes = index.bytes,
            budget = budget,
            "slice cache opened"
        );
        Ok(SliceCache {
            dir: dir.to_owned(),
            budget,
            index: Mutex::new(index),
            hits: AtomicU64::new(0),
            damaged: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Bytes of the slice files the cache holds.
    pub fn bytes(&self) -> u64 {
        self.lock().bytes
    }

    pub fn counters(&self) -> CacheCounters {
        CacheCounters {
            hits: self.hits.load(Ordering::Relaxed),
            damaged: self.damaged.load(Ordering::Relaxed),
            evicted: self.evicted.load(Ordering::Relaxed),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn name(key: &SliceKey) -> String {
        slice_file_name(key)
    }

    /// The path of a slice's file.
    pub fn path(&self, key: &SliceKey) -> PathBuf {
        self.dir.join(Self::name(key))
    }

    /// The name of a slice's table form (see [`table_blocking`](Self::table_blocking)).
    fn table_name(key: &SliceKey) -> String {
        format!("{}{TABLE_SUFFIX}", Self::name(key))
    }

    /// A large slice's table form: a table file of that one slice, in the cache, read a block
    /// at a time ([`Table::open_pread`]: no map, so what it reads is not resident) instead of
    /// held whole. `None` if there is none, or it is not a table of exactly that slice with
    /// content hash `expected` (then it is removed). Each block is checked against its CRC as
    /// it is read; the content hash was checked when the file was made. Blocking.
    pub fn table_blocking(&self, key: &SliceKey, expected: &[u8; 32]) -> Option<Arc<Table>> {
        let name = Self::table_name(key);
        let path = self.dir.join(&name);
        if !path.exists() {
            return None;
        }
        let checked = Table::open_pread(&path).map_err(|e| e.to_string()).and_then(|t| {
            let one = t.slices().len() == 1
                && t.slices()[0].key == key.raw()
                && t.slices()[0].count == SliceIndexer::new(*key).size()
                && t.meta().material == key.material.to_string()
                && t.meta().index_layout == INDEX_LAYOUT;
            if !one {
                Err("not a table of that slice alone".to_string())
            } else if t.slices()[0].hash != *expected {
                Err(STALE.to_string())
            } else {
                Ok(t)
            }
        });
        match checked {
            Ok(table) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                self.lock().touch(&name, table.file_len());
                Some(Arc::new(table))
            }
            Err(reason) => {
                self.damaged.fetch_add(1, Ordering::Relaxed);
                warn!(%key, %reason, path = %path.display(), "cached table of a slice is damaged: removing it");
                let _ = std::fs::remove_file(&path);
                self.lock().forget(&name);
                None
            }
        }
    }

    /// Starts a large slice's table form from values that come in pieces (a slice fetched as it
    /// arrives, or decoded from its slice file): see [`NewTable`]. Blocking.
    pub fn create_table_blocking(&self, key: &SliceKey, positions: u64) -> Result<NewTable<'_>, CacheError> {
        let meta = TableMeta {
            material: key.material.to_string(),
            metric: Metric::Dtm,
            index_layout: INDEX_LAYOUT,
        };
        let options = WriteOptions {
            durable: false,
            ..WriteOptions::default()
        };
        let path = self.dir.join(Self::table_name(key));
        let storage = |e: zermelo_storage::StorageError| CacheError {
            path: path.clone(),
            source: std::io::Error::other(e.to_string()),
        };
        let mut writer = TableWriter::create(&path, &meta, 1, positions, &options).map_err(storage)?;
        writer.begin_slice(key.raw(), positions).map_err(storage)?;
        Ok(NewTable {
            cache: self,
            key: *key,
            path,
            writer,
        })
    }

    /// A large slice's table form made from its slice file in the cache (a slice this worker
    /// solved), decoded a piece at a time and checked against the hash in the file, which must
    /// be `expected`. `None` if the slice file is missing, damaged or holds other values (then
    /// it is removed, and the slice fetched). Blocking.
    pub fn table_from_slice_file_blocking(
        &self,
        key: &SliceKey,
        expected: &[u8; 32],
    ) -> Result<Option<Arc<Table>>, CacheError> {
        let Some((file, header, _)) = self.file_blocking(key) else {
            return Ok(None);
        };
        let made = if header.hash != *expected {
            Err(STALE.to_string())
        } else {
            let mut table = self.create_table_blocking(key, header.positions)?;
            type AnyError = Box<dyn std::error::Error + Send + Sync>;
            let decoded = zermelo_proto::wire::decode_values_from(
                std::io::BufReader::new(file),
                header.positions,
                &mut |v: &[u16]| table.push(v).map_err(AnyError::from),
            );
            match decoded {
                Ok(()) => table.finish(&header.hash)?,
                Err(reason) => Err(reason.to_string()),
            }
        };
        match made {
            Ok(t) => Ok(Some(t)),
            Err(reason) => {
                self.damaged.fetch_add(1, Ordering::Relaxed);
                warn!(%key, %reason, "cached slice is damaged: removing it, it is fetched again");
                let name = Self::name(key);
                let _ = std::fs::remove_file(self.dir.join(&name));
                self.lock().forget(&name);
                Ok(None)
            }
        }
    }

    /// A cached slice's values, read through a memory map and checked against the content hash
    /// in its file, which must be `expected` (the hash the coordinator recorded for the slice:
    /// a file true to itself but of other values is not used); `None` if it is not cached. A
    /// damaged or other file is removed (and counted), so the slice is fetched again. Blocking.
    pub fn get_blocking(&self, key: &SliceKey, expected: &[u8; 32]) -> Option<SliceValues> {
        let name = Self::name(key);
        let path = self.dir.join(&name);
        let file = std::fs::File::open(&path).ok()?;
        let len = file.metadata().ok()?.len();
        let checked = if len < SLICE_FILE_HEADER_LEN as u64 {
            Err("shorter than a slice file's header".to_string())
        } else {
            // Safety: the cache directory is this worker's own. Its files are only ever written
            // whole into a temp file and renamed over the old name (`put_blocking`), which leaves
            // a mapping of the old file intact, and the map is dropped before this function
            // returns; nothing in Zermelo truncates or edits them in place. Someone else editing
            // a file in place while it is mapped would break the contract (a truncation could
            // fault); changed bytes would also fail the hash check below. The map saves copying
            // the compressed bytes into a buffer before zstd reads them.
            match unsafe { Mmap::map(&file) } {
                Ok(map) => check_file(key, &map, expected),
                Err(e) => Err(format!("cannot map it: {e}")),
            }
        };
        match checked {
            Ok(values) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                self.lock().touch(&name, len);
                Some(values.into())
            }
            Err(reason) => {
                let damaged = self.damaged.fetch_add(1, Ordering::Relaxed) + 1;
                warn!(
                    %key,
                    %reason,
                    path = %path.display(),
                    damaged,
                    "cached slice is damaged: removing it, it is fetched again"
                );
                let _ = std::fs::remove_file(&path);
                self.lock().forget(&name);
                None
            }
        }
    }

    /// Writes a slice into the cache atomically (a temp file renamed over its name). Does not
    /// evict: see [`evict_blocking`](Self::evict_blocking). Blocking.
    pub fn put_blocking(&self, key: &SliceKey, file: &SliceFile) -> Result<(), CacheError> {
        let err = |source| CacheError {
            path: self.dir.clone(),
            source,
        };
        let bytes = file.to_bytes();
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(&self.dir)
            .map_err(err)?;
        tmp.write_all(&bytes).map_err(err)?;
        let name = Self::name(key);
        tmp.persist(self.dir.join(&name)).map_err(|e| err(e.error))?;
        self.lock().touch(&name, bytes.len() as u64);
        Ok(())
    }

    /// Starts a slice file whose values come in pieces (a slice as it is solved), so that a
    /// slice of any size takes a few megabytes of memory: see [`NewSlice`]. Blocking.
    pub fn create_blocking(&self, key: &SliceKey, positions: u64) -> Result<NewSlice<'_>, CacheError> {
        let err = |source| CacheError {
            path: self.dir.clone(),
            source,
        };
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(&self.dir)
            .map_err(err)?;
        // The header's place: written at the end, when the hash is known.
        tmp.write_all(&[0; SLICE_FILE_HEADER_LEN]).map_err(err)?;
        let encoder = ValuesEncoder::new(std::io::BufWriter::with_capacity(1 << 20, tmp)).map_err(err)?;
        Ok(NewSlice {
            cache: self,
            key: *key,
            positions,
            pushed: 0,
            encoder,
            hasher: zermelo_proto::keys::slice_hasher(key, positions),
        })
    }

    /// A cached slice's file, positioned at its wire bytes, with its header (its `data` empty)
    /// and the number of wire bytes: for sending it. Not checked against its hash (the caller
    /// wrote it, or checks it). `None` if it is not cached. Blocking.
    pub fn file_blocking(&self, key: &SliceKey) -> Option<(std::fs::File, SliceFile, u64)> {
        use std::io::Read;
        let mut file = std::fs::File::open(self.path(key)).ok()?;
        let len = file.metadata().ok()?.len();
        let mut head = [0u8; SLICE_FILE_HEADER_LEN];
        file.read_exact(&mut head).ok()?;
        let header = SliceFile::from_bytes(&head).ok()?;
        Some((file, header, len - SLICE_FILE_HEADER_LEN as u64))
    }

    /// Evicts least recently used files until the cache is within its budget, never the files
    /// of `pinned` (the slices the task in hand needs). Returns what was evicted, oldest first;
    /// each eviction is logged. Blocking.
    pub fn evict_blocking(&self, pinned: &BTreeSet<SliceKey>) -> Vec<Evicted> {
        let pinned: BTreeSet<String> = pinned
            .iter()
            .flat_map(|k| [Self::name(k), Self::table_name(k)])
            .collect();
        let mut index = self.lock();
        if index.bytes <= self.budget {
            return Vec::new();
        }
        let mut candidates: Vec<(u64, String, u64)> = index
            .files
            .iter()
            .filter(|(name, _)| !pinned.contains(*name))
            .map(|(name, e)| (e.used, name.clone(), e.bytes))
            .collect();
        candidates.sort();
        let mut evicted = Vec::new();
        for (_, name, bytes) in candidates {
            if index.bytes <= self.budget {
                break;
            }
            let path = self.dir.join(&name);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    warn!(file = %name, error = %e, "cannot evict a cached slice");
                    continue;
                }
            }
            index.forget(&name);
            self.evicted.fetch_add(1, Ordering::Relaxed);
            info!(
                file = %name,
                bytes,
                cache_bytes = index.bytes,
                budget = self.budget,
                "evicted from the slice cache (least recently used)"
            );
            evicted.push(Evicted { file: name, bytes });
        }
        if index.bytes > self.budget {
            warn!(
                cache_bytes = index.bytes,
                budget = self.budget,
                "the slices of the task in hand exceed the cache budget; they are kept"
            );
        }
        evicted
    }
}

/// A slice file being written into the cache from values that come in pieces: encoded and
/// hashed as they come, into a temp file that takes the slice's name once every value is in
/// ([`finish`](Self::finish)). Dropped unfinished, it leaves nothing behind.
pub struct NewSlice<'a> {
    cache: &'a SliceCache,
    key: SliceKey,
    positions: u64,
    pushed: u64,
    encoder: ValuesEncoder<std::io::BufWriter<tempfile::NamedTempFile>>,
    hasher: SliceHasher,
}

impl NewSlice<'_> {
    /// The next values.
    pub fn push(&mut self, values: &[u16]) -> Result<(), CacheError> {
        self.pushed += values.len() as u64;
        self.hasher.update(values);
        self.encoder.push(values).map_err(|source| CacheError {
            path: self.cache.dir.clone(),
            source,
        })
    }

    /// Writes the header, renames the file into place; returns the slice's content hash and the
    /// file's length. Does not evict. An error if the values pushed are not the positions
    /// announced.
    pub fn finish(self) -> Result<([u8; 32], u64), CacheError> {
        use std::io::{Seek, SeekFrom};
        let err = |source| CacheError {
            path: self.cache.dir.clone(),
            source,
        };
        if self.pushed != self.positions {
            return Err(err(std::io::Error::other(format!(
                "slice {}: {} values written, not {}",
                self.key, self.pushed, self.positions
            ))));
        }
        let hash = self.hasher.finalize();
        let mut tmp = self
            .encoder
            .finish()
            .map_err(err)?
            .into_inner()
            .map_err(|e| err(e.into_error()))?;
        let header = SliceFile {
            hash,
            positions: self.positions,
            data: Vec::new(),
        };
        tmp.seek(SeekFrom::Start(0)).map_err(err)?;
        tmp.write_all(&header.to_bytes()).map_err(err)?;
        let len = tmp.as_file().metadata().map_err(err)?.len();
        let name = SliceCache::name(&self.key);
        tmp.persist(self.cache.dir.join(&name))
            .map_err(|e| err(e.error))?;
        self.cache.lock().touch(&name, len);
        Ok((hash, len))
    }
}

/// A large slice's table form being written into the cache from values that come in pieces:
/// the table file takes its name once every value is in and their content hash is the one
/// expected ([`finish`](Self::finish)). Dropped unfinished, it leaves nothing behind.
pub struct NewTable<'a> {
    cache: &'a SliceCache,
    key: SliceKey,
    path: PathBuf,
    writer: TableWriter,
}

impl NewTable<'_> {
    /// The next values.
    pub fn push(&mut self, values: &[u16]) -> Result<(), CacheError> {
        self.writer.push_values(values).map_err(|e| self.error(e))
    }

    fn error(&self, e: zermelo_storage::StorageError) -> CacheError {
        CacheError {
            path: self.path.clone(),
            source: std::io::Error::other(e.to_string()),
        }
    }

    /// Ends the table if its values hash to `expected` and opens it; `Ok(Err(reason))` (and
    /// nothing left behind) if they do not, or are not all there.
    pub fn finish(mut self, expected: &[u8; 32]) -> Result<Result<Arc<Table>, String>, CacheError> {
        let hash = match self.writer.end_slice() {
            Ok(h) => h,
            Err(e) => return Ok(Err(e.to_string())),
        };
        if hash != *expected {
            return Ok(Err(format!("slice {}: content hash mismatch", self.key)));
        }
        let (cache, path) = (self.cache, self.path.clone());
        let storage = |e: zermelo_storage::StorageError| CacheError {
            path: path.clone(),
            source: std::io::Error::other(e.to_string()),
        };
        let summary = self.writer.finish().map_err(storage)?;
        let table = Table::open_pread(&path).map_err(storage)?;
        cache
            .lock()
            .touch(&SliceCache::table_name(&self.key), summary.bytes);
        Ok(Ok(Arc::new(table)))
    }
}

/// Why a copy true to itself (cached or fetched) is not used: it holds other values than the
/// slice the coordinator recorded (a copy from an older build, or planted).
pub(crate) const STALE: &str = "its content hash is not the one the coordinator recorded for the slice";

/// Decodes a mapped slice file and checks its values against the hash it claims, which must be
/// `expected`.
fn check_file(key: &SliceKey, bytes: &[u8], expected: &[u8; 32]) -> Result<Vec<u16>, String> {
    let (head, data) = bytes.split_at(SLICE_FILE_HEADER_LEN);
    let header = SliceFile::from_bytes(head).map_err(|e| e.to_string())?;
    if header.hash != *expected {
        return Err(STALE.to_string());
    }
    zermelo_proto::keys::decode_checked(key, data, header.positions, &header.hash)
}

#[cfg(test)]
mod tests {
    use super::*;
    use zermelo_proto::wire::encode_values;

    fn slice(material: &str, fill: u16, n: usize) -> (SliceKey, SliceFile) {
        let key = SliceKey::pawnless(material.parse().unwrap());
        let values = vec![fill; n];
        let hash = zermelo_proto::keys::slice_hash(&key, &values);
        let file = SliceFile {
            hash,
            positions: n as u64,
            data: encode_values(&values),
        };
        (key, file)
    }

    fn size_of(file: &SliceFile) -> u64 {
        file.to_bytes().len() as u64
    }

    #[test]
    fn sizes_parse_with_units_and_bad_ones_say_why() {
        let ok = |s: &str| s.parse::<ByteSize>().unwrap().0;
        assert_eq!(ok("0"), 0);
        assert_eq!(ok("4096"), 4096);
        assert_eq!(ok("4096B"), 4096);
        assert_eq!(ok("512MiB"), 512 << 20);
        assert_eq!(ok("512mib"), 512 << 20);
        assert_eq!(ok("2GiB"), 2 << 30);
        assert_eq!(ok("2G"), 2 << 30);
        assert_eq!(ok(" 3 KiB "), 3 << 10);
        assert_eq!(ok("1TiB"), 1 << 40);
        assert_eq!(ok("5MB"), 5_000_000);
        assert_eq!(ok("7GB"), 7_000_000_000);
        for (input, reason) in [
            ("", "it does not start with a number"),
            ("GiB", "it does not start with a number"),
            ("-1GiB", "it does not start with a number"),
            ("1.5GiB", "unknown unit (B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)"),
            (
                "12 parsecs",
                "unknown unit (B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)",
            ),
            ("99999999999999999999", "the number is too large"),
            ("17000000TiB", "it does not fit in 64 bits"),
        ] {
            let err = input.parse::<ByteSize>().unwrap_err();
            assert_eq!(err.reason, reason, "{input:?}");
            assert!(err.to_string().contains("4GiB"), "{err}");
        }
        assert_eq!(ByteSize(DEFAULT_CACHE_BYTES).to_string(), "4GiB");
        assert_eq!(ByteSize(1536).to_string(), "1536");
        assert_eq!(ByteSize(3 << 20).to_string(), "3MiB");
    }

    /// Files are evicted least recently used first (a read counts as a use), only down to the
    /// budget, and never a pinned one, even when that leaves the cache over its budget.
    #[test]
    fn eviction_is_least_recently_used_first_within_the_budget_and_spares_pinned_slices() {
        let dir = tempfile::tempdir().unwrap();
        let slices: Vec<(SliceKey, SliceFile)> = ["KQvK", "KRvK", "KBvK", "KNvK"]
            .iter()
            .enumerate()
            .map(|(i, m)| slice(m, i as u16 + 1, 3000))
            .collect();
        let one = size_of(&slices[0].1);
        assert!(slices.iter().all(|(_, f)| size_of(f) == one));
        // Room for two files and a half.
        let cache = SliceCache::open_blocking(dir.path(), one * 5 / 2).unwrap();
        for (k, f) in &slices {
            cache.put_blocking(k, f).unwrap();
        }
        assert_eq!(cache.bytes(), 4 * one);
        // KQvK, the oldest write, is read: now KRvK is the least recently used.
        assert!(cache.get_blocking(&slices[0].0, &slices[0].1.hash).is_some());
        let evicted = cache.evict_blocking(&BTreeSet::new());
        let names: Vec<&str> = evicted.iter().map(|e| e.file.as_str()).collect();
        assert_eq!(
            names,
            [
                "KRvK-0000000000000000-0000000000000000.slice",
                "KBvK-0000000000000000-0000000000000000.slice"
            ]
        );
        assert_eq!(cache.bytes(), 2 * one);
        assert!(!cache.path(&slices[1].0).exists() && !cache.path(&slices[2].0).exists());
        assert!(cache.get_blocking(&slices[1].0, &slices[1].1.hash).is_none());
        assert_eq!(
            cache
                .get_blocking(&slices[3].0, &slices[3].1.hash)
                .as_deref()
                .map(|v| &v[..]),
            Some(&[4u16; 3000][..])
        );
        assert_eq!(cache.counters().evicted, 2);
        assert_eq!(cache.counters().damaged, 0);

        // Over the budget with everything pinned: nothing is evicted.
        for (k, f) in &slices[1..3] {
            cache.put_blocking(k, f).unwrap();
        }
        let all: BTreeSet<SliceKey> = slices.iter().map(|(k, _)| *k).collect();
        assert!(cache.evict_blocking(&all).is_empty());
        assert_eq!(cache.bytes(), 4 * one);
        // Pinned KQvK (the least recently used) stays; the next two go.
        let pinned: BTreeSet<SliceKey> = [slices[0].0].into();
        let evicted: Vec<String> = cache
            .evict_blocking(&pinned)
            .into_iter()
            .map(|e| e.file)
            .collect();
        assert_eq!(evicted.len(), 2);
        assert!(
            evicted[0].starts_with("KNvK") && evicted[1].starts_with("KRvK"),
            "{evicted:?}"
        );
        assert!(cache.path(&slices[0].0).exists());
        assert!(cache.bytes() <= cache.budget());
    }

    /// A reopened cache knows its files (and their sizes), oldest modification first in line.
    #[test]
    fn a_reopened_cache_counts_the_files_already_there() {
        let dir = tempfile::tempdir().unwrap();
        let (k, f) = slice("KQvK", 9, 500);
        {
            let cache = SliceCache::open_blocking(dir.path(), 1 << 20).unwrap();
            cache.put_blocking(&k, &f).unwrap();
        }
        std::fs::write(dir.path().join("notes.txt"), "not a slice").unwrap();
        let cache = SliceCache::open_blocking(dir.path(), 0).unwrap();
        assert_eq!(cache.bytes(), size_of(&f));
        assert_eq!(cache.evict_blocking(&BTreeSet::new()).len(), 1);
        assert_eq!(cache.bytes(), 0);
        assert!(dir.path().join("notes.txt").exists());
    }

    #[test]
    fn a_damaged_cache_file_is_removed_and_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let cache = SliceCache::open_blocking(dir.path(), 1 << 20).unwrap();
        let (key, file) = slice("KQvK", 5, 64);
        cache.put_blocking(&key, &file).unwrap();
        assert_eq!(
            cache.get_blocking(&key, &file.hash).as_deref().map(|v| &v[..]),
            Some(&[5u16; 64][..])
        );
        // Other values under the same claimed hash.
        let bad = SliceFile {
            data: encode_values(&[6u16; 64]),
            ..file.clone()
        };
        std::fs::write(cache.path(&key), bad.to_bytes()).unwrap();
        assert_eq!(cache.get_blocking(&key, &file.hash), None);
        assert!(!cache.path(&key).exists());
        // One flipped byte in the compressed payload, and a truncated file.
        for damage in [
            |b: &mut Vec<u8>| {
                let i = b.len() - 3;
                b[i] ^= 0x40
            },
            |b: &mut Vec<u8>| b.truncate(20),
        ] {
            cache.put_blocking(&key, &file).unwrap();
            let mut bytes = std::fs::read(cache.path(&key)).unwrap();
            damage(&mut bytes);
            std::fs::write(cache.path(&key), bytes).unwrap();
            assert_eq!(cache.get_blocking(&key, &file.hash), None);
            assert!(!cache.path(&key).exists());
        }
        assert_eq!(cache.counters().damaged, 3);
        assert_eq!(cache.bytes(), 0);
    }

    /// A copy true to itself (its hash is its values') but of other values than the slice the
    /// coordinator recorded (a file from an older build, or planted) is not used: not as a
    /// slice file, not made into a table form, not as a table form. It is removed and counted.
    #[test]
    fn a_copy_of_other_values_than_the_recorded_slice_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let cache = SliceCache::open_blocking(dir.path(), 1 << 30).unwrap();
        let n = SliceIndexer::new(SliceKey::pawnless("KQvK".parse().unwrap())).size() as usize;
        let (key, recorded) = slice("KQvK", 5, n);
        let (_, other) = slice("KQvK", 6, n);
        cache.put_blocking(&key, &other).unwrap();
        assert_eq!(cache.get_blocking(&key, &recorded.hash), None);
        assert!(!cache.path(&key).exists());
        cache.put_blocking(&key, &other).unwrap();
        assert!(cache
            .table_from_slice_file_blocking(&key, &recorded.hash)
            .unwrap()
            .is_none());
        assert!(!cache.path(&key).exists());
        assert_eq!(cache.counters().damaged, 2);

        // The recorded slice makes a table form, which is then used for it and for no other.
        cache.put_blocking(&key, &recorded).unwrap();
        let table = cache
            .table_from_slice_file_blocking(&key, &recorded.hash)
            .unwrap()
            .unwrap();
        assert_eq!(table.slices()[0].hash, recorded.hash);
        drop(table);
        assert!(cache.table_blocking(&key, &recorded.hash).is_some());
        assert!(cache.table_blocking(&key, &other.hash).is_none());
        assert!(cache.table_blocking(&key, &recorded.hash).is_none(), "removed");
        assert_eq!(cache.counters().damaged, 3);
    }

    /// A slice written in pieces is the file [`SliceCache::put_blocking`] would hold for it (the
    /// same header and values; its hash is the slice's), counted in the cache's bytes; one
    /// dropped before its end, or given the wrong number of values, leaves nothing.
    #[test]
    fn a_slice_written_in_pieces_is_a_whole_checked_file() {
        let dir = tempfile::tempdir().unwrap();
        let cache = SliceCache::open_blocking(dir.path(), 1 << 30).unwrap();
        let key = SliceKey::pawnless("KQvK".parse().unwrap());
        let values: Vec<u16> = (0..300_000u32).map(|i| (i % 517) as u16).collect();
        let mut new = cache.create_blocking(&key, values.len() as u64).unwrap();
        for part in values.chunks(40_000) {
            new.push(part).unwrap();
        }
        let (hash, len) = new.finish().unwrap();
        assert_eq!(hash, zermelo_proto::keys::slice_hash(&key, &values));
        assert_eq!(
            cache.get_blocking(&key, &hash).as_deref().map(|v| &v[..]),
            Some(&values[..])
        );
        assert_eq!(cache.bytes(), len);
        let (mut file, header, data_len) = cache.file_blocking(&key).unwrap();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut data).unwrap();
        assert_eq!((header.hash, header.positions), (hash, values.len() as u64));
        assert_eq!(data_len, data.len() as u64);
        assert_eq!(
            zermelo_proto::wire::decode_values(&data, values.len() as u64).unwrap(),
            values
        );

        let other = SliceKey::pawnless("KRvK".parse().unwrap());
        let mut short = cache.create_blocking(&other, 10).unwrap();
        short.push(&[1; 9]).unwrap();
        assert!(short.finish().is_err());
        let mut dropped = cache.create_blocking(&other, 10).unwrap();
        dropped.push(&[1; 5]).unwrap();
        drop(dropped);
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(
            names,
            [SliceCache::name(&key)],
            "only the finished slice's file is left"
        );
    }
}
