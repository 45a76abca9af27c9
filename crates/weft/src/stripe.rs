//! A small per-thread number for striped counters: threads that keep
//! counting (writers claiming hash slots, readers entering an epoch) touch
//! different cache lines instead of one contended line.

use std::cell::Cell;
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
