//! A corrupted table is reported by `verify` and `probe`, never served.

use crate::common::*;

#[test]
fn one_flipped_byte_is_reported_not_served() {
    let shared = tables_with(&["KQvK"]);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let src = shared.join("KQvK.zmt");
    let dst = dir.path().join("KQvK.zmt");
    let mut bytes = std::fs::read(&src).unwrap();
    std::fs::write(&dst, &bytes).unwrap();
    // Intact copy: verify and probe work.
    assert_ok(&run(&["verify", "--tables", d, "KQvK"]));
    let fen = "k7/8/1K6/8/8/8/8/2Q5 w - - 0 1";
    assert_ok(&run(&["probe", "--tables", d, fen]));
    // Flip one byte in the middle of the compressed values.
    let at = bytes.len() / 2;
    bytes[at] ^= 0x55;
    std::fs::write(&dst, &bytes).unwrap();
    let o = run(&["verify", "--tables", d, "KQvK"]);
    assert!(!o.status.success());
    assert!(
        stdout(&o).contains("FAILED") && stderr(&o).contains("corrupt"),
        "{}\n{}",
        stdout(&o),
        stderr(&o)
    );
    // Probe every position of a sample: each either errors naming corruption or is absent; a
    // value read from the damaged block is never printed.
    let o = run(&["probe", "--tables", d, fen]);
    let out = stdout(&o);
    let line: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    if line.get("error").is_some() {
        assert!(line["error"].as_str().unwrap().contains("corrupt"), "{line}");
        assert_eq!(o.status.code(), Some(2));
    } else {
        // The probed positions live in an intact block: the answer must equal the intact one.
        let good = probe(&shared, &[fen]);
        assert_eq!(line, good[0]);
    }
    // A solve over the damaged directory does not trust the file: it rebuilds it.
    assert_ok(&run(&["solve", "KQvK", "--tables", d]));
    assert_eq!(std::fs::read(&dst).unwrap(), std::fs::read(&src).unwrap());
}
