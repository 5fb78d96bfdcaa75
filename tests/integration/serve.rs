//! `zermelo serve`: a real server process on 127.0.0.1, asked over real HTTP/1.1 connections.
//! It answers `GET /standard` exactly as `probe` does for a thousand random positions of KPvK,
//! KRvKP and KQvKR, in the lichess shape (a strict struct parses every answer); bad FENs get
//! 400, missing tables 404; the mainline leads to mate; metrics count the requests; SIGTERM
//! stops it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::*;
use crate::probe_json::strict;
use zermelo_cli::child::LoggedChild;
use zermelo_cli::materials::SplitMix;

/// A running `zermelo serve`, killed when dropped.
struct Server {
    child: LoggedChild,
    addr: String,
    /// Holds the log.
    _logs: tempfile::TempDir,
}

/// Starts `zermelo serve --tables DIR --listen 127.0.0.1:0` and reads the address it bound from
/// its log.
fn serve(dir: &std::path::Path) -> Server {
    let logs = tempfile::tempdir().unwrap();
    let mut cmd = zermelo();
    cmd.args([
        "serve",
        "--tables",
        dir.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ]);
    let mut child = LoggedChild::spawn(cmd, "serve", &logs.path().join("serve.log")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let addr = loop {
        let log = child.log();
        if let Some(rest) = log.split("listening on http://").nth(1) {
            break rest.split([' ', '\n']).next().unwrap().to_string();
        }
        assert!(
            child.exited().is_none() && Instant::now() < deadline,
            "the server did not say where it listens:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    Server {
        child,
        addr,
        _logs: logs,
    }
}

/// `GET path` over a fresh HTTP/1.1 connection: the status and the body.
fn get(addr: &str, path: &str) -> (u16, String) {
    let (status, _, body) = get_with_headers(addr, path);
    (status, body)
}

/// `GET path`: the status, the headers (names in lower case) and the body.
fn get_with_headers(addr: &str, path: &str) -> (u16, Vec<(String, String)>, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP answer");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers, body.to_string())
}

/// The value of header `name` (lower case), if present.
fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// `GET /standard?fen=FEN` (spaces as underscores), answered 200: the JSON.
fn standard(addr: &str, fen: &str) -> serde_json::Value {
    let (status, body) = get(addr, &format!("/standard?fen={}", fen.replace(' ', "_")));
    assert_eq!(status, 200, "{fen}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// lichess's server contract (lila-tablebase a06a88b, read for this: `src/tablebases.rs`
/// 79-87 and 160-194, `src/response.rs` 118-192, `src/prophet.rs` 21-52, its `test.py` 19-42
/// and 72-83): a position no table holds is answered 200 with what its moves lead to; `dtm`
/// is 0 for a draw and `null` for a position checkmated now; a mate given once the clock
/// reached 100 is blessed; FENs are read leniently; CORS is open on the API; the materials
/// served are listed.
#[test]
fn serve_answers_as_lichess_where_no_table_holds_the_position() {
    let dir = tables_with(&["KPvK", "KRRvK"]);
    let server = serve(&dir);
    let addr = &server.addr;
    let probe_one = |fen: &str| probe(&dir, &[fen]).remove(0);

    // Castling rights that stand (lichess's test.py 72-83, with tables we have): 200, the
    // position's dtz and dtm null; a move that keeps a right is unknown, one that gives up
    // every right is probed: castling itself is listed, in lichess's UCI (king's move) and SAN,
    // valued as the position after it is.
    let a = standard(addr, "4k3/8/8/8/8/8/8/R3K2R w KQ - 0 1");
    assert!(a["dtz"].is_null() && a["dtm"].is_null(), "{a}");
    let moves = a["moves"].as_array().unwrap();
    let find = |uci: &str| {
        moves
            .iter()
            .find(|m| m["uci"] == uci)
            .unwrap_or_else(|| panic!("{uci} in {a}"))
    };
    let short = find("e1g1");
    assert_eq!(short["san"], "O-O");
    let after = probe_one("4k3/8/8/8/8/8/8/R4RK1 b - - 0 1");
    assert_eq!(
        (&short["category"], &short["dtm"]),
        (&after["category"], &after["dtm"])
    );
    assert_eq!(short["category"], "loss");
    assert_eq!(find("e1c1")["san"], "O-O-O");
    // Ra2 keeps the short castling right: unknown. Ke2 gives up both: probed.
    assert_eq!(find("a1a2")["category"], "unknown");
    assert!(find("a1a2")["dtm"].is_null());
    let ke2 = probe_one("4k3/8/8/8/8/8/4K3/R6R b - - 0 1");
    assert_eq!(find("e1e2")["dtm"], ke2["dtm"]);
    // The position's category: the opposite of its first move's (a win, with a move known to win).
    assert_eq!(moves[0]["category"], "loss");
    assert_eq!(a["category"], "win");
    assert_eq!(
        moves.len(),
        probe_one("4k3/8/8/8/8/8/8/R3K2R w - - 0 1")["moves"]
            .as_array()
            .unwrap()
            .len()
            + 2
    );
    // Rights whose rooks have left their corners are dropped: the position is probed whole.
    let dropped = standard(addr, "4k3/8/8/8/8/8/8/3RK1R1 w KQkq - 0 1");
    assert!(dropped["dtm"].is_i64(), "{dropped}");
    assert_eq!(
        dropped["dtm"],
        probe_one("4k3/8/8/8/8/8/8/3RK1R1 w - - 0 1")["dtm"]
    );

    // More men than any table (lichess's test.py 35-42): 200, Rh2# first (checkmate, a loss
    // for the mated side, dtm null), the other moves unknown, the position a win.
    let many = standard(addr, "7k/7p/1R6/6P1/P7/5n2/4r3/7K b - - 0 41");
    assert_eq!(
        (&many["category"], &many["dtz"], &many["dtm"]),
        (&"win".into(), &serde_json::Value::Null, &serde_json::Value::Null)
    );
    let first = &many["moves"][0];
    assert_eq!(
        (&first["san"], &first["checkmate"], &first["category"]),
        (&"Rh2#".into(), &true.into(), &"loss".into())
    );
    assert!(first["dtm"].is_null());
    assert!(
        many["moves"].as_array().unwrap()[1..]
            .iter()
            .all(|m| m["category"] == "unknown"),
        "{many}"
    );
    // A mate given with the clock at 100 or more is blessed (test.py 19-33).
    let fen = |clock: u32| format!("8/4K2k/5Q1P/6P1/8/8/q7/8 w - - {clock} 148");
    let mate = |a: &serde_json::Value| {
        a["moves"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["san"] == "Qg7#")
            .unwrap()
            .clone()
    };
    assert_eq!(mate(&standard(addr, &fen(99)))["category"], "loss");
    assert_eq!(standard(addr, &fen(99))["category"], "win");
    assert_eq!(mate(&standard(addr, &fen(100)))["category"], "blessed-loss");

    // A missing table (KNNvKB here): 200, nothing known of the position.
    let missing = standard(addr, "k7/8/1K6/8/8/8/8/1NN2b2 w - - 0 1");
    assert!(missing["dtm"].is_null() && missing["dtz"].is_null());
    assert_eq!(missing["category"], "unknown");

    // dtm as lichess means it: 0 for a draw, null for a position checkmated now.
    let draw = standard(addr, "8/8/8/8/8/8/kP6/7K b - - 0 1");
    assert_eq!((&draw["category"], &draw["dtm"]), (&"draw".into(), &0.into()));
    let take = draw["moves"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["uci"] == "a2b2")
        .unwrap();
    assert_eq!(
        (&take["insufficient_material"], &take["dtm"], &take["conversion"]),
        (&true.into(), &0.into(), &true.into())
    );
    let stale = standard(addr, "1k6/1P6/1K6/8/8/8/8/8 b - - 0 1");
    assert_eq!(
        (&stale["stalemate"], &stale["category"], &stale["dtm"]),
        (&true.into(), &"draw".into(), &0.into())
    );
    // Checkmated (KRRvK's table answers it): a loss, dtm null; blessed if the clock before the
    // mating move had reached 100.
    let mated = standard(addr, "R3k3/7R/4K3/8/8/8/8/8 b - - 0 1");
    assert_eq!(
        (&mated["checkmate"], &mated["category"]),
        (&true.into(), &"loss".into())
    );
    assert!(mated["dtm"].is_null() && mated["moves"].as_array().unwrap().is_empty());
    assert_eq!(
        standard(addr, "R3k3/7R/4K3/8/8/8/8/8 b - - 101 90")["category"],
        "blessed-loss"
    );
    assert_eq!(
        standard(addr, "R3k3/7R/4K3/8/8/8/8/8 b - - 100 90")["category"],
        "loss"
    );

    // Lenient FENs: the board alone, `+` or `_` between fields, as lichess reads them.
    let full = standard(addr, "8/8/8/8/8/8/4P3/K1k5 w - - 0 1");
    for lenient in [
        "8/8/8/8/8/8/4P3/K1k5",
        "8/8/8/8/8/8/4P3/K1k5+w",
        "8/8/8/8/8/8/4P3/K1k5__w__-",
    ] {
        let mut a = standard(addr, lenient);
        a["fen"] = full["fen"].clone();
        assert_eq!(a, full, "{lenient}");
    }

    // CORS: open on the API, not on the metrics.
    for path in [
        "/standard?fen=8/8/8/8/8/8/4P3/K1k5",
        "/standard/mainline?fen=8/8/8/8/8/8/4P3/K1k5",
        "/materials",
        "/monitor",
        "/standard?fen=x",
    ] {
        let (_, headers, _) = get_with_headers(addr, path);
        assert_eq!(
            header(&headers, "access-control-allow-origin"),
            Some("*"),
            "{path}"
        );
    }
    let (_, headers, _) = get_with_headers(addr, "/metrics");
    assert_eq!(header(&headers, "access-control-allow-origin"), None);
    let (_, headers, _) = get_with_headers(addr, "/standard?fen=8/8/8/8/8/8/4P3/K1k5");
    assert_eq!(header(&headers, "content-type"), Some("application/json"));

    // The materials served, each with the size of its file.
    let (status, body) = get(addr, "/materials");
    assert_eq!(status, 200, "{body}");
    let listed: serde_json::Value = serde_json::from_str(&body).unwrap();
    let names: Vec<&str> = listed["materials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["material"].as_str().unwrap())
        .collect();
    for (name, men) in [("KPvK", 3), ("KQvK", 3), ("KRvK", 3), ("KRRvK", 4)] {
        let m = listed["materials"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["material"] == name)
            .unwrap_or_else(|| panic!("{name}: {body}"));
        assert_eq!(m["men"], men);
        let bytes = std::fs::metadata(dir.join(format!("{name}.zmt"))).unwrap().len();
        assert_eq!(m["dtm"]["bytes"], bytes, "{name}");
    }
    assert!(
        names.windows(2).all(|w| {
            let men = |n: &str| n.len();
            (men(w[0]), w[0]) <= (men(w[1]), w[1])
        }),
        "fewest men first: {names:?}"
    );
    let (status, line) = get(addr, "/monitor");
    assert_eq!(status, 200);
    assert!(
        line.starts_with(&format!("tablebase tables={}u,", names.len())),
        "{line}"
    );
}

/// Random placements of `material` (kings first, then White's men, then Black's, from the
/// name), White or Black to move: most are legal positions, some are not (probe tells).
fn random_fens(material: &str, n: usize, rng: &mut SplitMix) -> Vec<String> {
    let (white, black) = material.split_once('v').unwrap();
    let men: Vec<char> = white
        .chars()
        .map(|c| c.to_ascii_uppercase())
        .chain(black.chars().map(|c| c.to_ascii_lowercase()))
        .collect();
    (0..n)
        .map(|_| {
            let mut board = ['.'; 64];
            for &m in &men {
                loop {
                    let sq = rng.below(64) as usize;
                    let pawn_rank = m.eq_ignore_ascii_case(&'p') && !(8..56).contains(&sq);
                    if board[sq] == '.' && !pawn_rank {
                        board[sq] = m;
                        break;
                    }
                }
            }
            let ranks: Vec<String> = (0..8)
                .rev()
                .map(|r| {
                    let mut row = String::new();
                    let mut empty = 0;
                    for f in 0..8 {
                        match board[r * 8 + f] {
                            '.' => empty += 1,
                            c => {
                                if empty > 0 {
                                    row.push_str(&empty.to_string());
                                    empty = 0;
                                }
                                row.push(c);
                            }
                        }
                    }
                    if empty > 0 {
                        row.push_str(&empty.to_string());
                    }
                    row
                })
                .collect();
            let turn = if rng.below(2) == 0 { "w" } else { "b" };
            format!("{} {turn} - - 0 1", ranks.join("/"))
        })
        .collect()
}

#[test]
fn serve_answers_as_probe_does_in_the_lichess_shape() {
    let dir = tables_with(&["KPvK", "KRvKP", "KQvKR"]);
    let server = serve(&dir);
    let mut rng = SplitMix(0x2545_f491_4f6c_dd1d);
    let mut fens = Vec::new();
    for (material, want) in [("KPvK", 333), ("KRvKP", 333), ("KQvKR", 334)] {
        let candidates = random_fens(material, 3 * want, &mut rng);
        let o = run_with_stdin(
            &["probe", "--tables", dir.to_str().unwrap()],
            &candidates.join("\n"),
        );
        let legal: Vec<(String, serde_json::Value)> = stdout(&o)
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .zip(candidates)
            .filter(|(a, _)| a.get("error").is_none())
            .map(|(a, f)| (f, a))
            .take(want)
            .collect();
        assert_eq!(legal.len(), want, "{material}: too few legal positions drawn");
        fens.extend(legal);
    }
    assert_eq!(fens.len(), 1000);
    let mut categories = std::collections::BTreeMap::new();
    for (fen, probed) in &fens {
        // Underscores for spaces, as lichess clients send them.
        let query = fen.replace(' ', "_");
        let (status, body) = get(&server.addr, &format!("/standard?fen={query}"));
        assert_eq!(status, 200, "{fen}: {body}");
        let mut served: serde_json::Value = serde_json::from_str(&body).unwrap();
        strict(&served);
        assert_eq!(served["fen"], query);
        served["fen"] = probed["fen"].clone();
        assert_eq!(&served, probed, "{fen}");
        *categories
            .entry(probed["category"].as_str().unwrap().to_string())
            .or_insert(0) += 1;
    }
    // Wins, draws and losses were all asked.
    assert_eq!(categories.len(), 3, "{categories:?}");

    // Errors as lichess's server gives them: plain text, 400 for a FEN that is not a legal
    // position or no FEN; on the mainline, 404 for a position no table holds.
    let cases = [
        ("/standard?fen=not_a_fen", 400, "invalid FEN"),
        ("/standard", 400, "fen"),
        (
            "/standard/mainline?fen=8/8/8/8/8/8/8/8_w_-_-_0_1",
            400,
            "invalid FEN",
        ),
        (
            "/standard?fen=8/8/8/8/8/8/4P3/K1k5_w_-_-_0_1&fen=x",
            400,
            "bad query string",
        ),
        (
            "/standard/mainline?fen=k7/8/1K6/8/8/8/8/1NN2b2_w_-_-_0_1",
            404,
            "zermelo solve KNNvKB",
        ),
        (
            "/standard/mainline?fen=k7/8/1K6/8/8/8/8/1RRRRRR1_w_-_-_0_1",
            404,
            "too many men",
        ),
        (
            "/standard/mainline?fen=4k3/8/8/8/8/8/8/R3K2R_w_KQ",
            404,
            "castling",
        ),
    ];
    for (path, code, needle) in cases {
        let (status, body) = get(&server.addr, path);
        assert_eq!(status, code, "{path}: {body}");
        assert!(body.contains(needle), "{path}: {body}");
        assert!(
            serde_json::from_str::<serde_json::Value>(&body).is_err(),
            "plain text: {body}"
        );
    }

    // The mainline of a mate in 25 plies: 25 moves, the last one mates.
    let (status, body) = get(
        &server.addr,
        "/standard/mainline?fen=8/8/8/8/8/8/4P3/K1k5_w_-_-_0_1",
    );
    assert_eq!(status, 200, "{body}");
    let m: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!((m["winner"].as_str(), m["dtm"].as_i64()), (Some("w"), Some(25)));
    let steps = m["mainline"].as_array().unwrap();
    assert_eq!(steps.len(), 25);
    assert!(
        steps.last().unwrap()["san"].as_str().unwrap().ends_with('#'),
        "{body}"
    );
    assert!(m["dtz"].is_null() && steps.iter().all(|s| s["dtz"].is_null()));
    let (_, body) = get(
        &server.addr,
        "/standard/mainline?fen=8/8/8/8/8/k7/P7/K7_w_-_-_0_1",
    );
    let draw: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(
        draw["winner"].is_null() && draw["mainline"].as_array().unwrap().is_empty(),
        "{body}"
    );

    // The co-ordinate squares: what `zermelo squares --json` prints, from the full table; a
    // material without its table is 404 (nothing is solved on request), other men than kings
    // and pawns 400.
    let fen = "4k3/8/8/4K3/4P3/8/8/8 w - - 0 1";
    let (status, body) = get(
        &server.addr,
        &format!("/standard/squares?fen={}", fen.replace(' ', "_")),
    );
    assert_eq!(status, 200, "{body}");
    let o = run(&["squares", "--json", "--tables", dir.to_str().unwrap(), fen]);
    assert_ok(&o);
    let served: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        served,
        serde_json::from_str::<serde_json::Value>(&stdout(&o)).unwrap()
    );
    assert!(served["squares"]["e5"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s == "e7"));
    // The numbered diagram: what `zermelo squares --svg` draws.
    let (status, body) = get(
        &server.addr,
        &format!("/standard/squares?fen={}&format=svg", fen.replace(' ', "_")),
    );
    assert_eq!(status, 200, "{body}");
    let svg = dir.join("squares.svg");
    let o = run(&[
        "squares",
        "--tables",
        dir.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
        fen,
    ]);
    assert_ok(&o);
    assert_eq!(body, std::fs::read_to_string(&svg).unwrap());
    assert_eq!(
        get(
            &server.addr,
            &format!("/standard/squares?fen={}&format=png", fen.replace(' ', "_"))
        )
        .0,
        400
    );
    let (status, body) = get(
        &server.addr,
        "/standard/squares?fen=4k3/8/8/3pK3/3PP3/8/8/8_w_-_-_0_1",
    );
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("zermelo solve KPPvKP"), "{body}");
    let (status, body) = get(
        &server.addr,
        "/standard/squares?fen=4k3/8/8/4K3/4P3/8/8/6N1_w_-_-_0_1",
    );
    assert_eq!(status, 400, "{body}");

    // Health and metrics: the thousand answers are counted.
    assert_eq!(get(&server.addr, "/health"), (200, "ok\n".to_string()));
    let (status, text) = get(&server.addr, "/metrics");
    assert_eq!(status, 200);
    let ok = text
        .lines()
        .find(|l| l.starts_with("zermelo_http_requests_total{endpoint=\"/standard\",status=\"200\"}"))
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(
        ok.rsplit(' ').next().unwrap().parse::<f64>().unwrap(),
        1000.0,
        "{ok}"
    );
    assert!(
        text.contains("zermelo_http_request_seconds_bucket")
            && text.contains("process_resident_memory_bytes")
    );
    assert_eq!(get(&server.addr, "/nothing").0, 404);

    // The web page and its two files, which name each other; `/api` lists the endpoints. (The
    // page itself is driven in a real browser by tests/browser/test_page.py.)
    let (status, html) = get(&server.addr, "/");
    assert_eq!(status, 200);
    assert!(html.contains(r#"<script src="page.js">"#) && html.contains(r#"href="page.css""#));
    for id in ["board", "fen", "value", "moves", "pv", "squares-board"] {
        assert!(html.contains(&format!(r#"id="{id}""#)), "{id}");
    }
    let (status, js) = get(&server.addr, "/page.js");
    assert_eq!(status, 200);
    assert!(js.contains("standard/mainline") && js.contains("standard/squares"));
    assert_eq!(get(&server.addr, "/page.css").0, 200);
    let (status, api) = get(&server.addr, "/api");
    assert_eq!(status, 200);
    assert!(api.contains("GET /standard?fen=FEN"), "{api}");
}

/// SIGTERM stops the server: it exits 0, in a few seconds.
#[test]
fn serve_stops_on_sigterm() {
    let dir = tables_with(&["KPvK"]);
    let mut server = serve(&dir);
    assert_eq!(get(&server.addr, "/health").0, 200);
    server.child.terminate();
    let status = server
        .child
        .wait_for(Duration::from_secs(10))
        .expect("the server stops on SIGTERM");
    assert!(status.success(), "{status}");
}

/// With DTZ50 tables beside the mates, `GET /standard` fills `dtz` and `precise_dtz` (equal:
/// always precise) for the position and every move, parses with the strict lichess struct, and
/// answers as `probe` does, halfmove clock included.
#[test]
fn serve_gives_dtz50_where_its_tables_are() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    assert_ok(&run(&["solve", "KRvKP", "--tables", d]));
    assert_ok(&run(&["dtz", "KRvKP", "--tables", d]));
    let server = serve(dir.path());
    let mut rng = SplitMix(0x5eed_d72);
    let mut fens = random_fens("KRvKP", 40, &mut rng);
    fens.push("8/8/8/8/4k3/8/8/K6R w - - 72 80".to_string());
    let mut filled = 0;
    for fen in &fens {
        let (status, body) = get(&server.addr, &format!("/standard?fen={}", fen.replace(' ', "_")));
        let expected = probe_lines(dir.path(), fen);
        if status != 200 {
            assert!(expected.get("error").is_some(), "{fen}: {body}");
            continue;
        }
        let mut answer: serde_json::Value = serde_json::from_str(&body).unwrap();
        strict(&answer);
        // The same answer as probe's but for the FEN as asked (underscores here).
        answer["fen"] = expected["fen"].clone();
        assert_eq!(answer, expected, "{fen}");
        assert!(
            answer["dtz"].is_i64() && answer["dtz"] == answer["precise_dtz"],
            "{body}"
        );
        assert_eq!(answer["ignores_50_move_rule"], false);
        let moves = answer["moves"].as_array().unwrap();
        assert!(
            moves
                .iter()
                .all(|m| m["dtz"].is_i64() && m["dtz"] == m["precise_dtz"]),
            "{body}"
        );
        filled += 1;
    }
    assert!(filled >= 20, "{filled}");
    // A win in 29 plies with 72 on the clock is drawn by the rule.
    let (_, body) = get(&server.addr, "/standard?fen=8/8/8/8/4k3/8/8/K6R_w_-_-_72_80");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (answer["dtz"].as_i64(), answer["category"].as_str()),
        (Some(29), Some("cursed-win"))
    );

    // The mainline follows DTZ50: each step's DTZ is one less in size than the one before
    // (here no move is a capture or a pawn move), down to mate; `line=dtm` gives the mates' line.
    let (status, body) = get(
        &server.addr,
        "/standard/mainline?fen=8/8/8/8/4k3/8/8/K6R_w_-_-_0_1",
    );
    assert_eq!(status, 200, "{body}");
    let m: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (m["winner"].as_str(), m["dtz"].as_i64(), m["dtm"].as_i64()),
        (Some("w"), Some(29), Some(29))
    );
    let steps = m["mainline"].as_array().unwrap();
    assert_eq!(steps.len(), 29, "{body}");
    for (k, step) in steps.iter().enumerate() {
        let left = 28 - k as i64;
        // The last step checkmates: -1 for the mated side, as lichess and Syzygy give it.
        let signed = if k == 28 {
            -1
        } else if k % 2 == 0 {
            -left
        } else {
            left
        };
        assert_eq!(step["dtz"].as_i64(), Some(signed), "{k}: {body}");
        assert_eq!(step["precise_dtz"], step["dtz"]);
    }
    assert!(
        steps.last().unwrap()["san"].as_str().unwrap().ends_with('#'),
        "{body}"
    );
    // As lichess's mainline: with 72 on the clock the line stops when it reaches 100 (28
    // plies, no zeroing move on the way), a cursed win the rule draws: no winner.
    let (_, body) = get(
        &server.addr,
        "/standard/mainline?fen=8/8/8/8/4k3/8/8/K6R_w_-_-_72_80",
    );
    let cursed: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(cursed["winner"].is_null(), "{body}");
    assert_eq!(cursed["dtz"].as_i64(), Some(29), "{body}");
    assert_eq!(cursed["mainline"].as_array().unwrap()[..], steps[..28], "{body}");
    let (_, body) = get(
        &server.addr,
        "/standard/mainline?fen=8/8/8/8/4k3/8/8/K6R_w_-_-_0_1&line=dtm",
    );
    let m: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(
        m["dtz"].is_null() && m["mainline"].as_array().unwrap().len() == 29,
        "{body}"
    );
}

/// `zermelo probe`'s answer for one FEN.
fn probe_lines(dir: &std::path::Path, fen: &str) -> serde_json::Value {
    let o = run(&["probe", "--tables", dir.to_str().unwrap(), fen]);
    serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap()
}
