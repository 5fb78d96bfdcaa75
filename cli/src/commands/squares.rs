//! `zermelo squares`.

use crate::*;

/// Church's co-ordinate (corresponding) squares of a position's pawns.
///
/// For each
/// square of the attacking king, the squares of the defending king that hold the draw with the
/// attacker to move.
///
/// The FEN's kings and side to move are ignored. Prints a diagram, or JSON.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// A position with kings and pawns only; only its pawns matter.
    #[arg(value_name = "FEN")]
    pub(crate) fen: String,
    /// Directory of the table files (needed under chess rules: the full table of the
    /// position's material), or several separated by `:`, searched in order (what is solved
    /// for the squares goes to the first).
    #[arg(long, value_name = "DIR[:DIR...]", env = "ZERMELO_TABLES", value_parser = tables_list)]
    pub(crate) tables: Option<Tables>,
    /// The rules [possible values: chess, coord]: chess (values from the tables; the
    /// attacker is the side that wins more positions with itself to move, White on a tie) or
    /// coord (Church's COORD: pawns never move, White's king wins by taking a black pawn; the
    /// attacker is White).
    #[arg(long, value_name = "RULES", default_value = "chess")]
    pub(crate) rules: zermelo_cli::squares::Rules,
    /// Also write to FILE the summary diagram composers publish: the board with the pawns
    /// and the corresponding squares numbered (the attacker's king on n is held only by
    /// the defender's king on n), coordinates labelled.
    #[arg(long, value_name = "FILE")]
    pub(crate) svg: Option<PathBuf>,
    /// Also write to FILE a sheet of 64 small boards, one per square of the attacker's king,
    /// each shading every square of the defender's king that holds the draw.
    #[arg(long, value_name = "FILE")]
    pub(crate) svg_sheet: Option<PathBuf>,
    /// Print `{"attacker":...,"squares":{"a1":[...],...}}` instead of the diagram.
    #[arg(long)]
    pub(crate) json: bool,
}

pub(crate) fn run(args: Args, _show_bar: bool) -> Result<u8, Failure> {
    let Args {
        fen,
        tables,
        rules,
        svg,
        svg_sheet,
        json,
    } = args;
    squares_command(
        &fen,
        tables.as_ref().map_or(&[][..], |t| &t.0),
        rules,
        svg.as_deref(),
        svg_sheet.as_deref(),
        json,
    )
}

fn squares_command(
    fen: &str,
    tables: &[PathBuf],
    rules: zermelo_cli::squares::Rules,
    svg: Option<&std::path::Path>,
    svg_sheet: Option<&std::path::Path>,
    json: bool,
) -> Result<u8, Failure> {
    use zermelo_cli::squares;
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
