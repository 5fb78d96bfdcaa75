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

/// Writes the table file at `path` again, whole (its checksums right), with `slices`.
fn rewrite(path: &Path, meta: &TableMeta, slices: &[([u64; 2], Vec<u16>)]) {
    let data: Vec<SliceData<'_>> = slices
        .iter()
        .map(|(key, v)| SliceData { key: *key, values: v })
        .collect();
    write_table(path, meta, &data).unwrap();
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
        stdout(&o)
            .lines()
            .filter(|l| l.contains(": ok") && !l.contains(".zwl"))
            .count(),
        4,
        "{}",
        stdout(&o)
    );
    // The WDL50 table beside each DTZ50 table is checked too.
    assert_eq!(
        stdout(&o)
            .lines()
            .filter(|l| l.contains(".zwl: ok") && l.contains("each the WDL50 class of its DTZ50 value"))
            .count(),
        4,
        "{}",
        stdout(&o)
    );
    // Without --dtz50 the verifier looks for tables of mates, and says so.
    let o = run(&["verify", "--tables", d, "KRvK"]);
    assert!(!o.status.success());

    // One WDL50 class changed (a win made cursed), the file rewritten whole: caught.
    let wdl_path = dir.path().join("KRvKP.zwl");
    let (wdl_table, mut classes) = slices(&wdl_path);
    let meta = wdl_table.meta().clone();
    drop(wdl_table);
    let (s, i) = classes
        .iter()
        .enumerate()
        .find_map(|(s, (_, v))| v.iter().position(|&c| c == 5).map(|i| (s, i)))
        .expect("a win");
    classes[s].1[i] = 4;
    rewrite(&wdl_path, &meta, &classes);
    let o = run(&["verify", "--dtz50", "--tables", d, "KRvKP"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let out = stdout(&o);
    assert!(
        out.contains("KRvKP: ok") && out.contains("KRvKP.zwl: FAILED"),
        "{out}"
    );
    assert!(
        out.contains(&format!("index {i}")) && out.contains("WDL50 value 4"),
        "{out}"
    );
    // `zermelo dtz` writes it again from the DTZ50 table (its checksums pass, its values are
    // what is wrong: only the verifier sees that; a missing file is written again too).
    std::fs::remove_file(&wdl_path).unwrap();
    build_dtz(dir.path(), &["KRvKP"]);
    assert_ok(&run(&["verify", "--dtz50", "--tables", d, "KRvKP"]));

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
    rewrite(&path, &meta, &values);
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

/// The WDL50 tables answer as the DTZ50 tables do, position by position, en passant included.
/// A WDL50 table holds no distance, so a position with an en-passant capture is resolved from
/// the stored class of its board and the class after each capture (`probe::wdl50`), where the
/// DTZ50 probe looks one move ahead on every move: two ways to the same answer.
#[test]
fn wdl50_tables_answer_as_the_dtz50_tables_en_passant_included() {
    use zermelo_chess::probe;
    use zermelo_chess::Position;
    use zermelo_cli::materials::SplitMix;
    use zermelo_worker::tables::TableDir;

    let dir = tempfile::tempdir().unwrap();
    build_dtz(dir.path(), &["KPvKP"]);
    let dtz = TableDir::dtz50(&[dir.path().to_owned()]);
    let wdl = dtz.wdl50_view();
    let mut rng = SplitMix(39);
    let (mut with_ep, mut all) = (0, 0);
    let mut classes = std::collections::BTreeSet::new();
    while with_ep < 400 || all < 4000 {
        // Squares 0..64, a1 = 0. Half the time a pawn has just been pushed two squares beside
        // an enemy pawn that may take it en passant.
        let mut board = [None::<char>; 64];
        let (mover_white, ep) = (rng.below(2) == 0, rng.below(2) == 0);
        let file = rng.below(8) as usize;
        let beside = if file == 0 || (file < 7 && rng.below(2) == 0) {
            file + 1
        } else {
            file - 1
        };
        let (pushed, taker, ep_square) = if ep {
            // White to move: a black pawn pushed to rank 5 beside a white one on rank 5.
            if mover_white {
                (('p', 32 + file), ('P', 32 + beside), Some(40 + file))
            } else {
                (('P', 24 + file), ('p', 24 + beside), Some(16 + file))
            }
        } else {
            (
                ('P', 8 + rng.below(48) as usize),
                ('p', 8 + rng.below(48) as usize),
                None,
            )
        };
        board[pushed.1] = Some(pushed.0);
        if board[taker.1].is_some() {
            continue;
        }
        board[taker.1] = Some(taker.0);
        for king in ['K', 'k'] {
            let sq = rng.below(64) as usize;
            if board[sq].is_some()
                || ep_square.is_some_and(|e| e == sq || e + 8 == sq || e - 8 == sq && !mover_white)
            {
                break;
            }
            board[sq] = Some(king);
        }
        if board.iter().flatten().count() != 4 {
            continue;
        }
        let mut fen = placement(&board);
        let ep_field = ep_square.map_or("-".to_owned(), |e| {
            format!("{}{}", (b'a' + (e % 8) as u8) as char, e / 8 + 1)
        });
        fen.push_str(&format!(
            " {} - {ep_field} 0 1",
            if mover_white { 'w' } else { 'b' }
        ));
        let Ok(pos) = Position::from_fen(&fen) else {
            continue;
        };
        if pos.legal_moves().is_empty() && pos.ep_square.is_none() && all > 100 {
            continue;
        }
        let by_dtz = probe::dtz(&pos, &dtz).unwrap().wdl50();
        let by_wdl = probe::wdl50(&pos, &wdl).unwrap();
        assert_eq!(by_wdl, by_dtz, "{fen}");
        classes.insert(by_wdl);
        all += 1;
        with_ep += usize::from(pos.ep_square.is_some());
    }
    assert!(classes.len() >= 3, "too few kinds of positions met: {classes:?}");
}

/// With a list of directories, the WDL50 table of a DTZ50 table found in another directory is
/// written into the first, as every table is: the others are only read.
#[test]
fn wdl50_tables_go_to_the_first_directory_of_a_list() {
    let (first, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    build_dtz(other.path(), &["KRvK"]);
    let names = |d: &Path| {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    };
    std::fs::remove_file(other.path().join("KRvK.zwl")).unwrap();
    let before = names(other.path());
    let list = format!("{}:{}", first.path().display(), other.path().display());
    assert_ok(&run(&["dtz", "--tables", &list, "KRvK"]));
    assert_eq!(names(other.path()), before, "the second directory was written to");
    assert_eq!(names(first.path()), ["KRvK.zwl"]);
    let o = run(&["verify", "--dtz50", "--tables", &list, "KRvK"]);
    assert_ok(&o);
    assert!(stdout(&o).contains("KRvK.zwl: ok"), "{}", stdout(&o));
}

/// With the tables of mates in the folder, their draws are the DTZ50 tables' draws, found
/// without a move generated: the same bytes as a build without them. A damaged table of mates
/// is not used (a line says so), and the bytes are the same again.
#[test]
fn the_draws_of_the_tables_of_mates_give_the_same_dtz50_tables() {
    let plain = tempfile::tempdir().unwrap();
    build_dtz(plain.path(), &["KRvKP"]);
    let with = tempfile::tempdir().unwrap();
    let w = with.path().to_str().unwrap();
    assert_ok(&run(&["solve", "--tables", w, "KRvKP"]));
    let o = run(&["dtz", "--tables", w, "KRvKP"]);
    assert_ok(&o);
    assert!(stderr(&o).contains("draws_from_mates=true"), "{}", stderr(&o));
    let same = |what: &str| {
        for m in ["KRvKP", "KQvK", "KRvK", "KPvK"] {
            let name = format!("{m}.zdz");
            let a = std::fs::read(plain.path().join(&name)).unwrap();
            let b = std::fs::read(with.path().join(&name)).unwrap();
            assert!(a == b, "{name}: other bytes {what}");
        }
    };
    same("with the draws of the tables of mates");

    let zmt = with.path().join("KRvKP.zmt");
    let mut bytes = std::fs::read(&zmt).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    std::fs::write(&zmt, bytes).unwrap();
    std::fs::remove_file(with.path().join("KRvKP.zdz")).unwrap();
    let o = run(&["dtz", "--tables", w, "KRvKP"]);
    assert_ok(&o);
    assert!(
        stderr(&o).contains("the table of mates is damaged"),
        "{}",
        stderr(&o)
    );
    same("with a damaged table of mates beside them");
}
