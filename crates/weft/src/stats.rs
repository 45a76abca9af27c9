//! Engine statistics, as returned by [`crate::Db::stats`].

use std::sync::atomic::{AtomicU64, Ordering};

/// A point-in-time summary of the engine's state and counters.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Latest visible sequence number.
    pub sequence: u64,
    /// The memtable kind in use.
    pub memtable_kind: String,
    /// Bytes held by the active memtable.
    pub active_memtable_bytes: u64,
    /// Immutable memtables waiting for flush.
    pub immutable_memtables: usize,
    /// Bytes held by immutable memtables.
    pub immutable_memtable_bytes: u64,
    /// Live snapshots.
    pub live_snapshots: usize,
    /// The memtables' read watermark: no reader in flight or to come reads
    /// below it, so older versions hidden behind a newer one at or below it
    /// may be unlinked (0 until the first write groups).
    pub read_watermark: u64,
    /// Every partition, in key order.
    pub partitions: Vec<PartitionStats>,
    /// Bytes of keys and values handed to the write path by users.
    pub user_bytes_written: u64,
    /// Bytes written to write-ahead logs.
    pub wal_bytes_written: u64,
    /// Bytes of tables written by flushes.
    pub flush_bytes_written: u64,
    /// Bytes of SortedStore tables written by merges.
    pub merge_bytes_written: u64,
    /// Bytes of value logs written by merges (separated values).
    pub value_log_bytes_written: u64,
    /// Bytes of tables written by partition splits.
    pub split_bytes_written: u64,
    /// Bytes of tables written by UnsortedStore consolidations (for scans).
    pub consolidation_bytes_written: u64,
    /// Bytes written to the manifest.
    pub manifest_bytes_written: u64,
    /// All bytes written (WAL, tables and logs of every kind, GC, manifest)
    /// divided by user bytes written (0 when none).
    pub write_amplification: f64,
    /// Bytes point reads fetched from disk: table blocks missing from the
    /// block cache and value-log records.
    pub get_bytes_read: u64,
    /// Bytes iterators fetched from disk (blocks and value-log readahead).
    pub scan_bytes_read: u64,
    /// Bytes background jobs (merge, GC, split, consolidation) read.
    pub background_bytes_read: u64,
    /// Block cache counters.
    pub block_cache: CacheStats,
    /// Live tables whose blocks gets and scans read from a mapping
    /// (`Options::mmap_reads`) rather than through the block cache.
    pub mapped_tables: u64,
    /// Live tables.
    pub tables: u64,
    /// Flushes completed.
    pub flushes: u64,
    /// Merges (UnsortedStore → SortedStore) completed.
    pub merges: u64,
    /// Bytes of tables and value logs written by value-log GC.
    pub gc_bytes_written: u64,
    /// Value-log garbage collections completed.
    pub gcs: u64,
    /// Partition splits completed.
    pub splits: u64,
    /// UnsortedStores consolidated into one table for scans.
    pub consolidations: u64,
    /// Writes delayed because flush or merge was falling behind.
    pub write_slowdowns: u64,
    /// Writes that had to wait for flush or merge to make room.
    pub write_stalls: u64,
    /// Microseconds writers spent delayed by slowdowns and stalls (what
    /// background work falling behind cost the writes; RocksDB's
    /// "cumulative stall" time).
    pub write_stall_micros: u64,
    /// Bytes dropped from the tail of the last WAL at open (a torn write).
    pub wal_tail_truncated_bytes: u64,
    /// Where point reads were answered and what they read.
    pub reads: ReadStats,
}

/// Point-read accounting by layer (counts since open).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadStats {
    /// Gets answered from a memtable.
    pub memtable_hits: u64,
    /// Gets answered from an UnsortedStore table.
    pub unsorted_hits: u64,
    /// Gets answered from the SortedStore.
    pub sorted_hits: u64,
    /// Gets that found nothing.
    pub misses: u64,
    /// UnsortedStore tables read by gets.
    pub unsorted_probes: u64,
    /// ...of which held no version of the key.
    pub unsorted_false_probes: u64,
    /// SortedStore tables read by gets.
    pub sorted_probes: u64,
    /// Values read from value logs by gets.
    pub value_log_reads: u64,
}

/// One range partition.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct PartitionStats {
    /// Partition id.
    pub id: u64,
    /// Inclusive lower bound of its key range (empty = unbounded).
    pub lower: Vec<u8>,
    /// Exclusive upper bound (`None` = unbounded).
    pub upper: Option<Vec<u8>>,
    /// Tables in the UnsortedStore.
    pub unsorted_tables: usize,
    /// Bytes of UnsortedStore tables.
    pub unsorted_bytes: u64,
    /// Tables in the SortedStore.
    pub sorted_tables: usize,
    /// Bytes of SortedStore tables.
    pub sorted_bytes: u64,
    /// Value logs the SortedStore points into.
    pub value_logs: usize,
    /// Bytes of those value logs (a log shared after a split counts in each).
    pub value_log_bytes: u64,
    /// Bytes of dead values in those logs, reclaimable by GC.
    pub value_log_garbage_bytes: u64,
    /// Bytes the partition holds as a split judges them against
    /// `Options::partition_size`: its SortedStore plus its share of the
    /// live values in its logs (a log shared by `n` partitions counts
    /// `1/n` in each).
    pub size_bytes: u64,
    /// Entries in the UnsortedStore's hash index.
    pub index_entries: u64,
    /// Bytes of memory held by the hash index.
    pub index_bytes: u64,
}

/// Block cache counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Capacity in bytes.
    pub capacity: u64,
    /// Bytes currently charged.
    pub usage: u64,
    /// Lookups that found their block.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
}

/// Who a read from disk is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadPurpose {
    /// A point read (`get`).
    Get,
    /// A user iterator; blocks it reads from disk are cached when
    /// `fill_cache` (`ReadOptions::fill_cache`).
    Scan {
        /// Whether blocks read from disk enter the cache.
        fill_cache: bool,
    },
    /// A background job (merge, GC, split, consolidation, index rebuild):
    /// never fills the cache.
    Background,
}

impl ReadPurpose {
    /// Whether a block this read fetches from disk is added to the cache.
    pub fn fills_cache(self) -> bool {
        match self {
            ReadPurpose::Get => true,
            ReadPurpose::Scan { fill_cache } => fill_cache,
            ReadPurpose::Background => false,
        }
    }
}

/// Bytes read from disk (table blocks missing from the cache, value-log
/// records), by [`ReadPurpose`]; counts since open.
#[derive(Debug, Default)]
pub struct DiskReads {
    get: AtomicU64,
    scan: AtomicU64,
    background: AtomicU64,
}

impl DiskReads {
    /// Counts `bytes` read from disk for `purpose`.
    pub fn add(&self, purpose: ReadPurpose, bytes: u64) {
        let counter = match purpose {
            ReadPurpose::Get => &self.get,
            ReadPurpose::Scan { .. } => &self.scan,
            ReadPurpose::Background => &self.background,
        };
        counter.fetch_add(bytes, Ordering::Relaxed);
    }

    /// (gets, scans, background jobs) bytes read so far.
    pub fn totals(&self) -> (u64, u64, u64) {
        (
            self.get.load(Ordering::Relaxed),
            self.scan.load(Ordering::Relaxed),
            self.background.load(Ordering::Relaxed),
        )
    }
}
