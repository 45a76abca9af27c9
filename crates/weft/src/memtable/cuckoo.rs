//! The `cuckoo` memtable: TeksDB's hash baseline (§3, §4.1), made
//! concurrent — the structure `teks` is measured against.
//!
//! # Why it exists
//!
//! A hash answers puts and gets in O(1) where a skiplist pays O(log n) key
//! comparisons, but it has no order: every ordered access (a flush, a scan,
//! a seek) must sort a copy of the keys first, O(n log n). TeksDB §3 shows
//! both sides; this kind reproduces them so that the weave (`teks`) can be
//! judged against the better of the two on each operation.
//!
//! # Structure
//!
//! * `KeyMap` (`map`) maps each user key to one key node: the same
//!   node as the `jellyfish` kind (height 1, never linked), whose version
//!   list keeps every version newest first, so snapshots work as in every
//!   kind (RocksDB's `HashCuckooRep` keeps one version per key and cannot
//!   serve snapshots). A put on a known key is a hash probe and one CAS into
//!   the version list; a new key is one CAS into a free slot, a mutex only
//!   for displacement (see `map`).
//! * Gets probe the hash: O(1).
//! * [`Memtable::iter`] copies the committed nodes and sorts them by key
//!   (`SortedCursor`); the copy holds nodes, so versions added later to a
//!   key already copied are still seen, keys added later are not (the trait
//!   allows both).
//! * Capacity: the hash may grow to one 8-byte slot per `BYTES_PER_SLOT`
//!   bytes of write buffer; when its keys reach the growth load of that
//!   largest table the memtable reports [`Memtable::is_full`] and the engine
//!   rotates, as RocksDB rotates its fixed-size cuckoo memtable instead of
//!   letting it degrade. That largest table is allocated up front, up to
//!   8 MiB (the default 64 MiB buffer's; pages zeroed lazily by the OS):
//!   growing from a small one rehashed every key, one miss on its node
//!   each, six times over for a 64 MiB buffer, with new keys waiting
//!   meanwhile, and kept every retired table. Measured with `weft serve`
//!   under `redis-benchmark -t set -P 16`: sizing up front cut the
//!   server's CPU and raised its SETs/s. Writers that overshoot
//!   still find room (the table grows again); inserts never fail.
//! * The read watermark truncates version lists as in `jellyfish`.

pub(crate) mod map;
mod sorted;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use self::map::{KeyHash, KeyMap, GROW_LOAD, SLOTS};
use self::sorted::SortedCursor;
use super::arena::Arena;
use super::jellyfish::node::{alloc_node, alloc_version, insert_version, truncate_below, Node};
use super::{Found, Memtable, MemtableKind};
use crate::iter::InternalIterator;
use crate::key::compares;
use crate::key::{SequenceNumber, ValueKind};
use crate::util::stripe::CacheLine;

/// Write-buffer bytes per hash slot the hash may grow to (the hash costs
/// at most an eighth of the buffer).
pub(crate) const BYTES_PER_SLOT: usize = 64;

/// Most keys the first table is sized for: 2^17 buckets, 8 MiB — the
/// whole table of a 64 MiB write buffer. Larger buffers start there and
/// grow, so that a huge buffer that stays small does not pay for a huge
/// table.
const PRESIZED_KEYS: usize = (1 << 17) * SLOTS * GROW_LOAD.0 / GROW_LOAD.1;

/// Keys the first table of a memtable with `full` keys at most is sized
/// for (see the module doc's *Capacity*).
pub(crate) fn initial_keys(full: usize) -> usize {
    full.min(PRESIZED_KEYS)
}

/// Keys at which a hash of at most `write_buffer_size / BYTES_PER_SLOT`
/// slots reaches its growth load: the `is_full` threshold.
pub(crate) fn full_keys(write_buffer_size: usize) -> usize {
    let slots = (write_buffer_size / BYTES_PER_SLOT).max(SLOTS * 2);
    // Tables are powers of two buckets: the largest that fits the budget.
    let buckets = (slots / SLOTS).next_power_of_two();
    let buckets = if buckets * SLOTS > slots {
        (buckets / 2).max(2)
    } else {
        buckets
    };
    buckets * SLOTS * GROW_LOAD.0 / GROW_LOAD.1
}

/// Key nodes reached through a [`KeyMap`]: the data pool and hash the
/// `cuckoo` and `teks` kinds share.
pub(crate) struct HashedNodes {
    pub(crate) arena: Arena,
    pub(crate) map: KeyMap,
    /// Read watermark (0: none); see `Memtable::set_read_watermark`.
    watermark: AtomicU64,
}

impl HashedNodes {
    pub(crate) fn new(initial_keys: usize) -> Self {
        Self::with_map(KeyMap::with_capacity(initial_keys))
    }

    pub(crate) fn with_map(map: KeyMap) -> Self {
        HashedNodes {
            arena: Arena::new(),
            map,
            watermark: AtomicU64::new(0),
        }
    }

    /// See `Memtable::prefetch`.
    #[inline]
    pub(crate) fn prefetch(&self, user_key: &[u8]) {
        self.map.prefetch(KeyHash::of(user_key));
    }

    /// The node of `user_key`, if committed.
    #[inline]
    pub(crate) fn find(&self, user_key: &[u8]) -> Option<Node> {
        self.map.find(KeyHash::of(user_key), user_key)
    }

    #[inline]
    pub(crate) fn get(&self, user_key: &[u8], snapshot: SequenceNumber) -> Option<Found<'_>> {
        let v = self.find(user_key)?.version_at(snapshot)?;
        Some(Found {
            seq: v.seq(),
            kind: v.kind(),
            value: v.value(),
        })
    }

    pub(crate) fn memory(&self) -> usize {
        self.arena.memory_usage() + self.map.memory()
    }

    pub(crate) fn set_read_watermark(&self, seq: SequenceNumber) {
        self.watermark.fetch_max(seq, Ordering::Relaxed);
    }

    /// Inserts one version into the key's node, allocating the node (of
    /// `height()` links, recorded in the node's flag word) if the key is
    /// new. Returns the node if this call
    /// created it (the caller may index it), `None` if the key existed.
    pub(crate) fn insert(
        &self,
        height: impl FnOnce() -> usize,
        user_key: &[u8],
        seq: SequenceNumber,
        kind: ValueKind,
        value: &[u8],
    ) -> Option<Node> {
        let kh = KeyHash::of(user_key);
        let node = match self.map.find(kh, user_key) {
            Some(n) => {
                insert_version(n.versions(), alloc_version(&self.arena, seq, kind, value));
                n
            }
            None => {
                let mut height = Some(height);
                let mut first = None;
                let mut make = || {
                    let h = height.take().map_or(1, |f| f());
                    let (n, v) = alloc_node(&self.arena, h, user_key, Some((seq, kind, value)));
                    first = v;
                    n
                };
                match self.map.get_or_insert(kh, user_key, &mut make) {
                    Ok(n) => return Some(n),
                    Err(winner) => {
                        // Our node (if made) is abandoned, unreachable; its
                        // version record is independent and joins the
                        // winner's list.
                        let v = match first {
                            Some(v) => v,
                            None => alloc_version(&self.arena, seq, kind, value),
                        };
                        insert_version(winner.versions(), v);
                        winner
                    }
                }
            }
        };
        let w = self.watermark.load(Ordering::Relaxed);
        if w != 0 {
            truncate_below(node.versions(), w);
        }
        None
    }
}

/// The `cuckoo` memtable. See the module docs.
pub struct CuckooMemtable {
    /// Range deletes written to it (`crate::range_delete`).
    range_tombstones: crate::range_delete::MemRangeTombstones,
    nodes: HashedNodes,
    len: CacheLine<AtomicUsize>,
    full_keys: usize,
}

impl CuckooMemtable {
    /// An empty memtable for a write buffer of `write_buffer_size` bytes.
    pub fn new(write_buffer_size: usize) -> Self {
        let full = full_keys(write_buffer_size);
        CuckooMemtable {
            range_tombstones: Default::default(),
            nodes: HashedNodes::new(initial_keys(full)),
            len: CacheLine::default(),
            full_keys: full,
        }
    }

    /// Number of distinct user keys.
    #[cfg(test)]
    pub fn key_count(&self) -> usize {
        self.nodes.map.len()
    }

    /// Slots of the hash's current table.
    #[cfg(test)]
    pub fn hash_slots(&self) -> usize {
        self.nodes.map.slots()
    }
}

impl Memtable for CuckooMemtable {
    fn range_tombstones(&self) -> &crate::range_delete::MemRangeTombstones {
        &self.range_tombstones
    }

    fn kind(&self) -> MemtableKind {
        MemtableKind::Cuckoo
    }

    fn insert(&self, user_key: &[u8], seq: SequenceNumber, kind: ValueKind, value: &[u8]) {
        self.len.fetch_add(1, Ordering::Relaxed);
        self.nodes.insert(|| 1, user_key, seq, kind, value);
    }

    fn get(&self, user_key: &[u8], snapshot: SequenceNumber) -> Option<Found<'_>> {
        self.nodes.get(user_key, snapshot)
    }

    fn prefetch(&self, user_key: &[u8]) {
        self.nodes.prefetch(user_key);
    }

    fn iter(self: Arc<Self>) -> Box<dyn InternalIterator> {
        let mut nodes = self.nodes.map.nodes();
        nodes.sort_unstable_by(|a, b| compares::cmp(a.key(), b.key()));
        Box::new(SortedCursor::new(self, nodes))
    }

    fn approximate_memory(&self) -> usize {
        self.nodes.memory()
    }

    fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    fn set_read_watermark(&self, seq: SequenceNumber) {
        self.nodes.set_read_watermark(seq);
    }

    fn is_full(&self) -> bool {
        self.nodes.map.len() >= self.full_keys
    }
}

#[cfg(test)]
mod tests;
