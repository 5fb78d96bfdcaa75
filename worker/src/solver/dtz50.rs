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
//! bitmaps. The passes cost an un-move generation per decided position. It needs nothing of the
//! mate solver; only where its caller gives the draws of the slice's table of mates
//! ([`DtzSuccessors::known_draws`]) are those set without a move generated (a draw ignoring the
//! rule is a draw under it). Its values are checked by `verify`, and against Syzygy's tables
//! (see `docs/dtz50.md`).

use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering::Relaxed};

use tracing::debug;
use zermelo_chess::dtz::{Dtz, RULE_PLIES};
use zermelo_chess::index::SliceIndexer;
use zermelo_chess::slice::SliceKey;
use zermelo_chess::Position;

use super::geometry::Geometry;
use super::memory::Deferred;
use super::par::for_each_chunk;
use super::reference::legal_position;
use super::SolveError;

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
    let bitmap = || (0..words).map(|_| AtomicU64::new(0)).collect::<Vec<_>>();
    let cells = Cells {
        cells: (0..n).map(|_| AtomicU16::new(NONE)).collect(),
        frontier: [bitmap(), bitmap()],
        filled: [AtomicBool::new(false), AtomicBool::new(false)],
        any_late: AtomicBool::new(false),
    };
    let g = Geometry::new(key);

    // 1. Exits, mates, stalemates, inside-move counts.
    for_each_chunk(n, 1 << 12, threads, |range| {
        let len = range.len() as u64;
        let mut draws = vec![false; range.len()];
        succ.known_draws(key, range.start as u64, &mut draws)?;
        for (i, draw) in range.zip(draws) {
            if draw {
                cells.cells[i].store(Dtz::Draw.raw(), Relaxed);
            } else {
                init_position(&ix, &cells, i, succ)?;
            }
        }
        report(DtzStep::Inited(len));
        Ok::<(), SolveError>(())
    })?;

    debug!(slice = %key, seconds = start.elapsed().as_secs_f64(), "DTZ50 of a slice: exits looked at");

    // 2. Passes, one per distance, while a frontier or a late decision is left.
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

/// Looks at one index before the passes: not a position, final (no inside move, or a mate),
/// or undecided with its best exit and its count of inside moves.
fn init_position(
    ix: &SliceIndexer,
    cells: &Cells,
    i: usize,
    succ: &dyn DtzSuccessors,
) -> Result<(), SolveError> {
    let Some(pos) = legal_position(ix, i) else {
        return Ok(());
    };
    let moves = pos.legal_moves();
    if moves.is_empty() {
        if pos.is_check() {
            cells.decide(i, Dtz::Loss(0), 0, 0);
        } else {
            cells.cells[i].store(Dtz::Draw.raw(), Relaxed);
        }
        return Ok(());
    }
    let mut inside: u16 = 0;
    let mut best: Option<Dtz> = None;
    let mut late_loss = false;
    for m in moves.iter() {
        if m.leaves_slice() {
            // A zeroing move: 1 or 101 plies (a win or a loss), or a draw.
            let v = succ.dtz_of(&pos.play(m))?.after_move(true);
            late_loss |= v == Dtz::Loss(LATE);
            best = Some(best.map_or(v, |b| b.max(v)));
        } else {
            inside += 1;
        }
    }
    if inside == 0 {
        match best.expect("a move exists") {
            Dtz::Draw => cells.cells[i].store(Dtz::Draw.raw(), Relaxed),
            v @ (Dtz::Win(e) | Dtz::Loss(e)) => cells.decide(i, v, e, 0),
        }
        return Ok(());
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
    Ok(())
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
    use std::hash::{Hash, Hasher};

    use zermelo_chess::index::locate;

    use super::*;

    /// Successors of random classes, a function of the position: wins and losses within the
    /// rule and past it (cursed, blessed), and draws, so that exits decide at 1 and at 101.
    struct RandomClasses;

    impl DtzSuccessors for RandomClasses {
        fn dtz_of(&self, pos: &Position) -> Result<Dtz, SolveError> {
            let mut h = DefaultHasher::new();
            pos.hash(&mut h);
            let r = h.finish();
            let n = (r >> 8) as u16 % 100 + 1;
            Ok(match r % 5 {
                0 => Dtz::Win(n),
                1 => Dtz::Win(n + RULE_PLIES),
                2 => Dtz::Draw,
                3 => Dtz::Loss(n + RULE_PLIES),
                _ => Dtz::Loss(n),
            })
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
    /// slice of KRvKP and pawnless KBvKN, on 1 and 2 threads.
    #[test]
    fn agrees_with_a_forward_derivation_when_exits_are_cursed_or_blessed() {
        let krkp = SliceKey::all_of("KRvKP".parse().unwrap());
        for key in [krkp[krkp.len() / 2], SliceKey::pawnless("KBvKN".parse().unwrap())] {
            let want = forward(&key, &RandomClasses);
            let late =
                |v: &u16| matches!(Dtz::from_raw(*v), Some(Dtz::Win(e) | Dtz::Loss(e)) if e > RULE_PLIES);
            let cursed = want.iter().filter(|v| late(v)).count();
            assert!(
                cursed > 1000,
                "{key}: only {cursed} cursed wins or blessed losses"
            );
            for threads in [1, 2] {
                let got = solve_slice_dtz50(&key, &RandomClasses, threads, &|_| {}).unwrap();
                let diff = got.iter().zip(&want).position(|(a, b)| a != b);
                assert!(
                    diff.is_none(),
                    "{key} on {threads} threads: first difference at {diff:?}: {:?}",
                    diff.map(|i| (
                        Dtz::from_raw(got[i]),
                        Dtz::from_raw(want[i]),
                        SliceIndexer::new(key).position(i as u64)
                    ))
                );
            }
        }
    }
}
