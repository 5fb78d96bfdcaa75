//! Large arrays of values on huge pages, for whoever reads tables at random: the solver's
//! state and the verifier's half slices.
//!
//! Random reads over gigabytes miss the TLB on nearly every access with 4 KiB pages; with
//! 2 MiB pages (Linux transparent huge pages, which this machine kind grants on `madvise`) far
//! fewer do.

/// Arrays smaller than this stay on normal pages (a huge page would mostly be wasted).
const HUGE_FROM_BYTES: usize = 8 << 20;

/// Asks the kernel to back the whole capacity of `v` with huge pages. Call it before the memory
/// is touched: pages already faulted in stay small until the kernel merges them (if ever).
pub fn advise_huge_pages<T>(v: &Vec<T>) {
    let bytes = v.capacity() * std::mem::size_of::<T>();
    if bytes < HUGE_FROM_BYTES {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        let page = 4096usize;
        let start = v.as_ptr() as usize;
        let aligned = start.next_multiple_of(page);
        let len = (start + bytes).saturating_sub(aligned) / page * page;
        if len == 0 {
            return;
        }
        // Safety: the range lies inside the allocation `v` owns (start rounded up, end rounded
        // down to pages), and MADV_HUGEPAGE only changes how the kernel backs it, never its
        // contents or validity; a refusal is harmless and ignored.
        unsafe {
            libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        }
    }
}
