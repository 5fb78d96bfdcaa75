//! The worker as a gRPC client of the coordinator: registers, then loops: lease a task, check
//! that its slices can be solved within the worker's memory budget ([`task_memory`]), bring its
//! successor slices into memory (from the local [`SliceCache`], memory-mapped and hash-checked,
//! else fetched from the coordinator, hash-checked on arrival and fetched again on a mismatch),
//! keep the cache within its budget (never evicting what the task in hand needs), solve its
//! slices with [`solve_slice_resumable`] on the blocking pool (a pawnless slice past the budget
//! with its state paged through the cache folder, as `zermelo solve` does), each written into a cache file as its
//! values come out of the solver (never held whole, unless small enough to keep for the next
//! tasks), upload them from those files a chunk at a time with their content hashes, complete
//! the task. It heartbeats its lease while it works and drops the work of a lease it lost.
//!
//! Stopping (the `shutdown` future of [`run`] resolving) drops whatever is in flight: a slice is
//! stored by the coordinator only once all its bytes arrived and its hash checked, so a stop in
//! the middle of an upload never leaves half a slice anywhere.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};
use tonic::{Code, Status};
use tracing::{debug, info, info_span, warn, Instrument};
use zermelo_chess::index::{SliceIndexer, PAWNLESS_KING_PAIRS};
use zermelo_chess::SliceKey;
use zermelo_proto as pb;
use zermelo_proto::auth::ClientAuth;
use zermelo_proto::coordinator_client::CoordinatorClient;
use zermelo_proto::wire::SliceFile;
use zermelo_proto::wire::ValuesDecoder;
use zermelo_proto::{SliceAssembler, SliceFramer};
use zermelo_storage::Table;

use super::cache::{human_bytes, CacheError, NewTable, SliceCache, STALE};
use super::meet::{compress_segment, AtCoordinator, PartValues, Spool};
use crate::solver::par::for_each_chunk;
use crate::solver::{
    bits_paged_need, bits_solvable, bits_state_bytes, paged_least, paged_need, part_state_bytes,
    part_state_shares, slice_state_bytes, solve_part, solve_slice_bits, solve_slice_resumable, splittable,
    thread_bytes, Paging, SolveError, MIN_RESIDENT_KSLICES, SEG_INDICES,
};
use crate::tables::{SliceMap, SliceValues, READER_BYTES};
use zermelo_proto::keys::to_wire as key_to_wire;
use zermelo_proto::task::{self, Task, Work};

/// Fetches of one slice before the worker gives up on it (each arrival is hash-checked).
pub const FETCH_ATTEMPTS: usize = 3;

/// How a worker runs.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// The coordinator's URL, `http://host:port` (or `https://` with `tls_ca`).
    pub coordinator: String,
    /// PEM certificates of the CAs to trust for an `https://` coordinator.
    pub tls_ca: Option<Vec<u8>>,
    /// The local slice cache (created if missing).
    pub cache: PathBuf,
    /// The cache's budget in bytes: beyond it, the least recently used slice files are evicted
    /// (never those of the task in hand).
    pub cache_size: u64,
    /// Threads to solve with.
    pub threads: usize,
    /// The memory budget in bytes: a task whose slices cannot be solved within it (see
    /// [`task_memory`]) stops the worker with an error naming what it needs.
    pub memory: u64,
    /// The cluster token.
    pub token: Option<String>,
    /// A name for the coordinator's logs.
    pub name: String,
    /// Changes the solver's values before they are written: `None` in real use, and not
    /// reachable from the command line. Tests use it to run a worker with a broken solver, which
    /// the coordinator's check of uploads must catch.
    pub tamper: Option<Tamper>,
}

/// A change made to a solved slice's values (`key`, the index of the first of `values`): see
/// [`WorkerConfig::tamper`].
pub type Tamper = fn(key: &SliceKey, first: u64, values: &mut [u16]);

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("bad coordinator URL {url}: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("TLS: {0}")]
    Tls(String),
    #[error(transparent)]
    BadToken(#[from] pb::auth::BadToken),
    #[error("the coordinator refused this worker: {0}")]
    Refused(String),
    #[error("unauthenticated: the coordinator refused the cluster token ({0})")]
    Unauthenticated(String),
    #[error("{what}: {status}")]
    Rpc { what: &'static str, status: Status },
    #[error("the coordinator sent {0}, which is not a slice key")]
    BadKey(String),
    #[error("the coordinator sent a malformed task: {0}")]
    BadTask(String),
    #[error("slice {key} could not be fetched intact in {FETCH_ATTEMPTS} attempts: {reason}")]
    Corrupt { key: SliceKey, reason: String },
    #[error("the coordinator did not send slice {0}")]
    NotSent(SliceKey),
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error(transparent)]
    Solve(#[from] SolveError),
    #[error("a blocking task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
    #[error(
        "slice {slice} needs about {} of memory to solve here ({}), more than this worker's budget of {}: give the worker a larger --memory, fewer --threads, or run it on a machine with more memory",
        human_bytes(*.needed), .what, human_bytes(*.budget)
    )]
    OverBudget {
        slice: SliceKey,
        needed: u64,
        what: String,
        budget: u64,
    },
    #[error("slice {0}, solved, is no longer in the cache to upload")]
    Vanished(SliceKey),
}

impl From<task::BadTask> for WorkerError {
    fn from(e: task::BadTask) -> WorkerError {
        WorkerError::BadTask(e.to_string())
    }
}

impl WorkerError {
    /// Errors that stop the worker for good (the others are retried after a pause).
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            WorkerError::BadUrl { .. }
                | WorkerError::Tls(_)
                | WorkerError::BadToken(_)
                | WorkerError::Refused(_)
                | WorkerError::Unauthenticated(_)
                | WorkerError::Cache(_)
                | WorkerError::OverBudget { .. }
        )
    }
}

pub use super::Client;

/// What an RPC failure means: the token or the coordinator's certificate refused is fatal, the
/// rest is worth a retry.
fn rpc(what: &'static str) -> impl FnOnce(Status) -> WorkerError {
    move |status| match status.code() {
        Code::Unauthenticated => WorkerError::Unauthenticated(status.message().to_owned()),
        _ => match certificate_refused(&status) {
            Some(reason) => WorkerError::Tls(format!("{what}: {reason}")),
            None => WorkerError::Rpc { what, status },
        },
    }
}

/// The reason when a call failed because the coordinator's TLS certificate was not trusted (an
/// error of configuration, not of the moment).
pub fn certificate_refused(status: &Status) -> Option<String> {
    use rustls::Error as TlsError;
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    while let Some(e) = source {
        // An io::Error's `source` skips the error it wraps: look at that one too.
        let wrapped = e.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref());
        let tls = e
            .downcast_ref::<TlsError>()
            .or_else(|| wrapped.and_then(|w| w.downcast_ref::<TlsError>()));
        if let Some(tls @ TlsError::InvalidCertificate(_)) = tls {
            return Some(format!(
                "the coordinator's TLS certificate is not trusted ({tls}); check --tls-ca"
            ));
        }
        source = e.source();
    }
    None
}

/// A client of the coordinator at `url` that sends `token` with every call (connects lazily).
pub fn connect(url: &str, token: Option<&str>) -> Result<Client, WorkerError> {
    connect_with_tls(url, token, None)
}

/// [`connect`], with TLS: an `https://` URL needs `tls_ca`, the PEM certificates of the CAs that
/// may sign the coordinator's certificate (checked against the URL's host name or address); an
/// `http://` URL takes none.
pub fn connect_with_tls(
    url: &str,
    token: Option<&str>,
    tls_ca: Option<&[u8]>,
) -> Result<Client, WorkerError> {
    let bad = |reason: String| WorkerError::BadUrl {
        url: url.to_owned(),
        reason,
    };
    if !url.contains("://") {
        // `host:port` parses as a URI whose scheme is the host, and fails later as "invalid URI".
        return Err(bad(format!(
            "it names no scheme: write http://{url} (or https://{url} with --tls-ca)"
        )));
    }
    let mut endpoint = Endpoint::from_shared(url.to_owned()).map_err(|e| bad(e.to_string()))?;
    let https = endpoint.uri().scheme_str() == Some("https");
    match (https, tls_ca) {
        (true, None) => {
            return Err(bad(
                "an https:// coordinator needs the certificate of its CA (--tls-ca FILE)".into(),
            ))
        }
        (false, Some(_)) => {
            return Err(bad(
                "a CA certificate (--tls-ca) was given but the URL is not https://".into(),
            ))
        }
        (true, Some(ca)) => {
            if !ca.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
                return Err(WorkerError::Tls("the CA file holds no PEM certificate".into()));
            }
            let config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca));
            endpoint = endpoint
                .tls_config(config)
                .map_err(|e| WorkerError::Tls(format!("the CA certificate: {e}")))?;
        }
        (false, None) => {}
    }
    let channel = endpoint.connect_timeout(Duration::from_secs(5)).connect_lazy();
    let auth = ClientAuth::new(token)?;
    Ok(CoordinatorClient::with_interceptor(channel, auth)
        .max_decoding_message_size(16 << 20)
        .max_encoding_message_size(16 << 20))
}

/// Runs a worker until `shutdown` resolves (Ok) or a fatal error (Err). Transient failures (the
/// coordinator unreachable or restarting) are logged and retried.
pub async fn run(config: WorkerConfig, shutdown: impl Future<Output = ()>) -> Result<(), WorkerError> {
    run_with_metrics(config, None, shutdown).await
}

/// What a worker has done since it started, for its metrics.
#[derive(Debug, Default)]
pub struct WorkerStats {
    pub tasks_done: AtomicU64,
    pub slices_solved: AtomicU64,
    pub positions_solved: AtomicU64,
    /// Slice bytes of the slices fetched whole and intact (a large slice fetched straight into
    /// its table form is not counted), and bytes sent in uploads.
    pub bytes_fetched: AtomicU64,
    pub bytes_uploaded: AtomicU64,
    /// Fetched slices that arrived damaged or were not the recorded slice.
    pub damaged_arrivals: AtomicU64,
}

impl WorkerStats {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// The exposition text of a worker's metrics.
fn render_metrics(stats: &WorkerStats, cache: &SliceCache, budget: u64) -> String {
    use zermelo_proto::exposition::{process_metrics, Text};
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let c = cache.counters();
    let mut t = Text::default();
    let counters = [
        (
            "zermelo_worker_tasks_done_total",
            "Tasks completed and accepted by the coordinator.",
            get(&stats.tasks_done),
        ),
        (
            "zermelo_worker_slices_solved_total",
            "Slices solved in accepted tasks.",
            get(&stats.slices_solved),
        ),
        (
            "zermelo_worker_positions_solved_total",
            "Positions of the slices solved in accepted tasks.",
            get(&stats.positions_solved),
        ),
        (
            "zermelo_worker_slice_bytes_fetched_total",
            "Slice bytes of the slices fetched whole and intact (large ones fetched straight into a table form not counted).",
            get(&stats.bytes_fetched),
        ),
        (
            "zermelo_worker_slice_bytes_uploaded_total",
            "Slice bytes uploaded.",
            get(&stats.bytes_uploaded),
        ),
        (
            "zermelo_worker_damaged_arrivals_total",
            "Fetched slices that arrived damaged, or other than the slice the task names (fetched again).",
            get(&stats.damaged_arrivals),
        ),
        (
            "zermelo_worker_cache_hits_total",
            "Reads of the slice cache that found the slice intact.",
            c.hits,
        ),
        (
            "zermelo_worker_cache_damaged_total",
            "Cache files found damaged or stale on a read (removed).",
            c.damaged,
        ),
        (
            "zermelo_worker_cache_evicted_total",
            "Cache files evicted to stay under the cache budget.",
            c.evicted,
        ),
    ];
    for (name, help, value) in counters {
        t.single(name, "counter", help, value);
    }
    t.single(
        "zermelo_worker_cache_bytes",
        "gauge",
        "Bytes of the slice cache's files.",
        cache.bytes(),
    );
    t.single(
        "zermelo_worker_memory_budget_bytes",
        "gauge",
        "The worker's memory budget (--memory).",
        budget,
    );
    process_metrics(&mut t);
    t.into_string()
}

/// [`run`], and when `metrics` is given, the worker's Prometheus metrics (`GET /metrics`) and
/// `GET /health` (200 `ok` while it runs) over plain HTTP on that listener.
pub async fn run_with_metrics(
    config: WorkerConfig,
    metrics: Option<tokio::net::TcpListener>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), WorkerError> {
    let client = connect_with_tls(
        &config.coordinator,
        config.token.as_deref(),
        config.tls_ca.as_deref(),
    )?;
    let (dir, budget) = (config.cache.clone(), config.cache_size);
    let cache = tokio::task::spawn_blocking(move || SliceCache::open_blocking(&dir, budget)).await??;
    let stats = Arc::new(WorkerStats::default());
    let cache = Arc::new(cache);
    let _metrics = match metrics {
        None => None,
        Some(listener) => {
            use axum::routing::get;
            let (stats, cache, budget) = (stats.clone(), cache.clone(), config.memory);
            let router = axum::Router::new()
                .route(
                    "/metrics",
                    get(move || {
                        let text = render_metrics(&stats, &cache, budget);
                        async move {
                            (
                                [(
                                    axum::http::header::CONTENT_TYPE,
                                    zermelo_proto::exposition::CONTENT_TYPE_TEXT,
                                )],
                                text,
                            )
                        }
                    }),
                )
                .route("/health", get(|| async { "ok\n" }));
            info!(addr = ?listener.local_addr().ok(), "metrics listening (GET /metrics)");
            Some(AbortOnDrop(tokio::spawn(async move {
                if let Err(e) = axum::serve(listener, router).await {
                    warn!(error = %e, "the metrics endpoint stopped");
                }
            })))
        }
    };
    let mut worker = Worker {
        stats,
        client,
        config,
        id: None,
        memory: SliceMap::new(),
        held: HashMap::new(),
        expected: HashMap::new(),
        cache,
        pinned: BTreeSet::new(),
        damaged_arrivals: 0,
    };
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => {
                info!("stopping: the work in flight is dropped");
                return Ok(());
            }
            step = worker.step() => match step {
                Ok(()) => {}
                Err(e) if e.is_fatal() => return Err(e),
                Err(e) => {
                    warn!(error = %e, "retrying in a second");
                    tokio::select! {
                        _ = &mut shutdown => return Ok(()),
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    }
                }
            }
        }
    }
}

struct Worker {
    stats: Arc<WorkerStats>,
    client: Client,
    config: WorkerConfig,
    id: Option<u64>,
    /// Slices in memory: the successors of the last task and the slices it solved.
    memory: SliceMap,
    /// The content hash of each slice in `memory`.
    held: HashMap<SliceKey, [u8; 32]>,
    /// The successors of the task in hand with the hash the coordinator recorded for each: a
    /// copy of one (in memory, cached or fetched) is used only when its hash is this one.
    expected: HashMap<SliceKey, [u8; 32]>,
    cache: Arc<SliceCache>,
    /// The slices the task in hand reads or writes: never evicted from the cache.
    pinned: BTreeSet<SliceKey>,
    /// Fetched slices that arrived damaged (each fetched again).
    damaged_arrivals: u64,
}

/// Aborts a spawned task when dropped (the heartbeat of a task that ends or is cancelled).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One solved slice, written to the cache, ready to upload from there.
struct Solved {
    key: SliceKey,
    positions: u64,
    hash: [u8; 32],
    /// Its values, when small enough to keep in memory for the next tasks (see
    /// [`keep_limit`]).
    values: Option<SliceValues>,
}

/// Bytes of a zstd stream's buffers and the file buffer of a slice being written to the cache.
const ENCODER_BYTES: u64 = 4 << 20;

/// The worker process's own memory, which no count of a task holds: its code and libraries
/// (about 11 MiB mapped), its runtime, thread stacks and gRPC buffers. Workers of 90 MiB
/// solving KQRvKR in 3 paged parts peaked 16-28 MiB past their budget without it.
pub const PROCESS_BYTES: u64 = 32 << 20;

/// The largest solved slice (in bytes of values) a worker with `budget` bytes keeps in memory
/// for the next tasks, which often lead into it; larger ones are read from the cache when
/// needed.
fn keep_limit(budget: u64) -> u64 {
    budget / 16
}

/// What solving `slices` (`threads` threads; one slice per thread when they are many) holds in
/// memory at its peak, in bytes, reading `successors`: per slice solved at once, the solver's
/// state ([`slice_state_bytes`]) and its file's encoder ([`ENCODER_BYTES`]); per thread, the
/// solver's buffers ([`thread_bytes`], with its bitmap of changed positions if `changed_bits`,
/// see [`crate::solver::solve_slice_into`]); the small successors' values, held whole (2 bytes a
/// position; small as in [`keep_limit`]), and for the large ones, read a block at a time from
/// their table form in the cache, each thread's cache of blocks ([`READER_BYTES`]); the solved
/// slices kept in memory; the process itself ([`PROCESS_BYTES`]). With a description of the
/// parts, for a refusal.
pub fn task_memory(
    slices: &[SliceKey],
    successors: &BTreeSet<SliceKey>,
    threads: usize,
    budget: u64,
    changed_bits: bool,
) -> (u64, String) {
    let size = |k: &SliceKey| SliceIndexer::new(*k).size();
    let largest = slices.iter().map(size).max().unwrap_or(0);
    let at_once = if threads > 1 && slices.len() >= 2 * threads {
        threads as u64
    } else {
        1
    };
    let pawns = slices.iter().any(|k| k.material.has_pawns());
    let solver = at_once * (slice_state_bytes(largest, pawns) + ENCODER_BYTES)
        + threads as u64 * thread_bytes(largest, pawns && changed_bits);
    let (reading, successors_what) = successors_memory(successors, threads, budget);
    let kept: u64 = slices
        .iter()
        .map(|k| 2 * size(k))
        .filter(|&b| b <= keep_limit(budget))
        .sum();
    let what = format!(
        "the solver's state for {at_once} slice(s) of up to {largest} positions on {threads} thread(s): {}; {successors_what}; solved slices kept: {}; the process itself: {}",
        human_bytes(solver),
        human_bytes(kept),
        human_bytes(PROCESS_BYTES)
    );
    (solver + reading + kept + PROCESS_BYTES, what)
}

/// What reading `successors` holds: the small ones' values whole (2 bytes a position; small as
/// in [`keep_limit`]), and for the large ones, read a block at a time from their table form in
/// the cache, each thread's cache of blocks ([`READER_BYTES`]). With a description.
fn successors_memory(successors: &BTreeSet<SliceKey>, threads: usize, budget: u64) -> (u64, String) {
    let (whole, large): (Vec<u64>, Vec<u64>) = successors
        .iter()
        .map(|k| 2 * SliceIndexer::new(*k).size())
        .partition(|&bytes| bytes <= keep_limit(budget));
    let held: u64 = whole.iter().sum();
    let large = large.len();
    let readers = if large > 0 {
        threads as u64 * READER_BYTES
    } else {
        0
    };
    let what = format!(
        "{} successor slice(s) held whole: {}; {large} read a block at a time: {}",
        successors.len() - large,
        human_bytes(held),
        human_bytes(readers)
    );
    (held + readers, what)
}

/// What solving `slices` needs with its state paged through the worker's cache folder, when
/// that is possible (a task of one pawnless slice; by the compact solver if `compact`, a slice
/// by lines): the least it needs (as [`task_memory`] counts, with [`paged_need`]'s or
/// [`bits_paged_need`]'s state: [`MIN_RESIDENT_KSLICES`] K-slices resident), what stays in
/// memory whatever the budget, and a description of the parts, for a refusal. The rest of the
/// budget is the state resident ([`Paging::resident`]).
pub fn paged_task_memory(
    slices: &[SliceKey],
    successors: &BTreeSet<SliceKey>,
    threads: usize,
    budget: u64,
    compact: bool,
) -> Option<(u64, u64, String)> {
    let [key] = slices else {
        return None;
    };
    if key.material.has_pawns() || (compact && !bits_solvable(key)) {
        return None;
    }
    let n = SliceIndexer::new(*key).size();
    let (whole, large): (Vec<u64>, Vec<u64>) = successors
        .iter()
        .map(|k| 2 * SliceIndexer::new(*k).size())
        .partition(|&bytes| bytes <= keep_limit(budget));
    let held: u64 = whole.iter().sum();
    // Large successors are read a block at a time through each thread's cache of blocks.
    let reader = if large.is_empty() { 0 } else { READER_BYTES };
    let need = if compact {
        bits_paged_need(n, threads, reader)
    } else {
        paged_need(n, threads, reader)
    };
    let fixed = need.fixed + ENCODER_BYTES + held + PROCESS_BYTES;
    let least = need.least + ENCODER_BYTES + held + PROCESS_BYTES;
    let what = format!(
        "with its state paged through the cache folder: at least {MIN_RESIDENT_KSLICES} of its K-slices resident{} and {} of {} on {threads} thread(s): {}; successor slices held whole: {}; the process itself: {}",
        if compact { " (the compact solver's bitmaps)" } else { "" },
        human_bytes(need.fixed),
        if compact { "buffers" } else { "summaries and buffers" },
        human_bytes(need.least),
        human_bytes(held),
        human_bytes(PROCESS_BYTES)
    );
    Some((least, fixed, what))
}

/// What solving `slices` needs with the compact solver ([`solve_slice_bits`]) when that is
/// possible (a task of one pawnless slice by lines, [`bits_solvable`]): `in_memory` (what
/// [`task_memory`] counts for it without the bitmaps of changed positions) with three bits a
/// position in place of the byte solver's state.
pub fn compact_task_memory(slices: &[SliceKey], in_memory: u64) -> Option<u64> {
    let [key] = slices else {
        return None;
    };
    if !bits_solvable(key) {
        return None;
    }
    let n = SliceIndexer::new(*key).size();
    Some(in_memory - slice_state_bytes(n, false) + bits_state_bytes(n))
}

/// What part `me` of `parts` of slice `key` needs in memory ([`task_memory`]'s count for it):
/// the solver's state it touches ([`part_state_bytes`]: a byte a position of its own, a bit a
/// position of the segments it owns or reads, the summaries whole), each thread's buffers, the
/// successors, the file encoder, and the messages of a meeting ([`MEETING_BYTES_PER`]). The
/// compressed values the leader gathers at the end come once the state is gone (measured in
/// docs/performance.md); the process itself ([`PROCESS_BYTES`]). With a description, for a
/// refusal.
pub fn part_task_memory(
    key: &SliceKey,
    (parts, me): (usize, usize),
    successors: &BTreeSet<SliceKey>,
    threads: usize,
    budget: u64,
) -> (u64, String) {
    let n = SliceIndexer::new(*key).size();
    let state = part_state_bytes(key, parts, me);
    let (rest, successors_what) = successors_memory(successors, threads, budget);
    let solver = state + part_buffers(n, threads);
    let what = format!(
        "part of {parts} of a slice of {n} positions: the solver's state and the meetings' messages {}; {successors_what}; the process itself: {}",
        human_bytes(solver),
        human_bytes(PROCESS_BYTES)
    );
    (solver + rest + PROCESS_BYTES, what)
}

/// What the messages of a meeting of parts hold beside a part's state, at their largest, in
/// bytes a position of the slice (the workers of a KRNvKNN in 3 parts, 7.63 G positions, peaked
/// 0.10 to 0.16 GiB over the state, buffers and successors they counted).
const MEETING_BYTES_PER: f64 = 1.0 / 40.0;

/// What a part of a slice of `n` positions holds beside its state and the successors: each
/// thread's buffers, the file encoder, and the messages of a meeting ([`MEETING_BYTES_PER`]).
fn part_buffers(n: u64, threads: usize) -> u64 {
    threads as u64 * thread_bytes(n, false) + ENCODER_BYTES + (n as f64 * MEETING_BYTES_PER) as u64
}

/// What part `me` of `parts` of slice `key` needs with its state paged through the cache folder
/// ([`solve_part`]'s `paging`): the least (as [`part_task_memory`] counts, with
/// [`MIN_RESIDENT_KSLICES`] K-slices of its state resident, and [`MEETING_BYTES_PER`]), what stays
/// in memory whatever the budget (the rest is the state resident, [`Paging::resident`]), and a
/// description, for a refusal.
pub fn paged_part_memory(
    key: &SliceKey,
    (parts, me): (usize, usize),
    successors: &BTreeSet<SliceKey>,
    threads: usize,
    budget: u64,
) -> (u64, u64, String) {
    let n = SliceIndexer::new(*key).size();
    let (_, held) = part_state_shares(key, parts, me);
    let (rest, successors_what) = successors_memory(successors, threads, budget);
    let fixed = held + part_buffers(n, threads) + rest + PROCESS_BYTES;
    let least = fixed + paged_least(n);
    let what = format!(
        "part of {parts} of a slice of {n} positions, its state paged through the cache folder: at least {MIN_RESIDENT_KSLICES} of its K-slices resident and {} of summaries, buffers and meetings on {threads} thread(s); {successors_what}; the process itself: {}",
        human_bytes(fixed - rest - PROCESS_BYTES),
        human_bytes(PROCESS_BYTES)
    );
    (least, fixed, what)
}

impl Worker {
    /// Registers if needed, leases a task and does it (or waits as told).
    async fn step(&mut self) -> Result<(), WorkerError> {
        let id = match self.id {
            Some(id) => id,
            None => {
                let id = self.register().await?;
                self.id = Some(id);
                id
            }
        };
        let answer = self
            .client
            .lease_task(pb::LeaseTaskRequest { worker_id: id })
            .await
            .map_err(|status| match status.code() {
                // This worker is refused (a slice it uploaded failed the coordinator's check).
                Code::PermissionDenied => WorkerError::Refused(status.message().to_owned()),
                _ => rpc("leasing a task")(status),
            })?
            .into_inner();
        match answer.result {
            Some(pb::lease_task_response::Result::Task(wire)) => {
                let task = Task::from_wire(&wire)?;
                let span = info_span!("task", lease = task.lease_id, job = task.job_id);
                self.do_task(id, task).instrument(span).await
            }
            Some(pb::lease_task_response::Result::NoTask(no)) => {
                if no.reason == pb::no_task::Reason::UnknownWorker as i32 {
                    info!("the coordinator does not know this worker (restarted?): registering again");
                    self.id = None;
                } else {
                    tokio::time::sleep(Duration::from_millis(no.retry_after_ms.clamp(50, 5000))).await;
                }
                Ok(())
            }
            None => Ok(()),
        }
    }

    async fn register(&mut self) -> Result<u64, WorkerError> {
        let request = pb::RegisterRequest {
            worker_name: self.config.name.clone(),
            protocol_version: pb::PROTOCOL_VERSION,
            cores: self.config.threads as u32,
        };
        let answer = self
            .client
            .register(request)
            .await
            .map_err(rpc("registering"))?
            .into_inner();
        match answer.result {
            Some(pb::register_response::Result::Registered(r)) => {
                info!(worker = r.worker_id, lease_ttl_ms = r.lease_ttl_ms, "registered");
                Ok(r.worker_id)
            }
            Some(pb::register_response::Result::Refused(r)) => Err(WorkerError::Refused(r.reason)),
            None => Err(WorkerError::Refused("empty answer to the registration".into())),
        }
    }

    /// A task's successors; their recorded hashes in [`Worker::expected`], with those of
    /// `also` (a verification's slices).
    fn read_task(&mut self, task: &Task, also: &[task::SliceRef]) -> BTreeSet<SliceKey> {
        self.expected = task
            .successors
            .iter()
            .chain(also)
            .map(|r| (r.key, r.hash))
            .collect();
        let successors: BTreeSet<SliceKey> = task.successors.iter().map(|r| r.key).collect();
        debug!(
            slices = task.slices().len(),
            successors = successors.len(),
            "task leased"
        );
        successors
    }

    /// Keeps in memory only what the task reads (with the recorded hash), pins what it reads
    /// and writes in the cache, and brings the successors it lacks.
    async fn hold_successors(
        &mut self,
        slices: &[SliceKey],
        successors: &BTreeSet<SliceKey>,
    ) -> Result<(), WorkerError> {
        let (expected, held) = (&self.expected, &mut self.held);
        self.memory
            .retain(|k| expected.get(k).is_some_and(|h| held.get(k) == Some(h)));
        held.retain(|k, _| expected.contains_key(k));
        self.pinned = successors.iter().chain(slices).copied().collect();
        self.bring_successors(successors).await
    }

    /// How a task's slices are solved within `budget` bytes on `threads` threads. A pawnless
    /// slice by lines is solved by the compact solver when its three bits a position fit (as
    /// `solve` does: faster, and less memory); else with each thread's bitmap of changed
    /// positions when that fits, else without; else with its state paged through the cache
    /// folder, the budget less what stays in memory resident. Refused (`OverBudget`) when no
    /// way fits, with the least it would need.
    fn plan_task(
        &self,
        slices: &[SliceKey],
        successors: &BTreeSet<SliceKey>,
        threads: usize,
        budget: u64,
    ) -> Result<TaskPlan, WorkerError> {
        let (mut needed, mut what) = task_memory(slices, successors, threads, budget, false);
        let mut changed_bits = false;
        let mut paging = None;
        let compact_need = compact_task_memory(slices, needed).filter(|&c| c <= budget);
        if let Some(c) = compact_need {
            info!(
                slice = %slices[0],
                compact = c,
                budget,
                "the slice is solved by the compact solver, three bits a position"
            );
            needed = c;
        } else {
            let (with_bits, what_with) = task_memory(slices, successors, threads, budget, true);
            if with_bits <= budget {
                (needed, what, changed_bits) = (with_bits, what_with, true);
            }
        }
        let mut compact = compact_need.is_some();
        if needed > budget {
            // Paged: by the compact solver where it can and that fits, else by the byte solver
            // (else the least of the two, for the refusal).
            let ways: Vec<_> = [true, false]
                .into_iter()
                .filter_map(|c| paged_task_memory(slices, successors, threads, budget, c).map(|p| (p, c)))
                .collect();
            let paged = ways
                .iter()
                .find(|((least, _, _), _)| *least <= budget)
                .or_else(|| ways.iter().min_by_key(|((least, _, _), _)| *least))
                .cloned();
            match paged {
                Some(((least, fixed, _), c)) if least <= budget => {
                    compact = c;
                    let resident = budget - fixed;
                    info!(
                        slice = %slices[0],
                        in_memory = needed,
                        resident,
                        budget,
                        compact,
                        "the slice is solved with its state paged through the cache folder"
                    );
                    needed = least;
                    paging = Some(Paging {
                        dir: self.config.cache.clone(),
                        resident,
                    });
                }
                paged => {
                    let paged = paged.map(|(p, _)| p);
                    if let Some((least, _, paged_what)) = &paged {
                        what = format!("{what}; or {}: {paged_what}", human_bytes(*least));
                    }
                    let slice = *slices
                        .iter()
                        .max_by_key(|k| SliceIndexer::new(**k).size())
                        .expect("a task has slices");
                    return Err(WorkerError::OverBudget {
                        slice,
                        needed: paged.map_or(needed, |(least, _, _)| least.min(needed)),
                        what,
                        budget,
                    });
                }
            }
        }
        Ok(TaskPlan {
            needed,
            changed_bits,
            paging,
            compact,
        })
    }

    async fn do_task(&mut self, worker_id: u64, task: Task) -> Result<(), WorkerError> {
        let slices = match &task.work {
            Work::Solve(slices) => slices.clone(),
            Work::Verify(slices) => return self.do_verify(worker_id, &task, slices).await,
            Work::Part(part) => return self.do_part(worker_id, &task, *part).await,
        };
        let successors = self.read_task(&task, &[]);

        // Heartbeat the lease while the task is worked on.
        let (lost, _heartbeat) = self.heartbeat(worker_id, &task);

        let threads = self.config.threads.max(1);
        let budget = self.config.memory;
        let TaskPlan {
            needed,
            changed_bits,
            paging,
            compact,
        } = self.plan_task(&slices, &successors, threads, budget)?;
        debug!(needed, budget, "the task fits the memory budget");

        // What is in memory stays only if the task reads it, with the recorded hash.
        self.hold_successors(&slices, &successors).await?;

        // The solver may read slices beyond the task's successors (an en-passant capture is
        // valued by looking one move further, into a successor's successor, which is finished
        // too): those are fetched when the solver asks for them and the slice is solved again.
        let mut solved: Vec<Solved> = Vec::with_capacity(slices.len());
        let mut to_solve = slices.clone();
        let keep = keep_limit(budget);
        let tamper = self.config.tamper;
        for round in 0.. {
            let memory = std::mem::take(&mut self.memory);
            let batch = to_solve.clone();
            let cache = self.cache.clone();
            let paging = paging.clone();
            let (memory, outcome) = tokio::task::spawn_blocking(move || {
                let how = How {
                    threads,
                    changed_bits,
                    paging: paging.as_ref(),
                    compact,
                    keep,
                    tamper,
                };
                let outcome = solve_all_blocking(&batch, &memory, &cache, &how);
                (memory, outcome)
            })
            .await?;
            self.memory = memory;
            let (done, wanting) = outcome?;
            solved.extend(done);
            if wanting.is_empty() {
                break;
            }
            let extra: BTreeSet<SliceKey> = wanting.iter().map(|(_, t)| *t).collect();
            if round >= 8 {
                return Err(SolveError::MissingSuccessor(*extra.iter().next().expect("one")).into());
            }
            debug!(
                slices = wanting.len(),
                extra = extra.len(),
                "fetching slices the solver asked for beyond the task's successors"
            );
            self.pinned.extend(&extra);
            self.bring_successors(&extra).await?;
            to_solve = wanting.into_iter().map(|(s, _)| s).collect();
        }
        solved.sort_by_key(|s| s.key.raw());
        if lost.load(Ordering::Relaxed) {
            warn!("the lease was lost while solving: its work is dropped");
            return Ok(());
        }

        // Keep what was solved and small: later tasks lead into it. The rest is read from the
        // cache when needed.
        for s in &solved {
            if let Some(values) = &s.values {
                self.memory.insert(s.key, values.clone());
                self.held.insert(s.key, s.hash);
            }
        }
        let cache = self.cache.clone();
        let pinned = self.pinned.clone();
        tokio::task::spawn_blocking(move || cache.evict_blocking(&pinned)).await?;
        self.upload_and_complete(worker_id, task.lease_id, &solved).await
    }

    /// Uploads solved slices from their cache files, a chunk at a time, then completes the
    /// task of lease `lease_id` with them.
    async fn upload_and_complete(
        &mut self,
        worker_id: u64,
        lease_id: u64,
        solved: &[Solved],
    ) -> Result<(), WorkerError> {
        let (tx, rx) = tokio::sync::mpsc::channel::<pb::UploadSliceChunk>(4);
        let cache = self.cache.clone();
        let files: Vec<(SliceKey, [u8; 32])> = solved.iter().map(|s| (s.key, s.hash)).collect();
        let producer = tokio::task::spawn_blocking(move || -> Result<(), WorkerError> {
            use std::io::Read;
            let mut first = true;
            for (key, hash) in files {
                let (mut file, header, length) =
                    cache.file_blocking(&key).ok_or(WorkerError::Vanished(key))?;
                if header.hash != hash {
                    return Err(WorkerError::Vanished(key));
                }
                let mut header = Some(pb::SliceHeader {
                    key: Some(key_to_wire(&key)),
                    total_length: length,
                    content_hash: hash.to_vec(),
                    positions: header.positions,
                });
                let mut sent = 0u64;
                while sent < length {
                    let want = (length - sent).min(pb::CHUNK_BYTES as u64) as usize;
                    let mut data = vec![0u8; want];
                    file.read_exact(&mut data).map_err(|source| CacheError {
                        path: cache.path(&key),
                        source,
                    })?;
                    sent += want as u64;
                    let chunk = pb::UploadSliceChunk {
                        lease_id: if first { lease_id } else { 0 },
                        chunk: Some(pb::SliceChunk {
                            header: header.take(),
                            data,
                        }),
                    };
                    first = false;
                    if tx.blocking_send(chunk).is_err() {
                        return Ok(()); // the upload stopped; its error says why
                    }
                }
            }
            Ok(())
        });
        let uploaded = self
            .client
            .upload_slice(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await;
        producer.await??;
        let uploaded = uploaded.map_err(rpc("uploading slices"))?.into_inner();
        WorkerStats::add(&self.stats.bytes_uploaded, uploaded.bytes);
        debug!(slices = uploaded.stored.len(), bytes = uploaded.bytes, "uploaded");
        let request = pb::CompleteTaskRequest {
            worker_id,
            lease_id,
            slices: solved
                .iter()
                .map(|s| pb::SolvedSlice {
                    slice: Some(
                        task::SliceRef {
                            key: s.key,
                            hash: s.hash,
                        }
                        .to_wire(),
                    ),
                    positions: s.positions,
                })
                .collect(),
            verdict: None,
        };
        if let Some(a) = self.complete(request).await? {
            info!(slices = solved.len(), job_done = a.job_done, "task done");
            WorkerStats::add(&self.stats.slices_solved, solved.len() as u64);
            let positions = solved.iter().map(|s| s.positions).sum();
            WorkerStats::add(&self.stats.positions_solved, positions);
        }
        Ok(())
    }

    /// One part of a slice solved by a group of workers (`task.part`): the successors of the
    /// whole slice, the solver's passes on this part's K-slices only, meeting the other parts
    /// through the coordinator ([`AtCoordinator`]); then the helpers give the leader (part 0)
    /// their values and complete with no slice, and the leader writes the slice to the cache,
    /// uploads it and completes with it, as any solved slice.
    async fn do_part(&mut self, worker_id: u64, task: &Task, part: task::Part) -> Result<(), WorkerError> {
        let successors = self.read_task(task, &[]);
        let key = part.key;
        if !splittable(&key) {
            return Err(WorkerError::BadTask(format!(
                "a part of slice {key}, which cannot be cut"
            )));
        }
        let (parts, me) = (part.parts as usize, part.index as usize);
        if parts > PAWNLESS_KING_PAIRS {
            return Err(WorkerError::BadTask(format!("part {me} of {parts}")));
        }
        let slices = [key];
        let (lost, _heartbeat) = self.heartbeat(worker_id, task);
        let threads = self.config.threads.max(1);
        let budget = self.config.memory;
        let (needed, what) = part_task_memory(&key, (parts, me), &successors, threads, budget);
        info!(slice = %key, part = me, parts, group = part.group, needed, budget, "part leased");
        let mut paging = None;
        if needed > budget {
            // Its state paged through the cache folder, if that fits.
            let (least, fixed, paged_what) =
                paged_part_memory(&key, (parts, me), &successors, threads, budget);
            if least > budget {
                return Err(WorkerError::OverBudget {
                    slice: key,
                    needed: least,
                    what: format!("{what}; or {}: {paged_what}", human_bytes(least)),
                    budget,
                });
            }
            let resident = budget - fixed;
            info!(slice = %key, part = me, in_memory = needed, resident, budget, "the part is solved with its state paged through the cache folder");
            paging = Some(Paging {
                dir: self.config.cache.clone(),
                resident,
            });
        }
        self.hold_successors(&slices, &successors).await?;
        let n = SliceIndexer::new(key).size();
        let mut at = AtCoordinator {
            runtime: tokio::runtime::Handle::current(),
            client: self.client.clone(),
            worker_id,
            lease_id: task.lease_id,
            parts,
            me,
            n,
            round: 0,
            gave: 0,
            took: 0,
        };
        let memory = std::mem::take(&mut self.memory);
        let started = std::time::Instant::now();
        let spool_dir = self.config.cache.clone();
        let (memory, outcome) = tokio::task::spawn_blocking(move || {
            let mut solve = || -> Result<_, SolveError> {
                // The part's values, compressed a segment at a time, wait in a file of the
                // cache folder until its state is gone (in memory they would come on top of it).
                let mut spool = Spool::new(&spool_dir).map_err(SolveError::Scratch)?;
                let plies = solve_part(
                    &key,
                    &memory,
                    (parts, me),
                    threads,
                    paging.as_ref(),
                    &mut at,
                    &mut |s, v| {
                        spool
                            .push(s as u32, &compress_segment(v))
                            .map_err(SolveError::Scratch)
                    },
                )?;
                // The values: each helper gives the leader its segments, from file to file.
                let mine = spool.into_file().map_err(SolveError::Scratch)?;
                let (kept, given) = if me == 0 {
                    (Some(mine), None)
                } else {
                    (None, Some(mine))
                };
                let got = at.meet_values(given, &spool_dir)?;
                Ok((plies, kept, got))
            };
            let outcome = solve().map(|(plies, mine, got)| (plies, mine, got, at.gave, at.took));
            (memory, outcome)
        })
        .await?;
        self.memory = memory;
        let (plies, mine, got, gave, took) = outcome?;
        info!(
            slice = %key,
            part = me,
            parts,
            plies,
            bytes_given = gave,
            bytes_taken = took,
            seconds = started.elapsed().as_secs_f64(),
            "part solved"
        );
        if lost.load(Ordering::Relaxed) {
            warn!("the lease was lost while solving: its work is dropped");
            return Ok(());
        }
        if me != 0 {
            let request = pb::CompleteTaskRequest {
                worker_id,
                lease_id: task.lease_id,
                slices: Vec::new(),
                verdict: None,
            };
            self.complete(request).await?;
            return Ok(());
        }
        // The leader: the slice's values in index order, its own and the others', to the cache.
        let cache = self.cache.clone();
        let solved = tokio::task::spawn_blocking(move || -> Result<Solved, WorkerError> {
            let segments = n.div_ceil(SEG_INDICES as u64) as usize;
            let mut values = PartValues::new(segments);
            values.add(0, mine.expect("the leader keeps its own values"))?;
            for (k, given) in got.into_iter().enumerate().skip(1) {
                let given = given.ok_or_else(|| SolveError::Exchange(format!("part {k} gave no values")))?;
                values.add(k, given)?;
            }
            values.check_complete()?;
            let mut file = cache.create_blocking(&key, n)?;
            for s in 0..segments {
                file.push(&values.segment(s, n)?)?;
            }
            let (hash, _) = file.finish()?;
            Ok(Solved {
                key,
                positions: n,
                hash,
                values: None,
            })
        })
        .await??;
        let cache = self.cache.clone();
        let pinned = self.pinned.clone();
        tokio::task::spawn_blocking(move || cache.evict_blocking(&pinned)).await?;
        self.upload_and_complete(worker_id, task.lease_id, &[solved])
            .await
    }

    /// Completes a task (a solve or a verification): the coordinator's acceptance, or `None`
    /// when it rejected the completion (logged with its reason).
    async fn complete(
        &mut self,
        request: pb::CompleteTaskRequest,
    ) -> Result<Option<pb::Accepted>, WorkerError> {
        let answer = self
            .client
            .complete_task(request)
            .await
            .map_err(rpc("completing a task"))?
            .into_inner();
        match answer.result {
            Some(pb::complete_task_response::Result::Accepted(a)) => {
                WorkerStats::add(&self.stats.tasks_done, 1);
                Ok(Some(a))
            }
            Some(pb::complete_task_response::Result::Rejected(r)) => {
                warn!(reason = %r.reason, "completion rejected");
                Ok(None)
            }
            None => {
                warn!("empty answer to a completion");
                Ok(None)
            }
        }
    }

    /// Heartbeats `task`'s lease until the guard it gives is dropped; the flag says whether the
    /// coordinator said the lease is lost meanwhile.
    fn heartbeat(&self, worker_id: u64, task: &Task) -> (Arc<AtomicBool>, AbortOnDrop) {
        let lost = Arc::new(AtomicBool::new(false));
        let guard = AbortOnDrop(tokio::spawn(heartbeat(
            self.client.clone(),
            worker_id,
            task.lease_id,
            Duration::from_millis((task.lease_ttl_ms / 3).max(100)),
            lost.clone(),
        )));
        (lost, guard)
    }

    /// A verification task (`zermelo coordinator --verify all`): its slices, solved by another
    /// worker and not yet finished, are fetched with the hashes they were uploaded with, with
    /// their successors, and every position of each is re-derived from its children by the
    /// independent verifier (`zermelo-verify`, which shares no code with the solver). The
    /// verdict goes back with the completion: agreed, or the first wrong index of the first
    /// wrong slice (the coordinator re-derives it before it believes either worker).
    async fn do_verify(
        &mut self,
        worker_id: u64,
        task: &Task,
        slices: &[task::SliceRef],
    ) -> Result<(), WorkerError> {
        let mut wanted = self.read_task(task, slices);
        let slices: Vec<SliceKey> = slices.iter().map(|r| r.key).collect();
        wanted.extend(&slices);
        let (lost, _heartbeat) = self.heartbeat(worker_id, task);
        self.hold_successors(&[], &wanted).await?;

        let memory = std::mem::take(&mut self.memory);
        let to_check = slices.clone();
        let (memory, outcome) = tokio::task::spawn_blocking(move || {
            let outcome = verify_all_blocking(&to_check, &memory);
            (memory, outcome)
        })
        .await?;
        self.memory = memory;
        if lost.load(Ordering::Relaxed) {
            warn!("the lease was lost while verifying: its verdict is dropped");
            return Ok(());
        }
        let verdict = match outcome {
            Ok(positions) => {
                info!(
                    slices = slices.len(),
                    positions, "verified: every position agrees with its children"
                );
                pb::Verdict {
                    agreed: true,
                    ..Default::default()
                }
            }
            Err((key, Some(index), reason)) => {
                warn!(%key, index, %reason, "verification found a solved slice wrong");
                pb::Verdict {
                    agreed: false,
                    slice: Some(key_to_wire(&key)),
                    index,
                    reason,
                }
            }
            Err((key, None, reason)) => {
                // Not a wrong value: this worker could not verify (a successor it cannot
                // read). The lease runs out and another worker verifies.
                warn!(%key, %reason, "could not verify: the task is left to another worker");
                return Ok(());
            }
        };
        let request = pb::CompleteTaskRequest {
            worker_id,
            lease_id: task.lease_id,
            slices: Vec::new(),
            verdict: Some(verdict),
        };
        if let Some(a) = self.complete(request).await? {
            info!(slices = slices.len(), job_done = a.job_done, "verification done");
        }
        Ok(())
    }

    /// Makes every successor readable: a small one held in memory (from the cache if it is
    /// there intact, else fetched), a large one (over [`keep_limit`]) read a block at a time
    /// from its table form in the cache (made from its slice file if this worker solved it,
    /// else fetched straight into it). A copy is used only when its hash is the one the task
    /// names ([`Worker::expected`]); a slice the task does not name (the solver asked for it)
    /// is always fetched, and the coordinator's hash of it checked.
    async fn bring_successors(&mut self, successors: &BTreeSet<SliceKey>) -> Result<(), WorkerError> {
        let limit = keep_limit(self.config.memory);
        let (large, wanted): (Vec<SliceKey>, Vec<SliceKey>) = successors
            .iter()
            .filter(|k| !self.memory.contains(k))
            .copied()
            .partition(|k| 2 * SliceIndexer::new(*k).size() > limit);
        for key in large {
            self.bring_large(key).await?;
        }
        if wanted.is_empty() {
            return Ok(());
        }
        let cache = self.cache.clone();
        let named: Vec<(SliceKey, Option<[u8; 32]>)> = wanted
            .into_iter()
            .map(|k| (k, self.expected.get(&k).copied()))
            .collect();
        let from_cache = tokio::task::spawn_blocking(move || {
            named
                .into_iter()
                .map(|(k, hash)| (k, hash.and_then(|h| cache.get_blocking(&k, &h).map(|v| (v, h)))))
                .collect::<Vec<_>>()
        })
        .await?;
        let mut missing = Vec::new();
        for (key, values) in from_cache {
            match values {
                Some((v, hash)) => {
                    self.memory.insert(key, v);
                    self.held.insert(key, hash);
                }
                None => missing.push(key),
            }
        }
        let mut attempt = 0;
        while !missing.is_empty() {
            attempt += 1;
            let (arrived, bad) = self.fetch(&missing).await?;
            for (key, v, hash) in arrived {
                self.memory.insert(key, v);
                self.held.insert(key, hash);
            }
            if let Some((key, reason)) = bad.first() {
                if attempt >= FETCH_ATTEMPTS {
                    return Err(WorkerError::Corrupt {
                        key: *key,
                        reason: reason.clone(),
                    });
                }
            }
            missing = bad.into_iter().map(|(k, _)| k).collect();
        }
        let cache = self.cache.clone();
        let pinned = self.pinned.clone();
        tokio::task::spawn_blocking(move || cache.evict_blocking(&pinned)).await?;
        Ok(())
    }

    /// Makes a large successor readable a block at a time from its table form in the cache.
    async fn bring_large(&mut self, key: SliceKey) -> Result<(), WorkerError> {
        let cache = self.cache.clone();
        let expected = self.expected.get(&key).copied();
        let local = tokio::task::spawn_blocking(move || -> Result<_, CacheError> {
            let Some(hash) = expected else {
                return Ok(None);
            };
            match cache.table_blocking(&key, &hash) {
                Some(table) => Ok(Some(table)),
                None => cache.table_from_slice_file_blocking(&key, &hash),
            }
        })
        .await??;
        let table = match local {
            Some(table) => table,
            None => {
                let mut attempt = 0;
                loop {
                    attempt += 1;
                    match fetch_into_table(&mut self.client, &self.cache, key, expected).await? {
                        Ok(table) => break table,
                        Err(reason) => {
                            self.damaged_arrivals += 1;
                            WorkerStats::add(&self.stats.damaged_arrivals, 1);
                            let damaged = self.damaged_arrivals;
                            warn!(%key, %reason, damaged, "a fetched slice is damaged: fetching it again");
                            if attempt >= FETCH_ATTEMPTS {
                                return Err(WorkerError::Corrupt { key, reason });
                            }
                        }
                    }
                }
            }
        };
        debug!(%key, "a large successor is read a block at a time from the cache");
        let hash = table.slices()[0].hash;
        self.memory
            .insert_table(key, table)
            .map_err(|e| WorkerError::Solve(e.into()))?;
        self.held.insert(key, hash);
        Ok(())
    }

    /// Fetches slices; returns those that arrived intact, with the hash the task names for them
    /// if it names one (written to the cache, with their hash), and those that did not, with
    /// why.
    async fn fetch(
        &mut self,
        keys: &[SliceKey],
    ) -> Result<(Vec<(SliceKey, SliceValues, [u8; 32])>, Vec<(SliceKey, String)>), WorkerError> {
        let (arrived, mut bad) = fetch_checked(&mut self.client, keys).await?;
        let bytes: usize = arrived.iter().map(|(_, _, f)| f.data.len()).sum();
        WorkerStats::add(&self.stats.bytes_fetched, bytes as u64);
        let (arrived, other): (Vec<Fetched>, Vec<Fetched>) = arrived
            .into_iter()
            .partition(|(k, _, file)| self.expected.get(k).is_none_or(|h| *h == file.hash));
        bad.extend(other.into_iter().map(|(k, _, _)| (k, STALE.to_string())));
        let damaged = self.damaged_arrivals;
        for (i, (key, reason)) in bad.iter().enumerate() {
            let damaged = damaged + i as u64 + 1;
            warn!(%key, %reason, damaged, "a fetched slice is damaged: fetching it again");
        }
        self.damaged_arrivals += bad.len() as u64;
        WorkerStats::add(&self.stats.damaged_arrivals, bad.len() as u64);
        let cache = self.cache.clone();
        let good = tokio::task::spawn_blocking(move || -> Result<_, WorkerError> {
            let mut good = Vec::new();
            for (key, values, file) in arrived {
                cache.put_blocking(&key, &file)?;
                good.push((key, values, file.hash));
            }
            Ok(good)
        })
        .await??;
        Ok((good, bad))
    }
}

/// Fetches a large slice straight into its table form in `cache`, decoded and written as its
/// bytes arrive (a few megabytes of memory, whatever its size): the table, or why the bytes
/// that arrived are not the slice (then nothing is left behind).
async fn fetch_into_table(
    client: &mut Client,
    cache: &Arc<SliceCache>,
    key: SliceKey,
    expected: Option<[u8; 32]>,
) -> Result<Result<Arc<Table>, String>, WorkerError> {
    type AnyError = Box<dyn std::error::Error + Send + Sync>;
    let request = pb::FetchSliceRequest {
        keys: vec![key_to_wire(&key)],
    };
    let mut stream = client
        .fetch_slice(request)
        .await
        .map_err(rpc("fetching slices"))?
        .into_inner();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<pb::SliceChunk>(4);
    let cache = cache.clone();
    let writer = tokio::task::spawn_blocking(move || -> Result<Result<Arc<Table>, String>, WorkerError> {
        let mut framer = SliceFramer::with_limit(u64::MAX);
        let mut current: Option<(NewTable<'_>, ValuesDecoder, [u8; 32])> = None;
        let mut done = None;
        while let Some(chunk) = rx.blocking_recv() {
            let piece = match framer.push(chunk) {
                Ok(p) => p,
                Err(e) => return Ok(Err(e.to_string())),
            };
            if let Some(header) = piece.header {
                let sent = header.key.as_ref().map(key_from_wire).transpose()?;
                let hash: Option<[u8; 32]> = header.content_hash.as_slice().try_into().ok();
                let (Some(hash), true) = (hash, sent == Some(key) && done.is_none()) else {
                    return Ok(Err("the coordinator sent another slice".into()));
                };
                if header.positions != SliceIndexer::new(key).size() {
                    return Ok(Err(format!("{} positions announced", header.positions)));
                }
                if expected.is_some_and(|e| e != hash) {
                    return Ok(Err(STALE.into()));
                }
                let table = cache.create_table_blocking(&key, header.positions)?;
                let decoder = ValuesDecoder::new(header.positions).map_err(|e| WorkerError::Rpc {
                    what: "fetching slices",
                    status: Status::internal(e.to_string()),
                })?;
                current = Some((table, decoder, hash));
            }
            let (table, decoder, _) = current.as_mut().expect("the framer puts a header first");
            let pushed = decoder.push(&piece.data, &mut |v: &[u16]| {
                table.push(v).map_err(AnyError::from)
            });
            if let Err(e) = pushed {
                return Ok(Err(e.to_string()));
            }
            if piece.complete {
                let (table, decoder, hash) = current.take().expect("a slice under way");
                if let Err(e) = decoder.finish() {
                    return Ok(Err(e.to_string()));
                }
                done = Some(table.finish(&hash)?);
            }
        }
        if let Err(e) = framer.finish() {
            return Ok(Err(e.to_string()));
        }
        done.ok_or(WorkerError::NotSent(key))
    });
    let mut failed = None;
    loop {
        match stream.message().await {
            Ok(Some(chunk)) => {
                if tx.send(chunk).await.is_err() {
                    break; // the writer stopped: its result says why
                }
            }
            Ok(None) => break,
            Err(status) => {
                failed = Some(status);
                break;
            }
        }
    }
    drop(tx);
    let written = writer.await?;
    match failed {
        Some(status) => Err(rpc("fetching slices")(status)),
        None => written,
    }
}

/// A slice fetched intact: its key, values and file (the compressed form with its hash).
pub type Fetched = (SliceKey, SliceValues, SliceFile);

/// Fetches finished slices from the coordinator. Returns those that arrived intact (each
/// checked against its content hash) and those that arrived damaged, with the reason; an error
/// if the coordinator left one out. Asks for [`pb::MAX_FETCH_KEYS`] at a time.
pub async fn fetch_checked(
    client: &mut Client,
    keys: &[SliceKey],
) -> Result<(Vec<Fetched>, Vec<(SliceKey, String)>), WorkerError> {
    let (mut good, mut bad) = (Vec::new(), Vec::new());
    for batch in keys.chunks(pb::MAX_FETCH_KEYS) {
        let (g, b) = fetch_batch(client, batch).await?;
        good.extend(g);
        bad.extend(b);
    }
    Ok((good, bad))
}

/// [`fetch_checked`] of at most [`pb::MAX_FETCH_KEYS`] keys.
async fn fetch_batch(
    client: &mut Client,
    keys: &[SliceKey],
) -> Result<(Vec<Fetched>, Vec<(SliceKey, String)>), WorkerError> {
    let request = pb::FetchSliceRequest {
        keys: keys.iter().map(key_to_wire).collect(),
    };
    let mut stream = client
        .fetch_slice(request)
        .await
        .map_err(rpc("fetching slices"))?
        .into_inner();
    let mut assembler = SliceAssembler::new();
    let mut received = Vec::new();
    while let Some(chunk) = stream.message().await.map_err(rpc("fetching slices"))? {
        let framed = assembler.push(chunk).map_err(|e| WorkerError::Rpc {
            what: "fetching slices",
            status: Status::data_loss(e.to_string()),
        })?;
        received.extend(framed);
    }
    let wanted: BTreeSet<SliceKey> = keys.iter().copied().collect();
    let (good, bad) = tokio::task::spawn_blocking(move || -> Result<_, WorkerError> {
        let mut good = Vec::new();
        let mut bad = Vec::new();
        for (header, data) in received {
            let key = key_from_wire(header.key.as_ref().expect("the assembler checks for a key"))?;
            if !wanted.contains(&key) {
                continue;
            }
            match check_arrival(&key, &header, &data) {
                Ok((hash, values)) => {
                    let file = SliceFile {
                        hash,
                        positions: header.positions,
                        data,
                    };
                    good.push((key, values, file));
                }
                Err(reason) => bad.push((key, reason)),
            }
        }
        Ok((good, bad))
    })
    .await??;
    let arrived: BTreeSet<SliceKey> = good
        .iter()
        .map(|(k, _, _)| *k)
        .chain(bad.iter().map(|(k, _)| *k))
        .collect();
    if let Some(k) = keys.iter().find(|k| !arrived.contains(k)) {
        return Err(WorkerError::NotSent(*k));
    }
    Ok((good, bad))
}

/// Decodes a fetched slice and checks its hash against its header.
fn check_arrival(
    key: &SliceKey,
    header: &pb::SliceHeader,
    data: &[u8],
) -> Result<([u8; 32], SliceValues), String> {
    let announced: [u8; 32] = header
        .content_hash
        .as_slice()
        .try_into()
        .map_err(|_| "a hash that is not 32 bytes".to_string())?;
    let values = zermelo_proto::keys::decode_checked(key, data, header.positions, &announced)?;
    Ok((announced, values.into()))
}

/// Heartbeats one lease until aborted; sets `lost` and stops when the lease is no longer ours.
async fn heartbeat(mut client: Client, worker_id: u64, lease: u64, every: Duration, lost: Arc<AtomicBool>) {
    loop {
        tokio::time::sleep(every).await;
        match client
            .heartbeat(pb::HeartbeatRequest {
                worker_id,
                lease_ids: vec![lease],
            })
            .await
        {
            Ok(answer) => {
                let answer = answer.into_inner();
                if answer.unknown_worker || !answer.valid_lease_ids.contains(&lease) {
                    lost.store(true, Ordering::Relaxed);
                    return;
                }
            }
            Err(status) => warn!(%status, "heartbeat failed"),
        }
    }
}

/// How [`solve_all_blocking`] solves a task's slices.
struct How<'a> {
    /// Threads for the task.
    threads: usize,
    /// With the bitmaps of changed positions ([`crate::solver::solve_slice_into`]).
    changed_bits: bool,
    /// A task of one pawnless slice past the budget: its state paged.
    paging: Option<&'a Paging>,
    /// A task of one pawnless slice by lines solved by the compact solver (paged with `paging`).
    compact: bool,
    /// Solved slices of at most this many bytes of values are kept in memory.
    keep: u64,
    /// For tests: a broken solver.
    tamper: Option<Tamper>,
}

/// Solves the slices of a task against the successors in `memory`, each written to `cache` as
/// it is solved (its values kept in memory too when they take at most `keep` bytes); a slice
/// whose solve asks for a slice not in `memory` is returned as (slice, the slice it asked for)
/// instead. Many small slices go one to a thread; otherwise each slice uses every thread.
/// Blocking.
#[allow(clippy::type_complexity)]
fn solve_all_blocking(
    slices: &[SliceKey],
    memory: &SliceMap,
    cache: &SliceCache,
    how: &How<'_>,
) -> Result<(Vec<Solved>, Vec<(SliceKey, SliceKey)>), WorkerError> {
    let &How {
        threads,
        changed_bits,
        paging,
        compact,
        keep,
        tamper,
    } = how;
    let one = |key: &SliceKey, threads: usize| -> Result<Result<Solved, SliceKey>, WorkerError> {
        let _span = info_span!("slice", slice = %key).entered();
        let positions = SliceIndexer::new(*key).size();
        let mut file = cache.create_blocking(key, positions)?;
        let mut kept = (2 * positions <= keep).then(|| Vec::with_capacity(positions as usize));
        let mut first = 0u64;
        let mut changed = Vec::new();
        let mut sink = |values: &[u16]| {
            let values = match tamper {
                None => values,
                Some(tamper) => {
                    changed.clear();
                    changed.extend_from_slice(values);
                    tamper(key, first, &mut changed);
                    &changed[..]
                }
            };
            first += values.len() as u64;
            file.push(values).map_err(|e| SolveError::Output(Box::new(e)))?;
            if let Some(kept) = kept.as_mut() {
                kept.extend_from_slice(values);
            }
            Ok(())
        };
        let solved = if compact {
            solve_slice_bits(key, memory, threads, paging, None, &mut sink)
        } else {
            solve_slice_resumable(
                key,
                memory,
                (threads, changed_bits),
                None,
                paging,
                None,
                &mut sink,
            )
        };
        match solved {
            Ok(()) => {}
            Err(SolveError::MissingSuccessor(t)) if !memory.contains(&t) => return Ok(Err(t)),
            Err(e) => return Err(e.into()),
        }
        let (hash, _) = file.finish()?;
        Ok(Ok(Solved {
            key: *key,
            positions,
            hash,
            values: kept.map(SliceValues::from),
        }))
    };
    let results: Vec<Result<Solved, SliceKey>> = if threads > 1 && slices.len() >= 2 * threads {
        let out: Mutex<Vec<Option<Result<Solved, SliceKey>>>> =
            Mutex::new((0..slices.len()).map(|_| None).collect());
        for_each_chunk(slices.len(), 1, threads, |range| {
            for i in range {
                let s = one(&slices[i], 1)?;
                out.lock().expect("results lock")[i] = Some(s);
            }
            Ok::<(), WorkerError>(())
        })?;
        out.into_inner()
            .expect("results lock")
            .into_iter()
            .map(|s| s.expect("every slice solved"))
            .collect()
    } else {
        slices.iter().map(|k| one(k, threads)).collect::<Result<_, _>>()?
    };
    let mut solved = Vec::new();
    let mut wanting = Vec::new();
    for (key, r) in slices.iter().zip(results) {
        match r {
            Ok(s) => solved.push(s),
            Err(t) => wanting.push((*key, t)),
        }
    }
    Ok((solved, wanting))
}

/// A slice key from the coordinator, checked with the codec the coordinator uses
/// ([`zermelo_proto::keys`]).
/// Verifies each of `slices` whole with the independent verifier, reading them and their
/// successors from `memory`: the positions re-derived, or the first wrong slice with the index
/// of its first wrong value (`None` when the fault is not at an index) and what is wrong.
fn verify_all_blocking(
    slices: &[SliceKey],
    memory: &SliceMap,
) -> Result<u64, (SliceKey, Option<u64>, String)> {
    use crate::solver::Successors;
    let whole = |key: &SliceKey| -> Option<Arc<Vec<u16>>> {
        let values = memory.slice_values(key)?;
        let n = SliceIndexer::new(*key).size();
        (0..n)
            .map(|i| values.get(i).ok())
            .collect::<Option<Vec<u16>>>()
            .map(Arc::new)
    };
    let successor = |name: &str, raw: [u64; 2]| whole(&zermelo_proto::keys::from_raw(name, raw).ok()?);
    let mut positions = 0;
    for key in slices {
        let values = whole(key).ok_or((*key, None, "the slice is not readable here".to_owned()))?;
        match zermelo_verify::verify_slice(&key.material.to_string(), key.raw(), &values, &successor) {
            Ok(report) => positions += report.derived,
            Err(f) => return Err((*key, f.index, f.error.to_string())),
        }
    }
    Ok(positions)
}

fn key_from_wire(k: &pb::SliceKey) -> Result<SliceKey, WorkerError> {
    zermelo_proto::keys::from_wire(k).map_err(|e| WorkerError::BadKey(e.0))
}

/// How a task's slices are solved within the worker's budget ([`Worker::plan_task`]).
struct TaskPlan {
    /// The bytes the task needs that way.
    needed: u64,
    /// With each thread's bitmap of changed positions.
    changed_bits: bool,
    /// The state paged through the cache folder.
    paging: Option<Paging>,
    /// By the compact solver (three bits a position).
    compact: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use zermelo_proto::wire::encode_values;

    #[test]
    fn a_fetched_slice_with_a_wrong_hash_is_refused() {
        let key = SliceKey::pawnless("KQvK".parse().unwrap());
        let values = vec![5u16; 64];
        let mut header = pb::SliceHeader {
            key: Some(key_to_wire(&key)),
            total_length: 0,
            content_hash: zermelo_proto::keys::slice_hash(&key, &values).to_vec(),
            positions: 64,
        };
        let data = encode_values(&values);
        assert!(check_arrival(&key, &header, &data).is_ok());
        header.content_hash[0] ^= 1;
        assert!(check_arrival(&key, &header, &data).is_err());
    }

    #[test]
    fn wire_keys_round_trip() {
        let key = SliceKey::all_of("KPvKP".parse().unwrap())[3];
        assert_eq!(key_from_wire(&key_to_wire(&key)).unwrap(), key);
        let mut w = key_to_wire(&key);
        w.material = "KPKP".into();
        assert!(key_from_wire(&w).is_err());
    }
}
