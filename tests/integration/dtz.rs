//! DTZ50 tables (`zermelo dtz`): checked by the independent verifier (which fails on one value
//! changed), and against the tables of mates, a second solver, where the two metrics coincide.

use std::path::Path;

use zermelo_chess::{Dtz, Value};
use zermelo_storage::{write_table, Metric, SliceData, Table, TableMeta};

use crate::common::*;

fn build_dtz(dir: &Path, materials: &[&str]) {
    let mut args = vec!["dtz", "--tables", dir.to_str().unwrap()];
    args.extend_from_slice(materials);
    assert_ok(&run(&args));
}

fn slices(path: &Path) -> (Table, Vec<([u64; 2], Vec<u16>)>) {
    let table = Table::open(path).unwrap();
    let slices = (0..table.slices().len())
        .map(|i| (table.slices()[i].key, table.read_slice(i).unwrap()))
        .collect();
    (table, slices)
}

#[test]
fn dtz50_tables_verify_and_one_value_changed_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    build_dtz(dir.path(), &["KRvKP"]);
    let o = run(&[
        "verify", "--dtz50", "--tables", d, "KRvKP", "KQvK", "KRvK", "KPvK",
    ]);
    assert_ok(&o);
    assert_eq!(
        stdout(&o).lines().filter(|l| l.contains(": ok")).count(),
        4,
        "{}",
        stdout(&o)
    );
    // Without --dtz50 the verifier looks for tables of mates, and says so.
    let o = run(&["verify", "--tables", d, "KRvK"]);
    assert!(!o.status.success());

    // One win made a ply slower, the file rewritten whole (its checksums right): the value no
    // longer follows from its children.
    let path = dir.path().join("KRvKP.zdz");
    let (table, mut values) = slices(&path);
    let (slice, index) = values
        .iter()
        .enumerate()
        .find_map(|(s, (_, v))| {
            v.iter()
                .position(|&r| matches!(Dtz::from_raw(r), Some(Dtz::Win(n)) if n > 3))
                .map(|i| (s, i))
        })
        .expect("a win");
    let Some(Dtz::Win(n)) = Dtz::from_raw(values[slice].1[index]) else {
        unreachable!()
    };
    values[slice].1[index] = Dtz::Win(n + 1).raw();
    let meta = TableMeta {
        material: table.meta().material.clone(),
        metric: Metric::Dtz50,
        index_layout: table.meta().index_layout,
    };
    drop(table);
    let data: Vec<SliceData<'_>> = values
        .iter()
        .map(|(key, v)| SliceData { key: *key, values: v })
        .collect();
    write_table(&path, &meta, &data).unwrap();
    let o = run(&["verify", "--dtz50", "--tables", d, "KRvKP"]);
    assert!(!o.status.success(), "{}", stdout(&o));
    let out = stdout(&o);
    assert!(
        out.contains("FAILED") && out.contains(&format!("next zeroing move or mate in {} plies", n + 1)),
        "{out}"
    );
}

/// In KQvK and KRvK the winner never makes a zeroing move (there is nothing to take, no pawn)
/// and the loser's only one, taking the piece, draws: so every win and loss is a line to mate,
/// and DTZ50 equals the distance to mate of the mate solver's tables, position by position,
/// every one within the rule. A second path, sharing no solver code with `dtz`.
#[test]
fn dtz50_is_the_mate_distance_where_no_zeroing_move_is_made() {
    let mates = tables_with(&["KQvK", "KRvK"]);
    let dir = tempfile::tempdir().unwrap();
    build_dtz(dir.path(), &["KQvK", "KRvK"]);
    for m in ["KQvK", "KRvK"] {
        let (_, dtm) = slices(&mates.join(format!("{m}.zmt")));
        let (_, dtz) = slices(&dir.path().join(format!("{m}.zdz")));
        let (mut wins, mut losses) = (0, 0);
        for ((_, a), (_, b)) in dtm.iter().zip(&dtz) {
            assert_eq!(a.len(), b.len());
            for (i, (&a, &b)) in a.iter().zip(b).enumerate() {
                let same = match (Value::from_raw(a), Dtz::from_raw(b)) {
                    (None, None) | (Some(Value::Draw), Some(Dtz::Draw)) => true,
                    (Some(Value::Win(x)), Some(Dtz::Win(y))) => {
                        wins += 1;
                        x == y && y <= 100
                    }
                    (Some(Value::Loss(x)), Some(Dtz::Loss(y))) => {
                        losses += 1;
                        x == y && y <= 100
                    }
                    _ => false,
                };
                assert!(same, "{m} index {i}: mate {a}, DTZ50 {b}");
            }
        }
        assert!(wins > 0 && losses > 0, "{m}");
    }
}

/// The halfmove clock of the FEN decides whether a win holds under the rule: KRvK with the
/// rook's side to mate in 29 plies is a win with 71 plies on the clock, a cursed win with 72.
#[test]
fn probe_honours_the_halfmove_clock() {
    let dir = tempfile::tempdir().unwrap();
    build_dtz(dir.path(), &["KRvK"]);
    let d = dir.path().to_str().unwrap();
    assert_ok(&run(&["solve", "KRvK", "--tables", d]));
    let fen = |clock: u32| format!("8/8/8/8/4k3/8/8/K6R w - - {clock} 80");
    let p = probe(dir.path(), &[&fen(0), &fen(71), &fen(72)]);
    for (answer, category) in p.iter().zip(["win", "win", "cursed-win"]) {
        assert_eq!(answer["dtz"], 29, "{answer}");
        assert_eq!(answer["precise_dtz"], 29, "{answer}");
        assert_eq!(answer["dtm"], 29, "{answer}");
        assert_eq!(answer["category"], category, "{answer}");
        assert_eq!(answer["ignores_50_move_rule"], false, "{answer}");
    }
    // After a rook move (not zeroing) with 71 on the clock the opponent, at 72, is mated in 28
    // within the rule (28 + 72 = 100).
    let m = &p[1]["moves"][0];
    assert_eq!(m["dtz"], -28, "{m}");
    assert_eq!(m["category"], "loss", "{m}");
    // Without DTZ50 tables the answer is the mates' and says it ignores the rule.
    let mates = tables_with(&["KRvK"]);
    let p = probe(&mates, &[&fen(72)]);
    assert_eq!(p[0]["dtz"], serde_json::Value::Null);
    assert_eq!(p[0]["category"], "win");
    assert_eq!(p[0]["ignores_50_move_rule"], true);
}

/// A build past the memory budget is refused before any work, with what it needs.
#[test]
fn a_dtz50_build_past_the_budget_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(&[
        "dtz",
        "KQRvKR",
        "--tables",
        dir.path().to_str().unwrap(),
        "--memory",
        "64MiB",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("KQRvKR needs about") && stderr(&o).contains("nothing was built"),
        "{}",
        stderr(&o)
    );
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "nothing written"
    );
}

/// A complete DTZ50 table is kept; one with a byte flipped is built again, to the same bytes.
#[test]
fn a_damaged_dtz50_table_is_built_again() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    build_dtz(dir.path(), &["KQvK"]);
    let path = dir.path().join("KQvK.zdz");
    let good = std::fs::read(&path).unwrap();
    let o = run(&["dtz", "KQvK", "--tables", d]);
    assert_ok(&o);
    assert!(
        stdout(&o).contains(r#""material":"KQvK","built":false"#),
        "{}",
        stdout(&o)
    );
    let mut bad = good.clone();
    let at = bad.len() / 3;
    bad[at] ^= 0x40;
    std::fs::write(&path, &bad).unwrap();
    let o = run(&["dtz", "KQvK", "--tables", d]);
    assert_ok(&o);
    assert!(
        stdout(&o).contains(r#""material":"KQvK","built":true"#),
        "{}",
        stdout(&o)
    );
    assert_eq!(std::fs::read(&path).unwrap(), good);
}
