//! `zermelo cluster`.

use crate::*;

/// Build tables on a cluster of this machine: starts a coordinator and N worker processes on
/// 127.0.0.1, runs one job, stops them.
///
/// The files are the same as `zermelo solve`'s.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Worker processes.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub(crate) workers: usize,
    /// Materials to build, with every material they convert into.
    #[arg(required = true, value_name = "MATERIAL", value_parser = material_arg)]
    pub(crate) materials: Vec<Material>,
    /// Directory of the table files (created if missing).
    #[arg(long, value_name = "DIR")]
    pub(crate) tables: PathBuf,
    /// Solver threads per worker (default: the cores shared out among the workers).
    #[arg(long, value_name = "N")]
    pub(crate) threads: Option<usize>,
    /// Memory budget of each worker, e.g. 10GiB (default: three quarters of the machine's
    /// memory, or of the container's cgroup limit, shared out among the workers).
    #[arg(long, value_name = "SIZE")]
    pub(crate) memory: Option<ByteSize>,
    /// The most parts a large pawnless slice is cut into, each solved by one worker, the
    /// parts meeting through the coordinator every ply (the same bytes as solved whole).
    /// Default: the number of workers; 1 solves every slice whole.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=462))]
    pub(crate) parts: Option<u32>,
    /// Slices of at least this many positions are cut into parts (default: those a worker
    /// cannot solve whole by the compact solver within its --memory: three bits a position
    /// and 256 MiB to spare; but none, with a warning, when a part would not fit a worker's
    /// --memory: each slice then goes whole to one worker, which pages it if it must).
    /// Given, it cuts those slices whatever the memory: a part that does not fit its
    /// worker's --memory has its state paged through the worker's cache folder.
    #[arg(long, value_name = "POSITIONS")]
    pub(crate) split_over: Option<u64>,
    /// Keep the coordinator's and the workers' logs in this folder (coordinator.log,
    /// worker-0.log, ...; at the level ZERMELO_LOG sets, info by default). Without it they
    /// are kept only when the cluster fails.
    #[arg(long, value_name = "DIR")]
    pub(crate) logs: Option<PathBuf>,
}

pub(crate) fn run(args: Args, show_bar: bool) -> Result<u8, Failure> {
    let Args {
        workers,
        materials,
        tables,
        threads: t,
        memory,
        parts,
        split_over,
        logs,
    } = args;
    if workers == 0 {
        return Err(Failure::input("--workers must be at least 1"));
    }
    let names: Vec<String> = materials.iter().map(Material::to_string).collect();
    let per_worker = match t {
        Some(_) => threads(t)?,
        None => (threads(None)? / workers).max(1),
    };
    let memory = match memory {
        Some(m) => m.0,
        None => memory::default_budget() / workers as u64,
    };
    let mut cut = cluster::Parts::for_workers(workers, memory);
    if let Some(p) = parts {
        cut.parts = p;
    }
    match split_over {
        Some(n) => cut.split_over = n,
        None => {
            // Parts that would not fit a worker: no slice is cut.
            if let Some((key, need)) = cut.overflowing(&materials, memory, per_worker) {
                tracing::warn!(
                    slice = %key,
                    parts = cut.parts,
                    part_needs = need,
                    memory,
                    "no slice is cut into parts: a part would not fit a worker's --memory; each slice goes whole to one worker (paged if it must); --split-over cuts it anyway, each part paged"
                );
                cut.split_over = u64::MAX;
            }
        }
    }
    let bar = progress_bar(show_bar, "cluster");
    Ok(cluster::cluster(
        workers,
        &names,
        &tables,
        (per_worker, memory),
        (cut, logs.as_deref()),
        bar,
    )?)
}
