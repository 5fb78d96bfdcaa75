//! Bad input gives one clear line and a non-zero exit, never a panic.

use crate::common::*;

fn assert_clean_failure(o: &std::process::Output, code: i32, needle: &str) {
    let err = stderr(o);
    assert_eq!(
        o.status.code(),
        Some(code),
        "stdout: {}\nstderr: {err}",
        stdout(o)
    );
    assert!(err.contains(needle), "stderr should mention {needle:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!err.contains("RUST_BACKTRACE"), "{err}");
}

#[test]
fn unknown_material_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(&["solve", "KXvK", "--tables", dir.path().to_str().unwrap()]);
    assert_clean_failure(
        &o,
        2,
        "zermelo: MATERIAL: material name 'KXvK' has an unknown piece letter 'x'",
    );
    assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
    // Every command reads its materials the same way, before any work.
    for args in [
        vec!["verify", "--tables", "/nonexistent", "KXvK"],
        vec!["dtz", "--tables", "/nonexistent", "KXvK"],
        vec!["materials", "--tables", "/nonexistent", "KXvK"],
        vec!["submit", "--coordinator", "http://127.0.0.1:1", "KXvK"],
        vec!["cluster", "--tables", "/nonexistent", "KXvK"],
        vec!["bench", "KXvK"],
    ] {
        let o = run(&args);
        assert_clean_failure(
            &o,
            2,
            "MATERIAL: material name 'KXvK' has an unknown piece letter",
        );
        assert_eq!(stderr(&o).trim().lines().count(), 1, "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn material_without_king_or_too_many_men_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    assert_clean_failure(&run(&["solve", "QvK", "--tables", d]), 2, "no king");
    assert_clean_failure(&run(&["solve", "KQRBNvKRPP", "--tables", d]), 2, "at most 7");
    // Eight men: refused with the size of the table (layout 3: 462 king pairs, six lone men).
    let o = run(&["solve", "KQRBNvKRN", "--tables", d]);
    assert_clean_failure(&o, 2, "at most 7 men");
    let indices = 2 * 462 * 64u64.pow(6);
    assert!(
        stderr(&o).contains(&format!("would hold {indices} positions")),
        "{}",
        stderr(&o)
    );
    assert!(
        std::fs::read_dir(d).map_or(true, |mut e| e.next().is_none()),
        "something was written"
    );
    assert_clean_failure(&run(&["solve", "KvK", "--tables", d]), 2, "only the two kings");
    assert_clean_failure(&run(&["stats", "--tables", d, "KQvK"]), 2, "not in");
    // Six men are tables like any other: a missing one is named, not refused for its size.
    assert_clean_failure(&run(&["stats", "--tables", d, "KRNvKNN"]), 2, "KRNvKNN is not in");
    let o = run(&["probe", "--tables", d, "8/8/8/3k4/8/1n1n4/8/KRN5 w - - 0 1"]);
    assert!(
        stdout(&o).contains("KRNvKNN") && stdout(&o).contains("not in"),
        "{}",
        stdout(&o)
    );
    assert_clean_failure(&run(&["verify", "--tables", d, "KQvK"]), 2, "KQvK");
}

/// A build past `--memory` is refused before any work, naming what it needs; within it, it runs.
#[test]
fn a_memory_budget_too_small_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    // `solve` or `verify` of KRvK on 1 thread within `memory`.
    let within = |command: &str, memory: &str| {
        run(&[
            command,
            "KRvK",
            "--tables",
            d,
            "--threads",
            "1",
            "--memory",
            memory,
        ])
    };
    let solve_in = |memory: &str| within("solve", memory);
    let o = solve_in("100KiB");
    assert_clean_failure(&o, 2, "building KRvK needs about");
    // KRvK (pawnless, one slice of 2 * 462 * 64 = 59,136 positions): 1 + 1/64 + 1/8 byte of
    // state and at most a byte of log a position (59,136 + 924 + 7,392 + 59,136); per thread
    // its values written out (2 bytes each), 1 MiB of writer blocks and 4 MiB of cached blocks
    // of the tables it reads: 118,272 + 1,048,576 + 4,194,304 = 5,361,152 (5.1 MiB). In all
    // 5,487,740 bytes (5.2 MiB).
    assert!(
        stderr(&o).contains("1 slice(s) of up to 59136 positions at once, and 5.1 MiB of buffers a thread"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("needs about 5.2 MiB"), "{}", stderr(&o));
    // Paged through the build folder it needs the summaries (a byte per 64 positions: 924),
    // 48 of its 924 K-slices of 64 positions, each counted as the pages it may be on, two of
    // the state and two of the won bitmap (48 * 4 * 4,096 = 786,432), and the same buffers:
    // 6,148,508 bytes (5.9 MiB), more than in memory.
    assert!(
        stderr(&o).contains("or at least 5.9 MiB with its state paged through the build folder"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("budget is 100.0 KiB"), "{}", stderr(&o));
    assert!(!dir.path().join("KRvK.zmt").exists());
    let o = solve_in("6MiB");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(dir.path().join("KRvK.zmt").exists());
    // `verify` too: it holds half a slice (2 bytes an index: 2 * 29,568 = 59,136 bytes) and per
    // thread at least 4 blocks of successors and the block of its unit (5 * 65,536 values of 2
    // bytes = 655,360 bytes): 714,496 bytes (0.7 MiB) on 1 thread.
    let verify_in = |memory: &str| within("verify", memory);
    let o = verify_in("100KiB");
    assert_clean_failure(&o, 2, "verifying KRvK needs at least 0.7 MiB");
    assert!(stderr(&o).contains("budget is 0.1 MiB"), "{}", stderr(&o));
    let o = verify_in("1MiB");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("KRvK: ok"), "{}", stdout(&o));
    let o = run(&["solve", "KRvK", "--tables", d, "--memory", "lots"]);
    assert_clean_failure(&o, 2, "zermelo: --memory: \"lots\" is not a size");
    assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    let o = run(&["solve"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    for sub in ["solve", "probe", "stats", "verify", "bench"] {
        let o = run(&[sub, "--help"]);
        assert_eq!(o.status.code(), Some(0), "{sub} --help");
        assert!(stdout(&o).contains("Usage"), "{sub}");
    }
}

#[test]
fn probe_reports_bad_lines_and_goes_on() {
    // A directory with only KQvK: the shared one may hold KQvKQ, built for other tests.
    let shared = tables_with(&["KQvK"]);
    let own = tempfile::tempdir().unwrap();
    std::fs::copy(shared.join("KQvK.zmt"), own.path().join("KQvK.zmt")).unwrap();
    let d = own.path().to_str().unwrap();
    let input = "\
not a fen
4k3/8/8/8/8/8/8/R3K2R w KQ - 0 1
8/8/8/8/8/8/8/K6k w - - 0 1
k7/8/1K6/8/8/8/8/2Q5 w - - 0 1
kq6/8/1K6/8/8/8/8/2Q5 w - - 0 1
k7/8/1K6/8/8/8/8/2QQ4 b - - 0 1
8/8/8/8/8/8/8/KQRBNk1q w - - 0 1
8/8/8/8/8/8/8/KQRBNkqr w - - 0 1
";
    let o = run_with_stdin(&["probe", "--tables", d], input);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 8);
    assert!(lines[0]["error"].as_str().unwrap().contains("invalid FEN"));
    assert!(lines[1]["error"].as_str().unwrap().contains("castling"));
    assert_eq!(lines[2]["category"], "draw", "bare kings need no table");
    assert_eq!(lines[3]["category"], "win");
    assert!(
        lines[4]["error"].as_str().unwrap().contains("KQvKQ"),
        "{}",
        lines[4]
    );
    assert!(
        lines[5]["error"].as_str().unwrap().contains("KQQvK"),
        "{}",
        lines[5]
    );
    // Seven men are within what tables may hold: the table is missing, and named.
    assert!(
        lines[6]["error"].as_str().unwrap().contains("KQRBNvKQ"),
        "{}",
        lines[6]
    );
    assert!(
        lines[7]["error"].as_str().unwrap().contains("8 men"),
        "{}",
        lines[7]
    );
    assert!(!stderr(&o).contains("panicked"));
    // Each error once: in its JSON line, not again as a log line on stderr.
    assert!(
        !stderr(&o).contains("invalid FEN") && !stderr(&o).contains("castling"),
        "{}",
        stderr(&o)
    );
}

/// A line of stdin that is not UTF-8, or too long to be a FEN (50 MB), is answered with an error
/// line and the run goes on to the next lines (before, the first stopped the run, and a long line
/// was held whole in memory).
#[test]
fn probe_answers_non_utf8_and_overlong_lines_and_goes_on() {
    let shared = tables_with(&["KQvK"]);
    let own = tempfile::tempdir().unwrap();
    std::fs::copy(shared.join("KQvK.zmt"), own.path().join("KQvK.zmt")).unwrap();
    let d = own.path().to_str().unwrap();
    let mut input = b"k7/8/1K6/8/8/8/8/2Q5 w - - 0 1\n\xff\xfe not UTF-8\n".to_vec();
    input.extend(std::iter::repeat_n(b'a', 50 << 20));
    input.extend_from_slice(b"\nk7/8/1K6/8/8/8/8/2Q5 b - - 0 1");
    let o = run_with_stdin_bytes(&["probe", "--tables", d], &input);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4, "{}", stdout(&o));
    assert_eq!(lines[0]["category"], "win");
    assert_eq!(lines[1]["error"], "line 2 is not UTF-8");
    assert!(
        lines[2]["error"]
            .as_str()
            .unwrap()
            .contains("line 3 is longer than"),
        "{}",
        lines[2]
    );
    assert_eq!(
        lines[3]["category"], "loss",
        "the last line, with no newline, is read too"
    );
    assert!(!stderr(&o).contains("panicked"));
}

/// A lease TTL that would overflow the scheduler's clock (or none at all) is refused at start,
/// not turned into leases that expire at once.
#[test]
fn a_lease_ttl_out_of_range_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().to_str().unwrap();
    for ttl in ["18446744073709551615", "86401", "0"] {
        let o = run(&[
            "coordinator",
            "--listen",
            "127.0.0.1:0",
            "--tables",
            d,
            "--lease-ttl",
            ttl,
        ]);
        assert_eq!(o.status.code(), Some(2), "--lease-ttl {ttl}: {}", stderr(&o));
        assert!(stderr(&o).contains("--lease-ttl"), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("1..=86400") || stderr(&o).contains("86400"),
            "{}",
            stderr(&o)
        );
    }
}

/// A coordinator does not start with a token anyone could guess: empty, short, or the
/// examples' placeholder.
#[test]
fn a_weak_cluster_token_is_refused_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().to_str().unwrap();
    for (token, needle) in [
        ("", "0 characters"),
        ("change-me", "placeholder"),
        ("CHANGEME", "placeholder"),
        ("fifteen-chars-x", "15 characters"),
    ] {
        let o = zermelo()
            .args(["coordinator", "--listen", "127.0.0.1:0", "--tables", d])
            .env("ZERMELO_TOKEN", token)
            .output()
            .unwrap();
        assert_clean_failure(&o, 2, needle);
        assert!(stderr(&o).contains("openssl rand"), "{}", stderr(&o));
    }
}

#[test]
fn probe_without_tables_dir_fails_cleanly() {
    let o = run(&[
        "probe",
        "--tables",
        "/nonexistent/zermelo",
        "8/8/8/8/8/8/8/K6k w - - 0 1",
    ]);
    assert_clean_failure(&o, 2, "does not exist");
}

/// `zermelo worker --cache-size` takes sizes such as 512MiB or plain bytes; anything else is
/// refused before the worker starts, with one clear message and exit 2.
#[test]
fn a_bad_worker_cache_size_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    for (size, needle) in [
        ("12parsecs", "unknown unit"),
        ("GiB", "does not start with a number"),
        ("99999999999TiB", "does not fit in 64 bits"),
    ] {
        let o = run(&[
            "worker",
            "--coordinator",
            "http://127.0.0.1:9",
            "--cache",
            cache.to_str().unwrap(),
            "--cache-size",
            size,
        ]);
        assert_clean_failure(&o, 2, needle);
        assert!(stderr(&o).contains("--cache-size"), "{}", stderr(&o));
    }
    assert!(!cache.exists(), "the worker started");
    let help = stdout(&run(&["worker", "--help"]));
    assert!(
        help.contains("--cache-size <SIZE>") && help.contains("[default: 4GiB]"),
        "{help}"
    );
}

/// The coordinator's TLS and metrics flags: an unreadable file, a file that is not PEM, a key
/// without its certificate, a bad metrics address; and a client's CA file. One line, exit 2,
/// before anything listens.
#[test]
fn bad_tls_files_and_metrics_address_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tables = d.join("tables");
    let not_pem = d.join("not.pem");
    std::fs::write(&not_pem, "hello\n").unwrap();
    let (t, np) = (tables.to_str().unwrap(), not_pem.to_str().unwrap());
    let coordinator = |extra: &[&str]| {
        let mut args = vec!["coordinator", "--listen", "127.0.0.1:0", "--tables", t];
        args.extend_from_slice(extra);
        run(&args)
    };
    let one_line =
        |o: &std::process::Output| assert_eq!(stderr(o).trim().lines().count(), 1, "{}", stderr(o));

    let o = coordinator(&["--tls-cert", "/nonexistent/cert.pem", "--tls-key", np]);
    assert_clean_failure(&o, 2, "cannot read --tls-cert /nonexistent/cert.pem");
    one_line(&o);
    let o = coordinator(&["--tls-cert", np, "--tls-key", np]);
    assert_clean_failure(&o, 2, "no PEM certificate");
    one_line(&o);
    assert_clean_failure(&coordinator(&["--tls-key", np]), 2, "--tls-cert");
    let o = coordinator(&["--metrics-listen", "not-an-address"]);
    assert_clean_failure(&o, 2, "--metrics-listen");
    one_line(&o);

    let status = |extra: &[&str]| {
        let mut args = vec!["status", "--coordinator", "https://127.0.0.1:1"];
        args.extend_from_slice(extra);
        run(&args)
    };
    let o = status(&["--tls-ca", "/nonexistent/ca.pem"]);
    assert_clean_failure(&o, 2, "cannot read --tls-ca /nonexistent/ca.pem");
    one_line(&o);
    let o = status(&["--tls-ca", np]);
    assert_clean_failure(&o, 2, "no PEM certificate");
    one_line(&o);
    // An address without its scheme names the fix, for `status`, `submit` and `worker` alike.
    let cache = tempfile::tempdir().unwrap();
    let cache = cache.path().join("cache");
    for sub in ["status", "submit", "worker"] {
        let mut args = vec![sub, "--coordinator", "127.0.0.1:50999"];
        match sub {
            "submit" => args.push("KPvK"),
            "worker" => args.extend(["--cache", cache.to_str().unwrap()]),
            _ => {}
        }
        let o = run(&args);
        assert_clean_failure(&o, 2, "write http://127.0.0.1:50999");
        one_line(&o);
    }
    for sub in ["coordinator", "worker", "submit", "status"] {
        let o = run(&[sub, "--help"]);
        assert_eq!(o.status.code(), Some(0), "{sub} --help");
        let flag = if sub == "coordinator" {
            "--tls-cert"
        } else {
            "--tls-ca"
        };
        assert!(stdout(&o).contains(flag), "{sub} --help lacks {flag}");
    }
    assert!(stdout(&run(&["coordinator", "--help"])).contains("--metrics-listen"));
}

/// Without a terminal (here stderr is a pipe), a build logs its progress at a steady interval
/// (ZERMELO_PROGRESS_SECONDS, here 1 s): a long build is never silent between its start and
/// its end.
#[test]
fn a_build_without_a_terminal_logs_its_progress_at_a_steady_interval() {
    let dir = tempfile::tempdir().unwrap();
    let o = zermelo()
        .args([
            "solve",
            "--tables",
            dir.path().to_str().unwrap(),
            "KRvKP",
            "KQvKP",
        ])
        .env("ZERMELO_PROGRESS_SECONDS", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_ok(&o);
    let err = stderr(&o);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains(" progress ")).collect();
    assert!(!lines.is_empty(), "no progress line in {err}");
    let done: Vec<u64> = lines
        .iter()
        .map(|l| {
            let v = l.split("positions_done=").nth(1).expect("positions_done");
            v.split(' ').next().unwrap().parse().unwrap()
        })
        .collect();
    assert!(done.windows(2).all(|w| w[0] <= w[1]), "{lines:?}");
    assert!(
        lines.iter().all(|l| l.contains("positions=49094976")),
        "{lines:?}"
    );
}

/// The top-level help lists the commands a new user needs first (solve, probe, stats, verify,
/// analyse, squares) before the cluster's, each in one short line, and ends with examples.
#[test]
fn the_top_level_help_starts_with_the_everyday_commands_and_shows_examples() {
    let o = run(&["--help"]);
    assert_ok(&o);
    let help = stdout(&o);
    let at = |name: &str| {
        help.find(&format!("\n  {name} "))
            .unwrap_or_else(|| panic!("{name} not listed in {help}"))
    };
    let order = [
        "solve",
        "probe",
        "stats",
        "verify",
        "serve",
        "analyse",
        "squares",
        "bench",
        "cluster",
        "coordinator",
        "worker",
    ];
    assert!(order.windows(2).all(|w| at(w[0]) < at(w[1])), "{help}");
    let commands = &help[help.find("Commands:").unwrap()..help.find("Options:").unwrap()];
    assert!(commands.lines().all(|l| l.len() < 250), "{commands}");
    assert!(
        help.contains("Examples:") && help.contains("zermelo probe --tables"),
        "{help}"
    );
}

/// `--tables` takes a list of directories searched in order (tables are written to the first),
/// and ZERMELO_TABLES gives it when the flag is not there: a build reuses the complete tables of
/// the other directories instead of building them again, and probe, stats and verify read
/// across them. A missing table is reported with the whole list.
#[test]
fn tables_may_be_a_list_of_directories_or_come_from_the_environment() {
    // A directory of its own with KPvK (the shared one of the tests may hold KRvKP already).
    let base = tempfile::tempdir().unwrap();
    assert_ok(&run(&[
        "solve",
        "--tables",
        base.path().to_str().unwrap(),
        "KPvK",
    ]));
    let own = tempfile::tempdir().unwrap();
    let list = format!("{}:{}", own.path().display(), base.path().display());
    let o = run(&["solve", "--tables", &list, "KRvKP"]);
    assert_ok(&o);
    assert!(own.path().join("KRvKP.zmt").exists());
    assert!(
        !own.path().join("KPvK.zmt").exists(),
        "KPvK is reused from the second directory"
    );
    let with_env = |args: &[&str]| {
        zermelo()
            .args(args)
            .env("ZERMELO_TABLES", &list)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let o = with_env(&["verify", "KRvKP", "KPvK"]);
    assert_ok(&o);
    assert!(
        stdout(&o).contains("KRvKP: ok") && stdout(&o).contains("KPvK: ok"),
        "{}",
        stdout(&o)
    );
    let o = with_env(&[
        "probe",
        "8/8/8/8/8/8/4P3/K1k5 w - - 0 1",
        "8/8/8/8/8/8/1r2P3/K1k5 w - - 0 1",
    ]);
    assert_ok(&o);
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        (lines[0]["category"].as_str(), lines[0]["dtm"].as_i64()),
        (Some("win"), Some(25))
    );
    assert!(lines[1]["category"].is_string(), "{}", lines[1]);
    let o = with_env(&["stats", "KPvK"]);
    assert_ok(&o);
    let o = with_env(&["probe", "8/8/8/8/8/8/4P3/K1kq4 w - - 0 1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains(&format!("is not in {list}")),
        "{}",
        stdout(&o)
    );
}
