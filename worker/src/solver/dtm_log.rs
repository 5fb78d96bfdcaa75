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
//! it is written once, ply by ply, and read once, segment by segment. A slice solved with
//! checkpoints keeps it in a named file beside them instead ([`DtmLog::in_file`]), its bytes
//! hashed as they are written, so that a checkpoint can name the log as it stood
//! ([`DtmLog::mark`]) and a resumed build take it up from there ([`DtmLog::resume`]).

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Mutex;

use super::le::{get_len, get_u32, get_u64, invalid, put_u32, put_u64};

/// Indices per segment (a multiple of the solver's chunk). This crate's tests make it small, so
/// that they solve slices of many segments.
pub const SEG_INDICES: usize = if cfg!(test) { 1 << 13 } else { 1 << 22 };

const TAG_GAPS: u8 = 0;
const TAG_RAW: u8 = 1;

/// One ply's positions: segment `s` is `segments[s] = (at, len)` in the log's bytes (`len` 0 if
/// it has no position).
struct Ply {
    ply: u32,
    segments: Vec<(u64, u64)>,
}

/// Where the log's bytes are.
enum Store {
    Memory(Vec<u8>),
    /// An unnamed temporary file, created with the first bytes.
    File(Option<File>),
}

/// The log's bytes, and the segments of the ply being recorded.
struct Out {
    store: Store,
    bytes: u64,
    current: Vec<(u64, u64)>,
    /// For a log in a named file: the hash of its bytes so far.
    hasher: Option<blake3::Hasher>,
}

/// A log as a checkpoint names it: its plies, and the length and hash of its bytes then.
pub(super) struct LogMark {
    plies: Vec<Ply>,
    bytes: u64,
    hash: [u8; 32],
}

impl LogMark {
    pub(super) fn write_to(&self, w: &mut (impl Write + ?Sized)) -> std::io::Result<()> {
        put_u64(w, self.bytes)?;
        w.write_all(&self.hash)?;
        put_u64(w, self.plies.len() as u64)?;
        for p in &self.plies {
            put_u32(w, p.ply)?;
            put_u64(w, p.segments.len() as u64)?;
            for &(at, len) in &p.segments {
                put_u64(w, at)?;
                put_u64(w, len)?;
            }
        }
        Ok(())
    }

    /// What [`LogMark::write_to`] wrote; a place past the log's bytes is refused.
    pub(super) fn read_from(r: &mut (impl Read + ?Sized)) -> std::io::Result<LogMark> {
        let bytes = get_u64(r)?;
        let mut hash = [0u8; 32];
        r.read_exact(&mut hash)?;
        let count = get_len(r, 1 << 20)?;
        let mut plies = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let ply = get_u32(r)?;
            let n = get_len(r, 1 << 32)?;
            let mut segments = Vec::with_capacity(n.min(1 << 20) as usize);
            for _ in 0..n {
                let (at, len) = (get_u64(r)?, get_u64(r)?);
                if at.checked_add(len).is_none_or(|end| end > bytes) {
                    return Err(invalid(format!(
                        "a segment of the log at {at}+{len}, past its {bytes} bytes"
                    )));
                }
                segments.push((at, len));
            }
            plies.push(Ply { ply, segments });
        }
        Ok(LogMark { plies, bytes, hash })
    }
}

/// The decided positions of a slice, by ply.
pub(super) struct DtmLog {
    plies: Vec<Ply>,
    out: Mutex<Out>,
}

impl DtmLog {
    /// A log in memory, or in a temporary file if `spill`.
    pub(super) fn new(spill: bool) -> DtmLog {
        DtmLog {
            plies: Vec::new(),
            out: Mutex::new(Out {
                store: if spill {
                    Store::File(None)
                } else {
                    Store::Memory(Vec::new())
                },
                bytes: 0,
                current: Vec::new(),
                hasher: None,
            }),
        }
    }

    /// A log in the file `path`, created or emptied, its bytes hashed as they are written.
    pub(super) fn in_file(path: &Path) -> std::io::Result<DtmLog> {
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        Ok(DtmLog::of_file(file, Vec::new(), 0, blake3::Hasher::new()))
    }

    fn of_file(file: File, plies: Vec<Ply>, bytes: u64, hasher: blake3::Hasher) -> DtmLog {
        DtmLog {
            plies,
            out: Mutex::new(Out {
                store: Store::File(Some(file)),
                bytes,
                current: Vec::new(),
                hasher: Some(hasher),
            }),
        }
    }

    /// The log in the file `path` as `mark` names it: the file cut back to the mark's bytes
    /// once their hash is checked (refused if they are fewer, or hash otherwise).
    pub(super) fn resume(path: &Path, mark: LogMark) -> std::io::Result<DtmLog> {
        let file = File::options().read(true).write(true).open(path)?;
        let len = file.metadata()?.len();
        if len < mark.bytes {
            return Err(invalid(format!(
                "{len} bytes where the checkpoint names {}",
                mark.bytes
            )));
        }
        let mut hasher = blake3::Hasher::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut at = 0u64;
        while at < mark.bytes {
            let k = (mark.bytes - at).min(buf.len() as u64) as usize;
            file.read_exact_at(&mut buf[..k], at)?;
            hasher.update(&buf[..k]);
            at += k as u64;
        }
        if *hasher.clone().finalize().as_bytes() != mark.hash {
            return Err(invalid("its bytes do not hash as the checkpoint says".into()));
        }
        file.set_len(mark.bytes)?;
        let mut file = file;
        std::io::Seek::seek(&mut file, std::io::SeekFrom::End(0))?;
        Ok(DtmLog::of_file(file, mark.plies, mark.bytes, hasher))
    }

    /// The log's mark for a checkpoint, its bytes made durable first. Only for a log in a
    /// named file ([`DtmLog::in_file`]), between plies.
    pub(super) fn mark(&self) -> std::io::Result<LogMark> {
        let out = self.out();
        let hash = match (&out.store, &out.hasher) {
            (Store::File(Some(file)), Some(hasher)) => {
                file.sync_data()?;
                *hasher.clone().finalize().as_bytes()
            }
            _ => {
                return Err(std::io::Error::other(
                    "a log kept in memory or in an unnamed file cannot be checkpointed",
                ))
            }
        };
        Ok(LogMark {
            plies: self
                .plies
                .iter()
                .map(|p| Ply {
                    ply: p.ply,
                    segments: p.segments.clone(),
                })
                .collect(),
            bytes: out.bytes,
            hash,
        })
    }

    fn out(&self) -> std::sync::MutexGuard<'_, Out> {
        self.out.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts recording the positions decided at the next ply, in `segments` segments, each
    /// given by [`DtmLog::record_segment`] in any order, from any thread, and the ply closed by
    /// [`DtmLog::end_ply`]. A segment goes to the log as soon as it is given: a ply's encoding
    /// is never held whole (at its widest, a few percent of the slice's state).
    pub(super) fn begin_ply(&mut self, segments: usize) {
        let out = self.out.get_mut().unwrap_or_else(|e| e.into_inner());
        out.current = vec![(0, 0); segments];
    }

    /// Records segment `s` of the ply begun (its encoding by [`SegmentEncoder`]).
    pub(super) fn record_segment(&self, s: usize, encoded: &[u8]) -> std::io::Result<()> {
        if encoded.is_empty() {
            return Ok(());
        }
        let mut out = self.out();
        let at = out.bytes;
        match &mut out.store {
            Store::Memory(bytes) => bytes.extend_from_slice(encoded),
            Store::File(file) => {
                let file = match file {
                    Some(f) => f,
                    None => file.insert(tempfile::tempfile()?),
                };
                file.write_all(encoded)?;
            }
        }
        if let Some(h) = &mut out.hasher {
            h.update(encoded);
        }
        out.bytes += encoded.len() as u64;
        out.current[s] = (at, encoded.len() as u64);
        Ok(())
    }

    /// Closes the ply begun: its positions were decided at `ply` (plies ascend from ply to ply).
    pub(super) fn end_ply(&mut self, ply: u32) {
        debug_assert!(self.plies.last().is_none_or(|p| p.ply < ply));
        let out = self.out.get_mut().unwrap_or_else(|e| e.into_inner());
        let segments = std::mem::take(&mut out.current);
        if segments.iter().any(|&(_, len)| len > 0) {
            self.plies.push(Ply { ply, segments });
        }
    }

    /// Records the positions decided at `ply`: the encoding of every segment, in order.
    #[cfg(test)]
    fn record(&mut self, ply: u32, encoded: &[Vec<u8>]) -> std::io::Result<()> {
        self.begin_ply(encoded.len());
        for (s, e) in encoded.iter().enumerate() {
            self.record_segment(s, e)?;
        }
        self.end_ply(ply);
        Ok(())
    }

    /// Bytes of positions the log holds.
    pub(super) fn bytes(&self) -> u64 {
        self.out().bytes
    }

    /// Calls `f(offset, ply)` for every position of segment `s` recorded at some ply, `offset`
    /// counted from the segment's first index. Threads may replay segments at once.
    pub(super) fn for_each_in_segment(&self, s: usize, mut f: impl FnMut(usize, u32)) -> std::io::Result<()> {
        let mut buf = Vec::new();
        for p in &self.plies {
            if let Some(&place) = p.segments.get(s) {
                self.read(place, &mut buf)?;
                let whole = for_each_offset(&buf, |offset| f(offset, p.ply));
                debug_assert!(whole, "a segment of this log is well formed");
            }
        }
        Ok(())
    }

    /// Segment `s` of `ply`, the last ply ended, as it was recorded (empty if it had no
    /// position), into `buf`. From a file, the bytes just written come back from the page cache.
    pub(super) fn read_segment(&self, ply: u32, s: usize, buf: &mut Vec<u8>) -> std::io::Result<()> {
        match self.plies.last().filter(|p| p.ply == ply) {
            Some(p) => self.read(p.segments[s], buf),
            None => {
                buf.clear();
                Ok(())
            }
        }
    }

    /// The bytes at `(at, len)` into `buf`.
    fn read(&self, (at, len): (u64, u64), buf: &mut Vec<u8>) -> std::io::Result<()> {
        buf.resize(len as usize, 0);
        if len == 0 {
            return Ok(());
        }
        match &self.out().store {
            Store::Memory(bytes) => buf.copy_from_slice(&bytes[at as usize..(at + len) as usize]),
            Store::File(file) => file
                .as_ref()
                .expect("a log with bytes has its file")
                .read_exact_at(buf, at)?,
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

    // Inlined into the scan's loop (left to the compiler, it was not, once the scan became
    // generic: KQvKR 114 M instructions in calls).
    #[inline(always)]
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
            let whole = for_each_offset(&self.out, |o| words[o / 64] |= 1 << (o % 64));
            debug_assert!(whole, "this encoder's output is well formed");
            self.raw = Some(words);
        }
    }

    /// [`SegmentEncoder::push`] of the offsets `64 * w + k` for each bit `k` of `bits`, in
    /// ascending order (`w` past every word pushed before): the same bytes. A bitmap takes the
    /// word at once.
    #[inline(always)]
    pub(super) fn push_word(&mut self, w: usize, mut bits: u64) {
        if let Some(words) = &mut self.raw {
            debug_assert!(bits == 0 || 64 * w + 63 - (bits.leading_zeros() as usize) < self.len);
            words[w] |= bits;
            return;
        }
        while bits != 0 {
            self.push(64 * w + bits.trailing_zeros() as usize);
            bits &= bits - 1;
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

/// Calls `f` with every offset of an encoded segment, ascending. Total on any bytes (a peer's,
/// see [`super::parts`]): a malformed encoding (a gap past 2^63, a word cut short, offsets past
/// `usize`) stops at its first fault and returns false; the offsets before it were given.
pub(super) fn for_each_offset(bytes: &[u8], mut f: impl FnMut(usize)) -> bool {
    let Some((&tag, rest)) = bytes.split_first() else {
        return true;
    };
    if tag == TAG_RAW {
        for (w, chunk) in rest.chunks_exact(8).enumerate() {
            let mut bits = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
            while bits != 0 {
                f(w * 64 + bits.trailing_zeros() as usize);
                bits &= bits - 1;
            }
        }
        return rest.len() % 8 == 0;
    }
    let mut next = 0usize;
    let mut gap = 0u64;
    let mut shift = 0u32;
    for &b in rest {
        if shift > 56 {
            return false;
        }
        gap |= ((b & 0x7f) as u64) << shift;
        if b & 0x80 != 0 {
            shift += 7;
            continue;
        }
        let Some(offset) = usize::try_from(gap).ok().and_then(|g| next.checked_add(g)) else {
            return false;
        };
        f(offset);
        let Some(after) = offset.checked_add(1) else {
            return false;
        };
        next = after;
        gap = 0;
        shift = 0;
    }
    shift == 0
}

/// Calls `f(w, bits)` for every word of 64 offsets of an encoded segment holding one, ascending:
/// `bits` has bit `k` set for offset `64 * w + k`. What [`for_each_offset`] gives, a word at a
/// time (a bitmap's words as they are), and false where it is.
pub(super) fn for_each_word(bytes: &[u8], mut f: impl FnMut(usize, u64)) -> bool {
    if bytes.first() == Some(&TAG_RAW) {
        let rest = &bytes[1..];
        for (w, chunk) in rest.chunks_exact(8).enumerate() {
            let bits = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
            if bits != 0 {
                f(w, bits);
            }
        }
        return rest.len().is_multiple_of(8);
    }
    let (mut word, mut bits) = (usize::MAX, 0u64);
    let whole = for_each_offset(bytes, |o| {
        if o / 64 != word {
            if bits != 0 {
                f(word, bits);
            }
            (word, bits) = (o / 64, 0);
        }
        bits |= 1 << (o % 64);
    });
    if bits != 0 {
        f(word, bits);
    }
    whole
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

    /// Segments given out of order by several threads, as the passes give them: each ply's
    /// segments read back as given (the last ply's by `read_segment`, while it is the last), and
    /// the replay is that of the same segments given in order.
    #[test]
    fn segments_given_in_any_order_by_threads_read_back_as_given() {
        for spill in [false, true] {
            let n = 5 * SEG_INDICES + 17;
            let plies: Vec<Vec<usize>> = (0..4usize).map(|p| (p..n).step_by(3 + 5 * p).collect()).collect();
            let (mut threaded, mut ordered) = (DtmLog::new(spill), DtmLog::new(spill));
            for (p, positions) in plies.iter().enumerate() {
                let encoded = segments(n, positions);
                threaded.begin_ply(encoded.len());
                std::thread::scope(|scope| {
                    for t in 0..2 {
                        let (log, encoded) = (&threaded, &encoded);
                        scope.spawn(move || {
                            // Thread 0 the even segments from the last, thread 1 the odd ones.
                            for s in (0..encoded.len()).rev().filter(|s| s % 2 == t) {
                                log.record_segment(s, &encoded[s]).unwrap();
                            }
                        });
                    }
                });
                threaded.end_ply(p as u32 * 2);
                ordered.record(p as u32 * 2, &encoded).unwrap();
                let mut buf = Vec::new();
                for (s, e) in encoded.iter().enumerate() {
                    threaded.read_segment(p as u32 * 2, s, &mut buf).unwrap();
                    assert_eq!(&buf, e, "ply {p}, segment {s}");
                }
                // Not the last ply: nothing.
                threaded.read_segment(p as u32 * 2 + 1, 0, &mut buf).unwrap();
                assert!(buf.is_empty());
            }
            assert_eq!(threaded.bytes(), ordered.bytes());
            for s in 0..n.div_ceil(SEG_INDICES) {
                let (mut a, mut b) = (Vec::new(), Vec::new());
                threaded.for_each_in_segment(s, |o, p| a.push((o, p))).unwrap();
                ordered.for_each_in_segment(s, |o, p| b.push((o, p))).unwrap();
                assert_eq!(a, b, "segment {s}");
                let expected: usize = (plies.iter())
                    .map(|pos| pos.iter().filter(|&&i| i / SEG_INDICES == s).count())
                    .sum();
                assert_eq!(a.len(), expected, "segment {s}");
            }
        }
    }

    proptest::proptest! {
        /// Any bytes (a peer's won frontier) decode without a panic: offsets ascending, and
        /// a well-formed encoding of ascending offsets comes back whole.
        #[test]
        fn any_bytes_decode_without_a_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            let mut last = None;
            for_each_offset(&bytes, |o| {
                assert!(last.is_none_or(|l| o > l), "offsets ascend");
                last = Some(o);
            });
        }

        #[test]
        fn an_encoding_decodes_to_its_offsets(mut offsets in proptest::collection::vec(0usize..SEG_INDICES, 0..300)) {
            offsets.sort_unstable();
            offsets.dedup();
            let mut e = SegmentEncoder::new(SEG_INDICES);
            for &o in &offsets {
                e.push(o);
            }
            let mut back = Vec::new();
            assert!(for_each_offset(&e.finish(), |o| back.push(o)));
            proptest::prop_assert_eq!(back, offsets);
        }
    }

    proptest::proptest! {
        /// Pushed a word at a time, offsets encode to the bytes pushed one at a time give (as
        /// gaps, and as a bitmap once dense: up to 3,000 offsets of 8,192), and come back a
        /// word at a time as the words they make.
        #[test]
        fn words_encode_and_decode_as_offsets(mut offsets in proptest::collection::vec(0usize..SEG_INDICES, 0..3000)) {
            offsets.sort_unstable();
            offsets.dedup();
            let mut words = std::collections::BTreeMap::<usize, u64>::new();
            for &o in &offsets {
                *words.entry(o / 64).or_default() |= 1 << (o % 64);
            }
            let (mut one, mut by_words) = (SegmentEncoder::new(SEG_INDICES), SegmentEncoder::new(SEG_INDICES));
            for &o in &offsets {
                one.push(o);
            }
            for (&w, &bits) in &words {
                by_words.push_word(w, bits);
            }
            let bytes = one.finish();
            proptest::prop_assert_eq!(&by_words.finish(), &bytes);
            let mut back = Vec::new();
            assert!(for_each_word(&bytes, |w, bits| back.push((w, bits))));
            proptest::prop_assert_eq!(back, words.into_iter().collect::<Vec<_>>());
        }
    }

    /// A varint longer than a u64, and a raw bitmap cut inside a word, are malformed.
    #[test]
    fn malformed_encodings_are_told() {
        assert!(!for_each_offset(
            &[0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            |_| {}
        ));
        assert!(!for_each_offset(&[0, 0x80], |_| {}));
        assert!(!for_each_offset(&[TAG_RAW, 1, 2, 3], |_| {}));
        assert!(for_each_offset(&[], |_| {}));
        assert!(!for_each_word(&[0, 0x80], |_, _| {}));
        assert!(!for_each_word(&[TAG_RAW, 1, 2, 3], |_, _| {}));
        assert!(for_each_word(&[], |_, _| {}));
    }
}
