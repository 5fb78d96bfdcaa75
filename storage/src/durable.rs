//! Files that survive a crash once written: the one way every durable writer of the project
//! puts a finished file in place (the coordinator's slice store, table files, the journal's
//! creation).
//!
//! A new file is written under a temporary name in its final folder, its data synced, renamed
//! over the final name (atomic: a reader sees the old file or the new, never half of one), and
//! the folder synced so that the new name itself survives a power cut.

use std::fs::File;
use std::io;
use std::path::Path;

/// Syncs the folder that holds `path`, so that a name just created or renamed there survives
/// a crash. Does nothing where folders cannot be synced (not Unix).
pub fn sync_parent_dir(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => sync_dir(d),
        _ => sync_dir(Path::new(".")),
    }
}

/// Syncs folder `dir`, so that the names just created or renamed in it survive a crash (one
/// sync for many files put in place). Does nothing where folders cannot be synced (not Unix).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    File::open(dir)?.sync_all()?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Puts the temporary file `file` (written whole, in `target`'s folder) in place as `target`,
/// durably: its data synced, renamed over `target`, the folder synced.
pub fn persist(file: tempfile::NamedTempFile, target: &Path) -> io::Result<()> {
    file.as_file().sync_data()?;
    file.persist(target).map_err(|e| e.error)?;
    sync_parent_dir(target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn persist_replaces_the_target_whole() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("f");
        std::fs::write(&target, b"old").unwrap();
        let mut tmp = tempfile::NamedTempFile::new_in(dir.path()).unwrap();
        tmp.write_all(b"new bytes").unwrap();
        persist(tmp, &target).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new bytes");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary file left"
        );
        sync_parent_dir(Path::new("relative-name")).unwrap();
    }
}
