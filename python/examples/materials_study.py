"""Muller's material tablebase scored against exact tables, and the figure of every material.

Reads the JSON of `zermelo materials --json` (exact counts of every table in a directory) and:
1. labels each material from its exact values: a side *can generally win* when it wins at least
   half of the legal positions, counting both sides to move (a uniformly random position of the
   whole board, as published counts weigh them); a material is *drawish* when neither side can;
2. derives the drawish materials by Muller's rules alone (`zermelo.muller`, with his one
   exception, KBBvKN), and again with the exact verdicts of every material of at most 4 men
   given in advance (his claim: "with only 3-4-men tables you would already do a pretty good
   job");
3. scores both: a confusion table over all materials and over those the 3-4-men tables do not
   give, with every miss and the reason the rules give for it; and how the scores move when the
   threshold of "generally" is 40% or 60% instead of 50%;
4. writes the whole as JSON (`--json`) and a figure (`--svg`): a matrix of the materials, White's
   men by row and Black's by column, each cell coloured by its draw share, marked where the rules
   call it drawish and outlined where they are wrong.

    zermelo materials --tables DIR --json > materials.json
    python examples/materials_study.py materials.json [--json OUT.json] [--svg OUT.svg]
"""

import argparse
import json
import sys

from zermelo import muller

THRESHOLDS = (0.4, 0.5, 0.6)


def win_shares(m):
    """(White's win share, Black's win share) over both sides to move."""
    w, b = m["stats"]["white"], m["stats"]["black"]
    legal = w["legal"] + b["legal"]
    return (w["win"] + b["loss"]) / legal, (b["win"] + w["loss"]) / legal


def exact_verdicts(materials, threshold=0.5):
    """name -> (White cannot win, Black cannot win): a side cannot generally win when it wins
    less than `threshold` of the positions."""
    out = {}
    for m in materials:
        ws, bs = win_shares(m)
        out[m["stats"]["material"]] = (ws < threshold, bs < threshold)
    return out


def score(facts, verdicts, names):
    """The confusion table of the derivation's drawish set against the exact one, and the
    misses."""
    table = {"drawish_called_drawish": 0, "drawish_called_won": 0, "won_called_drawish": 0, "won_called_won": 0}
    misses = []
    for name in names:
        exact = all(verdicts[name])
        called = muller.drawish(facts, name)
        key = ("drawish" if exact else "won") + "_called_" + ("drawish" if called else "won")
        table[key] += 1
        if exact != called:
            misses.append({"material": name, "exact": "drawish" if exact else "won", "why": muller.why(facts, name)})
    right = table["drawish_called_drawish"] + table["won_called_won"]
    table["accuracy"] = round(100 * right / len(names), 1) if names else None
    table["materials"] = len(names)
    return table, misses


def study(doc):
    materials = doc["materials"]
    by_name = {m["stats"]["material"]: m for m in materials}
    names = list(by_name)
    max_men = max(m["men"] for m in materials)
    verdicts = exact_verdicts(materials)
    alone = muller.derive(muller.Rules(max_men=max_men))
    given = muller.with_tables(muller.Rules(max_men=max_men), verdicts, max_men=4)
    tables = muller.derive(given)
    beyond = [n for n in names if by_name[n]["men"] > 4]
    result = {"max_men": max_men, "threshold": 0.5, "exact_drawish": sorted(n for n in names if all(verdicts[n]))}
    result["rules_alone"] = {}
    result["rules_alone"]["all"], result["rules_alone"]["misses"] = score(alone, verdicts, names)
    result["rules_alone"]["beyond_4_men"], _ = score(alone, verdicts, beyond)
    result["rules_alone"]["drawish"] = sorted(n for n in names if muller.drawish(alone, n))
    result["with_4_men_tables"] = {}
    result["with_4_men_tables"]["beyond_4_men"], result["with_4_men_tables"]["misses"] = score(tables, verdicts, beyond)
    result["with_4_men_tables"]["drawish"] = sorted(n for n in beyond if muller.drawish(tables, n))
    result["threshold_sensitivity"] = {
        str(t): {
            "exact_drawish": sum(all(v) for v in exact_verdicts(materials, t).values()),
            "rules_alone": score(alone, exact_verdicts(materials, t), names)[0],
        }
        for t in THRESHOLDS
    }
    result["cells"] = [
        {
            "material": n,
            "draw_share": round(by_name[n]["draw_share"], 4),
            "exact_drawish": all(verdicts[n]),
            "rules_alone_drawish": muller.drawish(alone, n),
            "with_tables_drawish": muller.drawish(tables, n),
        }
        for n in names
    ]
    return result


def colour(share):
    """Draw share 0 (decisive: warm) to 1 (drawn: cool)."""
    lo, hi = (214, 96, 77), (67, 147, 195)
    mid = (247, 247, 247)
    a, b, t = (lo, mid, share * 2) if share < 0.5 else (mid, hi, share * 2 - 1)
    return "#%02x%02x%02x" % tuple(round(x + (y - x) * t) for x, y in zip(a, b))


def svg(result):
    """The matrix of materials (White's men by row, Black's by column), and below it those
    against a bare king of three men or more, in a strip of their own."""
    cells = {c["material"]: c for c in result["cells"]}
    key = lambda s: (len(s), [muller.rank(c) for c in s])  # noqa: E731
    strip = sorted((n for n in cells if muller.sides_of(n)[1] == "" and len(muller.sides_of(n)[0]) >= 3),
                   key=lambda n: key(muller.sides_of(n)[0]))
    matrix = [n for n in cells if n not in strip]
    rows = sorted({muller.sides_of(n)[0] for n in matrix}, key=key)
    cols = sorted({muller.sides_of(n)[1] for n in matrix}, key=key)
    size, left, top, per_line = 36, 64, 110, 12
    strip_top = top + size * len(rows) + 40
    strip_lines = -(-len(strip) // per_line)
    width = max(left + size * max(len(cols), per_line) + 20, 660)
    height = strip_top + (size + 16) * strip_lines + 70
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        '<text x="12" y="22" font-size="15">Every material: % of positions drawn (both sides to move)</text>',
        '<text x="12" y="42">White (the stronger side) by row, Black by column. Dot: drawish by Muller\'s rules alone;</text>',
        '<text x="12" y="58">ring: drawish only with the exact 3-4-men tables given; thick frame: the rules alone are wrong</text>',
        '<text x="12" y="74">(drawish: neither side wins half the positions).</text>',
    ]

    def cell(name, x0, y0):
        c = cells[name]
        wrong = c["rules_alone_drawish"] != c["exact_drawish"]
        stroke = 'stroke="black" stroke-width="2.5"' if wrong else 'stroke="#bbbbbb" stroke-width="0.5"'
        out.append(
            f'<rect x="{x0 + 1}" y="{y0 + 1}" width="{size - 2}" height="{size - 2}" fill="{colour(c["draw_share"])}" {stroke}>'
            f'<title>{name}: {100 * c["draw_share"]:.1f}% drawn; exact {"drawish" if c["exact_drawish"] else "won"}</title></rect>'
        )
        out.append(
            f'<text x="{x0 + size / 2}" y="{y0 + size / 2 + 4}" text-anchor="middle" data-material="{name}">{round(100 * c["draw_share"])}</text>'
        )
        if c["rules_alone_drawish"]:
            out.append(f'<circle cx="{x0 + size - 7}" cy="{y0 + 7}" r="3" fill="black"/>')
        elif c["with_tables_drawish"]:
            out.append(f'<circle cx="{x0 + size - 7}" cy="{y0 + 7}" r="3" fill="none" stroke="black"/>')

    for j, c in enumerate(cols):
        out.append(f'<text x="{left + j * size + size / 2}" y="{top - 6}" text-anchor="middle">K{c}</text>')
    for i, r in enumerate(rows):
        out.append(f'<text x="{left - 6}" y="{top + i * size + size / 2 + 4}" text-anchor="end">K{r}</text>')
        for j, c in enumerate(cols):
            name = "K" + r + "vK" + c
            if name in cells:
                cell(name, left + j * size, top + i * size)
    if strip:
        out.append(f'<text x="12" y="{strip_top - 10}">Against a bare king:</text>')
        for k, name in enumerate(strip):
            x0 = left + (k % per_line) * size
            y0 = strip_top + (k // per_line) * (size + 16)
            cell(name, x0, y0)
            out.append(f'<text x="{x0 + size / 2}" y="{y0 + size + 11}" text-anchor="middle" font-size="9">K{muller.sides_of(name)[0]}</text>')
    # The colour scale.
    y = height - 50
    for k in range(11):
        out.append(f'<rect x="{left + k * 30}" y="{y}" width="30" height="14" fill="{colour(k / 10)}"/>')
        out.append(f'<text x="{left + k * 30 + 15}" y="{y + 28}" text-anchor="middle">{k * 10}</text>')
    out.append(f'<text x="{left + 340}" y="{y + 11}">% of positions drawn</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def print_table(title, t):
    print(f"{title}: {t['materials']} materials, {t['accuracy']}% right")
    print(f"  exact drawish: called drawish {t['drawish_called_drawish']:>4}, called won {t['drawish_called_won']:>4}")
    print(f"  exact won:     called drawish {t['won_called_drawish']:>4}, called won {t['won_called_won']:>4}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("materials", help="the JSON of `zermelo materials --json`")
    ap.add_argument("--json", help="write the study as JSON here")
    ap.add_argument("--svg", help="write the figure here")
    args = ap.parse_args()
    try:
        with open(args.materials) as f:
            doc = json.load(f)
        doc["materials"][0]["stats"]
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        sys.exit(f"materials_study: {args.materials}: not the JSON of `zermelo materials --json` ({e})")
    result = study(doc)
    print(f"exact: {len(result['exact_drawish'])} of {len(doc['materials'])} materials drawish (neither side wins half the positions)")
    print_table("Muller's rules alone, every material", result["rules_alone"]["all"])
    print_table("Muller's rules alone, beyond 4 men", result["rules_alone"]["beyond_4_men"])
    print_table("with the 3-4-men tables, beyond 4 men", result["with_4_men_tables"]["beyond_4_men"])
    for label, misses in (("rules alone", result["rules_alone"]["misses"]), ("with the tables", result["with_4_men_tables"]["misses"])):
        print(f"misses, {label}:")
        for m in misses:
            print(f"  {m['material']} (exact: {m['exact']}): {m['why']}")
    for t, s in result["threshold_sensitivity"].items():
        print(f"threshold {t}: {s['exact_drawish']} drawish; rules alone {s['rules_alone']['accuracy']}% right")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.svg:
        with open(args.svg, "w") as f:
            f.write(svg(result))


if __name__ == "__main__":
    main()
