//! Stopping a long command by a signal: the first SIGINT or SIGTERM asks it to stop at its next
//! safe point (a build: at a checkpoint, see [`crate::build::BuildOptions::stop`]); a second one
//! ends the process at once, with exit status 130.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

static STOP: AtomicBool = AtomicBool::new(false);

/// Exit status of a command stopped by a signal (128 + SIGINT, as shells report it).
pub const STOPPED_EXIT: u8 = 130;

extern "C" fn on_signal(_: libc::c_int) {
    if STOP.swap(true, SeqCst) {
        // SAFETY: _exit is async-signal-safe; nothing of the process needs to run on the way out.
        unsafe { libc::_exit(libc::c_int::from(STOPPED_EXIT)) }
    }
    let message = b"zermelo: stopping at the next safe point (a second signal stops at once)\n";
    // SAFETY: write is async-signal-safe and the buffer is a static of that length; a failed
    // write changes nothing.
    unsafe {
        libc::write(2, message.as_ptr().cast(), message.len());
    }
}

/// Installs the handlers of SIGINT and SIGTERM and returns the flag they set.
pub fn install() -> &'static AtomicBool {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only touches an atomic and calls async-signal-safe functions.
        unsafe {
            libc::signal(
                signal,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
    &STOP
}

/// A length of time as a user writes it: `90s`, `5m`, `2h`, or a bare number of seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval(pub std::time::Duration);

impl std::str::FromStr for Interval {
    type Err = String;

    fn from_str(s: &str) -> Result<Interval, String> {
        let t = s.trim();
        let (number, unit) = match t.find(|c: char| !c.is_ascii_digit() && c != '.') {
            Some(k) => t.split_at(k),
            None => (t, "s"),
        };
        if number.is_empty() {
            return Err(format!("{s:?} is not a length of time (e.g. 90s, 5m, 1h)"));
        }
        let scale = match unit.trim() {
            "s" | "sec" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            other => {
                return Err(format!(
                    "{s:?} is not a length of time: unknown unit {other:?} (use s, m or h, e.g. 90s, 5m)"
                ))
            }
        };
        let value: f64 = number
            .parse()
            .map_err(|_| format!("{s:?} is not a length of time (e.g. 90s, 5m, 1h)"))?;
        let seconds = value * scale;
        if !seconds.is_finite() || seconds > 1e9 {
            return Err(format!("{s:?} is not a usable length of time"));
        }
        Ok(Interval(std::time::Duration::from_secs_f64(seconds)))
    }
}

impl std::fmt::Display for Interval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}s", self.0.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::Interval;
    use std::time::Duration;

    #[test]
    fn intervals_read_in_their_units() {
        let read = |s: &str| s.parse::<Interval>().map(|i| i.0);
        assert_eq!(read("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(read("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(read("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(read("0"), Ok(Duration::ZERO));
        assert_eq!(read("12"), Ok(Duration::from_secs(12)));
        for bad in ["", "m", "5 days", "-3s", "1e99h", "fast"] {
            assert!(read(bad).is_err(), "{bad:?}");
        }
    }
}
