//! Prometheus metrics of the coordinator: `GET /metrics` in the Prometheus text exposition
//! format (version 0.0.4), served by a small axum router beside the gRPC service
//! ([`crate::service::serve_with_metrics`]). Every other path is 404.
//!
//! The counters ([`Counters`]) count since this coordinator process started (a restart starts
//! them again at 0, as Prometheus expects of a counter); the gauges and the per-job values are
//! read from the scheduler when scraped. Per-job series carry the labels `job` (the id) and
//! `materials` (the materials submitted, comma-separated).

use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::header::CONTENT_TYPE;
use axum::routing::get;
use zermelo_proto as pb;

pub use zermelo_proto::exposition::CONTENT_TYPE_TEXT;
use zermelo_proto::exposition::{process_metrics, Text};

/// Counters of the coordinator process, bumped where the events happen.
#[derive(Debug, Default)]
pub struct Counters {
    /// Slice bytes (the `data` of chunks) received in UploadSlice, refused ones included.
    pub bytes_uploaded: AtomicU64,
    /// Slice bytes sent in FetchSlice.
    pub bytes_fetched: AtomicU64,
    /// Bytes the parts of slices solved in parts gave each other through Meet (the `data` of
    /// its chunks, counted once, as they came in).
    pub bytes_met: AtomicU64,
    /// Uploaded slices refused because their bytes do not decode or do not match their hash.
    pub uploads_refused: AtomicU64,
    /// Slices not served because the stored copy failed its check.
    pub downloads_refused: AtomicU64,
    /// Stored copies found damaged and written again from their material's table.
    pub slices_repaired: AtomicU64,
    /// Stored slices found lost with no table holding them, and of them those solved again.
    pub slices_lost: AtomicU64,
    pub slices_resolved: AtomicU64,
    /// Uploads and completions refused as not allowed: no live lease of the caller for that
    /// task, or a slice already finished.
    pub not_allowed: AtomicU64,
    /// Uploaded slices checked by the independent verifier, and the positions it re-derived.
    pub slices_checked: AtomicU64,
    pub positions_derived: AtomicU64,
    /// Uploaded slices too large to hold whole here, checked as they streamed in.
    pub slices_streamed: AtomicU64,
    /// Uploaded slices that failed the check (their workers are refused from then on).
    pub uploads_failed_check: AtomicU64,
    /// Tasks leased to a worker.
    pub leases_granted: AtomicU64,
    /// Leases that ran out (or whose worker was forgotten): their tasks are leased again.
    pub leases_expired: AtomicU64,
    /// Leases revoked because another worker finished their slices first.
    pub leases_revoked: AtomicU64,
    /// Slices finished for the first time, and their positions.
    pub slices_solved: AtomicU64,
    pub positions_solved: AtomicU64,
    /// Records appended (durably) to the journal.
    pub journal_records: AtomicU64,
    /// Under `--verify all`: slices verified whole by a second worker; verifications that
    /// found a slice wrong (confirmed here: its solver refused, the task solved again); and
    /// verdicts not confirmed here (their verifier refused).
    pub slices_verified: AtomicU64,
    pub verifications_failed: AtomicU64,
    pub verdicts_refuted: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// What a scrape shows: the jobs as `JobStatus` reports them, the gauges, and the counters.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// `None` when the coordinator can take work; else why not (a broken journal).
    pub unhealthy: Option<String>,
    pub jobs: Vec<pb::JobInfo>,
    pub workers_alive: u64,
    pub leases_outstanding: u64,
    pub counters: CounterValues,
}

/// The values of [`Counters`] at one moment.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CounterValues {
    pub bytes_uploaded: u64,
    pub bytes_fetched: u64,
    pub bytes_met: u64,
    pub uploads_refused: u64,
    pub downloads_refused: u64,
    pub slices_repaired: u64,
    pub slices_lost: u64,
    pub slices_resolved: u64,
    pub not_allowed: u64,
    pub slices_checked: u64,
    pub positions_derived: u64,
    pub slices_streamed: u64,
    pub uploads_failed_check: u64,
    pub leases_granted: u64,
    pub leases_expired: u64,
    pub leases_revoked: u64,
    pub slices_solved: u64,
    pub positions_solved: u64,
    pub journal_records: u64,
    pub slices_verified: u64,
    pub verifications_failed: u64,
    pub verdicts_refuted: u64,
}

impl From<&Counters> for CounterValues {
    fn from(c: &Counters) -> CounterValues {
        CounterValues {
            bytes_uploaded: Counters::get(&c.bytes_uploaded),
            bytes_fetched: Counters::get(&c.bytes_fetched),
            bytes_met: Counters::get(&c.bytes_met),
            uploads_refused: Counters::get(&c.uploads_refused),
            downloads_refused: Counters::get(&c.downloads_refused),
            slices_repaired: Counters::get(&c.slices_repaired),
            slices_lost: Counters::get(&c.slices_lost),
            slices_resolved: Counters::get(&c.slices_resolved),
            not_allowed: Counters::get(&c.not_allowed),
            slices_checked: Counters::get(&c.slices_checked),
            positions_derived: Counters::get(&c.positions_derived),
            slices_streamed: Counters::get(&c.slices_streamed),
            uploads_failed_check: Counters::get(&c.uploads_failed_check),
            leases_granted: Counters::get(&c.leases_granted),
            leases_expired: Counters::get(&c.leases_expired),
            leases_revoked: Counters::get(&c.leases_revoked),
            slices_solved: Counters::get(&c.slices_solved),
            positions_solved: Counters::get(&c.positions_solved),
            journal_records: Counters::get(&c.journal_records),
            slices_verified: Counters::get(&c.slices_verified),
            verifications_failed: Counters::get(&c.verifications_failed),
            verdicts_refuted: Counters::get(&c.verdicts_refuted),
        }
    }
}

/// The exposition text of a snapshot.
pub fn render(s: &Snapshot) -> String {
    let mut t = Text::default();
    let c = &s.counters;
    t.single(
        "zermelo_workers_alive",
        "gauge",
        "Workers with a live registration (heard from within the worker timeout).",
        s.workers_alive,
    );
    t.single(
        "zermelo_leases_outstanding",
        "gauge",
        "Leases held by workers now (not expired, revoked or completed).",
        s.leases_outstanding,
    );
    t.single(
        "zermelo_leases_granted_total",
        "counter",
        "Tasks leased to workers.",
        c.leases_granted,
    );
    t.single(
        "zermelo_leases_expired_total",
        "counter",
        "Leases that ran out or whose worker was lost; their tasks are leased again.",
        c.leases_expired,
    );
    t.single(
        "zermelo_leases_revoked_total",
        "counter",
        "Leases revoked because their slices were finished under another lease.",
        c.leases_revoked,
    );
    t.single(
        "zermelo_slices_solved_total",
        "counter",
        "Slices finished for the first time, over every job.",
        c.slices_solved,
    );
    t.single(
        "zermelo_positions_solved_total",
        "counter",
        "Positions of the slices finished for the first time; rate() gives positions per second.",
        c.positions_solved,
    );
    t.single(
        "zermelo_slice_bytes_uploaded_total",
        "counter",
        "Slice bytes received from workers in UploadSlice (refused slices included).",
        c.bytes_uploaded,
    );
    t.single(
        "zermelo_slice_bytes_downloaded_total",
        "counter",
        "Slice bytes sent to workers and clients in FetchSlice.",
        c.bytes_fetched,
    );
    t.single(
        "zermelo_part_bytes_met_total",
        "counter",
        "Bytes the parts of slices solved across workers gave each other through Meet.",
        c.bytes_met,
    );
    t.single(
        "zermelo_corrupt_uploads_refused_total",
        "counter",
        "Uploaded slices refused because they do not decode or do not match their content hash.",
        c.uploads_refused,
    );
    t.single(
        "zermelo_requests_not_allowed_total",
        "counter",
        "Uploads and completions refused: no live lease of the caller for that task, or a slice already finished.",
        c.not_allowed,
    );
    t.single(
        "zermelo_uploads_checked_total",
        "counter",
        "Uploaded slices checked by the independent verifier (range, legality, a sample re-derived) before they were accepted.",
        c.slices_checked,
    );
    t.single(
        "zermelo_positions_rederived_total",
        "counter",
        "Sampled positions of uploaded slices re-derived from their successors by the independent verifier.",
        c.positions_derived,
    );
    t.single(
        "zermelo_uploads_streamed_total",
        "counter",
        "Uploaded slices too large to hold whole on the coordinator (over 2^27 positions), checked as they streamed in.",
        c.slices_streamed,
    );
    t.single(
        "zermelo_uploads_failed_check_total",
        "counter",
        "Uploaded slices whose values failed the check; each refused, and its worker with it.",
        c.uploads_failed_check,
    );
    t.single(
        "zermelo_corrupt_downloads_refused_total",
        "counter",
        "Slices not served because the stored copy failed its check (and could not be repaired from a table).",
        c.downloads_refused,
    );
    t.single(
        "zermelo_slices_repaired_total",
        "counter",
        "Stored slices found damaged and written again from their material's table (the same content hash).",
        c.slices_repaired,
    );
    t.single(
        "zermelo_slices_lost_total",
        "counter",
        "Stored slices found damaged or gone with no table holding them: each is solved again by a worker.",
        c.slices_lost,
    );
    t.single(
        "zermelo_slices_solved_again_total",
        "counter",
        "Lost slices solved again by a worker, with the content hash they were recorded with.",
        c.slices_resolved,
    );
    t.single(
        "zermelo_journal_records_total",
        "counter",
        "Records written durably to the journal (jobs taken and slices finished).",
        c.journal_records,
    );
    t.single(
        "zermelo_slices_verified_total",
        "counter",
        "Solved slices verified whole by a worker other than their solver (--verify all) before they were finished.",
        c.slices_verified,
    );
    t.single(
        "zermelo_verifications_failed_total",
        "counter",
        "Verifications that found a slice wrong, confirmed by the coordinator: the solver is refused, the task solved again.",
        c.verifications_failed,
    );
    t.single(
        "zermelo_verdicts_refuted_total",
        "counter",
        "Verifiers' claims of a wrong value that the coordinator's own re-derivation refuted: the verifier is refused.",
        c.verdicts_refuted,
    );
    type Field = fn(&pb::JobInfo) -> f64;
    let per_job: [(&str, &str, Field); 7] = [
        ("zermelo_job_slices_done", "Slices of the job finished.", |j| {
            j.slices_done as f64
        }),
        (
            "zermelo_job_slices_total",
            "Slices in the job's plan, sub-tables included.",
            |j| j.slices_total as f64,
        ),
        (
            "zermelo_job_positions_done",
            "Positions of the job's finished slices.",
            |j| j.positions_done as f64,
        ),
        (
            "zermelo_job_positions_total",
            "Positions in the job's plan.",
            |j| j.positions_total as f64,
        ),
        (
            "zermelo_job_positions_per_second",
            "Positions of the job finished per second, over the last minute.",
            |j| j.positions_per_second,
        ),
        (
            "zermelo_job_done",
            "1 when every slice of the job is finished and its tables are written.",
            |j| f64::from(u8::from(j.state == pb::JobState::Done as i32)),
        ),
        ("zermelo_job_failed", "1 when the job failed.", |j| {
            f64::from(u8::from(j.state == pb::JobState::Failed as i32))
        }),
    ];
    for (name, help, field) in per_job {
        t.family(name, "gauge", help);
        for j in &s.jobs {
            let id = j.job_id.to_string();
            let materials = j.materials.join(",");
            // Not `job`: Prometheus gives every series of a scrape a `job` label of its own.
            t.sample(name, &[("job_id", &id), ("materials", &materials)], field(j));
        }
    }
    process_metrics(&mut t);
    t.into_string()
}

/// What the endpoint reads a snapshot from (the coordinator's state, at each request).
pub type SnapshotSource = std::sync::Arc<dyn Fn() -> Snapshot + Send + Sync>;

/// The router of the metrics endpoint: `GET /metrics`, and `GET /health` (200 `ok`, or 503 with
/// the reason when the coordinator cannot take work); anything else is 404 (or 405 for another
/// method).
pub fn router(snapshot: SnapshotSource) -> axum::Router {
    let health = snapshot.clone();
    axum::Router::new()
        .route(
            "/metrics",
            get(move || {
                let snapshot = snapshot.clone();
                async move { ([(CONTENT_TYPE, CONTENT_TYPE_TEXT)], render(&snapshot())) }
            }),
        )
        .route(
            "/health",
            get(move || {
                let health = health.clone();
                async move {
                    match health().unhealthy {
                        None => (axum::http::StatusCode::OK, "ok\n".to_owned()),
                        Some(why) => (axum::http::StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
                    }
                }
            }),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_coordinator_says_it_has_no_worker() {
        let text = render(&Snapshot::default());
        assert!(text.contains("# TYPE zermelo_workers_alive gauge\nzermelo_workers_alive 0\n"));
    }

    #[test]
    fn a_job_is_rendered_with_its_labels() {
        let s = Snapshot {
            unhealthy: None,
            jobs: vec![pb::JobInfo {
                job_id: 7,
                materials: vec!["KPvK".into(), "KQvKR".into()],
                state: pb::JobState::Done as i32,
                slices_done: 3,
                slices_total: 3,
                positions_done: 10,
                positions_total: 10,
                positions_per_second: 2.5,
                error: String::new(),
            }],
            workers_alive: 2,
            leases_outstanding: 1,
            counters: CounterValues {
                bytes_uploaded: 99,
                ..CounterValues::default()
            },
        };
        let text = render(&s);
        for line in [
            "zermelo_workers_alive 2",
            "zermelo_leases_outstanding 1",
            "zermelo_slice_bytes_uploaded_total 99",
            "zermelo_job_slices_done{job_id=\"7\",materials=\"KPvK,KQvKR\"} 3.0",
            "zermelo_job_positions_per_second{job_id=\"7\",materials=\"KPvK,KQvKR\"} 2.5",
            "zermelo_job_done{job_id=\"7\",materials=\"KPvK,KQvKR\"} 1.0",
            "zermelo_job_failed{job_id=\"7\",materials=\"KPvK,KQvKR\"} 0.0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing from\n{text}");
        }
        // Every sample line follows its family's HELP and TYPE lines (a counter's family is
        // named without `_total`).
        let mut declared = std::collections::HashSet::new();
        for l in text.lines() {
            if let Some(rest) = l.strip_prefix("# TYPE ") {
                declared.insert(rest.split(' ').next().unwrap().to_owned());
            } else if !l.starts_with('#') {
                let name = l.split(['{', ' ']).next().unwrap();
                let family = name.strip_suffix("_total").unwrap_or(name);
                assert!(
                    declared.contains(name) || declared.contains(family),
                    "{name} has no TYPE line before it"
                );
            }
        }
    }
}
