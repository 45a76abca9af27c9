//! The persistent layout (UniKV): disjoint range partitions, each with an
//! UnsortedStore and a SortedStore, and value logs shared between them.
//!
//! * The **UnsortedStore** of a partition holds the tables flushed from
//!   memtables, in flush order, with overlapping key ranges. A lookup asks
//!   the partition's in-memory [`hash_index`] (2-byte key tags, ~10 B per
//!   key) which tables may hold the key and reads only those, newest first —
//!   one block read for a recent key. The index is checkpointed to a
//!   `.hix` file every half `unsorted_limit` of flushed bytes (UniKV
//!   §III-G); open restores it from the checkpoint plus the tables flushed
//!   after it, or rebuilds it from the tables if the checkpoint is unusable.
//! * The **SortedStore** is one sorted run of non-overlapping tables; no
//!   user key straddles two tables, so a lookup binary-searches the fence
//!   keys and reads one table. When a partition's UnsortedStore passes
//!   `unsorted_limit` bytes (or `unsorted_slowdown_tables` tables) it is
//!   merged into the SortedStore ([`compaction`]); values of at least
//!   `min_blob_size` bytes go to a new [`value_log`] and the SortedStore keeps
//!   a pointer (partial key-value separation), and pointers already there are
//!   copied, never their values.
//! * **GC** ([`gc`], driven from `background`) rewrites a partition's
//!   SortedStore when its value logs hold enough dead bytes, copying the live
//!   values of the victim logs to a new log.
//! * A partition past `partition_size` **splits** at its median key; both
//!   halves keep pointing into the logs they shared (lazy value split, with
//!   per-partition references in the manifest).
//!
//! A [`Version`] is an immutable picture of all partitions, tables and logs;
//! edits make new versions. Readers pin a version through an `Arc` and never
//! see it change. Layers are ordered by age — memtables, then UnsortedStore
//! tables newest first, then the SortedStore — so the first layer holding a
//! visible version of a key has its newest one.
//!
//! A table or log removed by an edit is marked obsolete; its file is deleted
//! when the last reader drops it.

pub mod compaction;
pub mod gc;
pub mod hash_index;
pub mod sorted_run;
pub mod value_log;
pub mod value_reader;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{compare_positions, parse_internal_key, SequenceNumber, ValueKind};
use crate::stats::{DiskReads, ReadPurpose};
use crate::table::BlockCache;
use crate::table::{BlockReads, Table};

/// Where a table lives within its partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Flushed from a memtable; overlaps other tables.
    Unsorted,
    /// Part of the partition's sorted run.
    Sorted,
}

/// What the manifest records about a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    /// File number (`NNNNNN.sst`).
    pub number: u64,
    /// Size in bytes.
    pub size: u64,
    /// Entries in the table.
    pub entries: u64,
    /// Smallest encoded internal key.
    pub smallest: Vec<u8>,
    /// Largest encoded internal key.
    pub largest: Vec<u8>,
}

impl FileMeta {
    /// User key of the smallest entry.
    pub fn smallest_user_key(&self) -> &[u8] {
        crate::key::user_key_of(&self.smallest)
    }
    /// User key of the largest entry.
    pub fn largest_user_key(&self) -> &[u8] {
        crate::key::user_key_of(&self.largest)
    }
}

/// An open table of the current (or an older, still pinned) version.
pub struct TableFile {
    /// Manifest metadata.
    pub meta: FileMeta,
    /// The open table.
    pub table: Arc<Table>,
    path: PathBuf,
    cache: Arc<BlockCache>,
    obsolete: AtomicBool,
}

impl TableFile {
    /// Opens table `meta.number` in `dir`, reading its blocks as `reads`
    /// says.
    pub fn open(
        dir: &Path,
        meta: FileMeta,
        cache: &Arc<BlockCache>,
        reads: BlockReads,
    ) -> Result<Arc<TableFile>> {
        let path = crate::filename::table_path(dir, meta.number);
        let table = Table::open(&path, meta.number, meta.size, Arc::clone(cache), reads)?;
        Ok(Arc::new(TableFile {
            meta,
            table,
            path,
            cache: Arc::clone(cache),
            obsolete: AtomicBool::new(false),
        }))
    }

    /// Marks the table as removed from the live version: its file is deleted
    /// once the last reader lets go.
    pub fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
    }
}

impl Drop for TableFile {
    fn drop(&mut self) {
        if self.obsolete.load(Ordering::Acquire) {
            self.cache.evict_file(self.meta.number);
            // A failure leaves an orphan that the next open removes.
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The hash index of one partition's UnsortedStore, shared by every version
/// of that partition (it only grows between merges; see [`Partition::get`]).
pub type SharedIndex = Arc<parking_lot::RwLock<hash_index::HashIndex>>;

/// Applies `change` to a partition's index without holding its readers up:
/// the change is made to a copy (taken under the read lock, which readers
/// share), and the write lock is held only to swap the copy in; the old
/// index is freed after it is released.
///
/// Why: a flush inserts a whole table's keys (~230 k for a 64 MiB memtable
/// of 256-byte values) and a merge re-places every surviving entry, tens of
/// milliseconds each, and under the write lock every `get` of the partition
/// waited for them: `readwhilewriting` over a 3M-key store (`weft bench
/// --benchmarks=fillrandom,readwhilewriting --num=3000000 --histogram`)
/// showed it in the reads' tail latency (see
/// `bench/journal/2026-11-27-01-index-copies-sealed-wal.md`). The copy
/// costs a memcpy of the index (10 bytes a key) per change.
///
/// The caller must hold `Core::index_changes`: with a second writer, a
/// change made between the copy and the swap would be lost.
pub fn change_index<T>(
    index: &SharedIndex,
    change: impl FnOnce(&mut hash_index::HashIndex) -> T,
) -> T {
    let mut copy = index.read().clone();
    let out = change(&mut copy);
    replace_index(index, copy);
    out
}

/// Swaps `next` in as the partition's index; the write lock is held only
/// for the swap (see [`change_index`]).
pub fn replace_index(index: &SharedIndex, next: hash_index::HashIndex) {
    let old = std::mem::replace(&mut *index.write(), next);
    drop(old);
}

/// Initial capacity of a partition's hash index; it is rebuilt bigger (from
/// the tables' keys) before its load passes [`INDEX_GROW_LOAD`].
pub const INITIAL_INDEX_CAPACITY: usize = 1 << 14;

/// Where point reads were answered and what they read: the per-layer I/O
/// accounting of UniKV §III-B (a recent key costs one UnsortedStore block
/// read, an old one a SortedStore block plus, if separated, one value read).
#[derive(Debug, Default)]
pub struct ReadCounters {
    /// Gets answered from a memtable.
    pub memtable_hits: std::sync::atomic::AtomicU64,
    /// Gets answered from an UnsortedStore table.
    pub unsorted_hits: std::sync::atomic::AtomicU64,
    /// Gets answered from the SortedStore.
    pub sorted_hits: std::sync::atomic::AtomicU64,
    /// Gets that found nothing.
    pub misses: std::sync::atomic::AtomicU64,
    /// UnsortedStore tables read by gets (index candidates and unknown tables).
    pub unsorted_probes: std::sync::atomic::AtomicU64,
    /// ...of which held no version of the key visible to the get (tag
    /// collisions, tables the index did not know, only newer versions).
    pub unsorted_false_probes: std::sync::atomic::AtomicU64,
    /// SortedStore tables read by gets.
    pub sorted_probes: std::sync::atomic::AtomicU64,
    /// Values read from value logs by gets.
    pub value_log_reads: std::sync::atomic::AtomicU64,
}

impl ReadCounters {
    fn bump(c: &std::sync::atomic::AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

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

/// True if every entry of `a` comes before every entry of `b` (internal
/// order), so a run may hold `b` right after `a`.
fn ends_before(a: &TableFile, b: &TableFile) -> bool {
    match (
        parse_internal_key(&a.meta.largest),
        parse_internal_key(&b.meta.smallest),
    ) {
        (Some(a), Some(b)) => {
            compare_positions(a.user_key, a.seq, b.user_key, b.seq) == std::cmp::Ordering::Less
        }
        _ => false,
    }
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
/// may hold a read lock on `index`, not a write lock. Flush and open both
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

/// One range partition `[lower, upper)`.
#[derive(Clone)]
pub struct Partition {
    /// Stable id (recorded in the manifest).
    pub id: u64,
    /// Inclusive lower bound; empty = unbounded.
    pub lower: Vec<u8>,
    /// Exclusive upper bound; `None` = unbounded.
    pub upper: Option<Vec<u8>>,
    /// UnsortedStore tables, oldest first.
    pub unsorted: Vec<Arc<TableFile>>,
    /// SortedStore tables, ascending and non-overlapping.
    pub sorted: Vec<Arc<TableFile>>,
    /// Hash index over the UnsortedStore's keys (UniKV §III-B).
    pub index: SharedIndex,
}

impl Partition {
    /// An empty partition.
    pub fn new(id: u64, lower: Vec<u8>, upper: Option<Vec<u8>>) -> Self {
        Partition {
            id,
            lower,
            upper,
            unsorted: Vec::new(),
            sorted: Vec::new(),
            index: Arc::new(parking_lot::RwLock::new(
                hash_index::HashIndex::with_capacity(INITIAL_INDEX_CAPACITY),
            )),
        }
    }

    /// True when `key` falls in this partition's range.
    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.lower.as_slice() && self.upper.as_deref().is_none_or(|u| key < u)
    }

    /// Bytes of UnsortedStore tables.
    pub fn unsorted_bytes(&self) -> u64 {
        self.unsorted.iter().map(|t| t.meta.size).sum()
    }

    /// Bytes of SortedStore tables.
    pub fn sorted_bytes(&self) -> u64 {
        self.sorted.iter().map(|t| t.meta.size).sum()
    }

    /// The newest version of `key` at `snapshot` in this partition.
    pub fn get(
        &self,
        key: &[u8],
        snapshot: SequenceNumber,
        counters: &ReadCounters,
    ) -> Result<Option<(SequenceNumber, ValueKind, Vec<u8>)>> {
        // The hash index names the UnsortedStore tables that may hold the
        // key (tags collide, so each candidate is read and its key compared).
        // A table the index does not know is probed too: an older version
        // pinned by a reader may still list tables a later merge removed from
        // the shared index.
        let mut candidates = Vec::new();
        // Almost always every table is indexed; only when one is not is the
        // per-table list of unknown tables worth building.
        let unknown: Option<Vec<bool>> = {
            let index = self.index.read();
            index.lookup(key, &mut candidates);
            let known = |t: &Arc<TableFile>| index.contains_table(t.meta.number);
            if self.unsorted.iter().all(known) {
                None
            } else {
                Some(self.unsorted.iter().map(|t| !known(t)).collect())
            }
        };
        for (i, t) in self.unsorted.iter().enumerate().rev() {
            let unknown = unknown.as_ref().is_some_and(|u| u[i]);
            if !unknown && !candidates.contains(&t.meta.number) {
                continue;
            }
            if key < t.meta.smallest_user_key() || key > t.meta.largest_user_key() {
                continue;
            }
            if !t.table.may_contain(key) {
                continue;
            }
            ReadCounters::bump(&counters.unsorted_probes);
            if let Some(found) = t.table.get(key, snapshot)? {
                ReadCounters::bump(&counters.unsorted_hits);
                return Ok(Some(found));
            }
            ReadCounters::bump(&counters.unsorted_false_probes);
        }
        // Merges never split one user key's versions across sorted tables,
        // so at most one table can hold the key.
        let i = self
            .sorted
            .partition_point(|t| t.meta.largest_user_key() < key);
        match self.sorted.get(i) {
            Some(t) if t.meta.smallest_user_key() <= key => {
                ReadCounters::bump(&counters.sorted_probes);
                let found = t.table.get(key, snapshot)?;
                if found.is_some() {
                    ReadCounters::bump(&counters.sorted_hits);
                }
                Ok(found)
            }
            _ => Ok(None),
        }
    }

    fn check_invariants(&self) {
        debug_assert!(self
            .sorted
            .windows(2)
            .all(|w| w[0].meta.largest_user_key() < w[1].meta.smallest_user_key()));
        debug_assert!(self
            .unsorted
            .windows(2)
            .all(|w| w[0].meta.number < w[1].meta.number));
    }
}

/// A live value log with its accounting.
#[derive(Clone)]
pub struct LiveValueLog {
    /// The open log.
    pub file: Arc<value_log::ValueLogFile>,
    /// Bytes of values no SortedStore entry points to any more.
    pub garbage: u64,
    /// Partitions whose SortedStore may point into the log.
    pub refs: std::collections::BTreeSet<u64>,
}

/// An immutable picture of the store: partitions in key order, and the
/// value logs their SortedStores point into.
#[derive(Clone)]
pub struct Version {
    /// Partitions, ascending and covering every key.
    pub partitions: Vec<Arc<Partition>>,
    /// Live value logs by file number.
    pub value_logs: std::collections::BTreeMap<u64, LiveValueLog>,
}

impl Version {
    /// A store of one empty partition covering all keys.
    #[cfg(test)]
    pub fn new_single() -> Self {
        Version {
            partitions: vec![Arc::new(Partition::new(0, Vec::new(), None))],
            value_logs: Default::default(),
        }
    }

    /// The live value logs partition `pid` points into, by file number.
    pub fn logs_of(&self, pid: u64) -> impl Iterator<Item = (u64, &LiveValueLog)> {
        self.value_logs
            .iter()
            .filter(move |(_, l)| l.refs.contains(&pid))
            .map(|(n, l)| (*n, l))
    }

    /// The live value log `ptr` points into.
    pub fn value_log(&self, ptr: &value_log::ValuePointer) -> Result<&value_log::ValueLogFile> {
        match self.value_logs.get(&ptr.log) {
            Some(log) => Ok(&log.file),
            None => Err(crate::Error::corruption(
                format!("{:06}.vlog", ptr.log),
                ptr.offset,
                "value pointer into a value log that is not live",
            )),
        }
    }

    /// Reads the value behind an encoded [`value_log::ValuePointer`] for a
    /// get (one exact read, counted in `disk_reads`). Cursors use a
    /// [`value_reader::ValueReader`] instead.
    pub fn resolve(&self, raw: &[u8], disk_reads: &DiskReads) -> Result<Vec<u8>> {
        let ptr = value_log::ValuePointer::parse(raw)?;
        let value = self.value_log(&ptr)?.read(&ptr)?;
        disk_reads.add(ReadPurpose::Get, ptr.record_size());
        Ok(value)
    }

    /// Partition `id`, if this version still has it (a split replaces a
    /// partition with two new ids).
    pub fn partition(&self, id: u64) -> Option<&Arc<Partition>> {
        self.partitions.iter().find(|p| p.id == id)
    }

    /// The partition whose range holds `key`.
    pub fn partition_for(&self, key: &[u8]) -> &Arc<Partition> {
        let i = self
            .partitions
            .partition_point(|p| p.lower.as_slice() <= key);
        let p = &self.partitions[i.saturating_sub(1)];
        debug_assert!(p.contains(key));
        p
    }

    /// The newest version of `key` at `snapshot` in the store; a separated
    /// value is read from its log, its bytes counted in `disk_reads`.
    pub fn get(
        &self,
        key: &[u8],
        snapshot: SequenceNumber,
        counters: &ReadCounters,
        disk_reads: &DiskReads,
    ) -> Result<Option<(SequenceNumber, ValueKind, Vec<u8>)>> {
        // Separated values are read from their value log, so a found version
        // is always `Put` or `Delete`.
        match self.partition_for(key).get(key, snapshot, counters)? {
            Some((seq, ValueKind::Pointer, raw)) => {
                ReadCounters::bump(&counters.value_log_reads);
                Ok(Some((seq, ValueKind::Put, self.resolve(&raw, disk_reads)?)))
            }
            None => {
                ReadCounters::bump(&counters.misses);
                Ok(None)
            }
            other => Ok(other),
        }
    }

    /// Cursors over every table for a scan: one sorted run spanning all
    /// partitions' SortedStores (partitions are disjoint and ordered, so
    /// their runs concatenate), and the UnsortedStore tables as runs too.
    ///
    /// A partition's UnsortedStore tables overlap each other, but tables of
    /// different partitions never do: run `k` strings together the `k`-th
    /// newest table of every partition, in partition order. So a scan opens
    /// as many UnsortedStore cursors as the fullest partition has tables,
    /// not as all partitions together: before, a `seek + 10` on a store of
    /// several partitions positioned a cursor in every UnsortedStore table
    /// of every partition and stepped a merge as wide. A table that would
    /// not follow its run's last table in key order (never expected: a
    /// partition's tables lie inside its range) gets a run of its own. A
    /// seek opens at most one table per run, and none where the run's next
    /// table starts past the target (the run rests on its metadata:
    /// `sorted_run`), so a short scan reads the tables of the partitions it
    /// covers.
    pub fn iters(&self, fill_cache: bool) -> Vec<Box<dyn InternalIterator>> {
        let purpose = ReadPurpose::Scan { fill_cache };
        let mut runs: Vec<Vec<Arc<TableFile>>> = Vec::new();
        let mut strays: Vec<Vec<Arc<TableFile>>> = Vec::new();
        let mut sorted = Vec::new();
        for p in &self.partitions {
            for (k, t) in p.unsorted.iter().rev().enumerate() {
                if k == runs.len() {
                    runs.push(Vec::new());
                }
                let run = &mut runs[k];
                if run.last().is_none_or(|prev| ends_before(prev, t)) {
                    run.push(Arc::clone(t));
                } else {
                    strays.push(vec![Arc::clone(t)]);
                }
            }
            sorted.extend(p.sorted.iter().cloned());
        }
        runs.extend(strays);
        if !sorted.is_empty() {
            runs.push(sorted);
        }
        runs.into_iter()
            .map(|run| {
                Box::new(sorted_run::SortedRunIter::new(run, purpose)) as Box<dyn InternalIterator>
            })
            .collect()
    }

    /// Every live table.
    pub fn all_tables(&self) -> impl Iterator<Item = &Arc<TableFile>> {
        self.partitions
            .iter()
            .flat_map(|p| p.unsorted.iter().chain(p.sorted.iter()))
    }

    /// The most UnsortedStore tables any one partition holds (what the
    /// write stall triggers compare against `unsorted_*_tables`).
    pub fn unsorted_tables(&self) -> usize {
        self.partitions
            .iter()
            .map(|p| p.unsorted.len())
            .max()
            .unwrap_or(0)
    }

    /// Replaces partition `id` with `p`.
    pub fn with_partition(&self, p: Partition) -> Version {
        p.check_invariants();
        let mut v = self.clone();
        for slot in &mut v.partitions {
            if slot.id == p.id {
                *slot = Arc::new(p);
                return v;
            }
        }
        debug_assert!(false, "partition {} not in version", p.id);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::ValueKind;
    use crate::table::{TableBuilder, TableOptions};

    /// An index change runs while readers (and the write lock) can still
    /// take the index, and shows only once it is swapped in.
    #[test]
    fn an_index_change_runs_without_a_lock_on_the_index_and_then_shows() {
        let index: SharedIndex = Arc::new(parking_lot::RwLock::new(
            hash_index::HashIndex::with_capacity(1000),
        ));
        let keys: Vec<Vec<u8>> = (0..1000u32)
            .map(|i| format!("key{i:06}").into_bytes())
            .collect();
        let lookup = |key: &[u8]| {
            let mut out = Vec::new();
            index.read().lookup(key, &mut out);
            out
        };
        change_index(&index, |copy| {
            assert!(
                index.try_write().is_some(),
                "readers (and the write lock) are held out while the index changes"
            );
            copy.add_table(7, keys.iter().map(Vec::as_slice)).unwrap();
            assert!(lookup(b"key000042").is_empty(), "the change shows early");
        });
        assert_eq!(lookup(b"key000042"), vec![7]);
        change_index(&index, |copy| {
            assert!(index.try_write().is_some());
            copy.remove_tables(&[7]);
        });
        assert_eq!(index.read().entries(), 0);
        assert!(lookup(b"key000042").is_empty());
    }

    #[test]
    fn key_list_keeps_distinct_consecutive_keys() {
        let mut k = KeyList::default();
        for key in [&b"a"[..], b"a", b"", b"b", b"b", b"ab"] {
            k.push_distinct(key);
        }
        let got: Vec<&[u8]> = k.iter().collect();
        assert_eq!(got, vec![&b"a"[..], b"", b"b", b"ab"]);
        assert_eq!(k.len(), 4);
    }

    fn write_table(
        dir: &Path,
        number: u64,
        keys: &[Vec<u8>],
        cache: &Arc<BlockCache>,
    ) -> Arc<TableFile> {
        let entries: Vec<_> = (keys.iter().enumerate())
            .map(|(i, k)| (k.clone(), i as u64 + 1, ValueKind::Put, b"v".to_vec()))
            .collect();
        write_entries(dir, number, &entries, cache)
    }

    /// A mapped table of `entries`, which must be in internal order.
    pub(super) fn write_entries(
        dir: &Path,
        number: u64,
        entries: &[(Vec<u8>, u64, ValueKind, Vec<u8>)],
        cache: &Arc<BlockCache>,
    ) -> Arc<TableFile> {
        let path = crate::filename::table_path(dir, number);
        let mut b = TableBuilder::create(&path, TableOptions::default()).unwrap();
        for (k, seq, kind, v) in entries {
            b.add(k, *seq, *kind, v).unwrap();
        }
        let s = b.finish().unwrap();
        let meta = FileMeta {
            number,
            size: s.file_size,
            entries: s.entries,
            smallest: s.smallest,
            largest: s.largest,
        };
        TableFile::open(dir, meta, cache, BlockReads::Mapped).unwrap()
    }

    /// A scan opens one UnsortedStore cursor per table of the fullest
    /// partition (tables of different partitions share runs), plus one for
    /// the SortedStores, and still sees every entry once; a table out of
    /// key order with its run gets a run of its own.
    #[test]
    fn scans_string_partitions_unsorted_tables_into_runs() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Arc::new(BlockCache::new(1 << 20));
        let keys = |prefix: &str, n: usize| -> Vec<Vec<u8>> {
            (0..n)
                .map(|i| format!("{prefix}{i:03}").into_bytes())
                .collect()
        };
        let mut number = 0;
        let mut table = |ks: &[Vec<u8>]| {
            number += 1;
            write_table(dir.path(), number, ks, &cache)
        };
        // Three partitions: 2, 3 and 1 UnsortedStore tables (oldest first),
        // and a SortedStore table in the middle one.
        let mut a = Partition::new(1, Vec::new(), Some(b"g".to_vec()));
        a.unsorted = vec![table(&keys("a", 50)), table(&keys("b", 50))];
        let mut b = Partition::new(2, b"g".to_vec(), Some(b"p".to_vec()));
        b.unsorted = vec![
            table(&keys("h", 50)),
            table(&keys("i", 50)),
            table(&keys("j", 50)),
        ];
        b.sorted = vec![table(&keys("k", 50))];
        let mut c = Partition::new(3, b"p".to_vec(), None);
        c.unsorted = vec![table(&keys("q", 50))];
        let mut v = Version::new_single();
        v.partitions = vec![Arc::new(a), Arc::new(b), Arc::new(c)];

        let drain = |v: &Version| -> (usize, Vec<Vec<u8>>) {
            let mut iters = v.iters(true);
            let mut all = Vec::new();
            for it in &mut iters {
                it.seek_to_first().unwrap();
                let mut last: Option<Vec<u8>> = None;
                while it.valid() {
                    let k = it.user_key().to_vec();
                    assert!(last.as_ref().is_none_or(|l| *l < k), "a run goes back");
                    all.push(k.clone());
                    last = Some(k);
                    it.next().unwrap();
                }
            }
            all.sort();
            (iters.len(), all)
        };
        let mut want: Vec<Vec<u8>> = ["a", "b", "h", "i", "j", "k", "q"]
            .iter()
            .flat_map(|p| keys(p, 50))
            .collect();
        want.sort();
        let (cursors, got) = drain(&v);
        assert_eq!(
            cursors,
            3 + 1,
            "three runs of UnsortedStore tables, one sorted"
        );
        assert_eq!(got, want);

        // A third partition whose newest table reaches back before the
        // middle partition's: it cannot follow in that run.
        let mut c = Partition::new(3, b"p".to_vec(), None);
        c.unsorted = vec![table(&keys("q", 50)), table(&keys("c", 50))];
        v.partitions[2] = Arc::new(c);
        let (cursors, got) = drain(&v);
        assert_eq!(cursors, 3 + 1 + 1, "the stray gets a run of its own");
        want.extend(keys("c", 50));
        want.sort();
        assert_eq!(got, want);
    }

    /// A flush far larger than the index (small values: many keys per
    /// table) must leave it below its growth load, not chain every lookup
    /// through overflow entries: the rebuild comes before the insert and
    /// is sized for the new table's keys too.
    #[test]
    fn index_grown_by_a_large_table_stays_at_its_target_load() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Arc::new(BlockCache::new(1 << 20));
        let mut index = hash_index::HashIndex::with_capacity(INITIAL_INDEX_CAPACITY);
        let mut older: Vec<Arc<TableFile>> = Vec::new();
        for (t, n) in [
            (20u64, 1000usize),
            (21, 40 * INITIAL_INDEX_CAPACITY),
            (22, 1000),
        ] {
            let keys: Vec<Vec<u8>> = (0..n)
                .map(|i| format!("t{t}k{i:08}").into_bytes())
                .collect();
            let table = write_table(dir.path(), t, &keys, &cache);
            let list = table_user_keys(&table).unwrap();
            index_add_table(&mut index, &older, &table.meta, &list, 0).unwrap();
            older.push(table);
            assert!(
                index.load_factor() <= INDEX_GROW_LOAD,
                "load {} after table {t} of {n} keys",
                index.load_factor()
            );
        }
        // Displacement keeps chains nearly empty at the target load.
        let total = 2000 + 40 * INITIAL_INDEX_CAPACITY;
        assert!(
            index.overflow_entries() * 1000 < total,
            "{}",
            index.overflow_entries()
        );
    }

    /// UniKV §III-G: the index rebuilt on open (from the tables) must equal
    /// the one flushes maintained incrementally before the crash.
    #[test]
    fn index_rebuilt_from_tables_equals_the_incremental_one() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Arc::new(BlockCache::new(1 << 20));
        let mut incremental = hash_index::HashIndex::with_capacity(INITIAL_INDEX_CAPACITY);
        let mut tables = Vec::new();
        for t in 0..6u64 {
            let number = 10 + t;
            let path = crate::filename::table_path(dir.path(), number);
            let mut b = TableBuilder::create(&path, TableOptions::default()).unwrap();
            let mut keys = KeyList::default();
            for i in 0..500u64 {
                let k = format!("key{:05}", (i * 31 + t * 7) % 900);
                keys.push_distinct(k.as_bytes());
                let _ = &k;
            }
            let mut sorted: Vec<&[u8]> = keys.iter().collect();
            sorted.sort();
            sorted.dedup();
            let mut written = KeyList::default();
            for (i, k) in sorted.iter().enumerate() {
                b.add(k, 1000 * t + i as u64 + 1, ValueKind::Put, b"v")
                    .unwrap();
                written.push_distinct(k);
            }
            let s = b.finish().unwrap();
            incremental.add_table(number, written.iter()).unwrap();
            let meta = FileMeta {
                number,
                size: s.file_size,
                entries: s.entries,
                smallest: s.smallest,
                largest: s.largest,
            };
            tables.push(TableFile::open(dir.path(), meta, &cache, BlockReads::Mapped).unwrap());
        }
        let rebuilt = build_index(&tables).unwrap();
        // Same tables and, for every key, the same candidates.
        let mut a = Vec::new();
        let mut b = Vec::new();
        for i in 0..1000u64 {
            let k = format!("key{i:05}");
            a.clear();
            b.clear();
            incremental.lookup(k.as_bytes(), &mut a);
            rebuilt.lookup(k.as_bytes(), &mut b);
            assert_eq!(a, b, "{k}");
        }
        assert_eq!(incremental.tables(), rebuilt.tables());
    }
}
