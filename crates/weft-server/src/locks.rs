//! Striped key locks: the server's read-modify-write atomicity, and the
//! modification counters `WATCH` compares.
//!
//! The engine has atomic batches but no compare-and-set, so a command that
//! reads before it writes (`INCR`, `APPEND`, `SET NX`, `HSET` updating the
//! field count, ...) holds the lock of its key's stripe across the read and
//! the batch write. Multi-key commands lock their stripes in ascending index
//! order, so two of them can never deadlock. Readers take no lock: they read
//! the engine, whose writes are atomic. A key's stripe depends on its
//! database (`SELECT`) too, so the same name in two databases is two keys.
//!
//! Each stripe also holds a *version*: a counter bumped, while the stripe
//! is locked, by every holder that wrote something under it
//! ([`crate::keyspace::KeyGuard`]). `WATCH` reads the versions of its keys'
//! stripes and `EXEC`, holding those stripes, compares: a change means some
//! key of the stripe was written since (a false alarm when it was another
//! key of the same stripe, which Redis's per-key watch never gives; the
//! client retries as after a real conflict). The counter sits beside its
//! mutex, so bumping it writes the cache line the lock already wrote: no
//! shared line is added per command.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};

/// One stripe: its mutex and its version.
struct Stripe {
    lock: Mutex<()>,
    version: AtomicU64,
}

/// A fixed table of mutexes indexed by a hash of the database and user key.
pub struct Locks {
    stripes: Box<[Stripe]>,
}

/// FNV-1a: fast, and good enough to spread keys over stripes.
fn hash(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl Locks {
    /// `n` stripes (rounded up to at least 1).
    pub fn new(n: usize) -> Self {
        Locks {
            stripes: (0..n.max(1))
                .map(|_| Stripe {
                    lock: Mutex::new(()),
                    version: AtomicU64::new(0),
                })
                .collect(),
        }
    }

    /// How many stripes there are.
    pub fn len(&self) -> usize {
        self.stripes.len()
    }

    /// Never: there is at least one stripe.
    pub fn is_empty(&self) -> bool {
        self.stripes.is_empty()
    }

    /// The stripe of `key` in database `db` (database 0 keeps the stripes
    /// it had before databases were added).
    pub fn index(&self, db: usize, key: &[u8]) -> usize {
        let h = hash(key) ^ (db as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h % self.stripes.len() as u64) as usize
    }

    /// Locks stripe `i`.
    pub(crate) fn acquire(&self, i: usize) -> MutexGuard<'_, ()> {
        self.stripes[i].lock.lock()
    }

    /// Locks stripe `i` unless it stays taken for `wait`.
    pub(crate) fn try_acquire_for(&self, i: usize, wait: Duration) -> Option<MutexGuard<'_, ()>> {
        self.stripes[i].lock.try_lock_for(wait)
    }

    /// Unlocks stripe `i`, whose guard was leaked.
    ///
    /// # Safety
    ///
    /// The caller's thread locked stripe `i` and leaked the guard
    /// (`MutexGuard::leak`), and unlocks it only once.
    pub(crate) unsafe fn release_leaked(&self, i: usize) {
        // SAFETY: the caller's contract: this thread holds the lock through
        // a leaked guard that will never unlock it.
        unsafe { self.stripes[i].lock.force_unlock() }
    }

    /// Stripe `i`'s version: how many times a write was made under it.
    pub fn version(&self, i: usize) -> u64 {
        self.stripes[i].version.load(Ordering::Acquire)
    }

    /// Records a write under stripe `i`. The caller holds it, so the
    /// increment lands on the line its lock just wrote.
    pub(crate) fn bump(&self, i: usize) {
        self.stripes[i].version.fetch_add(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn databases_spread_the_same_key() {
        let l = Locks::new(4096);
        let stripes: std::collections::HashSet<usize> =
            (0..16).map(|db| l.index(db, b"key")).collect();
        assert!(stripes.len() > 8, "{stripes:?}");
        assert_eq!(l.index(0, b"key"), (hash(b"key") % 4096) as usize);
    }

    #[test]
    fn versions_count_bumps() {
        let l = Locks::new(4);
        let before = l.version(1);
        let g = l.acquire(1);
        l.bump(1);
        drop(g);
        assert_eq!(l.version(1), before + 1);
        assert_eq!(l.version(2), 0);
    }

    #[test]
    fn leaked_guards_are_released() {
        let l = Locks::new(2);
        MutexGuard::leak(l.acquire(0));
        assert!(l.try_acquire_for(0, Duration::from_millis(1)).is_none());
        // SAFETY: this thread leaked stripe 0's guard just above.
        unsafe { l.release_leaked(0) };
        assert!(l.try_acquire_for(0, Duration::from_millis(1)).is_some());
    }
}
