//! Progress of long work: a bar on a terminal; without one (a log file, a container), a log
//! line at a steady interval, so that a long build is never silent between its start and its
//! end.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use tracing::info;

/// Seconds between two progress log lines when there is no terminal, unless the environment
/// variable [`INTERVAL_VAR`] says otherwise.
pub const DEFAULT_INTERVAL_SECONDS: u64 = 10;
/// The environment variable that sets the seconds between two progress log lines.
pub const INTERVAL_VAR: &str = "ZERMELO_PROGRESS_SECONDS";

/// A progress bar on a terminal, or a ticker that logs the progress at a steady interval.
pub struct Progress {
    bar: Option<ProgressBar>,
    shared: Arc<Shared>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

struct State {
    what: String,
    done: u64,
    total: u64,
    stopped: bool,
}

/// The style of a bar once its length is known: it fits the terminal's width (no wrapping on
/// 80 columns).
fn bar_style() -> ProgressStyle {
    ProgressStyle::with_template(
        "{spinner} {msg} [{wide_bar}] {percent:>3}% {human_pos}/{human_len} eta {eta}",
    )
    .expect("progress template")
    .progress_chars("=> ")
}

/// The style of a bar whose length is not known yet (not `100% 0/0`).
fn starting_style() -> ProgressStyle {
    ProgressStyle::with_template("{spinner} {msg}: starting ({elapsed})").expect("progress template")
}

/// A bar for `what` on a terminal: it says "starting" until the first length is set.
pub fn bar(what: &str) -> ProgressBar {
    let bar = ProgressBar::new(0);
    bar.set_style(starting_style());
    bar.set_message(what.to_string());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Sets a bar's length and position, switching it to the full style on its first length.
pub fn set_bar(bar: &ProgressBar, done: u64, total: u64) {
    if total > 0 && bar.length() != Some(total) {
        if bar.length() == Some(0) {
            bar.set_style(bar_style());
        }
        bar.set_length(total);
    }
    bar.set_position(done);
}

/// The interval of the progress log lines: [`INTERVAL_VAR`] in seconds (at least 1), else
/// [`DEFAULT_INTERVAL_SECONDS`].
fn interval() -> Duration {
    let seconds = std::env::var(INTERVAL_VAR)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(DEFAULT_INTERVAL_SECONDS)
        .max(1);
    Duration::from_secs(seconds)
}

/// `what`, with the stage of a large slice's passes if one runs (`zermelo_worker::solver::stage`).
fn with_stage(what: &str) -> String {
    let stage = zermelo_worker::solver::stage();
    if stage.is_empty() {
        what.to_string()
    } else {
        format!("{what} ({stage})")
    }
}

impl Progress {
    /// Progress of `what` (a verb or a material): a bar if `terminal`, else a log line every
    /// interval until [`Progress::finish`].
    pub fn new(terminal: bool, what: &str) -> Progress {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                what: what.to_string(),
                done: 0,
                total: 0,
                stopped: false,
            }),
            wake: Condvar::new(),
        });
        if terminal {
            // The bar's message names the stage of a large slice's passes, which write no
            // values for minutes (see `zermelo_worker::solver::stage`).
            let b = bar(what);
            let (s, shown) = (Arc::clone(&shared), b.clone());
            let ticker = std::thread::spawn(move || {
                let mut state = s.state.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    let (next, timeout) = s
                        .wake
                        .wait_timeout_while(state, Duration::from_millis(500), |st| !st.stopped)
                        .unwrap_or_else(|e| e.into_inner());
                    state = next;
                    if state.stopped || !timeout.timed_out() {
                        return;
                    }
                    shown.set_message(with_stage(&state.what));
                }
            });
            return Progress {
                bar: Some(b),
                shared,
                ticker: Some(ticker),
            };
        }
        let every = interval();
        let s = Arc::clone(&shared);
        let start = Instant::now();
        let ticker = std::thread::spawn(move || {
            let mut state = s.state.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                let (next, timeout) = s
                    .wake
                    .wait_timeout_while(state, every, |st| !st.stopped)
                    .unwrap_or_else(|e| e.into_inner());
                state = next;
                if state.stopped || !timeout.timed_out() {
                    return;
                }
                let percent = if state.total > 0 {
                    (1000.0 * state.done as f64 / state.total as f64).round() / 10.0
                } else {
                    0.0
                };
                let stage = zermelo_worker::solver::stage();
                info!(
                    what = %state.what,
                    stage = ?stage,
                    positions_done = state.done,
                    positions = state.total,
                    percent,
                    elapsed_seconds = start.elapsed().as_secs(),
                    "progress"
                );
            }
        });
        Progress {
            bar: None,
            shared,
            ticker: Some(ticker),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `done` of `total` positions.
    pub fn update(&self, done: u64, total: u64) {
        if let Some(b) = &self.bar {
            set_bar(b, done, total);
        }
        let mut s = self.state();
        (s.done, s.total) = (done, total);
    }

    /// What is being worked on now (a material).
    pub fn set_what(&self, what: &str) {
        if let Some(b) = &self.bar {
            b.set_message(with_stage(what));
        }
        let mut s = self.state();
        if s.what != what {
            s.what = what.to_string();
        }
    }

    /// Ends the bar or the ticker.
    pub fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        self.state().stopped = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop();
    }
}
