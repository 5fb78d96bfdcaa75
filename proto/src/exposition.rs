//! The Prometheus text exposition format (0.0.4), for the coordinator's and the workers'
//! metrics endpoints, and the standard `process_*` metrics of the process serving them.

use std::fmt::{Display, Write};

/// The content type of the text exposition format.
pub const CONTENT_TYPE_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Text in the exposition format, one metric family at a time.
#[derive(Debug, Default)]
pub struct Text(String);

impl Text {
    pub fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}");
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
    }

    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Display) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let _ = write!(self.0, "{k}=\"{}\"", escape_label(v));
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }

    /// The text so far.
    pub fn into_string(self) -> String {
        self.0
    }

    /// A family with one unlabelled sample.
    pub fn single(&mut self, name: &str, kind: &str, help: &str, value: impl Display) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }
}

/// A label value with `\`, `"` and line feeds escaped, as the format asks.
fn escape_label(v: &str) -> String {
    v.replace('\\', r"\\").replace('"', "\\\"").replace('\n', r"\n")
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

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape_label("a\nb"), r"a\nb");
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
