//! Zermelo table files: one self-checking file per material.
//!
//! A *table file* holds every slice (pawn configuration) of one material. A slice is a vector of
//! `u16` values, one per position of the slice's index. The file stores all slices' values as one
//! stream cut into fixed-size blocks, each compressed on its own with zstd, plus a slice table, a
//! block table and a footer checksum. `storage/FORMAT.md` describes every byte.
//!
//! * Writing is atomic: [`write_table`] (or the streaming [`TableWriter`]) writes a temp file in
//!   the target's folder, syncs it, renames it over the target and syncs the folder. The same
//!   input gives the same bytes.
//! * Reading goes through a memory map ([`Table::open`]), positioned reads
//!   ([`Table::open_pread`]), bytes in memory ([`Table::from_bytes`]) or any [`RandomAccess`]
//!   source. Lookups take `&self` and share a small cache of decompressed blocks. Opening
//!   A [`ValueReader`] is one thread's lock-free reader of single values, with its own bounded
//!   cache of blocks (the solver reads successor tables through it). Opening
//!   checks the header, the tables and the footer but not the blocks; each block's checksum is
//!   checked when it is decompressed, each slice's content hash when the slice is read whole, and
//!   [`Table::verify_checksum`] checks everything.
//! * Every inconsistency in the bytes is a [`StorageError::Corrupt`] naming the file; no input
//!   makes the reader panic.
//!
//! Keys are raw ([`SliceKey`]): this crate knows nothing of chess.
//!
//! ```
//! use zermelo_storage::{table_file_name, write_table, Metric, SliceData, Table, TableMeta};
//!
//! let dir = tempfile::tempdir()?;
//! let meta = TableMeta { material: "KPvK".to_owned(), metric: Metric::Dtm, index_layout: 1 };
//! let path = dir.path().join(table_file_name(&meta.material));
//! let a = vec![3u16; 100];
//! let b: Vec<u16> = (0..50).collect();
//! let slices = [
//!     SliceData { key: [1 << 8, 0], values: &a },
//!     SliceData { key: [1 << 9, 0], values: &b },
//! ];
//! let summary = write_table(&path, &meta, &slices)?;
//! assert_eq!(summary.positions, 150);
//!
//! let table = Table::open(&path)?;
//! assert_eq!(table.meta(), &meta);
//! let i = table.find_slice([1 << 9, 0]).unwrap();
//! assert_eq!(table.read_slice(i)?, b);
//! assert_eq!(table.value(i, 7)?, 7);
//! table.verify_checksum()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod durable;
mod error;
mod format;
mod hash;
mod memory;
mod reader;
mod source;
mod table;
mod write;

pub use error::StorageError;
pub use format::{
    DEFAULT_BLOCK_VALUES, DEFAULT_ZSTD_LEVEL, FORMAT_VERSION, MAX_BLOCK_VALUES, MAX_MATERIAL_LEN,
};
pub use hash::{slice_hash, SliceHasher};
pub use memory::advise_huge_pages;
pub use reader::ValueReader;
pub use source::{FileSource, MemorySource, MmapSource, RandomAccess};
pub use table::Table;
pub use write::{write_table, write_table_with, TableWriter, WriteOptions};

/// The key of a slice: `[white pawns bitboard, black pawns bitboard]`, `[0, 0]` for a pawnless
/// material. Slices are ordered by key (arrays compare lexicographically).
pub type SliceKey = [u64; 2];

/// What a table describes, stored in its header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableMeta {
    /// The material, as Syzygy names it (`"KRPvKR"`): ASCII letters, digits, `_` or `-`, 1 to
    /// [`MAX_MATERIAL_LEN`] bytes.
    pub material: String,
    /// What the values mean.
    pub metric: Metric,
    /// The version of the position index that maps positions to value indices.
    pub index_layout: u32,
}

/// What a table's `u16` values measure. The discriminant is the code stored in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Metric {
    /// Depth to mate in plies, one `u16` per position.
    Dtm = 1,
    /// Values in the DTM encoding that depend on a declared adjudication rule (some exits were
    /// scored by the rule, not solved): not exact, never to be served as a DTM table.
    AdjudicatedDtm = 2,
    /// Distance to the next zeroing move under the 50-move rule (DTZ50, exact), with its
    /// WDL50 class in the same value; one `u16` per position, in a file of its own
    /// ([`dtz_file_name`]).
    Dtz50 = 3,
    /// The WDL50 class alone (with the halfmove clock at 0), one `u16` per position:
    /// python-chess's number plus 3 (1 loss, 2 blessed loss, 3 draw, 4 cursed win, 5 win; an
    /// index that is not a legal position holds the class of the one before it), in a file of
    /// its own ([`wdl_file_name`]): what a WDL-only prober downloads, far smaller than the
    /// DTZ50 file it is derived from.
    Wdl50 = 4,
}

impl Metric {
    /// The code stored in a table header.
    pub const fn code(self) -> u32 {
        self as u32
    }

    /// The metric stored as `code`, if this build knows it.
    pub const fn from_code(code: u32) -> Option<Metric> {
        match code {
            1 => Some(Metric::Dtm),
            2 => Some(Metric::AdjudicatedDtm),
            3 => Some(Metric::Dtz50),
            4 => Some(Metric::Wdl50),
            _ => None,
        }
    }
}

/// One slice to write: its key and its values.
#[derive(Clone, Copy, Debug)]
pub struct SliceData<'a> {
    pub key: SliceKey,
    /// One value per position of the slice, in index order.
    pub values: &'a [u16],
}

/// What [`write_table`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSummary {
    /// blake3 of the whole file, footer included (what `b3sum` prints).
    pub file_hash: [u8; 32],
    /// The file's length in bytes.
    pub bytes: u64,
    /// The number of slices.
    pub slices: usize,
    /// The number of values (positions) over all slices.
    pub positions: u64,
}

/// One row of a table's slice table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceEntry {
    pub key: SliceKey,
    /// The number of values in the slice.
    pub count: u64,
    /// The slice's content hash, [`slice_hash`] of its material, key and values.
    pub hash: [u8; 32],
    /// The offset of the slice's first value in the table's value stream.
    first: u64,
}

impl SliceEntry {
    /// The offset of the slice's first value in the table's value stream (the sum of the counts of
    /// the slices before it).
    pub fn first_value(&self) -> u64 {
        self.first
    }
}

/// The file name of a material's table: `"KPvK"` -> `"KPvK.zmt"`.
pub fn table_file_name(material: &str) -> String {
    format!("{material}.zmt")
}

/// The file name of a material's DTZ50 table (metric [`Metric::Dtz50`]): `KRPvKR.zdz`.
pub fn dtz_file_name(material: &str) -> String {
    format!("{material}.zdz")
}

/// The file name of a material's WDL50 table ([`Metric::Wdl50`]): `KRPvKR.zwl`.
pub fn wdl_file_name(material: &str) -> String {
    format!("{material}.zwl")
}
