//! What of a slice the passes of the solver work on: the whole slice ([`Whole`]), or one part of
//! a slice cut into parts by bands of king pairs ([`Split`], see [`super::parts`]). The passes
//! are generic in it ([`Own`]); this module knows which part owns which segment and which parts
//! read it, and nothing of the passes.

use std::io::Read;
use std::sync::Mutex;

use zermelo_chess::index::{SliceIndexer, PAWNLESS_KING_PAIRS};

use super::dtm_log::SEG_INDICES;
use super::paging::{pawnless_near_pairs, ALL_FILES, WON_FILE};
use super::SolveError;

/// A thread of the un-moves posts the lines of other parts it found every this many lines (and
/// at the end of its segments): what waits uncompressed is bounded.
pub(super) const POST_LINES: usize = 1 << 16;

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
    /// Per segment, whether this part holds its won bits (it owns the segment or reads it).
    holds_won: Vec<bool>,
    /// This part.
    me: u16,
    /// Per part, the lines of predecessors of its segments found by this part's un-moves in
    /// the pass being run, `(first index of the line, squares)`, as chunks of
    /// [`encode_lines`] (a few bytes a line instead of 16).
    outbox: Vec<Mutex<Vec<u8>>>,
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
        let holds_won = (0..segments)
            .map(|s| owner[s] == me as u16 || readers[s].contains(&(me as u16)))
            .collect();
        Split {
            owner,
            readers,
            holds_won,
            me: me as u16,
            outbox: (0..parts).map(|_| Mutex::default()).collect(),
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

    /// Per K-slice of the slice of `ix` (side to move × king pairs + king pair), the files of
    /// the byte solver's paged state this part touches there ([`super::paging::Pager::new`]'s `only`):
    /// every file where it owns a segment, the won bitmap where it reads one's won bits, none
    /// elsewhere.
    pub(super) fn kslice_files(&self, ix: &SliceIndexer) -> Vec<u32> {
        let n = ix.size() as usize;
        let kslice = ix.per_side() as usize / PAWNLESS_KING_PAIRS;
        (0..2 * PAWNLESS_KING_PAIRS)
            .map(|k| {
                let first = k * kslice;
                let segments = first / SEG_INDICES..=((first + kslice).min(n) - 1) / SEG_INDICES;
                segments.fold(0, |files, s| {
                    if self.owner[s] == self.me {
                        ALL_FILES
                    } else if self.readers[s].contains(&self.me) {
                        files | WON_FILE
                    } else {
                        files
                    }
                })
            })
            .collect()
    }

    /// The segments this part owns, in order.
    pub(super) fn segments(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.owner.len()).filter(|&s| self.owner[s] == self.me)
    }

    /// Takes the outbox: per part, its lines' chunks ([`for_each_lines`] reads them).
    pub(super) fn take_outbox(&self) -> Vec<Vec<u8>> {
        self.outbox
            .iter()
            .map(|o| std::mem::take(&mut *o.lock().expect("outbox lock")))
            .collect()
    }
}

/// The most lines of a chunk: a thread's post at most.
const CHUNK_LINES: usize = POST_LINES;

/// Appends to `out` a chunk of `lines` (sorted here): its length, then zstd of each line's
/// first index as the gap from the one before (a varint) and its squares.
pub(super) fn encode_lines(lines: &mut [(u64, u64)], out: &mut Vec<u8>) {
    for chunk in lines.chunks_mut(CHUNK_LINES) {
        chunk.sort_unstable();
        let mut body = Vec::with_capacity(chunk.len() * 10);
        let mut last = 0u64;
        for &(base, bits) in chunk.iter() {
            let mut gap = base.wrapping_sub(last);
            last = base;
            while gap >= 0x80 {
                body.push(gap as u8 | 0x80);
                gap >>= 7;
            }
            body.push(gap as u8);
            body.extend_from_slice(&bits.to_le_bytes());
        }
        let z = zstd::bulk::compress(&body, 1).expect("zstd into memory");
        out.extend_from_slice(&(z.len() as u32).to_le_bytes());
        out.extend_from_slice(&z);
    }
}

/// Calls `f` with the lines of each chunk of `bytes` ([`encode_lines`]), a chunk at a time.
/// Total on any bytes: a chunk cut short, that does not decompress, or of more than a chunk's
/// lines is an error (`f` has seen the chunks before it).
pub(super) fn for_each_lines(
    bytes: &[u8],
    mut f: impl FnMut(&[(u64, u64)]) -> Result<(), SolveError>,
) -> Result<(), SolveError> {
    let bad = |what: &str| SolveError::Exchange(format!("lines of predecessors {what}"));
    let mut rest = bytes;
    let mut lines = Vec::new();
    let mut body = Vec::new();
    while !rest.is_empty() {
        let Some((len, after)) = rest.split_first_chunk::<4>() else {
            return Err(bad("cut short"));
        };
        let len = u32::from_le_bytes(*len) as usize;
        if len > after.len() {
            return Err(bad("cut short"));
        }
        let (z, after) = after.split_at(len);
        rest = after;
        body.clear();
        zstd::stream::Decoder::with_buffer(z)
            .and_then(|d| d.take((CHUNK_LINES * 18) as u64 + 1).read_to_end(&mut body))
            .map_err(|_| bad("that do not decompress"))?;
        if body.len() > CHUNK_LINES * 18 {
            return Err(bad("past a chunk's size"));
        }
        lines.clear();
        let (mut last, mut at) = (0u64, 0usize);
        while at < body.len() {
            let mut gap = 0u64;
            let mut shift = 0;
            loop {
                let Some(&b) = body.get(at) else {
                    return Err(bad("cut short"));
                };
                at += 1;
                if shift > 63 {
                    return Err(bad("with a gap past 64 bits"));
                }
                gap |= ((b & 0x7f) as u64) << shift;
                shift += 7;
                if b & 0x80 == 0 {
                    break;
                }
            }
            let Some(bits) = body.get(at..at + 8) else {
                return Err(bad("cut short"));
            };
            at += 8;
            last = last.wrapping_add(gap);
            lines.push((last, u64::from_le_bytes(bits.try_into().expect("8 bytes"))));
        }
        f(&lines)?;
    }
    Ok(())
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
    /// True if this part holds the won bit of index `i`: its own, or one it reads (an index of
    /// another part whose won bits it is not given reads 0 there, a page mapped for nothing).
    fn holds_won(&self, i: usize) -> bool;
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
    fn holds_won(&self, _: usize) -> bool {
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
    fn holds_won(&self, i: usize) -> bool {
        self.holds_won[i / SEG_INDICES]
    }
    fn post(&self, mut lines: Vec<(u64, u64)>) {
        lines.sort_unstable_by_key(|&(base, _)| (self.owner(base as usize), base));
        for group in lines.chunk_by_mut(|a, b| self.owner(a.0 as usize) == self.owner(b.0 as usize)) {
            let mut chunk = Vec::new();
            encode_lines(group, &mut chunk);
            let k = self.owner(group[0].0 as usize);
            self.outbox[k]
                .lock()
                .expect("outbox lock")
                .extend_from_slice(&chunk);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zermelo_chess::slice::SliceKey;
    use zermelo_chess::Material;

    /// Lines come back as they went, sorted, in chunks; any bytes decode without a panic.
    #[test]
    fn lines_round_trip_and_any_bytes_decode_without_a_panic() {
        let mut lines: Vec<(u64, u64)> = (0..3 * CHUNK_LINES as u64 / 2)
            .map(|i| ((i * 7919 % 100_003) * 64, i.wrapping_mul(0x9e37_79b9_7f4a_7c15)))
            .collect();
        let mut out = Vec::new();
        encode_lines(&mut lines.clone(), &mut out);
        let mut back = Vec::new();
        let mut chunks = 0;
        for_each_lines(&out, |l| {
            chunks += 1;
            back.extend_from_slice(l);
            Ok(())
        })
        .unwrap();
        assert_eq!(chunks, 2);
        back.sort_unstable();
        lines.sort_unstable();
        assert_eq!(back, lines);
        let mut rng = 12345u64;
        for len in 0..300 {
            let mut bytes: Vec<u8> = (0..len)
                .map(|_| {
                    rng = rng
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (rng >> 56) as u8
                })
                .collect();
            let _ = for_each_lines(&bytes, |_| Ok(()));
            // A valid chunk with its tail cut or a byte changed.
            let mut good = Vec::new();
            encode_lines(&mut [(64, 1), (128, 3)], &mut good);
            let cut = len % good.len();
            let _ = for_each_lines(&good[..cut], |_| Ok(()));
            if !good.is_empty() {
                let i = len % good.len();
                good[i] ^= bytes.pop().unwrap_or(1) | 1;
                let _ = for_each_lines(&good, |_| Ok(()));
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
