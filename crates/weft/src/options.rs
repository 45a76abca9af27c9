//! Options: plain structs with documented defaults and chainable setters.

use std::sync::Arc;
use std::time::Duration;

use crate::compaction_filter::CompactionFilter;
use crate::compression::Compression;
use crate::memtable::MemtableKind;
use crate::snapshot::Snapshot;
use crate::util::fs::FileSystem;

/// How a database is opened and tuned. `Options::default()` is a sensible
/// configuration for a store of a few GiB on one machine.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// Create the directory and an empty database if none exists. Default `true`.
    pub create_if_missing: bool,
    /// Fail if a database already exists. Default `false`.
    pub error_if_exists: bool,
    /// Memtable implementation. Default [`MemtableKind::Teks`].
    pub memtable: MemtableKind,
    /// Bytes of memory an active memtable may hold before it is rotated and
    /// queued for flush. Default 64 MiB (RocksDB's default).
    pub write_buffer_size: usize,
    /// Immutable memtables allowed to wait for flush. Writers are stalled
    /// (never failed) when the queue is full; with 3 or more, they are also
    /// slowed when it is one short of full (as RocksDB with more than three
    /// write buffers). Default 2: no slowdown while one flush runs.
    pub max_immutable_memtables: usize,
    /// Target uncompressed size of a table data block. Default 4 KiB.
    pub block_size: usize,
    /// Capacity in bytes of the block cache shared by all tables. Default
    /// 64 MiB. With [`Options::mmap_reads`] it holds only the blocks of
    /// tables the kernel would not map, and the decoded copies of
    /// compressed blocks ([`Options::sorted_compression`]).
    pub block_cache_size: usize,
    /// Capacity in bytes of the row cache: single values that gets read
    /// from tables and value logs, kept for the next get of the same key
    /// (EvenDB's row cache, `cache::row_cache`). Each entry is charged its
    /// key, its value and a fixed overhead. A put or delete of a cached key
    /// updates it, never adds one, and no get is ever served a stale
    /// value. Default 0 (off): see `docs/DESIGN.md` §1.3.1 for the measured
    /// trade-off; while on, every write also takes a shard lock per key.
    pub row_cache_size: usize,
    /// Memory in bytes for munks (EvenDB's hot chunks, `store::munk`): the
    /// hottest partitions, by decayed read counts, held whole in memory as
    /// sorted arrays with their values, so gets and scans of their ranges
    /// read no table and no value log, and their UnsortedStores are merged
    /// on disk less often (their reads do not probe those tables). A
    /// partition larger than this never gets one. Default 0 (off): see
    /// `docs/DESIGN.md` §1.3.2.
    pub munk_cache_size: usize,
    /// Gets and scans read table data blocks from a read-only mapping of
    /// each table, the kernel's page cache standing in for the block cache
    /// (RocksDB's `allow_mmap_reads`; each block's checksum is verified the
    /// first time an open table hands it out). Separated values are always
    /// read through a mapping of their log. `false` reads blocks with
    /// `pread` through the block cache. Default `true`: a large store's
    /// `seekrandom` spent much of its time in cache lookups and in the
    /// misses' reads (`table::reader`).
    pub mmap_reads: bool,
    /// Bloom filter bits per key in each table; 0 disables filters. Default 10.
    pub bloom_bits_per_key: usize,
    /// How the data blocks of UnsortedStore tables (written by flushes and
    /// consolidations) are compressed. Default [`Compression::None`]: they
    /// live briefly, until the next merge, and a flush on the write path's
    /// heels should not spend CPU on them.
    pub unsorted_compression: Compression,
    /// How the data blocks of SortedStore tables (written by merges, GC and
    /// splits) are compressed. A block is stored compressed only when that
    /// saves an eighth of it; a compressed block read by a get or scan is
    /// decoded once and kept in the block cache
    /// ([`Options::block_cache_size`]). Default [`Compression::None`].
    pub sorted_compression: Compression,
    /// How values in value logs are compressed, each value on its own so
    /// that a get decodes only the value it reads: values logged in the
    /// WAL ([`Options::values_in_wal`]: compressed by the writer, on its
    /// own thread), values merges separate, and values GC moves. Default
    /// [`Compression::None`].
    pub value_log_compression: Compression,
    /// The application's say over what merges and GC rewrite: called on
    /// the newest version of each key they rewrite when it is a put no
    /// live snapshot can see, to keep it or remove it (expired data,
    /// stale collection elements). See [`CompactionFilter`]. Default
    /// `None`.
    pub compaction_filter: Option<Arc<dyn CompactionFilter>>,
    /// Target size of one SortedStore table written by a merge. Default 32 MiB.
    pub table_size: u64,
    /// Bytes of UnsortedStore tables a partition may hold before they are
    /// merged into its SortedStore (UniKV's `UnsortedLimit`). Default 256 MiB.
    pub unsorted_limit: u64,
    /// UnsortedStore tables at which a partition is merged into its
    /// SortedStore whatever their bytes, and writers are slowed down while
    /// the merge catches up. Default 24.
    pub unsorted_slowdown_tables: usize,
    /// UnsortedStore tables that stall writers until a merge finishes. Default 48.
    pub unsorted_stop_tables: usize,
    /// Values of at least this many bytes are moved to a value log when a
    /// merge writes them into the SortedStore, which then keeps a pointer
    /// (UniKV's partial key-value separation); smaller values stay inline.
    /// `usize::MAX` disables separation. Default 256. A keyspace may set
    /// its own ([`crate::KeyspaceOptions`]), as it may each layer's
    /// compression and `values_in_wal`.
    pub min_blob_size: usize,
    /// Keep values of at least `min_blob_size` bytes where the WAL wrote
    /// them (EvenDB's and WiscKey's "values written once"): such a value is
    /// logged as a value-log record inside its WAL record, the flush writes
    /// a pointer into the WAL file instead of the value, and the flushed
    /// WAL stays as a value log until GC has moved its live values out.
    /// Off, a large value is written three times before GC: WAL,
    /// UnsortedStore table, and the value log of its first merge. Default
    /// `true`. See `docs/DESIGN.md` §1.2 and §5.3.
    pub values_in_wal: bool,
    /// While scans run, a partition whose UnsortedStore holds more than this
    /// many tables has them consolidated into one sorted UnsortedStore table
    /// in the background, so a scan opens one cursor there instead of many
    /// (UniKV's `scanMergeLimit`). `usize::MAX` disables it. Default 8.
    pub scan_merge_limit: usize,
    /// A partition whose SortedStore and live separated values pass this
    /// many bytes is split in two at its median key (UniKV's dynamic range
    /// partitioning). Default 1 GiB.
    pub partition_size: u64,
    /// A value log is collected once this share of its bytes is dead.
    /// Default 0.5: a lower ratio collects logs that are more live, so it
    /// copies more live values per dead byte it frees; for the same space
    /// on disk that cost more than a lower `gc_min_garbage_bytes` did.
    pub gc_garbage_ratio: f64,
    /// ...and a partition's collectable logs hold at least this many dead
    /// bytes together. 0 means the default: an eighth of
    /// [`Options::partition_size`], at most 64 MiB (so 64 MiB with the
    /// default 1 GiB partitions). Any other value is used as it is (1:
    /// collect as soon as a log is a victim). Default 0.
    ///
    /// The minimum follows the partition because a fixed one as large as a
    /// partition lets a partition's logs hold more dead bytes than it has
    /// live ones before GC is due, and space on disk then grows with the
    /// overwrites whatever `gc_garbage_ratio` is. Of the shares measured,
    /// an eighth is the largest that kept a store under sustained
    /// overwrites within its space target with a margin (a quarter reached
    /// the target); a smaller share, or a lower `gc_garbage_ratio`, copies
    /// the same live values out of logs more often for little space saved
    /// (`bench/journal/2026-11-27-09-gc-thresholds.md`).
    pub gc_min_garbage_bytes: u64,
    /// A partition whose SortedStore points into more than this many value
    /// logs has them all collected into one, in key order, dead bytes or
    /// not. Each merge writes a log of its own, so without this the values
    /// of neighbouring keys sit in different logs and a scan reads them one
    /// by one; after it they are contiguous and the scan's readahead reads
    /// them in large windows. The price: every such collection rewrites the
    /// partition's live separated values. `usize::MAX` disables it.
    /// Default `usize::MAX` (off): with 8, a 2M × 1 KiB `weft bench` run
    /// (fill, overwrite, reads, seek + 10) showed no seek or scan gain
    /// beyond this machine's noise, at about the same write-amp, so it is
    /// left for scan-heavy users to turn on and measure.
    pub max_value_logs: usize,
    /// Background threads (RocksDB's `max_background_jobs`): one flushes
    /// memtables, the others run per-partition jobs — merges, value-log GC,
    /// splits, consolidations — in parallel, at most one job per partition
    /// at a time. A partition's reorganisation is local (UniKV's reason for
    /// partitions), so on many cores the jobs of different partitions
    /// should not queue behind one thread. At least 2. Default: the number
    /// of cores the process may use, between 2 and 8 (past 8, the manifest
    /// commits jobs share and the disk's bandwidth bound what more threads
    /// could add).
    pub background_jobs: usize,
    /// Bytes per second the job pool (merges, GC, splits, consolidations)
    /// may write, all its threads together (RocksDB's `rate_limiter`); 0
    /// for no limit. Flushes are not limited: a late flush stalls writers.
    /// A limit keeps a load's reorganisation from taking the disk and the
    /// cores (a job's CPU time follows its bytes) from the reads that run
    /// beside it; writers that outrun the limited jobs are slowed and then
    /// stalled by `unsorted_slowdown_tables` and `unsorted_stop_tables`, as
    /// for any lagging merge. Default 0.
    pub background_write_rate: u64,
    /// Leave the WAL records of writes without `sync` in a user-space buffer
    /// instead of writing each group's record to the file (RocksDB's
    /// `manual_wal_flush`). They reach the OS at the next [`crate::Db::flush_wal`],
    /// `sync` write, [`crate::Db::sync_wal`], memtable rotation or close, or
    /// once 1 MiB waits. Until then a *process* crash may lose them even
    /// though `write` returned — so a caller acknowledges them to others
    /// only after `flush_wal`, as `weft serve` does once per event-loop
    /// wake-up (one `write` for all its clients' commands, like Redis's AOF
    /// buffer before replies go out). Recovery still yields a prefix of the
    /// write history. Default `false`.
    pub manual_wal_flush: bool,
    /// How often the lifetime counters ([`crate::LifetimeStats`]) are saved
    /// to the `STATS` file while the database is open, besides at open and
    /// at a clean close: what a crash can take from them is about this much
    /// of activity. A save writes one small file (fsync, rename) from the
    /// flush thread, and is skipped when no counter changed. Zero saves only
    /// at open and close. Default 60 s.
    pub stats_save_interval: Duration,
    /// The file system every file operation goes through (LevelDB's `Env`,
    /// RocksDB's `FileSystem`). Default: the operating system's. The crash
    /// tests put a fault-injecting one here. Hidden: the trait may still
    /// change.
    #[doc(hidden)]
    pub file_system: Arc<dyn FileSystem>,
    /// The decayed read count (sampled: `store::munk`) from which a
    /// partition's munk is loaded. Hidden: tests set 0 so that every
    /// partition that fits gets one at once.
    #[doc(hidden)]
    pub munk_min_heat: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            memtable: MemtableKind::default(),
            write_buffer_size: 64 << 20,
            max_immutable_memtables: 2,
            block_size: 4 << 10,
            block_cache_size: 64 << 20,
            row_cache_size: 0,
            munk_cache_size: 0,
            mmap_reads: true,
            bloom_bits_per_key: 10,
            unsorted_compression: Compression::None,
            sorted_compression: Compression::None,
            value_log_compression: Compression::None,
            compaction_filter: None,
            table_size: 32 << 20,
            unsorted_limit: 256 << 20,
            unsorted_slowdown_tables: 24,
            unsorted_stop_tables: 48,
            min_blob_size: 256,
            values_in_wal: true,
            partition_size: 1 << 30,
            scan_merge_limit: 8,
            gc_garbage_ratio: 0.5,
            gc_min_garbage_bytes: 0,
            manual_wal_flush: false,
            stats_save_interval: Duration::from_secs(60),
            max_value_logs: usize::MAX,
            background_jobs: default_background_jobs(),
            background_write_rate: 0,
            file_system: crate::util::fs::real(),
            munk_min_heat: crate::store::munk::DEFAULT_MIN_HEAT,
        }
    }
}

/// [`Options::background_jobs`]'s default: the cores this process may
/// use, between 2 and 8.
fn default_background_jobs() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8))
}

macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty),* $(,)?) => {
        $( $(#[$doc])* pub fn $name(mut self, value: $ty) -> Self { self.$name = value; self } )*
    };
}

impl Options {
    /// The defaults; same as `Options::default()`.
    pub fn new() -> Self {
        Self::default()
    }

    setters! {
        /// Sets [`Options::create_if_missing`].
        create_if_missing: bool,
        /// Sets [`Options::error_if_exists`].
        error_if_exists: bool,
        /// Sets [`Options::memtable`].
        memtable: MemtableKind,
        /// Sets [`Options::write_buffer_size`].
        write_buffer_size: usize,
        /// Sets [`Options::max_immutable_memtables`].
        max_immutable_memtables: usize,
        /// Sets [`Options::block_size`].
        block_size: usize,
        /// Sets [`Options::block_cache_size`].
        block_cache_size: usize,
        /// Sets [`Options::row_cache_size`].
        row_cache_size: usize,
        /// Sets [`Options::munk_cache_size`].
        munk_cache_size: usize,
        /// Sets [`Options::mmap_reads`].
        mmap_reads: bool,
        /// Sets [`Options::bloom_bits_per_key`].
        bloom_bits_per_key: usize,
        /// Sets [`Options::unsorted_compression`].
        unsorted_compression: Compression,
        /// Sets [`Options::sorted_compression`].
        sorted_compression: Compression,
        /// Sets [`Options::value_log_compression`].
        value_log_compression: Compression,
        /// Sets [`Options::compaction_filter`].
        compaction_filter: Option<Arc<dyn CompactionFilter>>,
        /// Sets [`Options::table_size`].
        table_size: u64,
        /// Sets [`Options::unsorted_limit`].
        unsorted_limit: u64,
        /// Sets [`Options::unsorted_slowdown_tables`].
        unsorted_slowdown_tables: usize,
        /// Sets [`Options::unsorted_stop_tables`].
        unsorted_stop_tables: usize,
        /// Sets [`Options::min_blob_size`].
        min_blob_size: usize,
        /// Sets [`Options::values_in_wal`].
        values_in_wal: bool,
        /// Sets [`Options::partition_size`].
        partition_size: u64,
        /// Sets [`Options::scan_merge_limit`].
        scan_merge_limit: usize,
        /// Sets [`Options::gc_garbage_ratio`].
        gc_garbage_ratio: f64,
        /// Sets [`Options::gc_min_garbage_bytes`].
        gc_min_garbage_bytes: u64,
        /// Sets [`Options::manual_wal_flush`].
        manual_wal_flush: bool,
        /// Sets [`Options::stats_save_interval`].
        stats_save_interval: Duration,
        /// Sets [`Options::max_value_logs`].
        max_value_logs: usize,
        /// Sets [`Options::background_jobs`].
        background_jobs: usize,
        /// Sets [`Options::background_write_rate`].
        background_write_rate: u64,
        /// Sets [`Options::file_system`].
        #[doc(hidden)]
        file_system: Arc<dyn FileSystem>,
        /// Sets [`Options::munk_min_heat`].
        #[doc(hidden)]
        munk_min_heat: u64,
    }

    /// The dead bytes a partition's collectable logs must hold together
    /// before value-log GC is due: [`Options::gc_min_garbage_bytes`], or
    /// when it is 0 the default derived from [`Options::partition_size`].
    pub(crate) fn gc_min_garbage(&self) -> u64 {
        match self.gc_min_garbage_bytes {
            0 => (self.partition_size / 8).min(64 << 20),
            explicit => explicit,
        }
    }

    /// Sets every layer's compression ([`Options::unsorted_compression`],
    /// [`Options::sorted_compression`], [`Options::value_log_compression`])
    /// to `compression`, as db_bench's `--compression_type` does.
    ///
    /// ```
    /// use weft::{Compression, Db, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let options = Options::default()
    ///     .compression(Compression::Lz4)
    ///     .sorted_compression(Compression::ZSTD);
    /// let db = Db::open(dir.path(), options).unwrap();
    /// db.put("k", "v".repeat(1000)).unwrap();
    /// db.compact().unwrap();
    /// assert_eq!(db.get("k").unwrap(), Some("v".repeat(1000).into_bytes()));
    /// ```
    pub fn compression(self, compression: Compression) -> Self {
        self.unsorted_compression(compression)
            .sorted_compression(compression)
            .value_log_compression(compression)
    }

    /// The format SortedStore tables are built with (UnsortedStore tables:
    /// [`crate::table::TableOptions::for_unsorted_store`] of it).
    pub(crate) fn table_options(&self) -> crate::table::TableOptions {
        crate::table::TableOptions {
            block_size: self.block_size,
            restart_interval: 16,
            bloom_bits_per_key: self.bloom_bits_per_key,
            compression: self.sorted_compression,
            unsorted_compression: self.unsorted_compression,
        }
    }

    /// How tables read their data blocks.
    pub(crate) fn block_reads(&self) -> crate::table::BlockReads {
        if self.mmap_reads {
            crate::table::BlockReads::Mapped
        } else {
            crate::table::BlockReads::Cached
        }
    }

    /// Checks that every field is in range.
    pub(crate) fn validate(&self) -> crate::Result<()> {
        let bad = |m: &str| Err(crate::Error::InvalidArgument(m.to_string()));
        if self.write_buffer_size < 4096 {
            return bad("write_buffer_size must be at least 4096 bytes");
        }
        if self.max_immutable_memtables == 0 {
            return bad("max_immutable_memtables must be at least 1");
        }
        if !(256..=(16 << 20)).contains(&self.block_size) {
            return bad("block_size must be between 256 B and 16 MiB");
        }
        if self.table_size < 4096 {
            return bad("table_size must be at least 4096 bytes");
        }
        if !(self.gc_garbage_ratio > 0.0 && self.gc_garbage_ratio <= 1.0) {
            return bad("gc_garbage_ratio must be in (0, 1]");
        }
        if self.partition_size < (4 << 10) {
            return bad("partition_size must be at least 4 KiB");
        }
        if self.min_blob_size == 0 {
            return bad("min_blob_size must be at least 1 (usize::MAX disables separation)");
        }
        if self.max_value_logs == 0 {
            return bad("max_value_logs must be at least 1 (usize::MAX disables it)");
        }
        if self.unsorted_stop_tables <= self.unsorted_slowdown_tables {
            return bad("unsorted_stop_tables must exceed unsorted_slowdown_tables");
        }
        if !(2..=256).contains(&self.background_jobs) {
            return bad(
                "background_jobs must be between 2 (one flush thread, one job thread) and 256",
            );
        }
        Ok(())
    }
}

/// Per-write options.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct WriteOptions {
    /// Return only after the WAL record is on stable storage (fdatasync).
    /// Group commit shares one fsync among concurrent writers. Default `false`:
    /// the write survives a process crash but a machine crash may lose it.
    pub sync: bool,
    /// Skip the write-ahead log (as RocksDB's `disableWAL`): the write is in
    /// the memtable only until the next flush, so a crash before it loses
    /// the write — and, unlike logged writes, recovery is then not a prefix
    /// of the history (a later logged write may survive an earlier unlogged
    /// one). A clean close flushes it ([`crate::Db::close`]; not
    /// [`CloseOptions::flush`]`(false)`). For bulk loads that can be redone.
    /// Default `false`; cannot be combined with `sync`.
    pub disable_wal: bool,
}

impl WriteOptions {
    /// Defaults (`sync = false`).
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets [`WriteOptions::sync`].
    pub fn sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }
    /// Sets [`WriteOptions::disable_wal`].
    pub fn disable_wal(mut self, disable: bool) -> Self {
        self.disable_wal = disable;
        self
    }
}

/// How [`crate::Db::close_with`] closes a database; `CloseOptions::default()`
/// is what [`crate::Db::close`] and dropping the last clone do.
///
/// ```
/// use weft::{CloseOptions, Db, Options, WriteOptions};
/// let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options::default()).unwrap();
/// db.put_opt("bulk", "loaded", &WriteOptions::new().disable_wal(true)).unwrap();
/// db.put("logged", "kept").unwrap();
/// // No flush: quicker, and the unlogged write is lost as in a crash.
/// db.close_with(&CloseOptions::new().flush(false)).unwrap();
/// let db = Db::open(dir.path(), Options::default()).unwrap();
/// assert_eq!(db.get("bulk").unwrap(), None);
/// assert_eq!(db.get("logged").unwrap().as_deref(), Some(&b"kept"[..]));
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct CloseOptions {
    /// Write the memtables (the active one and any waiting for flush) to
    /// tables before closing, as RocksDB does at close, so that writes made
    /// with [`WriteOptions::disable_wal`] survive and the next open has no
    /// WAL to replay. `false` leaves them to the WAL (synced at close): the
    /// close is quicker, the next open replays the WAL into tables, and the
    /// unlogged writes since the last flush are lost. Default `true`.
    pub flush: bool,
}

impl Default for CloseOptions {
    fn default() -> Self {
        CloseOptions { flush: true }
    }
}

impl CloseOptions {
    /// Defaults (`flush = true`).
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets [`CloseOptions::flush`].
    pub fn flush(mut self, flush: bool) -> Self {
        self.flush = flush;
        self
    }
}

/// Per-read options.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ReadOptions {
    /// Read at this snapshot instead of the latest visible sequence.
    pub snapshot: Option<Snapshot>,
    /// Iterators: the first key they may return (inclusive).
    pub lower_bound: Option<Vec<u8>>,
    /// Iterators: the key they stop before (exclusive).
    pub upper_bound: Option<Vec<u8>>,
    /// Put blocks read by this call into the block cache, and values gets
    /// read from storage into the row cache ([`Options::row_cache_size`]).
    /// Default `true` (set by `new()`; a `Default` value leaves it `false`
    /// for bulk scans).
    pub fill_cache: bool,
}

impl ReadOptions {
    /// Defaults: latest data, no bounds, cache filled.
    pub fn new() -> Self {
        ReadOptions {
            fill_cache: true,
            ..Default::default()
        }
    }
    /// Reads at `snapshot`.
    pub fn snapshot(mut self, snapshot: &Snapshot) -> Self {
        self.snapshot = Some(snapshot.clone());
        self
    }
    /// Sets the inclusive lower bound of iterators.
    pub fn lower_bound(mut self, key: impl Into<Vec<u8>>) -> Self {
        self.lower_bound = Some(key.into());
        self
    }
    /// Sets the exclusive upper bound of iterators.
    pub fn upper_bound(mut self, key: impl Into<Vec<u8>>) -> Self {
        self.upper_bound = Some(key.into());
        self
    }
    /// Restricts iterators to keys starting with `prefix`.
    pub fn prefix(mut self, prefix: &[u8]) -> Self {
        self.lower_bound = Some(prefix.to_vec());
        self.upper_bound = prefix_successor(prefix);
        self
    }
    /// Sets [`ReadOptions::fill_cache`].
    pub fn fill_cache(mut self, fill: bool) -> Self {
        self.fill_cache = fill;
        self
    }
}

/// The smallest key greater than every key starting with `prefix`, or `None`
/// if there is none (the prefix is empty or all `0xff`).
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut v = prefix.to_vec();
    while let Some(last) = v.pop() {
        if last != 0xff {
            v.push(last + 1);
            return Some(v);
        }
    }
    None
}
