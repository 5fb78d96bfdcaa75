//! `zermelo serve`.

use crate::*;

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
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Directory of the table files, or a list DIR:DIR2:... searched in order.
    #[arg(long, value_name = "DIR[:DIR...]", env = "ZERMELO_TABLES", value_parser = tables_list)]
    pub(crate) tables: Tables,
    /// Address to listen on (port 0: any free port, printed at start).
    #[arg(long, value_name = "ADDR", default_value = zermelo_cli::serve::DEFAULT_LISTEN)]
    pub(crate) listen: std::net::SocketAddr,
    /// Probes answered at once, each on its own thread with its own cache of 4 MiB of
    /// decompressed blocks (default: the number of cores); more requests wait their turn.
    #[arg(long, value_name = "N")]
    pub(crate) threads: Option<usize>,
}

pub(crate) fn run(args: Args, _show_bar: bool) -> Result<u8, Failure> {
    let Args {
        tables,
        listen,
        threads: t,
    } = args;
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
