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
//! A slice of at most [`WHOLE_POSITIONS`] positions is kept whole as it arrives and checked at
//! the end ([`zermelo_verify::check_slice`]); a larger one is checked as it streams in
//! ([`zermelo_verify::SliceStream`]: range and legality value by value, and only the values the
//! sample reads kept), so that a six-man slice of gigabytes takes no more memory here than a
//! small one. Successors of more than [`WHOLE_POSITIONS`] positions are not read: the sampled
//! positions with children there are skipped (counted). `zermelo verify` checks the written
//! tables in full.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex};

use zermelo_chess::index::SliceIndexer;
use zermelo_chess::SliceKey;
use zermelo_verify::{SliceCheck, SliceStream};

/// Slices of at most this many positions (256 MiB of values) are held whole for the check, larger
/// ones checked as they stream in; successors are read for the check up to this size.
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
    /// Uploads of at most this many positions are kept whole for the check.
    whole: u64,
    seed: u64,
    cache: Mutex<Cache>,
}

/// Slices decoded for the check, by key and content hash (a slice is found here only with the
/// hash it is finished with), oldest first out.
#[derive(Default)]
struct Cache {
    slices: HashMap<(SliceKey, Hash), Arc<Vec<u16>>>,
    order: VecDeque<(SliceKey, Hash)>,
    positions: u64,
}

/// What an upload's values go through as they arrive, for [`UploadCheck::check_blocking`] at
/// the end: kept whole (a slice of at most [`WHOLE_POSITIONS`] positions), or checked as they
/// stream by (a larger one).
pub enum Watch {
    Keep(Vec<u16>),
    Stream(Box<SliceStream>),
}

impl Watch {
    /// The next values of the slice; `Err` says what is wrong with them.
    pub fn push(&mut self, values: &[u16]) -> Result<(), String> {
        match self {
            Watch::Keep(kept) => {
                kept.extend_from_slice(values);
                Ok(())
            }
            Watch::Stream(stream) => stream.push(values).map_err(|e| e.to_string()),
        }
    }
}

/// A slice's content hash.
pub type Hash = [u8; 32];

/// Hands a slice's values, in order, to the sink it is given (which may refuse them).
pub type ValueFill<'a> = dyn FnMut(&mut dyn FnMut(&[u16]) -> Result<(), String>) -> Result<(), String> + 'a;

/// Where the check finds the finished slices it reads (successors of the slice checked).
pub trait Finished: Sync {
    /// The hash slice `key` was recorded with when it was finished (`None`: not finished).
    fn recorded(&self, key: &SliceKey) -> Option<Hash>;
    /// Its values, read from the store and found to have that hash (`None`: not readable).
    fn read(&self, key: &SliceKey, hash: &Hash) -> Option<Vec<u16>>;
}

impl UploadCheck {
    /// Re-derives `sample` positions per slice (0: only the range and legality check); keeps
    /// slices of at most `whole` positions whole for the check ([`WHOLE_POSITIONS`] in real
    /// use), checks larger ones as they stream in.
    pub fn new(sample: usize, whole: u64) -> UploadCheck {
        let seed = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        UploadCheck {
            sample,
            whole,
            seed,
            cache: Mutex::default(),
        }
    }

    /// How slice `key` of `positions` positions is watched as it arrives: kept, or checked as
    /// it streams (which reads, from `finished`, the successors its sample needs, as
    /// [`check_blocking`](UploadCheck::check_blocking) does). `Err` says what is wrong (not a
    /// slice of its material). Blocking.
    pub fn watch_blocking(
        &self,
        key: &SliceKey,
        positions: u64,
        finished: &dyn Finished,
    ) -> Result<Watch, String> {
        if positions <= self.whole {
            return Ok(Watch::Keep(Vec::new()));
        }
        let sample = self.sample_of(key, positions);
        let successor = |name: &str, raw: [u64; 2]| self.successor_named(name, raw, finished);
        SliceStream::new(&key.material.to_string(), key.raw(), &sample, &successor)
            .map(|s| Watch::Stream(Box::new(s)))
            .map_err(|e| e.to_string())
    }

    /// Checks slice `key`, whose values have content hash `hash` and went through `watch`
    /// ([`watch_blocking`]), reading its successors from `finished` unless they are in the
    /// cache. `Err` says what is wrong. A slice kept whole and found right is kept in the cache
    /// with its hash: the slices that lead into it read it from there. Blocking.
    ///
    /// [`watch_blocking`]: UploadCheck::watch_blocking
    pub fn check_blocking(
        &self,
        key: &SliceKey,
        hash: &Hash,
        watch: Watch,
        finished: &dyn Finished,
    ) -> Result<SliceCheck, String> {
        let successor = |name: &str, raw: [u64; 2]| self.successor_named(name, raw, finished);
        match watch {
            Watch::Keep(values) => {
                let sample = self.sample_of(key, values.len() as u64);
                let name = key.material.to_string();
                let report = zermelo_verify::check_slice(&name, key.raw(), &values, &sample, &successor)
                    .map_err(|e| e.to_string())?;
                self.remember(*key, *hash, Arc::new(values));
                Ok(report)
            }
            Watch::Stream(stream) => stream.finish(&successor).map_err(|e| e.to_string()),
        }
    }

    /// Slice `key`'s values if the cache holds them with content hash `hash` (an upload kept
    /// whole and accepted, or a successor read for a check): the table writer takes them from
    /// here instead of decoding the stored copy again.
    pub fn cached(&self, key: &SliceKey, hash: &Hash) -> Option<Arc<Vec<u16>>> {
        self.lock().slices.get(&(*key, *hash)).cloned()
    }

    /// Re-derives index `index` of slice `key` (of `positions` positions), whose values `fill`
    /// hands over in order, from its children, the whole slice checked for range and legality
    /// on the way (in bounded memory, as an upload streamed): how the coordinator settles a
    /// verifier's claim that the value there is wrong. `Ok` with the report (`derived` 0 when
    /// the position needs a successor too large to read here), `Err` with what is wrong.
    /// Blocking.
    pub fn check_index_blocking(
        &self,
        key: &SliceKey,
        index: u64,
        fill: &mut ValueFill<'_>,
        finished: &dyn Finished,
    ) -> Result<SliceCheck, String> {
        let successor = |name: &str, raw: [u64; 2]| self.successor_named(name, raw, finished);
        let mut stream = SliceStream::new(&key.material.to_string(), key.raw(), &[index], &successor)
            .map_err(|e| e.to_string())?;
        fill(&mut |values| stream.push(values).map_err(|e| e.to_string()))?;
        stream.finish(&successor).map_err(|e| e.to_string())
    }

    /// A successor by the verifier's name and raw key (see [`successor`](Self::successor)).
    fn successor_named(&self, name: &str, raw: [u64; 2], finished: &dyn Finished) -> Option<Arc<Vec<u16>>> {
        let wire = zermelo_proto::SliceKey {
            material: name.to_owned(),
            white_pawns: raw[0],
            black_pawns: raw[1],
        };
        let key = zermelo_proto::keys::from_wire(&wire).ok()?;
        self.successor(&key, finished)
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

    /// A successor's values, with the hash it is finished with: from the cache, else read
    /// (when small enough) and cached.
    fn successor(&self, key: &SliceKey, finished: &dyn Finished) -> Option<Arc<Vec<u16>>> {
        let hash = finished.recorded(key)?;
        if let Some(v) = self.lock().slices.get(&(*key, hash)) {
            return Some(Arc::clone(v));
        }
        if SliceIndexer::new(*key).size() > WHOLE_POSITIONS {
            return None;
        }
        let values = Arc::new(finished.read(key, &hash)?);
        self.remember(*key, hash, Arc::clone(&values));
        Some(values)
    }

    /// Keeps slice `key`'s values, of content hash `hash`, in the cache (the oldest out past
    /// [`CACHE_POSITIONS`]).
    fn remember(&self, key: SliceKey, hash: Hash, values: Arc<Vec<u16>>) {
        let n = values.len() as u64;
        let mut cache = self.lock();
        if cache.slices.contains_key(&(key, hash)) {
            return;
        }
        cache.slices.insert((key, hash), values);
        cache.order.push_back((key, hash));
        cache.positions += n;
        while cache.positions > CACHE_POSITIONS {
            let Some(old) = cache.order.pop_front() else { break };
            if let Some(v) = cache.slices.remove(&old) {
                cache.positions -= v.len() as u64;
            }
        }
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
    /// Checked as it streams in, each gives the same report. Changed values are caught, kept
    /// whole or streamed.
    /// The solved slices, each finished with the hash of its values.
    struct Solved<'a>(&'a HashMap<SliceKey, Vec<u16>>);

    impl Finished for Solved<'_> {
        fn recorded(&self, key: &SliceKey) -> Option<Hash> {
            self.0.get(key).map(|v| zermelo_proto::keys::slice_hash(key, v))
        }

        fn read(&self, key: &SliceKey, _: &Hash) -> Option<Vec<u16>> {
            self.0.get(key).cloned()
        }
    }

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
        let read = Solved(&solved);
        let hash = |key: &SliceKey, values: &[u16]| zermelo_proto::keys::slice_hash(key, values);
        // Every upload streamed (none kept whole): the stream's report must be the whole one's.
        let check = UploadCheck::new(4096, 0);
        let mut derived = 0;
        for key in &order {
            let values = &solved[key];
            let r = check
                .check_blocking(key, &hash(key, values), Watch::Keep(values.clone()), &read)
                .unwrap();
            assert_eq!(r.skipped, 0, "{key}: {r:?}");
            derived += r.derived;
            let mut watch = check.watch_blocking(key, values.len() as u64, &read).unwrap();
            assert!(matches!(watch, Watch::Stream(_)));
            values.chunks(1000).for_each(|c| watch.push(c).unwrap());
            assert_eq!(
                check
                    .check_blocking(key, &hash(key, values), watch, &read)
                    .unwrap(),
                r,
                "{key}"
            );
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
        let every = UploadCheck::new(usize::MAX, WHOLE_POSITIONS);
        let err = every
            .check_blocking(key, &hash(key, &bad), Watch::Keep(bad.clone()), &read)
            .unwrap_err();
        assert!(err.contains("stored: "), "{err}");
        let streamed = UploadCheck::new(usize::MAX, 0);
        let mut watch = streamed.watch_blocking(key, bad.len() as u64, &read).unwrap();
        watch.push(&bad).unwrap();
        let err = streamed
            .check_blocking(key, &hash(key, &bad), watch, &read)
            .unwrap_err();
        assert!(err.contains("stored: "), "{err}");
        // A value at an illegal index is caught as it streams by.
        let illegal = solved[key].iter().position(|&v| v == 0).unwrap();
        let mut bad = solved[key].clone();
        bad[illegal] = 1;
        let mut watch = streamed.watch_blocking(key, bad.len() as u64, &read).unwrap();
        let err = watch.push(&bad).unwrap_err();
        assert!(err.contains("not a legal position"), "{err}");
    }
}
