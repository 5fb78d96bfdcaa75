//! The single-node build: the coordinator's plan, solved slice by slice with the worker's solver
//! in one process, each material written to one table file.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use tracing::{info, info_span};
use zermelo_chess::index::{SliceIndexer, INDEX_LAYOUT};
use zermelo_chess::slice::SliceKey;
use zermelo_chess::Material;
use zermelo_coordinator::plan::{plan, MaterialPlan, Plan};
use zermelo_storage::{
    write_table_with, Metric, SliceData, TableMeta, TableSummary, TableWriter, WriteOptions,
};
use zermelo_worker::tables::{SliceMap, SliceValues, TableDir, TableError};
use zermelo_worker::waves::solve_waves;
use zermelo_worker::{solve_slice_into, SolveError};

use crate::memory::human_bytes;

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
    #[error(
        "building {material} needs about {} of memory (the values of {held} positions it reads or holds, at 2 bytes each, and a byte a position of solver state for {at_once} slice(s) of up to {largest} positions at once); the memory budget is {}: raise it with --memory, build with fewer --threads, or build on a machine with more memory",
        human_bytes(*.needed), human_bytes(*.budget)
    )]
    OverBudget {
        material: Material,
        needed: u64,
        held: u64,
        largest: u64,
        at_once: u64,
        budget: u64,
    },
}

/// Values a thread writes out of the solver's state at a time (`SEG_INDICES` in the solver).
const SEGMENT_VALUES: u64 = 1 << 22;
/// Bytes of the table writer's blocks, per thread.
const WRITER_BYTES: u64 = 1 << 20;

/// What building one material on `threads` threads holds in memory at its peak, in bytes:
/// - the values (2 bytes a position) of every slice of other tables it reads, and of every
///   slice of the material itself when it has pawns (they are held until its table is written:
///   a pawn push leads into another slice of it); a pawnless material's one slice goes to its
///   file as it is written out of the solver's state;
/// - the solver's state, a byte a position and per-chunk summaries (1/64 byte), for each slice
///   solved at once: one, or with pawns up to one per thread;
/// - per thread, the values of one segment being written out of the state (up to
///   [`SEGMENT_VALUES`] values of 2 bytes) and the table writer's blocks ([`WRITER_BYTES`]).
///
/// The plies of decided positions of a large slice go to a temporary file, not memory. The
/// process's own fixed share (code, thread stacks: about 32 MiB) is not counted.
pub fn material_memory(mp: &MaterialPlan, threads: usize) -> MemoryNeed {
    let size = |s: &zermelo_chess::SliceKey| SliceIndexer::new(*s).size();
    let external: u64 = mp.external.iter().map(size).sum();
    let largest = mp.slices().map(size).max().unwrap_or(0);
    let pawnful = mp.material.has_pawns();
    let held = external + if pawnful { mp.positions } else { 0 };
    let at_once = if pawnful {
        (threads.max(1) as u64).min(mp.slice_count() as u64)
    } else {
        1
    };
    MemoryNeed {
        bytes: 2 * held
            + at_once * (largest + largest / 64)
            + threads.max(1) as u64 * (2 * largest.min(SEGMENT_VALUES) + WRITER_BYTES),
        held,
        largest,
        at_once,
    }
}

/// See [`material_memory`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryNeed {
    pub bytes: u64,
    /// Positions whose values are held.
    pub held: u64,
    /// Positions of the largest slice.
    pub largest: u64,
    /// Slices solved at once.
    pub at_once: u64,
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

/// Builds the tables of `targets` and of every material they convert into, skipping tables that
/// are already complete and valid in `dir`. Before any work, every material to build is checked
/// against the memory budget `memory` (bytes, see [`material_memory`]); one past it is refused.
pub fn build(
    targets: &[Material],
    dir: &Path,
    threads: usize,
    memory: u64,
    progress: Progress<'_>,
) -> Result<Vec<MaterialOutcome>, BuildError> {
    std::fs::create_dir_all(dir).map_err(|source| BuildError::CreateDir {
        path: dir.display().to_string(),
        source,
    })?;
    let tables = TableDir::new(dir);
    let plan: Plan = plan(targets);
    let complete: Vec<bool> = plan.materials.iter().map(|mp| is_complete(&tables, mp)).collect();
    for (mp, _) in plan.materials.iter().zip(&complete).filter(|(_, &c)| !c) {
        let need = material_memory(mp, threads);
        if need.bytes > memory {
            return Err(BuildError::OverBudget {
                material: mp.material,
                needed: need.bytes,
                held: need.held,
                largest: need.largest,
                at_once: need.at_once,
                budget: memory,
            });
        }
    }
    let total = plan.positions();
    let mut done = 0u64;
    let mut outcomes = Vec::new();
    for (mp, &complete) in plan.materials.iter().zip(&complete) {
        let start = Instant::now();
        let _span = info_span!("material", material = %mp.material).entered();
        if complete {
            info!(positions = mp.positions, "table complete and valid, skipped");
            done += mp.positions;
            progress(done, total, &mp.material);
            outcomes.push(MaterialOutcome {
                material: mp.material,
                skipped: true,
                positions: mp.positions,
                seconds: 0.0,
            });
            continue;
        }
        info!(slices = mp.slice_count(), positions = mp.positions, "solving");
        let summary = solve_material(&tables, mp, threads, &|d| progress(done + d, total, &mp.material))?;
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

/// True if the material's table is in the directory with exactly the planned slices and a good
/// checksum.
pub fn is_complete(tables: &TableDir, mp: &MaterialPlan) -> bool {
    let Ok(table) = tables.table(&mp.material) else {
        return false;
    };
    let mut expected: Vec<[u64; 2]> = mp.slices().map(|s| s.raw()).collect();
    expected.sort();
    let found: Vec<[u64; 2]> = table.slices().iter().map(|s| s.key).collect();
    found == expected && table.verify_checksum().is_ok()
}

/// Solves every slice of a material and writes its table. A material of one slice that no other
/// slice of it needs (pawnless) goes to its file as it is written out of the solver's state;
/// the slices of a material with pawns are solved wave by wave and held (a pawn push leads
/// into another slice of the material), then written sorted by key.
fn solve_material(
    tables: &TableDir,
    mp: &MaterialPlan,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<TableSummary, BuildError> {
    let mut map = SliceMap::new();
    for s in &mp.external {
        map.insert(*s, tables.load_slice(s)?);
    }
    let meta = TableMeta {
        material: mp.material.to_string(),
        metric: Metric::Dtm,
        index_layout: INDEX_LAYOUT,
    };
    let options = WriteOptions {
        threads,
        ..WriteOptions::default()
    };
    let path = tables.path_of(&mp.material);
    if !mp.material.has_pawns() {
        let key = SliceKey::pawnless(mp.material);
        debug_assert!(mp.slices().eq([&key]), "a pawnless material is one slice");
        let count = SliceIndexer::new(key).size();
        let mut writer = TableWriter::create(&path, &meta, 1, count, &options)?;
        writer.begin_slice(key.raw(), count)?;
        let mut written = 0;
        solve_slice_into(&key, &map, threads, &mut |values| {
            writer
                .push_values(values)
                .map_err(|e| SolveError::Output(Box::new(e)))?;
            written += values.len() as u64;
            progress(written);
            Ok(())
        })?;
        writer.end_slice()?;
        return Ok(writer.finish()?);
    }
    let solved: BTreeMap<[u64; 2], SliceValues> = solve_waves(&mp.waves, &mut map, None, threads, progress)?
        .into_iter()
        .map(|(k, v)| (k.raw(), v))
        .collect();
    let slices: Vec<SliceData<'_>> = solved
        .iter()
        .map(|(k, v)| SliceData { key: *k, values: v })
        .collect();
    Ok(write_table_with(&path, &meta, &slices, &options)?)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::material_memory;

    use zermelo_chess::Material;
    use zermelo_coordinator::plan::plan;
    use zermelo_worker::tables::SliceMap;
    use zermelo_worker::{solve_slice, SolveError};

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

    /// The memory of KPvK's build, counted by hand from FORMAT.md's sizes: its 24 slices of
    /// 2 * 3,612 positions and the four tables its promotions lead into (2 * 462 * 64 each; a
    /// capture leaves bare kings), 2 bytes a position; on 2 threads, two slices' state at 1 + 1/64
    /// byte a position; per thread a segment of values (here the whole slice) and 1 MiB.
    /// KQvK alone (pawnless, written as it is solved): the state of its one slice, no values
    /// of its own held.
    #[test]
    fn memory_of_a_build_counted_by_hand() {
        let p = plan(&["KPvK".parse::<Material>().unwrap()]);
        let of = |name: &str| {
            p.materials
                .iter()
                .find(|m| m.material.to_string() == name)
                .unwrap()
        };
        let need = material_memory(of("KPvK"), 2);
        let positions = 24 * 2 * 3612 + 4 * 2 * 462 * 64;
        assert_eq!(need.held, positions);
        assert_eq!(need.largest, 2 * 3612);
        assert_eq!(need.at_once, 2);
        assert_eq!(
            need.bytes,
            2 * positions + 2 * (2 * 3612 + 2 * 3612 / 64) + 2 * (2 * 2 * 3612 + (1 << 20))
        );
        let need = material_memory(of("KQvK"), 1);
        assert_eq!((need.held, need.largest, need.at_once), (0, 2 * 462 * 64, 1));
        assert_eq!(
            need.bytes,
            2 * 462 * 64 + 2 * 462 * 64 / 64 + 2 * 2 * 462 * 64 + (1 << 20)
        );
    }
}
