//! The state of a slice being solved: a byte per index (the codes below) and the summaries the
//! passes keep beside it. See [`super::retrograde`] for how the passes use it and
//! [`super::checkpoint`] for how it is saved between two of them.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Mutex;

use zermelo_chess::Bitboard;

use super::geometry::Geometry;
use super::memory::{atomic_u64s, atomic_u8s, equal_mask};
use super::paging::{Big, Mapped, Pager, Paging, Reach, BYTE_FILES};
use super::par::for_each_chunk;
use super::split::Own;
use super::SolveError;

// The state byte of an index.
/// Not a position (left so by init).
pub(super) const S_ILLEGAL: u8 = 0;
/// A draw, final.
pub(super) const S_DRAW: u8 = 1;
/// Won for the side to move, final (its ply is in the log).
pub(super) const S_WON: u8 = 2;
/// Lost for the side to move, final (its ply is in the log).
pub(super) const S_LOST: u8 = 3;
/// Decided at the ply after the pass being run: the next frontier.
pub(super) const S_NEXT: u8 = 5;
/// `8..=11`: undecided and may still be lost, with the two flags below.
pub(super) const S_MAY_LOSE: u8 = 8;
/// Flag of [`S_MAY_LOSE`]: a move of it was found to lead to a win for the opponent in this
/// ply; it is verified at the end of the ply.
pub(super) const F_CHANGED: u8 = 1;
/// Flag of [`S_MAY_LOSE`]: it has a losing exit (looked up again if it is lost).
pub(super) const F_LOSS_EXIT: u8 = 2;
/// `12`: undecided and cannot be lost (an exit holds the draw), no winning exit.
/// `13..=126`: the same with a winning exit in `2 (code - 12) - 1` plies: it wins then unless
/// it wins faster inside. `127`: the same, the exit's ply in the side map.
pub(super) const S_NO_LOSS: u8 = 12;
pub(super) const S_WIN_EXIT_FAR: u8 = 127;
/// `128..=254`: decided at ply `code - 128` (won if odd, lost if even), not yet reached by the
/// passes. `255`: the same, the ply in the side map.
pub(super) const S_LATER: u8 = 128;
pub(super) const S_LATER_FAR: u8 = 255;
/// Plies below this are held in the byte of a position decided later; the others in the side
/// map. This crate's tests make it small, so that they go through the side map too.
pub(super) const LATER_DIRECT: u32 = if cfg!(test) {
    6
} else {
    (S_LATER_FAR - S_LATER) as u32
};
/// The same for winning exits, counted in exit codes (`(plies + 1) / 2`).
pub(super) const WIN_EXIT_DIRECT: u32 = if cfg!(test) {
    3
} else {
    (S_WIN_EXIT_FAR - S_NO_LOSS) as u32
};

/// True if the position is undecided (may lose, or cannot lose).
#[inline]
pub(super) fn undecided(v: u8) -> bool {
    (S_MAY_LOSE..S_LATER).contains(&v)
}

#[inline]
pub(super) fn may_lose(v: u8) -> bool {
    v & !3 == S_MAY_LOSE
}

/// The final state of a position decided at `plies`.
#[inline]
pub(super) fn decided(plies: u32) -> u8 {
    if plies % 2 == 1 {
        S_WON
    } else {
        S_LOST
    }
}

/// Indices per chunk of the per-chunk summaries.
pub(super) const CHUNK_SHIFT: u32 = 12;
/// Distances a chunk's pending mask can flag; beyond, the whole slice is scanned at that distance.
pub(super) const MASK_LEVELS: u32 = 512;
/// Indices per block of [`State::fine`].
pub(super) const FINE_SHIFT: u32 = 9;
// The scan keeps a chunk's fine blocks as the bits of a word.
const _: () = assert!(CHUNK_SHIFT - FINE_SHIFT <= 6);
/// Slices of this many indices or more keep their log of plies in a temporary file (in this
/// crate's tests, most of those they solve); a smaller slice's log, at most a byte per index,
/// is in memory.
pub const SPILL_FROM: usize = if cfg!(test) { 1 << 16 } else { 1 << 24 };
/// Shards of the side map of plies too large for a byte.
pub(super) const FAR_SHARDS: usize = 64;

/// The state of a slice being solved, with the summaries the passes need.
pub(super) struct State {
    /// For a paged state (see [`super::paging`]): what keeps [`State::bytes`] and
    /// [`State::won`] within the budget. `None` when they are in memory.
    pub(super) pager: Option<Pager>,
    pub(super) bytes: Big<AtomicU8>,
    /// Per chunk of 2^CHUNK_SHIFT indices, a bit per distance at which some index of the chunk
    /// is decided other than through the pass before (mates, positions with only exits,
    /// winning exits, losses slowed by an exit): those chunks are scanned at that distance.
    pub(super) pending: Vec<[AtomicU64; (MASK_LEVELS / 64) as usize]>,
    /// Distances of MASK_LEVELS or more that have pending indices (rare: scanned whole).
    pub(super) far_pending: Mutex<BTreeSet<u32>>,
    /// In slices with pawns solved by lines, the pending masks again, finer: per block of
    /// 2^FINE_SHIFT indices, bit `d % 64` set if some index of the block waits for distance
    /// `d`. The scan of a flagged chunk skips the bytes of its blocks whose bit is clear (in
    /// KRPvKR, half of them). Empty otherwise.
    pub(super) fine: Vec<AtomicU64>,
    /// Plies of [`S_WIN_EXIT_FAR`] and [`S_LATER_FAR`] indices, sharded by chunk.
    pub(super) far: Vec<Mutex<HashMap<u64, u32>>>,
    /// Per chunk: 1 if it holds a [`F_CHANGED`] index to verify.
    pub(super) changed: Vec<AtomicU8>,
    /// Per chunk: 1 if it holds an [`S_NEXT`] index.
    pub(super) next: Vec<AtomicU8>,
    /// Largest distance assigned so far (final or pending): the passes run up to it.
    pub(super) horizon: AtomicU32,
    /// For slices solved by lines (with a [`Geometry::line_man`]), a bit per index: set if the
    /// index is [`S_WON`] or [`S_ILLEGAL`], a word per line (and, in slices without a
    /// [`State::quiet`] bitmap, during the un-moves after a win from a large frontier, if it
    /// was marked [`F_CHANGED`] then: cleared again before the verification). The
    /// verification reads a successor line's word instead of its bytes, and the un-moves skip
    /// such predecessors, which no mark can change. Set after init (illegal) and by the
    /// frontier scans (won), each word by the one thread that owns its line then; read in the
    /// other phases. Empty otherwise, and during init, which does not read it: allocated after
    /// it ([`State::track_won`]), so that init's successor slices and the bitmap are not in
    /// memory at once.
    pub(super) won: Big<AtomicU64>,
    /// For slices with pawns solved by lines, a bit per index, a word per line: set only if a
    /// win among the index's successors changes nothing (it is not [`may_lose`], or it is
    /// already [`F_CHANGED`]), so that the un-moves from a won frontier skip it before touching
    /// its byte (most of their predecessors: those that cannot lose, those already changed).
    /// A hint: a clear bit only costs that read. Bits are set after init, by the frontier
    /// scans, by verification (each word by the thread that owns its line then) and by the
    /// marks of changed positions, from any thread, as a plain load and store: two threads
    /// storing into one word may lose one's bit, never set a bit that should be clear (no bit
    /// is cleared in that phase). Cleared by verification when it clears [`F_CHANGED`]. Empty
    /// otherwise: for pawnless slices, whose tables are large, the memory is not spent.
    pub(super) quiet: Vec<AtomicU64>,
    /// For slices that keep [`State::quiet`], the positions a win among their successors
    /// changed in the pass being run, in place of [`F_CHANGED`] (never set in their bytes): a
    /// bit per index, a word per line, one bitmap per thread, each written only by its thread in
    /// the un-moves (plain loads and stores, no bit lost), joined and cleared by the
    /// verification, each word by the thread that owns its line. A bit is set only where
    /// [`State::quiet`]'s is clear, so only for a position that may lose (a quiet bit lost by
    /// two threads storing into one word is one set in that same phase, for a position already
    /// changed).
    ///
    /// The same bitmaps hold, between a pass's un-moves or verification and the next pass's
    /// scan, the positions set [`S_NEXT`] (then no bit is a changed position's): set by the
    /// un-moves after a loss, each thread in its own bitmap, and by the verification, in the
    /// first bitmap, by the thread that owns the line; taken and cleared by the scan, which
    /// finds them there instead of in the bytes, and leaves their bytes [`S_NEXT`] (nothing
    /// tells that from [`S_WON`] or [`S_LOST`] in such a slice: the won and quiet bitmaps do).
    /// Empty otherwise.
    pub(super) changed_bits: Vec<Vec<AtomicU64>>,
}

impl State {
    /// The state of the slice of `g` before its init: with [`State::fine`] masks if it has
    /// pawns and is solved by lines.
    pub(super) fn of(g: &Geometry) -> State {
        State::new(g.ix.size() as usize, !g.pawnless && g.line_man().is_some())
    }

    /// The state of `n` indices, all [`S_ILLEGAL`] (0), with no [`State::won`] bitmap yet,
    /// and with [`State::fine`] masks if `fine`.
    pub(super) fn new(n: usize, fine: bool) -> State {
        State::with_bytes(n, fine, Big::heap(atomic_u8s(n)), None)
    }

    /// [`State::of`], paged by `paging` if given: its bytes (and its won bitmap, once made) in
    /// files of `paging.dir`, at most `paging.resident` bytes of them resident; `only` as
    /// [`Pager::new`] takes it (the K-slices a part of the slice touches).
    pub(super) fn of_paged(
        g: &Geometry,
        paging: Option<&Paging>,
        only: Option<Vec<u32>>,
    ) -> Result<State, SolveError> {
        let Some(paging) = paging else {
            return Ok(State::of(g));
        };
        let n = g.ix.size() as usize;
        let pager = Pager::new(&g.ix, paging, BYTE_FILES, only);
        // SAFETY: zero is a valid AtomicU8, at any alignment.
        let bytes =
            unsafe { Mapped::zeroed(&paging.dir, "state", n, pager.huge()) }.map_err(SolveError::Scratch)?;
        pager.add(&bytes, 1, 1);
        let st = State::with_bytes(
            n,
            !g.pawnless && g.line_man().is_some(),
            Big::mapped(bytes),
            Some(pager),
        );
        Ok(st)
    }

    fn with_bytes(n: usize, fine: bool, bytes: Big<AtomicU8>, pager: Option<Pager>) -> State {
        let chunks = n.div_ceil(1 << CHUNK_SHIFT);
        let flags = || (0..chunks).map(|_| AtomicU8::new(0)).collect();
        State {
            pager,
            bytes,
            next: flags(),
            pending: (0..chunks).map(|_| Default::default()).collect(),
            far_pending: Default::default(),
            fine: if fine {
                atomic_u64s(n.div_ceil(1 << FINE_SHIFT))
            } else {
                Vec::new()
            },
            far: (0..FAR_SHARDS).map(|_| Default::default()).collect(),
            changed: flags(),
            horizon: AtomicU32::new(0),
            won: Big::default(),
            quiet: Vec::new(),
            changed_bits: Vec::new(),
        }
    }

    /// After init, for a slice solved by lines: the [`State::won`] bitmap, its bits set for the
    /// illegal indices, a line per word; and if `quiet`, the [`State::quiet`] bitmap, its bits
    /// set for the indices that may not lose, and with `changed_bits` the
    /// [`State::changed_bits`] of `threads`.
    pub(super) fn track_won(
        &mut self,
        threads: usize,
        quiet: bool,
        changed_bits: bool,
        split: &impl Own,
    ) -> Result<(), SolveError> {
        let n = self.bytes.len();
        self.alloc_won()?;
        if quiet {
            self.quiet = atomic_u64s(n / 64);
            if changed_bits {
                self.changed_bits = (0..threads.max(1)).map(|_| atomic_u64s(n / 64)).collect();
            }
        }
        let st = &*self;
        // No byte is written meanwhile: the lines are tested 64 bytes at a time.
        let may_lose_codes = [S_MAY_LOSE, S_MAY_LOSE + 1, S_MAY_LOSE + 2, S_MAY_LOSE + 3];
        debug_assert!((0..=255).all(|v| may_lose(v) == may_lose_codes.contains(&v)));
        for_each_chunk(n / 64, 1 << 12, threads, |words| {
            st.mark(words.start * 64..words.end * 64, Reach::Own);
            // With `split`, the words of its part only (the others come from their parts).
            for w in words.filter(|w| split.owns(w * 64)) {
                st.won[w].store(equal_mask(&st.bytes, w * 64, [S_ILLEGAL]), Relaxed);
                if quiet {
                    st.quiet[w].store(!equal_mask(&st.bytes, w * 64, may_lose_codes), Relaxed);
                }
            }
            Ok::<(), SolveError>(())
        })
    }

    /// Makes the [`State::won`] bitmap, all clear: in a file beside the bytes if they are paged.
    pub(super) fn alloc_won(&mut self) -> Result<(), SolveError> {
        let words = self.bytes.len() / 64;
        self.won = match &self.pager {
            Some(pager) if self.bytes.is_mapped() => {
                // SAFETY: zero is a valid AtomicU64, and the map starts on a page.
                let won = unsafe { Mapped::zeroed(pager.dir(), "won", words, pager.huge()) }
                    .map_err(SolveError::Scratch)?;
                pager.add(&won, 1, 8);
                Big::mapped(won)
            }
            _ => Big::heap(atomic_u64s(words)),
        };
        Ok(())
    }

    /// Marks the K-slices a pass `reach` touches for `range`, if the state is paged.
    #[inline]
    pub(super) fn mark(&self, range: std::ops::Range<usize>, reach: Reach) {
        if let Some(p) = &self.pager {
            p.mark(range, reach);
        }
    }

    /// The order of the `units` units of `unit` indices of a pass `reach`: `None` (ascending)
    /// unless the state is paged ([`Pager::walk`]).
    pub(super) fn walk(&self, units: usize, unit: usize, reach: Reach) -> Option<Vec<u32>> {
        self.pager.as_ref().map(|p| p.walk(units, unit, reach))
    }

    /// Word `w` of every thread's bitmap of [`State::changed_bits`], joined, the words cleared:
    /// only by the thread that owns its line.
    #[inline]
    /// Bitmaps of [`State::changed_bits`] for `threads` threads at least, if the state keeps
    /// them: new ones added clear, between passes (the positions the others hold stay there,
    /// where the next scan takes them from).
    pub(super) fn changed_bits_for(&mut self, threads: usize) {
        let n = self.bytes.len();
        if !self.changed_bits.is_empty() {
            while self.changed_bits.len() < threads {
                self.changed_bits.push(atomic_u64s(n / 64));
            }
        }
    }

    pub(super) fn take_bits(&self, w: usize) -> u64 {
        let mut joined = 0;
        for bits in &self.changed_bits {
            let b = bits[w].load(Relaxed);
            if b != 0 {
                joined |= b;
                bits[w].store(0, Relaxed);
            }
        }
        joined
    }

    /// Sets the bits `bits` of [`State::quiet`] in the word of index `i`, if it is kept.
    #[inline]
    pub(super) fn set_quiet(&self, i: usize, bits: u64) {
        if let Some(w) = self.quiet.get(i / 64) {
            w.store(w.load(Relaxed) | bits, Relaxed);
        }
    }

    /// Clears the bits `bits` of [`State::quiet`] in the word of index `i`, if it is kept: only
    /// by the thread that owns its line.
    #[inline]
    pub(super) fn clear_quiet(&self, i: usize, bits: u64) {
        if let Some(w) = self.quiet.get(i / 64) {
            w.store(w.load(Relaxed) & !bits, Relaxed);
        }
    }

    /// The bits of [`State::won`] of the line from `base`.
    #[inline]
    pub(super) fn won_line(&self, base: u64) -> Bitboard {
        Bitboard(self.won[(base / 64) as usize].load(Relaxed))
    }

    /// Sets the bits `bits` of [`State::won`] in the word of index `i`: only by the thread that
    /// owns its line.
    #[inline]
    pub(super) fn set_won_bits(&self, i: usize, bits: u64) {
        let w = &self.won[i / 64];
        w.store(w.load(Relaxed) | bits, Relaxed);
    }

    #[inline]
    pub(super) fn get(&self, i: usize) -> u8 {
        self.bytes[i].load(Relaxed)
    }

    #[inline]
    pub(super) fn set(&self, i: usize, v: u8) {
        self.bytes[i].store(v, Relaxed);
    }

    pub(super) fn far_shard(&self, i: usize) -> &Mutex<HashMap<u64, u32>> {
        &self.far[(i >> CHUNK_SHIFT) % FAR_SHARDS]
    }

    /// The ply a `*_FAR` index waits for.
    pub(super) fn far_ply(&self, i: usize) -> u32 {
        *self
            .far_shard(i)
            .lock()
            .expect("far lock")
            .get(&(i as u64))
            .expect("a far index has its ply")
    }

    /// Sets a position decided in the pass of `plies - 1`: it joins the next frontier. Its bit
    /// is set in `bits` too, if that is one of the [`State::changed_bits`] (empty: none), which
    /// only this thread writes in this phase: the next scan takes them from there.
    #[inline]
    pub(super) fn set_next(&self, i: usize, plies: u32, bits: &[AtomicU64]) {
        self.set(i, S_NEXT);
        if let Some(w) = bits.get(i / 64) {
            w.store(w.load(Relaxed) | 1 << (i % 64), Relaxed);
        }
        // Stores to a shared line are dear: skip them when they would change nothing.
        let flag = &self.next[i >> CHUNK_SHIFT];
        if flag.load(Relaxed) == 0 {
            flag.store(1, Relaxed);
        }
        if self.horizon.load(Relaxed) < plies {
            self.horizon.fetch_max(plies, Relaxed);
        }
    }

    /// Flags index `i` to be looked at when the passes reach distance `plies`.
    #[inline(always)]
    pub(super) fn set_pending(&self, i: usize, plies: u32) {
        if let Some(word) = self.fine.get(i >> FINE_SHIFT) {
            let bit = 1u64 << (plies % 64);
            if word.load(Relaxed) & bit == 0 {
                word.fetch_or(bit, Relaxed);
            }
        }
        if plies < MASK_LEVELS {
            let word = &self.pending[i >> CHUNK_SHIFT][(plies / 64) as usize];
            let bit = 1u64 << (plies % 64);
            if word.load(Relaxed) & bit == 0 {
                word.fetch_or(bit, Relaxed);
            }
        } else {
            self.far_pending.lock().expect("far pending lock").insert(plies);
        }
        if self.horizon.load(Relaxed) < plies {
            self.horizon.fetch_max(plies, Relaxed);
        }
    }

    /// Sets a position decided at `plies`, a ply the passes have not reached: it joins the
    /// frontier when they do.
    #[inline]
    pub(super) fn set_later(&self, i: usize, plies: u32) {
        if plies < LATER_DIRECT {
            self.set(i, S_LATER + plies as u8);
        } else {
            self.set_far(i, S_LATER_FAR, plies);
        }
        self.set_pending(i, plies);
    }

    /// Sets code `far` at `i`, its ply kept in the side map.
    pub(super) fn set_far(&self, i: usize, far: u8, plies: u32) {
        self.far_shard(i)
            .lock()
            .expect("far lock")
            .insert(i as u64, plies);
        self.set(i, far);
    }

    /// Sets an undecided position that cannot be lost and has a winning exit in `plies` (odd).
    #[inline]
    pub(super) fn set_win_exit(&self, i: usize, plies: u32) {
        let code = plies.div_ceil(2);
        if code < WIN_EXIT_DIRECT {
            self.set(i, S_NO_LOSS + code as u8);
        } else {
            self.set_far(i, S_WIN_EXIT_FAR, plies);
        }
        self.set_pending(i, plies);
    }

    /// The ply at which an index waiting in the pending masks is decided, if it still waits:
    /// a position decided later, or a winning exit not overtaken.
    #[inline]
    pub(super) fn waits_for(&self, i: usize, v: u8) -> Option<u32> {
        match v {
            S_LATER_FAR | S_WIN_EXIT_FAR => Some(self.far_ply(i)),
            S_LATER.. => Some((v - S_LATER) as u32),
            13..S_WIN_EXIT_FAR => Some(2 * (v - S_NO_LOSS) as u32 - 1),
            _ => None,
        }
    }
}

/// What init writes: the state of each legal position it looks at, through these three calls
/// only (an illegal index is never named). [`State`] takes them as its bytes; the compact
/// solver ([`super::bits`]) as its bitmaps and lists of plies.
pub(super) trait InitTarget {
    /// Sets one of [`S_DRAW`], [`S_MAY_LOSE`] (with [`F_LOSS_EXIT`] or not) and [`S_NO_LOSS`].
    fn set(&self, i: usize, v: u8);
    /// A position decided at `plies` (won if odd, lost if even), whatever the passes find.
    fn set_later(&self, i: usize, plies: u32);
    /// A position that cannot be lost and wins by an exit in `plies` (odd) unless it wins
    /// sooner inside the slice.
    fn set_win_exit(&self, i: usize, plies: u32);
}

impl InitTarget for State {
    #[inline(always)]
    fn set(&self, i: usize, v: u8) {
        State::set(self, i, v)
    }
    #[inline(always)]
    fn set_later(&self, i: usize, plies: u32) {
        State::set_later(self, i, plies)
    }
    #[inline(always)]
    fn set_win_exit(&self, i: usize, plies: u32) {
        State::set_win_exit(self, i, plies)
    }
}
