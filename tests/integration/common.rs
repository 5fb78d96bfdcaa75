//! Running the `zermelo` binary and sharing built tables between tests.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use zermelo_chess::Position;
use zermelo_cli::materials::SplitMix;

/// The `zermelo` binary built by cargo for these tests.
pub fn zermelo() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_zermelo"));
    c.env_remove("ZERMELO_LOG");
    c
}

/// Runs `zermelo` with arguments, stdin closed.
pub fn run(args: &[&str]) -> Output {
    zermelo()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run zermelo")
}

/// Runs `zermelo` with `input` on stdin.
pub fn run_with_stdin(args: &[&str], input: &str) -> Output {
    run_with_stdin_bytes(args, input.as_bytes())
}

/// Runs `zermelo` with `input` (any bytes) on stdin.
pub fn run_with_stdin_bytes(args: &[&str], input: &[u8]) -> Output {
    let mut child = zermelo()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn zermelo");
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().expect("wait zermelo")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts the command succeeded, showing its output otherwise.
pub fn assert_ok(o: &Output) {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        stdout(o),
        stderr(o)
    );
}

/// A directory of tables shared by the tests of one build of the binary.
pub fn shared_tables() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_zermelo"));
    let meta = std::fs::metadata(bin).expect("binary metadata");
    let stamp = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tables-{stamp}-{}", meta.len()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Builds `materials` into the shared directory (skipping complete tables) and returns it.
pub fn tables_with(materials: &[&str]) -> PathBuf {
    let dir = shared_tables();
    let mut args = vec!["solve"];
    args.extend_from_slice(materials);
    let d = dir.to_str().unwrap().to_string();
    args.extend_from_slice(&["--tables", &d]);
    let o = run(&args);
    assert_ok(&o);
    dir
}

/// Probes FENs and returns one parsed JSON object per line.
pub fn probe(dir: &Path, fens: &[&str]) -> Vec<serde_json::Value> {
    let mut args = vec!["probe", "--tables", dir.to_str().unwrap()];
    args.extend_from_slice(fens);
    json_lines(&run(&args))
}

/// Checks a run went well and returns its stdout's lines, each parsed as JSON.
pub fn json_lines(o: &Output) -> Vec<serde_json::Value> {
    assert_ok(o);
    stdout(o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

/// The JSON of `zermelo stats`.
pub fn stats(dir: &Path, material: &str) -> serde_json::Value {
    let o = run(&["stats", "--tables", dir.to_str().unwrap(), material]);
    assert_ok(&o);
    serde_json::from_str(&stdout(&o)).expect("stats json")
}

/// The reference data folder in the repository.
pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data")
        .join(name)
}

/// The number a structured log line gives field `name` (` name=123`), or a panic naming the line.
pub fn log_field(line: &str, name: &str) -> u64 {
    let at = line
        .find(&format!(" {name}="))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
        + name.len()
        + 2;
    line[at..]
        .split(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} is not a number in {line}"))
}

/// The board field of a FEN (`8/8/8/8/P7/K4k2/8/8`) for `board`, square `i` being a1 + `i`: a
/// man's letter, upper case for White.
pub fn placement(board: &[Option<char>; 64]) -> String {
    let mut fen = String::new();
    for rank in (0..8).rev() {
        let mut empty = 0;
        for file in 0..8 {
            match board[rank * 8 + file] {
                Some(c) => {
                    if empty > 0 {
                        fen += &empty.to_string();
                        empty = 0;
                    }
                    fen.push(c);
                }
                None => empty += 1,
            }
        }
        if empty > 0 {
            fen += &empty.to_string();
        }
        if rank > 0 {
            fen.push('/');
        }
    }
    fen
}

/// `count` random legal positions with the men of `white` and `black` (e.g. "KRP", "KP"),
/// either side to move; pawns on ranks 2 to 7.
pub fn random_positions(rng: &mut SplitMix, white: &str, black: &str, count: usize) -> Vec<String> {
    let mut out = Vec::new();
    while out.len() < count {
        let mut board = [None::<char>; 64];
        let mut ok = true;
        let men = white
            .chars()
            .map(|c| c.to_ascii_uppercase())
            .chain(black.chars().map(|c| c.to_ascii_lowercase()));
        for c in men {
            let sq = loop {
                let sq = rng.below(64) as usize;
                if board[sq].is_none() {
                    break sq;
                }
            };
            if c.eq_ignore_ascii_case(&'p') && !(8..56).contains(&sq) {
                ok = false;
            }
            board[sq] = Some(c);
        }
        if !ok {
            continue;
        }
        let mut fen = placement(&board);
        fen += if rng.below(2) == 0 {
            " w - - 0 1"
        } else {
            " b - - 0 1"
        };
        if Position::from_fen(&fen).is_ok() {
            out.push(fen);
        }
    }
    out
}
