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
            let (next, failed, error, f) = (&next, &failed, &error, &f);
            s.spawn(move || loop {
                if failed.load(Ordering::Relaxed) {
                    return;
                }
                let start = next.fetch_add(chunk, Ordering::Relaxed);
                if start >= n {
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
