//! `zermelo analyse`: one position's reachable slices, solved leaf-first; checked against
//! `probe` on full tables built by `zermelo solve`.

use std::path::Path;

use crate::common::*;
use zermelo_cli::materials::SplitMix;

fn analyse(dir: &Path, extra: &[&str], fens: &[String]) -> (Vec<serde_json::Value>, String) {
    let mut args = vec!["analyse", "--tables", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend(fens.iter().map(String::as_str));
    let o = run(&args);
    assert_ok(&o);
    let lines = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    (lines, stderr(&o))
}

/// The parts of a probe answer both commands give: value and every move's value.
fn answer(v: &serde_json::Value) -> serde_json::Value {
    let moves: Vec<serde_json::Value> = v["moves"]
        .as_array()
        .expect("moves")
        .iter()
        .map(|m| {
            serde_json::json!([
                m["uci"],
                m["san"],
                m["category"],
                m["dtm"],
                m["checkmate"],
                m["stalemate"]
            ])
        })
        .collect();
    serde_json::json!([
        v["fen"],
        v["category"],
        v["dtm"],
        v["checkmate"],
        v["stalemate"],
        moves
    ])
}

/// Acceptance 3 of issue 4: random positions answer the same through `analyse` (from an empty
/// directory: only the reachable slices are solved) as through `probe` on full tables.
#[test]
fn analyse_agrees_with_probe_on_random_positions() {
    let full = tables_with(&["KPvKP", "KRvKP", "KPPvK", "KQvKR"]);
    let mut rng = SplitMix(0x5eed_0004);
    let mut fens = Vec::new();
    for (w, b, n) in [
        ("KP", "K", 12),
        ("KP", "KP", 16),
        ("KR", "KP", 12),
        ("KPP", "K", 12),
        ("KQ", "KR", 8),
        ("K", "KP", 6),
    ] {
        fens.extend(random_positions(&mut rng, w, b, n));
    }
    let probed = probe(&full, &fens.iter().map(String::as_str).collect::<Vec<_>>());
    let fresh = tempfile::tempdir().unwrap();
    let (first, _) = analyse(fresh.path(), &[], &fens);
    assert_eq!(first.len(), fens.len());
    let mut decided = 0;
    for (a, p) in first.iter().zip(&probed) {
        assert_eq!(answer(a), answer(p), "analyse and probe differ");
        assert_eq!(a["exact"], true);
        decided += (a["category"] != "draw") as usize;
        // The principal variation of a win or loss is as long as the distance to mate.
        if let Some(dtm) = a["dtm"].as_i64().filter(|_| a["category"] != "draw") {
            assert_eq!(
                a["pv"].as_array().unwrap().len() as i64,
                dtm.abs(),
                "{}",
                a["fen"]
            );
        }
    }
    assert!(decided > 10, "too few decided positions to be a test: {decided}");
    // Analysis slices are kept apart from full tables.
    assert!(fresh.path().join("reachable").is_dir());
    assert!(!fresh.path().join("KPvKP.zmt").exists());

    // Again on the same directory: nothing left to solve, the same answers.
    let (second, err) = analyse(fresh.path(), &[], &fens);
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(answer(a), answer(b));
        assert_eq!(a["pv"], b["pv"]);
        assert_eq!(b["plan"]["slices"], 0, "{err}");
    }
}

/// An analysis of a material whose full table is in the directory solves nothing.
#[test]
fn analyse_reuses_full_tables() {
    let full = tables_with(&["KPvKP"]);
    let fen = "8/8/3k4/3p4/3P4/3K4/8/8 w - - 0 1".to_string();
    let (a, _) = analyse(&full, &[], std::slice::from_ref(&fen));
    assert_eq!(a[0]["plan"]["slices"], 0);
    assert_eq!(a[0]["plan"]["reused_slices"], 1);
    assert_eq!(answer(&a[0]), answer(&probe(&full, &[&fen])[0]));
}

/// A position whose promotions lead into 4 men with a piece: with `--adjudicate material:3` the
/// result says it is not exact and names the rule, the adjudicated slices are stored apart with
/// their own metric, and no exact reader serves them. A position the rule does not touch stays
/// exact.
#[test]
fn adjudicated_results_are_marked_and_never_served_as_exact() {
    let dir = tempfile::tempdir().unwrap();
    // Two pawns on the seventh: a promotion gives KQPvK (4 men with a queen), adjudicated.
    let fen = "8/1P4P1/8/8/8/8/8/k6K w - - 0 1".to_string();
    let (a, err) = analyse(
        dir.path(),
        &["--adjudicate", "material:3"],
        std::slice::from_ref(&fen),
    );
    let a = &a[0];
    assert_eq!(a["exact"], false, "{err}");
    assert_eq!(a["category"], "win");
    assert!(a["adjudication"].as_str().unwrap().starts_with("material:3"));
    assert!(a["plan"]["adjudicated_slices"].as_u64().unwrap() > 0);
    // The principal variation stops where it enters an adjudicated slice: at the promotion.
    let pv = a["pv"].as_array().unwrap();
    assert!(pv.last().unwrap().as_str().unwrap().contains('='), "{pv:?}");
    let adj = dir.path().join("adjudicated").join("material-3");
    assert!(adj.join("RULE").is_file());
    assert!(adj.join("KPPvK.zmt").is_file());
    // KPvK and the pawnless endings do not depend on the rule: they are in the exact store.
    assert!(dir.path().join("reachable").join("KPvK.zmt").is_file());
    assert!(!dir.path().join("reachable").join("KPPvK.zmt").exists());
    // Copied where full tables live, the adjudicated table is refused by verify, stats, probe.
    let exact_dir = tempfile::tempdir().unwrap();
    let e = exact_dir.path().to_str().unwrap();
    std::fs::copy(adj.join("KPPvK.zmt"), exact_dir.path().join("KPPvK.zmt")).unwrap();
    for args in [
        vec!["verify", "--tables", e, "KPPvK"],
        vec!["stats", "--tables", e, "KPPvK"],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stdout(&o));
        assert!(stderr(&o).contains("adjudicated"), "{}", stderr(&o));
    }
    let o = run(&["probe", "--tables", e, &fen]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).contains("adjudicated"), "{}", stdout(&o));

    // A 3-man position under the same rule: nothing is cut, the answer is exact.
    let kpk = "8/8/8/4k3/8/8/3P4/3K4 w - - 0 1".to_string();
    let (b, _) = analyse(
        dir.path(),
        &["--adjudicate", "material:3"],
        std::slice::from_ref(&kpk),
    );
    assert_eq!(b[0]["exact"], true);
    assert!(b[0].get("adjudication").is_none());
}

/// A plan past the machine is refused with the way out named; --plan-only prints the plan.
#[test]
fn a_plan_past_the_machine_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let fen = "8/k7/3p4/p2P1p2/P2P1P2/8/8/K7 w - - 0 1";
    let o = run(&["analyse", "--tables", d, fen]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("plan: ") && err.contains("estimate: memory"),
        "{err}"
    );
    assert!(err.contains("--adjudicate") && err.contains("--force"), "{err}");
    assert!(stdout(&o).is_empty());
    let o = run(&[
        "analyse",
        "--tables",
        d,
        "--plan-only",
        "--adjudicate",
        "material:4",
        fen,
    ]);
    assert_ok(&o);
    let plan: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert!(plan["slices"].as_u64().unwrap() > 1000);
    assert!(plan["adjudicated_slices"].as_u64().unwrap() > 0);
    // Nothing was solved or written.
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
    for bad in [
        vec!["analyse", "--tables", d, "8/8/8/8/8/8/8/8 w - - 0 1"],
        vec!["analyse", "--tables", d, "--adjudicate", "queens:3", fen],
    ] {
        let o = run(&bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
        assert_eq!(
            stderr(&o).lines().filter(|l| l.starts_with("zermelo: ")).count(),
            1,
            "{}",
            stderr(&o)
        );
    }
}

/// Issue 4, acceptance 2 (long: about two minutes; ZERMELO_LONG_TESTS=1): the Lasker-Reichhelm
/// position under full rules, with promotions into more than 4 men adjudicated by material.
/// 1.Kb1 wins, 1.Ka2 and 1.Kb2 draw (Fine, Basic Chess Endings #70).
#[test]
fn lasker_reichhelm_full_rules_with_adjudication() {
    if std::env::var_os("ZERMELO_LONG_TESTS").is_none() {
        eprintln!("skipped: set ZERMELO_LONG_TESTS=1");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fen = "8/k7/3p4/p2P1p2/P2P1P2/8/8/K7 w - - 0 1".to_string();
    let (a, _) = analyse(
        dir.path(),
        &["--adjudicate", "material:4"],
        std::slice::from_ref(&fen),
    );
    let a = &a[0];
    assert_eq!(a["category"], "win");
    assert_eq!(a["exact"], false);
    let cat = |san: &str| {
        a["moves"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["san"] == san)
            .map(|m| m["category"].as_str().unwrap().to_string())
    };
    assert_eq!(cat("Kb1").as_deref(), Some("loss"));
    assert_eq!(cat("Ka2").as_deref(), Some("draw"));
    assert_eq!(cat("Kb2").as_deref(), Some("draw"));
    assert_eq!(a["pv"][0], "Kb1");
}

/// Issue 4, acceptance 1: the Lasker-Reichhelm position under Church's COORD rules. White to
/// move wins and 1.Kb1 is the only winning move; Black to move, it is a draw.
#[test]
fn lasker_reichhelm_under_coord_rules() {
    let dir = tempfile::tempdir().unwrap();
    let fens = [
        "8/k7/3p4/p2P1p2/P2P1P2/8/8/K7 w - - 0 1".to_string(),
        "8/k7/3p4/p2P1p2/P2P1P2/8/8/K7 b - - 0 1".to_string(),
    ];
    let (a, _) = analyse(dir.path(), &["--rules", "coord"], &fens);
    assert_eq!(a[0]["rules"], "coord");
    assert_eq!(a[0]["category"], "win");
    let winning: Vec<&str> = a[0]["moves"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["category"] == "loss")
        .map(|m| m["san"].as_str().unwrap())
        .collect();
    assert_eq!(winning, ["Kb1"]);
    assert_eq!(a[0]["moves"].as_array().unwrap().len(), 3);
    // The principal variation ends with the capture of a black pawn, as long as the distance.
    let pv = a[0]["pv"].as_array().unwrap();
    assert_eq!(pv.len() as i64, a[0]["dtm"].as_i64().unwrap());
    assert!(pv.last().unwrap().as_str().unwrap().starts_with("Kx"), "{pv:?}");
    assert_eq!(a[1]["category"], "draw");
    // COORD is for kings and pawns only, and takes no adjudication.
    let d = dir.path().to_str().unwrap();
    for bad in [
        vec![
            "analyse",
            "--tables",
            d,
            "--rules",
            "coord",
            "4k3/8/8/8/8/8/4P3/4K1N1 w - - 0 1",
        ],
        vec![
            "analyse",
            "--tables",
            d,
            "--rules",
            "coord",
            "--adjudicate",
            "material:4",
            &fens[0],
        ],
        vec!["analyse", "--tables", d, "--rules", "go", &fens[0]],
    ] {
        let o = run(&bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
    }
}

/// Issue 4, acceptance 3 with five men (long: several minutes; ZERMELO_LONG_TESTS=1): random
/// KRRvKR positions answer the same through `analyse` (from an empty directory) as through
/// `probe` on the full table.
#[test]
fn analyse_agrees_with_probe_on_five_men() {
    if std::env::var_os("ZERMELO_LONG_TESTS").is_none() {
        eprintln!("skipped: set ZERMELO_LONG_TESTS=1");
        return;
    }
    let full = tables_with(&["KRRvKR"]);
    let mut rng = SplitMix(0x5eed_0005);
    let fens = random_positions(&mut rng, "KRR", "KR", 24);
    let probed = probe(&full, &fens.iter().map(String::as_str).collect::<Vec<_>>());
    let fresh = tempfile::tempdir().unwrap();
    let (analysed, _) = analyse(fresh.path(), &[], &fens);
    let mut decided = 0;
    for (a, p) in analysed.iter().zip(&probed) {
        assert_eq!(answer(a), answer(p), "analyse and probe differ");
        decided += (a["category"] != "draw") as usize;
    }
    assert!(decided > 5, "{decided}");
}
