//! Analysing one position: the slices reachable from it (Church's hyper-space graph, cut down
//! to what one position can reach), solved leaf-first with the slice solver, reusing every table
//! already in the directory.
//!
//! Where the results go:
//! - `DIR/<MATERIAL>.zmt`: full tables (`zermelo solve`); read, never written here.
//! - `DIR/reachable/<MATERIAL>.zmt`: exact slices solved by analyses (a subset of a material's
//!   slices, same format); read and extended here, never served by `probe`.
//! - `DIR/adjudicated/<RULE>/<MATERIAL>.zmt`: slices whose values depend on an adjudication
//!   rule, metric `AdjudicatedDtm`, which every exact reader refuses.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;
use tracing::{info, warn};
use zermelo_chess::index::{locate, Location, INDEX_LAYOUT};
use zermelo_chess::probe::{self, ValueSource};
use zermelo_chess::slice::SliceKey;
use zermelo_chess::{Material, Position, Value};
use zermelo_coordinator::plan::{reachable_plan, ReachablePlan};
use zermelo_storage::{write_table_with, Metric, SliceData, TableMeta, WriteOptions};
use zermelo_worker::adjudicate::{Rule, Ruled};
use zermelo_worker::coord_game::CoordGame;
use zermelo_worker::tables::{SliceMap, SliceValues, TableDir, TableError};
use zermelo_worker::waves::{solve_waves, Solved};
use zermelo_worker::SolveError;

use crate::memory::human_bytes;
use crate::probe::{probe_position, ProbeInfo};

/// The folder of exact analysis slices inside the tables directory.
pub const REACHABLE_DIR: &str = "reachable";
/// The folder of adjudicated analysis slices (one sub-folder per rule).
pub const ADJUDICATED_DIR: &str = "adjudicated";

/// The plies a draw's principal variation shows (a win's or a loss's goes to mate).
const DRAW_PV_PLIES: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum AnalyseError {
    #[error("invalid FEN: {0}")]
    Fen(String),
    #[error("{0}")]
    TooBig(String),
    #[error("{0}")]
    Rules(String),
    #[error(transparent)]
    Tables(#[from] TableError),
    #[error(transparent)]
    Solve(#[from] SolveError),
    #[error(transparent)]
    Storage(#[from] zermelo_storage::StorageError),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{message}")]
    Cluster { code: u8, message: String },
}

impl AnalyseError {
    /// Exit code: 2 for bad input, refusal or a damaged table, 1 otherwise.
    pub fn code(&self) -> u8 {
        match self {
            AnalyseError::Solve(_) => 1,
            AnalyseError::Cluster { code, .. } => *code,
            _ => 2,
        }
    }
}

/// How to analyse.
#[derive(Clone, Debug)]
pub struct AnalyseOptions {
    pub tables: PathBuf,
    pub threads: usize,
    pub rule: Option<Rule>,
    /// Solve even when the estimate is past the machine.
    pub force: bool,
    /// Print the plan and stop.
    pub plan_only: bool,
    /// Memory the solve may use (bytes); the estimate is checked against it.
    pub memory_budget: u64,
    /// Solve on a cluster: the slices are solved there as an analysis job and fetched back;
    /// the results here are the same bytes.
    pub coordinator: Option<Remote>,
}

/// A coordinator to solve on.
#[derive(Clone, Debug)]
pub struct Remote {
    pub url: String,
    pub token: Option<String>,
    /// PEM of the CA to trust for an https:// URL.
    pub tls_ca: Option<Vec<u8>>,
}

/// The plan as printed before solving.
#[derive(Clone, Debug, Serialize)]
pub struct PlanSummary {
    /// Slices to solve.
    pub slices: usize,
    /// Their positions (indices, both sides to move).
    pub positions: u64,
    /// Materials of the slices to solve, with slice counts.
    pub materials: BTreeMap<String, usize>,
    /// Slices read from tables already in the directory.
    pub reused_slices: usize,
    /// Slices valued by the adjudication rule.
    pub adjudicated_slices: usize,
    /// Leaf-first waves.
    pub waves: usize,
    /// Estimated peak memory, bytes.
    pub memory_bytes: u64,
    /// Estimated disk for the results, bytes (zstd; at most 2 bytes per position).
    pub disk_bytes: u64,
    /// Estimated solving time on this machine's threads, seconds (about 2.5 million positions
    /// per second per thread, measured on KQRvKR).
    pub seconds: f64,
}

/// The answer: the probe shape plus the principal variation and whether it is exact.
#[derive(Clone, Debug, Serialize)]
pub struct Analysis {
    #[serde(flatten)]
    pub probe: ProbeInfo,
    /// The principal variation in SAN: best play to mate (or, for a draw, a few moves of it),
    /// stopped where it enters an adjudicated slice.
    pub pv: Vec<String>,
    /// False when the value depends on an adjudication rule.
    pub exact: bool,
    /// The rule the value depends on, when it is not exact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adjudication: Option<String>,
    /// `"chess"`, or `"coord"` for Church's co-ordinate-squares variant.
    pub rules: &'static str,
    pub plan: PlanSummary,
    /// Seconds spent planning, solving and writing.
    pub seconds: f64,
}

/// Where a reachable slice's values come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    Full,
    Reachable,
    Adjudicated,
}

/// The three stores of a tables directory.
pub struct Stores {
    pub full: TableDir,
    pub reachable: TableDir,
    pub adjudicated: Option<TableDir>,
    pub rule: Option<Rule>,
}

impl Stores {
    pub fn new(dir: &Path, rule: Option<Rule>) -> Stores {
        Stores {
            full: TableDir::new(dir),
            reachable: TableDir::new(dir.join(REACHABLE_DIR)),
            adjudicated: rule.map(|r| TableDir::adjudicated(dir.join(ADJUDICATED_DIR).join(r.id()))),
            rule,
        }
    }

    fn has(dir: &TableDir, key: &SliceKey) -> Result<bool, TableError> {
        if !dir.has(&key.material) {
            return Ok(false);
        }
        Ok(dir.table(&key.material)?.find_slice(key.raw()).is_some())
    }

    /// Where a slice is stored, if it is; a damaged store file is reported and skipped (the
    /// slice is solved again).
    fn origin(&self, key: &SliceKey) -> Option<Origin> {
        let stores = [
            (Some(&self.full), Origin::Full),
            (Some(&self.reachable), Origin::Reachable),
            (self.adjudicated.as_ref(), Origin::Adjudicated),
        ];
        for (dir, origin) in stores {
            let Some(dir) = dir else { continue };
            match Stores::has(dir, key) {
                Ok(true) => return Some(origin),
                Ok(false) => {}
                Err(e) => warn!(slice = %key, error = %e, "stored table unusable; solving the slice instead"),
            }
        }
        None
    }

    fn load(&self, key: &SliceKey, origin: Origin) -> Result<SliceValues, TableError> {
        match origin {
            Origin::Full => self.full.load_slice(key),
            Origin::Reachable => self.reachable.load_slice(key),
            Origin::Adjudicated => self
                .adjudicated
                .as_ref()
                .expect("adjudicated origin only with a rule")
                .load_slice(key),
        }
    }
}

/// Values for probing the result: the slices in memory (and the rule), else the stores.
struct Answer<'a> {
    ruled: Ruled<'a>,
    stores: &'a Stores,
}

impl ValueSource for Answer<'_> {
    type Error = AnalyseError;

    fn value_at(&self, loc: &Location) -> Result<Value, AnalyseError> {
        match self.ruled.value_at(loc) {
            Err(SolveError::MissingSuccessor(_)) => {}
            other => return Ok(other?),
        }
        let mut last = None;
        for dir in [
            Some(&self.stores.full),
            Some(&self.stores.reachable),
            self.stores.adjudicated.as_ref(),
        ]
        .into_iter()
        .flatten()
        {
            match dir.value_at(loc) {
                Ok(v) => return Ok(v),
                Err(e @ (TableError::Missing { .. } | TableError::MissingSlice { .. })) => last = Some(e),
                Err(e) => return Err(e.into()),
            }
        }
        Err(last.expect("at least one store").into())
    }
}

/// The slices a position's value is read from: its own slice, and with an en-passant square the
/// slices of the positions after each of its moves (the tables hold no en-passant square).
pub fn roots_of(pos: &Position) -> Vec<SliceKey> {
    let mut roots: Vec<SliceKey> = locate(pos).map(|l| l.slice).into_iter().collect();
    if pos.ep_square.is_some() {
        for m in pos.legal_moves().iter() {
            roots.extend(locate(&pos.play(m)).map(|l| l.slice));
        }
    }
    roots.sort();
    roots.dedup();
    roots
}

/// Plans the analysis of `pos` against the stores.
fn plan_for(pos: &Position, stores: &Stores) -> (ReachablePlan, HashMap<SliceKey, Origin>) {
    let origins = std::cell::RefCell::new(HashMap::new());
    let rule = stores.rule;
    let plan = reachable_plan(
        &roots_of(pos),
        &|s| match stores.origin(s) {
            Some(o) => {
                origins.borrow_mut().insert(*s, o);
                true
            }
            None => false,
        },
        &|s| rule.is_some_and(|r| r.cuts(s)),
    );
    (plan, origins.into_inner())
}

fn summary(plan: &ReachablePlan, threads: usize) -> PlanSummary {
    // Every slice to solve and every reused one is held in memory (2 bytes a position); the
    // solver's state is a byte a position of the slice it solves, with per-chunk summaries
    // (1/64 byte) and a bitmap (1/8 byte), for up to one slice per thread.
    let state = plan.largest_slice + plan.largest_slice / 64 + plan.largest_slice / 8;
    let memory = 2 * (plan.positions + plan.available_positions) + threads.max(1) as u64 * state + (64 << 20);
    PlanSummary {
        slices: plan.slice_count(),
        positions: plan.positions,
        materials: plan
            .materials()
            .into_iter()
            .map(|(m, c)| (m.to_string(), c))
            .collect(),
        reused_slices: plan.available.len(),
        adjudicated_slices: plan.cut.len(),
        waves: plan.waves.len(),
        memory_bytes: memory,
        disk_bytes: plan.positions / 4,
        seconds: plan.positions as f64 / (2.5e6 * threads.max(1) as f64),
    }
}

/// The plan in a few lines for stderr.
pub fn describe_plan(s: &PlanSummary) -> String {
    let mut out = format!(
        "plan: {} slices to solve in {} waves, {} positions; {} slices reused from stored tables, {} adjudicated\n",
        s.slices, s.waves, s.positions, s.reused_slices, s.adjudicated_slices
    );
    out += &format!(
        "estimate: memory {}, disk {}, about {}\n",
        human_bytes(s.memory_bytes),
        human_bytes(s.disk_bytes),
        crate::build::human_seconds(s.seconds)
    );
    // The materials with the most slices first; a long tail is summed up.
    let mut mats: Vec<(&String, &usize)> = s.materials.iter().collect();
    mats.sort_by_key(|(m, c)| (std::cmp::Reverse(**c), m.as_str()));
    let shown: Vec<String> = mats.iter().take(12).map(|(m, c)| format!("{m} {c}")).collect();
    if !shown.is_empty() {
        let more = if mats.len() > 12 {
            format!(" and {} more materials", mats.len() - 12)
        } else {
            String::new()
        };
        out += &format!("slices per material: {}{more}\n", shown.join(", "));
    }
    out
}

/// The slices a position needs, solved (or read) and held in memory.
pub struct Solution {
    map: SliceMap,
    stores: Stores,
    rule: Option<Rule>,
    /// True if the position's value depends on the adjudication rule.
    adjudicated: bool,
    pub plan: PlanSummary,
}

impl Solution {
    fn answer(&self) -> Answer<'_> {
        Answer {
            ruled: Ruled {
                map: &self.map,
                rule: self.rule,
            },
            stores: &self.stores,
        }
    }

    /// The value of a position of the solved slices (or of slices stored in the directory).
    pub fn value(&self, pos: &Position) -> Result<Value, AnalyseError> {
        probe::value(pos, &self.answer())
    }
}

/// Plans the slices `pos` needs, prints the plan, and solves them (or stops after the plan with
/// `plan_only`, returning `None`). Results are written to the stores of the directory.
pub fn solve_for(
    pos: &Position,
    opts: &AnalyseOptions,
    report_plan: &dyn Fn(&PlanSummary),
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<Option<Solution>, AnalyseError> {
    let stores = Stores::new(&opts.tables, opts.rule);
    let (plan, origins) = plan_for(pos, &stores);
    let summary = summary(&plan, opts.threads);
    report_plan(&summary);
    info!(
        slices = summary.slices,
        positions = summary.positions,
        reused = summary.reused_slices,
        adjudicated = summary.adjudicated_slices,
        memory_bytes = summary.memory_bytes,
        "analysis planned"
    );
    if opts.plan_only {
        return Ok(None);
    }
    if summary.memory_bytes > opts.memory_budget && !opts.force {
        let hint = if opts.rule.is_none() {
            " Score the large promoted materials by a declared rule with --adjudicate material:N (not \
             exact), build some of the tables first with `zermelo solve`, or"
        } else {
            " Use a smaller N in --adjudicate, or"
        };
        return Err(AnalyseError::TooBig(format!(
            "the plan needs about {} of memory ({} positions in {} slices); this machine has {} for it.{hint} \
             pass --force to try anyway",
            human_bytes(summary.memory_bytes),
            summary.positions,
            summary.slices,
            human_bytes(opts.memory_budget),
        )));
    }
    std::fs::create_dir_all(&opts.tables).map_err(|source| AnalyseError::Io {
        path: opts.tables.clone(),
        source,
    })?;

    // Read the reused slices, then solve leaf-first.
    let mut map = SliceMap::new();
    for s in &plan.available {
        map.insert(*s, stores.load(s, origins[s])?);
    }
    let total = plan.positions;
    let solved = match &opts.coordinator {
        None => solve_waves(&plan.waves, &mut map, opts.rule, opts.threads, &|d| {
            progress(d, total)
        })?,
        Some(_) if opts.rule.is_some() => {
            return Err(AnalyseError::Rules(
                "--adjudicate is not available with --coordinator; analyse locally".to_string(),
            ))
        }
        Some(_) if plan.slice_count() == 0 => Vec::new(),
        Some(remote) => {
            let wanted: Vec<SliceKey> = plan.slices().copied().collect();
            let (url, token, ca) = (&remote.url, remote.token.as_deref(), remote.tls_ca.as_deref());
            let fetched = crate::cluster::analyse_remote(url, token, ca, &plan.roots, &wanted, progress)
                .map_err(|f| AnalyseError::Cluster {
                    code: f.code,
                    message: f.message,
                })?;
            for (k, v) in &fetched {
                map.insert(*k, v.clone());
            }
            fetched
        }
    };

    // A slice depends on the rule if a successor is cut, adjudicated, or depends on it.
    let mut tainted: BTreeSet<SliceKey> = plan
        .available
        .iter()
        .filter(|s| origins[s] == Origin::Adjudicated)
        .copied()
        .collect();
    for wave in &plan.waves {
        for s in wave {
            if s.successors()
                .iter()
                .any(|t| plan.cut.contains(t) || tainted.contains(t))
            {
                tainted.insert(*s);
            }
        }
    }
    write_results(&opts.tables, &stores, &solved, &tainted, opts.threads)?;
    Ok(Some(Solution {
        map,
        stores,
        rule: opts.rule,
        adjudicated: plan.roots.iter().any(|r| tainted.contains(r)),
        plan: summary,
    }))
}

/// Analyses one position. `report_plan` gets the plan before anything is solved; `progress`
/// gets (positions solved, positions in the plan).
pub fn analyse(
    fen: &str,
    opts: &AnalyseOptions,
    report_plan: &dyn Fn(&PlanSummary),
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<Option<Analysis>, AnalyseError> {
    let start = Instant::now();
    let pos = Position::from_fen(fen).map_err(|e| AnalyseError::Fen(e.to_string()))?;
    let Some(solution) = solve_for(&pos, opts, report_plan, progress)? else {
        return Ok(None);
    };
    let answer = solution.answer();
    let probe = probe_position(fen, &pos, &answer)?;
    let pv = principal_variation(&pos, &answer, opts.rule)?;
    let exact = !solution.adjudicated;
    Ok(Some(Analysis {
        probe,
        pv,
        exact,
        adjudication: if exact {
            None
        } else {
            opts.rule.map(|r| r.describe())
        },
        rules: "chess",
        plan: solution.plan,
        seconds: start.elapsed().as_secs_f64(),
    }))
}

/// Analyses one position under Church's COORD rules: one slice of king placements, solved
/// whole (8,192 positions, nothing stored).
pub fn analyse_coord(fen: &str, report_plan: &dyn Fn(&PlanSummary)) -> Result<Analysis, AnalyseError> {
    let start = Instant::now();
    let pos = Position::from_fen(fen).map_err(|e| AnalyseError::Fen(e.to_string()))?;
    let game = CoordGame::new(&pos).map_err(|e| AnalyseError::Rules(e.to_string()))?;
    let plan = PlanSummary {
        slices: 1,
        positions: game.values().len() as u64,
        materials: BTreeMap::new(),
        reused_slices: 0,
        adjudicated_slices: 0,
        waves: 1,
        memory_bytes: 2 * game.values().len() as u64,
        disk_bytes: 0,
        seconds: 0.0,
    };
    report_plan(&plan);
    let coord = |e: zermelo_worker::coord_game::CoordError| AnalyseError::Rules(e.to_string());
    let value = game.value(&pos).map_err(coord)?;
    let moves = game.moves(&pos).map_err(coord)?;
    let mut pv = Vec::new();
    let mut p = pos;
    let limit = match value {
        Value::Draw => DRAW_PV_PLIES,
        Value::Win(n) | Value::Loss(n) => n as usize,
    };
    while pv.len() < limit {
        let Some((m, _)) = game.moves(&p).map_err(coord)?.into_iter().next() else {
            break;
        };
        pv.push(p.san(&m));
        if m.capture.is_some() {
            break;
        }
        p = p.play(&m);
    }
    let mut probe = ProbeInfo::new(
        fen,
        &pos,
        value,
        moves.iter().map(|(m, v)| coord_move_info(&pos, m, *v)).collect(),
    );
    // Under COORD a position with no capture to make is lost or drawn by the rules, not by
    // mate or stalemate on the board.
    probe.pos.checkmate = false;
    probe.pos.stalemate = moves.is_empty();
    Ok(Analysis {
        probe,
        pv,
        exact: true,
        adjudication: None,
        rules: "coord",
        plan,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// A COORD move: the game ends with a capture, and there is no check or mate in it.
fn coord_move_info(pos: &Position, m: &zermelo_chess::Move, v: Value) -> crate::probe::MoveInfo {
    let san = pos.san(m).trim_end_matches(['+', '#']).to_string();
    let mut info = crate::probe::MoveInfo::new(pos, m, san, v);
    info.after.checkmate = false;
    info.after.stalemate = false;
    info
}

/// Best play from `pos`: to mate, or a few plies of a draw; it stops on entering an adjudicated
/// slice (after that move) or at a position the rule values.
fn principal_variation(
    pos: &Position,
    src: &Answer<'_>,
    rule: Option<Rule>,
) -> Result<Vec<String>, AnalyseError> {
    let mut pv = Vec::new();
    let mut p = *pos;
    let limit = match probe::value(pos, src)? {
        Value::Draw => DRAW_PV_PLIES,
        // Mate in `n` plies: best play on both sides takes exactly `n`.
        Value::Win(n) | Value::Loss(n) => n as usize,
    };
    while pv.len() < limit {
        let moves = probe::moves(&p, src)?;
        let Some((m, _)) = moves.first() else { break };
        pv.push(p.san(m));
        p = p.play(m);
        if rule.is_some_and(|r| locate(&p).is_some_and(|l| r.cuts(&l.slice))) {
            break;
        }
    }
    Ok(pv)
}

/// Writes the solved slices into the exact or the adjudicated store, each material's file
/// rewritten with its old slices and the new ones (atomically, as every table).
fn write_results(
    dir: &Path,
    stores: &Stores,
    solved: &[(SliceKey, SliceValues)],
    tainted: &BTreeSet<SliceKey>,
    threads: usize,
) -> Result<(), AnalyseError> {
    let mut groups: BTreeMap<(bool, Material), Solved> = BTreeMap::new();
    for (k, v) in solved {
        groups
            .entry((tainted.contains(k), k.material))
            .or_default()
            .push((*k, v.clone()));
    }
    for ((adjudicated, material), new) in groups {
        let (store, metric) = if adjudicated {
            let rule = stores.rule.expect("tainted slices only with a rule");
            let d = dir.join(ADJUDICATED_DIR).join(rule.id());
            std::fs::create_dir_all(&d).map_err(|source| AnalyseError::Io {
                path: d.clone(),
                source,
            })?;
            let note = d.join("RULE");
            std::fs::write(&note, format!("{}\n", rule.describe()))
                .map_err(|source| AnalyseError::Io { path: note, source })?;
            (
                stores.adjudicated.as_ref().expect("rule store"),
                Metric::AdjudicatedDtm,
            )
        } else {
            let d = dir.join(REACHABLE_DIR);
            std::fs::create_dir_all(&d).map_err(|source| AnalyseError::Io {
                path: d.clone(),
                source,
            })?;
            (&stores.reachable, Metric::Dtm)
        };
        let mut all: BTreeMap<[u64; 2], SliceValues> = BTreeMap::new();
        if store.has(&material) {
            let table = store.table(&material)?;
            for (i, e) in table.slices().iter().enumerate() {
                all.insert(e.key, table.read_slice(i)?.into());
            }
        }
        for (k, v) in new {
            all.insert(k.raw(), v);
        }
        let slices: Vec<SliceData<'_>> = all
            .iter()
            .map(|(k, v)| SliceData { key: *k, values: v })
            .collect();
        let meta = TableMeta {
            material: material.to_string(),
            metric,
            index_layout: INDEX_LAYOUT,
        };
        let options = WriteOptions {
            threads,
            ..WriteOptions::default()
        };
        let path = store.write_path_of(&material);
        write_table_with(&path, &meta, &slices, &options)?;
        store.forget(&material);
        info!(material = %material, slices = slices.len(), adjudicated, path = %path.display(), "analysis slices stored");
    }
    Ok(())
}
