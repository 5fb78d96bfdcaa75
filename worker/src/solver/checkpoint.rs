//! Checkpoints of a slice being solved: its whole state at a ply boundary, on disk, so that a
//! build stopped by a signal, killed, or cut by a power failure resumes from the last one
//! instead of from the start.
//!
//! A checkpoint is taken between two passes, when no thread runs: the state's bytes and its
//! summaries ([`State`]), where the passes stood, and the mark of the log of plies
//! ([`LogMark`]: the log itself is a file beside the checkpoint, appended to from pass to pass;
//! the mark names its length and the hash of those bytes). It is written to a temporary name,
//! made durable and renamed over the last one, so that the last durable checkpoint is always
//! whole; the log's bytes are made durable before the checkpoint that names them.
//!
//! The file: a magic and format version, a header (the slice, its size, the solver constants its
//! codes depend on), the progress, the log's mark, the side maps, then the arrays, each cut into
//! frames of [`FRAME`] bytes compressed with zstd on the solver's threads; last, the blake3 hash
//! of everything before it. A checkpoint is trusted only once its hash, its header and every
//! length in it are checked, and the log's bytes hash as its mark says; anything else is a
//! damaged checkpoint ([`load`] says why, and the slice is solved from the start). The file is
//! for the machine that wrote it (native byte order of the words).
//!
//! Measured on KRNvKNN's state (7.6 GB, 2 threads): see `docs/performance.md`.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

use zermelo_chess::slice::SliceKey;

use super::dtm_log::{DtmLog, LogMark, SEG_INDICES};
use super::geometry::Geometry;
use super::le::{get_len, get_u32, get_u64, invalid, put_u32, put_u64};
use super::memory::atomic_u64s;
use super::paging::{Paging, Reach};
use super::par::for_each_chunk;
use super::state::{State, CHUNK_SHIFT, FINE_SHIFT, LATER_DIRECT, WIN_EXIT_DIRECT};
use super::SolveError;

/// Where and how often a slice's solver writes checkpoints, and the flag that stops it.
#[derive(Clone, Copy, Debug)]
pub struct Checkpoints<'a> {
    /// The folder of the checkpoint files (and of the log of plies of each slice solved with
    /// checkpoints): the build's folder of the material.
    pub dir: &'a Path,
    /// A checkpoint is written at the first ply boundary at least this long after the last
    /// one, or after the slice's start (or its resumption): `Duration::ZERO`, at every ply
    /// boundary.
    pub every: Duration,
    /// When set (by a signal handler, say), the solver writes a checkpoint at the next ply
    /// boundary and returns [`SolveError::Interrupted`]; during the init, which cannot be
    /// checkpointed, it returns at once.
    pub stop: &'a AtomicBool,
}

impl Checkpoints<'_> {
    /// The checkpoint file of slice `key`.
    pub fn checkpoint_path(&self, key: &SliceKey) -> PathBuf {
        self.file(key, "ckpt")
    }

    /// The log of plies of slice `key`.
    pub fn log_path(&self, key: &SliceKey) -> PathBuf {
        self.file(key, "plies")
    }

    pub(super) fn file(&self, key: &SliceKey, ext: &str) -> PathBuf {
        let [w, b] = key.raw();
        self.dir.join(format!("{w:016x}-{b:016x}.{ext}"))
    }

    /// Removes the checkpoint and the logs of slice `key` (once it is solved), and the compact
    /// solver's lists of later plies (`.pend0-PLY`, `.pend1-PLY`).
    pub fn remove(&self, key: &SliceKey) {
        for path in [
            self.checkpoint_path(key),
            self.log_path(key),
            self.file(key, "plies1"),
        ] {
            let _ = std::fs::remove_file(path);
        }
        let prefixes = [0, 1].map(|a| self.file(key, &format!("pend{a}-")));
        if let Ok(entries) = std::fs::read_dir(self.dir) {
            for e in entries.flatten() {
                let path = e.path();
                if prefixes.iter().any(|p| {
                    path.as_os_str()
                        .as_encoded_bytes()
                        .starts_with(p.as_os_str().as_encoded_bytes())
                }) {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Relaxed)
    }
}

/// Where the passes stood at a checkpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Progress {
    /// The next ply to run.
    pub plies: u32,
    /// Seconds of the slice's init, scans, un-moves and verification so far (for its log).
    pub init_seconds: f64,
    pub scan_seconds: f64,
    pub unmove_seconds: f64,
    pub verify_seconds: f64,
}

const MAGIC: &[u8; 8] = b"ZMCKPT\0\x01";
/// Bytes of an array compressed as one zstd frame.
const FRAME: usize = 1 << 22;
/// zstd's level for the arrays (measured: see the module comment).
const LEVEL: i32 = 1;

/// What a checkpoint file must agree with to be read besides the slice's name: its key, its
/// size, and the constants the state's codes and summaries are laid out by.
fn header(key: &SliceKey, n: u64) -> [u64; 8] {
    let [w, b] = key.raw();
    [
        w,
        b,
        n,
        u64::from(CHUNK_SHIFT),
        u64::from(FINE_SHIFT),
        u64::from(LATER_DIRECT),
        u64::from(WIN_EXIT_DIRECT),
        SEG_INDICES as u64,
    ]
}

/// Writes the checkpoint of `st` (the state of slice `key` between two passes, `at` where they
/// stood) and of `log`'s mark, on `threads` threads; returns the checkpoint's bytes.
pub(super) fn save(
    c: &Checkpoints<'_>,
    key: &SliceKey,
    st: &mut State,
    log: &DtmLog,
    at: &Progress,
    threads: usize,
) -> Result<u64, SolveError> {
    let path = c.checkpoint_path(key);
    let failed = |source: io::Error| SolveError::Checkpoint {
        path: path.display().to_string(),
        source,
    };
    let mark = log.mark().map_err(failed)?;
    write_durably(&path, |w| write_state(w, key, st, &mark, at, threads)).map_err(failed)
}

/// Writes the file `path` as `write` writes it, then the blake3 hash of its bytes: to a
/// temporary name, made durable, then renamed over `path` (the last durable file is always
/// whole). Returns the file's bytes.
pub(super) fn write_durably(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<u64> {
    let tmp = path.with_extension("ckpt.tmp");
    let file = File::create(&tmp)?;
    let mut w = Hashed::new(BufWriter::with_capacity(1 << 20, file));
    write(&mut w)?;
    let (mut out, hash) = w.finish();
    out.write_all(hash.as_bytes())?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_data()?;
    let bytes = file.metadata()?.len();
    drop(file);
    std::fs::rename(&tmp, path)?;
    zermelo_storage::durable::sync_parent_dir(path)?;
    Ok(bytes)
}

/// Reads the file `path` written by [`write_durably`] with `read`, and checks its hash (and that
/// `read` read every byte before it): `Ok(None)` if there is no such file, `Err` with the reason
/// if it is damaged; else what `read` gave and the file's bytes.
pub(super) fn read_checked<T>(
    path: &Path,
    read: impl FnOnce(&mut dyn Read) -> io::Result<T>,
) -> Result<Option<(T, u64)>, String> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let bytes = file.metadata().map_err(|e| e.to_string())?.len();
    if bytes < 32 {
        return Err(format!("{bytes} bytes, shorter than its hash"));
    }
    let mut r = Hashed::new(BufReader::with_capacity(1 << 20, file.take(bytes - 32)));
    let got = read(&mut r);
    // The rest of the file before the hash, if a length inside was short: read for the hash.
    let rest = io::copy(&mut r, &mut io::sink());
    let (mut inner, hash) = r.finish();
    let mut stored = [0u8; 32];
    inner
        .get_mut()
        .get_mut()
        .read_exact(&mut stored)
        .map_err(|e| format!("reading its hash: {e}"))?;
    if blake3::Hash::from(stored) != hash {
        return Err("its hash does not match its contents".into());
    }
    let got = got.map_err(|e| e.to_string())?;
    if rest.map_err(|e| e.to_string())? != 0 {
        return Err("bytes left over after its arrays".into());
    }
    Ok(Some((got, bytes)))
}

fn write_state(
    w: &mut dyn Write,
    key: &SliceKey,
    st: &mut State,
    mark: &LogMark,
    at: &Progress,
    threads: usize,
) -> io::Result<()> {
    put_header(w, MAGIC, key, &header(key, st.bytes.len() as u64))?;
    put_u32(w, at.plies)?;
    for s in [
        at.init_seconds,
        at.scan_seconds,
        at.unmove_seconds,
        at.verify_seconds,
    ] {
        put_u64(w, s.to_bits())?;
    }
    put_u32(w, st.horizon.load(Relaxed))?;
    mark.write_to(w)?;
    let far_pending: Vec<u32> = st
        .far_pending
        .get_mut()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .copied()
        .collect();
    put_u64(w, far_pending.len() as u64)?;
    for p in far_pending {
        put_u32(w, p)?;
    }
    let mut far: Vec<(u64, u32)> = Vec::new();
    for shard in &mut st.far {
        far.extend(
            shard
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .map(|(&i, &p)| (i, p)),
        );
    }
    far.sort_unstable();
    put_u64(w, far.len() as u64)?;
    for (i, p) in far {
        put_u64(w, i)?;
        put_u32(w, p)?;
    }
    // The bitmaps of changed positions, one a thread, joined into the first (the next scan
    // reads their union): the checkpoint does not depend on the number of threads.
    let has_bits = !st.changed_bits.is_empty();
    put_u32(w, u32::from(has_bits))?;
    if let Some((first, rest)) = st.changed_bits.split_first_mut() {
        for bits in rest {
            for (j, b) in first.iter_mut().zip(bits.iter_mut()) {
                *j.get_mut() |= std::mem::take(b.get_mut());
            }
        }
    }
    for_each_array(st, |array, mark| put_blob(w, array, threads, mark))
}

/// Calls `f` with each array of [`arrays`] in turn and what marks, for a paged state, the
/// K-slices of a range of its bytes (the state bytes, array 0, and the won bitmap, array 5,
/// are paged).
fn for_each_array(
    st: &mut State,
    mut f: impl FnMut(&mut [u8], &dyn Fn(Range<usize>)) -> io::Result<()>,
) -> io::Result<()> {
    let pager = st.pager.take();
    let done = arrays(st).into_iter().enumerate().try_for_each(|(k, array)| {
        let mark = |bytes: Range<usize>| match (pager.as_ref(), k) {
            (Some(p), 0) => p.mark(bytes, Reach::Own),
            (Some(p), 5) => p.mark(bytes.start * 8..bytes.end * 8, Reach::Own),
            _ => {}
        };
        f(array, &mark)
    });
    st.pager = pager;
    done
}

/// The arrays of `st` as a checkpoint holds them, in its order, as plain bytes: the state's
/// bytes, its pending masks, fine masks, chunk flags, and bitmaps (the changed positions' only
/// in the first thread's, see [`write_state`]; empty where the state keeps none).
fn arrays(st: &mut State) -> [&mut [u8]; 8] {
    let changed_bits: &mut [AtomicU64] = st.changed_bits.first_mut().map_or(&mut [], |b| &mut b[..]);
    [
        u8s(&mut st.bytes),
        u64s(st.pending.as_flattened_mut()),
        u64s(&mut st.fine),
        u8s(&mut st.changed),
        u8s(&mut st.next),
        u64s(&mut st.won),
        u64s(&mut st.quiet),
        u64s(changed_bits),
    ]
}

/// A slice resumed from its checkpoint: its state, its log and where its passes stood.
pub(super) struct Resumed {
    pub state: State,
    pub log: DtmLog,
    pub at: Progress,
    /// Bytes of the checkpoint file.
    pub bytes: u64,
}

/// The checkpoint of slice `key` (geometry `g`), if it has one: `Ok(None)` if there is none,
/// `Err` with the reason if it is damaged or does not fit this build (`changed_bits`, `threads`
/// as [`State::track_won`] takes them); the caller then solves from the start.
pub(super) fn load(
    c: &Checkpoints<'_>,
    key: &SliceKey,
    g: &Geometry,
    threads: usize,
    changed_bits: bool,
    paging: Option<&Paging>,
) -> Result<Option<Resumed>, String> {
    let path = c.checkpoint_path(key);
    if !path.exists() {
        return Ok(None);
    }
    let mut st = State::of_paged(g, paging, None).map_err(|e| e.to_string())?;
    let read = read_checked(&path, |r| read_state(r, key, g, &mut st, threads, changed_bits))?;
    let Some(((at, mark), bytes)) = read else {
        return Ok(None);
    };
    let log = DtmLog::resume(&c.log_path(key), mark).map_err(|e| format!("its log of plies: {e}"))?;
    Ok(Some(Resumed {
        state: st,
        log,
        at,
        bytes,
    }))
}

fn read_state(
    r: &mut dyn Read,
    key: &SliceKey,
    g: &Geometry,
    st: &mut State,
    threads: usize,
    changed_bits: bool,
) -> io::Result<(Progress, LogMark)> {
    get_header(
        r,
        MAGIC,
        "a checkpoint of this version",
        key,
        &header(key, st.bytes.len() as u64),
    )?;
    let plies = get_u32(r)?;
    let mut secs = [0f64; 4];
    for s in &mut secs {
        *s = f64::from_bits(get_u64(r)?);
    }
    let at = Progress {
        plies,
        init_seconds: secs[0],
        scan_seconds: secs[1],
        unmove_seconds: secs[2],
        verify_seconds: secs[3],
    };
    st.horizon.store(get_u32(r)?, Relaxed);
    let mark = LogMark::read_from(r)?;
    let far_pending = get_len(r, 1 << 24)?;
    let set = st.far_pending.get_mut().unwrap_or_else(|e| e.into_inner());
    for _ in 0..far_pending {
        set.insert(get_u32(r)?);
    }
    let far = get_len(r, st.bytes.len() as u64)?;
    for _ in 0..far {
        let i = get_u64(r)?;
        let p = get_u32(r)?;
        if i >= st.bytes.len() as u64 {
            return Err(invalid(format!("a ply for index {i}, past the slice")));
        }
        st.far_shard(i as usize)
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(i, p);
    }
    let has_bits = get_u32(r)? != 0;
    // The bitmaps exist as this build makes them (see `State::track_won`).
    let line = g.line_man().is_some();
    let quiet = line && !g.pawnless;
    let bits = quiet && changed_bits;
    if has_bits != bits {
        return Err(invalid(format!(
            "made {} the bitmaps of changed positions, this build {} (another memory budget)",
            if has_bits { "with" } else { "without" },
            if bits { "with" } else { "without" },
        )));
    }
    let n = st.bytes.len();
    if line {
        st.alloc_won().map_err(|e| io::Error::other(e.to_string()))?;
        if quiet {
            st.quiet = atomic_u64s(n / 64);
            if bits {
                st.changed_bits = (0..threads.max(1)).map(|_| atomic_u64s(n / 64)).collect();
            }
        }
    }
    let read = for_each_array(st, |array, marks| get_blob(r, array, threads, marks));
    read.map(|()| (at, mark))
}

/// Writes a checkpoint's head: `magic`, the slice's name and the words of its header.
pub(super) fn put_header(
    w: &mut (impl Write + ?Sized),
    magic: &[u8; 8],
    key: &SliceKey,
    words: &[u64],
) -> io::Result<()> {
    w.write_all(magic)?;
    let name = key.to_string();
    put_u64(w, name.len() as u64)?;
    w.write_all(name.as_bytes())?;
    words.iter().try_for_each(|&v| put_u64(w, v))
}

/// Reads what [`put_header`] wrote, refused (as not `what`, or made for another slice or
/// solver) unless it is `magic`, slice `key` and `words`.
pub(super) fn get_header(
    r: &mut (impl Read + ?Sized),
    magic: &[u8; 8],
    what: &str,
    key: &SliceKey,
    words: &[u64],
) -> io::Result<()> {
    let mut found_magic = [0u8; 8];
    r.read_exact(&mut found_magic)?;
    if &found_magic != magic {
        return Err(invalid(format!("not {what}")));
    }
    let name = key.to_string();
    let len = get_len(r, 256)?;
    let mut found = vec![0u8; len as usize];
    r.read_exact(&mut found)?;
    if found != name.as_bytes() {
        return Err(invalid(format!(
            "made for another slice ({})",
            String::from_utf8_lossy(&found)
        )));
    }
    for (k, &v) in words.iter().enumerate() {
        let got = get_u64(r)?;
        if got != v {
            return Err(invalid(format!(
                "made for another slice or solver (header word {k}: {got} against {v})"
            )));
        }
    }
    Ok(())
}

/// The bytes of `v`, held exclusively, as plain bytes.
fn u8s(v: &mut [AtomicU8]) -> &mut [u8] {
    // Safety: `AtomicU8` has the size, alignment and bit validity of `u8`, and the exclusive
    // borrow of `v` excludes any other access while the plain bytes are used.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), v.len()) }
}

/// The words of `v`, held exclusively, as plain bytes (in native order).
pub(super) fn u64s(v: &mut [AtomicU64]) -> &mut [u8] {
    // Safety: `AtomicU64` has the size and bit validity of `u64`, whose every byte is a valid
    // `u8` and every byte pattern a valid `u64`; the exclusive borrow of `v` excludes any other
    // access while the plain bytes are used.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// Writes `data` (its length, then its frames of [`FRAME`] bytes each compressed), compressing a
/// batch of frames at once on `threads` threads.
pub(super) fn put_blob(
    w: &mut (impl Write + ?Sized),
    data: &[u8],
    threads: usize,
    mark: &dyn Fn(Range<usize>),
) -> io::Result<()> {
    put_u64(w, data.len() as u64)?;
    let batch = FRAME * 2 * threads.max(1);
    for (b, part) in data.chunks(batch).enumerate() {
        mark(b * batch..b * batch + part.len());
        let frames: Vec<&[u8]> = part.chunks(FRAME).collect();
        let out: Vec<Mutex<Vec<u8>>> = frames.iter().map(|_| Mutex::default()).collect();
        for_each_chunk(frames.len(), 1, threads, |range| {
            for k in range {
                let packed = zstd::bulk::compress(frames[k], LEVEL)?;
                *out[k].lock().unwrap_or_else(|e| e.into_inner()) = packed;
            }
            Ok::<(), io::Error>(())
        })?;
        for (frame, packed) in frames.iter().zip(out) {
            let packed = packed.into_inner().unwrap_or_else(|e| e.into_inner());
            put_u32(w, frame.len() as u32)?;
            put_u32(w, packed.len() as u32)?;
            w.write_all(&packed)?;
        }
    }
    Ok(())
}

/// Reads into `data` what [`put_blob`] wrote of an array of its length (refused otherwise),
/// decompressing a batch of frames at once on `threads` threads.
pub(super) fn get_blob(
    r: &mut (impl Read + ?Sized),
    data: &mut [u8],
    threads: usize,
    mark: &dyn Fn(Range<usize>),
) -> io::Result<()> {
    let len = get_u64(r)?;
    if len != data.len() as u64 {
        return Err(invalid(format!(
            "an array of {len} bytes where {} are expected",
            data.len()
        )));
    }
    let batch = FRAME * 2 * threads.max(1);
    for (b, part) in data.chunks_mut(batch).enumerate() {
        mark(b * batch..b * batch + part.len());
        let mut frames = Vec::new();
        for frame in part.chunks_mut(FRAME) {
            let raw = get_u32(r)? as usize;
            let packed = get_u32(r)? as usize;
            if raw != frame.len() || packed > zstd::zstd_safe::compress_bound(FRAME) {
                return Err(invalid(format!("a frame of {raw} bytes packed in {packed}")));
            }
            let mut bytes = vec![0u8; packed];
            r.read_exact(&mut bytes)?;
            frames.push(Mutex::new((frame, bytes)));
        }
        for_each_chunk(frames.len(), 1, threads, |range| {
            for k in range {
                let mut slot = frames[k].lock().unwrap_or_else(|e| e.into_inner());
                let (frame, bytes) = &mut *slot;
                let got = zstd::bulk::decompress_to_buffer(bytes, frame)?;
                if got != frame.len() {
                    return Err(invalid(format!(
                        "a frame of {got} bytes where {} are expected",
                        frame.len()
                    )));
                }
            }
            Ok::<(), io::Error>(())
        })?;
    }
    Ok(())
}

/// A writer or reader that hashes the bytes that pass through it.
struct Hashed<T> {
    inner: T,
    hasher: blake3::Hasher,
}

impl<T> Hashed<T> {
    fn new(inner: T) -> Hashed<T> {
        Hashed {
            inner,
            hasher: blake3::Hasher::new(),
        }
    }

    fn finish(self) -> (T, blake3::Hash) {
        (self.inner, self.hasher.finalize())
    }
}

impl<W: Write> Write for Hashed<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<R: Read> Read for Hashed<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}
