use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use tempfile::TempPath;

use crate::format::{
    encode_block, encode_slice_entry, validate_material, BlockEntry, Header, BLOCK_ENTRY_LEN,
    DEFAULT_BLOCK_VALUES, DEFAULT_ZSTD_LEVEL, FOOTER_MAGIC, MAX_BLOCK_VALUES, SLICE_ENTRY_LEN,
};
use crate::hash::SliceHasher;
use crate::table::BlockScratch;
use crate::{SliceData, SliceEntry, SliceKey, StorageError, Table, TableMeta, TableSummary};

/// How a table is written. The defaults give the canonical bytes that every node of a cluster
/// writes for the same table; change them only for tests and experiments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteOptions {
    /// Values per block, 1 to [`MAX_BLOCK_VALUES`].
    pub block_values: u32,
    /// The zstd level of every block.
    pub zstd_level: i32,
    /// Threads compressing blocks (the bytes do not depend on it).
    pub threads: usize,
    /// Sync the file and its folder so the table survives a power cut (the default). Files that
    /// only live as long as the process that writes them (a build's solved slices waiting for
    /// their table) skip it.
    pub durable: bool,
}

impl Default for WriteOptions {
    fn default() -> WriteOptions {
        WriteOptions {
            block_values: DEFAULT_BLOCK_VALUES,
            zstd_level: DEFAULT_ZSTD_LEVEL,
            threads: 1,
            durable: true,
        }
    }
}

/// Writes a table file at `path` holding `slices`, which must be sorted by key with no key twice.
///
/// The write is atomic: a temp file in `path`'s folder is written, synced and renamed over
/// `path`, and the folder is synced. If anything fails, `path` is untouched and the temp file is
/// removed. The same `meta` and `slices` always give the same bytes.
pub fn write_table(
    path: &Path,
    meta: &TableMeta,
    slices: &[SliceData<'_>],
) -> Result<TableSummary, StorageError> {
    write_table_with(path, meta, slices, &WriteOptions::default())
}

/// [`write_table`] with non-default [`WriteOptions`].
pub fn write_table_with(
    path: &Path,
    meta: &TableMeta,
    slices: &[SliceData<'_>],
    options: &WriteOptions,
) -> Result<TableSummary, StorageError> {
    for (i, pair) in slices.windows(2).enumerate() {
        if pair[0].key >= pair[1].key {
            return Err(StorageError::InvalidInput(format!(
                "slices must be sorted by key with no key twice: slice {} key {:?} does not follow key {:?}",
                i + 1,
                pair[1].key,
                pair[0].key
            )));
        }
    }
    let value_count = slices.iter().map(|s| s.values.len() as u64).sum();
    let mut writer = TableWriter::create(path, meta, slices.len() as u64, value_count, options)?;
    for s in slices {
        writer.push_slice(s.key, s.values)?;
    }
    writer.finish()
}

/// Writes a table one slice at a time, holding one block of values in memory, for tables too big
/// to hold whole. The number of slices and values is declared up front (the header holds them)
/// and checked by [`finish`](TableWriter::finish). Dropping the writer before `finish` removes the
/// temp file and leaves the target untouched.
pub struct TableWriter {
    target: PathBuf,
    file: File,
    temp_path: TempPath,
    /// The bytes written last, not yet in `file` nor hashed: up to [`OUT_BYTES`], hashed and
    /// written at once (blake3 a frame at a time, 15 KB, hashed at half its speed: KRPvKR's
    /// table of 165 MB took 0.07 s to hash instead of 0.03 s).
    out: Vec<u8>,
    /// blake3 of every byte in `file` so far.
    hasher: blake3::Hasher,
    written: u64,
    header: Header,
    /// One compressor per compressing thread.
    compressors: Vec<zstd::bulk::Compressor<'static>>,
    /// Values of the blocks being filled: up to `batch` blocks, compressed together.
    pending: Vec<u16>,
    batch: usize,
    slices: Vec<SliceEntry>,
    blocks: Vec<BlockEntry>,
    values_pushed: u64,
    /// Set by a failed write: the file is then in an unknown state and can only be dropped.
    failed: bool,
    /// See [`WriteOptions::durable`].
    durable: bool,
    /// The slice being pushed in pieces, if any.
    open: Option<OpenSlice>,
}

/// A slice begun and not yet ended.
struct OpenSlice {
    key: SliceKey,
    count: u64,
    /// Its first value's place in the table.
    first: u64,
    hasher: SliceHasher,
    /// The slice's content hash when it is known without `hasher` (a copied slice).
    hash: Option<[u8; 32]>,
}

impl TableWriter {
    /// Starts a table at `path` that will hold `slice_count` slices of `value_count` values in all.
    pub fn create(
        path: &Path,
        meta: &TableMeta,
        slice_count: u64,
        value_count: u64,
        options: &WriteOptions,
    ) -> Result<TableWriter, StorageError> {
        validate_material(&meta.material).map_err(StorageError::InvalidInput)?;
        if options.block_values == 0 || options.block_values > MAX_BLOCK_VALUES {
            return Err(StorageError::InvalidInput(format!(
                "block size {} values is outside 1..={MAX_BLOCK_VALUES}",
                options.block_values
            )));
        }
        if !zstd::compression_level_range().contains(&options.zstd_level) {
            return Err(StorageError::InvalidInput(format!(
                "zstd level {} is out of range",
                options.zstd_level
            )));
        }
        let Some(file_name) = path.file_name() else {
            return Err(StorageError::InvalidInput(format!(
                "{} does not name a file",
                path.display()
            )));
        };
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let temp = tempfile::Builder::new()
            .prefix(&format!(".{}.", file_name.to_string_lossy()))
            .suffix(".tmp")
            .tempfile_in(dir)
            .map_err(|e| StorageError::io(dir, e))?;
        let (file, temp_path) = temp.into_parts();

        let threads = options.threads.clamp(1, 64);
        let compressors = (0..threads)
            .map(|_| new_compressor(options.zstd_level).map_err(|e| StorageError::io(path, e)))
            .collect::<Result<Vec<_>, _>>()?;
        let batch = if threads == 1 { 1 } else { threads * 4 };

        let header = Header::new(meta.clone(), options.block_values, slice_count, value_count);
        let bv = options.block_values as usize;
        let mut writer = TableWriter {
            target: path.to_owned(),
            file,
            out: Vec::with_capacity(OUT_BYTES),
            temp_path,
            hasher: blake3::Hasher::new(),
            written: 0,
            compressors,
            pending: Vec::with_capacity(bv * batch),
            batch,
            slices: Vec::with_capacity(slice_count.min(1 << 20) as usize),
            blocks: Vec::with_capacity(header.block_count.min(1 << 20) as usize),
            values_pushed: 0,
            failed: false,
            durable: options.durable,
            open: None,
            header,
        };
        let header_bytes = writer.header.encode();
        writer.write(&header_bytes)?;
        Ok(writer)
    }

    /// Appends a slice. Keys must ascend strictly from call to call.
    pub fn push_slice(&mut self, key: SliceKey, values: &[u16]) -> Result<(), StorageError> {
        self.begin_slice(key, values.len() as u64)?;
        self.push_values(values)?;
        self.end_slice().map(|_| ())
    }

    /// Starts a slice of `count` values that arrive in pieces ([`push_values`](Self::push_values),
    /// then [`end_slice`](Self::end_slice)), for slices too big to hold whole. Keys must ascend
    /// strictly from slice to slice.
    pub fn begin_slice(&mut self, key: SliceKey, count: u64) -> Result<(), StorageError> {
        self.check_usable()?;
        if self.open.is_some() {
            return Err(self.invalid("a slice is already open"));
        }
        if self.slices.len() as u64 == self.header.slice_count {
            return Err(self.invalid(&format!(
                "more slices than the {} declared",
                self.header.slice_count
            )));
        }
        if let Some(last) = self.slices.last() {
            if key <= last.key {
                return Err(self.invalid(&format!("slice key {key:?} does not follow key {:?}", last.key)));
            }
        }
        if count > self.header.value_count - self.values_pushed {
            return Err(self.invalid(&format!(
                "more values than the {} declared",
                self.header.value_count
            )));
        }
        self.open = Some(OpenSlice {
            key,
            count,
            first: self.values_pushed,
            hasher: self.header.slice_hasher(key, count),
            hash: None,
        });
        Ok(())
    }

    /// Appends values to the open slice.
    pub fn push_values(&mut self, values: &[u16]) -> Result<(), StorageError> {
        self.check_usable()?;
        let Some(open) = self.open.as_ref() else {
            return Err(self.invalid("values pushed with no slice open"));
        };
        if open.first + open.count - self.values_pushed < values.len() as u64 {
            let count = open.count;
            return Err(self.invalid(&format!("more values than the {count} declared for the slice")));
        }
        self.values_pushed += values.len() as u64;
        // The whole blocks of many values are compressed from `values` as they are (with
        // several compressors, while this thread hashes them), not copied into the blocks being
        // filled first (59 MB a KRPvKR slice); the rest waits there. The frames are the same
        // either way (a block is compressed on its own).
        let bv = self.header.block_values as usize;
        let fill = (bv - self.pending.len() % bv) % bv;
        let (head, rest) = values.split_at(fill.min(values.len()));
        let whole = rest.len() / bv * bv;
        if whole < bv * self.batch {
            self.open.as_mut().expect("a slice is open").hasher.update(values);
            return self.buffer(values);
        }
        self.buffer(head)?;
        if !self.pending.is_empty() {
            self.flush_blocks()?;
        }
        let hasher = &mut self.open.as_mut().expect("a slice is open").hasher;
        let blocks: Vec<&[u16]> = rest[..whole].chunks(bv).collect();
        let compressed = compress_in_parallel(&mut self.compressors, &blocks, || hasher.update(values));
        self.write_frames(compressed)?;
        self.buffer(&rest[whole..])
    }

    /// Adds values to the blocks being filled, compressing and writing those filled.
    fn buffer(&mut self, values: &[u16]) -> Result<(), StorageError> {
        let bv = self.header.block_values as usize;
        let mut rest = values;
        while !rest.is_empty() {
            let take = (bv * self.batch - self.pending.len()).min(rest.len());
            self.pending.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.pending.len() == bv * self.batch {
                self.flush_blocks()?;
            }
        }
        Ok(())
    }

    /// Appends slice `slice` of `from` under its key: the same bytes as
    /// [`push_slice`](Self::push_slice) of its values, provided `from` was written with this
    /// writer's zstd level (as the parts of a build written with the table's options are).
    /// Where the grids of blocks agree (the same block size, and the slice as far into a block
    /// of `from` as it is into one of this table), each block wholly inside the slice is copied
    /// as its stored frame, its checksum checked but not decompressed, and the slice's content
    /// hash is `from`'s (its slice table is checked against its tables hash when it is opened);
    /// the values of the blocks it shares with other slices are read, checked and pushed.
    /// Otherwise every value is read (the slice's content hash checked) and pushed. Returns the
    /// number of blocks copied. Builds with debug assertions decompress every copied block, and
    /// check that this writer compresses it to the same frame and that the values hash to
    /// `from`'s content hash.
    pub fn copy_slice(&mut self, from: &Table, slice: usize) -> Result<u64, StorageError> {
        let entry = from.slice_entry(slice)?.clone();
        self.begin_slice(entry.key, entry.count)?;
        let bv = u64::from(self.header.block_values);
        // A frame of another format version holds its values otherwise.
        let agree = from.format_version() == self.header.version
            && from.block_values() == self.header.block_values
            && entry.first % bv == self.values_pushed % bv;
        let copied = if agree {
            self.copy_blocks(from, &entry)
        } else {
            let mut pushed = Ok(());
            let streamed = from.stream_slice(slice, |values| {
                if pushed.is_ok() {
                    pushed = self.push_values(values);
                }
            });
            streamed.and(pushed).map(|()| 0)
        };
        if copied.is_err() {
            // Part of the slice is in: the table cannot be finished.
            self.failed = true;
        }
        let copied = copied?;
        self.end_slice()?;
        Ok(copied)
    }

    /// The values of the open slice, `entry` of `from` on the same grid of blocks, copied
    /// ([`copy_slice`](Self::copy_slice)); its content hash is taken from `entry`.
    fn copy_blocks(&mut self, from: &Table, entry: &SliceEntry) -> Result<u64, StorageError> {
        let bv = u64::from(self.header.block_values);
        let end = entry.first + entry.count;
        let mut dctx = from.decompressor()?;
        let (mut scratch, mut frame, mut values) = (BlockScratch::default(), Vec::new(), Vec::new());
        #[cfg(debug_assertions)]
        let mut check = self.header.slice_hasher(entry.key, entry.count);
        let mut copied = 0;
        let mut at = entry.first;
        while at < end {
            let block = at / bv;
            let block_start = block * bv;
            if at == block_start && block_start + bv <= end {
                // Wholly inside the slice: its frame is the one this writer would make.
                let crc = from.read_frame(block, &mut frame)?;
                if !self.pending.is_empty() {
                    self.flush_blocks()?;
                }
                #[cfg(debug_assertions)]
                {
                    let mut raw = vec![0u8; 2 * bv as usize];
                    let n = dctx
                        .decompress_to_buffer(&frame[..], &mut raw[..])
                        .map_err(|e| StorageError::io(&self.target, e))?;
                    let mut v = Vec::new();
                    crate::format::decode_block(from.format_version(), &raw[..n], &mut v);
                    check.update(&v);
                    let again = compress_blocks(&mut self.compressors[0], &[&v])
                        .map_err(|e| StorageError::io(&self.target, e))?;
                    debug_assert!(again[0] == frame, "a copied block's frame is not this writer's");
                }
                self.values_pushed += bv;
                let entry = BlockEntry {
                    offset: self.written,
                    len: frame.len() as u32,
                    crc,
                };
                self.write(&frame)?;
                self.blocks.push(entry);
                copied += 1;
                at = block_start + bv;
            } else {
                from.decode_block_into(block, &mut dctx, &mut scratch, &mut values)?;
                let lo = (at - block_start) as usize;
                let hi = (end - block_start).min(values.len() as u64) as usize;
                #[cfg(debug_assertions)]
                check.update(&values[lo..hi]);
                self.values_pushed += (hi - lo) as u64;
                self.buffer(&values[lo..hi])?;
                at = block_start + hi as u64;
            }
        }
        #[cfg(debug_assertions)]
        debug_assert!(
            check.finalize() == entry.hash,
            "a copied slice's values hash to its hash"
        );
        self.open.as_mut().expect("a slice is open").hash = Some(entry.hash);
        Ok(copied)
    }

    /// Closes the open slice, which must have received every value declared for it; returns its
    /// content hash.
    pub fn end_slice(&mut self) -> Result<[u8; 32], StorageError> {
        self.check_usable()?;
        let Some(open) = self.open.take() else {
            return Err(self.invalid("no slice is open"));
        };
        let pushed = self.values_pushed - open.first;
        if pushed != open.count {
            self.failed = true;
            return Err(self.invalid(&format!(
                "slice {:?}: {} values declared, {pushed} pushed",
                open.key, open.count
            )));
        }
        let hash = open.hash.unwrap_or_else(|| open.hasher.finalize());
        self.slices.push(SliceEntry {
            key: open.key,
            count: open.count,
            hash,
            first: open.first,
        });
        Ok(hash)
    }

    fn invalid(&self, what: &str) -> StorageError {
        StorageError::InvalidInput(format!("{}: {what}", self.target.display()))
    }

    /// Writes the tables and the footer, syncs, and renames the file into place.
    pub fn finish(mut self) -> Result<TableSummary, StorageError> {
        self.check_usable()?;
        if self.open.is_some() {
            return Err(self.invalid("a slice is still open"));
        }
        if self.slices.len() as u64 != self.header.slice_count
            || self.values_pushed != self.header.value_count
        {
            return Err(StorageError::InvalidInput(format!(
                "{}: {} slices of {} values in all were declared, {} slices of {} values pushed",
                self.target.display(),
                self.header.slice_count,
                self.header.value_count,
                self.slices.len(),
                self.values_pushed
            )));
        }
        if !self.pending.is_empty() {
            self.flush_blocks()?;
        }
        debug_assert_eq!(self.blocks.len() as u64, self.header.block_count);

        let mut tables = Vec::with_capacity(
            self.slices.len() * SLICE_ENTRY_LEN as usize + self.blocks.len() * BLOCK_ENTRY_LEN as usize,
        );
        for e in &self.slices {
            encode_slice_entry(e, &mut tables);
        }
        for b in &self.blocks {
            b.encode(&mut tables);
        }
        let tables_hash = blake3::hash(&tables);
        self.write(&tables)?;
        self.write(tables_hash.as_bytes())?;
        self.flush_out()?;
        let footer_hash = self.hasher.finalize();
        self.write(footer_hash.as_bytes())?;
        self.write(&FOOTER_MAGIC)?;
        self.flush_out()?;

        let TableWriter {
            target,
            file,
            temp_path,
            hasher,
            written,
            slices,
            header,
            ..
        } = self;
        let io_err = |e| StorageError::io(&target, e);
        // The temp file is private (0600); a finished table is for everyone to read.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(0o644))
                .map_err(io_err)?;
        }
        if self.durable {
            file.sync_data().map_err(io_err)?;
        }
        drop(file);
        temp_path.persist(&target).map_err(|e| io_err(e.error))?;
        if self.durable {
            sync_parent_dir(&target)?;
        }

        let summary = TableSummary {
            file_hash: *hasher.finalize().as_bytes(),
            bytes: written,
            slices: slices.len(),
            positions: header.value_count,
        };
        tracing::debug!(
            table = %target.display(),
            slices = summary.slices,
            positions = summary.positions,
            bytes = summary.bytes,
            "table written"
        );
        Ok(summary)
    }

    fn check_usable(&self) -> Result<(), StorageError> {
        if self.failed {
            return Err(StorageError::InvalidInput(format!(
                "{}: an earlier write to this table failed",
                self.target.display()
            )));
        }
        Ok(())
    }

    /// Compresses the pending values, one block per `block_values` values (on several threads
    /// when there are several compressors), and writes the blocks in order.
    fn flush_blocks(&mut self) -> Result<(), StorageError> {
        let bv = self.header.block_values as usize;
        let pending = std::mem::take(&mut self.pending);
        let blocks: Vec<&[u16]> = pending.chunks(bv).collect();
        let compressed = compress_in_parallel(&mut self.compressors, &blocks, || ());
        self.pending = pending;
        self.pending.clear();
        self.write_frames(compressed)
    }

    /// Writes the frames of blocks compressed in order ([`compress_in_parallel`]).
    fn write_frames(&mut self, compressed: std::io::Result<Vec<Vec<u8>>>) -> Result<(), StorageError> {
        let frames = match compressed {
            Ok(frames) => frames,
            Err(e) => {
                self.failed = true;
                return Err(StorageError::io(&self.target, e));
            }
        };
        for frame in frames {
            let entry = BlockEntry {
                offset: self.written,
                len: frame.len() as u32,
                crc: crc32fast::hash(&frame),
            };
            self.write(&frame)?;
            self.blocks.push(entry);
        }
        Ok(())
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), StorageError> {
        if self.out.len() + bytes.len() > OUT_BYTES {
            self.flush_out()?;
        }
        if bytes.len() >= OUT_BYTES {
            self.put(bytes)?;
        } else {
            self.out.extend_from_slice(bytes);
        }
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// The bytes of `out` hashed and into the file.
    fn flush_out(&mut self) -> Result<(), StorageError> {
        let out = std::mem::take(&mut self.out);
        let put = self.put(&out);
        self.out = out;
        self.out.clear();
        put
    }

    /// `bytes` hashed and into the file.
    fn put(&mut self, bytes: &[u8]) -> Result<(), StorageError> {
        self.hasher.update(bytes);
        if let Err(e) = self.file.write_all(bytes) {
            self.failed = true;
            return Err(StorageError::io(&self.target, e));
        }
        Ok(())
    }
}

/// The most bytes a [`TableWriter`] holds before they are hashed and written.
const OUT_BYTES: usize = 1 << 20;

/// Makes the rename that put `path` in place durable.
fn sync_parent_dir(path: &Path) -> Result<(), StorageError> {
    crate::durable::sync_parent_dir(path).map_err(|e| StorageError::io(path.parent().unwrap_or(path), e))
}

/// A zstd compressor with every frame option that changes the bytes pinned (zstd's defaults
/// could move).
fn new_compressor(level: i32) -> std::io::Result<zstd::bulk::Compressor<'static>> {
    let mut c = zstd::bulk::Compressor::new(level)?;
    c.include_checksum(false)?;
    c.include_contentsize(true)?;
    c.include_dictid(false)?;
    Ok(c)
}

/// The frames of `blocks`, in order: contiguous runs of them compressed each on a thread of its
/// own, one per compressor (with one compressor, on this thread), while this thread runs
/// `meanwhile`.
fn compress_in_parallel(
    compressors: &mut [zstd::bulk::Compressor<'static>],
    blocks: &[&[u16]],
    meanwhile: impl FnOnce(),
) -> std::io::Result<Vec<Vec<u8>>> {
    let workers = compressors.len().min(blocks.len()).max(1);
    if workers == 1 {
        meanwhile();
        return compress_blocks(&mut compressors[0], blocks);
    }
    let per = blocks.len().div_ceil(workers);
    std::thread::scope(|s| {
        let handles: Vec<_> = compressors
            .iter_mut()
            .zip(blocks.chunks(per))
            .map(|(c, part)| s.spawn(move || compress_blocks(c, part)))
            .collect();
        meanwhile();
        let mut frames = Vec::with_capacity(blocks.len());
        for h in handles {
            frames.extend(h.join().expect("compression thread")?);
        }
        Ok(frames)
    })
}

/// Compresses each block (its bytes as this build writes them, [`encode_block`]) into its own
/// frame.
fn compress_blocks(
    c: &mut zstd::bulk::Compressor<'static>,
    blocks: &[&[u16]],
) -> std::io::Result<Vec<Vec<u8>>> {
    let mut raw = Vec::new();
    blocks
        .iter()
        .map(|b| {
            encode_block(b, &mut raw);
            c.compress(&raw)
        })
        .collect()
}
