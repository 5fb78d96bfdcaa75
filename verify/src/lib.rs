//! The independent verifier behind `zermelo verify`: re-derives every value of a table from its
//! successors, with its own rules.
//!
//! The verifier shares no chess code with the solver. It has its own 0x88 mailbox move
//! generator (`board.rs`), its own reading of material names and slice keys (`material.rs`) and
//! its own position index (`index.rs`), all written from the table format's description; of the
//! project it uses only `zermelo_storage` to read the bytes. A bug in the solver's move
//! generation, attacks, index or symmetries therefore shows up here as a disagreement instead of
//! being repeated.
//!
//! # What is checked
//!
//! For the table of one material:
//! 1. the file's own checksums (footer, every block, every slice hash), its index layout (3:
//!    a king-pair field and one combination-ranked field per group of like men, see `index.rs`),
//!    its material (normalized, matching the file name), and that it holds exactly the
//!    canonical slices of the material, sorted, each with `2 * per_side` values;
//! 2. at every index: an illegal position (or two men on one square) stores 0; a legal one
//!    stores the value derived from its children. A position without moves is checkmated (loss
//!    in 0) if in check, else stalemate (draw). Otherwise each child's value is read (from this
//!    table or the other tables in the same folder; bare kings are a draw; a child with an
//!    en-passant right is itself derived from its children, since tables hold no such
//!    positions) and the best is kept: a child's loss in n is a win in n + 1, a child's win in n
//!    a loss in n + 1, a draw a draw; the quickest win beats any draw, which beats any loss, and
//!    the slowest loss is the best loss.
//!
//! # Why local consistency is enough
//!
//! Take the tables this one leads into as exact (each is verified on its own) and suppose every
//! position of this table agrees with its children. Then for every n, by strong induction, a
//! position is stored as a win (or a loss) in n plies iff it truly is one. For n = 0: stored as
//! checkmated iff it has no move and is in check, which is the truth. For n > 0: stored as a
//! win in n iff some child is stored as a loss in n - 1 and none as a loss in fewer, iff (by
//! induction, both ways) some child truly is a loss in n - 1 and none a loss in fewer, iff it
//! truly is a win in n; losses likewise (every child a win, the slowest in n - 1). What is
//! neither a win nor a loss in any number of plies is a draw, stored or true. So a table that
//! passes, over successors that pass, is exact.
//!
//! # Lines
//!
//! Where the least significant field of a slice's index is a group of one man (the queen of
//! KQRvKR, the rook of KRPvKR and KRNvKNN), the 64 indices from a multiple of 64 up differ in
//! that man's square alone. A whole verification derives such a line at once (`line.rs`): each
//! move of the other men is found once and its children are read as a line of their table,
//! and the moves are taken without testing their legality, a child stored as illegal being no
//! move (sound because every index of every table read is itself checked: see `line.rs`). A
//! line that disagrees with its stored values is checked again position by position, which
//! reports the first wrong index as the plain check does; the report counts the lines checked
//! and those that disagreed while the plain check passed (0 on a good table). A sample, and a
//! slice without such a man (KRRvK, KPvK), is checked position by position. The test
//! `lines_derive_what_positions_derive` holds the two ways to the same derived values on every
//! line of five tables.
//!
//! # Memory and order of work
//!
//! A slice is checked in two phases, one per side to move. A move that stays in the slice (no
//! capture, no pawn move) hands the move to the other side, so while the positions with White
//! to move are checked their children in the slice all have Black to move, and the reverse. A
//! phase therefore holds the other half of the slice (2 bytes an index, on huge pages) and reads
//! the half it checks from the file a unit at a time; the successor slices of other tables are
//! read whole into a shared cache of about 1 GiB. A 6-man pawnless table such as KRNvKNN
//! (3.8 G indices a side) needs about 7.6 GB for its half, where holding the whole slice would
//! take twice that.
//!
//! With a memory budget ([`VerifyOptions::memory`]) the cache, the slices read whole and the
//! blocks each thread keeps shrink to what the budget leaves beside the half ([`Limits`]). A
//! budget that cannot hold the half pages it (`paged.rs`): its values go to a file in the
//! table's folder (2 bytes an index of disk), mapped, with at most what the budget leaves of it
//! mapped at once; the children of a unit lie in the values of few king pairs of the half, so
//! that most reads find their page mapped. A budget that cannot hold a few king pairs' worth a
//! thread and a few blocks a thread is refused before any work.
//!
//! # Determinism
//!
//! The work is cut into units (up to 65,536 indices of one half of a slice) taken in order by
//! `threads` scoped threads, phase after phase. A failure in unit u stops the units after u but
//! lets the ones before it finish, and the failure of the lowest unit wins: the report names
//! the first wrong index in (slice, index) order whatever the thread count.

mod board;
mod index;
mod line;
mod material;
mod paged;
mod stream;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rustc_hash::FxHashMap;
use zermelo_storage::{table_file_name, Metric, StorageError, Table};

use board::{Child, Position, Pseudo};
use index::{locate, Decoded, Decoder, Location, QuietFrame, LAYOUT};
use material::Material;
pub use material::{MaterialNameError, Pawns};
use paged::{PagedError, PagedHalf, Touched};
pub use stream::SliceStream;

/// How to verify.
#[derive(Clone, Debug, Default)]
pub struct VerifyOptions {
    /// Worker threads; 0 (the default) means one per available CPU.
    pub threads: usize,
    /// Check only this percentage (1 to 99) of the table's indices, in runs of
    /// `UNIT_INDICES` spread evenly over every slice; `None` (the default) checks them all.
    pub sample_percent: Option<u8>,
    /// A memory budget in bytes (see [`Limits`]); `None` (the default) keeps a 1 GiB cache of
    /// whole successor slices and 32 MiB of blocks per thread.
    pub memory: Option<u64>,
    /// Verify the DTZ50 tables (`KRPvKR.zdz`, metric 3) instead of the tables of mates: every
    /// value re-derived from the children with the 50-move rule's own rules (see [`dtz`]).
    pub dtz50: bool,
}

/// What a successful verification covered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyReport {
    /// The normalized material name (`"KQvKR"`).
    pub material: String,
    /// Slices checked.
    pub slices: usize,
    /// Legal positions checked against their children: the indices holding one. Each stands for
    /// one position in table orientation (like men are not labelled); a pawnless position with
    /// both kings on the a1-h8 diagonal and its mirror image in it are two.
    pub positions: u64,
    /// Indices checked (legal positions plus illegal ones stored as 0).
    pub indices: u64,
    /// Lines of 64 indices checked together (see the crate's documentation, "Lines").
    pub lines: u64,
    /// Lines whose values derived together disagreed with the stored ones while the check
    /// position by position passed. Always 0 on a table that passes, unless the line check has
    /// a bug or a successor stores a value at an illegal position (its own verification fails).
    pub disagreed: u64,
}

/// Why a table failed verification, or could not be verified.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The material name given is not one.
    #[error("bad material name {name:?}: {reason}")]
    BadMaterial { name: String, reason: MaterialNameError },
    /// A table this verification needs is not in the folder.
    #[error("missing table {}", file.display())]
    MissingTable { file: PathBuf },
    /// A table file could not be read, or its bytes are corrupt.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A table's values are not exact DTM (an adjudicated table): nothing to verify against.
    #[error("table {} holds adjudicated values, not exact DTM; only exact tables are verified", file.display())]
    NotExact { file: PathBuf },
    /// A table of mates where a DTZ50 table was expected.
    #[error("{} holds mates, not DTZ50 values", file.display())]
    NotDtz { file: PathBuf },
    /// A DTZ50 table where a table of mates was expected.
    #[error("{} holds DTZ50 values, not mates", file.display())]
    NotDtm { file: PathBuf },
    /// Another table where a WDL50 table was expected.
    #[error("{} does not hold WDL50 classes", file.display())]
    NotWdl { file: PathBuf },
    /// A table uses a position index this verifier does not know.
    #[error("table {} has index layout {found}, this verifier reads layout {}", file.display(), LAYOUT)]
    WrongLayout { file: PathBuf, found: u32 },
    /// A packed table (layout 3 with one side to move, `storage/FORMAT.md`): the verifier
    /// re-derives every value of a full table only.
    #[error("table {} is packed (one side to move, index layout {found:#x}): verify the full table it was packed from", file.display())]
    Packed { file: PathBuf, found: u32 },
    /// A table's header names another material than its file name, or a non-normalized one.
    #[error("table {} holds material {found:?}, expected {expected:?}", file.display())]
    WrongMaterial {
        file: PathBuf,
        found: String,
        expected: String,
    },
    /// A canonical slice is missing from a table.
    #[error("table {material} lacks slice ({key})")]
    MissingSlice { material: String, key: Pawns },
    /// A table holds a slice that is not a canonical slice of its material.
    #[error("table {material} holds slice ({key}), which is not a canonical slice of it")]
    UnexpectedSlice { material: String, key: Pawns },
    /// A table's slices are not in strictly ascending key order.
    #[error("table {material} has its slices out of order at slice ({key})")]
    UnsortedSlices { material: String, key: Pawns },
    /// A slice holds a wrong number of values.
    #[error("table {material}, slice ({key}): {count} values, expected {expected}")]
    WrongSliceSize {
        material: String,
        key: Pawns,
        count: u64,
        expected: u64,
    },
    /// A stored value disagrees with the one derived from the position's children.
    #[error("table {material}: position {fen}: stored: {stored}, derived: {derived}")]
    Mismatch {
        material: String,
        fen: String,
        stored: String,
        derived: String,
    },
    /// The memory budget is too small for the least of the half slice paged and the threads'
    /// blocks.
    #[error(
        "verifying {material} needs at least {:.1} MiB of memory (half of a slice at 2 bytes an index is {:.1} MiB, paged through the table's folder: a few of its king pairs a thread in memory, and a few blocks a thread); the budget is {:.1} MiB: raise it with --memory or verify with fewer --threads",
        *needed as f64 / 1048576.0, *half as f64 / 1048576.0, *budget as f64 / 1048576.0
    )]
    OverBudget {
        material: String,
        needed: u64,
        half: u64,
        budget: u64,
    },
    /// The file of a paged half slice could not be made in its folder.
    #[error("cannot page half a slice through {}: {source}", dir.display())]
    Scratch { dir: PathBuf, source: std::io::Error },
    /// A slice a check needs is not at hand (see [`check_slice`]).
    #[error("slice ({key}) of {material} is not at hand")]
    Unavailable { material: String, key: Pawns },
    /// A stored value no table holds (above `0x7fff`).
    #[error("table {material}, slice ({key}), index {index}: {value:#x} is not a value")]
    OutOfRange {
        material: String,
        key: Pawns,
        index: u64,
        value: u16,
    },
    /// A legal position's legal child is stored as illegal (0).
    #[error(
        "table {material}: position {fen}: its successor {successor} is stored as illegal in table {successor_material}"
    )]
    IllegalSuccessor {
        material: String,
        fen: String,
        successor: String,
        successor_material: String,
    },
}

/// Indices per work unit, for slices larger than that.
const UNIT_INDICES: u64 = 1 << 16;

/// Values kept in the slice cache beyond the ones in use (1 GiB).
const CACHE_VALUES: u64 = 1 << 29;

/// Successor slices of more values than this (32 MiB of them) are read a block at a time, not
/// whole: see [`Successor`]. This crate's tests make it small, so that their tables go that way.
const WHOLE_VALUES: u64 = if cfg!(test) { 1 << 12 } else { 1 << 24 };

/// Blocks of large successor slices a worker (a thread) keeps: 32 MiB at the default 65,536
/// values a block. This crate's tests make it small, so that blocks are evicted.
const WORKER_BLOCKS: usize = if cfg!(test) { 4 } else { 256 };

/// How much a verification holds beyond the half slice in hand: values of whole successor
/// slices in the cache, successor slices small enough to be read whole, and blocks of the
/// others kept per thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Limits {
    cache_values: u64,
    whole_values: u64,
    worker_blocks: usize,
}

impl Limits {
    const DEFAULT: Limits = Limits {
        cache_values: CACHE_VALUES,
        whole_values: WHOLE_VALUES,
        worker_blocks: WORKER_BLOCKS,
    };

    /// The limits within `budget` bytes for `threads` threads, a half slice of `per_side`
    /// values and blocks of `block_values`: each thread keeps up to an eighth of the budget in
    /// blocks (at least 4, at most [`WORKER_BLOCKS`]) and reads its units a block at a time; the
    /// cache takes what is left (at most [`CACHE_VALUES`]), and a slice is read whole when it
    /// takes at most a quarter of the cache. `Err` with the least budget that would do when
    /// the half and four blocks a thread (and the one of the unit in hand) do not fit.
    fn within(budget: u64, threads: usize, per_side: u64, block_values: u64) -> Result<Limits, u64> {
        let block = 2 * block_values;
        let threads = threads.max(1) as u64;
        let half = 2 * per_side;
        let least = half + threads * (4 + 1) * block;
        if budget < least {
            return Err(least);
        }
        let worker_blocks = (budget / 8 / threads / block).clamp(4, WORKER_BLOCKS as u64);
        let rest = budget - half - threads * (worker_blocks + 1) * block;
        let cache_values = (rest / 2).min(CACHE_VALUES);
        Ok(Limits {
            cache_values,
            whole_values: (cache_values / 4).min(WHOLE_VALUES),
            worker_blocks: worker_blocks as usize,
        })
    }

    /// The limits within `budget` for a half slice paged through a file (`paged.rs`), and the
    /// bytes of it to keep mapped at most: each thread keeps up to a sixteenth of the budget in
    /// blocks (at least 4, at most [`WORKER_BLOCKS`]), the file is filled [`paged::FILL_VALUES`]
    /// at a time, the cache takes an eighth of the budget (at most [`CACHE_VALUES`]), and the
    /// rest holds the half's pages: at least [`PAGED_KING_PAIRS`] king pairs' worth a thread (a
    /// unit's children in the half lie in the values of its own king pair and, for king moves,
    /// small parts of its neighbours'). `Err` with the least budget that would do.
    fn paged(
        budget: u64,
        threads: usize,
        per_side: u64,
        block_values: u64,
        king_pairs: u64,
    ) -> Result<(Limits, u64), u64> {
        let block = 2 * block_values;
        let threads = threads.max(1) as u64;
        let stamps = 8 * per_side.div_ceil(paged::GROUP_VALUES);
        let least_resident = threads * PAGED_KING_PAIRS * 2 * per_side.div_ceil(king_pairs);
        let fixed = |blocks: u64| threads * (blocks + 1) * block + 2 * paged::FILL_VALUES + stamps;
        let least = fixed(4) + least_resident;
        if budget < least {
            return Err(least);
        }
        let worker_blocks = (budget / 16 / threads / block).clamp(4, WORKER_BLOCKS as u64);
        let rest = budget - fixed(worker_blocks);
        let cache_values = (budget / 8 / 2)
            .min(CACHE_VALUES)
            .min(rest.saturating_sub(least_resident) / 2);
        let limits = Limits {
            cache_values,
            whole_values: (cache_values / 4).min(WHOLE_VALUES),
            worker_blocks: worker_blocks as usize,
        };
        Ok((limits, rest - 2 * cache_values))
    }
}

/// King pairs' worth of a paged half slice a thread needs mapped at least (see
/// [`Limits::paged`]).
const PAGED_KING_PAIRS: u64 = 3;

/// Verifies the table of `material` (any case, any order within a side) in `dir`, reading the
/// tables it leads into from the same folder. `progress(done, total)` is called, from any
/// thread, after each unit of work with the indices checked so far.
///
/// Returns the first wrong index in (slice, index) order, whatever the thread count.
pub fn verify_table(
    dir: &Path,
    material: &str,
    opts: &VerifyOptions,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<VerifyReport, VerifyError> {
    verify_table_in(&[dir], material, opts, progress)
}

/// Checks the WDL50 table of `material` (`KRPvKR.zwl`, built by `zermelo dtz` from the DTZ50
/// table) against its DTZ50 table (`KRPvKR.zdz`), each read from the first of `dirs` that has
/// it: the same material, index layout and slices, and at every index the class of the DTZ50
/// value, decoded here (1 loss, checkmated now or a zeroing move within 100 plies; 2 blessed
/// loss, over 100; 3 draw; 4 cursed win, over 100; 5 win), where the index is not a legal
/// position (0 in the DTZ50 table) the class of the index before it (3 at a slice's start). Verify the DTZ50 table
/// itself first ([`VerifyOptions::dtz50`]): this check trusts it. Returns the indices checked;
/// the first index that differs, in (slice, index) order, is a [`VerifyError::Mismatch`].
pub fn verify_wdl50_in(dirs: &[&Path], material: &str) -> Result<u64, VerifyError> {
    let material = parse_material(material)?;
    let name = material.to_string();
    let open = |file_name: String, metric: Metric| -> Result<Table, VerifyError> {
        let (table, file) = open_in(dirs, &file_name)?;
        if table.meta().metric != metric {
            return Err(match metric {
                Metric::Dtz50 => VerifyError::NotDtz { file },
                _ => VerifyError::NotWdl { file },
            });
        }
        check_layout_and_material(&table, file, &name)?;
        Ok(table)
    };
    let wdl = open(zermelo_storage::wdl_file_name(&name), Metric::Wdl50)?;
    let dtz = open(zermelo_storage::dtz_file_name(&name), Metric::Dtz50)?;
    let pawns = Pawns;
    for (w, d) in wdl.slices().iter().zip(dtz.slices()) {
        if w.key != d.key {
            return Err(VerifyError::UnexpectedSlice {
                material: name.clone(),
                key: pawns(w.key),
            });
        }
        if w.count != d.count {
            return Err(VerifyError::WrongSliceSize {
                material: name.clone(),
                key: pawns(w.key),
                count: w.count,
                expected: d.count,
            });
        }
    }
    if let Some(extra) =
        (wdl.slices().get(dtz.slices().len())).or_else(|| dtz.slices().get(wdl.slices().len()))
    {
        return Err(VerifyError::MissingSlice {
            material: name,
            key: pawns(extra.key),
        });
    }
    const CHUNK: u64 = 1 << 20;
    let mut checked = 0;
    for (s, entry) in dtz.slices().iter().enumerate() {
        let mut start = 0;
        let mut before = 3;
        while start < entry.count {
            let n = CHUNK.min(entry.count - start);
            let (classes, values) = (wdl.read_range(s, start, n)?, dtz.read_range(s, start, n)?);
            for (i, (&c, &v)) in classes.iter().zip(&values).enumerate() {
                let expected = if v == 0 {
                    before
                } else {
                    dtz::wdl50_code(u32::from(v))
                };
                before = expected;
                if u32::from(c) != expected {
                    return Err(VerifyError::Mismatch {
                        material: name,
                        fen: format!("slice ({}), index {}", pawns(entry.key), start + i as u64),
                        stored: format!("WDL50 value {c}"),
                        derived: format!(
                            "{expected}, from the DTZ50 table's {}",
                            dtz::describe(u32::from(v))
                        ),
                    });
                }
            }
            start += n;
        }
        checked += entry.count;
    }
    Ok(checked)
}

/// Table file `file_name` from the first of `dirs` that has it, and its path. Positioned reads,
/// no memory map: the pages of a large table do not count as this process's memory, and every
/// value is read once or a few times.
fn open_in(dirs: &[&Path], file_name: &str) -> Result<(Table, PathBuf), VerifyError> {
    let file = (dirs.iter())
        .map(|d| d.join(file_name))
        .find(|f| f.exists())
        .ok_or_else(|| VerifyError::MissingTable {
            file: dirs[0].join(file_name),
        })?;
    Ok((Table::open_pread(&file)?, file))
}

/// Refuses a table (at `file`) of another index layout than this verifier's, or of another
/// material than `name`.
fn check_layout_and_material(table: &Table, file: PathBuf, name: &str) -> Result<(), VerifyError> {
    let meta = table.meta();
    if meta.index_layout == LAYOUT | 1 << 8 || meta.index_layout == LAYOUT | 2 << 8 {
        return Err(VerifyError::Packed {
            file,
            found: meta.index_layout,
        });
    }
    if meta.index_layout != LAYOUT {
        return Err(VerifyError::WrongLayout {
            file,
            found: meta.index_layout,
        });
    }
    if meta.material != name {
        return Err(VerifyError::WrongMaterial {
            file,
            found: meta.material.clone(),
            expected: name.to_owned(),
        });
    }
    Ok(())
}

/// [`verify_table`] with the tables searched in several directories, in order: the table of
/// `material` and those of its successors are each read from the first directory that has it.
pub fn verify_table_in(
    dirs: &[&Path],
    material: &str,
    opts: &VerifyOptions,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<VerifyReport, VerifyError> {
    let material = parse_material(material)?;
    let name = material.to_string();
    let mut library = Library::in_dirs(dirs);
    library.dtz50 = opts.dtz50;
    let table = library.table(material)?;
    let threads = match opts.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let per_side = material.per_side();
    // With a budget that cannot hold the half slice, its values are paged through a file of
    // the folder that holds the table: at most `paged` bytes of them mapped.
    let mut paged = None;
    if let Some(budget) = opts.memory {
        let block = u64::from(table.block_values());
        library.limits = match Limits::within(budget, threads, per_side, block) {
            Ok(limits) => limits,
            Err(held) => {
                let (limits, resident) =
                    Limits::paged(budget, threads, per_side, block, material.king_pairs()).map_err(
                        |paged| VerifyError::OverBudget {
                            material: name.clone(),
                            needed: held.min(paged),
                            half: 2 * per_side,
                            budget,
                        },
                    )?;
                paged = Some(resident);
                limits
            }
        };
        tracing::debug!(limits = ?library.limits, paged, "memory limits");
    }
    let scratch = (dirs.iter())
        .find(|d| d.join(library.file_name(material)).exists())
        .unwrap_or(&dirs[0]);
    if let Some(resident) = paged {
        tracing::info!(
            dir = %scratch.display(),
            resident,
            disk = 2 * per_side,
            "the half slice in hand is paged through the table's folder"
        );
    }
    let mut unmapped = 0;
    tracing::info!(material = %name, slices = table.slices().len(), "verifying table");
    table.verify_checksum()?;
    check_slice_set(&table, material)?;

    let keys: Vec<[u64; 2]> = table.slices().iter().map(|e| e.key).collect();
    // Units never straddle the two halves of a slice (White to move, then Black): the units of
    // one half form a phase.
    let mut units = Vec::new();
    let mut phases = Vec::new();
    let mut seen = 0u64;
    for slice in 0..keys.len() {
        for side in 0..2 {
            let first = units.len();
            let (mut start, half_end) = (side * per_side, (side + 1) * per_side);
            while start < half_end {
                let end = (start + UNIT_INDICES).min(half_end);
                // A sample of p percent keeps unit u when p * (u + 1) / 100, rounded up, passes
                // a whole number: the first unit, then one in every 100 / p.
                let keep = match opts.sample_percent {
                    None => true,
                    Some(p) => {
                        ((seen + 1) * u64::from(p)).div_ceil(100) > (seen * u64::from(p)).div_ceil(100)
                    }
                };
                if keep {
                    units.push(Unit { slice, start, end });
                }
                seen += 1;
                start = end;
            }
            if units.len() > first {
                phases.push(Phase {
                    slice,
                    side,
                    units: first..units.len(),
                });
            }
        }
    }
    let total = units.iter().map(|u| u.end - u.start).sum();
    let library = &library;

    let shared = Shared {
        library,
        table: &table,
        material,
        keys: &keys,
        units: &units,
        next: AtomicUsize::new(0),
        stop_after: AtomicUsize::new(usize::MAX),
        failure: Mutex::new(None),
        done: AtomicU64::new(0),
        positions: AtomicU64::new(0),
        progress,
        total,
        // Lines derive mates (line.rs): a DTZ50 table is checked position by position.
        lines: opts.sample_percent.is_none() && !opts.dtz50,
        dtz50: opts.dtz50,
        lines_checked: AtomicU64::new(0),
        lines_disagreed: AtomicU64::new(0),
    };
    progress(0, total);
    for phase in &phases {
        if shared.stop_after.load(Ordering::Relaxed) < phase.units.start {
            break;
        }
        // The children that stay in the slice have the other side to move: that half of the
        // slice is held while this one is checked, a unit at a time.
        let other = 1 - phase.side;
        let loading = std::time::Instant::now();
        let values = match paged {
            None => HalfValues::Held(Cow::Owned(table.read_range(
                phase.slice,
                other * per_side,
                per_side,
            )?)),
            Some(resident) => {
                let mut read = |at, count| table.read_range(phase.slice, other * per_side + at, count);
                let made = PagedHalf::create(scratch, &name, per_side, resident, &mut read);
                HalfValues::Paged(made.map_err(|e| match e {
                    PagedError::Read(e) => VerifyError::Storage(e),
                    PagedError::Io(source) => VerifyError::Scratch {
                        dir: scratch.to_path_buf(),
                        source,
                    },
                })?)
            }
        };
        let half = Half {
            values,
            start: other * per_side,
        };
        tracing::debug!(
            slice = phase.slice,
            side = phase.side,
            units = phase.units.len(),
            load_seconds = loading.elapsed().as_secs_f64(),
            "checking half a slice"
        );
        shared.next.store(phase.units.start, Ordering::Relaxed);
        std::thread::scope(|s| {
            for _ in 0..threads.min(phase.units.len()).max(1) {
                s.spawn(|| shared.work(phase, &half));
            }
        });
        if let HalfValues::Paged(p) = &half.values {
            unmapped += p.unmapped();
        }
    }
    if paged.is_some() {
        tracing::info!(
            groups = unmapped,
            "groups of the half slices unmapped to stay within the budget"
        );
    }
    if let Some((_, error)) = lock(&shared.failure).take() {
        return Err(error);
    }
    let report = VerifyReport {
        material: name,
        slices: keys.len(),
        positions: shared.positions.load(Ordering::Relaxed),
        indices: total,
        lines: shared.lines_checked.load(Ordering::Relaxed),
        disagreed: shared.lines_disagreed.load(Ordering::Relaxed),
    };
    if report.disagreed > 0 {
        tracing::warn!(
            material = %report.material,
            lines = report.disagreed,
            "lines checked together disagreed with the check position by position, which passed"
        );
    }
    tracing::info!(
        material = %report.material,
        positions = report.positions,
        lines = report.lines,
        disagreed = report.disagreed,
        "table verified"
    );
    Ok(report)
}

/// What [`check_slice`] covered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SliceCheck {
    /// Indices checked for range and legality: every index of the slice.
    pub indices: u64,
    /// Sampled legal positions whose value was derived from their children, and agreed.
    pub derived: u64,
    /// Sampled indices that were not derived: a child lies in a slice not at hand.
    pub skipped: u64,
}

/// The values of a successor slice, by normalized material name and raw key, whole; `None` when
/// it is not at hand (see [`check_slice`]).
pub type SuccessorValues<'a> = dyn Fn(&str, [u64; 2]) -> Option<Arc<Vec<u16>>> + Sync + 'a;

/// The largest value a table holds (`FORMAT.md`: mate in at most 32,765 plies).
const MAX_VALUE: u16 = 0x7fff;

/// Checks the values of one slice, given whole (both sides to move), before they are trusted:
/// what the coordinator of a cluster does to a slice a worker uploads.
///
/// * `material` (normalized) and `key` name a canonical slice, and `values` has its length;
/// * every value is at most `0x7fff`; every index that is not a legal position holds 0 and every
///   legal position holds a value (not 0): all indices;
/// * at each index of `sample` (below the slice's length), the stored value is the one derived
///   from the position's children, read from `values` itself and from `successor(material,
///   key)` (normalized name, raw key; whole slices). `None` means the slice is not at hand: the
///   index is skipped, and counted.
///
/// Like [`verify_table`] it shares no chess code with the solver.
pub fn check_slice(
    material: &str,
    key: [u64; 2],
    values: &[u16],
    sample: &[u64],
    successor: &SuccessorValues<'_>,
) -> Result<SliceCheck, VerifyError> {
    let normal = canonical_slice(material, key)?;
    let name = normal.to_string();
    check_length(normal, key, values)?;
    let expected = values.len() as u64;
    let given = Given { successor };
    let half = Half::held(Cow::Borrowed(values), 0);
    let mut worker = Worker::new(&given, normal, key, &half);
    let mut report = SliceCheck {
        indices: expected,
        ..SliceCheck::default()
    };
    check_runs(&worker.decoder, &name, key, values)?;
    let mut sample: Vec<u64> = sample.iter().copied().filter(|&i| i < expected).collect();
    sample.sort_unstable();
    sample.dedup();
    for index in sample {
        let at = index as usize;
        match worker.check_range(index, &values[at..at + 1], || false) {
            Ok(positions) => report.derived += positions,
            Err(VerifyError::Unavailable { .. }) => report.skipped += 1,
            Err(e) => return Err(e),
        }
    }
    Ok(report)
}

/// Why [`verify_slice`] refused a slice: the error, and the index of the first wrong value when
/// the fault is at an index (not, say, a wrong length or a successor that cannot be read).
#[derive(Debug)]
pub struct SliceFailure {
    pub index: Option<u64>,
    pub error: VerifyError,
}

/// Indices [`verify_slice`] checks at a time; a run that fails is checked again index by index
/// for its first wrong one.
const VERIFY_RUN: usize = 4096;

/// Re-derives every index of slice `key` of `material` (a normalized name) from its children,
/// as [`verify_table`] does for a table: in the slice itself (`values`, both sides to move) and
/// in its successors (`successor`). What a worker runs on a slice another worker solved
/// (`zermelo coordinator --verify all`). Returns what was covered, or the first wrong index.
pub fn verify_slice(
    material: &str,
    key: [u64; 2],
    values: &[u16],
    successor: &SuccessorValues<'_>,
) -> Result<SliceCheck, SliceFailure> {
    let whole = |error| SliceFailure { index: None, error };
    let normal = canonical_slice(material, key).map_err(whole)?;
    check_length(normal, key, values).map_err(whole)?;
    let given = Given { successor };
    let half = Half::held(Cow::Borrowed(values), 0);
    let mut worker = Worker::new(&given, normal, key, &half);
    worker.lines = true;
    let mut report = SliceCheck {
        indices: values.len() as u64,
        ..SliceCheck::default()
    };
    for (run, own) in values.chunks(VERIFY_RUN).enumerate() {
        let start = (run * VERIFY_RUN) as u64;
        match worker.check_range(start, own, || false) {
            Ok(positions) => report.derived += positions,
            Err(run_error) => {
                for (i, value) in (start..).zip(own.chunks(1)) {
                    if let Err(error) = worker.check_range(i, value, || false) {
                        let index = match error {
                            VerifyError::Unavailable { .. } => None,
                            _ => Some(i),
                        };
                        return Err(SliceFailure { index, error });
                    }
                }
                // Index by index found nothing the run did: the run's fault stands.
                return Err(whole(run_error));
            }
        }
    }
    Ok(report)
}

/// The material of slice `key` of `material`, when the name is normalized and the key one of
/// its canonical slices.
fn canonical_slice(material: &str, key: [u64; 2]) -> Result<Material, VerifyError> {
    let normal = parse_material(material)?;
    let name = normal.to_string();
    if name != material {
        return Err(VerifyError::WrongMaterial {
            file: PathBuf::new(),
            found: material.to_owned(),
            expected: name,
        });
    }
    if !normal.is_canonical_key(key) {
        return Err(VerifyError::UnexpectedSlice {
            material: name,
            key: Pawns(key),
        });
    }
    Ok(normal)
}

/// The range and legality check of every index of a slice (see [`check_stored`]), a legality
/// run at a time: each side's values of the run are compared with the run without a branch,
/// and only a run that disagrees is gone through value by value for its first wrong one.
fn check_runs(decoder: &Decoder, name: &str, key: [u64; 2], values: &[u16]) -> Result<(), VerifyError> {
    let per_side = values.len() as u64 / 2; // checked by `check_length`
    let mut run = Vec::new();
    for start in (0..per_side).step_by(decoder.legality_run_len() as usize) {
        decoder.legality_run(start, &mut run);
        for side in 0..2 {
            let first = (side as u64 * per_side + start) as usize;
            let stored = &values[first..first + run.len()];
            let agree = run.iter().zip(stored).fold(true, |all, (legal, &v)| {
                all & (v <= MAX_VALUE) & (legal[side] == (u32::from(v) != value::ILLEGAL))
            });
            if !agree {
                for (i, (legal, &v)) in run.iter().zip(stored).enumerate() {
                    check_stored(decoder, name, key, (first + i) as u64, legal[side], v)?;
                }
            }
        }
    }
    Ok(())
}

/// The range and legality check of one index of a slice (see [`check_slice`]): `stored` is at
/// most `0x7fff`, 0 where the index is not a legal position (`legal`, from the decoder's
/// legality runs) and not 0 where it is. Run on every index: a value that agrees returns at
/// once, the error is built out of line.
#[inline]
fn check_stored(
    decoder: &Decoder,
    name: &str,
    key: [u64; 2],
    index: u64,
    legal: bool,
    stored: u16,
) -> Result<(), VerifyError> {
    if stored <= MAX_VALUE && legal == (u32::from(stored) != value::ILLEGAL) {
        return Ok(());
    }
    stored_error(decoder, name, key, index, legal, stored)
}

/// What is wrong with a value [`check_stored`] refused.
#[cold]
fn stored_error(
    decoder: &Decoder,
    name: &str,
    key: [u64; 2],
    index: u64,
    legal: bool,
    stored: u16,
) -> Result<(), VerifyError> {
    if stored > MAX_VALUE {
        return Err(VerifyError::OutOfRange {
            material: name.to_owned(),
            key: Pawns(key),
            index,
            value: stored,
        });
    }
    match (legal, u32::from(stored)) {
        (true, value::ILLEGAL) => {
            let Decoded::Position(pos) = decoder.decode(index) else {
                unreachable!("a legal index is a position")
            };
            Err(VerifyError::Mismatch {
                material: name.to_owned(),
                fen: pos.fen(),
                stored: value::describe(value::ILLEGAL),
                derived: "a value (a legal position)".to_owned(),
            })
        }
        (false, v) if v != value::ILLEGAL => Err(VerifyError::Mismatch {
            material: name.to_owned(),
            fen: format!("index {index} of slice ({}), not a legal position", Pawns(key)),
            stored: value::describe(v),
            derived: value::describe(value::ILLEGAL),
        }),
        _ => Ok(()),
    }
}

/// The slices [`check_slice`] reads: the one being checked is held whole (never asked for), its
/// successors come from the caller.
struct Given<'a> {
    successor: &'a SuccessorValues<'a>,
}

impl Slices for Given<'_> {
    fn successor(&self, material: Material, key: [u64; 2]) -> Result<Successor, VerifyError> {
        given_successor(self.successor, material, key)
    }

    fn own(&self, material: Material, key: [u64; 2], _index: u64) -> Result<u16, VerifyError> {
        Err(VerifyError::Unavailable {
            material: material.to_string(),
            key: Pawns(key),
        })
    }
}

/// Successor slice `key` of `material` from the caller's `successor` (whole, of the right
/// length), or [`VerifyError::Unavailable`].
fn given_successor(
    successor: &SuccessorValues<'_>,
    material: Material,
    key: [u64; 2],
) -> Result<Successor, VerifyError> {
    let name = material.to_string();
    let values = successor(&name, key).ok_or_else(|| VerifyError::Unavailable {
        material: name.clone(),
        key: Pawns(key),
    })?;
    check_length(material, key, &values)?;
    Ok(Successor::Whole(values))
}

/// Checks that `values` are as many as a slice of `material` has.
fn check_length(material: Material, key: [u64; 2], values: &[u16]) -> Result<(), VerifyError> {
    let expected = 2 * material.per_side();
    if values.len() as u64 != expected {
        return Err(VerifyError::WrongSliceSize {
            material: material.to_string(),
            key: Pawns(key),
            count: values.len() as u64,
            expected,
        });
    }
    Ok(())
}

/// A material name (any case, any order within a side), normalized.
fn parse_material(name: &str) -> Result<Material, VerifyError> {
    Material::parse(name)
        .map(|m| m.normalized())
        .map_err(|reason| VerifyError::BadMaterial {
            name: name.to_owned(),
            reason,
        })
}

/// Checks that `table` holds exactly the canonical slices of `material`, in order, each of the
/// right size.
fn check_slice_set(table: &Table, material: Material) -> Result<(), VerifyError> {
    let name = material.to_string();
    let entries = table.slices();
    for pair in entries.windows(2) {
        if pair[0].key >= pair[1].key {
            return Err(VerifyError::UnsortedSlices {
                material: name,
                key: Pawns(pair[1].key),
            });
        }
    }
    let expected = material.canonical_keys();
    let (mut i, mut j) = (0, 0);
    while i < entries.len() || j < expected.len() {
        match (entries.get(i), expected.get(j)) {
            (Some(e), Some(&k)) if e.key == k => {
                i += 1;
                j += 1;
            }
            (Some(e), Some(&k)) if e.key > k => {
                return Err(VerifyError::MissingSlice {
                    material: name,
                    key: Pawns(k),
                })
            }
            (None, Some(&k)) => {
                return Err(VerifyError::MissingSlice {
                    material: name,
                    key: Pawns(k),
                })
            }
            (Some(e), _) => {
                return Err(VerifyError::UnexpectedSlice {
                    material: name,
                    key: Pawns(e.key),
                })
            }
            (None, None) => unreachable!("the loop runs while one side has keys left"),
        }
    }
    let per_slice = 2 * material.per_side();
    if let Some(e) = entries.iter().find(|e| e.count != per_slice) {
        return Err(VerifyError::WrongSliceSize {
            material: name,
            key: Pawns(e.key),
            count: e.count,
            expected: per_slice,
        });
    }
    Ok(())
}

/// Locks a mutex whose data stays consistent even if a holder panicked (a cache, a slot).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A range of indices of one slice of the table being verified, within one half.
#[derive(Clone, Copy, Debug)]
struct Unit {
    slice: usize,
    start: u64,
    end: u64,
}

/// The units of one half of one slice (`side` 0: White to move, 1: Black), in order.
struct Phase {
    slice: usize,
    side: u64,
    units: std::ops::Range<usize>,
}

/// The values of one half of the slice being checked: indices `start..start + values.len()`.
struct Half<'v> {
    values: HalfValues<'v>,
    start: u64,
}

/// A half's values: in memory, or paged through a file for a budget that cannot hold them
/// (`paged.rs`).
enum HalfValues<'v> {
    Held(Cow<'v, [u16]>),
    Paged(PagedHalf),
}

impl<'v> Half<'v> {
    /// The half of `values` in memory, from index `start` of the slice.
    fn held(values: Cow<'v, [u16]>, start: u64) -> Half<'v> {
        Half {
            values: HalfValues::Held(values),
            start,
        }
    }

    #[inline]
    fn values(&self) -> &[u16] {
        match &self.values {
            HalfValues::Held(v) => v,
            HalfValues::Paged(p) => p.values(),
        }
    }

    /// Where index `index` of the slice is in `values`, if this half holds it.
    fn place(&self, index: u64) -> Option<usize> {
        let at = index.checked_sub(self.start)?;
        (at < self.values().len() as u64).then_some(at as usize)
    }

    /// A bitmap for a worker to note the groups it reads, if the half is paged.
    fn touched(&self) -> Option<Touched> {
        match &self.values {
            HalfValues::Held(_) => None,
            HalfValues::Paged(p) => Some(p.touched()),
        }
    }
}

/// What the threads share.
struct Shared<'a> {
    library: &'a Library<'a>,
    /// The table being verified.
    table: &'a Table,
    material: Material,
    keys: &'a [[u64; 2]],
    units: &'a [Unit],
    /// The next unit to take.
    next: AtomicUsize,
    /// Units after this one are skipped: an earlier one has failed.
    stop_after: AtomicUsize,
    /// The failure of the lowest failed unit so far.
    failure: Mutex<Option<(usize, VerifyError)>>,
    done: AtomicU64,
    positions: AtomicU64,
    progress: &'a (dyn Fn(u64, u64) + Sync),
    total: u64,
    /// Whether lines are checked together (every index is checked: no sample).
    lines: bool,
    /// Whether the values are DTZ50 (see [`dtz`]).
    dtz50: bool,
    lines_checked: AtomicU64,
    lines_disagreed: AtomicU64,
}

impl Shared<'_> {
    /// One thread's loop over a phase: take its units in order until none is left or one
    /// before has failed.
    fn work(&self, phase: &Phase, half: &Half) {
        let key = self.keys[phase.slice];
        let mut worker = Worker::new(self.library, self.material, key, half);
        worker.lines = self.lines;
        worker.dtz50 = self.dtz50;
        worker.worker_blocks = self.library.limits.worker_blocks;
        loop {
            let u = self.next.fetch_add(1, Ordering::Relaxed);
            if u >= phase.units.end || u > self.stop_after.load(Ordering::Relaxed) {
                return;
            }
            let unit = self.units[u];
            let result = self
                .table
                .read_range(unit.slice, unit.start, unit.end - unit.start)
                .map_err(VerifyError::from)
                .and_then(|own| {
                    worker.check_range(unit.start, &own, || self.stop_after.load(Ordering::Relaxed) < u)
                });
            if let (HalfValues::Paged(p), Some(t)) = (&half.values, &worker.touched) {
                p.publish(t, u as u64 + 1);
            }
            match result {
                Ok(positions) => {
                    self.positions.fetch_add(positions, Ordering::Relaxed);
                    self.lines_checked
                        .fetch_add(std::mem::take(&mut worker.lines_checked), Ordering::Relaxed);
                    self.lines_disagreed
                        .fetch_add(std::mem::take(&mut worker.lines_disagreed), Ordering::Relaxed);
                    let done = self.done.fetch_add(unit.end - unit.start, Ordering::Relaxed);
                    (self.progress)(done + unit.end - unit.start, self.total);
                }
                Err(error) => {
                    let mut failure = lock(&self.failure);
                    if !matches!(&*failure, Some((f, _)) if *f < u) {
                        *failure = Some((u, error));
                    }
                    self.stop_after.fetch_min(u, Ordering::Relaxed);
                    return;
                }
            }
        }
    }
}

/// Verifies indices of one half of a slice: holds the other half's values and the successor
/// slices it read.
struct Worker<'a> {
    library: &'a dyn Slices,
    material: Material,
    key: [u64; 2],
    decoder: Decoder,
    half: &'a Half<'a>,
    /// The groups of a paged half read since the last unit (see `paged.rs`).
    touched: Option<Touched>,
    /// Successor slices met so far for this slice.
    successors: FxHashMap<(Material, [u64; 2]), Successor>,
    /// Blocks read of the large ones: by slice and block of its table, with their last use.
    blocks: FxHashMap<BlockKey, (Vec<u16>, u64)>,
    /// Use counter of `blocks`, for evicting the least recently used.
    tick: u64,
    /// Whether lines of 64 indices are checked together where the slice has a line man (see
    /// `line.rs`): when every index of the tables read is checked.
    lines: bool,
    /// Blocks of large successors kept at most.
    worker_blocks: usize,
    /// The moves of a line's other men, kept to save allocations.
    line_moves: Vec<Pseudo>,
    /// Lines checked together, and of them those that disagreed (see [`VerifyReport`]), since
    /// the counts were last taken.
    lines_checked: u64,
    lines_disagreed: u64,
    /// The values are DTZ50 ([`dtz`]), not mates ([`value`]).
    dtz50: bool,
}

/// A block of a successor slice's table: the slice's material and pawns, the block's number.
type BlockKey = (Material, [u64; 2], u64);

/// A successor slice as a worker reads it: whole (shared through the library's cache), or, when
/// larger than [`WHOLE_VALUES`], a block at a time into the worker's own few blocks. A pawnful
/// table's promotions lead into whole pawnless tables (four 484 MB KxxvKR tables for KRPvKR;
/// tens of GB for a 6-man one), of which the values near the king pairs in hand are needed.
/// A block read this way has its checksum checked; the slice's content hash, which needs the
/// whole slice, is checked when that table is verified itself.
enum Successor {
    Whole(Arc<Vec<u16>>),
    Blocks {
        table: Arc<Table>,
        slice: usize,
        /// The slice's first value in the table's value stream, and its number of values.
        first: u64,
        count: u64,
    },
}

/// Why a child's value could not be read.
enum Fault {
    Error(VerifyError),
    /// A successor (this FEN, in this table) is stored as illegal.
    IllegalSuccessor {
        successor: String,
        table: String,
    },
    /// The quiet child moving a man from `from` to `to` (squares 0..64) is stored as illegal
    /// in this table (`derive` turns it into `IllegalSuccessor` once the parent is whole again).
    IllegalQuiet {
        from: u8,
        to: u8,
        table: String,
    },
}

impl From<VerifyError> for Fault {
    fn from(e: VerifyError) -> Fault {
        Fault::Error(e)
    }
}

impl<'a> Worker<'a> {
    fn new(library: &'a dyn Slices, material: Material, key: [u64; 2], half: &'a Half<'a>) -> Worker<'a> {
        Worker {
            library,
            material,
            key,
            decoder: Decoder::new(&material, key),
            half,
            touched: half.touched(),
            successors: FxHashMap::default(),
            blocks: FxHashMap::default(),
            tick: 0,
            lines: false,
            worker_blocks: WORKER_BLOCKS,
            line_moves: Vec::new(),
            lines_checked: 0,
            lines_disagreed: 0,
            dtz50: false,
        }
    }

    /// The value of a position for its mover from a child's (for the child's mover), reached
    /// by a zeroing move (a capture or a pawn move) or not.
    #[inline]
    fn child_value(&self, child: u32, zeroing: bool) -> u32 {
        if self.dtz50 {
            dtz::from_child(child, zeroing)
        } else {
            value::from_child(child)
        }
    }

    /// `best` becomes the better of itself and `v`.
    #[inline]
    fn keep_better(&self, best: &mut Option<u32>, v: u32) {
        if self.dtz50 {
            *best = Some(best.map_or(v, |b| dtz::better(b, v)));
        } else {
            value::keep_better(best, v);
        }
    }

    /// Checks indices `start..start + own.len()` of the slice, whose stored values are `own`;
    /// returns how many were legal positions. `abandon()` is polled now and then: the result no
    /// longer matters when it says so.
    fn check_range(
        &mut self,
        start: u64,
        own: &[u16],
        abandon: impl Fn() -> bool,
    ) -> Result<u64, VerifyError> {
        if !self.lines || !start.is_multiple_of(line::LINE) || !(own.len() as u64).is_multiple_of(line::LINE)
        {
            return self.check_each(start, own, abandon);
        }
        let mut positions = 0;
        for (k, own) in own.chunks_exact(line::LINE as usize).enumerate() {
            let base = start + k as u64 * line::LINE;
            if base.is_multiple_of(4096) && abandon() {
                return Ok(positions);
            }
            let agreed = match self.derive_line(base) {
                Ok(Some(derived)) => {
                    self.lines_checked += 1;
                    Some(derived.iter().zip(own).all(|(&d, &s)| d == u32::from(s)))
                }
                Ok(None) | Err(_) => None,
            };
            positions += if agreed == Some(true) {
                own.iter().filter(|&&v| u32::from(v) != value::ILLEGAL).count() as u64
            } else {
                // Position by position: the first wrong index, or a fault, named as before.
                let positions = self.check_each(base, own, || false)?;
                if agreed == Some(false) {
                    self.lines_disagreed += 1;
                }
                positions
            };
        }
        Ok(positions)
    }

    /// [`check_range`](Worker::check_range) one index at a time.
    fn check_each(
        &mut self,
        start: u64,
        own: &[u16],
        abandon: impl Fn() -> bool,
    ) -> Result<u64, VerifyError> {
        let mut positions = 0;
        for (index, &stored) in (start..).zip(own) {
            if index % 4096 == 0 && abandon() {
                return Ok(positions);
            }
            let stored = u32::from(stored);
            let mut pos = match self.decoder.decode(index) {
                Decoded::Position(pos) if pos.is_legal() => pos,
                Decoded::Position(pos) => {
                    if stored != value::ILLEGAL {
                        return Err(self.mismatch(pos.fen(), stored, value::ILLEGAL));
                    }
                    continue;
                }
                Decoded::Collision { square } => {
                    if stored != value::ILLEGAL {
                        let what = format!(
                            "no position: index {index} of slice ({}) puts two men on {}",
                            Pawns(self.key),
                            board::square_name(board::sq88(square))
                        );
                        return Err(self.mismatch(what, stored, value::ILLEGAL));
                    }
                    continue;
                }
            };
            positions += 1;
            let derived = match self.derive(&mut pos) {
                Ok(v) => v,
                Err(Fault::Error(e)) => return Err(e),
                Err(Fault::IllegalSuccessor { successor, table }) => {
                    return Err(VerifyError::IllegalSuccessor {
                        material: self.material.to_string(),
                        fen: pos.fen(),
                        successor,
                        successor_material: table,
                    })
                }
                Err(Fault::IllegalQuiet { .. }) => unreachable!("derive names its quiet children"),
            };
            if derived != stored {
                return Err(self.mismatch(pos.fen(), stored, derived));
            }
        }
        Ok(positions)
    }

    fn mismatch(&self, fen: String, stored: u32, derived: u32) -> VerifyError {
        VerifyError::Mismatch {
            material: self.material.to_string(),
            fen,
            stored: if self.dtz50 {
                dtz::describe(stored)
            } else {
                value::describe(stored)
            },
            derived: if self.dtz50 {
                dtz::describe(derived)
            } else {
                value::describe(derived)
            },
        }
    }

    /// The value of a legal position from its children. `pos` is changed while its children
    /// are visited and is whole again on return.
    fn derive(&mut self, pos: &mut Position) -> Result<u32, Fault> {
        // A quiet child has no position while the parent is changed: it is named once the
        // parent is whole again.
        self.derive_in_place(pos).map_err(|fault| match fault {
            Fault::IllegalQuiet { from, to, table } => Fault::IllegalSuccessor {
                successor: pos.after_quiet_move(from, to).fen(),
                table,
            },
            other => other,
        })
    }

    /// [`derive`](Worker::derive), a faulty quiet child reported as [`Fault::IllegalQuiet`].
    fn derive_in_place(&mut self, pos: &mut Position) -> Result<u32, Fault> {
        let frame = QuietFrame::new(pos);
        // Quiet children held in the half are read in batches, in order: their reads do not
        // wait on each other.
        let mut batch = Batch::default();
        let mut best: Option<u32> = None;
        let in_check = pos.for_each_child_quick(|child| {
            match child {
                Child::Quiet {
                    color,
                    kind,
                    from,
                    to,
                } => {
                    let frame = frame.as_ref().expect("a position with a quiet move has a frame");
                    let Location::Stored { material, key, index } = frame.quiet(color, kind, from, to) else {
                        unreachable!("a quiet child has a piece")
                    };
                    if material == self.material && key == self.key {
                        if let Some(at) = self.half.place(index) {
                            batch.push(at, from, to);
                            if batch.len == BATCH {
                                self.settle(&mut batch, &mut best)?;
                            }
                            return Ok(());
                        }
                    }
                    self.settle(&mut batch, &mut best)?;
                    let stored = self.stored(material, key, index)?;
                    if stored == value::ILLEGAL {
                        return Err(Fault::IllegalQuiet {
                            from,
                            to,
                            table: material.to_string(),
                        });
                    }
                    self.keep_better(&mut best, self.child_value(stored, false));
                }
                Child::Moved(child) => {
                    // A capture or a pawn move: zeroing.
                    self.settle(&mut batch, &mut best)?;
                    let stored = self.value(child)?;
                    self.keep_better(&mut best, self.child_value(stored, true));
                }
            }
            Ok::<(), Fault>(())
        })?;
        self.settle(&mut batch, &mut best)?;
        Ok(match best {
            Some(v) => v,
            None if in_check && self.dtz50 => dtz::CHECKMATED,
            None if in_check => value::CHECKMATED,
            None => value::DRAW,
        })
    }

    /// Reads the values of the quiet children in `batch` from the half, then takes them into
    /// `best` in order; empties the batch.
    fn settle(&self, batch: &mut Batch, best: &mut Option<u32>) -> Result<(), Fault> {
        let n = batch.len;
        batch.len = 0;
        let mut values = [0u16; BATCH];
        for (v, &at) in values.iter_mut().zip(&batch.at[..n]) {
            *v = self.half_value(at);
        }
        for (k, &stored) in values[..n].iter().enumerate() {
            if u32::from(stored) == value::ILLEGAL {
                let (from, to) = batch.moves[k];
                return Err(Fault::IllegalQuiet {
                    from,
                    to,
                    table: self.material.to_string(),
                });
            }
            self.keep_better(best, self.child_value(u32::from(stored), false));
        }
        Ok(())
    }

    /// The value at `at` of the half in hand.
    #[inline]
    fn half_value(&self, at: usize) -> u16 {
        if let Some(t) = &self.touched {
            t.note(at);
        }
        self.half.values()[at]
    }

    /// The value of a legal position: derived if it has an en-passant right (no table holds
    /// it), else read.
    fn value(&mut self, pos: &Position) -> Result<u32, Fault> {
        if pos.ep().is_some() {
            return self.derive(&mut pos.clone());
        }
        let (material, key, index) = match locate(pos) {
            Location::BareKings => return Ok(value::DRAW),
            Location::Stored { material, key, index } => (material, key, index),
        };
        let stored = self.stored(material, key, index)?;
        if stored == value::ILLEGAL {
            return Err(Fault::IllegalSuccessor {
                successor: pos.fen(),
                table: material.to_string(),
            });
        }
        Ok(stored)
    }

    /// The value stored at `index` of slice `key` of `material`.
    fn stored(&mut self, material: Material, key: [u64; 2], index: u64) -> Result<u32, Fault> {
        if material == self.material && key == self.key {
            if let Some(at) = self.half.place(index) {
                return Ok(u32::from(self.half_value(at)));
            }
            // The half being checked (no child lands there: a move keeping the slice changes
            // the side to move, one changing the pawns leaves it for good), read from the file.
            return Ok(u32::from(self.library.own(material, key, index)?));
        }
        let successor = match self.successors.get(&(material, key)) {
            Some(v) => v,
            None => {
                let v = self.library.successor(material, key)?;
                self.successors.entry((material, key)).or_insert(v)
            }
        };
        if let Successor::Whole(values) = successor {
            return Ok(u32::from(values[index as usize]));
        }
        let (values, start) = self.block(material, key, index)?;
        Ok(u32::from(values[(index - start) as usize]))
    }

    /// The block holding `index` of successor slice `key` of `material`, met before and read by
    /// blocks: its values (cut to the slice) and the index of the first.
    fn block(&mut self, material: Material, key: [u64; 2], index: u64) -> Result<(&[u16], u64), Fault> {
        let Some(Successor::Blocks {
            table, first, count, ..
        }) = self.successors.get(&(material, key))
        else {
            unreachable!("a successor read by blocks, met before")
        };
        let (first, count) = (*first, *count);
        debug_assert!(index < count);
        // The block of the table holding the value, cut to the slice.
        let bv = u64::from(table.block_values());
        let block = (first + index) / bv;
        let start = (block * bv).max(first) - first;
        self.tick += 1;
        let tick = self.tick;
        if !self.blocks.contains_key(&(material, key, block)) {
            let Some(Successor::Blocks { table, slice, .. }) = self.successors.get(&(material, key)) else {
                unreachable!("checked above")
            };
            let end = ((block + 1) * bv).min(first + count) - first;
            let values = table
                .read_range(*slice, start, end - start)
                .map_err(VerifyError::from)?;
            if self.blocks.len() >= self.worker_blocks {
                let oldest = self
                    .blocks
                    .iter()
                    .min_by_key(|(_, (_, used))| *used)
                    .map(|(k, _)| *k)
                    .expect("the blocks are full");
                self.blocks.remove(&oldest);
            }
            self.blocks.insert((material, key, block), (values, tick));
        }
        let (values, used) = self
            .blocks
            .get_mut(&(material, key, block))
            .expect("the block is held");
        *used = tick;
        Ok((values, start))
    }
}

/// Quiet children waiting to be read out of the half: at most this many at once.
const BATCH: usize = 32;

/// Quiet children waiting to be read: their places in the half and their moves.
struct Batch {
    at: [usize; BATCH],
    moves: [(u8, u8); BATCH],
    len: usize,
}

impl Default for Batch {
    fn default() -> Batch {
        Batch {
            at: [0; BATCH],
            moves: [(0, 0); BATCH],
            len: 0,
        }
    }
}

impl Batch {
    fn push(&mut self, at: usize, from: u8, to: u8) {
        self.at[self.len] = at;
        self.moves[self.len] = (from, to);
        self.len += 1;
    }
}

/// The tables of one folder, opened on first use, and a cache of their slices.
struct Library<'a> {
    /// Where tables are looked for, in order (at least one).
    dirs: Vec<&'a Path>,
    tables: Mutex<HashMap<Material, Arc<Table>>>,
    cache: Mutex<SliceCache>,
    limits: Limits,
    /// Reads DTZ50 tables (`.zdz`, metric 3) instead of tables of mates.
    dtz50: bool,
}

/// One cached slice: filled by the first thread that needs it while the others wait on it.
type CacheSlot = Arc<Mutex<Option<Arc<Vec<u16>>>>>;

#[derive(Default)]
struct SliceCache {
    slots: HashMap<(Material, [u64; 2]), (CacheSlot, u64)>,
    /// Values held by filled slots.
    values: u64,
    /// Use counter, for evicting the least recently used.
    tick: u64,
}

/// Where a verification reads values beyond the half slice in hand: the tables of a folder
/// ([`Library`]), or slices handed over by the caller ([`Given`]).
trait Slices: Sync {
    /// Successor slice `key` of `material` (normalized).
    fn successor(&self, material: Material, key: [u64; 2]) -> Result<Successor, VerifyError>;
    /// The value at `index` of the slice being checked, outside the half in hand.
    fn own(&self, material: Material, key: [u64; 2], index: u64) -> Result<u16, VerifyError>;
}

impl Slices for Library<'_> {
    fn successor(&self, material: Material, key: [u64; 2]) -> Result<Successor, VerifyError> {
        Library::successor(self, material, key)
    }

    fn own(&self, material: Material, key: [u64; 2], index: u64) -> Result<u16, VerifyError> {
        let table = self.table(material)?;
        let slice = table
            .find_slice(key)
            .expect("the slice being checked is in its table");
        Ok(table.value(slice, index)?)
    }
}

impl<'a> Library<'a> {
    #[cfg(test)]
    fn new(dir: &'a Path) -> Library<'a> {
        Library::in_dirs(&[dir])
    }

    fn in_dirs(dirs: &[&'a Path]) -> Library<'a> {
        assert!(!dirs.is_empty(), "a library has a directory");
        Library {
            dirs: dirs.to_vec(),
            tables: Mutex::new(HashMap::new()),
            cache: Mutex::new(SliceCache::default()),
            limits: Limits::DEFAULT,
            dtz50: false,
        }
    }

    /// The file name of the table of `material`: `.zdz` for DTZ50, else `.zmt`.
    fn file_name(&self, material: Material) -> String {
        let name = material.to_string();
        if self.dtz50 {
            zermelo_storage::dtz_file_name(&name)
        } else {
            table_file_name(&name)
        }
    }

    /// The table of `material` (normalized), opened and checked (layout, material) on first use.
    fn table(&self, material: Material) -> Result<Arc<Table>, VerifyError> {
        let mut tables = lock(&self.tables);
        if let Some(t) = tables.get(&material) {
            return Ok(Arc::clone(t));
        }
        let (table, file) = open_in(&self.dirs, &self.file_name(material))?;
        match (table.meta().metric, self.dtz50) {
            (Metric::Dtm, false) | (Metric::Dtz50, true) => {}
            (Metric::AdjudicatedDtm, _) => return Err(VerifyError::NotExact { file }),
            (Metric::Dtz50 | Metric::Wdl50, false) => return Err(VerifyError::NotDtm { file }),
            (Metric::Dtm | Metric::Wdl50, true) => return Err(VerifyError::NotDtz { file }),
        }
        check_layout_and_material(&table, file, &material.to_string())?;
        let table = Arc::new(table);
        tables.insert(material, Arc::clone(&table));
        Ok(table)
    }

    /// Successor slice `key` of `material` (normalized): whole if small, else its place in its
    /// table (see [`Successor`]), checked to have the right length.
    fn successor(&self, material: Material, key: [u64; 2]) -> Result<Successor, VerifyError> {
        let expected = 2 * material.per_side();
        if expected <= self.limits.whole_values {
            return Ok(Successor::Whole(self.slice(material, key)?));
        }
        let table = self.table(material)?;
        let slice = checked_slice(&table, material, key)?;
        let entry = &table.slices()[slice];
        let (first, count) = (entry.first_value(), entry.count);
        Ok(Successor::Blocks {
            table,
            slice,
            first,
            count,
        })
    }

    /// The values of slice `key` of `material` (normalized), checked to have the right length.
    fn slice(&self, material: Material, key: [u64; 2]) -> Result<Arc<Vec<u16>>, VerifyError> {
        let slot = {
            let mut cache = lock(&self.cache);
            cache.tick += 1;
            let tick = cache.tick;
            let entry = cache
                .slots
                .entry((material, key))
                .or_insert_with(|| (CacheSlot::default(), 0));
            entry.1 = tick;
            Arc::clone(&entry.0)
        };
        let mut filled = lock(&slot);
        if let Some(values) = &*filled {
            return Ok(Arc::clone(values));
        }
        let table = self.table(material)?;
        let values = Arc::new(table.read_slice(checked_slice(&table, material, key)?)?);
        *filled = Some(Arc::clone(&values));
        drop(filled);
        lock(&self.cache).added(values.len() as u64, (material, key), self.limits.cache_values);
        Ok(values)
    }
}

/// The place of slice `key` in the table of `material`, checked to hold as many values as the
/// material's slices have.
fn checked_slice(table: &Table, material: Material, key: [u64; 2]) -> Result<usize, VerifyError> {
    let name = material.to_string();
    let slice = table.find_slice(key).ok_or(VerifyError::MissingSlice {
        material: name.clone(),
        key: Pawns(key),
    })?;
    let (count, expected) = (table.slices()[slice].count, 2 * material.per_side());
    if count != expected {
        return Err(VerifyError::WrongSliceSize {
            material: name,
            key: Pawns(key),
            count,
            expected,
        });
    }
    Ok(slice)
}

impl SliceCache {
    /// Accounts for `count` new values in slot `keep`, evicting the least recently used slots
    /// (never `keep`) down to half the budget once over it. Evicted slices stay alive while a
    /// worker holds them.
    fn added(&mut self, count: u64, keep: (Material, [u64; 2]), budget: u64) {
        self.values += count;
        if self.values <= budget {
            return;
        }
        let mut by_age: Vec<((Material, [u64; 2]), u64)> = self
            .slots
            .iter()
            .filter(|(k, _)| **k != keep)
            .map(|(k, (_, tick))| (*k, *tick))
            .collect();
        by_age.sort_unstable_by_key(|&(_, tick)| tick);
        for (k, _) in by_age {
            if self.values <= budget / 2 {
                break;
            }
            if let Some((slot, _)) = self.slots.remove(&k) {
                if let Some(v) = &*lock(&slot) {
                    self.values -= v.len() as u64;
                }
            }
        }
    }
}

/// Stored values as numbers: 0 illegal, 1 draw, 2 + n mate in n plies (n even: the side to move
/// is mated; n odd: it mates). Derived values are `u32` so that a corrupt 65535 cannot overflow.
mod value {
    pub(super) const ILLEGAL: u32 = 0;
    pub(super) const DRAW: u32 = 1;
    /// Loss in 0 plies: checkmated now.
    pub(super) const CHECKMATED: u32 = 2;

    /// The value of a position for its mover, given the value of a child for the child's mover.
    pub(super) fn from_child(child: u32) -> u32 {
        if child == DRAW {
            DRAW
        } else {
            child + 1
        }
    }

    /// How good a value is for the side to move: quicker wins, then draws, then slower losses.
    fn score(v: u32) -> i64 {
        debug_assert!(v != ILLEGAL);
        if v == DRAW {
            return 0;
        }
        let plies = i64::from(v - 2);
        if plies % 2 == 1 {
            i64::from(u32::MAX) - plies
        } else {
            plies - i64::from(u32::MAX)
        }
    }

    /// The better of two values for the side to move.
    pub(super) fn better(a: u32, b: u32) -> u32 {
        if score(b) > score(a) {
            b
        } else {
            a
        }
    }

    /// `best` becomes the better of itself and `v` (`v` if it was `None`).
    pub(super) fn keep_better(best: &mut Option<u32>, v: u32) {
        *best = Some(best.map_or(v, |b| better(b, v)));
    }

    /// A value in words: `"win in 7 plies"`.
    pub(super) fn describe(v: u32) -> String {
        match v {
            ILLEGAL => "illegal".to_owned(),
            DRAW => "draw".to_owned(),
            CHECKMATED => "checkmated (loss in 0 plies)".to_owned(),
            v if (v - 2) % 2 == 1 => format!("win in {} plies", v - 2),
            v => format!("loss in {} plies", v - 2),
        }
    }
}

/// DTZ50 values, read from `storage/FORMAT.md` ("Values, metric 3"): 0 illegal, 1 draw, `2n` a
/// win with the next zeroing move (or mate) in `n` plies, `2n + 3` a loss in `n` (0: checkmated).
/// A position's value is the best over its moves: a quiet move (no capture, no pawn move) adds a
/// ply to the child's distance; a zeroing move starts the count again, so it gives a win in 1
/// when the child is lost within the rule (at most 100 plies), a win in 101 (cursed) when the
/// child's loss is beyond it, a draw for a draw, a loss in 101 (blessed) for a child's win beyond
/// the rule, a loss in 1 for a child's win within it. Quicker wins are better, then draws, then
/// slower losses. The induction of the crate's comment holds for these rules as for mates
/// (distances of children a move leads to are one less, or the move is zeroing and its value
/// comes from a table checked on its own).
mod dtz {
    pub(super) const DRAW: u32 = 1;
    /// Loss in 0 plies: checkmated now.
    pub(super) const CHECKMATED: u32 = 3;
    /// The plies the 50-move rule allows between zeroing moves.
    const RULE: u32 = 100;

    /// `Some((true, n))` a win in `n`, `Some((false, n))` a loss in `n`, `None` a draw.
    fn decode(v: u32) -> Option<(bool, u32)> {
        debug_assert!(v != 0);
        match v {
            DRAW => None,
            v if v % 2 == 0 => Some((true, v / 2)),
            v => Some((false, (v - 3) / 2)),
        }
    }

    fn encode(win: bool, n: u32) -> u32 {
        if win {
            2 * n
        } else {
            2 * n + 3
        }
    }

    pub(super) fn from_child(child: u32, zeroing: bool) -> u32 {
        match (decode(child), zeroing) {
            (None, _) => DRAW,
            (Some((win, n)), false) => encode(!win, n + 1),
            (Some((win, n)), true) => encode(!win, if n <= RULE { 1 } else { RULE + 1 }),
        }
    }

    fn score(v: u32) -> i64 {
        match decode(v) {
            None => 0,
            Some((true, n)) => i64::from(u32::MAX) - i64::from(n),
            Some((false, n)) => i64::from(n) - i64::from(u32::MAX),
        }
    }

    pub(super) fn better(a: u32, b: u32) -> u32 {
        if score(b) > score(a) {
            b
        } else {
            a
        }
    }

    /// The value of a WDL50 table (metric 4) for DTZ50 value `v` (not 0): 1 loss, 2 blessed
    /// loss, 3 draw, 4 cursed win, 5 win.
    pub(super) fn wdl50_code(v: u32) -> u32 {
        match decode(v) {
            None => 3,
            Some((true, n)) if n <= RULE => 5,
            Some((true, _)) => 4,
            Some((false, n)) if n <= RULE => 1,
            Some((false, _)) => 2,
        }
    }

    /// A value in words: `"win, next zeroing move in 7 plies"`.
    pub(super) fn describe(v: u32) -> String {
        match v {
            0 => "illegal".to_owned(),
            CHECKMATED => "checkmated (loss in 0 plies)".to_owned(),
            v => match decode(v) {
                None => "draw".to_owned(),
                Some((true, n)) => format!("win, next zeroing move or mate in {n} plies (DTZ50)"),
                Some((false, n)) => format!("loss, next zeroing move or mate in {n} plies (DTZ50)"),
            },
        }
    }
}
