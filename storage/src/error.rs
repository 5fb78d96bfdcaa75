use std::path::{Path, PathBuf};

/// Everything that can go wrong reading or writing a table. `path` names the table file (or a
/// display name such as `<memory>` for a table read from bytes).
#[derive(thiserror::Error, Debug)]
pub enum StorageError {
    /// The operating system refused an operation.
    #[error("i/o error on {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not what a table writer wrote: a bad checksum, a truncated file, an
    /// inconsistent table, a zstd frame that does not decode.
    #[error("table {} is corrupt: {detail}", path.display())]
    Corrupt { path: PathBuf, detail: String },
    /// A table written by a format version this build does not read.
    #[error("table {} has format version {found}, this build reads versions 1 to {supported}", path.display())]
    UnsupportedVersion {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    /// A well-formed header naming a metric this build does not know.
    #[error("table {} has metric code {found}, which this build does not know", path.display())]
    UnsupportedMetric { path: PathBuf, found: u32 },
    /// The file does not start with the table magic.
    #[error("{} is not a zermelo table (bad magic)", path.display())]
    NotATable { path: PathBuf },
    /// The caller asked for something impossible: unsorted slices on write, a slice or value index
    /// out of range on read.
    #[error("invalid input: {0}")]
    InvalidInput(String),
}

impl StorageError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> StorageError {
        StorageError::Io {
            path: path.to_owned(),
            source,
        }
    }

    pub(crate) fn corrupt(path: &Path, detail: impl Into<String>) -> StorageError {
        StorageError::Corrupt {
            path: path.to_owned(),
            detail: detail.into(),
        }
    }

    /// Whether this error says the bytes are bad (not the caller, the system or the build): the
    /// copy should be discarded and fetched again.
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            StorageError::Corrupt { .. } | StorageError::NotATable { .. }
        )
    }
}
