//! The metrics endpoints' text, built with the official `prometheus-client` crate (OpenMetrics
//! text, which Prometheus reads), for the coordinator and the workers; and the standard
//! `process_*` metrics of the process serving them.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The content type of the text the endpoints serve.
pub const CONTENT_TYPE_TEXT: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A number a metric takes: whole numbers stay whole in the text.
#[derive(Clone, Copy, Debug)]
pub enum Number {
    Int(i64),
    Float(f64),
}

impl From<u64> for Number {
    fn from(v: u64) -> Number {
        Number::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<usize> for Number {
    fn from(v: usize) -> Number {
        Number::from(v as u64)
    }
}

impl From<f64> for Number {
    fn from(v: f64) -> Number {
        Number::Float(v)
    }
}

type Labels = Vec<(String, String)>;

/// The metrics of one scrape: families registered one at a time, then encoded.
#[derive(Debug, Default)]
pub struct Text {
    registry: Registry,
    families: HashMap<String, Family<Labels, Gauge<f64, AtomicU64>>>,
}

/// The crate ends every help text with a full stop: ours without theirs.
fn help_of(help: &str) -> &str {
    help.strip_suffix('.').unwrap_or(help)
}

impl Text {
    /// A family of gauges with labels; its samples come from [`sample`](Self::sample).
    pub fn family(&mut self, name: &str, kind: &str, help: &str) {
        debug_assert_eq!(kind, "gauge", "labelled families are gauges");
        let family = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        self.registry.register(name, help_of(help), family.clone());
        self.families.insert(name.to_owned(), family);
    }

    /// A sample of family `name` (declared by [`family`](Self::family)).
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        let labels: Labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.families
            .get(name)
            .expect("a family is declared before its samples")
            .get_or_create(&labels)
            .set(value);
    }

    /// A family with one unlabelled sample: `kind` is `counter` (`name` ends in `_total`) or
    /// `gauge`.
    pub fn single(&mut self, name: &str, kind: &str, help: &str, value: impl Into<Number>) {
        let help = help_of(help);
        match (kind, value.into()) {
            ("counter", n) => {
                let base = name
                    .strip_suffix("_total")
                    .expect("a counter's name ends in _total");
                match n {
                    Number::Int(v) => {
                        let c = Counter::<u64>::default();
                        c.inc_by(v.max(0) as u64);
                        self.registry.register(base, help, c);
                    }
                    Number::Float(v) => {
                        let c = Counter::<f64, AtomicU64>::default();
                        c.inc_by(v.max(0.0));
                        self.registry.register(base, help, c);
                    }
                }
            }
            (_, Number::Int(v)) => {
                let g = Gauge::<i64>::default();
                g.set(v);
                self.registry.register(name, help, g);
            }
            (_, Number::Float(v)) => {
                let g = Gauge::<f64, AtomicU64>::default();
                g.set(v);
                self.registry.register(name, help, g);
            }
        }
    }

    /// The text of every family registered.
    pub fn into_string(self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a string does not fail");
        out
    }
}

/// The standard `process_*` metrics of this process, read from `/proc/self` (Linux; elsewhere
/// none).
pub fn process_metrics(t: &mut Text) {
    let page = 4096.0;
    let ticks = 100.0; // USER_HZ
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return;
    };
    // The fields after the command name, which is in parentheses and may hold spaces.
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
        return;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14, 15 (utime, stime), 22 (starttime), 23 (vsize), 24 (rss), counted from 1 with
    // the pid and the name as 1 and 2: here from 0 after them.
    let cpu = (num(11) + num(12)) / ticks;
    let boot = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("btime ")
                    .and_then(|v| v.trim().parse::<f64>().ok())
            })
        })
        .unwrap_or(0.0);
    t.single(
        "process_cpu_seconds_total",
        "counter",
        "Total user and system CPU time spent in seconds.",
        cpu,
    );
    t.single(
        "process_resident_memory_bytes",
        "gauge",
        "Resident memory size in bytes.",
        num(21) * page,
    );
    t.single(
        "process_virtual_memory_bytes",
        "gauge",
        "Virtual memory size in bytes.",
        num(20),
    );
    t.single(
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since unix epoch in seconds.",
        boot + num(19) / ticks,
    );
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        t.single(
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            fds.count(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Label values are escaped, counters end in `_total`, whole numbers stay whole.
    #[test]
    fn families_are_encoded_as_prometheus_reads_them() {
        let mut t = Text::default();
        t.single("x_bytes_total", "counter", "Bytes.", 99u64);
        t.single("x_alive", "gauge", "Alive.", 2u64);
        t.family("x_rate", "gauge", "Rate.");
        t.sample("x_rate", &[("job_id", "7"), ("materials", "a\"b\\c")], 2.5);
        let text = t.into_string();
        for line in [
            "# HELP x_bytes Bytes.",
            "# TYPE x_bytes counter",
            "x_bytes_total 99",
            "x_alive 2",
            r#"x_rate{job_id="7",materials="a\"b\\c"} 2.5"#,
            "# EOF",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing from\n{text}");
        }
    }

    /// This process's own metrics are there, with plausible values.
    #[test]
    fn process_metrics_are_read_from_proc() {
        let mut t = Text::default();
        process_metrics(&mut t);
        let text = t.into_string();
        let value = |name: &str| -> f64 {
            let line = text
                .lines()
                .find(|l| l.starts_with(&format!("{name} ")))
                .expect(name);
            line.rsplit(' ').next().unwrap().parse().unwrap()
        };
        assert!(value("process_resident_memory_bytes") > 1e5, "{text}");
        assert!(value("process_start_time_seconds") > 1.7e9, "{text}");
        assert!(value("process_open_fds") >= 3.0, "{text}");
        assert!(value("process_cpu_seconds_total") >= 0.0, "{text}");
    }
}
