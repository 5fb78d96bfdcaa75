"""Muller's derivation (zermelo.muller) on facts worked out by hand from its rules, and the
materials study on every table of up to 4 men, its verdicts checked against chess knowledge
that does not come from the tables."""

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from zermelo import muller

HERE = os.path.dirname(os.path.abspath(__file__))


def test_no_mating_material_and_more_for_the_defender():
    f = muller.derive()
    for name in ("KNvK", "KBvK", "KNNvK", "KBvKB", "KNvKN"):
        assert muller.drawish(f, name), muller.why(f, name)
    # A lone king or a minor cannot win, whatever the defender adds.
    assert ("N", "QR") in f and ("", "P") in f
    assert not muller.drawish(f, "KQvK") and not muller.drawish(f, "KPvK")


def test_pairs():
    f = muller.derive()
    # Unbalanced: the knight (300 to its owner) gives itself for the pawn (250 to the
    # opponent), back to bare kings; the pawn's owner could not give it (100) for the knight.
    assert muller.drawish(f, "KNvKP")
    assert "unbalanced pair" in f[("P", "N")]
    # Balanced: every light trade White may choose leads to a drawn material (B for B: KNvK,
    # N for B: KBvK).
    assert muller.drawish(f, "KBNvKB")
    assert "balanced pair" in f[("BN", "B")]
    # Balanced, but a rook trade from KRRvKR leaves KRvK, a win.
    assert not muller.drawish(f, "KRRvKR")
    # KBBvKN would follow by the light trade to KBvK: it is the exception fixed in advance.
    assert ("BB", "N") not in f and not muller.drawish(f, "KBBvKN")
    assert muller.drawish(muller.derive(muller.Rules(exceptions=[])), "KBBvKN")
    # No trade takes KRvKB or KRvKN to a drawn material: the rules alone cannot see them.
    assert not muller.drawish(f, "KRvKB") and not muller.drawish(f, "KRvKN")


def test_a_table_given_in_advance_is_built_on():
    rules = muller.Rules()
    assert not muller.drawish(muller.derive(rules), "KBPvKR")
    given = muller.with_tables(rules, {"KRvKB": (True, True)}, max_men=4)
    f = muller.derive(given)
    # With KRvKB drawn, a pawn more for the bishop's side keeps the rook from winning.
    assert muller.drawish(f, "KBPvKR"), muller.why(f, "KBPvKR")
    assert f[("R", "BP")] == "more for the defender: P added to KR against KB"
    # A verdict "can win" given becomes an exception: nothing is derived from it.
    won = muller.derive(muller.with_tables(rules, {"KNvKP": (True, False)}, max_men=4))
    assert ("P", "N") not in won


def test_variant_pieces_are_data():
    # A ferz (a weak piece, worth 150) added as a line of data.
    classes = dict(muller.ORTHODOX, F=muller.PieceClass("weak", 150, 150))
    f = muller.derive(muller.Rules(classes=classes, max_men=4))
    # The knight gives itself for the ferz: back to bare kings. The knight cannot win.
    assert ("F", "N") in f and ("N", "F") in f


@pytest.fixture(scope="module")
def four_men(tmp_path_factory):
    cli = os.environ.get("ZERMELO_BIN")
    if not cli:
        pytest.skip("ZERMELO_BIN not set")
    d = tmp_path_factory.mktemp("four")
    subprocess.run([cli, "solve", "--all", "4", "--tables", str(d)], check=True, capture_output=True)
    out = subprocess.run(
        [cli, "materials", "--tables", str(d), "--json", "--sample", "100"], check=True, capture_output=True, text=True
    ).stdout
    path = d / "materials.json"
    path.write_text(out)
    return path


def test_the_study_of_every_material_of_four_men(four_men, tmp_path):
    out_json, out_svg = tmp_path / "study.json", tmp_path / "study.svg"
    printed = subprocess.run(
        [sys.executable, os.path.join(HERE, "..", "examples", "materials_study.py"), str(four_men),
         "--json", str(out_json), "--svg", str(out_svg)],
        capture_output=True, text=True, check=True,
    ).stdout
    doc = json.loads(four_men.read_text())
    assert len(doc["materials"]) == 35  # Syzygy's 5 tables of 3 men and 30 of 4
    study = json.loads(out_json.read_text())
    exact = set(study["exact_drawish"])
    # Textbook: a rook does not beat a minor piece, nor a lone minor mate, nor like against
    # like win; a queen beats a rook, a rook and a pawn win against a bare king.
    for name in ("KRvKB", "KRvKN", "KBvK", "KNNvK", "KRvKR", "KQvKQ", "KBvKN"):
        assert name in exact, name
    for name in ("KQvKR", "KPvK", "KRvK", "KQvK", "KBNvK", "KQvKP"):
        assert name not in exact, name
    # Two bishops mate only on opposite colours: on one colour (about half of all placements)
    # they cannot, so over all positions KBBvK is won less than half the time.
    assert "KBBvK" in exact
    # The rules alone miss the fortress draws, as worked out by hand above; every miss is
    # listed with the rules' reasons, and the confusion table adds up.
    alone = study["rules_alone"]
    missed = {m["material"] for m in alone["misses"]}
    assert {"KRvKB", "KRvKN"} <= missed
    t = alone["all"]
    assert sum(t[k] for k in ("drawish_called_drawish", "drawish_called_won", "won_called_drawish", "won_called_won")) == 35
    assert t["drawish_called_won"] + t["won_called_drawish"] == len(alone["misses"])
    assert "Muller's rules alone, every material: 35 materials" in printed
    # The figure: valid SVG, a cell a material, each cell's number the draw share of the
    # materials JSON the command printed.
    root = ET.parse(out_svg).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    shares = {t.get("data-material"): int(t.text) for t in root.iter(f"{ns}text") if t.get("data-material")}
    assert shares == {m["stats"]["material"]: round(100 * m["draw_share"]) for m in doc["materials"]}
    framed = sum(1 for r in root.iter(f"{ns}rect") if r.get("stroke") == "black")
    assert framed == len(alone["misses"])
