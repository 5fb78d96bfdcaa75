//! What of a slice the passes of the solver work on: the whole slice ([`Whole`]), or one part of
//! a slice cut into parts by bands of king pairs ([`Split`], see [`super::parts`]). The passes
//! are generic in it ([`Own`]); this module knows which part owns which segment and which parts
//! read it, and nothing of the passes.

use std::sync::Mutex;

use zermelo_chess::index::{SliceIndexer, PAWNLESS_KING_PAIRS};

use super::dtm_log::SEG_INDICES;
use super::paging::pawnless_near_pairs;

/// Which part owns each segment of a slice split into parts, for one of them: the passes of
/// that part work on its segments, and its un-moves post the predecessors of other parts'
/// segments to its outbox.
pub(super) struct Split {
    /// Per segment ([`SEG_INDICES`] indices), the part that owns it.
    owner: Vec<u16>,
    /// Per segment, the other parts whose verification reads its won bits (the parts of the
    /// K-slices one move of their side to move's king away, on the other side to move): its won
    /// bits and won frontiers go to them only.
    readers: Vec<Vec<u16>>,
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
        let segments = n.div_ceil(SEG_INDICES);
        let owner: Vec<u16> = (0..segments)
            .map(|s| {
                let kp = (s * SEG_INDICES % per_side) / kslice;
                (kp * parts / PAWNLESS_KING_PAIRS) as u16
            })
            .collect();
        // The segments of K-slice `k` (side to move `k / pairs`): those its indices fall in.
        let pairs = PAWNLESS_KING_PAIRS;
        let segments_of = |k: usize| {
            let first = k * kslice;
            first / SEG_INDICES..=(first + kslice - 1) / SEG_INDICES
        };
        // Who reads each K-slice's won bits: the parts of the K-slices whose moves lead there
        // (the verification). Not those whose un-moves lead there: without them, an un-move
        // sends the lines of won predecessors too (their part leaves them out), and that costs
        // fewer bytes than their won bits and frontiers would (KRBvKR in 3 parts: 0.44 bytes a
        // position crossed against 0.50; in 7: 0.94 against 1.28).
        let near = pawnless_near_pairs();
        let mut reads: Vec<Vec<u16>> = vec![Vec::new(); 2 * pairs];
        for k in 0..2 * pairs {
            let (side, kp) = (k / pairs, k % pairs);
            let owners: Vec<u16> = segments_of(k).map(|s| owner[s]).collect();
            for &p in &near[side][kp] {
                reads[(1 - side) * pairs + p as usize].extend(&owners);
            }
        }
        let mut readers: Vec<Vec<u16>> = vec![Vec::new(); segments];
        for (k, r) in reads.into_iter().enumerate() {
            for s in segments_of(k) {
                readers[s].extend(r.iter().filter(|&&p| p != owner[s]));
            }
        }
        for r in &mut readers {
            r.sort_unstable();
            r.dedup();
        }
        Split {
            owner,
            readers,
            me: me as u16,
            outbox: Mutex::default(),
        }
    }

    /// The other parts that read segment `s`'s won bits.
    pub(super) fn readers(&self, s: usize) -> &[u16] {
        &self.readers[s]
    }

    /// The part that owns index `i`.
    pub(super) fn owner(&self, i: usize) -> usize {
        self.owner[i / SEG_INDICES] as usize
    }

    /// The segments this part owns, in order.
    pub(super) fn segments(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.owner.len()).filter(|&s| self.owner[s] == self.me)
    }

    /// Takes the outbox's lines.
    pub(super) fn take_outbox(&self) -> Vec<(u64, u64)> {
        std::mem::take(&mut *self.outbox.lock().expect("outbox lock"))
    }
}

/// What of a slice the passes work on: the whole slice ([`Whole`]) or a part of it ([`Split`]).
/// The passes are generic in it, so that a slice solved whole runs them as if there were no
/// parts (tests on a value, even one that never changes, kept the compiler from inlining the
/// un-moves' closure: KQvKR 1.5% to 6% more instructions).
pub(super) trait Own: Sync {
    /// True for [`Whole`].
    const WHOLE: bool;
    /// True if index `i` is this part's.
    fn owns(&self, i: usize) -> bool;
    /// True if every index is this part's.
    fn owns_all(&self) -> bool {
        Self::WHOLE
    }
    /// Adds a thread's lines of other parts' predecessors to the outbox.
    fn post(&self, lines: Vec<(u64, u64)>);
}

/// A slice solved whole: every index is its own.
pub(super) struct Whole;

impl Own for Whole {
    const WHOLE: bool = true;
    #[inline(always)]
    fn owns(&self, _: usize) -> bool {
        true
    }
    #[inline(always)]
    fn post(&self, lines: Vec<(u64, u64)>) {
        debug_assert!(lines.is_empty(), "a whole slice has no other part");
    }
}

impl Own for Split {
    const WHOLE: bool = false;
    #[inline(always)]
    fn owns(&self, i: usize) -> bool {
        self.owner[i / SEG_INDICES] == self.me
    }
    fn post(&self, lines: Vec<(u64, u64)>) {
        if !lines.is_empty() {
            self.outbox.lock().expect("outbox lock").extend(lines);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zermelo_chess::slice::SliceKey;
    use zermelo_chess::Material;

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
