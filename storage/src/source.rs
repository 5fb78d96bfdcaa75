use std::fs::File;
use std::io;
use std::path::Path;

use memmap2::Mmap;

/// Bytes a [`Table`](crate::Table) reads from: a memory-mapped file, a file read with `pread`, or
/// a buffer in memory.
pub trait RandomAccess: Send + Sync {
    /// The length of the source in bytes.
    fn size(&self) -> u64;

    /// Fills `buf` with the bytes at `offset..offset + buf.len()`. A range that passes the end is
    /// an [`io::ErrorKind::UnexpectedEof`] error.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
}

fn copy_range(bytes: &[u8], buf: &mut [u8], offset: u64) -> io::Result<()> {
    let range = usize::try_from(offset)
        .ok()
        .and_then(|start| Some(start..start.checked_add(buf.len())?))
        .filter(|r| r.end <= bytes.len());
    match range {
        Some(r) => {
            buf.copy_from_slice(&bytes[r]);
            Ok(())
        }
        None => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!(
                "read of {} bytes at offset {offset} passes the end ({} bytes)",
                buf.len(),
                bytes.len()
            ),
        )),
    }
}

/// A table held in memory.
#[derive(Clone, Debug, Default)]
pub struct MemorySource {
    bytes: Vec<u8>,
}

impl MemorySource {
    /// A source over `bytes`.
    pub fn new(bytes: Vec<u8>) -> MemorySource {
        MemorySource { bytes }
    }
}

impl RandomAccess for MemorySource {
    fn size(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        copy_range(&self.bytes, buf, offset)
    }
}

/// A memory-mapped file: reads are copies out of the page cache, with no system call.
#[derive(Debug)]
pub struct MmapSource {
    map: Mmap,
}

impl MmapSource {
    /// Maps the file at `path` read-only.
    ///
    /// # Safety
    ///
    /// The file must not be truncated or written to while the returned source (or a table built on
    /// it) lives: a shrunk file makes a read fault (`SIGBUS`), and changed bytes break the
    /// assumption of `&[u8]` that memory behind a shared reference does not change. Table files
    /// are only ever replaced whole, by a rename ([`write_table`](crate::write_table)), which
    /// leaves a mapping of the old file intact; whoever calls this must keep other processes from
    /// editing table files in place.
    pub unsafe fn open(path: &Path) -> io::Result<MmapSource> {
        let file = File::open(path)?;
        // Safety: the caller upholds this function's contract (the file is neither truncated nor
        // modified while mapped). The map gives zero-syscall reads of the blocks a probe needs.
        let map = unsafe { Mmap::map(&file)? };
        Ok(MmapSource { map })
    }
}

impl RandomAccess for MmapSource {
    fn size(&self) -> u64 {
        self.map.len() as u64
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        copy_range(&self.map, buf, offset)
    }
}

/// A file read with positioned reads (`pread`): safe whatever other processes do to the file,
/// one system call per read.
#[derive(Debug)]
pub struct FileSource {
    file: File,
    size: u64,
}

impl FileSource {
    /// Opens the file at `path` for reading; its length is taken now.
    pub fn open(path: &Path) -> io::Result<FileSource> {
        let file = File::open(path)?;
        let size = file.metadata()?.len();
        Ok(FileSource { file, size })
    }
}

impl RandomAccess for FileSource {
    fn size(&self) -> u64 {
        self.size
    }

    #[cfg(unix)]
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(&self.file, buf, offset)
    }

    #[cfg(windows)]
    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        use std::os::windows::fs::FileExt;
        while !buf.is_empty() {
            match self.file.seek_read(buf, offset) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_reads_refuse_ranges_past_the_end() {
        let m = MemorySource::new((0..10).collect());
        let mut buf = [0u8; 4];
        m.read_exact_at(&mut buf, 6).unwrap();
        assert_eq!(buf, [6, 7, 8, 9]);
        assert_eq!(
            m.read_exact_at(&mut buf, 7).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
        assert_eq!(
            m.read_exact_at(&mut buf, u64::MAX - 1).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
        m.read_exact_at(&mut [], 10).unwrap();
    }
}
