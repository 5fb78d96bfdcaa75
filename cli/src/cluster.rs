//! The cluster commands: `coordinator`, `worker`, `submit`, `status`, and `cluster`, which
//! runs a coordinator and N workers of this same binary on loopback for one job.

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use tonic::Code;
use tracing::info;
use zermelo_coordinator::{serve_with_metrics, ServiceConfig, TlsIdentity};
use zermelo_proto as pb;
use zermelo_worker::node::client::{connect_with_tls, WorkerConfig};

use crate::child::{LoggedChild, Usage};
use crate::memory::human_bytes;
use crate::Failure;
use zermelo_chess::index::SliceIndexer;
use zermelo_chess::{Material, SliceKey};
use zermelo_worker::node::client::part_task_memory;
use zermelo_worker::solver::splittable;

fn fail(code: u8, message: impl Into<String>) -> Failure {
    Failure::new(code, message)
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| fail(2, format!("starting the async runtime: {e}")))
}

/// Resolves on ctrl-c or SIGTERM. The handlers are installed when this is called, not when the
/// future is first polled: a server that spawns the future (axum's graceful shutdown does) may
/// answer requests before that task first runs, and a SIGTERM then would kill the process
/// unhandled (a test that stopped the server right after its first answer failed so under load).
/// Call it in the runtime, before the process says it is ready.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let signals = {
        use tokio::signal::unix::{signal, SignalKind};
        (
            signal(SignalKind::interrupt()).ok(),
            signal(SignalKind::terminate()).ok(),
        )
    };
    async move {
        #[cfg(unix)]
        match signals {
            (Some(mut interrupt), Some(mut term)) => {
                tokio::select! {
                    _ = interrupt.recv() => {}
                    _ = term.recv() => {}
                }
            }
            (None, Some(mut term)) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
        info!("stop signal received");
    }
}

/// Reads a PEM file named by a flag (one clear line if it cannot be read).
pub fn read_pem(flag: &str, path: &Path) -> Result<Vec<u8>, Failure> {
    std::fs::read(path).map_err(|e| fail(2, format!("cannot read {flag} {}: {e}", path.display())))
}

/// A client of the coordinator (see [`connect_with_tls`]), its errors as one line.
fn client(
    url: &str,
    token: Option<&str>,
    tls_ca: Option<&[u8]>,
) -> Result<zermelo_worker::node::client::Client, Failure> {
    connect_with_tls(url, token, tls_ca).map_err(|e| fail(2, e.to_string()))
}

/// How `zermelo coordinator` runs, beyond the service's own configuration.
#[derive(Debug, Default)]
pub struct CoordinatorOptions {
    /// Serve `GET /metrics` (Prometheus) on this address.
    pub metrics_listen: Option<String>,
    /// Serve gRPC over TLS with this certificate and key.
    pub tls: Option<TlsIdentity>,
    /// Positions re-derived per uploaded slice ([`ServiceConfig::check_sample`]).
    pub check_sample: usize,
    /// Uploads of at most this many positions held whole for the check
    /// ([`ServiceConfig::check_whole_positions`]).
    pub check_whole_positions: u64,
    /// The longest a lease lives, in seconds.
    pub max_lease_time: u64,
    /// Every solved slice verified whole by a second worker ([`ServiceConfig::verify_all`]).
    pub verify_all: bool,
    /// The most parts a slice is solved in by a group of workers
    /// ([`zermelo_coordinator::schedule::Config::parts`]); 1: none.
    pub parts: u32,
    /// The fewest positions of a slice solved in parts.
    pub split_over: u64,
}

/// The shortest cluster token a coordinator accepts, in characters.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Refuses a cluster token anyone could guess: shorter than [`MIN_TOKEN_CHARS`], or a
/// placeholder of the shipped examples.
fn check_token(token: &str) -> Result<(), Failure> {
    let hint = "make one with `openssl rand -hex 24` and give the same to every worker";
    let lower = token.to_ascii_lowercase();
    if [
        "change-me",
        "changeme",
        "change_me",
        "example",
        "token",
        "secret",
        "password",
    ]
    .iter()
    .any(|p| lower.trim() == *p)
    {
        return Err(fail(
            2,
            format!("the cluster token is a placeholder of the examples, not a secret: {hint}"),
        ));
    }
    if token.chars().count() < MIN_TOKEN_CHARS {
        return Err(fail(
            2,
            format!(
                "the cluster token has {} characters, fewer than {MIN_TOKEN_CHARS}: {hint}",
                token.chars().count()
            ),
        ));
    }
    Ok(())
}

/// `zermelo coordinator`: serves until ctrl-c or SIGTERM.
pub fn coordinator(
    listen: &str,
    tables: &Path,
    state: Option<&Path>,
    token: Option<String>,
    lease_ttl_seconds: u64,
    options: CoordinatorOptions,
) -> Result<u8, Failure> {
    if let Some(t) = &token {
        check_token(t)?;
    }
    let defaults = ServiceConfig::new(tables);
    let lease_ttl = lease_ttl_seconds.saturating_mul(1000);
    let config = ServiceConfig {
        state: state.map_or(defaults.state, Path::to_path_buf),
        token,
        tls: options.tls,
        check_sample: options.check_sample,
        check_whole_positions: options.check_whole_positions,
        verify_all: options.verify_all,
        schedule: zermelo_coordinator::schedule::Config {
            lease_ttl,
            worker_timeout: lease_ttl.saturating_mul(3),
            parts: options.parts.max(1),
            split_over: options.split_over,
            splittable: zermelo_worker::solver::splittable,
            max_lease_lifetime: options.max_lease_time.saturating_mul(1000),
            ..defaults.schedule
        },
        ..defaults
    };
    let tls_off = config.tls.is_none();
    if let Some(tls) = &config.tls {
        tls.server_config().map_err(|e| fail(2, e.to_string()))?;
    }
    let rt = runtime()?;
    let result = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| fail(2, format!("cannot listen on {listen}: {e}")))?;
        if let Ok(addr) = listener.local_addr() {
            if !addr.ip().is_loopback() && tls_off {
                tracing::warn!(
                    %addr,
                    "serving gRPC beyond this machine in plain text: the token and the slices cross the network unencrypted; give --tls-cert and --tls-key, or listen on 127.0.0.1"
                );
            }
        }
        let metrics = match &options.metrics_listen {
            Some(addr) => Some(
                tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| fail(2, format!("cannot listen on {addr} (--metrics-listen): {e}")))?,
            ),
            None => None,
        };
        serve_with_metrics(config, listener, metrics, shutdown_signal())
            .await
            .map_err(|e| fail(2, e.to_string()))
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    result.map(|()| 0)
}

/// What `zermelo worker` is given.
pub struct WorkerOptions<'a> {
    pub coordinator: &'a str,
    pub cache: &'a Path,
    pub cache_size: u64,
    pub threads: usize,
    pub memory: u64,
    pub token: Option<String>,
    pub tls_ca: Option<Vec<u8>>,
    /// Serve the worker's metrics on this address.
    pub metrics_listen: Option<&'a str>,
}

/// `zermelo worker`: works until ctrl-c or SIGTERM (exit 0) or a fatal error (exit 2).
pub fn worker(o: WorkerOptions<'_>) -> Result<u8, Failure> {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "worker".into());
    let metrics_listen = o.metrics_listen;
    let config = WorkerConfig {
        coordinator: o.coordinator.to_owned(),
        tls_ca: o.tls_ca,
        cache: o.cache.to_owned(),
        cache_size: o.cache_size,
        threads: o.threads,
        memory: o.memory,
        token: o.token,
        name: format!("{host}-{}", std::process::id()),
        tamper: None,
    };
    let rt = runtime()?;
    let result = rt.block_on(async {
        let metrics = match metrics_listen {
            Some(addr) => Some(
                tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| fail(2, format!("cannot listen on {addr} (--metrics-listen): {e}")))?,
            ),
            None => None,
        };
        zermelo_worker::node::client::run_with_metrics(config, metrics, shutdown_signal())
            .await
            .map_err(|e| fail(2, e.to_string()))
    });
    // A solve still running on the blocking pool is abandoned, not waited for.
    rt.shutdown_background();
    result.map(|()| 0)
}

fn status_error(what: &str, url: &str, status: tonic::Status) -> Failure {
    if let Some(reason) = zermelo_worker::node::client::certificate_refused(&status) {
        return fail(2, format!("{what}: {url}: {reason}"));
    }
    match status.code() {
        Code::Unauthenticated => fail(
            2,
            format!(
                "{what}: unauthenticated: the coordinator at {url} refused the token ({})",
                status.message()
            ),
        ),
        Code::Unavailable => fail(
            2,
            format!(
                "{what}: the coordinator at {url} does not answer ({})",
                status.message()
            ),
        ),
        // An error raised on this side of the connection (it has a source; a status sent by the
        // coordinator has none): on a plain URL, a TLS server is a likely cause.
        _ if url.starts_with("http://") && std::error::Error::source(&status).is_some() => fail(
            2,
            format!(
                "{what}: {url}: {} (if the coordinator serves TLS, use https:// and --tls-ca)",
                describe(&status)
            ),
        ),
        _ => fail(2, format!("{what}: {}", describe(&status))),
    }
}

/// A status's message with the errors under it (a transport error says little by itself).
fn describe(status: &tonic::Status) -> String {
    pb::error_chain(status.message(), std::error::Error::source(status))
}

fn state_name(state: i32) -> &'static str {
    match pb::JobState::try_from(state).unwrap_or(pb::JobState::Unspecified) {
        pb::JobState::Queued => "queued",
        pb::JobState::Running => "running",
        pb::JobState::Done => "done",
        pb::JobState::Failed => "failed",
        pb::JobState::Unspecified => "unknown",
    }
}

/// `zermelo status`: prints the coordinator's answer as JSON; exit 0 when it answers.
pub fn status(
    url: &str,
    job: Option<u64>,
    token: Option<String>,
    tls_ca: Option<Vec<u8>>,
) -> Result<u8, Failure> {
    let rt = runtime()?;
    rt.block_on(async {
        let mut client = client(url, token.as_deref(), tls_ca.as_deref())?;
        let answer = tokio::time::timeout(
            Duration::from_secs(10),
            client.job_status(pb::JobStatusRequest { job_id: job }),
        )
        .await
        .map_err(|_| {
            fail(
                2,
                format!("status: the coordinator at {url} did not answer within 10 s"),
            )
        })?;
        let answer = match answer {
            Ok(a) => a.into_inner(),
            Err(s) if s.code() == Code::NotFound => return Err(fail(1, format!("status: {}", s.message()))),
            Err(s) => return Err(status_error("status", url, s)),
        };
        let jobs: Vec<serde_json::Value> = answer
            .jobs
            .iter()
            .map(|j| {
                serde_json::json!({
                    "job": j.job_id,
                    "materials": j.materials,
                    "state": state_name(j.state),
                    "slices_done": j.slices_done,
                    "slices_total": j.slices_total,
                    "positions_done": j.positions_done,
                    "positions_total": j.positions_total,
                    "positions_per_second": j.positions_per_second,
                    "error": if j.error.is_empty() { None } else { Some(&j.error) },
                })
            })
            .collect();
        let out = serde_json::json!({
            "workers_alive": answer.workers_alive,
            "bytes_uploaded": answer.bytes_uploaded,
            "bytes_fetched": answer.bytes_fetched,
            "bytes_met": answer.bytes_met,
            "jobs": jobs,
        });
        println!("{}", serde_json::to_string_pretty(&out).expect("json"));
        Ok(0)
    })
}

/// The request of a job that builds `materials`.
fn materials_job(materials: &[String]) -> pb::SubmitJobRequest {
    pb::SubmitJobRequest {
        materials: materials.to_vec(),
        roots: Vec::new(),
    }
}

/// How long a submit waits for a coordinator that does not answer yet (one starting up).
const SUBMIT_PATIENCE: Duration = Duration::from_secs(15);

/// Submits a job; returns its id. A coordinator that does not answer (still starting, say) is
/// asked again every quarter second for [`SUBMIT_PATIENCE`].
async fn submit_job(
    url: &str,
    token: Option<&str>,
    tls_ca: Option<&[u8]>,
    request: pb::SubmitJobRequest,
) -> Result<pb::SubmitJobResponse, Failure> {
    let mut client = client(url, token, tls_ca)?;
    let start = Instant::now();
    loop {
        match client.submit_job(request.clone()).await {
            Ok(a) => return Ok(a.into_inner()),
            Err(s) if s.code() == Code::InvalidArgument => {
                return Err(fail(2, format!("submit: {}", s.message())))
            }
            Err(s) if s.code() == Code::Unavailable && start.elapsed() < SUBMIT_PATIENCE => {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(s) => return Err(status_error("submit", url, s)),
        }
    }
}

/// Polls a job until it is done (Ok) or failed (exit 1); `alive` is asked between polls and
/// may end the wait. Transient errors (a coordinator restarting) are retried for a minute.
async fn wait_for_job(
    url: &str,
    token: Option<&str>,
    tls_ca: Option<&[u8]>,
    job: u64,
    bar: Option<&ProgressBar>,
    alive: impl FnMut() -> Result<(), Failure>,
) -> Result<pb::JobInfo, Failure> {
    let report = |done: u64, total: u64| {
        if let Some(b) = bar {
            crate::progress::set_bar(b, done, total);
        }
    };
    wait_for_job_reporting(url, token, tls_ca, job, &report, alive).await
}

/// [`wait_for_job`], reporting (positions done, positions in the job) after each poll.
async fn wait_for_job_reporting(
    url: &str,
    token: Option<&str>,
    tls_ca: Option<&[u8]>,
    job: u64,
    report: &(dyn Fn(u64, u64) + Sync),
    mut alive: impl FnMut() -> Result<(), Failure>,
) -> Result<pb::JobInfo, Failure> {
    let mut client = client(url, token, tls_ca)?;
    let mut failing_since: Option<Instant> = None;
    loop {
        alive()?;
        match client
            .job_status(pb::JobStatusRequest { job_id: Some(job) })
            .await
        {
            Ok(answer) => {
                failing_since = None;
                let Some(info) = answer.into_inner().jobs.into_iter().next() else {
                    return Err(fail(2, format!("the coordinator does not report job {job}")));
                };
                report(info.positions_done, info.positions_total);
                match pb::JobState::try_from(info.state).unwrap_or(pb::JobState::Unspecified) {
                    pb::JobState::Done => return Ok(info),
                    pb::JobState::Failed => return Err(fail(1, format!("job {job} failed: {}", info.error))),
                    _ => {}
                }
            }
            Err(s)
                if matches!(s.code(), Code::Unauthenticated | Code::NotFound)
                    || zermelo_worker::node::client::certificate_refused(&s).is_some() =>
            {
                return Err(status_error("status", url, s))
            }
            Err(s) => {
                let since = *failing_since.get_or_insert_with(Instant::now);
                if since.elapsed() > Duration::from_secs(60) {
                    return Err(status_error("status", url, s));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `zermelo analyse --coordinator`: submits an analysis job for the slices reachable from
/// `roots`, waits until it is done, and fetches the slices `wanted` (each checked against its
/// content hash; a damaged arrival is fetched again, three tries in all).
pub fn analyse_remote(
    url: &str,
    token: Option<&str>,
    tls_ca: Option<&[u8]>,
    roots: &[zermelo_chess::SliceKey],
    wanted: &[zermelo_chess::SliceKey],
    report: &(dyn Fn(u64, u64) + Sync),
) -> Result<zermelo_worker::waves::Solved, Failure> {
    runtime()?.block_on(async {
        let request = pb::SubmitJobRequest {
            materials: Vec::new(),
            roots: roots.iter().map(zermelo_proto::keys::to_wire).collect(),
        };
        let job = submit_job(url, token, tls_ca, request).await?;
        let mut client = client(url, token, tls_ca)?;
        info!(
            job = job.job_id,
            slices = job.slices_total,
            positions = job.positions_total,
            "analysis job submitted"
        );
        wait_for_job_reporting(url, token, tls_ca, job.job_id, report, || Ok(())).await?;
        let mut out = Vec::new();
        let mut todo: Vec<zermelo_chess::SliceKey> = wanted.to_vec();
        for _ in 0..3 {
            if todo.is_empty() {
                break;
            }
            let mut next = Vec::new();
            // A few hundred slices per request keeps each stream short.
            for keys in todo.chunks(pb::MAX_FETCH_KEYS) {
                let (good, bad) = zermelo_worker::node::client::fetch_checked(&mut client, keys)
                    .await
                    .map_err(|e| fail(1, format!("fetching the analysis slices: {e}")))?;
                out.extend(good.into_iter().map(|(k, v, _)| (k, v)));
                for (key, reason) in bad {
                    tracing::warn!(%key, %reason, "a fetched slice is damaged: fetching it again");
                    next.push(key);
                }
            }
            todo = next;
        }
        if let Some(k) = todo.first() {
            return Err(fail(1, format!("slice {k} arrived damaged three times")));
        }
        Ok(out)
    })
}

/// `zermelo submit`: prints the job id; with `wait`, shows progress until the job is done.
pub fn submit(
    url: &str,
    materials: &[String],
    wait: bool,
    token: Option<String>,
    tls_ca: Option<Vec<u8>>,
    bar: Option<ProgressBar>,
) -> Result<u8, Failure> {
    let (token, tls_ca) = (token.as_deref(), tls_ca.as_deref());
    let rt = runtime()?;
    rt.block_on(async {
        let job = submit_job(url, token, tls_ca, materials_job(materials)).await?;
        println!("{}", job.job_id);
        eprintln!(
            "zermelo: job {} submitted: {} slices, {} positions",
            job.job_id, job.slices_total, job.positions_total
        );
        if wait {
            let start = Instant::now();
            let info = wait_for_job(url, token, tls_ca, job.job_id, bar.as_ref(), || Ok(())).await?;
            if let Some(b) = &bar {
                b.finish_and_clear();
            }
            eprintln!(
                "zermelo: job {} done: {} slices, {} positions in {:.1} s",
                info.job_id,
                info.slices_total,
                info.positions_total,
                start.elapsed().as_secs_f64()
            );
        }
        Ok(0)
    })
}

/// The processes of a cluster run: the coordinator first, then the workers.
struct Children {
    procs: Vec<LoggedChild>,
    logs: PathBuf,
    /// What each child stopped used, by name.
    usage: Vec<ChildUsage>,
}

/// What one child process of a cluster run used, from `wait4` when it was reaped.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildUsage {
    /// `coordinator`, `worker-0`, ...
    pub name: String,
    /// Peak resident memory, bytes.
    pub peak: u64,
    /// User plus system CPU time, seconds.
    pub cpu: f64,
}

impl Children {
    fn spawn(&mut self, name: &str, args: &[&str], token: &str) -> Result<(), Failure> {
        let exe = std::env::current_exe().map_err(|e| fail(2, format!("cannot find this binary: {e}")))?;
        let mut cmd = Command::new(exe);
        cmd.args(args).env("ZERMELO_TOKEN", token);
        if std::env::var_os("ZERMELO_LOG").is_none() {
            cmd.env("ZERMELO_LOG", "info");
        }
        let log = self.logs.join(format!("{name}.log"));
        let child = LoggedChild::spawn(cmd, name, &log)
            .map_err(|e| fail(2, format!("starting the {name} (its log {}): {e}", log.display())))?;
        self.procs.push(child);
        Ok(())
    }

    /// An error if a child has exited.
    fn check(&mut self) -> Result<(), Failure> {
        for child in &mut self.procs {
            if let Some(status) = child.exited() {
                return Err(fail(
                    2,
                    format!(
                        "the {} exited ({status}); its log: {}",
                        child.name(),
                        child.log_path().display()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Stops the children, workers first (the coordinator last), each with SIGTERM and up to
    /// `grace` to exit, then SIGKILL.
    /// Records what each one used ([`Children::usage`]).
    fn stop(&mut self, grace: Duration) {
        for child in self.procs.iter_mut().rev() {
            if let Some(Usage { peak, cpu }) = child.stop(grace) {
                self.usage.push(ChildUsage {
                    name: child.name().to_owned(),
                    peak,
                    cpu,
                });
            }
        }
    }

    /// The last lines of every log, for a failure message.
    fn log_tails(&self) -> String {
        self.procs.iter().map(|c| c.log_tail(15)).collect()
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(2));
    }
}

fn free_port() -> Result<u16, Failure> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| fail(2, format!("finding a free port: {e}")))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| fail(2, format!("finding a free port: {e}")))
}

fn fresh_token() -> String {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded from the OS's randomness: two of them give unrelated values.
    let word = || {
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
    };
    format!("{:016x}{:016x}", word(), word())
}

/// `zermelo cluster`: a coordinator and `workers` worker processes of this binary on
/// 127.0.0.1 (each with `threads` threads and a memory budget of `memory` bytes), one job, then
/// everything stopped. Exit 0 when the job is done.
pub fn cluster(
    workers: usize,
    materials: &[String],
    tables: &Path,
    (threads, memory): (usize, u64),
    (parts, logs): (Parts, Option<&Path>),
    bar: Option<ProgressBar>,
) -> Result<u8, Failure> {
    // Packed tables (`zermelo pack`) are for probes: the job would write full ones over them.
    let parsed: Vec<Material> = (materials.iter())
        .filter_map(|m| Material::parse_table(m, crate::MAX_MEN).ok())
        .collect();
    let dir = zermelo_worker::tables::TableDir::new(tables);
    crate::build::refuse_packed(&dir, &zermelo_coordinator::plan::plan(&parsed))
        .map_err(|e| Failure::input(e.to_string()))?;
    let done = run_cluster(
        workers,
        materials,
        tables,
        (threads, memory),
        (None, logs),
        parts,
        bar,
    )?;
    // The slices of tables already complete in `tables` are not solved again: when every table
    // was, the workers upload nothing.
    eprintln!(
        "zermelo: cluster of {workers} worker(s) finished a job of {} slices, {} positions in {:.1} s ({}); \
         {} slice bytes uploaded by the workers, {} fetched",
        done.info.slices_total,
        done.info.positions_total,
        done.seconds,
        tables.display(),
        done.bytes_uploaded,
        done.bytes_fetched
    );
    if done.bytes_met > 0 {
        let positions = done.info.positions_total.max(1);
        eprintln!(
            "zermelo: slices solved in parts (up to {} parts, slices of {} positions or more): {} bytes given between the parts, {:.2} a position of the job",
            parts.parts,
            parts.split_over,
            done.bytes_met,
            done.bytes_met as f64 / positions as f64
        );
    }
    let peaks: Vec<String> = done
        .usage
        .iter()
        .map(|u| format!("{} {}", u.name, human_bytes(u.peak)))
        .collect();
    eprintln!("zermelo: peak memory: {}", peaks.join(", "));
    Ok(0)
}

/// A finished cluster run: the job as the coordinator last reported it, the slice bytes that
/// went over gRPC, and the seconds from submission to done.
#[derive(Debug, Clone)]
pub struct ClusterRun {
    pub info: pb::JobInfo,
    /// Slice bytes the workers uploaded to the coordinator.
    pub bytes_uploaded: u64,
    /// Slice bytes the workers fetched from the coordinator.
    pub bytes_fetched: u64,
    /// Bytes the parts of slices solved in parts gave each other through the coordinator.
    pub bytes_met: u64,
    pub seconds: f64,
    /// What each process used (coordinator, worker-0, ...), by name.
    pub usage: Vec<ChildUsage>,
}

/// What a worker's budget keeps beside a whole slice's compact state, for [`Parts::for_workers`]:
/// its threads' buffers, the file encoder, the successors it reads.
pub const WORKER_RESERVE: u64 = 256 << 20;

/// How a cluster cuts large slices into parts, each solved by one worker of a group: up to
/// `parts` parts, slices of `split_over` positions or more (the coordinator's `--parts` and
/// `--split-over`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parts {
    pub parts: u32,
    pub split_over: u64,
}

impl Parts {
    /// No slice in parts.
    pub const NONE: Parts = Parts {
        parts: 1,
        split_over: u64::MAX,
    };

    /// For workers of `memory` bytes each: slices that one of them cannot solve in memory are
    /// cut into up to `workers` parts. A slice that can be cut (pawnless, by lines) is solved
    /// whole by a worker's compact solver when its three bits a position fit with
    /// [`WORKER_RESERVE`] to spare (a part holds the byte solver's state, a byte and a bit a
    /// position of its share: more than the compact solver's whole slice in 3 parts).
    pub fn for_workers(workers: usize, memory: u64) -> Parts {
        Parts {
            parts: workers.clamp(1, zermelo_chess::index::PAWNLESS_KING_PAIRS) as u32,
            split_over: memory.saturating_sub(WORKER_RESERVE) / 3 * 8,
        }
    }

    /// The largest slice of `materials` (and of what they convert into) these parts would cut
    /// whose largest part does not fit a worker of `memory` bytes on `threads` threads (what
    /// the worker counts for it, [`part_task_memory`], with [`WORKER_RESERVE`] to spare for
    /// its successors), with what that part needs; `None` if every slice cut fits. Such a slice is better solved whole
    /// by one worker, its compact state paged (in 3 parts or fewer, a part needs more than the
    /// compact solver's whole slice).
    pub fn overflowing(
        &self,
        materials: &[Material],
        memory: u64,
        threads: usize,
    ) -> Option<(SliceKey, u64)> {
        let plan = zermelo_coordinator::plan::plan(materials);
        let parts = self.parts as usize;
        plan.materials
            .iter()
            .flat_map(|mp| mp.slices().copied().collect::<Vec<_>>())
            .filter(|key| parts > 1 && splittable(key))
            .filter(|key| SliceIndexer::new(*key).size() >= self.split_over)
            .map(|key| {
                let part = (0..parts)
                    .map(|me| part_task_memory(&key, (parts, me), &BTreeSet::new(), threads, memory).0)
                    .max()
                    .unwrap_or(0);
                (key, part + WORKER_RESERVE)
            })
            .filter(|&(_, need)| need > memory)
            .max_by_key(|(key, _)| SliceIndexer::new(*key).size())
    }
}

/// Runs a coordinator and `workers` worker processes of this binary on 127.0.0.1 for one job
/// and stops them (each is waited for, so their CPU time is in `RUSAGE_CHILDREN` afterwards).
/// `check_sample` is the coordinator's `--check-sample` (`None`: its default); the processes'
/// logs go to `logs` if given (kept), else to a temporary folder kept only on a failure.
pub fn run_cluster(
    workers: usize,
    materials: &[String],
    tables: &Path,
    (threads, memory): (usize, u64),
    (check_sample, kept_logs): (Option<usize>, Option<&Path>),
    parts: Parts,
    bar: Option<ProgressBar>,
) -> Result<ClusterRun, Failure> {
    let scratch = tempfile::Builder::new()
        .prefix("zermelo-cluster-")
        .tempdir()
        .map_err(|e| fail(2, format!("creating a temporary directory: {e}")))?;
    let logs = kept_logs.map_or_else(|| scratch.path().join("logs"), Path::to_path_buf);
    std::fs::create_dir_all(&logs).map_err(|e| fail(2, format!("creating {}: {e}", logs.display())))?;
    std::fs::create_dir_all(tables).map_err(|e| fail(2, format!("creating {}: {e}", tables.display())))?;
    let port = free_port()?;
    let url = format!("http://127.0.0.1:{port}");
    let token = fresh_token();
    let mut children = Children {
        procs: Vec::new(),
        logs: logs.clone(),
        usage: Vec::new(),
    };
    let listen = format!("127.0.0.1:{port}");
    let state = scratch.path().join("state");
    let (tables_s, state_s) = (tables.display().to_string(), state.display().to_string());
    let sample = check_sample.map(|n| n.to_string());
    let mut args = vec![
        "coordinator",
        "--listen",
        &listen,
        "--tables",
        &tables_s,
        "--state",
        &state_s,
    ];
    if let Some(n) = &sample {
        args.extend(["--check-sample", n]);
    }
    let (parts_s, split_s) = (parts.parts.to_string(), parts.split_over.to_string());
    if parts.parts > 1 {
        args.extend(["--parts", &parts_s, "--split-over", &split_s]);
    }
    children.spawn("coordinator", &args, &token)?;
    for i in 0..workers {
        let cache = scratch.path().join(format!("cache-{i}")).display().to_string();
        let t = threads.to_string();
        let m = memory.to_string();
        children.spawn(
            &format!("worker-{i}"),
            &[
                "worker",
                "--coordinator",
                &url,
                "--cache",
                &cache,
                "--threads",
                &t,
                "--memory",
                &m,
            ],
            &token,
        )?;
    }
    let rt = runtime()?;
    let start = Instant::now();
    let outcome = rt.block_on(async {
        // Wait for the coordinator to answer, and for every worker to register (else the
        // first slices, and a slice cut into parts, go to the workers that came first), for
        // 30 s at most: a worker still starting then joins the job as it runs.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut client = client(&url, Some(&token), None)?;
        loop {
            children.check()?;
            match client.job_status(pb::JobStatusRequest { job_id: None }).await {
                Ok(s) if s.get_ref().workers_alive as usize >= workers => break,
                Ok(_) if Instant::now() > deadline => break,
                Err(s) if Instant::now() > deadline => {
                    return Err(status_error("starting the coordinator", &url, s))
                }
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
        let job = submit_job(&url, Some(&token), None, materials_job(materials)).await?;
        info!(
            job = job.job_id,
            slices = job.slices_total,
            positions = job.positions_total,
            "job submitted"
        );
        let info = wait_for_job(&url, Some(&token), None, job.job_id, bar.as_ref(), || {
            children.check()
        })
        .await?;
        let seconds = start.elapsed().as_secs_f64();
        let totals = client
            .job_status(pb::JobStatusRequest { job_id: None })
            .await
            .map_err(|s| status_error("status", &url, s))?
            .into_inner();
        Ok(ClusterRun {
            info,
            bytes_uploaded: totals.bytes_uploaded,
            bytes_fetched: totals.bytes_fetched,
            bytes_met: totals.bytes_met,
            seconds,
            usage: Vec::new(),
        })
    });
    drop(rt);
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    match outcome {
        Ok(mut done) => {
            children.stop(Duration::from_secs(5));
            done.usage = std::mem::take(&mut children.usage);
            done.usage.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(done)
        }
        Err(mut e) => {
            children.stop(Duration::from_secs(2));
            let kept = scratch.keep();
            e.message = format!(
                "{}\nlogs kept in {}\n{}",
                e.message,
                kept_logs
                    .map_or_else(|| kept.join("logs"), Path::to_path_buf)
                    .display(),
                children.log_tails()
            );
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A slice is cut into parts only where a part fits a worker: KRNvKNN (7.63 G positions)
    /// in 3 parts needs about 3.2 to 3.3 GiB a part, more than a 1-GiB worker holds (it goes whole to
    /// one worker, paged); a 3-GiB worker holds its compact state whole, so it is not cut; in 8
    /// parts a part fits 2.5 GiB.
    #[test]
    fn parts_are_cut_only_where_they_fit_a_worker() {
        let krnvknn: Material = "KRNvKNN".parse().unwrap();
        let gib = 1u64 << 30;
        let one = Parts::for_workers(3, gib);
        let (key, need) = one.overflowing(&[krnvknn], gib, 1).expect("3 parts past 1 GiB");
        assert_eq!(key, SliceKey::pawnless(krnvknn));
        assert!(need > 3 * gib && need < 4 * gib, "{need}");
        let three = Parts::for_workers(3, 3 * gib);
        assert!(three.split_over > SliceIndexer::new(key).size(), "{three:?}");
        assert_eq!(three.overflowing(&[krnvknn], 3 * gib, 1), None);
        let eight = Parts::for_workers(8, 5 * gib / 2);
        assert!(eight.split_over < SliceIndexer::new(key).size(), "{eight:?}");
        assert_eq!(eight.overflowing(&[krnvknn], 5 * gib / 2, 1), None);
        // Nothing is cut in one part.
        assert_eq!(Parts::NONE.overflowing(&[krnvknn], 1, 1), None);
    }
}
