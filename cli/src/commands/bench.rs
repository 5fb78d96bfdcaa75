//! `zermelo bench`.

use crate::*;

/// Benchmark the build: solves the materials into a fresh temporary directory and prints wall
/// time, positions per second and peak memory.
///
/// With --alone, the sub-tables are built first and only the named materials are timed. With
/// --cluster N, compares the single-node build with a loopback cluster of N workers (wall time,
/// CPU time, gRPC bytes per position).
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Materials to build (default: KPvK).
    #[arg(value_name = "MATERIAL", value_parser = material_arg)]
    pub(crate) materials: Vec<Material>,
    /// Time only the named materials, not their sub-tables.
    #[arg(long)]
    pub(crate) alone: bool,
    /// Threads (default: all cores).
    #[arg(long, value_name = "N")]
    pub(crate) threads: Option<usize>,
    /// Keep the tables in this directory instead of a temporary one.
    #[arg(long, value_name = "DIR")]
    pub(crate) tables: Option<PathBuf>,
    /// Compare the single-node build (--threads threads) with a loopback cluster of N worker
    /// processes (the threads shared out among them): wall time, total CPU time of every
    /// process, slice bytes over gRPC per position.
    #[arg(long, value_name = "N", conflicts_with_all = ["alone", "tables"])]
    pub(crate) cluster: Option<usize>,
    /// With --cluster: the coordinator's --check-sample (positions of each uploaded slice
    /// re-derived by the verifier; default: the coordinator's default). Run once with 0 and
    /// once without to see what the check costs.
    #[arg(long, value_name = "N", requires = "cluster")]
    pub(crate) check_sample: Option<usize>,
    /// With --cluster: build the pair N times, one after the other, and end with the median
    /// CPU ratio and that of the summed CPU (one pair's ratio can be off by a tenth either
    /// way on a shared machine).
    #[arg(long, value_name = "N", default_value_t = 1, requires = "cluster", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(crate) runs: u32,
}

pub(crate) fn run(args: Args, _show_bar: bool) -> Result<u8, Failure> {
    let Args {
        materials,
        alone,
        threads: t,
        tables,
        cluster,
        check_sample,
        runs,
    } = args;
    let materials = if materials.is_empty() {
        vec!["KPvK".parse().expect("a material")]
    } else {
        materials
    };
    let threads = threads(t)?;
    match cluster {
        Some(0) => return Err(Failure::input("--cluster must be at least 1")),
        Some(workers) => {
            let per_worker = (threads / workers).max(1);
            zermelo_cli::bench::run_cluster_comparison(
                &materials,
                workers,
                threads,
                per_worker,
                check_sample,
                runs as usize,
            )
            .map_err(|e| Failure { code: 2, message: e })?
        }
        None => zermelo_cli::bench::run(&materials, alone, threads, tables.as_deref())
            .map_err(|e| Failure { code: 2, message: e })?,
    }
    Ok(0)
}
