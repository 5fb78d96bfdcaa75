//! `zermelo analyse`.

use crate::*;

/// Solve positions: the slices reachable from each FEN, with a principal variation.
///
/// Plans the slices reachable from each FEN (pawn pushes, captures, promotions), prints the
/// plan (slices, positions, memory, disk) on stderr, solves them leaf-first reusing every
/// table already in DIR, and prints one JSON line per FEN: the probe shape plus "pv"
/// (principal variation in SAN), "exact" and the plan. Results are kept in DIR/reachable
/// (exact) and DIR/adjudicated/RULE (not exact), never served by `probe`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Positions in FEN (kings and any men, castling rights not supported).
    #[arg(required = true, value_name = "FEN")]
    pub(crate) fens: Vec<String>,
    /// Directory of the tables: full tables are reused, analysis results are kept under it.
    #[arg(long, value_name = "DIR")]
    pub(crate) tables: PathBuf,
    /// Solver threads (default: all cores). The values do not depend on it.
    #[arg(long, value_name = "N")]
    pub(crate) threads: Option<usize>,
    /// Value whole groups of exits by a declared rule instead of solving them; the result
    /// then says "exact": false and names the rule. [possible values: material:N, N from 2
    /// to 32, e.g. material:4] material:N = a position with a promoted piece (anything but
    /// kings and pawns) and more than N men is scored by material after up to 4 plies of
    /// captures (3 or more ahead wins, else a draw).
    #[arg(long, value_name = "RULE")]
    pub(crate) adjudicate: Option<String>,
    /// Solve even when the estimated memory is past what this machine has.
    #[arg(long)]
    pub(crate) force: bool,
    /// Print the plan (as JSON on stdout) and stop.
    #[arg(long)]
    pub(crate) plan_only: bool,
    /// The rules [possible values: chess, coord]: chess, or coord, Church's
    /// co-ordinate-squares variant (pawns never move, White wins by taking a black pawn,
    /// Black never wins; kings and pawns only, nothing stored).
    #[arg(long, value_name = "RULES", default_value = "chess")]
    pub(crate) rules: zermelo_cli::squares::Rules,
    /// Solve on a cluster: submit the slices as an analysis job to this coordinator, wait,
    /// and fetch them back (hash-checked). The results are the same bytes as a local run.
    #[arg(long, value_name = "URL")]
    pub(crate) coordinator: Option<String>,
    /// The cluster token (with --coordinator).
    #[arg(long, env = "ZERMELO_TOKEN", hide_env_values = true, value_name = "TOKEN")]
    pub(crate) token: Option<String>,
    /// PEM certificate of the CA that signed the coordinator's TLS certificate (with an
    /// https:// --coordinator URL).
    #[arg(long, env = "ZERMELO_TLS_CA", value_name = "FILE")]
    pub(crate) tls_ca: Option<PathBuf>,
}

pub(crate) fn run(args: Args, show_bar: bool) -> Result<u8, Failure> {
    let Args {
        fens,
        tables,
        threads: t,
        adjudicate,
        force,
        plan_only,
        rules,
        coordinator,
        token,
        tls_ca,
    } = args;
    if matches!(rules, zermelo_cli::squares::Rules::Coord) {
        if adjudicate.is_some() {
            return Err(Failure::input("--adjudicate applies to chess rules only"));
        }
        for fen in &fens {
            let report_plan = |p: &PlanSummary| {
                eprintln!("{fen}\nplan: one COORD slice, {} positions", p.positions);
                if plan_only {
                    println!("{}", serde_json::to_string(p).expect("json"));
                }
            };
            let a = analyse_coord(fen, &report_plan).map_err(|e| Failure {
                code: e.code(),
                message: format!("{fen}: {e}"),
            })?;
            if !plan_only {
                println!("{}", serde_json::to_string(&a).expect("json"));
            }
        }
        return Ok(0);
    }
    let rule = adjudicate
        .as_deref()
        .map(Rule::parse)
        .transpose()
        .map_err(Failure::input)?;
    let opts = AnalyseOptions {
        tables,
        threads: threads(t)?,
        rule,
        force,
        plan_only,
        memory_budget: memory::default_budget(),
        coordinator: match coordinator {
            Some(url) => Some(Remote {
                url,
                token,
                tls_ca: read_ca(tls_ca)?,
            }),
            None => None,
        },
    };
    if opts.coordinator.is_some() && opts.rule.is_some() {
        return Err(Failure::input(
            "--adjudicate is not available with --coordinator; analyse locally",
        ));
    }
    for fen in &fens {
        let bar = Progress::new(show_bar, "analysing");
        let report_plan = |p: &PlanSummary| {
            eprint!("{fen}\n{}", describe_plan(p));
            if plan_only {
                println!("{}", serde_json::to_string(p).expect("json"));
            }
        };
        let progress = |done: u64, total: u64| bar.update(done, total);
        let result = analyse(fen, &opts, &report_plan, &progress);
        bar.finish();
        let analysis = result.map_err(|e| Failure {
            code: e.code(),
            message: format!("{fen}: {e}"),
        })?;
        if let Some(a) = analysis {
            eprintln!(
                "{}: {} in {:.1} s{}",
                fen,
                a.probe.pos.category,
                a.seconds,
                if a.exact { "" } else { " (adjudicated, not exact)" }
            );
            println!("{}", serde_json::to_string(&a).expect("json"));
        }
    }
    Ok(0)
}
