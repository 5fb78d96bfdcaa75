//! `zermelo probe`.

use crate::*;

/// What `probe` prints.
#[derive(Copy, Clone, Debug, PartialEq, ValueEnum)]
pub(crate) enum ProbeFormat {
    Text,
    Json,
}

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
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Directory of the table files, or a list DIR:DIR2:... searched in order.
    #[arg(long, value_name = "DIR[:DIR...]", env = "ZERMELO_TABLES", value_parser = tables_list)]
    pub(crate) tables: Tables,
    /// Positions in FEN; read from stdin when none is given.
    #[arg(value_name = "FEN")]
    pub(crate) fens: Vec<String>,
    /// The output: text (one readable line) or json (the lichess API's answer). Default:
    /// text when stdout is a terminal, else json.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub(crate) format: Option<ProbeFormat>,
}

pub(crate) fn run(args: Args, _show_bar: bool) -> Result<u8, Failure> {
    let Args { tables, fens, format } = args;
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
