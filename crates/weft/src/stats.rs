//! Engine statistics, as returned by [`crate::Db::stats`].

use std::collections::BTreeMap;
use std::time::Duration;

use crate::util::stripe::StripedCounter;

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
    /// may be unlinked (0 until the first writes advance it).
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
    /// Bytes of values flushes left where the WAL wrote them, pointing at
    /// them instead of writing them again (`Options::values_in_wal`): the
    /// writes that keeping values in the WAL saved. Not written, so not in
    /// `write_amplification`.
    pub values_kept_in_wal_bytes: u64,
    /// Bytes of tables written by partition splits.
    pub split_bytes_written: u64,
    /// Bytes of tables written by UnsortedStore consolidations (for scans).
    pub consolidation_bytes_written: u64,
    /// Bytes written to the manifest.
    pub manifest_bytes_written: u64,
    /// Bytes of hash-index checkpoints (`.hix` files) written.
    pub index_checkpoint_bytes_written: u64,
    /// All bytes written (WAL, tables and logs of every kind, GC, hash-index
    /// checkpoints, manifest) divided by user bytes written (0 when none).
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
    /// Row cache counters (all zero when `Options::row_cache_size` is 0).
    pub row_cache: RowCacheStats,
    /// Munk counters (all zero when `Options::munk_cache_size` is 0).
    pub munks: MunkStats,
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
    /// Versions merges and GC removed because `Options::compaction_filter`
    /// said so.
    pub compaction_filter_removed: u64,
    /// Versions merges and GC removed because a range delete
    /// (`Db::delete_range`) covers them.
    pub range_deleted_versions: u64,
    /// Range deletes the store still holds: flushed, and not yet applied
    /// by a merge of every partition they cover (each costs a check per
    /// read of its range until then).
    pub range_tombstones: u64,
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
    /// What each kind of background job has cost since open, one entry per
    /// [`JobKind`] in [`JobKind::ALL`]'s order: set against the writes'
    /// stall time, it shows whether background work keeps pace and which
    /// job it is that does not.
    pub background_jobs: Vec<(JobKind, BackgroundJobStats)>,
    /// `Options::partition_size` in force, the size [`PartitionStats::size_bytes`]
    /// is judged against.
    pub partition_size: u64,
    /// Bytes in the database directory, by kind of file.
    pub disk: DiskUsage,
    /// Estimated bytes of live data in files: the live share of every value
    /// log (its bytes less its garbage) plus every SortedStore and
    /// UnsortedStore table. An upper bound: UnsortedStore tables may still
    /// hold versions a later write overwrote or deleted, and tables hold
    /// tombstones and versions kept for snapshots. Data only in memtables is
    /// not counted (its WAL is, in [`Stats::disk`]).
    pub live_bytes_estimate: u64,
    /// The change feed's holds (`Db::hold_changes`), by name, each with
    /// the bytes of WALs kept for it.
    pub feed_holds: Vec<FeedHoldStats>,
    /// Bytes of flushed WALs kept because a change-feed hold needs them
    /// (some may be value logs too): what consumers that do not release
    /// cost in disk.
    pub feed_retained_bytes: u64,
    /// The counters over the database's life, every open before this one
    /// included: the flat counters of `Stats` count since this open only.
    pub lifetime: LifetimeStats,
}

/// Counters over a database's whole life ([`Stats::lifetime`]), kept across
/// opens in the `STATS` file of its directory: the sum of every earlier
/// session's counters and this one's.
///
/// What they may miss: a session that ended in a crash (a killed process,
/// a machine crash) loses what it counted after its last save — at most
/// about [`crate::Options::stats_save_interval`] of activity, since the
/// counters are saved at open, at that interval while the database is
/// open, and at a clean close; [`LifetimeStats::unclean_closes`] counts
/// such sessions. They never go backwards from one open to the next,
/// except when the `STATS` file is missing or damaged: then they start
/// again from zero and [`LifetimeStats::restarts`] says so. The data is
/// never at stake: a bad `STATS` never fails an open.
///
/// Gauges (sizes, tables, partitions) and the cache and munk counters have
/// no lifetime view: they describe this process.
///
/// ```
/// use weft::{Db, Options};
/// let dir = tempfile::tempdir().unwrap();
/// for _ in 0..2 {
///     let db = Db::open(dir.path(), Options::default()).unwrap();
///     db.put("k", "v").unwrap();
///     db.close().unwrap(); // flushes the memtable, saves the counters
/// }
/// let db = Db::open(dir.path(), Options::default()).unwrap();
/// let s = db.stats();
/// assert_eq!(s.flushes, 0); // since this open
/// assert_eq!(s.lifetime.flushes, 2); // one per earlier close
/// assert_eq!(s.lifetime.opens, 3);
/// assert_eq!(s.lifetime.restarts, 0);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct LifetimeStats {
    /// Opens counted, this one included.
    pub opens: u64,
    /// Opens of an existing database that found `STATS` missing,
    /// unreadable or damaged and started the counters again from zero
    /// (this one included): while nonzero, the counters cover only the
    /// sessions since the last of them. A database written by a build
    /// without lifetime counters has one at its first open by this one.
    pub restarts: u64,
    /// Why this open started the counters again (`None` if it did not):
    /// the file and what was wrong with it.
    pub restart_reason: Option<String>,
    /// Sessions that ended without a clean close (a crash, a kill, or a
    /// close whose save failed): each may have lost the counts made after
    /// its last save.
    pub unclean_closes: u64,
    /// The error of the last save of the counters in this process, if it
    /// failed (a save is retried at the next interval and at close; a
    /// failure never affects the data or the database's operation).
    pub save_error: Option<String>,
    /// As [`Stats::user_bytes_written`].
    pub user_bytes_written: u64,
    /// As [`Stats::wal_bytes_written`].
    pub wal_bytes_written: u64,
    /// As [`Stats::flush_bytes_written`].
    pub flush_bytes_written: u64,
    /// As [`Stats::merge_bytes_written`].
    pub merge_bytes_written: u64,
    /// As [`Stats::value_log_bytes_written`].
    pub value_log_bytes_written: u64,
    /// As [`Stats::values_kept_in_wal_bytes`].
    pub values_kept_in_wal_bytes: u64,
    /// As [`Stats::split_bytes_written`].
    pub split_bytes_written: u64,
    /// As [`Stats::consolidation_bytes_written`].
    pub consolidation_bytes_written: u64,
    /// As [`Stats::manifest_bytes_written`].
    pub manifest_bytes_written: u64,
    /// As [`Stats::index_checkpoint_bytes_written`].
    pub index_checkpoint_bytes_written: u64,
    /// As [`Stats::gc_bytes_written`].
    pub gc_bytes_written: u64,
    /// As [`Stats::write_amplification`], over the lifetime counters.
    pub write_amplification: f64,
    /// As [`Stats::get_bytes_read`].
    pub get_bytes_read: u64,
    /// As [`Stats::scan_bytes_read`].
    pub scan_bytes_read: u64,
    /// As [`Stats::background_bytes_read`].
    pub background_bytes_read: u64,
    /// As [`Stats::flushes`].
    pub flushes: u64,
    /// As [`Stats::merges`].
    pub merges: u64,
    /// As [`Stats::gcs`].
    pub gcs: u64,
    /// As [`Stats::compaction_filter_removed`].
    pub compaction_filter_removed: u64,
    /// As [`Stats::range_deleted_versions`].
    pub range_deleted_versions: u64,
    /// As [`Stats::splits`].
    pub splits: u64,
    /// As [`Stats::consolidations`].
    pub consolidations: u64,
    /// As [`Stats::write_slowdowns`].
    pub write_slowdowns: u64,
    /// As [`Stats::write_stalls`].
    pub write_stalls: u64,
    /// As [`Stats::write_stall_micros`].
    pub write_stall_micros: u64,
    /// As [`Stats::wal_tail_truncated_bytes`], summed over every open.
    pub wal_tail_truncated_bytes: u64,
    /// As [`Stats::reads`].
    pub reads: ReadStats,
    /// As [`Stats::background_jobs`].
    pub background_jobs: Vec<(JobKind, BackgroundJobStats)>,
}

impl LifetimeStats {
    /// The figures of background jobs of `kind` (zero if none ran).
    pub fn background_job(&self, kind: JobKind) -> BackgroundJobStats {
        self.background_jobs
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, s)| *s)
            .unwrap_or_default()
    }

    /// Bytes the jobs of `kind` wrote, from the per-kind byte counters
    /// ([`BackgroundJobStats::bytes_written`]).
    pub(crate) fn bytes_written_by(&self, kind: JobKind) -> u64 {
        match kind {
            JobKind::Flush => self.flush_bytes_written,
            JobKind::Merge => self
                .merge_bytes_written
                .saturating_add(self.value_log_bytes_written),
            JobKind::Gc => self.gc_bytes_written,
            JobKind::Split => self.split_bytes_written,
            JobKind::Consolidation => self.consolidation_bytes_written,
            JobKind::IndexCheckpoint => self.index_checkpoint_bytes_written,
            JobKind::Munk => 0,
        }
    }

    /// Every byte written (WAL, tables and logs of every kind, GC,
    /// checkpoints, manifest) over user bytes; 0 when none. In floating
    /// point: counters read from a file may be anything.
    pub(crate) fn amplification(&self) -> f64 {
        let written: f64 = [
            self.wal_bytes_written,
            self.flush_bytes_written,
            self.merge_bytes_written,
            self.value_log_bytes_written,
            self.gc_bytes_written,
            self.split_bytes_written,
            self.consolidation_bytes_written,
            self.index_checkpoint_bytes_written,
            self.manifest_bytes_written,
        ]
        .iter()
        .map(|&b| b as f64)
        .sum();
        if self.user_bytes_written == 0 {
            0.0
        } else {
            written / self.user_bytes_written as f64
        }
    }

    /// The counters by the names the `STATS` file stores them under (the
    /// field names; `reads.*` and `jobs.<kind>.*` for the nested ones).
    /// Derived figures (write amplification, jobs' bytes) and the notes
    /// (`restart_reason`, `save_error`) are not stored.
    pub(crate) fn to_counts(&self) -> Vec<(String, u64)> {
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let mut out: Vec<(String, u64)> = self
            .scalars()
            .into_iter()
            .map(|(name, v)| (name.to_string(), v))
            .collect();
        for (kind, j) in &self.background_jobs {
            let key = kind.key();
            out.push((format!("jobs.{key}.count"), j.count));
            out.push((format!("jobs.{key}.queued_nanos"), nanos(j.queued)));
            out.push((format!("jobs.{key}.running_nanos"), nanos(j.running)));
        }
        out
    }

    /// The stored counters of the flat fields, by name.
    fn scalars(&self) -> [(&'static str, u64); 36] {
        let r = &self.reads;
        [
            ("opens", self.opens),
            ("restarts", self.restarts),
            ("unclean_closes", self.unclean_closes),
            ("user_bytes_written", self.user_bytes_written),
            ("wal_bytes_written", self.wal_bytes_written),
            ("flush_bytes_written", self.flush_bytes_written),
            ("merge_bytes_written", self.merge_bytes_written),
            ("value_log_bytes_written", self.value_log_bytes_written),
            ("values_kept_in_wal_bytes", self.values_kept_in_wal_bytes),
            ("split_bytes_written", self.split_bytes_written),
            (
                "consolidation_bytes_written",
                self.consolidation_bytes_written,
            ),
            ("manifest_bytes_written", self.manifest_bytes_written),
            (
                "index_checkpoint_bytes_written",
                self.index_checkpoint_bytes_written,
            ),
            ("gc_bytes_written", self.gc_bytes_written),
            ("get_bytes_read", self.get_bytes_read),
            ("scan_bytes_read", self.scan_bytes_read),
            ("background_bytes_read", self.background_bytes_read),
            ("flushes", self.flushes),
            ("merges", self.merges),
            ("gcs", self.gcs),
            ("compaction_filter_removed", self.compaction_filter_removed),
            ("range_deleted_versions", self.range_deleted_versions),
            ("splits", self.splits),
            ("consolidations", self.consolidations),
            ("write_slowdowns", self.write_slowdowns),
            ("write_stalls", self.write_stalls),
            ("write_stall_micros", self.write_stall_micros),
            ("wal_tail_truncated_bytes", self.wal_tail_truncated_bytes),
            ("reads.memtable_hits", r.memtable_hits),
            ("reads.unsorted_hits", r.unsorted_hits),
            ("reads.sorted_hits", r.sorted_hits),
            ("reads.misses", r.misses),
            ("reads.unsorted_probes", r.unsorted_probes),
            ("reads.unsorted_false_probes", r.unsorted_false_probes),
            ("reads.sorted_probes", r.sorted_probes),
            ("reads.value_log_reads", r.value_log_reads),
        ]
    }

    /// The counters from `counts` (a name missing reads as 0; names this
    /// build does not know are ignored here and kept by the caller), with
    /// the derived figures computed.
    pub(crate) fn from_counts(counts: &BTreeMap<String, u64>) -> LifetimeStats {
        let get = |name: &str| counts.get(name).copied().unwrap_or(0);
        let mut s = LifetimeStats {
            opens: get("opens"),
            restarts: get("restarts"),
            unclean_closes: get("unclean_closes"),
            user_bytes_written: get("user_bytes_written"),
            wal_bytes_written: get("wal_bytes_written"),
            flush_bytes_written: get("flush_bytes_written"),
            merge_bytes_written: get("merge_bytes_written"),
            value_log_bytes_written: get("value_log_bytes_written"),
            values_kept_in_wal_bytes: get("values_kept_in_wal_bytes"),
            split_bytes_written: get("split_bytes_written"),
            consolidation_bytes_written: get("consolidation_bytes_written"),
            manifest_bytes_written: get("manifest_bytes_written"),
            index_checkpoint_bytes_written: get("index_checkpoint_bytes_written"),
            gc_bytes_written: get("gc_bytes_written"),
            get_bytes_read: get("get_bytes_read"),
            scan_bytes_read: get("scan_bytes_read"),
            background_bytes_read: get("background_bytes_read"),
            flushes: get("flushes"),
            merges: get("merges"),
            gcs: get("gcs"),
            compaction_filter_removed: get("compaction_filter_removed"),
            range_deleted_versions: get("range_deleted_versions"),
            splits: get("splits"),
            consolidations: get("consolidations"),
            write_slowdowns: get("write_slowdowns"),
            write_stalls: get("write_stalls"),
            write_stall_micros: get("write_stall_micros"),
            wal_tail_truncated_bytes: get("wal_tail_truncated_bytes"),
            reads: ReadStats {
                memtable_hits: get("reads.memtable_hits"),
                unsorted_hits: get("reads.unsorted_hits"),
                sorted_hits: get("reads.sorted_hits"),
                misses: get("reads.misses"),
                unsorted_probes: get("reads.unsorted_probes"),
                unsorted_false_probes: get("reads.unsorted_false_probes"),
                sorted_probes: get("reads.sorted_probes"),
                value_log_reads: get("reads.value_log_reads"),
            },
            ..LifetimeStats::default()
        };
        s.finish_jobs(|kind, field| get(&format!("jobs.{}.{field}", kind.key())));
        s.write_amplification = s.amplification();
        s
    }

    /// Sets [`LifetimeStats::background_jobs`] from `get(kind, field)`
    /// (`count`, `queued_nanos`, `running_nanos`), each job's bytes from the
    /// byte counters.
    pub(crate) fn finish_jobs(&mut self, get: impl Fn(JobKind, &str) -> u64) {
        self.background_jobs = JobKind::ALL
            .iter()
            .map(|&kind| {
                let stats = BackgroundJobStats {
                    count: get(kind, "count"),
                    bytes_written: self.bytes_written_by(kind),
                    queued: Duration::from_nanos(get(kind, "queued_nanos")),
                    running: Duration::from_nanos(get(kind, "running_nanos")),
                };
                (kind, stats)
            })
            .collect();
    }
}

/// One change-feed hold ([`Stats::feed_holds`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FeedHoldStats {
    /// Its name.
    pub name: String,
    /// The first sequence its holder still needs.
    pub sequence: u64,
    /// Bytes of flushed WALs kept that hold sequences from `sequence` on
    /// (WALs of memtables not yet flushed are not counted: they exist
    /// anyway).
    pub retained_bytes: u64,
}

impl Stats {
    /// The figures of background jobs of `kind` (zero if none ran).
    pub fn background_job(&self, kind: JobKind) -> BackgroundJobStats {
        self.background_jobs
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, s)| *s)
            .unwrap_or_default()
    }

    /// Bytes on disk per byte of estimated live data
    /// ([`Stats::live_bytes_estimate`]); 0 when there is no live data.
    pub fn space_amplification(&self) -> f64 {
        if self.live_bytes_estimate == 0 {
            0.0
        } else {
            self.disk.total() as f64 / self.live_bytes_estimate as f64
        }
    }
}

/// A kind of background job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum JobKind {
    /// An immutable memtable written into UnsortedStore tables. Its running
    /// time includes the index checkpoints it made due and ran at its end.
    Flush,
    /// An UnsortedStore merged into its partition's SortedStore.
    Merge,
    /// Value logs collected: their live values copied into a new log.
    Gc,
    /// A partition split in two.
    Split,
    /// An UnsortedStore rewritten into one table for scans.
    Consolidation,
    /// A partition's hash index written to a checkpoint file (run by the
    /// flush that made it due, after that flush's tables are live).
    IndexCheckpoint,
    /// A munk loaded or rebalanced (in memory: it writes nothing).
    Munk,
}

impl JobKind {
    /// Every kind, in the order [`Stats::background_jobs`] lists them.
    pub const ALL: [JobKind; 7] = [
        JobKind::Flush,
        JobKind::Merge,
        JobKind::Gc,
        JobKind::Split,
        JobKind::Consolidation,
        JobKind::IndexCheckpoint,
        JobKind::Munk,
    ];

    /// A short lower-case name, for reports.
    pub fn name(self) -> &'static str {
        match self {
            JobKind::Flush => "flush",
            JobKind::Merge => "merge",
            JobKind::Gc => "gc",
            JobKind::Split => "split",
            JobKind::Consolidation => "consolidation",
            JobKind::IndexCheckpoint => "index checkpoint",
            JobKind::Munk => "munk",
        }
    }

    /// [`JobKind::name`] with `_` for spaces: a key for JSON and the
    /// `STATS` file.
    pub fn key(self) -> String {
        self.name().replace(' ', "_")
    }

    /// Its position in [`JobKind::ALL`].
    pub(crate) fn index(self) -> usize {
        match self {
            JobKind::Flush => 0,
            JobKind::Merge => 1,
            JobKind::Gc => 2,
            JobKind::Split => 3,
            JobKind::Consolidation => 4,
            JobKind::IndexCheckpoint => 5,
            JobKind::Munk => 6,
        }
    }
}

/// What the background jobs of one [`JobKind`] have cost since open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackgroundJobStats {
    /// Jobs run, including any that found nothing left to do or failed
    /// (which is why it may exceed the matching count of completed jobs,
    /// such as [`Stats::merges`]).
    pub count: u64,
    /// Bytes of files the jobs wrote (the matching `*_bytes_written` of
    /// [`Stats`]; for merges, tables and value logs together).
    pub bytes_written: u64,
    /// Total time jobs waited between becoming due and starting. A flush
    /// is due from the moment its memtable became immutable; a job of the
    /// pool from when a job of its kind was first seen due (at a pick or
    /// after a flush) until one started.
    pub queued: Duration,
    /// Total time jobs ran.
    pub running: Duration,
}

/// Bytes of the files in the database directory, by kind, as listed when
/// [`crate::Db::stats`] ran. Files no version needs any more but a reader
/// still holds open, or that wait for deletion, are counted: they take the
/// space until they go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DiskUsage {
    /// Tables (`.sst`).
    pub tables: u64,
    /// Value logs (`.vlog`, and WALs kept as value logs: `Options::values_in_wal`).
    pub value_logs: u64,
    /// Write-ahead logs (`.log`), including space reserved ahead of the
    /// records.
    pub wals: u64,
    /// Manifests and `CURRENT`.
    pub manifest: u64,
    /// Hash-index checkpoints (`.hix`).
    pub index_checkpoints: u64,
    /// Everything else: files being written, the lock file, the lifetime
    /// counters (`STATS`), foreign files.
    pub other: u64,
}

impl DiskUsage {
    /// Bytes of every file.
    pub fn total(&self) -> u64 {
        self.tables
            + self.value_logs
            + self.wals
            + self.manifest
            + self.index_checkpoints
            + self.other
    }
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

/// Row cache counters (`Options::row_cache_size`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RowCacheStats {
    /// Capacity in bytes (0: the row cache is off).
    pub capacity: u64,
    /// Bytes currently charged (key + value + a fixed overhead per entry).
    pub usage: u64,
    /// Keys cached.
    pub entries: u64,
    /// Gets that missed the memtables and were answered here.
    pub hits: u64,
    /// Gets that missed the memtables and then this cache (absent, or an
    /// entry newer than the read's sequence), and so read storage.
    pub misses: u64,
    /// Values read from storage and added.
    pub fills: u64,
    /// Values read from storage and not added because a write to a key of
    /// the same stripe came after the read's state (it might be missing
    /// from what the get read).
    pub skipped_fills: u64,
    /// Cached keys brought up to date (or dropped) by puts and deletes.
    pub refreshes: u64,
}

/// Munk counters (`Options::munk_cache_size`, `store::munk`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MunkStats {
    /// The budget in bytes (0: munks are off).
    pub capacity: u64,
    /// Partitions with a munk installed now.
    pub munks: u64,
    /// Bytes of the installed munks.
    pub bytes: u64,
    /// Bytes of every munk image still in memory: installed ones and
    /// replaced or evicted ones that readers still hold.
    pub resident_bytes: u64,
    /// Gets answered from a munk.
    pub hits: u64,
    /// Iterators that read at least one munk.
    pub scans: u64,
    /// Munks built from their partition's tables.
    pub loads: u64,
    /// Munks rebuilt in memory with the tables flushed since (EvenDB's
    /// munk rebalance: in-memory compaction). Compare with
    /// [`Stats::merges`], the rewrites on disk.
    pub rebalances: u64,
    /// Munks kept through a merge or GC of their partition.
    pub relabels: u64,
    /// Munks dropped: to make room for hotter partitions, over the budget,
    /// or behind a rewrite they could not follow.
    pub evictions: u64,
    /// Bytes of munk images built (loads and rebalances): the memory
    /// copying that in-memory compaction does instead of disk writes.
    pub build_bytes: u64,
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
///
/// Striped ([`StripedCounter`]): a get of a mapped table counts its block
/// here with no `pread` to hide the cost, so a shared atomic made every such
/// get on every core write one cache line.
#[derive(Debug, Default)]
pub struct DiskReads {
    get: StripedCounter,
    scan: StripedCounter,
    background: StripedCounter,
}

impl DiskReads {
    /// Counts `bytes` read from disk for `purpose`.
    pub fn add(&self, purpose: ReadPurpose, bytes: u64) {
        let counter = match purpose {
            ReadPurpose::Get => &self.get,
            ReadPurpose::Scan { .. } => &self.scan,
            ReadPurpose::Background => &self.background,
        };
        counter.add(bytes);
    }

    /// (gets, scans, background jobs) bytes read so far.
    pub fn totals(&self) -> (u64, u64, u64) {
        (self.get.load(), self.scan.load(), self.background.load())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every counter goes to the `STATS` names and comes back: a field
    /// that `to_counts` forgot or `from_counts` reads under another name
    /// would come back as 0.
    #[test]
    fn lifetime_counters_round_trip_through_their_names() {
        let mut next = 0u64;
        let mut n = || {
            next += 1;
            next
        };
        let mut s = LifetimeStats {
            opens: n(),
            restarts: n(),
            unclean_closes: n(),
            user_bytes_written: n(),
            wal_bytes_written: n(),
            flush_bytes_written: n(),
            merge_bytes_written: n(),
            value_log_bytes_written: n(),
            values_kept_in_wal_bytes: n(),
            split_bytes_written: n(),
            consolidation_bytes_written: n(),
            manifest_bytes_written: n(),
            index_checkpoint_bytes_written: n(),
            gc_bytes_written: n(),
            get_bytes_read: n(),
            scan_bytes_read: n(),
            background_bytes_read: n(),
            flushes: n(),
            merges: n(),
            gcs: n(),
            compaction_filter_removed: n(),
            range_deleted_versions: n(),
            splits: n(),
            consolidations: n(),
            write_slowdowns: n(),
            write_stalls: n(),
            write_stall_micros: n(),
            wal_tail_truncated_bytes: n(),
            reads: ReadStats {
                memtable_hits: n(),
                unsorted_hits: n(),
                sorted_hits: n(),
                misses: n(),
                unsorted_probes: n(),
                unsorted_false_probes: n(),
                sorted_probes: n(),
                value_log_reads: n(),
            },
            ..Default::default()
        };
        let base = n() * 1000;
        s.finish_jobs(|kind, field| base + kind.index() as u64 * 10 + field.len() as u64);
        s.write_amplification = s.amplification();
        let counts = s.to_counts();
        let names: std::collections::BTreeSet<&str> =
            counts.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names.len(), counts.len(), "a name is used twice");
        let values: std::collections::BTreeSet<u64> = counts.iter().map(|(_, v)| *v).collect();
        assert_eq!(values.len(), counts.len(), "two fields share a value");
        let back = LifetimeStats::from_counts(&counts.into_iter().collect());
        assert_eq!(back, s);
        assert!(s.write_amplification > 0.0);
        assert_eq!(
            s.background_job(JobKind::Merge).bytes_written,
            s.merge_bytes_written + s.value_log_bytes_written
        );
    }
}
