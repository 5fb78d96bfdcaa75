//! `zermelo dtz`.

use crate::*;

/// Build the DTZ50 tables (KRPvKR.zdz): exact distance to the next zeroing move under the
/// 50-move rule, with cursed wins and blessed losses.
///
/// For each MATERIAL and every material it converts into: the plies to the next zeroing
/// move (capture or pawn move) or mate under the 50-move rule, exact (never rounded), with
/// the WDL50 class (win, cursed win, draw, blessed loss, loss) in the same value. Beside each,
/// the WDL50 table (KRPvKR.zwl): the class alone, a fraction of the size, for probers that
/// need no distance. Needs no table of mates, but where a material's own (KRPvKR.zmt) is in
/// the directories its draws are taken as they are, without a move generated (up to a
/// third less time on materials with many draws; the same bytes). Tables already complete
/// are kept. Prints a JSON line per material.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Materials such as KPvK or KRPvKR (any order and case).
    #[arg(required = true, value_name = "MATERIAL", value_parser = material_arg)]
    pub(crate) materials: Vec<Material>,
    /// Directory of the table files (created if missing). A list DIR:DIR2:... writes to the
    /// first and reuses the complete DTZ50 tables found in the others.
    #[arg(long, value_name = "DIR[:DIR...]", env = "ZERMELO_TABLES", value_parser = tables_list)]
    pub(crate) tables: Tables,
    /// Worker threads (default: all cores). The tables do not depend on it.
    #[arg(long, value_name = "N")]
    pub(crate) threads: Option<usize>,
    /// Memory budget, e.g. 16GiB (default: three quarters of the machine's memory, or of the
    /// container's cgroup limit). A material whose build needs more (2 bytes a position of
    /// the material and a quarter of one of its largest slice) is refused before any work.
    #[arg(long, value_name = "SIZE")]
    pub(crate) memory: Option<ByteSize>,
}

pub(crate) fn run(args: Args, show_bar: bool) -> Result<u8, Failure> {
    let Args {
        materials,
        tables,
        threads: t,
        memory: m,
    } = args;
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

/// Builds the DTZ50 tables of `materials` (see [`zermelo_cli::dtz::build_dtz50`]) with a progress
/// bar that names the material, and the distance of the pass under way once its passes begin;
/// `each` is told of every material as it is done. Returns how many tables were built and how
/// many were complete already.
pub(crate) fn build_dtz50(
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
