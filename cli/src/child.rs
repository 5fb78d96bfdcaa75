//! A child process whose stderr goes to a log file: the one process harness of `zermelo
//! cluster` (a coordinator and its workers) and of the integration tests (every process they
//! start). Stopped cleanly ([`LoggedChild::stop`]: SIGTERM, a grace period, then SIGKILL, with
//! what it used) or killed ([`LoggedChild::kill`], as a crash is); killed when dropped, so no
//! process outlives its owner, even through a panic.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A running child process, its stdin and stdout closed and its stderr in a log file.
#[derive(Debug)]
pub struct LoggedChild {
    name: String,
    child: Child,
    log: PathBuf,
    /// Reaped: nothing to kill or wait for any more.
    reaped: bool,
}

/// What a child process used, from `wait4` when it was reaped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usage {
    /// Peak resident memory, bytes.
    pub peak: u64,
    /// User plus system CPU time, seconds.
    pub cpu: f64,
}

impl LoggedChild {
    /// Starts `cmd` as `name` (for messages), its stderr written to `log` (created or
    /// truncated).
    pub fn spawn(mut cmd: Command, name: &str, log: &Path) -> io::Result<LoggedChild> {
        let file = File::create(log)?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()?;
        Ok(LoggedChild {
            name: name.to_owned(),
            child,
            log: log.to_owned(),
            reaped: false,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `lines` lines of the log, under a line naming the file.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = self.log();
        let all: Vec<&str> = text.lines().collect();
        let mut out = format!("--- {} (last lines)\n", self.log.display());
        for l in &all[all.len().saturating_sub(lines)..] {
            out.push_str(l);
            out.push('\n');
        }
        out
    }

    /// The exit status, if the process has exited (it is then reaped, with no usage figures).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        let status = self.child.try_wait().ok().flatten();
        self.reaped |= status.is_some();
        status
    }

    /// Waits up to `limit` for the process to exit: its status, or `None` if it still runs.
    pub fn wait_for(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Asks the process to stop cleanly (SIGTERM).
    pub fn terminate(&self) {
        #[cfg(unix)]
        if !self.reaped {
            if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
                // SAFETY: kill(2) on our own child, not reaped yet, so the pid cannot name
                // another process.
                unsafe {
                    libc::kill(pid, libc::SIGTERM);
                }
            }
        }
    }

    /// Kills the process (SIGKILL, as a crash is) and reaps it.
    pub fn kill(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.reaped = true;
        }
    }

    /// Stops the process: SIGTERM, up to `grace` to exit, then SIGKILL. What it used, when the
    /// system gives it and the process was not reaped before.
    pub fn stop(&mut self, grace: Duration) -> Option<Usage> {
        if self.reaped {
            return None;
        }
        self.terminate();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Some(usage) = self.reap(false) {
                return usage;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        self.reap(true).flatten()
    }

    /// Reaps the process if it has exited (waiting for it if `block`): `Some` once reaped, with
    /// what it used when the system gives it.
    fn reap(&mut self, block: bool) -> Option<Option<Usage>> {
        #[cfg(unix)]
        {
            let Ok(pid) = libc::pid_t::try_from(self.child.id()) else {
                self.reaped = true;
                return Some(None);
            };
            let mut status = 0;
            // SAFETY: an all-zero rusage is a valid value; wait4 only writes `status` and `usage`.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            let flags = if block { 0 } else { libc::WNOHANG };
            // SAFETY: `pid` is our own child, not reaped yet (`self.reaped`), so it cannot name
            // another process.
            let r = unsafe { libc::wait4(pid, &mut status, flags, &mut usage) };
            if r == 0 {
                return None;
            }
            self.reaped = true;
            if r != pid {
                return Some(None);
            }
            let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
            Some(Some(Usage {
                peak: usage.ru_maxrss as u64 * 1024,
                cpu: seconds(usage.ru_utime) + seconds(usage.ru_stime),
            }))
        }
        #[cfg(not(unix))]
        {
            let done = if block {
                self.child.wait().ok()
            } else {
                self.child.try_wait().ok().flatten()
            };
            self.reaped |= done.is_some();
            done.map(|_| None)
        }
    }
}

impl Drop for LoggedChild {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn a_child_logs_its_stderr_and_gives_its_status() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("a.log");
        let mut c = LoggedChild::spawn(sh("echo one >&2; echo two >&2; exit 3"), "a", &log).unwrap();
        let status = c.wait_for(Duration::from_secs(10)).expect("it exits");
        assert_eq!(status.code(), Some(3));
        assert_eq!(c.log(), "one\ntwo\n");
        assert!(c.log_tail(1).ends_with("\ntwo\n"), "{}", c.log_tail(1));
        // Reaped: stopping it again gives nothing and does not wait.
        assert_eq!(c.stop(Duration::from_secs(5)), None);
    }

    #[test]
    fn stop_ends_a_child_that_ignores_sigterm_and_measures_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = LoggedChild::spawn(
            sh("trap '' TERM; while :; do :; done"),
            "stubborn",
            &dir.path().join("s.log"),
        )
        .unwrap();
        assert!(c.wait_for(Duration::from_millis(300)).is_none(), "it runs");
        let started = Instant::now();
        let usage = c.stop(Duration::from_millis(300)).expect("reaped with its usage");
        assert!(
            started.elapsed() >= Duration::from_millis(300),
            "it waited out the grace"
        );
        assert!(usage.cpu > 0.0 && usage.peak > 0, "{usage:?}");
        assert!(c.exited().is_none(), "already reaped");
    }

    #[test]
    fn a_dropped_child_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let c = LoggedChild::spawn(sh("sleep 600"), "sleeper", &dir.path().join("z.log")).unwrap();
        let pid = c.id() as libc::pid_t;
        drop(c);
        // SAFETY: signal 0 only asks whether the pid exists; it was reaped, so it is gone.
        let alive = unsafe { libc::kill(pid, 0) } == 0;
        assert!(!alive, "the child outlived its owner");
    }
}
