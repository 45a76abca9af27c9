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
