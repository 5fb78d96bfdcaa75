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
    assert tb.probe_dtm("8/8/8/8/8/8/kP6/7K b - - 0 1") is None
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
    with pytest.raises(FileNotFoundError, match="zermelo solve KQvKR"):
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
    assert tb.best_move(board) == "e2e4"


def test_the_kpk_study_prints_the_published_counts(tables):
    out = subprocess.run(
        [sys.executable, os.path.join(HERE, "..", "examples", "kpk_study.py"), str(tables)],
        capture_output=True, text=True, check=True,
    ).stdout
    # kpk.md, files a-d.
    assert "White to move: 81,664 legal positions, 62,480 won by White" in out, out
    assert "Black to move: 84,012 legal positions, 48,802 won by White" in out, out
    assert "right in " in out and "of 165,676 positions" in out, out
