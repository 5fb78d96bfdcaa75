//! The slice solver (DESIGN §2): pure and synchronous, one slice against the finished values of
//! its successors.
//!
//! State: one `u16` per index, the table's own value array, solved in place (no copy at the end).
//! Final values are the table's (`0` illegal, `1` draw, `2 + n` mate in `n` plies); undecided
//! positions carry their state in the high bit (`UNDECIDED`, `NO_LOSS` below). Beside it, two
//! frontier bitmaps and per-chunk summaries: about 2.25 bytes per index.
//!
//! 1. *Init*: illegal placements are left at 0; positions that have an exit (a capture, a pawn
//!    move or a promotion) or are in check are looked at move by move (exits valued from the
//!    successor slices, mates found); every other position starts undecided, with no exit.
//! 2. *Retrograde passes*, one per ply `n`, from the positions whose final value is exactly `n`
//!    plies (the frontier), by un-moves computed on the index (no `Position` is built):
//!    * `n` even (lost in `n`): every undecided predecessor wins in `n + 1`;
//!    * `n` odd (won in `n`): every predecessor that may still lose is marked *changed*; then each
//!      changed position is *verified*: if every move inside the slice leads to a position won
//!      for the opponent, it is lost, in one ply more than its slowest such move (or its slowest
//!      losing exit). No move counters are kept.
//! 3. *Finish*: what is still undecided is a draw.
//!
//! The result is a pure function of the slice and its successors: every phase reads only values
//! final before it and writes each index from one rule, so the bytes do not depend on the
//! number of threads or the order of the work. Threads share the value array through relaxed
//! atomic loads and stores (plain moves on x86); the only locked operations set frontier bits,
//! once per position that becomes final.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Mutex;

use tracing::debug;
use zermelo_chess::attacks::{attacks, king_attacks, pawn_attacks};
use zermelo_chess::index::{
    group_rank, king_pair_field, on_triangle, pawnless_symmetry, ManField, Placement, SliceIndexer,
    SYMMETRY_TABLE, TRIANGLE_BB,
};
use zermelo_chess::slice::SliceKey;
use zermelo_chess::value::{Value, DRAW, ILLEGAL, MAX_PLIES};
use zermelo_chess::{Bitboard, Color, Piece, Role, Square};

use super::memory::{atomic_u16s, atomic_u64s};
use super::par::for_each_chunk;
use super::{SolveError, Successors};

// States of undecided positions (final values are below 0x8000).
/// Undecided and may still be lost; the low 13 bits hold its slowest losing exit (0 if none).
const UNDECIDED: u16 = 0x8000;
/// In an [`UNDECIDED`] state: a move of it was found to lead to a win for the opponent in this
/// ply; it is verified at the end of the ply.
const CHANGED: u16 = 0x2000;
/// The slowest losing exit of an [`UNDECIDED`] state.
const EXIT_MASK: u16 = 0x1fff;
/// Undecided, cannot be lost (an exit holds the draw or better), no winning exit.
const NO_LOSS: u16 = 0xc000;
/// `NO_LOSS | n`: undecided with a winning exit in `n` plies; wins in `n` unless faster inside.
const LEVEL_MASK: u16 = 0x3fff;

#[inline]
fn may_lose(v: u16) -> bool {
    v & 0xc000 == UNDECIDED
}

/// True if `v` is a final win (for the side to move at that index).
#[inline]
fn is_win(v: u16) -> bool {
    (2..UNDECIDED).contains(&v) && (v - 2) % 2 == 1
}

/// Indices per chunk of the per-chunk summaries.
const CHUNK_SHIFT: u32 = 12;
/// Distances a chunk's pending mask can flag; beyond, the whole slice is scanned at that distance.
const MASK_LEVELS: u32 = 512;

/// The values of a slice being solved, with the summaries the passes need.
struct State {
    values: Vec<AtomicU16>,
    /// Frontier bitmaps: `frontier[p % 2]` holds the indices whose final value is `p` plies,
    /// to un-move from in the pass of `p`.
    frontier: [Vec<AtomicU64>; 2],
    /// Per chunk of 2^CHUNK_SHIFT indices, a bit per distance at which some index of the chunk
    /// becomes final other than through the pass before (mates, positions with only exits,
    /// winning exits, losses slowed by an exit): those chunks are scanned at that distance.
    pending: Vec<[AtomicU64; (MASK_LEVELS / 64) as usize]>,
    /// Distances of MASK_LEVELS or more that have pending indices (rare: scanned whole).
    far_pending: Mutex<BTreeSet<u32>>,
    /// Per chunk: 1 if it holds a [`CHANGED`] index to verify.
    changed: Vec<AtomicU8>,
    /// Largest distance assigned so far (final or pending): the passes run up to it.
    horizon: AtomicU32,
}

impl State {
    fn new(n: usize) -> State {
        let words = n.div_ceil(64);
        let chunks = n.div_ceil(1 << CHUNK_SHIFT);
        let bitmap = || atomic_u64s(words);
        State {
            values: atomic_u16s(n, ILLEGAL),
            frontier: [bitmap(), bitmap()],
            pending: (0..chunks).map(|_| Default::default()).collect(),
            far_pending: Default::default(),
            changed: (0..chunks).map(|_| AtomicU8::new(0)).collect(),
            horizon: AtomicU32::new(0),
        }
    }

    #[inline]
    fn get(&self, i: usize) -> u16 {
        self.values[i].load(Relaxed)
    }

    #[inline]
    fn set(&self, i: usize, v: u16) {
        self.values[i].store(v, Relaxed);
    }

    /// Sets a final value found in the pass of `plies - 1`: it joins the next frontier.
    #[inline]
    fn set_next(&self, i: usize, plies: u32) {
        self.set(i, plies as u16 + 2);
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

    /// Sets a final value that joins the frontier when the passes reach its distance.
    fn set_final_later(&self, i: usize, plies: u32) {
        self.set(i, plies as u16 + 2);
        self.set_pending(i, plies);
    }
}

/// A slice's men and how its indices move: decoding, un-moves and moves on the index.
struct Geometry {
    ix: SliceIndexer,
    men: [Piece; 8],
    n: usize,
    /// Where Black's king is in `men` (White's is first).
    black_king: usize,
    pawnless: bool,
    per_side: u64,
    /// Each man's field in the index.
    fields: [ManField; 8],
    /// The pawns, by colour.
    pawns: [Bitboard; 2],
}

/// A decoded index: the men's squares, who is to move, and the board's occupancy.
struct Decoded {
    squares: [Square; 8],
    turn: Color,
    /// The index without its side to move (`index % per_side`).
    fields: u64,
    /// Every man's square, pawns included.
    occupied: Bitboard,
}

impl Geometry {
    fn new(key: &SliceKey) -> Geometry {
        let ix = SliceIndexer::new(*key);
        let mut men = [Piece::new(Color::White, Role::King); 8];
        men[..ix.men().len()].copy_from_slice(ix.men());
        Geometry {
            n: ix.men().len(),
            black_king: ix.black_king(),
            pawnless: ix.is_pawnless(),
            per_side: ix.per_side(),
            fields: ix.fields(),
            pawns: [key.white_pawns, key.black_pawns],
            men,
            ix,
        }
    }

    /// The men of `color` in `men`: White's are before Black's king.
    #[inline]
    fn side(&self, color: Color) -> std::ops::Range<usize> {
        match color {
            Color::White => 0..self.black_king,
            Color::Black => self.black_king..self.n,
        }
    }

    #[inline]
    fn is_king(&self, k: usize) -> bool {
        k == 0 || k == self.black_king
    }

    /// The placement at `i`, or `None` if two men (pawns included) share a square.
    #[inline]
    fn decode(&self, i: u64) -> Option<Decoded> {
        let Placement { squares, turn } = self.ix.placement(i);
        let mut occupied = self.pawns[0] | self.pawns[1];
        for &s in &squares[..self.n] {
            if occupied.contains(s) {
                return None;
            }
            occupied = occupied.with(s);
        }
        Some(Decoded {
            squares,
            turn,
            fields: i % self.per_side,
            occupied,
        })
    }

    /// True if a man of `by` (pawns included) attacks `target` in `d`.
    #[inline]
    fn attacked(&self, d: &Decoded, target: Square, by: Color) -> bool {
        if (pawn_attacks(by.other(), target) & self.pawns[by.index()]).any() {
            return true;
        }
        self.side(by)
            .any(|k| attacks(self.men[k], d.squares[k], d.occupied).contains(target))
    }

    /// Calls `f` with the index of `d` with man `k` moved to each square of `targets` and `turn`
    /// to move, by arithmetic on the index: only the man's field changes. Skips a square that
    /// puts the kings side by side, or for a king of a pawnless slice out of table form.
    #[inline]
    fn for_each_shift(&self, d: &Decoded, k: usize, targets: Bitboard, turn: Color, f: &mut impl FnMut(u64)) {
        let field = self.fields[k];
        let stride = field.stride;
        let now = d.squares[k];
        let base = d.fields + turn.index() as u64 * self.per_side;
        if self.is_king(k) {
            // Only the king-pair field changes; a pair not stored (kings side by side, or in a
            // pawnless slice out of table form) is skipped.
            let (wk, bk) = (d.squares[0], d.squares[self.black_king]);
            let old = king_pair_field(self.pawnless, wk, bk).expect("a decoded king pair is stored");
            let base = base.wrapping_sub(old * stride);
            for to in targets {
                let pair = if k == 0 {
                    king_pair_field(self.pawnless, to, bk)
                } else {
                    king_pair_field(self.pawnless, wk, to)
                };
                if let Some(new) = pair {
                    f(base.wrapping_add(new * stride));
                }
            }
        } else if field.len == 1 {
            // A lone man: its field is its square.
            let base = base.wrapping_sub(now.u8() as u64 * stride);
            for to in targets {
                f(base.wrapping_add(to.u8() as u64 * stride));
            }
        } else {
            let group = &d.squares[field.first..field.first + field.len];
            let base = base.wrapping_sub(group_rank(group) * stride);
            let mut moved = [Square::A1; 8];
            moved[..field.len].copy_from_slice(group);
            for to in targets {
                moved[k - field.first] = to;
                f(base.wrapping_add(group_rank(&moved[..field.len]) * stride));
            }
        }
    }

    /// Calls `f` with the index of every position reached from `d` by a move inside the slice
    /// (a man other than a pawn to an empty square). Some may be illegal (the mover's king left
    /// in check): their value is 0.
    #[inline]
    fn for_each_move(&self, d: &Decoded, mut f: impl FnMut(u64)) {
        let them = d.turn.other();
        for k in self.side(d.turn) {
            let now = d.squares[k];
            let targets = attacks(self.men[k], now, d.occupied) & !d.occupied;
            if self.pawnless && self.is_king(k) {
                // The king pair may leave table form: such a move's position is brought back
                // into it; the others shift the king-pair field.
                let (wk, bk) = (d.squares[0], d.squares[self.black_king]);
                let mut in_form = Bitboard::EMPTY;
                for to in targets {
                    let (w, b) = if k == 0 { (to, bk) } else { (wk, to) };
                    if pawnless_symmetry(w, b) == 0 {
                        in_form = in_form.with(to);
                        continue;
                    }
                    let mut q = d.squares;
                    q[k] = to;
                    let t = &SYMMETRY_TABLE[pawnless_symmetry(w, b)];
                    for s in &mut q[..self.n] {
                        *s = t[s.index()];
                    }
                    if let Some(s) = self.ix.index_of(&q[..self.n], them) {
                        f(s);
                    }
                }
                self.for_each_shift(d, k, in_form, them, &mut f);
            } else {
                self.for_each_shift(d, k, targets, them, &mut f);
            }
        }
    }

    /// Calls `f` with the index of every stored position from which a move inside the slice
    /// leads to index `j` (decoded as `d`), once per such move. Some may be illegal (the side
    /// to move in `j` in check there): their value is 0.
    #[inline]
    fn for_each_unmove(&self, j: u64, d: &Decoded, mut f: impl FnMut(u64)) {
        let mover = d.turn.other();
        // The position itself: every man of the mover may have come from any empty square it
        // attacks; the index changes in that man's field only.
        for k in self.side(mover) {
            let now = d.squares[k];
            let targets = attacks(self.men[k], now, d.occupied) & !d.occupied;
            self.for_each_shift(d, k, targets, mover, &mut f);
        }
        if !self.pawnless {
            return;
        }
        // Pawnless: a stored position `q` is a predecessor of `j` through every move that leads
        // to an image `z` of position `j` whose table form is `j` itself. Beside `j`, such an
        // image is not in table form, so its king pair is not stored: only a move of the
        // mover's king can have led there from a stored position. Un-move that king from each
        // distinct such image; each move from a stored position into `j` is found exactly once.
        let n = self.n;
        let bk = self.black_king;
        let king = if mover == Color::White { 0 } else { bk };
        let mut seen = [[Square::A1; 8]; 8];
        seen[0] = d.squares;
        sort_like_men(&self.men[..n], &mut seen[0][..n]);
        let mut n_seen = 1;
        for table in &SYMMETRY_TABLE[1..] {
            let z0 = table[d.squares[0].index()];
            // With Black's king moved, White's stays: it must be on the triangle already; with
            // White's moved, it must stand next to the triangle.
            if mover == Color::Black && !on_triangle(z0) || (king_attacks(z0) & TRIANGLE_BB).is_empty() {
                continue;
            }
            let mut z = [Square::A1; 8];
            for (t, &s) in z.iter_mut().zip(&d.squares[..n]) {
                *t = table[s.index()];
            }
            // The image must go back to `j` itself (its table form).
            let back = &SYMMETRY_TABLE[pawnless_symmetry(z[0], z[bk])];
            if back[z[0].index()] != d.squares[0] {
                continue;
            }
            let mut w = [Square::A1; 8];
            for (t, &s) in w.iter_mut().zip(&z[..n]) {
                *t = back[s.index()];
            }
            if self.ix.index_of(&w[..n], d.turn) != Some(j) {
                continue;
            }
            // Distinct images only (a position may be its own diagonal mirror): like men
            // compared as sets.
            let mut set = z;
            sort_like_men(&self.men[..n], &mut set[..n]);
            if seen[..n_seen].contains(&set) {
                continue;
            }
            seen[n_seen] = set;
            n_seen += 1;
            let occupied = symmetry_of_bb(table, d.occupied);
            let targets = king_attacks(z[king]) & !occupied;
            for before in targets {
                let mut q = z;
                q[king] = before;
                if let Some(p) = self.ix.index_of(&q[..n], mover) {
                    f(p);
                }
            }
        }
    }
}

/// Where a capture of one man of a pawnless slice leads: the successor slice and how this
/// slice's men map onto its men.
struct CaptureExit<'a> {
    /// The successor's values and indexer; `None` when only the kings remain (a draw).
    target: Option<(&'a [u16], SliceIndexer)>,
    /// The successor's material is stored with the colours swapped.
    flip: bool,
    /// For each man of this slice, its place among the successor's men (the captured man has
    /// none: `usize::MAX`).
    to_successor: [usize; 8],
    /// Where Black's king is among the successor's men.
    successor_black_king: usize,
}

/// The exits by capture of every man of a pawnless slice that is not a king (indexed like
/// [`Geometry::men`]), or `None` if the slice has pawns or a successor's values are not
/// available as an array (then exits are looked at through positions).
fn capture_exits<'a>(
    g: &Geometry,
    key: &SliceKey,
    succ: &'a dyn Successors,
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
        let mut to_successor = [usize::MAX; 8];
        let mut target = None;
        let mut successor_black_king = 0;
        if !rest.is_bare_kings() {
            let skey = SliceKey::pawnless(stored);
            let values = succ.slice_values(&skey)?;
            let six = SliceIndexer::new(skey);
            let smen = six.men();
            let mut taken = [false; 8];
            for k in (0..g.n).filter(|&k| k != m) {
                let p = g.men[k];
                let p = if flip {
                    Piece::new(p.color.other(), p.role)
                } else {
                    p
                };
                let slot = (0..smen.len())
                    .find(|&s| !taken[s] && smen[s] == p)
                    .expect("the successor has every man but the captured one");
                taken[slot] = true;
                to_successor[k] = slot;
            }
            successor_black_king = six.black_king();
            target = Some((values, six));
        }
        out.push(Some(CaptureExit {
            target,
            flip,
            to_successor,
            successor_black_king,
        }));
    }
    Some(out)
}

/// A bitboard mapped square by square through a symmetry table.
#[inline]
fn symmetry_of_bb(table: &[Square; 64], b: Bitboard) -> Bitboard {
    b.into_iter()
        .fold(Bitboard::EMPTY, |acc, s| acc.with(table[s.index()]))
}

/// Sorts the squares of each run of like men (same piece, next to each other in `men`), so that
/// two placements of one position compare equal.
pub(super) fn sort_like_men(men: &[Piece], squares: &mut [Square]) {
    let mut start = 0;
    while start < men.len() {
        let end = start + men[start..].iter().take_while(|&&p| p == men[start]).count();
        squares[start..end].sort_unstable();
        start = end;
    }
}

/// Solves one slice. `threads` is the number of threads for this slice; the output does not
/// depend on it.
pub fn solve_slice(key: &SliceKey, succ: &dyn Successors, threads: usize) -> Result<Vec<u16>, SolveError> {
    let g = Geometry::new(key);
    let n = g.ix.size() as usize;
    let start = std::time::Instant::now();
    let st = State::new(n);
    let chunk = 1 << CHUNK_SHIFT;

    // 1. Init: illegal placements, exits, mates.
    let captures = capture_exits(&g, key, succ);
    for_each_chunk(n, chunk, threads, |range| {
        for i in range {
            init_index(&g, &st, i, *key, succ, captures.as_deref())?;
        }
        Ok::<(), SolveError>(())
    })?;
    let init_seconds = start.elapsed().as_secs_f64();

    // 2. Retrograde passes, one per ply.
    let words = st.frontier[0].len();
    let mut plies: u32 = 0;
    while plies <= st.horizon.load(Relaxed) {
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
        let frontier = &st.frontier[plies as usize % 2];
        // Indices that become final at this distance other than through the last pass join the
        // frontier: scan the chunks flagged for it.
        let scan_all =
            plies >= MASK_LEVELS && st.far_pending.lock().expect("far pending lock").contains(&plies);
        let (mask_word, mask_bit) = ((plies / 64) as usize % 8, 1u64 << (plies % 64));
        for_each_chunk(st.pending.len(), 16, threads, |chunks| {
            for c in chunks {
                let flagged = plies < MASK_LEVELS && st.pending[c][mask_word].load(Relaxed) & mask_bit != 0;
                if !flagged && !scan_all {
                    continue;
                }
                for i in (c << CHUNK_SHIFT)..((c + 1) << CHUNK_SHIFT).min(n) {
                    let v = st.get(i);
                    if v == pending_win {
                        st.set(i, target);
                    }
                    if v == target || v == pending_win {
                        frontier[i / 64].fetch_or(1 << (i % 64), Relaxed);
                    }
                }
            }
            Ok::<(), SolveError>(())
        })?;
        // Un-move from the frontier.
        let lost_here = plies.is_multiple_of(2);
        for_each_chunk(words, 64, threads, |range| {
            for w in range {
                let mut bits = frontier[w].swap(0, Relaxed);
                while bits != 0 {
                    let j = (w * 64) as u64 + bits.trailing_zeros() as u64;
                    bits &= bits - 1;
                    let d = g.decode(j).expect("a final index is a position");
                    g.for_each_unmove(j, &d, |p| {
                        let p = p as usize;
                        let v = st.get(p);
                        if lost_here {
                            // A move into a loss in `plies`: the predecessor wins in `plies + 1`.
                            if v >= UNDECIDED {
                                st.set_next(p, plies + 1);
                            }
                        } else if may_lose(v) && v & CHANGED == 0 {
                            st.set(p, v | CHANGED);
                            st.changed[p >> CHUNK_SHIFT].store(1, Relaxed);
                        }
                    });
                }
            }
            Ok::<(), SolveError>(())
        })?;
        if !lost_here {
            // Verify the changed positions: lost if every inside move leads to a win.
            for_each_chunk(st.changed.len(), 4, threads, |chunks| {
                for c in chunks {
                    if st.changed[c].swap(0, Relaxed) == 0 {
                        continue;
                    }
                    for i in (c << CHUNK_SHIFT)..((c + 1) << CHUNK_SHIFT).min(n) {
                        let v = st.get(i);
                        if may_lose(v) && v & CHANGED != 0 {
                            verify(&g, &st, i, v, plies);
                        }
                    }
                }
                Ok::<(), SolveError>(())
            })?;
        }
        plies += 1;
    }
    debug!(slice = %key, passes = plies, init_seconds, seconds = start.elapsed().as_secs_f64(), "slice solved");

    // 3. Finish: undecided positions are draws (in place: the same allocation).
    Ok(st
        .values
        .into_iter()
        .map(|c| {
            let v = c.into_inner();
            if v >= UNDECIDED {
                DRAW
            } else {
                v
            }
        })
        .collect())
}

/// A changed position `i` (state `v`) in the pass of `plies` (a win for the opponent was found
/// among its successors): lost if every move inside the slice leads to a win for the opponent,
/// in one ply more than the slowest of them or in its slowest losing exit, whichever is later.
#[inline]
fn verify(g: &Geometry, st: &State, i: usize, v: u16, plies: u32) {
    let d = g.decode(i as u64).expect("a changed index is a position");
    let mut all_won = true;
    let mut slowest = 0u16;
    g.for_each_move(&d, |s| {
        if !all_won {
            return;
        }
        let w = st.get(s as usize);
        if w == ILLEGAL {
            return; // Not a legal move.
        }
        if is_win(w) {
            slowest = slowest.max(w - 2);
        } else {
            all_won = false;
        }
    });
    if !all_won {
        st.set(i, v & !CHANGED);
        return;
    }
    let lost_in = (slowest as u32 + 1).max((v & EXIT_MASK) as u32);
    debug_assert!(
        lost_in > plies,
        "a loss is found after its last move became final"
    );
    if lost_in == plies + 1 {
        st.set_next(i, plies + 1);
    } else {
        st.set_final_later(i, lost_in);
    }
}

/// Looks at one index before the passes: illegal (left 0), final (no move inside the slice), or
/// undecided with its best exit.
#[inline]
fn init_index(
    g: &Geometry,
    st: &State,
    i: usize,
    key: SliceKey,
    succ: &dyn Successors,
    captures: Option<&[Option<CaptureExit<'_>>]>,
) -> Result<(), SolveError> {
    let Some(d) = g.decode(i as u64) else {
        return Ok(());
    };
    let us = d.turn;
    let them = us.other();
    let (our_king, their_king) = match us {
        Color::White => (d.squares[0], d.squares[g.black_king]),
        Color::Black => (d.squares[g.black_king], d.squares[0]),
    };
    // Legal unless the side not to move is attacked (kings are never side by side here).
    if g.attacked(&d, their_king, us) {
        return Ok(());
    }
    // Exits: a pawn of ours (it may move), or a man of ours attacking one of theirs that is not
    // the king. Those positions, and positions in check (mates), are looked at move by move.
    let mut theirs = g.pawns[them.index()];
    for k in g.side(them) {
        if k != 0 && k != g.black_king {
            theirs = theirs.with(d.squares[k]);
        }
    }
    let may_exit = g.pawns[us.index()].any()
        || g.side(us)
            .any(|k| (attacks(g.men[k], d.squares[k], d.occupied) & theirs).any());
    let in_check = g.attacked(&d, our_king, them);
    if !may_exit && !in_check {
        // Only moves inside the slice, or none (stalemate: never changed, a draw at the end).
        st.set(i, UNDECIDED);
        return Ok(());
    }
    if let (Some(captures), false) = (captures, in_check) {
        return init_by_captures(g, st, i, &d, our_king, key, captures);
    }
    let pos =
        g.ix.position_of(&d.squares[..g.n], d.turn)
            .expect("a decoded index is a position");
    debug_assert!(pos.validate().is_ok(), "{pos}");
    let moves = pos.legal_moves();
    if moves.is_empty() {
        if pos.is_check() {
            st.set_final_later(i, 0);
        } else {
            st.set(i, DRAW);
        }
        return Ok(());
    }
    let mut inside = false;
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
            inside = true;
        }
    }
    if !inside {
        // Only exits: the best of them is final.
        match best.expect("a move exists") {
            Value::Draw => st.set(i, DRAW),
            Value::Win(d) | Value::Loss(d) => st.set_final_later(i, d as u32),
        }
        return Ok(());
    }
    set_undecided(st, i, best, slowest_loss, key)
}

/// Sets the state of a position with a move inside the slice from its best exit (`None`: no
/// exit) and its slowest losing exit.
#[inline]
fn set_undecided(
    st: &State,
    i: usize,
    best: Option<Value>,
    slowest_loss: u16,
    key: SliceKey,
) -> Result<(), SolveError> {
    let state = match best {
        None => UNDECIDED,
        Some(Value::Loss(_)) => {
            if slowest_loss > EXIT_MASK {
                return Err(SolveError::TooDeep(key));
            }
            UNDECIDED | slowest_loss
        }
        Some(Value::Draw) => NO_LOSS,
        Some(Value::Win(d)) => {
            if d > LEVEL_MASK {
                return Err(SolveError::TooDeep(key));
            }
            st.set_pending(i, d as u32);
            NO_LOSS | d
        }
    };
    st.set(i, state);
    Ok(())
}

/// [`init_index`] for a position of a pawnless slice that is not in check and has a capture:
/// the captures are played on the placement and read by index from the successor slices; the
/// moves inside the slice are looked for only when every capture loses.
#[inline]
fn init_by_captures(
    g: &Geometry,
    st: &State,
    i: usize,
    d: &Decoded,
    our_king: Square,
    key: SliceKey,
    captures: &[Option<CaptureExit<'_>>],
) -> Result<(), SolveError> {
    let us = d.turn;
    let them = us.other();
    // True if, with the men of `them` but `skip` on their squares and `occupied`, our king on
    // `king` is attacked.
    let attacked_after = |king: Square, occupied: Bitboard, skip: usize| {
        g.side(them)
            .filter(|&j| j != skip)
            .any(|j| attacks(g.men[j], d.squares[j], occupied).contains(king))
    };
    let mut best: Option<Value> = None;
    let mut slowest_loss: u16 = 0;
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
                None => Value::Draw,
                Some((values, six)) => {
                    let mut sq = [Square::A1; 8];
                    for j in (0..g.n).filter(|&j| j != m) {
                        let s = if j == k { to } else { d.squares[j] };
                        sq[exit.to_successor[j]] = if exit.flip { s.flip_rank() } else { s };
                    }
                    let turn = if exit.flip { us } else { them };
                    let n = g.n - 1;
                    let sym = pawnless_symmetry(sq[0], sq[exit.successor_black_king]);
                    if sym != 0 {
                        let t = &SYMMETRY_TABLE[sym];
                        for s in &mut sq[..n] {
                            *s = t[s.index()];
                        }
                    }
                    let index = six
                        .index_of(&sq[..n], turn)
                        .expect("the kings of a legal position are apart");
                    Value::from_raw(values[index as usize]).ok_or(SolveError::BadSuccessor {
                        slice: *six.key(),
                        index,
                    })?
                }
            }
            .after_move();
            if let Value::Loss(d) = v {
                slowest_loss = slowest_loss.max(d);
            }
            best = Some(best.map_or(v, |b| b.max(v)));
        }
    }
    if let Some(Value::Loss(_)) = best {
        // Lost unless a move inside the slice does better: is there one?
        let inside = g.side(us).any(|k| {
            let from = d.squares[k];
            let targets = attacks(g.men[k], from, d.occupied) & !d.occupied;
            targets.into_iter().any(|to| {
                let occupied = d.occupied.without(from).with(to);
                let king = if g.is_king(k) { to } else { our_king };
                !attacked_after(king, occupied, usize::MAX)
            })
        });
        if !inside {
            st.set_final_later(i, slowest_loss as u32);
            return Ok(());
        }
    }
    // With a move inside, or none at all (every capture illegal): a stalemate never changes
    // and ends a draw, a position with only draws or wins is never lost.
    set_undecided(st, i, best, slowest_loss, key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solver::reference::solve_slice_reference;
    use crate::tables::SliceMap;

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
        *compared += new.len() as u64;
        map.insert(key, new.into());
    }

    /// The same with pawns: every slice of KPvKP, KPPvK and KRvKP, and of every material they
    /// convert into (promotions to Q, R, B, N included), solved by both solvers.
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
