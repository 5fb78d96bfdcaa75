"""Tests of the Python module against facts known without it: KPK's published counts
(tests/data/kpk.md), textbook positions, and the CLI's own answers."""

import json
import os
import subprocess
import sys

import pytest

import zermelo

HERE = os.path.dirname(os.path.abspath(__file__))
MATE_IN_25 = "8/8/8/8/8/8/4P3/K1k5 w - - 0 1"


@pytest.fixture(scope="session")
def tables(tmp_path_factory):
    d = tmp_path_factory.mktemp("tables")
    built = zermelo.solve(["KPvK"], d)
    assert "KPvK" in built
    assert zermelo.solve("kpvk", d) == [], "a complete table is not built again"
    return d


def test_probe_gives_the_lichess_fields(tables):
    tb = zermelo.Tablebase(tables)
    a = tb.probe(MATE_IN_25)
    assert (a["category"], a["dtm"], a["dtz"]) == ("win", 25, None)
    assert a["moves"][0]["uci"] == "e2e4"
    for key in ("checkmate", "stalemate", "insufficient_material", "precise_dtz", "variant_win"):
        assert key in a
    assert tb.probe(MATE_IN_25.replace(" ", "_"))["moves"] == a["moves"]


def test_wdl_dtm_and_best_move(tables):
    tb = zermelo.Tablebase(str(tables))
    assert tb.probe_wdl(MATE_IN_25) == 2
    assert tb.probe_dtm(MATE_IN_25) == 25
    assert tb.best_move(MATE_IN_25) == "e2e4"
    black = "8/8/8/8/8/8/4P3/K1k5 b - - 0 1"
    assert tb.probe_wdl(black) == -2 and tb.probe_dtm(black) < 0
    # Kxb2 into bare kings: a draw.
    assert tb.probe_wdl("8/8/8/8/8/8/kP6/7K b - - 0 1") == 0
    assert tb.probe_dtm("8/8/8/8/8/8/kP6/7K b - - 0 1") == 0  # a draw, as chess.gaviota
    # Only b8=R wins (kpk.md): the queen stalemates.
    assert tb.best_move("8/1P6/k7/8/K7/8/8/8 w - - 0 1") == "b7b8r"
    # Checkmated: no move.
    assert tb.best_move("k1Q5/8/1K6/8/8/8/8/8 b - - 0 1") is None


def test_the_same_answers_as_the_cli(tables):
    cli = os.environ.get("ZERMELO_BIN")
    if not cli:
        pytest.skip("ZERMELO_BIN not set")
    fens = [MATE_IN_25, "8/8/8/8/P7/K4k2/8/8 b - - 0 1", "4k3/8/8/4K3/4P3/8/8/8 b - - 0 1"]
    out = subprocess.run([cli, "probe", "--tables", str(tables)] + fens, capture_output=True, text=True, check=True)
    tb = zermelo.Tablebase(tables)
    for line, f in zip(out.stdout.splitlines(), fens):
        assert json.loads(line) == tb.probe(f)


def test_errors_are_python_exceptions(tables):
    tb = zermelo.Tablebase(tables)
    with pytest.raises(ValueError, match="invalid FEN"):
        tb.probe("not a fen")
    with pytest.raises(zermelo.MissingTableError, match="zermelo solve KQvKR"):
        tb.probe_wdl("k7/8/1K6/8/8/8/8/1Q5r w - - 0 1")
    with pytest.raises(FileNotFoundError):
        zermelo.Tablebase("/nonexistent-zermelo-dir")
    with pytest.raises(ValueError):
        zermelo.solve(["KQQQQQQvK"], tables)  # 8 men: refused before any work
    with pytest.raises(TypeError):
        tb.probe(42)


def test_chess_board_objects(tables):
    chess = pytest.importorskip("chess")
    tb = zermelo.Tablebase(tables)
    board = chess.Board(MATE_IN_25)
    assert tb.probe_dtm(board) == 25
    assert tb.best_move(board) == chess.Move.from_uci("e2e4")


def test_the_kpk_study_reproduces_the_published_counts_and_draws_its_figure(tables, tmp_path):
    out_json, out_svg = tmp_path / "kpk.json", tmp_path / "kpk.svg"
    out = subprocess.run(
        [sys.executable, os.path.join(HERE, "..", "examples", "kpk_study.py"), str(tables),
         "--json", str(out_json), "--svg", str(out_svg)],
        capture_output=True, text=True, check=True,
    ).stdout
    # kpk.md, files a-d.
    assert "White to move: 81,664 legal positions, 62,480 won by White" in out, out
    assert "Black to move: 84,012 legal positions, 48,802 won by White" in out, out
    study = json.loads(out_json.read_text())
    assert study["positions"] == 165_676
    assert study["table"] == {"white_to_move_won": 62_480, "black_to_move_lost": 48_802, "total": 111_282}
    # The study's own solver (plain Python, no code of Zermelo's) agrees with the table...
    assert study["second_solver_disagreements"] == []
    assert study["variants"]["as the rules are (second solver)"] == study["table"]
    # ... and with kpk.md's fact: with queen promotions only, 111,279 wins (3 need a rook).
    assert study["variants"]["promotion to a queen only"]["total"] == 111_279
    # The forum's count is near a generator whose double step jumps over Black's king: far
    # nearer than the table (412 away) or than any other variant.
    forum = study["forum_thread"]
    far = {k: abs(v["white_to_move_won"] - forum["white_to_move_won"]) + abs(v["black_to_move_lost"] - forum["black_to_move_lost"])
           for k, v in study["variants"].items()}
    assert min(far, key=far.get) == "the double step jumps over the black king" and far[min(far, key=far.get)] < 41, far
    rules = study["rules"]
    # The seed study's figures: always guessing win 67.2% (right exactly where White wins),
    # the square alone 81.8%, square or key square 82.8%, its strict opposition rule calling
    # 9 wins (and no false one).
    assert rules["always win"]["right"] == 111_282 and rules["always win"]["accuracy"] == 67.17
    assert round(rules["square"]["accuracy"], 1) == 81.8
    assert round(rules["square or key square"]["accuracy"], 1) == 82.8
    assert (rules["strict opposition"]["wins_it_calls"], rules["strict opposition"]["false_wins"]) == (9, 0)
    for r in rules.values():
        assert r["right"] + r["false_wins"] + r["false_draws"] == 165_676
        assert len(r["fails"]) == 3 or r["right"] == 165_676
        for f in r["fails"]:
            # A failing position is one where the rule and the table differ; the table's side
            # is what the module says.
            wdl = zermelo.Tablebase(tables).probe_wdl(f["fen"])
            white_wins = wdl == 2 if " w " in f["fen"] else wdl == -2
            assert f["table"] == ("win" if white_wins else "draw") != f["rule"], f
    # The figure: valid SVG, one line a rule, its points the JSON's accuracies by rank.
    import xml.etree.ElementTree as ET
    root = ET.parse(out_svg).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    lines = root.findall(f"{ns}polyline")
    assert len(lines) == len(rules)
    top, bottom, height = 40, 50, float(root.get("height"))
    for line, r in zip(lines, rules.values()):
        ys = [float(p.split(",")[1]) for p in line.get("points").split()]
        accuracies = [top + (100 - a) * (height - top - bottom) / 100 for a in r["accuracy_by_pawn_rank"].values()]
        assert ys == pytest.approx(accuracies, abs=0.06)


@pytest.fixture(scope="session")
def dtz_tables(tmp_path_factory):
    d = tmp_path_factory.mktemp("dtz")
    zermelo.solve(["KPvK"], d)
    built = zermelo.dtz(["KPvK"], d)
    assert "KPvK" in built and "KQvK" in built
    assert zermelo.dtz("kpvk", d) == [], "complete DTZ50 tables are not built again"
    return d


def test_dtz50_and_wdl50(dtz_tables, tables):
    tb = zermelo.Tablebase(dtz_tables)
    # The pawn's first move wins at once under the rule: the next zeroing move is now.
    assert tb.probe_dtz(MATE_IN_25) == 1 and tb.probe_wdl(MATE_IN_25) == 2
    # Black to move: a king move, then White's pawn move (python-chess may say -1: it rounds).
    black = "8/8/8/8/8/8/4P3/K1k5 b - - 0 1"
    assert tb.probe_dtz(black) == -2 and tb.probe_wdl(black) == -2
    # A draw (the king takes the pawn), a stalemate, and checkmate (a loss in 0 plies).
    assert tb.probe_dtz("8/8/8/8/8/8/kP6/7K b - - 0 1") == 0
    assert tb.probe_dtz("1k6/1P6/1K6/8/8/8/8/8 b - - 0 1") == 0
    # Checkmated: -1, as python-chess's probe_dtz and lichess give it.
    mated = "k1Q5/8/1K6/8/8/8/8/8 b - - 0 1"
    assert tb.probe_dtz(mated) == -1 and tb.probe_wdl(mated) == -2
    # The WDL50 tables beside them (.zwl, a fraction of the size) answer probe_wdl first, and
    # as the DTZ50 tables do.
    assert sorted(p.name for p in dtz_tables.glob("KPvK.z*")) == ["KPvK.zdz", "KPvK.zmt", "KPvK.zwl"]
    native = tb._native()
    for fen in (MATE_IN_25, black, "8/8/8/8/8/8/kP6/7K b - - 0 1", mated):
        assert native.wdl50(fen) == native.dtz50(fen)[0]
    a = tb.probe(MATE_IN_25)
    assert (a["dtz"], a["precise_dtz"], a["ignores_50_move_rule"]) == (1, 1, False)
    # The halfmove clock: a win 1 ply from its zeroing move holds with 99 on the clock.
    assert tb.probe(MATE_IN_25.replace(" 0 1", " 99 80"))["category"] == "win"
    # Without DTZ50 tables: probe_dtz names the command that builds them; probe_wdl gives
    # the mates' value.
    plain = zermelo.Tablebase(tables)
    with pytest.raises(zermelo.MissingTableError, match="zermelo dtz"):
        plain.probe_dtz(MATE_IN_25)
    assert plain.probe_wdl(MATE_IN_25) == 2


def test_packed_tables_answer_as_the_full_ones(dtz_tables, tmp_path):
    """`zermelo pack` keeps one side to move a file; the module answers the other by a search
    of one ply, the same as the full tables on every probe."""
    cli = os.environ.get("ZERMELO_BIN")
    if not cli:
        pytest.skip("ZERMELO_BIN not set")
    out = tmp_path / "packed"
    subprocess.run([cli, "pack", "KPvK", "--tables", str(dtz_tables), "--out", str(out)],
                   check=True, capture_output=True)
    assert sorted(p.name for p in out.glob("KPvK.z*")) == ["KPvK.zdz", "KPvK.zmt", "KPvK.zwl"]
    full, packed = zermelo.Tablebase(dtz_tables), zermelo.Tablebase(out)
    import random
    rng = random.Random(11)
    seen = 0
    while seen < 400:
        wk, bk, p = rng.sample(range(64), 3)
        if not 8 <= p < 56:
            continue
        board = ["."] * 64
        board[wk], board[bk], board[p] = "K", "k", "P"
        rows = []
        for r in range(7, -1, -1):
            row = "".join(board[r * 8:(r + 1) * 8])
            for n in range(8, 0, -1):
                row = row.replace("." * n, str(n))
            rows.append(row)
        fen = "/".join(rows) + " " + rng.choice("wb") + " - - 0 1"
        try:
            want = full.probe(fen)
        except ValueError:
            continue  # an illegal position: both refuse it
        assert packed.probe(fen) == want, fen
        assert packed.probe_dtz(fen) == full.probe_dtz(fen), fen
        assert packed.probe_wdl(fen) == full.probe_wdl(fen), fen
        seen += 1
