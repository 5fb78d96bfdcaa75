//! `zermelo`: builds, probes, counts and verifies exact chess endgame tables.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

mod commands;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use indicatif::ProgressBar;
use tracing::debug;
use zermelo_chess::index::SliceIndexer;
use zermelo_chess::{Material, SliceKey};
use zermelo_cli::analyse::{analyse, analyse_coord, describe_plan, AnalyseOptions, PlanSummary, Remote};
use zermelo_cli::build::{build_in, BuildError, BuildOptions};
use zermelo_cli::cluster;
use zermelo_cli::memory::{self, human_bytes};
use zermelo_cli::probe::{probe_fen, text_line};
use zermelo_cli::progress::Progress;
use zermelo_cli::stats::{asked_with_colours_swapped, stats};
use zermelo_cli::verify::{verify_table_in, VerifyError, VerifyOptions};
use zermelo_cli::Failure;
use zermelo_cli::MAX_MEN;
use zermelo_coordinator::TlsIdentity;
use zermelo_worker::adjudicate::Rule;
use zermelo_worker::bytes::ByteSize;
use zermelo_worker::node::cache::DEFAULT_CACHE_BYTES;
use zermelo_worker::tables::{dir_list, list_text, TableDir};
use zermelo_worker::SolveError;

/// Zermelo builds exact chess endgame tables (win/draw/loss and depth to mate) by retrograde
/// analysis, probes them and verifies them independently.
#[derive(Parser, Debug)]
#[command(
    name = "zermelo",
    version,
    propagate_version = true,
    after_help = "Examples:
  zermelo solve --tables tables KPvK          build KPvK (and KQvK, KRvK, ... it converts into)
  zermelo probe --tables tables \"8/8/8/8/8/8/4P3/K1k5 w - - 0 1\"
  zermelo stats --tables tables KPvK          counts, longest mates
  zermelo verify --tables tables KPvK         re-derive every value independently
  zermelo analyse --tables tables \"8/8/3k4/8/8/8/R1K1PP2/8 w - - 0 1\"
  zermelo cluster --workers 2 --tables tables KRvKP

Each command's --help has more."
)]
struct Cli {
    /// Log format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
enum Command {
    #[command(display_order = 1)]
    Solve(commands::solve::Args),
    #[command(display_order = 2)]
    Dtz(commands::dtz::Args),
    #[command(display_order = 2)]
    Probe(commands::probe::Args),
    #[command(display_order = 3)]
    Stats(commands::stats::Args),
    #[command(display_order = 3)]
    Materials(commands::materials::Args),
    #[command(display_order = 4)]
    Pack(commands::pack::Args),
    #[command(display_order = 5)]
    Serve(commands::serve::Args),
    #[command(display_order = 4)]
    Verify(commands::verify::Args),
    #[command(display_order = 8)]
    Bench(commands::bench::Args),
    #[command(display_order = 10)]
    Coordinator(commands::coordinator::Args),
    #[command(display_order = 11)]
    Worker(commands::worker::Args),
    #[command(display_order = 12)]
    Submit(commands::submit::Args),
    #[command(display_order = 13)]
    Status(commands::status::Args),
    #[command(display_order = 6)]
    Analyse(commands::analyse::Args),
    #[command(display_order = 9)]
    Cluster(commands::cluster::Args),
    #[command(display_order = 7)]
    Squares(commands::squares::Args),
    #[command(display_order = 14)]
    Completions(commands::completions::Args),
    #[command(display_order = 15)]
    Man(commands::man::Args),
}

/// `--tables` of the commands that read tables: one directory, or several separated by `:`,
/// searched in order (tables are written to the first). `ZERMELO_TABLES` gives a default.
#[derive(Clone, Debug)]
struct Tables(Vec<PathBuf>);

fn tables_list(s: &str) -> Result<Tables, String> {
    dir_list(s).map(Tables)
}

impl Tables {
    /// The first directory: where tables are written.
    fn first(&self) -> &Path {
        &self.0[0]
    }

    /// The others, searched after the first.
    fn more(&self) -> &[PathBuf] {
        &self.0[1..]
    }

    /// The tables of these directories.
    fn table_dir(&self) -> TableDir {
        TableDir::from_list(&self.0)
    }

    /// As given: `a:b`.
    fn display(&self) -> String {
        list_text(&self.0).display().to_string()
    }

    /// Refused unless every directory exists.
    fn must_exist(&self) -> Result<(), Failure> {
        match self.0.iter().find(|d| !d.is_dir()) {
            Some(d) => Err(Failure::input(format!(
                "tables directory {} does not exist",
                d.display()
            ))),
            None => Ok(()),
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            match value_refused(&e) {
                Some(line) => eprintln!("zermelo: {line}"),
                None => {
                    let _ = e.print();
                }
            }
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let show_bar = std::io::stderr().is_terminal();
    init_logging(cli.log_format, show_bar);
    match run(cli.command, show_bar) {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("zermelo: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

/// An argument that its parser refused (a material, a size, a FEN list...), as one line like
/// every other failure: `MATERIAL: material name 'KXvK' has an unknown piece letter 'x' ...`.
fn value_refused(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::ValueValidation {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    // `[MATERIAL]...` or `--memory <SIZE>`: the flag, or the value's name.
    let arg = arg
        .split_whitespace()
        .next()?
        .trim_matches(|c| "[]<>.".contains(c));
    let why = std::error::Error::source(e)?;
    Some(format!("{arg}: {why}"))
}

fn init_logging(format: LogFormat, quiet_default: bool) {
    use tracing_subscriber::EnvFilter;
    // On a terminal the progress bar tells the story; logs default to warnings there.
    let default = if quiet_default { "warn" } else { "info" };
    let filter = EnvFilter::try_from_env("ZERMELO_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Text => builder.with_target(false).init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn threads(requested: Option<usize>) -> Result<usize, Failure> {
    match requested {
        Some(0) => Err(Failure::input("--threads must be at least 1")),
        Some(n) => Ok(n),
        None => Ok(std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)),
    }
}

/// The longest line of stdin `probe` reads as a FEN (a FEN is under 100 bytes); the rest of a
/// longer line is skipped without being held.
const MAX_FEN_LINE: usize = 4096;

/// A line of input, as [`for_each_line`] hands it out.
enum Line<'a> {
    Text(&'a str),
    NotUtf8,
    TooLong,
}

/// Calls `f` with each line of `input` and its number (from 1), in memory bounded by `max`
/// bytes: a line that is not UTF-8, or longer than `max`, is reported as such, and the next
/// lines are still read.
fn for_each_line(
    mut input: impl std::io::BufRead,
    max: usize,
    mut f: impl FnMut(u64, Line<'_>) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let read_error = |e: std::io::Error| Failure::input(format!("reading stdin: {e}"));
    let mut line = Vec::with_capacity(max);
    let mut n = 0u64;
    loop {
        line.clear();
        let mut too_long = false;
        let mut ended = false;
        // Up to the next newline, keeping at most `max` bytes.
        loop {
            let buf = match input.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(read_error(e)),
            };
            if buf.is_empty() {
                ended = true;
                break;
            }
            let (part, newline) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (&buf[..i], true),
                None => (buf, false),
            };
            if line.len() + part.len() > max {
                too_long = true;
            } else {
                line.extend_from_slice(part);
            }
            let used = part.len() + usize::from(newline);
            input.consume(used);
            if newline {
                break;
            }
        }
        if ended && line.is_empty() && !too_long {
            return Ok(());
        }
        n += 1;
        let item = if too_long {
            Line::TooLong
        } else {
            match std::str::from_utf8(&line) {
                Ok(text) => Line::Text(text),
                Err(_) => Line::NotUtf8,
            }
        };
        f(n, item)?;
        if ended {
            return Ok(());
        }
    }
}

/// The PEM of `--tls-ca`, if given.
fn read_ca(path: Option<PathBuf>) -> Result<Option<Vec<u8>>, Failure> {
    Ok(path.map(|p| cluster::read_pem("--tls-ca", &p)).transpose()?)
}

/// A MATERIAL argument: a material of at most [`MAX_MEN`] men, in table orientation.
fn material_arg(name: &str) -> Result<Material, String> {
    Material::parse_table(name, MAX_MEN).map_err(|e| e.to_string())
}

/// A MATERIAL of `zermelo solve`: as [`material_arg`], but a material of one man more than this
/// build solves is refused with the size of its table.
fn solve_material_arg(name: &str) -> Result<Material, String> {
    if let Ok(m) = Material::parse_table(name, MAX_MEN + 1) {
        if m.men() == MAX_MEN + 1 {
            let indices: u64 = SliceKey::all_of(m)
                .into_iter()
                .map(|k| SliceIndexer::new(k).size())
                .sum();
            return Err(format!(
                "material {m} has {} men; `zermelo solve` builds tables of at most {MAX_MEN} men (its table alone would hold {indices} positions, {} at 2 bytes each; `zermelo analyse --plan-only` plans positions of any size)",
                m.men(),
                human_bytes(2 * indices)
            ));
        }
    }
    material_arg(name)
}

fn progress_bar(show: bool, what: &str) -> Option<ProgressBar> {
    show.then(|| zermelo_cli::progress::bar(what))
}

fn run(command: Command, show_bar: bool) -> Result<u8, Failure> {
    match command {
        Command::Solve(args) => commands::solve::run(args, show_bar),
        Command::Dtz(args) => commands::dtz::run(args, show_bar),
        Command::Probe(args) => commands::probe::run(args, show_bar),
        Command::Stats(args) => commands::stats::run(args, show_bar),
        Command::Materials(args) => commands::materials::run(args, show_bar),
        Command::Pack(args) => commands::pack::run(args, show_bar),
        Command::Serve(args) => commands::serve::run(args, show_bar),
        Command::Verify(args) => commands::verify::run(args, show_bar),
        Command::Bench(args) => commands::bench::run(args, show_bar),
        Command::Coordinator(args) => commands::coordinator::run(args, show_bar),
        Command::Worker(args) => commands::worker::run(args, show_bar),
        Command::Submit(args) => commands::submit::run(args, show_bar),
        Command::Status(args) => commands::status::run(args, show_bar),
        Command::Analyse(args) => commands::analyse::run(args, show_bar),
        Command::Cluster(args) => commands::cluster::run(args, show_bar),
        Command::Squares(args) => commands::squares::run(args, show_bar),
        Command::Completions(args) => commands::completions::run(args, show_bar),
        Command::Man(args) => commands::man::run(args, show_bar),
    }
}
