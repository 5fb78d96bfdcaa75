//! The first slice solver (move counters, `Position`s built per predecessor), kept as a second
//! path that tests compare the solver of [`super::retrograde`] with. Slow (about 6 bytes per index):
//! not used to build tables.
//!
//! 1. *Exits*: every position's moves that leave the slice (captures, pawn moves, promotions)
//!    are valued from the finished successor slices; the best exit is kept, with mates and
//!    stalemates. Moves inside the slice are counted.
//! 2. *Retrograde passes*, one per ply `n`: from the positions whose final value is exactly `n`
//!    plies, un-move to their predecessors. A predecessor of a loss in `n` wins in `n + 1`; a
//!    predecessor of a win loses one more inside move, and when it has none left it is lost
//!    (in `n + 1` plies, or later if an exit loses more slowly).
//! 3. *Finish*: what is still undecided is a draw.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use tracing::debug;
use zermelo_chess::attacks::king_attacks;
use zermelo_chess::index::{on_triangle, pawnless_symmetry, SliceIndexer, SYMMETRY_TABLE, TRIANGLE_BB};
use zermelo_chess::slice::SliceKey;
use zermelo_chess::unmove::{for_each_unmove, for_each_unmove_from};
use zermelo_chess::value::{Value, DRAW, ILLEGAL, MAX_PLIES};
use zermelo_chess::{Bitboard, Color, Square};

use super::geometry::sort_like_men;
use super::par::for_each_chunk;
use super::{SolveError, Successors};

// In-memory states of undecided positions (final values are below 0x8000).
/// Undecided and may still be lost; the low 14 bits hold the slowest losing exit (0 if none).
const UNDECIDED: u16 = 0x8000;
/// Undecided, cannot be lost (an exit holds the draw or better), no winning exit.
const NO_LOSS: u16 = 0xc000;
/// `NO_LOSS | n`: undecided with a winning exit in `n` plies; wins in `n` unless faster inside.
const LEVEL_MASK: u16 = 0x3fff;

#[inline]
fn loss_possible(v: u16) -> bool {
    v & 0xc000 == UNDECIDED
}

/// Indices per pending-mask chunk.
const CHUNK_SHIFT: u32 = 12;
/// Distances a chunk's pending mask can flag; beyond, the whole slice is scanned at that distance.
const MASK_LEVELS: u32 = 512;

/// Cells of a slice for the passes.
struct Cells {
    /// Per index: the value (final, or one of the undecided states) in the low 16 bits, and the
    /// number of inside moves not yet known to lose in bits 16 to 23. One word, so that a
    /// predecessor costs one cache miss, not two. Subtracting from the count never touches the
    /// value bits.
    cells: Vec<AtomicU32>,
    /// Frontier bitmaps: `frontier[p % 2]` holds the indices whose final value is `p` plies,
    /// to un-move from in the pass of `p`.
    frontier: [Vec<AtomicU64>; 2],
    /// Per chunk of 2^CHUNK_SHIFT indices, a bit per distance at which some index of the chunk
    /// becomes final other than through the pass before (mates, positions with only exits,
    /// winning exits, losses slowed by an exit): those chunks are scanned at that distance.
    pending: Vec<[AtomicU64; (MASK_LEVELS / 64) as usize]>,
    /// Distances of MASK_LEVELS or more that have pending indices (rare: scanned whole).
    far_pending: Mutex<BTreeSet<u32>>,
    /// Largest distance assigned so far (final or pending): the passes run up to it.
    horizon: AtomicU32,
}

impl Cells {
    fn new(n: usize) -> Cells {
        let words = n.div_ceil(64);
        let chunks = n.div_ceil(1 << CHUNK_SHIFT);
        let bitmap = || (0..words).map(|_| AtomicU64::new(0)).collect();
        Cells {
            cells: (0..n).map(|_| AtomicU32::new(ILLEGAL as u32)).collect(),
            frontier: [bitmap(), bitmap()],
            pending: (0..chunks).map(|_| Default::default()).collect(),
            far_pending: Default::default(),
            horizon: AtomicU32::new(0),
        }
    }

    #[inline]
    fn value(&self, i: usize) -> u16 {
        self.cells[i].load(Relaxed) as u16
    }

    /// Sets the value bits (and clears the count, no longer needed).
    #[inline]
    fn store(&self, i: usize, v: u16) {
        self.cells[i].store(v as u32, Relaxed);
    }

    /// Sets a final value found by the pass of `plies - 1`: it joins the next frontier.
    #[inline]
    fn set_next(&self, i: usize, plies: u32) {
        self.store(i, plies as u16 + 2);
        // Atomic read-modify-writes are dear: skip them when they would change nothing.
        let word = &self.frontier[plies as usize % 2][i / 64];
        let bit = 1u64 << (i % 64);
        if word.load(Relaxed) & bit == 0 {
            word.fetch_or(bit, Relaxed);
        }
        if self.horizon.load(Relaxed) < plies {
            self.horizon.fetch_max(plies, Relaxed);
        }
    }

    /// Flags index `i` to be looked at when the passes reach distance `plies`.
    fn set_pending(&self, i: usize, plies: u32) {
        if plies < MASK_LEVELS {
            self.pending[i >> CHUNK_SHIFT][(plies / 64) as usize].fetch_or(1 << (plies % 64), Relaxed);
        } else {
            self.far_pending.lock().expect("far pending lock").insert(plies);
        }
        self.horizon.fetch_max(plies, Relaxed);
    }

    /// Sets a final value that joins the frontier when the passes reach its distance.
    fn set_final_later(&self, i: usize, plies: u32) {
        self.store(i, plies as u16 + 2);
        self.set_pending(i, plies);
    }
}

/// Solves one slice. `threads` is the number of threads for this slice; the output does not
/// depend on it.
pub fn solve_slice_reference(
    key: &SliceKey,
    succ: &dyn Successors,
    threads: usize,
) -> Result<Vec<u16>, SolveError> {
    let ix = SliceIndexer::new(*key);
    let n = ix.size() as usize;
    let start = std::time::Instant::now();
    let cells = Cells::new(n);
    let chunk = 1 << CHUNK_SHIFT;

    // 1. Exits, mates, stalemates, inside-move counts.
    for_each_chunk(n, chunk, threads, |range| {
        for i in range {
            init_position(&ix, &cells, i, succ)?;
        }
        Ok::<(), SolveError>(())
    })?;

    let init_seconds = start.elapsed().as_secs_f64();

    // 2. Retrograde passes, one per ply.
    let words = cells.frontier[0].len();
    let mut plies: u32 = 0;
    while plies <= cells.horizon.load(Relaxed) {
        if plies >= MAX_PLIES as u32 - 1 {
            return Err(SolveError::TooDeep(*key));
        }
        let target = plies as u16 + 2;
        // Winning exits are wins in an odd number of plies; NO_LOSS itself has distance 0.
        let pending_win = if plies % 2 == 1 {
            NO_LOSS | plies as u16
        } else {
            u16::MAX
        };
        let frontier = &cells.frontier[plies as usize % 2];
        // Indices that become final at this distance other than through the last pass join the
        // frontier: scan the chunks flagged for it.
        let scan_all = plies >= MASK_LEVELS
            && cells
                .far_pending
                .lock()
                .expect("far pending lock")
                .contains(&plies);
        let (mask_word, mask_bit) = ((plies / 64) as usize % 8, 1u64 << (plies % 64));
        for_each_chunk(cells.pending.len(), 16, threads, |chunks| {
            for c in chunks {
                let flagged =
                    plies < MASK_LEVELS && cells.pending[c][mask_word].load(Relaxed) & mask_bit != 0;
                if !flagged && !scan_all {
                    continue;
                }
                for i in (c << CHUNK_SHIFT)..((c + 1) << CHUNK_SHIFT).min(n) {
                    let v = cells.value(i);
                    if v == pending_win {
                        cells.store(i, target);
                    }
                    if v == target || v == pending_win {
                        frontier[i / 64].fetch_or(1 << (i % 64), Relaxed);
                    }
                }
            }
            Ok::<(), SolveError>(())
        })?;
        // Un-move from the frontier; finals at `plies + 1` go to the other bitmap.
        for_each_chunk(words, 64, threads, |range| {
            for w in range {
                let mut bits = frontier[w].swap(0, Relaxed);
                while bits != 0 {
                    let i = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    propagate(&ix, &cells, i, plies);
                }
            }
            Ok::<(), SolveError>(())
        })?;
        plies += 1;
    }
    debug!(slice = %key, passes = plies, init_seconds, seconds = start.elapsed().as_secs_f64(), "slice solved");

    // 3. Finish: undecided positions are draws.
    Ok(cells
        .cells
        .into_iter()
        .map(|c| {
            let v = c.into_inner() as u16;
            if v >= UNDECIDED {
                DRAW
            } else {
                v
            }
        })
        .collect())
}

/// The position of index `i` of the slice of `ix`, if it is a legal one. Built from an index,
/// a position has one king a side and its pawns on ranks 2-7; it is legal unless the side not
/// to move is attacked (by a king too: kings side by side).
pub(crate) fn legal_position(ix: &SliceIndexer, i: usize) -> Option<zermelo_chess::Position> {
    let pos = ix.position(i as u64)?;
    let their_king = pos
        .board
        .king_of(pos.turn.other())
        .expect("a slice has both kings");
    if pos.attackers_to(their_king, pos.turn, pos.board.occupied()).any() {
        return None;
    }
    Some(pos)
}

/// Looks at one index before the passes: illegal, final (no inside move), or undecided with its
/// best exit and its count of inside moves.
fn init_position(
    ix: &SliceIndexer,
    cells: &Cells,
    i: usize,
    succ: &dyn Successors,
) -> Result<(), SolveError> {
    let Some(pos) = legal_position(ix, i) else {
        return Ok(());
    };
    debug_assert!(pos.validate().is_ok(), "{pos}");
    let moves = pos.legal_moves();
    if moves.is_empty() {
        if pos.is_check() {
            cells.set_final_later(i, 0);
        } else {
            cells.store(i, DRAW);
        }
        return Ok(());
    }
    let mut inside: u32 = 0;
    let mut best: Option<Value> = None;
    let mut slowest_loss: u16 = 0;
    for m in moves.iter() {
        if m.leaves_slice() {
            let v = succ.value_of(&pos.play(m))?.after_move();
            if let Value::Loss(d) = v {
                slowest_loss = slowest_loss.max(d);
            }
            best = Some(best.map_or(v, |b| b.max(v)));
        } else {
            inside += 1;
        }
    }
    if inside == 0 {
        // Only exits: the best of them is final.
        match best.expect("a move exists") {
            Value::Draw => cells.store(i, DRAW),
            Value::Win(d) | Value::Loss(d) => cells.set_final_later(i, d as u32),
        }
        return Ok(());
    }
    let state = match best {
        None => UNDECIDED,
        Some(Value::Loss(_)) => UNDECIDED | slowest_loss,
        Some(Value::Draw) => NO_LOSS,
        Some(Value::Win(d)) => {
            cells.set_pending(i, d as u32);
            NO_LOSS | d
        }
    };
    debug_assert!(inside < 256, "inside-move count must fit its 8 bits");
    cells.cells[i].store((inside << 16) | state as u32, Relaxed);
    Ok(())
}

/// From a position whose final value is exactly `plies`, un-moves to its predecessors.
fn propagate(ix: &SliceIndexer, cells: &Cells, j: usize, plies: u32) {
    let lost_here = plies.is_multiple_of(2);
    for_each_predecessor(ix, j, |p: usize| {
        let v = cells.value(p);
        if v < UNDECIDED {
            return;
        }
        if lost_here {
            // A move into a loss in `plies`: the predecessor wins in `plies + 1`.
            cells.set_next(p, plies + 1);
        } else if loss_possible(v) {
            // One more inside move is known to lose; with none left, the predecessor is lost,
            // in `plies + 1` or later if an exit loses more slowly.
            if (cells.cells[p].fetch_sub(1 << 16, Relaxed) >> 16) & 0xff == 1 {
                let slowest_exit = (v & LEVEL_MASK) as u32;
                if slowest_exit > plies + 1 {
                    cells.set_final_later(p, slowest_exit);
                } else {
                    cells.set_next(p, plies + 1);
                }
            }
        }
    });
}

/// Calls `visit` with the index of each predecessor of position `j` of the slice of `ix` by a
/// move inside the slice, once for every such move (as the move counters need), however the
/// slice stores its positions.
pub(crate) fn for_each_predecessor(ix: &SliceIndexer, j: usize, mut visit: impl FnMut(usize)) {
    let placement = ix.placement(j as u64);
    let n_men = ix.men().len();
    let turn = placement.turn.other();
    if !ix.is_pawnless() {
        // Moves inside a pawn slice never leave it or need a symmetry: un-move in place.
        let pos = ix.position(j as u64).expect("a decided index is a position");
        for_each_unmove(&pos, |_piece, now, before| {
            let mut squares = placement.squares;
            let k = squares[..n_men]
                .iter()
                .position(|&s| s == now)
                .expect("the man is in the placement");
            squares[k] = before;
            // Un-moves never put the kings next to each other: every pair is indexed.
            visit(ix.index_of(&squares[..n_men], turn).expect("a legal king pair") as usize);
        });
        return;
    }
    // Pawnless: the stored positions are those in table form. A stored position `q` is a
    // predecessor of `j` through every move that leads to an image `z` of position `j` whose
    // table form is `j` itself. So un-move from each such distinct image and keep the
    // predecessors that are stored as they are: each move from a stored position into `j` is
    // then found exactly once, which the move counters need. An image whose White king is off
    // the triangle can only be reached by that king stepping off it.
    let sq = &placement.squares[..n_men];
    let bk = ix.black_king();
    let mut seen = [[Square::A1; 8]; 8];
    let mut n_seen = 0;
    for (si, table) in SYMMETRY_TABLE.iter().enumerate() {
        let mut z = [Square::A1; 8];
        for (d, &s) in z.iter_mut().zip(sq) {
            *d = table[s.index()];
        }
        let on = on_triangle(z[0]);
        if si > 0 {
            if !on && (turn == Color::Black || (king_attacks(z[0]) & TRIANGLE_BB).is_empty()) {
                continue;
            }
            // The image must go back to `j` itself (its table form).
            let back = &SYMMETRY_TABLE[pawnless_symmetry(z[0], z[bk])];
            if back[z[0].index()] != sq[0] {
                continue;
            }
            let mut w = [Square::A1; 8];
            for (d, &s) in w.iter_mut().zip(&z[..n_men]) {
                *d = back[s.index()];
            }
            if ix.index_of(&w[..n_men], placement.turn) != Some(j as u64) {
                continue;
            }
        }
        // Distinct images only (a position symmetric in the diagonal is its own image): like men
        // compared as sets.
        let mut set = z;
        sort_like_men(ix.men(), &mut set[..n_men]);
        if seen[..n_seen].contains(&set) {
            continue;
        }
        seen[n_seen] = set;
        n_seen += 1;
        let pos = ix
            .position_of(&z[..n_men], placement.turn)
            .expect("an image of a position is a position");
        let from = if on { Bitboard::ALL } else { z[0].bb() };
        for_each_unmove_from(&pos, from, |_piece, now, before| {
            let mut q = z;
            let k = q[..n_men]
                .iter()
                .position(|&s| s == now)
                .expect("the man is in the placement");
            q[k] = before;
            if let Some(p) = ix.index_of(&q[..n_men], turn) {
                visit(p as usize);
            }
        });
    }
}
