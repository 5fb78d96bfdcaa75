//! `zermelo pack`.

use crate::*;
use zermelo_cli::pack::{pack_material, PackOptions, PACK_ZSTD_LEVEL};

/// Write the tables for download: mates and DTZ50 with one side to move each, a third of the
/// size or less.
///
/// For each MATERIAL and every material it converts into, each table of mates (KRPvKR.zmt)
/// and of DTZ50 (KRPvKR.zdz) in --tables is written to --out holding only the side to move
/// whose values compress smaller (illegal positions given the value before them), at a slower
/// zstd level. `probe`, `serve` and Python answer a position of the other side by a search of
/// one ply over the packed tables: the same answers, each of those a few table reads slower.
/// The WDL50 table (KRPvKR.zwl) keeps both sides, at the same level. Builds, `verify` and
/// `stats` need the full tables and refuse packed ones. Each packed file is checked before it
/// is kept: positions of the side it drops, spread over the table, are searched through the
/// packed tables and compared with the full one. Prints a JSON line per file.
///
/// The smallest files: --level 19, about 15 times as long to pack (KRPvKR's three files: 137 MB
/// at level 9, 101 MB at 19, against chesstb's 104 MB of WDL and DTM; see docs/dtz50.md); a
/// probe reads them as fast. --block-values 1048576 saves a little more (89 MB), but a probe
/// then decompresses 2 MB a block.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Materials such as KQRvKR (any order and case); the materials they convert into are
    /// packed too.
    #[arg(required = true, value_name = "MATERIAL", value_parser = material_arg)]
    pub(crate) materials: Vec<Material>,
    /// Directory of the full tables, or a list DIR:DIR2:... searched in order.
    #[arg(long, value_name = "DIR[:DIR...]", env = "ZERMELO_TABLES", value_parser = tables_list)]
    pub(crate) tables: Tables,
    /// Directory the packed tables are written to (created if missing); not one of --tables.
    #[arg(long, value_name = "DIR")]
    pub(crate) out: PathBuf,
    /// zstd level of the packed blocks (1 to 22; 19 for the smallest files).
    #[arg(long, value_name = "N", default_value_t = PACK_ZSTD_LEVEL,
          value_parser = clap::value_parser!(i32).range(1..=22))]
    pub(crate) level: i32,
    /// Values per block of the packed files (1 to 1048576).
    #[arg(long, value_name = "N", default_value_t = zermelo_storage::DEFAULT_BLOCK_VALUES,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(zermelo_storage::MAX_BLOCK_VALUES)))]
    pub(crate) block_values: u32,
    /// Positions of the dropped side searched and compared with the full table, per file
    /// (0: none).
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub(crate) check: u64,
    /// Threads compressing (default: all cores). The files do not depend on it.
    #[arg(long, value_name = "N")]
    pub(crate) threads: Option<usize>,
}

pub(crate) fn run(args: Args, show_bar: bool) -> Result<u8, Failure> {
    let Args {
        materials,
        tables,
        out,
        level,
        block_values,
        check,
        threads: t,
    } = args;
    let threads = threads(t)?;
    tables.must_exist()?;
    std::fs::create_dir_all(&out)
        .map_err(|e| Failure::input(format!("cannot create {}: {e}", out.display())))?;
    let same = |d: &PathBuf| match (d.canonicalize(), out.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if tables.0.iter().any(same) {
        return Err(Failure::input(format!(
            "--out {} is one of the --tables directories: packing there would replace the full tables",
            out.display()
        )));
    }
    // Read with positioned reads: the full tables stay in the page cache, not the process.
    let full = tables.table_dir().pread();
    let plan = zermelo_coordinator::plan::plan(&materials);
    let progress = Progress::new(show_bar, "pack");
    let options = PackOptions {
        level,
        block_values,
        threads,
        check,
    };
    let (mut files, mut bytes, mut full_bytes) = (0usize, 0u64, 0u64);
    for mp in &plan.materials {
        progress.set_what(&format!("pack {}", mp.material));
        let packed = pack_material(&full, &out, &mp.material, options, &|d, n| progress.update(d, n))
            .map_err(|e| Failure::input(e.to_string()))?;
        for p in &packed {
            println!("{}", serde_json::to_string(p).expect("json"));
            files += 1;
            bytes += p.bytes;
            full_bytes += p.full_bytes;
        }
    }
    progress.finish();
    eprintln!(
        "packed {files} file(s) of {} material(s) into {}: {} (full: {})",
        plan.materials.len(),
        out.display(),
        memory::human_bytes(bytes),
        memory::human_bytes(full_bytes)
    );
    Ok(0)
}
