//! Slices (one material with one pawn configuration) and the edges of the slice graph.
//!
//! Pawns never move back and captured men never return, so every move that leaves a slice lands
//! in a slice with fewer men, fewer pawns, or the same pawns further advanced: the slices form an
//! acyclic graph (Church 1979). [`SliceKey::successors`] lists the slices one move can lead into.

use std::fmt;

use crate::material::Material;
use crate::types::{Bitboard, Color, Role, Square};

/// Squares where a pawn may stand: ranks 2 to 7.
pub const PAWN_SQUARES: Bitboard = Bitboard(0x00ff_ffff_ffff_ff00);

/// A slice: a material in table orientation with the exact squares of every pawn.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SliceKey {
    pub material: Material,
    pub white_pawns: Bitboard,
    pub black_pawns: Bitboard,
}

impl SliceKey {
    /// The one slice of a pawnless material.
    pub fn pawnless(material: Material) -> SliceKey {
        debug_assert!(!material.has_pawns());
        SliceKey {
            material,
            white_pawns: Bitboard::EMPTY,
            black_pawns: Bitboard::EMPTY,
        }
    }

    /// The key as stored in a table file: `[white pawns, black pawns]`.
    pub fn raw(&self) -> [u64; 2] {
        [self.white_pawns.0, self.black_pawns.0]
    }

    /// The left-right mirror image of this slice.
    pub fn mirrored(&self) -> SliceKey {
        SliceKey {
            material: self.material,
            white_pawns: self.white_pawns.flip_file(),
            black_pawns: self.black_pawns.flip_file(),
        }
    }

    /// True if this is the stored one of the slice and its mirror image (the smaller raw key).
    /// Pawnless slices are always canonical.
    pub fn is_canonical(&self) -> bool {
        self.raw() <= self.mirrored().raw()
    }

    /// True if the slice is its own mirror image; such a slice stores both halves of the board.
    pub fn is_self_mirror(&self) -> bool {
        self.raw() == self.mirrored().raw()
    }

    /// The canonical slice of the mirror pair, and whether it is the mirror of `self`.
    pub fn canonical(&self) -> (SliceKey, bool) {
        let m = self.mirrored();
        if m.raw() < self.raw() {
            (m, true)
        } else {
            (*self, false)
        }
    }

    /// Normalizes a slice given in any colour orientation: the table orientation of the
    /// material (colours swapped if needed) and the canonical mirror half.
    /// `None` for bare kings, which have no table.
    pub fn normalize(material: Material, white_pawns: Bitboard, black_pawns: Bitboard) -> Option<SliceKey> {
        if material.is_bare_kings() {
            return None;
        }
        let key = if material.is_normalized() {
            SliceKey {
                material,
                white_pawns,
                black_pawns,
            }
        } else {
            SliceKey {
                material: material.flipped(),
                white_pawns: black_pawns.flip_rank(),
                black_pawns: white_pawns.flip_rank(),
            }
        };
        Some(key.canonical().0)
    }

    /// Sum of the pawns' ranks, each counted from its own side's first rank. A pawn push raises it.
    pub fn rank_sum(&self) -> u32 {
        let w: u32 = self
            .white_pawns
            .into_iter()
            .map(|s| s.relative_rank(Color::White) as u32)
            .sum();
        let b: u32 = self
            .black_pawns
            .into_iter()
            .map(|s| s.relative_rank(Color::Black) as u32)
            .sum();
        w + b
    }

    /// Every canonical slice of a material, sorted by raw key.
    pub fn all_of(material: Material) -> Vec<SliceKey> {
        let (material, _) = material.normalized();
        let nw = material.count(Color::White, Role::Pawn) as usize;
        let nb = material.count(Color::Black, Role::Pawn) as usize;
        let mut out = Vec::new();
        for wp in subsets(PAWN_SQUARES, nw) {
            for bp in subsets(PAWN_SQUARES & !wp, nb) {
                let key = SliceKey {
                    material,
                    white_pawns: wp,
                    black_pawns: bp,
                };
                if key.is_canonical() {
                    out.push(key);
                }
            }
        }
        out.sort_by_key(|k| k.raw());
        out
    }

    /// Every slice (normalized, sorted, without duplicates) that one move from a position of this
    /// slice can lead into: captures, pawn pushes, promotions to Q, R, B, N, and the captures en
    /// passant that a double push makes possible. Bare kings (a draw) are left out.
    ///
    /// This is structural: it lists what some placement of the pieces allows, so it may list a
    /// slice that no legal position reaches, but never misses one that is reached.
    pub fn successors(&self) -> Vec<SliceKey> {
        let mut out = Vec::new();
        let mut ep_pushes = Vec::new();
        let m = self.material;
        let pawns = [self.white_pawns, self.black_pawns];
        let all_pawns = self.white_pawns | self.black_pawns;
        let mut push = |material: Material, wp: Bitboard, bp: Bitboard| {
            if let Some(k) = SliceKey::normalize(material, wp, bp) {
                out.push(k);
            }
        };
        for us in Color::ALL {
            let them = us.other();
            let ours = pawns[us.index()];
            let theirs = pawns[them.index()];
            let set = |ours: Bitboard, theirs: Bitboard| -> (Bitboard, Bitboard) {
                match us {
                    Color::White => (ours, theirs),
                    Color::Black => (theirs, ours),
                }
            };
            let fwd: i8 = if us == Color::White { 8 } else { -8 };
            let enemy_pieces: Vec<Role> = [Role::Queen, Role::Rook, Role::Bishop, Role::Knight]
                .into_iter()
                .filter(|&r| m.count(them, r) > 0)
                .collect();
            // Pawn moves.
            for from in ours {
                let one = Square::new((from.u8() as i8 + fwd) as u8);
                let rest = ours.without(from);
                let promotes = one.relative_rank(us) == 7;
                // Single push (blocked only by a pawn for the purposes of the graph).
                if !all_pawns.contains(one) {
                    if promotes {
                        for p in Role::PROMOTIONS {
                            let (wp, bp) = set(rest, theirs);
                            push(m.without(us, Role::Pawn).with(us, p), wp, bp);
                        }
                    } else {
                        let (wp, bp) = set(rest.with(one), theirs);
                        push(m, wp, bp);
                        // Double push.
                        if from.relative_rank(us) == 1 {
                            let two = Square::new((one.u8() as i8 + fwd) as u8);
                            if !all_pawns.contains(two) {
                                let (wp, bp) = set(rest.with(two), theirs);
                                push(m, wp, bp);
                                // An enemy pawn beside the landing square may take en passant.
                                // The tables hold no en-passant square, so the position after
                                // the push is valued by looking one move further: every slice
                                // one move from the pushed slice is read too.
                                let beside = Bitboard(
                                    (two.bb().0 << 1 & !0x0101_0101_0101_0101)
                                        | (two.bb().0 >> 1 & !0x8080_8080_8080_8080),
                                );
                                if (theirs & beside).any() {
                                    if let Some(pushed) = SliceKey::normalize(m, wp, bp) {
                                        ep_pushes.push(pushed);
                                    }
                                }
                                // The captures en passant themselves.
                                for taker in theirs & beside {
                                    let (wp, bp) = set(rest, theirs.without(taker).with(one));
                                    push(m.without(us, Role::Pawn), wp, bp);
                                }
                            }
                        }
                    }
                }
                // Pawn captures.
                for side in [-1i8, 1] {
                    let f = one.file() as i8 + side;
                    if !(0..8).contains(&f) {
                        continue;
                    }
                    let to = Square::from_coords(f as u8, one.rank());
                    if ours.contains(to) {
                        continue;
                    }
                    if theirs.contains(to) {
                        // Takes a pawn.
                        let after = m.without(them, Role::Pawn);
                        if promotes {
                            // A pawn cannot stand on the last rank: impossible.
                        } else {
                            let (wp, bp) = set(rest.with(to), theirs.without(to));
                            push(after, wp, bp);
                        }
                    } else {
                        for &victim in &enemy_pieces {
                            let after = m.without(them, victim);
                            if promotes {
                                for p in Role::PROMOTIONS {
                                    let (wp, bp) = set(rest, theirs);
                                    push(after.without(us, Role::Pawn).with(us, p), wp, bp);
                                }
                            } else {
                                let (wp, bp) = set(rest.with(to), theirs);
                                push(after, wp, bp);
                            }
                        }
                    }
                }
            }
            // Pieces (king included) taking a pawn or a piece.
            let has_piece = Role::ALL[..5].iter().any(|&r| m.count(us, r) > 0);
            if has_piece {
                for sq in theirs {
                    let (wp, bp) = set(ours, theirs.without(sq));
                    push(m.without(them, Role::Pawn), wp, bp);
                }
                for &victim in &enemy_pieces {
                    let (wp, bp) = set(ours, theirs);
                    push(m.without(them, victim), wp, bp);
                }
            }
        }
        for pushed in ep_pushes {
            out.extend(pushed.successors());
        }
        out.sort();
        out.dedup();
        out
    }
}

/// All subsets of `squares` with exactly `k` elements, in a fixed order.
fn subsets(squares: Bitboard, k: usize) -> Vec<Bitboard> {
    let list: Vec<Square> = squares.into_iter().collect();
    let mut out = Vec::new();
    fn rec(list: &[Square], k: usize, start: usize, acc: Bitboard, out: &mut Vec<Bitboard>) {
        if k == 0 {
            out.push(acc);
            return;
        }
        for i in start..list.len() {
            if list.len() - i < k {
                break;
            }
            rec(list, k - 1, i + 1, acc.with(list[i]), out);
        }
    }
    rec(&list, k, 0, Bitboard::EMPTY, &mut out);
    out
}

impl fmt::Display for SliceKey {
    /// `KPvKP[Pe4 pd5]`, or just the material for a pawnless slice.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.material)?;
        if self.material.has_pawns() {
            let mut parts = Vec::new();
            for sq in self.white_pawns {
                parts.push(format!("P{sq}"));
            }
            for sq in self.black_pawns {
                parts.push(format!("p{sq}"));
            }
            write!(f, "[{}]", parts.join(" "))?;
        }
        Ok(())
    }
}

impl fmt::Debug for SliceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mat(s: &str) -> Material {
        s.parse().unwrap()
    }

    #[test]
    fn kpk_has_24_slices_on_files_a_to_d() {
        let slices = SliceKey::all_of(mat("KPvK"));
        assert_eq!(slices.len(), 24);
        assert!(slices
            .iter()
            .all(|s| s.white_pawns.into_iter().all(|sq| sq.file() < 4)));
    }

    #[test]
    fn slice_counts_match_hand_counts() {
        // Two white pawns: C(48, 2) = 1128 sets; 24 of them are their own mirror (same rank,
        // mirrored files: 6 ranks x 4 file pairs); the other 1104 pair up: 552 + 24 = 576.
        assert_eq!(SliceKey::all_of(mat("KPPvK")).len(), 576);
        // White pawn and black pawn: 48 * 47 = 2256 ordered placements, none self-mirror: 1128.
        assert_eq!(SliceKey::all_of(mat("KPvKP")).len(), 1128);
        assert_eq!(SliceKey::all_of(mat("KQvKR")).len(), 1);
    }

    #[test]
    fn successors_of_kpk_slice() {
        let m = mat("KPvK");
        let e2 = SliceKey::normalize(m, Square::parse("e2").unwrap().bb(), Bitboard::EMPTY).unwrap();
        let names: Vec<String> = e2.successors().iter().map(|s| s.to_string()).collect();
        // d3 and d4 (mirrored from e3, e4); no captures (Black has only a king).
        assert_eq!(names, vec!["KPvK[Pd3]", "KPvK[Pd4]"]);
        let b7 = SliceKey::normalize(m, Square::parse("b7").unwrap().bb(), Bitboard::EMPTY).unwrap();
        let mut names: Vec<String> = b7.successors().iter().map(|s| s.to_string()).collect();
        names.sort();
        assert_eq!(names, ["KBvK", "KNvK", "KQvK", "KRvK"]);
    }

    #[test]
    fn successors_are_smaller_in_the_hyperspace_order() {
        for name in ["KPvKP", "KPPvK", "KRvKP", "KQvKP"] {
            for s in SliceKey::all_of(mat(name)) {
                for t in s.successors() {
                    let smaller = t.material.men() < s.material.men()
                        || (t.material.men() == s.material.men() && t.material.pawns() < s.material.pawns())
                        || (t.material == s.material && t.rank_sum() > s.rank_sum());
                    assert!(smaller, "{s} -> {t}");
                }
            }
        }
    }

    /// The position after a double push that allows en passant is valued from its own moves,
    /// so the slices those lead into are successors too (found by a worker that fetched only
    /// the listed successors: KPvKP[Pa2 pb4] reads KPvKP[Pa4 pb3] through a2-a4 b4-b3).
    #[test]
    fn double_push_allowing_en_passant_lists_the_slices_one_move_further() {
        let m = mat("KPvKP");
        let sq = |s: &str| Square::parse(s).unwrap().bb();
        let k = SliceKey::normalize(m, sq("a2"), sq("b4")).unwrap();
        let further = SliceKey::normalize(m, sq("a4"), sq("b3")).unwrap();
        assert!(k.successors().contains(&further));
        // Without an enemy pawn beside the landing square, nothing further is listed.
        let k = SliceKey::normalize(m, sq("a2"), sq("d4")).unwrap();
        let further = SliceKey::normalize(m, sq("a4"), sq("d3")).unwrap();
        assert!(!k.successors().contains(&further));
    }

    #[test]
    fn double_push_lists_en_passant_capture() {
        // White e2, black d4: e2-e4 allows dxe3, leaving KvKP -> KPvK with the pawn on e3 seen from Black.
        let m = mat("KPvKP");
        let k = SliceKey::normalize(
            m,
            Square::parse("e2").unwrap().bb(),
            Square::parse("d4").unwrap().bb(),
        )
        .unwrap();
        let succ = k.successors();
        let ep =
            SliceKey::normalize(mat("KPvK"), Square::parse("e6").unwrap().bb(), Bitboard::EMPTY).unwrap();
        assert!(succ.contains(&ep), "{succ:?}");
    }
}
