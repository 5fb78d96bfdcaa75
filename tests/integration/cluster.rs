//! The cluster on loopback: real `zermelo` processes talking gRPC on 127.0.0.1.
//!
//! Every process is a [`Proc`]: its stderr goes to a log file in the test's temp dir, it is
//! killed when the test ends (even by a panic), and every wait has a timeout.

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use zermelo_proto as pb;

use crate::common::*;

/// A child process with a log file, killed on drop.
struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn spawn(args: &[&str], log: PathBuf, env: &[(&str, &str)]) -> Proc {
        let file = File::create(&log).expect("log file");
        let mut cmd = zermelo();
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file);
        cmd.env_remove("ZERMELO_TOKEN").env("ZERMELO_LOG", "info");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("spawn zermelo");
        Proc { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for the exit, at most `limit`; panics (showing the log) after it.
    fn wait(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "{:?} still running after {limit:?}; log:\n{}",
                    self.log,
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn table_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".zmt"))
        .collect();
    names.sort();
    names
}

/// Runs `zermelo cluster --workers 2 --threads 1 MATERIAL...` into `tmp/cluster` and returns that
/// directory, failing with the cluster's log if it does not finish in `timeout`.
fn cluster_build(tmp: &Path, materials: &[&str], timeout: Duration) -> PathBuf {
    let dir = tmp.join("cluster");
    let mut args = vec!["cluster", "--workers", "2", "--threads", "1"];
    args.extend_from_slice(materials);
    args.extend_from_slice(&["--tables", dir.to_str().unwrap()]);
    let mut cluster = Proc::spawn(&args, tmp.join("cluster.log"), &[]);
    let status = cluster.wait(timeout);
    assert!(
        status.success(),
        "zermelo cluster failed ({status}):\n{}",
        cluster.log()
    );
    dir
}

/// Asserts that `cluster` holds exactly the tables `materials`, each byte-identical to the one
/// in `solve`, and nothing else.
fn assert_same_tables(cluster: &Path, solve: &Path, materials: &[&str]) {
    let expected: Vec<String> = materials.iter().map(|m| format!("{m}.zmt")).collect();
    assert_eq!(table_files(cluster), expected, "the cluster wrote other tables");
    for n in &expected {
        let a = std::fs::read(solve.join(n)).unwrap();
        let b = std::fs::read(cluster.join(n)).unwrap();
        assert!(
            a == b,
            "{n} differs between `zermelo solve` and `zermelo cluster`"
        );
    }
    assert_eq!(
        std::fs::read_dir(cluster).unwrap().count(),
        expected.len(),
        "more than the tables in the tables directory"
    );
}

/// Acceptance 1 (KPvK): a coordinator and two workers build every table byte for byte as
/// `zermelo solve` does.
#[test]
fn cluster_of_two_workers_builds_kpk_byte_identical_to_solve() {
    let tmp = tempfile::tempdir().unwrap();
    let cluster_dir = cluster_build(tmp.path(), &["KPvK"], Duration::from_secs(60));
    let solve_dir = tmp.path().join("solve");
    assert_ok(&run(&["solve", "KPvK", "--tables", solve_dir.to_str().unwrap()]));
    assert_same_tables(
        &cluster_dir,
        &solve_dir,
        &["KBvK", "KNvK", "KPvK", "KQvK", "KRvK"],
    );
}

/// Every table `zermelo solve KPvK KPvKP` writes: the two materials and all their sub-tables.
const KPKP_TABLES: &[&str] = &[
    "KBvK", "KBvKB", "KBvKN", "KBvKP", "KNvK", "KNvKN", "KNvKP", "KPvK", "KPvKP", "KQvK", "KQvKB", "KQvKN",
    "KQvKP", "KQvKQ", "KQvKR", "KRvK", "KRvKB", "KRvKN", "KRvKP", "KRvKR",
];

/// Acceptance 1 (KPvK and KPvKP): a coordinator and two workers build KPvK, KPvKP and every
/// sub-table byte for byte as `zermelo solve` does (the solve side is the shared tables
/// directory), and `zermelo verify` passes on the cluster's files.
#[test]
fn cluster_of_two_workers_builds_kpkp_byte_identical_to_solve_and_verified() {
    let tmp = tempfile::tempdir().unwrap();
    let cluster_dir = cluster_build(tmp.path(), &["KPvK", "KPvKP"], Duration::from_secs(600));
    let solve_dir = tables_with(&["KPvK", "KPvKP"]);
    assert_same_tables(&cluster_dir, &solve_dir, KPKP_TABLES);

    let mut args = vec!["verify", "--tables", cluster_dir.to_str().unwrap()];
    args.extend_from_slice(KPKP_TABLES);
    let o = run(&args);
    assert_ok(&o);
    let out = stdout(&o);
    for m in KPKP_TABLES {
        assert!(
            out.lines().any(|l| l.starts_with(&format!("{m}: ok"))),
            "{m} not verified:\n{out}"
        );
    }
}

/// A coordinator on a free port with token `right`, answering `status`.
fn coordinator(tmp: &Path) -> (Proc, String) {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let url = format!("http://{listen}");
    let tables = tmp.join("tables");
    let proc = Proc::spawn(
        &[
            "coordinator",
            "--listen",
            &listen,
            "--tables",
            tables.to_str().unwrap(),
        ],
        tmp.join("coordinator.log"),
        &[("ZERMELO_TOKEN", "right")],
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let o = zermelo()
            .args(["status", "--coordinator", &url, "--token", "right"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        if o.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the coordinator does not answer; log:\n{}",
            proc.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    (proc, url)
}

/// Acceptance 5: a wrong or missing token is refused with `unauthenticated` (over gRPC, by
/// `zermelo status`, and by a worker, which stops); an old protocol version is refused with a
/// message naming both versions.
#[test]
fn wrong_token_is_refused_with_unauthenticated() {
    let tmp = tempfile::tempdir().unwrap();
    let (coord, url) = coordinator(tmp.path());

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        for token in [Some("wrong"), Some("righ"), None] {
            let mut client = zermelo_worker::client::connect(&url, token).unwrap();
            let call = client.job_status(pb::JobStatusRequest { job_id: None });
            let err = tokio::time::timeout(Duration::from_secs(10), call)
                .await
                .expect("an answer")
                .unwrap_err();
            assert_eq!(
                err.code(),
                tonic::Code::Unauthenticated,
                "token {token:?}: {err:?}"
            );
        }
        let mut client = zermelo_worker::client::connect(&url, Some("right")).unwrap();
        let old = pb::RegisterRequest {
            worker_name: "old".into(),
            protocol_version: pb::PROTOCOL_VERSION + 1,
            cores: 1,
        };
        let answer = client.register(old).await.unwrap().into_inner();
        let Some(pb::register_response::Result::Refused(refused)) = answer.result else {
            panic!("a worker of another protocol version was not refused: {answer:?}");
        };
        let (theirs, ours) = (pb::PROTOCOL_VERSION + 1, pb::PROTOCOL_VERSION);
        assert!(
            refused.reason.contains(&format!("version {theirs}")),
            "{}",
            refused.reason
        );
        assert!(
            refused.reason.contains(&format!("version {ours}")),
            "{}",
            refused.reason
        );
    });

    let o = zermelo()
        .args(["status", "--coordinator", &url, "--token", "wrong"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("unauthenticated"), "{}", stderr(&o));

    let cache = tmp.path().join("cache");
    let mut worker = Proc::spawn(
        &[
            "worker",
            "--coordinator",
            &url,
            "--cache",
            cache.to_str().unwrap(),
            "--threads",
            "1",
        ],
        tmp.path().join("worker.log"),
        &[("ZERMELO_TOKEN", "wrong")],
    );
    let status = worker.wait(Duration::from_secs(20));
    assert_eq!(status.code(), Some(2), "worker log:\n{}", worker.log());
    assert!(
        worker.log().contains("unauthenticated"),
        "worker log:\n{}",
        worker.log()
    );
    drop(coord);
}

/// The job's progress as `zermelo status JOB` reports it: (state, slices done, slices total).
fn job_progress(url: &str, token: &str, job: &str) -> Option<(String, u64, u64)> {
    let o = zermelo()
        .args(["status", "--coordinator", url, "--token", token, job])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    if !o.status.success() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).ok()?;
    let j = &v["jobs"][0];
    Some((
        j["state"].as_str()?.to_owned(),
        j["slices_done"].as_u64()?,
        j["slices_total"].as_u64()?,
    ))
}

/// Polls the job until `until` holds (panics with the logs after `limit`).
fn wait_job(
    url: &str,
    job: &str,
    limit: Duration,
    procs: &[&Proc],
    until: impl Fn(&str, u64, u64) -> bool,
) -> (u64, u64) {
    let deadline = Instant::now() + limit;
    loop {
        if let Some((state, done, total)) = job_progress(url, "k9", job) {
            if until(&state, done, total) {
                return (done, total);
            }
        }
        if Instant::now() > deadline {
            let logs: Vec<String> = procs
                .iter()
                .map(|p| format!("--- {:?}\n{}", p.log, p.log()))
                .collect();
            panic!("job {job} not there after {limit:?}\n{}", logs.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Acceptance 2 and 3: kill -9 a worker in the middle of a job, then the coordinator; the
/// coordinator restarted on the same directories resumes from its journal, and the job
/// finishes with every table byte-identical to `zermelo solve`.
#[test]
fn kill_9_of_a_worker_and_of_the_coordinator_mid_job_still_gives_identical_tables() {
    let tmp = tempfile::tempdir().unwrap();
    let (tables, state) = (tmp.path().join("tables"), tmp.path().join("state"));
    let listen = format!("127.0.0.1:{}", free_port());
    let url = format!("http://{listen}");
    let coordinator_args = [
        "coordinator",
        "--listen",
        &listen,
        "--tables",
        tables.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
        "--lease-ttl",
        "2",
    ];
    let env = [("ZERMELO_TOKEN", "k9")];
    let mut coord = Proc::spawn(&coordinator_args, tmp.path().join("coordinator-1.log"), &env);
    let workers: Vec<Proc> = (0..2)
        .map(|i| {
            let cache = tmp.path().join(format!("cache-{i}"));
            let args = [
                "worker",
                "--coordinator",
                &url,
                "--cache",
                cache.to_str().unwrap(),
                "--threads",
                "1",
            ];
            Proc::spawn(&args, tmp.path().join(format!("worker-{i}.log")), &env)
        })
        .collect();
    let mut workers = workers.into_iter();
    let (mut killed, survivor) = (workers.next().unwrap(), workers.next().unwrap());
    let deadline = Instant::now() + Duration::from_secs(20);
    let job = loop {
        let o = zermelo()
            .args(["submit", "--coordinator", &url, "--token", "k9", "KNvKP"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        if o.status.success() {
            break stdout(&o).trim().to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "submit failed: {}\n{}",
            stderr(&o),
            coord.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    };

    let (done, total) = wait_job(
        &url,
        &job,
        Duration::from_secs(30),
        &[&coord, &killed, &survivor],
        |_, d, _| d >= 1,
    );
    assert!(done < total, "the job finished before anything was killed");
    killed.child.kill().unwrap(); // SIGKILL
    killed.child.wait().unwrap();
    let (before_coordinator_kill, _) = wait_job(
        &url,
        &job,
        Duration::from_secs(30),
        &[&coord, &survivor],
        |s, d, _| d > done || s == "done",
    );
    coord.child.kill().unwrap();
    coord.child.wait().unwrap();

    let coord = Proc::spawn(&coordinator_args, tmp.path().join("coordinator-2.log"), &env);
    wait_job(
        &url,
        &job,
        Duration::from_secs(60),
        &[&coord, &survivor],
        |s, _, _| s == "done",
    );
    let replayed = coord.log();
    assert!(replayed.contains("journal replayed"), "{replayed}");
    assert!(before_coordinator_kill > 0);

    let solve_dir = tmp.path().join("solve");
    assert_ok(&run(&["solve", "KNvKP", "--tables", solve_dir.to_str().unwrap()]));
    let names = table_files(&solve_dir);
    assert!(names.contains(&"KNvKP.zmt".to_owned()), "{names:?}");
    assert_eq!(table_files(&tables), names);
    for n in &names {
        let a = std::fs::read(solve_dir.join(n)).unwrap();
        let b = std::fs::read(tables.join(n)).unwrap();
        assert!(
            a == b,
            "{n} differs between `zermelo solve` and the cluster that lost a worker and its coordinator"
        );
    }
}
