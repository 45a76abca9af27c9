//! The engine's shared state (`Core`), the super version readers pin, and
//! the counters behind [`crate::Stats`].
//!
//! Locking, in the only order they may be taken: `manifest` (a background
//! job's edit, from its making through its install) → `state` (memtables,
//! version, file numbers) → `wal_synced` → `wal`.
//! A job appends its manifest edit (an fdatasync: up to several
//! milliseconds while the disk writes tables back) with `state` released
//! and `manifest` held, so writers go on meanwhile, and edits still reach
//! the manifest in the order they are installed.
//! A writer holds `wal` only to take its sequences and append its record
//! (`db::write`); it inserts into the memtable and syncs with no lock of
//! these held.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::{ArcSwap, Guard};
use parking_lot::{Condvar, Mutex};

use super::publish::Publication;
use super::watermark::ReadTracker;
use crate::cache::row_cache::RowCache;
use crate::error::{Error, Result};
use crate::key::SequenceNumber;
use crate::keyspace_options::KeyspaceSettings;
use crate::manifest::{holds_pin, ManifestWriter, RetainedWal};
use crate::memtable::Memtable;
use crate::options::Options;
use crate::range_delete::{RangeTombstone, RangeTombstoneSet};
use crate::snapshot::SnapshotList;
use crate::stats::{BackgroundJobStats, DiskReads, DiskUsage, JobKind};
use crate::store::Version;
use crate::table::BlockCache;
use crate::table::TableOptions;
use crate::wal::LogWriter;

/// What a read pins: the memtables and the store version of one moment.
pub(crate) struct SuperVersion {
    /// The active memtable.
    pub mem: Arc<dyn Memtable>,
    /// Immutable memtables, newest first.
    pub imms: Vec<Arc<dyn Memtable>>,
    /// The store.
    pub version: Arc<Version>,
    /// The engine's read tracker ([`Core::read_tracker`]), so that an
    /// iterator's read guard reaches it through the super version it owns
    /// anyway (see [`super::watermark::OwnedReadGuard`]).
    pub read_tracker: Arc<ReadTracker>,
    /// The block cache's disk-read counters, for the same reason: an
    /// iterator that meets a separated value counts its reads there.
    pub disk_reads: Arc<DiskReads>,
}

impl SuperVersion {
    /// True when a range delete a read at `read` sees deletes `key`'s
    /// version of sequence `found` (`crate::range_delete`): the version's
    /// and every pinned memtable's. Without range deletes, a load per
    /// memtable.
    #[inline]
    pub fn range_deleted(&self, key: &[u8], found: SequenceNumber, read: SequenceNumber) -> bool {
        self.version
            .range_tombstones
            .set()
            .deletes(key, found, read)
            || std::iter::once(&self.mem)
                .chain(&self.imms)
                .any(|m| m.range_tombstones().deletes(key, found, read))
    }

    /// The sequence of the newest range delete covering `key`, at any
    /// sequence: the version's and every pinned memtable's (a commit's
    /// conflict check, `db::conflict`).
    pub fn newest_range_delete(&self, key: &[u8]) -> Option<SequenceNumber> {
        let stored = self.version.range_tombstones.set().covering(key).first();
        std::iter::once(&self.mem)
            .chain(&self.imms)
            .filter(|m| !m.range_tombstones().is_empty())
            .filter_map(|m| m.range_tombstones().set().covering(key).first().copied())
            .chain(stored.copied())
            .max()
    }

    /// The range deletes a cursor checks each key against when the
    /// pinned memtables hold some: theirs and the version's, fragmented
    /// together (shared with the memtable when it alone holds any).
    /// `None` when no memtable holds one: the cursor reads the version's
    /// set through its pin, so making a cursor writes no shared count.
    pub fn memtable_range_tombstones(&self) -> Option<Arc<RangeTombstoneSet>> {
        let stored = self.version.range_tombstones.set();
        let mems = || {
            std::iter::once(&self.mem)
                .chain(&self.imms)
                .map(|m| m.range_tombstones())
                .filter(|t| !t.is_empty())
        };
        let mut with_some = mems();
        match (with_some.next(), with_some.next()) {
            (None, _) => None,
            (Some(m), None) if stored.is_empty() => Some(m.set()),
            _ => {
                let from_mems: Vec<RangeTombstone> = mems().flat_map(|m| m.all()).collect();
                let stored = self.version.range_tombstones.iter().map(|t| &t.tombstone);
                Some(Arc::new(RangeTombstoneSet::new(stored.chain(&from_mems))))
            }
        }
    }
}

impl super::watermark::TrackerHolder for Arc<SuperVersion> {
    fn tracker(&self) -> &ReadTracker {
        &self.read_tracker
    }
}

/// A memtable waiting for flush, with the WAL that covers it.
pub(crate) struct ImmutableMemtable {
    pub mem: Arc<dyn Memtable>,
    pub wal_number: u64,
    /// When it became immutable: its flush is due from then, and the time
    /// until the flush starts is that flush's queued time
    /// ([`crate::stats::BackgroundJobStats::queued`]).
    pub made_immutable: Instant,
    /// The last sequence handed out when it became immutable: writers
    /// that took a sequence up to this one may still be inserting into it,
    /// so it is complete once the visible sequence reaches this
    /// ([`Core::wait_visible`]).
    pub last_sequence: SequenceNumber,
    /// Bytes of records its WAL holds (the WAL is complete once the
    /// memtable is immutable): the size it has as a value log if a flush
    /// keeps it (`Options::values_in_wal`).
    pub wal_size: u64,
    /// [`ActiveWal::has_logged_puts`] of its WAL, final at the rotation.
    pub wal_has_logged_puts: bool,
    /// The lowest sequence its WAL may hold (one past the previous WAL's
    /// `last_sequence`): with `last_sequence`, the range the change feed
    /// looks for in it.
    pub first_sequence: SequenceNumber,
}

/// The change feed's part of the engine state (under `Core::state`).
/// Here rather than in `db::feed`, which reads the engine state: the
/// state holds this, and modules do not import each other.
#[derive(Debug, Default)]
pub(crate) struct FeedState {
    /// The holds as they are now: name → the first sequence its holder
    /// still needs. What a flush consults to retain its WAL.
    pub holds: BTreeMap<String, u64>,
    /// The holds as the manifest has them: behind [`FeedState::holds`]
    /// after a release not yet written (lower, so retaining more).
    pub persisted: BTreeMap<String, u64>,
    /// Flushed WALs kept for the feed (tag 13), by number.
    pub retained: BTreeMap<u64, RetainedWal>,
    /// The lowest sequence the active WAL may hold: one past the last
    /// sequence of the WAL before it.
    pub active_first_seq: SequenceNumber,
}

impl FeedState {
    /// Whether a hold needs the WAL whose sequences end at `last_seq`.
    pub fn pins(&self, last_seq: SequenceNumber) -> bool {
        holds_pin(self.holds.values(), last_seq)
    }

    /// The holds changed since the manifest last recorded them (to be
    /// added to the next edit).
    pub fn unpersisted(&self) -> Vec<(String, u64)> {
        self.holds
            .iter()
            .filter(|(name, seq)| self.persisted.get(*name) != Some(seq))
            .map(|(name, seq)| (name.clone(), *seq))
            .collect()
    }

    /// The manifest now records `holds` (an edit holding them is durable).
    pub fn note_persisted(&mut self, holds: &[(String, u64)]) {
        for (name, seq) in holds {
            self.persisted.insert(name.clone(), *seq);
        }
    }

    /// The lowest sequence the feed can serve from, `first` being the
    /// first sequence of the oldest WAL it reads: that, or a hold's if
    /// lower (every logged batch from a hold's sequence on is retained;
    /// below the oldest WAL's first sequence but at or past the hold,
    /// nothing was logged, or a crash took it before it was durable, and
    /// the feed is simply empty there).
    pub fn oldest(&self, first: SequenceNumber) -> SequenceNumber {
        self.holds.values().copied().fold(first, u64::min)
    }
}

/// Everything guarded by `Core::state`.
pub(crate) struct EngineState {
    pub mem: Arc<dyn Memtable>,
    pub mem_wal: u64,
    /// Oldest first.
    pub imms: VecDeque<ImmutableMemtable>,
    /// Changed only by a job holding [`Core::manifest`] (so it cannot
    /// change while that job's edit is being appended).
    pub version: Arc<Version>,
    pub next_file_number: u64,
    pub log_number: u64,
    /// Memtables ever made immutable / ever flushed (for `Db::flush` waits).
    pub imm_created: u64,
    pub imm_flushed: u64,
    /// Partitions a manual `compact()` asked to merge.
    /// Partitions a manual `compact()` asked to merge, each with the next
    /// file number at the request: it is settled once the partition holds
    /// no UnsortedStore table numbered below it (tables flushed since are
    /// not the request's business, so a steady stream of writes cannot
    /// keep `compact()` waiting).
    pub manual_merges: std::collections::BTreeMap<u64, u64>,
    /// Id for the next partition a split creates.
    pub next_partition_id: u64,
    /// Latest hash-index checkpoint file of each partition.
    pub index_checkpoints: std::collections::BTreeMap<u64, u64>,
    /// Bytes flushed into each partition since its last checkpoint.
    pub flushed_since_checkpoint: std::collections::BTreeMap<u64, u64>,
    /// The flush thread is writing a memtable out.
    pub flushing: bool,
    /// Jobs splitting a partition or consolidating an UnsortedStore: while
    /// any runs, no flush may start (see [`crate::background`]).
    pub restructuring: usize,
    /// Partitions a job of the pool is working on: no other job picks them
    /// (at most one job per partition; flushes only add tables and are not
    /// counted).
    pub busy_partitions: std::collections::BTreeSet<u64>,
    pub shutting_down: bool,
    /// The change feed's holds and retained WALs (`db::feed`).
    pub feed: FeedState,
}

impl EngineState {
    /// The current version's partitions no job is working on: the ones a
    /// job picker may choose.
    pub fn idle_partitions(&self) -> impl Iterator<Item = &Arc<crate::store::Partition>> + '_ {
        self.version
            .partitions
            .iter()
            .filter(|p| !self.busy_partitions.contains(&p.id))
    }

    /// Allocates a file number.
    pub fn new_file_number(&mut self) -> u64 {
        let n = self.next_file_number;
        self.next_file_number += 1;
        n
    }
}

/// True when background work is far enough behind that writers must be
/// slowed or stalled (`db::write`'s `make_room` says how).
pub(crate) fn background_behind(opts: &Options, st: &EngineState) -> bool {
    let unsorted = st.version.unsorted_tables();
    // As RocksDB (which slows writes only with more than three memtables):
    // one flush in progress is the steady state of a write-heavy load, and
    // a 1 ms pause per write while it runs stopped a lone writer for the
    // whole flush, a large part of a 1 KiB fill's time. Slow down only when
    // a queue of three or more is one short of full, so a stall still has
    // warning.
    let memtables_behind =
        opts.max_immutable_memtables >= 3 && st.imms.len() + 1 >= opts.max_immutable_memtables;
    memtables_behind
        || unsorted >= opts.unsorted_slowdown_tables
        || unsorted >= opts.unsorted_stop_tables
}

/// The WAL being appended to.
///
/// Its records go to the active memtable of the super version published
/// when its lock is free: rotation swaps the WAL and installs the super
/// version with the new memtable under this lock, so a writer that takes
/// its sequences, appends its record and pins the super version in one
/// critical section inserts into that WAL's memtable, whatever rotation
/// follows.
pub(crate) struct ActiveWal {
    pub writer: LogWriter,
    /// The WAL's file number (`EngineState::mem_wal`).
    pub number: u64,
    /// Whether a record holds a logged put (`Options::values_in_wal`): set
    /// under the WAL lock by the append, so it costs no line of its own;
    /// a flush reads the WAL back for the puts' offsets only when it is.
    pub has_logged_puts: bool,
}

/// WALs rotated out whose records may not be on disk yet, oldest first.
///
/// A rotation used to fdatasync the old WAL before the first write went to
/// the new one, on the writer's path: every rotation held the writers for
/// the old log's disk flush, and a lone writer's `fillrandom` ran clearly
/// faster without it. Now the old WAL only has its deferred records written
/// (so a process crash keeps it whole) and waits here; the flush thread
/// syncs it before flushing its memtable (as RocksDB syncs closed logs in
/// its flush job), and whoever promises durability — a `sync` write,
/// `Db::sync_wal`, shutdown — syncs every closed WAL before its own. A
/// machine crash can therefore leave an older WAL torn while a newer one
/// kept records; recovery stops at the first torn record across all WALs
/// (`db::open`), which keeps the result a prefix of the history.
///
/// A log leaves the list only once a sync covering it has returned, so a
/// syncer that finds the list empty knows every closed WAL is durable.
#[derive(Default)]
pub(crate) struct ClosedWals {
    logs: Mutex<Vec<(u64, LogWriter)>>,
}

impl ClosedWals {
    /// Adds the WAL numbered `number`, just rotated out.
    pub fn push(&self, number: u64, writer: LogWriter) {
        let mut logs = self.logs.lock();
        debug_assert!(logs.last().is_none_or(|(n, _)| *n < number));
        logs.push((number, writer));
    }

    /// Makes every closed WAL numbered `through` or lower durable, then
    /// forgets it. Each is sealed first ([`LogWriter::seal`]: no page of it
    /// left mapped, no reserved zeros), so its fdatasync writes back only
    /// records. The fdatasyncs run on second handles, outside the lock, so a
    /// rotation never waits for them.
    pub fn sync_through(&self, through: u64) -> Result<()> {
        let handles = {
            let mut logs = self.logs.lock();
            logs.iter_mut()
                .filter(|(n, _)| *n <= through)
                .map(|(n, w)| {
                    w.seal()?;
                    w.sync_handle().map(|f| (*n, f, w.path().to_path_buf()))
                })
                .collect::<Result<Vec<_>>>()?
        };
        let Some(&(last, _, _)) = handles.last() else {
            return Ok(());
        };
        for (_, file, path) in &handles {
            file.sync_data()
                .map_err(|e| Error::io(format!("syncing closed log {}", path.display()), e))?;
        }
        // Dropping a writer cuts its file back to its records.
        self.logs.lock().retain(|(n, _)| *n > last);
        Ok(())
    }

    /// Makes every closed WAL durable.
    pub fn sync_all(&self) -> Result<()> {
        self.sync_through(u64::MAX)
    }

    /// Numbers of the closed WALs not known durable yet.
    #[cfg(test)]
    pub fn numbers(&self) -> Vec<u64> {
        self.logs.lock().iter().map(|(n, _)| *n).collect()
    }
}

/// Monotonic counters, read by `stats()`.
#[derive(Default)]
pub(crate) struct Counters {
    /// Bumped by every write: striped, so writers share no line.
    pub user_bytes: crate::util::stripe::StripedCounter,
    pub wal_bytes: crate::util::stripe::StripedCounter,
    /// UnsortedStore tables written by flushes.
    pub flush_bytes: AtomicU64,
    /// SortedStore tables written by merges.
    pub merge_bytes: AtomicU64,
    /// Value logs written by merges.
    pub value_log_bytes: AtomicU64,
    /// Bytes of logged values flushes left in their WALs, pointed at
    /// instead of copied (`Options::values_in_wal`).
    pub wal_kept_bytes: AtomicU64,
    /// Tables written by partition splits.
    pub split_bytes: AtomicU64,
    /// Tables written by UnsortedStore consolidations (for scans).
    pub consolidation_bytes: AtomicU64,
    pub manifest_bytes: AtomicU64,
    pub flushes: AtomicU64,
    pub merges: AtomicU64,
    pub gc_bytes: AtomicU64,
    pub gcs: AtomicU64,
    /// Versions the compaction filter removed (merges and GC).
    pub filtered: AtomicU64,
    /// Versions a range delete removed (merges and GC).
    pub range_deleted: AtomicU64,
    /// Merges and GCs that gave up their outputs because a snapshot made
    /// while they ran could see a version their filter removed.
    pub filter_conflicts: AtomicU64,
    pub consolidations: AtomicU64,
    /// Munks built from a partition's tables.
    pub munk_loads: AtomicU64,
    /// Munks rebuilt in memory with the tables flushed since (rebalances).
    pub munk_rebalances: AtomicU64,
    /// Munks kept through a merge or GC of their partition (relabeled).
    pub munk_relabels: AtomicU64,
    /// Munks dropped to make room or because their partition went cold.
    pub munk_evictions: AtomicU64,
    /// Bytes of munk images built (loads and rebalances).
    pub munk_build_bytes: AtomicU64,
    /// True once an iterator was created since the last consolidation
    /// started (scans in progress): the consolidation picker asks only
    /// whether any was, never how many.
    pub scanned_since_consolidation: AtomicBool,
    pub splits: AtomicU64,
    pub slowdowns: AtomicU64,
    pub stalls: AtomicU64,
    /// Microseconds writers spent in slowdowns and stalls.
    pub stall_micros: AtomicU64,
    pub wal_truncated: AtomicU64,
    /// Hash-index checkpoint files written.
    pub checkpoint_bytes: AtomicU64,
    /// Runs and times of each kind of background job, by [`JobKind::index`].
    jobs: [JobCounters; JobKind::ALL.len()],
}

/// Runs and times of one kind of background job. Only background threads
/// write them, once per job, so relaxed atomics suffice (a reader may see
/// a job's count before its times, which no figure depends on).
#[derive(Default)]
struct JobCounters {
    count: AtomicU64,
    queued_nanos: AtomicU64,
    running_nanos: AtomicU64,
}

impl Counters {
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts one job of `kind` that waited `queued` between becoming due
    /// and starting, then ran for `running`. The scheduler calls it once
    /// per job, failed ones included; the bytes a job writes are counted
    /// where it writes them (`flush_bytes`, `merge_bytes`, ...), which
    /// stays exact however many jobs of one kind run at once.
    pub fn record_job(&self, kind: JobKind, queued: Duration, running: Duration) {
        let job = &self.jobs[kind.index()];
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        job.count.fetch_add(1, Ordering::Relaxed);
        job.queued_nanos.fetch_add(nanos(queued), Ordering::Relaxed);
        job.running_nanos
            .fetch_add(nanos(running), Ordering::Relaxed);
    }

    /// Bytes the jobs of `kind` wrote, from the per-kind byte counters.
    fn bytes_written_by(&self, kind: JobKind) -> u64 {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        match kind {
            JobKind::Flush => load(&self.flush_bytes),
            JobKind::Merge => load(&self.merge_bytes) + load(&self.value_log_bytes),
            JobKind::Gc => load(&self.gc_bytes),
            JobKind::Split => load(&self.split_bytes),
            JobKind::Consolidation => load(&self.consolidation_bytes),
            JobKind::IndexCheckpoint => load(&self.checkpoint_bytes),
            JobKind::Munk => 0,
        }
    }

    /// What the jobs of every kind have cost, in [`JobKind::ALL`]'s order.
    pub fn background_jobs(&self) -> Vec<(JobKind, BackgroundJobStats)> {
        JobKind::ALL
            .iter()
            .map(|&kind| {
                let job = &self.jobs[kind.index()];
                let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
                let stats = BackgroundJobStats {
                    count: load(&job.count),
                    bytes_written: self.bytes_written_by(kind),
                    queued: Duration::from_nanos(load(&job.queued_nanos)),
                    running: Duration::from_nanos(load(&job.running_nanos)),
                };
                (kind, stats)
            })
            .collect()
    }
}

/// The engine, shared by `Db` handles and the background threads.
pub(crate) struct Core {
    pub dir: PathBuf,
    /// Every file operation goes through it (`Options::file_system`).
    pub fs: crate::util::fs::Fs,
    /// What the job pool writes its tables and value logs through: `fs`,
    /// limited to [`Options::background_write_rate`] when one is set.
    /// Flushes write through `fs`: a late flush stalls writers at once.
    pub job_fs: crate::util::fs::Fs,
    pub options: Options,
    pub table_options: TableOptions,
    /// Each keyspace's compression and blob threshold
    /// (`crate::keyspace_options`), replaced by the registry's read at open
    /// and by every create and drop; read once per job, and by a write
    /// only when it may log a value ([`Core::min_logged_from`]).
    pub keyspace_settings: ArcSwap<KeyspaceSettings>,
    /// [`KeyspaceSettings::min_logged_from`] of the settings installed: a
    /// write whose batch is smaller logs no value and reads nothing more.
    /// Written only with the settings, so no writer writes its line.
    pub min_logged_from: AtomicUsize,
    pub cache: Arc<BlockCache>,
    /// Values gets read from storage (`None` when
    /// [`Options::row_cache_size`] is 0): consulted after the memtables,
    /// refreshed by every write before it becomes visible.
    pub row_cache: Option<RowCache>,
    pub snapshots: Arc<SnapshotList>,
    /// Reads in flight, for the memtables' read watermark.
    pub read_tracker: Arc<ReadTracker>,
    /// The visible sequence: the highest whose write (and every earlier
    /// one) is complete, published in order by writers that finish in
    /// any order.
    pub publication: Publication,
    /// Highest sequence handed out (changed only under `wal`).
    pub last_seq: AtomicU64,
    /// Highest sequence whose write (and every earlier one) is known
    /// fdatasynced, or was recovered: the change feed's durable limit.
    /// Raised after every WAL sync that covers a sequence
    /// ([`Core::note_durable`]).
    pub durable_seq: AtomicU64,
    pub wal: Mutex<ActiveWal>,
    /// How far the WALs are known durable, as `(WAL number, bytes)`; held
    /// by the one writer whose `sync` write is running the fdatasync, so
    /// the sync writers queued behind it find their records covered by it
    /// (group commit of syncs).
    pub wal_synced: Mutex<(u64, u64)>,
    /// True while writers must take the slow path that may slow or stall
    /// them (background work behind: see `db::write`); kept by
    /// [`Core::install_super_version`], so the fast path reads one flag
    /// instead of taking the state lock.
    pub writes_throttled: AtomicBool,
    /// The number of the WAL whose memtable a writer found full after its
    /// append: writers to that WAL take the slow path, which rotates. A
    /// memtable's size is read outside the WAL lock, so the writers in
    /// flight may take it a little past `write_buffer_size`.
    pub full_memtable_wal: AtomicU64,
    /// WALs rotated out but maybe not yet durable (see [`ClosedWals`]).
    pub closed_wals: ClosedWals,
    pub state: Mutex<EngineState>,
    /// The manifest. A job holds it from making its edit (under `state`)
    /// through appending it (with `state` released: see the module docs)
    /// to installing it (under `state` again).
    pub manifest: Mutex<ManifestWriter>,
    /// Signalled on every state change that someone may wait for: work for
    /// the background threads, room for stalled writers, finished flushes.
    pub state_cv: Condvar,
    /// The super version reads pin. An `ArcSwap`, not a lock around an
    /// `Arc`: a get pins it with [`Core::pin_super_version`], which writes
    /// only to this thread's own debt slots, where a read lock and an `Arc`
    /// clone each wrote a word every reading core shares.
    super_version: ArcSwap<SuperVersion>,
    poisoned: AtomicBool,
    poison_reason: Mutex<Option<String>>,
    pub closed: AtomicBool,
    pub counters: Counters,
    pub reads: crate::store::ReadCounters,
    /// Bytes of munk images alive (`store::munk`), installed or still
    /// pinned by a reader: what [`Options::munk_cache_size`] bounds.
    pub munk_bytes: Arc<AtomicU64>,
    /// A range delete may exist: one was written since the open, or the
    /// store held one at the open. Until then a get skips the range
    /// checks (`SuperVersion::range_deleted`) with this one load of a
    /// line no one writes; set before the first range delete is visible
    /// (`db::write`), and never cleared.
    pub range_deletes_seen: AtomicBool,
    /// The earlier sessions' counters and the saves of the lifetime
    /// counters (`db::lifetime`).
    pub lifetime: crate::stats_file::Lifetime,
    /// Opened with `Db::open_read_only`: no lock, no background threads,
    /// and every write is refused by [`Core::check_writable`] before it
    /// reaches the WAL or manifest, which are then placeholders that refuse
    /// writes too ([`crate::wal::LogWriter::refusing`]).
    pub read_only: bool,
    /// Serializes `Db::refresh` calls of a read-only engine, so that views
    /// are installed in the order they were built.
    pub refresh_lock: Mutex<()>,
}

impl Core {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        dir: PathBuf,
        options: Options,
        cache: Arc<BlockCache>,
        state: EngineState,
        manifest: ManifestWriter,
        wal: ActiveWal,
        last_seq: SequenceNumber,
        counters: Counters,
        lifetime: crate::stats_file::Lifetime,
    ) -> Core {
        let table_options = options.table_options();
        let settings = KeyspaceSettings::new(&options, []);
        let min_logged_from = AtomicUsize::new(settings.min_logged_from());
        let throttled = background_behind(&options, &state);
        let read_tracker = Arc::new(ReadTracker::default());
        // Recovery starts with an empty row cache: it is memory only.
        let row_cache = RowCache::new(options.row_cache_size);
        let range_deletes_seen = !state.version.range_tombstones.is_empty();
        let sv = Arc::new(SuperVersion {
            mem: Arc::clone(&state.mem),
            imms: Vec::new(),
            version: Arc::clone(&state.version),
            read_tracker: Arc::clone(&read_tracker),
            disk_reads: Arc::clone(cache.disk_reads()),
        });
        Core {
            dir,
            fs: Arc::clone(&options.file_system),
            job_fs: match options.background_write_rate {
                0 => Arc::clone(&options.file_system),
                rate => Arc::new(crate::util::fs::RateLimitedFs::new(
                    Arc::clone(&options.file_system),
                    Arc::new(crate::util::rate_limiter::RateLimiter::new(rate)),
                )),
            },
            options,
            table_options,
            keyspace_settings: ArcSwap::from_pointee(settings),
            min_logged_from,
            row_cache,
            cache,
            snapshots: Arc::new(SnapshotList::default()),
            read_tracker,
            publication: Publication::new(last_seq),
            last_seq: AtomicU64::new(last_seq),
            durable_seq: AtomicU64::new(last_seq),
            wal: Mutex::new(wal),
            wal_synced: Mutex::new((0, 0)),
            writes_throttled: AtomicBool::new(throttled),
            full_memtable_wal: AtomicU64::new(u64::MAX),
            closed_wals: ClosedWals::default(),
            state: Mutex::new(state),
            manifest: Mutex::new(manifest),
            state_cv: Condvar::new(),
            super_version: ArcSwap::new(sv),
            poisoned: AtomicBool::new(false),
            poison_reason: Mutex::new(None),
            closed: AtomicBool::new(false),
            counters,
            reads: Default::default(),
            munk_bytes: Arc::default(),
            range_deletes_seen: AtomicBool::new(range_deletes_seen),
            lifetime,
            read_only: false,
            refresh_lock: Mutex::new(()),
        }
    }

    /// Installs the keyspaces' options (under the registry mutex, so
    /// installs happen in the order of the writes that made them).
    pub fn set_keyspace_settings(&self, settings: KeyspaceSettings) {
        let min = settings.min_logged_from();
        self.keyspace_settings.store(Arc::new(settings));
        self.min_logged_from.store(min, Ordering::Release);
    }

    /// True when munks are on ([`Options::munk_cache_size`] above zero).
    pub fn munks_on(&self) -> bool {
        self.options.munk_cache_size > 0
    }

    /// Publishes a new super version built from `st`. Called with the state
    /// lock held after every change to memtables or version.
    pub fn install_super_version(&self, st: &EngineState) {
        let sv = Arc::new(SuperVersion {
            mem: Arc::clone(&st.mem),
            imms: st.imms.iter().rev().map(|i| Arc::clone(&i.mem)).collect(),
            version: Arc::clone(&st.version),
            read_tracker: Arc::clone(&self.read_tracker),
            disk_reads: Arc::clone(self.cache.disk_reads()),
        });
        self.super_version.store(sv);
        self.writes_throttled
            .store(background_behind(&self.options, st), Ordering::Release);
    }

    /// Waits until every sequence up to `seq` is visible: the writers that
    /// took them have inserted. Used by background work that reads a
    /// memtable whole (a flush), which must not miss a write still being
    /// inserted into it. Writers never wait for background threads here,
    /// so this ends as soon as the writers in flight do. The same wait a
    /// writer's acknowledgement makes (spin, yield, then block until an
    /// advance wakes it).
    pub fn wait_visible(&self, seq: SequenceNumber) {
        self.publication.wait_visible(seq);
    }

    /// Counts a scan for UniKV's scan-time consolidation (§III-F). The
    /// first scan since the last consolidation wakes the job pool:
    /// it is otherwise woken only by flushes and merges, so a read-only
    /// phase would never have its UnsortedStores consolidated.
    ///
    /// Only the first scan writes: the flag is read first, and once set it
    /// stays set until a consolidation clears it, so a scan that finds it
    /// set changes nothing by setting it again. Writing it on every
    /// iterator made all scanning cores share its cache line.
    pub fn note_scan(&self) {
        let flag = &self.counters.scanned_since_consolidation;
        if !flag.load(Ordering::Relaxed) && !flag.swap(true, Ordering::Relaxed) {
            // Taking the lock orders the wake-up after a picker that saw no
            // scans and is about to wait: it cannot be lost.
            let _st = self.state.lock();
            self.state_cv.notify_all();
        }
    }

    /// The current super version, owned (for iterators, which outlive the
    /// call that makes them; an `Arc` clone writes its shared count).
    pub fn super_version(&self) -> Arc<SuperVersion> {
        self.super_version.load_full()
    }

    /// The current super version, pinned for a read that ends before the
    /// caller returns (a get): no shared count is written, only this
    /// thread's debt slot. Hold it briefly: a thread has a few such slots,
    /// and a guard loaded while they are all taken falls back to an `Arc`
    /// clone (still correct, no longer free); the writer that replaces the
    /// super version also pays each held guard's debt.
    pub fn pin_super_version(&self) -> Guard<Arc<SuperVersion>> {
        self.super_version.load()
    }

    /// The latest visible sequence.
    pub fn visible(&self) -> SequenceNumber {
        self.publication.visible()
    }

    /// Every write up to `seq` is durable now (a sync covering its record
    /// returned).
    pub fn note_durable(&self, seq: SequenceNumber) {
        self.durable_seq.fetch_max(seq, Ordering::AcqRel);
    }

    /// Refuses writes from now on (a WAL, manifest or flush failure).
    ///
    /// Takes the state lock to wake stalled writers and flush waiters, so
    /// the caller must hold neither it nor the WAL lock (rotation takes the
    /// state, then the WAL): a caller inside the state lock uses
    /// [`Core::poison_holding_state`].
    pub fn poison(&self, reason: &Error) {
        self.mark_poisoned(reason);
        // Wake stalled writers and flush waiters so they see it. Taking the
        // lock orders this after any waiter's check of the flag.
        let _st = self.state.lock();
        self.state_cv.notify_all();
    }

    /// [`Core::poison`] for a caller that holds the state lock (whose
    /// holding makes the wake-up race-free, as the lock does in `poison`).
    pub fn poison_holding_state(&self, reason: &Error, _st: &mut EngineState) {
        self.mark_poisoned(reason);
        self.state_cv.notify_all();
    }

    fn mark_poisoned(&self, reason: &Error) {
        let mut r = self.poison_reason.lock();
        if r.is_none() {
            *r = Some(reason.to_string());
        }
        self.poisoned.store(true, Ordering::Release);
    }

    /// `Err(Poisoned)` if an earlier failure poisoned the database, and
    /// `Err(Closed)` after close.
    /// A read-only engine gets `Err(ReadOnly)`.
    pub fn check_writable(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        self.check_not_read_only("write")?;
        self.check_poisoned()
    }

    /// `Err(ReadOnly)` naming `operation` when opened read-only.
    pub fn check_not_read_only(&self, operation: &'static str) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly { operation });
        }
        Ok(())
    }

    /// `Err(Poisoned)` if an earlier failure poisoned the database: what
    /// the flush at close checks, which runs after `closed` is set.
    pub fn check_poisoned(&self) -> Result<()> {
        if self.poisoned.load(Ordering::Acquire) {
            let r = self.poison_reason.lock().clone().unwrap_or_default();
            return Err(Error::Poisoned(r));
        }
        Ok(())
    }

    /// `Err(Closed)` after close; reads keep working while poisoned.
    pub fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// True once poisoned.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// Bytes of the files in the database directory, by kind: one listing
    /// and one size query per file. The version knows the sizes of its live
    /// tables and logs without asking the file system, but not those of the
    /// WALs' reserved space, the manifest, the checkpoints, or files that
    /// wait for their last reader before they are deleted, all of which
    /// take space. A file deleted between the listing and its size query is
    /// skipped; a directory that cannot be listed reads as empty (stats
    /// have no error to return, and an empty usage is plainly unknown).
    pub fn disk_usage(&self) -> DiskUsage {
        use crate::filename::{parse_file_name, FileKind};
        let mut usage = DiskUsage::default();
        // WALs kept as value logs (`Options::values_in_wal`) count as logs.
        let logs: Vec<u64> = self
            .state
            .lock()
            .version
            .value_logs
            .keys()
            .copied()
            .collect();
        let Ok(paths) = self.fs.read_dir(&self.dir) else {
            return usage;
        };
        for path in paths {
            let Ok(size) = self.fs.file_size(&path) else {
                continue;
            };
            let name = crate::util::fs::file_name(&path);
            let slot = match parse_file_name(&name) {
                Some(FileKind::Table(_)) => &mut usage.tables,
                Some(FileKind::ValueLog(_)) => &mut usage.value_logs,
                Some(FileKind::Wal(n)) if logs.binary_search(&n).is_ok() => &mut usage.value_logs,
                Some(FileKind::Wal(_)) => &mut usage.wals,
                Some(FileKind::Manifest(_) | FileKind::Current) => &mut usage.manifest,
                Some(FileKind::IndexCheckpoint(_)) => &mut usage.index_checkpoints,
                Some(
                    FileKind::Lock | FileKind::Temp(_) | FileKind::Stats | FileKind::StatsTemp,
                )
                | None => &mut usage.other,
            };
            *slot += size;
        }
        usage
    }
}
