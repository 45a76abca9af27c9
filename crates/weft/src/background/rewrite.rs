//! A SortedStore rewrite, the work shared by merge ([`super::merge`]) and
//! value-log GC ([`super::gc`]): both read part of a partition, write new
//! SortedStore tables (and maybe a value log), and swap them in for their
//! inputs with one manifest edit.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use parking_lot::Mutex;

use super::commit::{commit_edit, open_new_tables, NewFiles};
use crate::db::core::{Core, Counters};
use crate::error::Result;
use crate::iter::{InternalIterator, MergedEntries};
use crate::key::SequenceNumber;
use crate::manifest::VersionEdit;
use crate::range_delete::{RangeTombstone, RangeTombstoneSet};
use crate::stats::ReadPurpose;
use crate::store::compaction::{
    write_tables, JobFilter, JobStats, KeyspaceOutputs, Layer, OutputSpec, RetentionPolicy,
};
use crate::store::gc::ResolvingIter;
use crate::store::sorted_run::SortedRunIter;
use crate::store::value_log::ValueLogFile;
use crate::store::value_reader::ValueReader;
use crate::store::{change_index, LiveValueLog, Partition, Placement, TableFile};

/// What a SortedStore rewrite is for.
#[derive(Clone)]
pub(super) enum Rewrite {
    /// Merge the UnsortedStore into the SortedStore (UniKV §III-C).
    Merge,
    /// Copy the live values of these value logs to a new log (UniKV §III-C GC).
    Collect(BTreeSet<u64>),
}

/// Input tables of a rewrite (UnsortedStore, SortedStore) and their cursors.
type RewriteInputs = (
    Vec<Arc<TableFile>>,
    Vec<Arc<TableFile>>,
    Vec<Box<dyn InternalIterator>>,
);

/// The inputs of a merge: every UnsortedStore table, and the SortedStore
/// tables that overlap the span from the first key to the last of those
/// tables and of the range deletes the merge applies (a contiguous run:
/// the outputs cover that span, so a table left out inside it would
/// overlap them); cursors only over the UnsortedStore (the caller adds
/// one over the sorted run).
fn merge_inputs(part: &Partition, range_deletes: &[RangeTombstone]) -> RewriteInputs {
    let unsorted = part.unsorted.clone();
    // The span: from `lo`, up to `hi` inclusive or below `end`.
    let lo = (unsorted.iter().map(|t| t.meta.smallest_user_key()))
        .chain(range_deletes.iter().map(|d| d.start.as_slice()))
        .min();
    let hi = unsorted.iter().map(|t| t.meta.largest_user_key()).max();
    let end = range_deletes.iter().map(|d| d.end.as_slice()).max();
    let sorted: Vec<Arc<TableFile>> = match lo {
        None => Vec::new(),
        Some(lo) => (part.sorted.iter())
            .filter(|t| {
                let first = t.meta.smallest_user_key();
                t.meta.largest_user_key() >= lo
                    && (hi.is_some_and(|hi| first <= hi) || end.is_some_and(|end| first < end))
            })
            .cloned()
            .collect(),
    };
    let children = super::table_cursors(&unsorted);
    (unsorted, sorted, children)
}

/// Rewrites partition `pid`'s SortedStore (merge or GC) in the crash-safe
/// order of the module docs: new tables and value log written and fsynced,
/// one manifest edit swaps them in, then the inputs become obsolete.
///
/// A rewrite whose compaction filter removed a version that a snapshot
/// made while it ran could see gives up its outputs and runs again
/// without the filter (which then cannot conflict): a stream of snapshots
/// must not keep a partition from ever being merged.
pub(super) fn rewrite_partition(core: &Arc<Core>, pid: u64, job: Rewrite) -> Result<()> {
    let filtering = core.options.compaction_filter.is_some();
    match rewrite_partition_once(core, pid, job.clone(), filtering)? {
        Committed::Conflict => rewrite_partition_once(core, pid, job, false).map(drop),
        Committed::Done => Ok(()),
    }
}

/// How a rewrite attempt ended.
enum Committed {
    /// Installed, or nothing to do.
    Done,
    /// Given up: its filter removed what a newer snapshot may have read.
    Conflict,
}

fn rewrite_partition_once(
    core: &Arc<Core>,
    pid: u64,
    job: Rewrite,
    filtering: bool,
) -> Result<Committed> {
    let Some((part, version)) = super::pin_partition(core, pid) else {
        return Ok(Committed::Done);
    };
    // A munk of the partition must hold every input to outlive the job
    // (relabeled at the install): fold in what it lacks first.
    super::munk::fold_new_tables(core, &part, &version)?;
    // Bytes of live values GC copies out of each victim log.
    let moved: Arc<Mutex<BTreeMap<u64, u64>>> = Default::default();
    // The range deletes pending here: the job sees every version they may
    // cover in this partition (all of them are in tables of the pinned
    // version, flushed no later than the deletes), so it applies them.
    let range_deletes = version.range_tombstones.pending_in(pid);
    let applied: Vec<SequenceNumber> = range_deletes.iter().map(|t| t.seq).collect();
    let range_delete_set = RangeTombstoneSet::new(&range_deletes);
    let (inputs_unsorted, inputs_sorted, mut children): RewriteInputs = match &job {
        Rewrite::Merge if part.unsorted.is_empty() && range_deletes.is_empty() => {
            return Ok(Committed::Done)
        }
        Rewrite::Merge => merge_inputs(&part, &range_deletes),
        // The whole partition: UnsortedStore tables may point into a victim
        // too (a flushed WAL kept as a value log, `Options::values_in_wal`),
        // and the reference is dropped only once no table of the partition
        // points into it. So a GC is a merge that also moves values.
        Rewrite::Collect(_) => {
            let (unsorted, _, children) = merge_inputs(&part, &[]);
            (unsorted, part.sorted.clone(), children)
        }
    };
    if !inputs_sorted.is_empty() {
        children.push(Box::new(SortedRunIter::new(
            inputs_sorted.clone(),
            ReadPurpose::Background,
        )));
    }
    if let Rewrite::Collect(victims) = &job {
        children = children
            .into_iter()
            .map(|child| {
                Box::new(ResolvingIter::new(
                    child,
                    Arc::clone(&version),
                    victims.clone(),
                    ValueReader::new(ReadPurpose::Background, Arc::clone(core.cache.disk_reads())),
                    Arc::clone(&moved),
                )) as Box<dyn InternalIterator>
            })
            .collect();
    }
    if children.is_empty() && applied.is_empty() {
        return Ok(Committed::Done);
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
    // Separated values the filter asks for, read through the version the
    // job pinned (every log its inputs point into is live in it).
    let values = RefCell::new(ValueReader::new(
        ReadPurpose::Background,
        Arc::clone(core.cache.disk_reads()),
    ));
    let resolve = |raw: &[u8]| values.borrow_mut().read(&version, raw);
    let filter = (core.options.compaction_filter.as_deref())
        .filter(|_| filtering)
        .map(|filter| JobFilter {
            filter,
            resolve: &resolve,
        });
    let settings = core.keyspace_settings.load_full();
    let spec = OutputSpec {
        fs: &core.job_fs,
        dir: &core.dir,
        table: core.table_options,
        target_size: core.options.table_size,
        upper: None,
        min_blob_size: (blob != usize::MAX).then_some(blob),
        value_log_compression: core.options.value_log_compression,
        filter,
        range_tombstones: (!range_delete_set.is_empty()).then_some(&range_delete_set),
        collect_keys: false,
        logged: None,
        keyspaces: Some(KeyspaceOutputs {
            settings: &settings,
            layer: Layer::Sorted,
            separates: true,
        }),
    };
    let mut stats = JobStats::default();
    let mut new_file = || core.state.lock().new_file_number();
    let outputs = write_tables(&mut input, &policy, &spec, &mut new_file, &mut stats)?;
    let mut new_files = NewFiles::new(&core.fs, &core.dir);
    new_files.add_tables(&outputs);
    if let Some((n, _)) = stats.value_log {
        new_files.add_value_log(n);
    }
    let opened = open_new_tables(core, &outputs)?;
    let new_log = match stats.value_log {
        Some((n, size)) => Some(ValueLogFile::open(&core.fs, &core.dir, n, size)?),
        None => None,
    };
    // Every input has been read: what GC copied out of each log is final.
    let moved = moved.lock().clone();
    let victims: BTreeSet<u64> = match &job {
        Rewrite::Collect(v) => v.clone(),
        Rewrite::Merge => BTreeSet::new(),
    };
    let inputs = || inputs_unsorted.iter().chain(&inputs_sorted);

    crate::fault::crash_point(match job {
        Rewrite::Merge => "merge.tables_written",
        Rewrite::Collect(_) => "gc.tables_written",
    });
    let manifest_written = match job {
        Rewrite::Merge => "merge.manifest_written",
        Rewrite::Collect(_) => "gc.manifest_written",
    };
    let mut conflict = false;
    let dead_logs = commit_edit(
        core,
        new_files,
        Some(manifest_written),
        |st| {
            // Never gone (the partition is busy with this job, so no split
            // removes it), but if it were there would be nothing to swap
            // the outputs into.
            let current = Arc::clone(st.version.partition(pid)?);
            // Removals are safe for the snapshots the job knew of; one made
            // since may have read a removed version.
            let creation = stats
                .filtered_from
                .map(|from| (from, core.snapshots.hold_creation()));
            if let Some((from, _)) = creation {
                if (core.snapshots.sequences().last()).is_some_and(|&s| s >= from) {
                    Counters::add(&core.counters.filter_conflicts, 1);
                    conflict = true;
                    return None;
                }
            }
            let creation = creation.map(|(_, guard)| guard);
            // The range deletes applied here are pending here no more.
            let range_tombstones = st.version.range_tombstones.applied_in(pid, &applied);
            let edit = VersionEdit {
                next_file_number: Some(st.next_file_number),
                added_value_logs: stats
                    .value_log
                    .map(|(n, size)| (pid, n, size))
                    .into_iter()
                    .collect(),
                dropped_value_logs: victims.iter().map(|n| (pid, *n)).collect(),
                value_log_garbage: stats
                    .garbage
                    .iter()
                    .chain(&moved)
                    .map(|(n, b)| (*n, *b))
                    .collect(),
                range_tombstones: range_tombstones.clone(),
                ..VersionEdit::replace_tables(
                    pid,
                    Placement::Sorted,
                    &outputs,
                    inputs().map(|t| t.meta.number),
                )
            };
            Some((edit, (current, creation, range_tombstones)))
        },
        |st, (current, creation, range_tombstones)| {
            let gone = |t: &Arc<TableFile>| inputs().any(|i| i.meta.number == t.meta.number);
            let mut p: Partition = (*current).clone();
            p.unsorted.retain(|t| !gone(t));
            p.sorted.retain(|t| !gone(t));
            p.sorted.extend(opened);
            p.sorted
                .sort_by(|a, b| a.meta.smallest_user_key().cmp(b.meta.smallest_user_key()));
            if stats.filtered == 0 && applied.is_empty() {
                super::munk::relabel(core, &p, inputs().map(|t| t.meta.number));
            } else {
                // The munk still holds the versions the filter or a range
                // delete removed, and lacks the point deletes a range
                // delete left for older snapshots: relabeled, it would go
                // on serving them once the range delete is gone.
                super::munk::evict(core, &p);
            }
            let mut v = st.version.with_partition(p);
            if !range_tombstones.is_empty() {
                v.range_tombstones = Arc::new(v.range_tombstones.with(range_tombstones));
            }
            for (n, bytes) in &stats.garbage {
                if let Some(log) = v.value_logs.get_mut(n) {
                    log.garbage = log.garbage.saturating_add(*bytes).min(log.file.size());
                }
            }
            let mut dead_logs = Vec::new();
            for n in &victims {
                if let Some(log) = v.value_logs.get_mut(n) {
                    log.refs.remove(&pid);
                    log.shares.remove(&pid);
                    // Values this partition copied out are dead for the log's
                    // other owners (a log shared since a split), so their GC
                    // can free it.
                    let m = moved.get(n).copied().unwrap_or(0);
                    log.garbage = log.garbage.saturating_add(m).min(log.file.size());
                    if log.refs.is_empty() {
                        // A WAL the change feed retains stays, feed-only,
                        // until no hold pins it (`db::feed` deletes it).
                        let retained = st.feed.retained.contains_key(n);
                        if let Some(l) = v.value_logs.remove(n).filter(|_| !retained) {
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
                        shares: Default::default(),
                    },
                );
            }
            st.version = Arc::new(v);
            // Released once `commit_edit` has published the new version.
            (dead_logs, creation)
        },
    )?;
    let Some((dead_logs, creation)) = dead_logs else {
        return Ok(if conflict {
            Committed::Conflict
        } else {
            Committed::Done
        });
    };
    drop(creation);
    // Only now that no new reader can see the merged tables: readers pinned
    // to older versions probe tables the index has forgotten directly.
    let merged: Vec<u64> = inputs_unsorted.iter().map(|t| t.meta.number).collect();
    if !merged.is_empty() {
        let _changes = part.index_changes.lock();
        change_index(&part.index, |index| index.remove_tables(&merged));
    }
    for t in inputs() {
        t.mark_obsolete();
    }
    for f in dead_logs {
        f.mark_obsolete();
    }
    Counters::add(&core.counters.filtered, stats.filtered);
    Counters::add(&core.counters.range_deleted, stats.range_deleted);
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
    Ok(Committed::Done)
}
