//! `zermelo worker`.

use crate::*;

/// Run a cluster worker: leases tasks from the coordinator, fetches the slices it needs into
/// its cache, solves, uploads.
///
/// Stops on ctrl-c or SIGTERM, dropping the task in flight.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The coordinator's URL, e.g. http://coordinator:50051 (https:// with --tls-ca).
    #[arg(long, value_name = "URL")]
    pub(crate) coordinator: String,
    /// Directory of the local slice cache (created if missing).
    #[arg(long, value_name = "DIR")]
    pub(crate) cache: PathBuf,
    /// Budget of the slice cache: when its files exceed it, the least recently used are
    /// evicted (never those of the task in hand). Bytes, or with a unit: 512MiB, 2GiB, 10GB.
    #[arg(long, value_name = "SIZE", default_value_t = ByteSize(DEFAULT_CACHE_BYTES))]
    pub(crate) cache_size: ByteSize,
    /// Solver threads (default: all cores).
    #[arg(long, value_name = "N")]
    pub(crate) threads: Option<usize>,
    /// Memory budget, e.g. 16GiB or 512MiB (default: three quarters of the machine's memory,
    /// or of the container's cgroup limit), for the whole process: 32 MiB of it is counted for
    /// the process itself. A task whose slices need more to solve stops the worker with the
    /// size they need. Slices are solved into the cache file by file, never held whole unless
    /// small.
    #[arg(long, value_name = "SIZE")]
    pub(crate) memory: Option<ByteSize>,
    /// The cluster token.
    #[arg(long, env = "ZERMELO_TOKEN", hide_env_values = true, value_name = "TOKEN")]
    pub(crate) token: Option<String>,
    /// PEM certificate of the CA that signed the coordinator's TLS certificate; needed
    /// (and only allowed) with an https:// URL.
    #[arg(long, env = "ZERMELO_TLS_CA", value_name = "FILE")]
    pub(crate) tls_ca: Option<PathBuf>,
    /// Serve this worker's Prometheus metrics (GET /metrics: tasks, slices and positions
    /// solved, slice bytes fetched and uploaded, cache hits; GET /health) over plain HTTP on
    /// this address, e.g. 127.0.0.1:9491.
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics_listen: Option<String>,
}

pub(crate) fn run(args: Args, _show_bar: bool) -> Result<u8, Failure> {
    let Args {
        coordinator,
        cache,
        cache_size,
        threads: t,
        memory,
        token,
        tls_ca,
        metrics_listen,
    } = args;
    let ca = read_ca(tls_ca)?;
    Ok(cluster::worker(cluster::WorkerOptions {
        coordinator: &coordinator,
        cache: &cache,
        cache_size: cache_size.0,
        threads: threads(t)?,
        memory: memory::budget(memory.map(|m| m.0)),
        token,
        tls_ca: ca,
        metrics_listen: metrics_listen.as_deref(),
    })?)
}
