//! Background work: flushing immutable memtables into UnsortedStore tables
//! and merging UnsortedStores into SortedStores.
//!
//! Two threads share it. The flush thread ([`run_flushes`]) only flushes;
//! the compaction thread ([`run`]) merges, consolidates, collects value
//! logs and splits partitions. With one thread doing both, every merge of
//! a 5M-key `fillrandom` (1.8 s each) held up the flushes behind it, the
//! queue of immutable memtables filled, and the lone writer stalled for
//! most of each merge: the two cores sat 30 % idle. A flush now runs beside
//! a merge and the writer keeps going.
//!
//! What the two may do at once, and what keeps it sound:
//! * A flush adds tables to a partition's UnsortedStore; a merge or GC
//!   replaces the tables it read and keeps every other (`retain`), so each
//!   installs its result into the *current* version, never into the one it
//!   started from.
//! * A split changes partitions and a consolidation rewrites the
//!   UnsortedStore in place (its output must stay older than every table
//!   flushed after its inputs). Neither runs beside a flush: the compaction
//!   thread raises [`EngineState::restructuring`], which keeps new flushes
//!   from starting, and waits until the running one is done
//!   ([`FlushesHeld`]).
//! * Manifest edits: a job makes its edit under the state lock, appends it
//!   (an fdatasync) with the state lock released, and installs it under the
//!   state lock again, holding [`Core::manifest`] throughout. Writers,
//!   whose every write group takes the state lock, go on during the fsync
//!   (`strace` of a 3M-key fill: 51 manifest fdatasyncs, median 0.2 ms,
//!   p90 4 ms, max 9 ms, each of which had held every writer); the
//!   manifest's order stays the install order, and no version changes
//!   between an edit and its install (only these jobs change it).
//! * Hash-index changes (a flush adds its tables, a merge or consolidation
//!   removes its inputs) are serialized by [`Core::index_changes`], and a
//!   flush grows an index from the tables of the current version, so an
//!   index never keeps entries of tables merged away.
//!
//! Every job follows the same crash-safe order: write and fsync the new
//! tables, append the manifest edit that makes them live (and the inputs
//! dead) and fsync it, install the new version, and only then delete what the
//! edit dropped (a flushed WAL; input tables, once no reader holds them). A
//! crash at any point leaves either the old state or the new one, plus
//! orphan files that the next open removes.
//!
//! A failed job poisons the database (writes refuse; reads keep working):
//! retrying blindly on a full or failing disk would only hide the problem.

use std::collections::BTreeSet;
use std::sync::Arc;

use parking_lot::MutexGuard;

use crate::cache::ReadPurpose;
use crate::db::core::{Core, Counters, EngineState};
use crate::error::Result;
use crate::iter::{InternalIterator, MergedEntries};
use crate::key::MAX_SEQUENCE;
use crate::manifest::{ManifestWriter, VersionEdit};
use crate::memtable::Memtable;
use crate::store::compaction::{write_tables, JobStats, OutputSpec, RetentionPolicy};
use crate::store::gc::ResolvingIter;
use crate::store::sorted_run::SortedRunIter;
use crate::store::value_log::ValueLogFile;
use crate::store::value_reader::ValueReader;
use crate::store::{
    change_index, grown_index, install_table, replace_index, FileMeta, KeyList, LiveValueLog,
    Partition, Placement, TableFile, Version,
};

enum Job {
    Consolidate(u64),
    Merge(u64),
    Collect(u64, BTreeSet<u64>),
    Split(u64),
}

/// The flush thread's loop; returns at shutdown.
pub(crate) fn run_flushes(core: Arc<Core>) {
    loop {
        {
            let mut st = core.state.lock();
            loop {
                if st.shutting_down {
                    return;
                }
                if !core.is_poisoned() && !st.imms.is_empty() && !st.restructuring {
                    break;
                }
                core.state_cv.wait(&mut st);
            }
            st.flushing = true;
        }
        let result = flush_oldest(&core);
        if let Err(e) = &result {
            core.poison(e);
        }
        let mut st = core.state.lock();
        st.flushing = false;
        core.state_cv.notify_all();
    }
}

/// The compaction thread's loop; returns at shutdown.
pub(crate) fn run(core: Arc<Core>) {
    loop {
        let job = {
            let mut st = core.state.lock();
            loop {
                if st.shutting_down {
                    return;
                }
                if !core.is_poisoned() {
                    if let Some(p) = pick_merge(&core, &mut st) {
                        break Job::Merge(p);
                    }
                    if let Some(p) = pick_consolidation(&core, &st) {
                        break Job::Consolidate(p);
                    }
                    if let Some((p, victims)) = pick_gc(&core, &st) {
                        break Job::Collect(p, victims);
                    }
                    if let Some(p) = pick_split(&core, &st) {
                        break Job::Split(p);
                    }
                }
                core.state_cv.wait(&mut st);
            }
        };
        let result = match job {
            Job::Merge(p) => merge_partition(&core, p),
            Job::Consolidate(p) => consolidate_unsorted(&core, p),
            Job::Collect(p, victims) => collect_garbage(&core, p, victims),
            Job::Split(p) => split_partition(&core, p),
        };
        if let Err(e) = result {
            core.poison(&e);
        }
        let _st = core.state.lock();
        core.state_cv.notify_all();
    }
}

/// Keeps flushes from running while the compaction thread restructures a
/// partition (split, consolidation); see the module docs. Created only
/// once the running flush, if any, is done.
struct FlushesHeld<'a> {
    core: &'a Core,
}

impl<'a> FlushesHeld<'a> {
    /// Stops new flushes and waits for the running one (which always ends:
    /// the flush thread clears `flushing` after every job, failed or not).
    fn new(core: &'a Core) -> FlushesHeld<'a> {
        let mut st = core.state.lock();
        debug_assert!(!st.restructuring, "only the compaction thread restructures");
        st.restructuring = true;
        while st.flushing {
            core.state_cv.wait(&mut st);
        }
        FlushesHeld { core }
    }
}

impl Drop for FlushesHeld<'_> {
    fn drop(&mut self) {
        let mut st = self.core.state.lock();
        st.restructuring = false;
        self.core.state_cv.notify_all();
    }
}

/// A partition whose UnsortedStore passed the limit, or one a manual
/// compaction asked for.
fn pick_merge(core: &Core, st: &mut EngineState) -> Option<u64> {
    while let Some((&p, &requested_at)) = st.manual_merges.iter().next() {
        let pending = st
            .version
            .partitions
            .iter()
            .any(|x| x.id == p && x.unsorted.iter().any(|t| t.meta.number < requested_at));
        if pending {
            return Some(p);
        }
        // Nothing the request covers is left unmerged (or the partition
        // is gone): it is done; `compact()` waits on it.
        st.manual_merges.remove(&p);
        core.state_cv.notify_all();
    }
    // By bytes (UniKV's UnsortedLimit), or by table count: many small tables
    // (short sessions each recover their WAL into one) slow reads and would
    // otherwise reach `unsorted_stop_tables` and stall writers with nothing
    // scheduled to free them.
    let opts = &core.options;
    st.version
        .partitions
        .iter()
        .filter(|p| {
            p.unsorted_bytes() > opts.unsorted_limit
                || p.unsorted.len() >= opts.unsorted_slowdown_tables
        })
        .max_by_key(|p| {
            (
                p.unsorted.len() >= opts.unsorted_slowdown_tables,
                p.unsorted_bytes(),
            )
        })
        .map(|p| p.id)
}

/// Writes `mem` into one UnsortedStore table per partition it touches.
/// Returns the tables written, by partition id.
pub(crate) fn write_memtable(
    core_dir: &std::path::Path,
    table_options: crate::table::TableOptions,
    mem: &Arc<dyn Memtable>,
    partitions: &[PartitionBounds],
    snapshots: Vec<u64>,
    new_file: &mut dyn FnMut() -> u64,
    stats: &mut JobStats,
) -> Result<Vec<(u64, FileMeta)>> {
    let policy = RetentionPolicy {
        snapshots,
        bottommost: false,
    };
    let mut out = Vec::new();
    for (id, lower, upper) in partitions {
        let mut input = MergedEntries::new(vec![Arc::clone(mem).iter()]);
        input.seek(lower, MAX_SEQUENCE)?;
        let spec = OutputSpec {
            dir: core_dir,
            table: table_options.for_unsorted_store(),
            target_size: u64::MAX,
            upper: upper.as_deref(),
            min_blob_size: None,
            collect_keys: true,
        };
        match write_tables(&mut input, &policy, &spec, new_file, stats) {
            Ok(files) => out.extend(files.into_iter().map(|f| (*id, f))),
            Err(e) => {
                for (_, f) in &out {
                    let _ = std::fs::remove_file(crate::filename::table_path(core_dir, f.number));
                }
                return Err(e);
            }
        }
    }
    Ok(out)
}

/// A partition's id, inclusive lower and exclusive upper bound.
pub(crate) type PartitionBounds = (u64, Vec<u8>, Option<Vec<u8>>);

/// Appends a job's `edit` to the manifest (and fdatasyncs it) with the
/// state lock released; the caller holds [`Core::manifest`] from making
/// the edit through installing it (see the module docs). Returns the
/// bytes appended.
fn append_edit(
    core: &Core,
    manifest: &mut ManifestWriter,
    st: &mut MutexGuard<'_, EngineState>,
    edit: &VersionEdit,
) -> Result<u64> {
    MutexGuard::unlocked(st, || {
        crate::fault::pause_point("manifest.append", &core.dir);
        manifest.append(edit)
    })
}

fn partition_bounds(v: &Version) -> Vec<PartitionBounds> {
    v.partitions
        .iter()
        .map(|p| (p.id, p.lower.clone(), p.upper.clone()))
        .collect()
}

fn remove_files(core: &Core, files: &[FileMeta]) {
    for f in files {
        let _ = std::fs::remove_file(crate::filename::table_path(&core.dir, f.number));
    }
}

fn flush_oldest(core: &Arc<Core>) -> Result<()> {
    let (mem, wal_number, bounds) = {
        let st = core.state.lock();
        let Some(imm) = st.imms.front() else {
            return Ok(());
        };
        (
            Arc::clone(&imm.mem),
            imm.wal_number,
            partition_bounds(&st.version),
        )
    };
    // Its WAL (and any older one still waiting) is made durable first, as
    // it would have been at rotation (see `ClosedWals`).
    crate::fault::pause_point("flush.started", &core.dir);
    core.closed_wals.sync_through(wal_number)?;
    let mut stats = JobStats::default();
    let mut new_file = || core.state.lock().new_file_number();
    let files = write_memtable(
        &core.dir,
        core.table_options,
        &mem,
        &bounds,
        core.snapshots.sequences(),
        &mut new_file,
        &mut stats,
    )?;
    crate::fault::crash_point("flush.tables_written");
    // Index the new tables before any version lists them, so a reader that
    // sees a table always finds it through the index (UniKV §III-B).
    index_new_tables(core, &files, &stats)?;
    let metas: Vec<FileMeta> = files.iter().map(|(_, f)| f.clone()).collect();
    let opened: Vec<(u64, Arc<TableFile>)> = files
        .iter()
        .map(|(p, _)| *p)
        .zip(open_new_tables(core, &metas)?)
        .collect();

    let mut manifest = core.manifest.lock();
    let mut st = core.state.lock();
    debug_assert!(st.imms.front().is_some_and(|i| Arc::ptr_eq(&i.mem, &mem)));
    let next_log = st.imms.get(1).map(|i| i.wal_number).unwrap_or(st.mem_wal);
    let edit = VersionEdit {
        log_number: Some(next_log),
        next_file_number: Some(st.next_file_number),
        last_sequence: Some(core.visible()),
        added_files: files
            .iter()
            .map(|(p, f)| (*p, Placement::Unsorted, f.clone()))
            .collect(),
        ..Default::default()
    };
    match append_edit(core, &mut manifest, &mut st, &edit) {
        Ok(n) => Counters::add(&core.counters.manifest_bytes, n),
        Err(e) => {
            drop(st);
            drop(opened);
            remove_files(
                core,
                &files.iter().map(|(_, f)| f.clone()).collect::<Vec<_>>(),
            );
            return Err(e);
        }
    }
    crate::fault::crash_point("flush.manifest_written");
    let mut version = (*st.version).clone();
    for (pid, tf) in opened {
        if let Some(slot) = version.partitions.iter_mut().find(|p| p.id == pid) {
            let mut p: Partition = (**slot).clone();
            p.unsorted.push(tf);
            *slot = Arc::new(p);
        }
    }
    st.version = Arc::new(version);
    st.imms.pop_front();
    st.imm_flushed += 1;
    st.log_number = next_log;
    core.install_super_version(&st);
    core.state_cv.notify_all();
    drop(st);
    drop(manifest);

    // The flushed memtable's WAL is no longer needed.
    let _ = std::fs::remove_file(crate::filename::wal_path(&core.dir, wal_number));
    Counters::add(&core.counters.flush_bytes, stats.bytes_written);
    Counters::add(&core.counters.flushes, 1);

    // UniKV §III-G: checkpoint a partition's index every half
    // `unsorted_limit` of flushed bytes, so open replays few tables.
    let due: Vec<u64> = {
        let mut st = core.state.lock();
        for (pid, f) in &files {
            *st.flushed_since_checkpoint.entry(*pid).or_default() += f.size;
        }
        let half = (core.options.unsorted_limit / 2).max(1);
        st.flushed_since_checkpoint
            .iter()
            .filter(|(_, b)| **b >= half)
            .map(|(p, _)| *p)
            .collect()
    };
    for pid in due {
        checkpoint_index(core, pid)?;
    }
    Ok(())
}

/// Writes partition `pid`'s hash index to a new checkpoint file and records
/// it in the manifest; the previous checkpoint is then deleted. Failing to
/// write the file only loses an optimisation (open rebuilds from the
/// tables); failing to record it poisons, as any manifest failure does.
fn checkpoint_index(core: &Arc<Core>, pid: u64) -> Result<()> {
    let index = {
        let st = core.state.lock();
        match st.version.partitions.iter().find(|p| p.id == pid) {
            Some(p) => Arc::clone(&p.index),
            None => return Ok(()),
        }
    };
    // A consistent image (under the read lock) is all recovery needs: it
    // drops entries of tables no longer live and adds the tables missing.
    let image = index.read().encode();
    let number = core.state.lock().new_file_number();
    let path = crate::filename::index_checkpoint_path(&core.dir, number);
    let written = std::fs::File::create(&path).and_then(|mut f| {
        use std::io::Write;
        f.write_all(&image)?;
        f.sync_all()
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&path);
        return Ok(());
    }
    crate::fault::crash_point("checkpoint.file_written");
    let mut manifest = core.manifest.lock();
    let mut st = core.state.lock();
    let edit = VersionEdit {
        next_file_number: Some(st.next_file_number),
        index_checkpoints: vec![(pid, number)],
        ..Default::default()
    };
    match append_edit(core, &mut manifest, &mut st, &edit) {
        Ok(n) => Counters::add(&core.counters.manifest_bytes, n),
        Err(e) => {
            drop(st);
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
    }
    let old = st.index_checkpoints.insert(pid, number);
    st.flushed_since_checkpoint.insert(pid, 0);
    drop(st);
    drop(manifest);
    if let Some(old) = old {
        let _ = std::fs::remove_file(crate::filename::index_checkpoint_path(&core.dir, old));
    }
    Ok(())
}

/// Adds each new table's keys to its partition's hash index, rebuilding
/// the index bigger (from the tables' keys) when it gets too loaded.
///
/// Partitions are those of the current version: no split runs beside a
/// flush, but a merge may have replaced the UnsortedStore tables an index
/// would be rebuilt from since the flush began.
fn index_new_tables(core: &Core, files: &[(u64, FileMeta)], stats: &JobStats) -> Result<()> {
    let _changes = core.index_changes.lock();
    let version = Arc::clone(&core.state.lock().version);
    for (pid, f) in files {
        let Some(part) = version.partitions.iter().find(|p| p.id == *pid) else {
            continue;
        };
        let Some((_, keys)) = stats.table_keys.iter().find(|(n, _)| *n == f.number) else {
            continue;
        };
        index_table(part, f, keys, core.options.unsorted_limit)?;
    }
    Ok(())
}

/// Adds the new table `f` of `part` to the partition's index. A bigger
/// index, when one is needed, is built from the older tables under the
/// read lock, else the index is copied; the table's keys go into the new
/// one, which is then swapped in ([`replace_index`]): readers keep using
/// the old index meanwhile. The caller holds [`Core::index_changes`], so
/// nothing else changes the index between the two.
fn index_table(part: &Partition, f: &FileMeta, keys: &KeyList, unsorted_limit: u64) -> Result<()> {
    let index = &part.index;
    let mut next = {
        let current = index.read();
        let bigger = grown_index(&current, &part.unsorted, keys.len(), f.size, unsorted_limit)?;
        bigger.unwrap_or_else(|| current.clone())
    };
    install_table(&mut next, None, f.number, keys);
    replace_index(index, next);
    Ok(())
}

/// Opens the tables a job just wrote. If one fails to open, removes them
/// all (no version ever listed them) and returns the error.
fn open_new_tables(core: &Core, files: &[FileMeta]) -> Result<Vec<Arc<TableFile>>> {
    let opened = files
        .iter()
        .map(|f| {
            TableFile::open(
                &core.dir,
                f.clone(),
                &core.cache,
                core.options.block_reads(),
            )
        })
        .collect::<Result<Vec<_>>>();
    if opened.is_err() {
        remove_files(core, files);
    }
    opened
}

/// What a SortedStore rewrite is for.
enum Rewrite {
    /// Merge the UnsortedStore into the SortedStore (UniKV §III-C).
    Merge,
    /// Copy the live values of these value logs to a new log (UniKV §III-C GC).
    Collect(BTreeSet<u64>),
}

/// Merges partition `pid`. A manual request for it is not settled here:
/// a flush may have added a table while the merge ran, so `pick_merge`
/// drops the request only once the partition's UnsortedStore is empty
/// (and `compact()` returns only then).
fn merge_partition(core: &Arc<Core>, pid: u64) -> Result<()> {
    rewrite_partition(core, pid, Rewrite::Merge)
}

/// A partition due for value-log GC and the logs to collect: for garbage
/// first, else (if enabled) for key order.
fn pick_gc(core: &Core, st: &EngineState) -> Option<(u64, BTreeSet<u64>)> {
    pick_gc_for_garbage(core, st).or_else(|| pick_gc_for_order(core, st))
}

/// A partition whose SortedStore points into more than `max_value_logs`
/// logs, and all of them: collected into one log in key order (see
/// [`crate::Options::max_value_logs`]). The most scattered partition first.
fn pick_gc_for_order(core: &Core, st: &EngineState) -> Option<(u64, BTreeSet<u64>)> {
    let max = core.options.max_value_logs;
    let v = &st.version;
    v.partitions
        .iter()
        .map(|p| {
            (
                p.id,
                v.logs_of(p.id).map(|(n, _)| n).collect::<BTreeSet<u64>>(),
            )
        })
        .filter(|(_, logs)| logs.len() > max)
        .max_by_key(|(_, logs)| logs.len())
}

/// A partition whose value logs hold enough garbage to collect, and the
/// logs to collect (UniKV: the partition with the most garbage first).
///
/// A log is a victim when *its own* dead share reaches `gc_garbage_ratio`;
/// the partition is due when its victims hold `gc_min_garbage_bytes`. Judging
/// the partition's logs as a whole would let the newest log — all live, just
/// written by a merge — dilute the ratio and keep fully dead logs forever.
fn pick_gc_for_garbage(core: &Core, st: &EngineState) -> Option<(u64, BTreeSet<u64>)> {
    let opts = &core.options;
    let v = &st.version;
    v.partitions
        .iter()
        .filter_map(|p| {
            let victims: BTreeSet<u64> = v
                .logs_of(p.id)
                .filter(|(_, l)| {
                    l.garbage > 0
                        && l.garbage as f64 >= opts.gc_garbage_ratio * l.file.size() as f64
                })
                .map(|(n, _)| n)
                .collect();
            let garbage: u64 = victims.iter().map(|n| v.value_logs[n].garbage).sum();
            (garbage >= opts.gc_min_garbage_bytes).then_some((garbage, p.id, victims))
        })
        .max_by_key(|(g, _, _)| *g)
        .map(|(_, id, victims)| (id, victims))
}

fn collect_garbage(core: &Arc<Core>, pid: u64, victims: BTreeSet<u64>) -> Result<()> {
    rewrite_partition(core, pid, Rewrite::Collect(victims))
}

/// Input tables of a rewrite (UnsortedStore, SortedStore) and their cursors.
type RewriteInputs = (
    Vec<Arc<TableFile>>,
    Vec<Arc<TableFile>>,
    Vec<Box<dyn InternalIterator>>,
);

/// Rewrites partition `pid`'s SortedStore (merge or GC) in the crash-safe
/// order of the module docs: new tables and value log written and fsynced,
/// one manifest edit swaps them in, then the inputs become obsolete.
fn rewrite_partition(core: &Arc<Core>, pid: u64, job: Rewrite) -> Result<()> {
    let (part, version) = {
        let st = core.state.lock();
        match st.version.partitions.iter().find(|p| p.id == pid) {
            Some(p) => (Arc::clone(p), Arc::clone(&st.version)),
            None => return Ok(()),
        }
    };
    // Bytes of live values GC copies out of each victim log.
    let moved: Arc<parking_lot::Mutex<std::collections::BTreeMap<u64, u64>>> = Default::default();
    let (inputs_unsorted, inputs_sorted, mut children): RewriteInputs = match &job {
        Rewrite::Merge => {
            if part.unsorted.is_empty() {
                return Ok(());
            }
            let unsorted = part.unsorted.clone();
            let lo = unsorted
                .iter()
                .map(|t| t.meta.smallest_user_key())
                .min()
                .unwrap_or(&[])
                .to_vec();
            let hi = unsorted
                .iter()
                .map(|t| t.meta.largest_user_key())
                .max()
                .unwrap_or(&[])
                .to_vec();
            // Sorted tables overlapping the unsorted range form a contiguous run.
            let sorted: Vec<Arc<TableFile>> = part
                .sorted
                .iter()
                .filter(|t| {
                    t.meta.largest_user_key() >= lo.as_slice()
                        && t.meta.smallest_user_key() <= hi.as_slice()
                })
                .cloned()
                .collect();
            let children = unsorted
                .iter()
                .map(|t| {
                    Box::new(t.table.iter_for(ReadPurpose::Background)) as Box<dyn InternalIterator>
                })
                .collect();
            (unsorted, sorted, children)
        }
        Rewrite::Collect(_) => (Vec::new(), part.sorted.clone(), Vec::new()),
    };
    if !inputs_sorted.is_empty() {
        let run: Box<dyn InternalIterator> = Box::new(SortedRunIter::new(
            inputs_sorted.clone(),
            ReadPurpose::Background,
        ));
        children.push(match &job {
            Rewrite::Merge => run,
            Rewrite::Collect(victims) => Box::new(ResolvingIter::new(
                run,
                Arc::clone(&version),
                victims.clone(),
                ValueReader::new(ReadPurpose::Background, Arc::clone(core.cache.disk_reads())),
                Arc::clone(&moved),
            )),
        });
    }
    if children.is_empty() {
        return Ok(());
    }
    let mut input = MergedEntries::new(children);
    input.seek_to_first()?;
    if matches!(job, Rewrite::Merge) {
        crate::fault::pause_point("merge.inputs_open", &core.dir);
    }
    let policy = RetentionPolicy {
        snapshots: core.snapshots.sequences(),
        bottommost: true,
    };
    let blob = core.options.min_blob_size;
    let spec = OutputSpec {
        dir: &core.dir,
        table: core.table_options,
        target_size: core.options.table_size,
        upper: None,
        min_blob_size: (blob != usize::MAX).then_some(blob),
        collect_keys: false,
    };
    let mut stats = JobStats::default();
    let mut new_file = || core.state.lock().new_file_number();
    let outputs = write_tables(&mut input, &policy, &spec, &mut new_file, &mut stats)?;
    let cleanup = |core: &Core| {
        remove_files(core, &outputs);
        if let Some((n, _)) = stats.value_log {
            let _ = std::fs::remove_file(crate::filename::value_log_path(&core.dir, n));
        }
    };
    let opened = open_new_tables(core, &outputs).inspect_err(|_| cleanup(core))?;
    let new_log = match stats.value_log {
        Some((n, size)) => match ValueLogFile::open(&core.dir, n, size) {
            Ok(f) => Some(f),
            Err(e) => {
                cleanup(core);
                return Err(e);
            }
        },
        None => None,
    };

    crate::fault::crash_point(match job {
        Rewrite::Merge => "merge.tables_written",
        Rewrite::Collect(_) => "gc.tables_written",
    });
    let mut manifest = core.manifest.lock();
    let mut st = core.state.lock();
    let victims: BTreeSet<u64> = match &job {
        Rewrite::Collect(v) => v.clone(),
        Rewrite::Merge => BTreeSet::new(),
    };
    let mut edit = VersionEdit {
        next_file_number: Some(st.next_file_number),
        added_files: outputs
            .iter()
            .map(|f| (pid, Placement::Sorted, f.clone()))
            .collect(),
        added_value_logs: stats
            .value_log
            .map(|(n, size)| (pid, n, size))
            .into_iter()
            .collect(),
        dropped_value_logs: victims.iter().map(|n| (pid, *n)).collect(),
        value_log_garbage: stats
            .garbage
            .iter()
            .map(|(n, b)| (*n, *b))
            .chain(moved.lock().iter().map(|(n, b)| (*n, *b)))
            .collect(),
        ..Default::default()
    };
    for t in inputs_unsorted.iter().chain(&inputs_sorted) {
        edit.removed_files.push((pid, t.meta.number));
    }
    match append_edit(core, &mut manifest, &mut st, &edit) {
        Ok(n) => Counters::add(&core.counters.manifest_bytes, n),
        Err(e) => {
            drop(st);
            drop(opened);
            drop(new_log);
            cleanup(core);
            return Err(e);
        }
    }
    crate::fault::crash_point(match job {
        Rewrite::Merge => "merge.manifest_written",
        Rewrite::Collect(_) => "gc.manifest_written",
    });
    let Some(current) = st.version.partitions.iter().find(|p| p.id == pid).cloned() else {
        return Ok(());
    };
    let gone = |t: &Arc<TableFile>| {
        inputs_unsorted
            .iter()
            .chain(&inputs_sorted)
            .any(|i| i.meta.number == t.meta.number)
    };
    let mut p: Partition = (*current).clone();
    p.unsorted.retain(|t| !gone(t));
    p.sorted.retain(|t| !gone(t));
    p.sorted.extend(opened);
    p.sorted
        .sort_by(|a, b| a.meta.smallest_user_key().cmp(b.meta.smallest_user_key()));
    let mut v = st.version.with_partition(p);
    for (n, bytes) in &stats.garbage {
        if let Some(log) = v.value_logs.get_mut(n) {
            log.garbage = log.garbage.saturating_add(*bytes).min(log.file.size());
        }
    }
    let mut dead_logs = Vec::new();
    let moved = moved.lock().clone();
    for n in &victims {
        if let Some(log) = v.value_logs.get_mut(n) {
            log.refs.remove(&pid);
            // Values this partition copied out are dead for the log's other
            // owners (a log shared since a split), so their GC can free it.
            let m = moved.get(n).copied().unwrap_or(0);
            log.garbage = log.garbage.saturating_add(m).min(log.file.size());
            if log.refs.is_empty() {
                if let Some(l) = v.value_logs.remove(n) {
                    dead_logs.push(l.file);
                }
            }
        }
    }
    if let Some(f) = new_log {
        v.value_logs.insert(
            f.number(),
            LiveValueLog {
                file: f,
                garbage: 0,
                refs: BTreeSet::from([pid]),
            },
        );
    }
    st.version = Arc::new(v);
    core.install_super_version(&st);
    core.state_cv.notify_all();
    drop(st);
    drop(manifest);
    // Only now that no new reader can see the merged tables: readers pinned
    // to older versions probe tables the index has forgotten directly.
    let merged: Vec<u64> = inputs_unsorted.iter().map(|t| t.meta.number).collect();
    if !merged.is_empty() {
        let _changes = core.index_changes.lock();
        change_index(&part.index, |index| index.remove_tables(&merged));
    }
    for t in inputs_unsorted.iter().chain(&inputs_sorted) {
        t.mark_obsolete();
    }
    for f in dead_logs {
        f.mark_obsolete();
    }
    match job {
        Rewrite::Merge => {
            let log_bytes = stats.value_log.map_or(0, |(_, size)| size);
            Counters::add(&core.counters.merge_bytes, stats.bytes_written - log_bytes);
            Counters::add(&core.counters.value_log_bytes, log_bytes);
            Counters::add(&core.counters.merges, 1);
        }
        Rewrite::Collect(_) => {
            Counters::add(&core.counters.gc_bytes, stats.bytes_written);
            Counters::add(&core.counters.gcs, 1);
        }
    }
    Ok(())
}

/// Bytes a partition holds: its SortedStore plus its share of the live
/// values in the logs it points into (a log shared after a split counts
/// half in each side).
fn partition_bytes(v: &Version, p: &Partition) -> u64 {
    let logs: u64 = v
        .logs_of(p.id)
        .map(|(_, l)| l.file.size().saturating_sub(l.garbage) / l.refs.len().max(1) as u64)
        .sum();
    p.sorted_bytes() + logs
}

/// A partition past `partition_size` whose SortedStore holds at least two
/// distinct keys (so there is a key to cut at).
fn pick_split(core: &Core, st: &EngineState) -> Option<u64> {
    let v = &st.version;
    v.partitions
        .iter()
        .filter(|p| match (p.sorted.first(), p.sorted.last()) {
            (Some(first), Some(last)) => {
                first.meta.smallest_user_key() < last.meta.largest_user_key()
                    && partition_bytes(v, p) > core.options.partition_size
            }
            _ => false,
        })
        .max_by_key(|p| partition_bytes(v, p))
        .map(|p| p.id)
}

/// The key to split a one-table sorted run at: the first key at or past its
/// middle entry that is greater than its first key.
fn median_key(t: &TableFile) -> Result<Option<Vec<u8>>> {
    let mut it = t.table.iter_for(ReadPurpose::Background);
    it.seek_to_first()?;
    let first = t.meta.smallest_user_key();
    let mut seen = 0;
    while it.valid() {
        if seen * 2 >= t.meta.entries && it.user_key() > first {
            return Ok(Some(it.user_key().to_vec()));
        }
        seen += 1;
        it.next()?;
    }
    // Past the middle every key equalled the first: take any later key.
    it.seek(first, 0)?;
    Ok(it.valid().then(|| it.user_key().to_vec()))
}

/// Splits partition `pid` in two at its median (UniKV §III-D).
///
/// The UnsortedStore is merged first, so the whole partition is one sorted
/// run whose tables never share a user key. With two or more tables the
/// split key is the first key of the table at the byte median and the split
/// is pure metadata: tables move to their side untouched. A run of one table
/// is cut at its median key by rewriting that table into two. Either way,
/// both sides keep pointing into the same value logs (the lazy split of
/// values): each side holds its own reference to every shared log, recorded
/// in the manifest, and a log is deleted when its last reference goes —
/// which GC of each side does as it copies its own live values out. One
/// manifest edit makes the split atomic.
fn split_partition(core: &Arc<Core>, pid: u64) -> Result<()> {
    // No flush for the whole job: one landing between the merge and the
    // split would leave UnsortedStore tables the split cannot divide, and
    // a busy writer could put off the split forever. Splits are rare (one
    // per `partition_size` of growth), so writers wait out one merge.
    let _held = FlushesHeld::new(core);
    rewrite_partition(core, pid, Rewrite::Merge)?;
    // Only this thread changes partitions and no flush runs: the copy stays
    // current.
    let part = {
        let st = core.state.lock();
        match st.version.partitions.iter().find(|p| p.id == pid) {
            Some(p) => Arc::clone(p),
            None => return Ok(()),
        }
    };
    if !part.unsorted.is_empty() || part.sorted.is_empty() {
        return Ok(());
    }
    let (split_key, left_tables, right_tables, rewritten) = if part.sorted.len() >= 2 {
        // The first table at or past half the bytes, never the first table,
        // so both sides are non-empty.
        let total = part.sorted_bytes();
        let mut acc = 0;
        let mut mid = part.sorted.len() - 1;
        for i in 1..part.sorted.len() {
            acc += part.sorted[i - 1].meta.size;
            if acc * 2 >= total {
                mid = i;
                break;
            }
        }
        let key = part.sorted[mid].meta.smallest_user_key().to_vec();
        (
            key,
            part.sorted[..mid].to_vec(),
            part.sorted[mid..].to_vec(),
            None,
        )
    } else {
        let t = &part.sorted[0];
        let Some(key) = median_key(t)? else {
            return Ok(());
        };
        let policy = RetentionPolicy {
            snapshots: core.snapshots.sequences(),
            bottommost: true,
        };
        let mut stats = JobStats::default();
        let mut new_file = || core.state.lock().new_file_number();
        let spec = |upper| OutputSpec {
            dir: &core.dir,
            table: core.table_options,
            target_size: core.options.table_size,
            upper,
            // Values stay where they are: pointers are copied, inline
            // values stay inline.
            min_blob_size: None,
            collect_keys: false,
        };
        let mut input =
            MergedEntries::new(vec![Box::new(t.table.iter_for(ReadPurpose::Background))]);
        input.seek_to_first()?;
        let left = write_tables(
            &mut input,
            &policy,
            &spec(Some(&key)),
            &mut new_file,
            &mut stats,
        )?;
        input.seek(&key, MAX_SEQUENCE)?;
        let right = match write_tables(&mut input, &policy, &spec(None), &mut new_file, &mut stats)
        {
            Ok(r) => r,
            Err(e) => {
                remove_files(core, &left);
                return Err(e);
            }
        };
        let l = open_new_tables(core, &left).inspect_err(|_| remove_files(core, &right))?;
        let r = open_new_tables(core, &right).inspect_err(|_| remove_files(core, &left))?;
        Counters::add(&core.counters.split_bytes, stats.bytes_written);
        (key, l, r, Some(Arc::clone(t)))
    };

    let mut manifest = core.manifest.lock();
    let mut st = core.state.lock();
    debug_assert!(split_key.as_slice() > part.lower.as_slice());
    let (left_id, right_id) = (st.next_partition_id, st.next_partition_id + 1);
    let mut left = Partition::new(left_id, part.lower.clone(), Some(split_key.clone()));
    left.sorted = left_tables;
    let mut right = Partition::new(right_id, split_key, part.upper.clone());
    right.sorted = right_tables;
    let shared: Vec<(u64, u64)> = st
        .version
        .logs_of(pid)
        .map(|(n, l)| (n, l.file.size()))
        .collect();
    let mut edit = VersionEdit {
        next_file_number: Some(st.next_file_number),
        new_partitions: vec![
            (left_id, left.lower.clone(), left.upper.clone()),
            (right_id, right.lower.clone(), right.upper.clone()),
        ],
        removed_partitions: vec![pid],
        ..Default::default()
    };
    for t in &part.sorted {
        edit.removed_files.push((pid, t.meta.number));
    }
    for (side, p) in [(left_id, &left), (right_id, &right)] {
        for t in &p.sorted {
            edit.added_files
                .push((side, Placement::Sorted, t.meta.clone()));
        }
    }
    for (n, size) in &shared {
        edit.added_value_logs.push((left_id, *n, *size));
        edit.added_value_logs.push((right_id, *n, *size));
        edit.dropped_value_logs.push((pid, *n));
    }
    let written: Vec<FileMeta> = match &rewritten {
        Some(_) => left
            .sorted
            .iter()
            .chain(&right.sorted)
            .map(|t| t.meta.clone())
            .collect(),
        None => Vec::new(),
    };
    match append_edit(core, &mut manifest, &mut st, &edit) {
        Ok(n) => Counters::add(&core.counters.manifest_bytes, n),
        Err(e) => {
            drop(st);
            drop((left, right));
            remove_files(core, &written);
            return Err(e);
        }
    }
    crate::fault::crash_point("split.manifest_written");
    st.next_partition_id += 2;
    // The split partition's index checkpoint went with it (the manifest
    // forgets checkpoints of removed partitions).
    st.flushed_since_checkpoint.remove(&pid);
    if let Some(old) = st.index_checkpoints.remove(&pid) {
        let _ = std::fs::remove_file(crate::filename::index_checkpoint_path(&core.dir, old));
    }
    let mut v = (*st.version).clone();
    let at = v
        .partitions
        .iter()
        .position(|p| p.id == pid)
        .expect("partition found above");
    v.partitions
        .splice(at..=at, [Arc::new(left), Arc::new(right)]);
    for (n, _) in &shared {
        if let Some(log) = v.value_logs.get_mut(n) {
            log.refs.remove(&pid);
            log.refs.insert(left_id);
            log.refs.insert(right_id);
        }
    }
    st.version = Arc::new(v);
    core.install_super_version(&st);
    core.state_cv.notify_all();
    drop(st);
    drop(manifest);
    if let Some(t) = rewritten {
        t.mark_obsolete();
    }
    Counters::add(&core.counters.splits, 1);
    Ok(())
}

/// A partition whose UnsortedStore has more than `scan_merge_limit` tables
/// while scans are running (UniKV §III-F).
fn pick_consolidation(core: &Core, st: &EngineState) -> Option<u64> {
    if core
        .counters
        .scans_since_consolidation
        .load(std::sync::atomic::Ordering::Relaxed)
        == 0
    {
        return None;
    }
    st.version
        .partitions
        .iter()
        .filter(|p| p.unsorted.len() > core.options.scan_merge_limit)
        .max_by_key(|p| p.unsorted.len())
        .map(|p| p.id)
}

/// Rewrites partition `pid`'s UnsortedStore tables into one sorted table
/// that stays in the UnsortedStore (values inline, tombstones kept: older
/// data may sit in the SortedStore), so scans merge one cursor there
/// instead of many. The new table is indexed before it becomes visible; the
/// inputs leave the index after.
fn consolidate_unsorted(core: &Arc<Core>, pid: u64) -> Result<()> {
    // The output must be older than every table flushed after its inputs
    // (recovery orders an UnsortedStore by manifest order): no flush runs
    // meanwhile.
    let _held = FlushesHeld::new(core);
    core.counters
        .scans_since_consolidation
        .store(0, std::sync::atomic::Ordering::Relaxed);
    let part = {
        let st = core.state.lock();
        match st.version.partitions.iter().find(|p| p.id == pid) {
            Some(p) => Arc::clone(p),
            None => return Ok(()),
        }
    };
    if part.unsorted.len() < 2 {
        return Ok(());
    }
    let inputs = part.unsorted.clone();
    let children = inputs
        .iter()
        .map(|t| Box::new(t.table.iter_for(ReadPurpose::Background)) as Box<dyn InternalIterator>)
        .collect();
    let mut input = MergedEntries::new(children);
    input.seek_to_first()?;
    let policy = RetentionPolicy {
        snapshots: core.snapshots.sequences(),
        bottommost: false,
    };
    let spec = OutputSpec {
        dir: &core.dir,
        table: core.table_options.for_unsorted_store(),
        target_size: u64::MAX,
        upper: None,
        min_blob_size: None,
        collect_keys: true,
    };
    let mut stats = JobStats::default();
    let mut new_file = || core.state.lock().new_file_number();
    let outputs = write_tables(&mut input, &policy, &spec, &mut new_file, &mut stats)?;
    let opened = open_new_tables(core, &outputs)?;
    crate::fault::crash_point("consolidate.tables_written");
    {
        let _changes = core.index_changes.lock();
        for t in &opened {
            if let Some((_, keys)) = stats.table_keys.iter().find(|(n, _)| *n == t.meta.number) {
                index_table(&part, &t.meta, keys, core.options.unsorted_limit)?;
            }
        }
    }
    let mut manifest = core.manifest.lock();
    let mut st = core.state.lock();
    let mut edit = VersionEdit {
        next_file_number: Some(st.next_file_number),
        added_files: outputs
            .iter()
            .map(|f| (pid, Placement::Unsorted, f.clone()))
            .collect(),
        ..Default::default()
    };
    for t in &inputs {
        edit.removed_files.push((pid, t.meta.number));
    }
    match append_edit(core, &mut manifest, &mut st, &edit) {
        Ok(n) => Counters::add(&core.counters.manifest_bytes, n),
        Err(e) => {
            drop(st);
            drop(opened);
            remove_files(core, &outputs);
            return Err(e);
        }
    }
    crate::fault::crash_point("consolidate.manifest_written");
    let Some(current) = st.version.partitions.iter().find(|p| p.id == pid).cloned() else {
        return Ok(());
    };
    let mut p: Partition = (*current).clone();
    p.unsorted
        .retain(|t| !inputs.iter().any(|i| i.meta.number == t.meta.number));
    // The consolidated table holds data older than any table flushed since
    // (none: flushes are held) and newer than the SortedStore: it goes first.
    let mut unsorted = opened;
    unsorted.append(&mut p.unsorted);
    p.unsorted = unsorted;
    st.version = Arc::new(st.version.with_partition(p));
    core.install_super_version(&st);
    core.state_cv.notify_all();
    drop(st);
    drop(manifest);
    let numbers: Vec<u64> = inputs.iter().map(|t| t.meta.number).collect();
    let _changes = core.index_changes.lock();
    change_index(&part.index, |index| index.remove_tables(&numbers));
    for t in &inputs {
        t.mark_obsolete();
    }
    Counters::add(&core.counters.consolidation_bytes, stats.bytes_written);
    Counters::add(&core.counters.consolidations, 1);
    Ok(())
}
