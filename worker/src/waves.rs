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

/// Runs `solve(key, threads_for_it)` on every slice of `wave` (independent slices): one slice
/// per thread when `by_slice` is set and the wave has at least two slices per thread, else one
/// after another with all `threads` on each. The first error stops the others and is returned.
pub fn for_each_slice<E: Send>(
    wave: &[SliceKey],
    threads: usize,
    by_slice: bool,
    solve: impl Fn(&SliceKey, usize) -> Result<(), E> + Sync,
) -> Result<(), E> {
    if one_per_thread(wave.len(), threads, by_slice) {
        for_each_chunk(wave.len(), 1, threads, |range| {
            for key in &wave[range] {
                solve(key, 1)?;
            }
            Ok(())
        })
    } else {
        for key in wave {
            solve(key, threads)?;
        }
        Ok(())
    }
}

/// True if [`for_each_slice`] solves a wave of `slices` slices one per thread at once.
pub fn one_per_thread(slices: usize, threads: usize, by_slice: bool) -> bool {
    by_slice && threads > 1 && slices >= 2 * threads
}

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
        let results: Mutex<Solved> = Mutex::new(Vec::new());
        let done_here = AtomicU64::new(0);
        for_each_slice(wave, threads, true, |key, threads| {
            let v: SliceValues = solve_slice(key, &succ, threads)?.into();
            let n = v.len() as u64;
            progress(done + done_here.fetch_add(n, Relaxed) + n);
            results.lock().expect("results lock").push((*key, v));
            Ok::<(), SolveError>(())
        })?;
        let mut solved = results.into_inner().expect("results lock");
        solved.sort_by_key(|(k, _)| k.raw());
        for (k, v) in solved {
            done += v.len() as u64;
            map.insert(k, v.clone());
            out.push((k, v));
        }
        progress(done);
    }
    Ok(out)
}
