//! What a person at a terminal gets: `probe` reads as text on a terminal (a real
//! pseudo-terminal here) and as JSON in a pipe; shell completions that bash loads and that
//! complete; the man pages.

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::Stdio;

use crate::common::*;

/// Runs `zermelo` with its stdout on a new pseudo-terminal; returns what the terminal showed
/// (its `\r\n` read back as `\n`) and the exit code.
fn on_a_terminal(args: &[&str]) -> (String, Option<i32>) {
    let (mut leader, mut follower) = (0, 0);
    // SAFETY: openpty writes the two new descriptors; the null pointers ask for no name, no
    // terminal settings and no window size.
    let rc = unsafe {
        libc::openpty(
            &mut leader,
            &mut follower,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and are owned by nothing else.
    let (leader, follower) = unsafe { (OwnedFd::from_raw_fd(leader), OwnedFd::from_raw_fd(follower)) };
    let mut child = zermelo()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(follower))
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn zermelo");
    // The child holds the only copy of the follower now: reading ends (EIO) when it exits.
    let mut shown = Vec::new();
    let mut terminal = std::fs::File::from(leader);
    let mut buf = [0u8; 4096];
    loop {
        match terminal.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => shown.extend_from_slice(&buf[..n]),
            Err(e) if e.raw_os_error() == Some(libc::EIO) => break,
            Err(e) => panic!("reading the terminal: {e}"),
        }
    }
    let status = child.wait().expect("wait zermelo");
    (
        String::from_utf8_lossy(&shown).replace("\r\n", "\n"),
        status.code(),
    )
}

const MATE_IN_25: &str = "8/8/8/8/8/8/4P3/K1k5 w - - 0 1";

#[test]
fn probe_prints_a_readable_line_on_a_terminal_and_json_in_a_pipe() {
    let dir = tables_with(&["KPvK"]);
    let d = dir.to_str().unwrap();
    let fens = [
        MATE_IN_25,
        // Checkmated, stalemated, and a draw by taking the pawn (kpk.md, textbook).
        "k1Q5/8/1K6/8/8/8/8/8 b - - 0 1",
        "1k6/1P6/1K6/8/8/8/8/8 b - - 0 1",
        "8/8/8/8/8/8/kP6/7K b - - 0 1",
        "4k3/8/8/8/8/8/8/4K2R w K - 0 1",
    ];
    let mut args = vec!["probe", "--tables", d];
    args.extend(fens);
    let (shown, code) = on_a_terminal(&args);
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines.len(), fens.len(), "{shown}");
    // Exit 1: the position with castling rights cannot be answered.
    assert_eq!(code, Some(1), "{shown}");
    // KPK's longest win from this textbook position: mate in 25 plies, e2-e4 the only move that
    // keeps it (kpk.md).
    assert!(
        lines[0].starts_with(&format!(
            "{MATE_IN_25}: White to move wins, mate in 25 plies. Moves: e4 mates in 25, "
        )),
        "{}",
        lines[0]
    );
    assert_eq!(lines[1], "k1Q5/8/1K6/8/8/8/8/8 b - - 0 1: Black is checkmated.");
    assert_eq!(
        lines[2],
        "1k6/1P6/1K6/8/8/8/8/8 b - - 0 1: Black is stalemated: a draw."
    );
    assert!(
        lines[3].starts_with("8/8/8/8/8/8/kP6/7K b - - 0 1: a draw. Moves: Kxb2 draws, "),
        "{}",
        lines[3]
    );
    assert!(lines[3].contains("Ka1 is mated in "), "{}", lines[3]);
    assert!(
        lines[4].contains("error: invalid FEN: castling rights"),
        "{}",
        lines[4]
    );
    assert!(!shown.contains('{'), "no JSON on a terminal: {shown}");

    // In a pipe: JSON lines, and --format text asks for the text anyway.
    let json = run(&["probe", "--tables", d, MATE_IN_25]);
    assert_ok(&json);
    let v: serde_json::Value = serde_json::from_str(stdout(&json).trim()).unwrap();
    assert_eq!(v["dtm"], 25);
    let text = run(&["probe", "--tables", d, "--format", "text", MATE_IN_25]);
    assert_ok(&text);
    assert_eq!(stdout(&text).trim_end(), lines[0]);
    let (forced, _) = on_a_terminal(&["probe", "--tables", d, "--format", "json", MATE_IN_25]);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(forced.trim()).unwrap(),
        v
    );
}

#[test]
fn bash_completion_loads_and_completes_commands_and_options() {
    let out = run(&["completions", "bash"]);
    assert_ok(&out);
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("zermelo.bash");
    std::fs::write(&script, stdout(&out)).unwrap();
    // Loaded by bash, then asked what `zermelo so<TAB>` and `zermelo probe --fo<TAB>` complete to.
    // Called as bash calls it: the command, the word being completed, the word before.
    let complete = |words: &str, cword: usize| {
        let program = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_LINE='{words}'; COMP_POINT=${{#COMP_LINE}}; \
             _zermelo zermelo \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; echo \"${{COMPREPLY[@]}}\"",
            script.display()
        );
        let o = std::process::Command::new("bash")
            .args(["-c", &program])
            .output()
            .expect("bash");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    assert_eq!(complete("zermelo so", 1), "solve");
    assert_eq!(complete("zermelo probe --fo", 2), "--format");
    let shells: Vec<_> = ["zsh", "fish", "elvish", "powershell"]
        .iter()
        .map(|s| run(&["completions", s]))
        .collect();
    assert!(shells.iter().all(|o| o.status.success() && o.stdout.len() > 1000));
    let bad = run(&["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("possible values"), "{}", stderr(&bad));
}

#[test]
fn man_pages_name_every_command() {
    let out = run(&["man"]);
    assert_ok(&out);
    let page = stdout(&out);
    assert!(
        page.starts_with(".ie \\n(.g .ds Aq"),
        "{}",
        &page[..80.min(page.len())]
    );
    assert!(page.contains(".TH zermelo 1"), "no title line");
    for command in [
        "solve",
        "probe",
        "serve",
        "verify",
        "cluster",
        "completions",
        "man",
    ] {
        assert!(
            page.contains(&format!("zermelo\\-{command}(1)")),
            "{command} not in the page"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let into = dir.path().join("man1");
    let out = run(&["man", "--dir", into.to_str().unwrap()]);
    assert_ok(&out);
    for command in ["zermelo", "zermelo-solve", "zermelo-probe", "zermelo-serve"] {
        let page = std::fs::read_to_string(into.join(format!("{command}.1"))).unwrap();
        assert!(page.contains(&format!(".TH {command} 1")), "{command}.1");
    }
    assert!(std::fs::read_to_string(into.join("zermelo-probe.1"))
        .unwrap()
        .contains("\\-\\-format"));
}
