//! Finished tables, read from a directory (one file per material) or held in memory.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use zermelo_chess::dtz::wdl50_of_code;
use zermelo_chess::index::{stored_turn, Location, SliceIndexer, INDEX_LAYOUT};
use zermelo_chess::probe::{self, DtzSource, ValueSource, Wdl50Source};
use zermelo_chess::slice::SliceKey;
use zermelo_chess::{Color, Dtz, Material, Position, Value};
use zermelo_storage::{Metric, StorageError, Table, ValueReader};

use crate::solver::{CodedValues, IndexedValues, SliceValuesRef, SolveError, Successors};

#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("table {material} is not in {dir} (build it with `zermelo solve {material} --tables {dir}`)")]
    Missing { material: Material, dir: PathBuf },
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("table file {path} holds {found}, not {expected}")]
    WrongTable {
        path: PathBuf,
        found: String,
        expected: String,
    },
    #[error("table file {path} uses index layout {found}; this build reads layout {INDEX_LAYOUT}")]
    WrongLayout { path: PathBuf, found: u32 },
    #[error(
        "table file {path} is packed (`zermelo pack`: one side to move only): it answers probes, \
         but building, `verify` and `stats` need the full table"
    )]
    Packed { path: PathBuf },
    #[error("table file {path} holds adjudicated values (not exact); it is never served as an exact table")]
    NotExact { path: PathBuf },
    #[error("table file {path} holds exact values where adjudicated ones were expected")]
    NotAdjudicated { path: PathBuf },
    #[error("table file {path} does not hold DTZ50 values")]
    NotDtz { path: PathBuf },
    #[error("table file {path} does not hold WDL50 classes")]
    NotWdl { path: PathBuf },
    #[error("table {material} has no slice {slice}; the file is incomplete or corrupt")]
    MissingSlice { material: Material, slice: SliceKey },
    #[error(
        "table {slice} holds no value at index {index}, which is a legal position; the table is corrupt"
    )]
    IllegalValue { slice: SliceKey, index: u64 },
}

impl From<TableError> for SolveError {
    fn from(e: TableError) -> SolveError {
        SolveError::Source(Box::new(e))
    }
}

/// The values of one slice, shared. A `Vec` behind the `Arc` (not `Arc<[u16]>`): a solved slice
/// moves in without being copied, so a large slice is never held twice.
pub type SliceValues = Arc<Vec<u16>>;

/// The file name of a material's table.
pub fn table_file_name(material: &Material) -> String {
    zermelo_storage::table_file_name(&material.to_string())
}

/// The file of a material's table of `metric`: `KRPvKR.zmt` for mates, `KRPvKR.zdz` for DTZ50,
/// `KRPvKR.zwl` for WDL50.
pub fn metric_file_name(material: &Material, metric: Metric) -> String {
    match metric {
        Metric::Dtz50 => zermelo_storage::dtz_file_name(&material.to_string()),
        Metric::Wdl50 => zermelo_storage::wdl_file_name(&material.to_string()),
        Metric::Dtm | Metric::AdjudicatedDtm => table_file_name(material),
    }
}

/// A list of table directories as `--tables`, `ZERMELO_TABLES` and the Python module take it:
/// `a:b:c`, searched in order (empty parts skipped); at least one.
pub fn dir_list(list: &str) -> Result<Vec<PathBuf>, String> {
    let dirs: Vec<PathBuf> = list
        .split(':')
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .collect();
    if dirs.is_empty() {
        return Err("no tables directory given".to_string());
    }
    Ok(dirs)
}

/// A list of directories written as one (`a:b`), as [`dir_list`] reads it.
pub fn list_text(dirs: &[PathBuf]) -> PathBuf {
    let mut list = std::ffi::OsString::new();
    for (i, d) in dirs.iter().enumerate() {
        if i > 0 {
            list.push(":");
        }
        list.push(d.as_os_str());
    }
    PathBuf::from(list)
}

/// Tables in a directory, opened on first use.
pub struct TableDir {
    dir: PathBuf,
    /// More directories searched for tables to read, after `dir` (where tables are written).
    more: Vec<PathBuf>,
    /// The only metric this directory's tables may have: exact DTM unless made with
    /// [`TableDir::adjudicated`].
    metric: Metric,
    /// Read files with positioned reads instead of a memory map (see [`TableDir::pread`]).
    pread: bool,
    /// Read-locked on every lookup (shared, never waited on once a table is open).
    open: RwLock<HashMap<Material, Arc<Table>>>,
}

impl TableDir {
    pub fn new(dir: impl Into<PathBuf>) -> TableDir {
        TableDir {
            dir: dir.into(),
            more: Vec::new(),
            metric: Metric::Dtm,
            pread: false,
            open: RwLock::new(HashMap::new()),
        }
    }

    /// Tables are also read from `dirs`, searched in order after the first directory (where
    /// tables are written): a list of directories, as probing tools take.
    pub fn with_more(self, dirs: impl IntoIterator<Item = PathBuf>) -> TableDir {
        TableDir {
            more: dirs.into_iter().collect(),
            ..self
        }
    }

    /// The tables of a list of directories ([`dir_list`], at least one): written to the first,
    /// read from the first that has them.
    pub fn from_list(dirs: &[PathBuf]) -> TableDir {
        TableDir::new(&dirs[0]).with_more(dirs[1..].to_vec())
    }

    /// The directories searched, in order, as one list (`a:b`): what `--tables` takes.
    pub fn search_list(&self) -> PathBuf {
        list_text(&self.dirs().cloned().collect::<Vec<_>>())
    }

    /// The directories searched, in order.
    pub fn search_dirs(&self) -> Vec<PathBuf> {
        self.dirs().cloned().collect()
    }

    /// How many tables are open (mapped) now.
    pub fn open_count(&self) -> usize {
        self.open.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// True if the material's table is open now.
    pub fn is_open(&self, material: &Material) -> bool {
        self.open
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(material)
    }

    /// The directories searched, in order: the first, then the others.
    pub fn dirs(&self) -> impl Iterator<Item = &PathBuf> {
        std::iter::once(&self.dir).chain(&self.more)
    }

    /// Reads the files with positioned reads (`pread`) instead of a memory map: the blocks read
    /// stay in the kernel's page cache, outside the process's resident memory, so a build that
    /// reads large tables a block at a time stays within its memory budget.
    pub fn pread(self) -> TableDir {
        TableDir { pread: true, ..self }
    }

    /// A directory of tables built under an adjudication rule: only such tables are read from
    /// it, and an exact [`TableDir`] refuses them.
    pub fn adjudicated(dir: impl Into<PathBuf>) -> TableDir {
        TableDir {
            metric: Metric::AdjudicatedDtm,
            ..TableDir::new(dir)
        }
    }

    /// The DTZ50 tables (`.zdz` files) of a list of directories ([`dir_list`], at least one).
    pub fn dtz50(dirs: &[PathBuf]) -> TableDir {
        TableDir {
            metric: Metric::Dtz50,
            ..TableDir::from_list(dirs)
        }
    }

    /// What the tables it reads hold.
    pub fn metric(&self) -> Metric {
        self.metric
    }

    /// The DTZ50 tables of the same directories.
    pub fn dtz50_view(&self) -> TableDir {
        self.view_of(Metric::Dtz50)
    }

    /// The WDL50 tables (`.zwl` files) of the same directories.
    pub fn wdl50_view(&self) -> TableDir {
        self.view_of(Metric::Wdl50)
    }

    /// The tables of `metric` in the same directories.
    pub fn view_of(&self, metric: Metric) -> TableDir {
        TableDir {
            dir: self.dir.clone(),
            more: self.more.clone(),
            metric,
            pread: self.pread,
            open: RwLock::new(HashMap::new()),
        }
    }

    /// True if the material's table file is in the directory (it may still be unreadable).
    pub fn has(&self, material: &Material) -> bool {
        self.path_of(material).exists()
    }

    /// The directory tables are written to (the first one).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the material's table is read from: the first directory that has its file, else
    /// where it would be written.
    pub fn path_of(&self, material: &Material) -> PathBuf {
        let name = metric_file_name(material, self.metric);
        self.dirs()
            .map(|d| d.join(&name))
            .find(|p| p.exists())
            .unwrap_or_else(|| self.write_path_of(material))
    }

    /// Where the material's table is written: in the first directory.
    pub fn write_path_of(&self, material: &Material) -> PathBuf {
        self.dir.join(metric_file_name(material, self.metric))
    }

    /// The table of a material, checked to be that material's and of this index layout, with
    /// both sides to move (not packed): what a build, `verify` and `stats` read.
    pub fn table(&self, material: &Material) -> Result<Arc<Table>, TableError> {
        let table = self.table_to_probe(material)?;
        if table.meta().index_layout != INDEX_LAYOUT {
            return Err(TableError::Packed {
                path: self.path_of(material),
            });
        }
        Ok(table)
    }

    /// The table of a material, checked to be that material's, of this index layout or packed
    /// from it (one side to move only, [`stored_turn`]): what a probe reads.
    pub fn table_to_probe(&self, material: &Material) -> Result<Arc<Table>, TableError> {
        if let Some(t) = self.open.read().unwrap_or_else(|e| e.into_inner()).get(material) {
            return Ok(t.clone());
        }
        let path = self.path_of(material);
        if !path.exists() {
            return Err(TableError::Missing {
                material: *material,
                dir: self.search_list(),
            });
        }
        let table = if self.pread {
            Table::open_pread(&path)?
        } else {
            Table::open(&path)?
        };
        if table.meta().material != material.to_string() {
            return Err(TableError::WrongTable {
                path,
                found: table.meta().material.clone(),
                expected: material.to_string(),
            });
        }
        if table.meta().metric != self.metric {
            return Err(match self.metric {
                Metric::Dtm => TableError::NotExact { path },
                Metric::AdjudicatedDtm => TableError::NotAdjudicated { path },
                Metric::Dtz50 => TableError::NotDtz { path },
                Metric::Wdl50 => TableError::NotWdl { path },
            });
        }
        if stored_turn(table.meta().index_layout).is_none() {
            return Err(TableError::WrongLayout {
                path,
                found: table.meta().index_layout,
            });
        }
        let table = Arc::new(table);
        self.open
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(*material, table.clone());
        Ok(table)
    }

    /// Forgets an opened table (after it was rewritten).
    pub fn forget(&self, material: &Material) {
        self.open
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(material);
    }

    /// All values of one slice, decompressed and checked against the slice's content hash.
    pub fn load_slice(&self, key: &SliceKey) -> Result<SliceValues, TableError> {
        let table = self.table(&key.material)?;
        let i = table.find_slice(key.raw()).ok_or(TableError::MissingSlice {
            material: key.material,
            slice: *key,
        })?;
        Ok(table.read_slice(i)?.into())
    }

    /// The value of any legal position (en passant honoured).
    pub fn probe(&self, pos: &Position) -> Result<Value, TableError> {
        probe::value(pos, self)
    }
}

impl ValueSource for TableDir {
    type Error = TableError;

    fn value_at(&self, loc: &Location) -> Result<Value, TableError> {
        value_in(self, self, loc, Table::value)
    }
}

impl DtzSource for TableDir {
    type Error = TableError;

    fn dtz_at(&self, loc: &Location) -> Result<Dtz, TableError> {
        dtz_in(self, self, loc, Table::value)
    }
}

impl Wdl50Source for TableDir {
    type Error = TableError;

    fn wdl50_at(&self, loc: &Location) -> Result<i8, TableError> {
        located(self, loc, Table::value, wdl50_of_code)?.ok_or_else(|| packed_error(self, loc))
    }
}

/// The mate value at `loc`, read from `dir`'s table by `read`, or where a packed table holds the
/// other side to move, searched with the moves' values read from `src`.
fn value_in<S: ValueSource<Error = TableError> + ?Sized>(
    src: &S,
    dir: &TableDir,
    loc: &Location,
    read: impl FnOnce(&Table, usize, u64) -> Result<u16, StorageError>,
) -> Result<Value, TableError> {
    match located(dir, loc, read, Value::from_raw)? {
        Some(v) => Ok(v),
        None => searched(loc, Value::Loss(0), Value::Draw, |pos, m| {
            Ok(probe::value(&pos.play(m), src)?.after_move())
        }),
    }
}

/// [`value_in`] for DTZ50: a zeroing move counts by the class after it.
fn dtz_in<S: DtzSource<Error = TableError> + ?Sized>(
    src: &S,
    dir: &TableDir,
    loc: &Location,
    read: impl FnOnce(&Table, usize, u64) -> Result<u16, StorageError>,
) -> Result<Dtz, TableError> {
    match located(dir, loc, read, Dtz::from_raw)? {
        Some(v) => Ok(v),
        None => searched(loc, Dtz::Loss(0), Dtz::Draw, |pos, m| {
            Ok(probe::dtz(&pos.play(m), src)?.after_move(m.leaves_slice()))
        }),
    }
}

/// The value at `loc` in its material's table of `dir`: the raw value read by `read` (table,
/// slice, index), decoded by `decode`; a raw value it does not take (an illegal mark) is an
/// error of the table. `None` if the table is packed and holds the other side to move.
fn located<T>(
    dir: &TableDir,
    loc: &Location,
    read: impl FnOnce(&Table, usize, u64) -> Result<u16, StorageError>,
    decode: impl FnOnce(u16) -> Option<T>,
) -> Result<Option<T>, TableError> {
    let Some(raw) = located_raw(dir, loc, read)? else {
        return Ok(None);
    };
    let value = decode(raw).ok_or(TableError::IllegalValue {
        slice: loc.slice,
        index: loc.index,
    })?;
    Ok(Some(value))
}

/// The raw value at `loc` in its material's table of `dir`, read by `read`; `None` if the
/// table is packed and holds the other side to move.
fn located_raw(
    dir: &TableDir,
    loc: &Location,
    read: impl FnOnce(&Table, usize, u64) -> Result<u16, StorageError>,
) -> Result<Option<u16>, TableError> {
    let table = dir.table_to_probe(&loc.slice.material)?;
    let i = table
        .find_slice(loc.slice.raw())
        .ok_or(TableError::MissingSlice {
            material: loc.slice.material,
            slice: loc.slice,
        })?;
    let mut index = loc.index;
    if let Some(Some(kept)) = stored_turn(table.meta().index_layout) {
        let per_side = SliceIndexer::new(loc.slice).per_side();
        let turn = if index < per_side {
            Color::White
        } else {
            Color::Black
        };
        if turn != kept {
            return Ok(None);
        }
        index -= turn.index() as u64 * per_side;
    }
    Ok(Some(read(&table, i, index)?))
}

/// The value at `loc`, a position a packed table does not hold (the other side to move), by a
/// search of one ply: the best of `after(position, move)` over its legal moves, each read from
/// the tables (a move inside the material leads to the side the table holds); `mated` or
/// `stalemate` if it has none.
fn searched<V: Ord>(
    loc: &Location,
    mated: V,
    stalemate: V,
    after: impl Fn(&Position, &zermelo_chess::Move) -> Result<V, TableError>,
) -> Result<V, TableError> {
    let pos = (SliceIndexer::new(loc.slice).position(loc.index))
        .filter(|pos| pos.validate().is_ok())
        .ok_or(TableError::IllegalValue {
            slice: loc.slice,
            index: loc.index,
        })?;
    let mut best = None;
    for m in pos.legal_moves().iter() {
        let v = after(&pos, m)?;
        if best.as_ref().is_none_or(|b| v > *b) {
            best = Some(v);
        }
    }
    Ok(best.unwrap_or(if pos.is_check() { mated } else { stalemate }))
}

/// The error of a WDL50 table packed to one side (`zermelo pack` never writes one: a class
/// is not found from the classes one ply on).
fn packed_error(dir: &TableDir, loc: &Location) -> TableError {
    TableError::Packed {
        path: dir.path_of(&loc.slice.material),
    }
}

/// A [`TableDir`] read through each thread's own cache of decompressed blocks ([`READER`]):
/// no lock is taken per value (a server's probes on many threads do not wait on each other),
/// and each thread holds at most [`READER_BYTES`].
pub struct ThreadCached<'a>(pub &'a TableDir);

impl ValueSource for ThreadCached<'_> {
    type Error = TableError;

    fn value_at(&self, loc: &Location) -> Result<Value, TableError> {
        value_in(self, self.0, loc, read_cached)
    }
}

impl DtzSource for ThreadCached<'_> {
    type Error = TableError;

    fn dtz_at(&self, loc: &Location) -> Result<Dtz, TableError> {
        dtz_in(self, self.0, loc, read_cached)
    }
}

impl Wdl50Source for ThreadCached<'_> {
    type Error = TableError;

    fn wdl50_at(&self, loc: &Location) -> Result<i8, TableError> {
        located(self.0, loc, read_cached, wdl50_of_code)?.ok_or_else(|| packed_error(self.0, loc))
    }
}

/// Blocks of table values each thread keeps decompressed for [`SliceMap`]'s table-backed slices
/// (32 x 128 KiB = 4 MiB a thread with the default block size).
pub const READER_BLOCKS: usize = 32;

/// Bytes of [`READER_BLOCKS`] blocks of the default size: what reading table-backed slices
/// holds per thread.
pub const READER_BYTES: u64 = READER_BLOCKS as u64 * 2 * zermelo_storage::DEFAULT_BLOCK_VALUES as u64;

thread_local! {
    /// This thread's reader of table-backed slices: lock-free, bounded.
    static READER: RefCell<ValueReader> = RefCell::new(ValueReader::new(READER_BLOCKS));
}

/// The stored value at `index` of slice `slice` of `table`, read through this thread's cache of
/// decompressed blocks (as [`ThreadCached`] reads): for a caller that holds its tables open.
pub fn read_cached(table: &Table, slice: usize, index: u64) -> Result<u16, StorageError> {
    READER.with(|r| r.borrow_mut().value(table, slice, index))
}

/// The stored values at `first..first + out.len()` of slice `slice` of `table`, into `out`,
/// read through this thread's cache of decompressed blocks ([`read_cached`]).
pub fn read_cached_values(
    table: &Table,
    slice: usize,
    first: u64,
    out: &mut [u16],
) -> Result<(), StorageError> {
    READER.with(|r| r.borrow_mut().values(table, slice, first, out))
}

/// One slice of a table file, read a value at a time through the thread's block cache: its
/// values are never held whole.
pub struct TableSlice {
    table: Arc<Table>,
    slice: usize,
}

impl IndexedValues for TableSlice {
    fn get(&self, index: u64) -> Result<u16, SolveError> {
        if index >= self.table.slices()[self.slice].count {
            return Ok(0);
        }
        READER
            .with(|r| r.borrow_mut().value(&self.table, self.slice, index))
            .map_err(|e| SolveError::Source(Box::new(e)))
    }

    fn get_many(&self, indices: &[u64], out: &mut [u16]) -> Result<(), SolveError> {
        let count = self.table.slices()[self.slice].count;
        if indices.iter().any(|&i| i >= count) {
            // Rare (an index past the end reads 0): one at a time.
            for (v, &i) in out.iter_mut().zip(indices) {
                *v = self.get(i)?;
            }
            return Ok(());
        }
        READER
            .with(|r| r.borrow_mut().gather(&self.table, self.slice, indices, out))
            .map_err(|e| SolveError::Source(Box::new(e)))
    }

    fn get_run(&self, first: u64, out: &mut [u16]) -> Result<(), SolveError> {
        let count = self.table.slices()[self.slice].count;
        let have = count.saturating_sub(first).min(out.len() as u64) as usize;
        out[have..].fill(0);
        if have == 0 {
            return Ok(());
        }
        READER
            .with(|r| {
                r.borrow_mut()
                    .values(&self.table, self.slice, first, &mut out[..have])
            })
            .map_err(|e| SolveError::Source(Box::new(e)))
    }
}

/// A successor slice of [`SliceMap`]: its values in memory (as `u16`, or a byte each), or read
/// from its table file.
enum Held {
    Values(SliceValues),
    Coded(Arc<CodedValues>),
    Table(TableSlice),
}

impl Held {
    fn as_ref(&self) -> SliceValuesRef<'_> {
        match self {
            Held::Values(v) => SliceValuesRef::Array(v),
            Held::Coded(v) => SliceValuesRef::Coded(v),
            Held::Table(t) => SliceValuesRef::Indexed(t),
        }
    }
}

/// A whole slice kept by the [`SuccessorCache`]: a byte a value when it has at most 256
/// distinct values, else `u16` values.
#[derive(Clone)]
enum Whole {
    Values(SliceValues),
    Coded(Arc<CodedValues>),
}

impl Whole {
    /// `values`, coded if `code` and they can be.
    fn of(values: Vec<u16>, code: bool) -> Whole {
        match code.then(|| CodedValues::new(&values)).flatten() {
            Some(coded) => Whole::Coded(Arc::new(coded)),
            None => Whole::Values(Arc::new(values)),
        }
    }

    /// Bytes it takes.
    fn bytes(&self) -> u64 {
        match self {
            Whole::Values(v) => 2 * v.len() as u64,
            Whole::Coded(v) => v.len() as u64 + 512,
        }
    }

    /// In use by a [`SliceMap`] too.
    fn shared(&self) -> bool {
        match self {
            Whole::Values(v) => Arc::strong_count(v) > 1,
            Whole::Coded(v) => Arc::strong_count(v) > 1,
        }
    }

    fn held(self) -> Held {
        match self {
            Whole::Values(v) => Held::Values(v),
            Whole::Coded(v) => Held::Coded(v),
        }
    }
}

/// The successors of the slices being solved: whole slices held in memory, or slices of table
/// files read through a small per-thread cache of blocks.
#[derive(Default)]
pub struct SliceMap {
    /// Looked up on every exit of every position: a fast hash, not a DoS-resistant one.
    slices: rustc_hash::FxHashMap<SliceKey, Held>,
}

impl SliceMap {
    pub fn new() -> SliceMap {
        SliceMap::default()
    }

    /// Holds a slice's values.
    pub fn insert(&mut self, key: SliceKey, values: SliceValues) {
        self.slices.insert(key, Held::Values(values));
    }

    /// Reads slice `key` from `table`, which must hold it, a value at a time when needed.
    pub fn insert_table(&mut self, key: SliceKey, table: Arc<Table>) -> Result<(), TableError> {
        let slice = table.find_slice(key.raw()).ok_or(TableError::MissingSlice {
            material: key.material,
            slice: key,
        })?;
        self.slices.insert(key, Held::Table(TableSlice { table, slice }));
        Ok(())
    }

    pub fn contains(&self, key: &SliceKey) -> bool {
        self.slices.contains_key(key)
    }

    /// Keeps only the slices `keep` says yes to.
    pub fn retain(&mut self, mut keep: impl FnMut(&SliceKey) -> bool) {
        self.slices.retain(|k, _| keep(k));
    }

    pub fn len(&self) -> usize {
        self.slices.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slices.is_empty()
    }
}

impl SliceMap {
    /// The stored value at `loc`, in a slice the map holds (0 past its end).
    #[inline]
    pub fn raw_at(&self, loc: &Location) -> Result<u16, SolveError> {
        let held = self
            .slices
            .get(&loc.slice)
            .ok_or_else(|| SolveError::MissingSuccessor(loc.slice))?;
        held.as_ref().get(loc.index)
    }
}

impl ValueSource for SliceMap {
    type Error = SolveError;

    #[inline]
    fn value_at(&self, loc: &Location) -> Result<Value, SolveError> {
        let raw = self.raw_at(loc)?;
        Value::from_raw(raw).ok_or_else(|| SolveError::BadSuccessor {
            slice: loc.slice,
            index: loc.index,
        })
    }
}

impl Successors for SliceMap {
    fn value_of(&self, pos: &Position) -> Result<Value, SolveError> {
        probe::value(pos, self)
    }

    fn slice_values(&self, key: &SliceKey) -> Option<SliceValuesRef<'_>> {
        self.slices.get(key).map(Held::as_ref)
    }
}

/// Whole successor slices read from their table files and kept for the next slices that read
/// them, within a byte budget; larger slices are read a block at a time through each thread's
/// cache ([`TableSlice`]).
///
/// A slice is held whole when it takes at most a quarter of the budget. A slice in use (by a
/// [`SliceMap`] from [`SuccessorCache::successors_of`]) is never evicted; when the budget is full of
/// slices in use, a slice is read a block at a time instead. So the cache never holds more than
/// its budget.
pub struct SuccessorCache {
    capacity: u64,
    /// Threads a slice read whole is decompressed on.
    threads: usize,
    state: Mutex<CacheState>,
}

#[derive(Default)]
struct CacheState {
    bytes: u64,
    clock: u64,
    slices: HashMap<SliceKey, (Whole, u64)>,
}

/// The largest slice of a pawn push (the material's own) [`SuccessorCache`] reads whole, in
/// bytes of `u16` values.
const WHOLE_PUSH_BYTES: u64 = 16 << 20;

impl SuccessorCache {
    /// A cache of up to `capacity` bytes of values, each slice read whole decompressed on up to
    /// `threads` threads (a build's first slices wait for their successors with every thread
    /// idle; later reads are short and rare).
    pub fn new(capacity: u64, threads: usize) -> SuccessorCache {
        SuccessorCache {
            capacity,
            threads,
            state: Mutex::new(CacheState::default()),
        }
    }

    /// The successors of slice `key` (every slice [`SliceKey::successors`] lists): held whole
    /// from the cache, else found in its table by `table_of` and read whole (checked against
    /// its content hash) when small enough and room is left, else read a block at a time.
    pub fn successors_of(
        &self,
        key: &SliceKey,
        table_of: &dyn Fn(&SliceKey) -> Result<Arc<Table>, TableError>,
    ) -> Result<SliceMap, TableError> {
        self.successors_where(key, &|_| true, table_of)
    }

    /// [`SuccessorCache::successors_of`] for the successors `keep` says yes to (a DTZ50 build
    /// holds the slices of its own material in memory already).
    pub fn successors_where(
        &self,
        key: &SliceKey,
        keep: &dyn Fn(&SliceKey) -> bool,
        table_of: &dyn Fn(&SliceKey) -> Result<Arc<Table>, TableError>,
    ) -> Result<SliceMap, TableError> {
        self.successors_read(key, keep, false, table_of)
    }

    /// [`SuccessorCache::successors_of`] for a slice inited with others whose pawns promote
    /// (`solve_slices_into`): its promotions into pawnless tables are read a block at a time,
    /// never whole. The init reads them king pair by king pair, each block once for all the
    /// slices while it is cached; read whole first, KRPvKR's KRRvKR (238 MB of values) took
    /// 0.3 s with every thread but one idle, and was most of the build's peak memory (402 MiB
    /// against 169 MiB read by blocks).
    pub fn successors_inited_together(
        &self,
        key: &SliceKey,
        table_of: &dyn Fn(&SliceKey) -> Result<Arc<Table>, TableError>,
    ) -> Result<SliceMap, TableError> {
        self.successors_read(key, &|_| true, true, table_of)
    }

    /// The successors of `key` that `keep` says yes to; a promotion into a pawnless table read
    /// a block at a time if `promotions_by_block`.
    fn successors_read(
        &self,
        key: &SliceKey,
        keep: &dyn Fn(&SliceKey) -> bool,
        promotions_by_block: bool,
        table_of: &dyn Fn(&SliceKey) -> Result<Arc<Table>, TableError>,
    ) -> Result<SliceMap, TableError> {
        let mut map = SliceMap::new();
        for s in key.successors().into_iter().filter(|s| keep(s)) {
            if map.contains(&s) {
                continue;
            }
            if let Some(values) = self.cached(&s) {
                map.slices.insert(s, values.held());
                continue;
            }
            let table = table_of(&s)?;
            // A capture's successor (fewer men) is read a value at a time: a byte a value halves
            // its memory for a table lookup per read. The slices a pawn push or a promotion
            // leads to are read in runs of 64 too, where copying `u16` values is faster
            // (measured: KRPvKR 3% slower with every successor coded).
            let code = s.material.men() < key.material.men();
            // A pawn push's slice (of the same material) is read in runs of 64 that blocks
            // serve well: whole only if small (KRPvKR's, 59 MB, held whole took 6% longer on 2
            // threads). A promotion's or a capture's is gathered from all over: whole up to a
            // quarter of the cache (KNPvKP's promotions into slices of 59 MB: 140 s -> 36 s).
            let promotion = s.material.men() == key.material.men() && s.material != key.material;
            let largest = if s.material == key.material {
                WHOLE_PUSH_BYTES.min(self.capacity / 4)
            } else if promotions_by_block && promotion && !s.material.has_pawns() {
                0
            } else {
                self.capacity / 4
            };
            match self.whole(&s, &table, code, largest)? {
                Some(values) => {
                    map.slices.insert(s, values.held());
                }
                None => map.insert_table(s, table)?,
            }
        }
        Ok(map)
    }

    fn lock(&self) -> MutexGuard<'_, CacheState> {
        self.state.lock().expect("successor cache lock")
    }

    /// Slice `key` if the cache holds it (marked as just used).
    fn cached(&self, key: &SliceKey) -> Option<Whole> {
        let mut st = self.lock();
        st.clock += 1;
        let now = st.clock;
        let (values, used) = st.slices.get_mut(key)?;
        *used = now;
        Some(values.clone())
    }

    /// Slice `key` of `table`, whole, if it has at most `largest` bytes of values and fits.
    fn whole(
        &self,
        key: &SliceKey,
        table: &Table,
        code: bool,
        largest: u64,
    ) -> Result<Option<Whole>, TableError> {
        let i = table.find_slice(key.raw()).ok_or(TableError::MissingSlice {
            material: key.material,
            slice: *key,
        })?;
        let bytes = 2 * table.slices()[i].count;
        if bytes > largest {
            return Ok(None);
        }
        // Read under the lock: two threads never read the same slice twice, and a read is short
        // (a quarter of the budget at most).
        let mut st = self.lock();
        st.clock += 1;
        let now = st.clock;
        if let Some((values, used)) = st.slices.get_mut(key) {
            // Read by another thread since `cached` was asked.
            *used = now;
            return Ok(Some(values.clone()));
        }
        // Evict unused slices, least recently used first, until the new one fits.
        while st.bytes + bytes > self.capacity {
            let victim = st
                .slices
                .iter()
                .filter(|(_, (v, _))| !v.shared())
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, (v, _))| (*k, v.bytes()));
            let Some((k, freed)) = victim else {
                return Ok(None);
            };
            st.slices.remove(&k);
            st.bytes -= freed;
        }
        let values = Whole::of(table.read_slice_on(i, self.threads)?, code);
        st.bytes += values.bytes();
        st.slices.insert(*key, (values.clone(), now));
        Ok(Some(values))
    }
}
