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
        assert_eq!(kpk.positions, 24 * 8192);
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
}
