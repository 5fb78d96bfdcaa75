//! Memory budgets, free disk and sizes for people: the budget a build or an analysis may use,
//! the disk space left where it writes, and bytes as `129.9 KiB`.

use std::path::Path;

pub use zermelo_worker::bytes::human_bytes;

/// Used when neither the machine's memory nor a container limit can be read.
const FALLBACK_BUDGET: u64 = 8 << 30;

/// The memory a build or an analysis may use by default: three quarters of the machine's
/// memory, or of the container's where a cgroup limit is set (cgroup v2 `memory.max`, or v1
/// `memory.limit_in_bytes`); 8 GiB if neither can be read.
pub fn default_budget() -> u64 {
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    });
    let cgroup = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .filter_map(|p| std::fs::read_to_string(p).ok())
    // "max" (v2) means no limit and does not parse; v1's "no limit" is above the machine.
    .filter_map(|s| s.trim().parse::<u64>().ok())
    .min();
    let limit = match (total, cgroup) {
        (Some(t), Some(c)) => t.min(c),
        (t, c) => match t.or(c) {
            Some(l) => l,
            None => return FALLBACK_BUDGET,
        },
    };
    limit / 4 * 3
}

/// The budget of a command: `flag` (`--memory`) if given, else [`default_budget`].
pub fn budget(flag: Option<u64>) -> u64 {
    flag.unwrap_or_else(default_budget)
}

/// The bytes an unprivileged process may still write on the file system holding `path`, or on
/// that of its nearest existing ancestor (a tables directory not created yet); `None` if none
/// can be asked (statvfs).
pub fn free_disk_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let existing = path.ancestors().find(|p| p.exists())?;
    let existing = if existing.as_os_str().is_empty() {
        Path::new(".")
    } else {
        existing
    };
    let c = std::ffi::CString::new(existing.as_os_str().as_bytes()).ok()?;
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `s` a statvfs the call fills in.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    Some((s.f_bavail as u64).saturating_mul(s.f_frsize as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_read_as_people_write_them() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(133_056), "129.9 KiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
        assert_eq!(human_bytes(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn the_default_budget_is_a_share_of_this_machine() {
        let b = default_budget();
        assert!(b >= 1 << 20, "{b}");
        assert_eq!(budget(Some(12345)), 12345);
    }

    #[test]
    fn free_disk_is_asked_of_the_nearest_folder_that_exists() {
        let dir = tempfile::tempdir().unwrap();
        let free = free_disk_bytes(dir.path()).expect("statvfs of a folder");
        assert!(free > 0);
        // Not created yet: the file system of its parent, which changes little in between.
        let later = free_disk_bytes(&dir.path().join("not/yet")).expect("statvfs of the parent");
        assert!(later.abs_diff(free) < 1 << 30, "{later} against {free}");
    }
}
