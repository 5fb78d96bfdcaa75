//! A 0x88 mailbox board and its move generator, written for the verifier alone.
//!
//! Nothing here comes from `zermelo_chess`: squares are 0x88 numbers (`rank * 16 + file`, a
//! square is on the board iff `square & 0x88 == 0`), the board is an array of 128 cells, and
//! moves are found by stepping through offset lists. The verifier wants a second opinion that
//! shares no code and no tricks with the solver (which works on bitboards and by retrograde
//! passes), so this stays a mailbox generator.
//!
//! Two generators give the same children: [`Position::for_each_child`] is the plain one (each
//! child a copy, every move's legality checked in full), kept for the tests; the verifier runs
//! [`Position::for_each_child_quick`], which changes the board in place, checks a move only
//! when it can be illegal (a king move against a map of the attacked squares, a move while in
//! check or of a pinned man in full) and finds attacks through the 0x88 difference table. The
//! tests hold the two to the same children on many positions, the quick one to the published
//! perft counts, and the table of attacks to the plain outward scan.
//!
//! The line check (`line.rs`) asks this board for the moves of every man but one, legal or not
//! ([`Position::for_each_pseudo_move`], with the squares each move passes over), and for the
//! squares from which an attack stays unblocked ([`Position::still_attacked`]): still stepping
//! through 0x88 offsets, the sets of squares it answers with written as 64-bit masks.

use std::fmt::Write as _;

/// A side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Color {
    White = 0,
    Black = 1,
}

impl Color {
    pub(super) fn other(self) -> Color {
        match self {
            Color::White => Color::Black,
            Color::Black => Color::White,
        }
    }

    pub(super) fn index(self) -> usize {
        self as usize
    }

    pub(super) fn from_index(i: usize) -> Color {
        if i == 0 {
            Color::White
        } else {
            Color::Black
        }
    }
}

/// Kinds of men, numbered in the order of material names ("KQRBNP").
pub(super) const KING: u8 = 0;
pub(super) const QUEEN: u8 = 1;
pub(super) const ROOK: u8 = 2;
pub(super) const BISHOP: u8 = 3;
pub(super) const KNIGHT: u8 = 4;
pub(super) const PAWN: u8 = 5;
/// The letters of the kinds, upper case, indexed by kind.
pub(super) const KIND_LETTERS: [u8; 6] = *b"KQRBNP";

const PROMOTIONS: [u8; 4] = [QUEEN, ROOK, BISHOP, KNIGHT];

/// A board cell: 0 is empty, otherwise `1 + kind + 8 * colour`.
pub(super) fn cell(color: Color, kind: u8) -> u8 {
    1 + kind + 8 * color as u8
}

/// The colour of a non-empty cell.
pub(super) fn cell_color(c: u8) -> Color {
    Color::from_index(usize::from(c >> 3))
}

/// The kind of a non-empty cell.
pub(super) fn cell_kind(c: u8) -> u8 {
    (c & 7) - 1
}

/// The 0x88 square of a square numbered 0..64 (a1 = 0, b1 = 1, ..., h8 = 63).
pub(super) fn sq88(sq64: u8) -> u8 {
    sq64 + (sq64 & !7)
}

/// The square `d` steps from `sq`, if it is on the board. Off-board sums land on a number with
/// bit 0x80 or 0x08 set, wrapping included (`sq` is at most 0x77 and `|d|` at most 33).
fn step(sq: u8, d: i8) -> Option<u8> {
    let t = sq.wrapping_add(d as u8);
    (t & 0x88 == 0).then_some(t)
}

const KING_STEPS: [i8; 8] = [1, -1, 16, -16, 15, -15, 17, -17];
const KNIGHT_STEPS: [i8; 8] = [33, 31, 18, 14, -33, -31, -18, -14];
const ROOK_RAYS: [i8; 4] = [1, -1, 16, -16];
const BISHOP_RAYS: [i8; 4] = [15, -15, 17, -17];
const QUEEN_RAYS: [i8; 8] = [1, -1, 16, -16, 15, -15, 17, -17];

/// More men than one side of any material has (9 pieces and 8 pawns).
const MAX_SIDE_MEN: usize = 24;

/// [`REACH`]'s bits for pawns, by colour (the kinds' bits are `1 << kind`).
const WHITE_PAWN_BIT: u8 = 1 << 6;
const BLACK_PAWN_BIT: u8 = 1 << 7;

/// For `to + 119 - from` of two 0x88 squares: the kinds that attack `to` from `from` on an
/// empty board, as bits. 0x88 differences are unique per (rank, file) offset, which is what
/// makes this table possible.
static REACH: [u8; 239] = reach_table().0;
/// For the same differences: the step from `from` towards `to` along a line (0 off the lines).
static UNIT_STEP: [i8; 239] = reach_table().1;

const fn reach_table() -> ([u8; 239], [i8; 239]) {
    let mut reach = [0u8; 239];
    let mut unit = [0i8; 239];
    let mut i = 0;
    while i < 8 {
        reach[(119 + KING_STEPS[i] as i16) as usize] |= 1 << KING;
        reach[(119 + KNIGHT_STEPS[i] as i16) as usize] |= 1 << KNIGHT;
        let d = QUEEN_RAYS[i];
        let line = if i < 4 { 1 << ROOK } else { 1 << BISHOP };
        let mut k = 1;
        while k < 8 {
            let at = (119 + d as i16 * k) as usize;
            reach[at] |= line | 1 << QUEEN;
            unit[at] = d;
            k += 1;
        }
        i += 1;
    }
    // A white pawn attacks forwards (up the ranks), a black one backwards.
    reach[119 + 15] |= WHITE_PAWN_BIT;
    reach[119 + 17] |= WHITE_PAWN_BIT;
    reach[119 - 15] |= BLACK_PAWN_BIT;
    reach[119 - 17] |= BLACK_PAWN_BIT;
    (reach, unit)
}

/// The table's legality rule ([`Position::is_legal`]) for men on distinct squares (`(colour,
/// kind, square 0..64)`, kings first: White's, then Black's), `occupied` their squares as bits:
/// whether they are a legal position with White to move, and with Black to move. Kings must not
/// be adjacent, and the side to move must not attack the other king.
#[cfg(test)]
pub(super) fn placement_legality(men: &[(Color, u8, u8)], occupied: u64) -> [bool; 2] {
    let (w, b) = (sq88(men[0].2), sq88(men[1].2));
    if kings_touch(men[0].2, men[1].2) {
        return [false, false];
    }
    let mut legal = [true, true];
    for &(color, kind, sq) in &men[2..] {
        let king = if color == Color::White { b } else { w };
        let blocked = |t: u8| occupied >> sq64(t) & 1 == 1;
        if legal[color.index()] && attacks(color, kind, sq88(sq), king, blocked) {
            legal[color.index()] = false;
        }
    }
    legal
}

/// Whether kings on squares `a` and `b` (0..64) stand next to each other (or on one square).
pub(super) fn kings_touch(a: u8, b: u8) -> bool {
    let (a, b) = (sq88(a), sq88(b));
    (a >> 4).abs_diff(b >> 4) <= 1 && (a & 7).abs_diff(b & 7) <= 1
}

/// Whether a man of `color` and `kind` on square `from` attacks square `to` (both 0..64), the
/// men on the squares of `occupied` (bit `s` for square `s`) blocking lines.
pub(super) fn attacks_through(color: Color, kind: u8, from: u8, to: u8, occupied: u64) -> bool {
    attacks(color, kind, sq88(from), sq88(to), |t| {
        occupied >> sq64(t) & 1 == 1
    })
}

/// The squares (0..64, as bits) from which a man of `color` and `kind` would attack square
/// `target` (0..64), the men on the squares of `occupied` blocking lines: stepping out of the
/// target along the man's moves, backwards. A man on one of them attacks the target as
/// [`attacks_through`] says (for a square not in `occupied`).
pub(super) fn attackers_of(color: Color, kind: u8, target: u8, occupied: u64) -> u64 {
    let to = sq88(target);
    let mut squares = 0u64;
    let mut mark = |steps: &[i8], slide: bool| {
        for &d in steps {
            let mut at = to;
            while let Some(t) = step(at, -d) {
                squares |= 1 << sq64(t);
                if !slide || occupied >> sq64(t) & 1 == 1 {
                    break;
                }
                at = t;
            }
        }
    };
    match kind {
        KING => mark(&KING_STEPS, false),
        KNIGHT => mark(&KNIGHT_STEPS, false),
        QUEEN => mark(&QUEEN_RAYS, true),
        ROOK => mark(&QUEEN_RAYS[..4], true),
        BISHOP => mark(&QUEEN_RAYS[4..], true),
        // A white pawn attacks up the board (+15, +17), a black one down.
        _ if color == Color::White => mark(&[15, 17], false),
        _ => mark(&[-15, -17], false),
    }
    squares
}

/// The squares strictly between `from` and `to` (0..64) when they are on one rank, file or
/// diagonal, as bits; 0 when they are not, or next to each other.
pub(super) fn between(from: u8, to: u8) -> u64 {
    let (from, to) = (sq88(from), sq88(to));
    let unit = UNIT_STEP[usize::from(to) + 119 - usize::from(from)];
    if unit == 0 {
        return 0;
    }
    let mut squares = 0;
    let mut t = from.wrapping_add(unit as u8);
    while t != to {
        squares |= 1 << sq64(t);
        t = t.wrapping_add(unit as u8);
    }
    squares
}

/// Whether a man of `color` and `kind` on 0x88 square `from` attacks 0x88 square `to`, the
/// squares for which `blocked` is true blocking lines.
fn attacks(color: Color, kind: u8, from: u8, to: u8, blocked: impl Fn(u8) -> bool) -> bool {
    let d = usize::from(to) + 119 - usize::from(from);
    let bit = match (kind, color) {
        (PAWN, Color::White) => WHITE_PAWN_BIT,
        (PAWN, Color::Black) => BLACK_PAWN_BIT,
        _ => 1 << kind,
    };
    if REACH[d] & bit == 0 {
        return false;
    }
    if !matches!(kind, QUEEN | ROOK | BISHOP) {
        return true;
    }
    let unit = UNIT_STEP[d];
    let mut t = from.wrapping_add(unit as u8);
    while t != to {
        if blocked(t) {
            return false;
        }
        t = t.wrapping_add(unit as u8);
    }
    true
}

/// The algebraic name of a 0x88 square ("e4").
pub(super) fn square_name(sq: u8) -> String {
    let file = (b'a' + (sq & 7)) as char;
    let rank = (b'1' + (sq >> 4)) as char;
    format!("{file}{rank}")
}

/// The square numbered 0..64 of a 0x88 square.
pub(super) fn sq64(sq: u8) -> u8 {
    (sq >> 4) * 8 + (sq & 7)
}

/// The steps of a man of `kind` (not a pawn), and whether it slides along them.
fn piece_steps(kind: u8) -> (&'static [i8], bool) {
    match kind {
        KING => (&KING_STEPS, false),
        KNIGHT => (&KNIGHT_STEPS, false),
        ROOK => (&ROOK_RAYS, true),
        BISHOP => (&BISHOP_RAYS, true),
        _ => (&QUEEN_RAYS, true),
    }
}

/// Whether two 0x88 squares share a rank, a file or a diagonal.
fn aligned(a: u8, b: u8) -> bool {
    let (ranks, files) = ((a >> 4).abs_diff(b >> 4), (a & 7).abs_diff(b & 7));
    ranks == 0 || files == 0 || ranks == files
}

/// A child as [`Position::for_each_child_quick`] reports it.
pub(super) enum Child<'a> {
    /// A man of `color` other than a pawn moved from `from` to the empty square `to` (squares
    /// 0..64): the child has the same men, all but one where they were, the pawns in place, the
    /// other side to move and no en-passant square.
    Quiet {
        color: Color,
        kind: u8,
        from: u8,
        to: u8,
    },
    /// Any other move (a capture, a pawn move): the child itself.
    Moved(&'a Position),
}

/// A position: the board, the side to move and an en-passant square.
///
/// `ep` is set only after a double push that the side to move can legally capture en passant,
/// so two positions with the same men and side to move are the same position iff their `ep`
/// agree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Position {
    board: [u8; 128],
    turn: Color,
    ep: Option<u8>,
    /// The 0x88 squares of the kings, by colour.
    kings: [u8; 2],
}

impl Position {
    /// A position from its men (`(colour, kind, 0..64 square)`), or `None` if two men share a
    /// square, a side has not exactly one king, or a pawn stands on the first or last rank.
    /// Whether the result is legal is [`is_legal`](Position::is_legal)'s question.
    pub(super) fn from_men(men: &[(Color, u8, u8)], turn: Color) -> Option<Position> {
        let mut board = [0u8; 128];
        let mut kings = [None, None];
        for &(color, kind, sq) in men {
            let s = sq88(sq);
            if board[usize::from(s)] != 0 {
                return None;
            }
            if kind == PAWN && !(1..=6).contains(&(s >> 4)) {
                return None;
            }
            if kind == KING {
                if kings[color.index()].is_some() {
                    return None;
                }
                kings[color.index()] = Some(s);
            }
            board[usize::from(s)] = cell(color, kind);
        }
        Some(Position {
            board,
            turn,
            ep: None,
            kings: [kings[0]?, kings[1]?],
        })
    }

    pub(super) fn turn(&self) -> Color {
        self.turn
    }

    pub(super) fn ep(&self) -> Option<u8> {
        self.ep
    }

    /// The cell at a 0x88 square.
    pub(super) fn at(&self, sq: u8) -> u8 {
        self.board[usize::from(sq)]
    }

    /// Calls `f(colour, kind, 0..64 square)` for every man, in square order.
    pub(super) fn for_each_man(&self, mut f: impl FnMut(Color, u8, u8)) {
        for rank in 0..8u8 {
            let at = usize::from(rank) * 16;
            // The rank's eight cells as one number, to skip empty ranks and empty cells quickly.
            let mut row = u64::from_le_bytes(self.board[at..at + 8].try_into().expect("eight cells"));
            while row != 0 {
                let file = (row.trailing_zeros() / 8) as u8;
                let c = (row >> (file * 8)) as u8;
                f(cell_color(c), cell_kind(c), rank * 8 + file);
                row &= !(0xff << (file * 8));
            }
        }
    }

    /// The 0x88 squares of the men of `color`, in square order: `(squares, count)`.
    fn men_of(&self, color: Color) -> ([u8; MAX_SIDE_MEN], usize) {
        let mut out = [0u8; MAX_SIDE_MEN];
        let mut n = 0;
        self.for_each_man(|c, _, sq| {
            if c == color {
                out[n] = sq88(sq);
                n += 1;
            }
        });
        (out, n)
    }

    /// Whether any man of `by` attacks `sq`: for each of them, whether its kind can reach `sq`
    /// along the difference of the squares ([`REACH`]) and, for a queen, rook or bishop, whether
    /// the squares between are empty.
    pub(super) fn attacked(&self, sq: u8, by: Color) -> bool {
        let (men, n) = self.men_of(by);
        self.attacked_from(sq, by, &men[..n])
    }

    /// [`attacked`](Position::attacked) with the squares of `by`'s men given (a square that no
    /// longer holds one of them, its man taken, is passed over).
    fn attacked_from(&self, sq: u8, by: Color, men: &[u8]) -> bool {
        men.iter().any(|&from| {
            let c = self.at(from);
            c != 0 && cell_color(c) == by && attacks(by, cell_kind(c), from, sq, |t| self.at(t) != 0)
        })
    }

    /// Whether any man of `by` attacks `sq`, looking outwards from `sq` (what
    /// [`attacked`](Position::attacked) answers, found another way; the tests compare them).
    #[cfg(test)]
    pub(super) fn attacked_by_scan(&self, sq: u8, by: Color) -> bool {
        let is = |t: Option<u8>, kinds: &[u8]| {
            t.is_some_and(|t| {
                let c = self.at(t);
                c != 0 && cell_color(c) == by && kinds.contains(&cell_kind(c))
            })
        };
        // A white pawn on s attacks s + 15 and s + 17, so it attacks sq from sq - 15, sq - 17.
        let pawn_from: [i8; 2] = match by {
            Color::White => [-15, -17],
            Color::Black => [15, 17],
        };
        if pawn_from.iter().any(|&d| is(step(sq, d), &[PAWN])) {
            return true;
        }
        if KNIGHT_STEPS.iter().any(|&d| is(step(sq, d), &[KNIGHT])) {
            return true;
        }
        if KING_STEPS.iter().any(|&d| is(step(sq, d), &[KING])) {
            return true;
        }
        for (rays, kinds) in [(&ROOK_RAYS, [ROOK, QUEEN]), (&BISHOP_RAYS, [BISHOP, QUEEN])] {
            for &d in rays {
                let mut t = step(sq, d);
                while let Some(s) = t {
                    let c = self.at(s);
                    if c != 0 {
                        if cell_color(c) == by && kinds.contains(&cell_kind(c)) {
                            return true;
                        }
                        break;
                    }
                    t = step(s, d);
                }
            }
        }
        false
    }

    /// Whether the side to move is in check.
    #[cfg(test)]
    pub(super) fn in_check(&self) -> bool {
        self.attacked(self.kings[self.turn.index()], self.turn.other())
    }

    /// The table's legality rule: kings not adjacent and the side not to move not in check.
    /// (Distinct squares, one king a side and pawns on ranks 2 to 7 hold by construction.)
    pub(super) fn is_legal(&self) -> bool {
        let [w, b] = self.kings;
        let rank_gap = (w >> 4).abs_diff(b >> 4);
        let file_gap = (w & 7).abs_diff(b & 7);
        if rank_gap <= 1 && file_gap <= 1 {
            return false;
        }
        let them = self.turn.other();
        !self.attacked(self.kings[them.index()], self.turn)
    }

    /// Calls `f` on every position reachable by one legal move and returns how many there were.
    /// Stops at the first error `f` returns. The plain way: each child is a copy, checked in
    /// full ([`for_each_child_quick`](Position::for_each_child_quick) is what the verifier runs;
    /// the tests hold the two to the same answers).
    #[cfg(test)]
    pub(super) fn for_each_child<E>(
        &self,
        mut f: impl FnMut(&Position) -> Result<(), E>,
    ) -> Result<usize, E> {
        let us = self.turn;
        let mut n = 0;
        let mut emit = |child: Option<Position>| -> Result<(), E> {
            if let Some(child) = child {
                n += 1;
                f(&child)?;
            }
            Ok(())
        };
        for from in 0..128u8 {
            if from & 0x88 != 0 {
                continue;
            }
            let c = self.at(from);
            if c == 0 || cell_color(c) != us {
                continue;
            }
            match cell_kind(c) {
                KING => {
                    for &d in &KING_STEPS {
                        if let Some(to) = step(from, d).filter(|&t| self.can_land(t)) {
                            emit(self.play(from, to, None, false))?;
                        }
                    }
                }
                KNIGHT => {
                    for &d in &KNIGHT_STEPS {
                        if let Some(to) = step(from, d).filter(|&t| self.can_land(t)) {
                            emit(self.play(from, to, None, false))?;
                        }
                    }
                }
                PAWN => self.pawn_moves(from, &mut emit)?,
                kind => {
                    let rays: &[i8] = match kind {
                        ROOK => &ROOK_RAYS,
                        BISHOP => &BISHOP_RAYS,
                        _ => &QUEEN_RAYS,
                    };
                    for &d in rays {
                        let mut t = step(from, d);
                        while let Some(to) = t {
                            if !self.can_land(to) {
                                break;
                            }
                            emit(self.play(from, to, None, false))?;
                            if self.at(to) != 0 {
                                break;
                            }
                            t = step(to, d);
                        }
                    }
                }
            }
        }
        Ok(n)
    }

    /// What [`for_each_child`](Position::for_each_child) does, faster: the same children in the
    /// same order, but the board is changed in place and put back instead of copied, a move's
    /// legality is checked only when it can be in doubt (a king move, a move while in check, a
    /// move of a man on a line through its king, a pawn move), and a quiet move (of a man other
    /// than a pawn to an empty square) is reported as the move alone, without the child: its
    /// index follows from its parent's (see `QuietFrame`).
    ///
    /// The test `the_quick_children_are_the_plain_ones` compares the two on many positions.
    ///
    /// Returns whether the side to move is in check (the caller needs it when there is no move).
    pub(super) fn for_each_child_quick<E>(
        &mut self,
        mut f: impl FnMut(Child<'_>) -> Result<(), E>,
    ) -> Result<bool, E> {
        let us = self.turn;
        let them = us.other();
        let king = self.kings[us.index()];
        // Every square the other side attacks with this king off the board: where it may not go.
        let (theirs, their_count) = self.men_of(them);
        let guarded = self.attack_set(them, king, &theirs[..their_count]);
        let in_check = guarded >> sq64(king) & 1 == 1;
        let theirs = &theirs[..their_count];
        let (ours, count) = self.men_of(us);
        for &from in &ours[..count] {
            let man = self.at(from);
            let kind = cell_kind(man);
            // Out of check, only a pinned man can uncover its king by moving.
            let may_uncover = in_check || (kind != KING && self.pinned(king, from));
            let steps: &[i8] = match kind {
                PAWN => {
                    // Few and varied (promotions, double pushes, en passant): the plain way.
                    self.pawn_moves(from, &mut |child: Option<Position>| match child {
                        Some(child) => f(Child::Moved(&child)),
                        None => Ok(()),
                    })?;
                    continue;
                }
                KING => &KING_STEPS,
                KNIGHT => &KNIGHT_STEPS,
                ROOK => &ROOK_RAYS,
                BISHOP => &BISHOP_RAYS,
                _ => &QUEEN_RAYS,
            };
            let slides = matches!(kind, QUEEN | ROOK | BISHOP);
            for &d in steps {
                let mut t = step(from, d);
                while let Some(to) = t {
                    if !self.can_land(to) {
                        break;
                    }
                    let captured = self.at(to);
                    let legal = if kind == KING {
                        guarded >> sq64(to) & 1 == 0
                    } else if may_uncover {
                        self.board[usize::from(from)] = 0;
                        self.board[usize::from(to)] = man;
                        let safe = !self.attacked_from(king, them, theirs);
                        self.board[usize::from(from)] = man;
                        self.board[usize::from(to)] = captured;
                        safe
                    } else {
                        true
                    };
                    if legal {
                        if captured == 0 {
                            f(Child::Quiet {
                                color: us,
                                kind,
                                from: sq64(from),
                                to: sq64(to),
                            })?;
                        } else {
                            let ep = self.ep;
                            self.board[usize::from(from)] = 0;
                            self.board[usize::from(to)] = man;
                            if kind == KING {
                                self.kings[us.index()] = to;
                            }
                            self.turn = them;
                            self.ep = None;
                            let result = f(Child::Moved(self));
                            self.turn = us;
                            self.ep = ep;
                            self.kings[us.index()] = king;
                            self.board[usize::from(from)] = man;
                            self.board[usize::from(to)] = captured;
                            result?;
                        }
                    }
                    if !slides || captured != 0 {
                        break;
                    }
                    t = step(to, d);
                }
            }
        }
        Ok(in_check)
    }

    /// Whether the man on `from` stands between the king on `king` (of the other colour than
    /// the side to move's enemies) and an enemy queen, rook or bishop that would attack the
    /// king along that line with `from` empty.
    fn pinned(&self, king: u8, from: u8) -> bool {
        if !aligned(king, from) {
            return false;
        }
        let rank_step = (i16::from(from >> 4) - i16::from(king >> 4)).signum();
        let file_step = (i16::from(from & 7) - i16::from(king & 7)).signum();
        let d = (rank_step * 16 + file_step) as i8;
        let straight = rank_step == 0 || file_step == 0;
        let mover = cell_color(self.at(from));
        let mut passed = false;
        let mut t = step(king, d);
        while let Some(sq) = t {
            let c = self.at(sq);
            if sq == from {
                passed = true;
            } else if c != 0 {
                // A man between the king and this one shields the king: no pin. Else the first
                // man beyond decides.
                let kind = cell_kind(c);
                return passed
                    && cell_color(c) != mover
                    && (kind == QUEEN || kind == if straight { ROOK } else { BISHOP });
            }
            t = step(sq, d);
        }
        false
    }

    /// The squares (bits of 0..64) that the men of `by` (on the squares `men`) attack, `through`
    /// counted as empty: the squares a king standing on `through` may not step to.
    fn attack_set(&self, by: Color, through: u8, men: &[u8]) -> u64 {
        let mut set = 0u64;
        let mut mark = |sq: u8| set |= 1 << sq64(sq);
        for &from in men {
            let c = self.at(from);
            let (steps, slides): (&[i8], bool) = match cell_kind(c) {
                PAWN => (
                    match by {
                        Color::White => &[15, 17],
                        Color::Black => &[-15, -17],
                    },
                    false,
                ),
                kind => piece_steps(kind),
            };
            for &d in steps {
                let mut t = step(from, d);
                while let Some(to) = t {
                    mark(to);
                    if !slides || (self.at(to) != 0 && to != through) {
                        break;
                    }
                    t = step(to, d);
                }
            }
        }
        set
    }

    /// The child of a quiet move (see [`Child::Quiet`]) from `from` to `to` (squares 0..64).
    pub(super) fn after_quiet_move(&self, from: u8, to: u8) -> Position {
        let mut child = self.clone();
        let (from, to) = (usize::from(sq88(from)), usize::from(sq88(to)));
        child.board[to] = child.board[from];
        child.board[from] = 0;
        if cell_kind(child.board[to]) == KING {
            child.kings[self.turn.index()] = to as u8;
        }
        child.turn = self.turn.other();
        child.ep = None;
        child
    }

    /// Whether the side to move may move a man to `to`: empty, or an enemy man other than the
    /// king (a legal position never offers the king).
    fn can_land(&self, to: u8) -> bool {
        let c = self.at(to);
        c == 0 || (cell_color(c) != self.turn && cell_kind(c) != KING)
    }

    fn pawn_moves<E>(
        &self,
        from: u8,
        emit: &mut impl FnMut(Option<Position>) -> Result<(), E>,
    ) -> Result<(), E> {
        let (forward, start_rank): (i8, u8) = match self.turn {
            Color::White => (16, 1),
            Color::Black => (-16, 6),
        };
        if let Some(one) = step(from, forward).filter(|&t| self.at(t) == 0) {
            self.pawn_to(from, one, emit)?;
            if from >> 4 == start_rank {
                if let Some(two) = step(one, forward).filter(|&t| self.at(t) == 0) {
                    emit(self.play(from, two, None, false))?;
                }
            }
        }
        for side in [-1i8, 1] {
            let Some(to) = step(from, forward + side) else {
                continue;
            };
            let c = self.at(to);
            if c != 0 && cell_color(c) != self.turn && cell_kind(c) != KING {
                self.pawn_to(from, to, emit)?;
            } else if c == 0 && self.ep == Some(to) {
                emit(self.play(from, to, None, true))?;
            }
        }
        Ok(())
    }

    /// A pawn's push or capture to `to`: four promotions on the last rank, one move elsewhere.
    fn pawn_to<E>(
        &self,
        from: u8,
        to: u8,
        emit: &mut impl FnMut(Option<Position>) -> Result<(), E>,
    ) -> Result<(), E> {
        let last_rank = match self.turn {
            Color::White => 7,
            Color::Black => 0,
        };
        if to >> 4 == last_rank {
            for p in PROMOTIONS {
                emit(self.play(from, to, Some(p), false))?;
            }
            Ok(())
        } else {
            emit(self.play(from, to, None, false))
        }
    }

    /// The position after moving the man on `from` to `to` (promoting it to `promotion`, taking
    /// the pawn beside `to` if `en_passant`), or `None` if that leaves the mover's king attacked.
    /// After a double push the child gets an en-passant square iff the capture is legal.
    fn play(&self, from: u8, to: u8, promotion: Option<u8>, en_passant: bool) -> Option<Position> {
        let us = self.turn;
        let mut child = self.clone();
        let man = child.board[usize::from(from)];
        child.board[usize::from(from)] = 0;
        child.board[usize::from(to)] = match promotion {
            Some(kind) => cell(us, kind),
            None => man,
        };
        if en_passant {
            // The captured pawn stands behind `to`, seen from the capturer.
            let behind = match us {
                Color::White => to - 16,
                Color::Black => to + 16,
            };
            child.board[usize::from(behind)] = 0;
        }
        if cell_kind(man) == KING {
            child.kings[us.index()] = to;
        }
        child.turn = us.other();
        child.ep = None;
        if child.attacked(child.kings[us.index()], us.other()) {
            return None;
        }
        if cell_kind(man) == PAWN && from.abs_diff(to) == 32 {
            let passed = (from + to) / 2;
            child.ep = Some(passed);
            if !child.has_legal_en_passant() {
                child.ep = None;
            }
        }
        Some(child)
    }

    /// Whether the side to move has a legal en-passant capture onto `self.ep`.
    fn has_legal_en_passant(&self) -> bool {
        let Some(target) = self.ep else { return false };
        // A capturer of the side to move stands diagonally behind the target, seen from it.
        let from_steps: [i8; 2] = match self.turn {
            Color::White => [-15, -17],
            Color::Black => [15, 17],
        };
        from_steps.iter().any(|&d| {
            step(target, d).is_some_and(|from| {
                self.at(from) == cell(self.turn, PAWN) && self.play(from, target, None, true).is_some()
            })
        })
    }

    /// The position with colours swapped: ranks mirrored, each man's colour and the side to
    /// move flipped. Same value as `self`.
    #[cfg(test)]
    pub(super) fn color_swapped(&self) -> Position {
        self.transformed(|s| s ^ 0x70, true)
    }

    /// The position mirrored left to right.
    #[cfg(test)]
    pub(super) fn file_mirrored(&self) -> Position {
        self.transformed(|s| s ^ 0x07, false)
    }

    /// The position mirrored top to bottom, colours kept (a symmetry of pawnless positions).
    #[cfg(test)]
    pub(super) fn rank_mirrored(&self) -> Position {
        self.transformed(|s| s ^ 0x70, false)
    }

    /// The position mirrored in the a1-h8 diagonal (file and rank exchanged), colours kept (a
    /// symmetry of pawnless positions).
    #[cfg(test)]
    pub(super) fn transposed(&self) -> Position {
        self.transformed(|s| (s & 7) << 4 | s >> 4, false)
    }

    /// Moves every man from 0x88 square `s` to `map(s)` (a symmetry of the board), swapping
    /// colours too if asked.
    #[cfg(test)]
    fn transformed(&self, map: impl Fn(u8) -> u8, swap_colors: bool) -> Position {
        let mut board = [0u8; 128];
        for sq in (0..128u8).filter(|s| s & 0x88 == 0) {
            let c = self.at(sq);
            if c != 0 {
                let color = if swap_colors {
                    cell_color(c).other()
                } else {
                    cell_color(c)
                };
                board[usize::from(map(sq))] = cell(color, cell_kind(c));
            }
        }
        let mut kings = [map(self.kings[0]), map(self.kings[1])];
        if swap_colors {
            kings.swap(0, 1);
        }
        Position {
            board,
            turn: if swap_colors { self.turn.other() } else { self.turn },
            ep: self.ep.map(&map),
            kings,
        }
    }

    /// The position as FEN (no castling, the en-passant square if any, clocks `0 1`).
    pub(super) fn fen(&self) -> String {
        let mut out = String::new();
        for rank in (0..8u8).rev() {
            let mut empty = 0;
            for file in 0..8u8 {
                let c = self.at(rank * 16 + file);
                if c == 0 {
                    empty += 1;
                    continue;
                }
                if empty > 0 {
                    let _ = write!(out, "{empty}");
                    empty = 0;
                }
                let letter = KIND_LETTERS[usize::from(cell_kind(c))] as char;
                out.push(if cell_color(c) == Color::White {
                    letter
                } else {
                    letter.to_ascii_lowercase()
                });
            }
            if empty > 0 {
                let _ = write!(out, "{empty}");
            }
            if rank > 0 {
                out.push('/');
            }
        }
        out.push_str(if self.turn == Color::White {
            " w - "
        } else {
            " b - "
        });
        match self.ep {
            Some(sq) => out.push_str(&square_name(sq)),
            None => out.push('-'),
        }
        out.push_str(" 0 1");
        out
    }

    /// Parses a FEN without castling rights (tests only). The en-passant field is kept only if
    /// the capture is legal, as [`play`](Position::play) would set it.
    #[cfg(test)]
    pub(super) fn from_fen(fen: &str) -> Option<Position> {
        let mut fields = fen.split_whitespace();
        let board = fields.next()?;
        let turn = match fields.next()? {
            "w" => Color::White,
            "b" => Color::Black,
            _ => return None,
        };
        if fields.next()? != "-" {
            return None;
        }
        let ep = fields.next()?;
        let mut men = Vec::new();
        for (i, row) in board.split('/').enumerate() {
            let rank = 7u8.checked_sub(i as u8)?;
            let mut file = 0u8;
            for ch in row.chars() {
                if let Some(d) = ch.to_digit(10) {
                    file += d as u8;
                    continue;
                }
                let kind = KIND_LETTERS
                    .iter()
                    .position(|&l| l as char == ch.to_ascii_uppercase())? as u8;
                let color = if ch.is_ascii_uppercase() {
                    Color::White
                } else {
                    Color::Black
                };
                if file >= 8 {
                    return None;
                }
                men.push((color, kind, rank * 8 + file));
                file += 1;
            }
        }
        let mut pos = Position::from_men(&men, turn)?;
        if ep != "-" {
            let b = ep.as_bytes();
            if b.len() != 2 {
                return None;
            }
            pos.ep = Some((b[1].checked_sub(b'1')?) * 16 + b[0].checked_sub(b'a')?);
            if !pos.has_legal_en_passant() {
                pos.ep = None;
            }
        }
        Some(pos)
    }
}

/// A move of the side to move found without looking at its legality, on a board that lacks
/// one man (the line man of `crate::line`): where it goes, and which squares that man must not
/// stand on for the move to exist.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pseudo {
    /// Squares 0..64.
    pub(super) from: u8,
    pub(super) to: u8,
    pub(super) kind: u8,
    /// The squares (bits of 0..64) strictly between `from` and `to` that the move passes over:
    /// a slider's path, a double push's middle square.
    pub(super) path: u64,
    /// The man on `to` (a cell, 0 if empty).
    pub(super) captured: u8,
    pub(super) promotion: Option<u8>,
    /// A pawn's diagonal step to an empty square: a move only if the missing man, of the other
    /// side, stands on `to`.
    pub(super) needs_victim: bool,
}

/// The part of the board that the line check needs: moves and attacks on a board from which
/// one man is missing, with the squares that man would block.
impl Position {
    /// Calls `f` on every move of the side to move, legal or not (a king may move into check, a
    /// pinned man may move), except king moves next to the other king, and on every diagonal
    /// step of a pawn to an empty square (`needs_victim`). Promotions come as four moves.
    pub(super) fn for_each_pseudo_move(&self, mut f: impl FnMut(Pseudo)) {
        let us = self.turn;
        let their_king = self.kings[us.other().index()];
        let (ours, count) = self.men_of(us);
        for &from in &ours[..count] {
            let kind = cell_kind(self.at(from));
            let mut emit = |to: u8, path: u64, promotion: Option<u8>, needs_victim: bool| {
                f(Pseudo {
                    from: sq64(from),
                    to: sq64(to),
                    kind,
                    path,
                    captured: self.at(to),
                    promotion,
                    needs_victim,
                })
            };
            if kind == PAWN {
                let (forward, start_rank, last_rank): (i8, u8, u8) = match us {
                    Color::White => (16, 1, 7),
                    Color::Black => (-16, 6, 0),
                };
                let promotions: &[Option<u8>] = if step(from, forward).is_some_and(|t| t >> 4 == last_rank) {
                    &[Some(QUEEN), Some(ROOK), Some(BISHOP), Some(KNIGHT)]
                } else {
                    &[None]
                };
                if let Some(one) = step(from, forward).filter(|&t| self.at(t) == 0) {
                    for &p in promotions {
                        emit(one, 0, p, false);
                    }
                    if from >> 4 == start_rank {
                        if let Some(two) = step(one, forward).filter(|&t| self.at(t) == 0) {
                            emit(two, 1 << sq64(one), None, false);
                        }
                    }
                }
                for side in [-1i8, 1] {
                    let Some(to) = step(from, forward + side) else {
                        continue;
                    };
                    let c = self.at(to);
                    if c == 0 || (cell_color(c) != us && cell_kind(c) != KING) {
                        for &p in promotions {
                            emit(to, 0, p, c == 0);
                        }
                    }
                }
                continue;
            }
            let (steps, slides) = piece_steps(kind);
            for &d in steps {
                let mut path = 0u64;
                let mut t = step(from, d);
                while let Some(to) = t {
                    if !self.can_land(to) {
                        break;
                    }
                    let beside_king = kind == KING
                        && (to >> 4).abs_diff(their_king >> 4) <= 1
                        && (to & 7).abs_diff(their_king & 7) <= 1;
                    if !beside_king {
                        emit(to, path, None, false);
                    }
                    if !slides || self.at(to) != 0 {
                        break;
                    }
                    path |= 1 << sq64(to);
                    t = step(to, d);
                }
            }
        }
    }

    /// The squares (bits of 0..64) that a man of `kind` (not a pawn) on square `from` (0..64)
    /// attacks on this board: along each line up to and with the first man met. The board's
    /// man on `from`, if any, is ignored. Men other than pawns attack both ways, so these are
    /// also the squares from which such a man attacks `from`.
    pub(super) fn reach(&self, kind: u8, from: u8) -> u64 {
        debug_assert!(kind != PAWN);
        let from = sq88(from);
        let (steps, slides) = piece_steps(kind);
        let mut set = 0u64;
        for &d in steps {
            let mut t = step(from, d);
            while let Some(to) = t {
                set |= 1 << sq64(to);
                if !slides || self.at(to) != 0 {
                    break;
                }
                t = step(to, d);
            }
        }
        set
    }

    /// The squares (bits of 0..64) on which one more man, of any colour and kind but a
    /// non-attacker, would leave square `target` (0..64) attacked by the men of `by`: all of
    /// them if a man attacks it from next to it or by a knight's jump, else the squares off the
    /// lines of the attacking queens, rooks and bishops; none if nothing attacks it.
    pub(super) fn still_attacked(&self, target: u8, by: Color) -> u64 {
        let to = sq88(target);
        let (men, n) = self.men_of(by);
        let mut set = 0u64;
        for &from in &men[..n] {
            let kind = cell_kind(self.at(from));
            if !attacks(by, kind, from, to, |t| self.at(t) != 0) {
                continue;
            }
            if !matches!(kind, QUEEN | ROOK | BISHOP) {
                return u64::MAX;
            }
            let unit = UNIT_STEP[usize::from(to) + 119 - usize::from(from)];
            let mut between = 0u64;
            let mut t = from.wrapping_add(unit as u8);
            while t != to {
                between |= 1 << sq64(t);
                t = t.wrapping_add(unit as u8);
            }
            set |= !between;
        }
        set
    }

    /// The square (0..64) of the king of `color`.
    pub(super) fn king_square(&self, color: Color) -> u8 {
        sq64(self.kings[color.index()])
    }

    /// The position after `mv` (of [`for_each_pseudo_move`](Position::for_each_pseudo_move)),
    /// the other side to move, no en-passant square: whether the mover's king is attacked is
    /// not looked at, nor (after a double push) the en-passant right, which depends on the man
    /// still to come (see [`with_en_passant_after`](Position::with_en_passant_after)).
    pub(super) fn after_pseudo(&self, mv: &Pseudo) -> Position {
        let mut child = self.clone();
        let (from, to) = (sq88(mv.from), sq88(mv.to));
        let man = child.board[usize::from(from)];
        child.board[usize::from(from)] = 0;
        child.board[usize::from(to)] = match mv.promotion {
            Some(kind) => cell(self.turn, kind),
            None => man,
        };
        if cell_kind(man) == KING {
            child.kings[self.turn.index()] = to;
        }
        child.turn = self.turn.other();
        child.ep = None;
        child
    }

    /// The position with the side to move changed, nothing else (no en-passant square).
    pub(super) fn passed(&self) -> Position {
        let mut child = self.clone();
        child.turn = self.turn.other();
        child.ep = None;
        child
    }

    /// The position with a man of `color` and `kind` (not a king) put on the empty square `sq`
    /// (0..64), or taken off it if `kind` is `None`.
    pub(super) fn with_cell(&self, sq: u8, man: Option<(Color, u8)>) -> Position {
        let mut pos = self.clone();
        pos.board[usize::from(sq88(sq))] = man.map_or(0, |(color, kind)| cell(color, kind));
        pos
    }

    /// The position (just after a double push over square `passed`, 0..64) with its
    /// en-passant right: set iff the side to move can capture there legally, as after
    /// [`play`](Position::play).
    pub(super) fn with_en_passant_after(mut self, passed: u8) -> Position {
        self.ep = Some(sq88(passed));
        if !self.has_legal_en_passant() {
            self.ep = None;
        }
        self
    }

    /// Whether a pawn of the side to move stands next to square `sq` (0..64) on its rank: after
    /// a double push to `sq`, whether an en-passant right is possible at all.
    pub(super) fn pawn_beside(&self, sq: u8) -> bool {
        let s = sq88(sq);
        [1i8, -1]
            .iter()
            .any(|&d| step(s, d).is_some_and(|t| self.at(t) == cell(self.turn, PAWN)))
    }
}
