//! The half slice in hand paged through a file, for a budget that cannot hold it (see the
//! crate's documentation, "Memory and order of work").
//!
//! The other half's values are written to a file of the verification's folder (unlinked at
//! once, so that nothing stays behind whatever happens to the process) and mapped read-only.
//! The half is cut into *groups* of [`GROUP_VALUES`] values. A worker notes in a bitmap of its
//! own every group it reads from while it checks a unit; after the unit it hands the bitmap
//! over ([`PagedHalf::publish`]), which stamps each group with the unit's number. A group
//! stamped counts as wholly mapped (an upper bound: a read maps a page of it, not all); when
//! more groups are counted than the budget holds, the least recently stamped are unmapped
//! (`madvise(MADV_DONTNEED)`: the process no longer holds their pages; the kernel keeps them in
//! its cache while it has memory to spare, and reads them back from the file otherwise) until
//! seven eighths of the budget is left. Unmapping costs time, never a value: the next read of
//! an unmapped page maps it again, with the bytes of the file, which nothing writes after it is
//! made.
//!
//! This is the verifier's own code: it shares nothing with the solver's paging.

use std::cell::Cell;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

/// Values per group (128 KiB of them; 4 KiB in this crate's tests, so that their small tables
/// are cut into many).
pub(super) const GROUP_SHIFT: u32 = if cfg!(test) { 11 } else { 16 };
pub(super) const GROUP_VALUES: u64 = 1 << GROUP_SHIFT;
const GROUP_BYTES: u64 = 2 * GROUP_VALUES;

/// Values written to the file at a time while it is made (8 MiB of them; 8 KiB in this
/// crate's tests).
pub(super) const FILL_VALUES: u64 = if cfg!(test) { 1 << 12 } else { 1 << 22 };

/// Groups unmapped by every paged half of the process so far, for this crate's tests.
#[cfg(test)]
pub(super) static UNMAPPED: AtomicU64 = AtomicU64::new(0);

/// The values of a half slice in a file mapped read-only, at most a budget of it mapped.
pub(super) struct PagedHalf {
    map: memmap2::Mmap,
    len: usize,
    /// Groups counted as mapped at most.
    budget_groups: usize,
    /// Per group: the number (from 1) of the last unit that read it; 0 while it is unmapped.
    last: Vec<AtomicU64>,
    /// Groups stamped since they were last unmapped.
    mapped: AtomicUsize,
    /// Held while groups are being unmapped.
    reclaiming: Mutex<()>,
    unmapped: AtomicU64,
}

impl PagedHalf {
    /// A half of `len` values in a new file of `dir` named after `name`, filled from
    /// `read(start, count)` [`FILL_VALUES`] at a time, at most `resident` bytes of it mapped.
    pub(super) fn create<E>(
        dir: &Path,
        name: &str,
        len: u64,
        resident: u64,
        read: &mut dyn FnMut(u64, u64) -> Result<Vec<u16>, E>,
    ) -> Result<PagedHalf, PagedError<E>> {
        let path = dir.join(format!(".verify-{name}.{}.half", std::process::id()));
        let io = |e| PagedError::Io(e);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io)?;
        std::fs::remove_file(&path).map_err(io)?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, &mut file);
        let mut at = 0;
        while at < len {
            let count = FILL_VALUES.min(len - at);
            let values = read(at, count).map_err(PagedError::Read)?;
            for v in &values {
                w.write_all(&v.to_ne_bytes()).map_err(io)?;
            }
            at += count;
        }
        w.flush().map_err(io)?;
        drop(w);
        // SAFETY: the file is this process's alone (made new and unlinked), and nothing writes
        // to it from here on.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
        let groups = len.div_ceil(GROUP_VALUES) as usize;
        Ok(PagedHalf {
            map,
            len: len as usize,
            budget_groups: (resident / GROUP_BYTES).max(1) as usize,
            last: (0..groups).map(|_| AtomicU64::new(0)).collect(),
            mapped: AtomicUsize::new(0),
            reclaiming: Mutex::new(()),
            unmapped: AtomicU64::new(0),
        })
    }

    pub(super) fn values(&self) -> &[u16] {
        // SAFETY: the map holds `len` native-endian u16s written above; a map starts on a
        // page, so the middle part is all of it (checked below).
        let (head, values, _) = unsafe { self.map.align_to::<u16>() };
        debug_assert!(head.is_empty() && values.len() == self.len);
        values
    }

    /// A bitmap of the groups, for a worker to note the ones it reads ([`Touched::note`]).
    pub(super) fn touched(&self) -> Touched {
        Touched((0..self.last.len().div_ceil(64)).map(|_| Cell::new(0)).collect())
    }

    /// Stamps the groups noted in `touched` with unit `unit` (numbered from 1 in the order the
    /// units are taken) and clears it; unmaps the least recently stamped groups if more than
    /// the budget are counted as mapped.
    pub(super) fn publish(&self, touched: &Touched, unit: u64) {
        for (w, word) in touched.0.iter().enumerate() {
            let mut bits = word.replace(0);
            while bits != 0 {
                let g = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if self.last[g].swap(unit, Relaxed) == 0 {
                    self.mapped.fetch_add(1, Relaxed);
                }
            }
        }
        if self.mapped.load(Relaxed) > self.budget_groups {
            self.reclaim();
        }
    }

    /// Unmaps the least recently stamped groups down to seven eighths of the budget.
    fn reclaim(&self) {
        let Ok(_one) = self.reclaiming.try_lock() else {
            return;
        };
        let mut by_age: Vec<(u64, usize)> = (self.last.iter().enumerate())
            .filter_map(|(g, l)| Some((l.load(Relaxed), g)).filter(|&(l, _)| l != 0))
            .collect();
        by_age.sort_unstable();
        let goal = self.budget_groups / 8 * 7;
        for (stamp, g) in by_age {
            if self.mapped.load(Relaxed) <= goal {
                break;
            }
            // A group stamped again meanwhile is in use: it stays.
            if self.last[g].compare_exchange(stamp, 0, Relaxed, Relaxed).is_err() {
                continue;
            }
            self.mapped.fetch_sub(1, Relaxed);
            self.unmap(g);
        }
    }

    fn unmap(&self, g: usize) {
        let start = g * GROUP_BYTES as usize;
        let len = (GROUP_BYTES as usize).min(self.map.len() - start);
        #[cfg(unix)]
        // SAFETY: the range lies inside the map (whole pages: a group is a multiple of a page,
        // and the last one ends with the map). MADV_DONTNEED on a read-only shared file map
        // drops the process's pages of it; the next read maps them again from the file.
        unsafe {
            libc::madvise(
                self.map.as_ptr().add(start) as *mut libc::c_void,
                len,
                libc::MADV_DONTNEED,
            );
        }
        #[cfg(not(unix))]
        let _ = len;
        self.unmapped.fetch_add(1, Relaxed);
        #[cfg(test)]
        UNMAPPED.fetch_add(1, Relaxed);
    }

    /// Groups unmapped so far.
    pub(super) fn unmapped(&self) -> u64 {
        self.unmapped.load(Relaxed)
    }
}

/// The groups of a [`PagedHalf`] one worker has read from since its last unit: a bit a group.
pub(super) struct Touched(Vec<Cell<u64>>);

impl Touched {
    /// Notes a read of the value at `at` of the half.
    #[inline]
    pub(super) fn note(&self, at: usize) {
        let g = at >> GROUP_SHIFT;
        let w = &self.0[g / 64];
        w.set(w.get() | 1 << (g % 64));
    }
}

/// Why a paged half could not be made.
#[derive(Debug)]
pub(super) enum PagedError<E> {
    Io(std::io::Error),
    Read(E),
}
