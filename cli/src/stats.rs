//! Counting a table: legal positions, wins, draws, losses and the longest mate, for each side to
//! move, over every legal position of the whole board (not only the stored canonical part).

use serde::Serialize;
use zermelo_chess::index::SliceIndexer;
use zermelo_chess::slice::SliceKey;
use zermelo_chess::{Bitboard, Color, Dtz, Material, Piece, Position, Role, Value};
use zermelo_worker::tables::{TableDir, TableError};

/// Counts for one side to move; win/draw/loss from its point of view.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct SideStats {
    pub legal: u64,
    pub win: u64,
    pub draw: u64,
    pub loss: u64,
    /// The longest mate distance in plies, won or lost (0 if none).
    pub max_dtm: u32,
    /// A position with this side to move at that distance (the first in table order), if any.
    pub longest_fen: Option<String>,
    /// The same counts with each position counted once up to the board's symmetries (the
    /// eight rotations and reflections without pawns, the a-h mirror with pawns; like men
    /// alike): a position that is its own mirror image counts once, not half.
    pub up_to_symmetry: Counts,
    /// The counts of Syzygy's statistics (`rtbgen --stats`, as syzygy-tables.info shows them):
    /// up to symmetry as `up_to_symmetry`, but with like men told apart (KRRvK's two rooks
    /// swapped is another position), so that a material with like men counts about k! times
    /// as many. Equal to `up_to_symmetry` for a material without like men.
    pub syzygy: Counts,
    /// Under the 50-move rule, from the DTZ50 table (`.zdz`) when it is there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dtz50: Option<SideDtz50>,
}

/// Legal positions, wins, draws and losses of one side to move.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub legal: u64,
    pub win: u64,
    pub draw: u64,
    pub loss: u64,
}

/// Counts of one side to move under the 50-move rule (halfmove clock 0), same weights as the
/// counts of mates: wins, cursed wins (won, but drawn by the rule), draws, blessed losses and
/// losses, and the longest DTZ50.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct SideDtz50 {
    pub win: u64,
    pub cursed_win: u64,
    pub draw: u64,
    pub blessed_loss: u64,
    pub loss: u64,
    /// The longest distance to the next zeroing move or mate, in plies, won or lost.
    pub max_dtz: u32,
    /// A position with this side to move at that distance (the first in table order).
    pub longest_dtz_fen: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// The material as asked (`KvKP`), White first.
    pub material: String,
    /// The table the counts come from (`KPvK`): the material with the stronger side White.
    /// When it differs from `material`, the colours were swapped to answer: `white` counts
    /// the table's positions with Black to move, seen with colours swapped, and so on.
    pub table: String,
    /// How many positions `legal` counts: every legal position on the whole board, mirror
    /// images included, as published counts do. The table stores fewer (one of each pair of
    /// a-h mirror images with pawns, one of each eight symmetric images without): `zermelo
    /// verify` counts those.
    pub counted: &'static str,
    pub white: SideStats,
    pub black: SideStats,
}

/// What [`Stats::counted`] says.
pub const COUNTED: &str = "every legal position of the whole board, mirror images included";

impl Stats {
    /// The same counts for the material with colours swapped (`KPvK` asked as `KvKP`): the
    /// sides exchanged, each longest-mate FEN seen with colours swapped.
    pub fn colours_swapped(self) -> Stats {
        let flip_fen = |f: String| {
            Position::from_fen(&f)
                .expect("a FEN the table wrote")
                .flip_colors()
                .to_fen()
        };
        let flip = |mut s: SideStats| {
            s.longest_fen = s.longest_fen.map(flip_fen);
            if let Some(d) = &mut s.dtz50 {
                d.longest_dtz_fen = d.longest_dtz_fen.take().map(flip_fen);
            }
            s
        };
        let material: Material = self.table.parse().expect("a table's material");
        Stats {
            material: material.flipped().to_string(),
            table: self.table,
            counted: self.counted,
            white: flip(self.black),
            black: flip(self.white),
        }
    }
}

/// How many real positions the stored index `i` stands for (`storage/FORMAT.md`, "Counting real
/// positions").
pub(crate) fn weight(ix: &SliceIndexer, i: u64) -> u64 {
    if ix.is_pawnless() {
        // In table form: one of eight images, or, with both kings on the diagonal a1-h8 where the
        // diagonal mirror is stored too, one of four.
        let p = ix.placement(i);
        let (wk, bk) = (p.squares[0], p.squares[ix.black_king()]);
        if wk.file() == wk.rank() && bk.file() == bk.rank() {
            4
        } else {
            8
        }
    } else if ix.key().is_self_mirror() {
        1 // Both halves are stored.
    } else {
        2 // The index and its mirror image in the slice not stored.
    }
}

/// Calls `f(indexer, index, side, weight, raw)` with every stored value of the material's table in
/// `tables`, in table order, reading a block at a time (side 0 White to move; the weight as
/// [`weight`]).
fn for_each_value(
    tables: &TableDir,
    material: &Material,
    mut f: impl FnMut(&SliceIndexer, u64, usize, u64, u16),
) -> Result<(), TableError> {
    let table = tables.table(material)?;
    for (i, entry) in table.slices().iter().enumerate() {
        let key = SliceKey {
            material: *material,
            white_pawns: Bitboard(entry.key[0]),
            black_pawns: Bitboard(entry.key[1]),
        };
        let ix = SliceIndexer::new(key);
        let half = ix.per_side();
        // A pawnless index's weight depends only on its king pair (the highest field): worked
        // out once a king pair, not a placement decoded a value (KNNNNvKQ: 37.6 G values).
        let stride = ix.fields()[0].stride;
        let by_king_pair: Vec<u64> = if ix.is_pawnless() {
            (0..half / stride).map(|kp| weight(&ix, kp * stride)).collect()
        } else {
            Vec::new()
        };
        let weight_of = |index: u64| match by_king_pair.get(((index % half) / stride) as usize) {
            Some(&w) => w,
            None => weight(&ix, index),
        };
        let mut at = 0u64;
        table.stream_slice(i, |values| {
            for &raw in values {
                let index = at;
                at += 1;
                if raw != 0 {
                    f(&ix, index, (index >= half) as usize, weight_of(index), raw);
                }
            }
        })?;
    }
    Ok(())
}

/// How the position at `index` (pawnless, both kings on the a1-h8 diagonal) lies on that
/// diagonal: (it is its own mirror image in it, every man's mirror square holding a man of its
/// kind; every man is on it).
fn on_diagonal(ix: &SliceIndexer, index: u64) -> (bool, bool) {
    let Some(p) = ix.position(index) else {
        return (false, false);
    };
    let symmetric = Color::ALL.into_iter().all(|c| {
        Role::ALL.into_iter().all(|r| {
            let men = p.board.by_piece(Piece::new(c, r));
            men.flip_diagonal() == men
        })
    });
    let all_on = p.board.pieces().all(|(sq, _)| sq.flip_diagonal() == sq);
    (symmetric, all_on)
}

/// The ways to order a material's like men: the product of k! over its kinds of k men.
fn like_orderings(material: &Material) -> u64 {
    let mut n = 1;
    for c in Color::ALL {
        for r in Role::ALL {
            n *= (1..=material.count(c, r) as u64).product::<u64>();
        }
    }
    n
}

/// The FEN of index `index` of slice `key`.
fn fen_of((key, index): (SliceKey, u64)) -> Option<String> {
    SliceIndexer::new(key).position(index).map(|p| p.to_fen())
}

/// Counts a material's DTZ50 table (`tables` reading `.zdz` files), for each side to move.
pub fn dtz50_stats(tables: &TableDir, material: &Material) -> Result<[SideDtz50; 2], TableError> {
    let mut sides = [[0u64; 5]; 2];
    let mut max = [0u32; 2];
    let mut longest: [Option<(SliceKey, u64)>; 2] = [None, None];
    for_each_value(tables, material, |ix, index, side, w, raw| {
        let Some(v) = Dtz::from_raw(raw) else { return };
        sides[side][(2 - v.wdl50()) as usize] += w;
        if let Dtz::Win(n) | Dtz::Loss(n) = v {
            if n as u32 > max[side] || longest[side].is_none() {
                max[side] = max[side].max(n as u32);
                longest[side] = Some((*ix.key(), index));
            }
        }
    })?;
    Ok([0, 1].map(|s| SideDtz50 {
        win: sides[s][0],
        cursed_win: sides[s][1],
        draw: sides[s][2],
        blessed_loss: sides[s][3],
        loss: sides[s][4],
        max_dtz: max[s],
        longest_dtz_fen: longest[s].and_then(fen_of),
    }))
}

/// Counts a material's table, reading each slice a block at a time.
pub fn stats(tables: &TableDir, material: &Material) -> Result<Stats, TableError> {
    let mut sides = [[0u64; 4]; 2];
    let mut max = [0u32; 2];
    // Where each side's longest mate was first seen: slice and index.
    let mut longest: [Option<(SliceKey, u64)>; 2] = [None, None];
    // Eight times the positions up to symmetry (exact in integers): an index standing for `w`
    // positions of a full orbit (8 images without pawns, 2 with) adds `w` times 8 over the
    // orbit's size; a position that is its own mirror in the a1-h8 diagonal (both kings on it,
    // stored with weight 4) is an orbit of 4 and adds 8.
    // Syzygy's count in eighths likewise: with like men told apart, each real position stands
    // for k! ordered ones, each in an orbit of 8 (2 with pawns), or of 4 where every man is on
    // the diagonal (the mirror leaves each man in place).
    let mut eighths = [[0u64; 4]; 2];
    let mut syzygy = [[0u64; 4]; 2];
    let per_image = if material.has_pawns() { 4 } else { 1 };
    let orderings = like_orderings(material);
    for_each_value(tables, material, |ix, index, side, w, raw| {
        let Some(v) = Value::from_raw(raw) else { return };
        let (symmetric, all_on) = if w == 4 && ix.is_pawnless() {
            on_diagonal(ix, index)
        } else {
            (false, false)
        };
        let e = if symmetric { 8 } else { w * per_image };
        let z = w * per_image * orderings * if all_on { 2 } else { 1 };
        let slot = match v {
            Value::Win(_) => 1,
            Value::Draw => 2,
            Value::Loss(_) => 3,
        };
        if let Value::Win(n) | Value::Loss(n) = v {
            if n as u32 > max[side] || longest[side].is_none() {
                max[side] = max[side].max(n as u32);
                longest[side] = Some((*ix.key(), index));
            }
        }
        sides[side][0] += w;
        sides[side][slot] += w;
        eighths[side][0] += e;
        eighths[side][slot] += e;
        syzygy[side][0] += z;
        syzygy[side][slot] += z;
    })?;
    let whole = |e: [u64; 4]| {
        let [legal, win, draw, loss] = e.map(|e| {
            debug_assert!(e.is_multiple_of(8), "whole orbits");
            e / 8
        });
        Counts {
            legal,
            win,
            draw,
            loss,
        }
    };
    let side = |s: usize| SideStats {
        legal: sides[s][0],
        win: sides[s][1],
        draw: sides[s][2],
        loss: sides[s][3],
        max_dtm: max[s],
        longest_fen: longest[s].and_then(fen_of),
        up_to_symmetry: whole(eighths[s]),
        syzygy: whole(syzygy[s]),
        dtz50: None,
    };
    Ok(Stats {
        material: material.to_string(),
        table: material.to_string(),
        counted: COUNTED,
        white: side(0),
        black: side(1),
    })
}

/// True if `name` (as the user wrote it, any case) names `table` (its normalized material) with
/// the colours swapped: `KvKP` for `KPvK`.
pub fn asked_with_colours_swapped(name: &str, table: &Material) -> bool {
    let first_side = |s: &str| {
        let lower = s.trim().to_ascii_lowercase();
        let mut men: Vec<char> = lower.split('v').next().unwrap_or("").chars().collect();
        men.sort_unstable();
        men
    };
    first_side(name) != first_side(&table.to_string())
}
