//! Large arrays for the solver, backed by huge pages where the system offers them.
//!
//! The passes read and write a slice's values at random: a king move jumps by the stride of the
//! king-pair field, hundreds of kilobytes away. With 4 KiB pages nearly every such access misses
//! the TLB; with 2 MiB pages (Linux transparent huge pages, which this machine kind grants on
//! `madvise`) far fewer do. The measured gain is in the commit that brought this file (KQRvKR
//! passes); the advice itself is `zermelo_storage::advise_huge_pages`.

use std::sync::atomic::AtomicU8;

use zermelo_storage::advise_huge_pages;

/// `n` bytes set to 0, on huge pages when large.
pub(crate) fn atomic_u8s(n: usize) -> Vec<AtomicU8> {
    let mut v = Vec::with_capacity(n);
    advise_huge_pages(&v);
    v.extend((0..n).map(|_| AtomicU8::new(0)));
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
