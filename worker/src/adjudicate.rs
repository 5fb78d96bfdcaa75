//! Declared adjudication rules: values given to whole slices by a rule instead of by solving.
//!
//! Exactness is the default; a rule is only used when a user asks for it (`zermelo analyse
//! --adjudicate`). Everything solved against a rule's values is marked as depending on it and
//! stored apart from exact tables (metric [`zermelo_storage::Metric::AdjudicatedDtm`]).

use std::fmt;

use zermelo_chess::index::{locate, Location, SliceIndexer};
use zermelo_chess::probe::{self, ValueSource};
use zermelo_chess::slice::SliceKey;
use zermelo_chess::{Position, Role, Value};

use crate::solver::{SliceValuesRef, SolveError, Successors};
use crate::tables::SliceMap;

/// The distance an adjudicated win or loss counts, in plies: far beyond any mate these tables
/// hold, so a real mate is always preferred to an adjudicated win.
pub const ADJUDICATED_PLIES: u16 = 1000;

/// Plies of captures the material rule looks at before it counts.
const CAPTURE_PLIES: u32 = 4;

/// A rule that values every position of the slices it cuts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Slices with a piece other than kings and pawns (a promoted piece) and more than `men`
    /// men are scored by material after the captures of the next few plies.
    Material { men: u32 },
}

impl Rule {
    /// Parses `material:N` (N from 2 to 32).
    pub fn parse(s: &str) -> Result<Rule, String> {
        let bad =
            || format!("unknown adjudication rule {s:?}; the rule is material:N (N men, e.g. material:4)");
        let (name, n) = s.split_once(':').ok_or_else(bad)?;
        match name {
            "material" => {
                let men: u32 = n.parse().map_err(|_| bad())?;
                if !(2..=32).contains(&men) {
                    return Err(format!("material:{men}: N must be from 2 to 32"));
                }
                Ok(Rule::Material { men })
            }
            _ => Err(bad()),
        }
    }

    /// A name usable as a directory name: `material-4`.
    pub fn id(&self) -> String {
        match self {
            Rule::Material { men } => format!("material-{men}"),
        }
    }

    /// What the rule does, in a sentence (printed with every result that depends on it).
    pub fn describe(&self) -> String {
        match self {
            Rule::Material { men } => format!(
                "material:{men}: a position with a piece other than kings and pawns and more than {men} \
                 men is scored by material after up to {CAPTURE_PLIES} plies of captures (Q 9, R 5, B 3, \
                 N 3, P 1): 3 or more ahead wins, 3 or more behind loses, else a draw; an adjudicated \
                 win or loss counts {ADJUDICATED_PLIES} plies; checkmate and stalemate are exact"
            ),
        }
    }

    /// True if the rule values the whole slice (it is not solved).
    pub fn cuts(&self, key: &SliceKey) -> bool {
        match self {
            Rule::Material { men } => key.material.men() > *men && key.material.non_pawn_men().len() > 2,
        }
    }

    /// The rule's value of a legal position of a slice it cuts, for the side to move. A pure
    /// function of the position, the same in every orientation (colours swapped, mirrored).
    pub fn value(&self, pos: &Position) -> Value {
        match self {
            Rule::Material { .. } => {
                let moves = pos.legal_moves();
                if moves.is_empty() {
                    return if pos.is_check() {
                        Value::Loss(0)
                    } else {
                        Value::Draw
                    };
                }
                let score = captures(pos, CAPTURE_PLIES);
                if score >= 3 {
                    Value::Win(ADJUDICATED_PLIES + 1)
                } else if score <= -3 {
                    Value::Loss(ADJUDICATED_PLIES)
                } else {
                    Value::Draw
                }
            }
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::Material { men } => write!(f, "material:{men}"),
        }
    }
}

fn role_value(r: Role) -> i32 {
    match r {
        Role::Queen => 9,
        Role::Rook => 5,
        Role::Bishop | Role::Knight => 3,
        Role::Pawn => 1,
        Role::King => 0,
    }
}

/// Material of the side to move minus the opponent's.
fn material(pos: &Position) -> i32 {
    pos.board
        .pieces()
        .map(|(_, p)| {
            let v = role_value(p.role);
            if p.color == pos.turn {
                v
            } else {
                -v
            }
        })
        .sum()
}

/// Material for the side to move after the best sequence of captures of up to `plies` plies,
/// either side free to stop capturing (a capture search with standing pat).
fn captures(pos: &Position, plies: u32) -> i32 {
    let mut best = material(pos);
    if plies == 0 {
        return best;
    }
    for m in pos.legal_moves().iter().filter(|m| m.capture.is_some()) {
        best = best.max(-captures(&pos.play(m), plies - 1));
    }
    best
}

/// Solved slices in memory, with a rule valuing the slices it cuts (if any): the successors of
/// the slices being solved, and a value source for probing the result.
pub struct Ruled<'a> {
    pub map: &'a SliceMap,
    pub rule: Option<Rule>,
}

impl ValueSource for Ruled<'_> {
    type Error = SolveError;

    fn value_at(&self, loc: &Location) -> Result<Value, SolveError> {
        match self.rule {
            Some(rule) if rule.cuts(&loc.slice) => {
                let pos = SliceIndexer::new(loc.slice).position(loc.index).ok_or_else(|| {
                    SolveError::BadSuccessor {
                        slice: loc.slice,
                        index: loc.index,
                    }
                })?;
                Ok(rule.value(&pos))
            }
            _ => self.map.value_at(loc),
        }
    }
}

impl Successors for Ruled<'_> {
    fn value_of(&self, pos: &Position) -> Result<Value, SolveError> {
        if let (Some(rule), None) = (self.rule, pos.ep_square) {
            if let Some(loc) = locate(pos) {
                if rule.cuts(&loc.slice) {
                    return Ok(rule.value(pos));
                }
            }
        }
        probe::value(pos, self)
    }

    fn slice_values(&self, key: &SliceKey) -> Option<SliceValuesRef<'_>> {
        if self.rule.is_some_and(|r| r.cuts(key)) {
            return None;
        }
        self.map.slice_values(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(fen: &str) -> Position {
        Position::from_fen(fen).unwrap()
    }

    #[test]
    fn parse_and_describe() {
        assert_eq!(Rule::parse("material:4"), Ok(Rule::Material { men: 4 }));
        assert_eq!(Rule::parse("material:4").unwrap().id(), "material-4");
        assert!(Rule::parse("material").is_err());
        assert!(Rule::parse("material:x").is_err());
        assert!(Rule::parse("material:1").is_err());
        assert!(Rule::parse("queen:4").is_err());
    }

    #[test]
    fn cuts_only_slices_with_a_piece_and_more_men() {
        let rule = Rule::Material { men: 4 };
        let slice = |fen: &str| locate(&pos(fen)).unwrap().slice;
        // 5 men with a queen: cut. 4 men with a queen, 5 men of pawns: solved.
        assert!(rule.cuts(&slice("4k3/8/8/8/8/8/1p1P4/Q3K3 b - - 0 1")));
        assert!(!rule.cuts(&slice("4k3/8/8/8/8/8/1p6/Q3K3 b - - 0 1")));
        assert!(!rule.cuts(&slice("4k3/8/p7/8/8/8/1p1P4/4K3 b - - 0 1")));
    }

    #[test]
    fn material_rule_values() {
        let rule = Rule::Material { men: 2 };
        // Black to move, White a queen up and nothing to take: lost for Black; won for White.
        assert_eq!(
            rule.value(&pos("4k3/8/8/8/8/8/1p1P4/4K2Q b - - 0 1")),
            Value::Loss(ADJUDICATED_PLIES)
        );
        assert_eq!(
            rule.value(&pos("4k3/8/8/8/8/8/1p1P4/4K2Q w - - 0 1")),
            Value::Win(ADJUDICATED_PLIES + 1)
        );
        // The pawn takes the queen as it promotes: Black is a queen up.
        assert_eq!(
            rule.value(&pos("4k3/8/8/8/8/8/1p1P4/Q3K3 b - - 0 1")),
            Value::Win(ADJUDICATED_PLIES + 1)
        );
        // Black takes the new queen at once: pawns even, a draw.
        assert_eq!(
            rule.value(&pos("3Qk3/8/8/8/8/8/1p1P4/4K3 b - - 0 1")),
            Value::Draw
        );
        // The queen is defended by the rook: Kxd8 is illegal, Black is lost.
        assert_eq!(
            rule.value(&pos("3Qk3/8/8/8/8/8/1p6/3RK3 b - - 0 1")),
            Value::Loss(ADJUDICATED_PLIES)
        );
        // Checkmate and stalemate are exact.
        assert_eq!(
            rule.value(&pos("3Qk3/3R4/8/8/8/8/1p6/4K3 b - - 0 1")),
            Value::Loss(0)
        );
        assert_eq!(rule.value(&pos("k7/2Q5/1K6/8/8/8/8/8 b - - 0 1")), Value::Draw);
    }

    #[test]
    fn material_rule_is_symmetric() {
        let rule = Rule::Material { men: 2 };
        for fen in [
            "4k3/8/8/8/8/8/1p1P4/Q3K3 b - - 0 1",
            "3Qk3/8/8/8/8/8/1p1P4/4K3 b - - 0 1",
            "3Q4/5k2/8/2n5/8/8/1p6/3RK3 w - - 0 1",
        ] {
            let p = pos(fen);
            assert_eq!(rule.value(&p), rule.value(&p.flip_colors()), "{fen}");
            assert_eq!(rule.value(&p), rule.value(&p.flip_file()), "{fen}");
        }
    }
}
