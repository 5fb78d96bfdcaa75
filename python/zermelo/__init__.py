"""Zermelo: exact chess endgame tables (win, draw or loss, depth to mate, DTZ50) from Python.

With python-chess's verbs and semantics (``chess.gaviota`` for DTM, ``chess.syzygy`` for WDL
and DTZ)::

    import chess, zermelo
    zermelo.solve(["KPvK"], "tables")                  # builds KPvK and what it converts into
    with zermelo.open_tablebase("tables") as tb:
        board = chess.Board("8/8/8/8/8/8/4P3/K1k5 w - - 0 1")
        tb.probe_dtm(board)    # 25: White mates in 25 plies (0 draw or checkmated, < 0 mated)
        tb.probe_wdl(board)    # 2 win, 0 draw, -2 loss (1 and -1: cursed win, blessed loss)
        tb.best_move(board)    # chess.Move.from_uci("e2e4")

Positions are ``chess.Board`` objects or FEN strings (read as lichess reads them: ``_`` or
``+`` may stand for spaces, only the board is required). A missing table raises
:class:`MissingTableError`, a :class:`KeyError` as python-chess's; a position no table holds
(castling rights, more than 7 men) a :class:`KeyError`; a FEN that is not a legal position a
:class:`ValueError`; a damaged table a :class:`RuntimeError`.
"""

import os
import re
from typing import Any, Dict, List, Optional, Sequence, Union

from ._zermelo import MissingTableError
from ._zermelo import Tables as _Tables
from ._zermelo import dtz as _dtz
from ._zermelo import solve as _solve

__all__ = ["MissingTableError", "Tablebase", "dtz", "open_tablebase", "solve"]

PathLike = Union[str, "os.PathLike[str]"]
#: A position: a ``chess.Board`` (or any object with a ``fen()`` method) or a FEN string.
Position = Any

#: The file of a table: a material (e.g. ``KRPvKR``) and ``.zmt`` (DTM) or ``.zdz`` (DTZ50).
_TABLE_FILE = re.compile(r"^K[QRBNP]*vK[QRBNP]*\.(zmt|zdz|zwl)$")


def _fen(position: Position) -> str:
    if isinstance(position, str):
        return position
    fen = getattr(position, "fen", None)
    if callable(fen):
        return fen()
    raise TypeError("a position is a FEN string or an object with a fen() method, such as chess.Board")


def _move(position: Position, uci: str) -> Any:
    """``uci`` as the caller's kind of move: a ``chess.Move`` for a board, a string for a FEN."""
    if isinstance(position, str):
        return uci
    import chess

    return chess.Move.from_uci(uci)


class Tablebase:
    """The tables of one or more directories, searched in the order they were added.

    Opened by :func:`open_tablebase` or built empty and filled by :meth:`add_directory`. Use
    it in a ``with`` block, or call :meth:`close`, to release the memory maps of its tables.
    """

    def __init__(self, directory: Union[None, PathLike, Sequence[PathLike]] = None) -> None:
        self._directories: List[str] = []
        self._tables: Optional[_Tables] = None
        self._closed = False
        if directory is None:
            return
        if isinstance(directory, (list, tuple)):
            for d in directory:
                self.add_directory(d)
        else:
            self.add_directory(directory)

    # -- python-chess's verbs ------------------------------------------------------------

    def add_directory(self, directory: PathLike) -> int:
        """Adds the tables of ``directory`` (searched after those added before) and returns
        how many table files (``.zmt`` and ``.zdz``) it holds. Tables are opened when first
        probed. Raises ``FileNotFoundError`` if the directory does not exist."""
        path = os.path.abspath(os.fspath(directory))
        if not os.path.isdir(path):
            raise FileNotFoundError(f"not a directory: {path!r}")
        found = sum(1 for name in os.listdir(path) if _TABLE_FILE.match(name))
        if path not in self._directories:
            self._directories.append(path)
            self._tables = _Tables(self._directories)
            self._closed = False
        return found

    def probe_wdl(self, board: Position) -> int:
        """Win/draw/loss for the side to move, as ``chess.syzygy``'s ``probe_wdl``: 2 win, 0
        draw, -2 loss; under the 50-move rule (halfmove clock 0) where the WDL50 or DTZ50 tables
        are (``.zwl``, read first, or ``.zdz``; ``zermelo dtz`` writes both), so also 1 (a
        cursed win: the rule draws it) and -1 (a blessed loss); without them the mates decide
        and the rule is ignored. Raises ``KeyError`` (:class:`MissingTableError`) if a
        table is missing."""
        fen = _fen(board)
        try:
            return self._native().wdl50(fen)
        except MissingTableError:
            pass
        try:
            return self._native().dtz50(fen)[0]
        except MissingTableError:
            return self._native().value(fen)[0]

    def get_wdl(self, board: Position, default: Optional[int] = None) -> Optional[int]:
        """:meth:`probe_wdl`, or ``default`` where it would raise ``KeyError``."""
        try:
            return self.probe_wdl(board)
        except KeyError:
            return default

    def probe_dtm(self, board: Position) -> int:
        """Depth to mate in plies, as ``chess.gaviota``'s ``probe_dtm``: positive when the side
        to move mates, negative when it is mated, 0 for a draw and for a position checkmated
        now. Exact, with best play on both sides; the 50-move rule is ignored. Raises
        ``KeyError`` (:class:`MissingTableError`) if a table is missing."""
        dtm = self._native().value(_fen(board))[1]
        return 0 if dtm is None else dtm

    def get_dtm(self, board: Position, default: Optional[int] = None) -> Optional[int]:
        """:meth:`probe_dtm`, or ``default`` where it would raise ``KeyError``."""
        try:
            return self.probe_dtm(board)
        except KeyError:
            return default

    def probe_dtz(self, board: Position) -> int:
        """DTZ50 as ``chess.syzygy``'s ``probe_dtz``, but exact (never rounded): the plies to the
        next zeroing move (a capture or a pawn move) or mate, positive when the side to move
        wins (over 100: a cursed win), negative when it loses (under -100: a blessed loss), 0
        for a draw, -1 for a position checkmated now. Needs the DTZ50 tables (:func:`dtz`);
        raises :class:`MissingTableError` without them."""
        return self._native().dtz50(_fen(board))[1]

    def get_dtz(self, board: Position, default: Optional[int] = None) -> Optional[int]:
        """:meth:`probe_dtz`, or ``default`` where it would raise ``KeyError``."""
        try:
            return self.probe_dtz(board)
        except KeyError:
            return default

    def close(self) -> None:
        """Closes the tables (their memory maps are released); probes then raise
        :class:`MissingTableError` until a directory is added again."""
        self._tables = None
        self._directories = []
        self._closed = True

    def __enter__(self) -> "Tablebase":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- Zermelo's own ----------------------------------------------------------------------

    @property
    def directories(self) -> List[str]:
        """The directories searched, in order."""
        return list(self._directories)

    def probe(self, board: Position) -> Dict[str, Any]:
        """The position and every move with its value: the fields of ``zermelo probe``'s JSON,
        the lichess tablebase API's (category, dtm, dtz, checkmate, moves, ...)."""
        import json

        return json.loads(self._native().probe_json(_fen(board)))

    def best_move(self, board: Position) -> Any:
        """The best move (the fastest mate, the slowest loss, or one that keeps the draw; ties
        in UCI order): a ``chess.Move`` for a board, a UCI string for a FEN; ``None`` when there
        is no legal move."""
        uci = self._native().best_move(_fen(board))
        return None if uci is None else _move(board, uci)

    def mainline(self, board: Position) -> List[Any]:
        """Best play to mate, one move a ply (the last one mates): ``chess.Move`` objects for a
        board, UCI strings for a FEN; empty for a draw."""
        return [_move(board, u) for u in self._native().mainline(_fen(board))]

    def solve(self, materials: Union[str, List[str]], threads: Optional[int] = None,
              memory: Optional[int] = None) -> List[str]:
        """Builds ``materials`` (and what they convert into) into the first directory, as
        :func:`solve`; their tables are probed at once."""
        if not self._directories:
            raise ValueError("no directory to build into: add one first")
        return solve(materials, self._directories[0], threads, memory)

    def _native(self) -> _Tables:
        if self._tables is None:
            why = "the tablebase is closed" if self._closed else "no directory added"
            raise MissingTableError(why)
        return self._tables


def open_tablebase(directory: PathLike) -> Tablebase:
    """Opens the tables of ``directory``, as python-chess's ``chess.gaviota.open_tablebase`` and
    ``chess.syzygy.open_tablebase`` do; more with :meth:`Tablebase.add_directory`."""
    return Tablebase(directory)


def dtz(materials: Union[str, List[str]], directory: PathLike, threads: Optional[int] = None) -> List[str]:
    """Builds the DTZ50 tables (``KRPvKR.zdz``) of each material and of every material it
    converts into in ``directory``, skipping complete ones; returns the materials built."""
    if isinstance(materials, str):
        materials = [materials]
    os.makedirs(os.fspath(directory), exist_ok=True)
    return _dtz(list(materials), os.fspath(directory), threads)


def solve(materials: Union[str, List[str]], directory: PathLike, threads: Optional[int] = None,
          memory: Optional[int] = None) -> List[str]:
    """Builds each material (e.g. ``"KPvK"``) and every material it converts into in
    ``directory``, skipping complete tables; returns the materials built. ``threads``: all
    cores by default; ``memory``: a budget in bytes (three quarters of the machine's by
    default)."""
    if isinstance(materials, str):
        materials = [materials]
    os.makedirs(os.fspath(directory), exist_ok=True)
    return _solve(list(materials), os.fspath(directory), threads, memory)
