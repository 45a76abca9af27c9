//! The UnsortedStore's hash index as a partition holds it: shared by every
//! version of the partition, changed by copy and swap so readers never
//! wait, built from tables' keys and grown ahead of its load.

use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::stats::ReadPurpose;

use super::{hash_index, FileMeta, TableFile};

/// The hash index of one partition's UnsortedStore, shared by every version
/// of that partition (it only grows between merges; see [`super::Partition::get`]).
///
/// Only ever replaced whole ([`change_index`]), so readers load it from an
/// `ArcSwap` instead of taking a read lock: a parking_lot read lock is an
/// atomic add on a word every core reading the partition shares, and every
/// get of a key past the memtables took one.
pub type SharedIndex = Arc<ArcSwap<hash_index::HashIndex>>;

/// Applies `change` to a partition's index without holding its readers up:
/// the change is made to a copy, which is then swapped in; readers that
/// loaded the old index finish their lookup on it, and the last of them (or
/// the swapper, usually) frees it.
///
/// Why: a flush inserts a whole table's keys (~230 k for a 64 MiB memtable
/// of 256-byte values) and a merge re-places every surviving entry, tens of
/// milliseconds each, and when they were made in place, under a write
/// lock, every `get` of the partition waited for them: `readwhilewriting` over a 3M-key store (`weft bench
/// --benchmarks=fillrandom,readwhilewriting --num=3000000 --histogram`)
/// showed it in the reads' tail latency (see
/// `bench/journal/2026-11-27-01-index-copies-sealed-wal.md`). The copy
/// costs a memcpy of the index (10 bytes a key) per change.
///
/// The caller must hold the partition's `index_changes`: with a second writer, a
/// change made between the copy and the swap would be lost.
pub fn change_index<T>(
    index: &SharedIndex,
    change: impl FnOnce(&mut hash_index::HashIndex) -> T,
) -> T {
    let mut copy = hash_index::HashIndex::clone(&index.load());
    let out = change(&mut copy);
    replace_index(index, copy);
    out
}

/// Swaps `next` in as the partition's index (see [`change_index`]).
pub fn replace_index(index: &SharedIndex, next: hash_index::HashIndex) {
    index.store(Arc::new(next));
}

/// A new shared index holding `index`.
pub fn shared_index(index: hash_index::HashIndex) -> SharedIndex {
    Arc::new(ArcSwap::from_pointee(index))
}

/// Initial capacity of a partition's hash index; it is rebuilt bigger (from
/// the tables' keys) before its load passes [`INDEX_GROW_LOAD`].
pub const INITIAL_INDEX_CAPACITY: usize = 1 << 14;

/// Distinct user keys of one table, packed in one buffer.
#[derive(Debug, Default, Clone)]
pub struct KeyList {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl KeyList {
    /// Appends `key` unless it equals the last key appended.
    pub fn push_distinct(&mut self, key: &[u8]) {
        let start = self.ends.last().copied().unwrap_or(0);
        if !self.ends.is_empty() && &self.bytes[start - self.last_len()..start] == key {
            return;
        }
        self.bytes.extend_from_slice(key);
        self.ends.push(self.bytes.len());
    }

    fn last_len(&self) -> usize {
        match self.ends.len() {
            0 => 0,
            1 => self.ends[0],
            n => self.ends[n - 1] - self.ends[n - 2],
        }
    }

    /// The keys, in the order pushed.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let k = &self.bytes[start..end];
            start = end;
            k
        })
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.ends.len()
    }
}

/// Reads the distinct user keys of `table` (to rebuild a hash index).
pub fn table_user_keys(table: &TableFile) -> Result<KeyList> {
    let mut keys = KeyList::default();
    let mut it = table.table.iter_for(ReadPurpose::Background);
    it.seek_to_first()?;
    while it.valid() {
        keys.push_distinct(it.user_key());
        it.next()?;
    }
    Ok(keys)
}

/// Builds the hash index of an UnsortedStore from its tables' keys, oldest
/// table first, sized for the keys it will hold.
pub fn build_index(tables: &[Arc<TableFile>]) -> Result<hash_index::HashIndex> {
    build_index_with_room(tables, 0, 1, 0)
}

/// [`build_index`], with room for `room` more keys beyond the tables',
/// times `growth`, and for at least `at_least` keys.
fn build_index_with_room(
    tables: &[Arc<TableFile>],
    room: usize,
    growth: usize,
    at_least: usize,
) -> Result<hash_index::HashIndex> {
    let lists: Vec<(u64, KeyList)> = tables
        .iter()
        .map(|t| Ok((t.meta.number, table_user_keys(t)?)))
        .collect::<Result<_>>()?;
    let total: usize = lists.iter().map(|(_, k)| k.len()).sum();
    let capacity = total
        .saturating_add(room)
        .saturating_mul(growth)
        .max(at_least)
        .max(INITIAL_INDEX_CAPACITY);
    let mut index = hash_index::HashIndex::with_capacity(capacity);
    for (n, keys) in &lists {
        // A table the index cannot take is probed directly by readers.
        let _ = index.add_table(*n, keys.iter());
    }
    Ok(index)
}

/// Load factor past which adding a table first rebuilds the index bigger.
///
/// An insert into a fuller index mostly tries cuckoo displacements that
/// fail (each a chain of dependent cache misses) before it overflows: a
/// `fillrandom` whose merges fell behind spent many times longer per
/// flushed table in `HashIndex::insert` at loads from about 0.9 up than
/// at low loads, a large share of the run's CPU (see
/// `bench/journal/2026-11-24-07-mapped-wal-hash-index.md`).
pub const INDEX_GROW_LOAD: f64 = 0.95;

/// A rebuilt index has room for at least this many times the keys it takes
/// (load ~0.4), so rebuilds — which re-read every older table's keys — come
/// at geometrically growing sizes, O(1) amortized per key.
pub const INDEX_GROWTH: usize = 2;

/// The keys a partition's UnsortedStore holds when it reaches
/// `unsorted_limit` (and is merged), estimated from one of its tables: what
/// a growing index is sized for at least. Without it, the index of a
/// 64 MiB-flush, 256 MiB-limit store grew from its initial size three times
/// before its first merge, and each rebuild re-read every older table,
/// taking about as long as a flush.
fn index_capacity_hint(table_keys: usize, table_bytes: u64, unsorted_limit: u64) -> usize {
    let tables = unsorted_limit.div_ceil(table_bytes.max(1));
    table_keys.saturating_mul(usize::try_from(tables).unwrap_or(usize::MAX))
}

/// A growing index takes at most this many times the keys it must hold from
/// [`index_capacity_hint`].
const HINT_MAX_GROWTH: usize = 8;

/// The index to add a new table of `keys` keys and `table_bytes` bytes to,
/// when `index` is too small for it: rebuilt from `older` (the
/// UnsortedStore's tables before the new one) with room for
/// [`INDEX_GROWTH`] times their keys and the new ones, and for the keys the
/// store will hold at `unsorted_limit` ([`index_capacity_hint`], at most
/// [`HINT_MAX_GROWTH`] times those keys). `None` while the new keys keep
/// `index` within [`INDEX_GROW_LOAD`]. Reads the older tables: the caller
/// should own `index` (a loaded `Arc`), not hold a short-lived guard. Flush and open both
/// grow the index by this one rule (then [`install_table`]), so an index
/// restored on open is laid out exactly as the one it replaces.
pub fn grown_index(
    index: &hash_index::HashIndex,
    older: &[Arc<TableFile>],
    keys: usize,
    table_bytes: u64,
    unsorted_limit: u64,
) -> Result<Option<hash_index::HashIndex>> {
    let after = index.entries().saturating_add(keys);
    if after as f64 <= INDEX_GROW_LOAD * f64::from(index.bucket_count()) {
        return Ok(None);
    }
    // A hint from a small table (a short session's recovered WAL, a tiny
    // write buffer) may be far off what the store will ever hold.
    let hint = index_capacity_hint(keys, table_bytes, unsorted_limit);
    let at_least = hint.min(after.saturating_mul(HINT_MAX_GROWTH));
    build_index_with_room(older, keys, INDEX_GROWTH, at_least).map(Some)
}

/// Swaps `bigger` (from [`grown_index`]) in, if any, then adds table
/// `number` with `keys` to `index`.
pub fn install_table(
    index: &mut hash_index::HashIndex,
    bigger: Option<hash_index::HashIndex>,
    number: u64,
    keys: &KeyList,
) {
    if let Some(bigger) = bigger {
        *index = bigger;
    }
    // A table the index cannot take is probed directly by readers.
    let _ = index.add_table(number, keys.iter());
}

/// Adds table `t` (the newest, with `keys`) to `index`, growing it first
/// when needed ([`grown_index`]).
pub fn index_add_table(
    index: &mut hash_index::HashIndex,
    older: &[Arc<TableFile>],
    t: &FileMeta,
    keys: &KeyList,
    unsorted_limit: u64,
) -> Result<()> {
    let bigger = grown_index(index, older, keys.len(), t.size, unsorted_limit)?;
    install_table(index, bigger, t.number, keys);
    Ok(())
}
