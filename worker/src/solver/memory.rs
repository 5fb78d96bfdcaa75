//! Large arrays for the solver, backed by huge pages where the system offers them.
//!
//! The passes read and write a slice's values at random: a king move jumps by the stride of the
//! king-pair field, hundreds of kilobytes away. With 4 KiB pages nearly every such access misses
//! the TLB; with 2 MiB pages (Linux transparent huge pages, which this machine kind grants on
//! `madvise`) far fewer do. The measured gain is in the commit that brought this file (KQRvKR
//! passes); the advice itself is `zermelo_storage::advise_huge_pages`.
//!
//! Also the two ways the passes go over the state faster: scans that test eight bytes at a
//! time ([`for_each_flagged`], with the lane test [`lanes_equal`]), and
//! random work queued a few steps behind a prefetch ([`Deferred`]).

use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};

use zermelo_storage::advise_huge_pages;

/// `n` bytes set to 0, on huge pages when large.
pub(crate) fn atomic_u8s(n: usize) -> Vec<AtomicU8> {
    let mut v = Vec::with_capacity(n);
    advise_huge_pages(&v);
    v.extend((0..n).map(|_| AtomicU8::new(0)));
    v
}

/// `n` words set to 0, on huge pages when large.
pub(crate) fn atomic_u64s(n: usize) -> Vec<AtomicU64> {
    let mut v = Vec::with_capacity(n);
    advise_huge_pages(&v);
    v.extend((0..n).map(|_| AtomicU64::new(0)));
    v
}

/// Gives the memory of `bytes` back to the system (the whole pages inside it), for an array
/// that is read no more: its values become 0 (a valid value, never read again by the solver).
pub(crate) fn release_bytes(bytes: &[AtomicU8]) {
    #[cfg(target_os = "linux")]
    {
        let page = 4096usize;
        let start = bytes.as_ptr() as usize;
        let aligned = start.next_multiple_of(page);
        let len = (start + bytes.len()).saturating_sub(aligned) / page * page;
        if len == 0 {
            return;
        }
        // Safety: the range lies inside `bytes` (start rounded up, end rounded down to pages),
        // which this process owns and keeps mapped; MADV_DONTNEED on private anonymous memory
        // makes it read as zeros afterwards, and 0 is a valid `AtomicU8`. No reference into
        // the range is used after the call by the solver.
        unsafe {
            libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_DONTNEED);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = bytes;
}

/// Lanes of a word read as eight bytes: the low bit and the high bit of every byte.
pub(crate) const LANES_LOW: u64 = 0x0101_0101_0101_0101;
const LANES_HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit of every byte of `w` equal to `c`, and maybe of some byte above one that is
/// (a borrow): a superset, to be tested again byte by byte.
#[inline(always)]
pub(crate) fn lanes_equal(w: u64, c: u8) -> u64 {
    let x = w ^ (LANES_LOW * c as u64);
    x.wrapping_sub(LANES_LOW) & !x & LANES_HIGH
}

/// Calls `f(i)`, in ascending order, for each index `i` of `range` whose byte may pass a test,
/// looking at eight bytes at a time: `maybe` gets eight bytes as a word (the first byte lowest)
/// and returns the high bit of each byte that may pass (a superset: `f` tests the byte itself).
///
/// The words are read as atomic `u64`s over the bytes: while this runs, no other thread may
/// write a byte of `range` (the calling thread may, through `f`).
#[inline]
pub(crate) fn for_each_flagged(
    bytes: &[AtomicU8],
    range: Range<usize>,
    maybe: impl Fn(u64) -> u64,
    mut f: impl FnMut(usize),
) {
    let start = range.start;
    // Safety: `AtomicU64` is plain memory of eight `AtomicU8`s with no invalid value, and
    // `align_to` puts in the middle only whole words at their alignment. The words are read
    // only while no other thread writes their bytes (the contract above), so the mixed-size
    // accesses never race.
    let (head, words, tail) = unsafe { bytes[range].align_to::<AtomicU64>() };
    let byte = |b: &AtomicU8| maybe(b.load(Relaxed) as u64) & 0x80 != 0;
    let mut i = start;
    for b in head {
        if byte(b) {
            f(i);
        }
        i += 1;
    }
    for w in words {
        let mut m = maybe(u64::from_le(w.load(Relaxed)));
        while m != 0 {
            f(i + (m.trailing_zeros() / 8) as usize);
            m &= m - 1;
        }
        i += 8;
    }
    for b in tail {
        if byte(b) {
            f(i);
        }
        i += 1;
    }
}

/// Asks the processor to bring the line of `bytes[i]` into its cache, without waiting for it.
#[inline(always)]
pub(crate) fn prefetch<T>(bytes: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    // Safety: a prefetch never faults and changes no memory, whatever the address; the address
    // is computed without dereferencing (`wrapping_add`).
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(bytes.as_ptr().wrapping_add(i) as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (bytes, i);
}

/// Work on random indices of a state array, done a few steps after it is queued: each index is
/// prefetched when queued, so the reads of the indices in the queue overlap instead of each
/// waiting on memory in turn. Only for work whose result does not depend on its order.
pub(crate) struct Deferred {
    ring: [usize; DEFERRED],
    n: usize,
}

/// Indices in flight in a [`Deferred`] (a power of two).
const DEFERRED: usize = 32;

impl Deferred {
    pub(crate) fn new() -> Deferred {
        Deferred {
            ring: [0; DEFERRED],
            n: 0,
        }
    }

    /// Queues index `i` of `bytes`; runs `f` on the oldest queued index when the queue is full.
    #[inline(always)]
    pub(crate) fn push(&mut self, bytes: &[AtomicU8], i: usize, f: &mut impl FnMut(usize)) {
        prefetch(bytes, i);
        let slot = &mut self.ring[self.n % DEFERRED];
        if self.n >= DEFERRED {
            f(*slot);
        }
        *slot = i;
        self.n += 1;
    }

    /// Runs `f` on every queued index.
    pub(crate) fn drain(&mut self, f: &mut impl FnMut(usize)) {
        let first = self.n.saturating_sub(DEFERRED);
        for k in first..self.n {
            f(self.ring[k % DEFERRED]);
        }
        self.n = 0;
    }
}

/// [`Deferred`] for lines, in two stages: work on some of the 64 indices from `base` (a multiple
/// of 64), queued with the squares (bits) of those indices. The first stage prefetches the
/// line's word of a bitmap `skip` (a bit per index on which there is nothing to do), the
/// second drops the skipped bits and prefetches both ends of what is left of the line.
pub(crate) struct DeferredLines {
    filter: [(usize, u64); DEFERRED_LINES],
    n_filter: usize,
    work: [(usize, u64); DEFERRED_LINES],
    n_work: usize,
}

/// Lines in flight in each stage of a [`DeferredLines`] (a power of two).
const DEFERRED_LINES: usize = 16;

impl DeferredLines {
    pub(crate) fn new() -> DeferredLines {
        DeferredLines {
            filter: [(0, 0); DEFERRED_LINES],
            n_filter: 0,
            work: [(0, 0); DEFERRED_LINES],
            n_work: 0,
        }
    }

    /// Queues indices `base + b` of `bytes` for the bits `b` of `bits`; runs `f` on the indices
    /// not skipped of the oldest line queued, when the queues are full.
    #[inline(always)]
    pub(crate) fn push(
        &mut self,
        skip: &[AtomicU64],
        bytes: &[AtomicU8],
        base: usize,
        bits: u64,
        f: &mut impl FnMut(usize),
    ) {
        debug_assert!(base.is_multiple_of(64));
        prefetch(skip, base / 64);
        let slot = self.n_filter % DEFERRED_LINES;
        if self.n_filter >= DEFERRED_LINES {
            let oldest = self.filter[slot];
            self.queue_work(skip, bytes, oldest, f);
        }
        self.filter[slot] = (base, bits);
        self.n_filter += 1;
    }

    #[inline(always)]
    fn queue_work(
        &mut self,
        skip: &[AtomicU64],
        bytes: &[AtomicU8],
        (base, bits): (usize, u64),
        f: &mut impl FnMut(usize),
    ) {
        let bits = bits & !skip[base / 64].load(Relaxed);
        if bits == 0 {
            return;
        }
        prefetch(bytes, base + bits.trailing_zeros() as usize);
        prefetch(bytes, base + 63 - bits.leading_zeros() as usize);
        let slot = self.n_work % DEFERRED_LINES;
        if self.n_work >= DEFERRED_LINES {
            run_line(self.work[slot], f);
        }
        self.work[slot] = (base, bits);
        self.n_work += 1;
    }

    /// Runs `f` on the indices not skipped of every queued line.
    pub(crate) fn drain(&mut self, skip: &[AtomicU64], bytes: &[AtomicU8], f: &mut impl FnMut(usize)) {
        for k in self.n_filter.saturating_sub(DEFERRED_LINES)..self.n_filter {
            let line = self.filter[k % DEFERRED_LINES];
            self.queue_work(skip, bytes, line, f);
        }
        for k in self.n_work.saturating_sub(DEFERRED_LINES)..self.n_work {
            run_line(self.work[k % DEFERRED_LINES], f);
        }
        self.n_filter = 0;
        self.n_work = 0;
    }
}

#[inline(always)]
fn run_line((base, mut bits): (usize, u64), f: &mut impl FnMut(usize)) {
    while bits != 0 {
        f(base + bits.trailing_zeros() as usize);
        bits &= bits - 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte value in every lane, next to every other: the lane test flags what it must,
    /// and the scan finds every passing byte at any alignment.
    #[test]
    fn lanes_and_scans_find_every_byte() {
        for lane in 0..8 {
            for v in 0..=255u8 {
                for other in [0u8, 1, 4, 5, 12, 13, 127, 128, 255] {
                    let mut b = [other; 8];
                    b[lane] = v;
                    let w = u64::from_le_bytes(b);
                    for c in [0u8, 4, 5, 9, 12, 13, 127, 128, 255] {
                        let eq = lanes_equal(w, c);
                        for (k, &x) in b.iter().enumerate() {
                            if x == c {
                                assert_ne!(eq >> (8 * k + 7) & 1, 0, "{b:?} == {c}");
                            }
                        }
                    }
                }
            }
        }
        let bytes: Vec<AtomicU8> = (0..1000u32)
            .map(|i| AtomicU8::new((i * 37 % 251) as u8))
            .collect();
        for start in 0..9 {
            for end in [start, start + 1, 500, 993, 1000] {
                let mut seen = Vec::new();
                for_each_flagged(
                    &bytes,
                    start..end,
                    |w| lanes_equal(w, 5) | lanes_equal(w, 100) | lanes_equal(w, 255),
                    |i| {
                        let v = bytes[i].load(Relaxed);
                        if v == 5 || v == 100 || v == 255 {
                            seen.push(i)
                        }
                    },
                );
                let expected: Vec<usize> = (start..end)
                    .filter(|&i| {
                        let v = bytes[i].load(Relaxed);
                        v == 5 || v == 100 || v == 255
                    })
                    .collect();
                assert_eq!(seen, expected, "{start}..{end}");
            }
        }
    }
}
