//! lichess's tablebase server contract where it goes beyond Zermelo's tables: FENs read as
//! lichess reads them, and the answer for a position no table holds.
//!
//! lichess's server (lila-tablebase, read at a06a88b; its FEN reader is shakmaty 0.30's) takes
//! a FEN whose fields are separated by spaces, `_` or `+`, with only the board required (the
//! rest defaults to `w - - 0 1`), and drops castling rights and an en-passant square the board
//! does not allow. Castling, which tables never hold, is here too: which rights stand, which
//! castling moves are legal, and the rights left after a move; the answer for a position no
//! table holds is in [`crate::partial`].

use zermelo_chess::{Color, FenError, Piece, Position, Role, Square};

/// A castling right: the side and the wing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Castle {
    pub color: Color,
    pub king_side: bool,
}

impl Castle {
    const fn new(color: Color, king_side: bool) -> Castle {
        Castle { color, king_side }
    }

    fn rank(self) -> u8 {
        if self.color == Color::White {
            0
        } else {
            7
        }
    }

    fn king_from(self) -> Square {
        Square::from_coords(4, self.rank())
    }

    fn rook_from(self) -> Square {
        Square::from_coords(if self.king_side { 7 } else { 0 }, self.rank())
    }

    fn king_to(self) -> Square {
        Square::from_coords(if self.king_side { 6 } else { 2 }, self.rank())
    }

    fn rook_to(self) -> Square {
        Square::from_coords(if self.king_side { 5 } else { 3 }, self.rank())
    }

    /// The right stands on `board`: the king and the rook on their first squares.
    fn stands(self, board: &zermelo_chess::Board) -> bool {
        board.piece_at(self.king_from()) == Some(Piece::new(self.color, Role::King))
            && board.piece_at(self.rook_from()) == Some(Piece::new(self.color, Role::Rook))
    }

    /// The move in UCI (the king's two-square move, as lichess writes it) and SAN.
    pub(crate) fn uci(self) -> String {
        format!("{}{}", self.king_from(), self.king_to())
    }
}

/// A FEN as lichess reads it: the position, the castling rights that stand on its board, and
/// the halfmove clock.
#[derive(Clone, Debug)]
pub struct Asked {
    pub pos: Position,
    pub castling: Vec<Castle>,
    pub clock: u16,
}

/// The fields of a FEN as lichess parts them: separated by spaces, `_` or `+`, runs of them
/// counting as one.
pub fn fen_fields(fen: &str) -> Vec<&str> {
    fen.split(|c: char| c.is_ascii_whitespace() || c == '_' || c == '+')
        .filter(|f| !f.is_empty())
        .collect()
}

/// Reads a FEN as lichess does: fields separated by spaces, `_` or `+` (runs of them count as
/// one); only the board is required, the others default to `w - - 0 1`; castling rights whose
/// king or rook is not on its first square, and an en-passant square no pawn could have
/// crossed, are dropped. A FEN that is not a legal position is refused, with why.
pub fn read_fen(fen: &str) -> Result<Asked, String> {
    let invalid = |e: String| format!("invalid FEN: {e}");
    let fields = fen_fields(fen);
    if fields.is_empty() || fields.len() > 6 {
        return Err(invalid(FenError::FieldCount(fields.len()).to_string()));
    }
    let field = |i: usize, default: &'static str| fields.get(i).copied().unwrap_or(default);
    let (board, turn, rights, ep, half, full) = (
        fields[0],
        field(1, "w"),
        field(2, "-"),
        field(3, "-"),
        field(4, "0"),
        field(5, "1"),
    );
    let strict = |ep: &str| Position::from_fen(&format!("{board} {turn} - {ep} {half} {full}"));
    let pos = match strict(ep) {
        Ok(pos) => pos,
        // An en-passant square the board does not allow is dropped, as lichess drops it.
        Err(FenError::Illegal(_)) if ep != "-" => strict("-").map_err(|e| invalid(e.to_string()))?,
        Err(e) => return Err(invalid(e.to_string())),
    };
    // After the board, so that a FEN that is no FEN at all is told so first.
    let rights_ok = rights == "-"
        || rights
            .chars()
            .all(|c| matches!(c, 'K' | 'Q' | 'k' | 'q' | 'A'..='H' | 'a'..='h'));
    if !rights_ok {
        return Err(invalid(FenError::BadCastling(rights.to_string()).to_string()));
    }
    let mut castling = Vec::new();
    if rights != "-" {
        for c in rights.chars() {
            let color = if c.is_ascii_uppercase() {
                Color::White
            } else {
                Color::Black
            };
            let king_side = match c.to_ascii_uppercase() {
                'K' | 'H' => true,
                'Q' | 'A' => false,
                // Another file names a Chess960 rook: no right in standard chess.
                _ => continue,
            };
            let right = Castle::new(color, king_side);
            if right.stands(&pos.board) && !castling.contains(&right) {
                castling.push(right);
            }
        }
    }
    let clock = half.parse::<u16>().unwrap_or(u16::MAX);
    Ok(Asked { pos, castling, clock })
}

/// The castling moves of the side to move that are legal: the right stands, the squares
/// between king and rook are empty, and the king is not in check and does not pass or land on
/// an attacked square.
pub(crate) fn castling_moves(pos: &Position, rights: &[Castle]) -> Vec<Castle> {
    if pos.is_check() {
        return Vec::new();
    }
    let occupied = pos.board.occupied();
    rights
        .iter()
        .copied()
        .filter(|c| c.color == pos.turn && c.stands(&pos.board))
        .filter(|c| {
            let (a, b) = (
                c.king_from().file().min(c.rook_from().file()),
                c.king_from().file().max(c.rook_from().file()),
            );
            let between_empty = (a + 1..b).all(|f| !occupied.contains(Square::from_coords(f, c.rank())));
            let (k, to) = (c.king_from().file(), c.king_to().file());
            let path_safe = (k.min(to)..=k.max(to)).all(|f| {
                pos.attackers_to(Square::from_coords(f, c.rank()), pos.turn.other(), occupied)
                    .is_empty()
            });
            between_empty && path_safe
        })
        .collect()
}

/// The position after castling `c`.
pub(crate) fn castle(pos: &Position, c: Castle) -> Position {
    let mut board = pos.board;
    board.remove(c.king_from());
    board.remove(c.rook_from());
    board.set(c.king_to(), Piece::new(c.color, Role::King));
    board.set(c.rook_to(), Piece::new(c.color, Role::Rook));
    Position::new(board, pos.turn.other())
}

/// The rights that still stand after a move from `from` to `to`: a king's move ends both of
/// its side's, a rook's move from its corner or a capture on it ends that one.
pub(crate) fn rights_after(
    rights: &[Castle],
    mover: Color,
    from: Square,
    to: Square,
    king_moved: bool,
) -> Vec<Castle> {
    rights
        .iter()
        .copied()
        .filter(|c| !(king_moved && c.color == mover))
        .filter(|c| c.rook_from() != from && c.rook_from() != to)
        .collect()
}

/// lichess's category seen from the other side: a loss for one is a win for the other.
pub fn negated(category: &'static str) -> &'static str {
    match category {
        "win" => "loss",
        "loss" => "win",
        "cursed-win" => "blessed-loss",
        "blessed-loss" => "cursed-win",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fens_are_read_as_lichess_reads_them() {
        let board_only = read_fen("8/8/8/8/8/8/4P3/K1k5").unwrap();
        assert_eq!(board_only.pos.turn, Color::White);
        assert_eq!(board_only.clock, 0);
        let plus = read_fen("8/8/8/8/8/8/4P3/K1k5+b++-+-+12+40").unwrap();
        assert_eq!((plus.pos.turn, plus.clock), (Color::Black, 12));
        let under = read_fen("8/8/8/8/8/8/4P3/K1k5_b").unwrap();
        assert_eq!(under.pos.turn, Color::Black);
        // Rights whose king or rook has moved are dropped; those that stand are kept.
        let r = read_fen("4k3/8/8/8/8/8/8/R3K2R w KQkq - 0 1").unwrap();
        assert_eq!(
            r.castling,
            vec![Castle::new(Color::White, true), Castle::new(Color::White, false)]
        );
        assert!(read_fen("8/8/8/8/8/8/4P3/K1k5 w KQkq - 0 1")
            .unwrap()
            .castling
            .is_empty());
        // An en-passant square no pawn crossed is dropped.
        assert_eq!(
            read_fen("4k3/8/8/8/8/8/4P3/4K3 b - e3 0 1")
                .unwrap()
                .pos
                .ep_square,
            None
        );
        for bad in [
            "",
            "8/8/8 w",
            "8/8/8/8/8/8/4P3/K1k5 w - - 0 1 extra",
            "8/8/8/8/8/8/4P3/K1k5 w XY",
        ] {
            assert!(
                read_fen(bad).is_err_and(|e| e.starts_with("invalid FEN")),
                "{bad}"
            );
        }
    }

    #[test]
    fn castling_is_legal_only_through_safe_empty_squares() {
        let moves = |fen: &str| {
            let a = read_fen(fen).unwrap();
            castling_moves(&a.pos, &a.castling)
                .into_iter()
                .map(Castle::uci)
                .collect::<Vec<_>>()
        };
        assert_eq!(moves("4k3/8/8/8/8/8/8/R3K2R w KQ - 0 1"), ["e1g1", "e1c1"]);
        // A black rook on f8 attacks f1: no short castling. On b8 it attacks only b1, which the
        // king does not cross: long castling stands.
        assert_eq!(moves("4kr2/8/8/8/8/8/8/R3K2R w KQ - 0 1"), ["e1c1"]);
        assert_eq!(moves("1r2k3/8/8/8/8/8/8/R3K2R w KQ - 0 1"), ["e1g1", "e1c1"]);
        // In check: none. A man between: not that wing.
        assert!(moves("4k3/8/8/8/8/8/8/R3K1qR w KQ - 0 1").is_empty());
        assert_eq!(moves("4k3/8/8/8/8/8/8/RN2K2R w KQ - 0 1"), ["e1g1"]);
        let after = castle(
            &read_fen("4k3/8/8/8/8/8/8/R3K2R w KQ - 0 1").unwrap().pos,
            Castle::new(Color::White, true),
        );
        assert_eq!(after.to_fen(), "4k3/8/8/8/8/8/8/R4RK1 b - - 0 1");
    }
}
