"""zermelo.open_tablebase with python-chess's verbs and semantics (chess.gaviota for DTM,
chess.syzygy for WDL), on KPvK, KRvKP and KQvKR: code written for chess.gaviota runs on it
unchanged, and its values are checked move by move with python-chess's own move generator,
which shares no code with Zermelo."""

import gc
import random

import pytest

chess = pytest.importorskip("chess")

import zermelo  # noqa: E402


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    d = tmp_path_factory.mktemp("pychess")
    zermelo.solve(["KPvK", "KRvKP", "KQvKR"], d)
    return d


def mapped(directory) -> bool:
    """True if this process maps a file of ``directory`` (a table opened by a probe)."""
    with open("/proc/self/maps") as f:
        return str(directory) in f.read()


def test_open_tablebase_add_directory_close_and_with(tables, tmp_path):
    tb = zermelo.open_tablebase(tables)
    assert isinstance(tb, zermelo.Tablebase)
    assert tb.directories == [str(tables)]
    # add_directory counts the table files it found, as chess.syzygy's does.
    empty = tmp_path / "more"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a table")
    assert tb.add_directory(empty) == 0
    files = [f for f in tables.iterdir() if f.suffix == ".zmt"]
    assert len(files) >= 8 and zermelo.Tablebase().add_directory(tables) == len(files)
    with pytest.raises(FileNotFoundError):
        tb.add_directory(tmp_path / "nowhere")
    tb.close()

    # `with` closes: the maps of the tables are released, and a probe raises KeyError.
    board = chess.Board("8/8/8/8/8/8/4P3/K1k5 w - - 0 1")
    with zermelo.open_tablebase(tables) as tb:
        assert tb.probe_dtm(board) == 25
        assert mapped(tables)
    gc.collect()
    assert not mapped(tables), "the tables are still mapped after the with block"
    with pytest.raises(zermelo.MissingTableError, match="closed"):
        tb.probe_dtm(board)
    assert tb.get_dtm(board) is None
    # An empty tablebase filled later, as with chess.syzygy.Tablebase().
    later = zermelo.Tablebase()
    with pytest.raises(KeyError):
        later.probe_wdl(board)
    later.add_directory(tables)
    assert later.probe_wdl(board) == 2


def test_python_chess_semantics(tables):
    tb = zermelo.open_tablebase(tables)
    # A draw is 0, as chess.gaviota gives it (KPvK: the king takes the pawn).
    draw = chess.Board("8/8/8/8/8/8/kP6/7K b - - 0 1")
    assert (tb.probe_dtm(draw), tb.probe_wdl(draw), tb.get_dtm(draw), tb.get_wdl(draw)) == (0, 0, 0, 0)
    # Checkmated: DTM 0 (chess.gaviota), WDL -2 (chess.syzygy).
    mated = chess.Board("k1Q5/8/1K6/8/8/8/8/8 b - - 0 1")
    assert mated.is_checkmate()
    assert (tb.probe_dtm(mated), tb.probe_wdl(mated)) == (0, -2)
    # Wins and losses: signed plies to mate for the side to move.
    assert tb.probe_dtm(chess.Board("8/8/8/8/8/8/4P3/K1k5 w - - 0 1")) == 25
    assert tb.probe_dtm(chess.Board("8/8/8/8/8/8/4P3/K1k5 b - - 0 1")) < 0
    # A material without its table: KeyError, specifically MissingTableError; get_* give the
    # default instead.
    kqqk = chess.Board("k7/8/1K6/8/8/8/8/1QQ5 w - - 0 1")
    with pytest.raises(KeyError):
        tb.probe_dtm(kqqk)
    with pytest.raises(zermelo.MissingTableError):
        tb.probe_wdl(kqqk)
    assert tb.get_dtm(kqqk) is None and tb.get_wdl(kqqk, 7) == 7 and tb.get_dtz(kqqk) is None
    # Castling rights and too many men: KeyError, as python-chess raises.
    with pytest.raises(KeyError, match="castling"):
        tb.probe_dtm(chess.Board("4k3/8/8/8/8/8/8/R3K2R w K - 0 1"))
    with pytest.raises(KeyError, match="men"):
        tb.probe_wdl(chess.Board("rnbqkbnr/8/8/8/8/8/8/RNBQKBNR w - - 0 1"))
    # Rights the board does not allow are dropped, as python-chess drops them.
    assert tb.probe_dtm("8/8/8/8/8/8/4P3/K1k5 w KQkq - 0 1") == 25
    # Not a position: ValueError.
    with pytest.raises(ValueError):
        tb.probe_dtm("8/8/8 w - - 0 1")
    # No DTZ50 tables built: probe_dtz raises MissingTableError (a KeyError).
    with pytest.raises(KeyError, match="zermelo dtz"):
        tb.probe_dtz(chess.Board("8/8/8/8/8/8/4P3/K1k5 w - - 0 1"))


def gaviota_style_line(tablebase, board):
    """Code written for chess.gaviota's API alone (probe_dtm, get_dtm, probe_wdl, KeyError):
    plays the fastest mate for the winner and the slowest for the loser until mate, and
    returns the moves in SAN."""
    line = []
    board = board.copy()
    while not board.is_game_over():
        best, best_score = None, None
        for move in board.legal_moves:
            board.push(move)
            try:
                # The opponent's DTM after the move: mated in |d| is a win in |d| + 1 for the
                # mover (sooner is better), 0 a draw, mating in d a loss in d + 1 (later is better).
                d = tablebase.probe_dtm(board)
                if board.is_checkmate():
                    score = (2, -1)
                elif d < 0:
                    score = (2, d - 1)
                elif d == 0:
                    score = (1, 0)
                else:
                    score = (0, d + 1)
            except KeyError:
                score = None
            board.pop()
            if score is not None and (best_score is None or score > best_score):
                best, best_score = move, score
        if best is None or tablebase.get_wdl(board) == 0:
            break
        line.append(board.san(best))
        board.push(best)
    return line, board


def random_board(rng, white, black):
    """A random legal position of the men named (kings included), either side to move."""
    while True:
        board = chess.Board(None)
        squares = rng.sample(range(64), len(white) + len(black))
        for sq, (symbol, color) in zip(squares, [(s, chess.WHITE) for s in white] + [(s, chess.BLACK) for s in black]):
            board.set_piece_at(sq, chess.Piece.from_symbol(symbol if color == chess.WHITE else symbol.lower()))
        board.turn = rng.choice([chess.WHITE, chess.BLACK])
        if board.is_valid():
            return board


def test_values_agree_with_python_chess_moves_and_gaviota_style_code_runs(tables):
    """For random positions of each material, the DTM is what python-chess's legal moves and
    the DTM of the positions after them say it must be (the retrograde rule, checked from the
    outside); a line played by chess.gaviota-style code ends in mate after exactly DTM plies."""
    rng = random.Random(38)
    tb = zermelo.open_tablebase(tables)
    checked = {"win": 0, "draw": 0, "loss": 0}
    for white, black in [("KP", "K"), ("KR", "KP"), ("KQ", "KR")]:
        for _ in range(60):
            board = random_board(rng, white, black)
            dtm = tb.probe_dtm(board)
            if board.is_checkmate():
                assert dtm == 0 and tb.probe_wdl(board) == -2
                continue
            wins, losses, draws = [], [], False
            for move in board.legal_moves:
                board.push(move)
                if board.is_checkmate():
                    wins.append(1)
                elif board.is_stalemate() or board.is_insufficient_material():
                    draws = True
                else:
                    after = tb.probe_dtm(board)
                    if after < 0:
                        wins.append(1 - after)
                    elif after > 0:
                        losses.append(after + 1)
                    else:
                        draws = True
                board.pop()
            expected = min(wins) if wins else 0 if draws or not losses else -max(losses)
            assert dtm == expected, board.fen()
            wdl = tb.probe_wdl(board)
            assert wdl == (2 if dtm > 0 else -2 if dtm < 0 else 0), board.fen()
            checked["win" if dtm > 0 else "loss" if dtm < 0 else "draw"] += 1
            # Zermelo's best move is one of the moves that keep the value.
            best = tb.best_move(board)
            assert isinstance(best, chess.Move) and best in board.legal_moves
    assert all(n > 0 for n in checked.values()), checked

    # The mainline and gaviota-style play: both end in mate after the DTM's plies.
    start = chess.Board("8/8/1k6/8/8/8/6Q1/K6r w - - 0 1")
    dtm = tb.probe_dtm(start)
    assert dtm > 0
    line = tb.mainline(start)
    assert len(line) == dtm and all(isinstance(m, chess.Move) for m in line)
    played = start.copy()
    for m in line:
        assert m in played.legal_moves
        played.push(m)
    assert played.is_checkmate()
    assert tb.mainline(start.fen()) == [m.uci() for m in line]
    sans, end = gaviota_style_line(tb, start)
    assert end.is_checkmate() and len(sans) == dtm, sans


def test_type_stubs_match_the_native_module():
    """Every name of ``_zermelo.pyi`` is in the native module and every public name of the
    module is in the stubs, methods of ``Tables`` included: an editor's hints are the truth."""
    import ast
    import os

    import zermelo._zermelo as native

    path = os.path.join(os.path.dirname(zermelo.__file__), "_zermelo.pyi")
    tree = ast.parse(open(path).read())
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    public = {n for n in dir(native) if not n.startswith("_")}
    assert stubbed == public
    tables = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Tables")
    methods = {n.name for n in tables.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}
    assert methods == {n for n in dir(native.Tables) if not n.startswith("_")}
    assert os.path.exists(os.path.join(os.path.dirname(zermelo.__file__), "py.typed"))
