//! The write queue's parts: a queued [`Writer`] and its state, the count
//! of a group's outstanding inserts ([`InsertJob`]), and the spin-then-block
//! wait both use. The leader's side (grouping, WAL append, publication)
//! is `db::write`; the queue itself is a field of `Core`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::batch::WriteBatch;
use crate::error::Error;
use crate::memtable::Memtable;

pub(super) enum WriterState {
    Pending,
    /// Insert your batch (its sequence set by the leader) into `mem`, then
    /// report to `job`.
    Insert {
        mem: Arc<dyn Memtable>,
        job: Arc<InsertJob>,
    },
    Done(Option<Error>),
}

/// One caller of `Db::write` waiting in the queue.
pub(crate) struct Writer {
    pub(super) batch: Mutex<WriteBatch>,
    /// `batch.approximate_size()`, fixed once queued: the leader sizes its
    /// group and counts user bytes without taking each member's lock.
    pub(super) bytes: usize,
    pub(super) sync: bool,
    /// Log the batch in the WAL (false: `WriteOptions::disable_wal`).
    pub(super) logged: bool,
    /// A flush request: rotate the memtable even if it is not full.
    pub(super) rotate: bool,
    pub(super) state: Mutex<WriterState>,
    /// Set (under the queue lock) whenever `state` changes or the writer
    /// becomes the queue's head; lets a waiter spin without the lock.
    pub(super) signalled: AtomicBool,
    pub(super) cv: Condvar,
}

impl Writer {
    /// Wakes the writer: its state changed or it leads now. Queue lock held.
    pub(super) fn signal(&self) {
        self.signalled.store(true, Ordering::Release);
        self.cv.notify_one();
    }
}

/// Busy-wait iterations before yielding, and time spent yielding before
/// blocking. A futex wake-up costs tens of microseconds on a VM — more than
/// a whole memtable insert — so a writer whose leader is running on the
/// other core is better off spinning briefly (RocksDB's write thread does
/// the same). Past the budget it blocks, so an idle queue burns no CPU.
const SPIN_ITERATIONS: u32 = 200;
const YIELD_BUDGET: Duration = Duration::from_micros(100);

/// Counts outstanding member inserts of one group.
pub(super) struct InsertJob {
    pub(super) remaining: AtomicUsize,
    pub(super) lock: Mutex<()>,
    pub(super) cv: Condvar,
}

impl InsertJob {
    pub(super) fn finish_one(&self) {
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            let _g = self.lock.lock();
            self.cv.notify_all();
        }
    }

    /// Waits (spinning first) until every member has inserted.
    pub(super) fn wait(&self) {
        let done = || self.remaining.load(Ordering::Acquire) == 0;
        if spin_until(done) {
            return;
        }
        let mut g = self.lock.lock();
        // Checked under the lock the last finisher takes: no lost wake-up.
        while !done() {
            self.cv.wait(&mut g);
        }
    }
}

/// Spins, then yields, until `cond` holds (true) or the budget runs out.
pub(super) fn spin_until(cond: impl Fn() -> bool) -> bool {
    for _ in 0..SPIN_ITERATIONS {
        if cond() {
            return true;
        }
        std::hint::spin_loop();
    }
    let start = Instant::now();
    while start.elapsed() < YIELD_BUDGET {
        if cond() {
            return true;
        }
        std::thread::yield_now();
    }
    false
}
