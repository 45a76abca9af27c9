//! In-order publication of the visible sequence by writers that finish in
//! any order.
//!
//! Every write takes a *ticket* with its sequences (both under the WAL
//! lock, so tickets and sequences rise together), inserts into the
//! memtable concurrently with the others, then [`Publication::complete`]s
//! its ticket. The visible sequence may only cover a prefix of tickets
//! whose inserts are all done; whoever completes a ticket advances it over
//! every completed ticket it finds next in line, its own and its
//! successors'. So a writer never waits for a later writer, and no writer
//! has to be scheduled for the ones after it to become visible: only an
//! insert still running holds the writes behind it back.
//!
//! The first version had each writer wait for its predecessor to publish,
//! then publish itself. With more threads than cores that chained every
//! write to a wake-up of the writer before it (a convoy: at 16 threads on
//! 2 cores it ran at a tenth of the old group commit's rate); here a
//! waiter's wake-up delays only its own acknowledgement.
//!
//! Tickets index a ring of slots; a slot is reused only once its ticket is
//! published ([`Publication::ticket`] waits for that, which needs only
//! earlier writers to finish their inserts, none of which waits for the WAL
//! lock the caller holds).

// The blocking wait stays on `parking_lot` under loom too: the model
// checks the lock-free steps and never blocks.
use parking_lot::{Condvar, Mutex};

use crate::key::SequenceNumber;
use crate::util::stripe::CacheLine;
use crate::util::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Slots in the ring: more than the writers that can be between their
/// WAL append and their publication at once.
const SLOTS: usize = 1024;

/// Spins before a writer waiting for its write to become visible yields,
/// and yields before it blocks. The writes before it are being inserted on
/// other cores, about a memtable insert's time: a futex sleep and wake-up
/// costs more than that, so it spins first; when threads outnumber cores
/// an earlier writer may be descheduled, so it then yields, and at last
/// blocks.
const WAIT_SPINS: u32 = 128;
const WAIT_YIELDS: u32 = 16;

/// One ticket's completion: `ticket` is set (after `last`) once its insert
/// is done.
#[derive(Default)]
struct Slot {
    ticket: AtomicU64,
    last: AtomicU64,
}

/// The visible sequence and the tickets behind it. See the module docs.
pub(crate) struct Publication {
    /// Highest sequence whose write (and every earlier one) is complete.
    visible: CacheLine<AtomicU64>,
    /// Tickets below this are published.
    published: CacheLine<AtomicU64>,
    /// The next ticket to hand out (changed only under the WAL lock).
    next_ticket: CacheLine<AtomicU64>,
    slots: Box<[CacheLine<Slot>]>,
    /// Writers blocked in [`Publication::wait_visible`]: an advance wakes
    /// them only when there are some.
    waiters: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Publication {
    /// Starts with every sequence up to `visible` published.
    pub(crate) fn new(visible: SequenceNumber) -> Publication {
        Publication::with_slots(visible, SLOTS)
    }

    /// With a ring of `slots` slots (the loom model uses a small one).
    fn with_slots(visible: SequenceNumber, slots: usize) -> Publication {
        let slots = (0..slots)
            .map(|_| {
                CacheLine(Slot {
                    // No ticket is ever u64::MAX: no slot reads as done.
                    ticket: AtomicU64::new(u64::MAX),
                    last: AtomicU64::new(0),
                })
            })
            .collect();
        Publication {
            visible: CacheLine(AtomicU64::new(visible)),
            published: CacheLine(AtomicU64::new(0)),
            next_ticket: CacheLine(AtomicU64::new(0)),
            slots,
            waiters: AtomicUsize::new(0),
            lock: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    /// The highest sequence every write up to which is complete.
    #[inline]
    pub(crate) fn visible(&self) -> SequenceNumber {
        self.visible.load(Ordering::Acquire)
    }

    /// Hands out the next ticket. The caller holds the WAL lock (tickets
    /// follow the sequence order) and must [`Publication::complete`] it.
    pub(crate) fn ticket(&self) -> u64 {
        let t = self.next_ticket.load(Ordering::Relaxed);
        // The slot of ticket `t - slots` must be published before reuse.
        let mut round = 0;
        while t - self.published.load(Ordering::Acquire) >= self.slots.len() as u64 {
            crate::util::sync::backoff(&mut round);
        }
        self.next_ticket.store(t + 1, Ordering::Relaxed);
        t
    }

    /// Marks `ticket`, whose last sequence is `last`, done (its insert is
    /// finished, or it was abandoned), and publishes every done ticket next
    /// in line.
    pub(crate) fn complete(&self, ticket: u64, last: SequenceNumber) {
        let slot = self.slot(ticket);
        slot.last.store(last, Ordering::Relaxed);
        // SeqCst with the advance's loads: either an advancer running now
        // sees this slot done, or this thread's advance below sees that it
        // is next in line.
        slot.ticket.store(ticket, Ordering::SeqCst);
        crate::util::sync::seqcst_store_load();
        self.advance();
    }

    fn slot(&self, ticket: u64) -> &Slot {
        &self.slots[(ticket % self.slots.len() as u64) as usize]
    }

    /// Publishes done tickets from the first unpublished one on, as far as
    /// they go. Several threads may advance at once: each step moves
    /// `published` past one done ticket by compare-and-swap, and the
    /// visible sequence only rises (`fetch_max`) to the last sequence of a
    /// ticket already passed, so it always covers a prefix of done tickets.
    fn advance(&self) {
        let mut highest = None;
        loop {
            let p = self.published.load(Ordering::SeqCst);
            let slot = self.slot(p);
            if slot.ticket.load(Ordering::SeqCst) != p {
                break;
            }
            let last = slot.last.load(Ordering::Relaxed);
            if self
                .published
                .compare_exchange(p, p + 1, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
            {
                highest = Some(last);
                // The same store-then-load as in `complete`, against a
                // completer of the next ticket that found `published`
                // not yet moved.
                crate::util::sync::seqcst_store_load();
            }
        }
        if let Some(last) = highest {
            self.visible.fetch_max(last, Ordering::SeqCst);
            if self.waiters.load(Ordering::SeqCst) > 0 {
                let _g = self.lock.lock();
                self.cv.notify_all();
            }
        }
    }

    /// Waits until `seq` is visible (a writer's acknowledgement: a read
    /// after it returns must see the write).
    pub(crate) fn wait_visible(&self, seq: SequenceNumber) {
        let done = || self.visible.load(Ordering::Acquire) >= seq;
        let mut round = 0;
        while round < WAIT_SPINS + WAIT_YIELDS {
            if done() {
                return;
            }
            if round < WAIT_SPINS {
                crate::util::sync::spin_loop();
            } else {
                std::thread::yield_now();
            }
            round += 1;
        }
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let mut g = self.lock.lock();
        // SeqCst with the advancer's store-then-load: either it sees this
        // waiter and notifies under the lock, or this check sees its store.
        while self.visible.load(Ordering::SeqCst) < seq {
            self.cv.wait(&mut g);
        }
        drop(g);
        self.waiters.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Writers complete tickets out of order (random delays, more threads
    /// than cores, the ring wrapping many times): the visible sequence only
    /// ever covers completed writes, reaches each writer's own before it
    /// is acknowledged, and ends at the last sequence.
    #[test]
    fn visible_covers_only_completed_writes_and_every_ack() {
        const THREADS: usize = 12;
        const WRITES: usize = 3000;
        let p = Arc::new(Publication::new(0));
        // Sequences handed out with tickets, as under the WAL lock.
        let wal = Arc::new(Mutex::new(0u64));
        let done: Arc<Vec<AtomicU64>> = Arc::new(
            (0..=(THREADS * WRITES * 3) as u64)
                .map(|_| AtomicU64::new(0))
                .collect(),
        );
        let threads: Vec<_> = (0..THREADS)
            .map(|i| {
                let (p, wal, done) = (Arc::clone(&p), Arc::clone(&wal), Arc::clone(&done));
                std::thread::spawn(move || {
                    let mut rng = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    for _ in 0..WRITES {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        let ops = 1 + rng % 3;
                        let (ticket, first, last) = {
                            let mut last_seq = wal.lock();
                            let first = *last_seq + 1;
                            *last_seq += ops;
                            (p.ticket(), first, *last_seq)
                        };
                        if rng.is_multiple_of(16) {
                            std::thread::yield_now();
                        }
                        for s in first..=last {
                            done[s as usize].store(1, Ordering::Release);
                        }
                        p.complete(ticket, last);
                        p.wait_visible(last);
                        let v = p.visible();
                        assert!(v >= last);
                        // Everything visible is done (a prefix).
                        for s in (1..=v).rev().take(64) {
                            assert_eq!(done[s as usize].load(Ordering::Acquire), 1, "seq {s}");
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(p.visible(), *wal.lock());
    }
}

/// The lock-free steps under loom (`scripts/test-loom`): writers that take
/// tickets in order and complete them in any interleaving, the ring
/// wrapping, publish exactly the completed prefix.
#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use loom::sync::Arc;

    #[test]
    fn completed_prefix_is_published_in_any_interleaving() {
        loom::model(|| {
            // Two slots, three writes: the third reuses the first's slot.
            let p = Arc::new(Publication::with_slots(0, 2));
            let (t1, t2) = (p.ticket(), p.ticket());
            let a = {
                let p = Arc::clone(&p);
                loom::thread::spawn(move || p.complete(t1, 2))
            };
            let b = {
                let p = Arc::clone(&p);
                loom::thread::spawn(move || {
                    p.complete(t2, 3);
                    // Only ever the end of a completed prefix: nothing,
                    // the first write, or both (the advancer that passed
                    // this ticket may not have raised it yet).
                    let v = p.visible();
                    assert!(matches!(v, 0 | 2 | 3), "visible {v}");
                })
            };
            a.join().unwrap();
            b.join().unwrap();
            assert_eq!(p.visible(), 3, "every completed write published");
            let t3 = p.ticket();
            p.complete(t3, 5);
            assert_eq!(p.visible(), 5);
        });
    }
}
