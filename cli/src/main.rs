//! `zermelo`: builds, probes, counts and verifies exact chess endgame tables.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use indicatif::ProgressBar;
use tracing::debug;
use zermelo_chess::index::SliceIndexer;
use zermelo_chess::{Material, SliceKey};
use zermelo_cli::analyse::{analyse, analyse_coord, describe_plan, AnalyseOptions, PlanSummary, Remote};
use zermelo_cli::build::{build_in, BuildError, BuildOptions};
use zermelo_cli::cluster::{self, ClusterFailure};
use zermelo_cli::memory::{self, human_bytes};
use zermelo_cli::probe::{probe_fen, text_line};
use zermelo_cli::progress::Progress;
use zermelo_cli::stats::{asked_with_colours_swapped, stats};
use zermelo_cli::verify::{verify_table_in, VerifyError, VerifyOptions};
use zermelo_cli::MAX_MEN;
use zermelo_coordinator::service::TlsIdentity;
use zermelo_worker::adjudicate::Rule;
use zermelo_worker::node::cache::{ByteSize, DEFAULT_CACHE_BYTES};
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

/// What `probe` prints.
#[derive(Copy, Clone, Debug, PartialEq, ValueEnum)]
enum ProbeFormat {
    Text,
    Json,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Build the tables of each MATERIAL and of every material it converts into (captures,
    /// promotions), skipping tables already complete and valid in the directory.
    #[command(display_order = 1)]
    Solve {
        /// Materials such as KPvK, KRPvKR or krvkqp (any order and case); at most 7 men, a build that fits the memory budget and the disk.
        #[arg(
            required_unless_present = "all",
            conflicts_with = "all",
            value_name = "MATERIAL"
        )]
        materials: Vec<String>,
        /// Every material of 3 to N men instead of a list (N from 3 to 7): the full set, as
        /// Syzygy's (5 tables of 3 men, 30 of 4, 110 of 5, 365 of 6, 1,001 of 7). With
        /// --plan-only, its plan: memory, disk and time.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(3..=7))]
        all: Option<u32>,
        /// Directory of the table files (created if missing). A list DIR:DIR2:... writes to the
        /// first and reuses the complete tables found in the others.
        #[arg(long, value_name = "DIR[:DIR...]", env = "ZERMELO_TABLES", value_parser = tables_list)]
        tables: Tables,
        /// Worker threads (default: all cores). The tables do not depend on it.
        #[arg(long, value_name = "N")]
        threads: Option<usize>,
        /// Memory budget, e.g. 16GiB or 512MiB (default: three quarters of the machine's memory,
        /// or of the container's cgroup limit). A material whose build needs more is refused
        /// before any work, with the size it needs.
        #[arg(long, value_name = "SIZE")]
        memory: Option<ByteSize>,
        /// Print the plan (every material, whether its table is already complete, the memory
        /// each one to build needs against the budget, estimates of disk and time) as JSON on
        /// stdout, a summary on stderr, and stop. Exit 0 if it fits the budget, 1 if not.
        #[arg(long)]
        plan_only: bool,
        /// How often a large slice's state is checkpointed to disk (every pawnless table, and
        /// slices with pawns of 16 M positions or more): at the first ply boundary this long
        /// after the last checkpoint, e.g. 90s, 5m, 1h (0: every ply). SIGINT or SIGTERM stops
        /// the build at the next ply boundary with a checkpoint (exit 130); after that, kill -9
        /// or a power cut, the same command resumes from the last checkpoint and keeps every
        /// slice already solved.
        #[arg(long, value_name = "TIME", default_value = "5m")]
        checkpoint_every: zermelo_cli::stop::Interval,
        /// Solve each pawnless slice as N parts, threads of this process that meet only
        /// through what crosses between parts, as workers sharing a slice do (each part holds
        /// its positions' state and a copy of the others' won bits: N/8 byte a position more
        /// than the budget counts; no checkpoints, no paging). The same tables; the bytes that
        /// crossed are logged ("solved in parts"). For checking and measuring that exchange.
        #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=462))]
        parts: u16,
        /// Also build the DTZ50 tables (KRPvKR.zdz) of the same materials once the tables of
        /// mates are done, as `zermelo dtz` does (checked against --memory before any work).
        #[arg(long)]
        dtz50: bool,
        /// Solve pawnless tables by the byte solver (a byte a position and a bit) whenever it
        /// fits the budget, rather than the compact solver (three bits a position, one side's
        /// wins at a time), the default wherever it fits: it is faster and needs less memory.
        /// The same tables; for comparing the two. Tables whose lowest men are a like pair
        /// (KRRvK, KNNNNvK) are always solved by the byte solver, as are tables in --parts.
        #[arg(long)]
        byte_solver: bool,
    },
    /// Build the DTZ50 tables (KRPvKR.zdz): exact distance to the next zeroing move under the
    /// 50-move rule, with cursed wins and blessed losses.
    ///
    /// For each MATERIAL and every material it converts into: the plies to the next zeroing
    /// move (capture or pawn move) or mate under the 50-move rule, exact (never rounded), with
    /// the WDL50 class (win, cursed win, draw, blessed loss, loss) in the same value. Needs no
    /// table of mates; tables already complete are kept. Prints a JSON line per material.
    #[command(display_order = 2)]
    Dtz {
        /// Materials such as KPvK or KRPvKR (any order and case).
        #[arg(required = true, value_name = "MATERIAL")]
        materials: Vec<String>,
        /// Directory of the table files (created if missing). A list DIR:DIR2:... writes to the
        /// first and reuses the complete DTZ50 tables found in the others.
        #[arg(long, value_name = "DIR[:DIR...]", env = "ZERMELO_TABLES", value_parser = tables_list)]
        tables: Tables,
        /// Worker threads (default: all cores). The tables do not depend on it.
        #[arg(long, value_name = "N")]
        threads: Option<usize>,
        /// Memory budget, e.g. 16GiB (default: three quarters of the machine's memory, or of the
        /// container's cgroup limit). A material whose build needs more (2 bytes a position of
        /// the material and a quarter of one of its largest slice) is refused before any work.
        #[arg(long, value_name = "SIZE")]
        memory: Option<ByteSize>,
    },
    /// Print the value of each FEN's position and of its every move: one line per FEN.
    ///
    /// On a terminal (or with --format text) a line a person reads: the value for the side to
    /// move and the moves, best first, each with what it leads to, in plies. Else (or with
    /// --format json) each line is the response of the lichess tablebase API (GET /standard),
    /// same fields and move order, and the FEN asked. "dtm" is the exact mate, which ignores the 50-move rule;
    /// where the DTZ50 tables (.zdz, from `zermelo dtz`) are in the directories, "dtz" and
    /// "precise_dtz" hold the exact DTZ50 and "category" follows the rule with the FEN's halfmove
    /// clock (else they are null and the category ignores the rule). FENs
    /// come from the arguments, or one per line on stdin; underscores may stand for spaces. A FEN
    /// that cannot be answered gives {"fen": ..., "error": ...} and exit 1 (2 for a damaged table).
    #[command(display_order = 2)]
    Probe {
        /// Directory of the table files, or a list DIR:DIR2:... searched in order.
        #[arg(long, value_name = "DIR[:DIR...]", env = "ZERMELO_TABLES", value_parser = tables_list)]
        tables: Tables,
        /// Positions in FEN; read from stdin when none is given.
        #[arg(value_name = "FEN")]
        fens: Vec<String>,
        /// The output: text (one readable line) or json (the lichess API's answer). Default:
        /// text when stdout is a terminal, else json.
        #[arg(long, value_enum, value_name = "FORMAT")]
        format: Option<ProbeFormat>,
    },
    /// Count a table: legal positions, wins, draws, losses and the longest mate, by side to move.
    ///
    /// The counts are over every legal position on the whole board (mirror images included, as
    /// published counts are; `verify` counts the table's own positions, fewer). Prints JSON. A
    /// material named with the weaker side first (KvKP) is answered as asked, from the table with
    /// the colours swapped (KPvK, named in "table").
    #[command(display_order = 3)]
    Stats {
        /// Directory of the table files, or a list DIR:DIR2:... searched in order.
        #[arg(long, value_name = "DIR[:DIR...]", env = "ZERMELO_TABLES", value_parser = tables_list)]
        tables: Tables,
        /// The material, e.g. KPvK.
        #[arg(value_name = "MATERIAL")]
        material: String,
    },
    /// Sum up every table of a directory: each material's wins, draws and losses for both sides
    /// to move, its longest mate, and where its captures and promotions lead.
    ///
    /// The counts are exact, over every legal position of the whole board, as `stats` counts.
    /// "Best moves" are read off a sample of positions of each table, drawn at random with a
    /// seed fixed for each material (the same sample every run, whatever --threads): how often
    /// a fastest mate starts with a capture or a promotion ("won/cv", with the material it most
    /// often leads into), and how often a drawn position can keep the draw by one ("drn/cv").
    /// These need the tables the conversions lead into. A line a material on stdout, or JSON
    /// with --json (every count, every conversion, every material the sampled best moves lead
    /// into). python/examples/materials_study.py draws it and scores Muller's derivation of
    /// drawish materials against it.
    #[command(display_order = 3)]
    Materials {
        /// Directory of the table files, or a list DIR:DIR2:... searched in order.
        #[arg(long, value_name = "DIR[:DIR...]", env = "ZERMELO_TABLES", value_parser = tables_list)]
        tables: Tables,
        /// Only these materials (default: every table in the directories).
        #[arg(value_name = "MATERIAL")]
        materials: Vec<String>,
        /// Positions drawn from each table for the best-move shares (0: none; then the tables
        /// the conversions lead into are not needed).
        #[arg(long, value_name = "N", default_value_t = 2000)]
        sample: u64,
        /// Threads, a material each (default: all cores). The output does not depend on it.
        #[arg(long, value_name = "N")]
        threads: Option<usize>,
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Serve the tables over HTTP with lichess's tablebase server contract (GET /standard?fen=).
    ///
    /// GET /standard?fen=FEN answers as `probe --format json` does (lichess's response; "dtz"
    /// and "precise_dtz" from the DTZ50 tables where they are); a position no table holds
    /// (castling rights, too many men, a missing table) is answered as lichess answers it, its
    /// moves valued where the tables can, "unknown" elsewhere. GET /standard/mainline?fen=FEN
    /// gives the principal variation; GET /materials the materials served, GET /monitor a status
    /// line, GET / a web page, GET /api the list, GET /health and GET /metrics (Prometheus).
    /// CORS is open (Access-Control-Allow-Origin: *) but on /metrics. Errors are plain text: 400
    /// for a bad FEN, 404 on the mainline for what no table holds, 500 for a damaged table.
    /// Every request is logged. Stops on ctrl-c or SIGTERM.
    #[command(display_order = 5)]
    Serve {
        /// Directory of the table files, or a list DIR:DIR2:... searched in order.
        #[arg(long, value_name = "DIR[:DIR...]", env = "ZERMELO_TABLES", value_parser = tables_list)]
        tables: Tables,
        /// Address to listen on (port 0: any free port, printed at start).
        #[arg(long, value_name = "ADDR", default_value = zermelo_cli::serve::DEFAULT_LISTEN)]
        listen: std::net::SocketAddr,
        /// Probes answered at once, each on its own thread with its own cache of 4 MiB of
        /// decompressed blocks (default: the number of cores); more requests wait their turn.
        #[arg(long, value_name = "N")]
        threads: Option<usize>,
    },
    /// Check each table's checksums and re-derive every stored value from its successors with a
    /// move generator independent of the solver.
    ///
    /// Exit 0 when all agree; otherwise print the first wrong position as a FEN and exit 1.
    #[command(display_order = 4)]
    Verify {
        /// Directory of the table files, or a list DIR:DIR2:... searched in order (for the
        /// table and for the tables it leads into).
        #[arg(long, value_name = "DIR[:DIR...]", env = "ZERMELO_TABLES", value_parser = tables_list)]
        tables: Tables,
        /// Materials to verify.
        #[arg(
            required_unless_present = "all",
            conflicts_with = "all",
            value_name = "MATERIAL"
        )]
        materials: Vec<String>,
        /// Every material of 3 to N men instead of a list (N from 3 to 7), as `solve --all N`
        /// builds them.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(3..=7))]
        all: Option<u32>,
        /// Threads (default: all cores).
        #[arg(long, value_name = "N")]
        threads: Option<usize>,
        /// Check only this percentage (1 to 99) of each table's indices, in runs of 65,536
        /// spread evenly over the table: a spot check of a table too big to verify whole in the
        /// time at hand. The report says it was a sample.
        #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u8).range(1..=99))]
        sample: Option<u8>,
        /// Memory budget, e.g. 16GiB or 512MiB (default: three quarters of the machine's memory,
        /// or of the container's cgroup limit). The verifier holds half of a slice (2 bytes an
        /// index) and shares the rest out between a cache of small successor slices (at most
        /// 1 GiB) and blocks of large ones. A half slice that does not fit is paged through a
        /// file in the table's folder (2 bytes an index of disk, removed at once), at most what
        /// the budget leaves of it in memory; a budget too small even for that is refused
        /// before any work, with the size it needs.
        #[arg(long, value_name = "SIZE")]
        memory: Option<ByteSize>,
        /// Verify the DTZ50 tables (KRPvKR.zdz, built by `zermelo dtz`) instead of the tables
        /// of mates: every value re-derived from its children under the 50-move rule.
        #[arg(long)]
        dtz50: bool,
    },
    /// Benchmark the build: solves the materials into a fresh temporary directory and prints wall
    /// time, positions per second and peak memory.
    ///
    /// With --alone, the sub-tables are built first and only the named materials are timed. With
    /// --cluster N, compares the single-node build with a loopback cluster of N workers (wall time,
    /// CPU time, gRPC bytes per position).
    #[command(display_order = 8)]
    Bench {
        /// Materials to build (default: KPvK).
        #[arg(value_name = "MATERIAL")]
        materials: Vec<String>,
        /// Time only the named materials, not their sub-tables.
        #[arg(long)]
        alone: bool,
        /// Threads (default: all cores).
        #[arg(long, value_name = "N")]
        threads: Option<usize>,
        /// Keep the tables in this directory instead of a temporary one.
        #[arg(long, value_name = "DIR")]
        tables: Option<PathBuf>,
        /// Compare the single-node build (--threads threads) with a loopback cluster of N worker
        /// processes (the threads shared out among them): wall time, total CPU time of every
        /// process, slice bytes over gRPC per position.
        #[arg(long, value_name = "N", conflicts_with_all = ["alone", "tables"])]
        cluster: Option<usize>,
        /// With --cluster: the coordinator's --check-sample (positions of each uploaded slice
        /// re-derived by the verifier; default: the coordinator's default). Run once with 0 and
        /// once without to see what the check costs.
        #[arg(long, value_name = "N", requires = "cluster")]
        check_sample: Option<usize>,
        /// With --cluster: build the pair N times, one after the other, and end with the median
        /// CPU ratio and that of the summed CPU (one pair's ratio can be off by a tenth either
        /// way on a shared machine).
        #[arg(long, value_name = "N", default_value_t = 1, requires = "cluster", value_parser = clap::value_parser!(u32).range(1..=100))]
        runs: u32,
    },
    /// Run a cluster coordinator: takes jobs, leases their slices to workers, journals finished
    /// slices (a restart on the same directories resumes) and writes each finished table into the
    /// tables directory, byte-identical to `zermelo solve`.
    ///
    /// Stops on ctrl-c or SIGTERM.
    #[command(display_order = 10)]
    Coordinator {
        /// Address to listen on, e.g. 0.0.0.0:50051 (port 0 picks a free one; see the log).
        #[arg(long, value_name = "ADDR")]
        listen: String,
        /// Directory of the table files (created if missing).
        #[arg(long, value_name = "DIR")]
        tables: PathBuf,
        /// Directory of the journal and the finished slices (default: TABLES/.zermelo-coordinator).
        #[arg(long, value_name = "DIR")]
        state: Option<PathBuf>,
        /// The cluster token every request must carry (none: every caller is accepted).
        #[arg(long, env = "ZERMELO_TOKEN", hide_env_values = true, value_name = "TOKEN")]
        token: Option<String>,
        /// Seconds a lease lives without a heartbeat (a dead worker's task is leased again
        /// after it); a worker silent for three times as long is forgotten. 1 to 86400 (a day).
        #[arg(long, value_name = "SECONDS", default_value_t = 30,
              value_parser = clap::value_parser!(u64).range(1..=86_400))]
        lease_ttl: u64,
        /// The longest a lease lives, heartbeats or not, in seconds: past it the task is leased
        /// again (a hung solve cannot hold it for good). 1 to 2592000 (30 days); default a day.
        #[arg(long, value_name = "SECONDS", default_value_t = 86_400,
              value_parser = clap::value_parser!(u64).range(1..=2_592_000))]
        max_lease_time: u64,
        /// Positions of each uploaded slice re-derived from their successors by the independent
        /// verifier before the slice is accepted (every index is checked for range and
        /// legality in any case); a slice that fails is refused, and its worker from then on.
        /// A slice 5% wrong escapes 256 random positions with odds of 2 in a million, 1% wrong
        /// with 8 in a hundred (1,024: 3 in 100,000); each costs about 1.5 µs. 0 derives none.
        #[arg(long, value_name = "N", default_value_t = zermelo_coordinator::check::DEFAULT_SAMPLE)]
        check_sample: usize,
        /// Uploaded slices of at most N positions are held whole (2 bytes a position) for the
        /// check; larger ones are checked as they stream in, keeping only what the sample
        /// reads. Both check the same; streaming holds less.
        #[arg(long, value_name = "N", default_value_t = zermelo_coordinator::check::WHOLE_POSITIONS)]
        check_whole_positions: u64,
        /// `sample`: an uploaded slice is finished once it passes the coordinator's check
        /// (--check-sample). `all`: it is also verified whole, every position re-derived from
        /// its children, by a worker other than the one that solved it, before it is finished;
        /// a verifier's claim of a wrong value is settled by the coordinator re-deriving that
        /// value, and the worker found wrong (solver or verifier) is refused. About doubles the
        /// workers' work, and needs two workers at least.
        #[arg(long, value_name = "WHAT", default_value = "sample", value_parser = ["sample", "all"])]
        verify: String,
        /// Serve Prometheus metrics (GET /metrics, plain HTTP) on this address, e.g.
        /// 127.0.0.1:9490 or 0.0.0.0:9490.
        #[arg(long, value_name = "ADDR")]
        metrics_listen: Option<String>,
        /// The most parts a large pawnless slice is cut into, each part leased to its own
        /// worker (no more than the workers alive); the parts meet through the coordinator
        /// every ply (`Meet`), and a part lost fails them all (the slice is leased again). The
        /// same bytes as solved whole. 1 (the default) solves every slice whole.
        #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=462))]
        parts: u32,
        /// With --parts: slices of at least this many positions are solved in parts.
        #[arg(long, value_name = "POSITIONS", default_value_t = 1 << 30)]
        split_over: u64,
        /// Serve gRPC over TLS with this PEM certificate (chain); clients then use https:// and
        /// --tls-ca. Needs --tls-key.
        #[arg(long, env = "ZERMELO_TLS_CERT", value_name = "FILE", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// The PEM private key of --tls-cert.
        #[arg(long, env = "ZERMELO_TLS_KEY", value_name = "FILE", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
    },
    /// Run a cluster worker: leases tasks from the coordinator, fetches the slices it needs into
    /// its cache, solves, uploads.
    ///
    /// Stops on ctrl-c or SIGTERM, dropping the task in flight.
    #[command(display_order = 11)]
    Worker {
        /// The coordinator's URL, e.g. http://coordinator:50051 (https:// with --tls-ca).
        #[arg(long, value_name = "URL")]
        coordinator: String,
        /// Directory of the local slice cache (created if missing).
        #[arg(long, value_name = "DIR")]
        cache: PathBuf,
        /// Budget of the slice cache: when its files exceed it, the least recently used are
        /// evicted (never those of the task in hand). Bytes, or with a unit: 512MiB, 2GiB, 10GB.
        #[arg(long, value_name = "SIZE", default_value_t = ByteSize(DEFAULT_CACHE_BYTES))]
        cache_size: ByteSize,
        /// Solver threads (default: all cores).
        #[arg(long, value_name = "N")]
        threads: Option<usize>,
        /// Memory budget, e.g. 16GiB or 512MiB (default: three quarters of the machine's memory,
        /// or of the container's cgroup limit). A task whose slices need more to solve stops the
        /// worker with the size they need. Slices are solved into the cache file by file, never
        /// held whole unless small.
        #[arg(long, value_name = "SIZE")]
        memory: Option<ByteSize>,
        /// The cluster token.
        #[arg(long, env = "ZERMELO_TOKEN", hide_env_values = true, value_name = "TOKEN")]
        token: Option<String>,
        /// PEM certificate of the CA that signed the coordinator's TLS certificate; needed
        /// (and only allowed) with an https:// URL.
        #[arg(long, env = "ZERMELO_TLS_CA", value_name = "FILE")]
        tls_ca: Option<PathBuf>,
        /// Serve this worker's Prometheus metrics (GET /metrics: tasks, slices and positions
        /// solved, slice bytes fetched and uploaded, cache hits; GET /health) over plain HTTP on
        /// this address, e.g. 127.0.0.1:9491.
        #[arg(long, value_name = "ADDR")]
        metrics_listen: Option<String>,
    },
    /// Submit a job to a coordinator: prints its id; with --wait, shows progress until it is done.
    #[command(display_order = 12)]
    Submit {
        /// The coordinator's URL.
        #[arg(long, value_name = "URL")]
        coordinator: String,
        /// Materials to build, with every material they convert into.
        #[arg(required = true, value_name = "MATERIAL")]
        materials: Vec<String>,
        /// Wait until the job is done (exit 1 if it fails).
        #[arg(long)]
        wait: bool,
        /// The cluster token.
        #[arg(long, env = "ZERMELO_TOKEN", hide_env_values = true, value_name = "TOKEN")]
        token: Option<String>,
        /// PEM certificate of the CA that signed the coordinator's TLS certificate; needed
        /// (and only allowed) with an https:// URL.
        #[arg(long, env = "ZERMELO_TLS_CA", value_name = "FILE")]
        tls_ca: Option<PathBuf>,
    },
    /// Print a coordinator's jobs (or one job) and live workers as JSON.
    ///
    /// Exit 0 when it answers.
    #[command(display_order = 13)]
    Status {
        /// The coordinator's URL.
        #[arg(long, value_name = "URL")]
        coordinator: String,
        /// Only this job.
        #[arg(value_name = "JOB")]
        job: Option<u64>,
        /// The cluster token.
        #[arg(long, env = "ZERMELO_TOKEN", hide_env_values = true, value_name = "TOKEN")]
        token: Option<String>,
        /// PEM certificate of the CA that signed the coordinator's TLS certificate; needed
        /// (and only allowed) with an https:// URL.
        #[arg(long, env = "ZERMELO_TLS_CA", value_name = "FILE")]
        tls_ca: Option<PathBuf>,
    },
    /// Solve positions: the slices reachable from each FEN, with a principal variation.
    ///
    /// Plans the slices reachable from each FEN (pawn pushes, captures, promotions), prints the
    /// plan (slices, positions, memory, disk) on stderr, solves them leaf-first reusing every
    /// table already in DIR, and prints one JSON line per FEN: the probe shape plus "pv"
    /// (principal variation in SAN), "exact" and the plan. Results are kept in DIR/reachable
    /// (exact) and DIR/adjudicated/RULE (not exact), never served by `probe`.
    #[command(display_order = 6)]
    Analyse {
        /// Positions in FEN (kings and any men, castling rights not supported).
        #[arg(required = true, value_name = "FEN")]
        fens: Vec<String>,
        /// Directory of the tables: full tables are reused, analysis results are kept under it.
        #[arg(long, value_name = "DIR")]
        tables: PathBuf,
        /// Solver threads (default: all cores). The values do not depend on it.
        #[arg(long, value_name = "N")]
        threads: Option<usize>,
        /// Value whole groups of exits by a declared rule instead of solving them; the result
        /// then says "exact": false and names the rule. [possible values: material:N, N from 2
        /// to 32, e.g. material:4] material:N = a position with a promoted piece (anything but
        /// kings and pawns) and more than N men is scored by material after up to 4 plies of
        /// captures (3 or more ahead wins, else a draw).
        #[arg(long, value_name = "RULE")]
        adjudicate: Option<String>,
        /// Solve even when the estimated memory is past what this machine has.
        #[arg(long)]
        force: bool,
        /// Print the plan (as JSON on stdout) and stop.
        #[arg(long)]
        plan_only: bool,
        /// The rules [possible values: chess, coord]: chess, or coord, Church's
        /// co-ordinate-squares variant (pawns never move, White wins by taking a black pawn,
        /// Black never wins; kings and pawns only, nothing stored).
        #[arg(long, value_name = "RULES", default_value = "chess")]
        rules: String,
        /// Solve on a cluster: submit the slices as an analysis job to this coordinator, wait,
        /// and fetch them back (hash-checked). The results are the same bytes as a local run.
        #[arg(long, value_name = "URL")]
        coordinator: Option<String>,
        /// The cluster token (with --coordinator).
        #[arg(long, env = "ZERMELO_TOKEN", hide_env_values = true, value_name = "TOKEN")]
        token: Option<String>,
        /// PEM certificate of the CA that signed the coordinator's TLS certificate (with an
        /// https:// --coordinator URL).
        #[arg(long, env = "ZERMELO_TLS_CA", value_name = "FILE")]
        tls_ca: Option<PathBuf>,
    },
    /// Build tables on a cluster of this machine: starts a coordinator and N worker processes on
    /// 127.0.0.1, runs one job, stops them.
    ///
    /// The files are the same as `zermelo solve`'s.
    #[command(display_order = 9)]
    Cluster {
        /// Worker processes.
        #[arg(long, value_name = "N", default_value_t = 2)]
        workers: usize,
        /// Materials to build, with every material they convert into.
        #[arg(required = true, value_name = "MATERIAL")]
        materials: Vec<String>,
        /// Directory of the table files (created if missing).
        #[arg(long, value_name = "DIR")]
        tables: PathBuf,
        /// Solver threads per worker (default: the cores shared out among the workers).
        #[arg(long, value_name = "N")]
        threads: Option<usize>,
        /// Memory budget of each worker, e.g. 10GiB (default: three quarters of the machine's
        /// memory, or of the container's cgroup limit, shared out among the workers).
        #[arg(long, value_name = "SIZE")]
        memory: Option<ByteSize>,
        /// The most parts a large pawnless slice is cut into, each solved by one worker, the
        /// parts meeting through the coordinator every ply (the same bytes as solved whole).
        /// Default: the number of workers; 1 solves every slice whole.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=462))]
        parts: Option<u32>,
        /// Slices of at least this many positions are cut into parts (default: those a worker
        /// cannot solve whole by the compact solver within its --memory: three bits a position
        /// and 256 MiB to spare; but none, with a warning, when a part would not fit a worker's
        /// --memory: each slice then goes whole to one worker, which pages it if it must).
        /// Given, it cuts those slices whatever the memory: a part that does not fit its
        /// worker's --memory has its state paged through the worker's cache folder.
        #[arg(long, value_name = "POSITIONS")]
        split_over: Option<u64>,
        /// Keep the coordinator's and the workers' logs in this folder (coordinator.log,
        /// worker-0.log, ...; at the level ZERMELO_LOG sets, info by default). Without it they
        /// are kept only when the cluster fails.
        #[arg(long, value_name = "DIR")]
        logs: Option<PathBuf>,
    },
    /// Church's co-ordinate (corresponding) squares of a position's pawns.
    ///
    /// For each
    /// square of the attacking king, the squares of the defending king that hold the draw with the
    /// attacker to move.
    ///
    /// The FEN's kings and side to move are ignored. Prints a diagram, or JSON.
    #[command(display_order = 7)]
    Squares {
        /// A position with kings and pawns only; only its pawns matter.
        #[arg(value_name = "FEN")]
        fen: String,
        /// Directory of the table files (needed under chess rules: the full table of the
        /// position's material), or several separated by `:`, searched in order (what is solved
        /// for the squares goes to the first).
        #[arg(long, value_name = "DIR[:DIR...]", env = "ZERMELO_TABLES", value_parser = tables_list)]
        tables: Option<Tables>,
        /// The rules [possible values: chess, coord]: chess (values from the tables; the
        /// attacker is the side that wins more positions with itself to move, White on a tie) or
        /// coord (Church's COORD: pawns never move, White's king wins by taking a black pawn; the
        /// attacker is White).
        #[arg(long, value_name = "RULES", default_value = "chess")]
        rules: String,
        /// Also write to FILE the summary diagram composers publish: the board with the pawns
        /// and the corresponding squares numbered (the attacker's king on n is held only by
        /// the defender's king on n), coordinates labelled.
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
        /// Also write to FILE a sheet of 64 small boards, one per square of the attacker's king,
        /// each shading every square of the defender's king that holds the draw.
        #[arg(long, value_name = "FILE")]
        svg_sheet: Option<PathBuf>,
        /// Print `{"attacker":...,"squares":{"a1":[...],...}}` instead of the diagram.
        #[arg(long)]
        json: bool,
    },
    /// Print a shell completion script for zermelo.
    ///
    /// For bash: `zermelo completions bash > ~/.local/share/bash-completion/completions/zermelo`;
    /// zsh: into a directory of your `fpath` as `_zermelo`; fish: `~/.config/fish/completions/zermelo.fish`.
    #[command(display_order = 14)]
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print zermelo's man page (roff), or write one page per command into a directory.
    ///
    /// `zermelo man | man -l -` reads it now; `zermelo man --dir ~/.local/share/man/man1` installs
    /// zermelo.1 and zermelo-COMMAND.1 for every command.
    #[command(display_order = 15)]
    Man {
        /// Write zermelo.1 and zermelo-COMMAND.1 into DIR (created if missing) instead of
        /// printing zermelo.1.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
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

/// A failure that ends the command: a message and an exit code.
struct Failure {
    code: u8,
    message: String,
}

impl From<ClusterFailure> for Failure {
    fn from(f: ClusterFailure) -> Failure {
        Failure {
            code: f.code,
            message: f.message,
        }
    }
}

impl Failure {
    fn input(message: impl Into<String>) -> Failure {
        Failure {
            code: 2,
            message: message.into(),
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
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

fn parse_materials(names: &[String]) -> Result<Vec<Material>, Failure> {
    names
        .iter()
        .map(|n| Material::parse_table(n, MAX_MEN).map_err(|e| Failure::input(e.to_string())))
        .collect()
}

/// The materials of `zermelo solve`: as [`parse_materials`], but a material of one man more than
/// this build solves is refused with the size of its table.
fn solve_materials(names: &[String]) -> Result<Vec<Material>, Failure> {
    for n in names {
        if let Ok(m) = Material::parse_table(n, MAX_MEN + 1) {
            if m.men() == MAX_MEN + 1 {
                let indices: u64 = SliceKey::all_of(m)
                    .into_iter()
                    .map(|k| SliceIndexer::new(k).size())
                    .sum();
                return Err(Failure::input(format!(
                    "material {m} has {} men; `zermelo solve` builds tables of at most {MAX_MEN} men (its table alone would hold {indices} positions, {} at 2 bytes each; `zermelo analyse --plan-only` plans positions of any size)",
                    m.men(),
                    human_bytes(2 * indices)
                )));
            }
        }
    }
    parse_materials(names)
}

/// Materials checked here (one clear line for a bad one) and sent by their table names.
fn canonical_names(names: &[String]) -> Result<Vec<String>, Failure> {
    Ok(parse_materials(names)?.iter().map(|m| m.to_string()).collect())
}

fn progress_bar(show: bool, what: &str) -> Option<ProgressBar> {
    show.then(|| zermelo_cli::progress::bar(what))
}

fn run(command: Command, show_bar: bool) -> Result<u8, Failure> {
    match command {
        Command::Solve {
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
        } => {
            let materials = match all {
                Some(n) => Material::all(n),
                None => solve_materials(&materials)?,
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
                let plan =
                    zermelo_cli::build::plan_build(&materials, tables.first(), tables.more(), &options);
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
                    build_dtz50(&materials, &tables.0, threads, budget, show_bar, |_| {})?;
                eprintln!(
                    "zermelo: {built} DTZ50 table(s) built, {complete} already complete, in {:.1} s",
                    start.elapsed().as_secs_f64()
                );
            }
            Ok(0)
        }
        Command::Probe { tables, fens, format } => {
            let text = format.unwrap_or(if std::io::stdout().is_terminal() {
                ProbeFormat::Text
            } else {
                ProbeFormat::Json
            }) == ProbeFormat::Text;
            tables.must_exist()?;
            let dir = tables.table_dir();
            let dtz = TableDir::dtz50(&tables.0);
            let mut code = 0u8;
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            // One input: a FEN, or a line of stdin that cannot be one (and why).
            let mut one = |input: Result<&str, String>| -> Result<(), Failure> {
                let line = match input {
                    Ok(fen) => {
                        let fen = fen.trim();
                        if fen.is_empty() {
                            return Ok(());
                        }
                        match probe_fen(&dir, &dtz, fen, MAX_MEN) {
                            Ok(info) if text => text_line(&info),
                            Ok(info) => serde_json::to_string(&info).expect("json"),
                            Err(e) => {
                                code = code.max(if e.is_corruption() { 2 } else { 1 });
                                // The line says it; the log only at debug level, so that a
                                // terminal does not show it twice.
                                debug!(fen, error = %e, "probe failed");
                                if text {
                                    format!("{fen}: error: {e}")
                                } else {
                                    serde_json::json!({ "fen": fen, "error": e.to_string() }).to_string()
                                }
                            }
                        }
                    }
                    Err(what) => {
                        code = code.max(1);
                        debug!(error = %what, "probe failed");
                        if text {
                            format!("error: {what}")
                        } else {
                            serde_json::json!({ "fen": null, "error": what }).to_string()
                        }
                    }
                };
                writeln!(out, "{line}").map_err(|e| Failure {
                    code: 2,
                    message: format!("writing output: {e}"),
                })
            };
            if fens.is_empty() {
                if std::io::stdin().is_terminal() {
                    eprintln!(
                        "zermelo probe: reading FENs from the terminal, one per line (Ctrl-D ends); or give them as arguments: zermelo probe --tables {} \"8/8/8/8/8/8/4P3/K1k5 w - - 0 1\"",
                        tables.display()
                    );
                }
                for_each_line(std::io::stdin().lock(), MAX_FEN_LINE, |n, line| match line {
                    Line::Text(text) => one(Ok(text)),
                    Line::NotUtf8 => one(Err(format!("line {n} is not UTF-8"))),
                    Line::TooLong => one(Err(format!(
                        "line {n} is longer than {MAX_FEN_LINE} bytes: not a FEN"
                    ))),
                })?;
            } else {
                for f in &fens {
                    one(Ok(f))?;
                }
            }
            Ok(code)
        }
        Command::Analyse {
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
        } => {
            let rules: zermelo_cli::squares::Rules = rules.parse().map_err(Failure::input)?;
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
        Command::Serve {
            tables,
            listen,
            threads: t,
        } => {
            tables.must_exist()?;
            let rt = tokio::runtime::Builder::new_multi_thread()
                .max_blocking_threads(threads(t)?)
                .enable_all()
                .build()
                .map_err(|e| Failure::input(format!("starting the server: {e}")))?;
            rt.block_on(zermelo_cli::serve::serve(tables.table_dir(), listen, |addr| {
                eprintln!(
                    "zermelo serve: listening on http://{addr} (tables {})",
                    tables.display()
                );
            }))
            .map_err(|e| Failure::input(format!("serving on {listen}: {e}")))?;
            Ok(0)
        }
        Command::Dtz {
            materials,
            tables,
            threads: t,
            memory: m,
        } => {
            let materials = parse_materials(&materials)?;
            let threads = threads(t)?;
            std::fs::create_dir_all(tables.first())
                .map_err(|e| Failure::input(format!("cannot create {}: {e}", tables.first().display())))?;
            let budget = memory::budget(m.map(|b| b.0));
            let (built, complete) = build_dtz50(&materials, &tables.0, threads, budget, show_bar, |b| {
                println!("{}", serde_json::to_string(b).expect("json"));
            })?;
            eprintln!("DTZ50: {built} table(s) built, {complete} complete already");
            Ok(0)
        }
        Command::Stats { tables, material } => {
            let asked = material;
            let material = parse_materials(std::slice::from_ref(&asked))?[0];
            let dir = tables.table_dir();
            let mut s = stats(&dir, &material).map_err(|e| Failure::input(e.to_string()))?;
            // Under the 50-move rule too, where the DTZ50 table is there.
            let dtz = TableDir::dtz50(&tables.0);
            if dtz.has(&material) {
                let [w, b] = zermelo_cli::stats::dtz50_stats(&dtz, &material)
                    .map_err(|e| Failure::input(e.to_string()))?;
                s.white.dtz50 = Some(w);
                s.black.dtz50 = Some(b);
            }
            if asked_with_colours_swapped(&asked, &material) {
                s = s.colours_swapped();
            }
            println!("{}", serde_json::to_string_pretty(&s).expect("json"));
            Ok(0)
        }
        Command::Materials {
            tables,
            materials,
            sample,
            threads: t,
            json,
        } => {
            let list = if materials.is_empty() {
                zermelo_cli::materials::tables_in(&tables.0).map_err(|e| Failure::input(e.to_string()))?
            } else {
                parse_materials(&materials)?
            };
            if list.is_empty() {
                return Err(Failure::input(format!(
                    "{}: no table file (*.zmt) in it; `zermelo solve --all 5 --tables {}` builds every table of up to five men",
                    tables.display(),
                    tables.display()
                )));
            }
            let dir = tables.table_dir();
            let progress = Progress::new(show_bar, "materials");
            let report = |done: u64, total: u64| progress.update(done, total);
            let result = zermelo_cli::materials::summaries(&dir, &list, sample, threads(t)?, &report);
            progress.finish();
            let summaries = result.map_err(|e| Failure::input(e.to_string()))?;
            if json {
                let out = serde_json::json!({
                    "tables": tables.display(),
                    "counted": zermelo_cli::stats::COUNTED,
                    "sample": sample,
                    "materials": summaries,
                });
                println!("{}", serde_json::to_string_pretty(&out).expect("json"));
            } else {
                print!("{}", zermelo_cli::materials::text_table(&summaries));
            }
            Ok(0)
        }
        Command::Verify {
            tables,
            materials,
            all,
            threads: t,
            sample,
            memory,
            dtz50,
        } => {
            let materials = match all {
                Some(n) => Material::all(n),
                None => parse_materials(&materials)?,
            };
            let opts = VerifyOptions {
                dtz50,
                threads: threads(t)?,
                sample_percent: sample,
                memory: Some(memory::budget(memory.map(|m| m.0))),
            };
            let sampled = match sample {
                Some(p) => format!("; a sample of {p}% of the indices, not the whole table"),
                None => String::new(),
            };
            let mut code = 0;
            let (all_start, count, mut failed) = (Instant::now(), materials.len(), 0);
            for m in materials {
                let bar = Progress::new(show_bar, &m.to_string());
                let report = |done: u64, total: u64| bar.update(done, total);
                let start = Instant::now();
                let dirs: Vec<&Path> = tables.0.iter().map(PathBuf::as_path).collect();
                let result = verify_table_in(&dirs, &m.to_string(), &opts, &report);
                bar.finish();
                match result {
                    Ok(r) => {
                        println!(
                            "{}: ok ({} slices, {} legal positions checked in {:.1} s{sampled}; these are the table's own positions, one for each set of mirror images: `zermelo stats` counts the whole board)",
                            r.material,
                            r.slices,
                            r.positions,
                            start.elapsed().as_secs_f64()
                        );
                    }
                    Err(e) => {
                        failed += 1;
                        println!("{m}: FAILED: {e}");
                        eprintln!("zermelo: verify {m}: {e}");
                        code = if matches!(e, VerifyError::Mismatch { .. }) {
                            code.max(1)
                        } else {
                            2
                        };
                    }
                }
            }
            if count > 1 {
                eprintln!(
                    "zermelo: {} of {count} table(s) verified, {failed} failed, in {:.1} s",
                    count - failed,
                    all_start.elapsed().as_secs_f64()
                );
            }
            Ok(code)
        }
        Command::Bench {
            materials,
            alone,
            threads: t,
            tables,
            cluster,
            check_sample,
            runs,
        } => {
            let names = if materials.is_empty() {
                vec!["KPvK".to_string()]
            } else {
                materials
            };
            let materials = parse_materials(&names)?;
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
        Command::Coordinator {
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
        } => {
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
                verify_all: verify == "all",
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
        Command::Worker {
            coordinator,
            cache,
            cache_size,
            threads: t,
            memory,
            token,
            tls_ca,
            metrics_listen,
        } => {
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
        Command::Submit {
            coordinator,
            materials,
            wait,
            token,
            tls_ca,
        } => {
            let names = canonical_names(&materials)?;
            let ca = read_ca(tls_ca)?;
            let bar = if wait { progress_bar(show_bar, "job") } else { None };
            Ok(cluster::submit(&coordinator, &names, wait, token, ca, bar)?)
        }
        Command::Status {
            coordinator,
            job,
            token,
            tls_ca,
        } => Ok(cluster::status(&coordinator, job, token, read_ca(tls_ca)?)?),
        Command::Cluster {
            workers,
            materials,
            tables,
            threads: t,
            memory,
            parts,
            split_over,
            logs,
        } => {
            if workers == 0 {
                return Err(Failure::input("--workers must be at least 1"));
            }
            let names = canonical_names(&materials)?;
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
                    if let Some((key, need)) =
                        cut.overflowing(&parse_materials(&materials)?, memory, per_worker)
                    {
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
        Command::Completions { shell } => {
            let mut out = std::io::stdout().lock();
            clap_complete::generate(shell, &mut Cli::command(), "zermelo", &mut out);
            out.flush()
                .map_err(|e| Failure::input(format!("writing output: {e}")))?;
            Ok(0)
        }
        Command::Man { dir } => {
            let cmd = Cli::command();
            match dir {
                Some(dir) => {
                    std::fs::create_dir_all(&dir)
                        .and_then(|()| clap_mangen::generate_to(cmd, &dir))
                        .map_err(|e| {
                            Failure::input(format!("writing man pages into {}: {e}", dir.display()))
                        })?;
                    eprintln!("man pages written into {}", dir.display());
                }
                None => {
                    let mut out = std::io::stdout().lock();
                    clap_mangen::Man::new(cmd)
                        .render(&mut out)
                        .and_then(|()| out.flush())
                        .map_err(|e| Failure::input(format!("writing output: {e}")))?;
                }
            }
            Ok(0)
        }
        Command::Squares {
            fen,
            tables,
            rules,
            svg,
            svg_sheet,
            json,
        } => squares_command(
            &fen,
            tables.as_ref().map_or(&[][..], |t| &t.0),
            &rules,
            svg.as_deref(),
            svg_sheet.as_deref(),
            json,
        ),
    }
}

fn squares_command(
    fen: &str,
    tables: &[PathBuf],
    rules: &str,
    svg: Option<&std::path::Path>,
    svg_sheet: Option<&std::path::Path>,
    json: bool,
) -> Result<u8, Failure> {
    use zermelo_cli::squares;
    let rules: squares::Rules = rules.parse().map_err(Failure::input)?;
    let pos =
        zermelo_chess::Position::from_fen(fen).map_err(|e| Failure::input(format!("invalid FEN: {e}")))?;
    let cs = squares::squares(&pos, rules, tables).map_err(Failure::input)?;
    let files = [
        (svg, squares::summary_svg(&cs, fen)),
        (svg_sheet, squares::svg(&cs, fen)),
    ];
    for (path, drawing) in files {
        if let Some(path) = path {
            std::fs::write(path, drawing)
                .map_err(|e| Failure::input(format!("writing {}: {e}", path.display())))?;
        }
    }
    if json {
        println!("{}", serde_json::to_string(&cs).expect("json"));
    } else {
        print!("{}", squares::text(&cs));
    }
    Ok(0)
}

/// Builds the DTZ50 tables of `materials` (see [`zermelo_cli::dtz::build_dtz50`]) with a progress
/// bar that names the material, and the distance of the pass under way once its passes begin;
/// `each` is told of every material as it is done. Returns how many tables were built and how
/// many were complete already.
fn build_dtz50(
    materials: &[Material],
    dirs: &[PathBuf],
    threads: usize,
    budget: u64,
    show_bar: bool,
    each: impl FnMut(&zermelo_cli::dtz::DtzBuilt),
) -> Result<(usize, usize), Failure> {
    let progress = Progress::new(show_bar, "DTZ50");
    let report = |done, total, m: &Material, pass: Option<u16>| {
        match pass {
            Some(d) => progress.set_what(&format!("DTZ50 {m}, distance {d}")),
            None => progress.set_what(&format!("DTZ50 {m}")),
        }
        progress.update(done, total);
    };
    let done = zermelo_cli::dtz::build_dtz50(materials, dirs, threads, budget, &report, each)
        .map_err(|e| Failure::input(e.to_string()))?;
    progress.finish();
    let built = done.iter().filter(|b| b.built).count();
    Ok((built, done.len() - built))
}
