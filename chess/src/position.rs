//! Boards, positions and moves.

use crate::types::{Bitboard, Color, Piece, Role, Square};

/// Where the men stand.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug)]
pub struct Board {
    by_color: [Bitboard; 2],
    by_role: [Bitboard; 6],
}

impl Board {
    pub const fn empty() -> Board {
        Board {
            by_color: [Bitboard::EMPTY; 2],
            by_role: [Bitboard::EMPTY; 6],
        }
    }

    #[inline]
    pub const fn by_color(&self, c: Color) -> Bitboard {
        self.by_color[c as usize]
    }

    #[inline]
    pub const fn by_role(&self, r: Role) -> Bitboard {
        self.by_role[r as usize]
    }

    #[inline]
    pub const fn by_piece(&self, p: Piece) -> Bitboard {
        Bitboard(self.by_color[p.color as usize].0 & self.by_role[p.role as usize].0)
    }

    #[inline]
    pub const fn occupied(&self) -> Bitboard {
        Bitboard(self.by_color[0].0 | self.by_color[1].0)
    }

    /// The square of `c`'s king, if it has one.
    #[inline]
    pub fn king_of(&self, c: Color) -> Option<Square> {
        (self.by_color(c) & self.by_role(Role::King)).first()
    }

    pub fn piece_at(&self, sq: Square) -> Option<Piece> {
        let color = if self.by_color[0].contains(sq) {
            Color::White
        } else if self.by_color[1].contains(sq) {
            Color::Black
        } else {
            return None;
        };
        let role = Role::ALL
            .into_iter()
            .find(|&r| self.by_role[r as usize].contains(sq))?;
        Some(Piece { color, role })
    }

    /// Puts `p` on `sq`, replacing whatever stood there.
    #[inline]
    pub fn set(&mut self, sq: Square, p: Piece) {
        self.remove(sq);
        self.by_color[p.color as usize] |= sq.bb();
        self.by_role[p.role as usize] |= sq.bb();
    }

    /// Puts `p` on `sq`, which must be empty.
    #[inline]
    pub fn put(&mut self, sq: Square, p: Piece) {
        debug_assert!(!self.occupied().contains(sq));
        self.by_color[p.color as usize] |= sq.bb();
        self.by_role[p.role as usize] |= sq.bb();
    }

    /// Empties `sq`.
    #[inline]
    pub fn remove(&mut self, sq: Square) {
        let m = !sq.bb();
        for b in self.by_color.iter_mut() {
            *b &= m;
        }
        for b in self.by_role.iter_mut() {
            *b &= m;
        }
    }

    /// Moves the man on `from` to the empty square `to` (no capture).
    #[inline]
    pub fn shift(&mut self, from: Square, to: Square, p: Piece) {
        let m = from.bb() | to.bb();
        self.by_color[p.color as usize] ^= m;
        self.by_role[p.role as usize] ^= m;
    }

    /// Every man with its square, a1 first.
    pub fn pieces(&self) -> impl Iterator<Item = (Square, Piece)> + '_ {
        self.occupied()
            .into_iter()
            .map(move |sq| (sq, self.piece_at(sq).expect("occupied square")))
    }

    /// The board mirrored a <-> h.
    pub fn flip_file(&self) -> Board {
        Board {
            by_color: self.by_color.map(Bitboard::flip_file),
            by_role: self.by_role.map(Bitboard::flip_file),
        }
    }

    /// The board mirrored 1 <-> 8 with the colours swapped.
    pub fn flip_colors(&self) -> Board {
        Board {
            by_color: [self.by_color[1].flip_rank(), self.by_color[0].flip_rank()],
            by_role: self.by_role.map(Bitboard::flip_rank),
        }
    }

    /// Applies a map of bitboards (a symmetry of the board) to every man.
    #[inline]
    pub fn map(&self, f: impl Fn(Bitboard) -> Bitboard) -> Board {
        Board {
            by_color: self.by_color.map(&f),
            by_role: self.by_role.map(&f),
        }
    }

    /// Applies a square map to every man.
    pub fn transform(&self, f: impl Fn(Square) -> Square) -> Board {
        let mut b = Board::empty();
        for (sq, p) in self.pieces() {
            b.set(f(sq), p);
        }
        b
    }
}

/// A position: board, side to move and, when one is possible, the en-passant square.
///
/// Tables hold no castling rights; FEN with castling rights is refused by the parser.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Position {
    pub board: Board,
    pub turn: Color,
    /// The square a pawn may capture onto en passant, set only when such a capture is legal.
    pub ep_square: Option<Square>,
}

impl Position {
    pub const fn new(board: Board, turn: Color) -> Position {
        Position {
            board,
            turn,
            ep_square: None,
        }
    }

    /// The same position with colours swapped and the board mirrored 1 <-> 8.
    pub fn flip_colors(&self) -> Position {
        Position {
            board: self.board.flip_colors(),
            turn: self.turn.other(),
            ep_square: self.ep_square.map(Square::flip_rank),
        }
    }

    /// The same position mirrored a <-> h.
    pub fn flip_file(&self) -> Position {
        Position {
            board: self.board.flip_file(),
            turn: self.turn,
            ep_square: self.ep_square.map(Square::flip_file),
        }
    }
}

/// A move.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Move {
    pub role: Role,
    pub from: Square,
    pub to: Square,
    /// The role taken, if any (a pawn for en passant).
    pub capture: Option<Role>,
    pub promotion: Option<Role>,
    pub en_passant: bool,
}

impl Move {
    /// True if the move leaves its slice: a capture or any pawn move.
    #[inline]
    pub const fn leaves_slice(&self) -> bool {
        self.capture.is_some() || matches!(self.role, Role::Pawn)
    }

    /// UCI notation: `e7e8q`.
    pub fn uci(&self) -> String {
        let mut s = format!("{}{}", self.from, self.to);
        if let Some(p) = self.promotion {
            s.push(p.lower());
        }
        s
    }
}
