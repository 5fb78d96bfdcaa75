"""H.G. Muller's "material tablebase": which materials are drawish, derived by retrograde analysis
over materials rather than hand-coded, as a pure function of rules given as data.

A *fact* ``(A, D)`` says: the side with men ``A`` (besides its king) cannot generally win against
the side with men ``D``. Sides are strings of piece letters, strongest first (``"RB"``, ``""``).
The derivation starts from the facts it is given (``Rules.base``: no mating material), and adds,
until nothing more follows, for every material of at most ``max_men`` men:

- **more for the defender**: if ``(A, D)`` holds, ``(A, D + x)`` holds for any man ``x``;
- **unbalanced pair**: if ``(A, D)`` holds, ``(A + y, D + x)`` holds when the defender can
  sacrifice its stronger piece ``x`` for the weaker ``y``: ``x`` counted as its owner counts it
  is worth more than ``y`` counted as its opponent counts it (a pawn is 100 to its owner and
  250 to the opponent, who must stop it);
- **balanced pair**: ``(A + y, D + x)`` with ``x`` and ``y`` of one class holds only when every
  trade of that class the attacker may choose leads to a fact already derived: for each of the
  attacker's men ``a`` of the class, some defender's man ``d`` of the class with
  ``(A + y - a, D + x - d)`` a fact.

``Rules.exceptions`` are materials known to be won (KBBvKN) fixed in advance: their fact is never
derived, so nothing is derived from it. ``Rules.classes`` holds the piece classes and values, so
variant pieces are a line each.

A material is *drawish* when neither side can generally win: both ``(white, black)`` and
``(black, white)`` are facts.
"""

from dataclasses import dataclass, field
from itertools import combinations_with_replacement
from typing import Dict, Iterable, List, Optional, Tuple

#: Piece letters, strongest first: the order of material names (Syzygy's: K Q R B N P).
ORDER = "QRBNP"


@dataclass(frozen=True)
class PieceClass:
    """A class of men: trades within a class are even; ``own`` is a man's worth to its owner,
    ``theirs`` to its opponent."""

    name: str
    own: int
    theirs: int


#: Orthodox chess: pawns, light (~300), medium (~450) and heavy pieces.
ORTHODOX = {
    "Q": PieceClass("heavy", 900, 900),
    "R": PieceClass("medium", 450, 450),
    "B": PieceClass("light", 300, 300),
    "N": PieceClass("light", 300, 300),
    "P": PieceClass("pawn", 100, 250),
}


@dataclass
class Rules:
    """The data of a derivation."""

    classes: Dict[str, PieceClass] = field(default_factory=lambda: dict(ORTHODOX))
    #: Facts given: (attacker, defender) that cannot win. No mating material: a lone king, a
    #: lone minor, two knights.
    base: List[Tuple[str, str]] = field(default_factory=lambda: [("", ""), ("N", ""), ("B", ""), ("NN", "")])
    #: Facts known false in advance: (attacker, defender) that can win.
    exceptions: List[Tuple[str, str]] = field(default_factory=lambda: [("BB", "N")])
    #: The largest materials derived, kings included.
    max_men: int = 5


def rank(man: str) -> int:
    """A man's place in name order: orthodox men as Syzygy orders them, other letters after."""
    return ORDER.index(man) if man in ORDER else len(ORDER) + ord(man)


def side(men: Iterable[str]) -> str:
    """A side's men in name order (strongest first)."""
    return "".join(sorted(men, key=rank))




def sides_of(name: str) -> Tuple[str, str]:
    """``"KRPvKR"`` -> ``("RP", "R")``."""
    w, b = name.upper().split("V")
    return side(w.replace("K", "")), side(b.replace("K", ""))


def all_sides(men: int, letters: str) -> List[str]:
    """Every side of at most ``men`` men besides the king."""
    out = []
    for n in range(men + 1):
        out.extend(side(c) for c in combinations_with_replacement(letters, n))
    return out


def remove(s: str, man: str) -> str:
    i = s.index(man)
    return s[:i] + s[i + 1 :]


def derive(rules: Optional[Rules] = None) -> Dict[Tuple[str, str], str]:
    """Every fact the rules give, each with the reason it was first derived."""
    rules = rules or Rules()
    letters = side(rules.classes)
    blocked = {(side(a), side(d)) for a, d in rules.exceptions}
    facts: Dict[Tuple[str, str], str] = {}
    for a, d in rules.base:
        a, d = side(a), side(d)
        if (a, d) not in blocked:
            facts[(a, d)] = "given"
    room = rules.max_men - 2
    pairs = [(a, d) for a in all_sides(room, letters) for d in all_sides(room - len(a), letters)]
    # Smaller materials first: every rule derives a material from smaller ones, so one pass in
    # this order reaches the fixed point (a second pass checks it).
    pairs.sort(key=lambda p: (len(p[0]) + len(p[1]), p))
    cls = rules.classes
    changed = True
    while changed:
        changed = False
        for a, d in pairs:
            if (a, d) in facts or (a, d) in blocked:
                continue
            reason = _reason(a, d, facts, cls)
            if reason:
                facts[(a, d)] = reason
                changed = True
    return facts


def _name(a: str, d: str) -> str:
    """A fact's sides, attacker first: "KR against KB"."""
    return f"K{a} against K{d}"


def _reason(a: str, d: str, facts, cls) -> Optional[str]:
    """Why ``(a, d)`` follows from ``facts``, or None."""
    for x in sorted(set(d), key=rank):
        if (a, remove(d, x)) in facts:
            return f"more for the defender: {x} added to {_name(a, remove(d, x))}"
    for x in sorted(set(d), key=rank):
        for y in sorted(set(a), key=rank):
            smaller = (remove(a, y), remove(d, x))
            if smaller not in facts:
                continue
            if cls[x].own > cls[y].theirs:
                return f"unbalanced pair: the defender gives {x} for {y}, back to {_name(*smaller)}"
            if cls[x].name == cls[y].name:
                ok = _balanced(a, d, cls[x].name, facts, cls)
                if ok:
                    return f"balanced pair {y}/{x}: every {cls[x].name} trade the attacker may choose leads to a drawn material ({ok})"
    return None


def _balanced(a: str, d: str, klass: str, facts, cls) -> Optional[str]:
    """The trades that hold, if every attacker's man of ``klass`` can be traded for some
    defender's man of it into a fact; else None."""
    held = []
    for am in sorted(set(c for c in a if cls[c].name == klass), key=rank):
        found = None
        for dm in sorted(set(c for c in d if cls[c].name == klass), key=rank):
            if (remove(a, am), remove(d, dm)) in facts:
                found = f"{am} for {dm}: {_name(remove(a, am), remove(d, dm))}"
                break
        if found is None:
            return None
        held.append(found)
    return "; ".join(held)


def drawish(facts, name: str) -> bool:
    """Neither side of material ``name`` can generally win."""
    w, b = sides_of(name)
    return (w, b) in facts and (b, w) in facts


def why(facts, name: str) -> str:
    """The reasons of a material's two facts, or what is missing."""
    w, b = sides_of(name)
    out = []
    for a, d, who in ((w, b, "White"), (b, w, "Black")):
        r = facts.get((a, d))
        out.append(f"{who} cannot win: {r}" if r else f"{who} may win: no rule reaches {_name(a, d)}")
    return "; ".join(out)


def with_tables(rules: Rules, exact: Dict[str, Tuple[bool, bool]], max_men: int) -> Rules:
    """The rules with the exact verdicts of every material of at most ``max_men`` men given:
    ``exact[name] = (white cannot win, black cannot win)``. Each becomes a base fact or an
    exception (Muller's claim: 3-4-men tables already make a good base)."""
    base = list(rules.base)
    exceptions = list(rules.exceptions)
    for name, cannot in exact.items():
        w, b = sides_of(name)
        if len(w) + len(b) + 2 > max_men:
            continue
        for (a, d), c in (((w, b), cannot[0]), ((b, w), cannot[1])):
            (base if c else exceptions).append((a, d))
    return Rules(classes=rules.classes, base=base, exceptions=exceptions, max_men=rules.max_men)
