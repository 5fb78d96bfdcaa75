// Zermelo's web page: a board over the tables of the server that serves it. It reads only
// this server (`standard`, `standard/mainline`, `standard/squares`), and uses no library.
//
// The server says which moves are legal (the moves of `standard`), so the page generates no
// moves: it only plays one of those on its copy of the position to know the FEN after it.
"use strict";
(() => {
  const FILES = "abcdefgh";
  const SVGNS = "http://www.w3.org/2000/svg";
  const DEFAULT_FEN = "4k3/8/8/4K3/4P3/8/8/8 w - - 0 1";
  // The filled glyphs for both colours (white ones are drawn filled white, outlined), each
  // with the text-presentation selector so that no system draws an emoji.
  const GLYPH = { k: "\u265A", q: "\u265B", r: "\u265C", b: "\u265D", n: "\u265E", p: "\u265F" };
  const TEXT = "\uFE0E";

  const $ = (id) => document.getElementById(id);
  const sqName = (i) => FILES[i % 8] + (Math.floor(i / 8) + 1);
  const sqIndex = (name) => FILES.indexOf(name[0]) + 8 * (Number(name[1]) - 1);
  const isWhite = (piece) => piece === piece.toUpperCase();

  // ---- Positions (FEN) ----

  /** The position of a FEN: board[0..64] (a1 = 0, h8 = 63) of piece letters or null. */
  function parseFen(text) {
    // As lichess reads a FEN: `_` or `+` may stand for spaces, only the board is required.
    const f = text.trim().replace(/[_+]/g, " ").split(/\s+/);
    if (!f[0]) throw new Error("enter a FEN");
    const rows = f[0].split("/");
    if (rows.length !== 8) throw new Error("a FEN's board has 8 ranks separated by '/'");
    const board = new Array(64).fill(null);
    rows.forEach((row, r) => {
      let file = 0;
      for (const c of row) {
        if (/^[1-8]$/.test(c)) {
          file += Number(c);
        } else if (/^[kqrbnp]$/i.test(c) && file < 8) {
          board[file + 8 * (7 - r)] = c;
          file += 1;
        } else {
          throw new Error(`unexpected '${c}' in rank ${8 - r} of the FEN`);
        }
      }
      if (file !== 8) throw new Error(`rank ${8 - r} of the FEN has ${file} squares, not 8`);
    });
    const turn = f[1] || "w";
    if (turn !== "w" && turn !== "b") throw new Error(`the side to move is 'w' or 'b', not '${turn}'`);
    const half = Number(f[4] || 0);
    const full = Number(f[5] || 1);
    return {
      board,
      turn,
      castling: f[2] || "-",
      ep: f[3] || "-",
      half: Number.isInteger(half) && half >= 0 ? half : 0,
      full: Number.isInteger(full) && full >= 1 ? full : 1,
    };
  }

  function toFen(pos) {
    const rows = [];
    for (let rank = 7; rank >= 0; rank--) {
      let row = "";
      let empty = 0;
      for (let file = 0; file < 8; file++) {
        const p = pos.board[file + 8 * rank];
        if (p) {
          row += (empty || "") + p;
          empty = 0;
        } else {
          empty += 1;
        }
      }
      rows.push(row + (empty || ""));
    }
    return `${rows.join("/")} ${pos.turn} ${pos.castling} ${pos.ep} ${pos.half} ${pos.full}`;
  }

  /** The position after `uci`, a legal move of `pos` (the server listed it). */
  function applyUci(pos, uci) {
    const from = sqIndex(uci.slice(0, 2));
    const to = sqIndex(uci.slice(2, 4));
    const board = pos.board.slice();
    const piece = board[from];
    const white = isWhite(piece);
    const pawn = piece.toLowerCase() === "p";
    let capture = board[to] !== null;
    if (pawn && pos.ep !== "-" && to === sqIndex(pos.ep) && from % 8 !== to % 8) {
      board[to + (white ? -8 : 8)] = null; // en passant
      capture = true;
    }
    const promotion = uci[4];
    board[to] = promotion ? (white ? promotion.toUpperCase() : promotion) : piece;
    board[from] = null;
    // Castling (the server lists it as the king's two-square move): the rook goes over.
    const king = piece.toLowerCase() === "k";
    if (king && Math.abs(to - from) === 2) {
      const [rookFrom, rookTo] = to > from ? [from + 3, from + 1] : [from - 4, from - 1];
      board[rookTo] = board[rookFrom];
      board[rookFrom] = null;
    }
    // Castling rights left: none for a side whose king moved, none for a rook that moved or
    // was taken on its corner.
    const corners = { K: 7, Q: 0, k: 63, q: 56 };
    let castling = pos.castling === "-" ? "" : pos.castling;
    castling = [...castling]
      .filter((c) => !(king && isWhite(c) === white))
      .filter((c) => corners[c] !== from && corners[c] !== to)
      .join("");
    // The en-passant square only when a pawn can take there (as python-chess's "xfen").
    let ep = "-";
    if (pawn && Math.abs(to - from) === 16) {
      const enemy = white ? "p" : "P";
      const file = to % 8;
      if ((file > 0 && board[to - 1] === enemy) || (file < 7 && board[to + 1] === enemy)) {
        ep = sqName((from + to) / 2);
      }
    }
    return {
      board,
      turn: white ? "b" : "w",
      castling: castling || "-",
      ep,
      half: pawn || capture ? 0 : pos.half + 1,
      full: pos.full + (white ? 0 : 1),
    };
  }

  // ---- State ----

  const state = {
    root: null, // the FEN the principal variation starts from
    rootLast: null, // the move that led to the root, [from, to], if one was played
    history: [], // FENs to go back to
    pv: [], // [{uci, san, fen}] from the root
    pvLoaded: false,
    ply: 0, // plies of the principal variation shown
    fen: null, // the FEN shown
    pos: null, // its position
    info: null, // its answer from `standard`, null until it comes
    last: null, // the last move shown, [from, to]
    selected: null,
    drag: null,
    flipped: false,
    hover: null, // the move under the pointer in the list
    tab: "analysis",
    squares: null, // the answer of `standard/squares` for `squaresFen`
    squaresFen: null,
    attackerSq: null,
  };
  let probeGen = 0;
  let pvGen = 0;
  let squaresGen = 0;
  let pending = 0;
  let failed = false;

  function busy() {
    document.body.dataset.state = pending ? "loading" : failed ? "error" : "ready";
  }

  function track(promise) {
    pending += 1;
    busy();
    return promise.finally(() => {
      pending -= 1;
      busy();
    });
  }

  function showError(message) {
    failed = Boolean(message);
    $("error").hidden = !message;
    $("error").textContent = message || "";
    busy();
  }

  async function getJson(url) {
    const r = await fetch(url);
    if (!r.ok) {
      // Errors come as plain text, as from lichess's server.
      const text = (await r.text().catch(() => "")).trim();
      throw new Error(text || `the server answered ${r.status}`);
    }
    return r.json();
  }

  /** The materials this server has tables of (`GET /materials`), asked once. */
  let materialsServed = null;
  function served() {
    if (!materialsServed) {
      materialsServed = getJson("materials").catch((e) => {
        materialsServed = null;
        throw e;
      });
    }
    return materialsServed;
  }

  const query = (path, fen) => `${path}?fen=${encodeURIComponent(fen)}`;

  // ---- Navigation ----

  /** Shows `fen` (the root or a step of the line) and asks the server for its value. */
  function show(fen, last) {
    let pos;
    try {
      pos = parseFen(fen);
    } catch (e) {
      showError(`invalid FEN: ${e.message}`);
      return false;
    }
    showError(null);
    state.fen = toFen(pos);
    state.pos = pos;
    state.info = null;
    state.last = last;
    state.selected = null;
    state.hover = null;
    $("fen").value = state.fen;
    const gen = ++probeGen;
    track(
      getJson(query("standard", state.fen))
        .then((info) => {
          if (gen === probeGen) state.info = info;
        })
        .catch((e) => {
          if (gen === probeGen) showError(e.message);
        })
        .finally(() => {
          if (gen === probeGen) render();
        }),
    );
    if (state.tab === "squares") loadSquares();
    render();
    return true;
  }

  /** Starts from `fen`: shows it and asks for its principal variation. */
  function setRoot(fen, last, remember) {
    const before = state.fen;
    if (!show(fen, last)) return;
    if (remember && before && before !== state.fen) state.history.push(before);
    state.root = state.fen;
    state.rootLast = last;
    state.pv = [];
    state.pvLoaded = false;
    state.ply = 0;
    history.replaceState(null, "", `#${state.fen.replace(/ /g, "_")}`);
    const gen = ++pvGen;
    const rootPos = state.pos;
    track(
      getJson(query("standard/mainline", state.root))
        .then((answer) => {
          if (gen !== pvGen) return;
          let pos = rootPos;
          state.pv = answer.mainline.map((step) => {
            pos = applyUci(pos, step.uci);
            return { uci: step.uci, san: step.san, fen: toFen(pos) };
          });
          state.pvLoaded = true;
        })
        .catch(() => {}) // the probe of the root reports the error
        .finally(() => {
          if (gen === pvGen) render();
        }),
    );
  }

  const moveSquares = (uci) => [sqIndex(uci.slice(0, 2)), sqIndex(uci.slice(2, 4))];

  function step(ply) {
    const k = Math.max(0, Math.min(state.pv.length, ply));
    if (k === state.ply && state.fen === (k ? state.pv[k - 1].fen : state.root)) return;
    state.ply = k;
    if (k === 0) show(state.root, state.rootLast);
    else show(state.pv[k - 1].fen, moveSquares(state.pv[k - 1].uci));
  }

  /** Plays `uci`, a move of the position shown. */
  function play(uci) {
    closePromotion();
    if (state.ply < state.pv.length && state.pv[state.ply].uci === uci) {
      step(state.ply + 1); // the move of the line: step along it
      return;
    }
    setRoot(toFen(applyUci(state.pos, uci)), moveSquares(uci), true);
  }

  function back() {
    const fen = state.history.pop();
    if (fen) setRoot(fen, null, false);
  }

  // ---- Moves on the board ----

  const movesOf = (from, to) =>
    state.info
      ? state.info.moves.filter(
          (m) => m.uci.startsWith(sqName(from)) && (to === undefined || m.uci.slice(2, 4) === sqName(to)),
        )
      : [];

  /** Plays the move from `from` to `to` if there is one (asking which promotion); true if so. */
  function tryMove(from, to) {
    const ms = movesOf(from, to);
    if (ms.length === 0) return false;
    if (ms.length === 1) play(ms[0].uci);
    else openPromotion(ms);
    return true;
  }

  function openPromotion(ms) {
    const box = $("promotion");
    box.textContent = "";
    const white = state.pos.turn === "w";
    for (const m of ms) {
      const b = document.createElement("button");
      b.type = "button";
      b.dataset.uci = m.uci;
      b.textContent = GLYPH[m.uci[4]] + TEXT;
      b.title = `${m.san}: ${moveLabel(m)}`;
      b.style.color = white ? "#fff" : "#000";
      b.style.webkitTextStroke = white ? "1px #000" : "";
      b.style.borderBottom = `4px solid var(--${outcome(m.category)})`;
      b.addEventListener("click", () => play(m.uci));
      box.appendChild(b);
    }
    box.hidden = false;
  }

  function closePromotion() {
    $("promotion").hidden = true;
  }

  // ---- Drawing ----

  function el(name, attrs, parent) {
    const e = document.createElementNS(SVGNS, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (parent) parent.appendChild(e);
    return e;
  }

  /** The column and row on screen of square `sq`. */
  const xy = (sq, flipped) =>
    flipped ? [7 - (sq % 8), Math.floor(sq / 8)] : [sq % 8, 7 - Math.floor(sq / 8)];

  function squareAt(svg, evt) {
    const pt = svg.createSVGPoint();
    pt.x = evt.clientX;
    pt.y = evt.clientY;
    const p = pt.matrixTransform(svg.getScreenCTM().inverse());
    const col = Math.floor(p.x);
    const row = Math.floor(p.y);
    if (col < 0 || col > 7 || row < 0 || row > 7) return null;
    return state.flipped ? 7 - col + 8 * row : col + 8 * (7 - row);
  }

  function pieceText(parent, piece, x, y, extra) {
    const t = el("text", { x: x + 0.5, y: y + 0.54, class: `piece ${isWhite(piece) ? "white" : "black"} ${extra || ""}` }, parent);
    t.textContent = GLYPH[piece.toLowerCase()] + TEXT;
    return t;
  }

  /** Draws `board` into `svg`; `marks` maps squares to classes of an overlay. The 64 squares
   * are made once (they stay the same elements, for a test driver too); the rest is redrawn. */
  function drawBoard(svg, board, { marks = new Map(), dots = [], ghost = null } = {}) {
    const flipped = state.flipped;
    let squares = svg.querySelector("g.squares");
    if (!squares) {
      squares = el("g", { class: "squares" }, svg);
      for (let sq = 0; sq < 64; sq++) {
        const light = ((sq % 8) + Math.floor(sq / 8)) % 2 === 1;
        el("rect", { width: 1, height: 1, class: light ? "sq-light" : "sq-dark", "data-square": sqName(sq) }, squares);
      }
      el("g", { class: "layer", "pointer-events": "none" }, svg);
    }
    for (const rect of squares.children) {
      const [x, y] = xy(sqIndex(rect.dataset.square), flipped);
      rect.setAttribute("x", x);
      rect.setAttribute("y", y);
    }
    const layer = svg.querySelector("g.layer");
    layer.textContent = "";
    for (let sq = 0; sq < 64; sq++) {
      const [x, y] = xy(sq, flipped);
      for (const cls of marks.get(sq) || []) el("rect", { x, y, width: 1, height: 1, class: cls }, layer);
      const on = ((sq % 8) + Math.floor(sq / 8)) % 2 === 1 ? "on-light" : "on-dark";
      if (y === 7) {
        el("text", { x: x + 0.97, y: y + 0.96, class: `coord ${on}`, "text-anchor": "end" }, layer).textContent =
          FILES[sq % 8];
      }
      if (x === 0) {
        el("text", { x: x + 0.04, y: y + 0.22, class: `coord ${on}` }, layer).textContent = String(
          Math.floor(sq / 8) + 1,
        );
      }
    }
    for (let sq = 0; sq < 64; sq++) {
      if (!board[sq]) continue;
      const [x, y] = xy(sq, flipped);
      pieceText(layer, board[sq], x, y, sq === ghost ? "ghost" : "");
    }
    for (const sq of dots) {
      const [x, y] = xy(sq, flipped);
      if (board[sq]) el("circle", { cx: x + 0.5, cy: y + 0.5, r: 0.46, class: "ring" }, layer);
      else el("circle", { cx: x + 0.5, cy: y + 0.5, r: 0.16, class: "dot" }, layer);
    }
    return layer;
  }

  function addMark(marks, sq, cls) {
    marks.set(sq, (marks.get(sq) || []).concat([cls]));
  }

  function renderBoard() {
    if (!state.pos) return;
    const marks = new Map();
    if (state.last) state.last.forEach((sq) => addMark(marks, sq, "last"));
    if (state.hover) moveSquares(state.hover).forEach((sq) => addMark(marks, sq, "hover-move"));
    let dots = [];
    if (state.selected !== null) {
      addMark(marks, state.selected, "selected");
      dots = movesOf(state.selected).map((m) => sqIndex(m.uci.slice(2, 4)));
    }
    const svg = $("board");
    const dragging = state.drag && state.drag.moved ? state.drag.from : null;
    const layer = drawBoard(svg, state.pos.board, { marks, dots, ghost: dragging });
    if (dragging !== null) {
      state.drag.el = pieceText(layer, state.pos.board[dragging], state.drag.x - 0.5, state.drag.y - 0.54, "");
    }
    svg.dataset.fen = state.fen;
  }

  /** The result of a move for the side making it, from its category (the opponent's view):
   * under the 50-move rule (with DTZ50 tables) a blessed loss for the opponent is a cursed win
   * for the mover, and a cursed win a blessed loss. */
  function outcome(category) {
    if (category === "blessed-loss") return "cursed";
    if (category === "cursed-win") return "blessed";
    if (/loss$/.test(category)) return "win";
    if (/win$/.test(category)) return "loss";
    return "draw";
  }

  /** The colour class of a position's own category (the side to move's view). */
  function own(category) {
    if (category === "cursed-win") return "cursed";
    if (category === "blessed-loss") return "blessed";
    if (/win$/.test(category)) return "win";
    if (/loss$/.test(category)) return "loss";
    return "draw";
  }

  /** A move's badge, as lichess shows a move: what it leads to, in words. */
  function moveLabel(m) {
    if (m.checkmate) return "Checkmate";
    if (m.stalemate) return "Stalemate";
    if (m.insufficient_material) return "Insufficient material";
    if (m.category === "unknown") return "Unknown";
    return { win: "Win", cursed: "Cursed win", draw: "Draw", blessed: "Blessed loss", loss: "Loss" }[outcome(m.category)];
  }

  /** Every distance on the page is signed plies from the point of view of the side to move in
   * the position shown: positive when it mates, negative when it is mated. A move's is the
   * distance after it (the server's value is the opponent's, so its sign turns). */
  const forMover = (d) => (d === null || d === undefined ? null : -d);

  function renderValue() {
    const v = $("value");
    const info = state.info;
    v.className = "value";
    v.dataset.category = info ? info.category : "";
    v.dataset.dtm = info && info.dtm !== null ? String(info.dtm) : "";
    v.dataset.dtz = info && info.dtz !== null && info.dtz !== undefined ? String(info.dtz) : "";
    v.dataset.fen = info ? state.fen : "";
    if (!info) {
      // Waiting for the answer, or none came (the error is shown).
      v.textContent = failed ? "\u00a0" : "…";
      return;
    }
    const side = state.pos.turn === "w" ? "White" : "Black";
    const other = state.pos.turn === "w" ? "Black" : "White";
    let text;
    const known = info.dtm !== null && info.dtm !== undefined;
    if (info.checkmate) text = `Checkmate: ${other} wins`;
    else if (info.stalemate) text = "Stalemate: a draw";
    else if (info.insufficient_material) text = "Draw: insufficient material";
    else if (info.category === "win") text = `${side} to move wins`;
    else if (info.category === "loss") text = `${side} to move loses`;
    else if (info.category === "draw") text = `Draw, ${side} to move`;
    else if (info.category === "cursed-win") text = `${side} to move: a cursed win (the 50-move rule draws it)`;
    else if (info.category === "blessed-loss") text = `${side} to move: a blessed loss (the 50-move rule saves it)`;
    else text = `Unknown: no table here holds this position`;
    if (!known && info.category !== "unknown" && !info.checkmate && !info.stalemate && !info.insufficient_material)
      text += " (from its moves)";
    // Signed plies, the side to move's view; DTZ50 beside DTM where the server has its tables.
    if (known && info.dtm !== 0) text += ` · DTM ${info.dtm}`;
    if (info.dtz !== null && info.dtz !== undefined && !info.checkmate && info.dtz !== 0) text += ` · DTZ ${info.dtz}`;
    v.textContent = text;
    v.classList.add(info.checkmate ? "loss" : own(info.category));
    $("rule-note").textContent =
      "DTM: plies to mate with best play, signed for the side to move here (negative: it is mated); " +
      "a move's DTM and DTZ are those after it, for the side to move here. " +
      (info.ignores_50_move_rule === false
        ? "DTZ (DTZ50: plies to the next capture or pawn move) and the colours follow the 50-move rule, with the FEN's halfmove clock."
        : "The 50-move rule is not applied.");
    renderMissing(info);
  }

  /** Where no table holds the position (a missing table, castling rights, too many men): why,
   * and the materials this server has, to pick from. */
  function renderMissing(info) {
    const box = $("missing");
    const unknown = info && info.dtm === null && !info.checkmate && info.moves.some((m) => m.category === "unknown");
    box.hidden = !unknown;
    box.textContent = "";
    if (!unknown) return;
    const why = document.createElement("p");
    const men = state.pos.board.filter((p) => p).length;
    why.textContent =
      state.pos.castling !== "-"
        ? "Tables hold no castling rights: moves that keep them are unknown, the others are valued."
        : men > 7
          ? `${men} men: tables hold at most 7. Captures into the tables are valued.`
          : `This server has no table of ${materialOf(state.pos.board)}. It has:`;
    box.appendChild(why);
    const list = document.createElement("p");
    list.id = "materials";
    box.appendChild(list);
    served()
      .then((answer) => {
        const byMen = new Map();
        for (const m of answer.materials) byMen.set(m.men, (byMen.get(m.men) || []).concat([m.material]));
        for (const [men, names] of byMen) {
          const line = document.createElement("span");
          line.className = "materials";
          line.dataset.men = String(men);
          line.textContent = `${men} men: ${names.join(", ")}`;
          list.appendChild(line);
        }
        if (answer.materials.length === 0) list.textContent = "no table at all.";
      })
      .catch((e) => {
        list.textContent = `(the list of materials failed: ${e.message})`;
      });
  }

  /** The material of a board as tables name it: the side with more first, men by value. */
  function materialOf(board) {
    const order = "kqrbnp";
    const side = (white) =>
      board
        .filter((p) => p && isWhite(p) === white)
        .map((p) => p.toLowerCase())
        .sort((a, b) => order.indexOf(a) - order.indexOf(b))
        .join("")
        .toUpperCase();
    const [w, b] = [side(true), side(false)];
    const worth = (s) => [...s].map((c) => " PNBRQ".indexOf(c)).sort((x, y) => y - x);
    const stronger = w.length !== b.length ? w.length > b.length : worth(w).join() >= worth(b).join();
    return stronger ? `${w}v${b}` : `${b}v${w}`;
  }

  function renderMoves() {
    const box = $("moves");
    box.textContent = "";
    const info = state.info;
    if (!info) return;
    if (info.moves.length === 0) {
      const p = document.createElement("p");
      p.className = "help";
      p.textContent = "No legal move.";
      box.appendChild(p);
      return;
    }
    const titles = { win: "Winning", cursed: "Cursed win (drawn by the 50-move rule)", draw: "Drawing",
      blessed: "Blessed loss (saved by the 50-move rule)", loss: "Losing", unknown: "Unknown (no table)" };
    const table = document.createElement("table");
    let group = null;
    for (const m of info.moves) {
      const o = m.category === "unknown" ? "unknown" : outcome(m.category);
      if (o !== group) {
        group = o;
        const tr = table.insertRow();
        const th = document.createElement("th");
        th.colSpan = 2;
        th.className = o;
        th.textContent = titles[o];
        tr.appendChild(th);
      }
      const tr = table.insertRow();
      tr.className = "move";
      tr.dataset.uci = m.uci;
      tr.dataset.category = m.category;
      tr.dataset.dtm = m.dtm === null ? "" : String(m.dtm);
      tr.dataset.dtz = m.dtz === null || m.dtz === undefined ? "" : String(m.dtz);
      const san = tr.insertCell();
      san.className = "san";
      san.textContent = m.san;
      const value = tr.insertCell();
      const badge = document.createElement("span");
      badge.className = `badge ${m.category === "unknown" ? "unknown" : o}`;
      badge.textContent = moveLabel(m);
      value.appendChild(badge);
      // Signed plies after the move, for the side to move here (0 and null: nothing to show).
      const dtm = forMover(m.dtm);
      if (dtm) {
        const span = document.createElement("span");
        span.className = "dtm";
        span.textContent = `DTM ${dtm}`;
        value.appendChild(span);
      }
      const dtz = forMover(m.dtz);
      if (dtz && !m.checkmate) {
        const span = document.createElement("span");
        span.className = "dtz";
        span.textContent = `DTZ ${dtz}`;
        value.appendChild(span);
      }
      tr.addEventListener("click", () => play(m.uci));
      tr.addEventListener("mouseenter", () => {
        state.hover = m.uci;
        renderBoard();
      });
      tr.addEventListener("mouseleave", () => {
        state.hover = null;
        renderBoard();
      });
    }
    box.appendChild(table);
  }

  function renderPv() {
    const box = $("pv");
    box.textContent = "";
    box.dataset.plies = state.pvLoaded ? String(state.pv.length) : "";
    box.dataset.ply = String(state.ply);
    if (!state.pvLoaded) return;
    if (state.pv.length === 0) {
      box.textContent = "No mate with best play on both sides.";
      return;
    }
    const root = parseFen(state.root);
    let moveNo = root.full;
    let white = root.turn === "w";
    state.pv.forEach((s, i) => {
      if (white || i === 0) {
        const n = document.createElement("span");
        n.className = "num";
        n.textContent = white ? `${moveNo}.` : `${moveNo}…`;
        box.appendChild(n);
      }
      const span = document.createElement("span");
      span.className = `ply${state.ply === i + 1 ? " current" : ""}`;
      span.dataset.ply = String(i + 1);
      span.textContent = s.san;
      span.addEventListener("click", () => step(i + 1));
      box.appendChild(span);
      box.appendChild(document.createTextNode(" "));
      if (!white) moveNo += 1;
      white = !white;
    });
  }

  // ---- Co-ordinate squares ----

  function loadSquares() {
    const fen = state.fen;
    if (!fen || state.squaresFen === fen) return renderSquares();
    state.squaresFen = fen;
    state.squares = null;
    state.squaresError = null;
    const gen = ++squaresGen;
    $("squares-diagram").removeAttribute("src");
    track(
      getJson(query("standard/squares", fen))
        .then((answer) => {
          if (gen !== squaresGen) return;
          state.squares = answer;
          const king = state.pos.board.findIndex((p) => p === (answer.attacker === "white" ? "K" : "k"));
          const keys = Object.keys(answer.squares);
          state.attackerSq = keys.includes(sqName(king)) ? king : keys.length ? sqIndex(keys[0]) : null;
          $("squares-diagram").src = `${query("standard/squares", fen)}&format=svg`;
        })
        .catch((e) => {
          if (gen === squaresGen) state.squaresError = e.message;
        })
        .finally(() => {
          if (gen === squaresGen) renderSquares();
        }),
    );
    renderSquares();
  }

  function renderSquares() {
    const svg = $("squares-board");
    const status = $("squares-status");
    const cs = state.squares;
    svg.dataset.attackerSquare = "";
    svg.dataset.holds = "";
    if (!cs || !state.pos) {
      status.textContent = state.squaresError || (pending ? "…" : "");
      status.className = state.squaresError ? "value loss" : "value";
      svg.textContent = "";
      return;
    }
    const pawns = state.pos.board.map((p) => (p && p.toLowerCase() === "p" ? p : null));
    const marks = new Map();
    const at = state.attackerSq;
    const holds = at === null ? [] : cs.squares[sqName(at)] || [];
    holds.forEach((s) => addMark(marks, sqIndex(s), "hold"));
    if (at !== null) {
      pawns[at] = cs.attacker === "white" ? "K" : "k";
      addMark(marks, at, "selected");
    }
    drawBoard(svg, pawns, { marks });
    const who = cs.attacker === "white" ? "White" : "Black";
    const defender = cs.attacker === "white" ? "Black" : "White";
    status.className = "value";
    status.textContent =
      at === null
        ? `${who} attacks; its king has no square here.`
        : holds.length === 0
          ? `${who} king on ${sqName(at)}, ${who} to move: ${who} wins wherever the ${defender} king stands.`
          : `${who} king on ${sqName(at)}, ${who} to move: the ${defender} king holds the draw on ${holds.length} square${holds.length > 1 ? "s" : ""}.`;
    svg.dataset.attackerSquare = at === null ? "" : sqName(at);
    svg.dataset.holds = holds.join(" ");
  }

  function render() {
    $("back").disabled = state.history.length === 0;
    $("pv-first").disabled = $("pv-prev").disabled = state.ply === 0;
    $("pv-next").disabled = $("pv-last").disabled = state.ply >= state.pv.length;
    renderBoard();
    renderValue();
    renderMoves();
    renderPv();
    if (state.tab === "squares") renderSquares();
  }

  function selectTab(tab) {
    state.tab = tab;
    for (const b of document.querySelectorAll(".tabs button")) {
      b.setAttribute("aria-selected", String(b.dataset.tab === tab));
    }
    $("panel-analysis").hidden = tab !== "analysis";
    $("panel-squares").hidden = tab !== "squares";
    if (tab === "squares") loadSquares();
  }

  // ---- Events ----

  const board = $("board");
  board.addEventListener("pointerdown", (evt) => {
    const sq = squareAt(board, evt);
    if (sq === null || !state.pos) return;
    evt.preventDefault();
    closePromotion();
    if (state.selected !== null && state.selected !== sq && tryMove(state.selected, sq)) return;
    const piece = state.pos.board[sq];
    if (piece && (state.pos.turn === "w") === isWhite(piece)) {
      state.selected = sq;
      state.drag = { from: sq, moved: false, x: 0, y: 0 };
      board.setPointerCapture(evt.pointerId);
    } else {
      state.selected = null;
    }
    renderBoard();
  });
  board.addEventListener("pointermove", (evt) => {
    if (!state.drag) return;
    const pt = board.createSVGPoint();
    pt.x = evt.clientX;
    pt.y = evt.clientY;
    const p = pt.matrixTransform(board.getScreenCTM().inverse());
    state.drag.x = p.x;
    state.drag.y = p.y;
    if (!state.drag.moved) {
      state.drag.moved = true;
      renderBoard();
    } else if (state.drag.el) {
      state.drag.el.setAttribute("x", p.x);
      state.drag.el.setAttribute("y", p.y + 0.04);
    }
  });
  const drop = (evt) => {
    const drag = state.drag;
    if (!drag) return;
    state.drag = null;
    const sq = squareAt(board, evt);
    if (drag.moved && sq !== null && sq !== drag.from && tryMove(drag.from, sq)) return;
    renderBoard();
  };
  board.addEventListener("pointerup", drop);
  board.addEventListener("pointercancel", () => {
    state.drag = null;
    renderBoard();
  });

  $("squares-board").addEventListener("click", (evt) => {
    const sq = squareAt($("squares-board"), evt);
    if (sq === null || !state.squares || !state.squares.squares[sqName(sq)]) return;
    state.attackerSq = sq;
    renderSquares();
  });

  $("fen-form").addEventListener("submit", (evt) => {
    evt.preventDefault();
    setRoot($("fen").value, null, true);
  });
  $("flip").addEventListener("click", () => {
    state.flipped = !state.flipped;
    render();
  });
  $("back").addEventListener("click", back);
  $("pv-first").addEventListener("click", () => step(0));
  $("pv-prev").addEventListener("click", () => step(state.ply - 1));
  $("pv-next").addEventListener("click", () => step(state.ply + 1));
  $("pv-last").addEventListener("click", () => step(state.pv.length));
  for (const b of document.querySelectorAll(".tabs button")) {
    b.addEventListener("click", () => selectTab(b.dataset.tab));
  }
  document.addEventListener("keydown", (evt) => {
    if (evt.target instanceof HTMLInputElement) return;
    if (evt.key === "ArrowLeft") step(state.ply - 1);
    else if (evt.key === "ArrowRight") step(state.ply + 1);
    else if (evt.key === "Escape") closePromotion();
  });
  window.addEventListener("hashchange", () => {
    const fen = decodeURIComponent(location.hash.slice(1));
    if (fen && fen.replace(/_/g, " ") !== state.fen) setRoot(fen, null, true);
  });

  busy();
  setRoot(decodeURIComponent(location.hash.slice(1)) || DEFAULT_FEN, null, false);
})();
