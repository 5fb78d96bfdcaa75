//! `zermelo pack`: tables to download, each holding one side to move.
//!
//! A packed table (index layout [`packed_layout`]) holds the values of one side to move, the
//! side whose values compress smaller, with every illegal index given the value before it (a
//! prober tests legality itself). A position of the other side is answered by a search of one
//! ply ([`TableDir`]'s probes): each of its moves inside the material leads to the side the
//! table holds, and a capture or a promotion to a smaller table. Mates (`.zmt`) and DTZ50
//! (`.zdz`) are packed so. The WDL50 table (`.zwl`) keeps both sides, written again at the
//! pack's level and block size: a WDL-only probe reads that file alone, and a class is not
//! found from the classes one ply on (a loss in 100 plies and one in 99 are both losses under
//! the rule, but a win by a quiet move into them is cursed in one case only).
//!
//! Builds, `verify` and `stats` read full tables only ([`TableDir::table`] refuses a packed
//! one); probes read either.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;
use tracing::info;
use zermelo_chess::index::{packed_layout, Location, SliceIndexer};
use zermelo_chess::probe::{DtzSource, ValueSource};
use zermelo_chess::slice::SliceKey;
use zermelo_chess::{Color, Dtz, Material, Value};
use zermelo_storage::{Metric, StorageError, Table, TableMeta, TableWriter, WriteOptions};
use zermelo_worker::tables::{metric_file_name, TableDir, TableError};

/// The zstd level of a packed table's blocks: packing is done once for many downloads, so a
/// slower level than a build's is worth it (KQRvKR's mates, White to move: 17.1 MB at level 1,
/// 14.4 MB at 9).
pub const PACK_ZSTD_LEVEL: i32 = 9;

/// What `pack` did with one file.
#[derive(Debug, Clone, Serialize)]
pub struct PackedFile {
    pub material: String,
    /// `dtm`, `dtz50` or `wdl50`.
    pub metric: &'static str,
    pub file: PathBuf,
    /// The side to move the file holds: `white`, `black`, or `both` (a WDL50 table, copied).
    pub side: &'static str,
    /// Bytes of the full table it was packed from.
    pub full_bytes: u64,
    pub bytes: u64,
    /// Bytes the other side would have taken (not kept), estimated: the kept side's bytes times
    /// the ratio of the two at zstd level 1.
    pub other_side_bytes: Option<u64>,
    /// Positions of the side not held, each searched through the packed tables and compared
    /// with the full table.
    pub checked: u64,
    pub seconds: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum PackError {
    #[error(transparent)]
    Table(#[from] TableError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("{0}")]
    Io(String),
    #[error(
        "{material}: position {index} of slice {slice} is {full} in the full table but the packed \
         tables answer {packed}; nothing of it is kept"
    )]
    Mismatch {
        material: Material,
        slice: SliceKey,
        index: u64,
        full: String,
        packed: String,
    },
}

/// How `pack` runs.
#[derive(Clone, Copy, Debug)]
pub struct PackOptions {
    /// zstd level of the packed blocks.
    pub level: i32,
    /// Values per block of the packed files (larger blocks compress better; a probe then
    /// decompresses more).
    pub block_values: u32,
    /// Threads compressing blocks and reading slices (the bytes do not depend on it).
    pub threads: usize,
    /// Positions of the side not held to search and compare with the full table, per file.
    pub check: u64,
}

impl PackOptions {
    /// How the packed files are written: at the pack's level and block size.
    fn write_options(&self) -> WriteOptions {
        WriteOptions {
            zstd_level: self.level,
            block_values: self.block_values,
            threads: self.threads.max(1),
            ..WriteOptions::default()
        }
    }
}

/// Packs the mates, DTZ50 and WDL50 tables of `material` found in `full` (the tables of
/// `metric` views of it) into `out`, which must be another directory. A file is written under a
/// temporary name and renamed once whole, then checked ([`check_packed`]: a difference removes
/// it); a failure leaves no temporary file. `progress` is called with (values read so far,
/// values of the material's mates and DTZ50 tables).
pub fn pack_material(
    full: &TableDir,
    out: &Path,
    material: &Material,
    options: PackOptions,
    progress: &dyn Fn(u64, u64),
) -> Result<Vec<PackedFile>, PackError> {
    let views = [(Metric::Dtm, "dtm"), (Metric::Dtz50, "dtz50")]
        .map(|(m, name)| (full.view_of(m), m, name))
        .into_iter()
        .filter(|(dir, _, _)| dir.has(material))
        .collect::<Vec<_>>();
    let wdl = full.wdl50_view();
    if views.is_empty() && !wdl.has(material) {
        return Err(TableError::Missing {
            material: *material,
            dir: full.search_list(),
        }
        .into());
    }
    let mut tables = Vec::new();
    for (dir, metric, name) in &views {
        tables.push((dir.table(material)?, *metric, *name));
    }
    let wdl_table = if wdl.has(material) {
        Some(wdl.table(material)?)
    } else {
        None
    };
    let total: u64 = (tables.iter().map(|(t, _, _)| t.positions()))
        .chain(wdl_table.iter().map(|t| t.positions()))
        .sum();
    let mut done = 0u64;
    let mut out_files = Vec::new();
    for (table, metric, name) in tables {
        let start = Instant::now();
        let (file, side, bytes, other) = pack_table(&table, out, material, metric, options, &|d| {
            progress(done + d, total)
        })?;
        done += table.positions();
        // A file whose check fails, or cannot be made, is not kept.
        let checked = match check_packed(full, out, &table, material, metric, options.check) {
            Ok(checked) => checked,
            Err(e) => {
                let _ = std::fs::remove_file(&file);
                return Err(e);
            }
        };
        let packed = PackedFile {
            material: material.to_string(),
            metric: name,
            file,
            side: if side == Color::White { "white" } else { "black" },
            full_bytes: table.file_len(),
            bytes,
            other_side_bytes: Some(other),
            checked,
            seconds: start.elapsed().as_secs_f64(),
        };
        info!(
            material = %material,
            metric = name,
            side = packed.side,
            bytes,
            full_bytes = packed.full_bytes,
            checked,
            "table packed"
        );
        out_files.push(packed);
    }
    if let Some(table) = wdl_table {
        let start = Instant::now();
        let to = out.join(metric_file_name(material, Metric::Wdl50));
        let bytes = recompress(&table, &to, &options.write_options(), &|d| {
            progress(done + d, total)
        })?;
        out_files.push(PackedFile {
            material: material.to_string(),
            metric: "wdl50",
            file: to,
            side: "both",
            full_bytes: table.file_len(),
            bytes,
            other_side_bytes: None,
            checked: 0,
            seconds: start.elapsed().as_secs_f64(),
        });
    }
    Ok(out_files)
}

/// Packs `table` into `out`: both sides written at zstd level 1 to see which is smaller (the
/// order holds at every level measured), then that side at the options' level and block size.
/// Returns the packed file's path, side and bytes, and the bytes of the other side at the
/// same level (a fair estimate: the two sides' ratio at level 1).
fn pack_table(
    table: &Table,
    out: &Path,
    material: &Material,
    metric: Metric,
    options: PackOptions,
    progress: &dyn Fn(u64),
) -> Result<(PathBuf, Color, u64, u64), PackError> {
    let name = metric_file_name(material, metric);
    let temp = |side: Color| out.join(format!(".{name}.{side:?}.packing"));
    let quick = WriteOptions {
        zstd_level: 1,
        threads: options.threads.max(1),
        durable: false,
        ..WriteOptions::default()
    };
    let sides = [Color::White, Color::Black];
    let remove_temps = || {
        for side in sides {
            let _ = std::fs::remove_file(temp(side));
        }
    };
    let fast = write_sides(table, &sides.map(|s| (s, temp(s))), &quick, &|d| progress(d / 2));
    remove_temps();
    let fast = fast?;
    let keep = usize::from(fast[1] < fast[0]);
    let path = out.join(&name);
    let half = table.positions() / 2;
    let bytes = write_sides(
        table,
        &[(sides[keep], temp(sides[keep]))],
        &options.write_options(),
        &|d| progress(half + d / 2),
    );
    let bytes = match bytes {
        Ok(b) => b[0],
        Err(e) => {
            remove_temps();
            return Err(e);
        }
    };
    std::fs::rename(temp(sides[keep]), &path)
        .map_err(|e| PackError::Io(format!("cannot rename {}: {e}", temp(sides[keep]).display())))?;
    let other = (bytes as f64 * fast[1 - keep] as f64 / fast[keep].max(1) as f64) as u64;
    Ok((path, sides[keep], bytes, other))
}

/// Writes the values of `table` for each side to move of `sides` to its path (layout
/// [`packed_layout`] of the side), each illegal index given the value before it (of its side;
/// a draw first), in one pass over the table. Returns each file's bytes. `progress` is called
/// with the values read.
fn write_sides(
    table: &Table,
    sides: &[(Color, PathBuf)],
    write: &WriteOptions,
    progress: &dyn Fn(u64),
) -> Result<Vec<u64>, PackError> {
    let mut writers = Vec::with_capacity(sides.len());
    for (side, path) in sides {
        let meta = TableMeta {
            index_layout: packed_layout(*side),
            ..table.meta().clone()
        };
        let slices = table.slices().len() as u64;
        writers.push((
            *side,
            TableWriter::create(path, &meta, slices, table.positions() / 2, write)?,
        ));
    }
    let mut read = 0u64;
    for (i, entry) in table.slices().iter().enumerate() {
        if entry.count % 2 != 0 {
            return Err(StorageError::InvalidInput(format!(
                "slice {i} has an odd count of values ({}): not both sides to move",
                entry.count
            ))
            .into());
        }
        let per_side = entry.count / 2;
        for (_, w) in &mut writers {
            w.begin_slice(entry.key, per_side)?;
        }
        let mut last = [zermelo_chess::value::DRAW; 2];
        let (mut at, mut pushed, mut filled) = (0u64, Ok(()), Vec::new());
        table.stream_slice(i, |values| {
            let mut values = values;
            while !values.is_empty() && pushed.is_ok() {
                let side = usize::from(at >= per_side);
                let take = if side == 0 {
                    (per_side - at).min(values.len() as u64) as usize
                } else {
                    values.len()
                };
                if let Some((_, w)) = writers.iter_mut().find(|(s, _)| s.index() == side) {
                    filled.clear();
                    filled.extend(values[..take].iter().map(|&v| {
                        if v != zermelo_chess::value::ILLEGAL {
                            last[side] = v;
                        }
                        last[side]
                    }));
                    pushed = w.push_values(&filled);
                }
                values = &values[take..];
                at += take as u64;
            }
        })?;
        pushed?;
        for (_, w) in &mut writers {
            w.end_slice()?;
        }
        read += entry.count;
        progress(read);
    }
    let mut bytes = Vec::with_capacity(writers.len());
    for (_, w) in writers {
        bytes.push(w.finish()?.bytes);
    }
    Ok(bytes)
}

/// Writes the values of `table` again at `write`'s level and block size into `path`: the same
/// values and slices (so the same content hashes), other compressed bytes. `progress` is called
/// with the values written.
fn recompress(
    table: &Table,
    path: &Path,
    write: &WriteOptions,
    progress: &dyn Fn(u64),
) -> Result<u64, PackError> {
    let temp = path.with_file_name(format!(
        ".{}.packing",
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    ));
    let slices = table.slices().len() as u64;
    let mut w = TableWriter::create(&temp, table.meta(), slices, table.positions(), write)?;
    for (i, entry) in table.slices().iter().enumerate() {
        w.begin_slice(entry.key, entry.count)?;
        let mut pushed = Ok(());
        table.stream_slice(i, |values| {
            if pushed.is_ok() {
                pushed = w.push_values(values);
            }
        })?;
        pushed?;
        w.end_slice()?;
        progress(entry.first_value() + entry.count);
    }
    let bytes = w.finish()?.bytes;
    std::fs::rename(&temp, path)
        .map_err(|e| PackError::Io(format!("cannot rename {}: {e}", temp.display())))?;
    Ok(bytes)
}

/// Searches `count` positions of the side `out`'s packed table of `material` does not hold
/// (spread evenly over the legal ones of the full `table`, the same whatever the run) through
/// the packed tables (`out` first, then `full`'s directories), and compares each with the full
/// table: an error at the first difference. Returns how many were compared.
fn check_packed(
    full: &TableDir,
    out: &Path,
    table: &Table,
    material: &Material,
    metric: Metric,
    count: u64,
) -> Result<u64, PackError> {
    if count == 0 {
        return Ok(0);
    }
    let mut dirs = vec![out.to_path_buf()];
    dirs.extend(full.dirs().cloned());
    let packed = TableDir::from_list(&dirs).view_of(metric);
    let path = packed.path_of(material);
    let kept = match zermelo_chess::index::stored_turn(packed.table_to_probe(material)?.meta().index_layout) {
        Some(Some(side)) => side,
        _ => return Err(PackError::Io(format!("{} is not packed", path.display()))),
    };
    let dropped = kept.other();
    let total: u64 = table.positions() / 2;
    let step = (total / count).max(1);
    let mut checked = 0u64;
    let plan = zermelo_coordinator::plan::plan(&[*material]);
    let keys: HashMap<[u64; 2], SliceKey> = (plan.materials.iter())
        .filter(|mp| mp.material == *material)
        .flat_map(|mp| mp.slices())
        .map(|k| (k.raw(), *k))
        .collect();
    // Each slice's share of the evenly spread sample, read a value at a time.
    let mut offset = 0u64;
    for (i, entry) in table.slices().iter().enumerate() {
        let per_side = entry.count / 2;
        let key = match keys.get(&entry.key) {
            Some(k) if SliceIndexer::new(*k).per_side() == per_side => *k,
            _ => {
                return Err(PackError::Io(format!(
                    "{}: slice {i} is no slice of {material} (or not of its size)",
                    table.path().unwrap_or(Path::new("?")).display()
                )));
            }
        };
        let mut j = (step - offset % step) % step;
        while j < per_side && checked < count {
            let index = j + dropped.index() as u64 * per_side;
            let raw = table.value(i, index)?;
            j += step;
            if raw == zermelo_chess::value::ILLEGAL {
                continue;
            }
            let loc = Location { slice: key, index };
            let (want, got) = match metric {
                Metric::Dtz50 => {
                    let got = packed.dtz_at(&loc)?;
                    (Dtz::from_raw(raw).map(|v| format!("{v:?}")), format!("{got:?}"))
                }
                _ => {
                    let got = packed.value_at(&loc)?;
                    (Value::from_raw(raw).map(|v| format!("{v:?}")), format!("{got:?}"))
                }
            };
            let want = want.unwrap_or_else(|| format!("raw {raw}"));
            if want != got {
                return Err(PackError::Mismatch {
                    material: *material,
                    slice: key,
                    index,
                    full: want,
                    packed: got,
                });
            }
            checked += 1;
        }
        offset += per_side;
    }
    Ok(checked)
}
