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
        """2 if the side to move wins, 0 for a draw, -2 if it loses."""
        return self._tables.value(_fen(position))[0]

    def probe_dtm(self, position) -> Optional[int]:
        """Plies to mate with best play: positive when the side to move mates, negative when it
        is mated (0: checkmated now); None for a draw."""
        return self._tables.value(_fen(position))[1]

    def best_move(self, position) -> Optional[str]:
        """The best move in UCI (fastest mate, slowest loss, or one that keeps the draw), or
        None when there is no legal move."""
        return self._tables.best_move(_fen(position))


def solve(materials: Union[str, List[str]], directory, threads: Optional[int] = None,
          memory: Optional[int] = None) -> List[str]:
    """Builds each material (e.g. "KPvK") and every material it converts into in
    ``directory``, skipping complete tables; returns the materials built."""
    if isinstance(materials, str):
        materials = [materials]
    os.makedirs(os.fspath(directory), exist_ok=True)
    return _solve(list(materials), os.fspath(directory), threads, memory)
