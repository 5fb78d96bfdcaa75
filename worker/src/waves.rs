//! Solving waves of independent slices in one process: the single-node build and the analysis of
//! one position both use it.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use zermelo_chess::slice::SliceKey;

use crate::adjudicate::{Rule, Ruled};
use crate::solver::par::for_each_chunk;
use crate::solver::{solve_slice, SolveError};
use crate::tables::{SliceMap, SliceValues};

/// Solved slices with their values.
pub type Solved = Vec<(SliceKey, SliceValues)>;

/// Solves `waves` in order (the slices of a wave are independent; every successor is in `map`,
/// in an earlier wave, or cut by `rule`), adding each solved slice to `map`. Returns the solved
/// slices sorted by key within each wave, in wave order. `progress` is called with the positions
/// solved so far. The values do not depend on `threads`.
pub fn solve_waves(
    waves: &[Vec<SliceKey>],
    map: &mut SliceMap,
    rule: Option<Rule>,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Solved, SolveError> {
    let mut out = Vec::new();
    let mut done = 0u64;
    for wave in waves {
        let succ = Ruled { map, rule };
        let solved: Vec<(SliceKey, SliceValues)> = if wave.len() >= 2 * threads.max(1) && threads > 1 {
            // Many independent slices: one thread per slice.
            let results: Mutex<Vec<(SliceKey, SliceValues)>> = Mutex::new(Vec::new());
            let done_here = AtomicU64::new(0);
            for_each_chunk(wave.len(), 1, threads, |range| {
                for i in range {
                    let key = wave[i];
                    let v: SliceValues = solve_slice(&key, &succ, 1)?.into();
                    let d = done_here.fetch_add(v.len() as u64, Relaxed);
                    progress(done + d + v.len() as u64);
                    results.lock().expect("results lock").push((key, v));
                }
                Ok::<(), SolveError>(())
            })?;
            let mut r = results.into_inner().expect("results lock");
            r.sort_by_key(|(k, _)| k.raw());
            r
        } else {
            let mut r = Vec::new();
            let mut here = 0u64;
            for key in wave {
                let v: SliceValues = solve_slice(key, &succ, threads)?.into();
                here += v.len() as u64;
                progress(done + here);
                r.push((*key, v));
            }
            r
        };
        for (k, v) in solved {
            done += v.len() as u64;
            map.insert(k, v.clone());
            out.push((k, v));
        }
        progress(done);
    }
    Ok(out)
}
