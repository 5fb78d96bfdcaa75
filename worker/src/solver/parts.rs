//! One slice solved in parts: each part owns the K-slices of a band of king pairs (on both
//! sides to move) and keeps their state; the parts run every pass of a ply in step and pass
//! each other what crosses between them. This is how one slice is shared by several workers,
//! each holding its part (issue 35); [`solve_in_parts`] runs the parts in one process, each
//! with a state of its own, and is the same passes as [`super::retrograde`]'s, called with a
//! [`Split`], not a second solver.
//!
//! What crosses (a king move is the only move that leaves a K-slice, so a band's border is
//! crossed by king moves alone):
//! - after the init, each part's won bitmap (its illegal positions), to every other part, which
//!   keeps a copy of the other parts' won bits: the verification of a position reads the won
//!   bits of the positions its moves lead to, in its own part or not;
//! - after each scan of a won frontier (odd plies), the frontier of each part, as its log
//!   encodes it, to every other part, which sets those won bits in its copy;
//! - after each pass of un-moves, the lines of predecessors that another part owns, `(first
//!   index of the line, its squares)`, to that part, which marks them as its own un-moves would
//!   have ([`mark_lines`]: a mark does the same whatever the order, and however often);
//! - the frontier's size and each part's horizon (the largest ply assigned), so that every part
//!   runs the same passes.
//!
//! Nothing else is shared: every part inits, scans, marks and verifies its own positions, and
//! writes their values. The values are those of the slice solved whole.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;

use zermelo_chess::index::{SliceIndexer, PAWNLESS_KING_PAIRS};
use zermelo_chess::slice::SliceKey;
use zermelo_chess::value::MAX_PLIES;

use super::dtm_log::{for_each_offset, DtmLog, SEG_INDICES};
use super::geometry::Geometry;
use super::retrograde::{
    init_state, mark_lines, scan_frontier, unmove_frontier, verify_changed, write_values, Context,
};
use super::state::{State, SPILL_FROM};
use super::{SolveError, Successors};

/// Which part owns each segment of a slice split into parts, for one of them: the passes of
/// that part work on its segments, and its un-moves post the predecessors of other parts'
/// segments to its outbox.
pub(super) struct Split {
    /// Per segment ([`SEG_INDICES`] indices), the part that owns it.
    owner: Vec<u16>,
    /// This part.
    me: u16,
    /// Lines of predecessors of other parts found by this part's un-moves in the pass being
    /// run: `(first index of the line, squares)`.
    outbox: Mutex<Vec<(u64, u64)>>,
}

impl Split {
    /// Part `me` of the pawnless slice of `ix` cut into `parts` parts: a segment belongs to the
    /// part of the band of king pairs (in the index's order of king pairs, the same bands for
    /// both sides to move) that holds its first index.
    pub(super) fn new(ix: &SliceIndexer, parts: usize, me: usize) -> Split {
        debug_assert!(ix.is_pawnless() && (1..=u16::MAX as usize).contains(&parts) && me < parts);
        let n = ix.size() as usize;
        let per_side = ix.per_side() as usize;
        let kslice = per_side / PAWNLESS_KING_PAIRS;
        let owner = (0..n.div_ceil(SEG_INDICES))
            .map(|s| {
                let kp = (s * SEG_INDICES % per_side) / kslice;
                (kp * parts / PAWNLESS_KING_PAIRS) as u16
            })
            .collect();
        Split {
            owner,
            me: me as u16,
            outbox: Mutex::default(),
        }
    }

    /// True if index `i` is this part's.
    #[inline(always)]
    pub(super) fn owns(&self, i: usize) -> bool {
        self.owner[i / SEG_INDICES] == self.me
    }

    /// The part that owns index `i`.
    pub(super) fn owner(&self, i: usize) -> usize {
        self.owner[i / SEG_INDICES] as usize
    }

    /// The segments this part owns, in order.
    pub(super) fn segments(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.owner.len()).filter(|&s| self.owner[s] == self.me)
    }

    /// Adds a thread's lines of other parts' predecessors to the outbox.
    pub(super) fn post(&self, lines: Vec<(u64, u64)>) {
        if !lines.is_empty() {
            self.outbox.lock().expect("outbox lock").extend(lines);
        }
    }

    /// Takes the outbox's lines.
    pub(super) fn take_outbox(&self) -> Vec<(u64, u64)> {
        std::mem::take(&mut *self.outbox.lock().expect("outbox lock"))
    }
}

/// True if slice `key` can be solved in parts: pawnless, solved by lines of 64 (its lowest field
/// a lone man). Slices with pawns are small (a pawn configuration each) and go to a worker whole.
pub fn splittable(key: &SliceKey) -> bool {
    let g = Geometry::new(key);
    g.pawnless && g.line_man().is_some()
}

/// What crossed between the parts of a slice solved by [`solve_in_parts`], in bytes as they
/// would travel (uncompressed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Crossed {
    /// The won bitmaps after the init (8 bytes a word, to each other part).
    pub won_bytes: u64,
    /// The won frontiers, as their logs encode them (to each other part).
    pub frontier_bytes: u64,
    /// The lines of predecessors marked by another part (16 bytes a line).
    pub mark_bytes: u64,
    /// Passes (plies) run.
    pub plies: u32,
}

/// Solves slice `key` (pawnless, [`splittable`]) as `parts` parts that exchange only what
/// crosses between them (see the module comment), each part's passes on `threads` threads, and
/// hands its values to `sink` in index order, as [`super::solve_slice_into`] does: the same
/// values. Returns what crossed.
pub fn solve_in_parts(
    key: &SliceKey,
    succ: &dyn Successors,
    parts: usize,
    threads: usize,
    sink: &mut dyn FnMut(&[u16]) -> Result<(), SolveError>,
) -> Result<Crossed, SolveError> {
    assert!(splittable(key), "slice {key} is not solved in parts");
    let g = Geometry::new(key);
    let ctx = Context::new(&g, key, succ);
    let n = g.ix.size() as usize;
    let parts = parts.clamp(1, PAWNLESS_KING_PAIRS);
    let splits: Vec<Split> = (0..parts).map(|me| Split::new(&g.ix, parts, me)).collect();
    let mut crossed = Crossed::default();

    // Init: each part its own positions, then its won bits (the illegal ones) to the others.
    let mut states = Vec::with_capacity(parts);
    for sp in &splits {
        let mut st = State::of(&g);
        init_state(&ctx, &st, threads, Some(sp), &|| false)?;
        st.track_won(threads, false, false, Some(sp))?;
        states.push(st);
    }
    for (a, sp) in splits.iter().enumerate() {
        for s in sp.segments() {
            let words = s * SEG_INDICES / 64..((s + 1) * SEG_INDICES).min(n) / 64;
            crossed.won_bytes += 8 * words.len() as u64 * (parts as u64 - 1);
            for (b, st) in states.iter().enumerate().filter(|&(b, _)| b != a) {
                debug_assert_ne!(b, a);
                for w in words.clone() {
                    st.won[w].store(states[a].won[w].load(Relaxed), Relaxed);
                }
            }
        }
    }

    // The passes, every part's in step.
    let mut logs: Vec<DtmLog> = (0..parts).map(|_| DtmLog::new(n >= SPILL_FROM)).collect();
    let mut plies = 0u32;
    let mut encoded = Vec::new();
    while plies
        <= states
            .iter()
            .map(|st| st.horizon.load(Relaxed))
            .max()
            .unwrap_or(0)
    {
        if plies >= MAX_PLIES as u32 - 1 {
            return Err(SolveError::TooDeep(*key));
        }
        let mut frontier = 0;
        for ((st, log), sp) in states.iter().zip(&mut logs).zip(&splits) {
            frontier += scan_frontier(&ctx, st, log, plies, threads, Some(sp))?;
        }
        if plies % 2 == 1 {
            // The won frontier of each part to the others' won bits.
            for (a, sp) in splits.iter().enumerate() {
                for s in sp.segments() {
                    logs[a]
                        .read_segment(plies, s, &mut encoded)
                        .map_err(SolveError::Scratch)?;
                    if encoded.is_empty() {
                        continue;
                    }
                    crossed.frontier_bytes += encoded.len() as u64 * (parts as u64 - 1);
                    for (_, st) in states.iter().enumerate().filter(|&(b, _)| b != a) {
                        for_each_offset(&encoded, |o| st.set_won_bits(s * SEG_INDICES + o, 1 << (o % 64)));
                    }
                }
            }
        }
        let mut hold_won = None;
        for ((st, log), sp) in states.iter().zip(&logs).zip(&splits) {
            let hold = unmove_frontier(&ctx, st, log, plies, frontier, threads, Some(sp))?;
            debug_assert!(hold_won.is_none_or(|h| h == hold), "the parts decide alike");
            hold_won = Some(hold);
        }
        let hold_won = hold_won.unwrap_or(false);
        // The lines of each part's outbox to the parts that own them.
        let mut inboxes: Vec<Vec<(u64, u64)>> = vec![Vec::new(); parts];
        for sp in &splits {
            for (base, bits) in sp.take_outbox() {
                crossed.mark_bytes += 16;
                inboxes[sp.owner(base as usize)].push((base, bits));
            }
        }
        for (st, inbox) in states.iter().zip(&inboxes) {
            mark_lines(st, plies, hold_won, inbox, threads)?;
        }
        if plies % 2 == 1 {
            for st in &states {
                verify_changed(&ctx, st, plies, hold_won, threads)?;
            }
        }
        plies += 1;
    }
    crossed.plies = plies;

    // Each part's values, then all of them in index order.
    let segments = n.div_ceil(SEG_INDICES);
    let mut values: Vec<Option<Vec<u16>>> = vec![None; segments];
    for ((st, log), sp) in states.into_iter().zip(&logs).zip(&splits) {
        let mut mine = sp.segments();
        write_values(st, log, threads, Some(sp), &mut |v| {
            let s = mine.next().expect("a segment of the part");
            values[s] = Some(v.to_vec());
            Ok(())
        })?;
    }
    for v in values {
        sink(&v.expect("every segment has its part"))?;
    }
    Ok(crossed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solver::retrograde::solve_slice;
    use crate::tables::SliceMap;
    use zermelo_chess::Material;

    /// Slice `key` and every slice it leads into, solved whole, into `map`.
    fn solve_into(key: SliceKey, map: &mut SliceMap) {
        if map.contains(&key) {
            return;
        }
        for s in key.successors() {
            solve_into(s, map);
        }
        let values = solve_slice(&key, &*map, 2).unwrap();
        map.insert(key, values.into());
    }

    /// A slice solved in 2, 3 and 7 parts, on 1 and 2 threads, has the values of the slice
    /// solved whole, and something crossed between the parts (won bits, frontiers and marks).
    /// KRvKN, KQvKR (captures into other tables both ways, a long mate), KBNvK (mates only in
    /// the corners of the bishop's colour: long lines across every band).
    #[test]
    fn a_slice_solved_in_parts_has_the_values_of_the_slice_solved_whole() {
        let mut map = SliceMap::new();
        for m in ["KRvKN", "KQvKR", "KBNvK"] {
            let key = SliceKey::pawnless(m.parse::<Material>().unwrap());
            for s in key.successors() {
                solve_into(s, &mut map);
            }
            assert!(splittable(&key));
            let whole = solve_slice(&key, &map, 2).unwrap();
            for (parts, threads) in [(2, 1), (3, 2), (7, 2)] {
                let mut values = Vec::new();
                let crossed = solve_in_parts(&key, &map, parts, threads, &mut |v| {
                    values.extend_from_slice(v);
                    Ok(())
                })
                .unwrap();
                assert_eq!(values.len(), whole.len(), "{m} in {parts} parts");
                let wrong = values.iter().zip(&whole).filter(|(a, b)| a != b).count();
                assert_eq!(
                    wrong, 0,
                    "{m} in {parts} parts on {threads} threads: {wrong} values differ"
                );
                assert!(
                    crossed.won_bytes > 0 && crossed.frontier_bytes > 0 && crossed.mark_bytes > 0,
                    "{m} in {parts} parts: {crossed:?}"
                );
            }
        }
    }

    /// Every segment has exactly one part, and each part has some.
    #[test]
    fn every_segment_has_one_part() {
        let key = SliceKey::pawnless("KRvKN".parse::<Material>().unwrap());
        let ix = SliceIndexer::new(key);
        for parts in [2, 3, 7] {
            let splits: Vec<Split> = (0..parts).map(|me| Split::new(&ix, parts, me)).collect();
            let segments = (ix.size() as usize).div_ceil(SEG_INDICES);
            for s in 0..segments {
                let owners = splits.iter().filter(|sp| sp.owns(s * SEG_INDICES)).count();
                assert_eq!(owners, 1, "segment {s} of {parts} parts");
            }
            for sp in &splits {
                assert!(sp.segments().count() > 0, "a part of {parts} without a segment");
            }
        }
    }
}
