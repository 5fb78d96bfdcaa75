//! DTZ50 of a slice: the plies to the next zeroing move or mate under the 50-move rule, exact
//! (see `zermelo_chess::dtz`), by a retrograde over the slice's own moves.
//!
//! In Zermelo's slicing every zeroing move leaves the slice (a capture changes the material, a
//! pawn move the pawns) and every other move stays inside it; so a zeroing move is an *exit*,
//! valued by the class of the position after it alone (win in 1 or 101 plies, draw, loss in
//! 101 or 1), read from the successors' DTZ50 tables; the moves inside count one ply each.
//! Unlike mate distances, wins and losses come at any distance, both in the same pass:
//!
//! 1. *Exits*: every position's zeroing moves are valued; the best is kept, with mates (lost in
//!    0) and stalemates; moves inside the slice are counted. A winning exit makes a position a
//!    win in its distance unless one inside comes sooner; a drawing one keeps it from losing.
//! 2. *Passes*, one per distance `d` from 0: from the positions whose value is exactly `d`
//!    plies, un-move to their predecessors. A predecessor of a loss in `d` wins in `d + 1`; a
//!    predecessor of a win loses one inside move, and with none left it loses in `d + 1`, or
//!    in 101 if an exit holds out that long. Exits give only 1 and 101, so the positions that
//!    are decided other than through the pass before wait for distance 1 or 101.
//! 3. *Finish*: what is still undecided is a draw.
//!
//! About 2.25 bytes per index: a 16-bit cell each, which becomes the value in place, and two
//! bitmaps. The passes cost an un-move generation per decided position, by the mate solver's
//! index arithmetic ([`Geometry`]), a line of 64 positions at a time where the lowest field is
//! a lone man; the exits (read by index from the successors' values where they are at hand, as
//! the mate solver reads them) and the counts are found a line at a time there too, else
//! position by position. It needs no table of mates; only where its caller gives the draws of
//! the slice's table of mates
//! ([`DtzSuccessors::known_draws`]) are those set without a move generated (a draw ignoring the
//! rule is a draw under it). Its values are checked by `verify`, and against Syzygy's tables
//! (see `docs/dtz50.md`).

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering::Relaxed};

use tracing::debug;
use zermelo_chess::attacks::{attacks, pawn_attacks};
use zermelo_chess::dtz::{Dtz, RULE_PLIES};
use zermelo_chess::index::SliceIndexer;
use zermelo_chess::slice::SliceKey;
use zermelo_chess::{Bitboard, Move, Position, Role, Square};

use super::geometry::{kings, unmap_bb, Decoded, Geometry};
use super::memory::{atomic_u16s, atomic_u64s, Deferred};
use super::par::for_each_chunk;
use super::pawn_exits::{ahead, beside, CaptureTarget, ExitSet, PawnExits};
use super::reference::legal_position;
use super::retrograde::{
    capture_exits_with, exits_by_captures, line_attacked, line_exits_by_captures, line_legal,
    pawnless_target, CaptureExit,
};
use super::{SliceValuesRef, SolveError};

/// DTZ50 values of positions outside the slice being solved.
pub trait DtzSuccessors: Sync {
    /// The DTZ50 value, for the side to move with the halfmove clock at 0, of a legal position
    /// reached by a zeroing move (it may have an en-passant square).
    fn dtz_of(&self, pos: &Position) -> Result<Dtz, SolveError>;

    /// Sets `draws[k]` if index `first + k` of slice `key` (the slice being solved) is known to
    /// be drawn without the rule, so drawn with it too (the rule only turns wins and losses into
    /// draws): from the slice's table of mates, when there is one. Such a position needs no
    /// move generated. The others are left as they are; the default knows none.
    fn known_draws(&self, key: &SliceKey, first: u64, draws: &mut [bool]) -> Result<(), SolveError> {
        let _ = (key, first, draws);
        Ok(())
    }

    /// The raw DTZ50 values (as [`Dtz::raw`], for the side to move with the halfmove clock at
    /// 0; 0 where an index is not a legal position) of indices `first..first + out.len()` of
    /// slice `key`, a slice of the material being built that a pawn push leads into: `false`
    /// if they are not at hand (the pushes are then looked at position by position). The
    /// default has none.
    fn solved_values(&self, key: &SliceKey, first: u64, out: &mut [u16]) -> Result<bool, SolveError> {
        let _ = (key, first, out);
        Ok(false)
    }

    /// The raw DTZ50 values (as [`DtzSuccessors::solved_values`]) of successor slice `key`,
    /// readable by index: with every successor's, the captures and promotions of a line are
    /// read by index arithmetic, without a position built ([`ByIndex`]). The default has none.
    fn slice_values(&self, key: &SliceKey) -> Option<SliceValuesRef<'_>> {
        let _ = key;
        None
    }
}

// A cell: 0 where an index is not a position (or not looked at yet); a final value's raw
// code (below `UNDECIDED`); or an undecided position: `UNDECIDED`, with `NO_LOSS` if it cannot
// lose (it has a drawing or winning exit), `LATE_EXIT` if an exit decides it at 101 (a
// position that may lose: its slowest losing exit; one that cannot: a winning exit), and in
// bits 0-7 its count of inside moves not yet known to lose.
const NONE: u16 = 0;
const UNDECIDED: u16 = 0x8000;
const NO_LOSS: u16 = 0x4000;
const LATE_EXIT: u16 = 0x2000;
const COUNT: u16 = 0xff;
/// The largest distance a final cell holds (its raw code below `UNDECIDED`).
const MAX_CELL_DTZ: u16 = (UNDECIDED - 4) / 2;

/// The distance exits decide at besides 1: a cursed win or a blessed loss.
const LATE: u16 = RULE_PLIES + 1;

struct Cells {
    cells: Vec<AtomicU16>,
    /// Positions whose value is final at the distance of the pass (`frontier[d % 2]`), and at
    /// the next.
    frontier: [Vec<AtomicU64>; 2],
    /// Whether a bit of `frontier[k]` may have been set since it was last emptied: the pass
    /// that finds it clear needs no look at the bitmap's words.
    filled: [AtomicBool; 2],
    /// Whether a position is decided at 101 other than through the pass before (final there,
    /// or undecided with a winning exit in 101): the pass of 101 looks for them first.
    any_late: AtomicBool,
}

impl Cells {
    #[inline]
    fn set_bit(map: &[AtomicU64], i: usize) {
        let (w, b) = (&map[i / 64], 1u64 << (i % 64));
        if w.load(Relaxed) & b == 0 {
            w.fetch_or(b, Relaxed);
        }
    }

    /// Value `v`, final at distance `d`, set by the pass of `pass` (or the init, 0).
    fn decide(&self, i: usize, v: Dtz, d: u16, pass: u16) {
        self.cells[i].store(v.raw(), Relaxed);
        self.join(i, d, pass);
    }

    /// Index `i`, decided at distance `d` by the pass of `pass` (or the init, 0): joins the
    /// frontier of `d` (1, or the next pass's), or waits for 101.
    fn join(&self, i: usize, d: u16, pass: u16) {
        if d == LATE && d > pass + 1 {
            self.any_late.store(true, Relaxed);
        } else {
            Cells::set_bit(&self.frontier[d as usize % 2], i);
            let filled = &self.filled[d as usize % 2];
            if !filled.load(Relaxed) {
                filled.store(true, Relaxed);
            }
        }
    }

    /// Before the pass of 101, the indices of frontier word `w` decided at 101 other than
    /// through the pass before: undecided with a winning exit in 101 (won there), or final at
    /// 101 already.
    fn late_word(&self, w: usize) {
        let n = self.cells.len();
        let mut bits = 0u64;
        for i in w * 64..n.min(w * 64 + 64) {
            let c = self.cells[i].load(Relaxed);
            if c & (UNDECIDED | NO_LOSS | LATE_EXIT) == UNDECIDED | NO_LOSS | LATE_EXIT {
                self.cells[i].store(Dtz::Win(LATE).raw(), Relaxed);
            } else if c != Dtz::Win(LATE).raw() && c != Dtz::Loss(LATE).raw() {
                continue;
            }
            bits |= 1 << (i % 64);
        }
        if bits != 0 {
            self.frontier[LATE as usize % 2][w].fetch_or(bits, Relaxed);
            self.filled[LATE as usize % 2].store(true, Relaxed);
        }
    }
}

/// How far [`solve_slice_dtz50`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DtzStep {
    /// `n` more indices were looked at before the passes (told now and then).
    Inited(u64),
    /// The pass of this distance begins.
    Pass(u16),
}

/// The DTZ50 values of slice `key` (the raw codes of [`Dtz`], 0 where an index is not a
/// position). `threads` does not change them. `report` is told how far the work is.
pub fn solve_slice_dtz50(
    key: &SliceKey,
    succ: &dyn DtzSuccessors,
    threads: usize,
    report: &(dyn Fn(DtzStep) + Sync),
) -> Result<Vec<u16>, SolveError> {
    let ix = SliceIndexer::new(*key);
    let n = ix.size() as usize;
    let start = std::time::Instant::now();
    let words = n.div_ceil(64);
    // Zeroed by the allocator and not touched here: the pages are first written by the init's
    // threads, in parallel (KRNvKNN's 15 GB of cells, written here by one thread, kept the
    // build from starting for half a minute).
    let bitmap = || atomic_u64s(words);
    let cells = Cells {
        cells: atomic_u16s(n),
        frontier: [bitmap(), bitmap()],
        filled: [AtomicBool::new(false), AtomicBool::new(false)],
        any_late: AtomicBool::new(false),
    };
    let g = Geometry::new(key);

    // 1. Exits, mates, stalemates, inside-move counts.
    match g.line_man() {
        Some(l) => init_by_lines(&g, l, &cells, key, succ, threads, report)?,
        None => init_by_positions(&g, &cells, key, succ, threads, report)?,
    }

    debug!(slice = %key, seconds = start.elapsed().as_secs_f64(), "DTZ50 of a slice: exits looked at");

    // 2. Passes, one per distance, while a frontier or a late decision is left. Where the
    // lowest field is a lone man, a frontier word is a line of 64 positions, un-moved at once.
    let line_man = g.line_man();
    let mut d: u16 = 0;
    loop {
        report(DtzStep::Pass(d));
        if d == LATE && cells.any_late.load(Relaxed) {
            for_each_chunk(words, 64, threads, |range| {
                range.for_each(|w| cells.late_word(w));
                Ok::<(), SolveError>(())
            })?;
        }
        // Nothing sets a bit of this pass's frontier while it runs (its marks are for later
        // distances), so it is empty after it. A word is read before it is cleared: most are
        // 0, and a locked exchange of each cost a large slice's passes more than their
        // un-moves.
        let frontier = &cells.frontier[d as usize % 2];
        let any = AtomicBool::new(false);
        if cells.filled[d as usize % 2].swap(false, Relaxed) {
            for_each_chunk(words, 64, threads, |range| {
                let mut queues = Marks::new(&cells, d);
                for w in range {
                    if frontier[w].load(Relaxed) == 0 {
                        continue;
                    }
                    let mut bits = frontier[w].swap(0, Relaxed);
                    if bits != 0 && !any.load(Relaxed) {
                        any.store(true, Relaxed);
                    }
                    if let Some(l) = line_man {
                        propagate_line(&g, l, &cells, w, bits, &mut queues);
                        continue;
                    }
                    while bits != 0 {
                        let i = w * 64 + bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        propagate(&g, &cells, i, &mut queues);
                    }
                }
                queues.drain();
                Ok::<(), SolveError>(())
            })?;
        }
        let waiting = d < LATE && cells.any_late.load(Relaxed);
        if !any.load(Relaxed) && !waiting && !cells.filled[(d as usize + 1) % 2].load(Relaxed) {
            break;
        }
        if d >= MAX_CELL_DTZ - 1 {
            return Err(SolveError::TooDeep(*key));
        }
        d += 1;
    }
    debug!(slice = %key, passes = d, seconds = start.elapsed().as_secs_f64(), "DTZ50 of a slice solved");

    // 3. Finish: what is undecided is a draw; the cells become the values in place.
    for_each_chunk(n, 1 << 16, threads, |range| {
        for i in range {
            if cells.cells[i].load(Relaxed) & UNDECIDED != 0 {
                cells.cells[i].store(Dtz::Draw.raw(), Relaxed);
            }
        }
        Ok::<(), SolveError>(())
    })?;
    let mut cells = std::mem::ManuallyDrop::new(cells.cells);
    // SAFETY: `AtomicU16` has the size, alignment and bit validity of `u16`, so the buffer is
    // a valid `Vec<u16>` of the same length and capacity, owned by it from here (the original
    // is not dropped).
    Ok(unsafe { Vec::from_raw_parts(cells.as_mut_ptr().cast::<u16>(), cells.len(), cells.capacity()) })
}

/// A legal position not looked at yet, in [`init_by_lines`]: not 0 (the lines that read it
/// meanwhile take it for a position), and no cell once looked at (undecided with no move
/// inside left to count: such a position is final from the start).
const LEGAL: u16 = UNDECIDED;

/// The indices of a chunk of the init, and the progress told for them: a quarter in the first
/// sweep, the rest in the second (KRNvKNN's first takes a minute or so: not a bar standing
/// still).
const CHUNK: usize = 1 << 12;

fn first_share(len: usize) -> u64 {
    len as u64 / 4
}

/// Calls its second argument with each legal index of its first ([`mark_legal`]).
type LegalIn<'a> = dyn Fn(std::ops::Range<usize>, &mut dyn FnMut(usize)) + Sync + 'a;

/// The first sweep of the init: each legal index's cell set to [`LEGAL`], or to a draw where
/// the table of mates has one; `legal(range, f)` calls `f` with each legal index of `range`.
fn mark_legal(
    cells: &Cells,
    key: &SliceKey,
    succ: &dyn DtzSuccessors,
    threads: usize,
    report: &(dyn Fn(DtzStep) + Sync),
    legal: &LegalIn<'_>,
) -> Result<(), SolveError> {
    for_each_chunk(cells.cells.len(), CHUNK, threads, |range| {
        report(DtzStep::Inited(first_share(range.len())));
        let mut draws = vec![false; range.len()];
        succ.known_draws(key, range.start as u64, &mut draws)?;
        let first = range.start;
        legal(range, &mut |i| {
            let code = if draws[i - first] { Dtz::Draw.raw() } else { LEGAL };
            cells.cells[i].store(code, Relaxed);
        });
        Ok::<(), SolveError>(())
    })
}

/// Step 1 of [`solve_slice_dtz50`] for a slice whose lowest field is a lone man `l` (lines of 64
/// indices differ only in its square), in two sweeps. First each legal index's cell is set (to
/// [`LEGAL`], or to a draw where the table of mates has one), a line at a time. Then each
/// position not known drawn, a line at a time: its moves inside the slice (the moves of its men
/// but captures) are counted off the cells (a move's target is legal where its cell is not 0),
/// a move of one man at a time ([`Geometry::for_each_move_line`]); its pawns' pushes are read
/// for the whole line from the slices they lead into, and its plain promotions by index
/// ([`line_pushes`]); its captures by men are read by index for the whole line where the
/// successors are at hand ([`line_exits_by_captures`], [`ByIndex`]), else, and where a pawn can
/// take, the position is built for its captures alone ([`capture_exits`]). A line whose pawn
/// moves are more than plain pushes and promotions into slices at hand (a double push beside an
/// enemy pawn, a push into a mirrored slice) is looked at move by move ([`init_position`]).
/// KQRvKR's init on 2 threads: 11.6 s move by move, 5.5 s so; KRPvKR's DTZ50 build 53 s to 47 s
/// (and to 28 s with the captures and promotions by index, and the passes by lines).
fn init_by_lines(
    g: &Geometry,
    l: usize,
    cells: &Cells,
    key: &SliceKey,
    succ: &dyn DtzSuccessors,
    threads: usize,
    report: &(dyn Fn(DtzStep) + Sync),
) -> Result<(), SolveError> {
    let n = cells.cells.len();
    let legal = |range: std::ops::Range<usize>, f: &mut dyn FnMut(usize)| {
        for base in range.step_by(64) {
            line_legal(g, base, l)
                .into_iter()
                .for_each(|q| f(base + q.index()));
        }
    };
    mark_legal(cells, key, succ, threads, report, &legal)?;
    let ix = &g.ix;
    let by_index = ByIndex::new(g, key, succ);
    for_each_chunk(n, CHUNK, threads, |range| {
        let len = range.len() as u64 - first_share(range.len());
        let mut pushes = Box::new(LinePushes {
            n: 0,
            ok: [Bitboard::EMPTY; MAX_PUSHES],
            values: [[NONE; 64]; MAX_PUSHES],
            promotes: false,
            promoted: [Exits::default(); 64],
        });
        let mut by_captures = [Exits::default(); 64];
        for base in range.step_by(64) {
            let todo = Bitboard(line_mask(cells, base, |c| c == LEGAL));
            if todo.is_empty() {
                continue;
            }
            let line = g
                .decode_line(base as u64, l)
                .expect("a line with positions is placed");
            // Every move of a man but a capture stays inside; the pawns' moves are exits, read
            // by lines where they are plain pushes into slices at hand or plain promotions.
            let pawn_exits = match &by_index {
                Some(ByIndex::Pawns(pe)) => Some(&**pe),
                _ => None,
            };
            let by_lines = g.pawns[line.turn.index()].is_empty()
                || line_pushes(g, key, (&line, l), succ, pawn_exits, &mut pushes)?;
            if !by_lines {
                for q in todo {
                    let legal = init_position(ix, cells, base + q.index(), succ)?;
                    debug_assert!(legal, "index {} legal by its line", base + q.index());
                }
                continue;
            }
            let counts = inside_counts(g, cells, &line, l, todo);
            let (captures, by_pawns) = line_captures(g, &line, l);
            let (our_king, _) = kings(g, &line);
            let in_check = line_attacked(g, &line, l, our_king, line.turn.other());
            // The captures by men, each once for the line, read by index where the slice's
            // successors are at hand; those of a position where a pawn can take too are played
            // on it with the pawn's.
            let by_men = todo & captures & !by_pawns;
            let read = match &by_index {
                Some(b) if by_men.any() => {
                    by_captures = [Exits::default(); 64];
                    line_exits_by_captures(g, &line, l, by_men, &|v| b.target(v), &mut by_captures)?
                }
                _ => false,
            };
            for q in todo {
                let i = base + q.index();
                let mut exits = Exits::default();
                if read && by_men.contains(q) {
                    exits = by_captures[q.index()];
                } else if captures.contains(q) {
                    let pos = ix.position(i as u64).expect("a legal index is a position");
                    exits = capture_exits(&pos, succ)?;
                }
                if pushes.promotes {
                    exits.merge(&pushes.promoted[q.index()]);
                }
                for (ok, values) in pushes.ok[..pushes.n].iter().zip(&pushes.values) {
                    let raw = values[q.index()];
                    if ok.contains(q) && raw != NONE {
                        let v = Dtz::from_raw(raw)
                            .ok_or(SolveError::BadSuccessor {
                                slice: *key,
                                index: i as u64,
                            })?
                            .after_move(true);
                        exits.add(v);
                    }
                }
                set_initial(cells, i, counts[q.index()], exits, in_check.contains(q));
            }
        }
        report(DtzStep::Inited(len));
        Ok::<(), SolveError>(())
    })
}

/// Step 1 of [`solve_slice_dtz50`] for a slice without lines (its lowest field a pair of like
/// men), in two sweeps as [`init_by_lines`] but a position at a time, none built: first each
/// legal index's cell is set (to [`LEGAL`], or to a draw where the table of mates has one); then
/// each position not known drawn has its moves inside the slice counted off the cells (a move's
/// target is legal where its cell is not 0, [`Geometry::for_each_move`]) and its exits read by
/// index ([`ByIndex::exits`]). Where the successors are not at hand by index, or a pawn's double
/// push may allow en passant, the position is looked at move by move ([`init_position`]).
fn init_by_positions(
    g: &Geometry,
    cells: &Cells,
    key: &SliceKey,
    succ: &dyn DtzSuccessors,
    threads: usize,
    report: &(dyn Fn(DtzStep) + Sync),
) -> Result<(), SolveError> {
    let n = cells.cells.len();
    let legal = |range: std::ops::Range<usize>, f: &mut dyn FnMut(usize)| {
        for i in range {
            // Placed, and the side not to move not in check.
            if g.decode(i as u64)
                .is_some_and(|d| !g.attacked(&d, kings(g, &d).1, d.turn))
            {
                f(i);
            }
        }
    };
    mark_legal(cells, key, succ, threads, report, &legal)?;
    let by_index = ByIndex::new(g, key, succ);
    for_each_chunk(n, CHUNK, threads, |range| {
        let len = range.len() as u64 - first_share(range.len());
        for i in range {
            if cells.cells[i].load(Relaxed) != LEGAL {
                continue;
            }
            let d = g.decode(i as u64).expect("a legal index is placed");
            let exits = match &by_index {
                Some(b) => b.exits(g, &d)?,
                None => None,
            };
            let Some(exits) = exits else {
                let legal = init_position(&g.ix, cells, i, succ)?;
                debug_assert!(legal, "index {i} legal by its placement");
                continue;
            };
            let mut inside = 0u16;
            let _ = g.for_each_move(&d, |t| {
                inside += u16::from(cells.cells[t as usize].load(Relaxed) != NONE);
                ControlFlow::Continue(())
            });
            let (our_king, _) = kings(g, &d);
            set_initial(cells, i, inside, exits, g.attacked(&d, our_king, d.turn.other()));
        }
        report(DtzStep::Inited(len));
        Ok::<(), SolveError>(())
    })
}

/// Pushes of the side to move's pawns at most (two for each of eight pawns).
const MAX_PUSHES: usize = 16;

/// The plain pawn pushes of a line's positions ([`line_pushes`]): for each, the squares of the
/// line man where it is not in the pawn's way, and the raw DTZ50 values of the positions after
/// it by square of the line man (0 where the push is not legal: the position after it is not).
/// And if a pawn promotes (`promotes`), the exits of the plain promotions by square of the line
/// man.
struct LinePushes {
    n: usize,
    ok: [Bitboard; MAX_PUSHES],
    values: [[u16; 64]; MAX_PUSHES],
    promotes: bool,
    promoted: [Exits; 64],
}

/// The pushes of the side to move's pawns in line `line`, into `out`, for the 64 positions at
/// once: a push keeps every man on its square, so the positions after it are the same line of
/// the pushed slice with the other side to move, read whole from the slice solved already
/// ([`DtzSuccessors::solved_values`]). `Ok(false)` where a pawn move is anything else for some
/// position of the line: a pawn on its seventh rank (a promotion), a double push beside an enemy
/// pawn (the position after it may have an en-passant capture), a push into a slice stored
/// mirrored, or a slice not at hand. Captures by a pawn are left to the caller. A plain
/// promotion is read by index through `pawn_exits` ([`PawnExits::line_promotions`]) into
/// `out.promoted`; without it, or where it was not worked out once, `Ok(false)` too.
fn line_pushes(
    g: &Geometry,
    key: &SliceKey,
    (line, l): (&Decoded, usize),
    succ: &dyn DtzSuccessors,
    pawn_exits: Option<&PawnExits<'_>>,
    out: &mut LinePushes,
) -> Result<bool, SolveError> {
    let us = line.turn;
    let them = us.other();
    let occ = line.occupied;
    let their_pawns = g.pawns[them.index()];
    let first = line.fields + them.index() as u64 * g.ix.per_side();
    out.n = 0;
    if out.promotes {
        out.promoted = [Exits::default(); 64];
        out.promotes = false;
    }
    for from in g.pawns[us.index()] {
        let one = ahead(us, from);
        if occ.contains(one) {
            continue;
        }
        if one.relative_rank(us) == 7 {
            match pawn_exits {
                Some(pe) if pe.line_promotions(g, line, l, from, &mut out.promoted)? => {
                    out.promotes = true;
                    continue;
                }
                _ => return Ok(false),
            }
        }
        let two = (from.relative_rank(us) == 1)
            .then(|| ahead(us, one))
            .filter(|&t| !occ.contains(t));
        for (to, double) in [(one, false)].into_iter().chain(two.map(|t| (t, true))) {
            if double && (their_pawns & beside(to)).any() {
                return Ok(false);
            }
            let mut pawns = g.pawns;
            pawns[us.index()] = pawns[us.index()].without(from).with(to);
            let (pushed, mirrored) = SliceKey {
                material: key.material,
                white_pawns: pawns[0],
                black_pawns: pawns[1],
            }
            .canonical();
            if mirrored || !succ.solved_values(&pushed, first, &mut out.values[out.n])? {
                return Ok(false);
            }
            // The line man may stand on the pawn's way: not a push there.
            let mut ok = !Bitboard::EMPTY.with(to);
            if double {
                ok = ok.without(one);
            }
            out.ok[out.n] = ok;
            out.n += 1;
        }
    }
    Ok(true)
}

/// The squares of line `line`'s man `l` ([`Geometry::decode_line`]) for which the side to move
/// can take a man (or pawn) of the other side, legally or not: its men attack one (the king is
/// none: the position would be illegal). And those for which a pawn of its can.
fn line_captures(g: &Geometry, line: &Decoded, l: usize) -> (Bitboard, Bitboard) {
    let us = line.turn;
    let them = us.other();
    let sq = &line.squares;
    let mut captures = Bitboard::EMPTY;
    for v in g.pawns[them.index()] {
        captures |= line_attacked(g, line, l, v, us);
    }
    for k in g.side(them).filter(|&k| k != l && !g.is_king(k)) {
        captures |= line_attacked(g, line, l, sq[k], us);
    }
    // The other side's men and pawns but `l` and the king.
    let mut fixed = g.pawns[them.index()];
    for k in g.side(them).filter(|&k| k != l && !g.is_king(k)) {
        fixed = fixed.with(sq[k]);
    }
    let mut by_pawns = Bitboard::EMPTY;
    for p in g.pawns[us.index()] {
        if (pawn_attacks(us, p) & fixed).any() {
            by_pawns = Bitboard::ALL;
        }
    }
    if g.men[l].color == them {
        // `l` is a victim itself: wherever a man or a pawn of ours attacks it.
        for k in g.side(us) {
            captures |= attacks(g.men[k], sq[k], line.occupied);
        }
        for p in g.pawns[us.index()] {
            by_pawns |= pawn_attacks(us, p);
        }
    }
    (captures | by_pawns, by_pawns)
}

/// For the positions `at` of line `line` (squares of its man `l`): how many moves inside the
/// slice each has to a legal position (a cell not 0), by square of `l`: its legal moves that are
/// not captures, when its side to move has no pawn. A move that leaves its own king attacked
/// leads to an illegal index, a capture to no index of the slice (its square is occupied), and
/// [`Geometry::for_each_move_line`] gives each move of another man once.
fn inside_counts(g: &Geometry, cells: &Cells, line: &Decoded, l: usize, at: Bitboard) -> [u16; 64] {
    let mut counts = [0u16; 64];
    let us = line.turn;
    let legal = |first: u64| Bitboard(line_mask(cells, first as usize, |c| c != NONE));
    if g.side(us).contains(&l) {
        // Moves of `l` stay in the line, the other side to move.
        let next = legal(line.fields + us.other().index() as u64 * g.ix.per_side());
        let to = !line.occupied & next;
        for q in at {
            counts[q.index()] += (attacks(g.men[l], q, line.occupied) & to).count() as u16;
        }
    }
    let _ = g.for_each_move_line(l, line, at, |first, squares, sym| {
        for q in unmap_bb(sym, squares & legal(first)) {
            counts[q.index()] += 1;
        }
        ControlFlow::Continue(())
    });
    counts
}

/// The bits of the 64 cells from `first` (a multiple of 64) for which `f(cell)` holds.
#[inline]
fn line_mask(cells: &Cells, first: usize, f: impl Fn(u16) -> bool) -> u64 {
    let mut m = 0u64;
    for (k, c) in cells.cells[first..first + 64].iter().enumerate() {
        m |= u64::from(f(c.load(Relaxed))) << k;
    }
    m
}

/// Looks at one index before the passes: not a position (false), final (no inside move, or a
/// mate), or undecided with its best exit and its count of inside moves.
fn init_position(
    ix: &SliceIndexer,
    cells: &Cells,
    i: usize,
    succ: &dyn DtzSuccessors,
) -> Result<bool, SolveError> {
    let Some(pos) = legal_position(ix, i) else {
        return Ok(false);
    };
    let mut inside: u16 = 0;
    let mut exits = Exits::default();
    for m in pos.legal_moves().iter() {
        if m.leaves_slice() {
            // A zeroing move: 1 or 101 plies (a win or a loss), or a draw.
            exits.add(succ.dtz_of(&pos.play(m))?.after_move(true));
        } else {
            inside += 1;
        }
    }
    set_initial(cells, i, inside, exits, pos.is_check());
    Ok(true)
}

/// The legal captures of `pos` (a position of a slice, so without an en-passant square), by its
/// men and its pawns (a pawn that takes onto its last rank promotes, to each role), each valued
/// as after the move.
fn capture_exits(pos: &Position, succ: &dyn DtzSuccessors) -> Result<Exits, SolveError> {
    let us = pos.turn;
    let them = us.other();
    let board = &pos.board;
    let occupied = board.occupied();
    let their_king = board.king_of(them).expect("a slice has both kings");
    let victims = board.by_color(them).without(their_king);
    let mut exits = Exits::default();
    for from in board.by_color(us) {
        let piece = board.piece_at(from).expect("a man on each square of its colour");
        let pawn = piece.role == Role::Pawn;
        let targets = if pawn {
            pawn_attacks(us, from)
        } else {
            attacks(piece, from, occupied)
        };
        let promotes = pawn && from.relative_rank(us) == 6;
        for to in targets & victims {
            let roles = Role::PROMOTIONS.map(Some);
            let promotions = if promotes { &roles[..] } else { &[None] };
            for &promotion in promotions {
                let m = Move {
                    role: piece.role,
                    from,
                    to,
                    capture: board.piece_at(to).map(|p| p.role),
                    promotion,
                    en_passant: false,
                };
                let after = pos.play(&m);
                let king = after.board.king_of(us).expect("a slice has both kings");
                if after.attackers_to(king, them, after.board.occupied()).any() {
                    break; // It leaves its king attacked: not a move, whatever the role.
                }
                exits.add(succ.dtz_of(&after)?.after_move(true));
            }
        }
    }
    Ok(exits)
}

/// The exits of a position (its zeroing moves), each valued as after the move: the best of
/// them (none if it has none), and whether one of them loses in 101 plies.
#[derive(Clone, Copy, Default)]
struct Exits {
    best: Option<Dtz>,
    late_loss: bool,
}

impl Exits {
    fn add(&mut self, v: Dtz) {
        self.late_loss |= v == Dtz::Loss(LATE);
        self.best = Some(self.best.map_or(v, |b| b.max(v)));
    }

    /// Adds the exits of `other`.
    fn merge(&mut self, other: &Exits) {
        if let Some(b) = other.best {
            self.add(b);
        }
        self.late_loss |= other.late_loss;
    }
}

impl ExitSet for Exits {
    type Value = Dtz;
    const DRAW: Dtz = Dtz::Draw;

    #[inline]
    fn decode(raw: u16) -> Option<Dtz> {
        Dtz::from_raw(raw)
    }

    #[inline]
    fn add_move_into(&mut self, v: Dtz) {
        self.add(v.after_move(true));
    }
}

/// Where a slice's captures by men and its plain promotions lead, worked out once for the
/// slice from its successors' values by index ([`DtzSuccessors::slice_values`]), so that a line's
/// exits are read by index arithmetic as the mate solver reads them: the capture exits of a
/// pawnless slice, or the pawn exits of one with pawns.
enum ByIndex<'a> {
    Pawnless(Vec<Option<CaptureExit<'a>>>),
    Pawns(Box<PawnExits<'a>>),
}

impl<'a> ByIndex<'a> {
    /// `None` if a successor's values are not at hand by index.
    fn new(g: &Geometry, key: &SliceKey, succ: &'a dyn DtzSuccessors) -> Option<ByIndex<'a>> {
        let values = |s: &SliceKey| succ.slice_values(s);
        if g.pawnless {
            capture_exits_with(g, key, &values).map(ByIndex::Pawnless)
        } else {
            PawnExits::with_values(g, key, &values).map(|pe| ByIndex::Pawns(Box::new(pe)))
        }
    }

    /// The exits of the legal position `d` (its captures, and its pawn moves), read by index;
    /// `None` where one needs a position (a double push beside an enemy pawn: en passant).
    fn exits(&self, g: &Geometry, d: &Decoded) -> Result<Option<Exits>, SolveError> {
        match self {
            ByIndex::Pawnless(captures) => Ok(Some(exits_by_captures(g, d, kings(g, d).0, captures)?)),
            ByIndex::Pawns(pe) => {
                let mut exits = Exits::default();
                pe.man_capture_exits(g, d, &mut exits)?;
                let whole = pe.pawn_move_exits_with(g, d, &mut |_, _| Ok(None), &mut exits)?;
                Ok(whole.then_some(exits))
            }
        }
    }

    fn target(&self, victim: Result<usize, Square>) -> CaptureTarget<'_, 'a> {
        match self {
            ByIndex::Pawnless(captures) => pawnless_target(captures, victim),
            ByIndex::Pawns(pe) => pe.capture_target(victim),
        }
    }
}

/// The cell of legal position `i` before the passes, from its count of legal moves inside the
/// slice, its exits, and whether it is in check: final (no move inside: a mate, a stalemate, or
/// its best exit), won in 1 by an exit, or undecided.
fn set_initial(cells: &Cells, i: usize, inside: u16, Exits { best, late_loss }: Exits, in_check: bool) {
    if inside == 0 {
        match best {
            None if in_check => cells.decide(i, Dtz::Loss(0), 0, 0),
            None | Some(Dtz::Draw) => cells.cells[i].store(Dtz::Draw.raw(), Relaxed),
            Some(v @ (Dtz::Win(e) | Dtz::Loss(e))) => cells.decide(i, v, e, 0),
        }
        return;
    }
    debug_assert!(inside <= COUNT, "inside-move count must fit its 8 bits");
    let late = if late_loss { LATE_EXIT } else { 0 };
    match best {
        None | Some(Dtz::Loss(_)) => cells.cells[i].store(UNDECIDED | late | inside, Relaxed),
        Some(Dtz::Draw) => cells.cells[i].store(UNDECIDED | NO_LOSS | inside, Relaxed),
        // A win by an exit in 1: nothing inside is sooner.
        Some(Dtz::Win(1)) => cells.decide(i, Dtz::Win(1), 1, 0),
        Some(Dtz::Win(e)) => {
            debug_assert_eq!(e, LATE);
            cells.cells[i].store(UNDECIDED | NO_LOSS | LATE_EXIT | inside, Relaxed);
            cells.any_late.store(true, Relaxed);
        }
    }
}

/// The marks of the pass of distance `d` on predecessors, each queued a few steps behind a
/// prefetch of its cell (the cells are read at random: queued, their reads overlap): those of
/// a loss in `d`, and those of a win. What a mark does does not depend on the order.
struct Marks<'c> {
    cells: &'c Cells,
    d: u16,
    of_losses: Deferred,
    of_wins: Deferred,
}

impl<'c> Marks<'c> {
    fn new(cells: &'c Cells, d: u16) -> Marks<'c> {
        Marks {
            cells,
            d,
            of_losses: Deferred::new(),
            of_wins: Deferred::new(),
        }
    }

    /// Every queued mark done.
    fn drain(&mut self) {
        let (cells, d) = (self.cells, self.d);
        self.of_losses.drain(&mut |p| mark(cells, p, d, true));
        self.of_wins.drain(&mut |p| mark(cells, p, d, false));
    }
}

/// From a position whose value is final at exactly the pass's distance, un-moves to its
/// predecessors (each once per move into it, as the counts need; an index that is not a
/// position has a cell of 0, and so has an illegal position, never looked at), marked through
/// `marks`.
fn propagate(g: &Geometry, cells: &Cells, j: usize, marks: &mut Marks<'_>) {
    let v = Dtz::from_raw(cells.cells[j].load(Relaxed)).expect("a frontier position is final");
    let d = marks.d;
    let placed = g.decode(j as u64).expect("a frontier position is placed");
    match v {
        Dtz::Loss(_) => {
            let q = &mut marks.of_losses;
            g.for_each_unmove(j as u64, &placed, |p| {
                q.push(&cells.cells, p as usize, &mut |p| mark(cells, p, d, true))
            });
        }
        Dtz::Win(_) => {
            let q = &mut marks.of_wins;
            g.for_each_unmove(j as u64, &placed, |p| {
                q.push(&cells.cells, p as usize, &mut |p| mark(cells, p, d, false))
            });
        }
        Dtz::Draw => unreachable!("a frontier position is won or lost"),
    }
}

/// [`propagate`] for the positions of frontier word `w` (the bits of `bits`), a line of 64
/// positions that differ only in the square of the lone man `l`: the losses' predecessors and
/// the wins', each once per move into them, found for the line at once
/// ([`Geometry::for_each_unmove_line_counted`]).
fn propagate_line(g: &Geometry, l: usize, cells: &Cells, w: usize, bits: u64, marks: &mut Marks<'_>) {
    let base = w * 64;
    let (mut losses, mut wins) = (0u64, 0u64);
    let mut rest = bits;
    while rest != 0 {
        let k = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        match Dtz::from_raw(cells.cells[base + k].load(Relaxed)) {
            Some(Dtz::Loss(_)) => losses |= 1 << k,
            Some(Dtz::Win(_)) => wins |= 1 << k,
            _ => unreachable!("a frontier position is won or lost"),
        }
    }
    let line = g
        .decode_line(base as u64, l)
        .expect("a line with positions is placed");
    let d = marks.d;
    if losses != 0 {
        let q = &mut marks.of_losses;
        g.for_each_unmove_line_counted(l, &line, Bitboard(losses), |p, squares| {
            for s in squares {
                q.push(&cells.cells, (p + s.u8() as u64) as usize, &mut |p| {
                    mark(cells, p, d, true)
                });
            }
        });
    }
    if wins != 0 {
        let q = &mut marks.of_wins;
        g.for_each_unmove_line_counted(l, &line, Bitboard(wins), |p, squares| {
            for s in squares {
                q.push(&cells.cells, (p + s.u8() as u64) as usize, &mut |p| {
                    mark(cells, p, d, false)
                });
            }
        });
    }
}

/// The mark on predecessor `p` of a position final at distance `d`, a loss if `of_loss` (else a
/// win): a move into a loss in `d` wins in `d + 1`; a move into a win is one inside move fewer
/// not known to lose, and with none left the position loses in `d + 1` (or in 101, if an exit
/// holds out that long).
#[inline(always)]
fn mark(cells: &Cells, p: usize, d: u16, of_loss: bool) {
    let next = d + 1;
    let cell = &cells.cells[p];
    let mut c = cell.load(Relaxed);
    loop {
        if c & UNDECIDED == 0 {
            return;
        }
        // The new cell, and the distance it is decided at if it is.
        let (new, at) = if of_loss {
            (Dtz::Win(next).raw(), Some(next))
        } else if c & NO_LOSS == 0 {
            if c & COUNT == 1 {
                // Its last inside move loses: lost in `d + 1`, or later by an exit.
                let at = if c & LATE_EXIT != 0 { next.max(LATE) } else { next };
                (Dtz::Loss(at).raw(), Some(at))
            } else {
                (c - 1, None)
            }
        } else {
            return;
        };
        match cell.compare_exchange_weak(c, new, Relaxed, Relaxed) {
            Ok(_) => {
                if let Some(at) = at {
                    cells.join(p, at, d);
                }
                return;
            }
            Err(now) => c = now,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::hash_map::DefaultHasher;
    use std::collections::HashMap;
    use std::hash::{Hash, Hasher};

    use zermelo_chess::index::locate;

    use super::super::IndexedValues;
    use super::*;

    /// Successors of random classes, a function of where a position is stored (its slice and
    /// index, and its en-passant square): wins and losses within the rule and past it (cursed,
    /// blessed), and draws, so that exits decide at 1 and at 101. With `by_index`, the slices
    /// a slice's moves lead into are readable by index too ([`DtzSuccessors::slice_values`]),
    /// the same classes. `calls` counts the positions valued one by one.
    struct RandomClasses {
        by_index: HashMap<SliceKey, Classes>,
        calls: AtomicU64,
    }

    /// The classes of one slice by index, worked out when read. An index that is no legal
    /// position reads a class too (not 0): a solver that read one through a wrong index
    /// arithmetic would then differ from the forward derivation, not stop.
    struct Classes(SliceKey);

    impl IndexedValues for Classes {
        fn get(&self, index: u64) -> Result<u16, SolveError> {
            Ok(class(&self.0, index, None).raw())
        }
    }

    fn class(key: &SliceKey, index: u64, ep: Option<Square>) -> Dtz {
        let mut h = DefaultHasher::new();
        (key.raw(), index, ep).hash(&mut h);
        let r = h.finish();
        let n = (r >> 8) as u16 % 100 + 1;
        match r % 5 {
            0 => Dtz::Win(n),
            1 => Dtz::Win(n + RULE_PLIES),
            2 => Dtz::Draw,
            3 => Dtz::Loss(n + RULE_PLIES),
            _ => Dtz::Loss(n),
        }
    }

    impl RandomClasses {
        /// Every position valued one by one.
        fn positions() -> RandomClasses {
            RandomClasses {
                by_index: HashMap::new(),
                calls: AtomicU64::new(0),
            }
        }

        /// The successors of slice `key` readable by index as well.
        fn by_index(key: &SliceKey) -> RandomClasses {
            let by_index = key.successors().into_iter().map(|s| (s, Classes(s))).collect();
            RandomClasses {
                by_index,
                calls: AtomicU64::new(0),
            }
        }
    }

    impl DtzSuccessors for RandomClasses {
        fn dtz_of(&self, pos: &Position) -> Result<Dtz, SolveError> {
            self.calls.fetch_add(1, Relaxed);
            Ok(match locate(pos) {
                Some(loc) => class(&loc.slice, loc.index, pos.ep_square),
                None => Dtz::Draw, // Only the kings are left.
            })
        }

        /// Every slice's values at hand: each legal index's position valued as `dtz_of` values
        /// it (the one a push leads to), so that pushes are read by lines.
        fn solved_values(&self, key: &SliceKey, first: u64, out: &mut [u16]) -> Result<bool, SolveError> {
            let ix = SliceIndexer::new(*key);
            for (k, v) in out.iter_mut().enumerate() {
                let i = first + k as u64;
                *v = match legal_position(&ix, i as usize) {
                    Some(_) => class(key, i, None).raw(),
                    None => NONE,
                };
            }
            Ok(true)
        }

        fn slice_values(&self, key: &SliceKey) -> Option<SliceValuesRef<'_>> {
            let c = self.by_index.get(key)?;
            Some(SliceValuesRef::Indexed(c))
        }
    }

    /// The DTZ50 of every index of `key` by a second path: forward, distance by distance, from
    /// each position's moves (no un-move, no count): a position is decided at `d` when a move
    /// reaches a loss decided at `d - 1` or an exit wins in `d` (won), or when every move is
    /// decided against it and the slowest of them comes at `d` (lost).
    fn forward(key: &SliceKey, succ: &dyn DtzSuccessors) -> Vec<u16> {
        let ix = SliceIndexer::new(*key);
        let n = ix.size() as usize;
        // Per index: its exits' values (for the mover) and its inside moves' target indices.
        let mut exits: Vec<Vec<Dtz>> = vec![Vec::new(); n];
        let mut inside: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut value: Vec<Option<(Dtz, u16)>> = vec![None; n];
        let mut legal = vec![false; n];
        for i in 0..n {
            let Some(pos) = legal_position(&ix, i) else {
                continue;
            };
            legal[i] = true;
            let moves = pos.legal_moves();
            if moves.is_empty() {
                let v = if pos.is_check() { Dtz::Loss(0) } else { Dtz::Draw };
                value[i] = Some((v, 0));
                continue;
            }
            for m in moves.iter() {
                let next = pos.play(m);
                if m.leaves_slice() {
                    exits[i].push(succ.dtz_of(&next).unwrap().after_move(true));
                } else {
                    let loc = locate(&next).expect("a position inside the slice");
                    assert_eq!(loc.slice, *key);
                    inside[i].push(loc.index as usize);
                }
            }
        }
        let mut d: u16 = 1;
        loop {
            let mut decided = Vec::new();
            for i in (0..n).filter(|&i| legal[i] && value[i].is_none()) {
                let inner = || inside[i].iter().map(|&c| value[c]);
                let wins_now = exits[i].contains(&Dtz::Win(d))
                    || inner().any(|v| matches!(v, Some((Dtz::Loss(_), at)) if at == d - 1));
                if wins_now {
                    decided.push((i, Dtz::Win(d)));
                    continue;
                }
                let exits_lose = exits[i].iter().all(|v| matches!(v, Dtz::Loss(_)));
                let inside_lose = inner().all(|v| matches!(v, Some((Dtz::Win(_), at)) if at < d));
                if exits_lose && inside_lose {
                    let slowest = (exits[i].iter().map(|v| match v {
                        Dtz::Loss(e) => *e,
                        _ => unreachable!(),
                    }))
                    .chain(inner().map(|v| v.expect("decided").1 + 1))
                    .max()
                    .expect("a move");
                    if slowest == d {
                        decided.push((i, Dtz::Loss(d)));
                    }
                }
            }
            if decided.is_empty() && d > LATE {
                break;
            }
            for (i, v) in decided {
                value[i] = Some((v, d));
            }
            d += 1;
        }
        (0..n)
            .map(|i| match value[i] {
                _ if !legal[i] => 0,
                Some((v, _)) => v.raw(),
                None => Dtz::Draw.raw(),
            })
            .collect()
    }

    /// Against the forward derivation, on slices whose exits are of random classes (so that
    /// cursed wins and blessed losses come by exits, and through the moves inside): a pawn
    /// slice of KRvKP and pawnless KBvKN, on 1 and 2 threads; and each with its successors read
    /// by index as well, with two slices whose pawns promote (KPvK's, where the only capture
    /// leaves the kings, and KRvKP's, where a promotion may take the rook).
    #[test]
    fn agrees_with_a_forward_derivation_when_exits_are_cursed_or_blessed() {
        let krkp = SliceKey::all_of("KRvKP".parse().unwrap());
        let promoting = |material: &str, rank: u8| {
            let keys = SliceKey::all_of(material.parse().unwrap());
            *keys
                .iter()
                .find(|k| {
                    (k.white_pawns | k.black_pawns)
                        .into_iter()
                        .any(|s| s.rank() == rank)
                })
                .expect("a slice with a pawn on that rank")
        };
        // KPvKP's slices have no lines (no man but the kings): a position at a time, with a
        // double push that may allow en passant (White's pawn on its second rank, Black's on
        // the fourth beside the file) and a promotion.
        let kpkp = SliceKey::all_of("KPvKP".parse().unwrap());
        let en_passant = *kpkp
            .iter()
            .find(|k| {
                let (w, b) = (k.white_pawns.first().unwrap(), k.black_pawns.first().unwrap());
                w.rank() == 1 && b.rank() == 3 && w.file().abs_diff(b.file()) == 1
            })
            .expect("a slice with en passant after a double push");
        let keys = [
            krkp[krkp.len() / 2],
            SliceKey::pawnless("KBvKN".parse().unwrap()),
            promoting("KPvK", 6),
            promoting("KRvKP", 1),
            en_passant,
            promoting("KPvKP", 6),
            SliceKey::pawnless("KNNvK".parse().unwrap()),
        ];
        for key in keys {
            let want = forward(&key, &RandomClasses::positions());
            let late =
                |v: &u16| matches!(Dtz::from_raw(*v), Some(Dtz::Win(e) | Dtz::Loss(e)) if e > RULE_PLIES);
            let cursed = want.iter().filter(|v| late(v)).count();
            assert!(
                cursed > want.len() / 500,
                "{key}: only {cursed} cursed wins or blessed losses of {}",
                want.len()
            );
            for threads in [1, 2] {
                // By index, and by positions (the source without values by index).
                let sources = [RandomClasses::by_index(&key), RandomClasses::positions()];
                for succ in &sources {
                    let got = solve_slice_dtz50(&key, succ, threads, &|_| {}).unwrap();
                    let diff = got.iter().zip(&want).position(|(a, b)| a != b);
                    assert!(
                        diff.is_none(),
                        "{key} on {threads} threads, by index {}: first difference at {diff:?}: {:?}",
                        !succ.by_index.is_empty(),
                        diff.map(|i| (
                            Dtz::from_raw(got[i]),
                            Dtz::from_raw(want[i]),
                            SliceIndexer::new(key).position(i as u64)
                        ))
                    );
                }
                // By index, most exits are read without a position valued one by one.
                // (Fewer only where a double push may allow en passant: those positions are
                // looked at move by move.)
                let (by_index, positions) = (sources[0].calls.load(Relaxed), sources[1].calls.load(Relaxed));
                let fewer = if key == en_passant { by_index } else { by_index * 2 };
                assert!(
                    fewer < positions,
                    "{key}: {by_index} positions valued one by one with values by index, {positions} without"
                );
            }
        }
    }
}
