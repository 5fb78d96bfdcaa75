//! The exits of a position of a slice with pawns, read by index: every capture, pawn push and
//! promotion is played on the placement and the position after it located in its successor
//! slice by arithmetic (colours swapped if its material is stored the other way round, mirrored
//! into its canonical slice, a pawnless one brought into table form), then read from the
//! successor's value array. No `Position` is built, except for a double push beside an enemy
//! pawn (the position after it may have an en-passant capture, resolved by the successor
//! source).

use zermelo_chess::attacks::{attacks, pawn_attacks};
use zermelo_chess::index::{group_rank, pawnless_symmetry, SliceIndexer, SYMMETRY_TABLE};
use zermelo_chess::slice::SliceKey;
use zermelo_chess::value::Value;
use zermelo_chess::{Bitboard, Color, Material, Piece, Role, Square};

use super::geometry::{kings, Decoded, Geometry, NO_MAN};
use super::{SliceValuesRef, SolveError, Successors};

/// The exits of a position: the best for the side to move, and the slowest that loses.
#[derive(Default, Clone, Copy)]
pub(super) struct Exits {
    pub(super) best: Option<Value>,
    pub(super) slowest_loss: u16,
}

impl Exits {
    pub(super) fn add(&mut self, v: Value) {
        if let Value::Loss(d) = v {
            self.slowest_loss = self.slowest_loss.max(d);
        }
        self.best = Some(self.best.map_or(v, |b| b.max(v)));
    }

    /// Adds the exits of `other`.
    pub(super) fn merge(&mut self, other: &Exits) {
        if let Some(b) = other.best {
            self.best = Some(self.best.map_or(b, |a| a.max(b)));
        }
        self.slowest_loss = self.slowest_loss.max(other.slowest_loss);
    }
}

/// The exits of a position as read by index from successor slices, whatever their values mean:
/// mates ([`Exits`]) or DTZ50 (`dtz50::Exits`). The arithmetic that finds where a position
/// after a move is stored is the same for both; only what a stored value is read as differs.
pub(super) trait ExitSet: Copy + Default {
    /// A successor's value, for the side to move there.
    type Value: Copy;
    /// The value of a position with only the kings left.
    const DRAW: Self::Value;
    /// The value of a raw stored one; `None` if it is not one (a corrupt successor).
    fn decode(raw: u16) -> Option<Self::Value>;
    /// Adds the move into a position whose value is `v` (for the side to move there).
    fn add_move_into(&mut self, v: Self::Value);
}

impl ExitSet for Exits {
    type Value = Value;
    const DRAW: Value = Value::Draw;

    #[inline]
    fn decode(raw: u16) -> Option<Value> {
        Value::from_raw(raw)
    }

    #[inline]
    fn add_move_into(&mut self, v: Value) {
        self.add(v.after_move());
    }
}

/// The successor slices of a slice with pawns, with their values as arrays.
pub(super) struct PawnExits<'a> {
    material: Material,
    successors: Vec<(SliceKey, SliceValuesRef<'a>, SliceIndexer)>,
    /// The plain pushes (no capture, no promotion) whose slice is stored as it is (not
    /// mirrored): `(from, to, the slice, its values)`. The men stay on their squares and the
    /// slice has the same men, so the position after the push has the same index there, the
    /// other side to move: no placement to rebuild.
    pushes: Vec<(Square, Square, SliceKey, SliceValuesRef<'a>)>,
    per_side: u64,
    /// For each man of the slice (indexed like [`Geometry::men`]) that is not a king: where
    /// its capture by a man (the pawns unchanged) leads, worked out once instead of per
    /// position. `None` for kings, for a capture that leaves bare kings, or a successor
    /// without values by index.
    captures: [Option<ManCapture>; 8],
    /// For each pawn of either side: where its capture by a man leads (the man onto its
    /// square, the other pawns staying), worked out once; `None` inside when bare kings remain.
    pawn_captures: Vec<(Square, Option<ManCapture>)>,
    /// The plain promotions (no capture): `(from, role, where it leads)`, worked out once per
    /// slice instead of per position (the men stay on their squares, the new man on the square
    /// before the pawn).
    promotions: Vec<(Square, Role, Target)>,
}

/// Where the positions after one kind of move out of the slice are stored: the successor (its
/// place in `successors`), colours swapped (ranks mirrored) and files mirrored to reach it, and
/// each man's place among its men (the men of the position after the move, in the order given
/// to [`PawnExits::target`]).
#[derive(Clone, Copy)]
struct Target {
    at: usize,
    flip: bool,
    mirror: bool,
    slots: [usize; 9],
    n: usize,
}

impl Target {
    /// A square of the slice as the target stores it (colours swapped, files mirrored).
    #[inline]
    fn orient(&self, s: Square) -> Square {
        orient(s, self.flip, self.mirror)
    }

    /// The men on `squares` (in the order given to [`PawnExits::target`]) with `turn` to move,
    /// as the target stores them: the squares in its men's order, and its side to move.
    #[inline]
    fn place(&self, squares: impl Iterator<Item = Square>, turn: Color) -> ([Square; 8], Color) {
        let mut sq = [Square::A1; 8];
        for (k, s) in squares.enumerate() {
            sq[self.slots[k]] = self.orient(s);
        }
        (sq, if self.flip { turn.other() } else { turn })
    }
}

/// Where the capture of one man by another man leads in a slice with pawns (the pawns stay):
/// the successor slice (its place in `successors`) and how this slice's men go there.
#[derive(Clone, Copy)]
struct ManCapture {
    at: usize,
    map: CaptureMap,
}

/// How the men of a slice go into the slice that the capture of one of them (a man, not a pawn)
/// leads into, worked out once per slice: colours swapped (ranks mirrored) and files mirrored
/// to reach the stored slice, and each man's place among the successor's men.
#[derive(Clone, Copy)]
pub(super) struct CaptureMap {
    /// The captured man, or [`NO_MAN`] when a pawn is taken (the men all stay).
    captured: usize,
    /// The successor's men.
    men: usize,
    flip: bool,
    mirror: bool,
    /// For each man of this slice, its place among the successor's men (the captured man:
    /// none, `usize::MAX`).
    to_successor: [usize; 8],
}

impl CaptureMap {
    /// The map for the capture of man `captured` of `g` ([`NO_MAN`]: of a pawn) into a slice
    /// whose men are `successor_men`.
    pub(super) fn new(
        g: &Geometry,
        captured: usize,
        flip: bool,
        mirror: bool,
        successor_men: &[Piece],
    ) -> CaptureMap {
        let mut taken = [false; 8];
        let mut to_successor = [usize::MAX; 8];
        for j in (0..g.n).filter(|&j| j != captured) {
            let p = g.men[j];
            let p = if flip {
                Piece::new(p.color.other(), p.role)
            } else {
                p
            };
            let at = (0..successor_men.len())
                .find(|&i| !taken[i] && successor_men[i] == p)
                .expect("the successor has every man but the captured one");
            taken[at] = true;
            to_successor[j] = at;
        }
        CaptureMap {
            captured,
            men: successor_men.len(),
            flip,
            mirror,
            to_successor,
        }
    }

    /// The value, for the side to move after it, of the capture by man `k` of `d` on `to`, read
    /// from the successor's `values` (indexer `six`) as `E` reads them.
    #[inline]
    pub(super) fn value<E: ExitSet>(
        &self,
        g: &Geometry,
        d: &Decoded,
        k: usize,
        to: Square,
        values: SliceValuesRef<'_>,
        six: &SliceIndexer,
    ) -> Result<E::Value, SolveError> {
        let mut sq = [Square::A1; 8];
        for j in (0..g.n).filter(|&j| j != self.captured) {
            sq[self.to_successor[j]] = self.orient(if j == k { to } else { d.squares[j] });
        }
        let turn = if self.flip { d.turn } else { d.turn.other() };
        value_in::<E>(values, six, &mut sq[..self.men], turn)
    }

    /// A square of this slice as the successor stores it (colours swapped, files mirrored).
    #[inline]
    fn orient(&self, s: Square) -> Square {
        orient(s, self.flip, self.mirror)
    }

    /// [`CaptureMap::value`] for a set of positions that differ only in the square of one man:
    /// the capture already played on `squares` (this slice's men; the captured man's square is
    /// not read), `turn` to move before it, and man `var` (not a king) on each square of `qs` in
    /// turn. Calls `f(q, value)` for each ([`values_along`]).
    #[inline]
    pub(super) fn values_along<E: ExitSet>(
        &self,
        g: &Geometry,
        (squares, turn): (&[Square; 8], Color),
        var: usize,
        qs: Bitboard,
        (values, six): (SliceValuesRef<'_>, &SliceIndexer),
        f: impl FnMut(Square, E::Value),
    ) -> Result<(), SolveError> {
        debug_assert!(!g.is_king(var) && var != self.captured);
        let mut sq = [Square::A1; 8];
        for j in (0..g.n).filter(|&j| j != self.captured) {
            sq[self.to_successor[j]] = self.orient(squares[j]);
        }
        let turn = if self.flip { turn } else { turn.other() };
        let at = (&sq, self.men, self.to_successor[var], turn);
        values_along::<E>((values, six), at, |q| self.orient(q), qs, f)
    }
}

/// The values in a successor slice (`values`, indexer `six`) of positions that differ only in
/// the square of one man: the men on `sq` (the successor's order and orientation, `n` of them)
/// but the man in slot `slot` (not a king), `turn` to move, that man on `orient(q)` for each
/// square `q` of `qs` in turn (a square no other man stands on). Calls `f(q, value)` for each.
/// The kings, hence a pawnless successor's symmetry, are the same for every `q`: the index is
/// worked out once, and for each `q` only the rank of the man's group of like men changes.
#[inline]
fn values_along<E: ExitSet>(
    (values, six): (SliceValuesRef<'_>, &SliceIndexer),
    (sq, n, slot, turn): (&[Square; 8], usize, usize, Color),
    orient: impl Fn(Square) -> Square,
    qs: Bitboard,
    mut f: impl FnMut(Square, E::Value),
) -> Result<(), SolveError> {
    debug_assert!(slot != 0 && slot != six.black_king());
    let mut sq = *sq;
    // With pawns the placement is stored as it is (the identity, the first symmetry).
    let sym = if six.is_pawnless() {
        pawnless_symmetry(sq[0], sq[six.black_king()])
    } else {
        0
    };
    let t = &SYMMETRY_TABLE[sym];
    for s in sq[..n].iter_mut() {
        *s = t[s.index()];
    }
    // The index is the sum of each group's rank times its stride: all but the man's group
    // once, that group's rank for each `q`.
    let field = six.fields()[slot];
    let group = field.first..field.first + field.len;
    let others = six
        .index_of(&sq[..n], turn)
        .expect("the kings of a legal position are apart")
        - field.stride * group_rank(&sq[group.clone()]);
    let (mut indices, mut raw) = ([0u64; 64], [0u16; 64]);
    let mut m = 0;
    // A man alone in its group (most are) is ranked by its square: no call for each `q`.
    let alone = field.len == 1;
    for q in qs {
        let s = t[orient(q).index()];
        let rank = if alone {
            s.u8() as u64
        } else {
            sq[slot] = s;
            group_rank(&sq[group.clone()])
        };
        indices[m] = others + field.stride * rank;
        m += 1;
    }
    values.get_many(&indices[..m], &mut raw[..m])?;
    for (k, q) in qs.into_iter().enumerate() {
        let v = E::decode(raw[k]).ok_or_else(|| SolveError::BadSuccessor {
            slice: *six.key(),
            index: indices[k],
        })?;
        f(q, v);
    }
    Ok(())
}

/// Where positions with `material` and the pawns `pawns` (by colour) are stored: the slice, and
/// whether colours are swapped (the material stored the other way round, ranks mirrored) and
/// files mirrored (into the canonical slice) to reach it.
fn stored_slice(material: Material, pawns: [Bitboard; 2]) -> (SliceKey, bool, bool) {
    let flip = !material.is_normalized();
    let raw = if flip {
        SliceKey {
            material: material.flipped(),
            white_pawns: pawns[1].flip_rank(),
            black_pawns: pawns[0].flip_rank(),
        }
    } else {
        SliceKey {
            material,
            white_pawns: pawns[0],
            black_pawns: pawns[1],
        }
    };
    let (key, mirror) = if raw.material.has_pawns() {
        raw.canonical()
    } else {
        (raw, false)
    };
    (key, flip, mirror)
}

/// Square `s` with ranks mirrored if `flip` (colours swapped), then files if `mirror`.
#[inline]
fn orient(s: Square, flip: bool, mirror: bool) -> Square {
    let s = if flip { s.flip_rank() } else { s };
    if mirror {
        s.flip_file()
    } else {
        s
    }
}

/// Where the capture of a man or a pawn by a man leads, for the exits of a line
/// ([`PawnExits::capture_target`]).
pub(super) enum CaptureTarget<'s, 'a> {
    /// Only the kings remain: a draw.
    Draw,
    /// Read through a [`CaptureMap`] from the successor's values.
    Read(SliceValuesRef<'a>, &'s SliceIndexer, &'s CaptureMap),
    /// Not worked out once: look at the positions one by one.
    Unknown,
}

/// The plain pushes of a line's positions ([`PawnExits::line_pushes`]).
pub(super) struct LinePushes {
    /// Pushes found.
    pub(super) n: usize,
    /// Per push: the squares of the line man where it is legal, the pushed slice and the
    /// index there of the line's first position.
    pub(super) pushes: [(Bitboard, SliceKey, u64); MAX_LINE_PUSHES],
    /// Per push: the raw values after it, by square of the line man.
    pub(super) values: [[u16; 64]; MAX_LINE_PUSHES],
    /// True if a pawn promotes: the exits of its promotions (with no capture) are then in
    /// `promoted`, by square of the line man (none where they are not legal).
    pub(super) promotes: bool,
    pub(super) promoted: [Exits; 64],
}

/// At most two pushes for each of eight pawns.
const MAX_LINE_PUSHES: usize = 16;

impl Default for LinePushes {
    fn default() -> LinePushes {
        LinePushes {
            n: 0,
            pushes: [(Bitboard::EMPTY, SliceKey::pawnless(Material::default()), 0); MAX_LINE_PUSHES],
            values: [[0; 64]; MAX_LINE_PUSHES],
            promotes: false,
            promoted: [Exits::default(); 64],
        }
    }
}

/// The square ahead of `s` for a pawn of `us` (on the board: the pawn is not on its last rank).
#[inline]
pub(super) fn ahead(us: Color, s: Square) -> Square {
    Square::new(if us == Color::White {
        s.u8() + 8
    } else {
        s.u8() - 8
    })
}

/// The squares beside `s` on its rank (where an enemy pawn may take en passant after a double
/// push to `s`).
#[inline]
pub(super) fn beside(s: Square) -> Bitboard {
    let mut b = Bitboard::EMPTY;
    if s.file() > 0 {
        b = b.with(Square::new(s.u8() - 1));
    }
    if s.file() < 7 {
        b = b.with(Square::new(s.u8() + 1));
    }
    b
}

/// Who is who in position `d`: the side to move, the other, the mover's king, the other side's
/// pawns, and its pawns and men but the king (what the mover may take).
#[inline]
fn sides(g: &Geometry, d: &Decoded) -> (Color, Color, Square, Bitboard, Bitboard) {
    let us = d.turn;
    let them = us.other();
    let their_pawns = g.pawns[them.index()];
    let mut victims = their_pawns;
    for j in g.side(them).filter(|&j| !g.is_king(j)) {
        victims = victims.with(d.squares[j]);
    }
    (us, them, kings(g, d).0, their_pawns, victims)
}

/// True if the mover's king on `king` is safe in `d` with `occupied`, the other side's pawns
/// `pawns` and its men but `captured`.
#[inline]
fn king_safe(
    g: &Geometry,
    d: &Decoded,
    king: Square,
    occupied: Bitboard,
    pawns: Bitboard,
    captured: Option<usize>,
) -> bool {
    let us = d.turn;
    (pawn_attacks(us, king) & pawns).is_empty()
        && !g
            .side(us.other())
            .filter(|&j| Some(j) != captured)
            .any(|j| attacks(g.men[j], d.squares[j], occupied).contains(king))
}

/// A position after a move that leaves the slice, as the mover left it (any orientation).
struct After {
    material: Material,
    men: [(Piece, Square); 9],
    n: usize,
    pawns: [Bitboard; 2],
    turn: Color,
}

impl<'a> PawnExits<'a> {
    /// `None` if the slice is pawnless (see the capture exits) or a successor's values are not
    /// available as an array (exits are then looked at through positions).
    pub(super) fn new(g: &Geometry, key: &SliceKey, succ: &'a dyn Successors) -> Option<PawnExits<'a>> {
        PawnExits::with_values(g, key, &|s| succ.slice_values(s))
    }

    /// [`PawnExits::new`] with the successors' values from `values` (any metric: what they
    /// mean is the reader's, [`ExitSet`]).
    pub(super) fn with_values(
        g: &Geometry,
        key: &SliceKey,
        values: &dyn Fn(&SliceKey) -> Option<SliceValuesRef<'a>>,
    ) -> Option<PawnExits<'a>> {
        if g.pawnless {
            return None;
        }
        let mut successors = Vec::new();
        for s in key.successors() {
            if successors.iter().any(|(k, _, _)| *k == s) {
                continue;
            }
            let values = values(&s)?;
            successors.push((s, values, SliceIndexer::new(s)));
        }
        let mut pushes = Vec::new();
        for us in [Color::White, Color::Black] {
            for from in g.pawns[us.index()] {
                let one = ahead(us, from);
                let two = (from.relative_rank(us) == 1).then(|| ahead(us, one));
                for to in [Some(one), two].into_iter().flatten() {
                    if to.relative_rank(us) == 7 || (g.pawns[0] | g.pawns[1]).contains(to) {
                        continue;
                    }
                    let mut after = *key;
                    let pawns = if us == Color::White {
                        &mut after.white_pawns
                    } else {
                        &mut after.black_pawns
                    };
                    *pawns = pawns.without(from).with(to);
                    if after.canonical() != (after, false) {
                        continue;
                    }
                    if let Some((_, values, _)) = successors.iter().find(|(k, _, _)| *k == after) {
                        pushes.push((from, to, after, *values));
                    }
                }
            }
        }
        let mut captures = [None; 8];
        for (m, slot) in captures.iter_mut().enumerate().take(g.n) {
            if g.is_king(m) {
                continue;
            }
            let material = key.material.without(g.men[m].color, g.men[m].role);
            if material.is_bare_kings() {
                continue;
            }
            let (slice, flip, mirror) = stored_slice(material, g.pawns);
            let Some(at) = successors.iter().position(|(k, _, _)| *k == slice) else {
                continue;
            };
            let map = CaptureMap::new(g, m, flip, mirror, successors[at].2.men());
            *slot = Some(ManCapture { at, map });
        }
        let mut pawn_captures = Vec::new();
        for c in [Color::White, Color::Black] {
            for p in g.pawns[c.index()] {
                let material = key.material.without(c, Role::Pawn);
                if material.is_bare_kings() {
                    pawn_captures.push((p, None));
                    continue;
                }
                let mut pawns = g.pawns;
                pawns[c.index()] = pawns[c.index()].without(p);
                let (slice, flip, mirror) = stored_slice(material, pawns);
                if let Some(at) = successors.iter().position(|(k, _, _)| *k == slice) {
                    let map = CaptureMap::new(g, NO_MAN, flip, mirror, successors[at].2.men());
                    pawn_captures.push((p, Some(ManCapture { at, map })));
                }
            }
        }
        let mut exits = PawnExits {
            material: key.material,
            successors,
            pushes,
            per_side: g.ix.per_side(),
            captures,
            pawn_captures,
            promotions: Vec::new(),
        };
        for us in [Color::White, Color::Black] {
            for from in g.pawns[us.index()] {
                if from.relative_rank(us) != 6 {
                    continue;
                }
                let mut pawns = g.pawns;
                pawns[us.index()] = pawns[us.index()].without(from);
                for role in Role::PROMOTIONS {
                    let material = key.material.without(us, Role::Pawn).with(us, role);
                    let men = g.men[..g.n].iter().copied().chain([Piece::new(us, role)]);
                    if let Ok(Some(t)) = exits.target(material, pawns, men) {
                        exits.promotions.push((from, role, t));
                    }
                }
            }
        }
        Some(exits)
    }

    /// The value after man `k` of `d` takes man `m` on `to` (the pawns unchanged), read through
    /// the capture's precomputed successor; `None` if it has none (see `captures`).
    #[inline]
    fn man_capture<E: ExitSet>(
        &self,
        g: &Geometry,
        d: &Decoded,
        k: usize,
        m: usize,
        to: Square,
    ) -> Option<Result<E::Value, SolveError>> {
        let c = self.captures[m].as_ref()?;
        let (_, values, six) = &self.successors[c.at];
        Some(c.map.value::<E>(g, d, k, to, *values, six))
    }

    /// Where the capture by a man of man `m` (`Ok`) or of the pawn on a square (`Err`) leads.
    pub(super) fn capture_target(&self, victim: Result<usize, Square>) -> CaptureTarget<'_, 'a> {
        let c = match victim {
            Ok(m) => self.captures[m].as_ref(),
            Err(p) => match self.pawn_captures.iter().find(|e| e.0 == p) {
                Some((_, None)) => return CaptureTarget::Draw,
                Some((_, Some(c))) => Some(c),
                None => None,
            },
        };
        match c {
            Some(c) => {
                let (_, values, six) = &self.successors[c.at];
                CaptureTarget::Read(*values, six, &c.map)
            }
            None => CaptureTarget::Unknown,
        }
    }

    /// The exits of the legal position `d`, and whether it has a legal move inside the slice
    /// (asked only when it matters: no exit, or only losing ones; else `true`).
    pub(super) fn exits(
        &self,
        g: &Geometry,
        d: &Decoded,
        succ: &dyn Successors,
    ) -> Result<(Exits, bool), SolveError> {
        let exits = self.exits_only(g, d, succ)?;
        let inside = match exits.best {
            Some(Value::Loss(_)) | None => g.has_inside_move(d, kings(g, d).0),
            _ => true,
        };
        Ok((exits, inside))
    }

    /// The exits of the legal position `d` alone: [`PawnExits::exits`] without asking for a move
    /// inside the slice (a lost position's slowest losing exit, looked up again: KRPvKR 13.3 M
    /// times).
    #[inline]
    pub(super) fn exits_only(
        &self,
        g: &Geometry,
        d: &Decoded,
        succ: &dyn Successors,
    ) -> Result<Exits, SolveError> {
        let mut exits = Exits::default();
        self.man_capture_exits(g, d, &mut exits)?;
        self.pawn_move_exits(g, d, succ, &mut exits)?;
        Ok(exits)
    }

    /// The captures by men (king included) of the legal position `d`, added to `exits`.
    pub(super) fn man_capture_exits<E: ExitSet>(
        &self,
        g: &Geometry,
        d: &Decoded,
        exits: &mut E,
    ) -> Result<(), SolveError> {
        let (us, them, our_king, their_pawns, victims) = sides(g, d);
        let man_at = |sq: Square| g.side(them).find(|&j| d.squares[j] == sq);
        let safe = |king, occupied, pawns, captured| king_safe(g, d, king, occupied, pawns, captured);
        for k in g.side(us) {
            let from = d.squares[k];
            for to in attacks(g.men[k], from, d.occupied) & victims {
                let occupied = d.occupied.without(from);
                let king = if g.is_king(k) { to } else { our_king };
                let (captured, pawns, material) = if their_pawns.contains(to) {
                    (
                        None,
                        their_pawns.without(to),
                        self.material.without(them, Role::Pawn),
                    )
                } else {
                    let m = man_at(to).expect("a victim stands there");
                    (Some(m), their_pawns, self.material.without(them, g.men[m].role))
                };
                if !safe(king, occupied, pawns, captured) {
                    continue;
                }
                if let Some(v) = captured.and_then(|m| self.man_capture::<E>(g, d, k, m, to)) {
                    exits.add_move_into(v?);
                    continue;
                }
                if captured.is_none() {
                    if let CaptureTarget::Read(values, six, map) = self.capture_target(Err(to)) {
                        exits.add_move_into(map.value::<E>(g, d, k, to, values, six)?);
                        continue;
                    }
                }
                let mut after = self.after(g, d, material, captured, Some((k, to)));
                after.pawns[them.index()] = pawns;
                exits.add_move_into(self.value::<E>(after)?);
            }
        }
        Ok(())
    }

    /// The pawn moves of the legal position `d` (pushes, captures, promotions), added to
    /// `exits`.
    pub(super) fn pawn_move_exits(
        &self,
        g: &Geometry,
        d: &Decoded,
        succ: &dyn Successors,
        exits: &mut Exits,
    ) -> Result<(), SolveError> {
        let mut ep = |from, to| Ok(Some(self.by_position(g, d, from, to, succ)?));
        let whole = self.pawn_move_exits_with(g, d, &mut ep, exits)?;
        debug_assert!(whole, "the mates' source values every position");
        Ok(())
    }

    /// [`PawnExits::pawn_move_exits`] for exits of any metric: `ep(from, to)` values the
    /// position after the double push `from`-`to` beside an enemy pawn (it may have an
    /// en-passant capture), for the side to move there; `Ok(false)`, `exits` partly added to,
    /// where it gives none.
    pub(super) fn pawn_move_exits_with<E: ExitSet>(
        &self,
        g: &Geometry,
        d: &Decoded,
        ep: &mut dyn FnMut(Square, Square) -> Result<Option<E::Value>, SolveError>,
        exits: &mut E,
    ) -> Result<bool, SolveError> {
        let our_pawns = g.pawns[d.turn.index()];
        if our_pawns.is_empty() {
            return Ok(true);
        }
        let (us, them, our_king, their_pawns, victims) = sides(g, d);
        let man_at = |sq: Square| g.side(them).find(|&j| d.squares[j] == sq);
        let safe = |king, occupied, pawns, captured| king_safe(g, d, king, occupied, pawns, captured);
        let forward = |s: Square| ahead(us, s);
        for from in our_pawns {
            let one = forward(from);
            let mut targets: [(Square, bool); 4] = [(Square::A1, false); 4];
            let mut n = 0;
            if !d.occupied.contains(one) {
                targets[n] = (one, false);
                n += 1;
                if from.relative_rank(us) == 1 && !d.occupied.contains(forward(one)) {
                    targets[n] = (forward(one), true);
                    n += 1;
                }
            }
            for to in pawn_attacks(us, from) & victims {
                targets[n] = (to, false);
                n += 1;
            }
            for &(to, double) in &targets[..n] {
                let occupied = d.occupied.without(from).with(to);
                let (captured, pawns, material) = if their_pawns.contains(to) {
                    (
                        None,
                        their_pawns.without(to),
                        self.material.without(them, Role::Pawn),
                    )
                } else if let Some(m) = man_at(to) {
                    (Some(m), their_pawns, self.material.without(them, g.men[m].role))
                } else {
                    (None, their_pawns, self.material)
                };
                if !safe(our_king, occupied, pawns, captured) {
                    continue;
                }
                if double && (pawns & beside(to)).any() {
                    // An enemy pawn beside it may take en passant: ask the source.
                    match ep(from, to)? {
                        Some(v) => exits.add_move_into(v),
                        None => return Ok(false),
                    }
                    continue;
                }
                if captured.is_none() && pawns == their_pawns {
                    if let Some(&(_, _, slice, values)) =
                        self.pushes.iter().find(|p| p.0 == from && p.1 == to)
                    {
                        let index = d.fields + them.index() as u64 * self.per_side;
                        let v = E::decode(values.get(index)?)
                            .ok_or_else(|| SolveError::BadSuccessor { slice, index })?;
                        exits.add_move_into(v);
                        continue;
                    }
                }
                if to.relative_rank(us) == 7 && captured.is_none() && pawns == their_pawns {
                    // A plain promotion: read through its target worked out once.
                    let plain = self.promotions.iter().filter(|p| p.0 == from);
                    if plain.clone().count() == Role::PROMOTIONS.len() {
                        for (_, _, t) in plain {
                            let squares = d.squares[..g.n].iter().copied().chain([to]);
                            exits.add_move_into(self.read::<E>(t, squares, them)?);
                        }
                        continue;
                    }
                }
                if to.relative_rank(us) == 7 {
                    for role in Role::PROMOTIONS {
                        let material = material.without(us, Role::Pawn).with(us, role);
                        let mut after = self.after(g, d, material, captured, None);
                        after.add(Piece::new(us, role), to);
                        after.pawns[us.index()] = our_pawns.without(from);
                        after.pawns[them.index()] = pawns;
                        exits.add_move_into(self.value::<E>(after)?);
                    }
                } else {
                    let mut after = self.after(g, d, material, captured, None);
                    after.pawns[us.index()] = our_pawns.without(from).with(to);
                    after.pawns[them.index()] = pawns;
                    exits.add_move_into(self.value::<E>(after)?);
                }
            }
        }
        Ok(true)
    }

    /// The plain pushes of the side to move in the line `line` ([`Geometry::decode_line`],
    /// line man `l`), for the line's 64 positions at once: for each push, the squares of `l`
    /// where it is legal (not on the pawn's way, and leaving its king safe) and the raw values
    /// of the positions after it, one per square of `l` (the same indices in the pushed slice,
    /// the other side to move: a line there too, read at once). And the plain promotions (no
    /// capture), their exits into `out.promoted`: the positions after one differ only in the
    /// square of `l`, read by index arithmetic ([`values_along`]).
    ///
    /// `victims` are the squares of the other side's pawns and men but the king and the line
    /// man. `Ok(false)` when a pawn move of the side is anything but such a push or promotion:
    /// a capture of a man other than the line man (the caller looks at the squares of `l` where
    /// it can be captured), a double push beside an enemy pawn (en passant), a push into a
    /// mirrored slice, or a promotion not worked out once. The line is then looked at position
    /// by position.
    pub(super) fn line_pushes(
        &self,
        g: &Geometry,
        line: &Decoded,
        l: usize,
        victims: Bitboard,
        out: &mut LinePushes,
    ) -> Result<bool, SolveError> {
        let us = line.turn;
        let them = us.other();
        let (sq, occ) = (&line.squares, line.occupied);
        let our_king = sq[if us == Color::White { 0 } else { g.black_king }];
        let their_pawns = g.pawns[them.index()];
        let forward = |s: Square| ahead(us, s);
        out.n = 0;
        if out.promotes {
            out.promoted = [Exits::default(); 64];
            out.promotes = false;
        }
        // The squares of `l` where our king is safe after the pawn's move.
        let safe = |after| g.line_king_safe(l, line, our_king, after, their_pawns, NO_MAN);
        for from in g.pawns[us.index()] {
            let one = forward(from);
            if (pawn_attacks(us, from) & victims).any() {
                return Ok(false);
            }
            if occ.contains(one) {
                continue;
            }
            if one.relative_rank(us) == 7 {
                if !self.line_promotions(g, line, l, from, &mut out.promoted)? {
                    return Ok(false);
                }
                out.promotes = true;
                continue;
            }
            let two = (from.relative_rank(us) == 1)
                .then(|| forward(one))
                .filter(|&t| !occ.contains(t));
            for (to, double) in [(one, false)].into_iter().chain(two.map(|t| (t, true))) {
                if double && (their_pawns & beside(to)).any() {
                    return Ok(false);
                }
                let Some(&(_, _, slice, values)) = self.pushes.iter().find(|p| p.0 == from && p.1 == to)
                else {
                    return Ok(false);
                };
                // The line man is not on the pawn's way, and our king is safe after it.
                let ok = !Bitboard::EMPTY.with(to).with(one) & safe(occ.without(from).with(to));
                let first = line.fields + them.index() as u64 * self.per_side;
                let k = out.n;
                values.get_run(first, &mut out.values[k])?;
                out.pushes[k] = (ok, slice, first);
                out.n += 1;
            }
        }
        Ok(true)
    }

    /// The plain promotions (no capture) of the pawn on `from` (the side to move's, on its
    /// seventh rank, the square ahead of it empty) in the line `line` (line man `l`), for the
    /// line's 64 positions at once: each role's exit added to `out` by square of `l` where the
    /// promotion is legal (`l` not on the square promoted on, and the king safe after it). The
    /// positions after one differ only in the square of `l`, read by index arithmetic
    /// ([`values_along`]). `Ok(false)`, `out` untouched, if they were not worked out once.
    pub(super) fn line_promotions<E: ExitSet>(
        &self,
        g: &Geometry,
        line: &Decoded,
        l: usize,
        from: Square,
        out: &mut [E; 64],
    ) -> Result<bool, SolveError> {
        let plain = self.promotions.iter().filter(|p| p.0 == from);
        if plain.clone().count() != Role::PROMOTIONS.len() {
            return Ok(false);
        }
        let (us, them) = (line.turn, line.turn.other());
        let (sq, occ) = (&line.squares, line.occupied);
        let one = ahead(us, from);
        debug_assert!(one.relative_rank(us) == 7 && !occ.contains(one));
        let our_king = sq[if us == Color::White { 0 } else { g.black_king }];
        let after = occ.without(from).with(one);
        let safe = g.line_king_safe(l, line, our_king, after, g.pawns[them.index()], NO_MAN);
        let ok = !occ & !Bitboard::EMPTY.with(one) & safe;
        for (_, _, t) in plain {
            let (at, turn) = t.place(sq[..g.n].iter().copied().chain([one]), them);
            let (_, values, six) = &self.successors[t.at];
            let along = (&at, t.n, t.slots[l], turn);
            values_along::<E>(
                (*values, six),
                along,
                |q| t.orient(q),
                ok,
                |q, v| out[q.index()].add_move_into(v),
            )?;
        }
        Ok(true)
    }

    /// The position of `d` with material `material`, the man `captured` taken off, the man
    /// `moved.0` on `moved.1`, the other side to move; pawns as in the slice.
    fn after(
        &self,
        g: &Geometry,
        d: &Decoded,
        material: Material,
        captured: Option<usize>,
        moved: Option<(usize, Square)>,
    ) -> After {
        let mut men = [(Piece::new(Color::White, Role::King), Square::A1); 9];
        let mut n = 0;
        for k in (0..g.n).filter(|&k| Some(k) != captured) {
            let s = match moved {
                Some((m, to)) if m == k => to,
                _ => d.squares[k],
            };
            men[n] = (g.men[k], s);
            n += 1;
        }
        After {
            material,
            men,
            n,
            pawns: g.pawns,
            turn: d.turn.other(),
        }
    }

    /// The value for the side to move of a position after a move out of the slice.
    fn value<E: ExitSet>(&self, a: After) -> Result<E::Value, SolveError> {
        let men = a.men[..a.n].iter().map(|&(p, _)| p);
        match self.target(a.material, a.pawns, men)? {
            None => Ok(E::DRAW),
            Some(t) => self.read::<E>(&t, a.men[..a.n].iter().map(|&(_, s)| s), a.turn),
        }
    }

    /// Where positions with `material`, `pawns` and the men `men` (in that order) are stored;
    /// `None` for bare kings (a draw).
    fn target(
        &self,
        material: Material,
        pawns: [Bitboard; 2],
        men: impl Iterator<Item = Piece>,
    ) -> Result<Option<Target>, SolveError> {
        if material.is_bare_kings() {
            return Ok(None);
        }
        let (key, flip, mirror) = stored_slice(material, pawns);
        let at = self
            .successors
            .iter()
            .position(|(k, _, _)| *k == key)
            .ok_or_else(|| SolveError::MissingSuccessor(key))?;
        // The men in the successor's order.
        let smen = self.successors[at].2.men();
        let mut slots = [0usize; 9];
        let mut taken = [false; 8];
        let mut n = 0;
        for p in men {
            let p = if flip {
                Piece::new(p.color.other(), p.role)
            } else {
                p
            };
            let slot = (0..smen.len())
                .find(|&i| !taken[i] && smen[i] == p)
                .expect("the successor has every man of the position");
            taken[slot] = true;
            slots[n] = slot;
            n += 1;
        }
        Ok(Some(Target {
            at,
            flip,
            mirror,
            slots,
            n,
        }))
    }

    /// The value for `turn` to move of the position with the men of `t` on `squares` (in the
    /// same order), read from its successor.
    #[inline]
    fn read<E: ExitSet>(
        &self,
        t: &Target,
        squares: impl Iterator<Item = Square>,
        turn: Color,
    ) -> Result<E::Value, SolveError> {
        let (mut sq, turn) = t.place(squares, turn);
        let (_, values, six) = &self.successors[t.at];
        value_in::<E>(*values, six, &mut sq[..t.n], turn)
    }

    /// The value, for the side to move after it, of the pawn move `from`-`to` of `d`, through a
    /// `Position` and the successor source (which resolves en passant).
    fn by_position(
        &self,
        g: &Geometry,
        d: &Decoded,
        from: Square,
        to: Square,
        succ: &dyn Successors,
    ) -> Result<Value, SolveError> {
        let pos =
            g.ix.position_of(&d.squares[..g.n], d.turn)
                .expect("a decoded index is a position");
        let m = pos
            .legal_moves()
            .iter()
            .find(|m| m.from == from && m.to == to)
            .copied()
            .expect("a legal double push is a legal move");
        succ.value_of(&pos.play(&m))
    }
}

impl After {
    fn add(&mut self, piece: Piece, to: Square) {
        self.men[self.n] = (piece, to);
        self.n += 1;
    }
}

/// The value stored in a successor slice (its `values` and indexer `six`) for the men on `sq`
/// (in the successor's men order and orientation) with `turn` to move. A pawnless successor's
/// placement is brought into table form first.
pub(super) fn value_in<E: ExitSet>(
    values: SliceValuesRef<'_>,
    six: &SliceIndexer,
    sq: &mut [Square],
    turn: Color,
) -> Result<E::Value, SolveError> {
    if six.is_pawnless() {
        let sym = pawnless_symmetry(sq[0], sq[six.black_king()]);
        if sym != 0 {
            let t = &SYMMETRY_TABLE[sym];
            for s in sq.iter_mut() {
                *s = t[s.index()];
            }
        }
    }
    let index = six
        .index_of(sq, turn)
        .expect("the kings of a legal position are apart");
    E::decode(values.get(index)?).ok_or_else(|| SolveError::BadSuccessor {
        slice: *six.key(),
        index,
    })
}
