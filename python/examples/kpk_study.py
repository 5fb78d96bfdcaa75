"""The KPK study, redone exactly from the table.

The seed study built KPK, then scored rules of thumb against it: "the rule of the square alone is
right in 81.8% of positions, square or key square 82.8%, always guessing win 67.2%". It left a gap
unexplained: a forum thread counts Win 62,642 and Loss 49,052 (111,694 won for White) where the
study has 111,282, with the same 165,676 legal positions.

This script:
1. reads every legal KPK position with the pawn on files a-d (the convention of the published
   counts: see `count_legal`) from Zermelo's KPvK table, and solves KPK again on its own, in a
   few lines of plain Python (`solve`: no code shared with Zermelo), which must agree with the
   table position by position;
2. scores the rules of thumb (`RULES`) against the table: accuracy, false wins (the rule says
   win, the table draw), false draws, by pawn rank and side to move, and three positions where
   each rule fails;
3. solves the variants that could explain the gap (stalemate scored as a loss for the side
   stalemated; promotion to a queen only; a promotion counted won at once, or won even where it
   stalemates; the pawn's double step jumping over Black's king) and says which, if any, gives
   62,642 / 49,052 (the jump comes within 20: 62,662 / 49,047);
4. writes it all as JSON (`--json`), and a figure of each rule's accuracy by pawn rank (`--svg`).

    python examples/kpk_study.py TABLES_DIR [--json OUT.json] [--svg OUT.svg]

It builds KPvK in TABLES_DIR first if it is missing.
"""

import argparse
import json
import sys

FILES = "abcdefgh"
KING = [
    [t for t in range(64) if t != s and abs(t % 8 - s % 8) <= 1 and abs(t // 8 - s // 8) <= 1]
    for s in range(64)
]


def dist(a, b):
    """Chebyshev distance: the king moves from a to b."""
    return max(abs(a % 8 - b % 8), abs(a // 8 - b // 8))


def pawn_attacks(p):
    """The squares a white pawn on p attacks."""
    f = p % 8
    return {p + 7} if f == 7 else {p + 9} if f == 0 else {p + 7, p + 9}


def name(s):
    return FILES[s % 8] + str(s // 8 + 1)


def fen(wk, wp, bk, turn):
    board = ["."] * 64
    for sq, man in ((wk, "K"), (wp, "P"), (bk, "k")):
        board[sq] = man
    rows = []
    for rank in range(7, -1, -1):
        row, empty = "", 0
        for f in range(8):
            man = board[rank * 8 + f]
            if man == ".":
                empty += 1
            else:
                row += (str(empty) if empty else "") + man
                empty = 0
        rows.append(row + (str(empty) if empty else ""))
    return "/".join(rows) + " " + turn + " - - 0 1"


def count_legal():
    """Every position of the published convention, pawn on files a-d: men on distinct squares,
    the pawn on ranks 2-7, kings not adjacent, the side not to move not in check (with White
    to move, the pawn must not attack Black's king). `(wk, wp, bk, turn)`."""
    out = []
    for turn in "wb":
        for wp in range(8, 56):
            if wp % 8 > 3:
                continue
            for wk in range(64):
                for bk in range(64):
                    if len({wk, wp, bk}) < 3 or dist(wk, bk) <= 1:
                        continue
                    if turn == "w" and bk in pawn_attacks(wp):
                        continue
                    out.append((wk, wp, bk, turn))
    return out


def black_moves(wk, wp, bk):
    """Black's king moves: ("take", square) for the capture of an undefended pawn, else the
    squares it may go to."""
    out = []
    attacked = pawn_attacks(wp)
    for t in KING[bk]:
        if dist(t, wk) <= 1 or t in attacked:
            continue
        out.append(("take", t) if t == wp else ("go", t))
    return out


def promotion_wins(wk, q, bk, piece, stalemate_loses):
    """Whether White wins after promoting to `piece` on q, Black to move. A queen or a rook wins
    unless Black takes it at once (KQK and KRK are won everywhere else); a stalemate draws, or
    loses with `stalemate_loses`. A bishop or a knight draws, but for a stalemate that loses."""
    if dist(bk, q) <= 1 and dist(wk, q) > 1:
        return False  # Black takes the new man: bare kings.
    rays = []
    if piece in "qr":
        rays += [(1, 0), (-1, 0), (0, 1), (0, -1)]
    if piece in "qb":
        rays += [(1, 1), (1, -1), (-1, 1), (-1, -1)]
    covered = set()
    for df, dr in rays:
        f, r = q % 8 + df, q // 8 + dr
        while 0 <= f < 8 and 0 <= r < 8:
            s = r * 8 + f
            covered.add(s)
            if s in (wk, bk):
                break
            f, r = f + df, r + dr
    if piece == "n":
        for df, dr in ((1, 2), (2, 1), (-1, 2), (-2, 1), (1, -2), (2, -1), (-1, -2), (-2, -1)):
            f, r = q % 8 + df, q // 8 + dr
            if 0 <= f < 8 and 0 <= r < 8:
                covered.add(r * 8 + f)
    in_check = bk in covered
    moves = [t for t in KING[bk] if dist(t, wk) > 1 and (t not in covered or t == q)]
    moves = [t for t in moves if not (t == q and dist(wk, q) <= 1)]
    if not moves and not in_check:
        return stalemate_loses
    if piece in "qr":
        return True
    return False


def solve(
    positions,
    stalemate_loses=False,
    pieces="qrbn",
    promotion_wins_outright=False,
    promotion_stalemate_wins=False,
    double_step_jumps=False,
):
    """KPK solved by plain iteration: the set of positions White wins. A Black position is
    lost when every move leads to a won White position (checkmate; a stalemate with
    `stalemate_loses`); a White position is won when a move leads to a lost Black one, or
    promotes to one of `pieces` that wins ([`promotion_wins`]; any promotion with
    `promotion_wins_outright`, as a bitbase that stops at the eighth rank might count; a
    promotion that stalemates too with `promotion_stalemate_wins`, as a generator that checks
    only that the new man cannot be taken might count). With `double_step_jumps` the pawn's
    double step may jump over Black's king on the square between (a bug a generator could
    have; over White's own king it changes no count)."""
    legal = set(positions)
    succ = {}
    won = set()
    for wk, wp, bk, turn in positions:
        key = (wk, wp, bk, turn)
        if turn == "b":
            moves = black_moves(wk, wp, bk)
            if any(kind == "take" for kind, _ in moves):
                succ[key] = None  # a draw: the pawn falls
                continue
            nexts = [(wk, wp, t, "w") for _, t in moves]
            if not nexts:
                if bk in pawn_attacks(wp) or stalemate_loses:
                    won.add(key)  # mate, or a stalemate that loses
                succ[key] = None
                continue
            succ[key] = nexts
        else:
            nexts = []
            for t in KING[wk]:
                if t != wp and dist(t, bk) > 1:
                    nexts.append((t, wp, bk, "b"))
            one = wp + 8
            two = wp + 16
            if double_step_jumps and wp < 16 and one == bk and two != wk:
                nexts.append((wk, two, bk, "b"))
            if one not in (wk, bk):
                if one >= 56:
                    if promotion_wins_outright or any(
                        promotion_wins(wk, one, bk, p, stalemate_loses or promotion_stalemate_wins) for p in pieces
                    ):
                        won.add(key)
                else:
                    nexts.append((wk, one, bk, "b"))
                    if wp < 16 and two not in (wk, bk):
                        nexts.append((wk, two, bk, "b"))
            succ[key] = [n for n in nexts if n in legal]
    changed = True
    while changed:
        changed = False
        for key, nexts in succ.items():
            if key in won or nexts is None:
                continue
            if key[3] == "w":
                hit = any(n in won for n in nexts)
            else:
                hit = all(n in won for n in nexts)
            if hit:
                won.add(key)
                changed = True
    return won


# The rules of thumb. Each says "White wins" or not for (wk, wp, bk, turn).


def square(wk, wp, bk, turn):
    """The rule of the square: White wins if Black's king cannot reach the pawn's square. The
    pawn needs n moves to promote (from rank 2, one fewer: the double step); Black's king is in
    the square if its distance to the promotion square is at most n with Black to move, n - 1
    with White to move. White's king is not looked at."""
    n = 7 - wp // 8 - (1 if wp // 8 == 1 else 0)
    q = 56 + wp % 8
    return dist(bk, q) > (n if turn == "b" else n - 1)


def key_squares_two_ahead(wp):
    """The key squares as the seed study took them (its 82.8% comes out with these): the three
    squares two ranks in front of the pawn (on the board), and for a rook pawn the two squares
    of the next file on ranks 7 and 8."""
    f, r = wp % 8, wp // 8
    if f in (0, 7):
        g = 1 if f == 0 else 6
        return {6 * 8 + g, 7 * 8 + g}
    return {(r + 2) * 8 + g for g in (f - 1, f, f + 1) if r + 2 <= 7}


def key_squares(wp):
    """The key squares of a white pawn (the textbook's): for a rook pawn, the two squares of the
    next file on ranks 7 and 8; for a pawn on ranks 2 to 4, the three squares two ranks in front
    of it; on ranks 5 and 6, the three squares one rank in front and the three two ranks in
    front; on rank 7, the squares beside it and the three of the promotion rank."""
    f, r = wp % 8, wp // 8
    if f in (0, 7):
        g = 1 if f == 0 else 6
        return {6 * 8 + g, 7 * 8 + g}
    files = (f - 1, f, f + 1)
    if r < 4:
        return {(r + 2) * 8 + g for g in files}
    if r < 6:
        return {rr * 8 + g for rr in (r + 1, r + 2) for g in files}
    return {r * 8 + f - 1, r * 8 + f + 1} | {7 * 8 + g for g in files}


def pawn_safe(wk, wp, bk, turn):
    """The pawn is not taken at once: Black is not to move beside an undefended pawn."""
    return not (turn == "b" and dist(bk, wp) <= 1 and dist(wk, wp) > 1)


def key_square(wk, wp, bk, turn):
    """The key-square rule: White wins if its king stands on a key square of the pawn (the three
    squares two ranks in front of it; [`key_squares_two_ahead`]) and the pawn is not taken at
    once."""
    return wk in key_squares_two_ahead(wp) and pawn_safe(wk, wp, bk, turn)


def square_or_key(wk, wp, bk, turn):
    """Either rule: the pawn runs, or White's king holds a key square (two ranks ahead)."""
    return square(wk, wp, bk, turn) or key_square(wk, wp, bk, turn)


def key_square_textbook(wk, wp, bk, turn):
    """The key-square rule with the textbook's key squares ([`key_squares`]: from the fifth
    rank on, one rank in front too), the pawn not taken at once."""
    return wk in key_squares(wp) and pawn_safe(wk, wp, bk, turn)


def square_or_key_textbook(wk, wp, bk, turn):
    """Either rule, with the textbook's key squares."""
    return square(wk, wp, bk, turn) or key_square_textbook(wk, wp, bk, turn)


def opposition(wk, wp, bk, turn):
    """The strict opposition rule: White wins if Black is to move and the kings stand in
    direct opposition (the same file, one square between) on the key squares' rank, White's
    king in front of its (non-rook) pawn on that rank, and the pawn is safe."""
    f = wp % 8
    if turn != "b" or f in (0, 7) or not pawn_safe(wk, wp, bk, turn):
        return False
    return wk % 8 == f and wk // 8 == wp // 8 + 2 <= 7 and bk == wk + 16 and wk + 16 < 64


def always(wk, wp, bk, turn):
    """Always guessing win."""
    return True


RULES = {
    "always win": always,
    "square": square,
    "key square": key_square,
    "square or key square": square_or_key,
    "key square (textbook)": key_square_textbook,
    "square or key square (textbook)": square_or_key_textbook,
    "strict opposition": opposition,
}


def study(directory):
    import zermelo

    zermelo.solve(["KPvK"], directory)
    tb = zermelo.Tablebase(directory)
    positions = count_legal()
    table = {}
    for p in positions:
        wdl = tb.probe_wdl(fen(*p))
        table[p] = wdl == 2 if p[3] == "w" else wdl == -2
    return positions, table


def score(positions, table):
    out = {}
    for label, rule in RULES.items():
        right = false_win = false_draw = fired_won = 0
        by_rank = {r: [0, 0] for r in range(2, 8)}
        by_turn = {t: [0, 0] for t in "wb"}
        fails = []
        for p in positions:
            says, truth = rule(*p), table[p]
            ok = says == truth
            right += ok
            false_win += says and not truth
            false_draw += truth and not says
            fired_won += says and truth
            rank = p[1] // 8 + 1
            by_rank[rank][0] += ok
            by_rank[rank][1] += 1
            by_turn[p[3]][0] += ok
            by_turn[p[3]][1] += 1
            if not ok and len(fails) < 3:
                fails.append({"fen": fen(*p), "rule": "win" if says else "draw", "table": "win" if truth else "draw"})
        out[label] = {
            "doc": " ".join((rule.__doc__ or "").split()),
            "right": right,
            "positions": len(positions),
            "accuracy": round(100 * right / len(positions), 2),
            "false_wins": false_win,
            "false_draws": false_draw,
            "wins_it_calls": fired_won,
            "accuracy_by_pawn_rank": {r: round(100 * a / n, 2) for r, (a, n) in by_rank.items()},
            "accuracy_by_side_to_move": {t: round(100 * a / n, 2) for t, (a, n) in by_turn.items()},
            "fails": fails,
        }
    return out


def counts(positions, won):
    w = sum(1 for p in positions if p[3] == "w" and p in won)
    b = sum(1 for p in positions if p[3] == "b" and p in won)
    return {"white_to_move_won": w, "black_to_move_lost": b, "total": w + b}


def legal_counts(positions):
    return {t: sum(1 for p in positions if p[3] == t) for t in "wb"}


def svg(rules):
    """Each rule's accuracy by pawn rank: one line each, ranks 2-7 across, 0-100% up."""
    colours = ["#888888", "#1f77b4", "#2ca02c", "#d62728", "#17becf", "#ff7f0e", "#9467bd"]
    w, h, left, top, bottom, right = 760, 400, 60, 40, 50, 300
    x = lambda r: left + (r - 2) * (w - left - right) / 5
    y = lambda a: top + (100 - a) * (h - top - bottom) / 100
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">',
        f'<rect width="{w}" height="{h}" fill="white"/>',
        f'<text x="{left}" y="22" font-size="15">KPK: how often each rule of thumb is right, by the pawn\'s rank</text>',
    ]
    for a in range(0, 101, 20):
        parts.append(f'<line x1="{left}" y1="{y(a):.1f}" x2="{w - right}" y2="{y(a):.1f}" stroke="#dddddd"/>')
        parts.append(f'<text x="{left - 8}" y="{y(a) + 4:.1f}" text-anchor="end">{a}%</text>')
    for r in range(2, 8):
        parts.append(f'<text x="{x(r):.1f}" y="{h - bottom + 18}" text-anchor="middle">{r}</text>')
    parts.append(f'<text x="{(left + w - right) / 2:.1f}" y="{h - 12}" text-anchor="middle">rank of the pawn</text>')
    for i, (label, s) in enumerate(rules.items()):
        c = colours[i % len(colours)]
        pts = " ".join(f"{x(int(r)):.1f},{y(a):.1f}" for r, a in s["accuracy_by_pawn_rank"].items())
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="2"/>')
        for r, a in s["accuracy_by_pawn_rank"].items():
            parts.append(f'<circle cx="{x(int(r)):.1f}" cy="{y(a):.1f}" r="3" fill="{c}"/>')
        ly = top + 20 + 22 * i
        parts.append(f'<line x1="{w - right + 12}" y1="{ly}" x2="{w - right + 32}" y2="{ly}" stroke="{c}" stroke-width="2"/>')
        parts.append(f'<text x="{w - right + 38}" y="{ly + 4}">{label} ({s["accuracy"]}%)</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tables", nargs="?", default="tables")
    ap.add_argument("--json", help="write the study as JSON here")
    ap.add_argument("--svg", help="write the figure of accuracy by pawn rank here")
    args = ap.parse_args()
    positions, table = study(args.tables)
    solved = solve(positions)
    disagree = [fen(*p) for p in positions if (p in solved) != table[p]]
    result = {
        "positions": len(positions),
        "legal": legal_counts(positions),
        "table": counts(positions, {p for p in positions if table[p]}),
        "second_solver_disagreements": disagree[:10],
        "rules": score(positions, table),
        "variants": {
            "as the rules are (second solver)": counts(positions, solved),
            "stalemate is a loss for the side stalemated": counts(positions, solve(positions, stalemate_loses=True)),
            "promotion to a queen only": counts(positions, solve(positions, pieces="q")),
            "both": counts(positions, solve(positions, stalemate_loses=True, pieces="q")),
            "a promotion wins outright (the new man may be taken)": counts(
                positions, solve(positions, promotion_wins_outright=True)
            ),
            "a promotion that stalemates wins": counts(positions, solve(positions, promotion_stalemate_wins=True)),
            "the double step jumps over the black king": counts(positions, solve(positions, double_step_jumps=True)),
        },
        "forum_thread": {"white_to_move_won": 62642, "black_to_move_lost": 49052, "total": 111694},
    }
    t, legal = result["table"], result["legal"]
    print(f"White to move: {legal['w']:,} legal positions, {t['white_to_move_won']:,} won by White (pawn on files a-d)")
    print(f"Black to move: {legal['b']:,} legal positions, {t['black_to_move_lost']:,} won by White")
    print(f"second solver: {len(disagree)} disagreement(s) with the table")
    for label, s in result["rules"].items():
        print(f"{label:32} {s['accuracy']:6.2f}% right, {s['false_wins']:,} false wins, {s['false_draws']:,} false draws, {s['wins_it_calls']:,} wins called")
    for label, c in result["variants"].items():
        print(f"{label:55} {c['white_to_move_won']:,} / {c['black_to_move_lost']:,} ({c['total']:,})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.svg:
        with open(args.svg, "w") as f:
            f.write(svg(result["rules"]))
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
