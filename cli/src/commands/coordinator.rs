//! `zermelo coordinator`.

use crate::*;

/// Run a cluster coordinator: takes jobs, leases their slices to workers, journals finished
/// slices (a restart on the same directories resumes) and writes each finished table into the
/// tables directory, byte-identical to `zermelo solve`.
///
/// Stops on ctrl-c or SIGTERM.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Address to listen on, e.g. 0.0.0.0:50051 (port 0 picks a free one; see the log).
    #[arg(long, value_name = "ADDR")]
    pub(crate) listen: String,
    /// Directory of the table files (created if missing).
    #[arg(long, value_name = "DIR")]
    pub(crate) tables: PathBuf,
    /// Directory of the journal and the finished slices (default: TABLES/.zermelo-coordinator).
    #[arg(long, value_name = "DIR")]
    pub(crate) state: Option<PathBuf>,
    /// The cluster token every request must carry (none: every caller is accepted).
    #[arg(long, env = "ZERMELO_TOKEN", hide_env_values = true, value_name = "TOKEN")]
    pub(crate) token: Option<String>,
    /// Seconds a lease lives without a heartbeat (a dead worker's task is leased again
    /// after it); a worker silent for three times as long is forgotten. 1 to 86400 (a day).
    #[arg(long, value_name = "SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub(crate) lease_ttl: u64,
    /// The longest a lease lives, heartbeats or not, in seconds: past it the task is leased
    /// again (a hung solve cannot hold it for good). 1 to 2592000 (30 days); default a day.
    #[arg(long, value_name = "SECONDS", default_value_t = 86_400,
          value_parser = clap::value_parser!(u64).range(1..=2_592_000))]
    pub(crate) max_lease_time: u64,
    /// Positions of each uploaded slice re-derived from their successors by the independent
    /// verifier before the slice is accepted (every index is checked for range and
    /// legality in any case); a slice that fails is refused, and its worker from then on.
    /// A slice 5% wrong escapes 256 random positions with odds of 2 in a million, 1% wrong
    /// with 8 in a hundred (1,024: 3 in 100,000); each costs about 1.5 µs. 0 derives none.
    #[arg(long, value_name = "N", default_value_t = zermelo_coordinator::DEFAULT_SAMPLE)]
    pub(crate) check_sample: usize,
    /// Uploaded slices of at most N positions are held whole (2 bytes a position) for the
    /// check; larger ones are checked as they stream in, keeping only what the sample
    /// reads. Both check the same; streaming holds less.
    #[arg(long, value_name = "N", default_value_t = zermelo_coordinator::WHOLE_POSITIONS)]
    pub(crate) check_whole_positions: u64,
    /// `sample`: an uploaded slice is finished once it passes the coordinator's check
    /// (--check-sample). `all`: it is also verified whole, every position re-derived from
    /// its children, by a worker other than the one that solved it, before it is finished;
    /// a verifier's claim of a wrong value is settled by the coordinator re-deriving that
    /// value, and the worker found wrong (solver or verifier) is refused. About doubles the
    /// workers' work, and needs two workers at least.
    #[arg(long, value_name = "WHAT", default_value = "sample")]
    pub(crate) verify: Verify,
    /// Serve Prometheus metrics (GET /metrics, plain HTTP) on this address, e.g.
    /// 127.0.0.1:9490 or 0.0.0.0:9490.
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics_listen: Option<String>,
    /// The most parts a large pawnless slice is cut into, each part leased to its own
    /// worker (no more than the workers alive); the parts meet through the coordinator
    /// every ply (`Meet`), and a part lost fails them all (the slice is leased again). The
    /// same bytes as solved whole. 1 (the default) solves every slice whole.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=462))]
    pub(crate) parts: u32,
    /// With --parts: slices of at least this many positions are solved in parts.
    #[arg(long, value_name = "POSITIONS", default_value_t = 1 << 30)]
    pub(crate) split_over: u64,
    /// Serve gRPC over TLS with this PEM certificate (chain); clients then use https:// and
    /// --tls-ca. Needs --tls-key.
    #[arg(long, env = "ZERMELO_TLS_CERT", value_name = "FILE", requires = "tls_key")]
    pub(crate) tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, env = "ZERMELO_TLS_KEY", value_name = "FILE", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
}

pub(crate) fn run(args: Args, _show_bar: bool) -> Result<u8, Failure> {
    let Args {
        listen,
        tables,
        state,
        token,
        lease_ttl,
        max_lease_time,
        check_sample,
        check_whole_positions,
        verify,
        metrics_listen,
        parts,
        split_over,
        tls_cert,
        tls_key,
    } = args;
    if lease_ttl == 0 {
        return Err(Failure::input("--lease-ttl must be at least 1 second"));
    }
    let tls = match (tls_cert, tls_key) {
        (Some(cert), Some(key)) => Some(TlsIdentity {
            cert_pem: cluster::read_pem("--tls-cert", &cert)?,
            key_pem: cluster::read_pem("--tls-key", &key)?,
        }),
        _ => None,
    };
    let options = cluster::CoordinatorOptions {
        metrics_listen,
        tls,
        check_sample,
        check_whole_positions,
        max_lease_time,
        verify_all: matches!(verify, Verify::All),
        parts,
        split_over,
    };
    Ok(cluster::coordinator(
        &listen,
        &tables,
        state.as_deref(),
        token,
        lease_ttl,
        options,
    )?)
}

/// What `--verify` asks of a slice before it is finished.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verify {
    /// The coordinator's check of a sample.
    Sample,
    /// The check, and a re-derivation of every position by another worker.
    All,
}
