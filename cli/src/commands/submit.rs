//! `zermelo submit`.

use crate::*;

/// Submit a job to a coordinator: prints its id; with --wait, shows progress until it is done.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The coordinator's URL.
    #[arg(long, value_name = "URL")]
    pub(crate) coordinator: String,
    /// Materials to build, with every material they convert into.
    #[arg(required = true, value_name = "MATERIAL", value_parser = material_arg)]
    pub(crate) materials: Vec<Material>,
    /// Wait until the job is done (exit 1 if it fails).
    #[arg(long)]
    pub(crate) wait: bool,
    /// The cluster token.
    #[arg(long, env = "ZERMELO_TOKEN", hide_env_values = true, value_name = "TOKEN")]
    pub(crate) token: Option<String>,
    /// PEM certificate of the CA that signed the coordinator's TLS certificate; needed
    /// (and only allowed) with an https:// URL.
    #[arg(long, env = "ZERMELO_TLS_CA", value_name = "FILE")]
    pub(crate) tls_ca: Option<PathBuf>,
}

pub(crate) fn run(args: Args, show_bar: bool) -> Result<u8, Failure> {
    let Args {
        coordinator,
        materials,
        wait,
        token,
        tls_ca,
    } = args;
    let names: Vec<String> = materials.iter().map(Material::to_string).collect();
    let ca = read_ca(tls_ca)?;
    let bar = if wait { progress_bar(show_bar, "job") } else { None };
    Ok(cluster::submit(&coordinator, &names, wait, token, ca, bar)?)
}
