//! Background work: flushing immutable memtables into UnsortedStore tables
//! and merging UnsortedStores into SortedStores.
//!
//! One thread does both, flushes first: with two cores, a second background
//! thread would only compete with the writers it is meant to unblock.
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

use std::sync::Arc;

use crate::db::core::{Core, Counters, EngineState};
use crate::error::Result;
use crate::iter::{InternalIterator, MergedEntries};
use crate::key::MAX_SEQUENCE;
use crate::manifest::VersionEdit;
use crate::memtable::Memtable;
use crate::store::compaction::{write_tables, JobStats, OutputSpec, RetentionPolicy};
use crate::store::sorted_run::SortedRunIter;
use crate::store::{FileMeta, Partition, Placement, TableFile, Version};

enum Job {
    Flush,
    Merge(u64),
}

/// The background thread's loop; returns at shutdown.
pub(crate) fn run(core: Arc<Core>) {
    loop {
        let job = {
            let mut st = core.state.lock();
            loop {
                if st.shutting_down {
                    return;
                }
                if !core.is_poisoned() {
                    if !st.imms.is_empty() {
                        break Job::Flush;
                    }
                    if let Some(p) = pick_merge(&core, &mut st) {
                        break Job::Merge(p);
                    }
                }
                core.state_cv.wait(&mut st);
            }
        };
        let result = match job {
            Job::Flush => flush_oldest(&core),
            Job::Merge(p) => merge_partition(&core, p),
        };
        if let Err(e) = result {
            core.poison(&e);
        }
        let _st = core.state.lock();
        core.state_cv.notify_all();
    }
}

/// A partition whose UnsortedStore passed the limit, or one a manual
/// compaction asked for.
fn pick_merge(core: &Core, st: &mut EngineState) -> Option<u64> {
    while let Some(&p) = st.manual_merges.iter().next() {
        let has_unsorted = st
            .version
            .partitions
            .iter()
            .any(|x| x.id == p && !x.unsorted.is_empty());
        if has_unsorted {
            return Some(p);
        }
        // Nothing to merge there: the request is done; `compact()` waits on it.
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
            table: table_options,
            target_size: u64::MAX,
            upper: upper.as_deref(),
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
    let opened = open_all(core, &files);
    let opened = match opened {
        Ok(o) => o,
        Err(e) => {
            remove_files(
                core,
                &files.iter().map(|(_, f)| f.clone()).collect::<Vec<_>>(),
            );
            return Err(e);
        }
    };

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
    match st.manifest.append(&edit) {
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

    // The flushed memtable's WAL is no longer needed.
    let _ = std::fs::remove_file(crate::filename::wal_path(&core.dir, wal_number));
    Counters::add(&core.counters.flush_bytes, stats.bytes_written);
    Counters::add(&core.counters.flushes, 1);
    Ok(())
}

fn open_all(core: &Core, files: &[(u64, FileMeta)]) -> Result<Vec<(u64, Arc<TableFile>)>> {
    files
        .iter()
        .map(|(p, f)| Ok((*p, TableFile::open(&core.dir, f.clone(), &core.cache)?)))
        .collect()
}

fn merge_partition(core: &Arc<Core>, pid: u64) -> Result<()> {
    let part = {
        let mut st = core.state.lock();
        st.manual_merges.remove(&pid);
        match st.version.partitions.iter().find(|p| p.id == pid) {
            Some(p) => Arc::clone(p),
            None => return Ok(()),
        }
    };
    if part.unsorted.is_empty() {
        return Ok(());
    }
    let inputs_unsorted: Vec<Arc<TableFile>> = part.unsorted.clone();
    let lo = inputs_unsorted
        .iter()
        .map(|t| t.meta.smallest_user_key())
        .min()
        .unwrap_or(&[])
        .to_vec();
    let hi = inputs_unsorted
        .iter()
        .map(|t| t.meta.largest_user_key())
        .max()
        .unwrap_or(&[])
        .to_vec();
    // Sorted tables overlapping the unsorted range form a contiguous run.
    let inputs_sorted: Vec<Arc<TableFile>> = part
        .sorted
        .iter()
        .filter(|t| {
            t.meta.largest_user_key() >= lo.as_slice()
                && t.meta.smallest_user_key() <= hi.as_slice()
        })
        .cloned()
        .collect();

    let mut children: Vec<Box<dyn InternalIterator>> = inputs_unsorted
        .iter()
        .map(|t| Box::new(t.table.iter_with_fill_cache(false)) as Box<dyn InternalIterator>)
        .collect();
    if !inputs_sorted.is_empty() {
        children.push(Box::new(SortedRunIter::new(inputs_sorted.clone(), false)));
    }
    let mut input = MergedEntries::new(children);
    input.seek_to_first()?;
    let policy = RetentionPolicy {
        snapshots: core.snapshots.sequences(),
        bottommost: true,
    };
    let spec = OutputSpec {
        dir: &core.dir,
        table: core.table_options,
        target_size: core.options.table_size,
        upper: None,
    };
    let mut stats = JobStats::default();
    let mut new_file = || core.state.lock().new_file_number();
    let outputs = write_tables(&mut input, &policy, &spec, &mut new_file, &mut stats)?;
    let opened: Vec<Arc<TableFile>> = match outputs
        .iter()
        .map(|f| TableFile::open(&core.dir, f.clone(), &core.cache))
        .collect::<Result<_>>()
    {
        Ok(o) => o,
        Err(e) => {
            remove_files(core, &outputs);
            return Err(e);
        }
    };

    let mut st = core.state.lock();
    let mut edit = VersionEdit {
        next_file_number: Some(st.next_file_number),
        added_files: outputs
            .iter()
            .map(|f| (pid, Placement::Sorted, f.clone()))
            .collect(),
        ..Default::default()
    };
    for t in inputs_unsorted.iter().chain(&inputs_sorted) {
        edit.removed_files.push((pid, t.meta.number));
    }
    match st.manifest.append(&edit) {
        Ok(n) => Counters::add(&core.counters.manifest_bytes, n),
        Err(e) => {
            drop(st);
            drop(opened);
            remove_files(core, &outputs);
            return Err(e);
        }
    }
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
    st.version = Arc::new(st.version.with_partition(p));
    core.install_super_version(&st);
    core.state_cv.notify_all();
    drop(st);
    for t in inputs_unsorted.iter().chain(&inputs_sorted) {
        t.mark_obsolete();
    }
    Counters::add(&core.counters.merge_bytes, stats.bytes_written);
    Counters::add(&core.counters.merges, 1);
    Ok(())
}
