//! The lenient FEN reader of `zermelo serve` and `zermelo probe`: `zermelo_cli::lichess::read_fen`,
//! `zermelo_cli::probe::parse_position` and `zermelo_cli::probe::halfmove_clock`, on any string.
//!
//! Asserts: none panics; a position `read_fen` returns is legal (its `to_fen()` parses with the
//! strict `Position::from_fen` to the same position); the castling rights it keeps stand on the
//! board, once each; its clock is `halfmove_clock`'s; a FEN the strict reader takes is read to
//! the same position; `parse_position` succeeds exactly when `read_fen` does with no castling
//! right and no more men than allowed, and then gives the same position.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zermelo_chess::{Color, Material, Piece, Position, Role, Square};
use zermelo_cli::lichess::read_fen;
use zermelo_cli::probe::{halfmove_clock, parse_position};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let read = read_fen(text);
    let clock = halfmove_clock(text);
    if let Ok(asked) = &read {
        let fen = asked.pos.to_fen();
        let strict = Position::from_fen(&fen)
            .unwrap_or_else(|e| panic!("read_fen({text:?}) gave {fen:?}, which from_fen refuses: {e}"));
        assert_eq!(
            strict, asked.pos,
            "read_fen({text:?}): {fen:?} is another position"
        );
        assert_eq!(
            asked.clock, clock,
            "read_fen({text:?}) and halfmove_clock disagree"
        );
        for (i, c) in asked.castling.iter().enumerate() {
            assert!(
                !asked.castling[..i].contains(c),
                "read_fen({text:?}): a right twice"
            );
            let rank = if c.color == Color::White { 0 } else { 7 };
            let rook_file = if c.king_side { 7 } else { 0 };
            let board = &asked.pos.board;
            assert_eq!(
                board.piece_at(Square::from_coords(4, rank)),
                Some(Piece::new(c.color, Role::King))
            );
            assert_eq!(
                board.piece_at(Square::from_coords(rook_file, rank)),
                Some(Piece::new(c.color, Role::Rook))
            );
        }
    }
    if let Ok(pos) = Position::from_fen(text) {
        let asked = read
            .as_ref()
            .unwrap_or_else(|e| panic!("from_fen takes {text:?}, read_fen refuses it: {e}"));
        assert_eq!(asked.pos, pos, "from_fen and read_fen read {text:?} differently");
    }
    for max_men in [3, 7, 32] {
        let parsed = parse_position(text, max_men);
        let expected = read
            .as_ref()
            .ok()
            .filter(|asked| asked.castling.is_empty() && Material::of(&asked.pos.board).men() <= max_men);
        match (&parsed, expected) {
            (Ok(pos), Some(asked)) => assert_eq!(*pos, asked.pos),
            (Err(_), None) => {}
            (p, e) => panic!("parse_position({text:?}, {max_men}) is {p:?}, read_fen gave {e:?}"),
        }
    }
});
