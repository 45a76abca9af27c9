//! Counters that many threads update without sharing a cache line: a
//! small per-thread number picks a stripe (writers claiming hash slots,
//! readers entering an epoch), and [`CacheLine`] keeps a value off the
//! lines its neighbours live on.

use std::cell::Cell;
use std::ops::Deref;
use std::sync::atomic::{AtomicUsize, Ordering};

/// This thread's stripe among `stripes` (fixed for the thread's life;
/// threads are numbered in order of first call).
#[inline]
pub(crate) fn thread_stripe(stripes: usize) -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static ID: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    ID.with(|id| {
        if id.get() == usize::MAX {
            id.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        id.get() % stripes
    })
}

/// A value alone in its 64-byte cache line.
///
/// A word that threads keep writing, next to words that others keep
/// reading, makes every write evict the readers' copy of the line (false
/// sharing). Striped counters use one line per stripe; a memtable's insert
/// count uses one so writers do not evict the fields every search reads
/// (the arena's current chunk, the index's height): apart, a uniform put
/// at two threads ran faster (`jellyfish`, alternating pairs;
/// `bench/journal/2026-11-26-02-fair-skiplist-baseline.md`, "A fair
/// baseline, a cheaper new-key insert, writers apart in memory", item 3).
#[repr(align(64))]
#[derive(Debug, Default)]
pub(crate) struct CacheLine<T>(pub(crate) T);

impl<T> Deref for CacheLine<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Stripes of a [`StripedCounter`]: enough that up to this many threads
/// never share a line (the thread numbering is dense).
const COUNTER_STRIPES: usize = 32;

/// A statistics counter bumped on hot paths by many threads (bytes written
/// by every write, hits counted by every get).
///
/// One shared `AtomicU64` makes every bump a cache-line transfer between
/// cores: at 16 threads a handful of such counters on the get and write
/// paths were enough to flatten throughput (`bench/scaling`). Each thread
/// adds to its own line; [`StripedCounter::load`] sums the stripes, which
/// only statistics do.
pub(crate) struct StripedCounter {
    stripes: [CacheLine<std::sync::atomic::AtomicU64>; COUNTER_STRIPES],
}

impl Default for StripedCounter {
    fn default() -> Self {
        StripedCounter {
            stripes: std::array::from_fn(|_| CacheLine::default()),
        }
    }
}

impl std::fmt::Debug for StripedCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StripedCounter").field(&self.load()).finish()
    }
}

impl StripedCounter {
    /// Adds `n` on this thread's stripe.
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        self.stripes[thread_stripe(COUNTER_STRIPES)].fetch_add(n, Ordering::Relaxed);
    }

    /// The sum of every stripe: exact once the adders are done, a value
    /// between the totals before and after any adds in flight otherwise.
    pub(crate) fn load(&self) -> u64 {
        self.stripes
            .iter()
            .map(|s| s.load(Ordering::Relaxed))
            .fold(0u64, u64::wrapping_add)
    }
}

#[cfg(test)]
mod striped_counter_tests {
    use super::*;

    #[test]
    fn sums_the_adds_of_every_thread() {
        let c = std::sync::Arc::new(StripedCounter::default());
        let threads: Vec<_> = (0..40)
            .map(|i| {
                let c = std::sync::Arc::clone(&c);
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        c.add(i);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(c.load(), (0..40).sum::<u64>() * 1000);
    }
}
