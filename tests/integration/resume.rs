//! Builds that stop and resume: SIGINT/SIGTERM stop a build at a checkpoint (exit 130), kill -9
//! loses only what came after the last checkpoint, and the same command run again finishes the
//! same bytes as a build never stopped; a damaged checkpoint is discarded with a line saying so;
//! two builds of one material in one directory do the work once.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{tables_with, zermelo};

/// A folder holding every table `tables_with(&[material])` built but `material`'s own: a build
/// of `material` there starts on it at once.
fn with_sub_tables(material: &str) -> (tempfile::TempDir, PathBuf) {
    let reference = tables_with(&[material]);
    let dir = tempfile::tempdir().unwrap();
    let own = format!("{material}.zmt");
    for entry in std::fs::read_dir(&reference).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_owned();
        if path.extension().is_some_and(|e| e == "zmt") && name != own.as_str() {
            std::fs::copy(&path, dir.path().join(name)).unwrap();
        }
    }
    (dir, reference.join(own))
}

fn signal(child: &Child, signal: i32) {
    // SAFETY: kill only sends a signal to the child this test started (not yet reaped).
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
}

/// Files in `dir/.MATERIAL-build` whose name ends with `ext`.
fn build_files(dir: &Path, material: &str, ext: &str) -> Vec<PathBuf> {
    std::fs::read_dir(dir.join(format!(".{material}-build")))
        .map(|r| {
            r.map(|e| e.unwrap().path())
                .filter(|p| p.to_string_lossy().ends_with(ext))
                .collect()
        })
        .unwrap_or_default()
}

/// Starts `solve MATERIAL` in `dir` with a checkpoint at every ply, and waits until its first
/// checkpoint is on disk; the build is then stopped (SIGSTOP), so that it is caught mid-way.
/// `None` if it finished first (a fast machine: the caller tries again).
fn caught_after_a_checkpoint(dir: &Path, material: &str) -> Option<Child> {
    caught_after_a_checkpoint_with(dir, material, &[])
}

/// [`caught_after_a_checkpoint`] with the options `more` too.
fn caught_after_a_checkpoint_with(dir: &Path, material: &str, more: &[&str]) -> Option<Child> {
    let mut child = zermelo()
        .args([
            "solve",
            material,
            "--threads",
            "2",
            "--checkpoint-every",
            "0",
            "--tables",
        ])
        .arg(dir)
        .args(more)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while build_files(dir, material, ".ckpt").is_empty() {
        if child.try_wait().unwrap().is_some() {
            return None;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no checkpoint after two minutes"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
    signal(&child, libc::SIGSTOP);
    if dir.join(format!("{material}.zmt")).exists() {
        signal(&child, libc::SIGKILL);
        child.wait().unwrap();
        return None;
    }
    Some(child)
}

/// Sends `sig` to a build stopped by [`caught_after_a_checkpoint`], lets it go on, and waits
/// for it to end: its exit status and its stderr.
fn stopped_by(mut child: Child, sig: i32) -> (std::process::ExitStatus, String) {
    signal(&child, sig);
    signal(&child, libc::SIGCONT);
    // Read to its end first: a child blocked on a full pipe would never exit.
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    (child.wait().unwrap(), stderr)
}

fn rerun(dir: &Path, material: &str) -> String {
    rerun_with(dir, material, &[])
}

/// [`rerun`] with the options `more` too.
fn rerun_with(dir: &Path, material: &str, more: &[&str]) -> String {
    let o = zermelo()
        .args(["solve", material, "--threads", "1", "--tables"])
        .arg(dir)
        .args(more)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    stderr
}

/// Nothing of a build is left in `dir` once its table is written: no build folder, no
/// unfinished table file.
fn nothing_left(dir: &Path) {
    let left: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "left: {left:?}");
}

/// A pawnless build killed (SIGKILL) after a checkpoint: the same command resumes from it (on
/// another number of threads) and writes the bytes of a build never stopped. By the compact
/// solver (the default: its bitmaps, logs and lists of later plies taken up from the build
/// folder) and by the byte solver (`--byte-solver`).
#[test]
fn a_build_killed_after_a_checkpoint_resumes_from_it_to_the_same_bytes() {
    killed_and_resumed(&[], true);
    killed_and_resumed(&["--byte-solver"], false);
}

/// [`a_build_killed_after_a_checkpoint_resumes_from_it_to_the_same_bytes`] with the options
/// `more`, the rerun's log saying whether the compact solver solved the slice (`compact`).
fn killed_and_resumed(more: &[&str], compact: bool) {
    for _attempt in 0..5 {
        let (dir, reference) = with_sub_tables("KQvKR");
        let Some(mut child) = caught_after_a_checkpoint_with(dir.path(), "KQvKR", more) else {
            continue;
        };
        signal(&child, libc::SIGKILL);
        child.wait().unwrap();
        assert!(!dir.path().join("KQvKR.zmt").exists());
        let stderr = rerun_with(dir.path(), "KQvKR", more);
        assert!(stderr.contains("resumed from its checkpoint"), "{stderr}");
        assert_eq!(stderr.contains("compact solver"), compact, "{stderr}");
        assert!(std::fs::read(dir.path().join("KQvKR.zmt")).unwrap() == std::fs::read(&reference).unwrap());
        nothing_left(dir.path());
        return;
    }
    panic!("every build finished before its first checkpoint was seen ({more:?})");
}

/// SIGTERM stops a build at the next ply boundary with a checkpoint, exit 130 and a line that
/// says how to resume; a damaged checkpoint is then discarded with a line saying so, and the
/// build solved from the start to the same bytes; SIGINT stops it the same way.
#[test]
fn sigterm_stops_a_build_with_exit_130_and_a_damaged_checkpoint_is_discarded() {
    for _attempt in 0..5 {
        let (dir, reference) = with_sub_tables("KQvKR");
        let Some(child) = caught_after_a_checkpoint(dir.path(), "KQvKR") else {
            continue;
        };
        let (status, stderr) = stopped_by(child, libc::SIGTERM);
        if dir.path().join("KQvKR.zmt").exists() {
            continue; // it finished before the signal arrived
        }
        assert_eq!(status.code(), Some(130), "{stderr}");
        assert!(
            stderr.contains("run the same command again to resume"),
            "{stderr}"
        );
        let checkpoints = build_files(dir.path(), "KQvKR", ".ckpt");
        assert_eq!(checkpoints.len(), 1, "{stderr}");
        let mut bytes = std::fs::read(&checkpoints[0]).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x40;
        std::fs::write(&checkpoints[0], &bytes).unwrap();
        let stderr = rerun(dir.path(), "KQvKR");
        assert!(stderr.contains("discarded a damaged checkpoint"), "{stderr}");
        assert!(!stderr.contains("resumed from its checkpoint"), "{stderr}");
        assert!(std::fs::read(dir.path().join("KQvKR.zmt")).unwrap() == std::fs::read(&reference).unwrap());
        nothing_left(dir.path());

        // SIGINT, as a terminal's ctrl-C sends it.
        std::fs::remove_file(dir.path().join("KQvKR.zmt")).unwrap();
        let Some(child) = caught_after_a_checkpoint(dir.path(), "KQvKR") else {
            continue;
        };
        let (status, _) = stopped_by(child, libc::SIGINT);
        if !dir.path().join("KQvKR.zmt").exists() {
            assert_eq!(status.code(), Some(130));
            let stderr = rerun(dir.path(), "KQvKR");
            assert!(stderr.contains("resumed from its checkpoint"), "{stderr}");
        }
        assert!(std::fs::read(dir.path().join("KQvKR.zmt")).unwrap() == std::fs::read(&reference).unwrap());
        nothing_left(dir.path());
        return;
    }
    panic!("every build finished before it could be stopped");
}

/// A build of a material with pawns killed (SIGKILL) while its solved slices wait in its build
/// folder: the next build takes them up instead of solving them again, finishes, leaves nothing
/// behind, and gives the same bytes.
#[test]
fn a_build_with_pawns_killed_midway_takes_up_its_solved_slices() {
    let (dir, reference) = with_sub_tables("KPvKP");
    let d = dir.path();
    let mut child = zermelo()
        .args(["solve", "KPvKP", "--threads", "1", "--tables"])
        .arg(d)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while build_files(d, "KPvKP", ".zmt").len() < 10 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the build ended before it was killed"
        );
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no solved slice after two minutes"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(!d.join("KPvKP.zmt").exists());
    let kept = build_files(d, "KPvKP", ".zmt").len();
    assert!(kept >= 10);
    let o = zermelo()
        .args(["solve", "KPvKP", "--log-format", "json", "--tables"])
        .arg(d)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let taken: u64 = stderr
        .lines()
        .filter(|l| l.contains("taken up"))
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["fields"]["slices"]
                .as_u64()
                .unwrap()
        })
        .sum();
    assert!(
        taken >= kept as u64 - 1 && taken <= kept as u64,
        "{taken} taken up of {kept} files: {stderr}"
    );
    assert!(std::fs::read(d.join("KPvKP.zmt")).unwrap() == std::fs::read(&reference).unwrap());
    nothing_left(d);
}

/// Two builds of the same material in one directory at once: the second waits for the first
/// (a line says so), then finds the table written and skips it.
#[test]
fn a_second_build_of_a_material_waits_for_the_first_and_skips_its_table() {
    for _attempt in 0..5 {
        let (dir, reference) = with_sub_tables("KQvKR");
        let Some(mut first) = caught_after_a_checkpoint(dir.path(), "KQvKR") else {
            continue;
        };
        let mut second = zermelo()
            .args(["solve", "KQvKR", "--tables"])
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(second.stderr.take().unwrap()).lines();
        let mut seen = Vec::new();
        for line in lines.by_ref() {
            let line = line.unwrap();
            let waiting = line.contains("waiting for it");
            seen.push(line);
            if waiting {
                break;
            }
        }
        assert!(
            seen.last().is_some_and(|l| l.contains("waiting for it")),
            "{seen:?}"
        );
        signal(&first, libc::SIGCONT);
        assert!(first.wait().unwrap().success());
        let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
        assert!(second.wait().unwrap().success(), "{rest:?}");
        assert!(
            rest.iter()
                .any(|l| l.contains("written meanwhile by another build")),
            "{rest:?}"
        );
        assert!(std::fs::read(dir.path().join("KQvKR.zmt")).unwrap() == std::fs::read(&reference).unwrap());
        nothing_left(dir.path());
        return;
    }
    panic!("every build finished before its first checkpoint was seen");
}

/// `--checkpoint-every` takes a length of time, and says what it cannot read.
#[test]
fn checkpoint_every_refuses_what_is_not_a_length_of_time() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_zermelo"))
        .args(["solve", "KQvK", "--checkpoint-every", "soon", "--tables"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a length of time"));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing written"
    );
}
