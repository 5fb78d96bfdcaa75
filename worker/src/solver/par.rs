//! One driver that splits an index range across threads.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Runs `f` over `0..n` cut into chunks of `chunk` indices, on `threads` threads (scoped, joined
/// before returning). The first error stops the other threads at their next chunk and is returned.
/// The order in which chunks run is not fixed: `f` must give the same result in any order.
pub fn for_each_chunk<E: Send>(
    n: usize,
    chunk: usize,
    threads: usize,
    f: impl Fn(Range<usize>) -> Result<(), E> + Sync,
) -> Result<(), E> {
    for_each_chunk_on(n, chunk, threads, |_, range| f(range))
}

/// [`for_each_chunk`], telling `f` which of the threads (`0..threads`) runs it: one thread at a
/// time calls `f` with a given number.
pub fn for_each_chunk_on<E: Send>(
    n: usize,
    chunk: usize,
    threads: usize,
    f: impl Fn(usize, Range<usize>) -> Result<(), E> + Sync,
) -> Result<(), E> {
    chunks_then(n, chunk, threads, f, || {})
}

/// [`for_each_chunk`] where a thread that finds no chunk left to take lends itself to `lent`
/// ([`Lent::lend`]) before it ends: the caller's `f` solves its items in [`Lent::solving`], on
/// threads that grow as others run out.
pub fn for_each_chunk_lending<E: Send>(
    n: usize,
    chunk: usize,
    threads: usize,
    lent: &Lent,
    f: impl Fn(Range<usize>) -> Result<(), E> + Sync,
) -> Result<(), E> {
    chunks_then(n, chunk, threads, |_, range| f(range), || lent.lend())
}

/// [`for_each_chunk_on`], with `then` called by each of several threads when it finds no chunk
/// left.
fn chunks_then<E: Send>(
    n: usize,
    chunk: usize,
    threads: usize,
    f: impl Fn(usize, Range<usize>) -> Result<(), E> + Sync,
    then: impl Fn() + Sync,
) -> Result<(), E> {
    let chunk = chunk.max(1);
    if threads <= 1 || n <= chunk {
        let mut start = 0;
        while start < n {
            f(0, start..(start + chunk).min(n))?;
            start += chunk;
        }
        return Ok(());
    }
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let error: Mutex<Option<E>> = Mutex::new(None);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (next, failed, error, f, then) = (&next, &failed, &error, &f, &then);
            s.spawn(move || loop {
                if failed.load(Ordering::Relaxed) {
                    return;
                }
                let start = next.fetch_add(chunk, Ordering::Relaxed);
                if start >= n {
                    then();
                    return;
                }
                if let Err(e) = f(t, start..(start + chunk).min(n)) {
                    failed.store(true, Ordering::Relaxed);
                    if let Ok(mut slot) = error.lock() {
                        slot.get_or_insert(e);
                    }
                    return;
                }
            });
        }
    });
    match error.into_inner() {
        Ok(Some(e)) => Err(e),
        _ => Ok(()),
    }
}

/// The threads of a run of slices solved one per thread, lent to the slices still being solved
/// as the run runs out of slices to take: each pass of such a slice runs on its own thread and
/// its share of the lent ones (a slice's values do not depend on its threads). Without it, the
/// last slice of a run was solved on one thread while the others waited (KRPvKR on 2 threads:
/// 0.5 s of a thread).
#[derive(Debug, Default)]
pub struct Lent {
    /// Threads of the run with no slice left to take.
    idle: AtomicUsize,
    /// Slices of the run being solved.
    busy: AtomicUsize,
}

impl Lent {
    /// Runs `solve`, the solving of a slice of the run, counted among the slices being solved
    /// while it runs.
    pub fn solving<T>(&self, solve: impl FnOnce() -> T) -> T {
        self.busy.fetch_add(1, Ordering::Relaxed);
        let solved = solve();
        self.busy.fetch_sub(1, Ordering::Relaxed);
        solved
    }

    /// A thread of the run has no slice left to take: lent from now on.
    pub fn lend(&self) {
        self.idle.fetch_add(1, Ordering::Relaxed);
    }

    /// The threads a slice being solved on `own` threads runs its next pass on: its share of
    /// the lent threads as well (so that the slices being solved never run on more threads than
    /// the run has, the rest of a share rounded down).
    pub fn threads(&self, own: usize) -> usize {
        let busy = self.busy.load(Ordering::Relaxed).max(1);
        own + self.idle.load(Ordering::Relaxed) / busy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lent thread goes to the slices being solved, shared out rounded down; a thread that
    /// runs out of chunks lends itself.
    #[test]
    fn lent_threads_are_shared_out() {
        let lent = Lent::default();
        lent.solving(|| {
            lent.solving(|| {
                assert_eq!(lent.threads(1), 1, "no thread lent yet");
                lent.lend();
                assert_eq!(lent.threads(1), 1, "one lent thread for two slices: none each");
            });
            assert_eq!(lent.threads(1), 2, "one lent thread for the one slice left");
            lent.lend();
            lent.lend();
            assert_eq!(lent.threads(2), 5);
        });
        let run = Lent::default();
        for_each_chunk_lending(3, 1, 4, &run, |_| Ok::<(), ()>(())).unwrap();
        assert_eq!(
            run.threads(1),
            5,
            "the four threads lent themselves as they ran out"
        );
    }
}
