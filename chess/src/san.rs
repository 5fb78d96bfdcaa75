//! Standard algebraic notation (SAN) and UCI move notation.
//!
//! ```
//! use zermelo_chess::Position;
//! let pos: Position = "k7/2P5/1K6/8/8/8/8/8 w - - 0 1".parse().unwrap();
//! let m = pos.parse_uci("c7c8q").unwrap();
//! assert_eq!(pos.san(&m), "c8=Q#");
//! assert_eq!(pos.parse_san("c8=Q").unwrap(), m);
//! ```

use crate::position::{Move, Position};
use crate::types::{Role, Square};

/// Why a move string was refused. Only legal moves are ever returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoveParseError {
    #[error("'{0}' is not a uci move")]
    InvalidUci(String),
    #[error("'{0}' is not a san move")]
    InvalidSan(String),
    #[error("'{0}' is not a legal move here")]
    Illegal(String),
    #[error("'{0}' is ambiguous here")]
    Ambiguous(String),
}

impl Position {
    /// The SAN of `m`, which must be legal here: `Nbd2`, `exd6`, `e8=Q+`, `Qh7#`.
    pub fn san(&self, m: &Move) -> String {
        let mut s = String::with_capacity(8);
        if m.role == Role::Pawn {
            if m.capture.is_some() {
                s.push(m.from.file_char());
                s.push('x');
            }
            push_square(&mut s, m.to);
            if let Some(promotion) = m.promotion {
                s.push('=');
                s.push(promotion.upper());
            }
        } else {
            s.push(m.role.upper());
            if m.role != Role::King {
                let moves = self.legal_moves();
                let mut rivals = moves
                    .iter()
                    .filter(|o| o.role == m.role && o.to == m.to && o.from != m.from)
                    .peekable();
                if rivals.peek().is_some() {
                    let (mut same_file, mut same_rank) = (false, false);
                    for o in rivals {
                        same_file |= o.from.file() == m.from.file();
                        same_rank |= o.from.rank() == m.from.rank();
                    }
                    if !same_file {
                        s.push(m.from.file_char());
                    } else if !same_rank {
                        s.push(m.from.rank_char());
                    } else {
                        push_square(&mut s, m.from);
                    }
                }
            }
            if m.capture.is_some() {
                s.push('x');
            }
            push_square(&mut s, m.to);
        }
        let after = self.play(m);
        if after.is_check() {
            s.push(if after.legal_moves().is_empty() { '#' } else { '+' });
        }
        s
    }

    /// Parses a UCI move (`e2e4`, `e7e8q`) and returns it if it is legal here.
    pub fn parse_uci(&self, s: &str) -> Result<Move, MoveParseError> {
        let invalid = || MoveParseError::InvalidUci(s.to_string());
        if !s.is_ascii() || !(4..=5).contains(&s.len()) {
            return Err(invalid());
        }
        let from = Square::parse(&s[0..2]).ok_or_else(invalid)?;
        let to = Square::parse(&s[2..4]).ok_or_else(invalid)?;
        let promotion = match s[4..].chars().next() {
            None => None,
            Some(c) => match Role::from_char(c) {
                Some(role) if Role::PROMOTIONS.contains(&role) => Some(role),
                _ => return Err(invalid()),
            },
        };
        self.legal_moves()
            .iter()
            .copied()
            .find(|m| m.from == from && m.to == to && m.promotion == promotion)
            .ok_or_else(|| MoveParseError::Illegal(s.to_string()))
    }

    /// Parses a SAN move and returns it if it is legal here and unambiguous.
    ///
    /// Lenient where no ambiguity can arise: the check suffix (`+`, `#`) and annotations
    /// (`!`, `?`) are ignored, `x` may be left out of a piece capture, `=` out of a promotion,
    /// and `e.p.` may follow an en-passant capture. Castling is never legal here.
    pub fn parse_san(&self, s: &str) -> Result<Move, MoveParseError> {
        let invalid = || MoveParseError::InvalidSan(s.to_string());
        let mut t = s.trim();
        t = t.strip_suffix("e.p.").map_or(t, str::trim_end);
        t = t.trim_end_matches(['+', '#', '!', '?']);
        if matches!(t, "O-O" | "O-O-O" | "0-0" | "0-0-0") {
            return Err(MoveParseError::Illegal(s.to_string()));
        }
        if !t.is_ascii() || t.len() < 2 {
            return Err(invalid());
        }

        let mut promotion = None;
        if let Some(last) = t.chars().last().filter(char::is_ascii_alphabetic) {
            match Role::from_char(last) {
                Some(role) if Role::PROMOTIONS.contains(&role) => promotion = Some(role),
                _ => return Err(invalid()),
            }
            t = &t[..t.len() - 1];
            t = t.strip_suffix('=').unwrap_or(t);
        }
        if t.len() < 2 {
            return Err(invalid());
        }
        let to = Square::parse(&t[t.len() - 2..]).ok_or_else(invalid)?;
        let mut rest = &t[..t.len() - 2];

        let role = match rest.chars().next() {
            Some(c @ ('K' | 'Q' | 'R' | 'B' | 'N' | 'P')) => {
                rest = &rest[1..];
                Role::from_char(c).expect("a role letter")
            }
            _ => Role::Pawn,
        };
        let capture = match rest.strip_suffix(['x', ':']) {
            Some(r) => {
                rest = r;
                true
            }
            None => false,
        };
        let mut from_file = None;
        let mut from_rank = None;
        let mut chars = rest.bytes().peekable();
        if let Some(f @ b'a'..=b'h') = chars.peek().copied() {
            from_file = Some(f - b'a');
            chars.next();
        }
        if let Some(r @ b'1'..=b'8') = chars.peek().copied() {
            from_rank = Some(r - b'1');
            chars.next();
        }
        if chars.next().is_some() || (promotion.is_some() && role != Role::Pawn) {
            return Err(invalid());
        }
        // A pawn move with neither `x` nor a file is a push.
        let pawn_push = role == Role::Pawn && !capture && from_file.is_none();

        let moves = self.legal_moves();
        let mut found = moves.iter().copied().filter(|m| {
            m.role == role
                && m.to == to
                && m.promotion == promotion
                && from_file.unwrap_or(m.from.file()) == m.from.file()
                && from_rank.unwrap_or(m.from.rank()) == m.from.rank()
                && (!capture || m.capture.is_some())
                && (!pawn_push || m.capture.is_none())
        });
        match (found.next(), found.next()) {
            (Some(m), None) => Ok(m),
            (None, _) => Err(MoveParseError::Illegal(s.to_string())),
            (Some(_), Some(_)) => Err(MoveParseError::Ambiguous(s.to_string())),
        }
    }
}

fn push_square(s: &mut String, sq: Square) {
    s.push(sq.file_char());
    s.push(sq.rank_char());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(fen: &str) -> Position {
        Position::from_fen(fen).unwrap_or_else(|e| panic!("{fen}: {e}"))
    }

    fn san_of(fen: &str, uci: &str) -> String {
        let p = pos(fen);
        let m = p.parse_uci(uci).unwrap_or_else(|e| panic!("{fen}: {e}"));
        p.san(&m)
    }

    #[test]
    fn piece_moves_and_captures() {
        let fen = "4k3/8/8/3p4/8/2N5/8/4K3 w - - 0 1";
        assert_eq!(san_of(fen, "c3d5"), "Nxd5");
        assert_eq!(san_of(fen, "c3e4"), "Ne4");
        assert_eq!(san_of(fen, "e1d2"), "Kd2");
        assert_eq!(san_of("4k3/8/8/3p4/8/8/8/4K3 w - - 0 1", "e1e2"), "Ke2");
    }

    #[test]
    fn disambiguation_two_knights() {
        // Knights on b1 and f1 both reach d2: by file.
        let fen = "4k3/8/8/8/8/8/8/1N2KN2 w - - 0 1";
        assert_eq!(san_of(fen, "b1d2"), "Nbd2");
        assert_eq!(san_of(fen, "f1d2"), "Nfd2");
        assert_eq!(san_of(fen, "b1c3"), "Nc3");
        // Knights on b1 and b5 (same file) both reach c3: by rank.
        let fen = "4k3/8/8/1N6/8/8/8/1N2K3 w - - 0 1";
        assert_eq!(san_of(fen, "b1c3"), "N1c3");
        assert_eq!(san_of(fen, "b5c3"), "N5c3");
        // Three knights on b1, d1 and b5 reaching c3: by file, by rank, and by both.
        let fen = "4k3/8/8/1N6/8/8/8/1N1NK3 w - - 0 1";
        assert_eq!(san_of(fen, "d1c3"), "Ndc3");
        assert_eq!(san_of(fen, "b5c3"), "N5c3");
        assert_eq!(san_of(fen, "b1c3"), "Nb1c3");
        let p = pos(fen);
        assert_eq!(p.parse_san("Nb1c3").unwrap().from, Square::parse("b1").unwrap());
        assert_eq!(p.parse_san("Nc3"), Err(MoveParseError::Ambiguous("Nc3".into())));
        assert_eq!(p.parse_san("Nbc3"), Err(MoveParseError::Ambiguous("Nbc3".into())));
        // A pinned knight is no rival: no disambiguation.
        let fen = "4k3/4r3/8/8/8/8/4N3/1N2K3 w - - 0 1";
        assert_eq!(san_of(fen, "b1c3"), "Nc3");
        assert_eq!(
            pos(fen).parse_san("Nc3").unwrap().from,
            Square::parse("b1").unwrap()
        );
    }

    #[test]
    fn disambiguation_two_rooks_on_a_file() {
        let fen = "4k3/8/8/R7/8/8/8/R3K3 w - - 0 1";
        assert_eq!(san_of(fen, "a1a3"), "R1a3");
        assert_eq!(san_of(fen, "a5a3"), "R5a3");
        assert_eq!(san_of(fen, "a1a2"), "R1a2");
        assert_eq!(san_of(fen, "a1b1"), "Rb1");
        assert_eq!(san_of(fen, "a5a8"), "Ra8+");
        // Two rooks on a rank reaching the same square: by file.
        let fen = "4k3/8/8/8/8/8/8/R3K2R w - - 0 1";
        assert_eq!(san_of(fen, "a1c1"), "Rc1");
        let fen = "6k1/8/8/8/8/8/R6R/4K3 w - - 0 1";
        assert_eq!(san_of(fen, "a2d2"), "Rad2");
        assert_eq!(san_of(fen, "h2d2"), "Rhd2");
    }

    #[test]
    fn pawn_moves_promotions_and_suffixes() {
        let fen = "3r2k1/4P3/8/8/8/8/8/4K3 w - - 0 1";
        assert_eq!(san_of(fen, "e7d8q"), "exd8=Q+");
        assert_eq!(san_of(fen, "e7d8n"), "exd8=N");
        assert_eq!(san_of(fen, "e7e8r"), "e8=R+");
        assert_eq!(san_of(fen, "e7e8b"), "e8=B");
        // Promotion with mate.
        let fen = "k7/2P5/1K6/8/8/8/8/8 w - - 0 1";
        assert_eq!(san_of(fen, "c7c8q"), "c8=Q#");
        assert_eq!(san_of(fen, "c7c8r"), "c8=R#");
        assert_eq!(san_of(fen, "c7c8b"), "c8=B");
        assert_eq!(san_of(fen, "c7c8n"), "c8=N");
        assert_eq!(san_of("4k3/8/8/8/8/8/4P3/4K3 w - - 0 1", "e2e4"), "e4");
        // Mate by a piece.
        assert_eq!(san_of("k7/2Q5/1K6/8/8/8/8/8 w - - 0 1", "c7b7"), "Qb7#");
    }

    #[test]
    fn en_passant() {
        let fen = "4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 1";
        assert_eq!(san_of(fen, "e5d6"), "exd6");
        let p = pos(fen);
        for s in ["exd6", "exd6 e.p.", "exd6e.p.", "ed6"] {
            let m = p.parse_san(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert!(m.en_passant && m.capture == Some(Role::Pawn), "{s}");
        }
        // The capture gives check.
        assert_eq!(san_of("8/2k5/8/3pP3/8/8/8/4K3 w - d6 0 1", "e5d6"), "exd6+");
    }

    #[test]
    fn parse_errors() {
        let p = pos("4k3/8/8/3p4/8/2N5/4P3/4K3 w - - 0 1");
        assert_eq!(p.parse_uci("e2e5"), Err(MoveParseError::Illegal("e2e5".into())));
        assert_eq!(p.parse_uci("e2"), Err(MoveParseError::InvalidUci("e2".into())));
        assert_eq!(
            p.parse_uci("e2e4k"),
            Err(MoveParseError::InvalidUci("e2e4k".into()))
        );
        assert_eq!(p.parse_uci("e2e4q"), Err(MoveParseError::Illegal("e2e4q".into())));
        assert_eq!(
            p.parse_uci("z2e4"),
            Err(MoveParseError::InvalidUci("z2e4".into()))
        );
        assert_eq!(p.parse_san("e5"), Err(MoveParseError::Illegal("e5".into())));
        assert_eq!(p.parse_san("O-O"), Err(MoveParseError::Illegal("O-O".into())));
        assert_eq!(p.parse_san("Nd5?!").unwrap().uci(), "c3d5");
        assert_eq!(p.parse_san("Nxd5").unwrap().uci(), "c3d5");
        assert_eq!(p.parse_san("Nxe4"), Err(MoveParseError::Illegal("Nxe4".into())));
        assert_eq!(p.parse_san("Zd5"), Err(MoveParseError::InvalidSan("Zd5".into())));
        assert_eq!(
            p.parse_san("e8=K"),
            Err(MoveParseError::InvalidSan("e8=K".into()))
        );
        assert_eq!(
            p.parse_san("Ne4=Q"),
            Err(MoveParseError::InvalidSan("Ne4=Q".into()))
        );
        assert_eq!(p.parse_san(""), Err(MoveParseError::InvalidSan("".into())));
        assert_eq!(
            p.parse_san("Nc3d5x"),
            Err(MoveParseError::InvalidSan("Nc3d5x".into()))
        );
        // A pawn push is never read as a capture.
        let p = pos("4k3/8/8/3p4/4P3/8/8/4K3 w - - 0 1");
        assert_eq!(p.parse_san("d5"), Err(MoveParseError::Illegal("d5".into())));
        assert_eq!(p.parse_san("exd5").unwrap().uci(), "e4d5");
        // A promotion needs its piece.
        let p = pos("4k3/1P6/8/8/8/8/8/4K3 w - - 0 1");
        assert_eq!(p.parse_san("b8"), Err(MoveParseError::Illegal("b8".into())));
        assert_eq!(p.parse_uci("b7b8"), Err(MoveParseError::Illegal("b7b8".into())));
        assert_eq!(p.parse_san("b8N").unwrap().uci(), "b7b8n");
        assert_eq!(p.parse_san("b8=q").unwrap().uci(), "b7b8q");
    }

    #[test]
    fn san_and_uci_round_trip_over_all_legal_moves() {
        let fens = [
            "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1",
            "4k3/8/8/1N6/8/8/8/1N1NK3 w - - 0 1",
            "3r2k1/4P3/8/8/8/8/8/4K3 w - - 0 1",
            "8/8/1k6/2b5/2pP4/8/5K2/8 b - d3 0 1",
            "8/5k2/8/2Pp4/2B5/1K6/8/8 w - d6 0 1",
            "r1bqkb1r/pppppppp/2n2n2/8/3QQ3/2N2N2/PPPPPPPP/R1B1KB1R w - - 0 1",
            "7k/1Q1Q1Q2/8/1Q1Q1Q2/8/1Q1Q1Q2/8/K7 w - - 0 1",
            "4k3/8/8/8/8/3n4/5p2/r3K3 w - - 0 1",
        ];
        let mut checked = 0;
        for fen in fens {
            let p = pos(fen);
            let moves = p.legal_moves();
            assert!(!moves.is_empty(), "{fen}");
            for m in moves.iter() {
                let san = p.san(m);
                assert_eq!(p.parse_san(&san), Ok(*m), "{fen}: {san}");
                assert_eq!(p.parse_uci(&m.uci()), Ok(*m), "{fen}: {}", m.uci());
                checked += 1;
            }
            // SAN names distinct moves distinctly.
            let mut sans: Vec<String> = moves.iter().map(|m| p.san(m)).collect();
            sans.sort();
            sans.dedup();
            assert_eq!(sans.len(), moves.len(), "{fen}");
        }
        assert!(checked > 200);
    }

    #[test]
    fn queens_need_full_square_disambiguation() {
        let fen = "7k/1Q1Q1Q2/8/1Q1Q1Q2/8/1Q1Q1Q2/8/K7 w - - 0 1";
        let p = pos(fen);
        // c6 is reached from b7, d7, b5 and d5: each shares a file and a rank with a rival.
        assert_eq!(san_of(fen, "d7c6"), "Qd7c6");
        assert_eq!(san_of(fen, "b5c6"), "Qb5c6");
        assert_eq!(p.parse_san("Qd7c6").unwrap().uci(), "d7c6");
    }
}
