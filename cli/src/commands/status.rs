//! `zermelo status`.

use crate::*;

/// Print a coordinator's jobs (or one job) and live workers as JSON.
///
/// Exit 0 when it answers.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The coordinator's URL.
    #[arg(long, value_name = "URL")]
    pub(crate) coordinator: String,
    /// Only this job.
    #[arg(value_name = "JOB")]
    pub(crate) job: Option<u64>,
    /// The cluster token.
    #[arg(long, env = "ZERMELO_TOKEN", hide_env_values = true, value_name = "TOKEN")]
    pub(crate) token: Option<String>,
    /// PEM certificate of the CA that signed the coordinator's TLS certificate; needed
    /// (and only allowed) with an https:// URL.
    #[arg(long, env = "ZERMELO_TLS_CA", value_name = "FILE")]
    pub(crate) tls_ca: Option<PathBuf>,
}

pub(crate) fn run(args: Args, _show_bar: bool) -> Result<u8, Failure> {
    let Args {
        coordinator,
        job,
        token,
        tls_ca,
    } = args;
    Ok(cluster::status(&coordinator, job, token, read_ca(tls_ca)?)?)
}
