//! FEN reading and writing.
//!
//! Positions in tables have no castling rights and no move counters: a FEN with castling
//! rights is refused, the counters are optional and ignored, and [`Position::to_fen`] always
//! writes `- ` for castling and `0 1` for the counters. An en-passant square is kept only when
//! an en-passant capture is legal, so equal positions print equal FENs.
//!
//! ```
//! use zermelo_chess::Position;
//! let pos = Position::from_fen("4k3/8/8/3pP3/8/8/8/4K3 w - d6 3 40").unwrap();
//! assert_eq!(pos.to_fen(), "4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 1");
//! ```

use std::fmt;
use std::str::FromStr;

use crate::movegen::IllegalPosition;
use crate::position::{Board, Position};
use crate::types::{Color, Piece, Square};

/// Why a FEN was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FenError {
    #[error("expected 4 to 6 space-separated fields, found {0}")]
    FieldCount(usize),
    #[error("expected 8 ranks in the board field, found {0}")]
    RankCount(usize),
    #[error("rank {rank} of the board field covers {files} files, expected 8")]
    RankLength { rank: u8, files: usize },
    #[error("unexpected character '{0}' in the board field")]
    BadBoardChar(char),
    #[error("side to move must be 'w' or 'b', found '{0}'")]
    BadTurn(String),
    #[error("castling field must be '-', found '{0}'")]
    BadCastling(String),
    #[error("castling rights are not supported (tables hold no castling)")]
    CastlingRights,
    #[error("en-passant field must be '-' or a square, found '{0}'")]
    BadEnPassant(String),
    #[error("move counter must be a non-negative number, found '{0}'")]
    BadCounter(String),
    #[error("illegal position: {0}")]
    Illegal(#[from] IllegalPosition),
}

fn parse_board(field: &str) -> Result<Board, FenError> {
    let rows: Vec<&str> = field.split('/').collect();
    if rows.len() != 8 {
        return Err(FenError::RankCount(rows.len()));
    }
    let mut board = Board::empty();
    for (i, row) in rows.iter().enumerate() {
        let rank = 7 - i as u8;
        let mut files = 0usize;
        for c in row.chars() {
            match c {
                '1'..='8' => files += c as usize - '0' as usize,
                _ => {
                    let piece = Piece::from_char(c).ok_or(FenError::BadBoardChar(c))?;
                    if files < 8 {
                        board.set(Square::from_coords(files as u8, rank), piece);
                    }
                    files += 1;
                }
            }
        }
        if files != 8 {
            return Err(FenError::RankLength {
                rank: rank + 1,
                files,
            });
        }
    }
    Ok(board)
}

impl Position {
    /// Parses and validates a FEN of 4 to 6 fields (the move counters are ignored).
    pub fn from_fen(fen: &str) -> Result<Position, FenError> {
        let fields: Vec<&str> = fen.split_ascii_whitespace().collect();
        if !(4..=6).contains(&fields.len()) {
            return Err(FenError::FieldCount(fields.len()));
        }
        let board = parse_board(fields[0])?;
        let turn = match fields[1] {
            "w" => Color::White,
            "b" => Color::Black,
            other => return Err(FenError::BadTurn(other.to_string())),
        };
        match fields[2] {
            "-" => {}
            rights
                if rights
                    .chars()
                    .all(|c| matches!(c, 'K' | 'Q' | 'k' | 'q' | 'A'..='H' | 'a'..='h')) =>
            {
                return Err(FenError::CastlingRights)
            }
            other => return Err(FenError::BadCastling(other.to_string())),
        }
        let ep_square = match fields[3] {
            "-" => None,
            s => Some(Square::parse(s).ok_or_else(|| FenError::BadEnPassant(s.to_string()))?),
        };
        for counter in &fields[4..] {
            counter
                .parse::<u32>()
                .map_err(|_| FenError::BadCounter(counter.to_string()))?;
        }
        let mut pos = Position {
            board,
            turn,
            ep_square,
        };
        pos.validate()?;
        if let Some(ep) = pos.ep_square {
            if pos.ep_captures(ep).is_empty() {
                pos.ep_square = None;
            }
        }
        Ok(pos)
    }

    /// The FEN of the position, with `-` for castling and `0 1` for the counters.
    pub fn to_fen(&self) -> String {
        let mut s = String::with_capacity(48);
        for rank in (0..8u8).rev() {
            let mut empty = 0;
            for file in 0..8u8 {
                match self.board.piece_at(Square::from_coords(file, rank)) {
                    Some(piece) => {
                        if empty > 0 {
                            s.push((b'0' + empty) as char);
                            empty = 0;
                        }
                        s.push(piece.char());
                    }
                    None => empty += 1,
                }
            }
            if empty > 0 {
                s.push((b'0' + empty) as char);
            }
            if rank > 0 {
                s.push('/');
            }
        }
        s.push(' ');
        s.push(self.turn.char());
        s.push_str(" - ");
        match self.ep_square {
            Some(ep) => s.push_str(&ep.to_string()),
            None => s.push('-'),
        }
        s.push_str(" 0 1");
        s
    }
}

impl FromStr for Position {
    type Err = FenError;
    fn from_str(s: &str) -> Result<Position, FenError> {
        Position::from_fen(s)
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_fen())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Role;

    #[test]
    fn round_trips() {
        for fen in [
            "4k3/8/8/8/8/8/4P3/4K3 w - - 0 1",
            "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1",
            "8/8/1k6/2b5/2pP4/8/5K2/8 b - d3 0 1",
            "8/5k2/8/2Pp4/2B5/1K6/8/8 w - d6 0 1",
            "3N2k1/8/8/8/8/8/8/4K3 b - - 0 1",
            "K1k5/8/P7/8/8/8/8/8 w - - 0 1",
            "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w - - 0 1",
        ] {
            let pos = Position::from_fen(fen).unwrap();
            assert_eq!(pos.to_fen(), fen);
            assert_eq!(pos.to_string(), fen);
            assert_eq!(fen.parse::<Position>().unwrap(), pos);
        }
    }

    #[test]
    fn counters_are_optional_and_ignored() {
        let normal = "4k3/8/8/8/8/8/4P3/4K3 b - - 0 1";
        for fen in [
            "4k3/8/8/8/8/8/4P3/4K3 b - -",
            "4k3/8/8/8/8/8/4P3/4K3 b - - 12",
            "4k3/8/8/8/8/8/4P3/4K3 b - - 7 42",
        ] {
            assert_eq!(Position::from_fen(fen).unwrap().to_fen(), normal);
        }
    }

    #[test]
    fn ep_square_is_normalised() {
        // Possible per validate, but no black pawn can take: dropped.
        let pos = Position::from_fen("4k3/8/8/8/4P3/8/8/4K3 b - e3 0 1").unwrap();
        assert_eq!(pos.ep_square, None);
        assert_eq!(pos.to_fen(), "4k3/8/8/8/4P3/8/8/4K3 b - - 0 1");
        // The capture would expose the king along the rank: dropped.
        let pos = Position::from_fen("8/8/8/r2pP2K/8/8/8/4k3 w - d6 0 1").unwrap();
        assert_eq!(pos.ep_square, None);
        // A legal capture: kept.
        let pos = Position::from_fen("4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 1").unwrap();
        assert_eq!(pos.ep_square, Square::parse("d6"));
    }

    #[test]
    fn board_contents() {
        let pos = Position::from_fen("4k3/8/8/8/8/8/4P3/4K3 w - - 0 1").unwrap();
        let sq = |s| Square::parse(s).unwrap();
        assert_eq!(
            pos.board.piece_at(sq("e2")),
            Some(Piece::new(Color::White, Role::Pawn))
        );
        assert_eq!(
            pos.board.piece_at(sq("e8")),
            Some(Piece::new(Color::Black, Role::King))
        );
        assert_eq!(pos.board.occupied().count(), 3);
        assert_eq!(pos.turn, Color::White);
    }

    #[test]
    fn syntax_errors() {
        let err = |fen: &str| Position::from_fen(fen).unwrap_err();
        assert_eq!(err("4k3/8/8/8/8/8/4P3/4K3 w -"), FenError::FieldCount(3));
        assert_eq!(err("4k3/8/8/8/8/8/4P3/4K3 w - - 0 1 x"), FenError::FieldCount(7));
        assert_eq!(err(""), FenError::FieldCount(0));
        assert_eq!(err("4k3/8/8/8/8/4P3/4K3 w - - 0 1"), FenError::RankCount(7));
        assert_eq!(
            err("4k3/8/8/8/8/8/4P4/4K3 w - - 0 1"),
            FenError::RankLength { rank: 2, files: 9 }
        );
        assert_eq!(
            err("4k3/8/8/8/8/8/4P2/4K3 w - - 0 1"),
            FenError::RankLength { rank: 2, files: 7 }
        );
        assert_eq!(
            err("4k3/8/8/8/8/8/4X3/4K3 w - - 0 1"),
            FenError::BadBoardChar('X')
        );
        assert_eq!(
            err("4k3/8/8/8/8/8/4P3/4K3 x - - 0 1"),
            FenError::BadTurn("x".into())
        );
        assert_eq!(
            err("4k3/8/8/8/8/8/4P3/4K3 w ? - 0 1"),
            FenError::BadCastling("?".into())
        );
        assert_eq!(
            err("4k3/8/8/8/8/8/4P3/4K3 w - e9 0 1"),
            FenError::BadEnPassant("e9".into())
        );
        assert_eq!(
            err("4k3/8/8/8/8/8/4P3/4K3 w - - x 1"),
            FenError::BadCounter("x".into())
        );
        assert_eq!(
            err("4k3/8/8/8/8/8/4P3/4K3 w - - 0 -1"),
            FenError::BadCounter("-1".into())
        );
    }

    #[test]
    fn castling_rights_are_refused() {
        for rights in ["KQkq", "K", "q", "Hh"] {
            let fen = format!("r3k2r/8/8/8/8/8/8/R3K2R w {rights} - 0 1");
            assert_eq!(Position::from_fen(&fen), Err(FenError::CastlingRights));
        }
        assert_eq!(
            FenError::CastlingRights.to_string(),
            "castling rights are not supported (tables hold no castling)"
        );
    }

    #[test]
    fn illegal_positions_are_refused() {
        use IllegalPosition::*;
        let err = |fen: &str| match Position::from_fen(fen) {
            Err(FenError::Illegal(e)) => e,
            other => panic!("{fen}: expected an illegal position, got {other:?}"),
        };
        assert_eq!(err("8/8/8/8/8/8/4P3/4K3 w - - 0 1"), MissingKing(Color::Black));
        assert_eq!(err("4k3/8/8/8/8/8/4P3/8 b - - 0 1"), MissingKing(Color::White));
        assert_eq!(
            err("4k3/8/8/8/8/8/8/K3K3 w - - 0 1"),
            TooManyKings {
                color: Color::White,
                count: 2
            }
        );
        assert_eq!(
            err("k3k3/8/8/8/8/8/8/4K3 w - - 0 1"),
            TooManyKings {
                color: Color::Black,
                count: 2
            }
        );
        assert_eq!(
            err("3Pk3/8/8/8/8/8/8/4K3 b - - 0 1"),
            PawnOnBackrank(Square::parse("d8").unwrap())
        );
        assert_eq!(
            err("4k3/8/8/8/8/8/8/p3K3 w - - 0 1"),
            PawnOnBackrank(Square::parse("a1").unwrap())
        );
        assert_eq!(err("8/8/8/8/8/8/3k4/4K3 b - - 0 1"), AdjacentKings);
        assert_eq!(err("4k3/8/8/8/8/8/8/4R2K w - - 0 1"), OppositeCheck(Color::Black));
        assert_eq!(
            err("4k3/8/8/8/8/8/3p4/4K3 b - - 0 1"),
            OppositeCheck(Color::White)
        );
        assert_eq!(
            err("4k3/8/8/8/8/8/8/4K3 b - e3 0 1"),
            ImpossibleEnPassant(Square::parse("e3").unwrap())
        );
        assert_eq!(
            err("4k3/8/8/3pP3/8/8/8/4K3 b - d6 0 1"),
            ImpossibleEnPassant(Square::parse("d6").unwrap())
        );
        let message = Position::from_fen("4k3/8/8/8/8/8/8/4R2K w - - 0 1")
            .unwrap_err()
            .to_string();
        assert_eq!(
            message,
            "illegal position: the side not to move (black) is in check"
        );
    }

    #[test]
    fn side_to_move_may_be_in_multiple_check() {
        // Rook and knight.
        let pos = Position::from_fen("4k3/8/8/8/8/3n4/8/r3K3 w - - 0 1").unwrap();
        assert_eq!(pos.checkers().count(), 2);
        // Rook, knight and a pawn on White's second rank: unreachable, but legal in tables.
        let pos = Position::from_fen("4k3/8/8/8/8/3n4/5p2/r3K3 w - - 0 1").unwrap();
        assert_eq!(pos.checkers().count(), 3);
        // Queen and bishop on Black's king.
        let pos = Position::from_fen("4k3/8/2B5/8/4Q3/8/8/4K3 b - - 0 1").unwrap();
        assert_eq!(pos.checkers().count(), 2);
    }
}
