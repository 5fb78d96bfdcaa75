//! Out-of-core state: a slice's state bytes and won bitmap (or the compact solver's three
//! bitmaps, [`super::bits`]) in files of the build's folder, mapped into memory, with at most a
//! budget of them resident.
//!
//! The index of a slice has its king pair as the most significant field below the side to
//! move, so the indices of one side to move and one king pair — a *K-slice* — are one
//! contiguous range (KRNvKNN: 924 K-slices of 8.26 M indices). A move of a man other than a
//! king stays inside its K-slice (on the other side to move); a king move reaches the K-slices
//! of the king pairs one step of that king away (after the symmetry that brings the kings into
//! table form, for a pawnless slice): a known neighbourhood of at most nine.
//!
//! So the passes keep their code and their arithmetic on indices; only where the arrays live
//! changes. Before a pass works on a range of indices it *marks* the K-slices it will touch
//! (the range's own, or the neighbourhood its moves reach). The files are held in *units*: 2 MiB
//! where a K-slice's state is at least two of them (KRNvKNN's 8.26 MB), mapped as huge pages
//! (`MADV_HUGEPAGE`: a fault and a TLB entry for 512 pages, as the state in memory has), else
//! 4 KiB pages. A unit of a K-slice marked counts as wholly resident until it is evicted (an
//! upper bound: a pass maps the pages it touches, not all), so that what the process holds of
//! the files never runs past the budget. After each mark the marking thread looks at their sum,
//! and when it is more than the budget it evicts the least recently marked K-slices, before
//! the pass maps what it marked: their units that hold no bytes of another K-slice marked are
//! unmapped (`madvise(MADV_DONTNEED)`), so that the process no longer holds them. The kernel
//! writes them back to their file and keeps them in its page cache as long as it has memory to
//! spare (on a machine, or in a cgroup, with less memory than the state, it drops them, and an
//! evicted K-slice touched again is read back from the disk). Eviction can cost time, never a
//! value: a page of a shared file mapping keeps its contents when it is unmapped. And the passes
//! walk the K-slices in an order that keeps the neighbourhoods they reach few
//! ([`Pager::walk`]). The values do not depend on the order, the budget or whether the state is
//! paged at all.
//!
//! The files are unlinked as soon as they are mapped: a build killed at any point leaves no
//! state file behind (resuming is the checkpoints' work, [`super::checkpoint`]).

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut, Range};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tracing::debug;
use zermelo_chess::index::{
    king_pair_field, pawnless_symmetry, SliceIndexer, KING_PAIRS_PAWNFUL, KING_PAIRS_PAWNLESS,
    PAWNFUL_KING_PAIRS, PAWNLESS_KING_PAIRS, SYMMETRY_TABLE,
};
use zermelo_chess::Square;

/// Where and within what a slice's state is paged: set by a build for a slice whose state does
/// not fit its memory budget.
#[derive(Clone, Debug)]
pub struct Paging {
    /// The folder of the state's files (they are unlinked at once: nothing stays there).
    pub dir: PathBuf,
    /// Bytes of state (state bytes and won bitmap) to keep resident at most.
    pub resident: u64,
}

/// [`Pager::mark_in`]'s mask of every file.
pub(super) const ALL_FILES: u32 = !0;

/// Bytes of paged state per index: the state byte and a bit of the won bitmap.
pub const PAGED_BYTES_PER_INDEX: f64 = 1.0 + 1.0 / 8.0;

/// The fewest K-slices a paged state needs resident: the neighbourhoods of the walk's current
/// K-slices on two threads, with room to spare (see [`Pager::walk`]).
pub const MIN_RESIDENT_KSLICES: u64 = 48;

/// The files of the byte solver's paged state, as bytes per index `(num, den)`: the state
/// bytes and the won bitmap.
pub(super) const BYTE_FILES: &[(usize, usize)] = &[(1, 1), (1, 8)];

/// [`Pager::mark_in`]'s mask of the byte solver's won bitmap ([`BYTE_FILES`]' second file).
pub(super) const WON_FILE: u32 = 1 << 1;

/// The files of the compact solver's paged state ([`super::bits`]): three bitmaps.
pub(super) const BIT_FILES: &[(usize, usize)] = &[(1, 8), (1, 8), (1, 8)];

/// The most bytes one K-slice of `kslice` indices is counted as resident, in the units its
/// files are held in (rounded out at both ends: units at the edges are shared with the
/// neighbours): the byte solver's ([`BYTE_FILES`]).
pub fn kslice_resident_bytes(kslice: u64) -> u64 {
    resident_bytes(kslice, BYTE_FILES)
}

/// [`kslice_resident_bytes`] for a state of `files` (bytes per index, the largest first).
pub(super) fn resident_bytes(kslice: u64, files: &[(usize, usize)]) -> u64 {
    let unit = unit_for(kslice as usize, files) as u64;
    files
        .iter()
        .map(|&(num, den)| (kslice * num as u64 / den as u64).div_ceil(unit) + 1)
        .sum::<u64>()
        * unit
}

/// The unit of the files of a state of K-slices of `kslice` indices (see the module comment):
/// huge pages where a K-slice's share of the largest of `files` is at least two of them.
fn unit_for(kslice: usize, files: &[(usize, usize)]) -> usize {
    #[cfg(test)]
    if FORCE_HUGE.load(Relaxed) {
        return HUGE_PAGE;
    }
    let (num, den) = files[0];
    if kslice * num / den >= 2 * HUGE_PAGE {
        HUGE_PAGE
    } else {
        PAGE
    }
}

/// K-slices evicted by every pager of the process so far.
static EVICTIONS: AtomicU64 = AtomicU64::new(0);

/// K-slices evicted by every pager of the process so far.
#[cfg(test)]
pub(super) fn evictions() -> u64 {
    EVICTIONS.load(Relaxed)
}

/// Bytes pinned by every pager of the process so far.
static PINNED: AtomicU64 = AtomicU64::new(0);

/// Bytes pinned by every pager of the process so far.
#[cfg(test)]
pub(super) fn pinned() -> u64 {
    PINNED.load(Relaxed)
}

/// A page, and a huge page: the units a paged file is held in (see the module comment).
const PAGE: usize = 4096;
const HUGE_PAGE: usize = 2 << 20;

/// For tests: hold every paged file in huge-page units, however small its K-slices.
#[cfg(test)]
pub(super) static FORCE_HUGE: AtomicBool = AtomicBool::new(false);

/// For tests: a window of a sixteenth of the budget however small, so that small slices (whose
/// K-slices share units) pin some of their state too.
#[cfg(test)]
pub(super) static SMALL_WINDOW: AtomicBool = AtomicBool::new(false);

/// A zeroed array of `T` in a file mapped into memory, or on the heap. Its pointer and length
/// are kept beside their owner, so that an access does not ask which it is (a branch on every
/// access of the passes cost KQRvKR 5% in memory).
pub(super) struct Big<T> {
    ptr: std::ptr::NonNull<T>,
    len: usize,
    owner: Owner<T>,
}

/// What owns a [`Big`]'s values: held only to be dropped with it.
#[allow(dead_code)]
enum Owner<T> {
    Heap(Vec<T>),
    Mapped(Mapped<T>),
}

// SAFETY: `Big` owns its values (the pointer is into its owner), as a `Vec` does.
unsafe impl<T: Send> Send for Big<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for Big<T> {}

impl<T> Big<T> {
    pub(super) fn heap(mut v: Vec<T>) -> Big<T> {
        let (ptr, len) = (v.as_mut_ptr(), v.len());
        Big {
            ptr: std::ptr::NonNull::new(ptr).expect("a vector's pointer is never null"),
            len,
            owner: Owner::Heap(v),
        }
    }

    pub(super) fn mapped(mut m: Mapped<T>) -> Big<T> {
        let (ptr, len) = (m.as_mut_ptr(), m.len());
        Big {
            ptr: std::ptr::NonNull::new(ptr).expect("a map's pointer is never null"),
            len,
            owner: Owner::Mapped(m),
        }
    }

    /// Whether its values are in a mapped file.
    pub(super) fn is_mapped(&self) -> bool {
        matches!(self.owner, Owner::Mapped(_))
    }
}

impl<T> Default for Big<T> {
    fn default() -> Self {
        Big::heap(Vec::new())
    }
}

impl<T> Deref for Big<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` and `len` are those of the owner's values, which neither moves nor
        // resizes while it is owned here (moving a `Vec` or a map leaves its values in place).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> DerefMut for Big<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

/// `len` values of `T` in a fresh file of `dir`, mapped shared and read as zeros; the file is
/// unlinked at once, and lives as long as the map.
pub(super) struct Mapped<T> {
    /// Shared with the pager, which evicts from it: the map stays until both let it go.
    inner: Arc<MapFile>,
    len: usize,
    _t: PhantomData<T>,
}

struct MapFile {
    map: memmap2::MmapRaw,
}

// SAFETY: the map is plain memory owned by this value; `T` is an atomic integer type (see
// `Mapped::zeroed`), which threads share by design.
unsafe impl<T: Sync> Sync for Mapped<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Mapped<T> {}

impl<T> Mapped<T> {
    /// On `huge` pages if asked (the kernel maps a file's 2 MiB folios whole where it can).
    ///
    /// # Safety
    /// All-zero bytes must be a valid `T`, and `T` must be valid at any alignment of a page
    /// multiple (the map starts on a page).
    pub(super) unsafe fn zeroed(
        dir: &Path,
        name: &str,
        len: usize,
        huge: bool,
    ) -> std::io::Result<Mapped<T>> {
        let bytes = (len * std::mem::size_of::<T>()).max(1) as u64;
        // A name of its own (the parts of a slice solved in one process each page a state):
        // two maps of one file would be one state.
        static MAPS: AtomicU64 = AtomicU64::new(0);
        let path = dir.join(format!(
            "{name}.{}.{}.paged",
            std::process::id(),
            MAPS.fetch_add(1, Relaxed)
        ));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        let unlinked = std::fs::remove_file(&path);
        file.set_len(bytes)?;
        unlinked?;
        let map = memmap2::MmapOptions::new().len(bytes as usize).map_raw(&file)?;
        #[cfg(target_os = "linux")]
        if huge {
            // SAFETY: the range is the map's; MADV_HUGEPAGE only changes how the kernel backs
            // it, never its contents; a refusal is harmless and ignored.
            unsafe {
                libc::madvise(map.as_mut_ptr().cast(), map.len(), libc::MADV_HUGEPAGE);
            }
        }
        Ok(Mapped {
            inner: Arc::new(MapFile { map }),
            len,
            _t: PhantomData,
        })
    }

    fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
}

impl<T> Deref for Mapped<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: the map holds `len` values of `T` (zeroed or written as `T`), aligned on a page.
        unsafe { std::slice::from_raw_parts(self.inner.map.as_ptr().cast::<T>(), self.len) }
    }
}

impl<T> DerefMut for Mapped<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.inner.map.as_mut_ptr().cast::<T>(), self.len) }
    }
}

/// Which K-slices a pass touches for a range of indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reach {
    /// Only the range's own (scans, init, writing out).
    Own,
    /// The un-moves from the range: the K-slices of the other side to move whose king pair is
    /// one step of that side's king away, or the same.
    Unmove,
    /// The verification of the range: its own, and the K-slices of the other side to move one
    /// step of this side's king away, or the same.
    Verify,
}

/// A mapped region the pager evicts from: its bytes per index as a fraction `num / den`, and
/// per unit whether it counts as resident (marked since it was last unmapped).
struct Region {
    inner: Arc<MapFile>,
    bytes: usize,
    num: usize,
    den: usize,
    units: Vec<AtomicBool>,
    /// Per unit: pinned, its pages anonymous memory (never counted, never unmapped: that would
    /// lose them).
    pinned: Vec<bool>,
}

struct Shared {
    /// Indices per K-slice, per side to move, and king pairs.
    kslice: usize,
    per_side: usize,
    pairs: usize,
    /// The king pairs `[white, black]` in field order.
    squares: &'static [[Square; 2]],
    /// Per colour of the king that moves, per king pair: the king pairs one step away, and
    /// itself.
    near: [Vec<Vec<u16>>; 2],
    /// Per K-slice (side to move × pairs + pair): the files a mark counts ([`Pager::new`]'s `only`; all
    /// unless restricted).
    files: Vec<u32>,
    /// Per K-slice: the clock at its last mark, and whether it may be resident (marked since
    /// its last eviction).
    last: Vec<AtomicU64>,
    resident: Vec<AtomicBool>,
    clock: AtomicU64,
    /// Per K-slice: whether its files (those of [`Shared::files`]) are pinned, held in memory
    /// for the whole solve instead of paged (see [`Pager::new`]).
    pinned: Vec<bool>,
    /// Bytes of the units counted as resident to keep at most: the budget less the units
    /// pinned.
    budget: AtomicU64,
    regions: RwLock<Vec<Region>>,
    /// The unit the files are held in: [`PAGE`] or [`HUGE_PAGE`].
    unit: usize,
    /// Bytes of the units counted as resident.
    counted: AtomicU64,
    /// One reclaim at a time.
    reclaiming: Mutex<()>,
    evicted: AtomicU64,
    evictions: AtomicU64,
    /// When the pager last logged.
    said: Mutex<std::time::Instant>,
}

/// The pager of a paged state (see the module comment): its marks, and its evictions.
pub(super) struct Pager {
    dir: PathBuf,
    shared: Shared,
}

impl Pager {
    /// The pager of the slice of `ix`, as `paging` says, for a state of `files` (see
    /// [`BYTE_FILES`]: the units depend on them).
    ///
    /// `only` restricts the marks to what a part of the slice touches ([`super::parts`]): per
    /// K-slice (side to move × king pairs + king pair), the mask of files (as
    /// [`Pager::mark_in`]'s) a mark of it counts; 0 for a K-slice the part never touches
    /// (another part's, whose predecessors its un-moves post instead of marking). Without it,
    /// the marks a pass makes around a band's edge would count the neighbours' units as
    /// resident, and evict the part's own for nothing.
    ///
    /// The budget beyond a window for the passes' neighbourhoods (the larger of
    /// [`MIN_RESIDENT_KSLICES`] K-slices and a sixteenth of it) *pins* K-slices, in index
    /// order: their units are anonymous memory for the whole solve, never counted nor evicted,
    /// and only the rest is paged through the window. Every pass walks every K-slice, a cycle
    /// that no recency order keeps resident: without pins, a state a little larger than its
    /// budget had the whole of it faulted back in at every pass, and written back by the kernel
    /// (the pages of a shared file map are dirty: KRNvKNN in 3 parts paged on 3 workers of
    /// 3 GiB spent 70% of its time waiting for the disk).
    pub(super) fn new(
        ix: &SliceIndexer,
        paging: &Paging,
        files: &[(usize, usize)],
        only: Option<Vec<u32>>,
    ) -> Pager {
        let pawnless = ix.is_pawnless();
        let (pairs, squares): (usize, &'static [[Square; 2]]) = if pawnless {
            (PAWNLESS_KING_PAIRS, &KING_PAIRS_PAWNLESS)
        } else {
            (PAWNFUL_KING_PAIRS, &KING_PAIRS_PAWNFUL)
        };
        let per_side = ix.per_side() as usize;
        let kslice = per_side / pairs;
        debug_assert_eq!(kslice * pairs, per_side);
        let near = [0, 1].map(|c| {
            (0..pairs)
                .map(|kp| near_pairs(pawnless, squares[kp], c))
                .collect()
        });
        let unit = unit_for(kslice, files);
        let masks = only.unwrap_or_else(|| vec![ALL_FILES; 2 * pairs]);
        assert_eq!(masks.len(), 2 * pairs, "a mask a K-slice");
        #[allow(unused_mut)]
        let mut least = MIN_RESIDENT_KSLICES * resident_bytes(kslice as u64, files);
        #[cfg(test)]
        if SMALL_WINDOW.load(Relaxed) {
            least = 0;
        }
        let window = least.max(paging.resident / 16);
        let mut room = paging.resident.saturating_sub(window);
        let pinned = masks
            .iter()
            .map(|&mask| {
                let cost: u64 = files
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| mask & (1 << i) != 0)
                    .map(|(_, &(num, den))| (kslice * num / den) as u64)
                    .sum();
                let pin = mask != 0 && cost <= room;
                if pin {
                    room -= cost;
                }
                pin
            })
            .collect();
        let shared = Shared {
            kslice,
            per_side,
            pairs,
            squares,
            near,
            files: masks,
            last: (0..2 * pairs).map(|_| AtomicU64::new(0)).collect(),
            resident: (0..2 * pairs).map(|_| AtomicBool::new(false)).collect(),
            clock: AtomicU64::new(1),
            pinned,
            budget: AtomicU64::new(paging.resident),
            regions: RwLock::new(Vec::new()),
            unit,
            counted: AtomicU64::new(0),
            reclaiming: Mutex::new(()),
            evicted: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            said: Mutex::new(std::time::Instant::now()),
        };
        Pager {
            dir: paging.dir.clone(),
            shared,
        }
    }

    /// The folder of the paged files.
    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the files are held in huge pages: [`Mapped::zeroed`]'s `huge` for them.
    pub(super) fn huge(&self) -> bool {
        self.shared.unit == HUGE_PAGE
    }

    /// Pages `m` too, its bytes per index `num / den`: the next of the files [`Pager::new`] was
    /// given, all zeros still (its pinned units are replaced by anonymous memory here).
    pub(super) fn add<T>(&self, m: &Mapped<T>, num: usize, den: usize) {
        let s = &self.shared;
        let bytes = m.bytes();
        let mut regions = s.regions.write().expect("pager lock");
        let file = 1u32 << regions.len();
        let mut region = Region {
            inner: Arc::clone(&m.inner),
            bytes,
            num,
            den,
            units: (0..bytes.div_ceil(s.unit))
                .map(|_| AtomicBool::new(false))
                .collect(),
            pinned: Vec::new(),
        };
        // A unit is pinned when every K-slice it holds bytes of is pinned in this file.
        let units = region.units.len();
        let mut pinned: Vec<bool> = (0..units)
            .map(|u| {
                region
                    .kslices_of(u, s.kslice, s.unit)
                    .all(|k| s.pinned.get(k).is_some_and(|&p| p && s.files[k] & file != 0))
            })
            .collect();
        let mut u = 0;
        while u < units {
            if !pinned[u] {
                u += 1;
                continue;
            }
            let run = u..(u..units).find(|&v| !pinned[v]).unwrap_or(units);
            if region
                .anonymous(run.clone(), s.unit, s.unit == HUGE_PAGE)
                .is_err()
            {
                // Left paged: the same values, only slower.
                pinned[run.clone()].iter_mut().for_each(|p| *p = false);
            } else {
                let len = (run.end * s.unit).min(bytes) - run.start * s.unit;
                let budget = s.budget.load(Relaxed);
                s.budget.store(budget.saturating_sub(len as u64), Relaxed);
                PINNED.fetch_add(len as u64, Relaxed);
            }
            u = run.end;
        }
        region.pinned = pinned;
        regions.push(region);
    }

    /// Marks the K-slices that a pass `reach` touches for the indices `range`, in every file.
    pub(super) fn mark(&self, range: Range<usize>, reach: Reach) {
        self.mark_in(range, reach, ALL_FILES);
    }

    /// [`Pager::mark`] in the files of `files` only (bit `r` for the `r`-th file added): a pass
    /// that touches only those counts only their units as resident.
    pub(super) fn mark_in(&self, range: Range<usize>, reach: Reach, files: u32) {
        let s = &self.shared;
        if range.is_empty() {
            return;
        }
        let first = range.start / s.kslice;
        let last = (range.end - 1) / s.kslice;
        for k in first..=last {
            let (side, kp) = (k / s.pairs, k % s.pairs);
            let other = 1 - side;
            match reach {
                Reach::Own => s.touch(k, files),
                Reach::Unmove => {
                    for &p in &s.near[other][kp] {
                        s.touch(other * s.pairs + p as usize, files);
                    }
                }
                Reach::Verify => {
                    s.touch(k, files);
                    for &p in &s.near[side][kp] {
                        s.touch(other * s.pairs + p as usize, files);
                    }
                }
            }
        }
        // What is resident is looked at after every mark, before the pass maps the pages it
        // marked: so the marks never take the process past the budget. (Looked at every 64
        // touches instead, the units counted ran up to 90 MB past a KRNvKNN part's 715 MB.)
        s.reclaim();
    }

    /// The order in which a pass `reach` over `units` units of `unit` indices each works through
    /// them so that the neighbourhoods it reaches stay few: by K-slice (a unit by its first
    /// index), and the K-slices of a side to move in the order that keeps fixed the king that
    /// does not move in the pass: the king pair's order (White's king, then Black's) where
    /// Black's king moves, Black's king first where White's does. Units of one K-slice keep
    /// their order.
    pub(super) fn walk(&self, units: usize, unit: usize, reach: Reach) -> Vec<u32> {
        let s = &self.shared;
        let rank = |i: usize| -> (usize, u8, u8) {
            let (side, kp) = (i / s.per_side, (i % s.per_side) / s.kslice);
            let [wk, bk] = s.squares[kp];
            // The colour of the king that moves in this pass on this side.
            let moving = match reach {
                Reach::Unmove => 1 - side,
                Reach::Verify | Reach::Own => side,
            };
            if reach != Reach::Own && moving == 0 {
                (side, bk.u8(), wk.u8())
            } else {
                (side, wk.u8(), bk.u8())
            }
        };
        let mut order: Vec<u32> = (0..units as u32).collect();
        order.sort_by_key(|&u| (rank(u as usize * unit), u));
        order
    }

    /// Bytes evicted so far, and evictions.
    pub(super) fn evicted(&self) -> (u64, u64) {
        (
            self.shared.evicted.load(Relaxed),
            self.shared.evictions.load(Relaxed),
        )
    }
}

impl Drop for Pager {
    fn drop(&mut self) {
        let (bytes, evictions) = self.evicted();
        debug!(bytes, evictions, "pager stopped");
    }
}

impl Region {
    /// Replaces the pages of units `units` (of `unit` bytes) by anonymous memory, zeroed as the
    /// fresh file is: pinned, they are never written back to the file nor unmapped.
    fn anonymous(&self, units: Range<usize>, unit: usize, huge: bool) -> std::io::Result<()> {
        let start = units.start * unit;
        let len = (units.end * unit).min(self.bytes.next_multiple_of(PAGE)) - start;
        #[cfg(target_os = "linux")]
        {
            let ptr = self.inner.map.as_ptr() as usize + start;
            // SAFETY: the range lies inside the region's map, on page boundaries, and nothing
            // has been written there (the file is fresh: the pages read as zeros, as the new
            // ones do); MAP_FIXED replaces those pages of the map in place, at the same
            // addresses, and the map's own munmap later unmaps them with the rest.
            let got = unsafe {
                libc::mmap(
                    ptr as *mut libc::c_void,
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if got == libc::MAP_FAILED {
                return Err(std::io::Error::last_os_error());
            }
            if huge {
                // SAFETY: as above; MADV_HUGEPAGE never changes contents.
                unsafe {
                    libc::madvise(ptr as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
                }
            }
            Ok(())
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (start, len, huge);
            Err(std::io::Error::other("pinning needs Linux"))
        }
    }

    /// The units of K-slice `k` (of `kslice` indices), rounded out.
    fn units_of(&self, k: usize, kslice: usize, unit: usize) -> Range<usize> {
        let start = k * kslice * self.num / self.den / unit;
        let end = ((k + 1) * kslice * self.num / self.den).div_ceil(unit);
        start..end.min(self.units.len())
    }

    /// The K-slices (of `kslice` indices) that unit `u` holds bytes of.
    fn kslices_of(&self, u: usize, kslice: usize, unit: usize) -> std::ops::RangeInclusive<usize> {
        let first = u * unit * self.den / self.num / kslice;
        let last = (((u + 1) * unit).min(self.bytes) * self.den / self.num).saturating_sub(1) / kslice;
        first..=last
    }
}

impl Shared {
    #[inline]
    fn touch(&self, k: usize, files: u32) {
        let files = files & self.files[k];
        if files == 0 {
            return;
        }
        self.last[k].store(self.clock.fetch_add(1, Relaxed), Relaxed);
        if !self.resident[k].load(Relaxed) {
            self.resident[k].store(true, Relaxed);
        }
        // Its units counted again, every time: one that a neighbour's eviction unmapped is
        // mapped again as soon as a pass touches it.
        let regions = self.regions.read().expect("pager lock");
        for (_, r) in regions.iter().enumerate().filter(|(i, _)| files & (1 << i) != 0) {
            for u in r.units_of(k, self.kslice, self.unit) {
                if !r.pinned[u] && !r.units[u].load(Relaxed) && !r.units[u].swap(true, Relaxed) {
                    self.counted.fetch_add(self.unit as u64, Relaxed);
                }
            }
        }
    }

    /// If the units marked come to more than the budget, evicts the least recently marked
    /// K-slices until they come to seven eighths of it (one thread at a time; the others wait,
    /// so that what is resident never runs far past the budget: letting them go on instead
    /// kept both cores busy but was no faster, on KRNvKNN).
    fn reclaim(&self) {
        let resident = || self.counted.load(Relaxed);
        let budget = self.budget.load(Relaxed);
        if resident() <= budget {
            return;
        }
        let _one = self.reclaiming.lock().expect("pager lock");
        if resident() <= budget {
            return;
        }
        let before = resident();
        let regions = self.regions.read().expect("pager lock");
        let mut by_age: Vec<(u64, usize)> = (0..self.last.len())
            .filter(|&k| self.resident[k].load(Relaxed))
            .map(|k| (self.last[k].load(Relaxed), k))
            .collect();
        by_age.sort_unstable();
        let mut evicted = 0u64;
        for batch in by_age.chunks(4) {
            for &(_, k) in batch {
                if !self.resident[k].swap(false, Relaxed) {
                    continue;
                }
                // Counted only when it unmapped something (a pinned K-slice has at most its
                // edges to unmap).
                let unmapped = regions.iter().fold(false, |any, r| self.evict(r, k) | any);
                evicted += u64::from(unmapped);
            }
            if resident() <= budget / 8 * 7 {
                break;
            }
        }
        // And what was mapped uncounted: gone too, so that the files' pages held stay within
        // what is counted (at most until the next look). A read fault maps the 64 KiB around
        // it, over units of 4 KiB; and in any unit, an index reached outside the K-slices
        // marked maps its unit uncounted.
        for r in regions.iter() {
            self.sweep(r);
        }
        EVICTIONS.fetch_add(evicted, Relaxed);
        let evictions = self.evictions.fetch_add(evicted, Relaxed) + evicted;
        let mut said = self.said.lock().expect("pager lock");
        if said.elapsed() >= Duration::from_secs(5) {
            *said = std::time::Instant::now();
            debug!(
                budget,
                before,
                after = resident(),
                pinned = PINNED.load(Relaxed),
                evictions,
                "paged state"
            );
        }
    }

    /// Evicts K-slice `k` (no longer resident) of region `r` (see the module comment): its
    /// units that hold no bytes of a resident K-slice unmapped, each run of consecutive units
    /// by one call (a call a 4 KiB unit made the kernel's work, the calls and the flushes of
    /// the TLB on every core, a third of a paged compact build's time).
    /// True if it unmapped a unit.
    fn evict(&self, r: &Region, k: usize) -> bool {
        let mut run: Option<Range<usize>> = None;
        let mut any = false;
        for u in r.units_of(k, self.kslice, self.unit) {
            let shared = |o: usize| o != k && self.resident.get(o).is_some_and(|f| f.load(Relaxed));
            if r.pinned[u]
                || r.kslices_of(u, self.kslice, self.unit).any(shared)
                || !r.units[u].swap(false, Relaxed)
            {
                if let Some(units) = run.take() {
                    self.unmap(r, units);
                }
                continue;
            }
            self.counted.fetch_sub(self.unit as u64, Relaxed);
            any = true;
            match &mut run {
                Some(units) => units.end = u + 1,
                None => run = Some(u..u + 1),
            }
        }
        if let Some(units) = run {
            self.unmap(r, units);
        }
        any
    }

    /// Unmaps every unit of region `r` not counted as resident (nor pinned): pages the passes
    /// mapped that no mark counted (the 15 pages a read fault maps around its own, an index
    /// reached outside the K-slices marked), which evictions alone never unmap. Measured on
    /// `solve KQRvKR --memory 48MiB --threads 2` (a window of 5.1 MiB): the files' mapped pages
    /// peaked at 27-30 MB without it, 7.4 MB with it, and the process at 50.8-54.2 MB (past the
    /// budget) against 35.9-45.0 MB, in the same time.
    fn sweep(&self, r: &Region) {
        let mut run: Option<Range<usize>> = None;
        for u in 0..r.units.len() {
            if r.pinned[u] || r.units[u].load(Relaxed) {
                if let Some(units) = run.take() {
                    self.unmap_quietly(r, &units);
                }
                continue;
            }
            match &mut run {
                Some(units) => units.end = u + 1,
                None => run = Some(u..u + 1),
            }
        }
        if let Some(units) = run {
            self.unmap_quietly(r, &units);
        }
    }

    /// Unmaps the units `units` of region `r` (see [`Shared::evict`]).
    fn unmap(&self, r: &Region, units: Range<usize>) {
        let len = self.unmap_quietly(r, &units);
        self.evicted.fetch_add(len as u64, Relaxed);
    }

    /// [`Shared::unmap`] without counting the bytes as evicted; the range's bytes.
    fn unmap_quietly(&self, r: &Region, units: &Range<usize>) -> usize {
        let start = units.start * self.unit;
        let len = (units.end * self.unit).min(r.bytes.next_multiple_of(PAGE)) - start;
        #[cfg(target_os = "linux")]
        let ptr = r.inner.map.as_ptr() as usize;
        #[cfg(target_os = "linux")]
        // SAFETY: the range lies inside the region's map (its last unit cut at its last page),
        // which stays mapped while the region holds it. MADV_DONTNEED on a shared file mapping
        // only unmaps the pages: their contents stay in the file (and in the page cache until
        // the kernel writes them back and drops them), and the next access maps them again.
        unsafe {
            libc::madvise((ptr + start) as *mut libc::c_void, len, libc::MADV_DONTNEED);
        }
        len
    }
}

/// The king pairs (fields) one step of the king of colour `c` (0 White, 1 Black) away from the
/// pair `[wk, bk]`, in table form, and the pair itself; no duplicates.
/// For a pawnless slice, the king pairs each king pair's positions reach by one move of the
/// side to move's king (`[c][kp]` for the king of colour `c`, White 0), itself included (the
/// moves of the other men), after the symmetry that brings the kings into table form: the
/// K-slices, on the other side to move, that the verification of a K-slice reads.
pub(super) fn pawnless_near_pairs() -> [Vec<Vec<u16>>; 2] {
    [0, 1].map(|c| {
        (0..PAWNLESS_KING_PAIRS)
            .map(|kp| near_pairs(true, KING_PAIRS_PAWNLESS[kp], c))
            .collect()
    })
}

fn near_pairs(pawnless: bool, [wk, bk]: [Square; 2], c: usize) -> Vec<u16> {
    let field = |w: Square, b: Square| -> Option<u16> {
        if pawnless {
            let t = &SYMMETRY_TABLE[pawnless_symmetry(w, b)];
            king_pair_field(true, t[w.index()], t[b.index()]).map(|f| f as u16)
        } else {
            king_pair_field(false, w, b).map(|f| f as u16)
        }
    };
    let mut out: Vec<u16> = field(wk, bk).into_iter().collect();
    let from = if c == 0 { wk } else { bk };
    for df in -1i8..=1 {
        for dr in -1i8..=1 {
            let (f, r) = (from.file() as i8 + df, from.rank() as i8 + dr);
            if (df, dr) == (0, 0) || !(0..8).contains(&f) || !(0..8).contains(&r) {
                continue;
            }
            let to = Square::from_coords(f as u8, r as u8);
            let pair = if c == 0 { field(to, bk) } else { field(wk, to) };
            if let Some(p) = pair {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kilobytes resident of this process's file mappings in `range` (the pinned units of a
    /// paged file are anonymous memory, mapped over it: not counted here).
    #[cfg(target_os = "linux")]
    fn file_mapped_kib(range: Range<usize>) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let (mut inside, mut kib) = (false, 0);
        for line in smaps.lines() {
            let mut fields = line.split_whitespace();
            let span = fields.next().and_then(|r| r.split_once('-'));
            if let Some((a, b)) = span.filter(|(a, b)| !a.is_empty() && a.len() == b.len()) {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                    // A file's mapping names its path (here "... (deleted)") after the inode.
                    inside = a < range.end && range.start < b && fields.nth(4).is_some();
                    continue;
                }
            }
            if inside {
                if let Some(k) = line.strip_prefix("Rss:") {
                    kib += k.trim().trim_end_matches(" kB").parse::<u64>().unwrap();
                }
            }
        }
        kib
    }

    /// Pages the passes map with no mark counting them (a read fault maps the pages around
    /// its own; an index may be reached outside the K-slices marked) are unmapped at the next
    /// reclaim, with the K-slices evicted: what the files hold mapped stays within what is
    /// counted. (Evictions alone never unmapped them: KQRvKR within a window of 5.1 MiB held
    /// 30 MB of its files mapped.)
    #[cfg(target_os = "linux")]
    #[test]
    fn pages_mapped_without_a_mark_are_unmapped_at_the_next_reclaim() {
        let ix = SliceIndexer::new(zermelo_chess::SliceKey::pawnless("KRvKN".parse().unwrap()));
        let n = ix.size() as usize;
        let dir = tempfile::tempdir().unwrap();
        let paging = Paging {
            dir: dir.path().to_path_buf(),
            resident: 64 * PAGE as u64,
        };
        SMALL_WINDOW.store(true, Relaxed);
        let pager = Pager::new(&ix, &paging, &[(1, 1)], None);
        // SAFETY: zero is a valid u8, at any alignment.
        let mut m = unsafe { Mapped::<u8>::zeroed(dir.path(), "sweep", n, pager.huge()) }.unwrap();
        pager.add(&m, 1, 1);
        let at = m.inner.map.as_ptr() as usize;
        let mapped = || file_mapped_kib(at..at + n) * 1024;
        let kslice = pager.shared.kslice;
        // Every K-slice marked in turn, past the budget: reclaims, and most evicted.
        for k in 0..n / kslice {
            pager.mark(k * kslice..(k + 1) * kslice, Reach::Own);
        }
        // Then every page written with no mark: the whole file mapped (but its pinned units,
        // anonymous memory now), the K-slices evicted included.
        for page in m.chunks_mut(PAGE) {
            page[0] = 1;
        }
        let pinned = paging.resident;
        assert!(
            mapped() + pinned >= n as u64 / 10 * 9,
            "the pages were not mapped: {} bytes of {n}",
            mapped()
        );
        // A few K-slices marked again, past the budget: a reclaim, which unmaps what no mark
        // counts.
        for k in 0..256 {
            pager.mark(k * kslice..(k + 1) * kslice, Reach::Own);
        }
        let counted = pager.shared.counted.load(Relaxed);
        assert!(
            counted < n as u64 / 4,
            "hardly anything evicted: {counted} of {n} bytes counted"
        );
        let held = mapped();
        assert!(held <= counted, "{held} bytes mapped, {counted} counted");
        // The values stayed: an unmapped page of a shared file map keeps its contents.
        assert!(m.chunks(PAGE).all(|page| page[0] == 1));
        SMALL_WINDOW.store(false, Relaxed);
    }

    /// Every king pair's neighbourhood holds itself, and is symmetric: a pair one step of a
    /// king from another is reached back by a step of the same king (a king step is undone by
    /// a king step, and the symmetries map steps to steps).
    #[test]
    fn neighbourhoods_hold_themselves_and_go_both_ways() {
        for pawnless in [true, false] {
            let (pairs, squares): (usize, &[[Square; 2]]) = if pawnless {
                (PAWNLESS_KING_PAIRS, &KING_PAIRS_PAWNLESS)
            } else {
                (PAWNFUL_KING_PAIRS, &KING_PAIRS_PAWNFUL)
            };
            for c in 0..2 {
                let near: Vec<Vec<u16>> = (0..pairs)
                    .map(|kp| near_pairs(pawnless, squares[kp], c))
                    .collect();
                for (kp, n) in near.iter().enumerate() {
                    assert_eq!(n[0] as usize, kp);
                    assert!(n.len() <= 9, "{pawnless} {c} {kp}: {n:?}");
                    for &p in n {
                        assert!(
                            near[p as usize].contains(&(kp as u16)),
                            "{pawnless} {c} {kp} -> {p}"
                        );
                    }
                }
            }
        }
    }
}
