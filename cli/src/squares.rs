//! Church's co-ordinate (corresponding) squares of a pawn configuration.
//!
//! For each square of the attacking king, the squares of the defending king from which the
//! defender, with the attacker to move, holds the draw (the position is not a win for the
//! attacker), over legal positions. The kings of the FEN are ignored, and so is its side to move.
//! Under COORD rules ([`zermelo_worker::coord_game`]) the attacker is White; under chess rules it is
//! the side that wins in more positions of the slice with itself to move (White on a tie).

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};
use zermelo_chess::{Board, Color, Piece, Position, Role, Square, Value};
use zermelo_worker::coord_game::{self as coord, CoordGame};
use zermelo_worker::tables::{TableDir, TableError};

/// Whose rules decide the values.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Rules {
    /// Chess: values from tables.
    Chess,
    /// Church's COORD: pawns never move, White wins by taking a black pawn.
    Coord,
}

impl std::str::FromStr for Rules {
    type Err = String;
    fn from_str(s: &str) -> Result<Rules, String> {
        match s {
            "chess" => Ok(Rules::Chess),
            "coord" => Ok(Rules::Coord),
            other => Err(format!("unknown rules '{other}': expected chess or coord")),
        }
    }
}

/// The value of every placement of the two kings on a fixed pawn configuration, by
/// [`coord::index`] (`None`: not a legal position).
pub struct SliceValues {
    pub pawns: Board,
    pub values: Vec<Option<Value>>,
}

/// The co-ordinate squares: for each attacker square where the attacker's king can legally stand
/// with itself to move, the defender squares (in a1..h8 order) that hold the draw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinateSquares {
    pub attacker: Color,
    pub pawns: Board,
    /// In a1..h8 order of the attacker square.
    pub squares: Vec<(Square, Vec<Square>)>,
}

impl CoordinateSquares {
    /// The defender squares holding the draw against the attacker's king on `sq`, if that
    /// square is one the attacker's king can stand on.
    pub fn get(&self, sq: Square) -> Option<&[Square]> {
        self.squares
            .iter()
            .find(|(a, _)| *a == sq)
            .map(|(_, d)| d.as_slice())
    }
}

/// The board of `pos` with only the pawns, after checking it holds kings and pawns only.
pub fn pawns_of(pos: &Position) -> Result<Board, String> {
    let mut pawns = Board::empty();
    for (sq, p) in pos.board.pieces() {
        match p.role {
            Role::King => {}
            Role::Pawn => pawns.put(sq, p),
            _ => {
                return Err(format!(
                    "squares needs a position with kings and pawns only; {} has a {} on {sq}",
                    pos.to_fen(),
                    match p.role {
                        Role::Queen => "queen",
                        Role::Rook => "rook",
                        Role::Bishop => "bishop",
                        _ => "knight",
                    }
                ))
            }
        }
    }
    Ok(pawns)
}

/// The position with the kings on `wk` and `bk` and `turn` to move, if it is legal.
fn placement(pawns: &Board, wk: Square, bk: Square, turn: Color) -> Option<Position> {
    if pawns.occupied().contains(wk) || pawns.occupied().contains(bk) || wk == bk {
        return None;
    }
    let mut board = *pawns;
    board.put(wk, Piece::new(Color::White, Role::King));
    board.put(bk, Piece::new(Color::Black, Role::King));
    let pos = Position::new(board, turn);
    pos.validate().ok().map(|_| pos)
}

/// Values under chess rules: for now, FULL tables probed in `tables`. The one place that says
/// where chess values come from.
pub fn chess_values(tables: &TableDir, pos: &Position) -> Result<Value, String> {
    tables.probe(pos).map_err(|e| match e {
        TableError::Missing { material, dir } => format!(
            "table {material} not found in {}; build it with `zermelo solve {material} --tables {}` \
             or use `zermelo analyse`",
            dir.display(),
            dir.display()
        ),
        other => other.to_string(),
    })
}

/// Every placement's value on `pawns`, each legal position valued by `value`.
pub fn slice_values(
    pawns: &Board,
    mut value: impl FnMut(&Position) -> Result<Value, String>,
) -> Result<SliceValues, String> {
    let mut values = vec![None; coord::SIZE];
    for turn in Color::ALL {
        for wk in Square::all() {
            for bk in Square::all() {
                if let Some(pos) = placement(pawns, wk, bk, turn) {
                    values[coord::index(wk, bk, turn)] = Some(value(&pos)?);
                }
            }
        }
    }
    Ok(SliceValues {
        pawns: *pawns,
        values,
    })
}

/// The values of a position's pawn configuration under `rules` (`tables` is read under chess
/// rules only).
pub fn values_for(pos: &Position, rules: Rules, tables: &[PathBuf]) -> Result<SliceValues, String> {
    let pawns = pawns_of(pos)?;
    match rules {
        Rules::Coord => {
            let game = CoordGame::new(pos).map_err(|e| e.to_string())?;
            Ok(SliceValues {
                pawns,
                values: game.values().iter().map(|&v| Value::from_raw(v)).collect(),
            })
        }
        Rules::Chess => {
            let Some(dir) = tables.first() else {
                return Err("--tables DIR is needed under chess rules".to_string());
            };
            let list = zermelo_worker::tables::list_text(tables);
            if pawns.occupied().is_empty() {
                return Err(
                    "with no pawn on the board neither side can win; there are no co-ordinate \
                            squares to show"
                        .to_string(),
                );
            }
            // The full table if it is there; else the slices this pawn configuration reaches,
            // solved like `zermelo analyse` does (and kept in the directory's analysis store).
            // Searched in every directory of the list; what analyse solves goes to the first.
            let full = TableDir::from_list(tables);
            let material = zermelo_chess::Material::of(&pos.board).normalized().0;
            if full.has(&material) {
                return slice_values(&pawns, |p| chess_values(&full, p));
            }
            let opts = crate::analyse::AnalyseOptions {
                tables: dir.to_path_buf(),
                threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
                rule: None,
                force: false,
                plan_only: false,
                memory_budget: crate::memory::default_budget(),
                coordinator: None,
            };
            let report = |p: &crate::analyse::PlanSummary| eprint!("{}", crate::analyse::describe_plan(p));
            let solution = crate::analyse::solve_for(pos, &opts, &report, &|_, _| {})
                .map_err(|e| match e {
                    // The way past the refusal is analyse's: its results are then reused here.
                    crate::analyse::AnalyseError::TooBig(_) => format!(
                        "{e} (for squares: run `zermelo analyse --force --tables {} FEN` on this \
                         configuration first; squares then reads its stored slices)",
                        list.display()
                    ),
                    e => e.to_string(),
                })?
                .expect("not plan-only");
            slice_values(&pawns, |p| solution.value(p).map_err(|e| e.to_string()))
        }
    }
}

/// The side that wins in more positions with itself to move (White on a tie); an error if
/// neither side wins anywhere.
pub fn attacker(values: &SliceValues) -> Result<Color, String> {
    let wins = |turn: Color| {
        values.values[turn.index() * 4096..(turn.index() + 1) * 4096]
            .iter()
            .filter(|v| matches!(v, Some(Value::Win(_))))
            .count()
    };
    let (white, black) = (wins(Color::White), wins(Color::Black));
    if white == 0 && black == 0 {
        return Err(
            "neither side wins in any position of this pawn configuration; there are no \
                    co-ordinate squares to show"
                .to_string(),
        );
    }
    Ok(if black > white { Color::Black } else { Color::White })
}

/// The co-ordinate squares for `attacker`.
pub fn coordinate_squares(values: &SliceValues, attacker: Color) -> CoordinateSquares {
    let turn = attacker;
    let mut squares = Vec::new();
    for a in Square::all() {
        let mut legal = false;
        let mut holds = Vec::new();
        for d in Square::all() {
            let (wk, bk) = match attacker {
                Color::White => (a, d),
                Color::Black => (d, a),
            };
            if let Some(v) = values.values[coord::index(wk, bk, turn)] {
                legal = true;
                if !matches!(v, Value::Win(_)) {
                    holds.push(d);
                }
            }
        }
        if legal {
            squares.push((a, holds));
        }
    }
    CoordinateSquares {
        attacker,
        pawns: values.pawns,
        squares,
    }
}

/// The co-ordinate squares of a position's pawn configuration under `rules`.
pub fn squares(pos: &Position, rules: Rules, tables: &[PathBuf]) -> Result<CoordinateSquares, String> {
    let values = values_for(pos, rules, tables)?;
    let attacker = match rules {
        Rules::Coord => Color::White,
        Rules::Chess => attacker(&values)?,
    };
    Ok(coordinate_squares(&values, attacker))
}

struct SquareLists<'a>(&'a [(Square, Vec<Square>)]);

impl Serialize for SquareLists<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (a, d) in self.0 {
            let names: Vec<String> = d.iter().map(|s| s.to_string()).collect();
            map.serialize_entry(&a.to_string(), &names)?;
        }
        map.end()
    }
}

/// `{"attacker":"white","squares":{"a1":[...],...}}`, attacker squares in a1..h8 order.
impl Serialize for CoordinateSquares {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("CoordinateSquares", 2)?;
        st.serialize_field("attacker", self.attacker.name())?;
        st.serialize_field("squares", &SquareLists(&self.squares))?;
        st.end()
    }
}

/// One row of a small diagram for the attacker's king on `a` (`None`: it cannot stand there).
fn diagram_row(cs: &CoordinateSquares, a: Square, holds: Option<&[Square]>, rank: u8) -> String {
    (0..8)
        .map(|file| {
            let sq = Square::from_coords(file, rank);
            match cs.pawns.piece_at(sq) {
                Some(p) => p.char(),
                None if holds.is_none() => ' ',
                None if sq == a => Piece::new(cs.attacker, Role::King).char(),
                None if holds.is_some_and(|h| h.contains(&sq)) => 'o',
                None => '.',
            }
        })
        .collect()
}

/// The terminal diagram: one small board per attacker square, laid out like the board itself
/// (rank 8 at the top), each marking the defender squares that hold the draw.
pub fn text(cs: &CoordinateSquares) -> String {
    let attacker = cs.attacker.name();
    let defender = cs.attacker.other().name();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Co-ordinate squares, attacker {attacker}: for each square of {attacker}'s king (K/k), the \
         squares o of {defender}'s king that hold the draw with {attacker} to move (P/p: pawns)."
    );
    let _ = writeln!(
        out,
        "Above each board: the square of {attacker}'s king and how many squares hold; '-': its king \
         cannot stand there."
    );
    let pairs = numbered_pairs(cs);
    if !pairs.is_empty() {
        let _ = writeln!(
            out,
            "Corresponding squares (with {attacker} to move, {defender}'s king holds only on the square of the same number):"
        );
        for (n, a, d) in &pairs {
            let _ = writeln!(out, "  {n}: {attacker} king {a}, {defender} king {d}");
        }
    }
    for rank in (0..8u8).rev() {
        let _ = writeln!(out);
        let headers: Vec<String> = (0..8u8)
            .map(|file| {
                let a = Square::from_coords(file, rank);
                match cs.get(a) {
                    Some(h) => format!("{a}:{:<5}", h.len()),
                    None => format!("{a}: -   "),
                }
            })
            .collect();
        let _ = writeln!(out, "{}", headers.join("  ").trim_end());
        for row in (0..8u8).rev() {
            let cells: Vec<String> = (0..8u8)
                .map(|file| {
                    let a = Square::from_coords(file, rank);
                    diagram_row(cs, a, cs.get(a), row)
                })
                .collect();
            let _ = writeln!(out, "{}", cells.join("  ").trim_end());
        }
    }
    out
}

/// An SVG sheet: one small board per attacker square (laid out like the board, rank 8 on top),
/// pawns drawn, the attacker's king marked, the defender squares that hold the draw shaded.
pub fn svg(cs: &CoordinateSquares, title: &str) -> String {
    const CELL: u32 = 12;
    const BOARD: u32 = 8 * CELL;
    const GAP: u32 = 20;
    const LABEL: u32 = 14;
    let pitch = BOARD + GAP;
    let width = 8 * pitch + GAP;
    let height = 8 * (BOARD + LABEL + GAP) + GAP + 20;
    let mut s = svg_start(width, height, title);
    let _ = writeln!(
        s,
        r##"<text x="{GAP}" y="16" font-size="13" fill="#000000">{}</text>"##,
        xml_escape(&format!(
            "{title}: attacker {} (king marked), shaded squares hold the draw for {} with {} to move",
            cs.attacker.name(),
            cs.attacker.other().name(),
            cs.attacker.name()
        ))
    );
    for rank in (0..8u8).rev() {
        for file in 0..8u8 {
            let a = Square::from_coords(file, rank);
            let x0 = GAP + file as u32 * pitch;
            let y0 = 20 + GAP + (7 - rank as u32) * (BOARD + LABEL + GAP);
            let holds = cs.get(a);
            let label = match holds {
                Some(h) => format!("K{a}: {}", h.len()),
                None => format!("K{a}: -"),
            };
            let _ = writeln!(
                s,
                r##"<g><text x="{x0}" y="{}" font-size="11" fill="#000000">{label}</text>"##,
                y0 + LABEL - 3
            );
            let by = y0 + LABEL;
            for r in 0..8u8 {
                for f in 0..8u8 {
                    let sq = Square::from_coords(f, r);
                    let x = x0 + f as u32 * CELL;
                    let y = by + (7 - r as u32) * CELL;
                    let light = (f + r) % 2 == 1;
                    let fill = match (holds.is_none(), light) {
                        (true, true) => "#eeeeee",
                        (true, false) => "#cccccc",
                        (false, true) => "#f0d9b5",
                        (false, false) => "#b58863",
                    };
                    let _ = writeln!(
                        s,
                        r#"<rect x="{x}" y="{y}" width="{CELL}" height="{CELL}" fill="{fill}"/>"#
                    );
                    if holds.is_some_and(|h| h.contains(&sq)) {
                        let _ = writeln!(
                            s,
                            r##"<rect x="{x}" y="{y}" width="{CELL}" height="{CELL}" fill="#2060e0" fill-opacity="0.6"/>"##
                        );
                    }
                    let (cx, cy) = (x + CELL / 2, y + CELL / 2);
                    if let Some(p) = cs.pawns.piece_at(sq) {
                        let (fill, stroke) = match p.color {
                            Color::White => ("#ffffff", "#000000"),
                            Color::Black => ("#000000", "#ffffff"),
                        };
                        let _ = writeln!(
                            s,
                            r#"<circle cx="{cx}" cy="{cy}" r="4" fill="{fill}" stroke="{stroke}" stroke-width="1"/>"#
                        );
                    } else if holds.is_some() && sq == a {
                        let _ = writeln!(
                            s,
                            r##"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#e00000" stroke-width="2"/><text x="{cx}" y="{}" font-size="10" text-anchor="middle" fill="#e00000">K</text>"##,
                            x + 1,
                            y + 1,
                            CELL - 2,
                            CELL - 2,
                            cy + 4
                        );
                    }
                }
            }
            let _ = writeln!(
                s,
                r##"<rect x="{x0}" y="{by}" width="{BOARD}" height="{BOARD}" fill="none" stroke="#000000" stroke-width="1"/></g>"##
            );
        }
    }
    let _ = writeln!(s, "</svg>");
    s
}

/// The numbered pairs of corresponding squares: each attacker square where exactly one square
/// of the defender's king holds the draw (attacker to move), numbered by that defender square
/// (1, 2, ... in reading order, rank 8 first); attacker squares sharing a defender square share
/// its number. `(number, attacker square, defender square)`, by number then attacker square.
pub fn numbered_pairs(cs: &CoordinateSquares) -> Vec<(usize, Square, Square)> {
    let reading = |s: &Square| (7 - s.rank(), s.file());
    let mut defenders: Vec<Square> = cs
        .squares
        .iter()
        .filter(|(_, h)| h.len() == 1)
        .map(|(_, h)| h[0])
        .collect();
    defenders.sort_by_key(reading);
    defenders.dedup();
    let mut pairs: Vec<(usize, Square, Square)> = cs
        .squares
        .iter()
        .filter(|(_, h)| h.len() == 1)
        .map(|(a, h)| {
            let n = defenders.iter().position(|d| *d == h[0]).expect("listed") + 1;
            (n, *a, h[0])
        })
        .collect();
    pairs.sort_by_key(|&(n, a, _)| (n, reading(&a)));
    pairs
}

/// The one diagram Church and composers publish: the board with the pawns, and the corresponding
/// squares numbered ([`numbered_pairs`]): the attacker's king on a square marked `n` (a disc of
/// its colour, top left of the square), attacker to move, is held only by the defender's king on
/// the square marked `n` (a disc of the defender's colour, bottom right). A `+` marks a square
/// from which the attacker wins, the defender's king wherever it may stand. Files and ranks are
/// labelled.
pub fn summary_svg(cs: &CoordinateSquares, title: &str) -> String {
    const CELL: u32 = 56;
    const MARGIN: u32 = 28;
    const TOP: u32 = 44;
    let board = 8 * CELL;
    let width = board + 2 * MARGIN;
    let height = TOP + board + MARGIN + 72;
    let (attacker, defender) = (cs.attacker, cs.attacker.other());
    let colours = |c: Color| match c {
        Color::White => ("#ffffff", "#000000"),
        Color::Black => ("#000000", "#ffffff"),
    };
    let corner = |sq: Square| {
        (
            MARGIN + sq.file() as u32 * CELL,
            TOP + (7 - sq.rank() as u32) * CELL,
        )
    };
    let mut s = svg_start(width, height, title);
    let _ = writeln!(
        s,
        r##"<text x="{MARGIN}" y="18" font-size="14" fill="#000000">{}</text>"##,
        xml_escape(&format!("Corresponding squares: {title}"))
    );
    for sq in Square::all() {
        let (x, y) = corner(sq);
        let fill = if (sq.file() + sq.rank()) % 2 == 1 {
            "#f0d9b5"
        } else {
            "#b58863"
        };
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="{y}" width="{CELL}" height="{CELL}" fill="{fill}"/>"#
        );
        if cs.get(sq).is_none() && cs.pawns.piece_at(sq).is_none() {
            // The attacker's king cannot stand here (next to a pawn of the defender's side
            // that attacks it, say): greyed.
            let _ = writeln!(
                s,
                r##"<rect x="{x}" y="{y}" width="{CELL}" height="{CELL}" fill="#808080" fill-opacity="0.35"/>"##
            );
        }
    }
    for i in 0..8u8 {
        let file = (b'a' + i) as char;
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" font-size="13" text-anchor="middle" fill="#000000">{file}</text>"##,
            MARGIN + i as u32 * CELL + CELL / 2,
            TOP + board + 18
        );
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" font-size="13" text-anchor="middle" fill="#000000">{}</text>"##,
            MARGIN / 2,
            TOP + (7 - i as u32) * CELL + CELL / 2 + 5,
            i + 1
        );
    }
    for (sq, p) in cs.pawns.pieces() {
        let (x, y) = corner(sq);
        let glyph = match p.color {
            Color::White => "♙",
            Color::Black => "♟",
        };
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" font-size="44" text-anchor="middle" fill="#000000">{glyph}</text>"##,
            x + CELL / 2,
            y + CELL - 10
        );
    }
    let disc = |s: &mut String, sq: Square, n: usize, colour: Color, low: bool| {
        let (x, y) = corner(sq);
        let (fill, ink) = colours(colour);
        let (cx, cy) = if low {
            (x + CELL - 15, y + CELL - 15)
        } else {
            (x + 15, y + 15)
        };
        let _ = writeln!(
            s,
            r##"<circle cx="{cx}" cy="{cy}" r="12" fill="{fill}" stroke="{ink}" stroke-width="1.5"/><text x="{cx}" y="{}" font-size="13" font-weight="bold" text-anchor="middle" fill="{ink}">{n}</text>"##,
            cy + 5
        );
    };
    for (n, a, d) in numbered_pairs(cs) {
        disc(&mut s, a, n, attacker, false);
        disc(&mut s, d, n, defender, true);
    }
    for (a, holds) in &cs.squares {
        if holds.is_empty() {
            let (x, y) = corner(*a);
            let (_, ink) = colours(attacker);
            let _ = writeln!(
                s,
                r##"<text x="{}" y="{}" font-size="22" font-weight="bold" text-anchor="middle" fill="{ink}" stroke="{}" stroke-width="0.5">+</text>"##,
                x + CELL / 2,
                y + CELL / 2 + 8,
                colours(defender).1
            );
        }
    }
    let _ = writeln!(
        s,
        r##"<rect x="{MARGIN}" y="{TOP}" width="{board}" height="{board}" fill="none" stroke="#000000" stroke-width="1.5"/>"##
    );
    let (a, d) = (attacker.name(), defender.name());
    let legend = [
        format!("n, {a} disc: {a}'s king there, {a} to move;"),
        format!("n, {d} disc: the only square where {d}'s king then holds the draw."),
        format!("+: {a} wins wherever {d}'s king is. Grey: no {a} king there."),
    ];
    for (i, line) in legend.iter().enumerate() {
        let _ = writeln!(
            s,
            r##"<text x="{MARGIN}" y="{}" font-size="12" fill="#000000">{}</text>"##,
            TOP + board + 40 + 16 * i as u32,
            xml_escape(line)
        );
    }
    let _ = writeln!(s, "</svg>");
    s
}

/// The start of an SVG drawing of `width` x `height` on white, titled `title`.
fn svg_start(width: u32, height: u32, title: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif">"#
    );
    let _ = writeln!(s, "<title>{}</title>", xml_escape(title));
    let _ = writeln!(s, r##"<rect width="{width}" height="{height}" fill="#ffffff"/>"##);
    s
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
