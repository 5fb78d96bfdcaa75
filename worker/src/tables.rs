//! Finished tables, read from a directory (one file per material) or held in memory.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use zermelo_chess::index::{Location, INDEX_LAYOUT};
use zermelo_chess::probe::{self, ValueSource};
use zermelo_chess::slice::SliceKey;
use zermelo_chess::{Material, Position, Value};
use zermelo_storage::{Metric, StorageError, Table};

use crate::solver::{SolveError, Successors};

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
    #[error("table file {path} holds adjudicated values (not exact); it is never served as an exact table")]
    NotExact { path: PathBuf },
    #[error("table file {path} holds exact values where adjudicated ones were expected")]
    NotAdjudicated { path: PathBuf },
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

/// Tables in a directory, opened on first use.
pub struct TableDir {
    dir: PathBuf,
    /// The only metric this directory's tables may have: exact DTM unless made with
    /// [`TableDir::adjudicated`].
    metric: Metric,
    open: Mutex<HashMap<Material, Arc<Table>>>,
}

impl TableDir {
    pub fn new(dir: impl Into<PathBuf>) -> TableDir {
        TableDir {
            dir: dir.into(),
            metric: Metric::Dtm,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// A directory of tables built under an adjudication rule: only such tables are read from
    /// it, and an exact [`TableDir`] refuses them.
    pub fn adjudicated(dir: impl Into<PathBuf>) -> TableDir {
        TableDir {
            metric: Metric::AdjudicatedDtm,
            ..TableDir::new(dir)
        }
    }

    /// True if the material's table file is in the directory (it may still be unreadable).
    pub fn has(&self, material: &Material) -> bool {
        self.path_of(material).exists()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path_of(&self, material: &Material) -> PathBuf {
        self.dir.join(table_file_name(material))
    }

    /// The table of a material, checked to be that material's and of this index layout.
    pub fn table(&self, material: &Material) -> Result<Arc<Table>, TableError> {
        if let Some(t) = self.open.lock().expect("table map lock").get(material) {
            return Ok(t.clone());
        }
        let path = self.path_of(material);
        if !path.exists() {
            return Err(TableError::Missing {
                material: *material,
                dir: self.dir.clone(),
            });
        }
        let table = Table::open(&path)?;
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
            });
        }
        if table.meta().index_layout != INDEX_LAYOUT {
            return Err(TableError::WrongLayout {
                path,
                found: table.meta().index_layout,
            });
        }
        let table = Arc::new(table);
        self.open
            .lock()
            .expect("table map lock")
            .insert(*material, table.clone());
        Ok(table)
    }

    /// Forgets an opened table (after it was rewritten).
    pub fn forget(&self, material: &Material) {
        self.open.lock().expect("table map lock").remove(material);
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
        let table = self.table(&loc.slice.material)?;
        let i = table
            .find_slice(loc.slice.raw())
            .ok_or(TableError::MissingSlice {
                material: loc.slice.material,
                slice: loc.slice,
            })?;
        let raw = table.value(i, loc.index)?;
        Value::from_raw(raw).ok_or(TableError::IllegalValue {
            slice: loc.slice,
            index: loc.index,
        })
    }
}

/// Whole slices held in memory: the successors of the slices being solved.
#[derive(Default, Clone)]
pub struct SliceMap {
    /// Looked up on every exit of every position: a fast hash, not a DoS-resistant one.
    slices: rustc_hash::FxHashMap<SliceKey, SliceValues>,
}

impl SliceMap {
    pub fn new() -> SliceMap {
        SliceMap::default()
    }

    pub fn insert(&mut self, key: SliceKey, values: SliceValues) {
        self.slices.insert(key, values);
    }

    pub fn contains(&self, key: &SliceKey) -> bool {
        self.slices.contains_key(key)
    }

    pub fn get(&self, key: &SliceKey) -> Option<&SliceValues> {
        self.slices.get(key)
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

impl ValueSource for SliceMap {
    type Error = SolveError;

    #[inline]
    fn value_at(&self, loc: &Location) -> Result<Value, SolveError> {
        let values = self
            .slices
            .get(&loc.slice)
            .ok_or(SolveError::MissingSuccessor(loc.slice))?;
        let raw = values.get(loc.index as usize).copied().unwrap_or(0);
        Value::from_raw(raw).ok_or(SolveError::BadSuccessor {
            slice: loc.slice,
            index: loc.index,
        })
    }
}

impl Successors for SliceMap {
    fn value_of(&self, pos: &Position) -> Result<Value, SolveError> {
        probe::value(pos, self)
    }

    fn slice_values(&self, key: &SliceKey) -> Option<&[u16]> {
        self.slices.get(key).map(|v| &v[..])
    }
}
