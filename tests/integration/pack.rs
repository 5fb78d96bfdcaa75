//! Packed tables (`zermelo pack`): one side to move a file, the other found by a search of one
//! ply. They must answer every probe as the full tables do, and be refused where a full table
//! is needed.

use std::path::Path;

use zermelo_chess::index::{locate, stored_turn, SliceIndexer};
use zermelo_chess::probe;
use zermelo_chess::{Color, Position};
use zermelo_cli::materials::SplitMix;
use zermelo_storage::{write_table, SliceData, Table};
use zermelo_worker::tables::TableDir;

use crate::common::*;

/// Mates and DTZ50 of `materials` (and what they convert into) built in `dir`.
fn build_both(dir: &Path, materials: &[&str]) {
    for command in ["solve", "dtz"] {
        let mut args = vec![command, "--tables", dir.to_str().unwrap()];
        args.extend_from_slice(materials);
        assert_ok(&run(&args));
    }
}

fn pack(full: &Path, out: &Path, materials: &[&str]) -> Vec<serde_json::Value> {
    let mut args = vec![
        "pack",
        "--tables",
        full.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(materials);
    json_lines(&run(&args))
}

/// The side to move a packed table holds, for the table `pos` is read from.
fn dropped(packed: &TableDir, pos: &Position) -> bool {
    let Some(loc) = locate(pos) else {
        return false;
    };
    let table = packed.table_to_probe(&loc.slice.material).unwrap();
    let kept = stored_turn(table.meta().index_layout)
        .unwrap()
        .expect("a packed table");
    let per_side = SliceIndexer::new(loc.slice).per_side();
    let turn = if loc.index < per_side {
        Color::White
    } else {
        Color::Black
    };
    turn != kept
}

/// Every probe of the packed tables (value, DTZ50, and `zermelo probe`'s whole answer, moves
/// included) equals the full tables', on random positions of KPvKP (en passant on the way, both
/// colourings stored) and of the materials it converts into, both sides to move: those of the
/// side a packed file drops are found by the search, which the full table does not use.
#[test]
fn packed_tables_answer_as_the_full_ones() {
    let full = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    build_both(full.path(), &["KPvKP"]);
    let files = pack(full.path(), out.path(), &["KPvKP"]);
    // Every material of the closure: a mate and a DTZ50 file packed, the WDL50 copied.
    let kpkp: Vec<_> = files.iter().filter(|f| f["material"] == "KPvKP").collect();
    assert_eq!(kpkp.len(), 3, "{kpkp:?}");
    for f in &files {
        let (bytes, full_bytes) = (f["bytes"].as_u64().unwrap(), f["full_bytes"].as_u64().unwrap());
        if f["metric"] == "wdl50" {
            assert_eq!(bytes, full_bytes);
        } else {
            assert!(bytes < full_bytes, "{f}");
            assert!(f["checked"].as_u64().unwrap() > 0, "{f}");
        }
    }

    let full_dir = TableDir::new(full.path());
    let packed_dir = TableDir::new(out.path());
    let (full_dtz, packed_dtz) = (full_dir.dtz50_view(), packed_dir.dtz50_view());
    let mut rng = SplitMix(77);
    let (mut by_search, mut fens) = (0, Vec::new());
    for (white, black) in [
        ("KP", "KP"),
        ("KN", "KP"),
        ("KQ", "KP"),
        ("KP", "KQ"),
        ("KP", "K"),
        ("K", "KP"),
        ("KQ", "KQ"),
        ("KR", "KP"),
    ] {
        for (done, fen) in random_positions(&mut rng, white, black, 600)
            .into_iter()
            .enumerate()
        {
            let pos = Position::from_fen(&fen).unwrap();
            assert_eq!(
                probe::value(&pos, &packed_dir).unwrap(),
                probe::value(&pos, &full_dir).unwrap(),
                "mates of {fen}"
            );
            assert_eq!(
                probe::dtz(&pos, &packed_dtz).unwrap(),
                probe::dtz(&pos, &full_dtz).unwrap(),
                "DTZ50 of {fen}"
            );
            by_search += usize::from(dropped(&packed_dir, &pos));
            if done % 40 == 0 {
                fens.push(fen);
            }
        }
    }
    assert!(
        by_search > 1000,
        "only {by_search} positions of a dropped side met"
    );
    let fens: Vec<&str> = fens.iter().map(String::as_str).collect();
    assert_eq!(probe(out.path(), &fens), probe(full.path(), &fens));
    // En passant: the capture is searched from a position the packed table may not hold.
    let ep = [
        "8/8/8/2k5/3pP3/8/8/4K3 b - e3 0 1",
        "4k3/8/8/3Pp3/8/8/8/4K3 w - e6 0 1",
    ];
    assert_eq!(probe(out.path(), &ep), probe(full.path(), &ep));
}

/// Builds (`solve`, `dtz`, `cluster`), `verify` and `stats` need the full tables: a packed one is refused with a line that
/// says so, never read as if it held both sides. `--out` may not be a tables directory.
#[test]
fn packed_tables_are_refused_where_full_ones_are_needed() {
    let full = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    build_both(full.path(), &["KRvK"]);
    pack(full.path(), out.path(), &["KRvK"]);
    let o = out.path().to_str().unwrap();
    for args in [
        vec!["verify", "--tables", o, "KRvK"],
        vec!["verify", "--dtz50", "--tables", o, "KRvK"],
        vec!["stats", "--tables", o, "KRvK"],
        vec!["solve", "KRRvK", "--tables", o],
        vec!["dtz", "KRRvK", "--tables", o],
        vec!["cluster", "KRRvK", "--tables", o, "--workers", "1"],
    ] {
        let r = run(&args);
        assert!(!r.status.success(), "{args:?} succeeded on packed tables");
        assert!(stderr(&r).contains("packed"), "{args:?}: {}", stderr(&r));
    }
    let f = full.path().to_str().unwrap();
    let r = run(&["pack", "KRvK", "--tables", f, "--out", f]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(stderr(&r).contains("replace the full tables"), "{}", stderr(&r));
}

/// A full table whose values do not follow from the moves (one side's wins made two plies
/// longer) is caught by `pack`'s own check, the search of the side it drops, and no packed file
/// of it is left.
#[test]
fn pack_catches_a_side_that_does_not_follow_from_the_other() {
    let full = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    build_both(full.path(), &["KQvK"]);
    let path = full.path().join("KQvK.zdz");
    let table = Table::open(&path).unwrap();
    let mut values = table.read_slice(0).unwrap();
    let per_side = values.len() / 2;
    // White to move: a win in n plies is stored as 2n; n + 2 is 2n + 4.
    let mut changed = 0;
    for v in &mut values[..per_side] {
        if *v >= 2 && *v % 2 == 0 {
            *v += 4;
            changed += 1;
        }
    }
    assert!(changed > 1000);
    let key = table.slices()[0].key;
    write_table(&path, table.meta(), &[SliceData { key, values: &values }]).unwrap();
    let r = run(&[
        "pack",
        "KQvK",
        "--tables",
        full.path().to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert!(!r.status.success());
    assert!(
        stderr(&r).contains("in the full table but the packed tables answer"),
        "{}",
        stderr(&r)
    );
    assert!(!out.path().join("KQvK.zdz").exists());
}
