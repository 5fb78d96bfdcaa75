//! The single-node build: the coordinator's plan, solved slice by slice with the worker's solver
//! in one process, each material written to one table file.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use tracing::{info, info_span};
use zermelo_chess::index::INDEX_LAYOUT;
use zermelo_chess::Material;
use zermelo_coordinator::plan::{plan, MaterialPlan, Plan};
use zermelo_storage::{write_table_with, Metric, SliceData, TableMeta, WriteOptions};
use zermelo_worker::tables::{SliceMap, SliceValues, TableDir, TableError};
use zermelo_worker::waves::solve_waves;
use zermelo_worker::SolveError;

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
/// are already complete and valid in `dir`.
pub fn build(
    targets: &[Material],
    dir: &Path,
    threads: usize,
    progress: Progress<'_>,
) -> Result<Vec<MaterialOutcome>, BuildError> {
    std::fs::create_dir_all(dir).map_err(|source| BuildError::CreateDir {
        path: dir.display().to_string(),
        source,
    })?;
    let tables = TableDir::new(dir);
    let plan: Plan = plan(targets);
    let total = plan.positions();
    let mut done = 0u64;
    let mut outcomes = Vec::new();
    for mp in &plan.materials {
        let start = Instant::now();
        let _span = info_span!("material", material = %mp.material).entered();
        if is_complete(&tables, mp) {
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
        let values = solve_material(&tables, mp, threads, &|d| progress(done + d, total, &mp.material))?;
        let slices: Vec<SliceData<'_>> = values
            .iter()
            .map(|(k, v)| SliceData { key: *k, values: v })
            .collect();
        let meta = TableMeta {
            material: mp.material.to_string(),
            metric: Metric::Dtm,
            index_layout: INDEX_LAYOUT,
        };
        let options = WriteOptions {
            threads,
            ..WriteOptions::default()
        };
        let summary = write_table_with(&tables.path_of(&mp.material), &meta, &slices, &options)?;
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

/// Solves every slice of a material, wave by wave, and returns the values sorted by slice key.
fn solve_material(
    tables: &TableDir,
    mp: &MaterialPlan,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<BTreeMap<[u64; 2], SliceValues>, BuildError> {
    let mut map = SliceMap::new();
    for s in &mp.external {
        map.insert(*s, tables.load_slice(s)?);
    }
    let solved = solve_waves(&mp.waves, &mut map, None, threads, progress)?;
    Ok(solved.into_iter().map(|(k, v)| (k.raw(), v)).collect())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

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
}
