//! `zermelo stats`.

use crate::*;

/// Count a table: legal positions, wins, draws, losses and the longest mate, by side to move.
///
/// The counts are over every legal position on the whole board (mirror images included, as
/// published counts are; `verify` counts the table's own positions, fewer). Prints JSON. A
/// material named with the weaker side first (KvKP) is answered as asked, from the table with
/// the colours swapped (KPvK, named in "table").
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Directory of the table files, or a list DIR:DIR2:... searched in order.
    #[arg(long, value_name = "DIR[:DIR...]", env = "ZERMELO_TABLES", value_parser = tables_list)]
    pub(crate) tables: Tables,
    /// The material, e.g. KPvK.
    #[arg(value_name = "MATERIAL")]
    pub(crate) material: String,
}

pub(crate) fn run(args: Args, _show_bar: bool) -> Result<u8, Failure> {
    let Args { tables, material } = args;
    let asked = material;
    let material = material_arg(&asked).map_err(Failure::input)?;
    let dir = tables.table_dir();
    let mut s = stats(&dir, &material).map_err(|e| Failure::input(e.to_string()))?;
    // Under the 50-move rule too, where the DTZ50 table is there.
    let dtz = TableDir::dtz50(&tables.0);
    if dtz.has(&material) {
        let [w, b] =
            zermelo_cli::stats::dtz50_stats(&dtz, &material).map_err(|e| Failure::input(e.to_string()))?;
        s.white.dtz50 = Some(w);
        s.black.dtz50 = Some(b);
    }
    if asked_with_colours_swapped(&asked, &material) {
        s = s.colours_swapped();
    }
    println!("{}", serde_json::to_string_pretty(&s).expect("json"));
    Ok(0)
}
