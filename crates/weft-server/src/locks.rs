//! Striped key locks: the server's read-modify-write atomicity.
//!
//! The engine has atomic batches but no compare-and-set, so a command that
//! reads before it writes (`INCR`, `APPEND`, `SET NX`, `HSET` updating the
//! field count, ...) holds the lock of its key's stripe across the read and
//! the batch write. Multi-key commands lock their stripes in ascending index
//! order, so two of them can never deadlock. Readers take no lock: they read
//! the engine, whose writes are atomic.

use parking_lot::{Mutex, MutexGuard};

/// A fixed table of mutexes indexed by a hash of the user key.
pub struct Locks {
    stripes: Box<[Mutex<()>]>,
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
            stripes: (0..n.max(1)).map(|_| Mutex::new(())).collect(),
        }
    }

    fn index(&self, key: &[u8]) -> usize {
        (hash(key) % self.stripes.len() as u64) as usize
    }

    /// Locks the stripe of one key.
    pub fn lock(&self, key: &[u8]) -> MutexGuard<'_, ()> {
        self.stripes[self.index(key)].lock()
    }

    /// Locks the stripes of all `keys`, in ascending stripe order.
    pub fn lock_many<'a, I>(&self, keys: I) -> Vec<MutexGuard<'_, ()>>
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        let mut idx: Vec<usize> = keys.into_iter().map(|k| self.index(k)).collect();
        idx.sort_unstable();
        idx.dedup();
        idx.into_iter().map(|i| self.stripes[i].lock()).collect()
    }

    /// Locks every stripe (FLUSHDB).
    pub fn lock_all(&self) -> Vec<MutexGuard<'_, ()>> {
        self.stripes.iter().map(|m| m.lock()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_many_dedups_and_orders() {
        let l = Locks::new(4);
        let g = l.lock_many([&b"a"[..], b"a", b"b", b"c", b"d", b"e"]);
        assert!(g.len() <= 4);
        drop(g);
        let _all = l.lock_all();
    }

    #[test]
    fn opposite_orders_do_not_deadlock() {
        let l = std::sync::Arc::new(Locks::new(64));
        let keys: Vec<Vec<u8>> = (0..32).map(|i| format!("k{i}").into_bytes()).collect();
        let hs: Vec<_> = (0..4)
            .map(|t| {
                let l = l.clone();
                let mut ks = keys.clone();
                if t % 2 == 1 {
                    ks.reverse();
                }
                std::thread::spawn(move || {
                    for _ in 0..2000 {
                        let _g = l.lock_many(ks.iter().map(|k| k.as_slice()));
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    }
}
