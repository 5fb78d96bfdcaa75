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

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
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
use zermelo_proto::{FramingError, SliceFramer};
use zermelo_storage::{Metric, Table, TableMeta, TableWriter, WriteOptions};

use crate::check::{UploadCheck, Watch};
use crate::journal::{JobSpec, Journal, JournalError, Record};
use crate::metrics::{CounterValues, Counters, Snapshot};
use crate::plan::{plan, reachable_plan_within, MaterialPlan, ReachablePlan, TooManySlices};
use crate::schedule::{
    self, Action, Event, Hash, JobId, LeaseId, Millis, NoTask, ResumeConflict, Scheduler, SliceResult,
    WorkerId,
};
use crate::store::{from_wire, to_wire, IncomingSlice, SliceStore, StoreError};

/// Bytes of slice data per stream chunk (under gRPC's 4 MiB message limit).
pub const CHUNK_BYTES: usize = 1 << 20;

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
    /// A test hook, 0 in real use: flip one byte of the payload of the first this many slice
    /// downloads served (after the stored copy passed its hash check, with the right hash in the
    /// header), so that tests can show a worker detecting a transfer corrupted on the way.
    pub fault_corrupt_downloads: u64,
    /// Serve gRPC over TLS with this certificate and key; plain HTTP/2 when `None`.
    pub tls: Option<TlsIdentity>,
}

/// The coordinator's TLS certificate (chain) and private key, PEM-encoded.
#[derive(Clone)]
pub struct TlsIdentity {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
}

impl std::fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsIdentity")
            .field("cert_pem", &format_args!("{} bytes", self.cert_pem.len()))
            .field("key_pem", &format_args!("(hidden)"))
            .finish()
    }
}

impl TlsIdentity {
    /// The tonic server TLS configuration, after checking that the PEM holds a certificate and
    /// a private key that rustls accepts.
    pub fn server_config(&self) -> Result<tonic::transport::ServerTlsConfig, ServiceError> {
        let bad = |reason: String| ServiceError::Tls(reason);
        if !contains(&self.cert_pem, b"-----BEGIN CERTIFICATE-----") {
            return Err(bad("the certificate file holds no PEM certificate".into()));
        }
        if !contains(&self.key_pem, b"PRIVATE KEY-----") {
            return Err(bad("the key file holds no PEM private key".into()));
        }
        let identity = tonic::transport::Identity::from_pem(&self.cert_pem, &self.key_pem);
        let config = tonic::transport::ServerTlsConfig::new().identity(identity);
        // The certificate and key are parsed (and matched) only when a server takes them.
        tonic::transport::Server::builder()
            .tls_config(config.clone())
            .map_err(|e| bad(error_chain(&e)))?;
        Ok(config)
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// An error and its sources, joined by ": ".
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
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
            fault_corrupt_downloads: 0,
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
    #[error("slice {key} is not finished")]
    NotFinished { key: SliceKey },
    #[error("the stored copy of slice {key} is lost: it is solved again")]
    SliceLost { key: SliceKey },
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
            | ServiceError::Framing(_) => Code::InvalidArgument,
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

/// Checks the cluster token of every request before the service sees it.
#[derive(Clone, Debug)]
pub struct ServerAuth {
    token: Option<Arc<str>>,
}

impl ServerAuth {
    pub fn new(token: Option<&str>) -> ServerAuth {
        ServerAuth {
            token: token.map(Arc::from),
        }
    }
}

impl Interceptor for ServerAuth {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        match &self.token {
            Some(t) if !pb::auth::token_matches(request.metadata(), t) => {
                Err(ServiceError::Unauthenticated.into())
            }
            _ => Ok(request),
        }
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
    refused: HashSet<WorkerId>,
}

struct Shared {
    state: Mutex<State>,
    store: SliceStore,
    tables: PathBuf,
    max_men: u32,
    clock: Instant,
    /// Counts since start (for `JobStatus` and the metrics).
    counters: Counters,
    /// Downloads still to corrupt ([`ServiceConfig::fault_corrupt_downloads`]).
    corrupt_downloads_left: AtomicU64,
    /// The check of uploads.
    check: UploadCheck,
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
        let store = SliceStore::open(&config.state.join("slices"))?;
        let (journal, replay) = Journal::open(&config.state.join("journal"))?;
        let mut sched_config = config.schedule.clone();
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
                refused: HashSet::new(),
            }),
            store,
            tables: config.tables.clone(),
            max_men: config.max_men,
            clock: Instant::now(),
            counters: Counters::default(),
            corrupt_downloads_left: AtomicU64::new(config.fault_corrupt_downloads),
            check: UploadCheck::new(config.check_sample, config.check_whole_positions),
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
        let actions = state.scheduler.handle(
            self.now(),
            Event::JobSubmitted {
                job,
                plan: plan.clone(),
            },
        );
        let mut accepted = None;
        for a in actions {
            match a {
                Action::JobRejected { job, reason } => return Err(ServiceError::JobRejected { job, reason }),
                a @ Action::JobAccepted { .. } => accepted = Some(a),
                other => self.note(&other),
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

    /// The materials of a job's plan that no job has planned yet and whose table is already
    /// complete and valid in the tables directory (see [`table_is_complete`]), each with its
    /// slices: read from the table (each checked against its content hash) and put into the
    /// store, so that workers can fetch them. Blocking.
    fn adopt_tables_blocking(&self, materials: &[Material]) -> Vec<(Material, Vec<SliceResult>)> {
        let candidates: Vec<MaterialPlan> = {
            let state = self.lock();
            plan(materials)
                .materials
                .into_iter()
                .filter(|mp| !state.materials.contains_key(&mp.material))
                .collect()
        };
        let mut adopted = Vec::new();
        for mp in candidates {
            let path = self
                .shared
                .tables
                .join(zermelo_storage::table_file_name(&mp.material.to_string()));
            if !path.exists() {
                continue;
            }
            match self.adopt_table_blocking(&mp, &path) {
                Ok(Some(slices)) => {
                    info!(
                        material = %mp.material,
                        slices = slices.len(),
                        positions = mp.positions,
                        "table already complete and valid: its slices are taken as finished, not solved"
                    );
                    adopted.push((mp.material, slices));
                }
                Ok(None) => {
                    info!(material = %mp.material, "table present but not complete: it is built again")
                }
                Err(e) => {
                    warn!(material = %mp.material, error = %e, "table present but unreadable: it is built again")
                }
            }
        }
        adopted
    }

    /// One material of [`adopt_tables_blocking`](Self::adopt_tables_blocking): `None` if the file
    /// is not exactly the material's planned slices with good checksums. Blocking.
    fn adopt_table_blocking(
        &self,
        mp: &MaterialPlan,
        path: &Path,
    ) -> Result<Option<Vec<SliceResult>>, ServiceError> {
        let material = mp.material;
        let table = Table::open(path).map_err(|source| ServiceError::Table { material, source })?;
        let mut expected: Vec<[u64; 2]> = mp.slices().map(|s| s.raw()).collect();
        expected.sort();
        let found: Vec<[u64; 2]> = table.slices().iter().map(|s| s.key).collect();
        if !written_by_this_build(&table, material) || found != expected || table.verify_checksum().is_err() {
            return Ok(None);
        }
        let mut slices = Vec::with_capacity(expected.len());
        for key in mp.slices() {
            let i = table
                .find_slice(key.raw())
                .expect("the table holds every planned slice");
            let (hash, positions) = (table.slices()[i].hash, table.slices()[i].count);
            self.store_from_table_blocking(key, &table, i)?;
            slices.push(SliceResult {
                key: *key,
                hash,
                positions,
            });
        }
        Ok(Some(slices))
    }

    /// Stores slice `key` from slice `i` of `table` (its material's), under the hash the table
    /// gives it. Read a block at a time (a slice may be larger than memory), re-encoded for the
    /// wire as it goes; the table checks each block's checksum and the slice's content hash at
    /// its end, and the store checks the values it receives against that hash. Blocking.
    fn store_from_table_blocking(&self, key: &SliceKey, table: &Table, i: usize) -> Result<(), ServiceError> {
        let material = key.material;
        let entry = &table.slices()[i];
        self.shared
            .store
            .put_values_blocking(key, entry.count, &entry.hash, &mut |sink| {
                let mut failed = None;
                let streamed = table.stream_slice(i, |values| {
                    if failed.is_none() {
                        failed = sink(values).err();
                    }
                });
                if let Some(e) = failed {
                    return Err(ServiceError::from(e));
                }
                streamed.map_err(|source| ServiceError::Table { material, source })
            })?;
        Ok(())
    }

    /// Writes slice `key`'s stored copy again from its material's table, when the copy was
    /// found damaged: only if the table holds the slice with the hash recorded for it (checked
    /// again by the store as the values arrive), so a repaired copy is the very slice that was
    /// accepted. `false` when there is no such table. Blocking.
    fn repair_from_table_blocking(&self, key: &SliceKey, recorded: &Hash) -> Result<bool, ServiceError> {
        let material = key.material;
        let path = self
            .shared
            .tables
            .join(zermelo_storage::table_file_name(&material.to_string()));
        if !path.exists() {
            return Ok(false);
        }
        let table = Table::open(&path).map_err(|source| ServiceError::Table { material, source })?;
        let Some(i) = table.find_slice(key.raw()) else {
            return Ok(false);
        };
        let entry = &table.slices()[i];
        if !written_by_this_build(&table, material) || &entry.hash != recorded {
            return Ok(false);
        }
        self.store_from_table_blocking(key, &table, i)?;
        Counters::add(&self.shared.counters.slices_repaired, 1);
        warn!(%key, table = %path.display(), "a damaged stored slice was written again from its table");
        Ok(true)
    }

    /// `read` of a stored slice; if it finds the stored copy damaged, the copy is repaired from
    /// its material's table ([`repair_from_table_blocking`](Self::repair_from_table_blocking))
    /// and read again. Blocking.
    fn read_stored_blocking<T>(
        &self,
        key: &SliceKey,
        recorded: &Hash,
        read: impl Fn() -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match read() {
            Err(e @ (StoreError::Corrupt { .. } | StoreError::Missing { .. })) => {
                match self.repair_from_table_blocking(key, recorded) {
                    Ok(true) => read(),
                    Ok(false) => {
                        self.slice_lost(key, &e);
                        Err(e)
                    }
                    Err(table) => {
                        warn!(%key, error = %table, "a damaged stored slice could not be repaired from its table");
                        self.slice_lost(key, &e);
                        Err(e)
                    }
                }
            }
            other => other,
        }
    }

    /// A finished slice's stored copy is lost (`why`) and no table holds it: a worker solves it
    /// again ([`Event::SliceLost`]), before any task; it must come back with its recorded hash.
    fn slice_lost(&self, key: &SliceKey, why: &StoreError) {
        let now = self.now();
        let actions = self.lock().scheduler.handle(now, Event::SliceLost { key: *key });
        for a in &actions {
            match a {
                Action::RepairQueued { queued: true, .. } => {
                    Counters::add(&self.shared.counters.slices_lost, 1);
                    warn!(%key, error = %why, "a stored slice is lost and no table holds it: it is solved again");
                }
                Action::RepairQueued { queued: false, .. } => {}
                other => self.note(other),
            }
        }
    }

    /// Writes a material's table from the stored slices (every one finished), with the bytes of
    /// `zermelo solve`; records the outcome. Blocking.
    fn write_table_blocking(&self, material: Material) {
        // A slice found lost is solved again by a worker: if that happened while this write
        // failed, the table is written again at once.
        while self.write_table_once_blocking(material) {}
    }

    /// [`write_table_blocking`](Self::write_table_blocking), once: `true` when it should be
    /// written again (a lost slice it needed is back already).
    fn write_table_once_blocking(&self, material: Material) -> bool {
        let (mp, hashes) = {
            let state = self.lock();
            let ms = &state.materials[&material];
            let hashes: Vec<_> = ms.plan.slices().map(|s| state.scheduler.finished(s)).collect();
            (ms.plan.clone(), hashes)
        };
        let result = (|| -> Result<u64, ServiceError> {
            let mut slices: Vec<(SliceKey, Hash)> = Vec::with_capacity(hashes.len());
            for (key, hash) in mp.slices().zip(&hashes) {
                slices.push((*key, hash.ok_or(ServiceError::NotFinished { key: *key })?));
            }
            slices.sort_by_key(|(k, _)| k.raw());
            let meta = TableMeta {
                material: material.to_string(),
                metric: Metric::Dtm,
                index_layout: INDEX_LAYOUT,
            };
            let path = self
                .shared
                .tables
                .join(zermelo_storage::table_file_name(&material.to_string()));
            let table_error = |source| ServiceError::Table { material, source };
            // Each slice is streamed from the store into the table, a piece at a time: no
            // slice is held whole, however large.
            let mut writer = TableWriter::create(
                &path,
                &meta,
                slices.len() as u64,
                mp.positions,
                &WriteOptions::default(),
            )
            .map_err(table_error)?;
            for (key, hash) in &slices {
                writer
                    .begin_slice(key.raw(), SliceIndexer::new(*key).size())
                    .map_err(table_error)?;
                let streamed =
                    self.shared
                        .store
                        .for_each_value_blocking(key, hash, &mut |values: &[u16]| {
                            writer.push_values(values).map_err(table_error)
                        });
                if let Err(ServiceError::Store(
                    e @ (StoreError::Corrupt { .. } | StoreError::Missing { .. }),
                )) = &streamed
                {
                    // The table is written again once the slice is solved again.
                    self.slice_lost(key, e);
                    return Err(ServiceError::SliceLost { key: *key });
                }
                streamed?;
                writer.end_slice().map_err(table_error)?;
            }
            let summary = writer.finish().map_err(table_error)?;
            Ok(summary.bytes)
        })();
        let mut state = self.lock();
        let back = |key: &SliceKey| !state.scheduler.is_lost(key);
        let (table, again) = match result {
            Ok(bytes) => {
                info!(%material, positions = mp.positions, bytes, "table written");
                (TableState::Written, false)
            }
            Err(ServiceError::SliceLost { key }) if back(&key) => (TableState::Writing, true),
            Err(ServiceError::SliceLost { key }) => {
                warn!(%material, %key, "table not written until its lost slice is solved again");
                (TableState::AwaitingRepair, false)
            }
            Err(e) => {
                error!(%material, error = %e, "table not written");
                (TableState::Failed(e.to_string()), false)
            }
        };
        state
            .materials
            .get_mut(&material)
            .expect("a planned material")
            .table = table;
        again
    }

    /// Applies the scheduler's answer to a completion: journals the finished slices (durably),
    /// counts them per material. Returns the answer and the tables now to write.
    fn complete_locked(
        &self,
        state: &mut State,
        lease: LeaseId,
        results: Vec<SliceResult>,
    ) -> Result<(pb::CompleteTaskResponse, Vec<Material>), ServiceError> {
        if let Some(reason) = &state.journal_broken {
            return Err(ServiceError::JournalBroken(reason.clone()));
        }
        let now = self.now();
        let actions = state.scheduler.handle(
            now,
            Event::TaskCompleted {
                lease,
                slices: results,
            },
        );
        let records: Vec<Record> = actions
            .iter()
            .filter_map(|a| match a {
                Action::SliceFinished(r) => Some(Record::SliceFinished(*r)),
                _ => None,
            })
            .collect();
        if let Err(e) = state.journal.append(&records) {
            // The scheduler counts these slices finished, but they are not durable: accept
            // nothing more until a restart replays the journal.
            state.journal_broken = Some(e.to_string());
            return Err(e.into());
        }
        let counters = &self.shared.counters;
        Counters::add(&counters.journal_records, records.len() as u64);
        let mut writes = Vec::new();
        let mut answer = None;
        let mut job_done = false;
        for a in &actions {
            match a {
                Action::SliceFinished(r) => {
                    Counters::add(&counters.slices_solved, 1);
                    Counters::add(&counters.positions_solved, r.positions);
                    if let Some(ms) = state.materials.get_mut(&r.key.material) {
                        ms.unfinished -= 1;
                        if ms.unfinished == 0 && ms.table == TableState::Pending {
                            ms.table = TableState::Writing;
                            writes.push(r.key.material);
                        }
                    }
                }
                Action::Accepted { new, duplicates, .. } => {
                    debug!(%lease, new, duplicates, "completion accepted");
                    answer = Some(pb::complete_task_response::Result::Accepted(pb::Accepted {
                        job_done: false,
                    }));
                }
                Action::Rejected { reason, .. } => {
                    warn!(%lease, %reason, "completion rejected");
                    answer = Some(pb::complete_task_response::Result::Rejected(pb::Rejected {
                        reason: reason.to_string(),
                    }));
                }
                Action::JobDone { job } => {
                    info!(%job, "every slice of the job is finished");
                    job_done = true;
                }
                Action::Repaired { key } => {
                    Counters::add(&counters.slices_resolved, 1);
                    info!(%key, "a lost slice was solved again, with its recorded hash");
                    // A table that could not be written without it is written now.
                    if let Some(ms) = state.materials.get_mut(&key.material) {
                        if ms.unfinished == 0
                            && matches!(ms.table, TableState::Failed(_) | TableState::AwaitingRepair)
                        {
                            ms.table = TableState::Writing;
                            writes.push(key.material);
                        }
                    }
                }
                other => self.note(other),
            }
        }
        if let Some(pb::complete_task_response::Result::Accepted(a)) = &mut answer {
            a.job_done = job_done;
        }
        // Rate samples.
        let progress: Vec<(u64, u64)> = state
            .scheduler
            .jobs()
            .map(|(j, p)| (j.0, p.positions_done))
            .collect();
        for (job, done) in progress {
            if let Some(rec) = state.jobs.get_mut(&job) {
                if rec.samples.back().map(|s| s.1) != Some(done) {
                    rec.samples.push_back((now, done));
                }
                while rec.samples.len() > 2 && rec.samples[1].0 + 60_000 <= now {
                    rec.samples.pop_front();
                }
            }
        }
        let answer = answer.expect("a completion is accepted or rejected");
        Ok((pb::CompleteTaskResponse { result: Some(answer) }, writes))
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

    /// Runs the tables to write on the blocking pool, one after the other.
    async fn write_tables(&self, writes: Vec<Material>) -> Result<(), ServiceError> {
        for m in writes {
            let this = self.clone();
            tokio::task::spawn_blocking(move || this.write_table_blocking(m)).await?;
        }
        Ok(())
    }

    /// A finished slice's values from the store, for the check of an upload (`None` when it is
    /// not finished, or cannot be read). Blocking.
    fn read_finished_blocking(&self, k: &SliceKey) -> Option<Vec<u16>> {
        let hash = self.lock().scheduler.finished(k)?;
        self.read_stored_blocking(k, &hash, || {
            let mut values = Vec::new();
            let mut sink = |v: &[u16]| {
                values.extend_from_slice(v);
                Ok::<(), StoreError>(())
            };
            self.shared.store.for_each_value_blocking(k, &hash, &mut sink)?;
            Ok(values)
        })
        .ok()
    }

    /// How an upload of slice `key` is watched as it arrives, for the check ([`crate::check`]).
    /// Blocking.
    fn watch_upload_blocking(&self, key: &SliceKey, positions: u64) -> Result<Watch, StoreError> {
        let read = |k: &SliceKey| self.read_finished_blocking(k);
        let watch = self
            .shared
            .check
            .watch_blocking(key, positions, &read)
            .map_err(|reason| StoreError::FailedCheck { key: *key, reason })?;
        if matches!(watch, Watch::Stream(_)) {
            Counters::add(&self.shared.counters.slices_streamed, 1);
        }
        Ok(watch)
    }

    /// Checks an uploaded slice's values before it is accepted ([`crate::check`]), reading its
    /// successors from the store. Blocking.
    fn check_upload_blocking(&self, key: &SliceKey, watch: Option<Watch>) -> Result<(), StoreError> {
        let read = |k: &SliceKey| self.read_finished_blocking(k);
        let c = &self.shared.counters;
        let Some(watch) = watch else {
            return Err(StoreError::FailedCheck {
                key: *key,
                reason: "the upload was not watched".into(),
            });
        };
        match self.shared.check.check_blocking(key, watch, &read) {
            Ok(report) => {
                Counters::add(&c.slices_checked, 1);
                Counters::add(&c.positions_derived, report.derived);
                debug!(%key, derived = report.derived, skipped = report.skipped, "upload checked");
                Ok(())
            }
            Err(reason) => Err(StoreError::FailedCheck { key: *key, reason }),
        }
    }

    /// Refuses a worker from now on (an upload of it failed the check); its leases go to others.
    fn refuse_worker(&self, worker: WorkerId) {
        let now = self.now();
        let mut state = self.lock();
        state.refused.insert(worker);
        let actions = state.scheduler.handle(now, Event::WorkerLost { worker });
        actions.iter().for_each(|a| self.note(a));
    }

    /// Expires leases and forgets silent workers: call every second or so.
    pub fn tick(&self) {
        let now = self.now();
        let actions = self.lock().scheduler.handle(now, Event::Tick);
        actions.iter().for_each(|a| self.note(a));
    }

    /// Logs a scheduler action that needs no answer, and counts the lease events.
    fn note(&self, a: &Action) {
        let c = &self.shared.counters;
        match a {
            Action::Expired { .. } => Counters::add(&c.leases_expired, 1),
            Action::Revoked { .. } => Counters::add(&c.leases_revoked, 1),
            _ => {}
        }
        log_action(a);
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

/// Whether `table` is of `material` as this build writes tables: its index layout and the
/// current table format (an older format's slice hashes are not this build's: such a table is
/// built again, not taken over).
fn written_by_this_build(table: &Table, material: Material) -> bool {
    table.meta().material == material.to_string()
        && table.meta().index_layout == INDEX_LAYOUT
        && table.format_version() == zermelo_storage::FORMAT_VERSION
}

/// Whether the material's table file holds exactly its finished slices, with their hashes; with
/// `whole`, its checksum is checked too (the whole file read).
fn table_is_complete(tables: &Path, mp: &MaterialPlan, scheduler: &Scheduler, whole: bool) -> bool {
    let path = tables.join(zermelo_storage::table_file_name(&mp.material.to_string()));
    let Ok(table) = Table::open(&path) else {
        return false;
    };
    if !written_by_this_build(&table, mp.material) {
        return false;
    }
    let mut expected: Vec<([u64; 2], Option<schedule::Hash>)> =
        mp.slices().map(|s| (s.raw(), scheduler.finished(s))).collect();
    expected.sort();
    let found: Vec<([u64; 2], Option<schedule::Hash>)> =
        table.slices().iter().map(|s| (s.key, Some(s.hash))).collect();
    found == expected && (!whole || table.verify_checksum().is_ok())
}

fn log_action(a: &Action) {
    match a {
        Action::Expired { lease, worker } => {
            info!(%lease, %worker, "lease expired; its task goes to another worker")
        }
        Action::Revoked { lease, worker } => {
            info!(%lease, %worker, "lease revoked: its slices were finished by another")
        }
        Action::WorkerForgotten { worker } => info!(%worker, "worker silent too long, forgotten"),
        Action::JobDone { job } => info!(%job, "every slice of the job is finished"),
        other => debug!(action = ?other, "scheduler"),
    }
}

fn lease_response(task: &schedule::LeasedTask, now: Millis) -> pb::LeaseTaskResponse {
    let ttl = task.deadline.saturating_sub(now);
    pb::LeaseTaskResponse {
        result: Some(pb::lease_task_response::Result::Task(pb::Task {
            lease_id: task.lease.0,
            lease_ttl_ms: ttl,
            deadline_unix_ms: unix_ms() + ttl,
            job_id: task.job.0,
            slices: task.slices.iter().map(to_wire).collect(),
            successors: task.successors.iter().map(|(k, _)| to_wire(k)).collect(),
            successor_hashes: task.successors.iter().map(|(_, h)| h.to_vec()).collect(),
        })),
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
        let now = self.now();
        let actions = self.lock().scheduler.handle(
            now,
            Event::WorkerRegistered {
                name: r.worker_name.clone(),
                cores: r.cores,
            },
        );
        let mut result = None;
        for a in actions {
            match a {
                Action::Registered { worker, lease_ttl } => {
                    info!(%worker, name = %r.worker_name, cores = r.cores, "worker registered");
                    result = Some(pb::register_response::Result::Registered(pb::Registered {
                        worker_id: worker.0,
                        lease_ttl_ms: lease_ttl,
                    }));
                }
                other => self.note(&other),
            }
        }
        Ok(Response::new(pb::RegisterResponse { result }))
    }

    async fn lease_task(
        &self,
        request: Request<pb::LeaseTaskRequest>,
    ) -> Result<Response<pb::LeaseTaskResponse>, Status> {
        let worker = WorkerId(request.into_inner().worker_id);
        let now = self.now();
        let mut state = self.lock();
        if state.refused.contains(&worker) {
            Counters::add(&self.shared.counters.not_allowed, 1);
            return Err(Status::permission_denied(format!(
                "{worker} is refused: a slice it uploaded failed the coordinator's check of its values"
            )));
        }
        let actions = state.scheduler.handle(now, Event::LeaseRequested { worker });
        let mut answer = None;
        for a in actions {
            match a {
                Action::Lease(task) => {
                    debug!(lease = %task.lease, %worker, slices = task.slices.len(), positions = task.positions, "task leased");
                    Counters::add(&self.shared.counters.leases_granted, 1);
                    if let Some(job) = state.jobs.get_mut(&task.job.0) {
                        job.started = true;
                    }
                    answer = Some(lease_response(&task, now));
                }
                Action::NoTask(NoTask::Idle) => answer = Some(no_task(pb::no_task::Reason::Idle, 500)),
                Action::NoTask(NoTask::Waiting) => answer = Some(no_task(pb::no_task::Reason::Waiting, 200)),
                Action::NoTask(NoTask::UnknownWorker) => {
                    answer = Some(no_task(pb::no_task::Reason::UnknownWorker, 0))
                }
                other => self.note(&other),
            }
        }
        Ok(Response::new(answer.expect("a lease request is answered")))
    }

    async fn heartbeat(
        &self,
        request: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatResponse>, Status> {
        let r = request.into_inner();
        let now = self.now();
        let mut state = self.lock();
        let ttl = state.scheduler.config().lease_ttl;
        let leases = r.lease_ids.iter().map(|&l| LeaseId(l)).collect();
        let actions = state.scheduler.handle(
            now,
            Event::Heartbeat {
                worker: WorkerId(r.worker_id),
                leases,
            },
        );
        let mut answer = pb::HeartbeatResponse {
            lease_ttl_ms: ttl,
            ..Default::default()
        };
        for a in actions {
            match a {
                Action::LeaseStatus {
                    valid,
                    lost,
                    unknown_worker,
                } => {
                    answer.valid_lease_ids = valid.iter().map(|l| l.0).collect();
                    answer.lost_lease_ids = lost.iter().map(|l| l.0).collect();
                    answer.unknown_worker = unknown_worker;
                }
                other => self.note(&other),
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
        let holder = self.lock().scheduler.lease_holder(lease).map(|(w, _)| w);
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
            let key = from_wire(
                s.key
                    .as_ref()
                    .ok_or(ServiceError::MissingField { what: "slice key" })?,
            )
            .map_err(ServiceError::from)?;
            let hash: schedule::Hash = s.content_hash.as_slice().try_into().map_err(|_| {
                ServiceError::Store(StoreError::BadHashLength {
                    key,
                    len: s.content_hash.len(),
                })
            })?;
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
            this.complete_locked(&mut state, lease, results)
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
        let mut stream = request.into_inner();
        // Each slice goes to a temporary file in the store as its chunks arrive, decoded and
        // hashed on the way: an upload of any size takes a few megabytes here.
        let mut framer = SliceFramer::with_limit(u64::MAX);
        let mut incoming: Option<(SliceKey, pb::SliceKey, IncomingSlice)> = None;
        let mut stored = Vec::new();
        let mut bytes = 0u64;
        // The slices the upload's lease allows: those of its task, if the lease is live.
        let mut allowed: Option<Vec<SliceKey>> = None;
        let mut uploader = None;
        while let Some(message) = stream.message().await? {
            if allowed.is_none() {
                let lease = LeaseId(message.lease_id);
                let Some((worker, slices)) = self.lock().scheduler.lease_holder(lease) else {
                    Counters::add(&self.shared.counters.not_allowed, 1);
                    warn!(%lease, "upload without a live lease refused");
                    return Err(Status::permission_denied(format!(
                        "{lease} is not a live lease: only the holder of a task's live lease uploads its slices"
                    )));
                };
                allowed = Some(slices);
                uploader = Some((worker, lease));
            }
            let Some(chunk) = message.chunk else { continue };
            bytes += chunk.data.len() as u64;
            Counters::add(&self.shared.counters.bytes_uploaded, chunk.data.len() as u64);
            let piece = framer.push(chunk).map_err(ServiceError::from)?;
            if let Some(header) = piece.header {
                let wire_key = header.key.clone().expect("the framer checks for a key");
                let key = from_wire(&wire_key).map_err(ServiceError::from)?;
                if !allowed.as_ref().is_some_and(|a| a.contains(&key)) {
                    Counters::add(&self.shared.counters.not_allowed, 1);
                    warn!(%key, "upload of a slice outside the lease's task refused");
                    return Err(Status::permission_denied(format!(
                        "slice {key} is not in the task of this upload's lease"
                    )));
                }
                if header.total_length > max_wire_bytes(header.positions) {
                    return Err(ServiceError::from(FramingError::TooLarge {
                        key: key.to_string(),
                        length: header.total_length,
                        limit: max_wire_bytes(header.positions),
                    })
                    .into());
                }
                let this = self.clone();
                let begun = tokio::task::spawn_blocking(move || {
                    let mut begun =
                        this.shared
                            .store
                            .begin_put_blocking(&key, header.positions, &header.content_hash)?;
                    begun.watch(this.watch_upload_blocking(&key, header.positions)?);
                    Ok::<_, StoreError>(begun)
                })
                .await
                .map_err(ServiceError::from)?
                .map_err(ServiceError::from)?;
                incoming = Some((key, wire_key, begun));
            }
            let (key, wire_key, mut slice) = incoming.take().expect("a slice under way");
            let complete = piece.complete;
            let data = piece.data;
            let this = self.clone();
            let put = tokio::task::spawn_blocking(move || -> Result<_, StoreError> {
                slice.push_blocking(&data)?;
                if complete {
                    // A finished slice is never replaced: checked under the lock that
                    // completions are recorded under, and put in place under it.
                    let check = |watch: Option<Watch>| this.check_upload_blocking(&key, watch);
                    let (_, lease) = uploader.expect("an upload has a lease");
                    let announced = slice.announced();
                    slice.finish_with_blocking(check, |rename| {
                        let state = this.lock();
                        match state.scheduler.finished(&key) {
                            None => rename(),
                            // A lost slice solved again takes the lost copy's place, with the
                            // hash it was recorded with only.
                            Some(recorded)
                                if recorded == announced && state.scheduler.under_repair(&key, lease) =>
                            {
                                rename()
                            }
                            Some(_) => Err(StoreError::Finished { key }),
                        }
                    })?;
                    return Ok(None);
                }
                Ok(Some(slice))
            })
            .await
            .map_err(ServiceError::from)?;
            match &put {
                Err(e @ (StoreError::HashMismatch { .. } | StoreError::Wire { .. })) => {
                    warn!(%key, error = %e, "corrupt upload refused");
                    Counters::add(&self.shared.counters.uploads_refused, 1);
                }
                Err(e @ StoreError::Finished { .. }) => {
                    warn!(%key, error = %e, "upload of a finished slice refused");
                    Counters::add(&self.shared.counters.not_allowed, 1);
                }
                Err(e @ StoreError::FailedCheck { .. }) => {
                    Counters::add(&self.shared.counters.uploads_failed_check, 1);
                    let (worker, _) = uploader.expect("an upload has a lease");
                    warn!(%key, %worker, error = %e, "an upload failed the check: its worker is refused from now on, its leases given to others");
                    self.refuse_worker(worker);
                }
                _ => {}
            }
            match put.map_err(ServiceError::from)? {
                Some(slice) => incoming = Some((key, wire_key, slice)),
                None => {
                    debug!(%key, "slice stored");
                    stored.push(wire_key);
                }
            }
        }
        framer.finish().map_err(ServiceError::from)?;
        Ok(Response::new(pb::UploadSliceResponse { stored, bytes }))
    }

    type FetchSliceStream = ChunkStream;

    async fn fetch_slice(
        &self,
        request: Request<pb::FetchSliceRequest>,
    ) -> Result<Response<ChunkStream>, Status> {
        let keys = &request.get_ref().keys;
        if keys.len() > pb::MAX_FETCH_KEYS {
            return Err(Status::invalid_argument(format!(
                "a fetch names {} slices; at most {} a request",
                keys.len(),
                pb::MAX_FETCH_KEYS
            )));
        }
        let mut wanted = Vec::new();
        let mut seen = std::collections::HashSet::new();
        {
            let state = self.lock();
            for k in keys {
                let key = from_wire(k).map_err(ServiceError::from)?;
                if !seen.insert(key) {
                    continue; // named twice: served once
                }
                let hash = state
                    .scheduler
                    .finished(&key)
                    .ok_or(ServiceError::NotFinished { key })?;
                wanted.push((key, hash));
            }
        }
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<pb::SliceChunk, Status>>(8);
        let this = self.clone();
        tokio::spawn(async move {
            for (key, hash) in wanted {
                // Checked against its recorded hash (read once, in bounded memory), then sent
                // a chunk at a time from the file: no slice is held whole, however large.
                let store = this.clone();
                let got = tokio::task::spawn_blocking(move || {
                    store.read_stored_blocking(&key, &hash, || {
                        store.shared.store.open_checked_blocking(&key, &hash)
                    })
                })
                .await;
                let (file, positions, length) = match got {
                    Ok(Ok(opened)) => opened,
                    Ok(Err(e)) => {
                        if matches!(e, StoreError::Corrupt { .. }) {
                            Counters::add(&this.shared.counters.downloads_refused, 1);
                        }
                        let _ = tx.send(Err(ServiceError::from(e).status())).await;
                        return;
                    }
                    Err(e) => {
                        let _ = tx.send(Err(ServiceError::from(e).status())).await;
                        return;
                    }
                };
                let left = &this.shared.corrupt_downloads_left;
                // The test hook: the byte in the middle of the slice's bytes is flipped.
                let mut corrupt_at = (length > 0
                    && left
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                        .is_ok())
                .then(|| {
                    warn!(%key, byte = length / 2, "test hook: corrupting a slice download");
                    length / 2
                });
                let mut header = Some(pb::SliceHeader {
                    key: Some(to_wire(&key)),
                    total_length: length,
                    content_hash: hash.to_vec(),
                    positions,
                });
                let mut file = Some(file);
                let mut sent = 0u64;
                loop {
                    let mut f = file.take().expect("the file is given back after each read");
                    let want = (length - sent).min(CHUNK_BYTES as u64) as usize;
                    let read = tokio::task::spawn_blocking(move || {
                        use std::io::Read;
                        let mut data = vec![0u8; want];
                        f.read_exact(&mut data).map(|()| (f, data))
                    })
                    .await;
                    let mut data = match read {
                        Ok(Ok((f, data))) => {
                            file = Some(f);
                            data
                        }
                        Ok(Err(e)) => {
                            let e = StoreError::Corrupt {
                                key,
                                reason: format!("reading its file: {e}"),
                            };
                            let _ = tx.send(Err(ServiceError::from(e).status())).await;
                            return;
                        }
                        Err(e) => {
                            let _ = tx.send(Err(ServiceError::from(e).status())).await;
                            return;
                        }
                    };
                    if let Some(at) = corrupt_at.filter(|at| (sent..sent + want as u64).contains(at)) {
                        data[(at - sent) as usize] ^= 0x20;
                        corrupt_at = None;
                    }
                    sent += want as u64;
                    let chunk = pb::SliceChunk {
                        header: header.take(),
                        data,
                    };
                    // Counted when queued for the client (a chunk lost to a client that went
                    // away is counted too).
                    Counters::add(&this.shared.counters.bytes_fetched, chunk.data.len() as u64);
                    if tx.send(Ok(chunk)).await.is_err() {
                        return; // the client went away
                    }
                    if sent == length {
                        break;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
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
        let key = task.slices[0].clone();
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
            key: Some(key.clone()),
            content_hash: hash.to_vec(),
            positions: n as u64,
        };
        let complete = pb::CompleteTaskRequest {
            worker_id,
            lease_id: task.lease_id,
            slices: vec![solved],
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
