use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::format::{
    decode_block, decode_slice_entry, BlockEntry, Header, HeaderError, BLOCK_ENTRY_LEN, FOOTER_LEN,
    FOOTER_MAGIC, HEADER_LEN, HEADER_MAGIC, SLICE_ENTRY_LEN, TABLES_HASH_LEN,
};
use crate::hash::SliceHasher;
use crate::memory::advise_huge_pages;
use crate::source::{FileSource, MemorySource, MmapSource, RandomAccess};
use crate::{SliceEntry, SliceKey, StorageError, TableMeta, FORMAT_VERSION};

/// How many decompressed blocks [`Table::value`] keeps (8 x 128 KiB with the default block size).
const CACHE_BLOCKS: usize = 8;

/// Bytes hashed per read by [`Table::verify_checksum`].
const HASH_CHUNK: usize = 1 << 20;

/// Never reserve more than this many values up front: a slice's vector grows as its blocks
/// decode, so a lying count costs nothing before the blocks are checked.
const MAX_RESERVE_VALUES: u64 = 1 << 24;

/// An open table file.
///
/// Opening checks the header, the slice and block tables (against their own checksum) and the
/// footer magic; it reads no block. Blocks are checked (crc32) whenever they are decompressed,
/// slices (content hash) whenever they are read whole, and the whole file by
/// [`verify_checksum`](Table::verify_checksum). All methods take `&self`: a `Table` can be shared
/// between threads.
pub struct Table {
    /// Unique in the process: tells one table's blocks from another's in a [`ValueReader`].
    ///
    /// [`ValueReader`]: crate::ValueReader
    id: u64,
    source: Box<dyn RandomAccess>,
    /// The name used in errors: the path, or `<memory>`.
    name: PathBuf,
    path: Option<PathBuf>,
    header: Header,
    slices: Vec<SliceEntry>,
    blocks: Vec<BlockEntry>,
    footer_hash: [u8; 32],
    cache: Mutex<BlockCache>,
}

impl fmt::Debug for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Table")
            .field("name", &self.name)
            .field("meta", &self.header.meta)
            .field("slices", &self.slices.len())
            .field("positions", &self.header.value_count)
            .field("blocks", &self.blocks.len())
            .finish_non_exhaustive()
    }
}

impl Table {
    /// Opens the table file at `path` through a memory map.
    pub fn open(path: &Path) -> Result<Table, StorageError> {
        // Safety: table files are immutable once in place. Writers only ever create a new file
        // and rename it over the old one (which leaves existing maps of the old file valid), and
        // nothing in this project edits or truncates a table file in place. Mapping saves a
        // system call and a copy per block read.
        let source = unsafe { MmapSource::open(path) }.map_err(|e| StorageError::io(path, e))?;
        Table::parse(Box::new(source), path.to_owned(), Some(path.to_owned()))
    }

    /// Opens the table file at `path` with positioned reads instead of a memory map: one system
    /// call per block, but safe whatever happens to the file meanwhile.
    pub fn open_pread(path: &Path) -> Result<Table, StorageError> {
        let source = FileSource::open(path).map_err(|e| StorageError::io(path, e))?;
        Table::parse(Box::new(source), path.to_owned(), Some(path.to_owned()))
    }

    /// A table held in memory (for instance just received over the network). Errors name it
    /// `<memory>`.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Table, StorageError> {
        Table::parse(
            Box::new(MemorySource::new(bytes)),
            PathBuf::from("<memory>"),
            None,
        )
    }

    /// A table read from any source; `name` is what errors call it.
    pub fn from_source(
        source: Box<dyn RandomAccess>,
        name: impl Into<PathBuf>,
    ) -> Result<Table, StorageError> {
        Table::parse(source, name.into(), None)
    }

    fn parse(
        source: Box<dyn RandomAccess>,
        name: PathBuf,
        path: Option<PathBuf>,
    ) -> Result<Table, StorageError> {
        let corrupt = |detail: String| StorageError::corrupt(&name, detail);
        let size = source.size();
        let read = |buf: &mut [u8], offset: u64| read_at(&*source, &name, buf, offset);

        if size < HEADER_LEN {
            let mut start = vec![0u8; size.min(HEADER_MAGIC.len() as u64) as usize];
            read(&mut start, 0)?;
            return if start.is_empty() {
                Err(corrupt("the file is empty".to_owned()))
            } else if HEADER_MAGIC.starts_with(&start) {
                Err(corrupt(format!(
                    "the file is {size} bytes long, shorter than a header"
                )))
            } else {
                Err(StorageError::NotATable { path: name })
            };
        }
        let mut header_bytes = [0u8; HEADER_LEN as usize];
        read(&mut header_bytes, 0)?;
        let header = Header::decode(&header_bytes).map_err(|e| match e {
            HeaderError::NotATable => StorageError::NotATable { path: name.clone() },
            HeaderError::Version(found) => StorageError::UnsupportedVersion {
                path: name.clone(),
                found,
                supported: FORMAT_VERSION,
            },
            HeaderError::Metric(found) => StorageError::UnsupportedMetric {
                path: name.clone(),
                found,
            },
            HeaderError::Corrupt(detail) => corrupt(detail),
        })?;

        // Sizes, checked before anything is allocated: every block takes at least one byte.
        let tables_len = header
            .slice_count
            .checked_mul(SLICE_ENTRY_LEN)
            .and_then(|s| s.checked_add(header.block_count.checked_mul(BLOCK_ENTRY_LEN)?));
        let needed = tables_len.and_then(|t| {
            HEADER_LEN
                .checked_add(t)?
                .checked_add(TABLES_HASH_LEN + FOOTER_LEN)?
                .checked_add(header.block_count)
        });
        let (Some(tables_len), Some(needed)) = (tables_len, needed) else {
            return Err(corrupt("the header's slice and block counts overflow".to_owned()));
        };
        if needed > size {
            return Err(corrupt(format!(
                "the file is {size} bytes long, too short for {} slices and {} blocks ({needed} bytes at \
                 least)",
                header.slice_count, header.block_count
            )));
        }

        let mut footer = [0u8; FOOTER_LEN as usize];
        read(&mut footer, size - FOOTER_LEN)?;
        if footer[32..] != FOOTER_MAGIC {
            return Err(corrupt("footer magic missing (truncated file?)".to_owned()));
        }
        let mut footer_hash = [0u8; 32];
        footer_hash.copy_from_slice(&footer[..32]);

        let tables_at = size - FOOTER_LEN - TABLES_HASH_LEN - tables_len;
        let mut tables = vec![0u8; usize_from(tables_len + TABLES_HASH_LEN, &name)?];
        read(&mut tables, tables_at)?;
        let (tables, tables_hash) = tables.split_at(tables.len() - TABLES_HASH_LEN as usize);
        if blake3::hash(tables).as_bytes() != tables_hash {
            return Err(corrupt("slice and block tables checksum mismatch".to_owned()));
        }
        let (slice_bytes, block_bytes) =
            tables.split_at(usize_from(header.slice_count * SLICE_ENTRY_LEN, &name)?);

        let mut slices = Vec::with_capacity(slice_bytes.len() / SLICE_ENTRY_LEN as usize);
        let mut next_first = 0u64;
        for (i, chunk) in slice_bytes.chunks_exact(SLICE_ENTRY_LEN as usize).enumerate() {
            let mut b = [0u8; SLICE_ENTRY_LEN as usize];
            b.copy_from_slice(chunk);
            let e = decode_slice_entry(&b);
            if let Some(prev) = slices.last().map(|p: &SliceEntry| p.key) {
                if e.key <= prev {
                    return Err(corrupt(format!(
                        "slice {i} key {} does not follow key {}",
                        fmt_key(e.key),
                        fmt_key(prev)
                    )));
                }
            }
            if e.first != next_first {
                return Err(corrupt(format!(
                    "slice {i} starts at value {}, expected {next_first}",
                    e.first
                )));
            }
            next_first = next_first
                .checked_add(e.count)
                .ok_or_else(|| corrupt(format!("slice {i} count {} overflows", e.count)))?;
            slices.push(e);
        }
        if next_first != header.value_count {
            return Err(corrupt(format!(
                "the slices hold {next_first} values, the header says {}",
                header.value_count
            )));
        }

        let max_frame = zstd::zstd_safe::compress_bound(header.block_values as usize * 2) as u64;
        let mut blocks = Vec::with_capacity(block_bytes.len() / BLOCK_ENTRY_LEN as usize);
        let mut next_offset = HEADER_LEN;
        for (i, chunk) in block_bytes.chunks_exact(BLOCK_ENTRY_LEN as usize).enumerate() {
            let mut b = [0u8; BLOCK_ENTRY_LEN as usize];
            b.copy_from_slice(chunk);
            let e = BlockEntry::decode(&b);
            if e.offset != next_offset {
                return Err(corrupt(format!(
                    "block {i} starts at byte {}, expected {next_offset}",
                    e.offset
                )));
            }
            if e.len == 0 || u64::from(e.len) > max_frame {
                return Err(corrupt(format!("block {i} has impossible length {}", e.len)));
            }
            next_offset += u64::from(e.len);
            if next_offset > tables_at {
                return Err(corrupt(format!("block {i} runs into the slice table")));
            }
            blocks.push(e);
        }
        if next_offset != tables_at {
            return Err(corrupt(format!(
                "the blocks end at byte {next_offset}, the slice table starts at {tables_at}"
            )));
        }

        tracing::debug!(
            table = %name.display(),
            material = %header.meta.material,
            slices = slices.len(),
            positions = header.value_count,
            bytes = size,
            "table opened"
        );
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        Ok(Table {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            source,
            name,
            path,
            header,
            slices,
            blocks,
            footer_hash,
            cache: Mutex::new(BlockCache::default()),
        })
    }

    /// The material, metric and index layout from the header.
    pub fn meta(&self) -> &TableMeta {
        &self.header.meta
    }

    /// The file's format version ([`FORMAT_VERSION`] for a table this build wrote; an older
    /// one's slice hashes are not this build's, see `FORMAT.md`).
    pub fn format_version(&self) -> u32 {
        self.header.version
    }

    /// The slice table, sorted by key.
    pub fn slices(&self) -> &[SliceEntry] {
        &self.slices
    }

    /// The index of the slice with `key`, if the table has it.
    pub fn find_slice(&self, key: SliceKey) -> Option<usize> {
        self.slices.binary_search_by(|e| e.key.cmp(&key)).ok()
    }

    /// The number of values over all slices.
    pub fn positions(&self) -> u64 {
        self.header.value_count
    }

    /// Values per block.
    pub fn block_values(&self) -> u32 {
        self.header.block_values
    }

    /// The number of compressed blocks.
    pub fn block_count(&self) -> u64 {
        self.header.block_count
    }

    /// The length of the file in bytes.
    pub fn file_len(&self) -> u64 {
        self.source.size()
    }

    /// The path the table was opened from (`None` for [`from_bytes`](Table::from_bytes) and
    /// [`from_source`](Table::from_source)).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// All values of slice `slice`. Checks every block's checksum and the slice's content hash.
    pub fn read_slice(&self, slice: usize) -> Result<Vec<u16>, StorageError> {
        self.read_slice_on(slice, 1)
    }

    /// [`read_slice`](Table::read_slice) on up to `threads` threads: a round of blocks at a
    /// time ([`MAX_RESERVE_VALUES`] values), cut into runs of about equal length, each
    /// decompressed by a thread of its own (the calling thread takes the first), then hashed.
    /// The same values and checks whatever `threads` is.
    pub fn read_slice_on(&self, slice: usize, threads: usize) -> Result<Vec<u16>, StorageError> {
        self.read_slice_in_rounds(slice, threads, MAX_RESERVE_VALUES)
    }

    /// [`read_slice_on`](Table::read_slice_on) with rounds of at least a block and at most
    /// `round_values` values.
    fn read_slice_in_rounds(
        &self,
        slice: usize,
        threads: usize,
        round_values: u64,
    ) -> Result<Vec<u16>, StorageError> {
        let entry = self.slice_entry(slice)?;
        let (first, end) = (entry.first, entry.first + entry.count);
        let bv = u64::from(self.header.block_values);
        let round = (round_values / bv).max(1) * bv;
        let mut hasher = self.header.slice_hasher(entry.key, entry.count);
        let mut out = Vec::with_capacity(entry.count.min(MAX_RESERVE_VALUES) as usize);
        let mut at = first;
        while at < end {
            // Up to the end of a round's blocks: grown a round at a time as the blocks decode,
            // so a lying count costs nothing before the blocks are checked.
            let to = (at / bv * bv + round).min(end);
            let start = out.len();
            out.resize(start + (to - at) as usize, 0);
            self.decode_runs(at, to, &mut out[start..], threads)?;
            hasher.update(&out[start..]);
            at = to;
        }
        if hasher.finalize() != entry.hash {
            return Err(self.corrupt(format!(
                "slice {slice} (key {}) content hash mismatch",
                fmt_key(entry.key)
            )));
        }
        Ok(out)
    }

    /// The values at indices `from..to` into `out` (as long), cut on block boundaries into up
    /// to `threads` runs, one per thread, the calling thread taking the first.
    fn decode_runs(&self, from: u64, to: u64, out: &mut [u16], threads: usize) -> Result<(), StorageError> {
        let bv = u64::from(self.header.block_values);
        let blocks = to.div_ceil(bv) - from / bv;
        let runs = (threads.max(1) as u64).min(blocks);
        if runs <= 1 {
            return self.decode_run(from, to, out);
        }
        let cut = |r: u64| match r {
            0 => from,
            r if r == runs => to,
            r => (from / bv + blocks * r / runs) * bv,
        };
        let mut rest = out;
        let mut parts = Vec::with_capacity(runs as usize);
        for r in 0..runs {
            let (a, b) = (cut(r), cut(r + 1));
            let (part, after) = std::mem::take(&mut rest).split_at_mut((b - a) as usize);
            parts.push((a, b, part));
            rest = after;
        }
        let mut parts = parts.into_iter();
        let (a, b, own) = parts.next().expect("at least two runs");
        std::thread::scope(|scope| {
            let others: Vec<_> = parts
                .map(|(a, b, part)| scope.spawn(move || self.decode_run(a, b, part)))
                .collect();
            let mine = self.decode_run(a, b, own);
            for other in others {
                other.join().expect("a thread reading a slice panicked")?;
            }
            mine
        })
    }

    /// The values at indices `from..to` of the table into `out` (as long): whole blocks
    /// decompressed here, a block's part through the block cache.
    fn decode_run(&self, from: u64, to: u64, out: &mut [u16]) -> Result<(), StorageError> {
        let bv = u64::from(self.header.block_values);
        let (mut dctx, mut scratch, mut values) = (None, BlockScratch::default(), Vec::new());
        let mut at = from;
        while at < to {
            let block = at / bv;
            let block_start = block * bv;
            let block_len = self.header.block_len(block);
            let lo = (at - block_start) as usize;
            let hi = (to - block_start).min(block_len) as usize;
            let into = &mut out[(at - from) as usize..(block_start + hi as u64 - from) as usize];
            if lo == 0 && hi as u64 == block_len {
                // The run covers the whole block: nobody else needs it, keep it out of the cache.
                let dctx = match &mut dctx {
                    Some(d) => d,
                    None => dctx.insert(self.decompressor()?),
                };
                self.decode_block_into(block, dctx, &mut scratch, &mut values)?;
                into.copy_from_slice(&values);
            } else {
                into.copy_from_slice(&self.cached_block(block)?[lo..hi]);
            }
            at = block_start + hi as u64;
        }
        Ok(())
    }

    /// Calls `f` with the values of slice `slice` in order, a block at a time, holding one
    /// block: for slices too big to read whole. Checks every block's checksum; the slice's
    /// content hash is checked at the end, so `f` has seen values of a corrupt slice when this
    /// returns an error.
    pub fn stream_slice(&self, slice: usize, mut f: impl FnMut(&[u16])) -> Result<(), StorageError> {
        let entry = self.slice_entry(slice)?;
        let bv = u64::from(self.header.block_values);
        let end = entry.first + entry.count;
        let mut hasher = self.header.slice_hasher(entry.key, entry.count);
        let mut dctx = self.decompressor()?;
        let mut scratch = BlockScratch::default();
        let mut values = Vec::new();
        let mut at = entry.first;
        while at < end {
            let block = at / bv;
            let block_start = block * bv;
            self.decode_block_into(block, &mut dctx, &mut scratch, &mut values)?;
            let lo = (at - block_start) as usize;
            let hi = (end - block_start).min(values.len() as u64) as usize;
            hasher.update(&values[lo..hi]);
            f(&values[lo..hi]);
            at = block_start + hi as u64;
        }
        if hasher.finalize() != entry.hash {
            return Err(self.corrupt(format!(
                "slice {slice} (key {}) content hash mismatch",
                fmt_key(entry.key)
            )));
        }
        Ok(())
    }

    /// Values `start..start + count` of slice `slice`, in order. Checks the checksum of every
    /// block read, not the slice's content hash (that needs the whole slice: see
    /// [`read_slice`](Table::read_slice) and [`verify_checksum`](Table::verify_checksum)).
    /// Reserves the `count` values up front, on huge pages when they are many (see
    /// [`advise_huge_pages`](crate::advise_huge_pages)).
    pub fn read_range(&self, slice: usize, start: u64, count: u64) -> Result<Vec<u16>, StorageError> {
        let entry = self.slice_entry(slice)?;
        if start.checked_add(count).is_none_or(|end| end > entry.count) {
            return Err(StorageError::InvalidInput(format!(
                "values {start}..+{count} out of range for slice {slice} of {} values in {}",
                entry.count,
                self.name.display()
            )));
        }
        let bv = u64::from(self.header.block_values);
        let end = entry.first + start + count;
        // Exactly `count`, which the range check bounds by the slice: a large range is read
        // without the doubling of a growing vector (its peak would be half as much again). On
        // huge pages when large: such a range is read at random afterwards.
        let mut out = Vec::with_capacity(count as usize);
        advise_huge_pages(&out);
        let mut dctx = self.decompressor()?;
        let mut scratch = BlockScratch::default();
        let mut values = Vec::new();
        let mut at = entry.first + start;
        while at < end {
            let block = at / bv;
            let block_start = block * bv;
            self.decode_block_into(block, &mut dctx, &mut scratch, &mut values)?;
            let lo = (at - block_start) as usize;
            let hi = (end - block_start).min(values.len() as u64) as usize;
            out.extend_from_slice(&values[lo..hi]);
            at = block_start + hi as u64;
        }
        Ok(out)
    }

    /// The value at `index` in slice `slice`: one block decompressed (and its checksum checked),
    /// or none if the block is in the cache.
    pub fn value(&self, slice: usize, index: u64) -> Result<u16, StorageError> {
        let entry = self.slice_entry(slice)?;
        if index >= entry.count {
            return Err(StorageError::InvalidInput(format!(
                "value index {index} out of range for slice {slice} of {} values in {}",
                entry.count,
                self.name.display()
            )));
        }
        let at = entry.first + index;
        let bv = u64::from(self.header.block_values);
        let block = self.cached_block(at / bv)?;
        Ok(block[(at % bv) as usize])
    }

    /// Checks that the file holds the bytes it was written with: the footer's blake3 of every
    /// byte before it, without decompressing a block. Any damage to the file since it was
    /// written fails it; it does not re-derive the block and slice hashes from the values (a
    /// file written wrong from the start but hashed after is found by
    /// [`verify_checksum`](Table::verify_checksum), and by each read of what it touches).
    pub fn verify_file_hash(&self) -> Result<(), StorageError> {
        let body_len = self.source.size() - FOOTER_LEN;
        let mut hasher = blake3::Hasher::new();
        let mut buf = vec![0u8; HASH_CHUNK];
        let mut at = 0u64;
        while at < body_len {
            let n = (body_len - at).min(HASH_CHUNK as u64) as usize;
            self.read_at(&mut buf[..n], at)?;
            hasher.update(&buf[..n]);
            at += n as u64;
        }
        if hasher.finalize().as_bytes() != &self.footer_hash {
            return Err(self.corrupt("file checksum mismatch".to_owned()));
        }
        Ok(())
    }

    /// Checks the whole file: the footer's blake3 of every byte before it
    /// ([`verify_file_hash`](Table::verify_file_hash)), then that every block decompresses
    /// (with a good checksum) and every slice's content hash matches.
    pub fn verify_checksum(&self) -> Result<(), StorageError> {
        self.verify_file_hash()?;

        // Every block once, in order, feeding the slices it holds.
        let mut dctx = self.decompressor()?;
        let mut next_slice = 0usize;
        let start_next = |next_slice: &mut usize| -> Result<Option<(usize, SliceHasher, u64)>, StorageError> {
            // Empty slices are finished as soon as they are reached.
            while let Some(e) = self.slices.get(*next_slice) {
                let i = *next_slice;
                *next_slice += 1;
                if e.count == 0 {
                    self.check_slice_hash(i, self.header.slice_hasher(e.key, 0).finalize())?;
                } else {
                    return Ok(Some((i, self.header.slice_hasher(e.key, e.count), e.count)));
                }
            }
            Ok(None)
        };
        let mut current = start_next(&mut next_slice)?;
        for block in 0..self.header.block_count {
            let values = self.decode_block(block, &mut dctx)?;
            let mut rest = &values[..];
            while !rest.is_empty() {
                let Some((i, hasher, remaining)) = &mut current else {
                    return Err(self.corrupt(format!("block {block} holds values past the last slice")));
                };
                let take = (*remaining).min(rest.len() as u64) as usize;
                hasher.update(&rest[..take]);
                rest = &rest[take..];
                *remaining -= take as u64;
                if *remaining == 0 {
                    self.check_slice_hash(*i, hasher.finalize())?;
                    current = start_next(&mut next_slice)?;
                }
            }
        }
        if let Some((i, _, _)) = current {
            return Err(self.corrupt(format!("slice {i} runs past the last block")));
        }
        Ok(())
    }

    fn check_slice_hash(&self, slice: usize, hash: [u8; 32]) -> Result<(), StorageError> {
        let entry = &self.slices[slice];
        if hash != entry.hash {
            return Err(self.corrupt(format!(
                "slice {slice} (key {}) content hash mismatch",
                fmt_key(entry.key)
            )));
        }
        Ok(())
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn slice_entry(&self, slice: usize) -> Result<&SliceEntry, StorageError> {
        self.slices.get(slice).ok_or_else(|| {
            StorageError::InvalidInput(format!(
                "slice {slice} out of range: {} has {} slices",
                self.name.display(),
                self.slices.len()
            ))
        })
    }

    /// Block `block`, from the cache or decompressed into it.
    fn cached_block(&self, block: u64) -> Result<Arc<[u16]>, StorageError> {
        if let Some(values) = self.lock_cache().get(block) {
            return Ok(values);
        }
        // Decompress without holding the lock, so threads probing other blocks are not held up.
        let values: Arc<[u16]> = self.decode_block(block, &mut self.decompressor()?)?.into();
        self.lock_cache().insert(block, Arc::clone(&values));
        Ok(values)
    }

    /// Reads, checks and decompresses block `block`.
    pub(crate) fn decode_block(
        &self,
        block: u64,
        dctx: &mut zstd::bulk::Decompressor<'static>,
    ) -> Result<Vec<u16>, StorageError> {
        let mut out = Vec::new();
        self.decode_block_into(block, dctx, &mut BlockScratch::default(), &mut out)?;
        Ok(out)
    }

    /// [`decode_block`](Table::decode_block) into `out` (replacing what it held), with
    /// `scratch` for the bytes read and decompressed: a reader that decodes many blocks
    /// allocates nothing once its buffers have grown.
    pub(crate) fn decode_block_into(
        &self,
        block: u64,
        dctx: &mut zstd::bulk::Decompressor<'static>,
        scratch: &mut BlockScratch,
        out: &mut Vec<u16>,
    ) -> Result<(), StorageError> {
        self.read_frame(block, &mut scratch.frame)?;
        let frame = &scratch.frame;
        let expected = self.header.block_len(block) as usize * 2;
        let raw = &mut scratch.raw;
        raw.clear();
        raw.reserve(expected);
        let n = dctx
            .decompress_to_buffer(&frame[..], raw)
            .map_err(|e| self.corrupt(format!("block {block} does not decompress: {e}")))?;
        if n != expected {
            return Err(self.corrupt(format!(
                "block {block} decompresses to {n} bytes, expected {expected}"
            )));
        }
        decode_block(self.header.version, raw, out);
        Ok(())
    }

    /// The stored zstd frame of block `block` into `frame` (replacing what it held), its
    /// checksum checked, not decompressed; returns the checksum.
    pub(crate) fn read_frame(&self, block: u64, frame: &mut Vec<u8>) -> Result<u32, StorageError> {
        let entry = self.blocks[block as usize];
        frame.resize(entry.len as usize, 0);
        self.read_at(frame, entry.offset)?;
        if crc32fast::hash(frame) != entry.crc {
            return Err(self.corrupt(format!("block {block} checksum mismatch")));
        }
        Ok(entry.crc)
    }

    pub(crate) fn decompressor(&self) -> Result<zstd::bulk::Decompressor<'static>, StorageError> {
        zstd::bulk::Decompressor::new().map_err(|e| StorageError::io(&self.name, e))
    }

    fn lock_cache(&self) -> MutexGuard<'_, BlockCache> {
        // The cache is consistent after every statement, so a panic elsewhere cannot leave it
        // half-updated: ignore poisoning.
        self.cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<(), StorageError> {
        read_at(&*self.source, &self.name, buf, offset)
    }

    fn corrupt(&self, detail: String) -> StorageError {
        StorageError::corrupt(&self.name, detail)
    }
}

/// A read from `source`; running off the end means the file is shorter than its tables say.
fn read_at(source: &dyn RandomAccess, name: &Path, buf: &mut [u8], offset: u64) -> Result<(), StorageError> {
    source.read_exact_at(buf, offset).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            StorageError::corrupt(
                name,
                format!("unexpected end of file reading {} bytes at {offset}", buf.len()),
            )
        } else {
            StorageError::io(name, e)
        }
    })
}

fn usize_from(n: u64, name: &Path) -> Result<usize, StorageError> {
    usize::try_from(n).map_err(|_| StorageError::corrupt(name, format!("size {n} does not fit in memory")))
}

fn fmt_key(key: SliceKey) -> String {
    format!("[{:#x}, {:#x}]", key[0], key[1])
}

/// Buffers for [`Table::decode_block_into`]: a block's compressed and decompressed bytes.
#[derive(Default)]
pub(crate) struct BlockScratch {
    frame: Vec<u8>,
    raw: Vec<u8>,
}

/// The last few decompressed blocks, least recently used evicted first.
#[derive(Default)]
struct BlockCache {
    slots: Vec<CacheSlot>,
    clock: u64,
}

struct CacheSlot {
    block: u64,
    values: Arc<[u16]>,
    used: u64,
}

impl BlockCache {
    fn get(&mut self, block: u64) -> Option<Arc<[u16]>> {
        self.clock += 1;
        let slot = self.slots.iter_mut().find(|s| s.block == block)?;
        slot.used = self.clock;
        Some(Arc::clone(&slot.values))
    }

    fn insert(&mut self, block: u64, values: Arc<[u16]>) {
        self.clock += 1;
        let slot = CacheSlot {
            block,
            values,
            used: self.clock,
        };
        if let Some(s) = self.slots.iter_mut().find(|s| s.block == block) {
            *s = slot;
        } else if self.slots.len() < CACHE_BLOCKS {
            self.slots.push(slot);
        } else if let Some(oldest) = self.slots.iter_mut().min_by_key(|s| s.used) {
            *oldest = slot;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_reads_the_same_on_any_threads_in_any_rounds() {
        use crate::{write_table_with, Metric, SliceData, WriteOptions};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("KRPvKR.zmt");
        let meta = TableMeta {
            material: "KRPvKR".to_owned(),
            metric: Metric::Dtm,
            index_layout: 7,
        };
        // Slices that begin and end inside blocks of 16 values, over many blocks.
        let values: Vec<Vec<u16>> = [5usize, 1000, 333, 1]
            .iter()
            .enumerate()
            .map(|(s, &n)| (0..n).map(|i| ((i * 7919 + s * 31) % 1021) as u16).collect())
            .collect();
        let slices: Vec<SliceData<'_>> = (values.iter().enumerate())
            .map(|(s, v)| SliceData {
                key: [s as u64 + 1, 0],
                values: v,
            })
            .collect();
        let options = WriteOptions {
            block_values: 16,
            ..WriteOptions::default()
        };
        write_table_with(&path, &meta, &slices, &options).unwrap();
        let table = Table::open(&path).unwrap();
        for (s, v) in values.iter().enumerate() {
            for threads in [1, 2, 3, 8, 100] {
                for round in [1, 16, 40, 48, 1 << 20] {
                    let read = table.read_slice_in_rounds(s, threads, round).unwrap();
                    assert_eq!(&read, v, "slice {s}, {threads} threads, rounds of {round}");
                }
            }
        }
        // A damaged block is found whichever thread reads it.
        let mut bytes = std::fs::read(&path).unwrap();
        let block = table.blocks[30];
        bytes[(block.offset + u64::from(block.len) / 2) as usize] ^= 0x10;
        std::fs::write(&path, bytes).unwrap();
        let table = Table::open(&path).unwrap();
        for threads in [1, 2, 3, 8] {
            for round in [16, 48, 1 << 20] {
                let e = table.read_slice_in_rounds(1, threads, round).unwrap_err();
                assert!(e.is_corruption(), "{threads} threads, rounds of {round}: {e}");
            }
        }
    }

    #[test]
    fn cache_evicts_the_least_recently_used_block() {
        let mut c = BlockCache::default();
        for b in 0..CACHE_BLOCKS as u64 {
            c.insert(b, vec![b as u16].into());
        }
        assert!(c.get(0).is_some());
        c.insert(100, vec![100].into());
        assert!(c.get(1).is_none(), "block 1 was the least recently used");
        assert_eq!(c.get(0).unwrap()[0], 0);
        assert_eq!(c.get(100).unwrap()[0], 100);
        assert_eq!(c.slots.len(), CACHE_BLOCKS);
    }
}
