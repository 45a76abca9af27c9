//! What the benchmark drives: a Weft memtable of any kind, or the
//! `crossbeam-skiplist` peer, behind one [`Target`] trait, and their
//! scanners.

use std::ops::Bound;
use std::sync::Arc;

use crossbeam_skiplist::SkipMap;
use weft::internals::memtable::{Memtable, ValueKind, VisibleIter, MAX_SEQUENCE};

use super::{SCAN_LEN, VALUE};

/// What the benchmark drives.
pub(crate) trait Target: Send + Sync {
    fn put(&self, key: &[u8], seq: u64) {
        self.put_value(key, seq, &VALUE);
    }
    fn put_value(&self, key: &[u8], seq: u64, value: &[u8]);
    fn get(&self, key: &[u8]) -> bool;
    /// A thread's scanner: its iterator is made once and sought again for
    /// every scan.
    fn scanner(&self) -> Box<dyn Scanner + '_>;
    /// Every visible key in order, from one iterator; returns the count.
    fn full_scan(&self) -> usize;
    /// Bytes held, where the structure reports it.
    fn memory(&self) -> Option<usize>;
}

/// Seeks and steps of one thread. A scan re-seeks the thread's iterator
/// rather than making one: making an iterator clones the memtable's `Arc`,
/// and with two threads scanning, that shared count's cache line moving
/// between the cores is paid per scan — a cost of the engine's iterator
/// API, not of the structure's seek + 10 next, and one the `crossbeam`
/// peer (no iterator object) never paid.
pub(crate) trait Scanner {
    /// Seek + up to `SCAN_LEN` distinct keys; returns bytes touched.
    fn scan(&mut self, key: &[u8]) -> usize;
}

/// A Weft memtable.
pub(crate) struct Weft {
    pub(crate) table: Arc<dyn Memtable>,
    /// A new iterator per scan ([`WeftScanner::Fresh`]).
    pub(crate) fresh_scans: bool,
}

/// A thread's scanner over a Weft memtable.
pub(crate) enum WeftScanner {
    /// One iterator, sought again for every scan.
    Reused(VisibleIter),
    /// A new iterator per scan: `cuckoo`'s iterator sorts a copy of the
    /// keys when made, the cost this baseline is there to show.
    Fresh(Arc<dyn Memtable>),
}

impl Scanner for WeftScanner {
    fn scan(&mut self, key: &[u8]) -> usize {
        match self {
            WeftScanner::Reused(it) => seek_and_step(it, key),
            WeftScanner::Fresh(m) => seek_and_step(
                &mut VisibleIter::new(Arc::clone(m).iter(), MAX_SEQUENCE),
                key,
            ),
        }
    }
}

pub(crate) fn seek_and_step(it: &mut VisibleIter, key: &[u8]) -> usize {
    let mut touched = 0;
    if it.seek(key).is_err() {
        return 0;
    }
    for _ in 0..SCAN_LEN {
        if !it.valid() {
            break;
        }
        touched += it.key().len() + it.value().len();
        if it.next().is_err() {
            break;
        }
    }
    touched
}

impl Target for Weft {
    fn put_value(&self, key: &[u8], seq: u64, value: &[u8]) {
        self.table.insert(key, seq, ValueKind::Put, value);
    }
    fn get(&self, key: &[u8]) -> bool {
        self.table.get(key, MAX_SEQUENCE).is_some()
    }
    fn scanner(&self) -> Box<dyn Scanner + '_> {
        Box::new(if self.fresh_scans {
            WeftScanner::Fresh(Arc::clone(&self.table))
        } else {
            WeftScanner::Reused(VisibleIter::new(
                Arc::clone(&self.table).iter(),
                MAX_SEQUENCE,
            ))
        })
    }
    fn full_scan(&self) -> usize {
        self.table.prepare_scan(MAX_SEQUENCE);
        let mut it = VisibleIter::new(Arc::clone(&self.table).iter(), MAX_SEQUENCE);
        let mut n = 0;
        if it.seek_to_first().is_err() {
            return 0;
        }
        while it.valid() {
            std::hint::black_box(it.value());
            n += 1;
            if it.next().is_err() {
                break;
            }
        }
        n
    }
    fn memory(&self) -> Option<usize> {
        Some(self.table.approximate_memory())
    }
}

/// crossbeam's SkipMap, one entry per version: user key ‖ !seq (big-endian),
/// so a key's newest version sorts first, as in the `skiplist` kind.
pub(crate) struct Crossbeam(pub(crate) SkipMap<[u8; 24], Box<[u8]>>);

pub(crate) fn ikey(key: &[u8], seq: u64) -> [u8; 24] {
    let mut k = [0u8; 24];
    k[..16].copy_from_slice(&key[..16]);
    k[16..].copy_from_slice(&(!seq).to_be_bytes());
    k
}

impl Target for Crossbeam {
    fn put_value(&self, key: &[u8], seq: u64, value: &[u8]) {
        self.0.insert(ikey(key, seq), value.into());
    }
    fn get(&self, key: &[u8]) -> bool {
        self.0
            .lower_bound(Bound::Included(&ikey(key, MAX_SEQUENCE)))
            .is_some_and(|e| e.key()[..16] == key[..16])
    }
    fn scanner(&self) -> Box<dyn Scanner + '_> {
        Box::new(CrossbeamScanner(&self.0))
    }
    fn full_scan(&self) -> usize {
        let mut n = 0;
        let mut e = self.0.front();
        while let Some(cur) = e {
            std::hint::black_box(cur.value());
            n += 1;
            let uk: [u8; 16] = cur.key()[..16].try_into().unwrap_or([0; 16]);
            e = self.0.lower_bound(Bound::Excluded(&ikey(&uk, 0)));
        }
        n
    }
    fn memory(&self) -> Option<usize> {
        None
    }
}

pub(crate) struct CrossbeamScanner<'a>(&'a SkipMap<[u8; 24], Box<[u8]>>);

impl Scanner for CrossbeamScanner<'_> {
    fn scan(&mut self, key: &[u8]) -> usize {
        let mut touched = 0;
        let mut e = self
            .0
            .lower_bound(Bound::Included(&ikey(key, MAX_SEQUENCE)));
        for _ in 0..SCAN_LEN {
            let Some(cur) = e else { break };
            touched += 16 + cur.value().len();
            let uk: [u8; 16] = cur.key()[..16].try_into().unwrap_or([0; 16]);
            // Skip the key's older versions: a few steps, then a seek.
            let mut n = cur.next();
            let mut steps = 0;
            while n.as_ref().is_some_and(|x| x.key()[..16] == uk) {
                steps += 1;
                n = if steps < 8 {
                    n.and_then(|x| x.next())
                } else {
                    self.0.lower_bound(Bound::Excluded(&ikey(&uk, 0)))
                };
            }
            e = n;
        }
        touched
    }
}
