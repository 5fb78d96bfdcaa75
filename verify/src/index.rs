//! The position index of layout 3, both ways: where a position's value is stored
//! ([`locate`]) and which position an index stands for ([`Decoder::decode`]).
//!
//! Written from the section "Index layout (layout version 3)" of `storage/FORMAT.md` alone. An
//! index of a slice is `turn * per_side + fields`, the fields from most to least significant:
//! the king pair `kk` (its place in the list of legal king pairs: 462 without pawns, 3,612 with),
//! then one field per group (the men of one colour and kind among Q R B N), knights first and
//! queens last, Black's group of a kind before White's. A group of `k` men is the set of their
//! squares ranked in the combinatorial number system: with squares `s1 < ... < sk`,
//! `C(s1, 1) + ... + C(sk, k)`, in `0 .. C(64, k)`.

use super::board::{self, Color, Position, KING, PAWN};
use super::material::{mirror, Material};

/// The index layout this verifier reads.
pub(super) const LAYOUT: u32 = 3;

/// More men of one group than this cannot be indexed. A material has at most 8 (9 men a side,
/// one of them the king); a child after a promotion may have 9.
const MAX_GROUP: usize = 9;

/// `BINOMIAL[n][k]` = C(n, k) for `n <= 64`, `k <= MAX_GROUP`; 0 when `n < k`.
static BINOMIAL: [[u64; MAX_GROUP + 1]; 65] = {
    let mut table = [[0u64; MAX_GROUP + 1]; 65];
    let mut n = 0;
    while n <= 64 {
        table[n][0] = 1;
        let mut k = 1;
        while k <= MAX_GROUP && n > 0 {
            // Pascal's rule: C(n, k) = C(n - 1, k - 1) + C(n - 1, k).
            table[n][k] = table[n - 1][k - 1] + table[n - 1][k];
            k += 1;
        }
        n += 1;
    }
    table
};

/// C(n, k) for `n <= 64`, `k <= 9`: the number of `k`-sets of `n` squares.
pub(super) fn binomial(n: u8, k: u8) -> u64 {
    BINOMIAL[usize::from(n)][usize::from(k)]
}

/// The squares White's king stands on in a pawnless table (the triangle T), in the order of the
/// king-pair list: a1 b1 c1 d1 b2 c2 d2 c3 d3 d4.
const TRIANGLE: [u8; 10] = [0, 1, 2, 3, 9, 10, 11, 18, 19, 27];

/// Every square, ascending: White's king's squares, in order, with pawns on the board.
const ALL_SQUARES: [u8; 64] = {
    let mut squares = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        squares[i] = i as u8;
        i += 1;
    }
    squares
};

/// The number of legal king pairs without pawns: the size of the field `kk`.
pub(super) const PAWNLESS_KING_PAIRS: u64 = 462;
/// The number of legal king pairs with pawns: the size of the field `kk`.
pub(super) const PAWNFUL_KING_PAIRS: u64 = 3612;

/// Whether two squares (0..64) are equal or a king's step apart.
const fn touching(a: u8, b: u8) -> bool {
    (a % 8).abs_diff(b % 8) <= 1 && (a / 8).abs_diff(b / 8) <= 1
}

/// Whether a square (0..64) is on the a1-h8 diagonal.
const fn on_diagonal(sq: u8) -> bool {
    sq / 8 == sq % 8
}

/// Whether a square (0..64) is above the a1-h8 diagonal (rank > file).
const fn above_diagonal(sq: u8) -> bool {
    sq / 8 > sq % 8
}

/// The list of legal king pairs of one kind of table, both ways.
struct KingPairs<const N: usize> {
    /// `(wk, bk)` of each pair, in list order.
    pairs: [(u8, u8); N],
    /// `place[wk][bk]`: the place of the pair in `pairs`, `u16::MAX` if it is not in the list.
    place: [[u16; 64]; 64],
}

/// The king-pair list: for each `wk` of `white` in order, every `bk` in ascending order that is
/// neither `wk` nor next to it, and (if `pawnless` and `wk` is on the a1-h8 diagonal) not above
/// that diagonal. Fails to compile unless there are exactly `N` pairs.
const fn king_pairs<const N: usize>(white: &[u8], pawnless: bool) -> KingPairs<N> {
    let mut list = KingPairs {
        pairs: [(0, 0); N],
        place: [[u16::MAX; 64]; 64],
    };
    let mut n = 0;
    let mut i = 0;
    while i < white.len() {
        let wk = white[i];
        let mut bk = 0;
        while bk < 64 {
            // Pawnless, with White's king on the diagonal, Black's stays on or below it.
            let excluded = touching(wk, bk) || (pawnless && on_diagonal(wk) && above_diagonal(bk));
            if !excluded {
                list.pairs[n] = (wk, bk);
                list.place[wk as usize][bk as usize] = n as u16;
                n += 1;
            }
            bk += 1;
        }
        i += 1;
    }
    assert!(n == N, "the king-pair list has the size FORMAT.md gives");
    list
}

/// The king pairs of pawnless tables: White's king on [`TRIANGLE`].
static PAWNLESS_PAIRS: KingPairs<{ PAWNLESS_KING_PAIRS as usize }> = king_pairs(&TRIANGLE, true);

/// The king pairs of tables with pawns: White's king anywhere.
static PAWNFUL_PAIRS: KingPairs<{ PAWNFUL_KING_PAIRS as usize }> = king_pairs(&ALL_SQUARES, false);

/// The rank of a set of squares (a bitboard) in the combinatorial number system:
/// `C(s1, 1) + C(s2, 2) + ...` over its squares in ascending order.
fn combination_rank(mut set: u64) -> u64 {
    let mut rank = 0;
    let mut j = 1;
    while set != 0 {
        let sq = set.trailing_zeros() as u8;
        set &= set - 1;
        rank += binomial(sq, j);
        j += 1;
    }
    rank
}

/// One of the eight symmetries of the board: every square XORed with `flip` (7 mirrors the
/// files a <-> h, 56 the ranks 1 <-> 8), then mirrored in the a1-h8 diagonal if `transpose`.
#[derive(Clone, Copy, Debug)]
struct Symmetry {
    flip: u8,
    transpose: bool,
}

impl Symmetry {
    const IDENTITY: Symmetry = Symmetry {
        flip: 0,
        transpose: false,
    };

    /// The image of a square (0..64).
    fn apply(self, sq: u8) -> u8 {
        let sq = sq ^ self.flip;
        if self.transpose {
            // File and rank exchanged.
            (sq & 7) << 3 | sq >> 3
        } else {
            sq
        }
    }

    /// The symmetry that brings a pawnless position with White's king on `wk` and Black's on
    /// `bk` into table form, the four steps of FORMAT.md in order:
    /// 1. mirror a <-> h if `wk` is on files e-h;
    /// 2. then mirror 1 <-> 8 if `wk` is on ranks 5-8;
    /// 3. then mirror in the a1-h8 diagonal if `wk` is above it;
    /// 4. then, if `wk` is on that diagonal and `bk` above it, mirror in it (once more).
    ///
    /// Steps 3 and 4 exclude each other (step 3 leaves `wk` below the diagonal), so the result
    /// mirrors in the diagonal at most once.
    fn pawnless(wk: u8, bk: u8) -> Symmetry {
        let mut flip = 0;
        if wk % 8 >= 4 {
            flip ^= 7;
        }
        if (wk ^ flip) / 8 >= 4 {
            flip ^= 56;
        }
        let (w, b) = (wk ^ flip, bk ^ flip);
        let transpose = above_diagonal(w) || (on_diagonal(w) && above_diagonal(b));
        Symmetry { flip, transpose }
    }
}

/// More men than any material [`Material::parse`] accepts (9 pieces and 8 pawns a side).
const MAX_MEN: usize = 40;

/// Where a position's value lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Location {
    /// Bare kings: a draw, in no table.
    BareKings,
    /// Index `index` of the slice `key` of the table of `material` (normalized).
    Stored {
        material: Material,
        key: [u64; 2],
        index: u64,
    },
}

/// Where the value of `pos` is stored. `pos` must have no en-passant square and its kings must
/// not stand next to each other (such a position has no index; every legal position and every
/// child of one qualifies).
///
/// The men are put in table orientation: colours swapped (ranks mirrored 1 <-> 8) if the
/// material is not normalized; then with pawns the board is mirrored a <-> h if the pawn key is
/// not canonical; without pawns the four steps of [`Symmetry::pawnless`] apply, which put White's
/// king on the triangle a1-d1-d4 and, with White's king on the diagonal, Black's king on or
/// below it. With both kings on the diagonal the position and its mirror image in the diagonal
/// are both stored, at two indices. Then the fields: the king pair's place in its list, and
/// each group's set of squares ranked as a combination.
pub(super) fn locate(pos: &Position) -> Location {
    debug_assert!(
        pos.ep().is_none(),
        "a position with an en-passant square is not stored"
    );
    match Oriented::new(pos, pos.turn()) {
        None => Location::BareKings,
        Some(o) => {
            let mut fields = u64::from(o.kk);
            for (color, kind, count) in o.material.groups() {
                let set = o.sets[color.index()][usize::from(kind)];
                debug_assert_eq!(set.count_ones(), u32::from(count), "men on distinct squares");
                fields = fields * binomial(64, count) + combination_rank(set);
            }
            Location::Stored {
                material: o.material,
                key: o.key,
                index: o.turn.index() as u64 * o.material.per_side() + fields,
            }
        }
    }
}

/// The men of a position in table orientation (see [`locate`]), with `turn` to move.
struct Oriented {
    /// Normalized.
    material: Material,
    key: [u64; 2],
    /// The side to move, in table orientation.
    turn: Color,
    /// Whether the colours were swapped (ranks mirrored 1 <-> 8) first.
    swap: bool,
    /// The symmetry applied after the swap.
    symmetry: Symmetry,
    /// The king pair's place in its list.
    kk: u16,
    /// The squares of each group after the symmetry, by colour and kind.
    sets: [[u64; 6]; 2],
    /// The kings' squares and the squares of each group after the swap, before the symmetry.
    kings: [u8; 2],
    unmapped: [[u64; 6]; 2],
}

impl Oriented {
    /// `None` for bare kings.
    fn new(pos: &Position, turn: Color) -> Option<Oriented> {
        // (colour, kind, square) of each man.
        let mut men = [(Color::White, 0u8, 0u8); MAX_MEN];
        let mut n = 0;
        let mut counts = [[0u8; 6]; 2];
        pos.for_each_man(|color, kind, sq| {
            men[n] = (color, kind, sq);
            n += 1;
            counts[color.index()][usize::from(kind)] += 1;
        });
        let men = &mut men[..n];
        let mut material = Material::from_counts(counts);
        if material.is_bare_kings() {
            return None;
        }
        let mut turn = turn;
        let swap = material.needs_swap();
        if swap {
            material = material.swapped();
            turn = turn.other();
            for man in men.iter_mut() {
                *man = (man.0.other(), man.1, man.2 ^ 56);
            }
        }

        let mut kings = [0u8; 2];
        let mut key = [0u64; 2];
        for &(color, kind, sq) in men.iter() {
            match kind {
                KING => kings[color.index()] = sq,
                PAWN => key[color.index()] |= 1 << sq,
                _ => {}
            }
        }
        let symmetry = if !material.has_pawns() {
            Symmetry::pawnless(kings[0], kings[1])
        } else {
            let mirrored = [mirror(key[0]), mirror(key[1])];
            if mirrored < key {
                key = mirrored;
                Symmetry {
                    flip: 7,
                    transpose: false,
                }
            } else {
                Symmetry::IDENTITY
            }
        };

        let [wk, bk] = kings.map(|sq| usize::from(symmetry.apply(sq)));
        let kk = if material.has_pawns() {
            PAWNFUL_PAIRS.place[wk][bk]
        } else {
            PAWNLESS_PAIRS.place[wk][bk]
        };
        assert!(
            kk != u16::MAX,
            "kings standing next to each other have no index: {}",
            pos.fen()
        );

        let mut sets = [[0u64; 6]; 2];
        let mut unmapped = [[0u64; 6]; 2];
        for &(color, kind, sq) in men.iter() {
            if kind != KING && kind != PAWN {
                sets[color.index()][usize::from(kind)] |= 1 << symmetry.apply(sq);
                unmapped[color.index()][usize::from(kind)] |= 1 << sq;
            }
        }
        Some(Oriented {
            material,
            key,
            turn,
            swap,
            symmetry,
            kk,
            sets,
            kings,
            unmapped,
        })
    }
}

/// Where the quiet children of one position are stored (a man other than a pawn moved to an
/// empty square, see [`Child::Quiet`](super::board::Child::Quiet)). They keep the position's
/// material and pawns. A piece move keeps the kings too, hence the orientation (which depends
/// on the kings and pawns alone), and changes the field of its group alone; a king move changes
/// the king pair and, without pawns, may change the symmetry, and every field with it.
pub(super) struct QuietFrame {
    material: Material,
    key: [u64; 2],
    swap: bool,
    symmetry: Symmetry,
    /// The groups in field order (`len` of them): (colour, kind) in table orientation, the set
    /// of squares after the symmetry, its rank, the weight of the field (the product of the
    /// sizes of the fields after it) and the set of squares before the symmetry.
    groups: [FrameGroup; GROUP_KINDS],
    len: usize,
    /// The place in `groups` of the group of each colour and kind (table orientation).
    slot: [[u8; 6]; 2],
    /// The kings' squares after the swap, before the symmetry.
    kings: [u8; 2],
    /// The first index of the children's side to move.
    turn_base: u64,
    /// The index of the parent's men with the other side to move.
    index: u64,
}

/// One group of a [`QuietFrame`].
#[derive(Clone, Copy)]
struct FrameGroup {
    color: Color,
    kind: u8,
    set: u64,
    rank: u64,
    weight: u64,
    unmapped: u64,
}

/// At most this many groups: four kinds of piece, two colours.
const GROUP_KINDS: usize = 8;

impl QuietFrame {
    /// The frame of the children of `pos` (`None` for bare kings, which have no quiet child).
    pub(super) fn new(pos: &Position) -> Option<QuietFrame> {
        let o = Oriented::new(pos, pos.turn().other())?;
        let empty = FrameGroup {
            color: Color::White,
            kind: 0,
            set: 0,
            rank: 0,
            weight: 0,
            unmapped: 0,
        };
        let mut groups = [empty; GROUP_KINDS];
        let mut slot = [[0u8; 6]; 2];
        let mut len = 0;
        for (color, kind, count) in o.material.groups() {
            slot[color.index()][usize::from(kind)] = len as u8;
            let set = o.sets[color.index()][usize::from(kind)];
            groups[len] = FrameGroup {
                color,
                kind,
                set,
                rank: combination_rank(set),
                // The field's size for now, its weight below.
                weight: binomial(64, count),
                unmapped: o.unmapped[color.index()][usize::from(kind)],
            };
            len += 1;
        }
        // The sizes become weights, from the least significant field up.
        let mut weight = 1;
        let mut fields = 0;
        for g in groups[..len].iter_mut().rev() {
            let size = g.weight;
            g.weight = weight;
            fields += g.rank * weight;
            weight *= size;
        }
        fields += u64::from(o.kk) * weight;
        let turn_base = o.turn.index() as u64 * o.material.per_side();
        Some(QuietFrame {
            material: o.material,
            key: o.key,
            swap: o.swap,
            symmetry: o.symmetry,
            groups,
            len,
            slot,
            kings: o.kings,
            turn_base,
            index: turn_base + fields,
        })
    }

    /// Where the child is stored in which the man of `color` and `kind` (not a pawn) moved from
    /// `from` to the empty square `to` (squares 0..64, board orientation).
    pub(super) fn quiet(&self, color: Color, kind: u8, from: u8, to: u8) -> Location {
        let (color, flip) = if self.swap {
            (color.other(), 56)
        } else {
            (color, 0)
        };
        let index = if kind == KING {
            self.king_moved(color, to ^ flip)
        } else {
            let g = &self.groups[usize::from(self.slot[color.index()][usize::from(kind)])];
            debug_assert!(
                g.color == color && g.kind == kind,
                "the man moved belongs to a group"
            );
            let moved = g.set ^ 1 << self.symmetry.apply(from ^ flip) ^ 1 << self.symmetry.apply(to ^ flip);
            self.index - g.rank * g.weight + combination_rank(moved) * g.weight
        };
        Location::Stored {
            material: self.material,
            key: self.key,
            index,
        }
    }

    /// The index of the child in which the king of `color` (table orientation) moved to `to`
    /// (after the swap).
    fn king_moved(&self, color: Color, to: u8) -> u64 {
        let mut kings = self.kings;
        kings[color.index()] = to;
        let (pairs, symmetry) = if self.material.has_pawns() {
            (&PAWNFUL_PAIRS.place, self.symmetry)
        } else {
            (&PAWNLESS_PAIRS.place, Symmetry::pawnless(kings[0], kings[1]))
        };
        let [wk, bk] = kings.map(|sq| usize::from(symmetry.apply(sq)));
        let kk = pairs[wk][bk];
        debug_assert!(kk != u16::MAX, "a king moves next to the other");
        let mut fields = u64::from(kk);
        for g in &self.groups[..self.len] {
            let mut set = 0u64;
            let mut rest = g.unmapped;
            while rest != 0 {
                set |= 1 << symmetry.apply(rest.trailing_zeros() as u8);
                rest &= rest - 1;
            }
            let size = binomial(64, set.count_ones() as u8);
            fields = fields * size + combination_rank(set);
        }
        self.turn_base + fields
    }
}

/// What an index of a slice stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Decoded {
    /// A position (legal or not: ask [`Position::is_legal`]). Its kings never stand next to
    /// each other: the king-pair list has no such pair.
    Position(Position),
    /// Two men on one square (numbered 0..64), pawns and kings included: not a position at all.
    Collision { square: u8 },
}

/// Placements of a legality run of a slice without a field (kings and pawns only).
const NO_FIELD_RUN: u64 = 4096;

/// One group of a slice's index: `men` men of one colour and kind, one field of `size`
/// (= C(64, men)) values.
#[derive(Clone, Copy, Debug)]
struct Group {
    color: Color,
    kind: u8,
    men: u8,
    size: u64,
}

/// Turns the indices of one slice into positions.
pub(super) struct Decoder {
    /// The groups, in field order (most significant first, after the king pair).
    groups: Vec<Group>,
    /// The pawns of the slice, as `(colour, PAWN, square)`.
    pawns: Vec<(Color, u8, u8)>,
    /// The squares the pawns stand on.
    pawn_squares: u64,
    /// By colour, the squares its pawns attack: a king of the other colour there is in check.
    pawn_attacks: [u64; 2],
    per_side: u64,
    pawnless: bool,
}

impl Decoder {
    /// The decoder of slice `key` of `material` (normalized). Pawns must stand on distinct
    /// squares of ranks 2 to 7, as in every canonical key.
    pub(super) fn new(material: &Material, key: [u64; 2]) -> Decoder {
        debug_assert!(key[0] & key[1] == 0 && (key[0] | key[1]) & 0xff00_0000_0000_00ff == 0);
        let mut pawns = Vec::new();
        for side in [Color::White, Color::Black] {
            for sq in (0..64u8).filter(|&s| key[side.index()] >> s & 1 == 1) {
                pawns.push((side, PAWN, sq));
            }
        }
        let mut pawn_attacks = [0u64; 2];
        for &(color, kind, sq) in &pawns {
            for target in 0..64u8 {
                if board::attacks_through(color, kind, sq, target, 0) {
                    pawn_attacks[color.index()] |= 1 << target;
                }
            }
        }
        Decoder {
            groups: material
                .groups()
                .map(|(color, kind, men)| Group {
                    color,
                    kind,
                    men,
                    size: binomial(64, men),
                })
                .collect(),
            pawns,
            pawn_squares: key[0] | key[1],
            pawn_attacks,
            per_side: material.per_side(),
            pawnless: !material.has_pawns(),
        }
    }

    /// The number of indices in the slice.
    pub(super) fn len(&self) -> u64 {
        2 * self.per_side
    }

    /// The position at `index` (below [`len`](Decoder::len)).
    pub(super) fn decode(&self, index: u64) -> Decoded {
        match self.men(index) {
            Err(square) => Decoded::Collision { square },
            Ok((men, n, turn, _)) => {
                let pos = Position::from_men(&men[..n], turn);
                // Men on distinct squares, one king a side, pawns on ranks 2-7 (as in every
                // canonical key).
                Decoded::Position(pos.expect("a canonical key and distinct squares make a position"))
            }
        }
    }

    /// Whether `index` is a legal position: what `decode` then `is_legal` answer, without
    /// building the position.
    #[cfg(test)]
    pub(super) fn is_legal(&self, index: u64) -> bool {
        let [white, black] = self.legal_both(index % self.per_side);
        if index < self.per_side {
            white
        } else {
            black
        }
    }

    /// Whether placement `p` (below [`Material::per_side`]) is a legal position with White to
    /// move (index `p`) and with Black to move (index `per_side + p`), without building the
    /// positions, placement by placement (what [`legality_run`](Decoder::legality_run) gives a
    /// run at a time; the tests compare the two with the decoded positions).
    #[cfg(test)]
    pub(super) fn legal_both(&self, p: u64) -> [bool; 2] {
        match self.men_at(p) {
            Err(_) => [false, false],
            Ok((men, n, occupied)) => board::placement_legality(&men[..n], occupied),
        }
    }

    /// [`legal_both`](Decoder::legal_both) of every placement, in order: `each(p, legal)` for
    /// `p` in `0..per_side`, stopping at the first error, run by run
    /// ([`legality_run`](Decoder::legality_run)), as the check of a whole slice reads them.
    #[cfg(test)]
    pub(super) fn for_each_legality<E>(
        &self,
        mut each: impl FnMut(u64, [bool; 2]) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut run = Vec::new();
        for start in (0..self.per_side).step_by(self.legality_run_len() as usize) {
            self.legality_run(start, &mut run);
            (start..).zip(&run).try_for_each(|(p, &legal)| each(p, legal))?;
        }
        Ok(())
    }

    /// The placements of one run of [`legality_run`](Decoder::legality_run): the values of the
    /// last (least significant) field, or [`NO_FIELD_RUN`] when there is none.
    pub(super) fn legality_run_len(&self) -> u64 {
        self.groups.last().map_or(NO_FIELD_RUN, |g| g.size)
    }

    /// [`legal_both`](Decoder::legal_both) of the placements of the run from `start` (a
    /// multiple of [`legality_run_len`](Decoder::legality_run_len)), in order, into `out`
    /// (the run's length, or less at the end of the slice). Quicker than asking placement by
    /// placement: the men of every field but the last are decoded once a run, and what they
    /// attack is found once; a man of the last field then only adds its square (a collision, or
    /// a block on the line of a fixed slider to a king) and its own attack.
    pub(super) fn legality_run(&self, start: u64, out: &mut Vec<[bool; 2]>) {
        out.clear();
        let Some(last) = self.groups.last() else {
            // Kings and pawns only: the placement is the king pair, and a king is in check
            // only from a pawn (or the other king: touching kings are illegal both ways).
            let end = (start + NO_FIELD_RUN).min(self.per_side);
            let pairs = if self.pawnless {
                &PAWNLESS_PAIRS.pairs[..]
            } else {
                &PAWNFUL_PAIRS.pairs[..]
            };
            let [white, black] = self.pawn_attacks;
            out.extend(pairs[start as usize..end as usize].iter().map(|&(wk, bk)| {
                if (self.pawn_squares >> wk | self.pawn_squares >> bk) & 1 == 1 || board::kings_touch(wk, bk)
                {
                    [false, false]
                } else {
                    [white >> bk & 1 == 0, black >> wk & 1 == 0]
                }
            }));
            return;
        };
        let (k, run) = (usize::from(last.men), last.size);
        let fixed = match self.men_at_but(start, k) {
            Ok((men, n, taken)) if !board::kings_touch(men[0].2, men[1].2) => Some((men, n, taken)),
            _ => None,
        };
        let Some((men, n, taken)) = fixed else {
            // Fixed men share a square, or the kings touch: nothing of the run is legal.
            out.resize(run as usize, [false, false]);
            return;
        };
        // The squares strictly between each fixed man of a colour and the other king, for the
        // fixed men that attack it past the other fixed men (0 for a knight, king or pawn, or
        // a slider next to the king): the attack stands unless a man of the last field stands
        // on one of those squares.
        let mut lines: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
        let kings = [men[0].2, men[1].2];
        for (i, &(color, kind, sq)) in men[..n].iter().enumerate().skip(2) {
            let king = kings[color.other().index()];
            if !(2..2 + k).contains(&i) && board::attacks_through(color, kind, sq, king, taken) {
                lines[color.index()].push(board::between(sq, king));
            }
        }
        let (color, king) = (last.color, kings[last.color.other().index()]);
        if k == 1 {
            // One man: every test is a bit. A fixed man's attack on a king stands unless the
            // man stands on its line, so a colour attacks unless the man stands on all of its
            // lines at once; the man attacks from the squares `attackers_of` gives.
            let covers =
                |lines: &Vec<u64>| (!lines.is_empty()).then(|| lines.iter().fold(!0u64, |a, &l| a & l));
            let blocks = [covers(&lines[0]), covers(&lines[1])];
            let attack = board::attackers_of(color, last.kind, king, taken);
            out.extend((0..64u8).map(|s| {
                let bit = 1u64 << s;
                if taken & bit != 0 {
                    return [false, false];
                }
                let mut legal = [0, 1].map(|c| blocks[c].is_none_or(|b| b & bit != 0));
                legal[color.index()] &= attack & bit == 0;
                legal
            }));
            return;
        }
        // The last field's squares, ascending: its combination of rank r (colex order).
        let mut squares = [0u8; MAX_GROUP];
        for (j, s) in squares[..k].iter_mut().enumerate() {
            *s = j as u8;
        }
        for r in 0..run {
            let placed = squares[..k].iter().fold(0u64, |m, &s| m | 1 << s);
            let mut legal = [placed & taken == 0; 2];
            if legal[0] {
                for (c, lines) in lines.iter().enumerate() {
                    legal[c] = !lines.iter().any(|&l| l & placed == 0);
                }
                let occupied = taken | placed;
                let c = color.index();
                legal[c] = legal[c]
                    && !squares[..k]
                        .iter()
                        .any(|&s| board::attacks_through(color, last.kind, s, king, occupied));
            }
            out.push(legal);
            // The next combination in colex order: raise the lowest square that can rise, the
            // ones below it back to the bottom.
            if r + 1 < run {
                let mut j = 0;
                while j + 1 < k && squares[j] + 1 == squares[j + 1] {
                    j += 1;
                }
                squares[j] += 1;
                for (i, s) in squares[..j].iter_mut().enumerate() {
                    *s = i as u8;
                }
            }
        }
    }

    /// The men of `index` (kings first, pawns last), how many, the side to move and the
    /// occupied squares (bit `s` for square `s` of 0..64); `Err` with a square two men share.
    #[allow(clippy::type_complexity)]
    fn men(&self, index: u64) -> Result<([(Color, u8, u8); MAX_MEN], usize, Color, u64), u8> {
        debug_assert!(index < self.len());
        let turn = if index < self.per_side {
            Color::White
        } else {
            Color::Black
        };
        let (men, n, occupied) = self.men_at(index % self.per_side)?;
        Ok((men, n, turn, occupied))
    }

    /// The men, their number and occupied squares of placement `p` (see [`Decoder::men`]).
    #[allow(clippy::type_complexity)]
    fn men_at(&self, p: u64) -> Result<([(Color, u8, u8); MAX_MEN], usize, u64), u8> {
        self.men_at_but(p, 0)
    }

    /// [`Decoder::men_at`], the first `skip` men decoded (those of the least significant
    /// field) left out of the test for shared squares and of the occupied squares.
    #[allow(clippy::type_complexity)]
    fn men_at_but(&self, p: u64, skip: usize) -> Result<([(Color, u8, u8); MAX_MEN], usize, u64), u8> {
        let mut rest = p;
        // Kings at 0 and 1, then the groups' men.
        let mut men = [(Color::White, KING, 0u8); MAX_MEN];
        let mut n = 2;
        // The least significant field first: the groups from the last.
        for group in self.groups.iter().rev() {
            let mut rank = rest % group.size;
            rest /= group.size;
            // Unrank greedily: for j = k down to 1 the largest s with C(s, j) <= rank; the
            // squares come out descending, each below the one before.
            let mut below = 64u8;
            for j in (1..=group.men).rev() {
                // C(s, 1) = s: the last square is the rank itself.
                let mut s = if j == 1 { rank as u8 } else { below - 1 };
                while binomial(s, j) > rank {
                    s -= 1;
                }
                rank -= binomial(s, j);
                below = s;
                men[n] = (group.color, group.kind, s);
                n += 1;
            }
        }
        let (wk, bk) = if self.pawnless {
            PAWNLESS_PAIRS.pairs[rest as usize]
        } else {
            PAWNFUL_PAIRS.pairs[rest as usize]
        };
        men[0] = (Color::White, KING, wk);
        men[1] = (Color::Black, KING, bk);

        let mut taken = self.pawn_squares;
        for (i, &(_, _, sq)) in men[..n].iter().enumerate() {
            if (2..2 + skip).contains(&i) {
                continue;
            }
            if taken >> sq & 1 == 1 {
                return Err(sq);
            }
            taken |= 1 << sq;
        }
        men[n..n + self.pawns.len()].copy_from_slice(&self.pawns);
        Ok((men, n + self.pawns.len(), taken))
    }
}

/// Where the children of one line are stored (see `crate::line`): the child with the line man
/// on square `s` (0..64, board orientation) is at index `index(s)` of slice `key` of
/// `material`. The line man's group has that man alone in the child too, and the orientation
/// of the child (colour swap, symmetry) depends on its kings and pawns only, so the index is
/// linear in the image of `s`.
#[derive(Clone, Copy, Debug)]
pub(super) struct LineLocation {
    pub(super) material: Material,
    pub(super) key: [u64; 2],
    /// The index with the line man's field taken out (its square's rank 0).
    base: u64,
    /// The weight of the line man's field.
    weight: u64,
    flip: u8,
    symmetry: Symmetry,
}

impl LineLocation {
    /// The index of the child with the line man on `s` (0..64, board orientation).
    pub(super) fn index(&self, s: u8) -> u64 {
        self.base + u64::from(self.symmetry.apply(s ^ self.flip)) * self.weight
    }

    /// Whether `index(s)` is `index(0) + s`: the line of the child is a line of its table.
    pub(super) fn is_straight(&self) -> bool {
        self.weight == 1 && self.flip == 0 && self.symmetry.flip == 0 && !self.symmetry.transpose
    }
}

/// Where the children of `pos` with a man of `color` and `kind` added on each empty square
/// are stored (see [`LineLocation`]); `pos` has the side to move of those children and no
/// en-passant square, and `free` is one of its empty squares. `None` if, in the child's
/// material, that man's group has other men.
pub(super) fn locate_line(pos: &Position, color: Color, kind: u8, free: u8) -> Option<LineLocation> {
    debug_assert!(pos.ep().is_none());
    let with = pos.with_cell(free, Some((color, kind)));
    let o = Oriented::new(&with, with.turn()).expect("a position with a piece has a table");
    let color = if o.swap { color.other() } else { color };
    if o.material.count(color, kind) != 1 {
        return None;
    }
    let mut fields = u64::from(o.kk);
    let mut weight = 0;
    for (c, k, count) in o.material.groups() {
        let set = o.sets[c.index()][usize::from(k)];
        let size = binomial(64, count);
        fields = fields * size + combination_rank(set);
        weight *= size;
        if (c, k) == (color, kind) {
            weight = 1;
        }
    }
    let flip = if o.swap { 56 } else { 0 };
    let index = o.turn.index() as u64 * o.material.per_side() + fields;
    Some(LineLocation {
        material: o.material,
        key: o.key,
        base: index - u64::from(o.symmetry.apply(free ^ flip)) * weight,
        weight,
        flip,
        symmetry: o.symmetry,
    })
}

impl QuietFrame {
    /// [`quiet`](QuietFrame::quiet) for a line: the frame's position has a line man (its
    /// material's last group, of one man) on `line_square`, and the quiet move is another
    /// man's. The child with the line man on `s` instead is then at `index(s)` of the line.
    pub(super) fn quiet_line(
        &self,
        color: Color,
        kind: u8,
        from: u8,
        to: u8,
        line_square: u8,
    ) -> LineLocation {
        let Location::Stored { index, .. } = self.quiet(color, kind, from, to) else {
            unreachable!("a quiet child has a table")
        };
        let flip = if self.swap { 56 } else { 0 };
        let symmetry = if kind == KING && !self.material.has_pawns() {
            // A king move may change the symmetry (see `king_moved`).
            let mut kings = self.kings;
            let c = if self.swap { color.other() } else { color };
            kings[c.index()] = to ^ flip;
            Symmetry::pawnless(kings[0], kings[1])
        } else {
            self.symmetry
        };
        self.line_at(index, flip, symmetry, line_square)
    }

    /// The line of the frame's men with the other side to move, nothing moved (see
    /// [`quiet_line`](QuietFrame::quiet_line)): where the line man's own quiet moves lead.
    pub(super) fn passed_line(&self, line_square: u8) -> LineLocation {
        let flip = if self.swap { 56 } else { 0 };
        self.line_at(self.index, flip, self.symmetry, line_square)
    }

    fn line_at(&self, index: u64, flip: u8, symmetry: Symmetry, line_square: u8) -> LineLocation {
        let last = &self.groups[self.len - 1];
        debug_assert!(last.set.count_ones() == 1, "the last group is the line man");
        LineLocation {
            material: self.material,
            key: self.key,
            base: index - u64::from(symmetry.apply(line_square ^ flip)),
            weight: 1,
            flip,
            symmetry,
        }
    }
}

impl Decoder {
    /// The line man of this slice (see `crate::line`): the men of the least significant group
    /// when it has one man, as `(colour, kind)`.
    pub(super) fn line_man(&self) -> Option<(Color, u8)> {
        self.groups
            .last()
            .filter(|g| g.men == 1)
            .map(|g| (g.color, g.kind))
    }

    /// The men of placement `p` but the line man, whose field `p` must hold 0 (see
    /// [`Decoder::men_at`]), and the squares they occupy; `Err` with a square two of them share.
    #[allow(clippy::type_complexity)]
    pub(super) fn line_men(&self, p: u64) -> Result<([(Color, u8, u8); MAX_MEN], usize, u64), u8> {
        debug_assert!(self.line_man().is_some() && p.is_multiple_of(64));
        let (mut men, n, _) = self.men_at_but(p, 1)?;
        // The line man came out of the least significant field first, at place 2.
        men.copy_within(3..n, 2);
        let n = n - 1;
        let mut taken = 0u64;
        for &(_, _, sq) in &men[..n] {
            taken |= 1 << sq;
        }
        Ok((men, n, taken))
    }
}

/// The index's share of a material (kept here, beside the king-pair lists and binomials it
/// counts with, so that `material.rs` does not depend on this file).
impl Material {
    /// The king pairs of its index: 462 without pawns, 3,612 with.
    pub(super) fn king_pairs(&self) -> u64 {
        if self.has_pawns() {
            PAWNFUL_KING_PAIRS
        } else {
            PAWNLESS_KING_PAIRS
        }
    }

    /// Indices per side to move in one slice: the number of king pairs (462 without pawns,
    /// 3,612 with) times C(64, k) for each group of k men.
    pub(super) fn per_side(&self) -> u64 {
        self.groups()
            .map(|(_, _, men)| binomial(64, men))
            .product::<u64>()
            * self.king_pairs()
    }
}
