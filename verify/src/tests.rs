//! Tests of the verifier: perft for the mailbox generator, the index both ways and its
//! symmetries, and end-to-end runs on small tables built here by brute force.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use zermelo_storage::{table_file_name, write_table, Metric, SliceData, Table, TableMeta};

use super::board::{self, Child, Color, Position, KING, PAWN};
use super::index::{locate, Decoded, Decoder, Location, QuietFrame, LAYOUT};
use super::material::{mirror, Material, MaterialNameError, Pawns};
use super::{value, verify_table, Library, VerifyError, VerifyOptions, VerifyReport};

// ---------------------------------------------------------------------------------------------
// Move generation

fn perft(pos: &Position, depth: u32) -> u64 {
    if depth == 0 {
        return 1;
    }
    let mut nodes = 0;
    let moves = pos
        .for_each_child(|child| {
            if depth > 1 {
                nodes += perft(child, depth - 1);
            }
            Ok::<(), ()>(())
        })
        .unwrap();
    if depth == 1 {
        moves as u64
    } else {
        nodes
    }
}

fn fen(s: &str) -> Position {
    Position::from_fen(s).unwrap_or_else(|| panic!("bad test FEN {s}"))
}

/// Published perft counts of castling-free positions (chessprogramming.org "Perft Results",
/// position 3, and Martin Sedlak's suite of rule corner cases).
const PERFT: &[(&str, &[u64])] = &[
    // Position 3 (the brief quoted it without Black's king on h4).
    (
        "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1",
        &[14, 191, 2812, 43238, 674624],
    ),
    (
        "n1n5/PPPk4/8/8/8/8/4Kppp/5N1N b - - 0 1",
        &[24, 496, 9483, 182838],
    ),
    // Avoid an en-passant capture that exposes the king; an en-passant capture giving check.
    ("3k4/3p4/8/K1P4r/8/8/8/8 b - - 0 1", &[0, 0, 0, 0, 0, 1134888]),
    ("8/8/1k6/2b5/2pP4/8/5K2/8 b - d3 0 1", &[0, 0, 0, 0, 0, 1440467]),
    ("8/8/4k3/8/2p5/8/B2P2K1/8 w - - 0 1", &[0, 0, 0, 0, 0, 1015133]),
    // Promotions out of and into check, stalemate and checkmate.
    ("2K2r2/4P3/8/8/8/8/8/3k4 w - - 0 1", &[0, 0, 0, 0, 0, 3821001]),
    ("8/8/1P2K3/8/2n5/1q6/8/5k2 b - - 0 1", &[0, 0, 0, 0, 1004658]),
    ("4k3/1P6/8/8/8/8/K7/8 w - - 0 1", &[0, 0, 0, 0, 0, 217342]),
    ("8/P1k5/K7/8/8/8/8/8 w - - 0 1", &[0, 0, 0, 0, 0, 92683]),
    ("K1k5/8/P7/8/8/8/8/8 w - - 0 1", &[0, 0, 0, 0, 0, 2217]),
    ("8/k1P5/8/1K6/8/8/8/8 w - - 0 1", &[0, 0, 0, 0, 0, 0, 567584]),
    ("8/8/2k5/5q2/5n2/8/5K2/8 b - - 0 1", &[0, 0, 0, 23527]),
];

#[test]
fn perft_matches_published_counts() {
    for &(f, counts) in PERFT {
        let pos = fen(f);
        for (d, &expected) in counts.iter().enumerate() {
            // 0 marks a depth whose count the source does not give.
            if expected != 0 {
                assert_eq!(perft(&pos, d as u32 + 1), expected, "perft {} of {f}", d + 1);
            }
        }
    }
}

/// Perft through [`Position::for_each_child_quick`], a quiet child rebuilt from its move.
fn perft_quick(pos: &Position, depth: u32) -> u64 {
    let mut work = pos.clone();
    let mut nodes = 0;
    work.for_each_child_quick(|child| {
        let child = match child {
            Child::Quiet { from, to, .. } => pos.after_quiet_move(from, to),
            Child::Moved(c) => c.clone(),
        };
        nodes += if depth > 1 {
            perft_quick(&child, depth - 1)
        } else {
            1
        };
        Ok::<(), ()>(())
    })
    .unwrap();
    assert_eq!(
        work, *pos,
        "the board is whole again after its children were visited"
    );
    nodes
}

#[test]
fn perft_of_the_quick_children_matches_published_counts() {
    for &(f, counts) in PERFT {
        let pos = fen(f);
        // The deepest published count of each position, up to depth 5 (seconds, not minutes).
        if let Some((d, &expected)) = counts.iter().enumerate().take(5).rfind(|(_, &c)| c != 0) {
            assert_eq!(
                perft_quick(&pos, d as u32 + 1),
                expected,
                "perft {} of {f}",
                d + 1
            );
        }
    }
}

/// A child as the verifier reads it: where it is stored, or (with an en-passant right, stored
/// nowhere) its FEN.
fn child_place(c: &Position) -> Result<Location, String> {
    if c.ep().is_some() {
        Err(c.fen())
    } else {
        Ok(locate(c))
    }
}

#[test]
fn attacks_by_table_agree_with_attacks_by_scan() {
    // Every square, both colours, on positions with every kind of man, pawns of both colours
    // and men next to the board's edges.
    let mut positions: Vec<Position> = PERFT.iter().map(|&(f, _)| fen(f)).collect();
    for (material, seed) in [("KQRBNvKQRBN", 1), ("KPPPvKPPP", 2), ("KQNPvKRBP", 3)] {
        positions.extend(random_positions(material, 500, seed));
    }
    let mut attacked = 0;
    for pos in &positions {
        for sq in (0..128u8).filter(|s| s & 0x88 == 0) {
            for by in [Color::White, Color::Black] {
                let table = pos.attacked(sq, by);
                assert_eq!(
                    table,
                    pos.attacked_by_scan(sq, by),
                    "{} {} by {by:?}",
                    pos.fen(),
                    board::square_name(sq)
                );
                attacked += usize::from(table);
            }
        }
    }
    assert!(attacked > 10_000, "{attacked}");
}

#[test]
fn the_quick_children_are_the_plain_ones() {
    // Positions of every kind of material (pawnless with like men, with pawns of both sides,
    // colours swapped when not normalized), their children too, and the perft positions (en
    // passant, pins, promotions, checks).
    let mut positions: Vec<Position> = PERFT.iter().map(|&(f, _)| fen(f)).collect();
    for (material, step) in [
        ("KQvKR", 401),
        ("KRRvK", 181),
        ("KBNvK", 401),
        ("KRvKN", 401),
        ("KPvKP", 701),
        ("KRPvKR", 90001),
        ("KQvKQ", 401),
    ] {
        for (_, _, _, p) in sample_positions(material, step) {
            p.for_each_child(|c| {
                positions.push(c.clone());
                Ok::<(), ()>(())
            })
            .unwrap();
            positions.push(p);
        }
    }
    let (mut quiet, mut moved) = (0, 0);
    for pos in &positions {
        let mut plain = Vec::new();
        let plain_moves = pos
            .for_each_child(|c| {
                plain.push(child_place(c));
                Ok::<(), ()>(())
            })
            .unwrap();
        let frame = QuietFrame::new(pos);
        let mut work = pos.clone();
        let mut fast = Vec::new();
        let in_check = work
            .for_each_child_quick(|child| {
                fast.push(match child {
                    Child::Quiet {
                        color,
                        kind,
                        from,
                        to,
                    } => {
                        quiet += 1;
                        let rebuilt = pos.after_quiet_move(from, to);
                        assert_eq!(rebuilt.at(board::sq88(to)), board::cell(color, kind));
                        let place = frame.as_ref().unwrap().quiet(color, kind, from, to);
                        assert_eq!(
                            Ok(place),
                            child_place(&rebuilt),
                            "{} -> {}",
                            pos.fen(),
                            rebuilt.fen()
                        );
                        Ok(place)
                    }
                    Child::Moved(c) => {
                        moved += 1;
                        child_place(c)
                    }
                });
                Ok::<(), ()>(())
            })
            .unwrap();
        assert_eq!(work, *pos, "{}", pos.fen());
        assert_eq!(fast, plain, "{}", pos.fen());
        assert_eq!(fast.len(), plain_moves);
        assert_eq!(in_check, pos.in_check(), "{}", pos.fen());
    }
    assert!(
        quiet > 100_000 && moved > 100_000,
        "{quiet} quiet, {moved} other children"
    );
}

#[test]
fn fen_round_trips() {
    for &(f, _) in PERFT {
        assert_eq!(fen(f).fen(), f);
    }
}

#[test]
fn en_passant_right_only_when_the_capture_is_legal() {
    // After e2-e4 Black's d4 pawn can take en passant.
    let children = |p: &Position| {
        let mut out = Vec::new();
        p.for_each_child(|c| {
            out.push(c.fen());
            Ok::<(), ()>(())
        })
        .unwrap();
        out
    };
    let free = fen("4k3/8/8/8/3p4/8/4P3/4K3 w - - 0 1");
    assert!(children(&free).contains(&"4k3/8/8/8/3pP3/8/8/4K3 b - e3 0 1".to_owned()));
    // With Black's king on a4 and a white rook on h4, taking would expose the king: no right.
    let pinned = fen("8/8/8/8/k2p3R/8/4P3/4K3 w - - 0 1");
    assert!(children(&pinned).contains(&"8/8/8/8/k2pP2R/8/8/4K3 b - - 0 1".to_owned()));
    // No black pawn beside the pushed one: no right.
    let alone = fen("4k3/8/8/8/8/8/4P3/4K3 w - - 0 1");
    assert!(children(&alone).contains(&"4k3/8/8/8/4P3/8/8/4K3 b - - 0 1".to_owned()));
}

#[test]
fn legality_follows_the_table_convention() {
    // Side to move in check: legal, even from a pawn on its second rank (a check no game reaches).
    assert!(fen("8/8/8/8/8/8/3p4/4K2k w - - 0 1").is_legal());
    // Side not to move in check: illegal.
    assert!(!fen("8/8/8/8/8/8/3p4/4K2k b - - 0 1").is_legal());
    // Adjacent kings: illegal whoever moves.
    assert!(!fen("8/8/8/8/8/8/8/4Kk2 w - - 0 1").is_legal());
    // Both kings in check: illegal.
    assert!(!fen("4r3/8/8/8/8/8/7R/4K2k w - - 0 1").is_legal());
    // Two checkers, no game could reach it: legal for the side to move.
    assert!(fen("4r3/8/8/8/8/8/2n5/4K2k w - - 0 1").is_legal());
    // A rook behind its own king gives no check through it.
    assert!(fen("4r3/8/8/8/8/8/8/1R2K2k w - - 0 1").is_legal());
}

// ---------------------------------------------------------------------------------------------
// Materials, slices, index

#[test]
fn material_names_normalize_like_syzygy() {
    let norm = |s: &str| Material::parse(s).unwrap().normalized().to_string();
    assert_eq!(norm("KPvK"), "KPvK");
    assert_eq!(norm("kvkp"), "KPvK");
    assert_eq!(norm("KRvKQ"), "KQvKR");
    assert_eq!(norm("KRvKRP"), "KRPvKR");
    assert_eq!(norm("KPQvK"), "KQPvK");
    assert_eq!(norm("KNvKB"), "KBvKN");
    assert_eq!(norm("KRvKBN"), "KBNvKR");
    assert_eq!(norm("KRvKR"), "KRvKR");
    assert!(Material::parse("KvKQ").unwrap().needs_swap());
    assert!(!Material::parse("KQvKQ").unwrap().needs_swap());
    assert_eq!(Material::parse("KQK"), Err(MaterialNameError::NoSeparator));
    assert_eq!(Material::parse("KXvK"), Err(MaterialNameError::BadLetter('X')));
    assert_eq!(Material::parse("QvK"), Err(MaterialNameError::Kings));
    assert_eq!(Material::parse("KKvK"), Err(MaterialNameError::Kings));
    assert_eq!(Material::parse("kvk"), Err(MaterialNameError::BareKings));
}

#[test]
fn swapping_follows_the_written_rule() {
    // The brief's rule, literally: swap if (len(w), idx(b)) < (len(b), idx(w)).
    let idx = |side: &str| {
        side.bytes()
            .map(|c| b"KQRBNP".iter().position(|&l| l == c).unwrap())
            .collect::<Vec<_>>()
    };
    let sides = [
        "K", "KQ", "KR", "KB", "KN", "KP", "KQQ", "KQR", "KRB", "KBN", "KNN", "KBP", "KPP", "KRP", "KNP",
    ];
    for w in sides {
        for b in sides {
            if w == "K" && b == "K" {
                continue;
            }
            let m = Material::parse(&format!("{w}v{b}")).unwrap();
            let rule = (w.len(), idx(b)) < (b.len(), idx(w));
            assert_eq!(m.needs_swap(), rule, "{w}v{b}");
        }
    }
}

#[test]
fn canonical_slices_are_counted_right() {
    let keys = |s: &str| Material::parse(s).unwrap().canonical_keys();
    assert_eq!(keys("KQvK"), vec![[0, 0]]);
    // One pawn: files a-d only.
    assert_eq!(keys("KPvK").len(), 24);
    // Two pawns of different colours: no placement mirrors to itself.
    assert_eq!(keys("KPvKP").len(), 48 * 47 / 2);
    // Two white pawns: 1128 placements, 24 of them symmetric.
    assert_eq!(keys("KPPvK").len(), (1128 - 24) / 2 + 24);
    for k in keys("KPPvKP") {
        assert!(k <= [mirror(k[0]), mirror(k[1])]);
    }
    assert_eq!(mirror(1), 1 << 7);
    assert_eq!(mirror(1 << 9), 1 << 14);
}

/// `is_canonical_key` says yes to exactly the keys `canonical_keys` lists: every placement of
/// up to three pawns of each colour on any squares (ranks 1 and 8, shared squares, wrong
/// counts and mirror images included) is asked of a few materials.
#[test]
fn a_canonical_key_is_known_without_listing_them() {
    for name in ["KQvK", "KPvK", "KPvKP", "KPPvK", "KPPvKP", "KRvKPP"] {
        let m = Material::parse(name).unwrap().normalized();
        let listed: std::collections::BTreeSet<[u64; 2]> = m.canonical_keys().into_iter().collect();
        let mut asked = 0;
        let mut yes = 0;
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_f491_4f6c_dd1d)
        };
        let squares = |r: u64, n: u64| (0..n).fold(0u64, |bb, i| bb | 1 << ((r >> (6 * i)) % 64));
        let mut keys: Vec<[u64; 2]> = listed.iter().copied().collect();
        keys.extend(listed.iter().map(|k| [mirror(k[0]), mirror(k[1])]));
        for _ in 0..20_000 {
            let (a, b, c) = (next(), next(), next());
            keys.push([squares(a, c % 4), squares(b, (c >> 8) % 4)]);
        }
        for key in keys {
            asked += 1;
            let known = m.is_canonical_key(key);
            assert_eq!(known, listed.contains(&key), "{name} {key:x?}");
            yes += u32::from(known);
        }
        assert!(yes as usize >= listed.len() && asked > 20_000, "{name}");
    }
}

/// A few thousand indices spread over all slices of `material`.
fn sample_positions(material: &str, step: u64) -> Vec<(Material, [u64; 2], u64, Position)> {
    let m = Material::parse(material).unwrap().normalized();
    let mut out = Vec::new();
    for key in m.canonical_keys() {
        let d = Decoder::new(&m, key);
        let mut i = key[0].wrapping_mul(7).wrapping_add(key[1]) % step;
        while i < d.len() {
            if let Decoded::Position(p) = d.decode(i) {
                if p.is_legal() {
                    out.push((m, key, i, p));
                }
            }
            i += step;
        }
    }
    out
}

#[test]
fn locate_inverts_decode() {
    // Every legal index decodes to a position that locates back to it: like men (KRRvK) have one
    // index per position, not one per labelling.
    for (material, step) in [
        ("KRvK", 1),
        ("KQvKR", 97),
        ("KRRvK", 13),
        ("KPvK", 1),
        ("KPvKN", 331),
        ("KPPvKP", 8191),
    ] {
        for (m, key, i, p) in sample_positions(material, step) {
            assert_eq!(
                locate(&p),
                Location::Stored {
                    material: m,
                    key,
                    index: i
                },
                "{material} {}",
                p.fen()
            );
        }
    }
}

/// The 8 images of a position under the symmetries of the board: itself, mirrored in files,
/// ranks or both, and the transposes (mirrored in the a1-h8 diagonal) of these four.
fn images(p: &Position) -> Vec<Position> {
    let four = [
        p.clone(),
        p.file_mirrored(),
        p.rank_mirrored(),
        p.file_mirrored().rank_mirrored(),
    ];
    let transposed: Vec<Position> = four.iter().map(Position::transposed).collect();
    four.into_iter().chain(transposed).collect()
}

/// The 0..64 square of `color`'s king.
fn king_of(p: &Position, color: Color) -> u8 {
    let mut at = None;
    p.for_each_man(|c, kind, sq| {
        if c == color && kind == KING {
            at = Some(sq);
        }
    });
    at.unwrap()
}

/// On a1, b2, c3 or d4 (the diagonal part of the triangle).
fn on_diagonal(sq: u8) -> bool {
    sq % 8 == sq / 8 && sq % 8 < 4
}

/// On the a1-h8 diagonal (any of its 8 squares).
fn on_main_diagonal(sq: u8) -> bool {
    sq % 8 == sq / 8
}

/// On the a8-h1 diagonal.
fn on_anti_diagonal(sq: u8) -> bool {
    sq % 8 + sq / 8 == 7
}

/// Above the a1-h8 diagonal (rank > file).
fn above_diagonal(sq: u8) -> bool {
    sq / 8 > sq % 8
}

/// Both kings on the a1-h8 diagonal: a pawnless position stored at its own index, apart from its
/// mirror image in the diagonal.
fn kings_on_diagonal(p: &Position) -> bool {
    on_main_diagonal(king_of(p, Color::White)) && on_main_diagonal(king_of(p, Color::Black))
}

/// The triangle T, in the order of the king-pair list.
const TRIANGLE: [u8; 10] = [0, 1, 2, 3, 9, 10, 11, 18, 19, 27];

/// The index `locate` gives `p` (which must be stored).
fn index_of(p: &Position) -> u64 {
    match locate(p) {
        Location::Stored { index, .. } => index,
        Location::BareKings => panic!("bare kings"),
    }
}

#[test]
fn layout_3_by_hand() {
    let kqvk = Material::parse("KQvK").unwrap();
    // Field sizes: 462 or 3,612 king pairs, C(64, k) per group of k men.
    assert_eq!(kqvk.per_side(), 462 * 64);
    assert_eq!(Material::parse("KRRvK").unwrap().per_side(), 931_392);
    assert_eq!(Material::parse("KBNvK").unwrap().per_side(), 462 * 64 * 64);
    assert_eq!(Material::parse("KQRvKR").unwrap().per_side(), 462 * 64 * 64 * 64);
    assert_eq!(Material::parse("KQQQvK").unwrap().per_side(), 462 * 41_664);
    assert_eq!(Material::parse("KPvK").unwrap().per_side(), 3612);
    assert_eq!(Material::parse("KPPvKP").unwrap().per_side(), 3612);
    assert_eq!(Material::parse("KRPvKR").unwrap().per_side(), 3612 * 64 * 64);
    let stored = |material: &str, key: [u64; 2], index: u64| Location::Stored {
        material: Material::parse(material).unwrap(),
        key,
        index,
    };
    let none = [0, 0];

    // FORMAT.md's examples.
    // KQvK, White Ka1 Qh8, Black Kc1, White to move: kk 0, the queen's rank 63.
    assert_eq!(
        locate(&fen("7Q/8/8/8/8/8/8/K1k5 w - - 0 1")),
        stored("KQvK", none, 63)
    );
    // KRRvK, White Kb1 Ra8 Rh1, Black Ke1, Black to move: kk 33 + 1, the rooks'
    // C(7, 1) + C(56, 2) = 1547.
    let krrvk = fen("R7/8/8/8/8/8/8/1K2k2R b - - 0 1");
    assert_eq!(locate(&krrvk), stored("KRRvK", none, 931_392 + 34 * 2016 + 1547));
    assert_eq!(index_of(&krrvk), 1_001_483);
    // KQRvKR, fields kk, Black's rook, White's rook, White's queen. White Ka1 Qh8 Rh1, Black Kc1
    // Rd8, White to move: kk 0, then d8 = 59, h1 = 7, h8 = 63.
    assert_eq!(
        locate(&fen("3r3Q/8/8/8/8/8/8/K1k4R w - - 0 1")),
        stored("KQRvKR", none, ((59 * 64) + 7) * 64 + 63)
    );
    // KPvK, White Ka1 Pe4, Black Kc1, White to move: index 0 of the slice with the pawn on e4.
    // That slice is not canonical (e4 is the mirror of d4, a lower square): a table stores the
    // position mirrored a <-> h (Kh1 Pd4, Kf1), at kk 60 + 6 * 58 + 5 = 413 (60 pairs with the
    // king on a1, 58 on each of b1-g1; then a1-e1 for Black's king). With the pawn on d4 it is
    // index 0 of a stored slice.
    let (e4, d4) = ([1 << 28, 0], [1 << 27, 0]);
    let kpvk = Material::parse("KPvK").unwrap();
    assert_eq!(
        Decoder::new(&kpvk, e4).decode(0),
        Decoded::Position(fen("8/8/8/8/4P3/8/8/K1k5 w - - 0 1"))
    );
    assert_eq!(
        locate(&fen("8/8/8/8/4P3/8/8/K1k5 w - - 0 1")),
        stored("KPvK", d4, 413)
    );
    assert_eq!(
        locate(&fen("8/8/8/8/3P4/8/8/K1k5 w - - 0 1")),
        stored("KPvK", d4, 0)
    );
    assert_eq!(
        Decoder::new(&kpvk, d4).decode(413),
        Decoded::Position(fen("8/8/8/8/3P4/8/8/5k1K w - - 0 1"))
    );

    // Step 4. KQvK, White Kb2 Qh1, Black Kb5, Black to move: White's king on the diagonal, Black's
    // above it: mirrored in the diagonal (Kb2 Qa8, Ke2). kk: 33 + 3 * 58 = 207 pairs before b2;
    // then d1-h1 (a1, b1, c1 touch b2), d2, e2: 207 + 6. The queen on a8 = 56.
    let step4 = fen("8/8/8/1k6/8/8/1K6/7Q b - - 0 1");
    assert_eq!(locate(&step4), stored("KQvK", none, 462 * 64 + 213 * 64 + 56));
    assert_eq!(index_of(&step4), 43_256);
    assert_eq!(index_of(&step4.transposed()), 43_256);
    assert_eq!(
        Decoder::new(&kqvk, none).decode(43_256),
        Decoded::Position(fen("Q7/8/8/8/8/8/1K2k3/8 b - - 0 1"))
    );

    // Steps 1-3. KBNvK, White Kg6 Ba1 Nh8, Black Kc8, White to move. Step 1 (g6 on files e-h):
    // Kb6 Bh1 Na8, Kf8; step 2 (b6 on ranks 5-8): Kb3 Bh8 Na1, Kf1; step 3 (b3 above the
    // diagonal): Kc2 Bh8 Na1, Ka6. kk: 33 + 3 * 58 + 30 = 237 pairs before c2; a6 = 40 less c2
    // and its 8 neighbours, all below 40: 237 + 31 = 268. Fields kk, White's knight (a1 = 0),
    // White's bishop (h8 = 63).
    let steps = fen("2k4N/8/6K1/8/8/8/8/B7 w - - 0 1");
    assert_eq!(locate(&steps), stored("KBNvK", none, (268 * 64) * 64 + 63));
    assert_eq!(index_of(&steps), 1_097_791);
    assert_eq!(
        Decoder::new(&Material::parse("KBNvK").unwrap(), none).decode(1_097_791),
        Decoded::Position(fen("7B/8/k7/8/8/8/2K5/N7 w - - 0 1"))
    );

    // Both kings on the diagonal: KQvK, White Kc3 Qa8, Black Kf6, White to move; nothing is
    // mirrored. kk: 33 + 3 * 58 + 30 + 2 * 55 = 347 pairs before c3; below f6 = 45 on or under the
    // diagonal 8 + 7 + 6 + 5 + 4 = 30 squares, 6 of them c3 or next to it (b2 c2 d2 d3 d4):
    // 347 + 24 = 371. Its mirror image in the diagonal (Qh1) is stored too, at its own index.
    let on = fen("Q7/8/5k2/8/8/2K5/8/8 w - - 0 1");
    let twin = fen("8/8/5k2/8/8/2K5/8/7Q w - - 0 1");
    assert_eq!(on.transposed(), twin);
    assert_eq!(locate(&on), stored("KQvK", none, 371 * 64 + 56));
    assert_eq!(locate(&twin), stored("KQvK", none, 371 * 64 + 7));
    assert_eq!(index_of(&on), 23_800);

    // With pawns, mirrored a <-> h: KPvK, White Kg2 Pf3, Black Ke8, Black to move: the pawn key
    // f3 mirrors to c3 (lower): Kb2 Pc3, Kd8. kk: a1 60, b1-g1 6 * 58, h1 60, a2 58 = 526 pairs
    // before b2; d8 = 59 less b2 and its 8 neighbours: 526 + 50 = 576.
    let mirrored = fen("4k3/8/8/8/8/5P2/6K1/8 b - - 0 1");
    assert_eq!(locate(&mirrored), stored("KPvK", [1 << 18, 0], 3612 + 576));
    assert_eq!(
        Decoder::new(&kpvk, [1 << 18, 0]).decode(3612 + 576),
        Decoded::Position(fen("3k4/8/8/8/8/2P5/1K6/8 b - - 0 1"))
    );
    // Colours swapped: KvKP, White Ke1, Black Ke8 Pd5, White to move, is KPvK with White Ke1 Pd4,
    // Black Ke8, Black to move. kk: a1 60, b1-d1 3 * 58 = 234 pairs before e1; e8 = 60 less e1
    // and its 5 neighbours: 234 + 54 = 288.
    assert_eq!(
        locate(&fen("4k3/8/8/3p4/8/8/8/4K3 w - - 0 1")),
        stored("KPvK", d4, 3612 + 288)
    );
    // A king on a pawn's square is an index, not a position: with White's pawn on c2, kk 6 is
    // White's king on a1 and Black's on c2 (after c1 d1 e1 f1 g1 h1).
    assert_eq!(
        Decoder::new(&kpvk, [1 << 10, 0]).decode(6),
        Decoded::Collision { square: 10 }
    );

    // The king-pair list: White's king on a1 b1 c1 d1 b2 c2 d2 c3 d3 d4 for 33, 58, 58, 58, 30,
    // 55, 55, 30, 55, 30 pairs; with pawns on every square, ascending, 3,612 pairs.
    let d = Decoder::new(&kqvk, none);
    // The kings at kk, the queen on h8 (rank 63), or g8 if Black's king stands there.
    let kings = |kk: u64| {
        [63, 62]
            .into_iter()
            .find_map(|r| match d.decode(kk * 64 + r) {
                Decoded::Position(p) => Some((king_of(&p, Color::White), king_of(&p, Color::Black))),
                Decoded::Collision { .. } => None,
            })
            .unwrap()
    };
    let mut runs: Vec<(u8, u64)> = Vec::new();
    let mut last = None;
    for kk in 0..462 {
        let (wk, bk) = kings(kk);
        if on_diagonal(wk) {
            assert!(!above_diagonal(bk));
        }
        // Ascending: by White's king's place in the triangle, then by Black's king's square.
        let place = Some((TRIANGLE.iter().position(|&s| s == wk).unwrap(), bk));
        assert!(last < place);
        last = place;
        match runs.last_mut() {
            Some((w, n)) if *w == wk => *n += 1,
            _ => runs.push((wk, 1)),
        }
    }
    assert_eq!(
        runs,
        TRIANGLE
            .iter()
            .copied()
            .zip([33, 58, 58, 58, 30, 55, 55, 30, 55, 30])
            .collect::<Vec<_>>()
    );
    // With pawns, in ascending (wk, bk) order: KRPvK with White's pawn on a2 and the rook on h8
    // (rank 63); an index is a collision only where a king stands on a2 or h8.
    let krpvk = Material::parse("KRPvK").unwrap();
    let d = Decoder::new(&krpvk, [1 << 8, 0]);
    let mut previous = None;
    for kk in 0..3612 {
        match d.decode(kk * 64 + 63) {
            Decoded::Position(p) => {
                let pair = (king_of(&p, Color::White), king_of(&p, Color::Black));
                assert!(previous < Some(pair));
                previous = Some(pair);
            }
            Decoded::Collision { square } => assert!(square == 8 || square == 63),
        }
    }
}

/// The ordered pairs of squares for two kings that are distinct, not next to each other and off
/// the squares of `taken`, counted square by square (without the index's tables).
fn king_placements(taken: u64) -> u64 {
    let mut n = 0;
    for wk in 0..64u8 {
        for bk in 0..64u8 {
            let apart = (wk % 8).abs_diff(bk % 8) > 1 || (wk / 8).abs_diff(bk / 8) > 1;
            if apart && (taken >> wk) & 1 == 0 && (taken >> bk) & 1 == 0 {
                n += 1;
            }
        }
    }
    n
}

/// C(n, k), computed here.
fn choose(n: u64, k: u64) -> u64 {
    (0..k).fold(1, |c, i| c * (n - i) / (i + 1))
}

/// The ways to put the groups of `m` (as sets of squares) on `free` squares, one man a square.
fn group_placements(m: &Material, mut free: u64) -> u64 {
    let mut ways = 1;
    for color in [Color::White, Color::Black] {
        for kind in 1..PAWN {
            let k = u64::from(m.count(color, kind));
            ways *= choose(free, k);
            free -= k;
        }
    }
    ways
}

#[test]
fn every_index_decodes_and_locates_back() {
    // (material, every how manyth canonical slice; self-mirror slices are always taken).
    for (name, step) in [
        ("KQvK", 1),
        ("KRRvK", 1),
        ("KBNvK", 1),
        ("KPvK", 1),
        ("KPvKP", 37),
        ("KPPvK", 23),
    ] {
        let m = Material::parse(name).unwrap();
        let pawnless = !m.has_pawns();
        // Real positions (both sides to move) the indices stand for: 8 or 4 per pawnless index,
        // 2 or 1 per pawnful one.
        let mut real = 0u64;
        let mut legal = 0u64;
        for (n, &key) in m.canonical_keys().iter().enumerate() {
            let self_mirror = key == [mirror(key[0]), mirror(key[1])];
            if n % step != 0 && !self_mirror {
                continue;
            }
            let d = Decoder::new(&m, key);
            assert_eq!(d.len(), 2 * m.per_side());
            let mut positions = 0u64;
            for i in 0..d.len() {
                let Decoded::Position(p) = d.decode(i) else {
                    continue;
                };
                // Every position an index holds, legal or not, locates back to that index: so no
                // two indices hold one position.
                assert_eq!(
                    locate(&p),
                    Location::Stored {
                        material: m,
                        key,
                        index: i
                    },
                    "{name} {}",
                    p.fen()
                );
                assert_eq!(p.turn() == Color::White, i < m.per_side());
                positions += 1;
                legal += u64::from(p.is_legal());
                real += match (pawnless, self_mirror) {
                    (true, _) if kings_on_diagonal(&p) => 4,
                    (true, _) => 8,
                    (false, true) => 1,
                    (false, false) => 2,
                };
            }
            // Each placement of the men on distinct squares (kings apart, like men unlabelled) is
            // one position of the slice, in table form.
            if !pawnless {
                let pawns = key[0] | key[1];
                let free = 64 - u64::from(pawns.count_ones()) - 2;
                assert_eq!(
                    positions,
                    2 * king_placements(pawns) * group_placements(&m, free),
                    "{name} {}",
                    Pawns(key)
                );
            }
        }
        assert!(legal > 0, "{name}");
        // Pawnless: the indices stand for every placement on the board, each once.
        if pawnless {
            assert_eq!(real, 2 * king_placements(0) * group_placements(&m, 62), "{name}");
        }
        if name == "KPvK" {
            let all: u64 = (8..56).map(|p| king_placements(1 << p)).sum();
            assert_eq!(real, 2 * all);
        }
    }
}

#[test]
fn the_eight_images_locate_to_one_index_or_the_diagonal_twin() {
    for name in [
        "KQvK", "KvKR", "KBNvK", "KRvKN", "KRRvK", "KNNvK", "KQvKR", "KRvKR",
    ] {
        let m = Material::parse(name).unwrap().normalized();
        let mut twins = 0;
        for p in random_positions(name, 3000, name.len() as u64 * 104_729 + 3) {
            let (wk, bk) = (king_of(&p, Color::White), king_of(&p, Color::Black));
            let main = on_main_diagonal(wk) && on_main_diagonal(bk);
            let anti = on_anti_diagonal(wk) && on_anti_diagonal(bk);
            // The symmetries keep both kings on one long diagonal; the table form has them on
            // a1-h8. The position's mirror image in the diagonal its kings stand on (in a1-h8
            // if none) is its twin.
            let twin = if anti {
                p.transposed().file_mirrored().rank_mirrored()
            } else {
                p.transposed()
            };
            let (a, b) = (index_of(&p), index_of(&twin));
            assert_eq!(a != b, (main || anti) && twin != p, "{name} {}", p.fen());
            if a != b {
                twins += 1;
            }
            let mut seen = Vec::new();
            let mut all = images(&p);
            if m.swapped() != m {
                // The other colouring is looked up with colours swapped: the same value, index.
                all.extend(images(&p.color_swapped()));
            }
            for q in all {
                let i = index_of(&q);
                assert!(
                    i == a || i == b,
                    "{name} {} -> {}: {i} not {a} or {b}",
                    p.fen(),
                    q.fen()
                );
                seen.push(i);
            }
            assert!(seen.contains(&a) && seen.contains(&b));
        }
        assert!(twins > 0, "{name}");
    }
}

#[test]
fn decode_then_locate_gives_the_same_position() {
    // Every index of KQvK and KRvK, a sample of larger materials (KRRvK: like men).
    for (material, step) in [
        ("KQvK", 1),
        ("KRvK", 1),
        ("KQvKR", 53),
        ("KBNvK", 89),
        ("KRRvK", 7),
    ] {
        let mut diagonal = 0;
        let mut both = 0;
        let mut king_squares = [0u32; 64];
        for (m, key, i, p) in sample_positions(material, step) {
            let Location::Stored {
                material: lm,
                key: lk,
                index,
            } = locate(&p)
            else {
                panic!()
            };
            assert_eq!((lm, lk, index), (m, key, i), "{material} {}", p.fen());
            let wk = king_of(&p, Color::White);
            king_squares[usize::from(wk)] += 1;
            if on_diagonal(wk) {
                diagonal += 1;
                let t = p.transposed();
                assert_eq!(king_of(&t, Color::White), wk);
                let j = index_of(&t);
                if kings_on_diagonal(&p) {
                    // Both kings on the diagonal: the transpose is stored too, at its own index,
                    // as itself.
                    both += 1;
                    assert_eq!(Decoder::new(&m, key).decode(j), Decoded::Position(t.clone()));
                    assert_eq!(j == index, t == p, "{} / {}", p.fen(), t.fen());
                } else {
                    // Black's king below the diagonal; the transpose has it above, and step 4
                    // brings it back.
                    assert!(!above_diagonal(king_of(&p, Color::Black)), "{}", p.fen());
                    assert_eq!(j, index, "{}", t.fen());
                }
            }
        }
        assert!(diagonal > 0 && both > 0, "{material}");
        // White's king stands on exactly the triangle.
        let reached: Vec<u8> = (0..64).filter(|&s| king_squares[usize::from(s)] > 0).collect();
        assert_eq!(reached, TRIANGLE, "{material}");
    }
}

#[test]
fn symmetric_positions_share_an_index() {
    for (material, step) in [("KQvKR", 61), ("KBNvK", 4099), ("KRvKR", 37), ("KRRvK", 101)] {
        for (m, key, _, p) in sample_positions(material, step) {
            let here = index_of(&p);
            let diagonal = kings_on_diagonal(&p);
            let twin = index_of(&p.transposed());
            assert_eq!(twin == here, !diagonal || p.transposed() == p, "{}", p.fen());
            let mut all = images(&p);
            // With the same men on both sides, both colourings are stored (each side to move).
            if m.swapped() != m {
                all.extend(images(&p.color_swapped()));
            }
            let mut seen = Vec::new();
            for q in all {
                let Location::Stored {
                    material: lm,
                    key: lk,
                    index,
                } = locate(&q)
                else {
                    panic!()
                };
                assert_eq!((lm, lk), (m, key));
                // One index; with both kings on the diagonal, the position's or its transpose's.
                assert!(index == here || index == twin, "{} vs {}", p.fen(), q.fen());
                seen.push(index);
            }
            assert!(seen.contains(&here) && seen.contains(&twin));
        }
    }
    // KRvKR: the colour-swapped image is White's turn where this is Black's.
    let p = fen("8/8/8/5r2/8/8/2k5/KR6 w - - 0 1");
    let (Location::Stored { index: a, .. }, Location::Stored { index: b, .. }) =
        (locate(&p), locate(&p.color_swapped()))
    else {
        panic!()
    };
    let per_side = Material::parse("KRvKR").unwrap().per_side();
    assert_eq!((a < per_side, b < per_side), (true, false));
    for (material, step) in [("KPvK", 7), ("KPvKP", 257), ("KPPvKP", 4097), ("KRPvKR", 65537)] {
        for (m, key, _, p) in sample_positions(material, step) {
            let here = locate(&p);
            let swaps = m.swapped() != m;
            if swaps {
                assert_eq!(locate(&p.color_swapped()), here, "{}", p.fen());
            }
            if key != [mirror(key[0]), mirror(key[1])] {
                assert_eq!(locate(&p.file_mirrored()), here, "{}", p.fen());
                if swaps {
                    assert_eq!(locate(&p.file_mirrored().color_swapped()), here, "{}", p.fen());
                }
            } else {
                // A self-mirror slice stores both images, each where it stands.
                let Location::Stored { key: k, .. } = locate(&p.file_mirrored()) else {
                    panic!()
                };
                assert_eq!(k, key);
            }
        }
    }
    assert_eq!(locate(&fen("8/8/8/8/8/8/8/4K2k w - - 0 1")), Location::BareKings);
}

#[test]
fn values_order_and_read_right() {
    use value::*;
    let win = |n: u32| 2 + n;
    let loss = |n: u32| 2 + n;
    assert_eq!(from_child(CHECKMATED), win(1));
    assert_eq!(from_child(win(1)), loss(2));
    assert_eq!(from_child(DRAW), DRAW);
    assert_eq!(better(win(3), win(5)), win(3));
    assert_eq!(better(DRAW, win(9)), win(9));
    assert_eq!(better(DRAW, loss(2)), DRAW);
    assert_eq!(better(loss(2), loss(8)), loss(8));
    assert_eq!(better(CHECKMATED, loss(4)), loss(4));
    assert_eq!(describe(win(7)), "win in 7 plies");
    assert_eq!(describe(loss(4)), "loss in 4 plies");
    assert_eq!(describe(DRAW), "draw");
    assert_eq!(describe(0), "illegal");
}

// ---------------------------------------------------------------------------------------------
// A brute-force table builder (tests only)

/// Not yet known, during a build.
const UNKNOWN: u32 = u32::MAX;

/// Builds the table of `name` in `dir` by retrograde analysis, from the tables it leads into
/// (already in `dir`), writes it and returns its slices. Only for materials where one side has
/// pawns (no en passant). Slices are built successors first (pushes raise the sum of pawn ranks
/// counted from each side's own first rank).
fn build_table(dir: &Path, name: &str, threads: usize) -> Vec<([u64; 2], Vec<u16>)> {
    let material = Material::parse(name).unwrap().normalized();
    let library = Library::new(dir);
    let mut keys = material.canonical_keys();
    let advance = |k: &[u64; 2]| {
        (0..64)
            .map(|s| (k[0] >> s & 1) * (s / 8) + (k[1] >> s & 1) * (7 - s / 8))
            .sum::<u64>()
    };
    keys.sort_by_key(|k| std::cmp::Reverse(advance(k)));
    let mut done: HashMap<[u64; 2], Vec<u16>> = HashMap::new();
    for &key in &keys {
        let values = build_slice(&library, material, key, &done, threads);
        done.insert(key, values);
    }
    let mut slices: Vec<([u64; 2], Vec<u16>)> = done.into_iter().collect();
    slices.sort_by_key(|s| s.0);
    write(dir, &material.to_string(), &slices);
    slices
}

/// What a position's moves out of its slice offer it, and how many moves stay inside.
#[derive(Clone, Copy, Default)]
struct Exits {
    legal: bool,
    moves: u32,
    inside: u32,
    /// The quickest win an exit gives, in plies.
    win: Option<u32>,
    draw: bool,
    /// The slowest loss the exits give, in plies (0 if none).
    loss: u32,
}

/// One slice by retrograde analysis: exits first, then levels n = 0, 1, ... where the positions
/// that win or lose in exactly n plies are fixed and their predecessors inside the slice told.
fn build_slice(
    library: &Library<'_>,
    material: Material,
    key: [u64; 2],
    done: &HashMap<[u64; 2], Vec<u16>>,
    threads: usize,
) -> Vec<u16> {
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
    type Memo = HashMap<(Material, [u64; 2]), std::sync::Arc<Vec<u16>>>;
    let decoder = Decoder::new(&material, key);
    let n = decoder.len() as usize;
    let chunk = n.div_ceil(threads);
    // Calls `f(index, position, in-slice child index or the child's stored value)` per move.
    let each_move =
        |memo: &mut Memo, i: usize, f: &mut dyn FnMut(Result<u32, u32>)| -> Option<(Position, u32)> {
            let Decoded::Position(p) = decoder.decode(i as u64) else {
                return None;
            };
            if !p.is_legal() {
                return None;
            }
            let moves = p
                .for_each_child(|c| {
                    assert!(c.ep().is_none(), "the builder handles no en passant");
                    f(match locate(c) {
                        Location::BareKings => Err(value::DRAW),
                        Location::Stored {
                            material: m,
                            key: k,
                            index,
                        } if m == material && k == key => Ok(index as u32),
                        Location::Stored {
                            material: m,
                            key: k,
                            index,
                        } if m == material => Err(u32::from(done[&k][index as usize])),
                        Location::Stored {
                            material: m,
                            key: k,
                            index,
                        } => {
                            let slice = memo.entry((m, k)).or_insert_with(|| library.slice(m, k).unwrap());
                            Err(u32::from(slice[index as usize]))
                        }
                    });
                    Ok::<(), ()>(())
                })
                .unwrap();
            Some((p, moves as u32))
        };

    // Pass 1: exits, and how many predecessors each position has inside the slice.
    let in_degree: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
    let mut exits = vec![Exits::default(); n];
    std::thread::scope(|s| {
        for (c, part) in exits.chunks_mut(chunk).enumerate() {
            let (each_move, in_degree) = (&each_move, &in_degree);
            s.spawn(move || {
                let mut memo = Memo::new();
                for (j, e) in part.iter_mut().enumerate() {
                    let mut x = Exits::default();
                    let found = each_move(&mut memo, c * chunk + j, &mut |child| match child {
                        Ok(ci) => {
                            x.inside += 1;
                            in_degree[ci as usize].fetch_add(1, Relaxed);
                        }
                        Err(v) => match value::from_child(v) {
                            value::DRAW => x.draw = true,
                            mine if (mine - 2) % 2 == 1 => {
                                x.win = Some(x.win.map_or(mine - 2, |w| w.min(mine - 2)))
                            }
                            mine => x.loss = x.loss.max(mine - 2),
                        },
                    });
                    if let Some((p, moves)) = found {
                        x.legal = true;
                        x.moves = moves;
                        // A mover without moves is checkmated (loss in 0) or stalemated.
                        if moves == 0 && !p.in_check() {
                            x.draw = true;
                        }
                        *e = x;
                    }
                }
            });
        }
    });

    // Pass 2: predecessor lists (compressed rows).
    let mut start = vec![0u64; n + 1];
    for i in 0..n {
        start[i + 1] = start[i] + u64::from(in_degree[i].load(Relaxed));
    }
    let cursor: Vec<AtomicU64> = start[..n].iter().map(|&s| AtomicU64::new(s)).collect();
    let preds: Vec<AtomicU32> = (0..start[n]).map(|_| AtomicU32::new(0)).collect();
    std::thread::scope(|s| {
        for c in 0..threads {
            let (each_move, cursor, preds) = (&each_move, &cursor, &preds);
            s.spawn(move || {
                let mut memo = Memo::new();
                for i in c * chunk..((c + 1) * chunk).min(n) {
                    each_move(&mut memo, i, &mut |child| {
                        if let Ok(ci) = child {
                            let at = cursor[ci as usize].fetch_add(1, Relaxed);
                            preds[at as usize].store(i as u32, Relaxed);
                        }
                    });
                }
            });
        }
    });
    let preds: Vec<u32> = preds.into_iter().map(AtomicU32::into_inner).collect();

    // Levels. A loss waits until every child inside the slice is a known win.
    let mut values = vec![UNKNOWN; n];
    let mut remaining: Vec<u32> = exits.iter().map(|e| e.inside).collect();
    let mut slowest: Vec<u32> = exits.iter().map(|e| e.loss).collect();
    let mut levels: Vec<Vec<u32>> = Vec::new();
    let push = |levels: &mut Vec<Vec<u32>>, level: u32, i: usize| {
        if levels.len() <= level as usize {
            levels.resize(level as usize + 1, Vec::new());
        }
        levels[level as usize].push(i as u32);
    };
    for (i, e) in exits.iter().enumerate() {
        if !e.legal {
            values[i] = value::ILLEGAL;
        } else if let Some(w) = e.win {
            push(&mut levels, w, i);
        } else if e.inside == 0 && !e.draw {
            push(&mut levels, e.loss, i); // checkmate (no moves) is a loss in 0
        }
    }
    let mut level = 0;
    while level < levels.len() {
        let here = std::mem::take(&mut levels[level]);
        for i in here {
            let i = i as usize;
            if values[i] != UNKNOWN {
                continue;
            }
            values[i] = 2 + level as u32;
            for &q in &preds[start[i] as usize..start[i + 1] as usize] {
                let q = q as usize;
                if values[q] != UNKNOWN {
                    continue;
                }
                if level % 2 == 0 {
                    push(&mut levels, level as u32 + 1, q);
                } else {
                    remaining[q] -= 1;
                    slowest[q] = slowest[q].max(level as u32 + 1);
                    if remaining[q] == 0 && exits[q].win.is_none() && !exits[q].draw {
                        push(&mut levels, slowest[q], q);
                    }
                }
            }
        }
        level += 1;
    }
    values
        .into_iter()
        .map(|v| {
            if v == UNKNOWN {
                value::DRAW as u16
            } else {
                v as u16
            }
        })
        .collect()
}

fn write(dir: &Path, name: &str, slices: &[([u64; 2], Vec<u16>)]) {
    let meta = TableMeta {
        material: name.to_owned(),
        metric: Metric::Dtm,
        index_layout: LAYOUT,
    };
    let data: Vec<SliceData<'_>> = slices
        .iter()
        .map(|(key, v)| SliceData { key: *key, values: v })
        .collect();
    write_table(&dir.join(table_file_name(name)), &meta, &data).unwrap();
}

/// Slices of a table: `(key, values)`, sorted by key.
type Slices = Vec<([u64; 2], Vec<u16>)>;

/// Tables built by [`build_table`] on first use, once per test process, and their values.
struct Fixture {
    dir: tempfile::TempDir,
    tables: std::sync::Mutex<HashMap<String, Slices>>,
}

/// The tables a fixture table leads into.
fn successors(name: &str) -> &'static [&'static str] {
    match name {
        "KPvK" => &["KQvK", "KRvK", "KBvK", "KNvK"],
        "KQvKR" => &["KQvK", "KRvK"],
        _ => &[],
    }
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| Fixture {
        dir: tempfile::tempdir().unwrap(),
        tables: Default::default(),
    })
}

/// Builds `name` (after its successors) unless built; returns the names it needed, itself last.
fn ensure(tables: &mut HashMap<String, Slices>, name: &str, needed: &mut Vec<String>) {
    for s in successors(name) {
        ensure(tables, s, needed);
    }
    if !tables.contains_key(name) {
        let slices = build_table(fixture().dir.path(), name, 2);
        tables.insert(name.to_owned(), slices);
    }
    if !needed.iter().any(|n| n == name) {
        needed.push(name.to_owned());
    }
}

/// The values of fixture table `name`.
fn table(name: &str) -> Slices {
    let mut tables = super::lock(&fixture().tables);
    ensure(&mut tables, name, &mut Vec::new());
    tables[name].clone()
}

/// A fresh folder holding fixture tables `names` and the tables they lead into.
fn folder(names: &[&str]) -> tempfile::TempDir {
    let mut tables = super::lock(&fixture().tables);
    let mut needed = Vec::new();
    for name in names {
        ensure(&mut tables, name, &mut needed);
    }
    let dir = tempfile::tempdir().unwrap();
    for name in needed {
        let file = table_file_name(&name);
        std::fs::copy(fixture().dir.path().join(&file), dir.path().join(&file)).unwrap();
    }
    dir
}

/// A folder with fixture table `name` (and its successors), `name` replaced by `slices`.
fn with_table(name: &str, slices: &[([u64; 2], Vec<u16>)]) -> tempfile::TempDir {
    let dir = folder(&[name]);
    write(dir.path(), name, slices);
    dir
}

fn verify(dir: &Path, name: &str, threads: usize) -> Result<VerifyReport, VerifyError> {
    verify_table(
        dir,
        name,
        &VerifyOptions {
            threads,
            ..Default::default()
        },
        &|_, _| {},
    )
}

/// The largest stored win for the side to move, in plies.
fn longest_win(slices: &Slices, turn: Color) -> u32 {
    let mut best = 0;
    for (_, values) in slices {
        let half = values.len() / 2;
        let part = if turn == Color::White {
            &values[..half]
        } else {
            &values[half..]
        };
        for &v in part {
            if v >= 2 && (v - 2) % 2 == 1 {
                best = best.max(u32::from(v - 2));
            }
        }
    }
    best
}

// ---------------------------------------------------------------------------------------------
// End to end

#[test]
fn brute_force_tables_have_the_known_longest_mates() {
    // KQK: mate in 10 moves; KRK: mate in 16 moves (White to move).
    assert_eq!(longest_win(&table("KQvK"), Color::White), 19);
    assert_eq!(longest_win(&table("KRvK"), Color::White), 31);
    assert_eq!(longest_win(&table("KBvK"), Color::White), 0);
    assert_eq!(longest_win(&table("KNvK"), Color::White), 0);
}

#[test]
fn good_tables_pass() {
    let dir = folder(&["KPvK"]);
    let dir = dir.path();
    for name in ["KQvK", "KRvK", "KBvK", "KNvK", "KPvK", "kvkp"] {
        let one = verify(dir, name, 1).unwrap();
        let two = verify(dir, name, 3).unwrap();
        assert_eq!(one, two);
        let m = Material::parse(name).unwrap().normalized();
        assert_eq!(one.material, m.to_string());
        assert_eq!(one.slices, m.canonical_keys().len());
        assert_eq!(one.indices, one.slices as u64 * 2 * m.per_side());
        assert!(one.positions > 0 && one.positions < one.indices);
    }
}

/// A 25% sample of KPvK (24 slices of 2 * 3,612 indices, one unit each) checks units 0, 4,
/// 8, 12, 16 and 20: six slices' indices, and fewer positions than the whole table.
#[test]
fn a_sample_checks_a_share_of_the_units() {
    let dir = folder(&["KPvK"]);
    let whole = verify(dir.path(), "KPvK", 2).unwrap();
    let opts = VerifyOptions {
        threads: 2,
        sample_percent: Some(25),
        ..Default::default()
    };
    let sample = verify_table(dir.path(), "KPvK", &opts, &|_, _| {}).unwrap();
    assert_eq!(sample.indices, 6 * 2 * 3612);
    assert_eq!(whole.indices, 24 * 2 * 3612);
    assert!(
        sample.positions > 0 && sample.positions < whole.positions / 2,
        "{sample:?}"
    );
}

#[test]
fn progress_reaches_the_total() {
    let seen = std::sync::Mutex::new(Vec::new());
    let dir = folder(&["KPvK"]);
    let report = verify_table(
        dir.path(),
        "KPvK",
        &VerifyOptions {
            threads: 2,
            ..Default::default()
        },
        &|done, total| seen.lock().unwrap().push((done, total)),
    )
    .unwrap();
    let seen = seen.into_inner().unwrap();
    assert!(seen.iter().all(|&(_, t)| t == report.indices));
    assert_eq!(seen.iter().map(|&(d, _)| d).max(), Some(report.indices));
}

/// The slices of `name` with each `(key, index, value)` of `edits` written in.
fn edited(name: &str, edits: &[([u64; 2], u64, u16)]) -> Vec<([u64; 2], Vec<u16>)> {
    let mut slices = table(name);
    for &(key, index, v) in edits {
        let slice = slices.iter_mut().find(|s| s.0 == key).unwrap();
        slice.1[index as usize] = v;
    }
    slices
}

/// The FEN of index `index` of slice `key` of `name`.
fn fen_at(name: &str, key: [u64; 2], index: u64) -> String {
    let m = Material::parse(name).unwrap();
    match Decoder::new(&m, key).decode(index) {
        Decoded::Position(p) => p.fen(),
        Decoded::Collision { .. } => panic!("no position"),
    }
}

/// The first index of slice `key` of `name` whose value satisfies `pred`.
fn find(name: &str, key: [u64; 2], pred: impl Fn(u64, u16) -> bool) -> u64 {
    let slices = table(name);
    let values = &slices.iter().find(|s| s.0 == key).unwrap().1;
    (0..values.len() as u64)
        .find(|&i| pred(i, values[i as usize]))
        .unwrap()
}

fn assert_mismatch(result: Result<VerifyReport, VerifyError>, fen: &str, stored: &str, derived: &str) {
    match result {
        Err(VerifyError::Mismatch {
            material: _,
            fen: f,
            stored: s,
            derived: d,
        }) => {
            assert_eq!((f.as_str(), s.as_str(), d.as_str()), (fen, stored, derived));
        }
        other => panic!("expected a mismatch at {fen}, got {other:?}"),
    }
}

#[test]
fn a_wrong_distance_is_caught() {
    let key = [0, 0];
    // A White win in 7 plies, stored as 9.
    let i = find("KRvK", key, |_, v| v == 2 + 7);
    let dir = with_table("KRvK", &edited("KRvK", &[(key, i, 2 + 9)]));
    for threads in [1, 2] {
        assert_mismatch(
            verify(dir.path(), "KRvK", threads),
            &fen_at("KRvK", key, i),
            "win in 9 plies",
            "win in 7 plies",
        );
    }
}

/// A successor read a block at a time (in these tests every slice over 4,096 values, with
/// three blocks kept per worker) is read right: KPvK's promotions lead into KQvK, KRvK, KBvK and
/// KNvK; with every legal KQvK position made a draw, a KPvK win through a queen's promotion no
/// longer derives.
#[test]
fn large_successors_are_read_by_blocks() {
    assert!(2 * Material::parse("KQvK").unwrap().per_side() > super::WHOLE_VALUES);
    let dir = folder(&["KPvK"]);
    verify(dir.path(), "KPvK", 2).unwrap();
    let drawn: Vec<([u64; 2], Vec<u16>)> = table("KQvK")
        .into_iter()
        .map(|(key, values)| (key, values.iter().map(|&v| v.min(value::DRAW as u16)).collect()))
        .collect();
    write(dir.path(), "KQvK", &drawn);
    for threads in [1, 2] {
        match verify(dir.path(), "KPvK", threads) {
            Err(VerifyError::Mismatch { stored, derived, .. }) => {
                assert!(stored.starts_with("win"), "{stored}");
                assert_ne!(stored, derived);
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn a_draw_made_a_win_is_caught() {
    let key = [0, 0];
    let i = find("KRvK", key, |_, v| v == value::DRAW as u16);
    let dir = with_table("KRvK", &edited("KRvK", &[(key, i, 2 + 3)]));
    assert_mismatch(
        verify(dir.path(), "KRvK", 2),
        &fen_at("KRvK", key, i),
        "win in 3 plies",
        "draw",
    );
}

#[test]
fn a_legal_position_stored_illegal_is_caught() {
    let key = [0, 0];
    // Black to move with only the black king's moves: the first legal one.
    let per_side = Material::parse("KQvK").unwrap().per_side();
    let i = find("KQvK", key, |i, v| i >= per_side && v != 0);
    let was = table("KQvK")[0].1[i as usize];
    let dir = with_table("KQvK", &edited("KQvK", &[(key, i, 0)]));
    let result = verify(dir.path(), "KQvK", 2);
    // Either this position is reported, or an earlier one whose child it is.
    match result {
        Err(VerifyError::Mismatch {
            fen, stored, derived, ..
        }) => {
            assert_eq!(fen, fen_at("KQvK", key, i));
            assert_eq!(stored, "illegal");
            assert_eq!(derived, value::describe(u32::from(was)));
        }
        Err(VerifyError::IllegalSuccessor {
            successor,
            successor_material,
            ..
        }) => {
            assert_eq!(successor, fen_at("KQvK", key, i));
            assert_eq!(successor_material, "KQvK");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_illegal_position_stored_legal_is_caught() {
    let key = [0, 0];
    // Index 0: White's king on a1, Black's on c1, the knight on a1 (rank 0).
    let dir = with_table("KNvK", &edited("KNvK", &[(key, 0, value::DRAW as u16)]));
    match verify(dir.path(), "KNvK", 2) {
        Err(VerifyError::Mismatch {
            fen, stored, derived, ..
        }) => {
            assert!(fen.contains("index 0"), "{fen}");
            assert_eq!((stored.as_str(), derived.as_str()), ("draw", "illegal"));
        }
        other => panic!("{other:?}"),
    }
    // A decodable but illegal position: the side not to move in check (kings never stand side
    // by side at an index).
    let i = find("KNvK", key, |i, v| {
        v == 0
            && matches!(
                Decoder::new(&Material::parse("KNvK").unwrap(), key).decode(i),
                Decoded::Position(_)
            )
    });
    let dir = with_table("KNvK", &edited("KNvK", &[(key, i, value::DRAW as u16)]));
    assert_mismatch(
        verify(dir.path(), "KNvK", 1),
        &fen_at("KNvK", key, i),
        "draw",
        "illegal",
    );
}

#[test]
fn the_first_wrong_position_is_reported_whatever_the_threads() {
    // Two wrong values in different slices (and units) of KPvK: the lower slice wins.
    let keys: Vec<[u64; 2]> = table("KPvK").iter().map(|s| s.0).collect();
    let (early, late) = (keys[3], keys[20]);
    let i = find("KPvK", early, |_, v| v >= 2);
    let j = find("KPvK", late, |_, v| v >= 2);
    let dir = with_table(
        "KPvK",
        &edited(
            "KPvK",
            &[(late, j, value::DRAW as u16), (early, i, value::DRAW as u16)],
        ),
    );
    for threads in [1, 2, 5] {
        match verify(dir.path(), "KPvK", threads) {
            Err(VerifyError::Mismatch { fen, stored, .. }) => {
                assert_eq!(fen, fen_at("KPvK", early, i), "threads {threads}");
                assert_eq!(stored, "draw");
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn slice_sets_are_checked() {
    let good = table("KPvK");
    // A missing slice.
    let mut missing = good.clone();
    let gone = missing.remove(5).0;
    let dir = with_table("KPvK", &missing);
    match verify(dir.path(), "KPvK", 1) {
        Err(VerifyError::MissingSlice { key, .. }) => assert_eq!(key.0, gone),
        other => panic!("{other:?}"),
    }
    // A non-canonical slice (pawn on h2, the mirror of a2).
    let mut extra = good.clone();
    extra.push(([1 << 15, 0], good[0].1.clone()));
    extra.sort_by_key(|s| s.0);
    let dir = with_table("KPvK", &extra);
    match verify(dir.path(), "KPvK", 1) {
        Err(VerifyError::UnexpectedSlice { key, .. }) => assert_eq!(key.0, [1 << 15, 0]),
        other => panic!("{other:?}"),
    }
    // A slice of the wrong size.
    let mut short = good.clone();
    short[2].1.pop();
    let dir = with_table("KPvK", &short);
    assert!(matches!(
        verify(dir.path(), "KPvK", 1),
        Err(VerifyError::WrongSliceSize { count: 7223, .. })
    ));
}

#[test]
fn files_are_checked() {
    // A missing successor table names the file.
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "KPvK", &table("KPvK"));
    match verify(dir.path(), "KPvK", 1) {
        Err(VerifyError::MissingTable { file }) => {
            assert!(["KQvK.zmt", "KRvK.zmt", "KBvK.zmt", "KNvK.zmt"]
                .contains(&file.file_name().unwrap().to_str().unwrap()))
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        verify(dir.path(), "KRvK", 1),
        Err(VerifyError::MissingTable { .. })
    ));
    assert!(matches!(
        verify(dir.path(), "KvK", 1),
        Err(VerifyError::BadMaterial { .. })
    ));

    // A header naming another material.
    let dir = tempfile::tempdir().unwrap();
    let meta = TableMeta {
        material: "KQvK".to_owned(),
        metric: Metric::Dtm,
        index_layout: LAYOUT,
    };
    let krvk = table("KRvK");
    let slices = [SliceData {
        key: [0, 0],
        values: &krvk[0].1,
    }];
    write_table(&dir.path().join("KRvK.zmt"), &meta, &slices).unwrap();
    assert!(matches!(
        verify(dir.path(), "KRvK", 1),
        Err(VerifyError::WrongMaterial { .. })
    ));

    // Another index layout: layout 1 (the a1-d4 quadrant, 16 king squares) and layout 2 (White's
    // king on the triangle, 6 bits a man) are refused, whatever the size of their slice, and so
    // is any other.
    for (layout, values) in [
        (1, vec![0; 2 * 16 * 64]),
        (1, krvk[0].1.clone()),
        (2, vec![0; 2 * 10 * 64 * 64]),
        (2, krvk[0].1.clone()),
        (4, krvk[0].1.clone()),
    ] {
        let meta = TableMeta {
            material: "KRvK".to_owned(),
            metric: Metric::Dtm,
            index_layout: layout,
        };
        let slices = [SliceData {
            key: [0, 0],
            values: &values,
        }];
        write_table(&dir.path().join("KRvK.zmt"), &meta, &slices).unwrap();
        match verify(dir.path(), "KRvK", 1) {
            Err(e @ VerifyError::WrongLayout { found, .. }) => {
                assert_eq!(found, layout);
                let message = e.to_string();
                assert!(
                    message.contains(&format!("has index layout {layout}"))
                        && message.contains("reads layout 3"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
    }
    // A successor table of layout 1 or 2 is refused too.
    for layout in [1, 2] {
        let dir = folder(&["KPvK"]);
        let kqvk = table("KQvK");
        let meta = TableMeta {
            material: "KQvK".to_owned(),
            metric: Metric::Dtm,
            index_layout: layout,
        };
        let slices = [SliceData {
            key: [0, 0],
            values: &kqvk[0].1,
        }];
        write_table(&dir.path().join("KQvK.zmt"), &meta, &slices).unwrap();
        match verify(dir.path(), "KPvK", 1) {
            Err(VerifyError::WrongLayout { found, .. }) => assert_eq!(found, layout),
            other => panic!("{other:?}"),
        }
    }

    // A flipped byte in the values.
    let dir = folder(&["KRvK"]);
    let path: PathBuf = dir.path().join("KRvK.zmt");
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x20;
    std::fs::write(&path, bytes).unwrap();
    assert!(matches!(
        verify(dir.path(), "KRvK", 1),
        Err(VerifyError::Storage(_))
    ));
}

#[test]
fn a_child_with_an_en_passant_right_is_derived_not_read() {
    // KPvKP where every stored value is a draw, and KPvK where every stored value is a loss in 2.
    // After e2-e4 with a black pawn on d4, Black's best is d4xe3 e.p. into KPvK (colours
    // swapped): a loss in 2 for White there, so a win in 3 for Black here.
    let dir = tempfile::tempdir().unwrap();
    let kpvkp = Material::parse("KPvKP").unwrap();
    let slices: Vec<([u64; 2], Vec<u16>)> = kpvkp
        .canonical_keys()
        .into_iter()
        .map(|k| (k, vec![value::DRAW as u16; 2 * kpvkp.per_side() as usize]))
        .collect();
    write(dir.path(), "KPvKP", &slices);
    let kpvk = Material::parse("KPvK").unwrap();
    let slices: Vec<([u64; 2], Vec<u16>)> = kpvk
        .canonical_keys()
        .into_iter()
        .map(|k| (k, vec![2 + 2; 2 * kpvk.per_side() as usize]))
        .collect();
    write(dir.path(), "KPvK", &slices);

    let library = Library::new(dir.path());
    let start = fen("4k3/8/8/8/3p4/8/4P3/4K3 w - - 0 1");
    let Location::Stored { material, key, .. } = locate(&start) else {
        panic!()
    };
    // No half held: values of the slice itself are read from its file.
    let half = super::Half::held(std::borrow::Cow::Owned(Vec::new()), 0);
    let mut worker = super::Worker::new(&library, material, key, &half);
    let mut seen = Vec::new();
    start
        .for_each_child(|c| {
            let v = match worker.value(c) {
                Ok(v) => v,
                Err(_) => panic!("lookup failed"),
            };
            seen.push((c.fen(), v));
            Ok::<(), ()>(())
        })
        .unwrap();
    let after_push = seen
        .iter()
        .find(|(f, _)| f == "4k3/8/8/8/3pP3/8/8/4K3 b - e3 0 1")
        .unwrap();
    assert_eq!(after_push.1, 2 + 3);
    let after_single = seen
        .iter()
        .find(|(f, _)| f == "4k3/8/8/8/3p4/4P3/8/4K3 b - - 0 1")
        .unwrap();
    assert_eq!(after_single.1, value::DRAW);
    // So White's best here avoids e4.
    let mut w = super::Worker::new(&library, material, key, &half);
    assert_eq!(w.derive(&mut start.clone()).ok(), Some(value::DRAW));
}

/// A tiny deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) % n
    }
}

/// `count` random legal positions of `name` (as written: White may have the other side's men).
fn random_positions(name: &str, count: usize, seed: u64) -> Vec<Position> {
    let m = Material::parse(name).unwrap();
    let mut kinds = Vec::new();
    for color in [Color::White, Color::Black] {
        for kind in 0..6u8 {
            for _ in 0..m.count(color, kind) {
                kinds.push((color, kind));
            }
        }
    }
    let mut rng = Rng(seed | 1);
    let mut out = Vec::new();
    while out.len() < count {
        let men: Vec<(Color, u8, u8)> = kinds
            .iter()
            .map(|&(color, kind)| {
                let sq = if kind == PAWN {
                    8 + rng.below(48)
                } else {
                    rng.below(64)
                };
                (color, kind, sq as u8)
            })
            .collect();
        let turn = if rng.below(2) == 0 {
            Color::White
        } else {
            Color::Black
        };
        if let Some(p) = Position::from_men(&men, turn) {
            if p.is_legal() {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn the_images_of_a_position_read_one_value() {
    for (name, stored) in [
        ("KQvK", "KQvK"),
        ("KvKQ", "KQvK"),
        ("KRvK", "KRvK"),
        ("KvKR", "KRvK"),
        ("KBvK", "KBvK"),
        ("KNvK", "KNvK"),
    ] {
        let values = &table(stored)[0].1;
        let m = Material::parse(stored).unwrap();
        let decoder = Decoder::new(&m, [0, 0]);
        let mut twins = 0;
        for (n, p) in random_positions(name, 2000, name.len() as u64 * 7919 + 17)
            .into_iter()
            .enumerate()
        {
            // Every image of p, in both colourings: they all have p's value.
            let orbit: Vec<Position> = images(&p).into_iter().chain(images(&p.color_swapped())).collect();
            let mut indices = Vec::new();
            for q in images(&p) {
                let Location::Stored { material, key, index } = locate(&q) else {
                    panic!()
                };
                assert_eq!((material, key), (m, [0, 0]));
                let Decoded::Position(d) = decoder.decode(index) else {
                    panic!("{} locates to a collision", q.fen())
                };
                assert!(orbit.contains(&d), "{}: {} is no image of it", q.fen(), d.fen());
                assert_eq!(
                    values[index as usize],
                    values[indices.first().map_or(index, |&i: &u64| i) as usize],
                    "{name} #{n}: {} and {}",
                    p.fen(),
                    q.fen()
                );
                assert_ne!(values[index as usize], 0, "{} is stored as illegal", q.fen());
                if !indices.contains(&index) {
                    indices.push(index);
                }
            }
            // One index, or two twins (the king on the diagonal, the position not symmetric in it).
            assert!(indices.len() <= 2, "{}: {indices:?}", p.fen());
            if indices.len() == 2 {
                twins += 1;
                let [a, b] = [indices[0], indices[1]].map(|i| match decoder.decode(i) {
                    Decoded::Position(d) => d,
                    Decoded::Collision { .. } => unreachable!(),
                });
                assert!(kings_on_diagonal(&a));
                assert_eq!(a.transposed(), b);
            }
        }
        assert!(twins > 0, "{name}");
    }
}

#[test]
fn twins_hold_equal_values_in_brute_force_tables() {
    for name in ["KQvK", "KRvK", "KBvK", "KNvK"] {
        let values = &table(name)[0].1;
        let m = Material::parse(name).unwrap();
        let decoder = Decoder::new(&m, [0, 0]);
        let mut twins = 0;
        for i in 0..decoder.len() {
            let Decoded::Position(p) = decoder.decode(i) else {
                continue;
            };
            if !on_diagonal(king_of(&p, Color::White)) {
                continue;
            }
            let j = index_of(&p.transposed());
            assert_eq!(values[i as usize], values[j as usize], "{name}: {}", p.fen());
            if j != i {
                twins += 1;
            }
        }
        assert!(twins > 0);
    }
}

#[test]
fn a_twin_with_another_value_is_caught() {
    // A White win at an index with the king on the diagonal whose transpose is another index:
    // only this one of the pair is made wrong.
    let key = [0, 0];
    let m = Material::parse("KRvK").unwrap();
    let decoder = Decoder::new(&m, key);
    let i = find("KRvK", key, |i, v| {
        v >= 2
            && (v - 2) % 2 == 1
            && match decoder.decode(i) {
                Decoded::Position(p) => {
                    on_diagonal(king_of(&p, Color::White)) && index_of(&p.transposed()) != i
                }
                Decoded::Collision { .. } => false,
            }
    });
    let v = table("KRvK")[0].1[i as usize];
    let dir = with_table("KRvK", &edited("KRvK", &[(key, i, v + 2)]));
    assert_mismatch(
        verify(dir.path(), "KRvK", 2),
        &fen_at("KRvK", key, i),
        &value::describe(u32::from(v) + 2),
        &value::describe(u32::from(v)),
    );
}

// ---------------------------------------------------------------------------------------------
// Speed (run with `--ignored --nocapture`, in the `checked` profile)

#[test]
#[ignore = "builds KQvKR by brute force (minutes); prints the verify speed"]
fn speed_on_kqvkr() {
    let dir = folder(&["KQvK", "KRvK"]);
    let dir = dir.path();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let t = std::time::Instant::now();
    let slices = build_table(dir, "KQvKR", threads);
    eprintln!("built KQvKR in {:?}", t.elapsed());
    eprintln!(
        "KQvKR longest win (White to move): {} plies",
        longest_win(&slices, Color::White)
    );
    let table = Table::open(&dir.join("KQvKR.zmt")).unwrap();
    assert_eq!(table.slices().len(), 1);
    for threads in [1, 2] {
        let t = std::time::Instant::now();
        let report = verify(dir, "KQvKR", threads).unwrap();
        let secs = t.elapsed().as_secs_f64();
        eprintln!(
            "verify KQvKR, {threads} thread(s): {} indices, {} positions in {secs:.2} s ({:.2} M indices/s)",
            report.indices,
            report.positions,
            report.indices as f64 / secs / 1e6
        );
    }
}

/// [`super::check_slice`] on every slice of KPvK: the true values pass (every index for range and
/// legality, one index in seven derived from its children), and each kind of damage is caught:
/// a sampled position's value changed, 0 at a legal position, a value at an illegal index, a
/// value out of range, another length, a key that is not a slice of the material. A successor
/// not at hand skips the indices that need it, counted.
#[test]
fn check_slice_passes_true_values_and_catches_each_damage() {
    use std::sync::Arc;
    let kpk = table("KPvK");
    let mut successors: HashMap<(String, [u64; 2]), Arc<Vec<u16>>> = HashMap::new();
    // A pawn push leads into another slice of KPvK.
    for name in ["KPvK", "KQvK", "KRvK", "KBvK", "KNvK"] {
        for (key, values) in table(name) {
            successors.insert((name.to_owned(), key), Arc::new(values));
        }
    }
    let lookup = |m: &str, k: [u64; 2]| successors.get(&(m.to_owned(), k)).cloned();
    let none = |_: &str, _: [u64; 2]| None;
    let mut derived = 0;
    for (key, values) in &kpk {
        let sample: Vec<u64> = (0..values.len() as u64).step_by(7).collect();
        let r = super::check_slice("KPvK", *key, values, &sample, &lookup).unwrap();
        assert_eq!((r.indices, r.skipped), (values.len() as u64, 0));
        derived += r.derived;
    }
    let legal: u64 = kpk
        .iter()
        .map(|(_, v)| v.iter().filter(|&&x| x != 0).count() as u64)
        .sum();
    assert!(derived * 8 > legal && derived * 6 < legal, "{derived} of {legal}");

    // A pawn on the seventh rank promotes: without the successors, its checks are skipped.
    let (key, values) = kpk.iter().find(|(k, _)| k[0] & (0xff << 48) != 0).unwrap();
    let all: Vec<u64> = (0..values.len() as u64).collect();
    let r = super::check_slice("KPvK", *key, values, &all, &none).unwrap();
    assert!(r.skipped > 0 && r.derived > 0, "{r:?}");

    let decisive = values.iter().position(|&v| v >= 2).unwrap();
    let illegal = values.iter().position(|&v| v == 0).unwrap();
    let check = |at: usize, v: u16| {
        let mut bad = values.clone();
        bad[at] = v;
        super::check_slice("KPvK", *key, &bad, &[at as u64], &lookup)
            .unwrap_err()
            .to_string()
    };
    assert!(check(decisive, 1).contains("stored: draw, derived:"));
    assert!(check(decisive, 0).contains("stored: illegal, derived: a value (a legal position)"));
    assert!(check(illegal, 1).contains("not a legal position: stored: draw, derived: illegal"));
    assert!(check(decisive, 0x8000).contains("0x8000 is not a value"));
    let short = &values[..values.len() - 1];
    assert!(matches!(
        super::check_slice("KPvK", *key, short, &[], &lookup),
        Err(VerifyError::WrongSliceSize { .. })
    ));
    assert!(matches!(
        super::check_slice("KPvK", [key[0], 1], values, &[], &lookup),
        Err(VerifyError::UnexpectedSlice { .. })
    ));
    assert!(matches!(
        super::check_slice("KvKP", *key, values, &[], &lookup),
        Err(VerifyError::WrongMaterial { .. })
    ));
}

/// [`SliceStream`](super::SliceStream), fed a slice in pieces of any size, finds what
/// [`check_slice`](super::check_slice) finds holding it whole: the same report on every slice
/// of KPvK (children in other slices) and of KQvK (every child of a sampled position in the
/// slice itself, read from the values the stream kept), and each kind of damage, by the same
/// error.
#[test]
fn a_slice_checked_as_it_streams_gives_what_the_whole_check_gives() {
    use std::sync::Arc;
    let mut successors: HashMap<(String, [u64; 2]), Arc<Vec<u16>>> = HashMap::new();
    for name in ["KPvK", "KQvK", "KRvK", "KBvK", "KNvK"] {
        for (key, values) in table(name) {
            successors.insert((name.to_owned(), key), Arc::new(values));
        }
    }
    let lookup = |m: &str, k: [u64; 2]| successors.get(&(m.to_owned(), k)).cloned();
    let stream = |name: &str, key: [u64; 2], values: &[u16], sample: &[u64], piece: usize| {
        let mut s = super::SliceStream::new(name, key, sample, &lookup)?;
        values.chunks(piece).try_for_each(|c| s.push(c))?;
        s.finish(&lookup)
    };
    let mut derived = 0;
    for name in ["KPvK", "KQvK"] {
        for (key, values) in table(name) {
            let sample: Vec<u64> = (3..values.len() as u64).step_by(11).collect();
            let whole = super::check_slice(name, key, &values, &sample, &lookup).unwrap();
            for piece in [1, 777, values.len()] {
                let streamed = stream(name, key, &values, &sample, piece).unwrap();
                assert_eq!(streamed, whole, "{name} ({}), pieces of {piece}", Pawns(key));
            }
            assert_eq!(whole.skipped, 0);
            derived += whole.derived;
        }
    }
    assert!(derived > 15_000, "{derived}");

    let kpk = table("KPvK");
    let (key, values) = kpk.iter().find(|(k, _)| k[0] & (0xff << 48) != 0).unwrap();
    let decisive = values.iter().position(|&v| v >= 2).unwrap();
    let illegal = values.iter().position(|&v| v == 0).unwrap();
    for (at, v) in [(decisive, 1), (decisive, 0), (illegal, 1), (decisive, 0x8000)] {
        let mut bad = values.clone();
        bad[at] = v;
        let whole = super::check_slice("KPvK", *key, &bad, &[at as u64], &lookup).unwrap_err();
        let streamed = stream("KPvK", *key, &bad, &[at as u64], 500).unwrap_err();
        assert_eq!(streamed.to_string(), whole.to_string());
    }
    // A wrong value left out of the sample, read as a kept child: a Black-to-move position of
    // KQvK made checkmated, which its White parents (all sampled) then mate in one.
    let kqk = table("KQvK");
    let (qkey, qvalues) = &kqk[0];
    let half = qvalues.len() / 2;
    let at = half + qvalues[half..].iter().position(|&v| v >= 10).unwrap();
    let mut bad = qvalues.clone();
    bad[at] = 2;
    let white: Vec<u64> = (0..half as u64).collect();
    let whole = super::check_slice("KQvK", *qkey, &bad, &white, &lookup).unwrap_err();
    let streamed = stream("KQvK", *qkey, &bad, &white, 4096).unwrap_err();
    assert_eq!(streamed.to_string(), whole.to_string());
    assert!(whole.to_string().contains("derived: win in 1 plies"), "{whole}");
    let short = &values[..values.len() - 1];
    assert!(matches!(
        stream("KPvK", *key, short, &[], 100),
        Err(VerifyError::WrongSliceSize { .. })
    ));
    let mut long = values.clone();
    long.push(0);
    assert!(matches!(
        stream("KPvK", *key, &long, &[], 100),
        Err(VerifyError::WrongSliceSize { .. })
    ));
    assert!(matches!(
        super::SliceStream::new("KPvK", [key[0], 1], &[], &lookup),
        Err(VerifyError::UnexpectedSlice { .. })
    ));
}

/// `attackers_of` (stepping backwards from the target) marks exactly the squares from which
/// `attacks_through` (stepping forwards from the man) finds an attack, for every kind and
/// colour, every target and a spread of occupancies.
#[test]
fn the_squares_attacking_a_target_are_those_attacks_through_finds() {
    use super::board::{attackers_of, attacks_through, Color};
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for kind in 0..6u8 {
        for color in [Color::White, Color::Black] {
            for target in 0..64u8 {
                for _ in 0..20 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let occupied = x & (x >> 3) & !(1u64 << target);
                    let marked = attackers_of(color, kind, target, occupied);
                    for s in (0..64u8).filter(|&s| s != target && occupied >> s & 1 == 0) {
                        assert_eq!(
                            marked >> s & 1 == 1,
                            attacks_through(color, kind, s, target, occupied),
                            "kind {kind} {color:?} from {s} to {target}, occupied {occupied:#x}"
                        );
                    }
                }
            }
        }
    }
}

/// [`Decoder::is_legal`] and [`Decoder::for_each_legality`] (which the check of a whole slice
/// runs) answer what decoding the position and asking it does, at every index of slices of
/// pawnless, pawnful and like-man materials (every slice of the small ones, a spread of the
/// larger ones), with a last field of one man, of two (KRRvK, KNNvK) and none (KPvKP).
#[test]
fn the_quick_legality_test_agrees_with_the_decoded_position() {
    let mut compared = 0u64;
    for (name, step) in [
        ("KQvKR", 1),
        ("KRRvK", 1),
        ("KPvKP", 1),
        ("KPPvK", 1),
        ("KBPvKP", 29),
        ("KPPvKP", 41),
        ("KBNvK", 1),
        ("KNNvK", 1),
    ] {
        let m = Material::parse(name).unwrap().normalized();
        for key in m.canonical_keys().into_iter().step_by(step) {
            let d = Decoder::new(&m, key);
            let mut run = Vec::new();
            d.for_each_legality(|p, legal| {
                assert_eq!(p, run.len() as u64, "{name}: placements in order");
                run.push(legal);
                Ok::<(), ()>(())
            })
            .unwrap();
            assert_eq!(run.len() as u64, m.per_side(), "{name}");
            for i in 0..2 * m.per_side() {
                let slow = matches!(d.decode(i), Decoded::Position(p) if p.is_legal());
                assert_eq!(d.is_legal(i), slow, "{name} ({}) index {i}", Pawns(key));
                let side = (i / m.per_side()) as usize;
                assert_eq!(
                    run[(i % m.per_side()) as usize][side],
                    slow,
                    "{name} run, index {i}"
                );
                compared += 1;
            }
        }
    }
    assert!(compared > 5_000_000, "{compared}");
}

// ---------------------------------------------------------------------------------------------
// Lines

/// The line check (`line.rs`) derives, line by line, what the check position by position
/// derives index by index: 0 where the index is not a legal position, else the value from the
/// position's children. Every line of KQvK, KRvK, KBvK and KNvK (the line man: the queen, the
/// rook, the bishop, the knight) and one line in nine of KQvKR (the queen, with Black's rook
/// in the field above it), both sides to move, both ways of reading successors (KQvKR's are
/// read by blocks in the tests).
#[test]
fn lines_derive_what_positions_derive() {
    use super::{Half, Worker};
    let dir = folder(&["KQvKR", "KBvK", "KNvK"]);
    let library = Library::new(dir.path());
    for (name, every) in [("KQvK", 1), ("KRvK", 1), ("KBvK", 1), ("KNvK", 1), ("KQvKR", 9)] {
        let material = Material::parse(name).unwrap();
        let key = [0, 0];
        let values = table(name)[0].1.clone();
        let per_side = material.per_side();
        for side in 0..2u64 {
            let other = 1 - side;
            let held = &values[(other * per_side) as usize..((other + 1) * per_side) as usize];
            let half = Half::held(std::borrow::Cow::Borrowed(held), other * per_side);
            let mut worker = Worker::new(&library, material, key, &half);
            let (mut lines, mut legal) = (0, 0);
            for base in (side * per_side..(side + 1) * per_side)
                .step_by(64)
                .step_by(every)
            {
                let Ok(derived) = worker.derive_line(base) else {
                    panic!("{name}: line {base} failed");
                };
                let Some(derived) = derived else {
                    // Only a line whose other men collide is left to the check by position.
                    assert!(
                        worker.decoder.line_men(base % per_side).is_err(),
                        "{name}: line {base} not derived"
                    );
                    continue;
                };
                lines += 1;
                for (s, &got) in derived.iter().enumerate() {
                    let index = base + s as u64;
                    let expected = match worker.decoder.decode(index) {
                        Decoded::Position(mut p) if p.is_legal() => {
                            legal += 1;
                            worker.derive(&mut p).ok().expect("a good table derives")
                        }
                        _ => value::ILLEGAL,
                    };
                    assert_eq!(
                        got,
                        expected,
                        "{name}, index {index}: {}",
                        value::describe(expected)
                    );
                }
            }
            assert!(
                lines * every as u64 * 64 * 10 > per_side * 9,
                "{name}: {lines} lines"
            );
            assert!(legal > 0);
        }
    }
}

/// A verification of tables with a line man checks them by lines, and on good tables the lines
/// agree; one of a sample, or of a table without a line man, does not.
#[test]
fn good_tables_are_checked_by_lines() {
    let dir = folder(&["KQvKR", "KPvK"]);
    // Every line but, in KQvKR, those with Black's rook on a king's square (two for each of
    // the 462 king pairs, each side to move), whose other men collide.
    for (name, colliding) in [("KQvK", 0), ("KRvK", 0), ("KQvKR", 2 * 462 * 2)] {
        let report = verify(dir.path(), name, 2).unwrap();
        assert_eq!(
            (report.lines + colliding) * 64,
            report.indices,
            "{name}: {report:?}"
        );
        assert_eq!(report.disagreed, 0, "{name}");
    }
    let report = verify(dir.path(), "KPvK", 2).unwrap();
    assert_eq!((report.lines, report.disagreed), (0, 0));
    let opts = VerifyOptions {
        threads: 1,
        sample_percent: Some(50),
        ..Default::default()
    };
    let sample = verify_table(dir.path(), "KQvK", &opts, &|_, _| {}).unwrap();
    assert_eq!(sample.lines, 0);
}

/// A memory budget: the half slice and four blocks a thread (plus the unit's) must fit for the
/// half to be held (else it is paged), and the least budget that would do is known; within it,
/// the blocks a thread keeps, the cache and the slices read whole shrink to fit, and the
/// verification still passes (KQvKR's successors then read by blocks even in this crate's
/// tests, whose default reads KQvK and KRvK whole).
#[test]
fn a_memory_budget_bounds_the_cache_and_the_blocks() {
    use super::{Limits, CACHE_VALUES, WHOLE_VALUES, WORKER_BLOCKS};
    let block = 2 * 65_536u64;
    // KQvKR: 1,892,352 values a side, 3,784,704 bytes a half.
    let half = 2 * 1_892_352u64;
    assert_eq!(
        Limits::within(half + 10 * block - 1, 2, 1_892_352, 65_536),
        Err(half + 10 * block)
    );
    let tight = Limits::within(half + 10 * block, 2, 1_892_352, 65_536).unwrap();
    assert_eq!(
        (tight.worker_blocks, tight.cache_values, tight.whole_values),
        (4, 0, 0)
    );
    let roomy = Limits::within(64 << 30, 2, 1_892_352, 65_536).unwrap();
    assert_eq!(
        (roomy.worker_blocks, roomy.cache_values, roomy.whole_values),
        (WORKER_BLOCKS, CACHE_VALUES, WHOLE_VALUES)
    );

    let dir = folder(&["KQvKR"]);
    let with = |memory: u64| {
        verify_table(
            dir.path(),
            "KQvKR",
            &VerifyOptions {
                threads: 2,
                memory: Some(memory),
                ..Default::default()
            },
            &|_, _| {},
        )
    };
    let report = with(half + 10 * block).unwrap();
    assert_eq!(report, verify(dir.path(), "KQvKR", 2).unwrap());
    // One byte less and the half is paged instead (see `a_half_slice_over_the_budget_is_paged`).
    assert_eq!(with(half + 10 * block - 1).unwrap(), report);
}

/// A budget that cannot hold the half slice pages it through a file of the table's folder
/// (`paged.rs`): the least budget is then a few king pairs' worth a thread and the threads'
/// blocks, well under the half; within a budget that keeps a few groups of it mapped (in these
/// tests a group is 2,048 values, a king pair of KQvKR 4,096), groups are unmapped while the
/// check goes on and read back, and the verification gives the report it gives in memory; a
/// wrong value makes the same first position disagree, with the same message; nothing is left
/// in the folder.
#[test]
fn a_half_slice_over_the_budget_is_paged() {
    use super::paged::{GROUP_VALUES, UNMAPPED};
    use super::Limits;
    use std::sync::atomic::Ordering::Relaxed;
    let m = Material::parse("KQvKR").unwrap();
    let per_side = m.per_side();
    let held = Limits::within(0, 2, per_side, 65_536).unwrap_err();
    let least = Limits::paged(0, 2, per_side, 65_536, m.king_pairs()).unwrap_err();
    assert!(least < held - per_side, "paged {least}, held {held}");
    let budget = least + 64 * 1024;
    let (_, resident) = Limits::paged(budget, 2, per_side, 65_536, m.king_pairs()).unwrap();
    assert!(resident < 2 * per_side / 16, "{resident} bytes mapped at most");
    assert!(
        resident >= 8 * 2 * GROUP_VALUES,
        "{resident} bytes mapped at most"
    );
    let paged = |dir: &Path, memory: u64| {
        let opts = VerifyOptions {
            threads: 2,
            memory: Some(memory),
            ..Default::default()
        };
        verify_table(dir, "KQvKR", &opts, &|_, _| {})
    };
    let listing = |dir: &Path| {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        names
    };
    let dir = folder(&["KQvKR"]);
    let files = listing(dir.path());
    let before = UNMAPPED.load(Relaxed);
    let report = paged(dir.path(), budget).unwrap();
    assert_eq!(report, verify(dir.path(), "KQvKR", 2).unwrap());
    let unmapped = UNMAPPED.load(Relaxed) - before;
    assert!(
        unmapped > 2 * per_side / GROUP_VALUES,
        "{unmapped} groups unmapped"
    );
    assert_eq!(listing(dir.path()), files);
    match paged(dir.path(), least - 1) {
        Err(VerifyError::OverBudget { needed, .. }) => assert_eq!(needed, least),
        other => panic!("{other:?}"),
    }
    // A win made a win in two more plies, in each half.
    for side in 0..2 {
        let key = [0, 0];
        let i = find("KQvKR", key, |i, v| (i >= per_side) == (side == 1) && v == 2 + 5);
        let bad = with_table("KQvKR", &edited("KQvKR", &[(key, i, 2 + 7)]));
        let in_memory = match verify(bad.path(), "KQvKR", 2) {
            Err(e @ VerifyError::Mismatch { .. }) => e.to_string(),
            other => panic!("{other:?}"),
        };
        assert_eq!(paged(bad.path(), budget).unwrap_err().to_string(), in_memory);
    }
}

/// `verify_slice` (what a worker runs under `--verify all`) passes every slice of KPvK and
/// KQvK with every legal position derived (the count the whole check of the table gives), and
/// names the first wrong index of a changed slice, whether the change is a wrong value, a value
/// at an illegal index or a value out of range.
#[test]
fn a_whole_slice_verified_names_its_first_wrong_index() {
    use std::sync::Arc;
    let mut successors: HashMap<(String, [u64; 2]), Arc<Vec<u16>>> = HashMap::new();
    for name in ["KPvK", "KQvK", "KRvK", "KBvK", "KNvK"] {
        for (key, values) in table(name) {
            successors.insert((name.to_owned(), key), Arc::new(values));
        }
    }
    let lookup = |m: &str, k: [u64; 2]| successors.get(&(m.to_owned(), k)).cloned();
    for name in ["KPvK", "KQvK"] {
        let mut derived = 0;
        for (key, values) in table(name) {
            let r = super::verify_slice(name, key, &values, &lookup).unwrap();
            assert_eq!(r.indices, values.len() as u64);
            assert_eq!(r.skipped, 0);
            derived += r.derived;
        }
        let legal: u64 = table(name)
            .iter()
            .map(|(_, v)| v.iter().filter(|&&x| x != 0).count() as u64)
            .sum();
        assert_eq!(derived, legal, "{name}: every legal position derived");
    }
    let kpk = table("KPvK");
    let (key, values) = kpk.iter().find(|(k, _)| k[0] & (0xff << 48) != 0).unwrap();
    let decisive = values.iter().rposition(|&v| v >= 2).unwrap();
    let illegal = values.iter().rposition(|&v| v == 0).unwrap();
    for (at, v) in [(decisive, values[decisive] + 2), (illegal, 1), (decisive, 0x8000)] {
        let mut bad = values.clone();
        bad[at] = v;
        let failure = super::verify_slice("KPvK", *key, &bad, &lookup).unwrap_err();
        // A wrong value may make a parent of it, at a lower index, disagree first.
        let index = failure.index.expect("a wrong value is at an index");
        assert!(index <= at as u64, "{index} after {at}: {}", failure.error);
        let mut fixed = bad.clone();
        fixed[at] = values[at];
        assert!(super::verify_slice("KPvK", *key, &fixed, &lookup).is_ok());
        if index == at as u64 {
            continue;
        }
        // Else the value found wrong is right, its child at `at` is not.
        assert_eq!(bad[index as usize], values[index as usize]);
    }
    assert!(super::verify_slice("KPvK", *key, &values[1..], &lookup)
        .unwrap_err()
        .index
        .is_none());
}
