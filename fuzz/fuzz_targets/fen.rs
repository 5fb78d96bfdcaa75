//! `Position::from_fen` (chess/src/fen.rs) on any string.
//!
//! Asserts, for a FEN it accepts: `to_fen()` parses again to the same position and prints the
//! same FEN (round trip); each legal move, played, gives a position whose FEN round-trips too;
//! each move's SAN and UCI read back as the same move.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zermelo_chess::Position;

fn round_trip(pos: &Position, from: &str) {
    let fen = pos.to_fen();
    let again = Position::from_fen(&fen)
        .unwrap_or_else(|e| panic!("{from:?} gave {fen:?}, which does not parse: {e}"));
    assert_eq!(
        again, *pos,
        "{from:?} gave {fen:?}, which parses to another position"
    );
    assert_eq!(again.to_fen(), fen);
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(pos) = Position::from_fen(text) else {
        return;
    };
    round_trip(&pos, text);
    let moves = pos.legal_moves();
    assert_eq!(pos.is_checkmate(), moves.as_slice().is_empty() && pos.is_check());
    for m in moves.as_slice() {
        let san = pos.san(m);
        assert_eq!(
            pos.parse_san(&san).ok(),
            Some(*m),
            "{text:?}: SAN {san} does not read back"
        );
        let uci = m.uci();
        assert_eq!(
            pos.parse_uci(&uci).ok(),
            Some(*m),
            "{text:?}: UCI {uci} does not read back"
        );
        let after = pos.play(m);
        after
            .validate()
            .unwrap_or_else(|e| panic!("{text:?}: {uci} leads to an illegal position: {e}"));
        round_trip(&after, text);
    }
});
