//! Legal moves, checks and the legality of positions.
//!
//! Moves are generated fully legal in one pass, with a check mask (the squares a non-king move
//! must land on to answer a check) and a pin mask (the men that may only move along the line
//! to their king). En passant, the one move whose legality those masks do not capture (two men
//! leave the board's lines at once), is made on the occupancy bitboard and tested. There is no
//! castling: tables hold none.
//!
//! ```
//! use zermelo_chess::Position;
//! let pos: Position = "4k3/8/8/8/8/8/4P3/4K3 w - - 0 1".parse().unwrap();
//! assert_eq!(pos.legal_moves().len(), 4 + 2); // Kd1 Kd2 Kf1 Kf2, e3 e4
//! assert!(!pos.is_check());
//! ```

use std::fmt;
use std::mem::MaybeUninit;
use std::ops::Deref;

use crate::attacks::{
    between, bishop_attacks, king_attacks, knight_attacks, pawn_attacks, pawn_attacks_all, ray, rook_attacks,
};
use crate::position::{Board, Move, Position};
use crate::types::{Bitboard, Color, Piece, Role, Square};

/// Why a position cannot be in a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IllegalPosition {
    #[error("{} has no king", .0.name())]
    MissingKing(Color),
    #[error("{} has {count} kings", .color.name())]
    TooManyKings { color: Color, count: u32 },
    #[error("pawn on the first or last rank ({0})")]
    PawnOnBackrank(Square),
    #[error("the kings are adjacent")]
    AdjacentKings,
    #[error("the side not to move ({}) is in check", .0.name())]
    OppositeCheck(Color),
    #[error("en-passant square {0} is not possible here")]
    ImpossibleEnPassant(Square),
}

/// A fixed-capacity list of moves on the stack: no heap allocation.
///
/// 256 is above the most legal moves any chess position has (218).
pub struct MoveList {
    len: usize,
    moves: [MaybeUninit<Move>; MoveList::CAPACITY],
}

impl MoveList {
    pub const CAPACITY: usize = 256;

    #[inline]
    pub const fn new() -> MoveList {
        MoveList {
            len: 0,
            moves: [MaybeUninit::uninit(); MoveList::CAPACITY],
        }
    }

    /// Appends a move.
    ///
    /// # Panics
    /// If the list already holds [`MoveList::CAPACITY`] moves.
    #[inline]
    pub fn push(&mut self, m: Move) {
        self.moves[self.len] = MaybeUninit::new(m);
        self.len += 1;
    }

    #[inline]
    pub fn clear(&mut self) {
        self.len = 0;
    }

    #[inline]
    pub fn as_slice(&self) -> &[Move] {
        // Safety: the first `len` elements were written by `push` (the only place `len` grows)
        // and `Move` is `Copy`, so there is nothing to drop. Leaving the array uninitialised
        // instead of filling 256 moves with a placeholder saves the 1.5 KiB memset that would
        // otherwise dominate move generation in few-man positions (measured: `legal_moves`
        // 85 ns instead of 195 ns a call, over the positions of KRPvKR, KPvK and perft
        // position 3 trees).
        unsafe { std::slice::from_raw_parts(self.moves.as_ptr().cast::<Move>(), self.len) }
    }
}

impl Default for MoveList {
    fn default() -> MoveList {
        MoveList::new()
    }
}

impl Deref for MoveList {
    type Target = [Move];
    #[inline]
    fn deref(&self) -> &[Move] {
        self.as_slice()
    }
}

impl Clone for MoveList {
    fn clone(&self) -> MoveList {
        let mut list = MoveList::new();
        list.moves[..self.len].copy_from_slice(&self.moves[..self.len]);
        list.len = self.len;
        list
    }
}

impl fmt::Debug for MoveList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a> IntoIterator for &'a MoveList {
    type Item = &'a Move;
    type IntoIter = std::slice::Iter<'a, Move>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

/// The role of the man on `sq`, if any.
#[inline]
fn role_on(board: &Board, sq: Square) -> Option<Role> {
    if !board.occupied().contains(sq) {
        return None;
    }
    Role::ALL.into_iter().find(|&r| board.by_role(r).contains(sq))
}

/// The square one step forward for `color`.
#[inline]
fn forward(color: Color, sq: Square) -> Square {
    match color {
        Color::White => Square::new(sq.u8() + 8),
        Color::Black => Square::new(sq.u8() - 8),
    }
}

impl Position {
    /// The men of `by` standing on `occupied` that attack `sq`, with sliders blocked by
    /// `occupied`. Pass an occupancy with a man removed to see through it (and not count it).
    #[inline]
    pub fn attackers_to(&self, sq: Square, by: Color, occupied: Bitboard) -> Bitboard {
        let b = &self.board;
        let queens = b.by_role(Role::Queen);
        let attackers = (king_attacks(sq) & b.by_role(Role::King))
            | (knight_attacks(sq) & b.by_role(Role::Knight))
            | (pawn_attacks(by.other(), sq) & b.by_role(Role::Pawn))
            | (rook_attacks(sq, occupied) & (b.by_role(Role::Rook) | queens))
            | (bishop_attacks(sq, occupied) & (b.by_role(Role::Bishop) | queens));
        attackers & b.by_color(by) & occupied
    }

    /// The men giving check to the side to move (empty if it has no king).
    #[inline]
    pub fn checkers(&self) -> Bitboard {
        match self.board.king_of(self.turn) {
            Some(k) => self.attackers_to(k, self.turn.other(), self.board.occupied()),
            None => Bitboard::EMPTY,
        }
    }

    #[inline]
    pub fn is_check(&self) -> bool {
        self.checkers().any()
    }

    /// The side to move is in check and has no legal move.
    pub fn is_checkmate(&self) -> bool {
        self.is_check() && self.legal_moves().is_empty()
    }

    /// The side to move is not in check and has no legal move.
    pub fn is_stalemate(&self) -> bool {
        !self.is_check() && self.legal_moves().is_empty()
    }

    /// All legal moves. Promotions come as four moves (Q, R, B, N); en passant only when
    /// `ep_square` is set; never castling. The position should pass [`Position::validate`]
    /// (a side to move without a king gets no moves; a pawn on a back rank may panic).
    pub fn legal_moves(&self) -> MoveList {
        let mut list = MoveList::new();
        self.generate(&mut list);
        list
    }

    fn generate(&self, list: &mut MoveList) {
        let us = self.turn;
        let them = us.other();
        let b = &self.board;
        let Some(king) = b.king_of(us) else { return };
        let ours = b.by_color(us);
        let theirs = b.by_color(them);
        let occupied = ours | theirs;

        // King moves: to squares not attacked once the king has left its square (so a slider
        // checking along a line also covers the square behind the king).
        let danger = self.attacked_squares(them, occupied.without(king));
        for to in king_attacks(king) & !ours & !danger {
            list.push(Move {
                role: Role::King,
                from: king,
                to,
                capture: role_on(b, to),
                promotion: None,
                en_passant: false,
            });
        }

        if let Some(ep) = self.ep_square {
            for from in self.ep_captures(ep) {
                list.push(Move {
                    role: Role::Pawn,
                    from,
                    to: ep,
                    capture: Some(Role::Pawn),
                    promotion: None,
                    en_passant: true,
                });
            }
        }

        let checkers = self.attackers_to(king, them, occupied);
        if checkers.count() > 1 {
            return;
        }
        let target = match checkers.first() {
            Some(checker) => between(king, checker).with(checker),
            None => Bitboard::ALL,
        } & !ours;

        // Men pinned to the king: exactly one man, ours, between the king and an enemy slider.
        let queens = b.by_role(Role::Queen);
        let snipers = ((rook_attacks(king, Bitboard::EMPTY) & (b.by_role(Role::Rook) | queens))
            | (bishop_attacks(king, Bitboard::EMPTY) & (b.by_role(Role::Bishop) | queens)))
            & theirs;
        let mut pinned = Bitboard::EMPTY;
        for sniper in snipers {
            let blockers = between(king, sniper) & occupied;
            if blockers.count() == 1 {
                pinned |= blockers & ours;
            }
        }

        let knights = b.by_role(Role::Knight) & ours & !pinned;
        for from in knights {
            self.push_targets(list, Role::Knight, from, knight_attacks(from) & target);
        }
        for role in [Role::Bishop, Role::Rook, Role::Queen] {
            for from in b.by_role(role) & ours {
                let mut to = match role {
                    Role::Bishop => bishop_attacks(from, occupied),
                    Role::Rook => rook_attacks(from, occupied),
                    _ => bishop_attacks(from, occupied) | rook_attacks(from, occupied),
                } & target;
                if pinned.contains(from) {
                    to &= ray(king, from);
                }
                self.push_targets(list, role, from, to);
            }
        }

        let empty = !occupied;
        for from in b.by_role(Role::Pawn) & ours {
            let allowed = if pinned.contains(from) {
                target & ray(king, from)
            } else {
                target
            };
            for to in pawn_attacks(us, from) & theirs & allowed {
                push_pawn_move(list, us, from, to, role_on(b, to));
            }
            let one = forward(us, from);
            if empty.contains(one) {
                if allowed.contains(one) {
                    push_pawn_move(list, us, from, one, None);
                }
                if from.relative_rank(us) == 1 {
                    let two = forward(us, one);
                    if empty.contains(two) && allowed.contains(two) {
                        push_pawn_move(list, us, from, two, None);
                    }
                }
            }
        }
    }

    #[inline]
    fn push_targets(&self, list: &mut MoveList, role: Role, from: Square, targets: Bitboard) {
        for to in targets {
            list.push(Move {
                role,
                from,
                to,
                capture: role_on(&self.board, to),
                promotion: None,
                en_passant: false,
            });
        }
    }

    /// Every square `by` attacks, with sliders blocked by `occupied`.
    #[inline]
    fn attacked_squares(&self, by: Color, occupied: Bitboard) -> Bitboard {
        let b = &self.board;
        let men = b.by_color(by);
        let queens = b.by_role(Role::Queen);
        let mut attacked = pawn_attacks_all(by, b.by_role(Role::Pawn) & men);
        for sq in b.by_role(Role::King) & men {
            attacked |= king_attacks(sq);
        }
        for sq in b.by_role(Role::Knight) & men {
            attacked |= knight_attacks(sq);
        }
        for sq in (b.by_role(Role::Rook) | queens) & men {
            attacked |= rook_attacks(sq, occupied);
        }
        for sq in (b.by_role(Role::Bishop) | queens) & men {
            attacked |= bishop_attacks(sq, occupied);
        }
        attacked
    }

    /// The pawns of the side to move that can legally capture en passant onto `ep`, as if
    /// `ep` were the en-passant square (it is not checked against `self.ep_square`). Empty if
    /// no enemy pawn stands in front of `ep` or `ep` is occupied.
    pub fn ep_captures(&self, ep: Square) -> Bitboard {
        let us = self.turn;
        let them = us.other();
        let b = &self.board;
        let Some(king) = b.king_of(us) else {
            return Bitboard::EMPTY;
        };
        if ep.relative_rank(us) != 5 {
            return Bitboard::EMPTY;
        }
        let victim = forward(them, ep);
        let occupied = b.occupied();
        if occupied.contains(ep) || !(b.by_piece(Piece::new(them, Role::Pawn)).contains(victim)) {
            return Bitboard::EMPTY;
        }
        let mut legal = Bitboard::EMPTY;
        for from in pawn_attacks(them, ep) & b.by_piece(Piece::new(us, Role::Pawn)) {
            // Make the capture on the occupancy and look at the king: this covers check
            // evasion, pins and the rank opened by both pawns leaving it at once.
            let after = (occupied ^ from.bb() ^ victim.bb()) | ep.bb();
            if self.attackers_to(king, them, after).is_empty() {
                legal |= from.bb();
            }
        }
        legal
    }

    /// The position after `m`, which must be legal here. The turn passes; after a double
    /// pawn push the en-passant square is set only if the opponent can legally capture.
    pub fn play(&self, m: &Move) -> Position {
        let us = self.turn;
        let mut board = self.board;
        if m.en_passant {
            board.remove(Square::from_coords(m.to.file(), m.from.rank()));
        } else if m.capture.is_some() {
            board.remove(m.to);
        }
        match m.promotion {
            Some(role) => {
                board.remove(m.from);
                board.set(m.to, Piece::new(us, role));
            }
            None => board.shift(m.from, m.to, Piece::new(us, m.role)),
        }
        let mut after = Position {
            board,
            turn: us.other(),
            ep_square: None,
        };
        if m.role == Role::Pawn && m.from.u8().abs_diff(m.to.u8()) == 16 {
            let ep = Square::new((m.from.u8() + m.to.u8()) / 2);
            if after.ep_captures(ep).any() {
                after.ep_square = Some(ep);
            }
        }
        after
    }

    /// Checks that the position may stand in a table: one king a side, no pawn on the first
    /// or last rank, kings apart, the side not to move not in check, and a possible
    /// en-passant square. The side to move may be in check, by any number of men.
    pub fn validate(&self) -> Result<(), IllegalPosition> {
        let b = &self.board;
        for color in Color::ALL {
            match (b.by_color(color) & b.by_role(Role::King)).count() {
                0 => return Err(IllegalPosition::MissingKing(color)),
                1 => {}
                count => return Err(IllegalPosition::TooManyKings { color, count }),
            }
        }
        if let Some(sq) = (b.by_role(Role::Pawn) & Bitboard::BACKRANKS).first() {
            return Err(IllegalPosition::PawnOnBackrank(sq));
        }
        let (Some(white_king), Some(black_king)) = (b.king_of(Color::White), b.king_of(Color::Black)) else {
            unreachable!("both kings were counted above");
        };
        if king_attacks(white_king).contains(black_king) {
            return Err(IllegalPosition::AdjacentKings);
        }
        let them = self.turn.other();
        let their_king = if them == Color::White {
            white_king
        } else {
            black_king
        };
        if self.attackers_to(their_king, self.turn, b.occupied()).any() {
            return Err(IllegalPosition::OppositeCheck(them));
        }
        if let Some(ep) = self.ep_square {
            // The pawn that just moved two squares stands in front of `ep`, and passed over
            // `ep` from the empty square behind it.
            let possible = ep.relative_rank(self.turn) == 5
                && b.by_piece(Piece::new(them, Role::Pawn))
                    .contains(forward(them, ep))
                && !b.occupied().contains(ep)
                && !b.occupied().contains(forward(self.turn, ep));
            if !possible {
                return Err(IllegalPosition::ImpossibleEnPassant(ep));
            }
        }
        Ok(())
    }
}

#[inline]
fn push_pawn_move(list: &mut MoveList, us: Color, from: Square, to: Square, capture: Option<Role>) {
    if to.relative_rank(us) == 7 {
        for promotion in Role::PROMOTIONS {
            list.push(Move {
                role: Role::Pawn,
                from,
                to,
                capture,
                promotion: Some(promotion),
                en_passant: false,
            });
        }
    } else {
        list.push(Move {
            role: Role::Pawn,
            from,
            to,
            capture,
            promotion: None,
            en_passant: false,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attacks::attacks;

    fn pos(fen: &str) -> Position {
        Position::from_fen(fen).unwrap_or_else(|e| panic!("{fen}: {e}"))
    }

    fn perft(pos: &Position, depth: u32) -> u64 {
        let moves = pos.legal_moves();
        if depth == 1 {
            return moves.len() as u64;
        }
        moves.iter().map(|m| perft(&pos.play(m), depth - 1)).sum()
    }

    fn check_perft(fen: &str, expected: &[u64]) {
        let p = pos(fen);
        for (depth, &nodes) in (1..).zip(expected) {
            assert_eq!(perft(&p, depth), nodes, "{fen} depth {depth}");
        }
        // The colour-flipped and the a-h mirrored positions have the same trees.
        let depth = expected.len().min(4) as u32;
        let nodes = expected[depth as usize - 1];
        assert_eq!(
            perft(&p.flip_colors(), depth),
            nodes,
            "{fen} flipped, depth {depth}"
        );
        assert_eq!(
            perft(&p.flip_file(), depth),
            nodes,
            "{fen} mirrored, depth {depth}"
        );
    }

    /// Chessprogramming wiki, perft results, "Position 3".
    #[test]
    fn perft_cpw_position_3() {
        check_perft(
            "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1",
            &[14, 191, 2812, 43238, 674624, 11030083],
        );
    }

    /// Martin Sedlak's perft suite (TalkChess), the positions without castling.
    #[test]
    fn perft_sedlak_suite() {
        let cases: &[(&str, u32, u64)] = &[
            // illegal ep move #1 and #2
            ("3k4/3p4/8/K1P4r/8/8/8/8 b - - 0 1", 6, 1134888),
            ("8/8/4k3/8/2p5/8/B2P2K1/8 w - - 0 1", 6, 1015133),
            // ep capture checks opponent
            ("8/8/1k6/2b5/2pP4/8/5K2/8 b - d3 0 1", 6, 1440467),
            ("8/5k2/8/2Pp4/2B5/1K6/8/8 w - d6 0 1", 6, 1440467),
            // avoid illegal ep capture
            ("8/5bk1/8/2Pp4/8/1K6/8/8 w - d6 0 1", 6, 824064),
            ("8/8/1k6/8/2pP4/8/5BK1/8 b - d3 0 1", 6, 824064),
            // promote out of check, discovered check, promotions giving check
            ("2K2r2/4P3/8/8/8/8/8/3k4 w - - 0 1", 6, 3821001),
            ("8/8/1P2K3/8/2n5/1q6/8/5k2 b - - 0 1", 5, 1004658),
            ("4k3/1P6/8/8/8/8/K7/8 w - - 0 1", 6, 217342),
            ("8/P1k5/K7/8/8/8/8/8 w - - 0 1", 6, 92683),
            // self stalemate, stalemate and checkmate, double check
            ("K1k5/8/P7/8/8/8/8/8 w - - 0 1", 6, 2217),
            ("8/k1P5/8/1K6/8/8/8/8 w - - 0 1", 7, 567584),
            ("8/8/2k5/5q2/5n2/8/5K2/8 b - - 0 1", 4, 23527),
        ];
        for &(fen, depth, nodes) in cases {
            assert_eq!(perft(&pos(fen), depth), nodes, "{fen} depth {depth}");
        }
    }

    /// Shallow published counts: an ep capture that answers a check, and a king in a corner.
    #[test]
    fn perft_shallow_published() {
        assert_eq!(perft(&pos("8/8/8/2k5/2pP4/8/B7/4K3 b - d3 0 3"), 1), 8);
        assert_eq!(perft(&pos("2r5/3pk3/8/2P5/8/2K5/8/8 w - - 5 4"), 1), 9);
        assert_eq!(perft(&pos("3k4/3p4/8/K1P4r/8/8/8/8 b - - 0 1"), 4), 10138);
        assert_eq!(perft(&pos("8/8/1k6/2b5/2pP4/8/5K2/8 b - d3 0 1"), 4), 13931);
    }

    /// Pseudo-legal moves filtered by playing them and looking at the king: the slow, obvious
    /// generator the fast one must agree with.
    fn naive_legal_moves(pos: &Position) -> Vec<Move> {
        let us = pos.turn;
        let b = &pos.board;
        let occupied = b.occupied();
        let mut moves = Vec::new();
        for (from, piece) in b.pieces().filter(|(_, p)| p.color == us) {
            let mut targets = if piece.role == Role::Pawn {
                let mut t = attacks(piece, from, occupied) & b.by_color(us.other());
                let one = forward(us, from);
                if !occupied.contains(one) {
                    t = t.with(one);
                    if from.relative_rank(us) == 1 && !occupied.contains(forward(us, one)) {
                        t = t.with(forward(us, one));
                    }
                }
                t
            } else {
                attacks(piece, from, occupied) & !b.by_color(us)
            };
            targets &= !b.by_color(us);
            for to in targets {
                let capture = b.piece_at(to).map(|p| p.role);
                let promotions: &[Option<Role>] = if piece.role == Role::Pawn && to.relative_rank(us) == 7 {
                    &[
                        Some(Role::Queen),
                        Some(Role::Rook),
                        Some(Role::Bishop),
                        Some(Role::Knight),
                    ]
                } else {
                    &[None]
                };
                for &promotion in promotions {
                    moves.push(Move {
                        role: piece.role,
                        from,
                        to,
                        capture,
                        promotion,
                        en_passant: false,
                    });
                }
            }
            if piece.role == Role::Pawn {
                if let Some(ep) = pos.ep_square {
                    if pawn_attacks(us, from).contains(ep) {
                        let m = Move {
                            role: Role::Pawn,
                            from,
                            to: ep,
                            capture: Some(Role::Pawn),
                            promotion: None,
                            en_passant: true,
                        };
                        moves.push(m);
                    }
                }
            }
        }
        moves.retain(|m| {
            let after = pos.play(m);
            let king = after.board.king_of(us).unwrap();
            after
                .attackers_to(king, us.other(), after.board.occupied())
                .is_empty()
        });
        moves
    }

    fn sorted(mut moves: Vec<Move>) -> Vec<Move> {
        moves.sort_by_key(|m| (m.from, m.to, m.promotion));
        moves
    }

    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            x
        }
    }

    /// Random legal positions with up to six other men, compared with the naive generator;
    /// also every position one move further on (so en-passant squares from `play` are met).
    #[test]
    fn legal_moves_agree_with_naive_generator_on_random_positions() {
        let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
        let roles = [
            Role::Queen,
            Role::Rook,
            Role::Bishop,
            Role::Knight,
            Role::Pawn,
            Role::Pawn,
        ];
        let mut tested = 0;
        while tested < 3000 {
            let mut board = Board::empty();
            let mut used = Bitboard::EMPTY;
            let mut place = |board: &mut Board, piece: Piece, rng: &mut XorShift| loop {
                let sq = Square::new((rng.next() % 64) as u8);
                let pawn_on_backrank = piece.role == Role::Pawn && Bitboard::BACKRANKS.contains(sq);
                if !used.contains(sq) && !pawn_on_backrank {
                    used = used.with(sq);
                    board.set(sq, piece);
                    break;
                }
            };
            place(&mut board, Piece::new(Color::White, Role::King), &mut rng);
            place(&mut board, Piece::new(Color::Black, Role::King), &mut rng);
            for _ in 0..(rng.next() % 7) {
                let color = Color::from_index((rng.next() % 2) as usize);
                let role = roles[(rng.next() % roles.len() as u64) as usize];
                place(&mut board, Piece::new(color, role), &mut rng);
            }
            let turn = Color::from_index((rng.next() % 2) as usize);
            let p = Position::new(board, turn);
            if p.validate().is_err() {
                continue;
            }
            tested += 1;
            let fast = p.legal_moves();
            assert_eq!(sorted(fast.to_vec()), sorted(naive_legal_moves(&p)), "{p}");
            for m in fast.iter() {
                let q = p.play(m);
                assert_eq!(q.validate(), Ok(()), "{p} {}", m.uci());
                assert_eq!(
                    sorted(q.legal_moves().to_vec()),
                    sorted(naive_legal_moves(&q)),
                    "{q}"
                );
            }
        }
    }

    #[test]
    fn checks_and_checkers() {
        let p = pos("4k3/8/8/8/8/3n4/5p2/r3K3 w - - 0 1");
        assert_eq!(p.checkers().count(), 3);
        assert!(p.is_check());
        let mut moves: Vec<String> = p.legal_moves().iter().map(Move::uci).collect();
        moves.sort();
        assert_eq!(moves, ["e1d2", "e1e2"]);

        let p = pos("4k3/8/8/8/8/8/8/4K3 w - - 0 1");
        assert!(p.checkers().is_empty());
        assert_eq!(p.legal_moves().len(), 5);
    }

    #[test]
    fn mate_and_stalemate() {
        let mate = pos("k1Q5/8/1K6/8/8/8/8/8 b - - 0 1");
        assert!(mate.is_checkmate() && !mate.is_stalemate());
        let stalemate = pos("k7/2Q5/1K6/8/8/8/8/8 b - - 0 1");
        assert!(stalemate.is_stalemate() && !stalemate.is_checkmate());
        let neither = pos("k7/8/1K6/8/8/8/8/2Q5 b - - 0 1");
        assert!(!neither.is_stalemate() && !neither.is_checkmate());
        // A pawn checking from its second rank is legal; the king takes it.
        let pawn_check = pos("7k/8/8/8/8/8/5p2/6K1 w - - 0 1");
        assert_eq!(pawn_check.checkers(), Square::parse("f2").unwrap().bb());
        assert!(pawn_check
            .legal_moves()
            .iter()
            .any(|m| m.uci() == "g1f2" && m.capture == Some(Role::Pawn)));
    }

    #[test]
    fn play_sets_ep_square_only_when_capture_is_legal() {
        // After d7d5 white can take exd6.
        let p = pos("4k3/3p4/8/4P3/8/8/8/4K3 b - - 0 1");
        let m = p
            .legal_moves()
            .iter()
            .copied()
            .find(|m| m.uci() == "d7d5")
            .unwrap();
        let after = p.play(&m);
        assert_eq!(after.ep_square, Square::parse("d6"));
        let ep = after
            .legal_moves()
            .iter()
            .copied()
            .find(|m| m.en_passant)
            .unwrap();
        assert_eq!(ep.uci(), "e5d6");
        let taken = after.play(&ep);
        assert!(taken.board.piece_at(Square::parse("d5").unwrap()).is_none());
        assert_eq!(taken.to_fen(), "4k3/8/3P4/8/8/8/8/4K3 b - - 0 1");

        // No white pawn beside d5: no ep square.
        let p = pos("4k3/3p4/8/8/4P3/8/8/4K3 b - - 0 1");
        let m = p
            .legal_moves()
            .iter()
            .copied()
            .find(|m| m.uci() == "d7d5")
            .unwrap();
        assert_eq!(p.play(&m).ep_square, None);

        // Both pawns would leave the fifth rank, opening it to the rook: no ep square.
        let p = pos("8/3p4/8/r3P2K/8/8/8/4k3 b - - 0 1");
        let m = p
            .legal_moves()
            .iter()
            .copied()
            .find(|m| m.uci() == "d7d5")
            .unwrap();
        let after = p.play(&m);
        assert_eq!(after.ep_square, None);
        assert!(after.legal_moves().iter().all(|m| !m.en_passant));
    }

    #[test]
    fn play_handles_captures_and_promotions() {
        let p = pos("3r2k1/4P3/8/8/8/8/8/4K3 w - - 0 1");
        let moves = p.legal_moves();
        let promotions: Vec<&Move> = moves.iter().filter(|m| m.promotion.is_some()).collect();
        assert_eq!(promotions.len(), 8); // e8 and exd8, four pieces each
        let m = moves.iter().find(|m| m.uci() == "e7d8n").unwrap();
        assert_eq!(m.capture, Some(Role::Rook));
        let after = p.play(m);
        assert_eq!(after.to_fen(), "3N2k1/8/8/8/8/8/8/4K3 b - - 0 1");
    }

    #[test]
    fn validate_rejects_and_accepts() {
        use IllegalPosition::*;
        let raw = |fen: &str| {
            // Build without validation, through a legal FEN of the same board.
            let (board, rest) = fen.split_once(' ').unwrap();
            let turn = if rest.starts_with('w') {
                Color::White
            } else {
                Color::Black
            };
            let mut b = Board::empty();
            for (rank, row) in board.split('/').enumerate() {
                let mut file = 0;
                for c in row.chars() {
                    if let Some(d) = c.to_digit(10) {
                        file += d as u8;
                    } else {
                        b.set(
                            Square::from_coords(file, 7 - rank as u8),
                            Piece::from_char(c).unwrap(),
                        );
                        file += 1;
                    }
                }
            }
            Position::new(b, turn)
        };
        assert_eq!(
            raw("8/8/8/8/8/8/8/4K3 w").validate(),
            Err(MissingKing(Color::Black))
        );
        assert_eq!(
            raw("4k3/8/8/8/8/8/8/K3K3 w").validate(),
            Err(TooManyKings {
                color: Color::White,
                count: 2
            })
        );
        assert_eq!(
            raw("4k2P/8/8/8/8/8/8/4K3 w").validate(),
            Err(PawnOnBackrank(Square::parse("h8").unwrap()))
        );
        assert_eq!(raw("8/8/8/8/8/8/3k4/4K3 w").validate(), Err(AdjacentKings));
        assert_eq!(
            raw("4k3/8/8/8/8/8/8/4R2K w").validate(),
            Err(OppositeCheck(Color::Black))
        );
        assert_eq!(raw("4k3/8/8/8/8/8/8/4R2K b").validate(), Ok(()));
        // Double and triple check of the side to move are fine.
        assert_eq!(raw("4k3/8/8/8/8/3n4/8/r3K3 w").validate(), Ok(()));
        assert_eq!(raw("4k3/8/8/8/8/3n4/5p2/r3K3 w").validate(), Ok(()));

        let mut p = raw("4k3/8/8/3pP3/8/8/8/4K3 w");
        for (ep, ok) in [("d6", true), ("e6", false), ("d3", false), ("c6", false)] {
            p.ep_square = Square::parse(ep);
            let expected = if ok {
                Ok(())
            } else {
                Err(ImpossibleEnPassant(Square::parse(ep).unwrap()))
            };
            assert_eq!(p.validate(), expected, "{ep}");
        }
        let mut blocked = raw("4k3/3n4/8/3pP3/8/8/8/4K3 w");
        blocked.ep_square = Square::parse("d6");
        assert!(blocked.validate().is_err());

        assert_eq!(
            OppositeCheck(Color::Black).to_string(),
            "the side not to move (black) is in check"
        );
        assert_eq!(MissingKing(Color::White).to_string(), "white has no king");
        assert_eq!(
            TooManyKings {
                color: Color::White,
                count: 2
            }
            .to_string(),
            "white has 2 kings"
        );
        assert_eq!(
            ImpossibleEnPassant(Square::parse("e3").unwrap()).to_string(),
            "en-passant square e3 is not possible here"
        );
    }

    #[test]
    fn move_list_basics() {
        let mut list = MoveList::new();
        assert!(list.is_empty());
        let m = Move {
            role: Role::Knight,
            from: Square::parse("b1").unwrap(),
            to: Square::parse("c3").unwrap(),
            capture: None,
            promotion: None,
            en_passant: false,
        };
        for _ in 0..MoveList::CAPACITY {
            list.push(m);
        }
        assert_eq!(list.len(), MoveList::CAPACITY);
        assert!(list.iter().all(|&x| x == m));
        let copy = list.clone();
        assert_eq!(copy.len(), MoveList::CAPACITY);
        list.clear();
        assert_eq!(list.len(), 0);
        assert_eq!((&copy).into_iter().count(), MoveList::CAPACITY);
    }

    #[test]
    #[should_panic]
    fn move_list_overflow_panics() {
        let mut list = MoveList::new();
        let p = pos("4k3/8/8/8/8/8/8/4K3 w - - 0 1");
        let m = p.legal_moves()[0];
        for _ in 0..=MoveList::CAPACITY {
            list.push(m);
        }
    }
}
