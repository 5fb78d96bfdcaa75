"""The web page of `zermelo serve`, in a real browser: headless Chromium (Debian's `chromium`
and `chromium-driver`) driven by Selenium.

Every value the page shows is compared with `zermelo probe` run on its own; the position after
each move is computed with python-chess, not by the page. Screenshots of every step go to
$ZERMELO_SCREENSHOTS (default: target/browser-screenshots).

Run: ZERMELO_BIN=target/release/zermelo python3 -m pytest -q tests/browser
"""

import json
import os
import shutil
import subprocess
import time

import chess
import pytest

selenium = pytest.importorskip("selenium")
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MATE_IN_25 = "8/8/8/8/8/8/4P3/K1k5 w - - 0 1"
TIMEOUT = 20


def need(path_or_name):
    """The path of a program, or a skip outside CI (a failure in CI, which installs it)."""
    found = shutil.which(path_or_name)
    if found:
        return found
    message = f"{path_or_name} is not installed (apt-get install chromium chromium-driver)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def zermelo():
    cli = os.environ.get("ZERMELO_BIN")
    if not cli:
        if os.environ.get("CI") == "true":
            pytest.fail("ZERMELO_BIN is not set")
        pytest.skip("ZERMELO_BIN not set")
    return cli


@pytest.fixture(scope="session")
def tables(zermelo, tmp_path_factory):
    d = tmp_path_factory.mktemp("tables")
    subprocess.run([zermelo, "solve", "KPvK", "KPvKP", "--tables", str(d)], check=True, capture_output=True)
    return d


def serving(zermelo, tables):
    """Runs `zermelo serve` over `tables` on a free port: yields its URL, then stops it."""
    proc = subprocess.Popen(
        [zermelo, "serve", "--tables", str(tables), "--listen", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = None
    deadline = time.time() + TIMEOUT
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        if "listening on http://" in line:
            url = "http://" + line.split("listening on http://")[1].split()[0] + "/"
            break
    if url is None:
        proc.kill()
        pytest.fail("zermelo serve did not say where it listens")
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="session")
def server(zermelo, tables):
    yield from serving(zermelo, tables)


@pytest.fixture(scope="session")
def shots():
    d = os.environ.get("ZERMELO_SCREENSHOTS") or os.path.join(ROOT, "target", "browser-screenshots")
    os.makedirs(d, exist_ok=True)
    return d


@pytest.fixture(scope="session")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = need("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1120,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(need("chromedriver")), options=options)
    yield driver
    driver.quit()


def probe(zermelo, tables, fen):
    out = subprocess.run([zermelo, "probe", "--tables", str(tables), fen], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def after(fen, uci):
    """The FEN after `uci`, by python-chess (en passant square only when a pawn can take)."""
    b = chess.Board(fen)
    b.push_uci(uci)
    return b.fen(en_passant="xfen")


class Page:
    def __init__(self, driver, url, shots):
        self.d = driver
        self.url = url
        self.shots = shots

    def open(self, fen=None):
        self.d.get(self.url + (f"#{fen.replace(' ', '_')}" if fen else ""))
        self.wait_ready()

    def wait_ready(self):
        WebDriverWait(self.d, TIMEOUT).until(
            lambda d: d.execute_script("return document.body.dataset.state") in ("ready", "error")
        )

    def wait_shown(self, fen):
        """Waits until the page shows `fen` with its value."""
        WebDriverWait(self.d, TIMEOUT).until(
            lambda d: d.find_element(By.ID, "value").get_attribute("data-fen") == fen
            and d.execute_script("return document.body.dataset.state") == "ready"
        )

    def fen(self):
        return self.d.find_element(By.ID, "fen").get_attribute("value")

    def enter_fen(self, fen):
        box = self.d.find_element(By.ID, "fen")
        box.clear()
        box.send_keys(fen, Keys.ENTER)

    def value(self):
        v = self.d.find_element(By.ID, "value")
        dtm = v.get_attribute("data-dtm")
        return {"category": v.get_attribute("data-category"), "dtm": int(dtm) if dtm else None, "text": v.text}

    def moves(self):
        rows = self.d.find_elements(By.CSS_SELECTOR, "#moves tr.move")
        return [
            (r.get_attribute("data-uci"), r.get_attribute("data-category"), r.get_attribute("data-dtm"))
            for r in rows
        ]

    def square(self, name, board="board"):
        return self.d.find_element(By.CSS_SELECTOR, f"#{board} rect[data-square='{name}']")

    def shot(self, name):
        self.d.save_screenshot(os.path.join(self.shots, f"{name}.png"))


@pytest.fixture()
def page(browser, server, shots):
    return Page(browser, server, shots)


def check_shown(page, zermelo, tables, fen):
    """The page shows `fen` with probe's value and probe's moves, in probe's order."""
    page.wait_shown(fen)
    assert page.fen() == fen
    want = probe(zermelo, tables, fen)
    got = page.value()
    assert (got["category"], got["dtm"]) == (want["category"], want["dtm"]), fen
    assert page.moves() == [
        (m["uci"], m["category"], "" if m["dtm"] is None else str(m["dtm"])) for m in want["moves"]
    ], fen
    # One unit on the page: signed plies for the side to move in the position shown. A move's
    # DTM is the one after it (the server's number is the opponent's: its sign turns); a draw
    # and a mate show none.
    rows = page.d.find_elements(By.CSS_SELECTOR, "#moves tr.move")
    for row, m in zip(rows, want["moves"]):
        shown = [s.text for s in row.find_elements(By.CSS_SELECTOR, ".dtm")]
        assert shown == ([f"DTM {-m['dtm']}"] if m["dtm"] else []), (fen, m)
    return want, got


def test_enter_a_fen_and_play_moves(page, zermelo, tables):
    page.open()
    # The page opens on a KPK win.
    assert page.value()["category"] == "win"
    page.shot("01-opened")

    start = "8/8/3k4/8/3K4/8/3P4/8 w - - 0 1"
    page.enter_fen(start)
    want, got = check_shown(page, zermelo, tables, start)
    assert want["category"] == "win"
    assert got["text"] == f"White to move wins · DTM {want['dtm']}"
    page.shot("02-fen-entered")

    # A move by clicks: from square, then to square (the best move of probe).
    best = want["moves"][0]["uci"]
    page.square(best[:2]).click()
    page.square(best[2:4]).click()
    fen = after(start, best)
    want, _ = check_shown(page, zermelo, tables, fen)
    page.shot("03-clicked-move")

    # A move by drag and drop: Black's king (probe's last move, the worst).
    worst = want["moves"][-1]["uci"]
    ActionChains(page.d).drag_and_drop(page.square(worst[:2]), page.square(worst[2:4])).perform()
    fen = after(fen, worst)
    want, _ = check_shown(page, zermelo, tables, fen)
    page.shot("04-dragged-move")

    # A move from the list of moves: the second one.
    uci = want["moves"][1]["uci"]
    page.d.find_element(By.CSS_SELECTOR, f"#moves tr[data-uci='{uci}']").click()
    fen = after(fen, uci)
    check_shown(page, zermelo, tables, fen)
    page.shot("05-listed-move")

    # Back: the position before it.
    page.d.find_element(By.ID, "back").click()
    check_shown(page, zermelo, tables, after(after(start, best), worst))


def test_a_pawn_double_step_and_en_passant(page, zermelo, tables):
    # Black's pawn takes en passant after White's double step.
    start = "8/8/8/8/5p2/8/4P3/K6k w - - 0 1"
    page.open(start)
    check_shown(page, zermelo, tables, start)
    page.square("e2").click()
    page.square("e4").click()
    fen = after(start, "e2e4")
    assert " e3 " in fen
    check_shown(page, zermelo, tables, fen)
    page.square("f4").click()
    page.square("e3").click()
    fen = after(fen, "f4e3")
    check_shown(page, zermelo, tables, fen)
    assert "P" not in fen.split()[0]
    page.shot("06-en-passant")


def test_promotion_asks_which_piece(page, zermelo, tables):
    # Only b8=R wins: b8=Q stalemates (tests/data/kpk.md).
    start = "8/1P6/k7/8/K7/8/8/8 w - - 0 1"
    page.open(start)
    want, _ = check_shown(page, zermelo, tables, start)
    assert want["moves"][0]["uci"] == "b7b8r"
    page.square("b7").click()
    page.square("b8").click()
    buttons = page.d.find_elements(By.CSS_SELECTOR, "#promotion button")
    assert sorted(b.get_attribute("data-uci") for b in buttons) == ["b7b8b", "b7b8n", "b7b8q", "b7b8r"]
    page.shot("07-promotion")
    page.d.find_element(By.CSS_SELECTOR, "#promotion button[data-uci='b7b8r']").click()
    fen = after(start, "b7b8r")
    _, got = check_shown(page, zermelo, tables, fen)
    assert got["category"] == "loss"
    page.shot("08-promoted")


def test_step_through_the_principal_variation(page, zermelo, tables):
    page.open(MATE_IN_25)
    check_shown(page, zermelo, tables, MATE_IN_25)
    WebDriverWait(page.d, TIMEOUT).until(
        lambda d: d.find_element(By.ID, "pv").get_attribute("data-plies") not in ("", None)
    )
    plies = int(page.d.find_element(By.ID, "pv").get_attribute("data-plies"))
    assert plies == 25
    board = chess.Board(MATE_IN_25)
    for k in range(1, 5):
        page.d.find_element(By.ID, "pv-next").click()
        WebDriverWait(page.d, TIMEOUT).until(
            lambda d: d.find_element(By.ID, "pv").get_attribute("data-ply") == str(k)
        )
        # The step shown is a legal move of the position before it, and the value falls by one ply.
        fen = page.fen()
        board_after = [m for m in board.legal_moves if after(board.fen(en_passant="xfen"), m.uci()) == fen]
        assert len(board_after) == 1, (k, fen)
        board.push(board_after[0])
        want, got = check_shown(page, zermelo, tables, fen)
        assert abs(got["dtm"]) == 25 - k, (k, got)
        # The line is drawn again when the step's value arrives: read the plies in one script.
        current = page.d.execute_script(
            "return [...document.querySelectorAll('#pv .ply.current')].map((e) => e.dataset.ply)"
        )
        assert current == [str(k)], k
    page.shot("09-principal-variation")
    # The last step is mate.
    page.d.find_element(By.ID, "pv-last").click()
    WebDriverWait(page.d, TIMEOUT).until(lambda d: d.find_element(By.ID, "pv").get_attribute("data-ply") == "25")
    fen = page.fen()
    page.wait_shown(fen)
    assert chess.Board(fen).is_checkmate()
    assert probe(zermelo, tables, fen)["checkmate"] is True
    assert page.value()["text"].startswith("Checkmate")
    page.shot("10-mate")


def test_co_ordinate_squares_tab(page, zermelo, tables):
    fen = "4k3/8/8/8/4P3/8/8/4K3 w - - 0 1"
    page.open(fen)
    page.d.find_element(By.ID, "tab-squares").click()
    board = page.d.find_element(By.ID, "squares-board")
    WebDriverWait(page.d, TIMEOUT).until(lambda d: board.get_attribute("data-attacker-square") == "e1")
    out = subprocess.run(
        [zermelo, "squares", "--json", "--tables", str(tables), fen], capture_output=True, text=True, check=True
    )
    want = json.loads(out.stdout)
    assert want["attacker"] == "white"
    for sq in ("e1", "d5", "e6", "a8"):
        if sq != "e1":
            page.square(sq, "squares-board").click()
        WebDriverWait(page.d, TIMEOUT).until(lambda d: board.get_attribute("data-attacker-square") == sq)
        holds = board.get_attribute("data-holds").split()
        assert holds == want["squares"][sq], sq
        marked = page.d.find_elements(By.CSS_SELECTOR, "#squares-board rect.hold")
        assert len(marked) == len(holds)
    # The numbered diagram is drawn by the server.
    WebDriverWait(page.d, TIMEOUT).until(
        lambda d: d.execute_script(
            "const i = document.getElementById('squares-diagram'); return i.complete && i.naturalWidth > 0"
        )
    )
    page.shot("11-co-ordinate-squares")


def test_errors_are_shown_and_a_missing_table_offers_the_materials_served(page, zermelo, tables):
    page.open()
    page.enter_fen("not a fen")
    WebDriverWait(page.d, TIMEOUT).until(lambda d: d.find_element(By.ID, "error").is_displayed())
    assert "FEN" in page.d.find_element(By.ID, "error").text
    # An illegal position: the server's plain-text answer is shown.
    page.enter_fen("8/8/8/8/8/8/8/8 w - - 0 1")
    WebDriverWait(page.d, TIMEOUT).until(lambda d: "no king" in d.find_element(By.ID, "error").text)
    WebDriverWait(page.d, TIMEOUT).until(lambda d: d.execute_script("return document.body.dataset.state") == "error")
    assert page.value()["text"].strip() == "" and page.moves() == []

    # A material with no table (KNNvK): answered as lichess answers it, unknown, and the page
    # names the material and lists what the server has, by men (the table files of the folder).
    fen = "8/8/8/3k4/8/8/3NN3/3K4 w - - 0 1"
    page.enter_fen(fen)
    page.wait_shown(fen)
    assert page.value()["category"] == "unknown" and page.value()["text"].startswith("Unknown")
    missing = page.d.find_element(By.ID, "missing")
    assert missing.is_displayed() and "no table of KNNvK" in missing.text, missing.text
    files = sorted(f.stem for f in tables.iterdir() if f.suffix == ".zmt")
    by_men = {}
    for name in files:
        by_men.setdefault(len(name) - 1, []).append(name)
    WebDriverWait(page.d, TIMEOUT).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#materials .materials"))
    lines = [e.text for e in page.d.find_elements(By.CSS_SELECTOR, "#materials .materials")]
    assert lines == [f"{men} men: {', '.join(sorted(names))}" for men, names in sorted(by_men.items())], lines
    # Its moves are listed, unknown (no table of KNvK either... but KNvK is dead: a draw).
    rows = page.moves()
    assert rows and all(cat in ("unknown", "draw") for _, cat, _ in rows), rows
    page.shot("12-missing-table")


@pytest.fixture(scope="session")
def dtz_server(zermelo, tmp_path_factory):
    """A server over KRvK's tables of mates and the DTZ50 tables of KPvK (KRvK among them)."""
    d = tmp_path_factory.mktemp("dtz-tables")
    subprocess.run([zermelo, "solve", "KPvK", "--tables", str(d)], check=True, capture_output=True)
    subprocess.run([zermelo, "dtz", "KPvK", "--tables", str(d)], check=True, capture_output=True)
    for url in serving(zermelo, d):
        yield url, d


def test_dtz_beside_dtm_and_a_cursed_win_coloured(browser, dtz_server, shots, zermelo):
    url, tables = dtz_server
    page = Page(browser, url, shots)
    # KRvK, the rook's side mating in 29 plies (DTZ 29): a win with 71 plies on the clock, a
    # cursed win with 72.
    for clock, category in ((71, "win"), (72, "cursed-win")):
        fen = f"8/8/8/8/4k3/8/8/K6R w - - {clock} 80"
        page.open(fen)
        page.wait_shown(fen)
        want = probe(zermelo, tables, fen)
        assert (want["category"], want["dtz"]) == (category, 29)
        v = page.d.find_element(By.ID, "value")
        assert v.get_attribute("data-category") == category
        assert v.get_attribute("data-dtz") == "29"
        assert "DTZ 29" in v.text and "DTM 29" in v.text, v.text
        rows = page.d.find_elements(By.CSS_SELECTOR, "#moves tr.move")
        assert [r.get_attribute("data-uci") for r in rows] == [m["uci"] for m in want["moves"]]
        assert [r.get_attribute("data-dtz") for r in rows] == [str(m["dtz"]) for m in want["moves"]]
        assert any("DTZ" in r.text for r in rows)
    # The cursed win in its own colour, not the win's; its best moves under the cursed heading.
    colour = page.d.execute_script("return getComputedStyle(document.getElementById('value')).color")
    assert "cursed" in v.get_attribute("class") and colour == "rgb(163, 134, 43)", colour
    heading = page.d.find_element(By.CSS_SELECTOR, "#moves th")
    assert "cursed" in heading.get_attribute("class") and heading.text.lower().startswith("cursed win"), heading.text
    page.shot("20-cursed-win")
