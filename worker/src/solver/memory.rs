//! Large arrays for the solver, backed by huge pages where that pays.
//!
//! The passes read and write a slice's values at random: a king move jumps by the stride of the
//! king-pair field, hundreds of kilobytes away. With 4 KiB pages nearly every such access misses
//! the TLB; with 2 MiB pages (Linux transparent huge pages, which this machine kind grants on
//! `madvise`) far fewer do. But a huge page costs more to fault in the first time: on this
//! machine kind (a virtual machine, whose host seems to back fresh memory as it is touched)
//! touching 300 MB of fresh huge pages takes 0.7-0.8 s, of 4 KiB pages 0.1 s. For a slice of a
//! few hundred megabytes that outweighs what the TLB saves (KQRvKR, 242 M indices: 2 threads
//! 7.32-7.73 s on small pages against 7.51-7.82 s on huge ones, five runs each; 1 thread
//! 14.5-14.7 s against 15.0-15.3 s, three each, its init 2.0-2.1 s against 2.6-2.8 s, its
//! passes 0.1-0.2 s slower). Only arrays of [`HUGE_FROM_BYTES`] or more (6-man slices: KRNvKNN's
//! state is 7.6 GB) are advised onto huge pages; the advice itself is
//! `zermelo_storage::advise_huge_pages`.
//!
//! Also the two ways the passes go over the state faster: scans that test 64 bytes at a time
//! for a few codes ([`for_each_equal`]), and random work queued a few steps behind a prefetch
//! ([`Deferred`]).

use std::ops::Range;
use std::sync::atomic::{AtomicU16, AtomicU64, AtomicU8, Ordering::Relaxed};

use zermelo_storage::advise_huge_pages;

/// Arrays of the solver this large or larger are advised onto huge pages (see the module
/// comment): far past the TLB's reach with small pages, where the passes' misses outweigh the
/// dearer first touch.
const HUGE_FROM_BYTES: usize = 512 << 20;

/// `n` bytes set to 0, on huge pages when very large.
pub(crate) fn atomic_u8s(n: usize) -> Vec<AtomicU8> {
    // SAFETY: an `AtomicU8` of all-zero bytes is 0.
    unsafe { zeroed(n) }
}

/// `n` 16-bit values set to 0, on huge pages when very large.
pub(crate) fn atomic_u16s(n: usize) -> Vec<AtomicU16> {
    // SAFETY: an `AtomicU16` of all-zero bytes is 0.
    unsafe { zeroed(n) }
}

/// `n` words set to 0, on huge pages when very large.
pub(crate) fn atomic_u64s(n: usize) -> Vec<AtomicU64> {
    // SAFETY: an `AtomicU64` of all-zero bytes is 0.
    unsafe { zeroed(n) }
}

/// `n` values of all-zero bytes, taken zeroed from the allocator and not touched here: a large
/// array comes from the system as pages not yet mapped, which the threads of the phase that
/// first writes them fault in, in parallel (written here, by one thread, they took 0.55 s of a
/// 2-thread KQRvKR build of 7.2 s, the kernel clearing 300 MB of pages before the solver's
/// threads started), and are advised onto huge pages first when of [`HUGE_FROM_BYTES`] or
/// more.
///
/// # Safety
/// All-zero bytes must be a valid `T`.
unsafe fn zeroed<T>(n: usize) -> Vec<T> {
    let layout = std::alloc::Layout::array::<T>(n).expect("an array that fits the address space");
    if layout.size() == 0 {
        return Vec::new();
    }
    // SAFETY: the layout's size is not 0.
    let p = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>();
    if p.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    // SAFETY: `p` was allocated by the global allocator with the layout of `n` values of `T`
    // (what a `Vec<T>` of capacity `n` deallocates with), and its `n` values are zeroed, which
    // the caller guarantees is a valid `T`.
    let v = unsafe { Vec::from_raw_parts(p, n, n) };
    if layout.size() >= HUGE_FROM_BYTES {
        advise_huge_pages(&v);
    }
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

/// Calls `f(i)`, in ascending order, for each index `i` of `range` whose byte is one of `codes`,
/// looking at 64 bytes at a time (with SSE2 on x86-64, 16 bytes an instruction; elsewhere a byte
/// at a time). The test of a block of 64 is made before `f` is called on any of its indices:
/// `f` sees a byte as it was then tested, and may write it.
///
/// The bytes are read wide, not as `AtomicU8`s: while this runs, no other thread may write a
/// byte of `range` (the calling thread may, through `f`).
#[inline]
pub(crate) fn for_each_equal<const N: usize>(
    bytes: &[AtomicU8],
    range: Range<usize>,
    codes: [u8; N],
    mut f: impl FnMut(usize),
) {
    for_each_equal_block(bytes, range, codes, |first, mut m| {
        while m != 0 {
            f(first + m.trailing_zeros() as usize);
            m &= m - 1;
        }
    });
}

/// [`for_each_equal`] a block at a time: calls `f(first, mask)`, in ascending order of `first`,
/// for each block of 64 indices from `first` (from `range.start` on, the last one perhaps
/// shorter) that holds one of `codes`, bit `k` of `mask` set for `first + k`. Same contract.
#[inline]
pub(crate) fn for_each_equal_block<const N: usize>(
    bytes: &[AtomicU8],
    range: Range<usize>,
    codes: [u8; N],
    mut f: impl FnMut(usize, u64),
) {
    let bytes = &bytes[range.clone()];
    let blocks = bytes.len() / 64;
    let test = BlockTest::new(codes);
    // The lines ahead are asked for a few at a time: the hardware's own prefetch starts anew
    // at each 4 KiB page, and a range is often a page or less.
    for b in 0..blocks.min(SCAN_AHEAD) {
        prefetch(bytes, b * 64);
    }
    for b in 0..blocks {
        if b + SCAN_AHEAD < blocks {
            prefetch(bytes, (b + SCAN_AHEAD) * 64);
        }
        // Safety: `AtomicU8` has the size and layout of `u8`, and the 64 bytes from `b * 64`
        // lie inside `bytes`. The read is not atomic, but no other thread writes these bytes
        // while this runs (the contract above), so it races nothing.
        let m = unsafe { test.mask(bytes.as_ptr().add(b * 64) as *const u8) };
        if m != 0 {
            f(range.start + b * 64, m);
        }
    }
    let mut m = 0u64;
    for (k, byte) in bytes[blocks * 64..].iter().enumerate() {
        if codes.contains(&byte.load(Relaxed)) {
            m |= 1 << k;
        }
    }
    if m != 0 {
        f(range.start + blocks * 64, m);
    }
}

/// A bit per byte of the 64 from `first` (bit `k` for `first + k`): set if the byte is one of
/// `codes`. Read wide as [`for_each_equal`] reads, on the same condition: while this runs, no
/// other thread may write those bytes.
#[inline]
pub(crate) fn equal_mask<const N: usize>(bytes: &[AtomicU8], first: usize, codes: [u8; N]) -> u64 {
    let block = &bytes[first..first + 64];
    // Safety: as in `for_each_equal`: the 64 bytes lie inside `bytes`, and no other thread
    // writes them meanwhile (the contract above).
    unsafe { BlockTest::new(codes).mask(block.as_ptr() as *const u8) }
}

/// The test of [`for_each_equal`] on a block of 64 bytes.
struct BlockTest<const N: usize> {
    #[cfg(target_arch = "x86_64")]
    codes: [std::arch::x86_64::__m128i; N],
    #[cfg(not(target_arch = "x86_64"))]
    codes: [u8; N],
}

impl<const N: usize> BlockTest<N> {
    #[inline(always)]
    fn new(codes: [u8; N]) -> BlockTest<N> {
        #[cfg(target_arch = "x86_64")]
        // Safety: SSE2 is part of x86-64.
        let codes = codes.map(|c| unsafe { std::arch::x86_64::_mm_set1_epi8(c as i8) });
        BlockTest { codes }
    }

    /// A bit per byte of the 64 from `p` (bit `k` for `p + k`): set if the byte is a code.
    ///
    /// # Safety
    /// The 64 bytes from `p` are readable and not written meanwhile by another thread.
    #[inline(always)]
    unsafe fn mask(&self, p: *const u8) -> u64 {
        let mut m = 0u64;
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::*;
            for k in 0..4 {
                let v = _mm_loadu_si128(p.add(16 * k) as *const __m128i);
                let mut e = _mm_setzero_si128();
                for c in &self.codes {
                    e = _mm_or_si128(e, _mm_cmpeq_epi8(v, *c));
                }
                m |= (_mm_movemask_epi8(e) as u32 as u64) << (16 * k);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        for k in 0..64 {
            m |= (self.codes.contains(&*p.add(k)) as u64) << k;
        }
        m
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

/// Blocks of 64 bytes that [`for_each_equal_block`] asks for ahead of the one it tests.
const SCAN_AHEAD: usize = 16;

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

    /// Queues index `i` of `array`; runs `f` on the oldest queued index when the queue is full.
    #[inline(always)]
    pub(crate) fn push<T>(&mut self, array: &[T], i: usize, f: &mut impl FnMut(usize)) {
        prefetch(array, i);
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

/// Work on random words of bitmaps, done a few steps after it is queued: each word is
/// prefetched in two bitmaps when queued, so that the reads of the words in flight overlap.
pub(crate) struct DeferredWords {
    ring: [(usize, u64); DEFERRED_WORDS],
    n: usize,
}

/// Words in flight in a [`DeferredWords`] (a power of two).
const DEFERRED_WORDS: usize = 16;

impl DeferredWords {
    pub(crate) fn new() -> DeferredWords {
        DeferredWords {
            ring: [(0, 0); DEFERRED_WORDS],
            n: 0,
        }
    }

    /// Queues word `w` with `bits`, prefetching it in `a` and `b`; runs `f` on the oldest word
    /// queued when the queue is full.
    #[inline(always)]
    pub(crate) fn push(
        &mut self,
        a: &[AtomicU64],
        b: &[AtomicU64],
        w: usize,
        bits: u64,
        f: &mut impl FnMut(usize, u64),
    ) {
        prefetch(a, w);
        prefetch(b, w);
        let slot = &mut self.ring[self.n % DEFERRED_WORDS];
        if self.n >= DEFERRED_WORDS {
            f(slot.0, slot.1);
        }
        *slot = (w, bits);
        self.n += 1;
    }

    /// Runs `f` on every word queued.
    pub(crate) fn drain(&mut self, f: &mut impl FnMut(usize, u64)) {
        for k in self.n.saturating_sub(DEFERRED_WORDS)..self.n {
            let (w, bits) = self.ring[k % DEFERRED_WORDS];
            f(w, bits);
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

    /// Every byte value at every place of a block, among bytes of every kind, at every alignment
    /// of the range: the scan finds exactly the bytes equal to one of the codes.
    #[test]
    fn scans_find_every_byte_equal_to_a_code() {
        fn check<const N: usize>(bytes: &[AtomicU8], codes: [u8; N]) {
            for start in (0..9).chain([63, 64, 65]) {
                for end in [start, start + 1, start + 63, start + 64, 500, 993, bytes.len()] {
                    let end = end.min(bytes.len());
                    let mut seen = Vec::new();
                    for_each_equal(bytes, start..end, codes, |i| seen.push(i));
                    let expected: Vec<usize> = (start..end)
                        .filter(|&i| codes.contains(&bytes[i].load(Relaxed)))
                        .collect();
                    assert_eq!(seen, expected, "{codes:?} in {start}..{end}");
                }
            }
        }
        let bytes: Vec<AtomicU8> = (0..1000u32)
            .map(|i| AtomicU8::new((i * 37 % 251) as u8))
            .collect();
        check(&bytes, [5]);
        check(&bytes, [5, 100, 255]);
        check(&bytes, [0, 4, 5, 9, 12, 13, 127, 128, 255]);
        for v in 0..=255u8 {
            for other in [0u8, 1, 4, 5, 12, 13, 127, 128, 255] {
                for at in [0, 1, 7, 8, 15, 16, 31, 63] {
                    let bytes: Vec<AtomicU8> = (0..64)
                        .map(|k| AtomicU8::new(if k == at { v } else { other }))
                        .collect();
                    for c in [0u8, 5, 9, 12, 128, 255] {
                        let mut seen = Vec::new();
                        for_each_equal(&bytes, 0..64, [c], |i| seen.push(i));
                        let expected: Vec<usize> = (0..64)
                            .filter(|&k| (if k == at { v } else { other }) == c)
                            .collect();
                        assert_eq!(seen, expected, "{v} at {at} among {other}, looking for {c}");
                    }
                }
            }
        }
    }
}
