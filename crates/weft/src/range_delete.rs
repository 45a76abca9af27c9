//! Range tombstones: the delete of every key in `[start, end)` with one
//! write (`Db::delete_range`, `WriteBatch::delete_range`; DESIGN §1.2.1).
//!
//! Range deletes are few and wide (a server's `FLUSHDB`, a dropped
//! collection), so they are kept apart from the point data, as RocksDB
//! keeps them in a range-deletion block beside each table's entries, but
//! never inside a partition's tables: a tombstone spans partitions, and a
//! partition's tables must be readable without another partition's.
//!
//! * In memory, each memtable carries the tombstones written to it
//!   ([`MemRangeTombstones`]): added before the write is published, so a
//!   reader that pinned the memtable sees them exactly when it sees the
//!   write's sequence, whatever rotation happens meanwhile.
//! * A flush moves its memtable's tombstones into the manifest and the
//!   [`crate::store::Version`] ([`StoredRangeTombstones`]), each with the
//!   partitions whose tables may still hold versions it covers
//!   (`pending`).
//! * A merge or GC of a partition feeds the tombstones pending there into
//!   its retention rules as a delete of each covered key at the
//!   tombstone's sequence (`store::compaction`), which drops what they
//!   shadow; the partition leaves `pending`, and a tombstone pending
//!   nowhere is dropped.
//! * A read finds the newest version `v` of a key at its sequence `S` as
//!   before, then asks the tombstones whether one covering the key has a
//!   sequence in `(v.seq, S]`: then the key is deleted
//!   ([`RangeTombstoneSet::deletes`]).
//!
//! Readers never see the tombstones as a list: [`RangeTombstoneSet`] cuts
//! them into non-overlapping fragments, each with the sequences of the
//! tombstones covering it, so a lookup is a binary search whatever their
//! number or overlap (RocksDB's `FragmentedRangeTombstoneList`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use crate::key::SequenceNumber;

/// A partition's id, inclusive lower bound and exclusive upper bound
/// (`None`: unbounded).
pub type PartitionBounds<'a> = (u64, &'a [u8], Option<&'a [u8]>);

/// The delete of every key in `[start, end)` at sequence `seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeTombstone {
    /// First key deleted.
    pub start: Vec<u8>,
    /// First key past the range (exclusive).
    pub end: Vec<u8>,
    /// The write's sequence: it deletes versions older than this.
    pub seq: SequenceNumber,
}

impl RangeTombstone {
    /// True when `key` is in the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.start.as_slice() <= key && key < self.end.as_slice()
    }

    /// True when the range shares a key with `[lower, upper)` (`None`:
    /// unbounded above), a partition's bounds.
    pub fn overlaps(&self, lower: &[u8], upper: Option<&[u8]>) -> bool {
        self.start < self.end
            && self.end.as_slice() > lower
            && upper.is_none_or(|u| self.start.as_slice() < u)
    }
}

/// One piece of the key space, `[start, end)`, with the sequences of the
/// tombstones that cover all of it, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fragment {
    start: Vec<u8>,
    end: Vec<u8>,
    seqs: Vec<SequenceNumber>,
}

/// Range tombstones cut into non-overlapping fragments for lookups (see
/// the module docs). Immutable: a change builds a new one.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RangeTombstoneSet {
    /// Ascending and disjoint.
    fragments: Vec<Fragment>,
}

impl RangeTombstoneSet {
    /// The fragments of `tombstones` (empty ranges cover nothing and are
    /// left out).
    pub fn new<'a>(tombstones: impl IntoIterator<Item = &'a RangeTombstone>) -> Self {
        let tombstones: Vec<&RangeTombstone> =
            tombstones.into_iter().filter(|t| t.start < t.end).collect();
        if tombstones.is_empty() {
            return RangeTombstoneSet::default();
        }
        let mut bounds: Vec<&[u8]> = tombstones
            .iter()
            .flat_map(|t| [t.start.as_slice(), t.end.as_slice()])
            .collect();
        bounds.sort_unstable();
        bounds.dedup();
        let mut starts: Vec<(&[u8], SequenceNumber)> = tombstones
            .iter()
            .map(|t| (t.start.as_slice(), t.seq))
            .collect();
        let mut ends: Vec<(&[u8], SequenceNumber)> = tombstones
            .iter()
            .map(|t| (t.end.as_slice(), t.seq))
            .collect();
        starts.sort_unstable();
        ends.sort_unstable();
        // Sweep the bounds left to right with the sequences of the
        // tombstones open at each (a count each: two tombstones may share
        // a sequence only in tests, but a multiset costs nothing more).
        let mut open: BTreeMap<std::cmp::Reverse<SequenceNumber>, usize> = BTreeMap::new();
        let (mut s, mut e) = (0, 0);
        let mut fragments: Vec<Fragment> = Vec::new();
        for w in bounds.windows(2) {
            let (at, next) = (w[0], w[1]);
            while s < starts.len() && starts[s].0 == at {
                *open.entry(std::cmp::Reverse(starts[s].1)).or_default() += 1;
                s += 1;
            }
            while e < ends.len() && ends[e].0 == at {
                let key = std::cmp::Reverse(ends[e].1);
                if let Some(n) = open.get_mut(&key) {
                    *n -= 1;
                    if *n == 0 {
                        open.remove(&key);
                    }
                }
                e += 1;
            }
            if open.is_empty() {
                continue;
            }
            let seqs: Vec<SequenceNumber> = open.keys().map(|r| r.0).collect();
            // Neighbours with the same tombstones are one fragment.
            match fragments.last_mut() {
                Some(last) if last.end.as_slice() == at && last.seqs == seqs => {
                    last.end = next.to_vec();
                }
                _ => fragments.push(Fragment {
                    start: at.to_vec(),
                    end: next.to_vec(),
                    seqs,
                }),
            }
        }
        RangeTombstoneSet { fragments }
    }

    /// True when no tombstone covers any key.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.fragments.is_empty()
    }

    /// Sequences of the tombstones covering `key`, newest first (empty
    /// when none does).
    pub fn covering(&self, key: &[u8]) -> &[SequenceNumber] {
        let i = self
            .fragments
            .partition_point(|f| f.start.as_slice() <= key);
        match i.checked_sub(1).map(|i| &self.fragments[i]) {
            Some(f) if key < f.end.as_slice() => &f.seqs,
            _ => &[],
        }
    }

    /// True when a tombstone covering `key` deletes its version of
    /// sequence `found` for a read at `read`: its sequence is in
    /// `(found, read]`.
    #[inline]
    pub fn deletes(&self, key: &[u8], found: SequenceNumber, read: SequenceNumber) -> bool {
        if self.fragments.is_empty() {
            return false;
        }
        // Newest first: the first one the read can see decides.
        self.covering(key)
            .iter()
            .find(|&&s| s <= read)
            .is_some_and(|&s| s > found)
    }
}

/// The range tombstones written to one memtable (module docs): appended
/// by writers before their write is published, read by every get that
/// pins the memtable. A memtable without any costs a reader one load.
///
/// The fragments are rebuilt lazily, by the first reader after an
/// addition, not by each writer: a burst of range deletes (a replayed WAL,
/// many collections dropped) costs one rebuild, not one per delete.
#[derive(Default)]
pub struct MemRangeTombstones {
    /// How many were added: readers look no further while it is zero.
    count: AtomicUsize,
    /// How many `set` holds: it is stale while this is below `count`.
    built: AtomicUsize,
    /// Every tombstone, in the order added.
    list: Mutex<Vec<RangeTombstone>>,
    /// `list` fragmented, as of `built` tombstones.
    set: ArcSwap<RangeTombstoneSet>,
}

impl MemRangeTombstones {
    /// Adds `t`. Called by the writer of `t` before its sequence is
    /// published (as a point write inserts before it publishes).
    pub fn add(&self, t: RangeTombstone) {
        let mut list = self.list.lock();
        list.push(t);
        self.count.store(list.len(), Ordering::Release);
    }

    /// True when none was added. A reader that saw a write's sequence
    /// published sees every tombstone added before it.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.count.load(Ordering::Acquire) == 0
    }

    /// Every tombstone added so far, fragmented.
    pub fn set(&self) -> Arc<RangeTombstoneSet> {
        if self.built.load(Ordering::Acquire) == self.count.load(Ordering::Acquire) {
            return self.set.load_full();
        }
        let list = self.list.lock();
        if self.built.load(Ordering::Acquire) != list.len() {
            self.set
                .store(Arc::new(RangeTombstoneSet::new(list.iter())));
            self.built.store(list.len(), Ordering::Release);
        }
        self.set.load_full()
    }

    /// Every tombstone added so far (a flush records them).
    pub fn all(&self) -> Vec<RangeTombstone> {
        self.list.lock().clone()
    }

    /// True when a tombstone added so far deletes `key`'s version `found`
    /// for a read at `read` ([`RangeTombstoneSet::deletes`]).
    #[inline]
    pub fn deletes(&self, key: &[u8], found: SequenceNumber, read: SequenceNumber) -> bool {
        if self.is_empty() {
            return false;
        }
        if self.built.load(Ordering::Acquire) == self.count.load(Ordering::Acquire) {
            // A guard, not an `Arc` clone: no shared count written per get.
            return self.set.load().deletes(key, found, read);
        }
        self.set().deletes(key, found, read)
    }
}

/// A flushed range tombstone, with the partitions whose tables may still
/// hold versions it covers (module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRangeTombstone {
    /// The tombstone.
    pub tombstone: RangeTombstone,
    /// Partitions not yet merged with it applied. Never empty: a
    /// tombstone pending nowhere is dropped.
    pub pending: BTreeSet<u64>,
}

/// The flushed range tombstones a [`crate::store::Version`] holds, by
/// sequence, and the same fragmented for reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredRangeTombstones {
    /// By sequence (each write has its own).
    by_seq: BTreeMap<SequenceNumber, StoredRangeTombstone>,
    /// Every tombstone of `by_seq`, fragmented.
    set: Arc<RangeTombstoneSet>,
}

impl StoredRangeTombstones {
    /// The tombstones of `list`, each replacing one of the same sequence.
    pub fn new(list: impl IntoIterator<Item = StoredRangeTombstone>) -> Self {
        Self::default().with(list)
    }

    /// True when there are none.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.by_seq.is_empty()
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.by_seq.len()
    }

    /// Every tombstone, fragmented.
    #[inline]
    pub fn set(&self) -> &Arc<RangeTombstoneSet> {
        &self.set
    }

    /// Every tombstone, by sequence.
    pub fn iter(&self) -> impl Iterator<Item = &StoredRangeTombstone> {
        self.by_seq.values()
    }

    /// True when a tombstone is still pending in partition `pid`: a merge
    /// of it is due.
    pub fn any_pending_in(&self, pid: u64) -> bool {
        self.by_seq.values().any(|t| t.pending.contains(&pid))
    }

    /// The tombstones still pending in partition `pid`.
    pub fn pending_in(&self, pid: u64) -> Vec<RangeTombstone> {
        self.by_seq
            .values()
            .filter(|t| t.pending.contains(&pid))
            .map(|t| t.tombstone.clone())
            .collect()
    }

    /// These tombstones with `changes` applied: each replaces the one of
    /// its sequence, and one pending nowhere is dropped. The same rule as
    /// the manifest's (`ManifestState::apply`).
    pub fn with(&self, changes: impl IntoIterator<Item = StoredRangeTombstone>) -> Self {
        let mut by_seq = self.by_seq.clone();
        for t in changes {
            match t.pending.is_empty() {
                true => by_seq.remove(&t.tombstone.seq),
                false => by_seq.insert(t.tombstone.seq, t),
            };
        }
        let set = Arc::new(RangeTombstoneSet::new(
            by_seq.values().map(|t| &t.tombstone),
        ));
        StoredRangeTombstones { by_seq, set }
    }

    /// The changes that take partition `pid` out of the pending set of
    /// the tombstones of sequences `applied` (a merge or GC of `pid`
    /// applied them), for an edit and [`StoredRangeTombstones::with`].
    pub fn applied_in(&self, pid: u64, applied: &[SequenceNumber]) -> Vec<StoredRangeTombstone> {
        applied
            .iter()
            .filter_map(|seq| self.by_seq.get(seq))
            .map(|t| {
                let mut t = t.clone();
                t.pending.remove(&pid);
                t
            })
            .collect()
    }

    /// The changes that hand partition `pid`'s place in every pending set
    /// to the partitions that replace it (a split), each only where the
    /// tombstone overlaps it.
    pub fn replaced(&self, pid: u64, by: &[PartitionBounds<'_>]) -> Vec<StoredRangeTombstone> {
        self.by_seq
            .values()
            .filter(|t| t.pending.contains(&pid))
            .map(|t| {
                let mut t = t.clone();
                t.pending.remove(&pid);
                for &(id, lower, upper) in by {
                    if t.tombstone.overlaps(lower, upper) {
                        t.pending.insert(id);
                    }
                }
                t
            })
            .collect()
    }
}

/// `t` as a flushed tombstone pending in every partition of `partitions`
/// (id, lower, upper) it overlaps; `None` when it overlaps none (an empty
/// range).
pub fn stored<'a>(
    t: RangeTombstone,
    partitions: impl IntoIterator<Item = PartitionBounds<'a>>,
) -> Option<StoredRangeTombstone> {
    let pending: BTreeSet<u64> = partitions
        .into_iter()
        .filter(|&(_, lower, upper)| t.overlaps(lower, upper))
        .map(|(id, _, _)| id)
        .collect();
    (!pending.is_empty()).then_some(StoredRangeTombstone {
        tombstone: t,
        pending,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(start: &str, end: &str, seq: u64) -> RangeTombstone {
        RangeTombstone {
            start: start.into(),
            end: end.into(),
            seq,
        }
    }

    /// A brute-force answer: the newest tombstone covering `key` that the
    /// read sees, newer than the version found.
    fn model(ts: &[RangeTombstone], key: &[u8], found: u64, read: u64) -> bool {
        ts.iter()
            .filter(|t| t.contains(key) && t.seq <= read)
            .map(|t| t.seq)
            .max()
            .is_some_and(|s| s > found)
    }

    #[test]
    fn fragments_answer_as_the_tombstones_do() {
        let ts = vec![
            t("b", "f", 10),
            t("d", "k", 20),
            t("a", "c", 5),
            t("e", "e", 30), // empty: covers nothing
            t("j", "m", 15),
            t("d", "k", 25),
        ];
        let set = RangeTombstoneSet::new(&ts);
        let keys: Vec<Vec<u8>> = [
            "", "a", "b", "bz", "c", "d", "e", "f", "j", "k", "l", "m", "z",
        ]
        .iter()
        .map(|k| k.as_bytes().to_vec())
        .collect();
        for key in &keys {
            for found in [0, 4, 5, 9, 10, 12, 20, 24, 25, 31] {
                for read in [0, 5, 9, 10, 15, 19, 20, 25, 30, 100] {
                    if found > read {
                        continue;
                    }
                    assert_eq!(
                        set.deletes(key, found, read),
                        model(&ts, key, found, read),
                        "key {key:?} found {found} read {read}"
                    );
                }
            }
        }
        assert_eq!(set.covering(b"d"), &[25, 20, 10]);
        assert!(set.covering(b"m").is_empty());
        assert!(RangeTombstoneSet::new(&[t("x", "x", 1)]).is_empty());
    }

    /// Random tombstones over a tiny key space (so ranges overlap, nest and
    /// share bounds) answer every lookup as the brute-force model does.
    #[test]
    fn random_fragments_answer_as_the_tombstones_do() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x7261_6e67_6573);
        let key = |rng: &mut rand::rngs::StdRng| -> Vec<u8> {
            (0..rng.gen_range(0..=3))
                .map(|_| b"abc"[rng.gen_range(0..3)])
                .collect()
        };
        for _ in 0..500 {
            let ts: Vec<RangeTombstone> = (0..rng.gen_range(0..12))
                .map(|_| RangeTombstone {
                    start: key(&mut rng),
                    end: key(&mut rng),
                    seq: rng.gen_range(1..40),
                })
                .collect();
            let set = RangeTombstoneSet::new(&ts);
            for _ in 0..60 {
                let k = key(&mut rng);
                let read = rng.gen_range(0..45);
                let found = rng.gen_range(0..=read);
                assert_eq!(
                    set.deletes(&k, found, read),
                    model(&ts, &k, found, read),
                    "{ts:?} key {k:?} found {found} read {read}"
                );
                let mut want: Vec<u64> = ts
                    .iter()
                    .filter(|t| t.contains(&k))
                    .map(|t| t.seq)
                    .collect();
                want.sort_unstable_by(|a, b| b.cmp(a));
                // Two writes never share a sequence; drawn ones may.
                want.dedup();
                assert_eq!(set.covering(&k), want.as_slice(), "{ts:?} key {k:?}");
            }
        }
    }

    #[test]
    fn stored_tombstones_retire_when_pending_nowhere() {
        let parts: Vec<PartitionBounds<'_>> =
            vec![(1, b"", Some(b"g")), (2, b"g", Some(b"p")), (3, b"p", None)];
        let a = stored(t("c", "h", 7), parts.iter().copied()).unwrap();
        assert_eq!(a.pending, BTreeSet::from([1, 2]));
        assert!(stored(t("c", "c", 8), parts.iter().copied()).is_none());
        let s = StoredRangeTombstones::new([a]);
        assert!(s.set().deletes(b"d", 3, 9));
        let s = s.with(s.applied_in(1, &[7]));
        assert_eq!(s.pending_in(2).len(), 1);
        assert!(s.pending_in(1).is_empty());
        // Partition 2 splits at "k": only the left half overlaps.
        let halves: Vec<PartitionBounds<'_>> = vec![(4, b"g", Some(b"k")), (5, b"k", None)];
        let s = s.with(s.replaced(2, &halves));
        assert_eq!(s.iter().next().unwrap().pending, BTreeSet::from([4]));
        let s = s.with(s.applied_in(4, &[7]));
        assert!(s.is_empty() && s.set().is_empty());
    }

    #[test]
    fn a_memtable_s_tombstones_are_seen_once_added() {
        let m = MemRangeTombstones::default();
        assert!(m.is_empty() && !m.deletes(b"k", 1, 10));
        m.add(t("a", "z", 5));
        assert!(m.deletes(b"k", 1, 10));
        assert!(!m.deletes(b"k", 1, 4), "a read before it");
        assert!(!m.deletes(b"k", 6, 10), "a version after it");
        assert_eq!(m.all().len(), 1);
    }
}
