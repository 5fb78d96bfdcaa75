//! `zermelo dtz`: the DTZ50 tables (`.zdz` files) of materials and of every material they
//! convert into, leaf-first, each slice by [`zermelo_worker::solver::dtz50`] from the DTZ50
//! values of its successors: the material's slices solved before it (pawn moves) and the
//! tables of the materials its captures and promotions lead into.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use tracing::info;
use zermelo_chess::dtz::Dtz;
use zermelo_chess::index::{Location, SliceIndexer, INDEX_LAYOUT};
use zermelo_chess::probe::{self, DtzSource};
use zermelo_chess::slice::SliceKey;
use zermelo_chess::{Material, Position};
use zermelo_coordinator::plan::{plan, MaterialPlan};
use zermelo_storage::{write_table_with, Metric, SliceData, Table, TableMeta, WriteOptions};
use zermelo_worker::solver::dtz50::{solve_slice_dtz50, DtzStep, DtzSuccessors};
use zermelo_worker::solver::{SliceValuesRef, SolveError};
use zermelo_worker::tables::{
    read_cached_values, SliceMap, SuccessorCache, TableDir, TableError, ThreadCached,
};
use zermelo_worker::Successors as _;

use crate::build::{complete_tables, is_complete};

/// What a DTZ50 build did for one material.
#[derive(Debug, serde::Serialize)]
pub struct DtzBuilt {
    pub material: String,
    /// False if its table was complete already (and kept).
    pub built: bool,
    pub slices: usize,
    pub positions: u64,
    pub seconds: f64,
    pub file: PathBuf,
    pub file_bytes: u64,
    /// The WDL50 table written beside it (`KRPvKR.zwl`, [`write_wdl50`]), and its bytes.
    pub wdl_file: PathBuf,
    pub wdl_bytes: u64,
}

/// Bytes a position of the material being built holds: its value (the cell it is solved in,
/// then the value in place, kept until the table is written).
const MATERIAL_BYTES_PER_POSITION: u64 = 2;
/// Bytes a position of the slice being solved holds besides its cell: two bitmaps.
const SLICE_BYTES_PER_POSITION: f64 = 2.0 / 8.0;

/// The memory the DTZ50 build of a material needs: the values of all its slices, and the
/// bitmaps of its largest slice being solved.
pub fn material_need(largest_slice: u64, positions: u64) -> u64 {
    positions * MATERIAL_BYTES_PER_POSITION + (largest_slice as f64 * SLICE_BYTES_PER_POSITION) as u64
}

/// [`material_need`] for the material of `mp`.
fn plan_need(mp: &MaterialPlan) -> u64 {
    let largest = mp
        .slices()
        .map(|k| SliceIndexer::new(*k).size())
        .max()
        .unwrap_or(0);
    material_need(largest, mp.positions)
}

/// What [`build_dtz50`] tells of its work: `(done, total, material, distance)`.
pub type DtzReport<'a> = dyn Fn(u64, u64, &Material, Option<u16>) + Sync + 'a;

/// Why a DTZ50 build stopped.
#[derive(Debug, thiserror::Error)]
pub enum DtzError {
    #[error(
        "the DTZ50 build of {material} needs about {} of memory ({positions} positions; this solver holds 2 bytes a position of the material and a quarter of one of its largest slice), more than the budget of {}; nothing was built",
        crate::memory::human_bytes(*need), crate::memory::human_bytes(*budget)
    )]
    OverBudget {
        material: String,
        positions: u64,
        need: u64,
        budget: u64,
    },
    #[error("solving {slice}: {source}")]
    Solve { slice: SliceKey, source: SolveError },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: zermelo_storage::StorageError,
    },
    #[error(transparent)]
    Table(#[from] TableError),
}

/// The zstd level of WDL50 tables: five classes compress far better with more effort, and the
/// file is written once for many downloads (KQRvKR: 7.2 MB at level 1, see docs/dtz50.md).
pub const WDL50_ZSTD_LEVEL: i32 = 9;

/// The WDL50 table (`.zwl`) of the DTZ50 table at `dtz_path`: the first of `wdl`'s directories
/// that has a complete one of the same slices, else written from it into the first directory
/// (the others are only read, as for every table): its path and bytes. `solved` holds the DTZ50
/// table's values by slice when they are still in memory (just built): read from there, not
/// decompressed again from the file.
fn wdl50_beside(
    dtz_path: &std::path::Path,
    wdl: &TableDir,
    material: &Material,
    threads: usize,
    solved: Option<&HashMap<SliceKey, Vec<u16>>>,
) -> Result<(PathBuf, u64), DtzError> {
    let dtz = Table::open_pread(dtz_path).map_err(|source| DtzError::Write {
        path: dtz_path.to_owned(),
        source,
    })?;
    let found = wdl.path_of(material);
    let complete = Table::open_pread(&found).is_ok_and(|t| {
        t.meta().metric == Metric::Wdl50
            && t.verify_file_hash().is_ok()
            && t.slices()
                .iter()
                .map(|e| (e.key, e.count))
                .eq(dtz.slices().iter().map(|e| (e.key, e.count)))
    });
    if complete {
        let bytes = std::fs::metadata(&found).map_or(0, |m| m.len());
        return Ok((found, bytes));
    }
    let path = wdl.write_path_of(material);
    let written = match solved {
        None => write_wdl50(&dtz, &path, threads),
        Some(solved) => {
            let by_raw: HashMap<_, &Vec<u16>> = solved.iter().map(|(k, v)| (k.raw(), v)).collect();
            write_wdl50_with(&dtz, &path, threads, |s, start, out| {
                let values = &by_raw[&dtz.slices()[s].key][start as usize..][..out.len()];
                out.copy_from_slice(values);
                Ok(())
            })
        }
    };
    let summary = written.map_err(|source| DtzError::Write {
        path: path.clone(),
        source,
    })?;
    Ok((path, summary.bytes))
}

/// Writes at `path` the WDL50 table ([`Metric::Wdl50`]) of the DTZ50 table `dtz`: the same
/// slices, each value its class ([`Dtz::wdl50_code`]), a chunk at a time. An index that is not a
/// legal position holds the class of the index before it (a draw at a slice's start): a prober
/// reads legal positions only, and the runs compress (KQRvKR: 11.0 MB with zeros there).
pub fn write_wdl50(
    dtz: &Table,
    path: &std::path::Path,
    threads: usize,
) -> Result<zermelo_storage::TableSummary, zermelo_storage::StorageError> {
    write_wdl50_with(dtz, path, threads, |s, start, out| {
        out.copy_from_slice(&dtz.read_range(s, start, out.len() as u64)?);
        Ok(())
    })
}

/// [`write_wdl50`] with the values of `dtz`'s slices read by `read(slice, first, out)`
/// (`out.len()` of them from index `first` of the slice's values).
fn write_wdl50_with(
    dtz: &Table,
    path: &std::path::Path,
    threads: usize,
    mut read: impl FnMut(usize, u64, &mut [u16]) -> Result<(), zermelo_storage::StorageError>,
) -> Result<zermelo_storage::TableSummary, zermelo_storage::StorageError> {
    let meta = TableMeta {
        metric: Metric::Wdl50,
        ..dtz.meta().clone()
    };
    let options = WriteOptions {
        threads,
        zstd_level: WDL50_ZSTD_LEVEL,
        ..WriteOptions::default()
    };
    let mut writer = zermelo_storage::TableWriter::create(
        path,
        &meta,
        dtz.slices().len() as u64,
        dtz.positions(),
        &options,
    )?;
    const CHUNK: u64 = 1 << 20;
    for (s, entry) in dtz.slices().iter().enumerate() {
        writer.begin_slice(entry.key, entry.count)?;
        let mut start = 0;
        let mut before = Dtz::Draw.wdl50_code();
        let mut values = Vec::new();
        while start < entry.count {
            let n = CHUNK.min(entry.count - start);
            values.resize(n as usize, 0);
            read(s, start, &mut values)?;
            for v in &mut values {
                *v = Dtz::from_raw(*v).map_or(before, Dtz::wdl50_code);
                before = *v;
            }
            writer.push_values(&values)?;
            start += n;
        }
        writer.end_slice()?;
    }
    writer.finish()
}

/// The successors of a slice for its DTZ50: the material's slices solved already, in memory,
/// and the slices of the other materials it converts into, from the build's [`SuccessorCache`]
/// (held whole when small enough, else read a block at a time from their tables: a value read
/// through the directory would take its lock on every exit, 15% of KQRvKR's build, and a
/// block decompressed again for every few reads, 9% of KRPvKR's).
struct Successors<'a> {
    material: Material,
    solved: &'a HashMap<SliceKey, Vec<u16>>,
    tables: &'a TableDir,
    /// The slices of other materials the slice's captures and promotions lead into.
    others: SliceMap,
    /// The slice's own table of mates and the slice's place in it, if there is one
    /// ([`mates_of`]): its draws are draws.
    mates: Option<(Arc<Table>, usize)>,
}

impl<'a> Successors<'a> {
    fn new(
        key: &SliceKey,
        solved: &'a HashMap<SliceKey, Vec<u16>>,
        tables: &'a TableDir,
        cache: &SuccessorCache,
        mates: Option<&Arc<Table>>,
    ) -> Result<Successors<'a>, SolveError> {
        let other = |s: &SliceKey| s.material != key.material && !s.material.is_bare_kings();
        let others = cache.successors_where(key, &other, &|s| tables.table(&s.material))?;
        let mates = mates.and_then(|t| Some((t.clone(), t.find_slice(key.raw())?)));
        Ok(Successors {
            material: key.material,
            solved,
            tables,
            others,
            mates,
        })
    }
}

impl DtzSource for Successors<'_> {
    type Error = SolveError;

    fn dtz_at(&self, loc: &Location) -> Result<Dtz, SolveError> {
        let raw = if loc.slice.material == self.material {
            let values = self
                .solved
                .get(&loc.slice)
                .ok_or(SolveError::MissingSuccessor(loc.slice))?;
            values.get(loc.index as usize).copied().unwrap_or(0)
        } else {
            match self.others.raw_at(loc) {
                Ok(raw) => raw,
                // Not among the slice's successors as listed: through the directory.
                Err(SolveError::MissingSuccessor(_)) => return Ok(ThreadCached(self.tables).dtz_at(loc)?),
                Err(e) => return Err(e),
            }
        };
        Dtz::from_raw(raw).ok_or(SolveError::BadSuccessor {
            slice: loc.slice,
            index: loc.index,
        })
    }
}

impl DtzSuccessors for Successors<'_> {
    fn dtz_of(&self, pos: &Position) -> Result<Dtz, SolveError> {
        probe::dtz(pos, self)
    }

    fn solved_values(&self, key: &SliceKey, first: u64, out: &mut [u16]) -> Result<bool, SolveError> {
        let Some(values) = self.solved.get(key) else {
            return Ok(false);
        };
        let range = first as usize..first as usize + out.len();
        let run = values.get(range).ok_or(SolveError::BadSuccessor {
            slice: *key,
            index: first,
        })?;
        out.copy_from_slice(run);
        Ok(true)
    }

    fn slice_values(&self, key: &SliceKey) -> Option<SliceValuesRef<'_>> {
        if key.material == self.material {
            return self.solved.get(key).map(|v| SliceValuesRef::Array(v));
        }
        self.others.slice_values(key)
    }

    fn known_draws(&self, _key: &SliceKey, first: u64, draws: &mut [bool]) -> Result<(), SolveError> {
        let Some((table, slice)) = &self.mates else {
            return Ok(());
        };
        let mut values = vec![0u16; draws.len()];
        read_cached_values(table, *slice, first, &mut values).map_err(TableError::from)?;
        for (d, v) in draws.iter_mut().zip(values) {
            *d = v == zermelo_chess::value::DRAW;
        }
        Ok(())
    }
}

/// The material's own table of mates in the directories, if there is a whole one (its every
/// byte hashed as written): its draws are the DTZ50 table's draws, found without a move
/// generated (the 50-move rule only turns wins and losses into draws). Read a block at a time
/// (`pread`), never mapped whole.
fn mates_of(dirs: &[PathBuf], material: &Material) -> Option<Arc<Table>> {
    let mates = TableDir::from_list(dirs).pread();
    let table = mates.table(material).ok()?;
    match table.verify_file_hash() {
        Ok(()) => Some(table),
        Err(e) => {
            tracing::warn!(%material, error = %e, "the table of mates is damaged: not used for the DTZ50 build");
            None
        }
    }
}

/// Checks the DTZ50 build of `targets` (the materials whose tables are not complete in `dirs`)
/// against the memory `budget`, before any work.
pub fn check_budget(targets: &[Material], dirs: &[PathBuf], budget: u64) -> Result<(), DtzError> {
    let tables = TableDir::dtz50(dirs);
    let plan = plan(targets);
    let to_build: Vec<&MaterialPlan> = (plan.materials.iter())
        .filter(|mp| !is_complete(&tables, mp))
        .collect();
    check_plan(&to_build, budget)
}

/// [`check_budget`] for the materials `to_build`.
fn check_plan(to_build: &[&MaterialPlan], budget: u64) -> Result<(), DtzError> {
    for mp in to_build {
        let need = plan_need(mp);
        if need > budget {
            return Err(DtzError::OverBudget {
                material: mp.material.to_string(),
                positions: mp.positions,
                need,
                budget,
            });
        }
    }
    Ok(())
}

/// Builds the DTZ50 tables of `targets` and of every material they convert into in the first
/// of `dirs` (the others are searched for complete tables), skipping those complete already.
/// `progress` is told of each material as it is done.
///
/// Every material is checked against the memory `budget` before any work. `report(done, total,
/// material, distance)` follows the work in positions (those looked at before the passes, over
/// the materials to build), and names the distance of the pass under way once a slice's
/// passes begin.
pub fn build_dtz50(
    targets: &[Material],
    dirs: &[PathBuf],
    threads: usize,
    budget: u64,
    report: &DtzReport<'_>,
    mut progress: impl FnMut(&DtzBuilt),
) -> Result<Vec<DtzBuilt>, DtzError> {
    let tables = TableDir::dtz50(dirs);
    let wdl = tables.wdl50_view();
    let plan = plan(targets);
    crate::build::refuse_packed(&tables, &plan)?;
    // Each table's bytes hashed once, on every thread: whether it is complete.
    let built_already = complete_tables(&tables, &plan, threads);
    let to_build: Vec<&MaterialPlan> = (plan.materials.iter())
        .zip(&built_already)
        .filter(|(_, &b)| !b)
        .map(|(mp, _)| mp)
        .collect();
    check_plan(&to_build, budget)?;
    let total: u64 = to_build.iter().map(|mp| mp.positions).sum();
    let done = std::sync::atomic::AtomicU64::new(0);
    let mut out = Vec::new();
    for (mp, built_already) in plan.materials.into_iter().zip(built_already) {
        let start = Instant::now();
        let material = mp.material;
        let path = tables.path_of(&material);
        let positions = mp.positions;
        let slices = mp.slice_count();
        if built_already {
            let (wdl_file, wdl_bytes) = wdl50_beside(&path, &wdl, &material, threads, None)?;
            let built = DtzBuilt {
                material: material.to_string(),
                built: false,
                slices,
                positions,
                seconds: 0.0,
                file_bytes: std::fs::metadata(&path).map_or(0, |m| m.len()),
                file: path,
                wdl_file,
                wdl_bytes,
            };
            progress(&built);
            out.push(built);
            continue;
        }
        let mut solved: HashMap<SliceKey, Vec<u16>> = HashMap::new();
        // What the budget leaves beside the material's values, for whole successor slices.
        let spare = budget.saturating_sub(plan_need(&mp));
        let cache = SuccessorCache::new(spare.min(crate::build::SLICE_CACHE_BYTES), threads);
        let mates = mates_of(dirs, &material);
        info!(%material, draws_from_mates = mates.is_some(), "DTZ50 build of a material begins");
        for key in mp.slices() {
            let succ = Successors::new(key, &solved, &tables, &cache, mates.as_ref())
                .map_err(|source| DtzError::Solve { slice: *key, source })?;
            let step = |s: DtzStep| match s {
                DtzStep::Inited(n) => {
                    let now = done.fetch_add(n, std::sync::atomic::Ordering::Relaxed) + n;
                    report(now, total, &material, None);
                }
                DtzStep::Pass(d) => {
                    let now = done.load(std::sync::atomic::Ordering::Relaxed);
                    report(now, total, &material, Some(d));
                }
            };
            let values = solve_slice_dtz50(key, &succ, threads, &step)
                .map_err(|source| DtzError::Solve { slice: *key, source })?;
            solved.insert(*key, values);
        }
        let mut keys: Vec<&SliceKey> = solved.keys().collect();
        keys.sort_by_key(|k| k.raw());
        let data: Vec<SliceData<'_>> = keys
            .iter()
            .map(|k| SliceData {
                key: k.raw(),
                values: &solved[*k],
            })
            .collect();
        let meta = TableMeta {
            material: material.to_string(),
            metric: Metric::Dtz50,
            index_layout: INDEX_LAYOUT,
        };
        let path = tables.write_path_of(&material);
        let options = WriteOptions {
            threads,
            ..WriteOptions::default()
        };
        let summary = write_table_with(&path, &meta, &data, &options).map_err(|source| DtzError::Write {
            path: path.clone(),
            source,
        })?;
        tables.forget(&material);
        drop(data);
        let (wdl_file, wdl_bytes) = wdl50_beside(&path, &wdl, &material, threads, Some(&solved))?;
        drop(solved);
        let built = DtzBuilt {
            material: material.to_string(),
            built: true,
            slices,
            positions,
            seconds: start.elapsed().as_secs_f64(),
            file_bytes: summary.bytes,
            file: path,
            wdl_file,
            wdl_bytes,
        };
        info!(material = %built.material, slices, positions, seconds = built.seconds, bytes = built.file_bytes, "DTZ50 table written");
        progress(&built);
        out.push(built);
    }
    Ok(out)
}
