//! The slice solver (DESIGN §2): pure and synchronous, one slice against the finished values of
//! its successors.
//!
//! State: **one byte per index** while the slice is solved (the codes below), with per-chunk
//! summaries beside it (about 0.02 bytes per index). The byte says what a position is (illegal,
//! draw, won, lost, in the frontier, undecided, decided later at a known ply), not in how many
//! plies it was decided: that is recorded ply by ply in a [`DtmLog`] from the frontier, and the
//! table's `u16` values (`0` illegal, `1` draw, `2 + n` mate in `n` plies) are written from the
//! bytes and the log at the end, segment by segment, as the bytes are released.
//!
//! 1. *Init*: illegal placements are left at 0; positions that have an exit (a capture, a pawn
//!    move or a promotion) or are in check are looked at move by move (exits played on the
//!    placement and read by index from the successor slices' arrays, mates found); every other
//!    position starts undecided, with no exit.
//! 2. *Retrograde passes*, one per ply `n`, from the positions decided at exactly `n` plies
//!    (the frontier: set final, and recorded in the log, by scanning the chunks flagged for
//!    it; then read back from the log's encoding), by un-moves
//!    computed on the index (no `Position` is built):
//!    * `n` even (lost in `n`): every undecided predecessor wins in `n + 1`;
//!    * `n` odd (won in `n`): every predecessor that may still lose is marked *changed*; then each
//!      changed position is *verified*: if every move inside the slice leads to a position won
//!      for the opponent, it is lost in `n + 1`, or later if its slowest losing exit is later
//!      (looked up again then). No move counters are kept.
//!
//!    A position decided at a later ply than the pass that finds it (a winning exit, a position
//!    with only exits, a loss slowed by an exit) holds that ply in its byte, and its chunk is
//!    flagged for that ply: the pass of that ply scans the flagged chunks and moves it into the
//!    frontier. A ply too large for the byte is kept in a side map.
//! 3. *Finish*: what is still undecided is a draw.
//!
//! **Lines of 64.** When the lowest field of the index is a lone man (not a king, no like man:
//! [`Geometry::line_man`]), the 64 indices from a multiple of 64 differ only in its square: a
//! *line*. The passes then work a line at a time: the frontier positions of a line are
//! un-moved together (each move of another man once, for all of them, onto one predecessor line
//! with the squares of the line man it applies to; the line man's own un-moves by a fill of
//! its squares), and the changed positions of a line are verified together (each move once, on
//! the line it leads to). Beside the bytes such a slice keeps a bit per index, set when the
//! index is won or illegal (`State::won`): verification reads a successor line's word instead
//! of its bytes, and un-moves skip won predecessors before touching their bytes. A slice with
//! pawns keeps a second bit per index (`State::quiet`), set where a win among the successors
//! changes nothing: the un-moves from a won frontier skip most of their predecessors by it (in
//! KRPvKR, those that cannot lose and those already changed: seven in ten). Init looks at
//! a line at once too: legality and check as masks of the line man's squares, and the plain
//! pawn pushes of the side to move read as one line of the pushed slice (`init_line`). The
//! line forms are tested against the index-by-index forms in `geometry` and in this file's
//! tests; other slices go index by index.
//!
//! The result is a pure function of the slice and its successors: every phase reads only states
//! final before it and writes each index from one rule, so the bytes do not depend on the
//! number of threads or the order of the work. Threads share the state through relaxed atomic
//! loads and stores (plain moves on x86); the only locked operation sets a chunk's bit for a
//! later ply, when it is not set yet. The scans for the frontier and for changed positions read
//! 16 bytes at a time (not as atomics), over chunks whose bytes only the scanning thread writes
//! during that phase (see `memory::for_each_equal`), so the wide reads never race a write.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use tracing::{debug, info, warn};
use zermelo_chess::attacks::{attacks, attacks_from_set, between, pawn_attacks};
use zermelo_chess::index::{
    king_pair_field, pawnless_symmetry, SliceIndexer, KING_PAIRS_PAWNFUL, SYMMETRY_TABLE,
};
use zermelo_chess::slice::SliceKey;
use zermelo_chess::value::{Value, DRAW, ILLEGAL, MAX_PLIES};
use zermelo_chess::{Bitboard, Color, Square};

use super::checkpoint::{self, Checkpoints, Progress};
use super::dtm_log::{for_each_offset, for_each_word, DtmLog, SegmentEncoder, SEG_INDICES};
use super::geometry::{kings, unmap_bb, Decoded, Geometry, NO_MAN};
use super::memory::{
    equal_mask, for_each_equal, for_each_equal_block, prefetch, release_bytes, Deferred, DeferredLines,
    DeferredWords,
};
use super::paging::{Paging, Reach};
use super::par::{for_each_chunk, for_each_chunk_lending, for_each_chunk_on, Lent};
use super::pawn_exits::{CaptureMap, CaptureTarget, ExitSet, Exits, LinePushes, PawnExits};
use super::split::{Own, Whole, POST_LINES};
use super::stage::Stage;
use super::state::{
    decided, may_lose, undecided, InitTarget, State, CHUNK_SHIFT, FINE_SHIFT, F_CHANGED, F_LOSS_EXIT,
    LATER_DIRECT, MASK_LEVELS, SPILL_FROM, S_DRAW, S_ILLEGAL, S_LATER, S_LATER_FAR, S_LOST, S_MAY_LOSE,
    S_NEXT, S_NO_LOSS, S_WIN_EXIT_FAR, S_WON, WIN_EXIT_DIRECT,
};
use super::{SliceValuesRef, SolveError, Successors};

/// Where a capture of one man of a pawnless slice leads: the successor slice and how this
/// slice's men map onto its men.
pub(super) struct CaptureExit<'a> {
    /// The successor's values, indexer and how the men go there; `None` when only the kings
    /// remain (a draw).
    target: Option<(SliceValuesRef<'a>, SliceIndexer, CaptureMap)>,
}

/// Where the capture of `victim` leads in a pawnless slice whose capture exits are `captures`
/// ([`capture_exits`]), for [`line_exits_by_captures`]: a man (`Ok`; never a king) or a pawn
/// (`Err`: a pawnless slice has none).
pub(super) fn pawnless_target<'s, 'a>(
    captures: &'s [Option<CaptureExit<'a>>],
    victim: Result<usize, Square>,
) -> CaptureTarget<'s, 'a> {
    match victim {
        Ok(m) => match &captures[m].as_ref().expect("a man that is not a king").target {
            None => CaptureTarget::Draw,
            Some((values, six, map)) => CaptureTarget::Read(*values, six, map),
        },
        Err(_) => CaptureTarget::Unknown,
    }
}

/// The exits by capture of every man of a pawnless slice that is not a king (indexed like
/// [`Geometry::men`]), or `None` if the slice has pawns or a successor's values are not
/// available as an array (then exits are looked at through positions).
fn capture_exits<'a>(
    g: &Geometry,
    key: &SliceKey,
    succ: &'a dyn Successors,
) -> Option<Vec<Option<CaptureExit<'a>>>> {
    capture_exits_with(g, key, &|s| succ.slice_values(s))
}

/// [`capture_exits`] with the successors' values from `values` (any metric: what they mean is
/// the reader's, [`ExitSet`]).
pub(super) fn capture_exits_with<'a>(
    g: &Geometry,
    key: &SliceKey,
    values: &dyn Fn(&SliceKey) -> Option<SliceValuesRef<'a>>,
) -> Option<Vec<Option<CaptureExit<'a>>>> {
    if !g.pawnless {
        return None;
    }
    let mut out = Vec::new();
    for m in 0..g.n {
        if g.is_king(m) {
            out.push(None);
            continue;
        }
        let piece = g.men[m];
        let rest = key.material.without(piece.color, piece.role);
        let (stored, flip) = rest.normalized();
        let mut target = None;
        if !rest.is_bare_kings() {
            let skey = SliceKey::pawnless(stored);
            let values = values(&skey)?;
            let six = SliceIndexer::new(skey);
            let map = CaptureMap::new(g, m, flip, false, six.men());
            target = Some((values, six, map));
        }
        out.push(Some(CaptureExit { target }));
    }
    Some(out)
}

/// Solves one slice. `threads` is the number of threads for this slice; the output does not
/// depend on it.
pub fn solve_slice(key: &SliceKey, succ: &dyn Successors, threads: usize) -> Result<Vec<u16>, SolveError> {
    let mut values = Vec::with_capacity(SliceIndexer::new(*key).size() as usize);
    solve_slice_into(key, succ, threads, true, &mut |v| {
        values.extend_from_slice(v);
        Ok(())
    })?;
    Ok(values)
}

/// Solves one slice and hands its values to `sink` in index order, a few million at a time, as
/// they are written from the solver's state: a slice too big to hold as `u16` values goes
/// straight to its table file. The state is released as it is written out. With
/// `changed_bits`, a slice with pawns solved by lines keeps, for each thread, a bitmap of the
/// positions changed in a pass (`State::changed_bits`, an eighth of a byte a position a
/// thread, [`super::thread_bytes`]): faster; without, the flag in their bytes. The values are
/// the same either way.
pub fn solve_slice_into(
    key: &SliceKey,
    succ: &dyn Successors,
    threads: usize,
    changed_bits: bool,
    sink: &mut dyn FnMut(&[u16]) -> Result<(), SolveError>,
) -> Result<(), SolveError> {
    solve_slice_resumable(key, succ, (threads, changed_bits), None, None, None, sink)
}

/// [`solve_slice_into`] with `checkpoints`: the slice's state is written to a checkpoint in
/// their folder at ply boundaries (see [`Checkpoints`]), and a slice that has a checkpoint there
/// is resumed from it instead of solved from the start (a damaged one is discarded with a
/// warning, and the slice solved from the start). The values are the same either way; the
/// caller removes the slice's files ([`Checkpoints::remove`]) once its values are safe.
///
/// With `paging`, the slice's state is paged ([`super::paging`]): in files of its folder, at
/// most its budget resident. The values are the same.
///
/// With `lent`, the slice is one of a run's ([`Lent`]): its passes run on `threads` threads and
/// its share of those the run lends. The values are the same.
pub fn solve_slice_resumable(
    key: &SliceKey,
    succ: &dyn Successors,
    (threads, changed_bits): (usize, bool),
    checkpoints: Option<&Checkpoints<'_>>,
    paging: Option<&Paging>,
    lent: Option<&Lent>,
    sink: &mut dyn FnMut(&[u16]) -> Result<(), SolveError>,
) -> Result<(), SolveError> {
    let g = Geometry::new(key);
    let start = std::time::Instant::now();
    let ctx = Context::new(&g, key, succ);
    if let Some(c) = checkpoints {
        match checkpoint::load(c, key, &g, threads, changed_bits, paging) {
            Ok(Some(resumed)) => {
                info!(
                    slice = %key,
                    plies = resumed.at.plies,
                    bytes = resumed.bytes,
                    seconds = start.elapsed().as_secs_f64(),
                    "resumed from its checkpoint"
                );
                let run = Run {
                    threads,
                    lent,
                    start,
                    checkpoints,
                };
                return solve_passes(&ctx, resumed.state, resumed.log, resumed.at, &run, sink);
            }
            Ok(None) => {}
            Err(why) => {
                warn!(
                    slice = %key,
                    checkpoint = %c.checkpoint_path(key).display(),
                    why,
                    "discarded a damaged checkpoint: the slice is solved from the start"
                );
                c.remove(key);
            }
        }
    }
    let st = State::of_paged(&g, paging, None)?;
    let stopped = || checkpoints.is_some_and(Checkpoints::stopped);
    init_state(&ctx, &st, threads, &Whole, &stopped)?;
    let init_seconds = start.elapsed().as_secs_f64();
    solve_initialised(
        &ctx,
        st,
        (threads, changed_bits),
        (start, init_seconds),
        (checkpoints, lent),
        sink,
    )
}

/// 1. Init of state `st`: illegal placements, exits, mates; with `split`, only the indices of
/// its part. Each index is set on its own, so the order does not change the result. A stop
/// asked for meanwhile (`stopped`) ends it (nothing to checkpoint).
pub(super) fn init_state(
    ctx: &Context<'_>,
    st: &State,
    threads: usize,
    split: &impl Own,
    stopped: &(dyn Fn() -> bool + Sync),
) -> Result<(), SolveError> {
    match promotion_order(ctx.g) {
        None => for_each_chunk(st.bytes.len(), 1 << CHUNK_SHIFT, threads, |range| {
            if stopped() {
                return Err(SolveError::Interrupted);
            }
            if !split.owns(range.start) {
                return Ok(());
            }
            st.mark(range.clone(), Reach::Own);
            init_range(ctx, st, range)
        }),
        Some(units) => {
            debug_assert!(split.owns_all(), "slices with pawns are not split");
            for_each_chunk(units.len(), UNITS_A_THREAD, threads, |range| {
                if stopped() {
                    return Err(SolveError::Interrupted);
                }
                for u in &units[range] {
                    st.mark(u.clone(), Reach::Own);
                    init_range(ctx, st, u.clone())?;
                }
                Ok::<(), SolveError>(())
            })
        }
    }
}

/// True if slices `keys` are worth solving with [`solve_slices_into`]: two or more slices with
/// pawns whose pawns can promote (their inits read the same blocks of the same pawnless
/// tables).
pub fn init_together(keys: &[SliceKey]) -> bool {
    keys.len() >= 2 && keys.iter().all(|k| promotes(&Geometry::new(k)))
}

/// A slice's sink of values for [`solve_slices_into`].
pub type Sink<'s> = &'s mut (dyn FnMut(&[u16]) -> Result<(), SolveError> + Send);

/// Solves the slices `slices` (each with its successors) as [`solve_slice_into`] does each into
/// its sink (the same values), but with their inits together on `threads` threads: unit by unit
/// of their promotion orders ([`promotion_order`]), each unit of every slice in turn. Slices
/// whose pawns promote read, unit by unit, the same blocks of the same pawnless tables (the
/// promoted position keeps its kings): one after the other, each slice read them all again
/// (KRPvKR's four promoting slices decoded each block four times); together a block is decoded
/// once, while it is in the thread's cache, for all of them. Every slice's state is held from the
/// start. Then each slice is solved on: one per thread at once if `by_slice` (and `threads` > 1),
/// else one after the other on every thread.
pub fn solve_slices_into(
    slices: &[(SliceKey, &dyn Successors)],
    threads: usize,
    by_slice: bool,
    changed_bits: bool,
    sinks: Vec<Sink<'_>>,
) -> Result<(), SolveError> {
    assert_eq!(slices.len(), sinks.len(), "a sink per slice");
    let start = std::time::Instant::now();
    let geometries: Vec<Geometry> = slices.iter().map(|(key, _)| Geometry::new(key)).collect();
    let orders: Vec<Vec<std::ops::Range<usize>>> = geometries
        .iter()
        .map(|g| promotion_order(g).expect("slices inited together promote"))
        .collect();
    let states: Vec<State> = geometries.iter().map(State::of).collect();
    let contexts: Vec<Context<'_>> = slices
        .iter()
        .zip(&geometries)
        .map(|((key, succ), g)| Context::new(g, key, *succ))
        .collect();
    let units = orders.iter().map(Vec::len).max().unwrap_or(0);
    for_each_chunk(units, UNITS_A_THREAD, threads, |range| {
        for u in range {
            for ((ctx, st), order) in contexts.iter().zip(&states).zip(&orders) {
                if let Some(unit) = order.get(u) {
                    init_range(ctx, st, unit.clone())?;
                }
            }
        }
        Ok::<(), SolveError>(())
    })?;
    // The init's time is shared out among the slices in their logs.
    let init_seconds = start.elapsed().as_secs_f64() / slices.len().max(1) as f64;
    debug!(
        slices = slices.len(),
        seconds = start.elapsed().as_secs_f64(),
        "slices initialised together"
    );
    let parallel = by_slice && threads > 1 && slices.len() > 1;
    let per_slice = if parallel { 1 } else { threads };
    // Each slice's state and sink, taken by the thread that solves it on.
    let work: Vec<Mutex<Option<(State, Sink<'_>)>>> = states
        .into_iter()
        .zip(sinks)
        .map(|w| Mutex::new(Some(w)))
        .collect();
    // One per thread: a thread with no slice left helps with the passes of the others'.
    let lent = Lent::default();
    let solve = |j: usize| {
        let (st, sink) = work[j]
            .lock()
            .expect("slice lock")
            .take()
            .expect("each slice solved once");
        let now = std::time::Instant::now();
        let started = now
            .checked_sub(std::time::Duration::from_secs_f64(init_seconds))
            .unwrap_or(now);
        lent.solving(|| {
            solve_initialised(
                &contexts[j],
                st,
                (per_slice, changed_bits),
                (started, init_seconds),
                (None, Some(&lent)),
                sink,
            )
        })
    };
    if parallel {
        for_each_chunk_lending(slices.len(), 1, threads, &lent, |range| {
            range.into_iter().try_for_each(&solve)
        })
    } else {
        (0..slices.len()).try_for_each(solve)
    }
}

/// The rest of [`solve_slice_into`] once the slice's state is inited: the passes, on `threads`
/// threads, and the values out into `sink`. `start` is when the slice's solving began, for its
/// log (its init took `init_seconds`). With `checkpoints`, the log of plies is kept in their
/// folder and checkpoints are written ([`Checkpoints`]); with `lent`, the passes run on the
/// threads a run lends as well ([`Lent`]).
fn solve_initialised(
    ctx: &Context<'_>,
    mut st: State,
    (threads, changed_bits): (usize, bool),
    (start, init_seconds): (std::time::Instant, f64),
    (checkpoints, lent): (Option<&Checkpoints<'_>>, Option<&Lent>),
    sink: &mut dyn FnMut(&[u16]) -> Result<(), SolveError>,
) -> Result<(), SolveError> {
    let g = ctx.g;
    let n = g.ix.size() as usize;
    let tracked = std::time::Instant::now();
    if g.line_man().is_some() {
        st.track_won(threads, !g.pawnless, changed_bits, &Whole)?;
    }
    let init_seconds = init_seconds + tracked.elapsed().as_secs_f64();
    let log = match checkpoints {
        Some(c) => DtmLog::in_file(&c.log_path(&ctx.key)).map_err(SolveError::Scratch)?,
        None => DtmLog::new(n >= SPILL_FROM),
    };
    let at = Progress {
        init_seconds,
        ..Progress::default()
    };
    let run = Run {
        threads,
        lent,
        start,
        checkpoints,
    };
    solve_passes(ctx, st, log, at, &run, sink)
}

/// Slices of this many indices or more log each pass at the info level (KRNvKNN's 7.6 G, at
/// about a second a pass, and up; 7 men take hours): a long build says where it is.
const REPORT_PLIES_FROM: usize = 1 << 32;

/// How a slice's passes are run: on `threads` threads and those `lent` by its run if any, begun
/// at `start` (for its log), with `checkpoints` if any.
struct Run<'a> {
    threads: usize,
    lent: Option<&'a Lent>,
    start: std::time::Instant,
    checkpoints: Option<&'a Checkpoints<'a>>,
}

impl Run<'_> {
    /// The threads of the next pass.
    fn threads(&self) -> usize {
        self.lent.map_or(self.threads, |l| l.threads(self.threads))
    }
}

/// The retrograde passes of a slice from its state `st` and log of plies `log` as they stand
/// at `at` (after its init, or at a checkpoint), then its values out into `sink`.
fn solve_passes(
    ctx: &Context<'_>,
    mut st: State,
    mut log: DtmLog,
    at: Progress,
    run: &Run<'_>,
    sink: &mut dyn FnMut(&[u16]) -> Result<(), SolveError>,
) -> Result<(), SolveError> {
    let Run {
        start, checkpoints, ..
    } = *run;
    let g = ctx.g;
    let key = &ctx.key;
    let n = g.ix.size() as usize;
    let Progress {
        mut plies,
        init_seconds,
        mut scan_seconds,
        mut unmove_seconds,
        mut verify_seconds,
    } = at;
    // The first checkpoint counts from the slice's start: a long init is covered too.
    let mut last_checkpoint = start;
    let stage = Stage::new(n as u64);

    // 2. Retrograde passes, one per ply.
    while plies <= st.horizon.load(Relaxed) {
        stage.say(format_args!("{key}: ply {plies}"));
        // Threads lent since the last pass join from this one, each with a bitmap of changed
        // positions if the slice keeps them.
        let threads = run.threads();
        st.changed_bits_for(threads);
        if plies >= MAX_PLIES as u32 - 1 {
            return Err(SolveError::TooDeep(*key));
        }
        // The frontier: the positions decided in the last pass, and those decided at this ply
        // other than through it (scan the chunks flagged for it), set final here. Recorded in
        // the log, and un-moved from below.
        let phase = std::time::Instant::now();
        let frontier = scan_frontier(ctx, &st, &mut log, plies, threads, &Whole)?;
        scan_seconds += phase.elapsed().as_secs_f64();
        // A slice of an hour or more (7 men) says where it is at every ply; smaller large
        // ones at debug level.
        if n >= REPORT_PLIES_FROM {
            info!(
                slice = %key,
                plies,
                frontier,
                seconds = start.elapsed().as_secs_f64(),
                "pass"
            );
        } else if n >= SPILL_FROM {
            debug!(
                slice = %key,
                plies,
                frontier,
                seconds = start.elapsed().as_secs_f64(),
                "pass"
            );
        }
        let phase = std::time::Instant::now();
        let hold_won = unmove_frontier(ctx, &st, &log, plies, frontier, threads, &Whole)?;
        unmove_seconds += phase.elapsed().as_secs_f64();
        let phase = std::time::Instant::now();
        if plies % 2 == 1 {
            verify_changed(ctx, &st, plies, hold_won, threads)?;
        }
        verify_seconds += phase.elapsed().as_secs_f64();
        plies += 1;
        if let Some(c) = checkpoints {
            let stop = c.stopped();
            if stop || last_checkpoint.elapsed() >= c.every {
                let at = Progress {
                    plies,
                    init_seconds,
                    scan_seconds,
                    unmove_seconds,
                    verify_seconds,
                };
                let phase = std::time::Instant::now();
                let bytes = checkpoint::save(c, key, &mut st, &log, &at, threads)?;
                info!(
                    slice = %key,
                    plies,
                    bytes,
                    seconds = phase.elapsed().as_secs_f64(),
                    "checkpoint written"
                );
                last_checkpoint = std::time::Instant::now();
                if stop {
                    return Err(SolveError::Interrupted);
                }
            }
        }
    }
    debug!(
        slice = %key,
        passes = plies,
        init_seconds,
        scan_seconds,
        unmove_seconds,
        verify_seconds,
        log_bytes = log.bytes(),
        seconds = start.elapsed().as_secs_f64(),
        "slice solved"
    );

    write_values(st, &log, run.threads(), &Whole, sink)
}

/// The scan of ply `plies`: the positions decided in the pass before, and those decided at this
/// ply other than through it (the chunks flagged for it), set final and recorded in `log`; with
/// `split`, those of its part only. Returns how many joined the frontier.
pub(super) fn scan_frontier(
    ctx: &Context<'_>,
    st: &State,
    log: &mut DtmLog,
    plies: u32,
    threads: usize,
    split: &impl Own,
) -> Result<u64, SolveError> {
    let n = ctx.g.ix.size() as usize;
    let line_man = ctx.g.line_man();
    let chunks_per_segment = SEG_INDICES >> CHUNK_SHIFT;
    debug_assert!(chunks_per_segment << CHUNK_SHIFT == SEG_INDICES);
    let scan_all = plies >= MASK_LEVELS && st.far_pending.lock().expect("far pending lock").contains(&plies);
    let (mask_word, mask_bit) = ((plies / 64) as usize % 8, 1u64 << (plies % 64));
    let segments = n.div_ceil(SEG_INDICES);
    log.begin_ply(segments);
    let in_frontier = AtomicU64::new(0);
    let now = decided(plies);
    // The codes of the positions that wait for this ply (see `State::waits_for`): decided
    // later at it, or with a winning exit at it, in the byte or in the side map. Other
    // pending positions of a flagged chunk wait for other plies: not looked at.
    let later = (plies < LATER_DIRECT).then(|| S_LATER + plies as u8);
    let win_exit =
        (plies % 2 == 1 && plies.div_ceil(2) < WIN_EXIT_DIRECT).then(|| S_NO_LOSS + plies.div_ceil(2) as u8);
    let waiting = [
        S_NEXT,
        S_LATER_FAR,
        S_WIN_EXIT_FAR,
        later.unwrap_or(S_NEXT),
        win_exit.unwrap_or(S_NEXT),
    ];
    // The same but S_NEXT, when the S_NEXT positions are in bitmaps.
    let waiting_bytes = [
        S_LATER_FAR,
        S_WIN_EXIT_FAR,
        later.unwrap_or(S_LATER_FAR),
        win_exit.unwrap_or(S_LATER_FAR),
    ];
    let fine_bit = 1u64 << (plies % 64);
    // A segment is scanned by one thread, which alone writes its bytes meanwhile.
    for_each_chunk(segments, 1, threads, |range| {
        for s in range {
            let first = s * SEG_INDICES;
            let mut enc = SegmentEncoder::new(SEG_INDICES.min(n - first));
            let mut chunks = s * chunks_per_segment..((s + 1) * chunks_per_segment).min(st.pending.len());
            if !split.owns(first) {
                chunks = 0..0;
            }
            let mut any = 0u64;
            for c in chunks {
                let pending =
                    scan_all || plies < MASK_LEVELS && st.pending[c][mask_word].load(Relaxed) & mask_bit != 0;
                let next = st.next[c].swap(0, Relaxed) != 0;
                if !pending && !next {
                    continue;
                }
                // Only S_NEXT, and when pending the codes that wait for this ply, can join.
                let chunk = (c << CHUNK_SHIFT)..((c + 1) << CHUNK_SHIFT).min(n);
                st.mark(chunk.clone(), Reach::Own);
                // The positions `joined` of the 64 from `b` (a multiple of 64: chunks start on
                // one) join the frontier: recorded in the log, the words of the bitmaps set
                // once. Their bytes are set by the caller.
                let mut record = |b: usize, joined: u64| {
                    debug_assert!(b.is_multiple_of(64));
                    if joined == 0 {
                        return;
                    }
                    enc.push_word((b - first) / 64, joined);
                    if now == S_WON && line_man.is_some() {
                        st.set_won_bits(b, joined);
                    }
                    st.set_quiet(b, joined);
                    any += u64::from(joined.count_ones());
                };
                // A block of 64 indices from `b` at a time, the indices of `m` tested.
                let mut join = |b: usize, mut m: u64| {
                    let mut joined = 0u64;
                    while m != 0 {
                        let i = b + m.trailing_zeros() as usize;
                        m &= m - 1;
                        let v = st.get(i);
                        if v == S_NEXT || pending && st.waits_for(i, v) == Some(plies) {
                            st.set(i, now);
                            joined |= 1 << (i - b);
                        }
                    }
                    record(b, joined);
                };
                // Whether the block of [`State::fine`] holding index `b` may hold positions
                // that wait for this ply (when the chunk is flagged for it).
                let fine_pending = |b: usize| {
                    scan_all
                        || st
                            .fine
                            .get(b >> FINE_SHIFT)
                            .is_none_or(|w| w.load(Relaxed) & fine_bit != 0)
                };
                if st.changed_bits.is_empty() {
                    if !pending {
                        for_each_equal_block(&st.bytes, chunk, [S_NEXT], &mut join);
                    } else if st.fine.is_empty() {
                        for_each_equal_block(&st.bytes, chunk, waiting, &mut join);
                    } else {
                        for b in chunk.step_by(1 << FINE_SHIFT) {
                            let block = b..(b + (1 << FINE_SHIFT)).min(n);
                            if fine_pending(b) {
                                for_each_equal_block(&st.bytes, block, waiting, &mut join);
                            } else if next {
                                for_each_equal_block(&st.bytes, block, [S_NEXT], &mut join);
                            }
                        }
                    }
                    continue;
                }
                // With the bitmaps of [`State::changed_bits`]: the S_NEXT positions are
                // their bits (taken and cleared), and their bytes are left as they are (no
                // phase tells S_NEXT from S_WON or S_LOST in such a slice: the won bitmap
                // and the quiet one do); only the pending positions are looked for in the
                // bytes (a chunk that is only flagged next: none).
                debug_assert!(chunk.start.is_multiple_of(64) && chunk.end.is_multiple_of(64));
                // The chunk's fine blocks whose bytes are tested, a bit each (none unless
                // the chunk is flagged for this ply).
                let mut tested = 0u64;
                if pending {
                    for (k, b) in chunk.clone().step_by(1 << FINE_SHIFT).enumerate() {
                        if fine_pending(b) {
                            tested |= 1 << k;
                        }
                    }
                }
                // Their bytes asked for at once, so that the reads overlap (a chunk is a
                // page: the hardware's prefetch would start afresh in it). KRPvKR's scans
                // on 1 thread: 4.2-4.3 s -> 4.0-4.1 s.
                for k in Bitboard(tested) {
                    let b = chunk.start + (k.index() << FINE_SHIFT);
                    for line in (b..(b + (1 << FINE_SHIFT)).min(chunk.end)).step_by(64) {
                        prefetch(&st.bytes, line);
                    }
                }
                for b in chunk.clone().step_by(64) {
                    let mut joined = st.take_bits(b / 64);
                    if tested >> ((b - chunk.start) >> FINE_SHIFT) & 1 != 0 {
                        let mut m = equal_mask(&st.bytes, b, waiting_bytes);
                        while m != 0 {
                            let i = b + m.trailing_zeros() as usize;
                            m &= m - 1;
                            if st.waits_for(i, st.get(i)) == Some(plies) {
                                st.set(i, now);
                                joined |= 1 << (i - b);
                            }
                        }
                    }
                    debug_assert!(Bitboard(joined).into_iter().all(|q| {
                        let v = st.get(b + q.index());
                        v == S_NEXT || v == now
                    }));
                    record(b, joined);
                }
            }
            in_frontier.fetch_add(any, Relaxed);
            log.record_segment(s, &enc.finish())
                .map_err(SolveError::Scratch)?;
        }
        Ok::<(), SolveError>(())
    })?;
    log.end_ply(plies);
    Ok(in_frontier.into_inner())
}

/// The un-moves of ply `plies` from its frontier (`frontier` positions, read back from `log`;
/// with `split`, the frontier of all its parts): after a loss the undecided predecessors win at
/// the next ply, after a win the predecessors that may lose are marked changed, for
/// [`verify_changed`]. With `split`, the lines of predecessors of another part go to its
/// outbox, for that part to mark ([`mark_lines`]). Returns whether the won bits stand in for
/// quiet ones meanwhile (`hold_won`, which the verification then clears).
pub(super) fn unmove_frontier<S: Own>(
    ctx: &Context<'_>,
    st: &State,
    log: &DtmLog,
    plies: u32,
    frontier: u64,
    threads: usize,
    split: &S,
) -> Result<bool, SolveError> {
    let g = ctx.g;
    let n = g.ix.size() as usize;
    let line_man = g.line_man();
    let segments = n.div_ceil(SEG_INDICES);
    // Un-move from the frontier, read back from its encoding. What an un-move does to its
    // predecessor does not depend on the order: predecessors are queued and prefetched a
    // few at a time, so that their reads overlap.
    let lost_here = plies.is_multiple_of(2);
    // Slices with a won bitmap but no quiet one (pawnless, by lines), after a win: a changed
    // position's won bit stands in for a quiet bit until the verification, so that the
    // un-moves skip it from then on; the bits are cleared before the verification by a scan
    // of the chunks with changed positions. Only in a ply whose frontier is large for the
    // slice (a position per 128 indices): a small frontier saves fewer reads than that scan
    // costs (KRNvKNN, 524 plies: verification 158 s to 197 s with the bits in every ply).
    // Either way the same positions are changed.
    let hold_won = !lost_here && st.quiet.is_empty() && !st.won.is_empty() && frontier >= n as u64 / 128;
    let mark_on = marker(st, plies, hold_won);
    let skip: &[AtomicU64] = if lost_here || st.quiet.is_empty() {
        &st.won
    } else {
        &st.quiet
    };
    debug_assert!(
        S::WHOLE || (line_man.is_some() && st.changed_bits.is_empty() && std::ptr::eq(skip, &st.won[..])),
        "a slice is split only when solved by lines, without bitmaps of changed positions"
    );
    // A paged state's segments in the order that keeps the K-slices they reach few.
    let order = st.walk(segments, SEG_INDICES, Reach::Unmove);
    // After a win, with the changed positions kept as bits: a line's predecessors changed
    // at once, a word of bits, where their quiet bits are clear.
    let by_bits = !lost_here && !st.changed_bits.is_empty();
    for_each_chunk_on(segments, 1, threads, |thread, range| {
        let mut queue = Deferred::new();
        let mut lines = DeferredLines::new();
        let mut words = DeferredWords::new();
        let mine: &[AtomicU64] = st.changed_bits.get(thread).map_or(&[], |b| &b[..]);
        let mut mark = |p: usize| mark_on(mine, p);
        let mut mark_word = |w: usize, bits: u64| {
            let quiet = &st.quiet[w];
            let q = quiet.load(Relaxed);
            let new = bits & !q;
            if new != 0 {
                quiet.store(q | new, Relaxed);
                mine[w].store(mine[w].load(Relaxed) | new, Relaxed);
                let flag = &st.changed[(w * 64) >> CHUNK_SHIFT];
                if flag.load(Relaxed) == 0 {
                    flag.store(1, Relaxed);
                }
            }
        };
        let mut encoded = Vec::new();
        let mut outbox: Vec<(u64, u64)> = Vec::new();
        for s in range {
            let s = order.as_ref().map_or(s, |o| o[s] as usize);
            let first = s * SEG_INDICES;
            log.read_segment(plies, s, &mut encoded)
                .map_err(SolveError::Scratch)?;
            if encoded.is_empty() {
                continue;
            }
            st.mark(first..(first + SEG_INDICES).min(n), Reach::Unmove);
            // By lines of 64: the frontier positions of a line un-moved at once. Predecessors
            // that no mark changes are skipped: won and illegal ones, and after a win the
            // quiet ones.
            match line_man {
                Some(l) if by_bits => unmove_lines(g, l, first, &encoded, |p, squares| {
                    words.push(&st.quiet, mine, p as usize / 64, squares.0, &mut mark_word)
                }),
                Some(l) if S::WHOLE => unmove_lines(g, l, first, &encoded, |p, squares| {
                    lines.push(skip, &st.bytes, p as usize, squares.0, &mut mark)
                }),
                Some(l) => unmove_lines(g, l, first, &encoded, |p, squares| {
                    if split.owns(p as usize) {
                        lines.push(skip, &st.bytes, p as usize, squares.0, &mut mark)
                    } else {
                        // Another part's line: won (or illegal) predecessors, which no mark
                        // changes, are left out by the won bits where this part is given them
                        // (exact there too). Elsewhere they are not read: they would read 0,
                        // and map a page of a paged state that no mark counts (KRNvKNN in 3
                        // parts: up to 266 MB of them, past the budget).
                        let bits = if split.holds_won(p as usize) {
                            squares.0 & !skip[p as usize / 64].load(Relaxed)
                        } else {
                            squares.0
                        };
                        if bits != 0 {
                            outbox.push((p, bits));
                            if outbox.len() >= POST_LINES {
                                split.post(std::mem::take(&mut outbox));
                            }
                        }
                    }
                }),
                None => {
                    let whole = for_each_offset(&encoded, |o| {
                        let j = (first + o) as u64;
                        let d = g.decode(j).expect("a decided index is a position");
                        g.for_each_unmove(j, &d, |p| queue.push(&st.bytes, p as usize, &mut mark));
                    });
                    debug_assert!(whole, "this log's segments are well formed");
                }
            }
        }
        queue.drain(&mut mark);
        lines.drain(skip, &st.bytes, &mut mark);
        words.drain(&mut mark_word);
        split.post(outbox);
        Ok::<(), SolveError>(())
    })?;
    Ok(hold_won)
}

/// The mark of a predecessor in the un-moves of ply `plies` (`hold_won` as [`unmove_frontier`]
/// decided it): `mark(mine, p)` marks `p` for a thread whose bitmap of [`State::changed_bits`]
/// is `mine` (empty if none are kept). After a loss, an undecided `p` wins at the next ply;
/// after a win, a `p` that may lose is changed. The same whatever the order of the marks, and
/// however often `p` is marked. A closure, not a function the un-moves' closure calls: that
/// call cost KQvKR 2% more instructions.
#[inline(always)]
fn marker(st: &State, plies: u32, hold_won: bool) -> impl Fn(&[AtomicU64], usize) + '_ {
    let lost_here = plies.is_multiple_of(2);
    move |mine: &[AtomicU64], p: usize| {
        let v = st.get(p);
        if lost_here {
            // A move into a loss in `plies`: the predecessor wins in `plies + 1`.
            if undecided(v) {
                st.set_next(p, plies + 1, mine);
            }
        } else if may_lose(v) && v & F_CHANGED == 0 {
            st.set(p, v | F_CHANGED);
            st.set_quiet(p, 1 << (p % 64));
            if hold_won {
                let w = &st.won[p / 64];
                w.store(w.load(Relaxed) | 1 << (p % 64), Relaxed);
            }
            // As in `set_next`: no store to a shared line that would change nothing.
            let flag = &st.changed[p >> CHUNK_SHIFT];
            if flag.load(Relaxed) == 0 {
                flag.store(1, Relaxed);
            }
        }
    }
}

/// The marks of ply `plies` that other parts' un-moves found for this part's positions: each
/// of `lines`, `(first index of a line, its squares)`, marked as [`unmove_frontier`] marks its
/// own predecessors (`hold_won` as it returned it).
pub(super) fn mark_lines(
    st: &State,
    plies: u32,
    hold_won: bool,
    lines: &[(u64, u64)],
    threads: usize,
) -> Result<(), SolveError> {
    for_each_chunk(lines.len(), 1 << 10, threads, |range| {
        let mut deferred = DeferredLines::new();
        let mark_on = marker(st, plies, hold_won);
        let mut mark = |p: usize| mark_on(&[], p);
        for &(base, bits) in &lines[range] {
            st.mark(base as usize..base as usize + 64, Reach::Own);
            deferred.push(&st.won, &st.bytes, base as usize, bits, &mut mark);
        }
        deferred.drain(&st.won, &st.bytes, &mut mark);
        Ok::<(), SolveError>(())
    })
}

/// The verification of ply `plies` (a win): each changed position is lost if every move inside
/// the slice leads to a win for the opponent. `hold_won` as [`unmove_frontier`] returned it.
pub(super) fn verify_changed(
    ctx: &Context<'_>,
    st: &State,
    plies: u32,
    hold_won: bool,
    threads: usize,
) -> Result<(), SolveError> {
    let n = ctx.g.ix.size() as usize;
    let line_man = ctx.g.line_man();
    let changed = [S_MAY_LOSE | F_CHANGED, S_MAY_LOSE | F_CHANGED | F_LOSS_EXIT];
    if hold_won {
        // The won bits the marks set for changed positions are cleared: the
        // verification reads them exact. A bit lost by two threads storing into one
        // word was one of those (the bits of won and illegal positions were set in
        // other phases), so each is either set and cleared here, or not set.
        for_each_chunk(st.changed.len(), 4, threads, |chunks| {
            for c in chunks.filter(|&c| st.changed[c].load(Relaxed) != 0) {
                let chunk = (c << CHUNK_SHIFT)..((c + 1) << CHUNK_SHIFT).min(n);
                st.mark(chunk.clone(), Reach::Own);
                for_each_equal_block(&st.bytes, chunk, changed, |b, m| {
                    let w = &st.won[b / 64];
                    w.store(w.load(Relaxed) & !m, Relaxed);
                });
            }
            Ok::<(), SolveError>(())
        })?;
    }
    // Verify the changed positions: lost if every inside move leads to a win. A group
    // of chunks is verified by one thread, which alone writes its bytes meanwhile; a paged
    // state's groups in the order that keeps the K-slices they reach few.
    let groups = st.changed.len().div_ceil(VERIFY_GROUP);
    let order = st.walk(groups, VERIFY_GROUP << CHUNK_SHIFT, Reach::Verify);
    for_each_chunk(groups, 1, threads, |range| {
        let group = |k: usize| {
            let k = order.as_ref().map_or(k, |o| o[k] as usize);
            k * VERIFY_GROUP..((k + 1) * VERIFY_GROUP).min(st.changed.len())
        };
        for c in range.flat_map(group) {
            if st.changed[c].swap(0, Relaxed) == 0 {
                continue;
            }
            let mut result = Ok(());
            let chunk = (c << CHUNK_SHIFT)..((c + 1) << CHUNK_SHIFT).min(n);
            st.mark(chunk.clone(), Reach::Verify);
            match line_man {
                // The changed positions as bits: a word of each thread's bitmap, a line.
                Some(l) if !st.changed_bits.is_empty() => {
                    let words = chunk.start / 64..chunk.end / 64;
                    for w in words {
                        let at = st.take_bits(w);
                        if at != 0 && result.is_ok() {
                            result = verify_line(ctx, st, l, w * 64, at, plies);
                        }
                    }
                }
                // By lines of 64: the changed positions of a line verified at once.
                Some(l) => {
                    let (mut base, mut at) = (usize::MAX, 0u64);
                    for_each_equal(&st.bytes, chunk, changed, |i| {
                        let v = st.get(i);
                        if may_lose(v) && v & F_CHANGED != 0 {
                            if i & !63 != base {
                                if at != 0 && result.is_ok() {
                                    result = verify_line(ctx, st, l, base, at, plies);
                                }
                                (base, at) = (i & !63, 0);
                            }
                            at |= 1 << (i & 63);
                        }
                    });
                    if at != 0 && result.is_ok() {
                        result = verify_line(ctx, st, l, base, at, plies);
                    }
                }
                None => for_each_equal(&st.bytes, chunk, changed, |i| {
                    let v = st.get(i);
                    if result.is_ok() && may_lose(v) && v & F_CHANGED != 0 {
                        result = verify(ctx, st, i, v, plies);
                    }
                }),
            }
            result?;
        }
        Ok::<(), SolveError>(())
    })?;
    Ok(())
}

/// Chunks verified by one thread at a time.
const VERIFY_GROUP: usize = 4;

/// The values of a solved slice out of its state `st` and its log of plies into `sink`, a
/// segment at a time in index order; with `split`, only its part's segments.
pub(super) fn write_values(
    st: State,
    log: &DtmLog,
    threads: usize,
    split: &impl Own,
    sink: &mut dyn FnMut(&[u16]) -> Result<(), SolveError>,
) -> Result<(), SolveError> {
    let n = st.bytes.len();
    // 3. Finish: the table's values from the bytes and the log, a few segments at a time (one
    // per thread); undecided positions are draws.
    let State {
        bytes,
        pending,
        changed,
        next,
        won,
        quiet,
        changed_bits,
        pager,
        ..
    } = st;
    // Only the bytes are read from here on: the rest goes before the values are made.
    drop((pending, changed, next, won, quiet, changed_bits));
    write_segments(
        n,
        threads,
        |s, seg| {
            if !split.owns(seg.start) {
                return Ok(None);
            }
            if let Some(p) = &pager {
                p.mark(seg.clone(), Reach::Own);
            }
            let states = &bytes[seg];
            let mut values: Vec<u16> = states
                .iter()
                .map(|b| {
                    let b = b.load(Relaxed);
                    debug_assert!(
                        b <= S_LOST || undecided(b) || b == S_NEXT,
                        "a position waits for a ply the passes never reached"
                    );
                    if b == S_ILLEGAL {
                        ILLEGAL
                    } else {
                        DRAW
                    }
                })
                .collect();
            log.for_each_in_segment(s, |o, p| values[o] = p as u16 + 2)
                .map_err(SolveError::Scratch)?;
            Ok(Some(values))
        },
        sink,
        |done| release_bytes(&bytes[done]),
    )
}

/// The values of a slice of `n` indices into `sink` in index order, [`SEG_INDICES`] at a time:
/// `values(s, range)` gives segment `s`'s (`None` for one not to give), a few segments at once
/// on `threads` threads (one a thread); `done(range)` is called with the indices of each batch
/// once it is given.
pub(super) fn write_segments(
    n: usize,
    threads: usize,
    values: impl Fn(usize, std::ops::Range<usize>) -> Result<Option<Vec<u16>>, SolveError> + Sync,
    sink: &mut dyn FnMut(&[u16]) -> Result<(), SolveError>,
    mut done: impl FnMut(std::ops::Range<usize>),
) -> Result<(), SolveError> {
    let segments = n.div_ceil(SEG_INDICES);
    let batch = threads.max(1);
    for first in (0..segments).step_by(batch) {
        let last = (first + batch).min(segments);
        let out: Vec<Mutex<Option<Vec<u16>>>> = (first..last).map(|_| Mutex::default()).collect();
        for_each_chunk(last - first, 1, threads, |range| {
            for k in range {
                let s = first + k;
                let made = values(s, s * SEG_INDICES..((s + 1) * SEG_INDICES).min(n))?;
                *out[k].lock().expect("segment lock") = made;
            }
            Ok::<(), SolveError>(())
        })?;
        for values in out {
            if let Some(values) = values.into_inner().expect("segment lock") {
                sink(&values)?;
            }
        }
        done(first * SEG_INDICES..(last * SEG_INDICES).min(n));
    }
    Ok(())
}

/// Calls `f(line, squares)` for the predecessors of the frontier positions of the segment from
/// index `first` (their offsets encoded in `encoded`), a line of 64 at a time
/// ([`Geometry::for_each_unmove_line`], line man `l`).
#[inline(always)]
pub(super) fn unmove_lines(
    g: &Geometry,
    l: usize,
    first: usize,
    encoded: &[u8],
    mut f: impl FnMut(u64, Bitboard),
) {
    let mut unmove = |base: usize, from: u64| {
        let d = g.decode_line(base as u64, l).expect("a decided line is placed");
        // A closure of its own, not `&mut f`: with `&mut f` the marks were not inlined into
        // the un-moves (KQRvKR's un-moves 5.7 s instead of 5.1 s on 1 thread).
        #[allow(clippy::redundant_closure)]
        g.for_each_unmove_line(l, &d, Bitboard(from), |p, squares| f(p, squares));
    };
    debug_assert!(first.is_multiple_of(64));
    let whole = for_each_word(encoded, |w, from| unmove(first + 64 * w, from));
    debug_assert!(whole, "this log's segments are well formed");
}

/// True if the slice has pawns and one of them can promote (it stands on its 7th rank).
fn promotes(g: &Geometry) -> bool {
    let on_7th = |c: Color| g.pawns[c.index()].into_iter().any(|p| p.relative_rank(c) == 6);
    !g.pawnless && (on_7th(Color::White) || on_7th(Color::Black))
}

/// The order in which to init a slice whose pawns can promote: its king pairs' ranges of
/// indices, grouped by the pawnless king pair they become in table form (the eight images of a
/// king pair under the board's symmetries, both sides to move, in a row). A promotion leads
/// into a pawnless table, read a block at a time: a king pair's promotions all land in one or
/// two blocks of it, which the other images of the king pair read too, while they are still in
/// the reader's cache (in index order they come thousands of king pairs apart, and the block is
/// read again for each). `None` (index order) for other slices.
fn promotion_order(g: &Geometry) -> Option<Vec<std::ops::Range<usize>>> {
    if !promotes(g) {
        return None;
    }
    let stride = g.ix.fields()[0].stride as usize;
    let per_side = g.ix.per_side() as usize;
    let mut units: Vec<(u64, usize, usize)> = Vec::with_capacity(2 * KING_PAIRS_PAWNFUL.len());
    for (kp, &[wk, bk]) in KING_PAIRS_PAWNFUL.iter().enumerate() {
        let t = &SYMMETRY_TABLE[pawnless_symmetry(wk, bk)];
        let group = king_pair_field(true, t[wk.index()], t[bk.index()]).expect("kings apart");
        for turn in 0..2 {
            units.push((group, turn, kp));
        }
    }
    units.sort_unstable();
    Some(
        units
            .into_iter()
            .map(|(_, turn, kp)| {
                let start = turn * per_side + kp * stride;
                start..start + stride
            })
            .collect(),
    )
}

/// Units of a promotion order ([`promotion_order`]) a thread inits in a row: a run of king-pair
/// groups, whose promotions read the same blocks, so that another thread does not decode them
/// again (a group is at most 16 units: eight king pairs, two sides to move).
const UNITS_A_THREAD: usize = 32;

/// What the init and the verification need besides the state.
pub(super) struct Context<'a> {
    pub(super) g: &'a Geometry,
    pub(super) key: SliceKey,
    succ: &'a dyn Successors,
    /// Exits by capture read by index (pawnless slices), see [`capture_exits`].
    captures: Option<Vec<Option<CaptureExit<'a>>>>,
    /// Exits read by index (slices with pawns).
    pawn_exits: Option<PawnExits<'a>>,
}

impl<'a> Context<'a> {
    pub(super) fn new(g: &'a Geometry, key: &SliceKey, succ: &'a dyn Successors) -> Context<'a> {
        Context {
            g,
            key: *key,
            succ,
            captures: capture_exits(g, key, succ),
            pawn_exits: PawnExits::new(g, key, succ),
        }
    }
}

/// A changed position `i` (state `v`) in the pass of `plies` (a win for the opponent was found
/// among its successors): lost if every move inside the slice leads to a win for the opponent,
/// in `plies + 1` or in its slowest losing exit, whichever is later. A successor decided as a
/// win at a later ply does not count yet: when the passes reach it, this position is changed
/// again.
#[inline]
fn verify(ctx: &Context<'_>, st: &State, i: usize, v: u8, plies: u32) -> Result<(), SolveError> {
    let g = ctx.g;
    let d = g.decode(i as u64).expect("a changed index is a position");
    let all_won = g
        .for_each_move(&d, |s| {
            let w = st.get(s as usize);
            // An illegal successor is not a move.
            if w == S_WON || w == S_ILLEGAL {
                ControlFlow::Continue(())
            } else {
                ControlFlow::Break(())
            }
        })
        .is_continue();
    if !all_won {
        st.set(i, v & !F_CHANGED);
        return Ok(());
    }
    set_lost(ctx, st, i, v, plies, &d)
}

/// The changed positions of a line in the pass of `plies` ([`verify`] for the squares `at` of
/// the line man `l` in the line from `base`, at once): each move inside the slice is looked at
/// once for all of them, on the line it leads to.
fn verify_line(
    ctx: &Context<'_>,
    st: &State,
    l: usize,
    base: usize,
    at: u64,
    plies: u32,
) -> Result<(), SolveError> {
    let g = ctx.g;
    // The line's bytes are read if a position of it is lost: asked for now, so that the read
    // overlaps the moves looked at below.
    prefetch(&st.bytes, base);
    let d = g.decode_line(base as u64, l).expect("a changed line is placed");
    let at = Bitboard(at);
    // An illegal successor is not a move: won or illegal, the bits of `st.won`.
    let open = open_squares(g, l, &d, at, |line| st.won_line(line));
    if st.changed_bits.is_empty() {
        for q in at & open {
            let i = base + q.index();
            st.set(i, st.get(i) & !F_CHANGED);
        }
    }
    debug_assert!(
        at.into_iter().all(|q| may_lose(st.get(base + q.index()))),
        "a changed position may lose"
    );
    for q in at & !open {
        let i = base + q.index();
        set_lost(ctx, st, i, st.get(i), plies, &g.line_position(&d, l, q))?;
    }
    // The open ones may be changed again; the lost ones are decided.
    st.clear_quiet(base, open.0);
    st.set_quiet(base, (at & !open).0);
    Ok(())
}

/// The squares of `at` (positions of line `d`, line man `l`) with a move inside the slice to a
/// position whose bit in `won` (the bits of a line, from its first index) is clear: a position
/// not (yet) won for the opponent, nor illegal.
#[inline]
pub(super) fn open_squares(
    g: &Geometry,
    l: usize,
    d: &Decoded,
    at: Bitboard,
    won: impl Fn(u64) -> Bitboard,
) -> Bitboard {
    let mut open = Bitboard::EMPTY;
    let us = d.turn;
    if g.side(us).contains(&l) {
        let line = d.fields + us.other().index() as u64 * g.ix.per_side();
        // A move of `l` between two squares works both ways: the squares from which `l`
        // reaches a position not won are those it attacks from them.
        let not_won = !d.occupied & !won(line);
        open = at & attacks_from_set(g.men[l], not_won, d.occupied);
    }
    if open != at {
        let _ = g.for_each_move_line(l, d, at & !open, |line, squares, sym| {
            open |= unmap_bb(sym, squares & !won(line));
            if open == at {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
    }
    open
}

/// A changed position `i` (state `v`, decoded `d`) whose moves inside the slice all lead to a
/// win for the opponent: lost in `plies + 1`, or in its slowest losing exit if that is later.
#[inline]
fn set_lost(
    ctx: &Context<'_>,
    st: &State,
    i: usize,
    v: u8,
    plies: u32,
    d: &Decoded,
) -> Result<(), SolveError> {
    let mut lost_in = plies + 1;
    if v & F_LOSS_EXIT != 0 {
        lost_in = lost_in.max(exits(ctx, d)?.slowest_loss as u32);
    }
    if lost_in == plies + 1 {
        // The thread that verifies the position's line alone writes its word meanwhile.
        st.set_next(i, plies + 1, st.changed_bits.first().map_or(&[], |b| &b[..]));
    } else {
        st.set_later(i, lost_in);
    }
    Ok(())
}

/// The exits of a legal position: read by index when the successors are arrays, else through
/// its legal moves.
pub(super) fn exits(ctx: &Context<'_>, d: &Decoded) -> Result<Exits, SolveError> {
    let g = ctx.g;
    let (our_king, _) = kings(g, d);
    if let Some(pe) = &ctx.pawn_exits {
        return pe.exits_only(g, d, ctx.succ);
    }
    match &ctx.captures {
        Some(captures) => exits_by_captures(g, d, our_king, captures),
        None => Ok(exits_by_moves(ctx, d)?.0),
    }
}

/// The exits of a legal position through its legal moves, whether it has a move inside the
/// slice, and whether it has no move at all.
fn exits_by_moves(ctx: &Context<'_>, d: &Decoded) -> Result<(Exits, bool, bool), SolveError> {
    let g = ctx.g;
    let pos =
        g.ix.position_of(&d.squares[..g.n], d.turn)
            .expect("a decoded index is a position");
    debug_assert!(pos.validate().is_ok(), "{pos}");
    let moves = pos.legal_moves();
    let mut exits = Exits::default();
    let mut inside = false;
    for m in moves.iter() {
        if m.leaves_slice() {
            exits.add(ctx.succ.value_of(&pos.play(m))?.after_move());
        } else {
            inside = true;
        }
    }
    Ok((exits, inside, moves.is_empty()))
}

/// Init of the indices of `range`: by lines of 64 when the lowest field is a lone man (the
/// range then starts and ends on multiples of 64), else index by index.
pub(super) fn init_range<S: InitTarget>(
    ctx: &Context<'_>,
    st: &S,
    range: std::ops::Range<usize>,
) -> Result<(), SolveError> {
    match ctx.g.line_man() {
        Some(l) => {
            debug_assert!(range.start.is_multiple_of(64) && range.len().is_multiple_of(64));
            // The pawn pushes of a line, reused from line to line.
            let mut pushes = LinePushes::default();
            for base in range.step_by(64) {
                init_line(ctx, st, l, base, &mut pushes)?;
            }
        }
        None => {
            for i in range {
                init_index(ctx, st, i)?;
            }
        }
    }
    Ok(())
}

/// Init of the 64 indices from `base` (a multiple of 64), which differ only in the square of man
/// `l` (the lone man of the lowest field). For all 64 at once, with one bitboard per question
/// (the squares of `l` for which the answer is yes), it finds the illegal ones (left 0) and the
/// plain ones: legal, not in check and with no exit, so undecided with no exit
/// ([`S_MAY_LOSE`], what [`init_index`] would set). The others go through [`init_index`].
fn init_line<S: InitTarget>(
    ctx: &Context<'_>,
    st: &S,
    l: usize,
    base: usize,
    pushes: &mut LinePushes,
) -> Result<(), SolveError> {
    let g = ctx.g;
    let Some(line) = g.decode_line(base as u64, l) else {
        return Ok(()); // Two other men share a square on the whole line.
    };
    let (us, sq, occ) = (line.turn, &line.squares, line.occupied);
    let them = us.other();
    let (our_king, their_king) = match us {
        Color::White => (sq[0], sq[g.black_king]),
        Color::Black => (sq[g.black_king], sq[0]),
    };
    let lp = g.men[l];
    let attacked = |target: Square, by: Color| line_attacked(g, &line, l, target, by);
    let legal = !occ & !attacked(their_king, us);
    if legal.is_empty() {
        return Ok(());
    }
    // In check, or with a capture (a man of ours attacking a man of theirs that is not the
    // king): what `init_index` looks at move by move.
    let in_check = attacked(our_king, them);
    let mut victims = g.pawns[them.index()];
    for k in g.side(them).filter(|&k| k != l && !g.is_king(k)) {
        victims = victims.with(sq[k]);
    }
    let mut captures = Bitboard::EMPTY;
    for v in victims {
        captures |= attacked(v, us);
    }
    if lp.color == them {
        // `l` is a victim itself: wherever a man or a pawn of ours attacks it.
        for k in g.side(us) {
            captures |= attacks(g.men[k], sq[k], occ);
        }
        for p in g.pawns[us.index()] {
            captures |= pawn_attacks(us, p);
        }
    }
    let mut looked_at = in_check | captures;
    // With pawns of ours, the positions whose only exits are plain pushes and promotions are
    // set from those read by lines ([`PawnExits::line_pushes`]) when one of them draws or wins (then
    // a move inside the slice does not matter); the others are looked at move by move.
    let mut pushed = Bitboard::EMPTY;
    // The squares of `l` whose positions' pawn moves are all in `pushes` (read by lines).
    let mut by_pushes = Bitboard::EMPTY;
    if g.pawns[us.index()].any() {
        if let Some(pe) = &ctx.pawn_exits {
            if pe.line_pushes(g, &line, l, victims, pushes)? {
                // A pawn of ours taking the line man is the only other pawn move.
                by_pushes = Bitboard::ALL;
                if lp.color == them {
                    for p in g.pawns[us.index()] {
                        by_pushes &= !pawn_attacks(us, p);
                    }
                }
                for q in legal & !looked_at {
                    let mut exits = Exits::default();
                    add_line_pushes(pushes, q, &mut exits)?;
                    if let Some(Value::Draw | Value::Win(_)) = exits.best {
                        set_undecided(ctx, st, base + q.index(), &exits)?;
                        pushed = pushed.with(q);
                    }
                }
            }
        }
        looked_at |= !pushed;
    }
    // The captures by men of the line's positions, each once for all of them; with pawns,
    // the pawn moves then position by position.
    let todo = legal & looked_at;
    let mut exits = [Exits::default(); 64];
    // The squares of `todo` with a move inside the slice, worked out for the line when first
    // asked.
    let mut inside_mask = None;
    let mut inside = |q: Square| {
        inside_mask
            .get_or_insert_with(|| g.line_has_inside_move(l, &line, todo))
            .contains(q)
    };
    let by_lines = match (&ctx.captures, &ctx.pawn_exits) {
        (Some(captures), _) => {
            let target = |victim| pawnless_target(captures, victim);
            // Every capture of a pawnless slice is worked out once (no pawns: never `Unknown`),
            // but a line that was not is looked at position by position all the same.
            let all = line_exits_by_captures(g, &line, l, todo, &target, &mut exits)?;
            if all {
                for q in todo {
                    let e = &exits[q.index()];
                    set_by_captures(ctx, st, base + q.index(), e, in_check.contains(q), || inside(q))?;
                }
            }
            all
        }
        (None, Some(pe)) => {
            let target = |victim| pe.capture_target(victim);
            if line_exits_by_captures(g, &line, l, todo, &target, &mut exits)? {
                for q in todo {
                    let e = &mut exits[q.index()];
                    if by_pushes.contains(q) {
                        add_line_pushes(pushes, q, e)?;
                    } else if g.pawns[us.index()].any() {
                        pe.pawn_move_exits(g, &g.line_position(&line, l, q), ctx.succ, e)?;
                    }
                    let inside = match e.best {
                        Some(Value::Loss(_)) | None => inside(q),
                        _ => true,
                    };
                    set_by_exits(ctx, st, base + q.index(), e, inside, in_check.contains(q))?;
                }
                true
            } else {
                false
            }
        }
        (None, None) => false,
    };
    if !by_lines {
        for q in todo {
            let d = g.line_position(&line, l, q);
            init_decoded(ctx, st, base + q.index(), &d, Some(in_check.contains(q)))?;
        }
    }
    for q in legal & !looked_at & !pushed {
        st.set(base + q.index(), S_MAY_LOSE);
    }
    Ok(())
}

/// The squares of man `l` of line `line` ([`Geometry::decode_line`]) with which a man of `by`
/// attacks `target` (a square of another man): `l` itself from the squares a like man on
/// `target` sees; another man if it attacks `target` without `l` and `l` is not between them (a
/// new man blocks, never opens a line).
#[inline]
pub(super) fn line_attacked(g: &Geometry, line: &Decoded, l: usize, target: Square, by: Color) -> Bitboard {
    if (pawn_attacks(by.other(), target) & g.pawns[by.index()]).any() {
        return Bitboard::ALL;
    }
    let (lp, sq, occ) = (g.men[l], &line.squares, line.occupied);
    let mut s = if lp.color == by {
        attacks(lp, target, occ)
    } else {
        Bitboard::EMPTY
    };
    for k in g.side(by).filter(|&k| k != l) {
        if attacks(g.men[k], sq[k], occ).contains(target) {
            s |= !between(sq[k], target);
        }
    }
    s
}

/// The squares of the line man `l` for which the index `base + square` of the line from `base`
/// is a legal position (no two men on a square, the side not to move not in check).
pub(super) fn line_legal(g: &Geometry, base: usize, l: usize) -> Bitboard {
    let Some(line) = g.decode_line(base as u64, l) else {
        return Bitboard::EMPTY;
    };
    let (_, their_king) = kings(g, &line);
    !line.occupied & !line_attacked(g, &line, l, their_king, line.turn)
}

/// Adds to `exits` the pawn moves read by lines in `pushes` ([`PawnExits::line_pushes`]) of
/// the position with the line man on `q`.
#[inline]
fn add_line_pushes(pushes: &LinePushes, q: Square, exits: &mut Exits) -> Result<(), SolveError> {
    if pushes.promotes {
        exits.merge(&pushes.promoted[q.index()]);
    }
    for (k, &(ok, slice, first)) in pushes.pushes[..pushes.n].iter().enumerate() {
        if ok.contains(q) {
            let v = Value::from_raw(pushes.values[k][q.index()]).ok_or_else(|| SolveError::BadSuccessor {
                slice,
                index: first + q.index() as u64,
            })?;
            exits.add(v.after_move());
        }
    }
    Ok(())
}

/// Looks at one index before the passes: illegal (left 0), decided (no move inside the slice),
/// or undecided with its best exit.
#[inline]
fn init_index<S: InitTarget>(ctx: &Context<'_>, st: &S, i: usize) -> Result<(), SolveError> {
    match ctx.g.decode(i as u64) {
        Some(d) => init_decoded(ctx, st, i, &d, None),
        None => Ok(()),
    }
}

/// [`init_index`] of index `i`, decoded as `d`.
#[inline]
fn init_decoded<S: InitTarget>(
    ctx: &Context<'_>,
    st: &S,
    i: usize,
    d: &Decoded,
    known: Option<bool>,
) -> Result<(), SolveError> {
    let g = ctx.g;
    let us = d.turn;
    let them = us.other();
    let (our_king, their_king) = kings(g, d);
    let in_check = match known {
        // Legal, and in check or with a possible exit (`init_line` found it so): in check?
        Some(in_check) => in_check,
        None => {
            // Legal unless the side not to move is attacked (kings are never side by side here).
            if g.attacked(d, their_king, us) {
                return Ok(());
            }
            // Exits: a pawn of ours (it may move), or a man of ours attacking one of theirs that
            // is not the king. Those positions, and positions in check (mates), are looked at
            // move by move: by index when the successors are arrays (pawnless: captures; with
            // pawns: every exit), else through a `Position`.
            let mut theirs = g.pawns[them.index()];
            for k in g.side(them) {
                if !g.is_king(k) {
                    theirs = theirs.with(d.squares[k]);
                }
            }
            let may_exit = g.pawns[us.index()].any()
                || g.side(us)
                    .any(|k| (attacks(g.men[k], d.squares[k], d.occupied) & theirs).any());
            let in_check = g.attacked(d, our_king, them);
            if !may_exit && !in_check {
                // Only moves inside the slice, or none (stalemate: never changed, a draw at the
                // end).
                st.set(i, S_MAY_LOSE);
                return Ok(());
            }
            in_check
        }
    };
    if let Some(captures) = &ctx.captures {
        let exits = exits_by_captures(g, d, our_king, captures)?;
        return set_by_captures(ctx, st, i, &exits, in_check, || g.has_inside_move(d, our_king));
    }
    if let Some(pe) = &ctx.pawn_exits {
        let (exits, inside) = pe.exits(g, d, ctx.succ)?;
        return set_by_exits(ctx, st, i, &exits, inside, in_check);
    }
    let (exits, inside, no_move) = exits_by_moves(ctx, d)?;
    if no_move {
        if in_check {
            st.set_later(i, 0);
        } else {
            st.set(i, S_DRAW);
        }
        return Ok(());
    }
    if !inside {
        // Only exits: the best of them is final.
        return set_decided(st, i, exits.best.expect("a move exists"));
    }
    set_undecided(ctx, st, i, &exits)
}

/// Sets a legal position of a pawnless slice from its exits (its captures) at init: lost (or
/// mated, or stalemated) if its exits lose, or it has none, and it has no move inside the slice
/// (`has_inside_move`, asked only then), else undecided with its best exit.
#[inline]
fn set_by_captures<S: InitTarget>(
    ctx: &Context<'_>,
    st: &S,
    i: usize,
    exits: &Exits,
    in_check: bool,
    has_inside_move: impl FnOnce() -> bool,
) -> Result<(), SolveError> {
    if let Some(Value::Loss(_)) | None = exits.best {
        if !has_inside_move() {
            return match exits.best {
                Some(_) => set_decided(st, i, Value::Loss(exits.slowest_loss)),
                None if in_check => {
                    st.set_later(i, 0);
                    Ok(())
                }
                None => {
                    st.set(i, S_DRAW);
                    Ok(())
                }
            };
        }
    }
    // With a move inside: a position with only draws or wins is never lost.
    set_undecided(ctx, st, i, exits)
}

/// Sets a legal position of a slice with pawns from its exits at init, and whether it has a
/// move inside the slice (`inside`; asked only when its exits lose or it has none).
#[inline(always)]
fn set_by_exits<S: InitTarget>(
    ctx: &Context<'_>,
    st: &S,
    i: usize,
    exits: &Exits,
    inside: bool,
    in_check: bool,
) -> Result<(), SolveError> {
    match (inside, exits.best) {
        (true, _) => set_undecided(ctx, st, i, exits),
        (false, Some(best)) => set_decided(st, i, best),
        (false, None) if in_check => {
            st.set_later(i, 0);
            Ok(())
        }
        (false, None) => {
            st.set(i, S_DRAW);
            Ok(())
        }
    }
}

/// Sets a position decided at init (no move inside the slice that could change it).
#[inline(always)]
fn set_decided<S: InitTarget>(st: &S, i: usize, v: Value) -> Result<(), SolveError> {
    match v {
        Value::Draw => st.set(i, S_DRAW),
        Value::Win(d) | Value::Loss(d) => st.set_later(i, d as u32),
    }
    Ok(())
}

/// Sets the state of a position with a move inside the slice from its exits. Forced inline, as
/// are [`set_by_exits`] and [`set_decided`]: LLVM left it a call with a jump table in the init's
/// loops (KRPvKR's inits on 1 thread 8.3 s, inlined 7.4 s).
#[inline(always)]
fn set_undecided<S: InitTarget>(
    ctx: &Context<'_>,
    st: &S,
    i: usize,
    exits: &Exits,
) -> Result<(), SolveError> {
    match exits.best {
        None => st.set(i, S_MAY_LOSE),
        Some(Value::Loss(_)) => st.set(i, S_MAY_LOSE | F_LOSS_EXIT),
        Some(Value::Draw) => st.set(i, S_NO_LOSS),
        Some(Value::Win(d)) => {
            if d >= MAX_PLIES {
                return Err(SolveError::TooDeep(ctx.key));
            }
            st.set_win_exit(i, d as u32)
        }
    }
    Ok(())
}

/// The captures by men of the positions of line `line` (line man `l`,
/// [`Geometry::decode_line`]) with `l` on the squares of `qs` (legal positions), added to `out`
/// by square of `l` ([`exits_by_captures`], and the captures by men of
/// [`PawnExits::exits`]); `target` tells where the capture of a man (`Ok`) or of a pawn (`Err`,
/// its square) leads. Each capture is looked at once for the whole line, its legality as a mask
/// of the squares of `l`:
/// * by another man, of a man other than `l` or of a pawn: where `l` is not in its way and
///   leaves the king safe (on a square between the king and a man that would then attack it,
///   or, if `l` is the other side's, not attacking it itself); the positions after it differ
///   only in the square of `l`, read by index arithmetic ([`CaptureMap::values_along`]);
/// * by `l`: from every square of `l` that attacks the victim, all onto one position after it
///   (read once), legal for all or for none (`l` is then off the board's lines);
/// * of `l` (the other side's): by each man of ours that attacks its square, the positions
///   after it differing only in that man's square.
///
/// `Ok(false)` (and `out` partly added to) when a capture's target is not worked out once: the
/// caller looks at the positions one by one.
pub(super) fn line_exits_by_captures<'s, 'a: 's, E: ExitSet>(
    g: &Geometry,
    line: &Decoded,
    l: usize,
    qs: Bitboard,
    target: &impl Fn(Result<usize, Square>) -> CaptureTarget<'s, 'a>,
    out: &mut [E; 64],
) -> Result<bool, SolveError> {
    if qs.is_empty() {
        return Ok(true);
    }
    let us = line.turn;
    let them = us.other();
    let (sq, occ, lp) = (&line.squares, line.occupied, g.men[l]);
    let (our_king, _) = kings(g, line);
    let l_ours = g.side(us).contains(&l);
    let their_pawns = g.pawns[them.index()];
    let shields = |king, occupied, skip, pawns| g.line_king_safe(l, line, king, occupied, pawns, skip);
    // Adds the move into `v` to the exits of the squares of `at`.
    let add_all = |out: &mut [E; 64], at: Bitboard, v: E::Value| {
        at.into_iter().for_each(|q| out[q.index()].add_move_into(v))
    };
    let men = g.side(them).filter(|&m| m != l && !g.is_king(m)).map(Ok);
    for victim in men.chain(their_pawns.into_iter().map(Err)) {
        let (to, skip, pawns) = match victim {
            Ok(m) => (sq[m], m, their_pawns),
            Err(p) => (p, NO_MAN, their_pawns.without(p)),
        };
        let target = target(victim);
        if let CaptureTarget::Unknown = target {
            return Ok(false);
        }
        // By a man of ours other than `l`.
        for k in g.side(us).filter(|&k| k != l) {
            let from = sq[k];
            if !attacks(g.men[k], from, occ).contains(to) {
                continue;
            }
            let occupied = occ.without(from);
            let king = if g.is_king(k) { to } else { our_king };
            let ok = qs & !between(from, to) & shields(king, occupied, skip, pawns);
            if ok.is_empty() {
                continue;
            }
            match &target {
                CaptureTarget::Read(values, six, map) => {
                    let mut after = *sq;
                    after[k] = to;
                    map.values_along::<E>(g, (&after, us), l, ok, (*values, six), |q, v| {
                        out[q.index()].add_move_into(v)
                    })?;
                }
                _ => add_all(out, ok, E::DRAW),
            }
        }
        // By `l`, from every square that attacks `to`, onto the same position.
        if l_ours {
            let from = qs & attacks(lp, to, occ);
            if from.is_empty() || shields(our_king, occ, skip, pawns) != Bitboard::ALL {
                continue;
            }
            let v = match &target {
                CaptureTarget::Read(values, six, map) => {
                    let d = g.line_position(line, l, from.first().expect("not empty"));
                    map.value::<E>(g, &d, l, to, *values, six)?
                }
                _ => E::DRAW,
            };
            add_all(out, from, v);
        }
    }
    // Captures of `l` by our men.
    if !l_ours {
        let target = target(Ok(l));
        if let CaptureTarget::Unknown = target {
            return Ok(false);
        }
        for k in g.side(us) {
            let from = sq[k];
            let occupied = occ.without(from);
            let mut ok = qs & attacks(g.men[k], from, occ);
            if g.is_king(k) {
                // Our king on `q`: not attacked there by their other men or their pawns.
                for j in g.side(them).filter(|&j| j != l) {
                    ok &= !attacks(g.men[j], sq[j], occupied);
                }
                for p in their_pawns {
                    ok &= !pawn_attacks(them, p);
                }
            } else {
                // Our man on `q` may shield our king.
                ok &= shields(our_king, occupied, l, their_pawns);
            }
            if ok.is_empty() {
                continue;
            }
            match &target {
                CaptureTarget::Read(values, six, map) if !g.is_king(k) => {
                    map.values_along::<E>(g, (sq, us), k, ok, (*values, six), |q, v| {
                        out[q.index()].add_move_into(v)
                    })?;
                }
                CaptureTarget::Read(values, six, map) => {
                    for q in ok {
                        let d = g.line_position(line, l, q);
                        out[q.index()].add_move_into(map.value::<E>(g, &d, k, q, *values, six)?);
                    }
                }
                _ => add_all(out, ok, E::DRAW),
            }
        }
    }
    Ok(true)
}

/// The exits of a position of a pawnless slice (in check or not): its legal captures, played
/// on the placement and read by index from the successor slices.
#[inline]
pub(super) fn exits_by_captures<E: ExitSet>(
    g: &Geometry,
    d: &Decoded,
    our_king: Square,
    captures: &[Option<CaptureExit<'_>>],
) -> Result<E, SolveError> {
    let us = d.turn;
    let them = us.other();
    // True if, with the men of `them` but `skip` on their squares and `occupied`, our king on
    // `king` is attacked.
    let attacked_after = |king: Square, occupied: Bitboard, skip: usize| {
        g.side(them)
            .filter(|&j| j != skip)
            .any(|j| attacks(g.men[j], d.squares[j], occupied).contains(king))
    };
    let mut exits = E::default();
    let mut victims = Bitboard::EMPTY;
    for j in g.side(them).filter(|&j| !g.is_king(j)) {
        victims = victims.with(d.squares[j]);
    }
    for k in g.side(us) {
        let from = d.squares[k];
        let targets = attacks(g.men[k], from, d.occupied) & victims;
        for to in targets {
            let m = g
                .side(them)
                .find(|&j| d.squares[j] == to)
                .expect("a victim stands there");
            let occupied = d.occupied.without(from);
            let king = if g.is_king(k) { to } else { our_king };
            if attacked_after(king, occupied, m) {
                continue; // Not a legal move.
            }
            let exit = captures[m]
                .as_ref()
                .expect("a man that is not a king has a capture exit");
            let v = match &exit.target {
                None => E::DRAW,
                Some((values, six, map)) => map.value::<E>(g, d, k, to, *values, six)?,
            };
            exits.add_move_into(v);
        }
    }
    Ok(exits)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::solver::paging;
    use crate::solver::reference::solve_slice_reference;
    use crate::tables::SliceMap;
    use std::sync::atomic::AtomicBool;

    fn max_plies(values: &[u16], side: usize) -> u16 {
        let half = values.len() / 2;
        values[side * half..(side + 1) * half]
            .iter()
            .filter_map(|&r| Value::from_raw(r))
            .map(|v| match v {
                Value::Win(n) | Value::Loss(n) => n,
                Value::Draw => 0,
            })
            .max()
            .unwrap()
    }

    /// KQvK and KRvK need no other table (a capture of the lone piece leaves bare kings).
    #[test]
    fn kqk_and_krk_longest_mates() {
        for (name, plies) in [("KQvK", 19), ("KRvK", 31)] {
            let key = SliceKey::pawnless(name.parse().unwrap());
            let v1 = solve_slice(&key, &SliceMap::new(), 1).unwrap();
            assert_eq!(max_plies(&v1, 0), plies, "{name}");
            let v2 = solve_slice(&key, &SliceMap::new(), 2).unwrap();
            assert!(v1 == v2, "{name}: thread count changed the values");
        }
    }

    /// The solver and the first solver (move counters, `Position`s) give the same values: like
    /// men, captures into other tables, both kings' symmetries.
    #[test]
    fn agrees_with_the_reference_solver() {
        let mut map = SliceMap::new();
        for name in [
            "KQvK", "KRvK", "KBvK", "KNvK", "KQQvK", "KRRvK", "KBBvK", "KQvKR", "KRvKR", "KBNvK",
        ] {
            let key = SliceKey::pawnless(name.parse().unwrap());
            let new = solve_slice(&key, &map, 2).unwrap();
            let old = solve_slice_reference(&key, &map, 1).unwrap();
            let diff = new.iter().zip(&old).position(|(a, b)| a != b);
            assert!(
                diff.is_none(),
                "{name}: first difference at index {diff:?}: {:?}",
                diff.map(|i| (new[i], old[i], SliceIndexer::new(key).position(i as u64)))
            );
            assert_eq!(new.len(), old.len());
            map.insert(key, new.into());
        }
    }

    /// The side with the pawn owns the line man too (White's knight), so the plain pushes read
    /// by lines (`PawnExits::line_pushes`) are blocked and unpinned by a man of the mover; in
    /// KRvKP the line man is the other side's. Promotions lead to 4-man pawnless slices.
    #[test]
    fn agrees_with_the_reference_solver_when_the_mover_has_the_pawn_and_the_line_man() {
        let key = SliceKey::all_of("KNPvK".parse().unwrap())[0];
        assert!(
            Geometry::new(&key).line_man().is_some(),
            "KNPvK is solved by lines"
        );
        let mut map = SliceMap::new();
        let mut compared = 0;
        for key in SliceKey::all_of("KNPvK".parse().unwrap()) {
            solve_both(key, &mut map, &mut compared);
        }
        assert!(compared > 10_000_000, "only {compared} indices compared");
    }

    /// A random number generator for the tests (xorshift).
    fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        }
    }

    /// Inits every `step`-th line of 64 of `key` by lines (`init_line`) and each of its indices
    /// one by one (`init_index`), against successors of random values (draws, wins and losses
    /// of up to 300 plies; 0, no position, where two men share a square, so that reading one
    /// fails), and checks that both set the same state; returns the lines and the indices set
    /// to anything but illegal or plain.
    fn init_by_lines_and_by_index(
        key: SliceKey,
        step: usize,
        random: &mut impl FnMut() -> u64,
    ) -> (u64, u64) {
        let mut map = SliceMap::new();
        for s in key.successors() {
            let six = SliceIndexer::new(s);
            let values: Vec<u16> = (0..six.size())
                .map(|i| {
                    let placement = six.placement(i);
                    let mut on = six.pawns();
                    for &q in &placement.squares[..six.men().len()] {
                        if on.contains(q) {
                            return 0;
                        }
                        on = on.with(q);
                    }
                    1 + (random() % 300) as u16
                })
                .collect();
            map.insert(s, values.into());
        }
        let g = Geometry::new(&key);
        let l = g.line_man().expect("solved by lines");
        let ctx = Context {
            g: &g,
            key,
            succ: &map,
            captures: capture_exits(&g, &key, &map),
            pawn_exits: PawnExits::new(&g, &key, &map),
        };
        assert!(
            ctx.pawn_exits.is_some() || ctx.captures.is_some(),
            "the successors are arrays"
        );
        let n = g.ix.size() as usize;
        let (by_lines, by_index) = (State::new(n, false), State::new(n, false));
        let mut pushes = LinePushes::default();
        let (mut lines, mut set) = (0, 0);
        for base in (0..n).step_by(64 * step) {
            init_line(&ctx, &by_lines, l, base, &mut pushes).unwrap();
            for i in base..base + 64 {
                init_index(&ctx, &by_index, i).unwrap();
                let (a, b) = (by_lines.get(i), by_index.get(i));
                assert_eq!(a, b, "{key}: index {i} ({:?})", g.ix.position(i as u64));
                if a != S_ILLEGAL && a != S_MAY_LOSE {
                    set += 1;
                }
                if let (Some(x), Some(y)) = (by_lines.waits_for(i, a), by_index.waits_for(i, b)) {
                    assert_eq!(x, y, "{key}: index {i}");
                }
            }
            lines += 1;
        }
        (lines, set)
    }

    /// Init by lines (`init_line`, with the plain pushes and the captures by men read by lines)
    /// sets every index as init index by index does: KRPvKR with the pawn on d4 (Black's rook
    /// pins it against its king along the rank; White's rook, the line man, blocks its way or
    /// the pin, or takes Black's rook) and on b2 (double pushes); KRvKP and KQvKP (the pawn
    /// Black's: taken by White's men, the line man among them, checking a king that takes a
    /// man, or promoting), and KNPvK (the line man a knight; the pawn promoting on b8).
    #[test]
    fn init_by_lines_sets_what_init_by_index_sets() {
        let mut random = xorshift(0x9e37_79b9_7f4a_7c15);
        let square = |s: &str| Bitboard::EMPTY.with(Square::parse(s).unwrap());
        let cases = [
            ("KRPvKR", "d4", "", 3),
            ("KRPvKR", "b2", "", 3),
            ("KNPvK", "b7", "", 1),
            ("KRvKP", "", "c2", 1),
            ("KRvKP", "", "b5", 1),
            ("KQvKP", "", "d3", 1),
            ("KNPvK", "a6", "", 1),
        ];
        for (material, white, black, step) in cases {
            let key = SliceKey {
                material: material.parse().unwrap(),
                white_pawns: if white.is_empty() {
                    Bitboard::EMPTY
                } else {
                    square(white)
                },
                black_pawns: if black.is_empty() {
                    Bitboard::EMPTY
                } else {
                    square(black)
                },
            };
            assert_eq!(key.canonical(), (key, false), "{key}");
            let (lines, set) = init_by_lines_and_by_index(key, step, &mut random);
            assert!(
                lines > 3_000 && set > 2 * lines,
                "{key}: {lines} lines, {set} set"
            );
        }
    }

    /// The same for pawnless slices, whose captures are read by lines
    /// (`line_exits_by_captures`): the line man the mover's (captures by it, and of other men
    /// past it or with it shielding the king) or the other side's (captures of it, by a king
    /// too); captures into slices stored with colours swapped, into bare kings, and next to a
    /// pair of like men (KNNvKR, whose line man is Black's rook); a slider of either side
    /// taking a man with the line man perhaps in its way (KRBvKN, KBNvKB, KQRvKR: every 1024th
    /// line, the state's untouched pages never allocated).
    #[test]
    fn pawnless_init_by_lines_sets_what_init_by_index_sets() {
        let mut random = xorshift(0x2545_f491_4f6c_dd1d);
        let cases = [
            ("KQvKR", 1),
            ("KRvKN", 1),
            ("KBNvK", 1),
            ("KQvKQ", 1),
            ("KNNvKR", 11),
            ("KRBvKN", 1024),
            ("KBNvKB", 1024),
            ("KQRvKR", 1024),
        ];
        for (name, step) in cases {
            let key = SliceKey::pawnless(name.parse().unwrap());
            assert!(
                Geometry::new(&key).line_man().is_some(),
                "{name} is solved by lines"
            );
            let (lines, set) = init_by_lines_and_by_index(key, step, &mut random);
            assert!(
                lines > 3_000 && set > 2 * lines,
                "{key}: {lines} lines, {set} set"
            );
        }
    }

    /// Solves `key` after every slice it leads into (recursively, each once), with both solvers,
    /// and checks that they agree index by index.
    fn solve_both(key: SliceKey, map: &mut SliceMap, compared: &mut u64) {
        if map.contains(&key) {
            return;
        }
        for s in key.successors() {
            solve_both(s, map, compared);
        }
        let new = solve_slice(&key, &*map, 2).unwrap();
        let old = solve_slice_reference(&key, &*map, 1).unwrap();
        assert_eq!(new.len(), old.len());
        if let Some(i) = new.iter().zip(&old).position(|(a, b)| a != b) {
            panic!(
                "{key}: index {i} ({:?}): solver {} but reference {}",
                SliceIndexer::new(key).position(i as u64),
                new[i],
                old[i]
            );
        }
        // Without the bitmaps of changed positions (a tight memory budget): the same values.
        let mut flagged = Vec::new();
        solve_slice_into(&key, &*map, 2, false, &mut |v| {
            flagged.extend_from_slice(v);
            Ok(())
        })
        .unwrap();
        assert!(flagged == new, "{key}: without the changed bitmaps");
        *compared += new.len() as u64;
        map.insert(key, new.into());
    }

    /// The same with pawns: every slice of KPvKP, KPPvK and KRvKP, and of every material they
    /// convert into (promotions to Q, R, B, N included), solved by both solvers.
    /// Solves `key` into `map`, its successors first.
    pub(in crate::solver) fn solve_into(key: SliceKey, map: &mut SliceMap) {
        if map.contains(&key) {
            return;
        }
        for s in key.successors() {
            solve_into(s, map);
        }
        let values = solve_slice(&key, &*map, 2).unwrap();
        map.insert(key, values.into());
    }

    /// The promoting slices of KPvK (no line man) and of KRPvK (by lines), solved together on
    /// 1 and 2 threads, one per thread or one after the other, with and without the bitmaps of
    /// changed positions: each gets the values it gets alone.
    #[test]
    fn slices_solved_together_get_their_own_values() {
        let mut map = SliceMap::new();
        for name in ["KPvK", "KRPvK"] {
            let keys: Vec<SliceKey> = SliceKey::all_of(name.parse().unwrap())
                .into_iter()
                .filter(|k| init_together(&[*k, *k]))
                .collect();
            assert_eq!(keys.len(), 4, "{name}: a pawn on the 7th rank, files a-d");
            assert!(init_together(&keys));
            for k in &keys {
                for s in k.successors() {
                    solve_into(s, &mut map);
                }
            }
            let alone: Vec<Vec<u16>> = keys.iter().map(|k| solve_slice(k, &map, 1).unwrap()).collect();
            for (threads, by_slice, changed_bits) in [(1, true, true), (2, true, true), (2, false, false)] {
                let slices: Vec<(SliceKey, &dyn Successors)> =
                    keys.iter().map(|k| (*k, &map as &dyn Successors)).collect();
                let mut got: Vec<Vec<u16>> = vec![Vec::new(); keys.len()];
                let mut sinks: Vec<_> = got
                    .iter_mut()
                    .map(|out| {
                        move |v: &[u16]| {
                            out.extend_from_slice(v);
                            Ok(())
                        }
                    })
                    .collect();
                let sinks: Vec<Sink<'_>> = sinks.iter_mut().map(|f| f as Sink<'_>).collect();
                solve_slices_into(&slices, threads, by_slice, changed_bits, sinks).unwrap();
                for ((k, values), alone) in keys.iter().zip(&got).zip(&alone) {
                    assert!(
                        values == alone,
                        "{k} on {threads} thread(s), by slice {by_slice}: not its values alone"
                    );
                }
            }
        }
    }

    /// A slice of KRPvK (by lines, with the bitmaps of changed positions) solved on one thread
    /// of a run that lends it threads: one from its first pass (its bitmaps grow from one to
    /// two there), and three lent one by one while it is solved (at whatever passes they come).
    /// Each time the values of the slice solved alone.
    #[test]
    fn threads_lent_to_a_slice_leave_its_values() {
        let key = SliceKey::all_of("KRPvK".parse().unwrap())
            .into_iter()
            .find(|k| k.to_string().ends_with("[Pd4]"))
            .expect("a pawn on d4");
        let mut map = SliceMap::new();
        solve_into(key, &mut map);
        let alone = solve_slice(&key, &map, 1).unwrap();
        let solved_lent = |lent: &Lent| {
            let mut values = Vec::new();
            lent.solving(|| {
                solve_slice_resumable(&key, &map, (1, true), None, None, Some(lent), &mut |v| {
                    values.extend_from_slice(v);
                    Ok(())
                })
            })
            .unwrap();
            values
        };
        let from_the_start = Lent::default();
        from_the_start.lend();
        assert_eq!(from_the_start.threads(1), 2);
        assert!(
            solved_lent(&from_the_start) == alone,
            "{key}: a thread lent from the start"
        );
        let by_and_by = Lent::default();
        let got = std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..3 {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    by_and_by.lend();
                }
            });
            solved_lent(&by_and_by)
        });
        assert!(got == alone, "{key}: threads lent while it is solved");
    }

    /// Solves `key` (its successors in `map`) with a checkpoint at every ply: the first run is
    /// stopped once its first checkpoint is on disk, and every run after it is asked to stop
    /// from its start, so that it resumes from the last checkpoint, runs one ply and writes
    /// the next; the runs alternate between 1 and 2 threads. Returns the values and the runs.
    fn solve_resumed_at_every_ply(key: SliceKey, map: &SliceMap, changed_bits: bool) -> (Vec<u16>, usize) {
        solve_resumed_paged(key, map, changed_bits, None)
    }

    /// [`solve_resumed_at_every_ply`], the state paged by `paging` if given.
    fn solve_resumed_paged(
        key: SliceKey,
        map: &SliceMap,
        changed_bits: bool,
        paging: Option<&Paging>,
    ) -> (Vec<u16>, usize) {
        let dir = tempfile::tempdir().unwrap();
        let stop = AtomicBool::new(false);
        let c = Checkpoints {
            dir: dir.path(),
            every: std::time::Duration::ZERO,
            stop: &stop,
        };
        let mut runs = 0;
        loop {
            let mut values = Vec::new();
            let threads = 1 + runs % 2;
            let solved = std::thread::scope(|s| {
                if runs == 0 {
                    let (path, stop) = (c.checkpoint_path(&key), &stop);
                    s.spawn(move || {
                        let start = std::time::Instant::now();
                        while !path.exists() && start.elapsed().as_secs() < 60 {
                            std::thread::sleep(std::time::Duration::from_micros(100));
                        }
                        stop.store(true, Relaxed);
                    });
                }
                solve_slice_resumable(
                    &key,
                    map,
                    (threads, changed_bits),
                    Some(&c),
                    paging,
                    None,
                    &mut |v| {
                        values.extend_from_slice(v);
                        Ok(())
                    },
                )
            });
            runs += 1;
            match solved {
                Ok(()) => return (values, runs),
                Err(SolveError::Interrupted) => {
                    assert!(values.is_empty(), "{key}: values out of a stopped run");
                    assert!(
                        c.checkpoint_path(&key).exists(),
                        "{key}: stopped without a checkpoint"
                    );
                    stop.store(true, Relaxed);
                }
                Err(e) => panic!("{key}: {e}"),
            }
            assert!(runs < 2000, "{key}: no end");
        }
    }

    /// A slice stopped at every ply and resumed from its checkpoint each time, on 1 and 2
    /// threads in turn, gets the values it gets solved in one go: pawnless by lines (the won
    /// bitmap), without a line man, and with pawns by lines with and without the bitmaps of
    /// changed positions (joined into one in the checkpoint).
    #[test]
    fn slices_resumed_from_a_checkpoint_at_every_ply_get_their_values() {
        let mut map = SliceMap::new();
        for name in ["KQvK", "KRvK", "KBvK", "KNvK", "KPvK", "KBBvK", "KRPvK"] {
            for key in SliceKey::all_of(name.parse().unwrap()) {
                solve_into(key, &mut map);
            }
        }
        let pawnless = SliceKey::pawnless("KRvK".parse().unwrap());
        assert!(Geometry::new(&pawnless).line_man().is_some());
        let no_line = SliceKey::pawnless("KBBvK".parse().unwrap());
        assert!(Geometry::new(&no_line).line_man().is_none());
        let with_pawns = SliceKey::all_of("KRPvK".parse().unwrap())
            .into_iter()
            .max_by_key(|k| SliceIndexer::new(*k).size())
            .unwrap();
        assert!(Geometry::new(&with_pawns).line_man().is_some());
        for (key, changed_bits) in [
            (pawnless, true),
            (no_line, true),
            (with_pawns, true),
            (with_pawns, false),
        ] {
            let whole = solve_slice(&key, &map, 2).unwrap();
            let (resumed, runs) = solve_resumed_at_every_ply(key, &map, changed_bits);
            assert!(runs >= 8, "{key}: only {runs} runs");
            assert!(
                resumed == whole,
                "{key} (changed bits {changed_bits}): resumed {runs} times, other values"
            );
        }
    }

    /// A pawnless slice solved with its state paged through files gets the values it gets in
    /// memory: with room for a handful of K-slices, far fewer than its passes reach at once, so
    /// that K-slices are evicted while they are in use and read back from their files; on 1
    /// and 2 threads, in one go and stopped and resumed from a checkpoint at every ply; by lines
    /// (the won bitmap paged too) and without a line man.
    #[test]
    fn paged_slices_get_their_values() {
        let mut map = SliceMap::new();
        for name in ["KRvK", "KNvK", "KBvK"] {
            solve_into(SliceKey::pawnless(name.parse().unwrap()), &mut map);
        }
        for name in ["KRvKN", "KBBvK"] {
            let key = SliceKey::pawnless(name.parse().unwrap());
            let dir = tempfile::tempdir().unwrap();
            let paging = Paging {
                dir: dir.path().to_path_buf(),
                resident: 32 * 4096,
            };
            let whole = solve_slice(&key, &map, 2).unwrap();
            let threads: &[usize] = if name == "KRvKN" { &[1, 2] } else { &[2] };
            for &threads in threads {
                let before = paging::evictions();
                let mut paged = Vec::new();
                solve_slice_resumable(&key, &map, (threads, true), None, Some(&paging), None, &mut |v| {
                    paged.extend_from_slice(v);
                    Ok(())
                })
                .unwrap();
                assert!(paging::evictions() > before + 1000, "{key}: hardly any evictions");
                assert!(paged == whole, "{key} paged on {threads} thread(s): other values");
            }
            if name == "KRvKN" {
                // Held in huge pages (as K-slices of 2 MiB or more are): far more than the
                // budget in one unit, evicted again and again while in use.
                paging::FORCE_HUGE.store(true, Relaxed);
                let before = paging::evictions();
                let mut paged = Vec::new();
                let r = solve_slice_resumable(&key, &map, (2, true), None, Some(&paging), None, &mut |v| {
                    paged.extend_from_slice(v);
                    Ok(())
                });
                paging::FORCE_HUGE.store(false, Relaxed);
                r.unwrap();
                assert!(paging::evictions() > before + 1000, "{key}: hardly any evictions");
                assert!(paged == whole, "{key} paged in huge pages: other values");
                let (resumed, runs) = solve_resumed_paged(key, &map, true, Some(&paging));
                assert!(runs >= 8, "{key}: only {runs} runs");
                assert!(
                    resumed == whole,
                    "{key} paged and resumed {runs} times: other values"
                );
                // Half the state's budget: most of it pinned, the rest paged through the window;
                // in one go, and resumed at every ply (the pinned pages restored too).
                let n = SliceIndexer::new(key).size();
                let half = Paging {
                    dir: dir.path().to_path_buf(),
                    resident: (n + n / 8) / 2,
                };
                let (pinned, evicted) = (paging::pinned(), paging::evictions());
                let mut paged = Vec::new();
                solve_slice_resumable(&key, &map, (2, true), None, Some(&half), None, &mut |v| {
                    paged.extend_from_slice(v);
                    Ok(())
                })
                .unwrap();
                assert!(paging::pinned() > pinned + n / 4, "{key}: hardly anything pinned");
                assert!(paging::evictions() > evicted + 100, "{key}: hardly any evictions");
                assert!(paged == whole, "{key} pinned and paged: other values");
                let (resumed, runs) = solve_resumed_paged(key, &map, true, Some(&half));
                assert!(runs >= 8, "{key}: only {runs} runs");
                assert!(resumed == whole, "{key} pinned, paged and resumed: other values");
            }
            // The state's files are unlinked at once: nothing is left in the folder.
            let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
            assert!(left.is_empty(), "{key}: {left:?} left behind");
        }
    }

    /// A checkpoint is trusted only whole: a flipped byte, a cut file, a log of plies cut
    /// short, or another slice's checkpoint are refused with the reason, and the slice is then
    /// solved from the start to the same values.
    #[test]
    fn damaged_or_foreign_checkpoints_are_refused() {
        let map = SliceMap::new();
        let key = SliceKey::pawnless("KQvK".parse().unwrap());
        let g = Geometry::new(&key);
        let whole = solve_slice(&key, &map, 2).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let stop = AtomicBool::new(false);
        let c = Checkpoints {
            dir: dir.path(),
            every: std::time::Duration::ZERO,
            stop: &stop,
        };
        // A checkpoint after the first ply: the second run of a stopped build.
        let (_, _) = solve_resumed_at_every_ply(key, &map, true);
        let stopped_after_a_ply = || {
            c.remove(&key);
            stop.store(false, Relaxed);
            let path = c.checkpoint_path(&key);
            std::thread::scope(|s| {
                s.spawn(|| {
                    while !path.exists() {
                        std::thread::sleep(std::time::Duration::from_micros(50));
                    }
                    stop.store(true, Relaxed);
                });
                let r = solve_slice_resumable(&key, &map, (2, true), Some(&c), None, None, &mut |_| Ok(()));
                assert!(matches!(r, Err(SolveError::Interrupted)), "{r:?}");
            });
            std::fs::read(&path).unwrap()
        };
        let good = stopped_after_a_ply();
        assert!(checkpoint::load(&c, &key, &g, 2, true, None).unwrap().is_some());
        let reason = |c: &Checkpoints<'_>| match checkpoint::load(c, &key, &g, 1, true, None) {
            Err(why) => why,
            Ok(r) => panic!("accepted: {:?}", r.map(|r| r.at)),
        };
        let path = c.checkpoint_path(&key);
        let mut flipped = good.clone();
        flipped[good.len() / 2] ^= 0x10;
        std::fs::write(&path, &flipped).unwrap();
        assert!(reason(&c).contains("hash"), "{}", reason(&c));
        std::fs::write(&path, &good[..good.len() - 100]).unwrap();
        assert!(reason(&c).contains("hash"), "{}", reason(&c));
        std::fs::write(&path, &good[..10]).unwrap();
        assert!(reason(&c).contains("hash"), "{}", reason(&c));
        std::fs::write(&path, &good).unwrap();
        let log = std::fs::read(c.log_path(&key)).unwrap();
        std::fs::write(c.log_path(&key), &log[..log.len() / 2]).unwrap();
        assert!(reason(&c).contains("log"), "{}", reason(&c));
        std::fs::write(c.log_path(&key), &log).unwrap();
        // Another slice's checkpoint under this slice's name.
        let other = SliceKey::pawnless("KRvK".parse().unwrap());
        std::fs::rename(&path, c.checkpoint_path(&other)).unwrap();
        std::fs::rename(c.log_path(&key), c.log_path(&other)).unwrap();
        match checkpoint::load(&c, &other, &Geometry::new(&other), 1, true, None) {
            Err(why) => assert!(why.contains("another slice"), "{why}"),
            Ok(r) => panic!("another slice's checkpoint accepted: {:?}", r.map(|r| r.at)),
        }
        std::fs::rename(c.checkpoint_path(&other), &path).unwrap();
        std::fs::rename(c.log_path(&other), c.log_path(&key)).unwrap();
        assert!(checkpoint::load(&c, &key, &g, 1, true, None).unwrap().is_some());
        // Damaged, then solved from the start: its values.
        std::fs::write(&path, &flipped).unwrap();
        stop.store(false, Relaxed);
        let mut values = Vec::new();
        solve_slice_resumable(&key, &map, (2, true), Some(&c), None, None, &mut |v| {
            values.extend_from_slice(v);
            Ok(())
        })
        .unwrap();
        assert!(values == whole);
    }

    #[test]
    fn agrees_with_the_reference_solver_with_pawns() {
        let mut map = SliceMap::new();
        let mut compared = 0;
        for name in ["KPvKP", "KPPvK", "KRvKP"] {
            for key in SliceKey::all_of(name.parse().unwrap()) {
                solve_both(key, &mut map, &mut compared);
            }
        }
        assert!(compared > 20_000_000, "only {compared} indices compared");
    }
}
