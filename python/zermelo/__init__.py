"""Zermelo: exact chess endgame tables (win, draw or loss, and depth to mate) from Python.

    import zermelo
    zermelo.solve(["KPvK"], "tables")
    tb = zermelo.Tablebase("tables")
    tb.probe("8/8/8/8/8/8/4P3/K1k5 w - - 0 1")["dtm"]   # 25

Positions are FEN strings (underscores may stand for spaces) or objects with a ``fen()``
method, such as python-chess's ``chess.Board``. Values ignore the 50-move rule.
"""

import json
import os
from typing import List, Optional, Sequence, Union

from ._zermelo import Tables as _Tables
from ._zermelo import dtz as _dtz
from ._zermelo import solve as _solve

__all__ = ["Tablebase", "solve"]


def _fen(position) -> str:
    if isinstance(position, str):
        return position
    fen = getattr(position, "fen", None)
    if callable(fen):
        return fen()
    raise TypeError("a position is a FEN string or an object with a fen() method, such as chess.Board")


def _dirs(directory) -> str:
    if isinstance(directory, (list, tuple)):
        return ":".join(os.fspath(d) for d in directory)
    return os.fspath(directory)


class Tablebase:
    """The tables of a directory (or of a list of directories, searched in order)."""

    def __init__(self, directory: Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]):
        self._tables = _Tables(_dirs(directory))

    def probe(self, position) -> dict:
        """The position and every move with its value: the fields of ``zermelo probe``'s JSON
        (the lichess tablebase API's shape: category, dtm, checkmate, stalemate, moves, ...)."""
        return json.loads(self._tables.probe_json(_fen(position)))

    def probe_wdl(self, position) -> int:
        """As python-chess's ``probe_wdl``: under the 50-move rule (halfmove clock 0) from the
        DTZ50 tables where they are, 2 win, 1 cursed win, 0 draw, -1 blessed loss, -2 loss;
        without them, from the mates (the rule ignored): 2, 0 or -2."""
        fen = _fen(position)
        try:
            return self._tables.dtz50(fen)[0]
        except FileNotFoundError:
            return self._tables.value(fen)[0]

    def probe_dtz(self, position) -> int:
        """As python-chess's ``probe_dtz``, but exact (never off by one): the plies to the next
        zeroing move (capture or pawn move) or mate under the 50-move rule, positive when the
        side to move wins (over 100: a cursed win), negative when it loses (under -100: a
        blessed loss), 0 for a draw and for checkmate. Needs the DTZ50 tables (``dtz``);
        FileNotFoundError without them."""
        return self._tables.dtz50(_fen(position))[1]

    def probe_dtm(self, position) -> Optional[int]:
        """Plies to mate with best play: positive when the side to move mates, negative when it
        is mated (0: checkmated now); None for a draw."""
        return self._tables.value(_fen(position))[1]

    def best_move(self, position) -> Optional[str]:
        """The best move in UCI (fastest mate, slowest loss, or one that keeps the draw), or
        None when there is no legal move."""
        return self._tables.best_move(_fen(position))


def dtz(materials: Union[str, List[str]], directory, threads: Optional[int] = None) -> List[str]:
    """Builds the DTZ50 tables (``KRPvKR.zdz``) of each material and of every material it
    converts into in ``directory``, skipping complete ones; returns the materials built."""
    if isinstance(materials, str):
        materials = [materials]
    os.makedirs(os.fspath(directory), exist_ok=True)
    return _dtz(list(materials), os.fspath(directory), threads)


def solve(materials: Union[str, List[str]], directory, threads: Optional[int] = None,
          memory: Optional[int] = None) -> List[str]:
    """Builds each material (e.g. "KPvK") and every material it converts into in
    ``directory``, skipping complete tables; returns the materials built."""
    if isinstance(materials, str):
        materials = [materials]
    os.makedirs(os.fspath(directory), exist_ok=True)
    return _solve(list(materials), os.fspath(directory), threads, memory)
