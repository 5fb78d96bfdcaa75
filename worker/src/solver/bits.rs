//! The compact solver: a pawnless slice solved by lines (a [`Geometry::line_man`]) in three bits
//! an index instead of the byte and bit of [`super::retrograde`], for slices whose byte of state
//! does not fit the machine (a 7-man table: KNNNNvKQ's 37.6 G indices are 35 GiB at a byte, 14
//! GiB here). The same values, byte for byte.
//!
//! One side's wins at a time. In the *phase* of an attacker `A`, the positions with `A` to move
//! (the half `X` of the index) can only be won, and those with the defender to move (`Y`) only
//! lost: the phase finds exactly `A`'s wins, with their plies, as the byte solver would. The
//! other side's wins are the next phase's; what neither finds is a draw. Three bitmaps of the
//! whole index:
//! - `blocked`: in `X`, set if the position is illegal or won for `A` (the verification reads
//!   it: a move into such a position is no way out; the un-moves skip such predecessors);
//! - `skip`: in `Y`, set if the position is illegal, cannot be lost (an exit holds the draw or
//!   wins, a stalemate) or is lost already (final, or at a known later ply);
//! - `front`: the positions decided at the ply being scanned; after the un-moves of a win, the
//!   positions of `Y` to verify (then those lost at the next ply).
//!
//! Each phase uses the halves of `blocked` and `skip` the other leaves alone, so init sets both
//! phases' bits at once, with every legal position named through [`InitTarget`] by the init of
//! the byte solver: positions it decides at a known ply (mates, positions with only exits) and
//! positions with a winning exit go to lists of plies on disk ([`Pending`]), taken up when the
//! phase's passes reach that ply. A position of `Y` verified lost whose slowest losing exit is
//! later than the next ply is listed for that ply too (looked up again by [`exits`]).
//!
//! The plies of the positions decided go to one [`DtmLog`] a phase, and the values are written
//! from the two logs and legality ([`line_legal`]) at the end, segment by segment.
//!
//! Every bit is set by a rule that does not depend on the order of the work (set-only during a
//! step, or owned by the thread of its line), so the values do not depend on the threads.
//!
//! With [`Checkpoints`], the lists and logs are files of the build folder, and a checkpoint at a
//! ply boundary holds the bitmaps, the phase and its ply, the logs' marks and each list's length
//! and hash ([`save`]); a list taken is removed only once a checkpoint no longer names it.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use tracing::{debug, info, warn};
use zermelo_chess::slice::SliceKey;
use zermelo_chess::value::{DRAW, ILLEGAL, MAX_PLIES};
use zermelo_chess::{Bitboard, Color};

use super::checkpoint::{
    get_blob, get_header, put_blob, put_header, read_checked, u64s, write_durably, Checkpoints,
};
use super::dtm_log::{for_each_offset, DtmLog, LogMark, SegmentEncoder, SEG_INDICES};
use super::geometry::Geometry;
use super::le::{get_len, get_u32, get_u64, invalid, put_u32, put_u64};
use super::paging::{resident_bytes, Big, Mapped, Pager, Paging, Reach, BIT_FILES, MIN_RESIDENT_KSLICES};
use super::par::for_each_chunk;
use super::retrograde::{exits, init_range, line_legal, open_squares, unmove_lines, write_segments, Context};
use super::stage::Stage;
use super::state::{InitTarget, SPILL_FROM, S_DRAW, S_NO_LOSS};
use super::{SolveError, Successors};

/// Bytes the compact solver holds for a slice of `positions` positions, apart from its threads'
/// buffers: three bits a position.
pub fn bits_state_bytes(positions: u64) -> u64 {
    3 * positions.div_ceil(64) * 8
}

/// The least the compact solver holds of the state of a pawnless slice of `positions` positions
/// paged ([`Paging`]): [`MIN_RESIDENT_KSLICES`] K-slices of its three bitmaps (a budget of
/// `fixed + r`, `fixed` what its caller holds apart from the state, keeps `r` bytes of them
/// resident). The files hold [`bits_state_bytes`].
pub(super) fn bits_paged_least(positions: u64) -> u64 {
    let kslice = positions / 2 / zermelo_chess::index::PAWNLESS_KING_PAIRS as u64;
    MIN_RESIDENT_KSLICES * resident_bytes(kslice, BIT_FILES)
}

/// True if the compact solver can solve slice `key`: pawnless, by lines.
pub fn bits_solvable(key: &SliceKey) -> bool {
    let g = Geometry::new(key);
    g.pawnless && g.line_man().is_some()
}

/// Slices of this many indices or more log each pass at the info level (7 men).
const REPORT_FROM: usize = 1 << 32;

/// Solves a pawnless slice solved by lines ([`bits_solvable`]) in three bits an index and hands
/// its values to `sink` in index order, as [`super::solve_slice_into`] does (the same values).
/// With `paging`, the bitmaps are paged through files of its folder, at most its `resident`
/// bytes of them in memory (the same values).
///
/// With `checkpoints`, the slice's state is written to a checkpoint in their folder at ply
/// boundaries (its bitmaps, where the passes stand, and the marks of its logs of plies and of
/// its lists of later plies, all files of that folder: see [`Checkpoints`]), and a slice with a
/// checkpoint there is resumed from it (a damaged one or one of another solver is discarded with
/// a warning, and the slice solved from the start); a stop asked for there ends the solve at the
/// next ply boundary with a checkpoint and [`SolveError::Interrupted`] (during init, at once).
/// The caller removes the slice's files ([`Checkpoints::remove`]) once its values are safe.
pub fn solve_slice_bits(
    key: &SliceKey,
    succ: &dyn Successors,
    threads: usize,
    paging: Option<&Paging>,
    checkpoints: Option<&Checkpoints<'_>>,
    sink: &mut dyn FnMut(&[u16]) -> Result<(), SolveError>,
) -> Result<(), SolveError> {
    let g = Geometry::new(key);
    let l = g
        .line_man()
        .filter(|_| g.pawnless)
        .expect("the compact solver takes pawnless slices solved by lines");
    let start = std::time::Instant::now();
    let ctx = Context::new(&g, key, succ);
    let n = g.ix.size() as usize;
    debug_assert!(n.is_multiple_of(64));
    let stopped = || checkpoints.is_some_and(Checkpoints::stopped);
    let stage = Stage::new(n as u64);
    let resumed = match checkpoints.map(|c| load(c, key, &g, paging, threads)) {
        Some(Ok(r)) => r,
        Some(Err(Damaged::Scratch(e))) => return Err(e),
        Some(Err(Damaged::Why(why))) => {
            let c = checkpoints.expect("checkpoints");
            warn!(
                slice = %key,
                checkpoint = %c.checkpoint_path(key).display(),
                why,
                "discarded a damaged checkpoint: the slice is solved from the start"
            );
            c.remove(key);
            None
        }
        None => None,
    };
    let mut run = match resumed {
        Some(r) => {
            info!(slice = %key, side = ?r.at.attacker, plies = r.at.plies, bytes = r.bytes, seconds = start.elapsed().as_secs_f64(), "resumed from its checkpoint");
            r
        }
        None => {
            stage.say(format_args!("{key}: init"));
            let bits = Bits::new(&g, paging)?;
            let pending = [0, 1].map(|a| Pending::new(checkpoints.map(|c| c.file(key, &format!("pend{a}")))));
            init(&ctx, &bits, &pending, threads, &stopped)?;
            debug!(slice = %key, seconds = start.elapsed().as_secs_f64(), "compact init done");
            let log = match checkpoints {
                Some(c) => DtmLog::in_file(&log_path(c, key, Color::White)).map_err(SolveError::Scratch)?,
                None => DtmLog::new(n >= SPILL_FROM),
            };
            let horizon = pending[0].last().unwrap_or(0);
            Run {
                bits,
                pending,
                logs: vec![log],
                at: At {
                    attacker: Color::White,
                    plies: 0,
                    horizon,
                },
                bytes: 0,
            }
        }
    };
    let mut last_checkpoint = start;
    loop {
        let attacker = run.at.attacker;
        phase(&ctx, &mut run, threads, start, &mut |run: &mut Run| {
            stage.say(format_args!(
                "{key}: {:?}'s wins, ply {}",
                run.at.attacker, run.at.plies
            ));
            let Some(c) = checkpoints else {
                return Ok(());
            };
            let stop = c.stopped();
            if stop || last_checkpoint.elapsed() >= c.every {
                let phase_start = std::time::Instant::now();
                let bytes = save(c, key, run, threads)?;
                info!(slice = %key, side = ?run.at.attacker, plies = run.at.plies, bytes, seconds = phase_start.elapsed().as_secs_f64(), "checkpoint written");
                last_checkpoint = std::time::Instant::now();
                if stop {
                    return Err(SolveError::Interrupted);
                }
            }
            Ok(())
        })?;
        if attacker == Color::Black {
            break;
        }
        // Black's phase: its lists were made at init.
        let log = match checkpoints {
            Some(c) => DtmLog::in_file(&log_path(c, key, Color::Black)).map_err(SolveError::Scratch)?,
            None => DtmLog::new(n >= SPILL_FROM),
        };
        run.logs.push(log);
        run.at = At {
            attacker: Color::Black,
            plies: 0,
            horizon: run.pending[1].last().unwrap_or(0),
        };
    }
    let Run { bits, logs, .. } = run;
    drop(bits);
    debug!(
        slice = %key,
        log_bytes = logs.iter().map(DtmLog::bytes).sum::<u64>(),
        seconds = start.elapsed().as_secs_f64(),
        "compact solve done"
    );
    write_values(&g, l, &logs, threads, sink)
}

/// Where the passes stand: the phase and its next ply, and the largest ply known to have
/// positions to decide in that phase.
#[derive(Clone, Copy, Debug)]
struct At {
    attacker: Color,
    plies: u32,
    horizon: u32,
}

/// A slice being solved: its bitmaps, both phases' lists, the logs of the phases begun (White's,
/// then Black's), where the passes stand, and (resumed) the bytes of its checkpoint.
struct Run {
    bits: Bits,
    pending: [Pending; 2],
    logs: Vec<DtmLog>,
    at: At,
    bytes: u64,
}

/// The indices of segment `s` of a slice of `n` indices.
fn segment_range(s: usize, n: usize) -> std::ops::Range<usize> {
    s * SEG_INDICES..((s + 1) * SEG_INDICES).min(n)
}

/// [`Bits::live`] of a bitmap of `words` words, all clear.
fn live_bits(words: usize) -> Vec<AtomicU64> {
    super::memory::atomic_u64s((words * 64).div_ceil(LIVE_INDICES).div_ceil(64))
}

/// The log of plies of the phase of `attacker`.
fn log_path(c: &Checkpoints<'_>, key: &SliceKey, attacker: Color) -> PathBuf {
    match attacker {
        Color::White => c.log_path(key),
        Color::Black => c.file(key, "plies1"),
    }
}

/// The three bitmaps (see the module's notes), a bit an index, a line a word: in memory, or
/// paged through files by K-slices ([`super::paging`]: each pass marks the K-slices it is about
/// to touch, and walks them in the pager's order).
struct Bits {
    blocked: Big<AtomicU64>,
    skip: Big<AtomicU64>,
    front: Big<AtomicU64>,
    /// A bit a group of [`LIVE_INDICES`] indices: set if `front` may have bits set there (set
    /// with them; cleared by the scan of a ply, which clears them), so that the passes read only
    /// the groups in play. Late in a phase, few are: a paged state then touches few K-slices.
    live: Vec<AtomicU64>,
    per_side: usize,
    pager: Option<Pager>,
}

/// The bitmaps as [`Pager::mark_in`] names them (in the order [`Bits::new`] adds them).
const BLOCKED: u32 = 1;
const SKIP: u32 = 2;
const FRONT: u32 = 4;

/// The indices of a bit of [`Bits::live`]: a page of a bitmap (32768 indices), or a segment if
/// less (in tests), so that a group is in one segment.
const LIVE_INDICES: usize = if SEG_INDICES < 1 << 15 {
    SEG_INDICES
} else {
    1 << 15
};

impl Bits {
    /// The bitmaps of the slice of `g`, all clear (init sets `blocked` and `skip` a segment at a
    /// time before it clears the bits of the legal positions): in files of `paging.dir`, at most
    /// `paging.resident` bytes of them resident, if given.
    fn new(g: &Geometry, paging: Option<&Paging>) -> Result<Bits, SolveError> {
        let words = g.ix.size() as usize / 64;
        let per_side = g.ix.per_side() as usize;
        let Some(paging) = paging else {
            let clear = || Big::heap(super::memory::atomic_u64s(words));
            return Ok(Bits {
                blocked: clear(),
                skip: clear(),
                front: clear(),
                live: live_bits(words),
                per_side,
                pager: None,
            });
        };
        let pager = Pager::new(&g.ix, paging, BIT_FILES, None);
        let map = |name: &str| {
            // SAFETY: zero is a valid AtomicU64, and the map starts on a page.
            let m = unsafe { Mapped::zeroed(&paging.dir, name, words, pager.huge()) }
                .map_err(SolveError::Scratch)?;
            pager.add(&m, 1, 8);
            Ok::<_, SolveError>(Big::mapped(m))
        };
        Ok(Bits {
            blocked: map("blocked")?,
            skip: map("skip")?,
            front: map("front")?,
            live: live_bits(words),
            per_side,
            pager: Some(pager),
        })
    }

    /// Notes that `front` has a bit set at index `i` ([`Bits::live`]).
    #[inline]
    fn set_live(&self, i: usize) {
        let g = i / LIVE_INDICES;
        let (w, bit) = (g / 64, 1u64 << (g % 64));
        if self.live[w].load(Relaxed) & bit == 0 {
            self.live[w].fetch_or(bit, Relaxed);
        }
    }

    /// The groups of [`Bits::live`] set among those of the indices `range` (whole groups).
    fn live_groups(&self, range: std::ops::Range<usize>) -> impl Iterator<Item = usize> + '_ {
        (range.start / LIVE_INDICES..range.end.div_ceil(LIVE_INDICES))
            .filter(|&g| self.live[g / 64].load(Relaxed) & (1 << (g % 64)) != 0)
    }

    /// The words of `front` of group `g` of [`Bits::live`], within `words`.
    fn group_words(&self, g: usize, words: &std::ops::Range<usize>) -> std::ops::Range<usize> {
        let per = LIVE_INDICES / 64;
        (g * per).max(words.start)..((g + 1) * per).min(words.end).min(self.front.len())
    }

    /// Marks the K-slices a pass `reach` touches for the indices `range` in the bitmaps
    /// `files` ([`BLOCKED`], [`SKIP`], [`FRONT`]), if paged.
    #[inline]
    fn mark(&self, range: std::ops::Range<usize>, reach: Reach, files: u32) {
        if let Some(p) = &self.pager {
            p.mark_in(range, reach, files);
        }
    }

    /// The segments of a pass `reach` in the order it takes them (ascending unless paged).
    fn segment_order(&self, segments: usize, reach: Reach) -> Vec<usize> {
        match &self.pager {
            Some(p) => p
                .walk(segments, SEG_INDICES, reach)
                .into_iter()
                .map(|u| u as usize)
                .collect(),
            None => (0..segments).collect(),
        }
    }

    /// The range of segment `s` of `n` indices, marked for a pass `reach` in the bitmaps
    /// `files` if paged.
    fn segment(&self, s: usize, n: usize, reach: Reach, files: u32) -> std::ops::Range<usize> {
        let range = segment_range(s, n);
        self.mark(range.clone(), reach, files);
        range
    }

    /// Who is to move at index `i`.
    fn mover(&self, i: usize) -> Color {
        if i < self.per_side {
            Color::White
        } else {
            Color::Black
        }
    }
}

/// Lists of positions by ply, for one phase: each ply's in a file of frames (segment, encoded
/// offsets), taken whole when the passes reach it. Unnamed temporary files, or with a checkpoint
/// path, files named after it (`PATH-PLY`), whose lengths and hashes a checkpoint keeps
/// ([`Pending::marks`]); a file taken is removed once a checkpoint no longer names it.
struct Pending {
    base: Option<PathBuf>,
    plies: Mutex<BTreeMap<u32, Listed>>,
    /// Named files taken since the last checkpoint.
    taken: Mutex<Vec<PathBuf>>,
}

/// One ply's file of [`Pending`], with its length and the hash of its bytes so far.
struct Listed {
    file: File,
    len: u64,
    hasher: blake3::Hasher,
}

/// A ply's file as a checkpoint names it: the ply, the file's length and the hash of its bytes.
type ListedMark = (u32, u64, [u8; 32]);

impl Pending {
    fn new(base: Option<PathBuf>) -> Pending {
        Pending {
            base,
            plies: Mutex::default(),
            taken: Mutex::default(),
        }
    }

    fn path(&self, ply: u32) -> Option<PathBuf> {
        self.base.as_ref().map(|b| {
            let mut name = b.as_os_str().to_owned();
            name.push(format!("-{ply}"));
            PathBuf::from(name)
        })
    }

    /// Adds the positions of segment `s` encoded in `encoded` ([`SegmentEncoder`]) to ply `ply`.
    fn add(&self, ply: u32, s: usize, encoded: &[u8]) -> std::io::Result<()> {
        let mut plies = self.plies.lock().unwrap_or_else(|e| e.into_inner());
        let listed = match plies.entry(ply) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => {
                let file = match self.path(ply) {
                    Some(path) => File::options()
                        .read(true)
                        .write(true)
                        .create(true)
                        .truncate(true)
                        .open(path)?,
                    None => tempfile::tempfile()?,
                };
                e.insert(Listed {
                    file,
                    len: 0,
                    hasher: blake3::Hasher::new(),
                })
            }
        };
        let mut frame = Vec::with_capacity(12 + encoded.len());
        frame.extend_from_slice(&(s as u64).to_le_bytes());
        frame.extend_from_slice(&(encoded.len() as u32).to_le_bytes());
        frame.extend_from_slice(encoded);
        listed.file.write_all_at(&frame, listed.len)?;
        listed.len += frame.len() as u64;
        listed.hasher.update(&frame);
        Ok(())
    }

    /// The largest ply listed.
    fn last(&self) -> Option<u32> {
        let plies = self.plies.lock().unwrap_or_else(|e| e.into_inner());
        plies.keys().next_back().copied()
    }

    /// The files as a checkpoint names them, made durable first.
    fn marks(&self) -> std::io::Result<Vec<ListedMark>> {
        let plies = self.plies.lock().unwrap_or_else(|e| e.into_inner());
        let mut marks = Vec::with_capacity(plies.len());
        for (&ply, listed) in plies.iter() {
            listed.file.sync_data()?;
            marks.push((ply, listed.len, *listed.hasher.clone().finalize().as_bytes()));
        }
        Ok(marks)
    }

    /// Removes the files taken, once a checkpoint no longer names them.
    fn forget_taken(&self) {
        for path in std::mem::take(&mut *self.taken.lock().unwrap_or_else(|e| e.into_inner())) {
            let _ = std::fs::remove_file(path);
        }
    }

    /// The lists of `base` as `marks` name them: each file's bytes checked against its hash, and
    /// cut back to its length.
    fn resume(base: PathBuf, marks: &[ListedMark]) -> std::io::Result<Pending> {
        let pending = Pending::new(Some(base));
        {
            let mut plies = pending.plies.lock().unwrap_or_else(|e| e.into_inner());
            for &(ply, len, hash) in marks {
                let path = pending.path(ply).expect("named");
                let file = File::options().read(true).write(true).open(&path)?;
                if file.metadata()?.len() < len {
                    return Err(invalid(format!(
                        "{} is shorter than its checkpoint says",
                        path.display()
                    )));
                }
                let mut hasher = blake3::Hasher::new();
                let mut buf = vec![0u8; 1 << 20];
                let mut at = 0u64;
                while at < len {
                    let k = (len - at).min(buf.len() as u64) as usize;
                    file.read_exact_at(&mut buf[..k], at)?;
                    hasher.update(&buf[..k]);
                    at += k as u64;
                }
                if *hasher.clone().finalize().as_bytes() != hash {
                    return Err(invalid(format!(
                        "{} does not hash as its checkpoint says",
                        path.display()
                    )));
                }
                file.set_len(len)?;
                plies.insert(ply, Listed { file, len, hasher });
            }
        }
        Ok(pending)
    }

    /// Takes the frames of ply `ply` and calls `f(segment, encoded offsets)` for each, on
    /// `threads` threads, read a batch of at most [`FRAMES_BATCH`] bytes at a time. Frames a
    /// malformed file would give (cut short, or a segment past `segments`) are an error.
    fn take(
        &self,
        ply: u32,
        segments: usize,
        threads: usize,
        f: impl Fn(usize, &[u8]) + Sync,
    ) -> std::io::Result<()> {
        let listed = self.plies.lock().unwrap_or_else(|e| e.into_inner()).remove(&ply);
        let Some(Listed { file, len, .. }) = listed else {
            return Ok(());
        };
        if let Some(path) = self.path(ply) {
            self.taken.lock().unwrap_or_else(|e| e.into_inner()).push(path);
        }
        let mut r = std::io::BufReader::new(file);
        r.seek(SeekFrom::Start(0))?;
        let mut r = r.take(len);
        let mut head = [0u8; 12];
        let mut batch: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut bytes = 0;
        loop {
            let more = match r.read_exact(&mut head) {
                Ok(()) => true,
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => false,
                Err(e) => return Err(e),
            };
            if more {
                let s = u64::from_le_bytes(head[..8].try_into().expect("8 bytes")) as usize;
                let len = u32::from_le_bytes(head[8..].try_into().expect("4 bytes")) as usize;
                if s >= segments || len > SEG_INDICES / 8 + 1 {
                    return Err(invalid(format!(
                        "a list of ply {ply} names segment {s} with {len} bytes"
                    )));
                }
                let mut encoded = vec![0; len];
                r.read_exact(&mut encoded)?;
                bytes += len;
                batch.push((s, encoded));
            }
            if !more || bytes >= FRAMES_BATCH {
                let _ = for_each_chunk(batch.len(), 1, threads, |range| {
                    for (s, encoded) in &batch[range] {
                        f(*s, encoded);
                    }
                    Ok::<(), ()>(())
                });
                batch.clear();
                bytes = 0;
            }
            if !more {
                return Ok(());
            }
        }
    }
}

/// Bytes of listed positions read at once (see [`Pending::take`]).
const FRAMES_BATCH: usize = 64 << 20;

/// What one thread lists while it works through a segment: per phase and ply, the positions
/// of the segment in order, flushed to the phase's [`Pending`] when the segment is done.
struct Lister<'a> {
    pending: &'a [Pending; 2],
    first: usize,
    len: usize,
    found: RefCell<BTreeMap<(usize, u32), SegmentEncoder>>,
}

impl<'a> Lister<'a> {
    fn new(pending: &'a [Pending; 2]) -> Lister<'a> {
        Lister {
            pending,
            first: 0,
            len: 0,
            found: RefCell::default(),
        }
    }

    /// Starts segment `s` of a slice of `n` indices.
    fn begin(&mut self, s: usize, n: usize) {
        self.first = s * SEG_INDICES;
        self.len = SEG_INDICES.min(n - self.first);
    }

    /// Lists index `i` (of the segment begun, ascending) at `ply` of the phase of `attacker`.
    fn push(&self, attacker: Color, ply: u32, i: usize) {
        let len = self.len;
        self.found
            .borrow_mut()
            .entry((attacker.index(), ply))
            .or_insert_with(|| SegmentEncoder::new(len))
            .push(i - self.first);
    }

    /// The segment begun is done: its lists go to their files. Returns the largest ply listed.
    fn flush(&self) -> Result<u32, SolveError> {
        let s = self.first / SEG_INDICES;
        let mut last = 0;
        for ((a, ply), enc) in std::mem::take(&mut *self.found.borrow_mut()) {
            self.pending[a]
                .add(ply, s, &enc.finish())
                .map_err(SolveError::Scratch)?;
            last = last.max(ply);
        }
        Ok(last)
    }
}

/// Init's calls, turned into both phases' bits (the words of a line are written by the one
/// thread that inits it) and lists.
struct InitBits<'a> {
    bits: &'a Bits,
    lister: Lister<'a>,
}

impl InitBits<'_> {
    /// A legal position: `blocked` cleared (nobody has won it yet), `skip` set to `skip`.
    #[inline]
    fn legal(&self, i: usize, skip: bool) {
        let (w, bit) = (i / 64, 1u64 << (i % 64));
        let b = &self.bits.blocked[w];
        b.store(b.load(Relaxed) & !bit, Relaxed);
        if !skip {
            let s = &self.bits.skip[w];
            s.store(s.load(Relaxed) & !bit, Relaxed);
        }
    }
}

impl InitTarget for InitBits<'_> {
    #[inline]
    fn set(&self, i: usize, v: u8) {
        self.legal(i, v == S_DRAW || v == S_NO_LOSS);
    }

    fn set_later(&self, i: usize, plies: u32) {
        self.legal(i, true);
        let mover = self.bits.mover(i);
        // Won by the mover (its phase), or lost (the other's).
        let attacker = if plies % 2 == 1 { mover } else { mover.other() };
        self.lister.push(attacker, plies, i);
    }

    fn set_win_exit(&self, i: usize, plies: u32) {
        self.legal(i, true);
        self.lister.push(self.bits.mover(i), plies, i);
    }
}

/// Init of both phases: every segment by one thread, through the byte solver's init.
fn init(
    ctx: &Context<'_>,
    bits: &Bits,
    pending: &[Pending; 2],
    threads: usize,
    stopped: &(dyn Fn() -> bool + Sync),
) -> Result<(), SolveError> {
    let n = bits.blocked.len() * 64;
    for_each_chunk(n.div_ceil(SEG_INDICES), 1, threads, |range| {
        if stopped() {
            return Err(SolveError::Interrupted);
        }
        let mut target = InitBits {
            bits,
            lister: Lister::new(pending),
        };
        for s in range {
            target.lister.begin(s, n);
            let seg = bits.segment(s, n, Reach::Own, BLOCKED | SKIP);
            // Every index blocked and skipped until init names it legal.
            for w in seg.start / 64..seg.end / 64 {
                bits.blocked[w].store(!0, Relaxed);
                bits.skip[w].store(!0, Relaxed);
            }
            init_range(ctx, &target, seg)?;
            target.lister.flush()?;
        }
        Ok(())
    })
}

/// The passes of the phase `run.at` names from its ply on, its plies recorded in its log (the
/// last of `run.logs`); `boundary` is called at every ply boundary (`run.at` then names the next
/// ply), and an error of it ends the phase.
fn phase(
    ctx: &Context<'_>,
    run: &mut Run,
    threads: usize,
    start: std::time::Instant,
    boundary: &mut dyn FnMut(&mut Run) -> Result<(), SolveError>,
) -> Result<(), SolveError> {
    let g = ctx.g;
    let key = &ctx.key;
    let attacker = run.at.attacker;
    let l = g.line_man().expect("by lines");
    let n = run.bits.blocked.len() * 64;
    let segments = n.div_ceil(SEG_INDICES);
    // The defender's half, where the verification works.
    let y_words = {
        let y = attacker.other().index() * run.bits.per_side;
        y / 64..(y + run.bits.per_side) / 64
    };
    while run.at.plies <= run.at.horizon {
        let plies = run.at.plies;
        let horizon = AtomicU32::new(run.at.horizon);
        let Run {
            bits, pending, logs, ..
        } = &mut *run;
        let bits = &*bits;
        let pendings = &*pending;
        let pending = &pendings[attacker.index()];
        let log = logs.last_mut().expect("the phase's log");
        if plies >= MAX_PLIES as u32 - 1 {
            return Err(SolveError::TooDeep(*key));
        }
        let won_here = plies % 2 == 1;
        // 1. The positions listed for this ply join the front: a win not yet found (the
        // attacker's), or a loss (the defender's, already in `skip`).
        pending
            .take(plies, segments, threads, |s, encoded| {
                let files = if won_here { BLOCKED | FRONT } else { FRONT };
                let first = bits.segment(s, n, Reach::Own, files).start;
                let whole = for_each_offset(encoded, |o| {
                    let i = first + o;
                    let (w, bit) = (i / 64, 1u64 << (i % 64));
                    if w < bits.front.len()
                        && (!won_here || bits.blocked[w].fetch_or(bit, Relaxed) & bit == 0)
                    {
                        bits.front[w].fetch_or(bit, Relaxed);
                        bits.set_live(i);
                    }
                });
                debug_assert!(whole, "this solver's lists are well formed");
            })
            .map_err(SolveError::Scratch)?;
        // 2. The front is the frontier of this ply: recorded in the log, cleared.
        log.begin_ply(segments);
        let frontier = AtomicU64::new(0);
        for_each_chunk(segments, 1, threads, |range| {
            for s in range {
                let seg = segment_range(s, n);
                let groups: Vec<usize> = bits.live_groups(seg.clone()).collect();
                if groups.is_empty() {
                    continue;
                }
                bits.mark(seg.clone(), Reach::Own, FRONT);
                let std::ops::Range { start: first, end } = seg;
                let mut enc = SegmentEncoder::new(end - first);
                let mut count = 0u64;
                for g in groups {
                    bits.live[g / 64].fetch_and(!(1 << (g % 64)), Relaxed);
                    for w in bits.group_words(g, &(first / 64..end / 64)) {
                        let m = bits.front[w].load(Relaxed);
                        if m == 0 {
                            continue;
                        }
                        bits.front[w].store(0, Relaxed);
                        count += u64::from(m.count_ones());
                        enc.push_word(w - first / 64, m);
                    }
                }
                frontier.fetch_add(count, Relaxed);
                log.record_segment(s, &enc.finish())
                    .map_err(SolveError::Scratch)?;
            }
            Ok::<(), SolveError>(())
        })?;
        log.end_ply(plies);
        let frontier = frontier.into_inner();
        if n >= REPORT_FROM {
            info!(slice = %key, side = ?attacker, plies, frontier, seconds = start.elapsed().as_secs_f64(), "pass");
        } else if n >= SPILL_FROM {
            debug!(slice = %key, side = ?attacker, plies, frontier, seconds = start.elapsed().as_secs_f64(), "pass");
        }
        if frontier > 0 {
            // 3. Un-moves: after a loss, the predecessors not won nor illegal win at the next
            // ply; after a win, those that may lose are to verify.
            let log = &*log;
            let order = bits.segment_order(segments, Reach::Unmove);
            for_each_chunk(segments, 1, threads, |range| {
                let mut encoded = Vec::new();
                let mut any = false;
                for &s in &order[range] {
                    log.read_segment(plies, s, &mut encoded)
                        .map_err(SolveError::Scratch)?;
                    if encoded.is_empty() {
                        continue;
                    }
                    bits.segment(
                        s,
                        n,
                        Reach::Unmove,
                        if won_here { SKIP | FRONT } else { BLOCKED | FRONT },
                    );
                    unmove_lines(g, l, s * SEG_INDICES, &encoded, |p, squares| {
                        let w = p as usize / 64;
                        if won_here {
                            let new = squares.0 & !bits.skip[w].load(Relaxed) & !bits.front[w].load(Relaxed);
                            if new != 0 {
                                bits.front[w].fetch_or(new, Relaxed);
                                bits.set_live(w * 64);
                            }
                        } else {
                            let new = squares.0 & !bits.blocked[w].load(Relaxed);
                            if new != 0 {
                                let new = new & !bits.blocked[w].fetch_or(new, Relaxed);
                                if new != 0 {
                                    bits.front[w].fetch_or(new, Relaxed);
                                    bits.set_live(w * 64);
                                    any = true;
                                }
                            }
                        }
                    });
                }
                if any {
                    horizon.fetch_max(plies + 1, Relaxed);
                }
                Ok::<(), SolveError>(())
            })?;
        }
        if won_here && frontier > 0 {
            // 4. Verification: a position of `Y` whose every move inside the slice leads to a
            // position won for the attacker (or illegal) is lost at the next ply, or at its
            // slowest losing exit if that is later (listed for that ply).
            let first_seg = y_words.start * 64 / SEG_INDICES;
            let last_seg = (y_words.end * 64).div_ceil(SEG_INDICES);
            let order: Vec<usize> = bits
                .segment_order(segments, Reach::Verify)
                .into_iter()
                .filter(|s| (first_seg..last_seg).contains(s))
                .collect();
            for_each_chunk(order.len(), 1, threads, |range| {
                let mut lister = Lister::new(pendings);
                let mut kept = false;
                for &s in &order[range] {
                    let words = (s * SEG_INDICES / 64).max(y_words.start)
                        ..(((s + 1) * SEG_INDICES) / 64).min(y_words.end);
                    let groups: Vec<usize> = bits.live_groups(words.start * 64..words.end * 64).collect();
                    if groups.is_empty() {
                        continue;
                    }
                    bits.segment(s, n, Reach::Verify, BLOCKED | SKIP | FRONT);
                    lister.begin(s, n);
                    for w in groups.into_iter().flat_map(|g| bits.group_words(g, &words)) {
                        let at = bits.front[w].load(Relaxed);
                        if at == 0 {
                            continue;
                        }
                        let base = w * 64;
                        let d = g.decode_line(base as u64, l).expect("a line to verify is placed");
                        let open = open_squares(g, l, &d, Bitboard(at), |line| {
                            Bitboard(bits.blocked[line as usize / 64].load(Relaxed))
                        });
                        let lost = Bitboard(at) & !open;
                        let mut later = Bitboard::EMPTY;
                        for q in lost {
                            let slowest = exits(ctx, &g.line_position(&d, l, q))?.slowest_loss as u32;
                            if slowest > plies + 1 {
                                later = later.with(q);
                                lister.push(attacker, slowest, base + q.index());
                            }
                        }
                        let s_word = &bits.skip[w];
                        s_word.store(s_word.load(Relaxed) | lost.0, Relaxed);
                        let now = lost & !later;
                        bits.front[w].store(now.0, Relaxed);
                        kept |= now.any();
                    }
                    let last = lister.flush()?;
                    horizon.fetch_max(last, Relaxed);
                }
                if kept {
                    horizon.fetch_max(plies + 1, Relaxed);
                }
                Ok::<(), SolveError>(())
            })?;
        }
        run.at.plies = plies + 1;
        run.at.horizon = horizon.into_inner();
        boundary(run)?;
    }
    Ok(())
}

const MAGIC: &[u8; 8] = b"ZMCKBIT\x01";

/// The bytes of words no thread writes meanwhile (between two plies, every thread joined).
fn words_bytes(v: &[AtomicU64]) -> &[u8] {
    // SAFETY: `AtomicU64` has the size and bit validity of `u64`, whose bytes are all valid
    // `u8`; the caller's words are not written while the bytes are read (no thread runs between
    // two plies).
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// What a checkpoint of the compact solver must agree with besides the slice's name.
fn header(key: &SliceKey, n: usize) -> [u64; 4] {
    let [w, b] = key.raw();
    [w, b, n as u64, SEG_INDICES as u64]
}

/// Writes the checkpoint of `run` (slice `key`, between two plies) and makes its logs and lists
/// durable first; removes the lists taken since the last one. Returns its bytes.
fn save(c: &Checkpoints<'_>, key: &SliceKey, run: &mut Run, threads: usize) -> Result<u64, SolveError> {
    let path = c.checkpoint_path(key);
    let failed = |source: std::io::Error| SolveError::Checkpoint {
        path: path.display().to_string(),
        source,
    };
    let marks = run
        .logs
        .iter()
        .map(DtmLog::mark)
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(failed)?;
    let listed = [
        run.pending[0].marks().map_err(failed)?,
        run.pending[1].marks().map_err(failed)?,
    ];
    let n = run.bits.blocked.len() * 64;
    let bytes = write_durably(&path, |w| {
        put_header(w, MAGIC, key, &header(key, n))?;
        put_u32(w, run.at.attacker.index() as u32)?;
        put_u32(w, run.at.plies)?;
        put_u32(w, run.at.horizon)?;
        put_u64(w, marks.len() as u64)?;
        for m in &marks {
            m.write_to(w)?;
        }
        for phase in &listed {
            put_u64(w, phase.len() as u64)?;
            for (ply, len, hash) in phase {
                put_u32(w, *ply)?;
                put_u64(w, *len)?;
                w.write_all(hash)?;
            }
        }
        let bits = &run.bits;
        for (v, files) in [(&bits.blocked, BLOCKED), (&bits.skip, SKIP), (&bits.front, FRONT)] {
            let mark =
                |bytes: std::ops::Range<usize>| bits.mark(bytes.start * 8..bytes.end * 8, Reach::Own, files);
            put_blob(w, words_bytes(v), threads, &mark)?;
        }
        Ok(())
    })
    .map_err(failed)?;
    for p in &run.pending {
        p.forget_taken();
    }
    Ok(bytes)
}

/// Why a checkpoint was not taken up.
enum Damaged {
    /// It is damaged or does not fit: discarded.
    Why(String),
    /// The bitmaps to read it into could not be made: the solve fails, the checkpoint is kept.
    Scratch(SolveError),
}

/// The slice resumed from its checkpoint in `c`, if it has one of this solver (its bitmaps in
/// memory, or paged as `paging` says, read on `threads` threads): `Ok(None)` if it has none,
/// [`Damaged`] if it is damaged or does not fit.
fn load(
    c: &Checkpoints<'_>,
    key: &SliceKey,
    g: &Geometry,
    paging: Option<&Paging>,
    threads: usize,
) -> Result<Option<Run>, Damaged> {
    let path = c.checkpoint_path(key);
    if !path.exists() {
        return Ok(None);
    }
    let n = g.ix.size() as usize;
    let mut bits = Bits::new(g, paging).map_err(Damaged::Scratch)?;
    let read = read_checked(&path, |r| {
        get_header(
            r,
            MAGIC,
            "a checkpoint of the compact solver of this version",
            key,
            &header(key, n),
        )?;
        let attacker = match get_u32(r)? {
            0 => Color::White,
            1 => Color::Black,
            a => return Err(invalid(format!("a phase {a}"))),
        };
        let at = At {
            attacker,
            plies: get_u32(r)?,
            horizon: get_u32(r)?,
        };
        let logs = get_len(r, 2)?;
        if logs != attacker.index() as u64 + 1 {
            return Err(invalid(format!("{logs} logs in the phase of {attacker:?}")));
        }
        let marks = (0..logs)
            .map(|_| LogMark::read_from(r))
            .collect::<std::io::Result<Vec<_>>>()?;
        let mut listed: [Vec<ListedMark>; 2] = Default::default();
        for phase in &mut listed {
            let k = get_len(r, u64::from(MAX_PLIES))?;
            for _ in 0..k {
                let ply = get_u32(r)?;
                let len = get_u64(r)?;
                let mut hash = [0u8; 32];
                r.read_exact(&mut hash)?;
                phase.push((ply, len, hash));
            }
        }
        let Bits {
            blocked,
            skip,
            front,
            live: bits_live,
            pager,
            ..
        } = &mut bits;
        let pager = &*pager;
        for (v, files) in [(blocked, BLOCKED), (skip, SKIP), (front, FRONT)] {
            let mark = |bytes: std::ops::Range<usize>| {
                if let Some(p) = pager {
                    p.mark_in(bytes.start * 8..bytes.end * 8, Reach::Own, files);
                }
            };
            get_blob(r, u64s(v), threads, &mark)?;
        }
        // Which groups have front bits was not kept: any may.
        for w in bits_live.iter() {
            w.store(!0, Relaxed);
        }
        Ok((at, marks, listed))
    })
    .map_err(Damaged::Why)?;
    let Some(((at, marks, listed), bytes)) = read else {
        return Ok(None);
    };
    let mut logs = Vec::with_capacity(2);
    for (mark, side) in marks.into_iter().zip([Color::White, Color::Black]) {
        logs.push(
            DtmLog::resume(&log_path(c, key, side), mark)
                .map_err(|e| Damaged::Why(format!("its log of plies: {e}")))?,
        );
    }
    let mut pending = Vec::with_capacity(2);
    for (a, marks) in listed.iter().enumerate() {
        pending.push(
            Pending::resume(c.file(key, &format!("pend{a}")), marks)
                .map_err(|e| Damaged::Why(format!("its lists of later plies: {e}")))?,
        );
    }
    let pending: [Pending; 2] = pending
        .try_into()
        .map_err(|_| Damaged::Why("two phases".to_string()))?;
    Ok(Some(Run {
        bits,
        pending,
        logs,
        at,
        bytes,
    }))
}

/// The values, a few segments at a time (one a thread), from legality and the two phases'
/// logs: illegal 0, a draw where no log has the position, else `2 + plies`.
fn write_values(
    g: &Geometry,
    l: usize,
    logs: &[DtmLog],
    threads: usize,
    sink: &mut dyn FnMut(&[u16]) -> Result<(), SolveError>,
) -> Result<(), SolveError> {
    write_segments(
        g.ix.size() as usize,
        threads,
        |s, seg| {
            let mut values = vec![ILLEGAL; seg.len()];
            for base in seg.clone().step_by(64) {
                for q in line_legal(g, base, l) {
                    values[base - seg.start + q.index()] = DRAW;
                }
            }
            for log in logs {
                log.for_each_in_segment(s, |o, p| values[o] = p as u16 + 2)
                    .map_err(SolveError::Scratch)?;
            }
            Ok(Some(values))
        },
        sink,
        |_| {},
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solver::retrograde::solve_slice;
    use crate::solver::retrograde::tests::solve_into;
    use crate::tables::SliceMap;
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use zermelo_chess::index::SliceIndexer;

    fn bits_values(key: &SliceKey, map: &SliceMap, threads: usize) -> Vec<u16> {
        paged_values(key, map, threads, None)
    }

    /// [`bits_values`], paged as `paging` says if given.
    fn paged_values(key: &SliceKey, map: &SliceMap, threads: usize, paging: Option<&Paging>) -> Vec<u16> {
        let mut values = Vec::new();
        solve_slice_bits(key, map, threads, paging, None, &mut |v| {
            values.extend_from_slice(v);
            Ok(())
        })
        .unwrap();
        values
    }

    /// The compact solver gives the byte solver's values, index by index, on 1 and 2 threads:
    /// like men, captures into other tables (winning, drawing and losing exits), mates at
    /// ply 0, positions with only exits, both kings' symmetries.
    #[test]
    fn gives_the_byte_solvers_values() {
        let mut map = SliceMap::new();
        // KNNvKQ (the queen's side wins most, the knights' some) needs KQvKN and KNNvK.
        for name in [
            "KQvK", "KRvK", "KQvKR", "KRvKN", "KRvKB", "KBNvK", "KRvKR", "KQvKN", "KNNvKQ",
        ] {
            let key = SliceKey::pawnless(name.parse().unwrap());
            solve_into(key, &mut map);
            let expected = solve_slice(&key, &map, 2).unwrap();
            assert!(bits_solvable(&key), "{name}");
            {
                // The 5-man slice on 2 threads only (the test's time).
                let threads: &[usize] = if name.len() > 5 { &[2] } else { &[1, 2] };
                for &threads in threads {
                    let got = bits_values(&key, &map, threads);
                    assert_eq!(got.len(), expected.len(), "{name}");
                    if let Some(i) = got.iter().zip(&expected).position(|(a, b)| a != b) {
                        panic!(
                            "{name} on {threads} threads: index {i} ({:?}): compact {} but byte solver {}",
                            SliceIndexer::new(key).position(i as u64),
                            got[i],
                            expected[i]
                        );
                    }
                }
            }
        }
    }

    /// Solves `key` with a checkpoint at every ply boundary (in `c`), paged as `paging` says if
    /// given: the first run is stopped once its first checkpoint is written (its init cannot
    /// be stopped), then every run at its first ply boundary, on 1 and 2 threads in turn.
    /// Returns the values and the runs.
    fn resumed_at_every_ply(
        key: &SliceKey,
        map: &SliceMap,
        c: &Checkpoints<'_>,
        paging: Option<&Paging>,
    ) -> (Vec<u16>, usize) {
        c.stop.store(false, Relaxed);
        let mut runs = 0;
        loop {
            let mut values = Vec::new();
            let solved = std::thread::scope(|s| {
                if runs == 0 {
                    let (path, stop) = (c.checkpoint_path(key), c.stop);
                    s.spawn(move || {
                        let start = std::time::Instant::now();
                        while !path.exists() && start.elapsed().as_secs() < 60 {
                            std::thread::sleep(std::time::Duration::from_micros(100));
                        }
                        stop.store(true, Relaxed);
                    });
                }
                solve_slice_bits(key, map, 1 + runs % 2, paging, Some(c), &mut |v| {
                    values.extend_from_slice(v);
                    Ok(())
                })
            });
            runs += 1;
            match solved {
                Ok(()) => return (values, runs),
                Err(SolveError::Interrupted) => {
                    assert!(values.is_empty(), "values out of a stopped run");
                    assert!(c.checkpoint_path(key).exists(), "stopped without a checkpoint");
                    c.stop.store(true, Relaxed);
                }
                Err(e) => panic!("{e}"),
            }
            assert!(runs < 2000, "no end");
        }
    }

    /// Paged through files with room for a handful of K-slices (far fewer than a pass reaches
    /// at once, so that K-slices are evicted while in use and read back), the compact solver
    /// gives the byte solver's values: on 1 and 2 threads, in 4 KiB pages and in huge pages,
    /// and stopped and resumed at every ply boundary. The files are unlinked at once: nothing is
    /// left in their folder.
    #[test]
    fn paged_gets_the_byte_solvers_values() {
        use crate::solver::paging::{self, FORCE_HUGE};
        let mut map = SliceMap::new();
        for name in ["KRvK", "KNvK", "KRvKN"] {
            solve_into(SliceKey::pawnless(name.parse().unwrap()), &mut map);
        }
        let key = SliceKey::pawnless("KRvKN".parse().unwrap());
        let expected = solve_slice(&key, &map, 2).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let paging = Paging {
            dir: dir.path().to_path_buf(),
            resident: 32 * 4096,
        };
        for (threads, huge) in [(1, false), (2, false), (2, true)] {
            FORCE_HUGE.store(huge, Relaxed);
            let before = paging::evictions();
            let got = paged_values(&key, &map, threads, Some(&paging));
            FORCE_HUGE.store(false, Relaxed);
            assert!(paging::evictions() > before + 1000, "hardly any evictions");
            assert!(
                got == expected,
                "paged on {threads} thread(s), huge pages {huge}: other values"
            );
        }
        let checkpoints = tempfile::tempdir().unwrap();
        let stop = AtomicBool::new(false);
        let c = Checkpoints {
            dir: checkpoints.path(),
            every: std::time::Duration::ZERO,
            stop: &stop,
        };
        let (resumed, runs) = resumed_at_every_ply(&key, &map, &c, Some(&paging));
        assert!(runs >= 40, "only {runs} runs");
        assert!(
            resumed == expected,
            "paged and resumed {runs} times: other values"
        );
        // Half the bitmaps' budget: most of it pinned, the rest paged through the window.
        let n = SliceIndexer::new(key).size();
        let half = Paging {
            dir: dir.path().to_path_buf(),
            resident: 3 * n / 8 / 2,
        };
        paging::SMALL_WINDOW.store(true, Relaxed);
        let (pinned, evicted) = (paging::pinned(), paging::evictions());
        let got = paged_values(&key, &map, 2, Some(&half));
        assert!(paging::pinned() > pinned + n / 8, "hardly anything pinned");
        assert!(paging::evictions() > evicted + 100, "hardly any evictions");
        assert!(got == expected, "pinned and paged: other values");
        let checkpoints = tempfile::tempdir().unwrap();
        let c = Checkpoints {
            dir: checkpoints.path(),
            ..c
        };
        let (resumed, runs) = resumed_at_every_ply(&key, &map, &c, Some(&half));
        assert!(runs >= 40, "only {runs} runs");
        paging::SMALL_WINDOW.store(false, Relaxed);
        assert!(
            resumed == expected,
            "pinned, paged and resumed {runs} times: other values"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "{left:?} left behind");
    }

    /// A slice stopped at every ply boundary of both phases and resumed from its checkpoint
    /// each time, on 1 and 2 threads in turn, gets the values it gets in one go (its lists of
    /// later plies, both logs and bitmaps taken up from the files), and leaves no file behind
    /// once removed; a damaged checkpoint is discarded and the slice solved from the start.
    #[test]
    fn resumed_at_every_ply_gets_the_same_values() {
        let mut map = SliceMap::new();
        let key = SliceKey::pawnless("KRvKN".parse().unwrap());
        solve_into(key, &mut map);
        let whole = bits_values(&key, &map, 2);
        let dir = tempfile::tempdir().unwrap();
        let stop = AtomicBool::new(false);
        let c = Checkpoints {
            dir: dir.path(),
            every: std::time::Duration::ZERO,
            stop: &stop,
        };
        let (resumed, runs) = resumed_at_every_ply(&key, &map, &c, None);
        // KRvKN: White's wins take 40-odd plies, Black's a few.
        assert!(runs >= 40, "only {runs} runs");
        assert!(resumed == whole, "resumed {runs} times, other values");
        c.remove(&key);
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert!(left.is_empty(), "left behind: {left:?}");

        // A damaged checkpoint (one byte changed) is discarded: solved from the start.
        stop.store(false, Relaxed);
        let c = Checkpoints {
            every: std::time::Duration::from_secs(3600),
            ..c
        };
        std::fs::write(
            c.checkpoint_path(&key),
            b"ZMCKBIT\x01 not a checkpoint at all, 32 bytes and more",
        )
        .unwrap();
        let mut values = Vec::new();
        solve_slice_bits(&key, &map, 2, None, Some(&c), &mut |v| {
            values.extend_from_slice(v);
            Ok(())
        })
        .unwrap();
        assert!(values == whole, "after a damaged checkpoint");
    }
}
