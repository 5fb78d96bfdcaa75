//! `zermelo verify`.

use crate::*;
use zermelo_storage::wdl_file_name;

/// Check each table's checksums and re-derive every stored value from its successors with a
/// move generator independent of the solver.
///
/// Exit 0 when all agree; otherwise print the first wrong position as a FEN and exit 1.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Directory of the table files, or a list DIR:DIR2:... searched in order (for the
    /// table and for the tables it leads into).
    #[arg(long, value_name = "DIR[:DIR...]", env = "ZERMELO_TABLES", value_parser = tables_list)]
    pub(crate) tables: Tables,
    /// Materials to verify.
    #[arg(
        required_unless_present = "all",
        conflicts_with = "all",
        value_name = "MATERIAL",
        value_parser = material_arg
    )]
    pub(crate) materials: Vec<Material>,
    /// Every material of 3 to N men instead of a list (N from 3 to 7), as `solve --all N`
    /// builds them.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(3..=7))]
    pub(crate) all: Option<u32>,
    /// Threads (default: all cores).
    #[arg(long, value_name = "N")]
    pub(crate) threads: Option<usize>,
    /// Check only this percentage (1 to 99) of each table's indices, in runs of 65,536
    /// spread evenly over the table: a spot check of a table too big to verify whole in the
    /// time at hand. The report says it was a sample.
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u8).range(1..=99))]
    pub(crate) sample: Option<u8>,
    /// Memory budget, e.g. 16GiB or 512MiB (default: three quarters of the machine's memory,
    /// or of the container's cgroup limit). The verifier holds half of a slice (2 bytes an
    /// index) and shares the rest out between a cache of small successor slices (at most
    /// 1 GiB) and blocks of large ones. A half slice that does not fit is paged through a
    /// file in the table's folder (2 bytes an index of disk, removed at once), at most what
    /// the budget leaves of it in memory; a budget too small even for that is refused
    /// before any work, with the size it needs.
    #[arg(long, value_name = "SIZE")]
    pub(crate) memory: Option<ByteSize>,
    /// Verify the DTZ50 tables (KRPvKR.zdz, built by `zermelo dtz`) instead of the tables
    /// of mates: every value re-derived from its children under the 50-move rule; then the
    /// WDL50 table beside each (KRPvKR.zwl), where it is: every value the class of the DTZ50
    /// value.
    #[arg(long)]
    pub(crate) dtz50: bool,
}

pub(crate) fn run(args: Args, show_bar: bool) -> Result<u8, Failure> {
    let Args {
        tables,
        materials,
        all,
        threads: t,
        sample,
        memory,
        dtz50,
    } = args;
    let materials = match all {
        Some(n) => Material::all(n),
        None => materials,
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
                // The WDL50 table written beside a DTZ50 table, where it is: its classes.
                let wdl = tables
                    .0
                    .iter()
                    .any(|d| d.join(wdl_file_name(&r.material)).exists());
                if dtz50 && wdl {
                    match zermelo_cli::verify::verify_wdl50_in(&dirs, &r.material) {
                        Ok(n) => println!(
                            "{}: ok ({n} values, each the WDL50 class of its DTZ50 value)",
                            wdl_file_name(&r.material)
                        ),
                        Err(e) => {
                            failed += 1;
                            println!("{}: FAILED: {e}", wdl_file_name(&r.material));
                            eprintln!("zermelo: verify {m}: {e}");
                            code = if matches!(e, VerifyError::Mismatch { .. }) {
                                code.max(1)
                            } else {
                                2
                            };
                        }
                    }
                }
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
