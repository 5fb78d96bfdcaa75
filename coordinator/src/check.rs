//! The coordinator's check of a slice a worker uploads, before it is accepted.
//!
//! A worker is trusted for nothing: a slice whose bytes decode to its announced hash may still
//! hold wrong values (a broken solver, bad memory, a hostile token holder). Before a slice is
//! stored, the independent verifier (`zermelo-verify`, which shares no chess code with the
//! solver) checks it whole for range and legality (every index that is not a legal position
//! holds 0, every legal one a value), and re-derives the values of a sample of its positions
//! from their children: in the slice itself and in its successors, which are finished and
//! read from the store. A slice that fails is refused, and its worker with it.
//!
//! Slices of more than [`WHOLE_POSITIONS`] positions are not held whole here, and are not
//! checked (counted as unchecked); neither are the sampled positions whose children lie in such
//! a successor (counted as skipped). `zermelo verify` checks the written tables in full.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex};

use zermelo_chess::index::SliceIndexer;
use zermelo_chess::SliceKey;
use zermelo_verify::SliceCheck;

/// Slices of at most this many positions (256 MiB of values) are held whole and checked; so are
/// successors read for the check.
pub const WHOLE_POSITIONS: u64 = 1 << 27;

/// Positions of successor slices kept decoded between checks (512 MiB of values).
const CACHE_POSITIONS: u64 = 1 << 28;

/// Positions re-derived per slice when the coordinator is told nothing else. The sample is
/// there to catch a worker whose values are wrong in bulk (a broken build, bad memory): when a
/// fraction `f` of a slice is wrong, `n` random positions all miss it with probability
/// `(1 - f)^n`: at 256, 2e-6 for 5% and 0.08 for 1% (at 1,024: 5e-23 and 3e-5). A few wrong
/// positions in a large slice pass any sample of practical size: `zermelo verify` is the whole
/// check. Each position re-derived costs about a microsecond and a half, so 256 keeps the check
/// of the many small slices of a pawn ending within a few percent of the build (`zermelo bench
/// --cluster 2 --check-sample N KPvKP` shows the cost).
pub const DEFAULT_SAMPLE: usize = 256;

/// The check of uploads: the sample size, a random seed for where the samples fall (so that a
/// worker cannot know which positions are looked at), and the successors decoded so far.
pub struct UploadCheck {
    sample: usize,
    seed: u64,
    cache: Mutex<Cache>,
}

#[derive(Default)]
struct Cache {
    slices: HashMap<SliceKey, Arc<Vec<u16>>>,
    order: VecDeque<SliceKey>,
    positions: u64,
}

/// What became of a check.
#[derive(Debug)]
pub enum Outcome {
    /// Checked and right.
    Checked(SliceCheck),
    /// Too large to hold whole here: not checked.
    TooLarge,
}

impl UploadCheck {
    /// Re-derives `sample` positions per slice (0: only the range and legality check).
    pub fn new(sample: usize) -> UploadCheck {
        let seed = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        UploadCheck {
            sample,
            seed,
            cache: Mutex::default(),
        }
    }

    /// Checks slice `key`'s `values` (`None` when it was too large to keep), reading its
    /// successors through `read` (the finished slice's values from the store, `None` if not
    /// there) unless they are in the cache. `Err` says what is wrong. Blocking.
    pub fn check_blocking(
        &self,
        key: &SliceKey,
        values: Option<&[u16]>,
        read: &(dyn Fn(&SliceKey) -> Option<Vec<u16>> + Sync),
    ) -> Result<Outcome, String> {
        let Some(values) = values else {
            return Ok(Outcome::TooLarge);
        };
        let sample = self.sample_of(key, values.len() as u64);
        let successor = |name: &str, raw: [u64; 2]| -> Option<Arc<Vec<u16>>> {
            let wire = zermelo_proto::SliceKey {
                material: name.to_owned(),
                white_pawns: raw[0],
                black_pawns: raw[1],
            };
            let key = crate::store::from_wire(&wire).ok()?;
            self.successor(&key, read)
        };
        zermelo_verify::check_slice(&key.material.to_string(), key.raw(), values, &sample, &successor)
            .map(Outcome::Checked)
            .map_err(|e| e.to_string())
    }

    /// `self.sample` indices below `n`, spread at random (from the seed and the key).
    fn sample_of(&self, key: &SliceKey, n: u64) -> Vec<u64> {
        let mut h = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(&(self.seed, key.raw(), key.material.to_string()), &mut h);
        let mut x = h.finish() | 1;
        (0..self.sample.min(n as usize))
            .map(|_| {
                // xorshift64*
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                x.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
            })
            .collect()
    }

    /// A successor's values: from the cache, else read (when small enough) and cached.
    fn successor(
        &self,
        key: &SliceKey,
        read: &(dyn Fn(&SliceKey) -> Option<Vec<u16>> + Sync),
    ) -> Option<Arc<Vec<u16>>> {
        if let Some(v) = self.lock().slices.get(key) {
            return Some(Arc::clone(v));
        }
        let n = SliceIndexer::new(*key).size();
        if n > WHOLE_POSITIONS {
            return None;
        }
        let values = Arc::new(read(key)?);
        let mut cache = self.lock();
        if !cache.slices.contains_key(key) {
            cache.slices.insert(*key, Arc::clone(&values));
            cache.order.push_back(*key);
            cache.positions += n;
            while cache.positions > CACHE_POSITIONS {
                let Some(old) = cache.order.pop_front() else { break };
                if let Some(v) = cache.slices.remove(&old) {
                    cache.positions -= v.len() as u64;
                }
            }
        }
        Some(values)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use zermelo_worker::solver::solve_slice;
    use zermelo_worker::tables::SliceMap;

    /// Every slice of KPvK and of what it converts into, solved by the solver, passes the check
    /// with every sampled position re-derived: the verifier's keys of the successors (pawn
    /// pushes, promotions, captures) all map back to the chess crate's keys, none is skipped.
    /// Changed values are caught.
    #[test]
    fn true_slices_pass_with_nothing_skipped_and_changed_values_fail() {
        let mut map = SliceMap::new();
        let mut solved: HashMap<SliceKey, Vec<u16>> = HashMap::new();
        let mut order = Vec::new();
        for name in ["KQvK", "KRvK", "KBvK", "KNvK"] {
            order.push(SliceKey::pawnless(name.parse().unwrap()));
        }
        let plan = crate::plan::plan(&["KPvK".parse().unwrap()]);
        let kpk = plan.materials.last().unwrap();
        order.extend(kpk.waves.iter().flatten().copied());
        for key in &order {
            let values = solve_slice(key, &map, 1).unwrap();
            map.insert(*key, values.clone().into());
            solved.insert(*key, values);
        }
        let read = |k: &SliceKey| solved.get(k).cloned();
        let check = UploadCheck::new(4096);
        let mut derived = 0;
        for key in &order {
            let values = &solved[key];
            match check.check_blocking(key, Some(values), &read).unwrap() {
                Outcome::Checked(r) => {
                    assert_eq!(r.skipped, 0, "{key}: {r:?}");
                    derived += r.derived;
                }
                Outcome::TooLarge => panic!("{key} is small"),
            }
        }
        assert!(derived > 20_000, "{derived}");
        // A slice with a pawn on the seventh rank, its decisive values at odd indices two plies
        // too long: most decisive positions then disagree with their children, and a sample as
        // large as the slice cannot miss them all but by a negligible chance.
        let key = order
            .iter()
            .find(|k| k.material.has_pawns() && k.white_pawns.0 & (0xff << 48) != 0)
            .unwrap();
        let mut bad = solved[key].clone();
        for v in bad.iter_mut().skip(1).step_by(2).filter(|v| **v >= 2) {
            *v += 2;
        }
        let every = UploadCheck::new(usize::MAX);
        let err = every.check_blocking(key, Some(&bad), &read).unwrap_err();
        assert!(err.contains("stored: "), "{err}");
    }
}
