//! The read watermark: the sequence below which no present or future
//! reader looks, so the active memtable may unlink versions hidden behind a
//! newer one (Weft's selective in-place update, see
//! [`Memtable::set_read_watermark`](crate::memtable::Memtable::set_read_watermark)).
//!
//! # Why a grace period
//!
//! Explicit snapshots are registered in the
//! [`SnapshotList`](crate::snapshot::SnapshotList), so their minimum is
//! known. Plain reads are not: a `get` loads the visible sequence `r` and
//! then, some time later, reads the memtable at `r`. If the watermark rose
//! past `r` in between, the version it needs could be gone. Registering
//! every get in the snapshot list (a mutex and a map insert) would cost more
//! than the get itself, so in-flight reads are tracked the way RCU tracks
//! readers: in counters of two alternating epochs.
//!
//! * A reader enters the current epoch (an increment of a striped counter,
//!   re-checking that the epoch did not move meanwhile) *before* it loads
//!   its read sequence, and leaves when done. Iterators stay entered for
//!   their whole life.
//! * About one writer in sixteen, after its write became visible, calls
//!   [`ReadTracker::advance`] (never blocking: it skips if another writer
//!   is in it). It takes a
//!   *candidate* `w = min(visible sequence, oldest live snapshot)` and
//!   flips the epoch. Every reader that enters after the flip loads a
//!   sequence `>= w` (sequences only rise); every reader of the old epoch
//!   is counted. Once the old epoch's counters are all zero — checked at a
//!   later advance, never waited for — the candidate becomes the watermark
//!   and the next candidate is taken.
//!
//! The watermark thus trails the visible sequence by a few dozen writes
//! under a steady load, and stops rising while a long iterator (or a
//! snapshot) lives, which is exactly when older versions are still needed.
//!
//! Orderings: the reader's increment and epoch re-check, and the flip and
//! the advancer's counter reads, are all SeqCst, so either the reader's
//! re-check sees the flip (it moves to the new epoch, whose readers load
//! sequences after the flip) or the advancer's later counter read sees its
//! increment.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::key::SequenceNumber;
use crate::util::stripe::{thread_stripe, CacheLine};

/// Counter stripes per epoch: enough that up to this many reader threads
/// each count on a line of their own (the thread numbering of
/// [`thread_stripe`] is dense). Threads sharing a stripe would pass its line
/// back and forth on every get; with 8 stripes, 16 readers did. [`ReadTracker::advance`]
/// reads one epoch's stripes per write group, and lines no reader wrote
/// since stay in the writer's cache, so more stripes cost it little.
const STRIPES: usize = 32;

/// In-flight readers by epoch, and the candidate watermark waiting for its
/// grace period. See the module docs.
#[derive(Default)]
pub(crate) struct ReadTracker {
    epoch: AtomicU64,
    readers: [[CacheLine<AtomicUsize>; STRIPES]; 2],
    /// `(epoch the candidate was taken in, candidate)`; the lock is only
    /// ever `try_lock`ed, by writers.
    candidate: Mutex<Option<(u64, SequenceNumber)>>,
    /// The last watermark `advance` returned (for stats and tests).
    declared: AtomicU64,
}

/// An entered reader; leaves its epoch when dropped.
pub(crate) struct ReadGuard<'a> {
    counter: &'a AtomicUsize,
}

impl Drop for ReadGuard<'_> {
    fn drop(&mut self) {
        self.counter.fetch_sub(1, Ordering::Release);
    }
}

/// What an [`OwnedReadGuard`] owns to keep its tracker alive.
pub(crate) trait TrackerHolder {
    /// The tracker the guard entered.
    fn tracker(&self) -> &ReadTracker;
}

impl TrackerHolder for Arc<ReadTracker> {
    fn tracker(&self) -> &ReadTracker {
        self
    }
}

/// An entered reader that owns a handle on its tracker (for iterators,
/// which outlive the call that made them).
///
/// The handle is anything that reaches the tracker: an iterator's guard
/// holds the super version it reads (which holds the tracker), so entering
/// costs no reference count of its own. Cloning an `Arc<ReadTracker>` per
/// iterator wrote the one count that every scanning core shares.
pub(crate) struct OwnedReadGuard<H: TrackerHolder> {
    holder: H,
    parity: usize,
    stripe: usize,
}

impl<H: TrackerHolder> OwnedReadGuard<H> {
    /// What the guard holds.
    pub(crate) fn holder(&self) -> &H {
        &self.holder
    }
}

impl<H: TrackerHolder> Drop for OwnedReadGuard<H> {
    fn drop(&mut self) {
        self.holder.tracker().readers[self.parity][self.stripe]
            .0
            .fetch_sub(1, Ordering::Release);
    }
}

impl ReadTracker {
    /// Counts the caller as a reader of the current epoch; the read
    /// sequence must be loaded after this returns.
    fn enter_slot(&self) -> (usize, usize) {
        let stripe = thread_stripe(STRIPES);
        loop {
            let e = self.epoch.load(Ordering::SeqCst);
            let parity = (e & 1) as usize;
            let c = &self.readers[parity][stripe].0;
            c.fetch_add(1, Ordering::SeqCst);
            if self.epoch.load(Ordering::SeqCst) == e {
                return (parity, stripe);
            }
            // The epoch flipped under us: count in the new one instead.
            c.fetch_sub(1, Ordering::Release);
        }
    }

    /// Enters for a read that ends before the caller returns (a get).
    pub(crate) fn enter(&self) -> ReadGuard<'_> {
        let (parity, stripe) = self.enter_slot();
        ReadGuard {
            counter: &self.readers[parity][stripe].0,
        }
    }

    /// Enters the tracker `holder` reaches, for a read that lives on in a
    /// returned object (an iterator) that keeps `holder`.
    pub(crate) fn enter_owned<H: TrackerHolder>(holder: H) -> OwnedReadGuard<H> {
        let (parity, stripe) = holder.tracker().enter_slot();
        OwnedReadGuard {
            holder,
            parity,
            stripe,
        }
    }

    /// The last watermark declared.
    pub(crate) fn watermark(&self) -> SequenceNumber {
        self.declared.load(Ordering::Relaxed)
    }

    fn readers_of(&self, parity: usize) -> usize {
        self.readers[parity]
            .iter()
            .map(|s| s.0.load(Ordering::SeqCst))
            .sum()
    }

    /// Called by a writer once `visible` is visible, with a way to
    /// read the oldest live snapshot (called after `visible` was loaded). Returns a watermark that is now
    /// safe to declare, if the previous candidate's grace period ended.
    /// Never blocks.
    pub(crate) fn advance(
        &self,
        visible: SequenceNumber,
        oldest_snapshot: impl FnOnce() -> Option<SequenceNumber>,
    ) -> Option<SequenceNumber> {
        let mut candidate = self.candidate.try_lock()?;
        let mut ready = None;
        if let Some((taken_in, w)) = *candidate {
            if self.readers_of((taken_in & 1) as usize) != 0 {
                return None;
            }
            ready = Some(w);
            self.declared.fetch_max(w, Ordering::Relaxed);
        }
        let w = oldest_snapshot().map_or(visible, |s| s.min(visible));
        let e = self.epoch.load(Ordering::SeqCst);
        debug_assert!(candidate.is_none_or(|(t, _)| t + 1 == e));
        self.epoch.store(e + 1, Ordering::SeqCst);
        *candidate = Some((e, w));
        ready
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_candidate_waits_for_readers_of_its_epoch() {
        let t = Arc::new(ReadTracker::default());
        // First call only takes a candidate.
        assert_eq!(t.advance(10, || None), None);
        // A reader that entered before the flip... none did: the candidate
        // (10) is ready at the next call, which takes 20 as the next one.
        let old = ReadTracker::enter_owned(Arc::clone(&t));
        assert_eq!(t.advance(20, || None), Some(10));
        // `old` entered in the epoch of candidate 20: 20 must wait for it.
        assert_eq!(t.advance(30, || None), None);
        assert_eq!(t.advance(40, || None), None);
        drop(old);
        assert_eq!(t.advance(50, || None), Some(20));
        // Snapshots cap the candidate.
        assert_eq!(t.advance(60, || Some(55)), Some(50));
        assert_eq!(t.advance(70, || Some(55)), Some(55));
        // A get guard blocks like an iterator's while it lives.
        let g = t.enter();
        // The pending candidate (55) was taken before `g` entered.
        assert_eq!(t.advance(80, || None), Some(55));
        assert_eq!(t.advance(85, || None), None);
        drop(g);
        assert_eq!(t.advance(90, || None), Some(80));
    }

    /// Readers hammer enter/leave while an advancer runs: every watermark
    /// returned is at most the sequence any reader still in flight loaded.
    #[test]
    fn never_passes_a_reader_in_flight() {
        use std::sync::atomic::AtomicBool;
        let t = Arc::new(ReadTracker::default());
        let visible = Arc::new(AtomicU64::new(1));
        let watermark = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let (t, visible, watermark, stop) = (
                    Arc::clone(&t),
                    Arc::clone(&visible),
                    Arc::clone(&watermark),
                    Arc::clone(&stop),
                );
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let _g = t.enter();
                        let r = visible.load(Ordering::SeqCst);
                        for _ in 0..50 {
                            std::hint::spin_loop();
                        }
                        let w = watermark.load(Ordering::SeqCst);
                        assert!(w <= r, "watermark {w} passed a reader at {r}");
                    }
                })
            })
            .collect();
        // 200k advances, then more until the watermark has risen (bounded):
        // with more threads than cores a reader can be descheduled while it
        // holds a guard, and the watermark rightly waits for it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut s = 2u64;
        while s < 200_000
            || (watermark.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline)
        {
            visible.store(s, Ordering::SeqCst);
            if let Some(w) = t.advance(s, || None) {
                watermark.fetch_max(w, Ordering::SeqCst);
            }
            s += 1;
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().expect("reader saw the watermark pass it");
        }
        assert!(
            watermark.load(Ordering::SeqCst) > 0,
            "the watermark never rose"
        );
    }
}
