"""The KPK study, redone from the table: count the legal and the won positions with the pawn on
files a-d (the published figures: White to move 81,664 legal and 62,480 won, Black to move
84,012 legal and 48,802 won for White), then score a rule of thumb against the table.

The rules: "White wins when its king stands in front of its pawn" (on a square of the pawn's
file or a neighbouring one, on a rank above the pawn's), and its opposite number, "White wins
unless Black's king stands in front of the pawn" (the same squares). The score of a rule is how
often its verdict (win or not) agrees with the table's.

    python examples/kpk_study.py TABLES_DIR        # builds KPvK there first if it is missing
"""

import sys

import zermelo

FILES = "abcdefgh"


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


def in_front(wk, wp):
    return wk // 8 > wp // 8 and abs(wk % 8 - wp % 8) <= 1


def study(directory):
    zermelo.solve(["KPvK"], directory)
    tb = zermelo.Tablebase(directory)
    counts = {"w": [0, 0], "b": [0, 0]}  # legal, won by White
    agree = [0, 0]
    total = 0
    for turn in "wb":
        for wp in range(8, 56):
            if wp % 8 > 3:
                continue  # files a-d
            for wk in range(64):
                for bk in range(64):
                    if len({wk, wp, bk}) < 3:
                        continue
                    try:
                        wdl = tb.probe_wdl(fen(wk, wp, bk, turn))
                    except ValueError:
                        continue  # not a legal position
                    white_wins = wdl == 2 if turn == "w" else wdl == -2
                    counts[turn][0] += 1
                    counts[turn][1] += white_wins
                    total += 1
                    agree[0] += in_front(wk, wp) == white_wins
                    agree[1] += (not in_front(bk, wp)) == white_wins
    return counts, agree, total


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else "tables"
    counts, agree, total = study(directory)
    for turn, name in (("w", "White"), ("b", "Black")):
        legal, won = counts[turn]
        print(f"{name} to move: {legal:,} legal positions, {won:,} won by White, {legal - won:,} not")
    rules = ("White wins when its king is in front of its pawn", "White wins unless Black's king is in front of the pawn")
    for rule, right in zip(rules, agree):
        print(f"rule '{rule}': right in {right:,} of {total:,} positions ({100 * right / total:.1f}%)")


if __name__ == "__main__":
    main()
