//! The waiter registry of the blocking pops (`BLPOP`, `BZPOPMIN`, ...):
//! which clients wait on which key, in arrival order.
//!
//! A client whose blocking command found every key empty *parks*: it stays
//! on its own event loop (no thread sleeps for it) and leaves a [`Waiter`]
//! in the FIFO of each key it waits on, here. A write that adds to a list or
//! sorted set (`cmd::coll::key_ready`) takes the first waiter of the key's
//! FIFO that wants the key's type and posts it a wake-up
//! ([`crate::deliver::Delivery::Wake`]); the woken client re-runs its
//! command on its own loop. This module is only the registry: it knows
//! keys and clients, not the store (`cmd/blocking.rs` has the commands).
//!
//! # Cost for writers nobody waits for
//!
//! Every push asks "does anyone wait on this key?". The answer starts with
//! one relaxed load from [`Waiters::hints`], 4096 counters indexed by a
//! hash of the key, written only when a client parks on or leaves a key
//! whose hash falls there. With nobody waiting on a key of that slot, the
//! push reads a cache line nobody writes and goes on; only a push on a
//! key with waiters (or one sharing its slot) takes the shard's lock.
//!
//! # Why a relaxed load is enough
//!
//! A waiter is added only by its client while it holds the key's stripe
//! lock (`Locks`), in the same critical section in which it found the key
//! empty; a writer adds elements under the same lock and asks after
//! releasing it. Either the writer's section came first (the parking
//! client sees the element and does not park), or the parking client's
//! did, and the writer's lock acquisition orders the hint's increment
//! before the writer's load. No wake-up is lost.
//!
//! # Keys
//!
//! Waiters are keyed by (database, key); everything goes through
//! [`db_of`] and the `db` arguments, so `SELECT` changes one place.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::Mutex;

use crate::cmd::Session;
use crate::deliver::ClientRef;
use crate::encoding::Kind;

/// Counters of [`Waiters::hints`]: a power of two.
const HINTS: usize = 4096;
/// Shards of the key map: a power of two, dividing [`HINTS`].
const SHARDS: usize = 64;

/// The database whose keys a session's blocking commands wait on: the
/// one it selected.
pub fn db_of(session: &Session) -> usize {
    session.db
}

/// One client waiting on one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waiter {
    /// The parked connection.
    pub at: ClientRef,
    /// The type it pops (a list waiter is not woken by a sorted set).
    pub kind: Kind,
    /// Which parking of that connection this is: a wake-up for an earlier
    /// one (already timed out or served) is passed on, not acted on.
    pub ticket: u64,
}

/// What a parked connection waits for (kept in its session).
#[derive(Debug, Clone)]
pub struct Parked {
    /// The database of its keys.
    pub db: usize,
    /// Its keys, in argument order, without repeats.
    pub keys: Vec<Vec<u8>>,
    /// The type it pops.
    pub kind: Kind,
    /// When it times out (`None`: never).
    pub deadline: Option<Instant>,
    /// This parking's number ([`Waiter::ticket`]).
    pub ticket: u64,
}

/// A session's part in blocking: what it is parked in, and while its
/// command re-runs after a wake-up, the keys that woke it.
#[derive(Debug, Default)]
pub struct BlockState {
    /// Set while the connection is parked in a blocking command.
    pub parked: Option<Parked>,
    /// During a re-run: the keys whose wake-ups it answers, tried first.
    pub woken_by: Vec<Vec<u8>>,
    /// Parkings so far: the source of [`Parked::ticket`].
    pub parkings: u64,
}

/// One key's waiters in the order they are served.
#[derive(Default)]
struct Fifo {
    /// By position: lower is served first.
    order: BTreeMap<i64, Waiter>,
    /// Client id → its position.
    pos_of: HashMap<u64, i64>,
    /// Next position at the front (decreasing) and at the back.
    front: i64,
    back: i64,
}

impl Fifo {
    fn insert(&mut self, w: Waiter, at_front: bool) {
        let pos = if at_front {
            self.front -= 1;
            self.front
        } else {
            let p = self.back;
            self.back += 1;
            p
        };
        self.order.insert(pos, w);
        self.pos_of.insert(w.at.id, pos);
    }

    fn remove(&mut self, id: u64) -> Option<Waiter> {
        let pos = self.pos_of.remove(&id)?;
        self.order.remove(&pos)
    }
}

#[derive(Default)]
struct Shard {
    /// (db, key) bytes → its waiters; a key without waiters has no entry.
    keys: HashMap<Vec<u8>, Fifo>,
}

/// Keeps per-shard and per-loop state on cache lines of its own.
#[repr(align(128))]
struct Padded<T>(T);

/// Every waiting client, by key.
pub struct Waiters {
    shards: Box<[Padded<Mutex<Shard>>]>,
    /// Waiters registered on keys whose hash falls in each slot.
    hints: Box<[AtomicU32]>,
    /// Per loop: (clients parked, those with a deadline). Written only by
    /// the loop's own thread (a load and a store), summed by `INFO`.
    parked: Box<[Padded<[AtomicU64; 2]>]>,
}

/// FNV-1a of the database and the key.
fn hash(db: usize, key: &[u8]) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in db.to_le_bytes().iter().chain(key) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h ^ (h >> 32)) as usize
}

fn map_key(db: usize, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + key.len());
    k.extend_from_slice(&db.to_be_bytes());
    k.extend_from_slice(key);
    k
}

impl Waiters {
    /// An empty registry for `loops` event loops.
    pub fn new(loops: usize) -> Waiters {
        Waiters {
            shards: (0..SHARDS)
                .map(|_| Padded(Mutex::new(Shard::default())))
                .collect(),
            hints: (0..HINTS).map(|_| AtomicU32::new(0)).collect(),
            parked: (0..loops.max(1))
                .map(|_| Padded([AtomicU64::new(0), AtomicU64::new(0)]))
                .collect(),
        }
    }

    fn slot(db: usize, key: &[u8]) -> usize {
        hash(db, key) & (HINTS - 1)
    }

    fn shard(&self, slot: usize) -> &Mutex<Shard> {
        &self.shards[slot & (SHARDS - 1)].0
    }

    /// Registers `w` on `key`: at the back, or at the front (a woken client
    /// that found the key emptied again keeps its turn). A client already
    /// registered on the key keeps its place unless `at_front`. The caller
    /// holds `key`'s stripe lock (see the module docs).
    pub fn add(&self, db: usize, key: &[u8], w: Waiter, at_front: bool) {
        let slot = Self::slot(db, key);
        let mut shard = self.shard(slot).lock();
        let fifo = shard.keys.entry(map_key(db, key)).or_default();
        if let Some(&pos) = fifo.pos_of.get(&w.at.id) {
            if !at_front {
                fifo.order.insert(pos, w);
                return;
            }
            fifo.remove(w.at.id);
        } else {
            self.hints[slot].fetch_add(1, Ordering::Relaxed);
        }
        fifo.insert(w, at_front);
    }

    /// Removes client `id` from `key`'s waiters (if there).
    pub fn remove(&self, db: usize, key: &[u8], id: u64) {
        let slot = Self::slot(db, key);
        let mk = map_key(db, key);
        let mut shard = self.shard(slot).lock();
        let Some(fifo) = shard.keys.get_mut(&mk) else {
            return;
        };
        if fifo.remove(id).is_some() {
            self.hints[slot].fetch_sub(1, Ordering::Relaxed);
        }
        if fifo.order.is_empty() {
            shard.keys.remove(&mk);
        }
    }

    /// True if someone may wait on `key`: one relaxed load when nobody
    /// waits on a key of its slot, else a look under the shard's lock.
    pub fn any_waiting(&self, db: usize, key: &[u8]) -> bool {
        let slot = Self::slot(db, key);
        if self.hints[slot].load(Ordering::Relaxed) == 0 {
            return false;
        }
        self.shard(slot).lock().keys.contains_key(&map_key(db, key))
    }

    /// Takes the first waiter on `key` that pops a `kind` off the FIFO.
    pub fn take_first(&self, db: usize, key: &[u8], kind: Kind) -> Option<Waiter> {
        let slot = Self::slot(db, key);
        if self.hints[slot].load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mk = map_key(db, key);
        let mut shard = self.shard(slot).lock();
        let fifo = shard.keys.get_mut(&mk)?;
        let w = *fifo.order.values().find(|w| w.kind == kind)?;
        fifo.remove(w.at.id);
        self.hints[slot].fetch_sub(1, Ordering::Relaxed);
        if fifo.order.is_empty() {
            shard.keys.remove(&mk);
        }
        Some(w)
    }

    /// Notes that a client of loop `loop_ix` parked (`+1`) or left (`-1`),
    /// with a deadline or not. Called only on that loop's thread.
    pub fn count_parked(&self, loop_ix: usize, delta: i64, timed: bool) {
        let Some(c) = self.parked.get(loop_ix) else {
            return;
        };
        let add = |a: &AtomicU64| {
            a.store(
                a.load(Ordering::Relaxed).wrapping_add_signed(delta),
                Ordering::Relaxed,
            )
        };
        add(&c.0[0]);
        if timed {
            add(&c.0[1]);
        }
    }

    /// `(blocked clients, those with a timeout)` over every loop
    /// (`INFO clients`: `blocked_clients`, `clients_in_timeout_table`).
    pub fn parked_clients(&self) -> (u64, u64) {
        self.parked.iter().fold((0, 0), |(n, t), c| {
            (
                n + c.0[0].load(Ordering::Relaxed),
                t + c.0[1].load(Ordering::Relaxed),
            )
        })
    }

    /// Keys with at least one waiter (`INFO clients`:
    /// `total_blocking_keys`).
    pub fn keys_waited_on(&self) -> usize {
        self.shards.iter().map(|s| s.0.lock().keys.len()).sum()
    }

    /// Waiter registrations over every key (0 once nobody waits).
    pub fn registrations(&self) -> u64 {
        self.hints
            .iter()
            .map(|h| u64::from(h.load(Ordering::Relaxed)))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(id: u64, kind: Kind) -> Waiter {
        Waiter {
            at: ClientRef {
                loop_ix: 0,
                slot: id as u32,
                id,
            },
            kind,
            ticket: 1,
        }
    }

    #[test]
    fn first_come_first_served_and_front_keeps_the_turn() {
        let r = Waiters::new(1);
        assert!(!r.any_waiting(0, b"k"));
        for id in 1..=3 {
            r.add(0, b"k", w(id, Kind::List), false);
        }
        // Re-adding at the back keeps the place.
        r.add(0, b"k", w(1, Kind::List), false);
        assert!(r.any_waiting(0, b"k"));
        assert!(!r.any_waiting(1, b"k"), "another database");
        assert_eq!(r.take_first(0, b"k", Kind::List).map(|w| w.at.id), Some(1));
        // 1 found the key emptied again: it goes back in front.
        r.add(0, b"k", w(1, Kind::List), true);
        let order: Vec<u64> = std::iter::from_fn(|| r.take_first(0, b"k", Kind::List))
            .map(|w| w.at.id)
            .collect();
        assert_eq!(order, [1, 2, 3]);
        assert_eq!(r.registrations(), 0);
        assert_eq!(r.keys_waited_on(), 0);
    }

    #[test]
    fn a_waiter_is_woken_only_by_its_type_and_removal_leaves_nothing() {
        let r = Waiters::new(1);
        r.add(0, b"k", w(1, Kind::ZSet), false);
        r.add(0, b"k", w(2, Kind::List), false);
        r.add(0, b"other", w(1, Kind::ZSet), false);
        assert_eq!(r.take_first(0, b"k", Kind::List).map(|w| w.at.id), Some(2));
        assert_eq!(r.take_first(0, b"k", Kind::List), None);
        assert_eq!(r.registrations(), 2);
        r.remove(0, b"k", 1);
        r.remove(0, b"other", 1);
        r.remove(0, b"never", 1);
        assert_eq!(r.registrations(), 0);
        assert_eq!(r.keys_waited_on(), 0);
        assert!(!r.any_waiting(0, b"k"));
    }

    #[test]
    fn parked_counts_sum_the_loops() {
        let r = Waiters::new(2);
        r.count_parked(0, 1, true);
        r.count_parked(1, 1, false);
        assert_eq!(r.parked_clients(), (2, 1));
        r.count_parked(0, -1, true);
        r.count_parked(1, -1, false);
        assert_eq!(r.parked_clients(), (0, 0));
    }
}
