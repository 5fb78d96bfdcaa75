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

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use tracing::{debug, info};
use zermelo_chess::slice::SliceKey;
use zermelo_chess::value::{DRAW, ILLEGAL, MAX_PLIES};
use zermelo_chess::{Bitboard, Color};

use super::dtm_log::{for_each_offset, DtmLog, SegmentEncoder, SEG_INDICES};
use super::geometry::Geometry;
use super::par::for_each_chunk;
use super::retrograde::{exits, init_range, line_legal, open_squares, unmove_lines, Context};
use super::state::{InitTarget, SPILL_FROM, S_DRAW, S_NO_LOSS};
use super::{SolveError, Successors};

/// Bytes the compact solver holds for a slice of `positions` positions, apart from its threads'
/// buffers: three bits a position.
pub fn bits_state_bytes(positions: u64) -> u64 {
    3 * positions.div_ceil(64) * 8
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
/// `stopped` is asked between plies: a stop ends the solve with [`SolveError::Interrupted`]
/// (nothing is kept).
pub fn solve_slice_bits(
    key: &SliceKey,
    succ: &dyn Successors,
    threads: usize,
    stopped: &(dyn Fn() -> bool + Sync),
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
    let bits = Bits {
        blocked: ones(n / 64),
        skip: ones(n / 64),
        front: super::memory::atomic_u64s(n / 64),
        per_side: g.ix.per_side() as usize,
    };
    let pending = [Pending::default(), Pending::default()];
    init(&ctx, &bits, &pending, threads, stopped)?;
    let init_seconds = start.elapsed().as_secs_f64();
    debug!(slice = %key, seconds = init_seconds, "compact init done");
    let mut logs = Vec::with_capacity(2);
    for attacker in [Color::White, Color::Black] {
        let mut log = DtmLog::new(n >= SPILL_FROM);
        phase(&ctx, &bits, attacker, &pending, &mut log, threads, stopped, start)?;
        logs.push(log);
    }
    let Bits { blocked, skip, front, .. } = bits;
    drop((blocked, skip, front));
    debug!(
        slice = %key,
        log_bytes = logs.iter().map(DtmLog::bytes).sum::<u64>(),
        seconds = start.elapsed().as_secs_f64(),
        "compact solve done"
    );
    write_values(&g, l, &logs, threads, sink)
}

/// A bitmap of `words` words, every bit set.
fn ones(words: usize) -> Vec<AtomicU64> {
    (0..words).map(|_| AtomicU64::new(!0)).collect()
}

/// The three bitmaps (see the module's notes), a bit an index, a line a word.
struct Bits {
    blocked: Vec<AtomicU64>,
    skip: Vec<AtomicU64>,
    front: Vec<AtomicU64>,
    per_side: usize,
}

impl Bits {
    /// Who is to move at index `i`.
    fn mover(&self, i: usize) -> Color {
        if i < self.per_side {
            Color::White
        } else {
            Color::Black
        }
    }
}

/// Lists of positions by ply, for one phase: each ply's in an unnamed temporary file of frames
/// (segment, encoded offsets), taken whole when the passes reach it.
#[derive(Default)]
struct Pending {
    plies: Mutex<BTreeMap<u32, File>>,
}

impl Pending {
    /// Adds the positions of segment `s` encoded in `encoded` ([`SegmentEncoder`]) to ply `ply`.
    fn add(&self, ply: u32, s: usize, encoded: &[u8]) -> std::io::Result<()> {
        let mut plies = self.plies.lock().unwrap_or_else(|e| e.into_inner());
        let file = match plies.entry(ply) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => e.insert(tempfile::tempfile()?),
        };
        let mut frame = Vec::with_capacity(12 + encoded.len());
        frame.extend_from_slice(&(s as u64).to_le_bytes());
        frame.extend_from_slice(&(encoded.len() as u32).to_le_bytes());
        frame.extend_from_slice(encoded);
        file.write_all(&frame)
    }

    /// The largest ply listed.
    fn last(&self) -> Option<u32> {
        let plies = self.plies.lock().unwrap_or_else(|e| e.into_inner());
        plies.keys().next_back().copied()
    }

    /// Takes the frames of ply `ply`: `(segment, encoded offsets)`.
    fn take(&self, ply: u32) -> std::io::Result<Vec<(usize, Vec<u8>)>> {
        let file = self.plies.lock().unwrap_or_else(|e| e.into_inner()).remove(&ply);
        let Some(mut file) = file else {
            return Ok(Vec::new());
        };
        file.seek(SeekFrom::Start(0))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let mut frames = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let s = u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes")) as usize;
            let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().expect("4 bytes")) as usize;
            frames.push((s, bytes[at + 12..at + 12 + len].to_vec()));
            at += 12 + len;
        }
        Ok(frames)
    }
}

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
            init_range(ctx, &target, s * SEG_INDICES..((s + 1) * SEG_INDICES).min(n))?;
            target.lister.flush()?;
        }
        Ok(())
    })
}

/// The passes of the phase of `attacker`, its plies recorded in `log`.
#[allow(clippy::too_many_arguments)]
fn phase(
    ctx: &Context<'_>,
    bits: &Bits,
    attacker: Color,
    pendings: &[Pending; 2],
    log: &mut DtmLog,
    threads: usize,
    stopped: &(dyn Fn() -> bool + Sync),
    start: std::time::Instant,
) -> Result<(), SolveError> {
    let g = ctx.g;
    let key = &ctx.key;
    let pending = &pendings[attacker.index()];
    let l = g.line_man().expect("by lines");
    let n = bits.blocked.len() * 64;
    let segments = n.div_ceil(SEG_INDICES);
    let horizon = AtomicU32::new(pending.last().unwrap_or(0));
    // The defender's half, where the verification works.
    let y_words = {
        let y = attacker.other().index() * bits.per_side;
        y / 64..(y + bits.per_side) / 64
    };
    let mut plies = 0u32;
    while plies <= horizon.load(Relaxed) {
        if plies >= MAX_PLIES as u32 - 1 {
            return Err(SolveError::TooDeep(*key));
        }
        if stopped() {
            return Err(SolveError::Interrupted);
        }
        let won_here = plies % 2 == 1;
        // 1. The positions listed for this ply join the front: a win not yet found (the
        // attacker's), or a loss (the defender's, already in `skip`).
        let frames = pending.take(plies).map_err(SolveError::Scratch)?;
        for_each_chunk(frames.len(), 1, threads, |range| {
            for (s, encoded) in &frames[range] {
                let first = s * SEG_INDICES;
                let whole = for_each_offset(encoded, |o| {
                    let i = first + o;
                    let (w, bit) = (i / 64, 1u64 << (i % 64));
                    if !won_here || bits.blocked[w].fetch_or(bit, Relaxed) & bit == 0 {
                        bits.front[w].fetch_or(bit, Relaxed);
                    }
                });
                debug_assert!(whole, "this solver's lists are well formed");
            }
            Ok::<(), SolveError>(())
        })?;
        drop(frames);
        // 2. The front is the frontier of this ply: recorded in the log, cleared.
        log.begin_ply(segments);
        let frontier = AtomicU64::new(0);
        for_each_chunk(segments, 1, threads, |range| {
            for s in range {
                let first = s * SEG_INDICES;
                let end = (first + SEG_INDICES).min(n);
                let mut enc = SegmentEncoder::new(end - first);
                let mut count = 0u64;
                for w in first / 64..end / 64 {
                    let mut m = bits.front[w].load(Relaxed);
                    if m == 0 {
                        continue;
                    }
                    bits.front[w].store(0, Relaxed);
                    count += u64::from(m.count_ones());
                    while m != 0 {
                        enc.push(w * 64 + m.trailing_zeros() as usize - first);
                        m &= m - 1;
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
            for_each_chunk(segments, 1, threads, |range| {
                let mut encoded = Vec::new();
                let mut any = false;
                for s in range {
                    log.read_segment(plies, s, &mut encoded)
                        .map_err(SolveError::Scratch)?;
                    if encoded.is_empty() {
                        continue;
                    }
                    unmove_lines(g, l, s * SEG_INDICES, &encoded, |p, squares| {
                        let w = p as usize / 64;
                        if won_here {
                            let new = squares.0 & !bits.skip[w].load(Relaxed) & !bits.front[w].load(Relaxed);
                            if new != 0 {
                                bits.front[w].fetch_or(new, Relaxed);
                            }
                        } else {
                            let new = squares.0 & !bits.blocked[w].load(Relaxed);
                            if new != 0 {
                                let new = new & !bits.blocked[w].fetch_or(new, Relaxed);
                                if new != 0 {
                                    bits.front[w].fetch_or(new, Relaxed);
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
            for_each_chunk(last_seg - first_seg, 1, threads, |range| {
                let mut lister = Lister::new(pendings);
                let mut kept = false;
                for s in range {
                    let s = first_seg + s;
                    lister.begin(s, n);
                    let words = (s * SEG_INDICES / 64).max(y_words.start)..(((s + 1) * SEG_INDICES) / 64).min(y_words.end);
                    for w in words {
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
        plies += 1;
    }
    Ok(())
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
    let n = g.ix.size() as usize;
    let segments = n.div_ceil(SEG_INDICES);
    let batch = threads.max(1);
    for first in (0..segments).step_by(batch) {
        let last = (first + batch).min(segments);
        let out: Vec<Mutex<Vec<u16>>> = (first..last).map(|_| Mutex::default()).collect();
        for_each_chunk(last - first, 1, threads, |range| {
            for k in range {
                let s = first + k;
                let seg = s * SEG_INDICES..((s + 1) * SEG_INDICES).min(n);
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
                *out[k].lock().expect("segment lock") = values;
            }
            Ok::<(), SolveError>(())
        })?;
        for values in out {
            sink(&values.into_inner().expect("segment lock"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solver::retrograde::solve_slice;
    use crate::solver::retrograde::tests::solve_into;
    use crate::tables::SliceMap;
    use zermelo_chess::index::SliceIndexer;

    fn bits_values(key: &SliceKey, map: &SliceMap, threads: usize) -> Vec<u16> {
        let mut values = Vec::new();
        solve_slice_bits(key, map, threads, &|| false, &mut |v| {
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
        for name in [
            "KQvK", "KRvK", "KNvK", "KBvK", "KQvKR", "KRvKN", "KRvKB", "KBNvK", "KQvKN", "KNNvK", "KNNvKQ", "KRNvKQ",
        ] {
            let key = SliceKey::pawnless(name.parse().unwrap());
            solve_into(key, &mut map);
            let expected = solve_slice(&key, &map, 2).unwrap();
            if bits_solvable(&key) {
                for threads in [1, 2] {
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
}
