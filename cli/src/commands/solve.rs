//! `zermelo solve`.

use crate::*;

/// Build the tables of each MATERIAL and of every material it converts into (captures,
/// promotions), skipping tables already complete and valid in the directory.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Materials such as KPvK, KRPvKR or krvkqp (any order and case); at most 7 men, a build that fits the memory budget and the disk.
    #[arg(
        required_unless_present = "all",
        conflicts_with = "all",
        value_name = "MATERIAL",
        value_parser = solve_material_arg
    )]
    pub(crate) materials: Vec<Material>,
    /// Every material of 3 to N men instead of a list (N from 3 to 7): the full set, as
    /// Syzygy's (5 tables of 3 men, 30 of 4, 110 of 5, 365 of 6, 1,001 of 7). With
    /// --plan-only, its plan: memory, disk and time.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(3..=7))]
    pub(crate) all: Option<u32>,
    /// Directory of the table files (created if missing). A list DIR:DIR2:... writes to the
    /// first and reuses the complete tables found in the others.
    #[arg(long, value_name = "DIR[:DIR...]", env = "ZERMELO_TABLES", value_parser = tables_list)]
    pub(crate) tables: Tables,
    /// Worker threads (default: all cores). The tables do not depend on it.
    #[arg(long, value_name = "N")]
    pub(crate) threads: Option<usize>,
    /// Memory budget, e.g. 16GiB or 512MiB (default: three quarters of the machine's memory,
    /// or of the container's cgroup limit). A material whose build needs more is refused
    /// before any work, with the size it needs.
    #[arg(long, value_name = "SIZE")]
    pub(crate) memory: Option<ByteSize>,
    /// Print the plan (every material, whether its table is already complete, the memory
    /// each one to build needs against the budget, estimates of disk and time) as JSON on
    /// stdout, a summary on stderr, and stop. Exit 0 if it fits the budget, 1 if not.
    #[arg(long)]
    pub(crate) plan_only: bool,
    /// How often a large slice's state is checkpointed to disk (every pawnless table, and
    /// slices with pawns of 16 M positions or more): at the first ply boundary this long
    /// after the last checkpoint, e.g. 90s, 5m, 1h (0: every ply). SIGINT or SIGTERM stops
    /// the build at the next ply boundary with a checkpoint (exit 130); after that, kill -9
    /// or a power cut, the same command resumes from the last checkpoint and keeps every
    /// slice already solved.
    #[arg(long, value_name = "TIME", default_value = "5m")]
    pub(crate) checkpoint_every: zermelo_cli::stop::Interval,
    /// Solve each pawnless slice as N parts, threads of this process that meet only
    /// through what crosses between parts, as workers sharing a slice do (each part holds
    /// its positions' state and a copy of the others' won bits: N/8 byte a position more
    /// than the budget counts; no checkpoints, no paging). The same tables; the bytes that
    /// crossed are logged ("solved in parts"). For checking and measuring that exchange.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=462))]
    pub(crate) parts: u16,
    /// Also build the DTZ50 tables (KRPvKR.zdz) of the same materials once the tables of
    /// mates are done, as `zermelo dtz` does (checked against --memory before any work).
    #[arg(long)]
    pub(crate) dtz50: bool,
    /// Solve pawnless tables by the byte solver (a byte a position and a bit) whenever it
    /// fits the budget, rather than the compact solver (three bits a position, one side's
    /// wins at a time), the default wherever it fits: it is faster and needs less memory.
    /// The same tables; for comparing the two. Tables whose lowest men are a like pair
    /// (KRRvK, KNNNNvK) are always solved by the byte solver, as are tables in --parts.
    #[arg(long)]
    pub(crate) byte_solver: bool,
}

pub(crate) fn run(args: Args, show_bar: bool) -> Result<u8, Failure> {
    let Args {
        materials,
        all,
        tables,
        threads: t,
        memory,
        plan_only,
        checkpoint_every,
        parts,
        dtz50,
        byte_solver,
    } = args;
    let materials = match all {
        Some(n) => Material::all(n),
        None => materials,
    };
    let threads = threads(t)?;
    if dtz50 && !plan_only {
        zermelo_cli::dtz::check_budget(&materials, &tables.0, memory::budget(memory.map(|m| m.0)))
            .map_err(|e| Failure::input(e.to_string()))?;
    }
    let mut options = BuildOptions {
        checkpoint_every: checkpoint_every.0,
        parts: parts as usize,
        byte_solver,
        ..BuildOptions::new(threads, memory::budget(memory.map(|m| m.0)))
    };
    if plan_only {
        let plan = zermelo_cli::build::plan_build(&materials, tables.first(), tables.more(), &options);
        eprint!("{}", zermelo_cli::build::describe_build_plan(&plan));
        println!("{}", serde_json::to_string(&plan).expect("a plan serializes"));
        return Ok(if plan.fits { 0 } else { 1 });
    }
    let progress = Progress::new(show_bar, "solving");
    let report = |done: u64, total: u64, m: &Material| {
        progress.set_what(&m.to_string());
        progress.update(done, total);
    };
    let start = Instant::now();
    options.stop = Some(zermelo_cli::stop::install());
    let built = build_in(&materials, tables.first(), tables.more(), &options, &report, None);
    let outcomes = match built {
        Ok(outcomes) => outcomes,
        Err(BuildError::Solve(SolveError::Interrupted)) => {
            progress.finish();
            return Err(Failure {
                code: zermelo_cli::stop::STOPPED_EXIT,
                message: format!(
                    "stopped after {:.1} s; run the same command again to resume",
                    start.elapsed().as_secs_f64()
                ),
            });
        }
        Err(e) => {
            return Err(Failure {
                code: 2,
                message: e.to_string(),
            })
        }
    };
    progress.finish();
    let built = outcomes.iter().filter(|o| !o.skipped).count();
    let skipped = outcomes.len() - built;
    eprintln!(
        "zermelo: {} table(s) built, {} already complete, in {:.1} s ({})",
        built,
        skipped,
        start.elapsed().as_secs_f64(),
        tables.display()
    );
    if dtz50 {
        let start = Instant::now();
        let budget = memory::budget(memory.map(|m| m.0));
        let (built, complete) =
            commands::dtz::build_dtz50(&materials, &tables.0, threads, budget, show_bar, |_| {})?;
        eprintln!(
            "zermelo: {built} DTZ50 table(s) built, {complete} already complete, in {:.1} s",
            start.elapsed().as_secs_f64()
        );
    }
    Ok(0)
}
