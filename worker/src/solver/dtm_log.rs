//! The distances of a slice's decided positions, recorded ply by ply while it is solved.
//!
//! The solver keeps one byte of state per index: it knows that a position is won or lost, not in
//! how many plies. At the start of the pass of ply `p` it finds the positions decided at `p`
//! (its frontier) segment by segment, [`SEG_INDICES`] indices each, and hands each segment's
//! positions to a [`SegmentEncoder`]: the gaps between them (LEB128) or, when denser, a bitmap.
//! [`DtmLog::record`] keeps the ply's segments. At the end [`DtmLog::for_each_in_segment`] replays a segment's positions
//! with their plies, to write the table's `u16` values one segment at a time.
//!
//! The log holds about a byte per decided position. For a large slice it goes to an unnamed
//! temporary file (in `TMPDIR`, removed by the system when closed), so that it takes no memory:
//! it is written once, ply by ply, and read once, segment by segment.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;

/// Indices per segment (a multiple of the solver's chunk). This crate's tests make it small, so
/// that they solve slices of many segments.
pub const SEG_INDICES: usize = if cfg!(test) { 1 << 13 } else { 1 << 22 };

const TAG_GAPS: u8 = 0;
const TAG_RAW: u8 = 1;

/// One ply's positions: the segments' encodings, concatenated, at `at` in the log's bytes.
struct Ply {
    ply: u32,
    at: u64,
    /// Segment `s` is at `at + starts[s]..at + starts[s + 1]` (empty if it has no position).
    starts: Vec<u64>,
}

/// Where the log's bytes are.
enum Store {
    Memory(Vec<u8>),
    /// An unnamed temporary file, created with the first bytes.
    File(Option<File>),
}

/// The decided positions of a slice, by ply.
pub(super) struct DtmLog {
    plies: Vec<Ply>,
    store: Store,
    bytes: u64,
}

impl DtmLog {
    /// A log in memory, or in a temporary file if `spill`.
    pub(super) fn new(spill: bool) -> DtmLog {
        DtmLog {
            plies: Vec::new(),
            store: if spill {
                Store::File(None)
            } else {
                Store::Memory(Vec::new())
            },
            bytes: 0,
        }
    }

    /// Records the positions decided at `ply` (plies ascend from call to call): the encoding of
    /// every segment, in order.
    pub(super) fn record(&mut self, ply: u32, encoded: &[Vec<u8>]) -> std::io::Result<()> {
        debug_assert!(self.plies.last().is_none_or(|p| p.ply < ply));
        let total: usize = encoded.iter().map(Vec::len).sum();
        if total == 0 {
            return Ok(());
        }
        // The segments are appended one by one (no copy of the whole ply: at its widest a
        // ply's encoding is a few percent of the slice's state).
        let mut starts = Vec::with_capacity(encoded.len() + 1);
        let mut len = 0u64;
        starts.push(0);
        for e in encoded {
            len += e.len() as u64;
            starts.push(len);
        }
        let at = self.bytes;
        match &mut self.store {
            Store::Memory(bytes) => {
                bytes.reserve(total);
                for e in encoded {
                    bytes.extend_from_slice(e);
                }
            }
            Store::File(file) => {
                let file = match file {
                    Some(f) => f,
                    None => file.insert(tempfile::tempfile()?),
                };
                for e in encoded {
                    file.write_all(e)?;
                }
            }
        }
        self.bytes += len;
        self.plies.push(Ply { ply, at, starts });
        Ok(())
    }

    /// Bytes of positions the log holds.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Calls `f(offset, ply)` for every position of segment `s` recorded at some ply, `offset`
    /// counted from the segment's first index.
    pub(super) fn for_each_in_segment(&self, s: usize, mut f: impl FnMut(usize, u32)) -> std::io::Result<()> {
        let mut buf = Vec::new();
        for p in &self.plies {
            let Some(&end) = p.starts.get(s + 1) else {
                continue;
            };
            let (from, to) = (p.at + p.starts[s], p.at + end);
            if from == to {
                continue;
            }
            let bytes = match &self.store {
                Store::Memory(bytes) => &bytes[from as usize..to as usize],
                Store::File(file) => {
                    let file = file.as_ref().expect("a log with bytes has its file");
                    buf.resize((to - from) as usize, 0);
                    file.read_exact_at(&mut buf, from)?;
                    &buf[..]
                }
            };
            for_each_offset(bytes, |offset| f(offset, p.ply));
        }
        Ok(())
    }
}

/// Encodes the positions of one segment, given in ascending order: nothing if none, else a
/// tag and the gaps, or the bitmap when that is shorter.
pub(super) struct SegmentEncoder {
    /// Indices in the segment.
    len: usize,
    out: Vec<u8>,
    /// The next offset a gap counts from.
    next: usize,
    /// Set once the gaps would be longer than the bitmap.
    raw: Option<Vec<u64>>,
}

impl SegmentEncoder {
    pub(super) fn new(len: usize) -> SegmentEncoder {
        SegmentEncoder {
            len,
            out: Vec::new(),
            next: 0,
            raw: None,
        }
    }

    #[inline]
    pub(super) fn push(&mut self, offset: usize) {
        debug_assert!(offset >= self.next && offset < self.len);
        if let Some(words) = &mut self.raw {
            words[offset / 64] |= 1 << (offset % 64);
            return;
        }
        if self.out.is_empty() {
            self.out.push(TAG_GAPS);
        }
        let mut gap = (offset - self.next) as u64;
        while gap >= 0x80 {
            self.out.push(gap as u8 | 0x80);
            gap >>= 7;
        }
        self.out.push(gap as u8);
        self.next = offset + 1;
        if self.out.len() > self.len.div_ceil(64) * 8 {
            // Denser than the bitmap: switch to it.
            let mut words = vec![0u64; self.len.div_ceil(64)];
            for_each_offset(&self.out, |o| words[o / 64] |= 1 << (o % 64));
            self.raw = Some(words);
        }
    }

    pub(super) fn finish(self) -> Vec<u8> {
        match self.raw {
            None => self.out,
            Some(words) => {
                let mut raw = Vec::with_capacity(1 + words.len() * 8);
                raw.push(TAG_RAW);
                for w in words {
                    raw.extend_from_slice(&w.to_le_bytes());
                }
                raw
            }
        }
    }
}

/// Calls `f` with every offset of an encoded segment, ascending.
pub(super) fn for_each_offset(bytes: &[u8], mut f: impl FnMut(usize)) {
    let Some((&tag, rest)) = bytes.split_first() else {
        return;
    };
    if tag == TAG_RAW {
        for (w, chunk) in rest.chunks_exact(8).enumerate() {
            let mut bits = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
            while bits != 0 {
                f(w * 64 + bits.trailing_zeros() as usize);
                bits &= bits - 1;
            }
        }
        return;
    }
    let mut next = 0usize;
    let mut gap = 0u64;
    let mut shift = 0;
    for &b in rest {
        gap |= ((b & 0x7f) as u64) << shift;
        if b & 0x80 != 0 {
            shift += 7;
            continue;
        }
        let offset = next + gap as usize;
        f(offset);
        next = offset + 1;
        gap = 0;
        shift = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The encodings of the segments of `0..n` holding `positions` (ascending).
    fn segments(n: usize, positions: &[usize]) -> Vec<Vec<u8>> {
        (0..n.div_ceil(SEG_INDICES))
            .map(|s| {
                let first = s * SEG_INDICES;
                let mut e = SegmentEncoder::new(SEG_INDICES.min(n - first));
                for &p in positions
                    .iter()
                    .filter(|&&p| (first..first + SEG_INDICES).contains(&p))
                {
                    e.push(p - first);
                }
                e.finish()
            })
            .collect()
    }

    /// Sparse and dense plies, several segments, the last one short: every position comes back
    /// with its ply, in each segment in ascending order.
    #[test]
    fn replays_what_was_recorded() {
        for spill in [false, true] {
            replays_what_was_recorded_in(spill);
        }
    }

    fn replays_what_was_recorded_in(spill: bool) {
        let n = 2 * SEG_INDICES + 1000;
        let sparse: Vec<usize> = vec![
            0,
            1,
            127,
            128,
            SEG_INDICES / 2 + 7,
            SEG_INDICES - 1,
            SEG_INDICES + 5,
            n - 1,
        ];
        // Every third index of the first segment: denser than its bitmap as gaps? No (1 byte
        // per 3 bits is more than 1 bit each): stored raw.
        let dense: Vec<usize> = (2..SEG_INDICES).step_by(3).collect();
        let mut log = DtmLog::new(spill);
        log.record(0, &segments(n, &sparse)).unwrap();
        log.record(1, &segments(n, &[])).unwrap();
        log.record(3, &segments(n, &dense)).unwrap();
        let mut seen: Vec<(usize, u32)> = Vec::new();
        for s in 0..n.div_ceil(SEG_INDICES) {
            log.for_each_in_segment(s, |o, p| seen.push((s * SEG_INDICES + o, p)))
                .unwrap();
        }
        let mut expected: Vec<(usize, u32)> = sparse.iter().map(|&i| (i, 0)).collect();
        expected.extend(dense.iter().map(|&i| (i, 3)));
        expected.sort();
        seen.sort();
        assert_eq!(seen, expected);
        // The dense ply went in raw: about one bit per index of its segment.
        assert!(
            log.bytes() < (SEG_INDICES / 8 + 1000) as u64,
            "{} bytes",
            log.bytes()
        );
    }
}
