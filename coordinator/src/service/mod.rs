//! The coordinator as a gRPC service (`zermelo.v1.Coordinator`): the [`Scheduler`] behind a
//! mutex, every finished slice made durable in the [`Journal`] before the worker hears that it
//! was accepted, uploaded slices kept in a [`SliceStore`] (hash-checked in and out), and each
//! material's table file written into the tables directory, with exactly the bytes of
//! `zermelo solve`, as soon as its last slice is finished.
//!
//! Restarting on the same state directory replays the journal: the jobs are planned again and
//! only their unfinished slices are leased; tables whose slices are all finished but whose file
//! is missing are written at start.
//!
//! Errors: one enum, [`ServiceError`], mapped to a gRPC status (and a log level) in one place,
//! [`ServiceError::status`].
//!
//! Here: the state, jobs, completions and the gRPC handlers. Beside it: `tables` (adopting,
//! writing and repairing from tables; lost slices), `transfers` (uploads and their check,
//! fetches) and `tls` (TLS and the token check).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio_stream::Stream;
use tonic::service::Interceptor;
use tonic::{Request, Response, Status, Streaming};
use tracing::{debug, error, info, warn};
use zermelo_chess::index::{SliceIndexer, INDEX_LAYOUT};
use zermelo_chess::{Material, SliceKey};
use zermelo_proto as pb;
use zermelo_proto::coordinator_server::{Coordinator, CoordinatorServer};
use zermelo_proto::{FramingError, SliceFramer, CHUNK_BYTES};
use zermelo_storage::{Metric, Table, TableMeta, TableWriter, WriteOptions};

use crate::check::{UploadCheck, Watch};
use crate::journal::{JobSpec, Journal, JournalError, Record};
use crate::metrics::{CounterValues, Counters, Snapshot};
use crate::plan::{plan, reachable_plan_within, MaterialPlan, ReachablePlan, TooManySlices};
use crate::schedule::{
    self, hex, Action, Event, Hash, JobId, LeaseId, Millis, NoTask, ResumeConflict, Scheduler, SliceResult,
    WorkerId,
};
use crate::store::{from_wire, to_wire, Files, IncomingSlice, SliceStore, StoreError};
use zermelo_proto::task::{BadTask, SliceRef};

mod driver;
mod meet;
mod tables;
mod tls;
mod transfers;
mod verify;

use tables::table_is_complete;
pub use tls::{ServerAuth, TlsIdentity};

/// The most wire bytes a slice of `positions` values may announce: zstd's bound for its
/// `2 * positions` bytes (they never compress to more), with room to spare.
fn max_wire_bytes(positions: u64) -> u64 {
    let raw = positions.saturating_mul(2);
    raw.saturating_add(raw / 128).saturating_add(1 << 20)
}

/// The most streams (and requests in flight) one client connection may have open at once.
const MAX_STREAMS_PER_CONNECTION: u32 = 32;

/// The longest worker name kept, in characters.
const MAX_NAME_CHARS: usize = 64;

/// A worker's name as logged and shown: control characters (a newline, an escape sequence)
/// written as escapes, so that a name cannot forge log lines or drive a terminal, and at most
/// [`MAX_NAME_CHARS`] characters (then `…`).
pub fn printable_name(raw: &str) -> String {
    let mut out = String::new();
    for (i, c) in raw.chars().enumerate() {
        if i == MAX_NAME_CHARS {
            out.push('…');
            break;
        }
        // Controls, and the separators and direction marks that reorder or split a line.
        if c.is_control()
            || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// How the coordinator runs.
#[derive(Clone, Debug)]
pub struct ServiceConfig {
    /// Where finished tables are written (one file per material).
    pub tables: PathBuf,
    /// The journal and the slice store.
    pub state: PathBuf,
    /// The cluster token every RPC must carry; `None` accepts every caller.
    pub token: Option<String>,
    /// The scheduler's knobs (`first_id` is set from the clock at start).
    pub schedule: schedule::Config,
    /// The most men a submitted material may have.
    pub max_men: u32,
    /// Positions of each uploaded slice re-derived by the independent verifier before it is
    /// accepted (see [`crate::check`]); 0 keeps only the range and legality check.
    pub check_sample: usize,
    /// Uploaded slices of at most this many positions are held whole for the check, larger
    /// ones checked as they stream in (see [`crate::check`]).
    pub check_whole_positions: u64,
    /// How the slice store reads its files: [`Disk`](crate::store::Disk), unless a test
    /// gives one that damages what it reads.
    pub files: Arc<dyn Files>,
    /// Every solved slice is verified whole by a worker other than its solver before it is
    /// finished (`--verify all`; see [`schedule::Config::verify_all`]).
    pub verify_all: bool,
    /// Serve gRPC over TLS with this certificate and key; plain HTTP/2 when `None`.
    pub tls: Option<TlsIdentity>,
}

impl ServiceConfig {
    /// Defaults for a tables directory: state in `TABLES/.zermelo-coordinator`, no token.
    pub fn new(tables: impl Into<PathBuf>) -> ServiceConfig {
        let tables = tables.into();
        ServiceConfig {
            state: tables.join(".zermelo-coordinator"),
            tables,
            token: None,
            schedule: schedule::Config::default(),
            max_men: 6,
            check_sample: crate::check::DEFAULT_SAMPLE,
            check_whole_positions: crate::check::WHOLE_POSITIONS,
            files: Arc::new(crate::store::Disk),
            verify_all: false,
            tls: None,
        }
    }
}

/// Everything that can go wrong in an RPC or at start.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("missing or wrong cluster token")]
    Unauthenticated,
    #[error("{what} is missing from the request")]
    MissingField { what: &'static str },
    #[error("material {name}: {reason}")]
    BadMaterial { name: String, reason: String },
    #[error("no material was given")]
    NoMaterial,
    #[error("a job is either materials or analysis roots, not both")]
    MaterialsAndRoots,
    #[error("analysis root {root} has {men} men; this coordinator builds at most {max}")]
    RootTooLarge { root: SliceKey, men: u32, max: u32 },
    #[error("analysis job refused: {0} (submit fewer or smaller roots)")]
    TooManySlices(#[from] TooManySlices),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("malformed slice stream: {0}")]
    Framing(#[from] FramingError),
    #[error(transparent)]
    Task(#[from] BadTask),
    #[error("slice {key} is not finished")]
    NotFinished { key: SliceKey },
    #[error("the stored copy of slice {key} is lost: it is solved again")]
    SliceLost { key: SliceKey },
    #[error("slice {key} went into its table with content hash {found}, not its recorded {recorded}")]
    TableHash {
        key: SliceKey,
        found: String,
        recorded: String,
    },
    #[error("job {0} is unknown")]
    UnknownJob(u64),
    #[error("job {job} was not taken: {reason}")]
    JobRejected {
        job: JobId,
        reason: schedule::JobRejection,
    },
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("the journal failed earlier ({0}); restart the coordinator")]
    JournalBroken(String),
    #[error("the journal does not replay: {0}")]
    Resume(#[from] ResumeConflict),
    #[error("writing table {material}: {source}")]
    Table {
        material: Material,
        source: zermelo_storage::StorageError,
    },
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("a blocking task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
    #[error("serving gRPC: {0}")]
    Transport(#[from] tonic::transport::Error),
    #[error("TLS certificate or key: {0}")]
    Tls(String),
    #[error("serving metrics: {0}")]
    Metrics(std::io::Error),
}

impl ServiceError {
    /// The one place where errors become gRPC statuses (and are logged at their level).
    pub fn status(&self) -> Status {
        use tonic::Code;
        let code = match self {
            ServiceError::Unauthenticated => Code::Unauthenticated,
            ServiceError::MissingField { .. }
            | ServiceError::BadMaterial { .. }
            | ServiceError::NoMaterial
            | ServiceError::MaterialsAndRoots
            | ServiceError::RootTooLarge { .. }
            | ServiceError::TooManySlices(_)
            | ServiceError::Framing(_)
            | ServiceError::Task(_) => Code::InvalidArgument,
            ServiceError::Store(StoreError::HashMismatch { .. } | StoreError::Wire { .. }) => Code::DataLoss,
            ServiceError::Store(
                StoreError::BadKey(_)
                | StoreError::WrongPositions { .. }
                | StoreError::BadHashLength { .. }
                | StoreError::FailedCheck { .. },
            ) => Code::InvalidArgument,
            ServiceError::Store(StoreError::Missing { .. })
            | ServiceError::NotFinished { .. }
            | ServiceError::SliceLost { .. }
            | ServiceError::UnknownJob(_) => Code::NotFound,
            ServiceError::JobRejected { .. } => Code::FailedPrecondition,
            ServiceError::Store(StoreError::Finished { .. }) => Code::AlreadyExists,
            ServiceError::JournalBroken(_) => Code::Unavailable,
            ServiceError::Store(StoreError::Corrupt { .. } | StoreError::Io { .. })
            | ServiceError::Journal(_)
            | ServiceError::Resume(_)
            | ServiceError::Table { .. }
            | ServiceError::TableHash { .. }
            | ServiceError::Io { .. }
            | ServiceError::Join(_)
            | ServiceError::Transport(_)
            | ServiceError::Tls(_)
            | ServiceError::Metrics(_) => Code::Internal,
        };
        match code {
            Code::Internal | Code::Unavailable => error!(error = %self, "request failed"),
            Code::DataLoss => warn!(error = %self, "request refused"),
            _ => debug!(error = %self, "request refused"),
        }
        Status::new(code, self.to_string())
    }
}

impl From<ServiceError> for Status {
    fn from(e: ServiceError) -> Status {
        e.status()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum TableState {
    /// Slices remain to be solved.
    Pending,
    Writing,
    Written,
    Failed(String),
    /// A slice of it was found lost while it was written: written once a worker has solved it
    /// again.
    AwaitingRepair,
}

#[derive(Debug)]
struct MaterialState {
    plan: MaterialPlan,
    unfinished: usize,
    table: TableState,
}

#[derive(Debug)]
struct JobRecord {
    requested: Vec<Material>,
    /// Every material of the job's plan.
    planned: Vec<Material>,
    started: bool,
    /// (time, positions done) samples over the last minute, for the rate.
    samples: VecDeque<(Millis, u64)>,
}

struct State {
    scheduler: Scheduler,
    journal: Journal,
    journal_broken: Option<String>,
    jobs: BTreeMap<u64, JobRecord>,
    materials: HashMap<Material, MaterialState>,
    next_job: u64,
    /// Workers one of whose uploads failed the check: refused from then on.
    refused: HashMap<WorkerId, &'static str>,
}

struct Shared {
    state: Mutex<State>,
    store: SliceStore,
    tables: PathBuf,
    max_men: u32,
    clock: Instant,
    /// Counts since start (for `JobStatus` and the metrics).
    counters: Counters,
    /// The check of uploads.
    check: UploadCheck,
    /// What the parts of slices solved in parts give each other.
    meetings: meet::Meetings,
}

/// The service. Cheap to clone (all clones share one state).
#[derive(Clone)]
pub struct CoordinatorService {
    shared: Arc<Shared>,
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl CoordinatorService {
    /// Opens the state directory (creating it), replays the journal, and writes the tables of
    /// materials whose slices are all finished but whose file is missing. Blocking.
    pub fn open_blocking(config: &ServiceConfig) -> Result<CoordinatorService, ServiceError> {
        let io = |what: String| move |source| ServiceError::Io { what, source };
        std::fs::create_dir_all(&config.tables)
            .map_err(io(format!("creating {}", config.tables.display())))?;
        std::fs::create_dir_all(&config.state).map_err(io(format!("creating {}", config.state.display())))?;
        let store = SliceStore::open_with(&config.state.join("slices"), Arc::clone(&config.files))?;
        let (journal, replay) = Journal::open(&config.state.join("journal"))?;
        let mut sched_config = config.schedule.clone();
        sched_config.verify_all = config.verify_all;
        // Past every id an earlier life of this coordinator gave out (see Config::first_id).
        sched_config.first_id = sched_config.first_id.max(unix_ms());
        let finished: Vec<SliceResult> = replay.finished().collect();
        let scheduler = Scheduler::resume(sched_config, finished.iter().copied())?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                scheduler,
                journal,
                journal_broken: None,
                jobs: BTreeMap::new(),
                materials: HashMap::new(),
                next_job: 1,
                refused: HashMap::new(),
            }),
            store,
            tables: config.tables.clone(),
            max_men: config.max_men,
            clock: Instant::now(),
            counters: Counters::default(),
            check: UploadCheck::new(config.check_sample, config.check_whole_positions),
            meetings: meet::Meetings::new(config.state.join("meetings")),
        });
        let service = CoordinatorService { shared };
        let jobs: Vec<(JobId, JobSpec)> = replay.jobs().collect();
        let mut writes = Vec::new();
        {
            let jobs: Vec<_> = jobs
                .into_iter()
                .map(|(job, spec)| {
                    let closure = plan_analysis(&spec);
                    (job, spec, closure)
                })
                .collect();
            let mut state = service.lock();
            for (job, spec, closure) in jobs {
                state.next_job = state.next_job.max(job.0 + 1);
                let taken = closure.and_then(|c| service.take_job(&mut state, job, &spec, c.as_ref()));
                match taken {
                    Ok((_, w)) => writes.extend(w),
                    Err(e) => warn!(%job, error = %e, "a journaled job is not taken again"),
                }
            }
            info!(
                jobs = state.jobs.len(),
                finished = finished.len(),
                torn_bytes = replay.torn_bytes,
                "journal replayed"
            );
        }
        for m in writes {
            service.write_table_blocking(m);
        }
        Ok(service)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the state as it was between two events: go on.
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now(&self) -> Millis {
        self.shared.clock.elapsed().as_millis() as Millis
    }

    /// The tonic server for this service, behind the token check.
    pub fn into_server(
        self,
        auth: ServerAuth,
    ) -> tonic::service::interceptor::InterceptedService<CoordinatorServer<Self>, ServerAuth> {
        CoordinatorServer::with_interceptor(self, auth)
    }

    /// Plans a job and hands it to the scheduler (the journal record is the caller's business).
    /// Returns the scheduler's acceptance and the materials whose tables are to be written now.
    fn take_job(
        &self,
        state: &mut State,
        job: JobId,
        spec: &JobSpec,
        closure: Option<&ReachablePlan>,
    ) -> Result<(Action, Vec<Material>), ServiceError> {
        // A materials job plans whole materials and writes their tables; an analysis job plans
        // the slices reachable from its roots that are not finished yet, and writes no table
        // (its slices are fetched by the one who asked).
        let (plan, requested, whole) = match spec {
            JobSpec::Materials(materials) => (plan(materials), materials.clone(), true),
            JobSpec::Analysis(roots) => {
                let scheduler = &state.scheduler;
                let finished = |s: &SliceKey| scheduler.finished(s).is_some();
                let reachable = closure
                    .expect("an analysis job is planned before it is taken")
                    .replan(&finished);
                let mut requested: Vec<Material> = roots.iter().map(|r| r.material).collect();
                requested.dedup();
                (reachable.to_plan(), requested, false)
            }
        };
        let planned: Vec<Material> = if whole {
            plan.materials.iter().map(|m| m.material).collect()
        } else {
            Vec::new()
        };
        let submitted = Event::JobSubmitted {
            job,
            plan: plan.clone(),
        };
        let mut accepted = None;
        for a in self.drive(state, submitted)?.answers {
            match a {
                Action::JobRejected { job, reason } => return Err(ServiceError::JobRejected { job, reason }),
                a @ Action::JobAccepted { .. } => accepted = Some(a),
                _ => {}
            }
        }
        let accepted = accepted.expect("a submission is accepted or rejected");
        let mut writes = Vec::new();
        for mp in plan.materials.into_iter().filter(|_| whole) {
            let m = mp.material;
            if let Some(ms) = state.materials.get(&m) {
                // A table whose write failed (a full disk since freed, say), or that is gone
                // from the tables directory, is written again from the stored slices.
                let again = match &ms.table {
                    TableState::Failed(_) => true,
                    TableState::Written => {
                        !table_is_complete(&self.shared.tables, &ms.plan, &state.scheduler, false)
                    }
                    _ => false,
                };
                if again && ms.unfinished == 0 {
                    info!(material = %m, was = ?ms.table, "the table is written again");
                    writes.push(m);
                    state.materials.get_mut(&m).expect("known").table = TableState::Writing;
                }
                continue;
            }
            let unfinished = mp
                .slices()
                .filter(|s| state.scheduler.finished(s).is_none())
                .count();
            let table = if unfinished > 0 {
                TableState::Pending
            } else if table_is_complete(&self.shared.tables, &mp, &state.scheduler, true) {
                TableState::Written
            } else {
                writes.push(m);
                TableState::Writing
            };
            state.materials.insert(
                m,
                MaterialState {
                    plan: mp,
                    unfinished,
                    table,
                },
            );
        }
        state.jobs.insert(
            job.0,
            JobRecord {
                requested,
                planned,
                started: false,
                samples: VecDeque::new(),
            },
        );
        Ok((accepted, writes))
    }

    /// A completion, through the driver ([`drive`](Self::drive): it journals the finished slices,
    /// durably, before anything is answered). Returns the answer and the tables now to write.
    /// A verification's outcome ([`Event::Verified`]) goes the same way.
    fn complete_locked(
        &self,
        state: &mut State,
        completed: Event,
    ) -> Result<(pb::CompleteTaskResponse, Vec<Material>), ServiceError> {
        let out = self.drive(state, completed)?;
        let answer = out
            .answers
            .into_iter()
            .find_map(|a| match a {
                Action::Accepted { .. } => Some(pb::complete_task_response::Result::Accepted(pb::Accepted {
                    job_done: out.job_done,
                })),
                Action::Rejected { reason, .. } => {
                    Some(pb::complete_task_response::Result::Rejected(pb::Rejected {
                        reason: reason.to_string(),
                    }))
                }
                _ => None,
            })
            .expect("a completion is accepted or rejected");
        Ok((pb::CompleteTaskResponse { result: Some(answer) }, out.writes))
    }

    /// Takes a job: adopts the complete tables already in the tables directory that it needs
    /// (read outside the lock: it may take a while), journals them with the job, and plans it.
    /// A materials job adopts its materials; an analysis job (the slices reachable from its
    /// roots, kept in the store for the one who asked to fetch, no table written) the materials
    /// it reaches that have a table file. Returns the answer and the tables to write. Blocking.
    fn take_new_job_blocking(
        &self,
        spec: JobSpec,
    ) -> Result<(pb::SubmitJobResponse, Vec<Material>), ServiceError> {
        let closure = plan_analysis(&spec)?;
        let to_adopt: Vec<Material> = match (&spec, &closure) {
            (JobSpec::Materials(materials), _) => materials.clone(),
            (JobSpec::Analysis(_), None) => unreachable!("an analysis job is planned above"),
            (JobSpec::Analysis(_), Some(closure)) => {
                let mut reached: Vec<Material> = closure.slices().map(|s| s.material).collect();
                reached.sort();
                reached.dedup();
                reached.retain(|m| {
                    self.shared
                        .tables
                        .join(zermelo_storage::table_file_name(&m.to_string()))
                        .exists()
                });
                reached
            }
        };
        let adopted = self.adopt_tables_blocking(&to_adopt);
        let mut state = self.lock();
        if let Some(reason) = &state.journal_broken {
            return Err(ServiceError::JournalBroken(reason.clone()));
        }
        // Another job may have planned one of these materials meanwhile: it is solved there.
        let adopted: Vec<SliceResult> = adopted
            .into_iter()
            .filter(|(m, _)| !state.materials.contains_key(m))
            .flat_map(|(_, slices)| slices)
            .collect();
        let mut records: Vec<Record> = adopted.iter().map(|r| Record::SliceFinished(*r)).collect();
        state.scheduler.adopt(adopted)?;
        let job = JobId(state.next_job);
        state.next_job += 1;
        records.push(spec.record(job));
        if let Err(e) = state.journal.append(&records) {
            state.journal_broken = Some(e.to_string());
            return Err(e.into());
        }
        Counters::add(&self.shared.counters.journal_records, records.len() as u64);
        let (accepted, writes) = self.take_job(&mut state, job, &spec, closure.as_ref())?;
        let Action::JobAccepted {
            slices,
            positions,
            finished,
            ..
        } = accepted
        else {
            unreachable!()
        };
        match &spec {
            JobSpec::Materials(m) => {
                let materials: Vec<String> = m.iter().map(|m| m.to_string()).collect();
                info!(%job, ?materials, slices, positions, finished, "job taken");
            }
            JobSpec::Analysis(roots) => {
                info!(%job, roots = roots.len(), slices, positions, finished, "analysis job taken")
            }
        }
        let response = pb::SubmitJobResponse {
            job_id: job.0,
            slices_total: slices,
            positions_total: positions,
        };
        Ok((response, writes))
    }

    /// Expires leases and forgets silent workers: call every second or so.
    pub fn tick(&self) {
        // A tick finishes no slice: nothing to journal, nothing to fail.
        let _ = self.drive(&mut self.lock(), Event::Tick);
        self.forget_ended_meetings();
    }

    /// What `GET /metrics` shows now.
    pub fn metrics_snapshot(&self) -> Snapshot {
        let state = self.lock();
        Snapshot {
            unhealthy: state
                .journal_broken
                .as_ref()
                .map(|e| format!("the journal failed ({e}); restart the coordinator")),
            jobs: state
                .jobs
                .keys()
                .filter_map(|&j| self.job_info(&state, j))
                .collect(),
            workers_alive: state.scheduler.workers_alive() as u64,
            leases_outstanding: state.scheduler.live_leases() as u64,
            counters: CounterValues::from(&self.shared.counters),
        }
    }

    fn job_info(&self, state: &State, job: u64) -> Option<pb::JobInfo> {
        let rec = state.jobs.get(&job)?;
        let p = state.scheduler.job(JobId(job))?;
        let tables: Vec<&TableState> = rec.planned.iter().map(|m| &state.materials[m].table).collect();
        let failed = tables.iter().find_map(|t| match t {
            TableState::Failed(e) => Some(e.clone()),
            _ => None,
        });
        let job_state = if failed.is_some() {
            pb::JobState::Failed
        } else if p.is_done() && tables.iter().all(|t| **t == TableState::Written) {
            pb::JobState::Done
        } else if rec.started || p.slices_done > 0 {
            pb::JobState::Running
        } else {
            pb::JobState::Queued
        };
        let rate = match (rec.samples.front(), rec.samples.back()) {
            (Some(a), Some(b)) if b.0 > a.0 => (b.1 - a.1) as f64 * 1000.0 / (b.0 - a.0) as f64,
            _ => 0.0,
        };
        Some(pb::JobInfo {
            job_id: job,
            materials: rec.requested.iter().map(|m| m.to_string()).collect(),
            state: job_state as i32,
            slices_done: p.slices_done,
            slices_total: p.slices_total,
            positions_done: p.positions_done,
            positions_total: p.positions_total,
            positions_per_second: rate,
            error: failed.unwrap_or_default(),
        })
    }
}

fn lease_response(task: &schedule::LeasedTask, now: Millis) -> pb::LeaseTaskResponse {
    use zermelo_proto::task::{Part, SliceRef, Task, Work};
    let ttl = task.deadline.saturating_sub(now);
    let work = match (task.part, &task.slices[..]) {
        (Some(p), [key]) => Work::Part(Part {
            key: *key,
            group: p.group.0,
            parts: p.parts,
            index: p.index,
        }),
        _ if task.verify.is_empty() => Work::Solve(task.slices.clone()),
        _ => Work::Verify(
            task.slices
                .iter()
                .zip(&task.verify)
                .map(|(&key, &hash)| SliceRef { key, hash })
                .collect(),
        ),
    };
    let task = Task {
        lease_id: task.lease.0,
        lease_ttl_ms: ttl,
        deadline_unix_ms: unix_ms() + ttl,
        job_id: task.job.0,
        work,
        successors: task
            .successors
            .iter()
            .map(|&(key, hash)| SliceRef { key, hash })
            .collect(),
    };
    pb::LeaseTaskResponse {
        result: Some(pb::lease_task_response::Result::Task(task.to_wire())),
    }
}

fn no_task(reason: pb::no_task::Reason, retry_after_ms: u64) -> pb::LeaseTaskResponse {
    pb::LeaseTaskResponse {
        result: Some(pb::lease_task_response::Result::NoTask(pb::NoTask {
            reason: reason as i32,
            retry_after_ms,
        })),
    }
}

type ChunkStream = Pin<Box<dyn Stream<Item = Result<pb::SliceChunk, Status>> + Send + 'static>>;
type MeetStream = Pin<Box<dyn Stream<Item = Result<pb::MeetChunk, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl Coordinator for CoordinatorService {
    async fn register(
        &self,
        request: Request<pb::RegisterRequest>,
    ) -> Result<Response<pb::RegisterResponse>, Status> {
        let mut r = request.into_inner();
        // What a worker calls itself goes into logs and status: bounded and printable.
        r.worker_name = printable_name(&r.worker_name);
        if let Err(refused) = pb::check_version(r.protocol_version) {
            warn!(worker = %r.worker_name, reason = %refused.reason, "worker refused");
            return Ok(Response::new(pb::RegisterResponse {
                result: Some(pb::register_response::Result::Refused(refused)),
            }));
        }
        let registered = Event::WorkerRegistered;
        let out = self.drive(&mut self.lock(), registered)?;
        let result = out.answers.into_iter().find_map(|a| match a {
            Action::Registered { worker, lease_ttl } => {
                info!(%worker, name = %r.worker_name, cores = r.cores, "worker registered");
                Some(pb::register_response::Result::Registered(pb::Registered {
                    worker_id: worker.0,
                    lease_ttl_ms: lease_ttl,
                }))
            }
            _ => None,
        });
        Ok(Response::new(pb::RegisterResponse { result }))
    }

    async fn lease_task(
        &self,
        request: Request<pb::LeaseTaskRequest>,
    ) -> Result<Response<pb::LeaseTaskResponse>, Status> {
        let worker = WorkerId(request.into_inner().worker_id);
        let now = self.now();
        let mut state = self.lock();
        if let Some(why) = state.refused.get(&worker) {
            Counters::add(&self.shared.counters.not_allowed, 1);
            return Err(Status::permission_denied(format!("{worker} is refused: {why}")));
        }
        let out = self.drive(&mut state, Event::LeaseRequested { worker })?;
        let answer = out.answers.into_iter().find_map(|a| match a {
            Action::Lease(task) => Some(lease_response(&task, now)),
            Action::NoTask(NoTask::Idle) => Some(no_task(pb::no_task::Reason::Idle, 500)),
            Action::NoTask(NoTask::Waiting) => Some(no_task(pb::no_task::Reason::Waiting, 200)),
            Action::NoTask(NoTask::UnknownWorker) => Some(no_task(pb::no_task::Reason::UnknownWorker, 0)),
            _ => None,
        });
        Ok(Response::new(answer.expect("a lease request is answered")))
    }

    async fn heartbeat(
        &self,
        request: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatResponse>, Status> {
        let r = request.into_inner();
        let mut state = self.lock();
        let ttl = state.scheduler.config().lease_ttl;
        let leases = r.lease_ids.iter().map(|&l| LeaseId(l)).collect();
        let beat = Event::Heartbeat {
            worker: WorkerId(r.worker_id),
            leases,
        };
        let mut answer = pb::HeartbeatResponse {
            lease_ttl_ms: ttl,
            ..Default::default()
        };
        for a in self.drive(&mut state, beat)?.answers {
            if let Action::LeaseStatus {
                valid,
                lost,
                unknown_worker,
            } = a
            {
                answer.valid_lease_ids = valid.iter().map(|l| l.0).collect();
                answer.lost_lease_ids = lost.iter().map(|l| l.0).collect();
                answer.unknown_worker = unknown_worker;
            }
        }
        Ok(Response::new(answer))
    }

    async fn complete_task(
        &self,
        request: Request<pb::CompleteTaskRequest>,
    ) -> Result<Response<pb::CompleteTaskResponse>, Status> {
        let r = request.into_inner();
        let lease = LeaseId(r.lease_id);
        if let Some(verdict) = r.verdict {
            return self
                .complete_verification(lease, WorkerId(r.worker_id), verdict)
                .await;
        }
        // The holder of a task's lease, or of a part of a slice solved in parts (a helper
        // part completes with no slice: the scheduler refuses one that reports a slice).
        let holder = {
            let state = self.lock();
            let s = &state.scheduler;
            s.lease_holder(lease)
                .map(|(w, _)| w)
                .or_else(|| s.part_of(lease).map(|(_, w)| w))
        };
        if holder != Some(WorkerId(r.worker_id)) {
            Counters::add(&self.shared.counters.not_allowed, 1);
            let reason = format!(
                "{lease} is not a live lease of worker {}: only the holder of a task's live lease completes it",
                WorkerId(r.worker_id)
            );
            warn!(%lease, %reason, "completion refused");
            let result = pb::complete_task_response::Result::Rejected(pb::Rejected { reason });
            return Ok(Response::new(pb::CompleteTaskResponse { result: Some(result) }));
        }
        let mut results = Vec::with_capacity(r.slices.len());
        for s in &r.slices {
            let slice = s
                .slice
                .as_ref()
                .ok_or(ServiceError::MissingField { what: "slice" })?;
            let SliceRef { key, hash } = SliceRef::from_wire(slice).map_err(ServiceError::from)?;
            results.push(SliceResult {
                key,
                hash,
                positions: s.positions,
            });
        }
        // Every reported slice must be in the store with the reported hash (checked on upload;
        // a lost slice solved again is read whole: its lost copy may claim the hash too).
        let this = self.clone();
        let missing = tokio::task::spawn_blocking(move || {
            let missing = results
                .iter()
                .find(|r| {
                    if this.lock().scheduler.under_repair(&r.key, lease) {
                        let mut sink = |_: &[u16]| Ok::<(), StoreError>(());
                        return this
                            .shared
                            .store
                            .for_each_value_blocking(&r.key, &r.hash, &mut sink)
                            .is_err();
                    }
                    this.shared.store.claimed_hash_blocking(&r.key) != Some(r.hash)
                })
                .map(|r| r.key);
            (results, missing)
        });
        let (results, missing) = missing.await.map_err(ServiceError::from)?;
        if let Some(key) = missing {
            let reason = format!("slice {key} was not uploaded with the reported hash");
            warn!(%lease, %reason, "completion rejected");
            let result = pb::complete_task_response::Result::Rejected(pb::Rejected { reason });
            return Ok(Response::new(pb::CompleteTaskResponse { result: Some(result) }));
        }
        let this = self.clone();
        let (answer, writes) = tokio::task::spawn_blocking(move || {
            let mut state = this.lock();
            let completed = Event::TaskCompleted {
                lease,
                slices: results,
            };
            this.complete_locked(&mut state, completed)
        })
        .await
        .map_err(ServiceError::from)??;
        self.write_tables(writes).await?;
        Ok(Response::new(answer))
    }

    async fn upload_slice(
        &self,
        request: Request<Streaming<pb::UploadSliceChunk>>,
    ) -> Result<Response<pb::UploadSliceResponse>, Status> {
        self.upload(request).await
    }

    type FetchSliceStream = ChunkStream;

    async fn fetch_slice(
        &self,
        request: Request<pb::FetchSliceRequest>,
    ) -> Result<Response<ChunkStream>, Status> {
        self.fetch(request).await
    }

    async fn submit_job(
        &self,
        request: Request<pb::SubmitJobRequest>,
    ) -> Result<Response<pb::SubmitJobResponse>, Status> {
        let request = request.into_inner();
        let spec = if !request.roots.is_empty() {
            if !request.materials.is_empty() {
                return Err(ServiceError::MaterialsAndRoots.into());
            }
            let mut roots = Vec::new();
            for k in &request.roots {
                let root = from_wire(k).map_err(ServiceError::from)?;
                let men = root.material.men();
                if men > self.shared.max_men {
                    return Err(ServiceError::RootTooLarge {
                        root,
                        men,
                        max: self.shared.max_men,
                    }
                    .into());
                }
                roots.push(root);
            }
            roots.sort();
            roots.dedup();
            JobSpec::Analysis(roots)
        } else {
            let names = request.materials;
            if names.is_empty() {
                return Err(ServiceError::NoMaterial.into());
            }
            let mut materials = Vec::new();
            for name in &names {
                let m = Material::parse_table(name, self.shared.max_men).map_err(|e| {
                    ServiceError::BadMaterial {
                        name: name.clone(),
                        reason: e.to_string(),
                    }
                })?;
                if !materials.contains(&m) {
                    materials.push(m);
                }
            }
            JobSpec::Materials(materials)
        };
        let this = self.clone();
        let (response, writes) = tokio::task::spawn_blocking(move || this.take_new_job_blocking(spec))
            .await
            .map_err(ServiceError::from)??;
        self.write_tables(writes).await?;
        Ok(Response::new(response))
    }

    type MeetStream = MeetStream;

    async fn meet(&self, request: Request<Streaming<pb::MeetChunk>>) -> Result<Response<MeetStream>, Status> {
        Ok(Response::new(self.meet_parts(request.into_inner()).await?))
    }

    async fn job_status(
        &self,
        request: Request<pb::JobStatusRequest>,
    ) -> Result<Response<pb::JobStatusResponse>, Status> {
        let state = self.lock();
        let jobs = match request.get_ref().job_id {
            Some(j) => vec![self.job_info(&state, j).ok_or(ServiceError::UnknownJob(j))?],
            None => state
                .jobs
                .keys()
                .filter_map(|&j| self.job_info(&state, j))
                .collect(),
        };
        let workers_alive = state.scheduler.workers_alive() as u32;
        Ok(Response::new(pb::JobStatusResponse {
            jobs,
            workers_alive,
            bytes_uploaded: self.shared.counters.bytes_uploaded.load(Ordering::Relaxed),
            bytes_fetched: self.shared.counters.bytes_fetched.load(Ordering::Relaxed),
            bytes_met: self.shared.counters.bytes_met.load(Ordering::Relaxed),
        }))
    }
}

/// The most slices an analysis job may reach. A root of up to 6 men reaches about 10,000;
/// planning this many takes well under a second and some megabytes.
pub const MAX_ANALYSIS_SLICES: usize = 200_000;

/// Plans the slices an analysis job reaches (`None` for a materials job), refused past
/// [`MAX_ANALYSIS_SLICES`]. Run outside the lock every request waits on: under it, the plan is
/// only walked again ([`ReachablePlan::replan`]).
fn plan_analysis(spec: &JobSpec) -> Result<Option<ReachablePlan>, ServiceError> {
    match spec {
        JobSpec::Materials(_) => Ok(None),
        JobSpec::Analysis(roots) => {
            let none = |_: &SliceKey| false;
            Ok(Some(reachable_plan_within(
                roots,
                &none,
                &none,
                MAX_ANALYSIS_SLICES,
            )?))
        }
    }
}

/// Serves the coordinator on `listener` until `shutdown` resolves: opens the state (replaying
/// the journal), ticks the scheduler every second, checks the token on every request.
pub async fn serve(
    config: ServiceConfig,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), ServiceError> {
    serve_with_metrics(config, listener, None, shutdown).await
}

/// [`serve`], and, when `metrics` is given, the Prometheus metrics (`GET /metrics`, see
/// [`crate::metrics`]) over plain HTTP on that listener until the same shutdown.
pub async fn serve_with_metrics(
    config: ServiceConfig,
    listener: tokio::net::TcpListener,
    metrics: Option<tokio::net::TcpListener>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), ServiceError> {
    // A bad certificate or key stops the start before the state is touched.
    let tls = config.tls.as_ref().map(TlsIdentity::server_config).transpose()?;
    let open_config = config.clone();
    let service =
        tokio::task::spawn_blocking(move || CoordinatorService::open_blocking(&open_config)).await??;
    if config.token.is_none() {
        warn!("no cluster token: every caller is accepted");
    }
    let ticker = {
        let service = service.clone();
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(Duration::from_secs(1));
            loop {
                interval.tick().await;
                service.tick();
            }
        })
    };
    let metrics_server = match metrics {
        Some(l) => {
            let addr = l.local_addr().ok();
            info!(addr = ?addr, "metrics listening (GET /metrics)");
            let source = service.clone();
            let router = crate::metrics::router(Arc::new(move || source.metrics_snapshot()));
            Some(tokio::spawn(async move { axum::serve(l, router).await }))
        }
        None => None,
    };
    let addr = listener.local_addr().ok();
    info!(addr = ?addr, tls = tls.is_some(), tables = %config.tables.display(), state = %config.state.display(), "coordinator listening");
    // Bounded per connection: concurrent streams (an upload or a fetch each) and requests.
    let mut builder = tonic::transport::Server::builder()
        .max_concurrent_streams(Some(MAX_STREAMS_PER_CONNECTION))
        .concurrency_limit_per_connection(MAX_STREAMS_PER_CONNECTION as usize);
    if let Some(tls) = tls {
        builder = builder.tls_config(tls)?;
    }
    let result = builder
        .add_service(service.into_server(ServerAuth::new(config.token.as_deref())))
        .serve_with_incoming_shutdown(tokio_stream::wrappers::TcpListenerStream::new(listener), shutdown)
        .await;
    ticker.abort();
    if let Some(m) = metrics_server {
        if m.is_finished() {
            if let Ok(Err(e)) = m.await {
                return Err(ServiceError::Metrics(e));
            }
        } else {
            m.abort();
        }
    }
    result?;
    info!("coordinator stopped");
    Ok(())
}

#[cfg(test)]
mod name_tests {
    use super::printable_name;

    #[test]
    fn worker_names_are_bounded_and_printable() {
        assert_eq!(printable_name("node-7"), "node-7");
        let forged = "w\n2026-12-01T00:00:00Z  INFO job done\u{1b}[31m\u{202e}";
        let shown = printable_name(forged);
        assert!(
            !shown.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{shown:?}"
        );
        assert!(shown.contains("\\n") && shown.contains("\\u{1b}"), "{shown:?}");
        let long = "x".repeat(10_000);
        assert_eq!(printable_name(&long).chars().count(), 65);
    }
}

#[cfg(test)]
mod tests {
    use tonic::transport::Endpoint;
    use zermelo_chess::index::SliceIndexer;
    use zermelo_proto::auth::ClientAuth;
    use zermelo_proto::coordinator_client::CoordinatorClient;
    use zermelo_proto::wire::{decode_values, encode_values};

    use super::*;

    type Client = CoordinatorClient<
        tonic::service::interceptor::InterceptedService<tonic::transport::Channel, ClientAuth>,
    >;

    struct Running {
        client: Client,
        stop: tokio::sync::oneshot::Sender<()>,
        server: tokio::task::JoinHandle<Result<(), ServiceError>>,
    }

    async fn start(dir: &Path) -> Running {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut config = ServiceConfig::new(dir.join("tables"));
        config.state = dir.join("state");
        config.token = Some("t".into());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(config, listener, async {
            stopped.await.ok();
        }));
        let mut attempts = 0;
        let channel = loop {
            match Endpoint::from_shared(format!("http://{addr}"))
                .unwrap()
                .connect()
                .await
            {
                Ok(c) => break c,
                Err(e) if attempts > 100 => panic!("{e}"),
                Err(_) => {
                    attempts += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        };
        let client = CoordinatorClient::with_interceptor(channel, ClientAuth::new(Some("t")).unwrap());
        Running { client, stop, server }
    }

    async fn stop(r: Running) {
        drop(r.client);
        r.stop.send(()).unwrap();
        r.server.await.unwrap().unwrap();
    }

    /// Registers a worker and asks for a task: the worker's id and the answer.
    async fn register_and_lease(client: &mut Client) -> (u64, pb::LeaseTaskResponse) {
        let register = pb::RegisterRequest {
            worker_name: "w".into(),
            protocol_version: pb::PROTOCOL_VERSION,
            cores: 1,
        };
        let Some(pb::register_response::Result::Registered(reg)) =
            client.register(register).await.unwrap().into_inner().result
        else {
            panic!("not registered")
        };
        let lease = client
            .lease_task(pb::LeaseTaskRequest {
                worker_id: reg.worker_id,
            })
            .await
            .unwrap()
            .into_inner();
        (reg.worker_id, lease)
    }

    async fn job_state(client: &mut Client) -> pb::JobState {
        let jobs = client
            .job_status(pb::JobStatusRequest { job_id: Some(1) })
            .await
            .unwrap()
            .into_inner()
            .jobs;
        pb::JobState::try_from(jobs[0].state).unwrap()
    }

    fn upload(
        lease_id: u64,
        key: &pb::SliceKey,
        values: &[u16],
        hash: [u8; 32],
    ) -> Vec<pb::UploadSliceChunk> {
        let wire = encode_values(values);
        let header = pb::SliceHeader {
            key: Some(key.clone()),
            total_length: wire.len() as u64,
            content_hash: hash.to_vec(),
            positions: values.len() as u64,
        };
        pb::slice_chunks(header, &wire, 1000)
            .enumerate()
            .map(|(i, chunk)| pb::UploadSliceChunk {
                lease_id: if i == 0 { lease_id } else { 0 },
                chunk: Some(chunk),
            })
            .collect()
    }

    /// A whole job over loopback: a corrupted upload and a completion of a slice never uploaded
    /// are refused, the table is written from the uploaded values, and a restarted coordinator
    /// resumes from its journal (the job done, nothing to lease, a lost table written again).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_job_over_loopback_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = start(dir.path()).await;
        let job = r
            .client
            .submit_job(pb::SubmitJobRequest {
                materials: vec!["kqvk".into()],
                roots: Vec::new(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!((job.job_id, job.slices_total), (1, 1));
        assert_eq!(job_state(&mut r.client).await, pb::JobState::Queued);

        let (worker_id, lease) = register_and_lease(&mut r.client).await;
        let Some(pb::lease_task_response::Result::Task(task)) = lease.result else {
            panic!("no task: {lease:?}")
        };
        let key = task.slices[0].key.clone().unwrap();
        assert_eq!(key.material, "KQvK");
        let chess_key = from_wire(&key).unwrap();
        let n = SliceIndexer::new(chess_key).size() as usize;
        // True values: the coordinator checks what it is sent.
        let values =
            zermelo_worker::solver::solve_slice(&chess_key, &zermelo_worker::tables::SliceMap::new(), 1)
                .unwrap();
        assert_eq!(values.len(), n);
        let hash = zermelo_proto::keys::slice_hash(&chess_key, &values);

        // A hash that does not match the bytes is refused, and nothing is stored.
        let mut wrong = hash;
        wrong[0] ^= 1;
        let err = r
            .client
            .upload_slice(tokio_stream::iter(upload(task.lease_id, &key, &values, wrong)))
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::DataLoss, "{err:?}");
        let solved = pb::SolvedSlice {
            slice: Some(pb::SliceRef {
                key: Some(key.clone()),
                hash: hash.to_vec(),
            }),
            positions: n as u64,
        };
        let complete = pb::CompleteTaskRequest {
            worker_id,
            lease_id: task.lease_id,
            slices: vec![solved],
            verdict: None,
        };
        let answer = r
            .client
            .complete_task(complete.clone())
            .await
            .unwrap()
            .into_inner();
        assert!(
            matches!(
                answer.result,
                Some(pb::complete_task_response::Result::Rejected(_))
            ),
            "{answer:?}"
        );

        let stored = r
            .client
            .upload_slice(tokio_stream::iter(upload(task.lease_id, &key, &values, hash)))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(stored.stored, std::slice::from_ref(&key));
        let answer = r.client.complete_task(complete).await.unwrap().into_inner();
        assert_eq!(
            answer.result,
            Some(pb::complete_task_response::Result::Accepted(pb::Accepted {
                job_done: true
            }))
        );
        assert_eq!(job_state(&mut r.client).await, pb::JobState::Done);

        let table_path = dir.path().join("tables/KQvK.zmt");
        let table = Table::open(&table_path).unwrap();
        assert_eq!(table.read_slice(0).unwrap(), values);
        drop(table);

        // Fetched back, with its hash.
        let mut stream = r
            .client
            .fetch_slice(pb::FetchSliceRequest {
                keys: vec![key.clone()],
            })
            .await
            .unwrap()
            .into_inner();
        let mut assembler = zermelo_proto::SliceAssembler::new();
        let mut got = Vec::new();
        while let Some(chunk) = stream.message().await.unwrap() {
            got.extend(assembler.push(chunk).unwrap());
        }
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0.content_hash, hash.to_vec());
        assert_eq!(decode_values(&got[0].1, n as u64).unwrap(), values);
        // The slice bytes that went over the wire, as the status reports them.
        let totals = r
            .client
            .job_status(pb::JobStatusRequest { job_id: None })
            .await
            .unwrap()
            .into_inner();
        let len = got[0].1.len() as u64;
        assert_eq!(totals.bytes_fetched, len);
        // Uploaded twice: once with a wrong hash (refused, but its bytes came), once right.
        assert_eq!(totals.bytes_uploaded, 2 * len, "{totals:?}");
        stop(r).await;

        // Restart without the table: it is written again from the store; the job is done.
        std::fs::remove_file(&table_path).unwrap();
        let mut r = start(dir.path()).await;
        assert_eq!(job_state(&mut r.client).await, pb::JobState::Done);
        assert_eq!(Table::open(&table_path).unwrap().read_slice(0).unwrap(), values);
        let (worker_id, lease) = register_and_lease(&mut r.client).await;
        assert!(
            matches!(lease.result, Some(pb::lease_task_response::Result::NoTask(_))),
            "{lease:?}"
        );
        // The old worker id is unknown to the new coordinator's scheduler.
        let lease = r
            .client
            .lease_task(pb::LeaseTaskRequest {
                worker_id: worker_id - 1,
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            lease.result,
            Some(pb::lease_task_response::Result::NoTask(pb::NoTask {
                reason: pb::no_task::Reason::UnknownWorker as i32,
                retry_after_ms: 0
            }))
        );
        stop(r).await;
    }

    #[test]
    fn errors_map_to_their_grpc_codes() {
        assert_eq!(
            ServiceError::Unauthenticated.status().code(),
            tonic::Code::Unauthenticated
        );
        assert_eq!(
            ServiceError::NoMaterial.status().code(),
            tonic::Code::InvalidArgument
        );
        assert_eq!(ServiceError::UnknownJob(3).status().code(), tonic::Code::NotFound);
        assert_eq!(
            ServiceError::JournalBroken("disk".into()).status().code(),
            tonic::Code::Unavailable
        );
    }
}
