//! Planning a job: every slice of the requested materials and of every material they convert
//! into, ordered leaf-first (a slice comes after every slice its moves lead into).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use zermelo_chess::slice::SliceKey;
use zermelo_chess::Material;

/// A material's slices, leaf-first.
#[derive(Clone, Debug)]
pub struct MaterialPlan {
    pub material: Material,
    /// Waves of slices: each slice's successors of the same material are in earlier waves, so
    /// the slices of one wave are independent of each other and may be solved in any order.
    pub waves: Vec<Vec<SliceKey>>,
    /// Slices of other materials that this material's moves lead into.
    pub external: BTreeSet<SliceKey>,
    /// Positions (indices, both sides to move) over all slices.
    pub positions: u64,
}

impl MaterialPlan {
    pub fn slices(&self) -> impl Iterator<Item = &SliceKey> {
        self.waves.iter().flatten()
    }

    pub fn slice_count(&self) -> usize {
        self.waves.iter().map(Vec::len).sum()
    }
}

/// The plan of a job: materials leaf-first (every material after all those it converts into).
#[derive(Clone, Debug)]
pub struct Plan {
    pub materials: Vec<MaterialPlan>,
}

impl Plan {
    pub fn positions(&self) -> u64 {
        self.materials.iter().map(|m| m.positions).sum()
    }
}

/// A material's slices and, for each, the slices one move leads into.
type MaterialGraph = (Vec<SliceKey>, HashMap<SliceKey, Vec<SliceKey>>);

/// The slices of one material with their successors.
fn material_graph(material: Material) -> MaterialGraph {
    let slices = SliceKey::all_of(material);
    let edges = slices.iter().map(|s| (*s, s.successors())).collect();
    (slices, edges)
}

/// Orders a material's slices in waves: a slice's wave is one more than the deepest wave of its
/// successors of the same material (0 with none).
fn waves(slices: &[SliceKey], edges: &HashMap<SliceKey, Vec<SliceKey>>) -> Vec<Vec<SliceKey>> {
    // Successors of the same material have a larger pawn rank sum: visit by descending rank sum.
    let mut order: Vec<SliceKey> = slices.to_vec();
    order.sort_by_key(|s| (std::cmp::Reverse(s.rank_sum()), s.raw()));
    let mut depth: HashMap<SliceKey, usize> = HashMap::new();
    for s in &order {
        let d = edges[s]
            .iter()
            .filter(|t| t.material == s.material)
            .map(|t| {
                depth
                    .get(t)
                    .copied()
                    .expect("same-material successor has a larger rank sum")
                    + 1
            })
            .max()
            .unwrap_or(0);
        depth.insert(*s, d);
    }
    let max = depth.values().copied().max().unwrap_or(0);
    let mut out = vec![Vec::new(); if slices.is_empty() { 0 } else { max + 1 }];
    for s in slices {
        out[depth[s]].push(*s);
    }
    for w in &mut out {
        w.sort_by_key(|s| s.raw());
    }
    out
}

/// Plans the given materials and every material they convert into.
pub fn plan(targets: &[Material]) -> Plan {
    // Closure over materials, with each material's graph.
    let mut graphs: BTreeMap<Material, MaterialGraph> = BTreeMap::new();
    let mut todo: Vec<Material> = targets.iter().map(|m| m.normalized().0).collect();
    while let Some(m) = todo.pop() {
        if graphs.contains_key(&m) || m.is_bare_kings() {
            continue;
        }
        let g = material_graph(m);
        for succ in g.1.values().flatten() {
            if succ.material != m && !graphs.contains_key(&succ.material) {
                todo.push(succ.material);
            }
        }
        graphs.insert(m, g);
    }
    // Materials leaf-first: a material's successors have fewer men, or as many men and fewer
    // pawns. Sorting by (men, pawns, name) is therefore a topological order; checked below.
    let mut materials: Vec<Material> = graphs.keys().copied().collect();
    materials.sort_by_key(|m| (m.men(), m.pawns(), m.to_string()));
    let rank: HashMap<Material, usize> = materials.iter().enumerate().map(|(i, m)| (*m, i)).collect();
    let mut out = Vec::new();
    for m in materials {
        let (slices, edges) = &graphs[&m];
        let mut external = BTreeSet::new();
        for s in slices {
            for t in &edges[s] {
                if t.material != m {
                    assert!(
                        rank[&t.material] < rank[&m],
                        "material order is not leaf-first: {s} -> {t}"
                    );
                    external.insert(*t);
                }
            }
        }
        let positions = slices
            .iter()
            .map(|s| zermelo_chess::index::SliceIndexer::new(*s).size())
            .sum();
        out.push(MaterialPlan {
            material: m,
            waves: waves(slices, edges),
            external,
            positions,
        });
    }
    Plan { materials: out }
}

/// The slices reachable from some root slices (a position's slice, and for a position with an
/// en-passant square the slices one move away): what analysing one position needs.
#[derive(Clone, Debug)]
pub struct ReachablePlan {
    pub roots: Vec<SliceKey>,
    /// The slices to solve, leaf-first: every successor of a slice of wave `w` is in an earlier
    /// wave, in `available` or in `cut`. Slices of one wave are independent of each other.
    pub waves: Vec<Vec<SliceKey>>,
    /// Reached slices whose values are already stored: read, not solved, not looked beyond.
    pub available: BTreeSet<SliceKey>,
    /// Reached slices that a declared rule values (adjudication): not solved, not looked beyond.
    pub cut: BTreeSet<SliceKey>,
    /// Positions (indices, both sides to move) of the slices to solve.
    pub positions: u64,
    /// Positions of the available slices (read into memory while solving).
    pub available_positions: u64,
    /// The most positions of one slice to solve.
    pub largest_slice: u64,
    /// The successors of every slice to solve, as they were generated.
    edges: HashMap<SliceKey, Vec<SliceKey>>,
}

/// A plan that would reach more slices than allowed: planning stopped there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the roots reach more than {limit} slices")]
pub struct TooManySlices {
    pub limit: usize,
}

impl ReachablePlan {
    pub fn slices(&self) -> impl Iterator<Item = &SliceKey> {
        self.waves.iter().flatten()
    }

    pub fn slice_count(&self) -> usize {
        self.waves.iter().map(Vec::len).sum()
    }

    /// The slices to solve as a [`Plan`] for the scheduler: grouped by material, materials
    /// leaf-first, each material's slices in the order of the waves (a slice after its
    /// successors). Slices outside the plan (available or cut) are each material's `external`.
    pub fn to_plan(&self) -> Plan {
        let mut by_material: BTreeMap<Material, Vec<Vec<SliceKey>>> = BTreeMap::new();
        for wave in &self.waves {
            let mut here: BTreeMap<Material, Vec<SliceKey>> = BTreeMap::new();
            for s in wave {
                here.entry(s.material).or_default().push(*s);
            }
            for (m, slices) in here {
                by_material.entry(m).or_default().push(slices);
            }
        }
        let planned: BTreeSet<SliceKey> = self.slices().copied().collect();
        let mut materials: Vec<MaterialPlan> = by_material
            .into_iter()
            .map(|(material, waves)| {
                let external = waves
                    .iter()
                    .flatten()
                    .flat_map(|s| &self.edges[s])
                    .filter(|t| t.material != material || !planned.contains(t))
                    .copied()
                    .collect();
                let positions = waves
                    .iter()
                    .flatten()
                    .map(|s| zermelo_chess::index::SliceIndexer::new(*s).size())
                    .sum();
                MaterialPlan {
                    material,
                    waves,
                    external,
                    positions,
                }
            })
            .collect();
        materials.sort_by_key(|m| (m.material.men(), m.material.pawns(), m.material.to_string()));
        Plan { materials }
    }

    /// The same roots planned again, stopping at the slices `available` now: a walk over the
    /// successors generated the first time (none is generated again), so it is cheap enough to
    /// run under a lock. Slices this plan did not look beyond (available or cut here) stay as
    /// they were.
    pub fn replan(&self, available: &dyn Fn(&SliceKey) -> bool) -> ReachablePlan {
        let successors = |s: &SliceKey| self.edges.get(s).cloned();
        let cut = |s: &SliceKey| self.cut.contains(s);
        let was_available = |s: &SliceKey| available(s) || self.available.contains(s);
        reachable_with(&self.roots, &was_available, &cut, &successors, usize::MAX).expect("no limit")
    }

    /// The materials of the slices to solve, with their slice counts.
    pub fn materials(&self) -> BTreeMap<Material, usize> {
        let mut out = BTreeMap::new();
        for s in self.slices() {
            *out.entry(s.material).or_insert(0) += 1;
        }
        out
    }
}

/// Plans the slices reachable from `roots` through [`SliceKey::successors`], stopping at
/// slices that are `available` (already solved and stored) or else `cut` (valued by a rule).
/// Bare kings are never a slice. The plan does not depend on the order of `roots`.
pub fn reachable_plan(
    roots: &[SliceKey],
    available: &dyn Fn(&SliceKey) -> bool,
    cut: &dyn Fn(&SliceKey) -> bool,
) -> ReachablePlan {
    reachable_plan_within(roots, available, cut, usize::MAX).expect("no limit")
}

/// [`reachable_plan`], refused as soon as more than `limit` slices are reached (to solve,
/// available or cut), so that planning a huge root costs little time and memory.
pub fn reachable_plan_within(
    roots: &[SliceKey],
    available: &dyn Fn(&SliceKey) -> bool,
    cut: &dyn Fn(&SliceKey) -> bool,
    limit: usize,
) -> Result<ReachablePlan, TooManySlices> {
    reachable_with(roots, available, cut, &|s| Some(s.successors()), limit)
}

/// The walk behind [`reachable_plan_within`] and [`ReachablePlan::replan`], with the
/// successors of a slice from `successors` (`None`: a slice not to look beyond).
fn reachable_with(
    roots: &[SliceKey],
    available: &dyn Fn(&SliceKey) -> bool,
    cut: &dyn Fn(&SliceKey) -> bool,
    successors: &dyn Fn(&SliceKey) -> Option<Vec<SliceKey>>,
    limit: usize,
) -> Result<ReachablePlan, TooManySlices> {
    let mut plan_set: BTreeSet<SliceKey> = BTreeSet::new();
    let mut avail = BTreeSet::new();
    let mut cuts = BTreeSet::new();
    let mut edges: HashMap<SliceKey, Vec<SliceKey>> = HashMap::new();
    let mut todo: Vec<SliceKey> = roots.to_vec();
    let mut seen: BTreeSet<SliceKey> = roots.iter().copied().collect();
    if seen.len() > limit {
        return Err(TooManySlices { limit });
    }
    while let Some(s) = todo.pop() {
        if available(&s) {
            avail.insert(s);
            continue;
        }
        let succ = match successors(&s) {
            Some(succ) if !cut(&s) => succ,
            _ => {
                cuts.insert(s);
                continue;
            }
        };
        for t in &succ {
            if seen.insert(*t) {
                if seen.len() > limit {
                    return Err(TooManySlices { limit });
                }
                todo.push(*t);
            }
        }
        plan_set.insert(s);
        edges.insert(s, succ);
    }
    // Successors have fewer men, or as many and fewer pawns, or the same material with a larger
    // pawn rank sum: this order visits every successor before its predecessors.
    let mut order: Vec<SliceKey> = plan_set.iter().copied().collect();
    order.sort_by_key(|s| {
        (
            s.material.men(),
            s.material.pawns(),
            s.material.to_string(),
            std::cmp::Reverse(s.rank_sum()),
            s.raw(),
        )
    });
    let mut depth: HashMap<SliceKey, usize> = HashMap::new();
    for s in &order {
        let d = edges[s]
            .iter()
            .filter(|t| plan_set.contains(t))
            .map(|t| {
                depth
                    .get(t)
                    .copied()
                    .expect("a successor is ordered before its predecessors")
                    + 1
            })
            .max()
            .unwrap_or(0);
        depth.insert(*s, d);
    }
    let mut waves = vec![Vec::new(); depth.values().copied().max().map_or(0, |m| m + 1)];
    for s in &order {
        waves[depth[s]].push(*s);
    }
    for w in &mut waves {
        w.sort();
    }
    let size = |s: &SliceKey| zermelo_chess::index::SliceIndexer::new(*s).size();
    let mut roots = roots.to_vec();
    roots.sort();
    roots.dedup();
    Ok(ReachablePlan {
        roots,
        positions: plan_set.iter().map(size).sum(),
        available_positions: avail.iter().map(size).sum(),
        largest_slice: plan_set.iter().map(size).max().unwrap_or(0),
        waves,
        available: avail,
        cut: cuts,
        edges,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mats(names: &[&str]) -> Vec<Material> {
        names.iter().map(|n| n.parse().unwrap()).collect()
    }

    #[test]
    fn kpk_plan() {
        let p = plan(&mats(&["KPvK"]));
        let names: Vec<String> = p.materials.iter().map(|m| m.material.to_string()).collect();
        assert_eq!(names, ["KBvK", "KNvK", "KQvK", "KRvK", "KPvK"]);
        let kpk = p.materials.last().unwrap();
        // Pawn on rank 7 first (wave 0), rank 2 last; rank 2 pawns reach rank 4 in one move
        // and so wait for rank 3 and 4: six waves, four slices (files a-d) in each.
        assert_eq!(kpk.waves.len(), 6);
        assert!(kpk.waves.iter().all(|w| w.len() == 4));
        assert_eq!(kpk.waves[0][0].rank_sum(), 6);
        // 3,612 legal king pairs per side to move (index layout 3).
        assert_eq!(kpk.positions, 24 * 2 * 3612);
    }

    /// Leaf-first: every successor of every slice is planned before it (in an earlier material
    /// or an earlier wave), and no slice is planned twice.
    #[test]
    fn every_successor_comes_first() {
        let p = plan(&mats(&["KPvKP", "KRvKP", "KPPvK"]));
        let mut done: BTreeSet<SliceKey> = BTreeSet::new();
        for m in &p.materials {
            for wave in &m.waves {
                for s in wave {
                    for t in s.successors() {
                        assert!(done.contains(&t), "{s} planned before its successor {t}");
                    }
                }
                for s in wave {
                    assert!(done.insert(*s), "{s} planned twice");
                }
            }
        }
    }

    fn slice_of(fen: &str) -> SliceKey {
        let pos = zermelo_chess::Position::from_fen(fen).unwrap();
        zermelo_chess::index::locate(&pos).unwrap().slice
    }

    /// A plan is refused past its limit of slices, counted by hand on the blocked pawns below
    /// (9 slices to solve, nothing available): 9 is allowed, 8 is not.
    #[test]
    fn a_plan_past_its_limit_of_slices_is_refused() {
        let root = slice_of("8/8/3k4/3p4/3P4/3K4/8/8 w - - 0 1");
        let none = |_: &SliceKey| false;
        assert_eq!(
            reachable_plan_within(&[root], &none, &none, 9)
                .unwrap()
                .slice_count(),
            9
        );
        assert_eq!(
            reachable_plan_within(&[root], &none, &none, 8).unwrap_err(),
            TooManySlices { limit: 8 }
        );
    }

    /// Planned again with slices now available, a plan is what planning from scratch with them
    /// available gives, without generating a successor again.
    #[test]
    fn replan_equals_planning_again() {
        let root = slice_of("8/8/3k4/3p4/8/3P4/3K4/8 w - - 0 1");
        let none = |_: &SliceKey| false;
        let full = reachable_plan(&[root], &none, &none);
        // Every pawnless slice and one pawn slice in the middle are done.
        let middle = full.waves[full.waves.len() / 2][0];
        let done = |s: &SliceKey| !s.material.has_pawns() || *s == middle;
        let again = full.replan(&done);
        let fresh = reachable_plan(&[root], &done, &none);
        assert!(again.slice_count() < full.slice_count());
        assert_eq!(again.waves, fresh.waves);
        assert_eq!(again.available, fresh.available);
        assert_eq!(again.positions, fresh.positions);
        let names = |p: &Plan| -> Vec<(Material, Vec<SliceKey>)> {
            p.materials
                .iter()
                .map(|m| (m.material, m.external.iter().copied().collect()))
                .collect()
        };
        assert_eq!(names(&again.to_plan()), names(&fresh.to_plan()));
    }

    /// Counted by hand: from White d4 / Black d5 (blocked), a king takes a pawn (either way the
    /// result is KPvK with the pawn on d4 in table orientation), the pawn walks d5, d6, d7 and
    /// promotes to Q, R, B or N: 1 + 4 + 4 = 9 slices in 6 waves.
    #[test]
    fn reachable_plan_of_blocked_pawns_counted_by_hand() {
        let root = slice_of("8/8/3k4/3p4/3P4/3K4/8/8 w - - 0 1");
        let p = reachable_plan(&[root], &|_| false, &|_| false);
        let names: Vec<String> = p.slices().map(|s| s.to_string()).collect();
        assert_eq!(p.slice_count(), 9, "{names:?}");
        assert_eq!(p.waves.len(), 6);
        // Wave 0: the four pawnless endings; then d7, d6, d5, d4 and last the root.
        assert_eq!(p.waves[0].len(), 4);
        assert!(p.waves[0].iter().all(|s| !s.material.has_pawns()));
        assert_eq!(p.waves[5], vec![root]);
        let kpk_files: Vec<u32> = p.waves[1..5].iter().map(|w| w[0].rank_sum()).collect();
        assert_eq!(kpk_files, vec![6, 5, 4, 3]);
        // Positions (index layout 3): 5 pawn slices of 3,612 king pairs and four pawnless slices
        // of 462 king pairs times 64 squares of the piece, both sides to move.
        assert_eq!(p.positions, 5 * 2 * 3612 + 4 * 2 * 462 * 64);
        assert_eq!(p.largest_slice, 2 * 462 * 64);
        assert!(p.available.is_empty() && p.cut.is_empty());
    }

    /// Available slices are read, not planned, and not looked beyond; cut ones likewise.
    #[test]
    fn reachable_plan_stops_at_available_and_cut_slices() {
        let root = slice_of("8/8/3k4/3p4/3P4/3K4/8/8 w - - 0 1");
        let d6 = slice_of("8/8/3P4/8/8/3K4/8/k7 w - - 0 1");
        let p = reachable_plan(&[root], &|s| *s == d6, &|_| false);
        // Root, d4, d5; d6 is read; d7 and the promotions are never reached.
        assert_eq!(p.slice_count(), 3);
        assert_eq!(p.available.iter().copied().collect::<Vec<_>>(), vec![d6]);
        assert_eq!(p.available_positions, 2 * 3612);
        let p = reachable_plan(&[root], &|_| false, &|s| !s.material.has_pawns());
        assert_eq!(p.slice_count(), 5);
        assert_eq!(p.cut.len(), 4);
    }

    /// As a scheduler plan: the same slices, materials leaf-first, each slice after every one
    /// of its successors.
    #[test]
    fn reachable_plan_as_a_plan() {
        let root = slice_of("8/8/3k4/3p4/3P4/3K4/8/8 w - - 0 1");
        let p = reachable_plan(&[root], &|_| false, &|_| false);
        let plan = p.to_plan();
        assert_eq!(plan.positions(), p.positions);
        let mut done: BTreeSet<SliceKey> = BTreeSet::new();
        for m in &plan.materials {
            for s in m.slices() {
                assert!(s.successors().iter().all(|t| done.contains(t)), "{s}");
                done.insert(*s);
            }
        }
        assert_eq!(done, p.slices().copied().collect());
        let names: Vec<String> = plan.materials.iter().map(|m| m.material.to_string()).collect();
        assert_eq!(names, ["KBvK", "KNvK", "KQvK", "KRvK", "KPvK", "KPvKP"]);
    }

    /// Every successor of a planned slice is planned in an earlier wave, available or cut.
    #[test]
    fn reachable_plan_is_leaf_first() {
        let root = slice_of("8/k7/3p4/p2P1p2/P2P1P2/8/8/K7 w - - 0 1");
        let p = reachable_plan(&[root], &|_| false, &|s| s.material.non_pawn_men().len() > 2);
        let mut done: BTreeSet<SliceKey> = BTreeSet::new();
        for wave in &p.waves {
            for s in wave {
                for t in s.successors() {
                    assert!(
                        done.contains(&t) || p.cut.contains(&t),
                        "{s} before its successor {t}"
                    );
                }
            }
            done.extend(wave.iter().copied());
        }
        assert_eq!(done.len(), p.slice_count());
        assert!(done.iter().all(|s| s.material.non_pawn_men().len() == 2));
    }
}
