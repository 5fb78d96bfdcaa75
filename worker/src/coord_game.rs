//! COORD, Church's game of co-ordinate squares (IJCAI 1979), solved by retrograde analysis.
//!
//! The pawns never move. The kings move as in chess, one step, never onto a square a pawn of the
//! other side attacks nor next to the other king. A king may not step onto an enemy pawn, except
//! that White's king may take an undefended black pawn (a legal king move onto it), and doing so
//! wins at once. Black can never win; a position with no legal move, and every position White
//! cannot force to a capture, is a draw. White is always the attacker: the game is played on the
//! pawns as they stand, with no swapping of colours and no mirroring.
//!
//! Values use the tables' encoding ([`zermelo_chess::value`]); the depth is counted in plies to
//! the capture, so a White-to-move position with a capture on hand is a win in 1. Legality is the
//! tables' rule: kings on empty squares and not adjacent, the side not to move not in check.
//!
//! ```
//! use zermelo_chess::{Position, Value};
//! use zermelo_worker::coord_game::CoordGame;
//! let pos: Position = "8/k7/3p4/p2P1p2/P2P1P2/8/8/K7 w - - 0 1".parse().unwrap();
//! let game = CoordGame::new(&pos).unwrap();
//! assert!(matches!(game.value(&pos).unwrap(), Value::Win(_)));
//! ```

use zermelo_chess::attacks::{king_attacks, pawn_attacks_all};
use zermelo_chess::value::{DRAW, ILLEGAL};
use zermelo_chess::{Bitboard, Color, Move, Piece, Position, Role, Square, Value};

/// Positions of one game: White's king square, Black's king square, side to move.
pub const SIZE: usize = 2 * 64 * 64;

/// Why a position is not one of a COORD game.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoordError {
    #[error("COORD is played with kings and pawns only; this position has a {role} on {square}")]
    NotKingsAndPawns { role: &'static str, square: Square },
    #[error("the position has a {} king missing or doubled", .0.name())]
    Kings(Color),
    #[error("the position's pawns are not those of this game")]
    OtherPawns,
    #[error("the position is not legal (kings adjacent or on pawns, or the side not to move in check)")]
    Illegal,
}

/// A COORD game: the fixed pawns, and the value of every placement of the kings.
#[derive(Clone, Debug)]
pub struct CoordGame {
    white_pawns: Bitboard,
    black_pawns: Bitboard,
    /// Squares White's pawns attack: Black's king never stands on them with White to move.
    white_attacks: Bitboard,
    /// Squares Black's pawns attack: White's king never moves onto them.
    black_attacks: Bitboard,
    values: Vec<u16>,
}

/// The index of a placement: `turn * 4096 + white king * 64 + black king`.
#[inline]
pub const fn index(white_king: Square, black_king: Square, turn: Color) -> usize {
    turn.index() * 4096 + white_king.index() * 64 + black_king.index()
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::King => "king",
        Role::Queen => "queen",
        Role::Rook => "rook",
        Role::Bishop => "bishop",
        Role::Knight => "knight",
        Role::Pawn => "pawn",
    }
}

/// The kings' squares of a position with kings and pawns only.
fn kings_of(pos: &Position) -> Result<(Square, Square), CoordError> {
    let b = &pos.board;
    for (square, piece) in b.pieces() {
        if !matches!(piece.role, Role::King | Role::Pawn) {
            return Err(CoordError::NotKingsAndPawns {
                role: role_name(piece.role),
                square,
            });
        }
    }
    let mut kings = [Square::A1; 2];
    for c in Color::ALL {
        let k = b.by_piece(Piece::new(c, Role::King));
        if k.count() != 1 {
            return Err(CoordError::Kings(c));
        }
        kings[c.index()] = k.first().expect("one king");
    }
    Ok((kings[0], kings[1]))
}

impl CoordGame {
    /// The game on the pawns of `pos`, which must hold kings and pawns only; solved at once
    /// (8,192 placements).
    pub fn new(pos: &Position) -> Result<CoordGame, CoordError> {
        kings_of(pos)?;
        let b = &pos.board;
        Ok(CoordGame::with_pawns(
            b.by_piece(Piece::new(Color::White, Role::Pawn)),
            b.by_piece(Piece::new(Color::Black, Role::Pawn)),
        ))
    }

    /// The game on these pawns (on distinct squares of ranks 2 to 7), solved at once.
    ///
    /// # Panics
    /// If the pawns overlap or stand on a back rank.
    pub fn with_pawns(white_pawns: Bitboard, black_pawns: Bitboard) -> CoordGame {
        assert!((white_pawns & black_pawns).is_empty(), "pawns overlap");
        assert!(
            ((white_pawns | black_pawns) & Bitboard::BACKRANKS).is_empty(),
            "pawn on a back rank"
        );
        let mut game = CoordGame {
            white_pawns,
            black_pawns,
            white_attacks: pawn_attacks_all(Color::White, white_pawns),
            black_attacks: pawn_attacks_all(Color::Black, black_pawns),
            values: Vec::new(),
        };
        game.values = game.solve();
        game
    }

    pub fn white_pawns(&self) -> Bitboard {
        self.white_pawns
    }

    pub fn black_pawns(&self) -> Bitboard {
        self.black_pawns
    }

    /// Every placement's stored value, by [`index`] ([`ILLEGAL`] for illegal placements).
    pub fn values(&self) -> &[u16] {
        &self.values
    }

    /// The value of a placement, `None` if it is illegal.
    pub fn value_of(&self, white_king: Square, black_king: Square, turn: Color) -> Option<Value> {
        Value::from_raw(self.values[index(white_king, black_king, turn)])
    }

    /// The tables' legality rule: kings on empty squares and not adjacent, the side not to move
    /// not in check (pawns give check as in chess; kings never do, being apart).
    pub fn is_legal(&self, white_king: Square, black_king: Square, turn: Color) -> bool {
        let pawns = self.white_pawns | self.black_pawns;
        white_king != black_king
            && !pawns.contains(white_king)
            && !pawns.contains(black_king)
            && !king_attacks(white_king).contains(black_king)
            && match turn {
                Color::White => !self.white_attacks.contains(black_king),
                Color::Black => !self.black_attacks.contains(white_king),
            }
    }

    /// The squares White's king may move to from a legal placement, White to move; those holding
    /// a black pawn are the winning captures.
    #[inline]
    fn white_targets(&self, white_king: Square, black_king: Square) -> Bitboard {
        king_attacks(white_king) & !self.white_pawns & !self.black_attacks & !king_attacks(black_king)
    }

    /// The squares Black's king may move to from a legal placement, Black to move.
    #[inline]
    fn black_targets(&self, white_king: Square, black_king: Square) -> Bitboard {
        king_attacks(black_king)
            & !self.white_pawns
            & !self.black_pawns
            & !self.white_attacks
            & !king_attacks(white_king)
    }

    /// Solves the game by retrograde analysis: the value of every placement by [`index`].
    ///
    /// White-to-move placements with a capture on hand are wins in 1. Then by ply: from the
    /// White wins in n, Black's un-moves find the placements whose every move is known to lose
    /// (a counter of undecided moves reaches 0: a loss in n + 1); from the Black losses in n,
    /// White's un-moves find the wins in n + 1. Whatever is left undecided is a draw, and so is
    /// a Black placement without a move.
    pub fn solve(&self) -> Vec<u16> {
        let mut values = vec![ILLEGAL; SIZE];
        // Black's moves not yet known to lose, for Black-to-move placements.
        let mut open = vec![0u8; 4096];
        let mut frontier = Vec::new();
        for wk in Square::all() {
            for bk in Square::all() {
                if self.is_legal(wk, bk, Color::White) {
                    let i = index(wk, bk, Color::White);
                    if (self.white_targets(wk, bk) & self.black_pawns).any() {
                        values[i] = Value::Win(1).raw();
                        frontier.push(i);
                    } else {
                        values[i] = DRAW;
                    }
                }
                if self.is_legal(wk, bk, Color::Black) {
                    values[index(wk, bk, Color::Black)] = DRAW;
                    open[wk.index() * 64 + bk.index()] = self.black_targets(wk, bk).count() as u8;
                }
            }
        }
        let mut ply: u16 = 1;
        while !frontier.is_empty() {
            let mut next = Vec::new();
            for &i in &frontier {
                let wk = Square::new(((i / 64) % 64) as u8);
                let bk = Square::new((i % 64) as u8);
                if i < 4096 {
                    // A White win in `ply`: Black's king came from next door.
                    for from in king_attacks(bk) {
                        if !self.is_legal(wk, from, Color::Black) {
                            continue;
                        }
                        let p = index(wk, from, Color::Black);
                        let o = &mut open[p - 4096];
                        if values[p] == DRAW {
                            debug_assert!(*o > 0);
                            *o -= 1;
                            if *o == 0 {
                                values[p] = Value::Loss(ply + 1).raw();
                                next.push(p);
                            }
                        }
                    }
                } else {
                    // A Black loss in `ply`: White's king came from next door, without a capture.
                    for from in king_attacks(wk) {
                        if !self.is_legal(from, bk, Color::White) {
                            continue;
                        }
                        let p = index(from, bk, Color::White);
                        if values[p] == DRAW {
                            values[p] = Value::Win(ply + 1).raw();
                            next.push(p);
                        }
                    }
                }
            }
            frontier = next;
            ply += 1;
        }
        values
    }

    /// The placement of a position of this game, checked.
    fn locate(&self, pos: &Position) -> Result<(Square, Square), CoordError> {
        let (wk, bk) = kings_of(pos)?;
        let b = &pos.board;
        if b.by_piece(Piece::new(Color::White, Role::Pawn)) != self.white_pawns
            || b.by_piece(Piece::new(Color::Black, Role::Pawn)) != self.black_pawns
        {
            return Err(CoordError::OtherPawns);
        }
        if !self.is_legal(wk, bk, pos.turn) {
            return Err(CoordError::Illegal);
        }
        Ok((wk, bk))
    }

    /// The value of a position of this game for the side to move.
    pub fn value(&self, pos: &Position) -> Result<Value, CoordError> {
        let (wk, bk) = self.locate(pos)?;
        Ok(self
            .value_of(wk, bk, pos.turn)
            .expect("a legal placement has a value"))
    }

    /// Every legal COORD move with the value of the position after it for the opponent, best
    /// for the side to move first, ties in UCI order (as [`zermelo_chess::probe::moves`]).
    /// A capture of a black pawn ends the game: Black's value after it is `Loss(0)`.
    pub fn moves(&self, pos: &Position) -> Result<Vec<(Move, Value)>, CoordError> {
        let (wk, bk) = self.locate(pos)?;
        let mut out = Vec::new();
        let king_move = |from: Square, to: Square, capture: Option<Role>| Move {
            role: Role::King,
            from,
            to,
            capture,
            promotion: None,
            en_passant: false,
        };
        match pos.turn {
            Color::White => {
                for to in self.white_targets(wk, bk) {
                    if self.black_pawns.contains(to) {
                        out.push((king_move(wk, to, Some(Role::Pawn)), Value::Loss(0)));
                    } else {
                        let v = self.value_of(to, bk, Color::Black).expect("a legal move");
                        out.push((king_move(wk, to, None), v));
                    }
                }
            }
            Color::Black => {
                for to in self.black_targets(wk, bk) {
                    let v = self.value_of(wk, to, Color::White).expect("a legal move");
                    out.push((king_move(bk, to, None), v));
                }
            }
        }
        out.sort_by(|a, b| {
            b.1.after_move()
                .cmp(&a.1.after_move())
                .then_with(|| a.0.uci().cmp(&b.0.uci()))
        });
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LASKER_REICHHELM: &str = "8/k7/3p4/p2P1p2/P2P1P2/8/8/K7 w - - 0 1";

    fn pos(fen: &str) -> Position {
        fen.parse().unwrap_or_else(|e| panic!("{fen}: {e}"))
    }

    #[test]
    fn lasker_reichhelm_only_kb1_wins() {
        let p = pos(LASKER_REICHHELM);
        let game = CoordGame::new(&p).unwrap();
        assert!(matches!(game.value(&p).unwrap(), Value::Win(_)));
        let moves = game.moves(&p).unwrap();
        let by_uci = |uci: &str| moves.iter().find(|(m, _)| m.uci() == uci).unwrap().1;
        assert_eq!(moves.len(), 3, "{moves:?}");
        assert!(matches!(by_uci("a1b1"), Value::Loss(_)), "{moves:?}");
        assert_eq!(by_uci("a1a2"), Value::Draw);
        assert_eq!(by_uci("a1b2"), Value::Draw);
        assert_eq!(moves[0].0.uci(), "a1b1");
        assert_eq!(game.value(&p).unwrap(), by_uci("a1b1").after_move());
        let black = pos("8/k7/3p4/p2P1p2/P2P1P2/8/8/K7 b - - 0 1");
        assert_eq!(game.value(&black).unwrap(), Value::Draw);
    }

    #[test]
    fn a_capture_on_hand_is_a_win_in_one_and_black_never_wins() {
        // White's king next to the undefended pawn f5, Black's king far away.
        let p = pos("k7/8/8/5p2/4K3/8/8/8 w - - 0 1");
        let game = CoordGame::new(&p).unwrap();
        assert_eq!(game.value(&p).unwrap(), Value::Win(1));
        let moves = game.moves(&p).unwrap();
        assert_eq!(moves[0].0.uci(), "e4f5");
        assert_eq!(moves[0].0.capture, Some(Role::Pawn));
        assert_eq!(moves[0].1, Value::Loss(0));
        for (i, &v) in game.values().iter().enumerate() {
            let turn = if i < 4096 { Color::White } else { Color::Black };
            match (turn, Value::from_raw(v)) {
                (Color::White, Some(Value::Loss(_))) | (Color::Black, Some(Value::Win(_))) => {
                    panic!("index {i}: Black wins")
                }
                _ => {}
            }
        }
    }

    #[test]
    fn refuses_pieces_other_than_kings_and_pawns() {
        let p = pos("4k3/8/8/8/8/8/4P3/4K1N1 w - - 0 1");
        let e = CoordGame::new(&p).unwrap_err();
        assert_eq!(
            e.to_string(),
            "COORD is played with kings and pawns only; this position has a knight on g1"
        );
    }

    /// An independent reference: squares as (file, rank), legality and moves written out from
    /// the rules, values by iterating "value = best over moves" from all draws until nothing
    /// changes (after k rounds every position won or lost within k plies has its exact value).
    mod naive {
        use zermelo_chess::Value;

        pub struct Game {
            pub white: Vec<(i8, i8)>,
            pub black: Vec<(i8, i8)>,
        }

        fn near(a: (i8, i8), b: (i8, i8)) -> bool {
            a != b && (a.0 - b.0).abs() <= 1 && (a.1 - b.1).abs() <= 1
        }

        impl Game {
            fn attacked_by_white(&self, s: (i8, i8)) -> bool {
                self.white
                    .iter()
                    .any(|p| s.1 == p.1 + 1 && (s.0 - p.0).abs() == 1)
            }
            fn attacked_by_black(&self, s: (i8, i8)) -> bool {
                self.black
                    .iter()
                    .any(|p| s.1 == p.1 - 1 && (s.0 - p.0).abs() == 1)
            }
            fn pawn(&self, s: (i8, i8)) -> bool {
                self.white.contains(&s) || self.black.contains(&s)
            }
            pub fn legal(&self, wk: (i8, i8), bk: (i8, i8), white_to_move: bool) -> bool {
                wk != bk
                    && !self.pawn(wk)
                    && !self.pawn(bk)
                    && !near(wk, bk)
                    && if white_to_move {
                        !self.attacked_by_white(bk)
                    } else {
                        !self.attacked_by_black(wk)
                    }
            }
            fn steps(k: (i8, i8)) -> Vec<(i8, i8)> {
                let mut v = Vec::new();
                for df in -1..=1 {
                    for dr in -1..=1 {
                        let s = (k.0 + df, k.1 + dr);
                        if (df, dr) != (0, 0) && (0..8).contains(&s.0) && (0..8).contains(&s.1) {
                            v.push(s);
                        }
                    }
                }
                v
            }

            /// Values by `[white to move][wk file][wk rank][bk file][bk rank]`, `None` if illegal.
            pub fn values(&self) -> Vec<Option<Value>> {
                let idx = |w: bool, wk: (i8, i8), bk: (i8, i8)| {
                    (!w as usize) * 4096
                        + (wk.1 as usize * 8 + wk.0 as usize) * 64
                        + (bk.1 as usize * 8 + bk.0 as usize)
                };
                let squares: Vec<(i8, i8)> = (0..64).map(|i| (i % 8, i / 8)).collect();
                let mut v: Vec<Option<Value>> = vec![None; 8192];
                for &w in &[true, false] {
                    for &wk in &squares {
                        for &bk in &squares {
                            if self.legal(wk, bk, w) {
                                v[idx(w, wk, bk)] = Some(Value::Draw);
                            }
                        }
                    }
                }
                loop {
                    let mut next = v.clone();
                    for &w in &[true, false] {
                        for &wk in &squares {
                            for &bk in &squares {
                                if v[idx(w, wk, bk)].is_none() {
                                    continue;
                                }
                                let mut best: Option<Value> = None;
                                let mover = if w { wk } else { bk };
                                let other = if w { bk } else { wk };
                                for to in Self::steps(mover) {
                                    if near(to, other) {
                                        continue;
                                    }
                                    let after = if w {
                                        if self.white.contains(&to) || self.attacked_by_black(to) {
                                            continue;
                                        }
                                        if self.black.contains(&to) {
                                            Value::Win(1)
                                        } else {
                                            v[idx(false, to, bk)].expect("legal").after_move()
                                        }
                                    } else {
                                        if self.pawn(to) || self.attacked_by_white(to) {
                                            continue;
                                        }
                                        v[idx(true, wk, to)].expect("legal").after_move()
                                    };
                                    best = Some(best.map_or(after, |b| b.max(after)));
                                }
                                next[idx(w, wk, bk)] = Some(best.unwrap_or(Value::Draw));
                            }
                        }
                    }
                    if next == v {
                        return v;
                    }
                    v = next;
                }
            }
        }
    }

    fn coords(b: Bitboard) -> Vec<(i8, i8)> {
        b.into_iter().map(|s| (s.file() as i8, s.rank() as i8)).collect()
    }

    fn compare_with_naive(game: &CoordGame) -> usize {
        let reference = naive::Game {
            white: coords(game.white_pawns()),
            black: coords(game.black_pawns()),
        }
        .values();
        let mut decided = 0;
        for (i, (&raw, want)) in game.values().iter().zip(&reference).enumerate() {
            assert_eq!(
                Value::from_raw(raw),
                *want,
                "index {i} (wk {:?}, bk {:?}, {})",
                Square::new(((i / 64) % 64) as u8),
                Square::new((i % 64) as u8),
                if i < 4096 { "white" } else { "black" }
            );
            decided += matches!(want, Some(Value::Win(_) | Value::Loss(_))) as usize;
        }
        decided
    }

    #[test]
    fn retrograde_agrees_with_naive_fixed_point() {
        let fens = [
            LASKER_REICHHELM,
            // Blocked centre pawns.
            "k7/8/8/4p3/4P3/8/8/K7 w - - 0 1",
            // A chain and a lone pawn.
            "k7/8/2p5/2Pp4/3P4/6p1/8/K7 w - - 0 1",
            // No black pawn: nothing to win.
            "k7/8/8/8/3P4/8/8/K7 w - - 0 1",
            // Pawns on the edges and the seventh/second ranks.
            "k7/p6P/8/8/8/8/P6p/7K w - - 0 1",
        ];
        for fen in fens {
            let game = CoordGame::new(&pos(fen)).unwrap();
            let decided = compare_with_naive(&game);
            if fen == "k7/8/8/8/3P4/8/8/K7 w - - 0 1" {
                assert_eq!(decided, 0);
            } else {
                assert!(decided > 0, "{fen}: nothing decided");
            }
        }
    }

    #[test]
    fn retrograde_agrees_with_naive_fixed_point_on_random_pawns() {
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..6 {
            let (mut white, mut black) = (Bitboard::EMPTY, Bitboard::EMPTY);
            for k in 0..(2 + next() % 4) {
                let sq = Square::new(8 + (next() % 48) as u8);
                if !(white | black).contains(sq) {
                    if k % 2 == 0 {
                        white |= sq.bb();
                    } else {
                        black |= sq.bb();
                    }
                }
            }
            compare_with_naive(&CoordGame::with_pawns(white, black));
        }
    }
}
