//! Un-moves inside a slice: the moves that could have led to a position without leaving its
//! slice. Only men other than pawns move back, and never un-capture (a capture or any pawn move
//! leaves the slice).

use crate::attacks;
use crate::position::Position;
use crate::types::{Bitboard, Piece, Role, Square};

/// Calls `f(piece, now, before)` for every un-move of `pos`: the man `piece` of the side that just
/// moved (not `pos.turn`) stands on `now` and came from the empty square `before`. Only un-moves
/// whose predecessor is legal are given: there, the side to move in `pos` must not be in check.
pub fn for_each_unmove(pos: &Position, f: impl FnMut(Piece, Square, Square)) {
    for_each_unmove_from(pos, Bitboard::ALL, f)
}

/// [`for_each_unmove`] for the men standing on `from` only.
pub fn for_each_unmove_from(pos: &Position, from: Bitboard, mut f: impl FnMut(Piece, Square, Square)) {
    let mover = pos.turn.other();
    let victim = pos.turn;
    let board = &pos.board;
    let occ = board.occupied();
    let Some(their_king) = board.king_of(victim) else {
        return;
    };
    for now in board.by_color(mover) & !board.by_role(Role::Pawn) & from {
        let piece = board.piece_at(now).expect("occupied");
        let occ_without = occ.without(now);
        // Squares from which this man would attack the victim's king: it may not come from there.
        // (Leapers and sliders attack symmetrically; `before` is empty, so it blocks no line to
        // itself.)
        let checking = attacks::attacks(Piece::new(victim, piece.role), their_king, occ_without);
        let targets = attacks::attacks(piece, now, occ) & !occ & !checking;
        // Men uncovered by the move back: their check must be blocked by the square it came from.
        let uncovered = pos.attackers_to(their_king, mover, occ_without);
        if uncovered.is_empty() {
            for before in targets {
                f(piece, now, before);
            }
        } else {
            for before in targets {
                let blocked = uncovered
                    .into_iter()
                    .all(|a| attacks::between(a, their_king).contains(before));
                if blocked {
                    f(piece, now, before);
                }
            }
        }
    }
}

/// The predecessors of `pos` inside its slice, as positions (the side that just moved to move).
pub fn unmoves(pos: &Position) -> Vec<Position> {
    let mut out = Vec::new();
    for_each_unmove(pos, |piece, now, before| {
        let mut b = pos.board;
        b.shift(now, before, piece);
        out.push(Position::new(b, pos.turn.other()));
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::SliceIndexer;
    use crate::slice::SliceKey;
    use crate::Material;

    /// Un-moves agree with forward moves: every un-move, played forward, is a legal move leading
    /// back, and every legal in-slice move is found as an un-move of the position it leads to.
    #[test]
    fn unmoves_agree_with_forward_moves() {
        let mut checked = 0;
        for name in ["KRvK", "KQvKR", "KBNvK", "KRvKP", "KPvKP"] {
            let m: Material = name.parse().unwrap();
            for key in SliceKey::all_of(m).into_iter().step_by(7).take(3) {
                let ix = SliceIndexer::new(key);
                for i in (0..ix.size()).step_by(211) {
                    let Some(pos) = ix.position(i) else { continue };
                    if pos.validate().is_err() {
                        continue;
                    }
                    // Backward then forward.
                    for pred in unmoves(&pos) {
                        assert!(pred.validate().is_ok(), "illegal predecessor {pred} of {pos}");
                        let back = pred
                            .legal_moves()
                            .iter()
                            .filter(|m| !m.leaves_slice())
                            .filter(|m| pred.play(m).board == pos.board)
                            .count();
                        assert_eq!(back, 1, "{pred} -> {pos}");
                        checked += 1;
                    }
                    // Forward then backward.
                    for mv in pos.legal_moves().iter().filter(|m| !m.leaves_slice()) {
                        let next = pos.play(mv);
                        assert!(
                            unmoves(&next).contains(&Position::new(pos.board, pos.turn)),
                            "{pos} {mv:?}"
                        );
                    }
                }
            }
        }
        assert!(checked > 10_000, "only {checked} un-moves checked");
    }
}
