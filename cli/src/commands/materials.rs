//! `zermelo materials`.

use crate::*;

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
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Directory of the table files, or a list DIR:DIR2:... searched in order.
    #[arg(long, value_name = "DIR[:DIR...]", env = "ZERMELO_TABLES", value_parser = tables_list)]
    pub(crate) tables: Tables,
    /// Only these materials (default: every table in the directories).
    #[arg(value_name = "MATERIAL", value_parser = material_arg)]
    pub(crate) materials: Vec<Material>,
    /// Positions drawn from each table for the best-move shares (0: none; then the tables
    /// the conversions lead into are not needed).
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub(crate) sample: u64,
    /// Threads, a material each (default: all cores). The output does not depend on it.
    #[arg(long, value_name = "N")]
    pub(crate) threads: Option<usize>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub(crate) json: bool,
}

pub(crate) fn run(args: Args, show_bar: bool) -> Result<u8, Failure> {
    let Args {
        tables,
        materials,
        sample,
        threads: t,
        json,
    } = args;
    let list = if materials.is_empty() {
        zermelo_cli::materials::tables_in(&tables.0).map_err(|e| Failure::input(e.to_string()))?
    } else {
        materials
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
