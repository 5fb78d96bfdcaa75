//! The single-node build: the coordinator's plan, solved slice by slice with the worker's solver
//! in one process, each material written to one table file.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tracing::{info, info_span, warn};
use zermelo_chess::index::{SliceIndexer, INDEX_LAYOUT};
use zermelo_chess::slice::SliceKey;
use zermelo_chess::Material;
use zermelo_coordinator::plan::{plan, MaterialPlan, Plan};
use zermelo_storage::{Metric, StorageError, Table, TableMeta, TableSummary, TableWriter, WriteOptions};
use zermelo_worker::solver::par::{for_each_chunk, for_each_chunk_lending, Lent};
use zermelo_worker::solver::{
    bits_paged_need, paged_need, slice_state_bytes, thread_bytes, Paging, MIN_RESIDENT_KSLICES,
    PAGED_BYTES_PER_INDEX, SPILL_FROM,
};
use zermelo_worker::tables::{SliceMap, SuccessorCache, TableDir, TableError, READER_BYTES};
use zermelo_worker::waves::{for_each_slice, one_per_thread};
use zermelo_worker::{
    bits_solvable, bits_state_bytes, init_together, solve_in_parts, solve_slice_bits, solve_slice_resumable,
    solve_slices_into, splittable, Checkpoints, Sink, SolveError,
};

use crate::memory::{free_disk_bytes, human_bytes};

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Solve(#[from] SolveError),
    #[error(transparent)]
    Tables(#[from] TableError),
    #[error(transparent)]
    Storage(#[from] zermelo_storage::StorageError),
    #[error("cannot create the tables directory {path}: {source}")]
    CreateDir { path: String, source: std::io::Error },
    #[error("cannot use the build folder of {material} ({dir}): {source}")]
    Scratch {
        material: Material,
        dir: String,
        source: std::io::Error,
    },
    #[error(
        "building {material} needs {}; the memory budget is {}: raise it with --memory, build with fewer --threads, or build on a machine with more memory",
        state_need(.held, .paged.as_ref()), human_bytes(*.budget)
    )]
    OverBudget {
        material: Material,
        /// The least it needs with its state in memory.
        held: MemoryNeed,
        /// The least it needs with its state paged ([`Fit::paged`]), for a material without
        /// pawns.
        paged: Option<MemoryNeed>,
        budget: u64,
    },
    #[error(
        "building {material} needs about {} of disk in {dir} ({} of table files, and up to {} of checkpoints, logs of plies and paged state at once while building); {} is free there: free some space, or point --tables at a larger disk",
        human_bytes(.need.total()), human_bytes(.need.tables), human_bytes(.need.scratch), human_bytes(*.free)
    )]
    OverDisk {
        /// The targets named, or the largest material to build.
        material: String,
        dir: String,
        need: DiskNeed,
        /// Free bytes there, with what the build folders of the materials to build hold already
        /// (a resumed build takes those up).
        free: u64,
    },
}

/// The disk a build needs, estimated ([`disk_need`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskNeed {
    /// The table files to write ([`TABLE_BYTES_PER_POSITION`]).
    pub tables: u64,
    /// At most at once in a build folder: a log of plies and checkpoints of the largest slice
    /// ([`SCRATCH_BYTES_PER_POSITION`]) and a paged state's files, deleted as each table is
    /// written.
    pub scratch: u64,
}

impl DiskNeed {
    pub fn total(&self) -> u64 {
        self.tables + self.scratch
    }
}

/// [`DiskNeed`] of building materials of `(positions, positions of the largest slice, bytes of
/// paged state)`, one after the other.
fn disk_need(to_build: impl Iterator<Item = (u64, u64, u64)>) -> DiskNeed {
    let (mut positions, mut scratch) = (0u64, 0u64);
    for (p, largest, paged) in to_build {
        positions += p;
        scratch = scratch.max((largest as f64 * SCRATCH_BYTES_PER_POSITION) as u64 + paged);
    }
    DiskNeed {
        tables: (positions as f64 * TABLE_BYTES_PER_POSITION) as u64,
        scratch,
    }
}

/// Bytes of a paged state's files for a material built as `fit` says, its largest slice of
/// `largest` positions.
fn paged_bytes(fit: &Fit, largest: u64) -> u64 {
    match fit.paged {
        Some(_) if fit.compact => bits_state_bytes(largest),
        Some(_) => (largest as f64 * PAGED_BYTES_PER_INDEX) as u64,
        None => 0,
    }
}

/// The bytes free for building `materials` in `dir`: free on its disk, and what their build
/// folders hold already (a resumed build takes it up); `None` if the disk cannot be asked.
fn free_for_build<'a>(dir: &Path, materials: impl Iterator<Item = &'a Material>) -> Option<u64> {
    let own: u64 = materials.map(|m| folder_bytes(&build_folder(dir, m))).sum();
    free_disk_bytes(dir).map(|f| f + own)
}

/// Bytes of the files under `path` (0 if there is none).
fn folder_bytes(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => folder_bytes(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

/// What a build needs, for [`BuildError::OverBudget`]: in memory, and paged if it can be.
fn state_need(held: &MemoryNeed, paged: Option<&MemoryNeed>) -> String {
    let in_memory = format!(
        "about {} of memory (a byte a position of solver state for {} slice(s) of up to {} positions at once, and {} of buffers a thread)",
        human_bytes(held.bytes),
        held.at_once,
        held.largest,
        human_bytes(held.per_thread)
    );
    match paged {
        None => in_memory,
        Some(p) => format!(
            "{in_memory}, or at least {} with its state paged through the build folder ({MIN_RESIDENT_KSLICES} of its K-slices in memory, and {} of buffers a thread)",
            human_bytes(p.bytes),
            human_bytes(p.per_thread)
        ),
    }
}

/// Bytes of the table writer's blocks, per thread.
const WRITER_BYTES: u64 = 1 << 20;
/// The most memory a build gives to its cache of whole successor slices (see [`SuccessorCache`]),
/// when the budget leaves that much; a slice of up to a quarter of it is read whole. A material
/// with pawns reads the same successor slices again and again, and one read a block at a time
/// decompressed a block for nearly every value (its promotions gathered from all over a slice):
/// with 64 MiB, KPPPvK (waves of up to 288 slices solved together) took 309 s on 2 threads and
/// KNPvKP (promotions into slices of 59 MB) 140 s; with 1 GiB, 23 s and 36 s, the same bytes.
/// KRPvKR is as fast either way.
pub(crate) const SLICE_CACHE_BYTES: u64 = 1 << 30;

/// What building one material on `threads` threads holds in memory at its peak, in bytes, with
/// `by_slice` set when its slices may be solved one per thread at once, `changed_bits` when
/// they are solved with the bitmaps of changed positions ([`solve_slice_into`]), and `together`
/// when the slices of a wave whose pawns promote are solved together ([`solve_slices_into`]):
/// - the solver's state ([`slice_state_bytes`]) for each slice solved at once: one, or with
///   pawns and `by_slice` up to one per thread, or with `together` every slice of the largest
///   such wave;
/// - per thread, the solver's buffers ([`thread_bytes`]), the table writer's blocks
///   ([`WRITER_BYTES`]) and the cache of blocks it reads successor tables through
///   ([`READER_BYTES`]).
///
/// No table's values are held whole: the tables a build reads, and the slices of its own
/// material already solved (a pawn push leads into another slice), are read from their files a
/// block at a time, or whole for small slices in a cache of what the budget leaves over (up to
/// [`SLICE_CACHE_BYTES`], not counted here). The process's own fixed share (code, thread
/// stacks: about 32 MiB) is not counted.
pub fn material_memory(
    mp: &MaterialPlan,
    threads: usize,
    by_slice: bool,
    changed_bits: bool,
    together: bool,
) -> MemoryNeed {
    let size = |s: &zermelo_chess::SliceKey| SliceIndexer::new(*s).size();
    let largest = mp.slices().map(size).max().unwrap_or(0);
    let mut at_once = if by_slice && mp.material.has_pawns() {
        (threads.max(1) as u64).min(mp.slice_count() as u64)
    } else {
        1
    };
    if together {
        let waves = mp.waves.iter().filter(|w| init_together(w));
        at_once = at_once.max(waves.map(|w| w.len() as u64).max().unwrap_or(0));
    }
    let bits = changed_bits && mp.material.has_pawns();
    let per_thread = thread_bytes(largest, bits) + WRITER_BYTES + READER_BYTES;
    MemoryNeed {
        bytes: at_once * slice_state_bytes(largest, mp.material.has_pawns())
            + threads.max(1) as u64 * per_thread,
        largest,
        at_once,
        per_thread,
    }
}

/// See [`material_memory`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryNeed {
    pub bytes: u64,
    /// Positions of the largest slice.
    pub largest: u64,
    /// Slices solved at once.
    pub at_once: u64,
    /// Bytes of buffers per thread.
    pub per_thread: u64,
}

/// What happened to one material.
#[derive(Debug, Clone)]
pub struct MaterialOutcome {
    pub material: Material,
    pub skipped: bool,
    pub positions: u64,
    pub seconds: f64,
}

/// Reports progress: called with (positions done, positions in the plan, current material).
pub type Progress<'a> = &'a (dyn Fn(u64, u64, &Material) + Sync);

/// How a build runs: its threads, its memory budget, how often a large slice is checkpointed,
/// and the flag that stops it.
#[derive(Clone, Copy, Debug)]
pub struct BuildOptions<'a> {
    /// Solver threads (the tables do not depend on it).
    pub threads: usize,
    /// Memory budget in bytes (see [`material_memory`]).
    pub memory: u64,
    /// A slice solved with checkpoints (every pawnless slice, and the slices with pawns of
    /// [`SPILL_FROM`] positions or more) is checkpointed at the first ply boundary this long
    /// after the last checkpoint ([`Checkpoints::every`]).
    pub checkpoint_every: Duration,
    /// When set, the build stops at the next safe point: a slice with checkpoints after writing
    /// one, a smaller slice abandoned (its material's solved slices are kept), and returns
    /// [`SolveError::Interrupted`]. The same build run again resumes from there.
    pub stop: Option<&'a AtomicBool>,
    /// When more than 1, each pawnless slice is solved as this many parts that meet only
    /// through what crosses between them ([`solve_in_parts`], threads of this process each
    /// holding the state of its part and a copy of the won bits it reads of the others: up to
    /// an eighth of a byte a position a part more than the budget counts), and what crossed is
    /// logged; no checkpoints, and a slice whose state must be paged is not solved in parts. The values are the same: this checks and measures the
    /// exchange a slice shared by workers uses.
    pub parts: usize,
    /// Pawnless slices by lines are solved by the byte solver (a byte a position and a bit)
    /// whenever that fits the budget, not by the compact solver ([`Fit::compact`], three bits a
    /// position, faster), which they otherwise are whenever it fits. For comparing the two.
    pub byte_solver: bool,
}

/// How often a build checkpoints a large slice by default.
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(300);

impl BuildOptions<'_> {
    /// `threads` threads, `memory` bytes, checkpoints every [`CHECKPOINT_EVERY`], no stop flag.
    pub fn new(threads: usize, memory: u64) -> BuildOptions<'static> {
        BuildOptions {
            threads,
            memory,
            checkpoint_every: CHECKPOINT_EVERY,
            stop: None,
            parts: 1,
            byte_solver: false,
        }
    }

    /// Whether a pawnless slice by lines is solved by the byte solver when it fits the budget:
    /// when asked ([`BuildOptions::byte_solver`]), and in parts, which are the byte solver's.
    fn bytes_first(&self) -> bool {
        self.byte_solver || self.parts > 1
    }

    fn stopped(&self) -> bool {
        self.stop.is_some_and(|s| s.load(Relaxed))
    }
}

/// Builds the tables of `targets` and of every material they convert into, skipping tables that
/// are already complete and valid in `dir`. Before any work, every material to build is checked
/// against the memory budget `memory` (bytes, see [`material_memory`]): its slices are solved
/// one per thread when that fits, else one at a time with every thread; a material that does
/// not fit even so is refused.
pub fn build(
    targets: &[Material],
    dir: &Path,
    threads: usize,
    memory: u64,
    progress: Progress<'_>,
) -> Result<Vec<MaterialOutcome>, BuildError> {
    build_in(
        targets,
        dir,
        &[],
        &BuildOptions::new(threads, memory),
        progress,
        None,
    )
}

/// [`build`] into `dir` as `options` say, reusing the complete tables found in `more`
/// (searched after `dir`): a table is written to `dir` only when no directory has it complete.
///
/// A material is built in a folder of its own in `dir` (hidden, [`build_folder`]), locked
/// while a build uses it: its solved slices (with pawns) and the checkpoints of its large
/// slices wait there, and a build of the same material run again after a stop, a kill or a
/// power cut takes them up (each checked first: a solved slice by its file hash, a checkpoint
/// by its own) instead of solving them again. The folder is removed once the table is written.
///
/// With `keep_parts`, the folders of solved slices of the materials with pawns are handed over
/// there instead of deleted once their tables are written (the caller deletes them when it
/// likes: a benchmark, so that the next thing it times does not pay for the deletion, see
/// [`crate::bench`]).
pub fn build_in(
    targets: &[Material],
    dir: &Path,
    more: &[PathBuf],
    options: &BuildOptions<'_>,
    progress: Progress<'_>,
    mut keep_parts: Option<&mut Vec<tempfile::TempDir>>,
) -> Result<Vec<MaterialOutcome>, BuildError> {
    let (threads, memory) = (options.threads, options.memory);
    std::fs::create_dir_all(dir).map_err(|source| BuildError::CreateDir {
        path: dir.display().to_string(),
        source,
    })?;
    limit_arenas(threads);
    let tables = TableDir::new(dir).with_more(more.to_vec()).pread();
    let plan: Plan = plan(targets);
    refuse_packed(&tables, &plan)?;
    let complete = complete_tables(&tables, &plan, threads);
    // Per material: how its slices are solved, and the bytes of its cache of whole successor
    // slices (what the budget leaves, up to SLICE_CACHE_BYTES).
    let mut how = Vec::new();
    let mut to_build = Vec::new();
    for (mp, &complete) in plan.materials.iter().zip(&complete) {
        if complete {
            how.push((Fit::default(), 0));
            continue;
        }
        let (way, need) = fit(mp, threads, memory, options.bytes_first());
        if need.bytes > memory {
            return Err(BuildError::OverBudget {
                material: mp.material,
                held: held_need(mp, threads),
                paged: [true, false]
                    .into_iter()
                    .filter_map(|compact| paged_memory(mp, threads, compact))
                    .map(|p| p.need)
                    .min_by_key(|n| n.bytes),
                budget: memory,
            });
        }
        how.push((way, (memory - need.bytes).min(SLICE_CACHE_BYTES)));
        to_build.push((mp.positions, need.largest, paged_bytes(&way, need.largest)));
    }
    // The disk, checked as the memory is. The build folders' bytes are the build's own (a
    // resumed build takes them up), so they count as free.
    let disk = disk_need(to_build.into_iter());
    let building = plan.materials.iter().zip(&complete).filter(|(_, &c)| !c);
    if let Some(free) = free_for_build(dir, building.map(|(mp, _)| &mp.material)) {
        if disk.total() > free {
            return Err(BuildError::OverDisk {
                material: targets
                    .iter()
                    .map(|m| m.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                dir: dir.display().to_string(),
                need: disk,
                free,
            });
        }
    }
    let total = plan.positions();
    let mut done = 0u64;
    let mut outcomes = Vec::new();
    for ((mp, &complete), &(fit, cache_bytes)) in plan.materials.iter().zip(&complete).zip(&how) {
        let start = Instant::now();
        let _span = info_span!("material", material = %mp.material).entered();
        if options.stopped() {
            return Err(SolveError::Interrupted.into());
        }
        let folder = if complete {
            info!(positions = mp.positions, "table complete and valid, skipped");
            None
        } else {
            let folder = BuildFolder::open(tables.dir(), &mp.material, &|| options.stopped())?;
            // Another build may have written the table while this one waited for its folder.
            tables.forget(&mp.material);
            if is_complete(&tables, mp) {
                folder.discard();
                info!(
                    positions = mp.positions,
                    "table written meanwhile by another build, skipped"
                );
                None
            } else {
                Some(folder)
            }
        };
        let Some(folder) = folder else {
            done += mp.positions;
            progress(done, total, &mp.material);
            outcomes.push(MaterialOutcome {
                material: mp.material,
                skipped: true,
                positions: mp.positions,
                seconds: 0.0,
            });
            continue;
        };
        info!(
            slices = mp.slice_count(),
            positions = mp.positions,
            by_slice = fit.by_slice,
            changed_bits = fit.changed_bits,
            together = fit.together,
            "solving"
        );
        progress(done, total, &mp.material);
        let (summary, parts) = solve_material(&tables, mp, folder, options, fit, cache_bytes, &|d| {
            progress(done + d, total, &mp.material)
        })?;
        if let Some(kept) = keep_parts.as_deref_mut() {
            kept.push(parts);
        }
        tables.forget(&mp.material);
        done += mp.positions;
        progress(done, total, &mp.material);
        let seconds = start.elapsed().as_secs_f64();
        info!(
            positions = mp.positions,
            bytes = summary.bytes,
            seconds,
            positions_per_second = (mp.positions as f64 / seconds.max(1e-9)) as u64,
            "table written"
        );
        outcomes.push(MaterialOutcome {
            material: mp.material,
            skipped: false,
            positions: mp.positions,
            seconds,
        });
    }
    Ok(outcomes)
}

/// How a material's slices are solved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Fit {
    /// One slice per thread at once (with pawns), else one at a time with every thread.
    by_slice: bool,
    /// With each thread's bitmap of changed positions ([`solve_slice_into`]).
    changed_bits: bool,
    /// The slices of a wave whose pawns promote inited together ([`solve_slices_into`]).
    together: bool,
    /// A pawnless slice too large for the budget: its state paged through files of the build
    /// folder ([`Paging`]), at most this many bytes of it resident.
    paged: Option<u64>,
    /// A pawnless slice solved by the compact solver ([`solve_slice_bits`]): its state three
    /// bits a position (in memory, or with `paged`, its bitmaps paged).
    compact: bool,
}

/// How a material is built within `memory` bytes on `threads` threads, with what that needs:
/// the first of these ways that fits (else the one that needs the least, more than `memory`).
/// In memory: a pawnless table by lines by the compact solver (the fastest, and the least
/// memory); its slices one per thread at once with the bitmaps of changed positions and its
/// promoting waves together, else without the waves together, else one at a time with the
/// bitmaps, else one at a time without. Then a pawnless table with its state paged: by the
/// compact solver (by lines), else by the byte solver. With `bytes_first`, the byte solver
/// comes before the compact solver, in memory and paged.
fn fit(mp: &MaterialPlan, threads: usize, memory: u64, bytes_first: bool) -> (Fit, MemoryNeed) {
    let compact = compact_memory(mp, threads).map(|n| {
        let fit = Fit {
            compact: true,
            ..Fit::default()
        };
        (fit, n)
    });
    let bytes = WAYS.map(|(by_slice, changed_bits, together)| {
        let fit = Fit {
            by_slice,
            changed_bits,
            together,
            paged: None,
            compact: false,
        };
        (
            fit,
            material_memory(mp, threads, by_slice, changed_bits, together),
        )
    });
    // Paged: the budget less what stays in memory (and less the cache of whole successor
    // slices the build takes of what the budget leaves) is what of the state is resident, at
    // least MIN_RESIDENT_KSLICES K-slices.
    let paged = |p: PagedNeed, compact: bool| {
        let cache = memory.saturating_sub(p.need.bytes).min(SLICE_CACHE_BYTES);
        let fit = Fit {
            paged: Some(memory.saturating_sub(p.fixed).saturating_sub(cache)),
            compact,
            ..Fit::default()
        };
        (fit, p.need)
    };
    let compact_paged = paged_memory(mp, threads, true).map(|p| paged(p, true));
    let bytes_paged = paged_memory(mp, threads, false).map(|p| paged(p, false));
    let ways: Vec<(Fit, MemoryNeed)> = if bytes_first {
        bytes
            .into_iter()
            .chain(compact)
            .chain(bytes_paged)
            .chain(compact_paged)
            .collect()
    } else {
        compact
            .into_iter()
            .chain(bytes)
            .chain(compact_paged)
            .chain(bytes_paged)
            .collect()
    };
    let least = *ways.iter().min_by_key(|(_, n)| n.bytes).expect("a way");
    ways.into_iter().find(|(_, n)| n.bytes <= memory).unwrap_or(least)
}

/// The ways of solving a material in memory, from the fastest to the one that needs the least:
/// `(by_slice, changed_bits, together)` of [`material_memory`].
const WAYS: [(bool, bool, bool); 4] = [
    (true, true, true),
    (true, true, false),
    (false, true, false),
    (false, false, false),
];

/// The least building `mp` needs with its state in memory (the last of [`WAYS`]).
fn held_need(mp: &MaterialPlan, threads: usize) -> MemoryNeed {
    let (by_slice, changed_bits, together) = WAYS[WAYS.len() - 1];
    material_memory(mp, threads, by_slice, changed_bits, together)
}

/// What building a pawnless material with the compact solver needs ([`Fit::compact`]): its
/// three bits a position and each thread's buffers; `None` if it cannot ([`bits_solvable`]).
fn compact_memory(mp: &MaterialPlan, threads: usize) -> Option<MemoryNeed> {
    if mp.material.has_pawns() {
        return None;
    }
    let key = SliceKey::pawnless(mp.material);
    if !bits_solvable(&key) {
        return None;
    }
    let n = SliceIndexer::new(key).size();
    let per_thread = thread_bytes(n, false) + WRITER_BYTES + READER_BYTES;
    Some(MemoryNeed {
        bytes: bits_state_bytes(n) + threads.max(1) as u64 * per_thread,
        largest: n,
        at_once: 1,
        per_thread,
    })
}

/// What building a pawnless material with its state paged needs (see [`Fit::paged`]).
#[derive(Clone, Copy)]
struct PagedNeed {
    /// The least it needs: [`PagedNeed::fixed`] and [`MIN_RESIDENT_KSLICES`] K-slices of state.
    need: MemoryNeed,
    /// What stays in memory whatever the budget: each thread's buffers, and for the byte solver
    /// the slice's summaries (a byte per 64 positions).
    fixed: u64,
}

/// See [`PagedNeed`]: by the compact solver if `compact`, else the byte solver's; `None` for a
/// material with pawns, or by the compact solver one it cannot solve ([`bits_solvable`]).
fn paged_memory(mp: &MaterialPlan, threads: usize, compact: bool) -> Option<PagedNeed> {
    if mp.material.has_pawns() {
        return None;
    }
    let key = SliceKey::pawnless(mp.material);
    let n = SliceIndexer::new(key).size();
    let caller = WRITER_BYTES + READER_BYTES;
    let need = match compact {
        true if !bits_solvable(&key) => return None,
        true => bits_paged_need(n, threads, caller),
        false => paged_need(n, threads, caller),
    };
    Some(PagedNeed {
        need: MemoryNeed {
            bytes: need.least,
            largest: n,
            at_once: 1,
            per_thread: thread_bytes(n, false) + caller,
        },
        fixed: need.fixed,
    })
}

/// Positions a thread solves per second, for [`plan_build`]'s estimate: measured on this
/// project's reference machine (2 cores) building 5-man tables alone (KQRvKR 18.3 M, KRPvKR
/// 19.4 M on one thread, 34.0 M and 37.9 M on two; docs/performance.md).
pub const POSITIONS_PER_THREAD_SECOND: f64 = 18.0e6;
/// The same for materials whose largest slice is over [`LARGE_SLICE`] positions (256 M; the
/// largest measured at the rate above is KQRvKR's 242 M), whose state outgrows the caches:
/// KRNvKNN (7.6 G positions in one slice) ran at 15.0 M a second on 2 threads.
pub const LARGE_POSITIONS_PER_THREAD_SECOND: f64 = 7.5e6;
/// See [`LARGE_POSITIONS_PER_THREAD_SECOND`].
pub const LARGE_SLICE: u64 = 1 << 28;
/// How much longer a material takes with its state paged, for [`plan_build`]'s estimate:
/// KRNvKNN within `--memory 2GiB` took 1.71 times its build in memory (docs/performance.md).
pub const PAGED_SLOWDOWN: f64 = 1.7;
/// The same for the compact solver's bitmaps paged, most of them pinned: KRNvKNN within
/// `--memory 2GiB`, 1.14 times, within 1 GiB 1.24 times.
pub const COMPACT_PAGED_SLOWDOWN: f64 = 1.25;
/// Bytes of table file per position, for [`plan_build`]'s estimate: KQRvKR's and KRPvKR's
/// tables at the default compression (0.27 and 0.33).
pub const TABLE_BYTES_PER_POSITION: f64 = 0.33;

/// Bytes of a build folder per position of the largest slice solved with checkpoints, for
/// [`plan_build`]'s estimate: KRNvKNN's log of plies (2.52 GB, 0.33 a position) and a checkpoint
/// of its state (925 MB at ply 137, 0.12 a position; two at once while one replaces the other).
pub const SCRATCH_BYTES_PER_POSITION: f64 = 0.33 + 2.0 * 0.12;

/// One material of [`BuildPlan`].
#[derive(Clone, Debug, Serialize)]
pub struct PlannedMaterial {
    pub material: String,
    pub slices: usize,
    pub positions: u64,
    /// Positions of its largest slice.
    pub largest_slice: u64,
    /// Its table is already complete and valid: it is not built again.
    pub complete: bool,
    /// Peak memory of building it ([`material_memory`]), bytes; 0 when complete.
    pub memory_bytes: u64,
    /// Slices solved at once.
    pub slices_at_once: u64,
    /// Its state does not fit the budget and is paged through the build folder: this many
    /// bytes of files there ([`PAGED_BYTES_PER_INDEX`] a position, or the compact solver's
    /// three bits); 0 when in memory.
    pub paged_bytes: u64,
    /// It is solved by the compact solver (three bits a position, in memory or paged; see
    /// [`solve_slice_bits`]).
    pub compact: bool,
    /// It fits the budget.
    pub fits: bool,
}

/// What `zermelo solve` would build, with estimates, without building it (`--plan-only`).
#[derive(Clone, Debug, Serialize)]
pub struct BuildPlan {
    /// Leaf-first: every material after those it converts into.
    pub materials: Vec<PlannedMaterial>,
    /// Positions of the materials to build.
    pub positions: u64,
    /// The largest memory need of a material to build (materials are built one at a time).
    pub memory_bytes: u64,
    /// The budget it was checked against.
    pub budget_bytes: u64,
    /// Every material to build fits the budget, and the build fits the disk ([`disk_fits`]).
    ///
    /// [`disk_fits`]: BuildPlan::disk_fits
    pub fits: bool,
    /// Estimated bytes of the table files to write ([`TABLE_BYTES_PER_POSITION`]).
    pub disk_bytes: u64,
    /// Estimated bytes the build's folders hold at most besides the tables: a log of plies and
    /// checkpoints of the largest slice ([`SCRATCH_BYTES_PER_POSITION`]), and a paged state's
    /// files ([`PlannedMaterial::paged_bytes`]), deleted as each table is written.
    pub scratch_bytes: u64,
    /// Bytes free on the disk of the tables directory, with what the build folders of the
    /// materials to build hold already (a resumed build takes them up); `None` if it cannot be
    /// asked.
    pub free_disk_bytes: Option<u64>,
    /// The table files and the scratch at its largest fit in [`BuildPlan::free_disk_bytes`]
    /// (true when that is unknown): `solve` refuses a build that does not.
    pub disk_fits: bool,
    /// Estimated seconds ([`POSITIONS_PER_THREAD_SECOND`] a thread, or
    /// [`LARGE_POSITIONS_PER_THREAD_SECOND`] for a material of large slices).
    pub seconds: f64,
    pub threads: usize,
}

/// The plan of [`build_in`] with the same arguments: every material, whether its table is
/// already complete, and for those to build the memory they need against the budget; with
/// estimates of disk and time. Reads the tables directory (if there is one), writes nothing.
pub fn plan_build(
    targets: &[Material],
    dir: &Path,
    more: &[PathBuf],
    options: &BuildOptions<'_>,
) -> BuildPlan {
    let (threads, memory) = (options.threads, options.memory);
    let tables = TableDir::new(dir).with_more(more.to_vec()).pread();
    let plan: Plan = plan(targets);
    let mut materials = Vec::new();
    for mp in &plan.materials {
        let complete = is_complete(&tables, mp);
        let (way, need) = fit(mp, threads, memory, options.bytes_first());
        materials.push(PlannedMaterial {
            material: mp.material.to_string(),
            slices: mp.slice_count(),
            positions: mp.positions,
            largest_slice: need.largest,
            complete,
            memory_bytes: if complete { 0 } else { need.bytes },
            slices_at_once: need.at_once,
            paged_bytes: if complete {
                0
            } else {
                paged_bytes(&way, need.largest)
            },
            compact: !complete && way.compact,
            fits: complete || need.bytes <= memory,
        });
    }
    let to_build = || materials.iter().filter(|m| !m.complete);
    let positions = to_build().map(|m| m.positions).sum::<u64>();
    let thread_seconds: f64 = to_build()
        .map(|m| {
            let rate = if m.largest_slice > LARGE_SLICE {
                LARGE_POSITIONS_PER_THREAD_SECOND
            } else {
                POSITIONS_PER_THREAD_SECOND
            };
            let paged = match (m.paged_bytes > 0, m.compact) {
                (false, _) => 1.0,
                (true, true) => COMPACT_PAGED_SLOWDOWN,
                (true, false) => PAGED_SLOWDOWN,
            };
            m.positions as f64 / rate * paged
        })
        // From +0.0: the sum of no f64s is -0.0, which prints as "-0 s".
        .fold(0.0, |a, b| a + b);
    let disk = disk_need(to_build().map(|m| (m.positions, m.largest_slice, m.paged_bytes)));
    let building = plan.materials.iter().zip(&materials).filter(|(_, m)| !m.complete);
    let free_disk_bytes = free_for_build(dir, building.map(|(mp, _)| &mp.material));
    let disk_fits = free_disk_bytes.is_none_or(|f| disk.total() <= f);
    BuildPlan {
        positions,
        memory_bytes: materials.iter().map(|m| m.memory_bytes).max().unwrap_or(0),
        budget_bytes: memory,
        fits: materials.iter().all(|m| m.fits) && disk_fits,
        disk_bytes: disk.tables,
        scratch_bytes: disk.scratch,
        free_disk_bytes,
        disk_fits,
        seconds: thread_seconds / threads.max(1) as f64,
        threads,
        materials,
    }
}

/// The plan in a few lines for stderr.
pub fn describe_build_plan(p: &BuildPlan) -> String {
    let to_build: Vec<&PlannedMaterial> = p.materials.iter().filter(|m| !m.complete).collect();
    let mut out = format!(
        "plan: {} materials to build ({} already complete), {} positions\n",
        to_build.len(),
        p.materials.len() - to_build.len(),
        p.positions
    );
    for m in &to_build {
        let paged = if m.paged_bytes > 0 && m.compact {
            format!(
                ", by the compact solver, its 3 bits a position paged through {} of disk",
                human_bytes(m.paged_bytes)
            )
        } else if m.paged_bytes > 0 {
            format!(", its state paged through {} of disk", human_bytes(m.paged_bytes))
        } else if m.compact {
            ", by the compact solver (3 bits a position)".to_string()
        } else {
            String::new()
        };
        out += &format!(
            "  {:<10} {:>4} slice(s), {:>14} positions, memory {}{paged}{}\n",
            m.material,
            m.slices,
            m.positions,
            human_bytes(m.memory_bytes),
            if m.fits { "" } else { " (over the budget)" }
        );
    }
    out += &format!(
        "estimate: memory {} (budget {}{}), disk {} (and up to {} of checkpoints and paged state while building; {}), about {} on {} thread(s)\n",
        human_bytes(p.memory_bytes),
        human_bytes(p.budget_bytes),
        if p.materials.iter().all(|m| m.fits) { "" } else { ", NOT enough" },
        human_bytes(p.disk_bytes),
        human_bytes(p.scratch_bytes),
        match p.free_disk_bytes {
            Some(f) => format!("{} free{}", human_bytes(f), if p.disk_fits { "" } else { ", NOT enough" }),
            None => "free space unknown".to_string(),
        },
        human_seconds(p.seconds),
        p.threads
    );
    out
}

/// Seconds in the largest units that matter: `45 s`, `12 min`, `3.4 h`, `18.7 days`.
pub fn human_seconds(s: f64) -> String {
    if s < 90.0 {
        format!("{s:.0} s")
    } else if s < 5400.0 {
        format!("{:.0} min", s / 60.0)
    } else if s < 48.0 * 3600.0 {
        format!("{:.1} h", s / 3600.0)
    } else {
        format!("{:.1} days", s / 86400.0)
    }
}

/// True if the material's table is in the directory with exactly the planned slices and every
/// byte as it was written (its file hash: a damaged table is built again). The blocks are not
/// decompressed here: the build checks each one it reads (its CRC, its size) when it reads it,
/// and `zermelo verify` re-derives the values.
pub fn is_complete(tables: &TableDir, mp: &MaterialPlan) -> bool {
    let Ok(table) = tables.table(&mp.material) else {
        return false;
    };
    let mut expected: Vec<[u64; 2]> = mp.slices().map(|s| s.raw()).collect();
    expected.sort();
    let found: Vec<[u64; 2]> = table.slices().iter().map(|s| s.key).collect();
    found == expected && table.verify_file_hash().is_ok()
}

/// An error if a table of `plan` in `tables` is packed (`zermelo pack`, one side to move): a
/// build reads and writes full tables, and would otherwise take it for an incomplete one and
/// write the full table over it.
pub(crate) fn refuse_packed(tables: &TableDir, plan: &Plan) -> Result<(), TableError> {
    for mp in &plan.materials {
        if let Ok(table) = tables.table_to_probe(&mp.material) {
            if table.meta().index_layout != INDEX_LAYOUT {
                return Err(TableError::Packed {
                    path: tables.path_of(&mp.material),
                });
            }
        }
    }
    Ok(())
}

/// [`is_complete`] of every material of `plan`, in plan order, the tables checked on `threads`
/// threads at once, the largest first (checking a table hashes every byte of it).
pub(crate) fn complete_tables(tables: &TableDir, plan: &Plan, threads: usize) -> Vec<bool> {
    let mut order: Vec<usize> = (0..plan.materials.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(plan.materials[i].positions));
    let complete: Vec<AtomicBool> = plan.materials.iter().map(|_| AtomicBool::new(false)).collect();
    let checked = for_each_chunk(order.len(), 1, threads, |range| {
        for &i in &order[range] {
            complete[i].store(is_complete(tables, &plan.materials[i]), Relaxed);
        }
        Ok::<(), std::convert::Infallible>(())
    });
    match checked {
        Ok(()) => complete.into_iter().map(AtomicBool::into_inner).collect(),
        Err(never) => match never {},
    }
}

/// Solves every slice of a material and writes its table. Each slice reads its successors from
/// their table files: small ones whole, kept in a cache of `cache_bytes` for the next slices,
/// the others a block at a time ([`SuccessorCache`]). A material of one slice (pawnless)
/// goes to its table file as it is written out of the solver's state ([`MaterialBuild::pawnless`]).
/// The slices of a material with pawns are solved wave by wave ([`MaterialBuild::with_pawns`]).
/// The folder is returned in a temporary folder of its own (deleted when dropped).
fn solve_material(
    tables: &TableDir,
    mp: &MaterialPlan,
    folder: BuildFolder,
    options: &BuildOptions<'_>,
    fit: Fit,
    cache_bytes: u64,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(TableSummary, tempfile::TempDir), BuildError> {
    let never = AtomicBool::new(false);
    let build = MaterialBuild {
        tables,
        mp,
        options,
        fit,
        cache: SuccessorCache::new(cache_bytes, options.threads),
        meta: TableMeta {
            material: mp.material.to_string(),
            metric: Metric::Dtm,
            index_layout: INDEX_LAYOUT,
        },
        table_options: WriteOptions {
            threads: options.threads,
            ..WriteOptions::default()
        },
        path: tables.write_path_of(&mp.material),
        checkpoints: Checkpoints {
            dir: folder.path(),
            every: options.checkpoint_every,
            stop: options.stop.unwrap_or(&never),
        },
        progress,
    };
    let summary = if mp.material.has_pawns() {
        build.with_pawns(folder.path())?
    } else {
        build.pawnless(folder.path())?
    };
    Ok((summary, folder.close()?))
}

/// What the build of one material works with.
struct MaterialBuild<'a> {
    tables: &'a TableDir,
    mp: &'a MaterialPlan,
    options: &'a BuildOptions<'a>,
    fit: Fit,
    cache: SuccessorCache,
    meta: TableMeta,
    table_options: WriteOptions,
    /// Where the table is written.
    path: PathBuf,
    checkpoints: Checkpoints<'a>,
    progress: &'a (dyn Fn(u64) + Sync),
}

/// The files of a material's solved slices in its build folder, one a slice. A solved slice
/// waits in a file of its own, compressed as the table will be (block size, zstd level) and on
/// the table's grid of blocks: its values start at their place in the table within a block
/// (after as many padding values, a slice of their own with key PAD_KEY), so that each block
/// of the file inside the slice is a block of the table, and is copied into it as it is when
/// the table is written.
struct SliceFiles<'a> {
    dir: &'a Path,
    meta: &'a TableMeta,
    options: WriteOptions,
    /// Where each slice starts in the table.
    first_in_table: HashMap<SliceKey, u64>,
}

impl SliceFiles<'_> {
    /// The file of slice `key`.
    fn path(&self, key: &SliceKey) -> PathBuf {
        let [w, b] = key.raw();
        self.dir.join(format!("{w:016x}-{b:016x}.zmt"))
    }

    /// A new file for slice `key`, its padding pushed.
    fn create(&self, key: &SliceKey) -> Result<TableWriter, BuildError> {
        let size = SliceIndexer::new(*key).size();
        let pad = self.first_in_table[key] % u64::from(self.options.block_values);
        let slices = if pad > 0 { 2 } else { 1 };
        let mut writer = TableWriter::create(&self.path(key), self.meta, slices, pad + size, &self.options)?;
        if pad > 0 {
            writer.push_slice(PAD_KEY, &vec![0; pad as usize])?;
        }
        Ok(writer)
    }
}

impl MaterialBuild<'_> {
    /// The one slice of a pawnless material, solved into the table file as it is written out
    /// of the solver's state: by the compact solver, in parts (`--parts`), or whole, its state
    /// paged through `dir` where the budget asks for it.
    fn pawnless(&self, dir: &Path) -> Result<TableSummary, BuildError> {
        let (fit, options, progress) = (&self.fit, self.options, self.progress);
        let key = SliceKey::pawnless(self.mp.material);
        debug_assert!(self.mp.slices().eq([&key]), "a pawnless material is one slice");
        let successors = self
            .cache
            .successors_of(&key, &|s| self.tables.table(&s.material))?;
        let size = SliceIndexer::new(key).size();
        let mut writer = TableWriter::create(&self.path, &self.meta, 1, size, &self.table_options)?;
        let paging = fit.paged.map(|resident| Paging {
            dir: dir.to_path_buf(),
            resident,
        });
        if let Some(p) = &paging {
            info!(
                resident = p.resident,
                disk = paged_bytes(fit, size),
                "the slice's state is paged through the build folder"
            );
        }
        let in_parts = options.parts > 1 && splittable(&key);
        if in_parts && fit.compact {
            warn!(
                slice = %key,
                parts = options.parts,
                "--parts is not used for this slice: it is solved by the compact solver"
            );
        }
        if in_parts && fit.paged.is_some() {
            warn!(
                slice = %key,
                parts = options.parts,
                "--parts is not used for this slice: its state does not fit the budget in memory, and is paged"
            );
        }
        if fit.compact {
            info!(
                slice = %key,
                state_bytes = bits_state_bytes(size),
                "the slice is solved by the compact solver, three bits a position"
            );
            writer.begin_slice(key.raw(), size)?;
            solve_slice_bits(
                &key,
                &successors,
                options.threads,
                paging.as_ref(),
                Some(&self.checkpoints),
                &mut into(&mut writer, progress),
            )?;
            writer.end_slice()?;
        } else if in_parts && fit.paged.is_none() {
            solve_parts_into_writer(&key, &successors, options, &mut writer, progress)?;
        } else {
            let how = (options.threads, fit.changed_bits);
            let solving = (Some(&self.checkpoints), paging.as_ref(), None);
            solve_into_writer(&key, &successors, how, solving, &mut writer, progress)?;
        }
        let summary = writer.finish()?;
        self.checkpoints.remove(&key);
        Ok(summary)
    }

    /// The slices of a material with pawns, solved wave by wave (one per thread at once if the
    /// fit says so), each written to a file of its own in `dir` ([`SliceFiles`]) as it is
    /// written out of the state (a pawn push of a later wave reads it there); a slice whose file
    /// is already there and whole (a build stopped before) is not solved again. The table is
    /// then written from those files, sorted by key.
    fn with_pawns(&self, dir: &Path) -> Result<TableSummary, BuildError> {
        let mut keys: Vec<SliceKey> = self.mp.slices().copied().collect();
        keys.sort_by_key(|k| k.raw());
        let mut first_in_table = HashMap::with_capacity(keys.len());
        let mut first = 0u64;
        for key in &keys {
            first_in_table.insert(*key, first);
            first += SliceIndexer::new(*key).size();
        }
        let files = SliceFiles {
            dir,
            meta: &self.meta,
            options: WriteOptions {
                block_values: self.table_options.block_values,
                zstd_level: self.table_options.zstd_level,
                durable: false,
                ..WriteOptions::default()
            },
            first_in_table,
        };
        // The slices of this material solved so far, each in its own file, opened when read (a
        // material may have tens of thousands of slices: more than a process may keep open).
        let solved = Solved::default();
        let done = AtomicU64::new(0);
        let mut resumed = 0usize;
        let table_of = |s: &SliceKey| {
            if solved.has(s) {
                Ok(Arc::new(Table::open_pread(&files.path(s))?))
            } else {
                self.tables.table(&s.material)
            }
        };
        // Waves whose slices are solved one per thread, one after another, solved as one run:
        // a thread takes the next slice as soon as the slices it reads are solved (a wave's
        // slices need not wait for the whole wave before).
        let mut run: Vec<SliceKey> = Vec::new();
        for wave in &self.mp.waves {
            if self.checkpoints.stopped() {
                return Err(SolveError::Interrupted.into());
            }
            // The slices a build stopped before left whole: not solved again.
            let (kept, wave): (Vec<SliceKey>, Vec<SliceKey>) =
                wave.iter().partition(|key| part_is_whole(&files.path(key), key));
            for key in &kept {
                let n = SliceIndexer::new(*key).size();
                (self.progress)(done.fetch_add(n, Relaxed) + n);
            }
            resumed += kept.len();
            solved.add(&kept);
            let together = self.fit.together && init_together(&wave);
            if !together && one_per_thread(wave.len(), self.options.threads, self.fit.by_slice) {
                run.extend(wave);
                continue;
            }
            self.run_by_slice(&std::mem::take(&mut run), &files, &table_of, &done, &solved)?;
            if together {
                self.wave_together(&wave, &files, &table_of, &done)?;
            } else {
                self.wave_by_slice(&wave, &files, &table_of, &done)?;
            }
            solved.add(&wave);
        }
        self.run_by_slice(&run, &files, &table_of, &done, &solved)?;
        if resumed > 0 {
            info!(
                slices = resumed,
                "solved slices of a build stopped before taken up"
            );
        }
        let mut writer = TableWriter::create(
            &self.path,
            &self.meta,
            keys.len() as u64,
            self.mp.positions,
            &self.table_options,
        )?;
        for key in &keys {
            let part = Table::open_pread(&files.path(key))?;
            let slice = part.find_slice(key.raw()).ok_or_else(|| {
                BuildError::Storage(StorageError::InvalidInput(format!(
                    "{}: no slice {key}",
                    files.path(key).display()
                )))
            })?;
            // A whole block of the file is a whole block of the table (the grids agree): copied.
            writer.copy_slice(&part, slice)?;
        }
        Ok(writer.finish()?)
    }

    /// The slices of a wave whose pawns promote, inited and solved together: their files and
    /// successors first, then the slices.
    fn wave_together(
        &self,
        wave: &[SliceKey],
        files: &SliceFiles<'_>,
        table_of: &dyn Fn(&SliceKey) -> Result<Arc<Table>, TableError>,
        done: &AtomicU64,
    ) -> Result<(), BuildError> {
        let progress = self.progress;
        let mut writers = Vec::with_capacity(wave.len());
        let mut successors = Vec::with_capacity(wave.len());
        for key in wave {
            successors.push(self.cache.successors_inited_together(key, table_of)?);
            let mut writer = files.create(key)?;
            writer.begin_slice(key.raw(), SliceIndexer::new(*key).size())?;
            writers.push(writer);
        }
        let slices: Vec<(SliceKey, &dyn zermelo_worker::Successors)> = wave
            .iter()
            .zip(&successors)
            .map(|(key, s)| (*key, s as &dyn zermelo_worker::Successors))
            .collect();
        let mut sinks: Vec<_> = writers
            .iter_mut()
            .map(|writer| {
                move |values: &[u16]| {
                    writer
                        .push_values(values)
                        .map_err(|e| SolveError::Output(Box::new(e)))?;
                    let n = values.len() as u64;
                    progress(done.fetch_add(n, Relaxed) + n);
                    Ok(())
                }
            })
            .collect();
        let sinks: Vec<Sink<'_>> = sinks.iter_mut().map(|f| f as Sink<'_>).collect();
        solve_slices_into(
            &slices,
            self.options.threads,
            self.fit.by_slice,
            self.fit.changed_bits,
            sinks,
        )?;
        for mut writer in writers {
            writer.end_slice()?;
            writer.finish()?;
        }
        drop(successors);
        trim_arenas();
        Ok(())
    }

    /// The slices of a wave one by one (one per thread at once if the fit says so), each with
    /// its checkpoints if it is large enough to be worth them.
    fn wave_by_slice(
        &self,
        wave: &[SliceKey],
        files: &SliceFiles<'_>,
        table_of: &(dyn Fn(&SliceKey) -> Result<Arc<Table>, TableError> + Sync),
        done: &AtomicU64,
    ) -> Result<(), BuildError> {
        for_each_slice(wave, self.options.threads, self.fit.by_slice, |key, threads| {
            self.slice_into_file(key, (threads, None), files, table_of, done)
        })
    }

    /// The slices of `run` (waves in order, each solved one per thread at once) on every
    /// thread, a slice a thread: each thread takes the next slice in order, waits until the
    /// slices of `run` it reads (those of its material its pawn pushes lead to, in earlier
    /// waves) are in `solved`, solves it and adds it. A slice waits only for slices taken before
    /// it, which wait only for slices before them: the run ends. The same files as wave after
    /// wave (KRPvKR on 2 threads: each wave waited for its slower thread, 0.4 s in all).
    fn run_by_slice(
        &self,
        run: &[SliceKey],
        files: &SliceFiles<'_>,
        table_of: &(dyn Fn(&SliceKey) -> Result<Arc<Table>, TableError> + Sync),
        done: &AtomicU64,
        solved: &Solved,
    ) -> Result<(), BuildError> {
        let in_run: HashSet<SliceKey> = run.iter().copied().collect();
        let failed = AtomicBool::new(false);
        // A thread with no slice left to take helps with the passes of the slices still being
        // solved (KRPvKR on 2 threads: the last slice alone on one thread took 0.5 s).
        let lent = Lent::default();
        for_each_chunk_lending(run.len(), 1, self.options.threads, &lent, |range| {
            for key in &run[range] {
                let reads: Vec<SliceKey> = key
                    .successors()
                    .into_iter()
                    .filter(|s| s.material == key.material && in_run.contains(s))
                    .collect();
                if !solved.wait_for(&reads, &failed) {
                    return Ok(());
                }
                // A slice that ends in an error (or a panic) wakes the threads waiting for it:
                // they stop.
                let unsolved = Unsolved {
                    failed: &failed,
                    solved,
                };
                lent.solving(|| self.slice_into_file(key, (1, Some(&lent)), files, table_of, done))?;
                std::mem::forget(unsolved);
                solved.add(std::slice::from_ref(key));
            }
            Ok::<(), BuildError>(())
        })
    }

    /// Slice `key` solved on `threads` threads (and those `lent` by its run if any) into its
    /// file, with its checkpoints if it is large enough to be worth them.
    fn slice_into_file(
        &self,
        key: &SliceKey,
        (threads, lent): (usize, Option<&Lent>),
        files: &SliceFiles<'_>,
        table_of: &(dyn Fn(&SliceKey) -> Result<Arc<Table>, TableError> + Sync),
        done: &AtomicU64,
    ) -> Result<(), BuildError> {
        let progress = self.progress;
        if self.checkpoints.stopped() {
            return Err(SolveError::Interrupted.into());
        }
        let successors = self.cache.successors_of(key, table_of)?;
        let size = SliceIndexer::new(*key).size();
        let mut writer = files.create(key)?;
        let before = done.load(Relaxed);
        // Slices too small to be worth a checkpoint are solved again after a stop.
        let ckpt = (size >= SPILL_FROM as u64).then_some(&self.checkpoints);
        solve_into_writer(
            key,
            &successors,
            (threads, self.fit.changed_bits),
            (ckpt, None, lent),
            &mut writer,
            &|d| progress(before + d),
        )?;
        writer.finish()?;
        self.checkpoints.remove(key);
        drop(successors);
        trim_arenas();
        progress(done.fetch_add(size, Relaxed) + size);
        Ok(())
    }
}

/// Dropped, a slice of [`MaterialBuild::run_by_slice`] that did not get solved: the run has
/// failed, and the threads waiting for slices are told.
struct Unsolved<'a> {
    failed: &'a AtomicBool,
    solved: &'a Solved,
}

impl Drop for Unsolved<'_> {
    fn drop(&mut self) {
        self.failed.store(true, Relaxed);
        self.solved.wake();
    }
}

/// The slices of a material with pawns solved so far in its build (their files whole), and a
/// wake-up for the threads waiting for some.
#[derive(Default)]
struct Solved {
    keys: std::sync::Mutex<HashSet<SliceKey>>,
    added: std::sync::Condvar,
}

impl Solved {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<SliceKey>> {
        self.keys.lock().expect("solved slices lock")
    }

    fn has(&self, key: &SliceKey) -> bool {
        self.lock().contains(key)
    }

    fn add(&self, keys: &[SliceKey]) {
        self.lock().extend(keys.iter().copied());
        self.added.notify_all();
    }

    fn wake(&self) {
        let _held = self.lock();
        self.added.notify_all();
    }

    /// Waits until every slice of `keys` is solved (true), or `failed` is set (false).
    fn wait_for(&self, keys: &[SliceKey], failed: &AtomicBool) -> bool {
        let mut held = self.lock();
        loop {
            if failed.load(Relaxed) {
                return false;
            }
            if keys.iter().all(|k| held.contains(k)) {
                return true;
            }
            // A timeout as well: a check now and then, whatever the wake-ups.
            held = self
                .added
                .wait_timeout(held, Duration::from_millis(100))
                .expect("solved slices lock")
                .0;
        }
    }
}

/// True if the file of a solved slice at `path` holds slice `key` and every byte of it is as it
/// was written (its file hash): a build stopped before left it whole.
fn part_is_whole(path: &Path, key: &SliceKey) -> bool {
    match Table::open_pread(path) {
        Ok(part) => part.find_slice(key.raw()).is_some() && part.verify_file_hash().is_ok(),
        Err(_) => false,
    }
}

/// The key of the padding slice before a solved slice in its file (see `solve_material`): below
/// every key of a material with pawns, which has a pawn.
const PAD_KEY: zermelo_storage::SliceKey = [0, 0];

/// The folder in `dir` where a build of `material` keeps its solved slices and checkpoints until
/// its table is written (hidden).
pub fn build_folder(dir: &Path, material: &Material) -> PathBuf {
    dir.join(format!(".{material}-build"))
}

/// A material's build folder ([`build_folder`]), locked by this process while it is held: a
/// second build of the same material in the same directory is refused, and the lock goes with
/// the process however it ends.
struct BuildFolder {
    path: PathBuf,
    material: Material,
    _lock: std::fs::File,
}

impl BuildFolder {
    /// The build folder of `material` in `dir`, locked: if another build holds it, waits (with
    /// a line in the log) until that build ends, or until `stopped`.
    fn open(dir: &Path, material: &Material, stopped: &dyn Fn() -> bool) -> Result<BuildFolder, BuildError> {
        let path = build_folder(dir, material);
        let failed = |source| BuildError::Scratch {
            material: *material,
            dir: path.display().to_string(),
            source,
        };
        let lock_path = path.join("lock");
        let mut waiting = false;
        loop {
            std::fs::create_dir_all(&path).map_err(failed)?;
            let lock = match std::fs::File::options()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&lock_path)
            {
                Ok(lock) => lock,
                // The folder was moved away (a build finished) between the two calls.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(failed(e)),
            };
            if !try_lock(&lock).map_err(failed)? {
                if !waiting {
                    info!(lock = %lock_path.display(), "another build of this material is running here: waiting for it");
                    waiting = true;
                }
                if stopped() {
                    return Err(SolveError::Interrupted.into());
                }
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
            // The lock is this folder's only if the folder was not moved away meanwhile (by
            // the build that held it, done): else take the lock of the folder now there.
            if !same_file(&lock, &lock_path) {
                continue;
            }
            remove_stale_table_temps(dir, material);
            return Ok(BuildFolder {
                path,
                material: *material,
                _lock: lock,
            });
        }
    }

    /// Removes the folder (nothing in it is wanted: the table was complete).
    fn discard(self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }

    fn path(&self) -> &Path {
        &self.path
    }

    /// The folder once its table is written: moved into a temporary folder of the tables
    /// directory (deleted when dropped), so that no later build takes it up.
    fn close(self) -> Result<tempfile::TempDir, BuildError> {
        let failed = |source| BuildError::Scratch {
            material: self.material,
            dir: self.path.display().to_string(),
            source,
        };
        let parent = self.path.parent().unwrap_or(Path::new("."));
        let done = tempfile::Builder::new()
            .prefix(&format!(".{}-built-", self.material))
            .tempdir_in(parent)
            .map_err(failed)?;
        std::fs::rename(&self.path, done.path().join("build")).map_err(failed)?;
        Ok(done)
    }
}

/// Removes the temporary files of `material`'s table in `dir` that a build killed while writing
/// it left (the table writer's `.M.zmt.XXXXXX.tmp`): only while its build folder is locked, so
/// that no other build of the material is writing one.
fn remove_stale_table_temps(dir: &Path, material: &Material) {
    let prefix = format!(".{material}.zmt.");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&prefix) && name.ends_with(".tmp") && std::fs::remove_file(entry.path()).is_ok() {
            info!(file = %entry.path().display(), "removed the unfinished table file of a build that was killed");
        }
    }
}

/// True if `file` is the file at `path` now.
fn same_file(file: &std::fs::File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Takes an exclusive lock on `file` if no other process holds one: false if one does.
fn try_lock(file: &std::fs::File) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock only locks the open file description of a descriptor this process owns
    // (kept open by `file` for as long as the lock is wanted).
    let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// Lets the allocator keep at most one arena per solver thread. glibc gives each new thread an
/// arena of its own, up to 8 per core, and the solver starts its threads afresh for every pass:
/// what they free stays resident in arenas the next threads may not reuse, and a build's
/// resident memory creeps past its budget (measured on KRPvKR in 64 MiB, 2 threads: peak
/// 117 MiB with glibc's default, 73 MiB with 2 arenas, in the same time).
fn limit_arenas(threads: usize) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a tuning parameter of glibc's allocator, which any thread may
    // change at any time.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, threads.clamp(2, 64) as libc::c_int);
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = threads;
}

/// Gives the pages the allocator holds free back to the system (glibc: in every arena). After
/// each solved slice of a material with pawns: what a slice's threads freed otherwise stays
/// resident, and how much depends on which thread freed what (KPvKP within 40 MiB on 2
/// threads: peaks of 56 to 77 MiB from one run to the next without it, 50 to 54 MiB with it,
/// for about 0.3 ms a slice: 0.3 s of KPvKP's 5 s, which has 1,128 slices).
fn trim_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of the allocator to the system; any thread
    // may call it at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Solves slice `key` on `threads` threads (with the bitmaps of changed positions if
/// `changed_bits`, with `checkpoints` if any), its values going into `writer` (as one slice) as
/// they are written out of the solver's state; `progress` is called with the values written.
fn solve_into_writer(
    key: &SliceKey,
    successors: &SliceMap,
    how: (usize, bool),
    (checkpoints, paging, lent): (Option<&Checkpoints<'_>>, Option<&Paging>, Option<&Lent>),
    writer: &mut TableWriter,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(), BuildError> {
    writer.begin_slice(key.raw(), SliceIndexer::new(*key).size())?;
    solve_slice_resumable(
        key,
        successors,
        how,
        checkpoints,
        paging,
        lent,
        &mut into(writer, progress),
    )?;
    writer.end_slice()?;
    Ok(())
}

/// The sink of a slice's values into `writer` (as the slice begun there), `progress` called
/// with the values written so far.
fn into<'w>(
    writer: &'w mut TableWriter,
    progress: &'w (dyn Fn(u64) + Sync),
) -> impl FnMut(&[u16]) -> Result<(), SolveError> + 'w {
    let mut written = 0;
    move |values| {
        writer
            .push_values(values)
            .map_err(|e| SolveError::Output(Box::new(e)))?;
        written += values.len() as u64;
        progress(written);
        Ok(())
    }
}

/// [`solve_into_writer`] for a slice solved in `options.parts` parts ([`BuildOptions::parts`]):
/// the same values; what crossed between the parts is logged, with its bytes a position.
fn solve_parts_into_writer(
    key: &SliceKey,
    successors: &SliceMap,
    options: &BuildOptions<'_>,
    writer: &mut TableWriter,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(), BuildError> {
    let n = SliceIndexer::new(*key).size();
    writer.begin_slice(key.raw(), n)?;
    let start = Instant::now();
    let crossed = solve_in_parts(
        key,
        successors,
        options.parts,
        options.threads,
        None,
        &mut into(writer, progress),
    )?;
    writer.end_slice()?;
    let all = crossed.won_bytes + crossed.frontier_bytes + crossed.mark_bytes;
    info!(
        slice = %key,
        parts = options.parts,
        plies = crossed.plies,
        won_bytes = crossed.won_bytes,
        frontier_bytes = crossed.frontier_bytes,
        mark_bytes = crossed.mark_bytes,
        bytes_a_position = all as f64 / n as f64,
        seconds = start.elapsed().as_secs_f64(),
        "solved in parts"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::material_memory;

    use zermelo_chess::Material;
    use zermelo_coordinator::plan::plan;
    use zermelo_worker::tables::SliceMap;
    use zermelo_worker::{solve_slice, SolveError};

    #[test]
    fn durations_read_in_human_units() {
        let cases = [
            (45.0, "45 s"),
            (558.0, "9 min"),
            (5400.0, "1.5 h"),
            (1_616_163.0, "18.7 days"),
        ];
        for (s, text) in cases {
            assert_eq!(super::human_seconds(s), text);
        }
    }

    /// Each slice solves with nothing but the slices `SliceKey::successors` lists (as a cluster
    /// worker that fetched exactly those): the list is complete, en passant included.
    #[test]
    fn listed_successors_are_all_a_slice_reads() {
        let material: Material = "KPvKP".parse().unwrap();
        let mut solved = HashMap::new();
        for mp in plan(&[material]).materials {
            for wave in &mp.waves {
                for key in wave {
                    let mut map = SliceMap::new();
                    for s in key.successors() {
                        map.insert(s, solved.get(&s).cloned().expect("successor solved first"));
                    }
                    match solve_slice(key, &map, 2) {
                        Ok(v) => {
                            solved.insert(*key, std::sync::Arc::new(v));
                        }
                        Err(SolveError::MissingSuccessor(s)) => panic!("{key} reads {s}, not listed"),
                        Err(e) => panic!("{key}: {e}"),
                    }
                }
            }
        }
        assert!(solved.len() > 1128);
    }

    /// The memory of KPvK's build, counted by hand from FORMAT.md's sizes: on 2 threads, one
    /// slice (2 * 3,612 positions) per thread at once, each with 1 + 1/64 + 2/8 byte a position
    /// of state (the last two bitmaps of slices with pawns solved by lines, counted for every
    /// slice with pawns; pawnless slices keep one) and a
    /// log of plies of at most a byte a position; per thread a segment of values
    /// (here the whole slice, 2 bytes a position), with pawns a bitmap of changed positions (an
    /// eighth of a byte a position), 1 MiB of writer blocks and 32 cached blocks
    /// of 65,536 values. No table's values are held. KQvK alone (pawnless, one slice of
    /// 2 * 462 * 64): one slice's state and log. KPvK one slice at a time: one state.
    #[test]
    fn memory_of_a_build_counted_by_hand() {
        let p = plan(&["KPvK".parse::<Material>().unwrap()]);
        let of = |name: &str| {
            p.materials
                .iter()
                .find(|m| m.material.to_string() == name)
                .unwrap()
        };
        let per_thread = |n: u64| 2 * n + (1 << 20) + 32 * 2 * 65536;
        let n = 2 * 3612;
        // With pawns, each thread's bitmap of changed positions too.
        let pawn_thread = |n: u64| per_thread(n) + n / 8;
        let need = material_memory(of("KPvK"), 2, true, true, false);
        assert_eq!(
            (need.largest, need.at_once, need.per_thread),
            (n, 2, pawn_thread(n))
        );
        assert_eq!(
            need.bytes,
            2 * (n + 2 * (n / 64) + 2 * (n / 8) + n) + 2 * pawn_thread(n)
        );
        // With a promoting wave's slices together: the four of a pawn on the 7th rank at once.
        let need = material_memory(of("KPvK"), 2, true, true, true);
        assert_eq!(need.at_once, 4);
        assert_eq!(
            need.bytes,
            4 * (n + 2 * (n / 64) + 2 * (n / 8) + n) + 2 * pawn_thread(n)
        );
        let need = material_memory(of("KPvK"), 2, false, true, false);
        assert_eq!(need.at_once, 1);
        assert_eq!(
            need.bytes,
            n + 2 * (n / 64) + 2 * (n / 8) + n + 2 * pawn_thread(n)
        );
        // Without the bitmaps of changed positions, as a pawnless slice's threads.
        let need = material_memory(of("KPvK"), 2, false, false, false);
        assert_eq!(need.bytes, n + 2 * (n / 64) + 2 * (n / 8) + n + 2 * per_thread(n));
        let n = 2 * 462 * 64;
        let need = material_memory(of("KQvK"), 1, true, true, false);
        assert_eq!((need.largest, need.at_once), (n, 1));
        assert_eq!(need.bytes, n + n / 64 + n / 8 + n + per_thread(n));
    }
}
