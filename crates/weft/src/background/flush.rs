//! Flush: writes the oldest immutable memtable into one UnsortedStore
//! table per partition it touches, indexes them, makes them live, and
//! deletes the memtable's WAL — or, when the tables point at values logged
//! in it (`Options::values_in_wal`), keeps it as a value log, and when a
//! change-feed hold needs its batches, retains it for the feed
//! (`db::feed`).

use std::sync::Arc;

use super::checkpoint::checkpoint_index;
use super::commit::{commit_edit, open_new_tables, NewFiles};
use crate::db::core::{Core, Counters};
use crate::error::Result;
use crate::iter::MergedEntries;
use crate::key::MAX_SEQUENCE;
use crate::keyspace_options::KeyspaceSettings;
use crate::manifest::{RetainedWal, VersionEdit};
use crate::memtable::Memtable;
use crate::store::compaction::{
    write_tables, JobStats, KeyspaceOutputs, Layer, OutputSpec, RetentionPolicy,
};
use crate::store::logged_values::LoggedValues;
use crate::store::value_log::ValueLogFile;
use crate::store::{
    grown_index, install_table, replace_index, FileMeta, KeyList, LiveValueLog, Partition,
    Placement, TableFile, Version,
};

/// A partition's id, inclusive lower and exclusive upper bound.
pub(crate) type PartitionBounds = (u64, Vec<u8>, Option<Vec<u8>>);

/// Writes `mem` into one UnsortedStore table per partition it touches.
/// Returns the tables written, by partition id; on failure none is left
/// behind. Recovery (`db::open`) flushes the memtables it replays with it
/// too, before any version or manifest exists.
///
/// With `logged` (the puts logged in `mem`'s WAL), a put logged there is
/// written as a pointer into the WAL; the partitions whose tables hold
/// such a pointer are added to `stats.logged_partitions`. Recovery passes
/// none: its tables hold every value, and the WALs it replayed are
/// deleted as before (DESIGN §5.9).
#[allow(clippy::too_many_arguments)] // open calls it before a Core exists
pub(crate) fn write_memtable(
    fs: &crate::util::fs::Fs,
    core_dir: &std::path::Path,
    table_options: crate::table::TableOptions,
    mem: &Arc<dyn Memtable>,
    partitions: &[PartitionBounds],
    snapshots: Vec<u64>,
    logged: Option<&LoggedValues>,
    keyspaces: Option<&KeyspaceSettings>,
    new_file: &mut dyn FnMut() -> u64,
    stats: &mut JobStats,
) -> Result<Vec<(u64, FileMeta)>> {
    let policy = RetentionPolicy {
        snapshots,
        bottommost: false,
    };
    // Tables of the partitions already written go if a later one fails
    // (`write_tables` removes its own partial output).
    let mut written = NewFiles::new(fs, core_dir);
    let mut out = Vec::new();
    for (id, lower, upper) in partitions {
        let mut input = MergedEntries::new(vec![Arc::clone(mem).iter()]);
        input.seek(lower, MAX_SEQUENCE)?;
        let spec = OutputSpec {
            fs,
            dir: core_dir,
            table: table_options.for_unsorted_store(),
            target_size: u64::MAX,
            upper: upper.as_deref(),
            min_blob_size: None,
            value_log_compression: crate::Compression::None,
            filter: None,
            range_tombstones: None,
            collect_keys: true,
            logged,
            keyspaces: keyspaces.map(|settings| KeyspaceOutputs {
                settings,
                layer: Layer::Unsorted,
                separates: false,
            }),
        };
        let logged_before = stats.logged_bytes;
        let files = write_tables(&mut input, &policy, &spec, new_file, stats)?;
        if stats.logged_bytes > logged_before {
            (stats.logged_partitions).push((*id, stats.logged_bytes - logged_before));
        }
        written.add_tables(&files);
        out.extend(files.into_iter().map(|f| (*id, f)));
    }
    // The caller's own guard takes them on from here.
    written.keep();
    Ok(out)
}

fn partition_bounds(v: &Version) -> Vec<PartitionBounds> {
    v.partitions
        .iter()
        .map(|p| (p.id, p.lower.clone(), p.upper.clone()))
        .collect()
}

/// Flushes the oldest immutable memtable, then checkpoints the indexes
/// that are due.
pub(super) fn flush_oldest(core: &Arc<Core>) -> Result<()> {
    let (mem, wal_number, wal_size, has_logged_puts, wal_range, bounds) = {
        let st = core.state.lock();
        let Some(imm) = st.imms.front() else {
            return Ok(());
        };
        (
            Arc::clone(&imm.mem),
            imm.wal_number,
            imm.wal_size,
            imm.wal_has_logged_puts,
            RetainedWal {
                size: imm.wal_size,
                first_seq: imm.first_sequence,
                last_seq: imm.last_sequence,
            },
            partition_bounds(&st.version),
        )
    };
    let last_sequence = wal_range.last_seq;
    // Writers that took their sequences before the rotation may still be
    // inserting into it.
    core.wait_visible(last_sequence);
    // Its WAL (and any older one still waiting) is made durable first, as
    // it would have been at rotation (see `ClosedWals`).
    crate::fault::pause_point("flush.started", &core.dir);
    core.closed_wals.sync_through(wal_number)?;
    // Every sequence up to this WAL's last is in it or an older WAL.
    core.note_durable(last_sequence);
    // Values logged in the WAL stay there: the tables point at them.
    let wal_path = crate::filename::wal_path(&core.dir, wal_number);
    // A WAL without one (small values only) is not read back.
    let logged = match has_logged_puts {
        true => Some(LoggedValues::read(
            &*core.fs, &wal_path, wal_number, wal_size,
        )?),
        false => None,
    };
    let mut stats = JobStats::default();
    let mut new_file = || core.state.lock().new_file_number();
    let files = write_memtable(
        &core.fs,
        &core.dir,
        core.table_options,
        &mem,
        &bounds,
        core.snapshots.sequences(),
        logged.as_ref().filter(|l| !l.is_empty()),
        Some(&core.keyspace_settings.load_full()),
        &mut new_file,
        &mut stats,
    )?;
    let metas: Vec<FileMeta> = files.iter().map(|(_, f)| f.clone()).collect();
    let mut new_files = NewFiles::new(&core.fs, &core.dir);
    new_files.add_tables(&metas);
    crate::fault::crash_point("flush.tables_written");
    // Index the new tables before any version lists them, so a reader that
    // sees a table always finds it through the index (UniKV §III-B).
    index_new_tables(core, &files, &stats)?;
    let opened: Vec<(u64, Arc<TableFile>)> = files
        .iter()
        .map(|(p, _)| *p)
        .zip(open_new_tables(core, &metas)?)
        .collect();
    // The WAL stays, as a value log, when any table points into it; what
    // no table points at (keys, small values, deletes, overwritten
    // values) is its garbage from the start.
    let kept_wal = match stats.logged_partitions.is_empty() {
        true => None,
        false => Some(ValueLogFile::open_path(
            &core.fs,
            wal_path.clone(),
            wal_number,
            wal_size,
        )?),
    };
    let wal_garbage = wal_size.saturating_sub(stats.logged_bytes);

    let retained = commit_edit(
        core,
        new_files,
        Some("flush.manifest_written"),
        |st| {
            debug_assert!(st.imms.front().is_some_and(|i| Arc::ptr_eq(&i.mem, &mem)));
            let next_log = st.imms.get(1).map(|i| i.wal_number).unwrap_or(st.mem_wal);
            let kept = kept_wal.is_some();
            // A change-feed hold that needs a sequence of this WAL keeps
            // it (`db::feed`), decided under the manifest lock, so a hold
            // set meanwhile is either seen here or set after the WAL is
            // gone from the feed's sources.
            let retain = st.feed.pins(wal_range.last_seq);
            // The memtable's range deletes, pending in every partition they
            // overlap (its writes all inserted: `wait_visible` above).
            let range_tombstones: Vec<_> = (mem.range_tombstones().all().into_iter())
                .filter_map(|t| st.version.stored_range_tombstone(t))
                .collect();
            let edit = VersionEdit {
                log_number: Some(next_log),
                next_file_number: Some(st.next_file_number),
                last_sequence: Some(core.visible()),
                added_files: files
                    .iter()
                    .map(|(p, f)| (*p, Placement::Unsorted, f.clone()))
                    .collect(),
                added_value_logs: (stats.logged_partitions.iter())
                    .map(|(p, _)| (*p, wal_number, wal_size))
                    .collect(),
                value_log_garbage: (kept && wal_garbage > 0)
                    .then_some((wal_number, wal_garbage))
                    .into_iter()
                    .collect(),
                retained_wals: (retain.then_some((wal_number, wal_range)))
                    .into_iter()
                    .collect(),
                range_tombstones: range_tombstones.clone(),
                ..Default::default()
            };
            Some((edit, (next_log, retain, range_tombstones)))
        },
        |st, (next_log, retain, range_tombstones)| {
            let mut version = (*st.version).clone();
            if !range_tombstones.is_empty() {
                version.range_tombstones =
                    Arc::new(version.range_tombstones.with(range_tombstones));
            }
            for (pid, tf) in opened {
                // Copied on the first table a partition gets (its `Arc` is
                // shared with the version readers hold), then added to.
                if let Some(slot) = version.partitions.iter_mut().find(|p| p.id == pid) {
                    Arc::make_mut(slot).unsorted.push(tf);
                }
            }
            if let Some(file) = kept_wal.clone() {
                version.value_logs.insert(
                    wal_number,
                    LiveValueLog {
                        file,
                        garbage: wal_garbage,
                        refs: stats.logged_partitions.iter().map(|(p, _)| *p).collect(),
                        shares: stats.logged_partitions.iter().copied().collect(),
                    },
                );
            }
            st.version = Arc::new(version);
            st.imms.pop_front();
            // Counted before `imm_flushed` moves, so that the stats a
            // `Db::flush` caller reads once it returns include this flush
            // (and the lifetime counters a close saves do).
            if kept_wal.is_some() {
                Counters::add(&core.counters.wal_kept_bytes, stats.logged_bytes);
            }
            Counters::add(&core.counters.flush_bytes, stats.bytes_written);
            Counters::add(&core.counters.flushes, 1);
            st.imm_flushed += 1;
            st.log_number = next_log;
            if retain {
                st.feed.retained.insert(wal_number, wal_range);
            }
            retain
        },
    )?;

    // The flushed memtable's WAL is no longer needed, unless it is a value
    // log now or the change feed retains it (then it goes once no hold
    // pins it and no table points into it, whichever comes last).
    if kept_wal.is_none() && retained != Some(true) {
        let _ = core.fs.remove_file(&wal_path);
    }

    // UniKV §III-G: checkpoint a partition's index every half
    // `unsorted_limit` of flushed table bytes, so open replays few tables.
    // Table bytes, not the values kept in the WAL they point at: what an
    // open re-reads without a checkpoint is the tables. With values in the
    // WAL the tables are keys and pointers, merged (at half
    // `unsorted_slowdown_tables`) long before they add up to that, so
    // checkpoints become rare; counting the values too made checkpoints a
    // tenth of all bytes written (bench/journal/2026-11-27-12).
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
        let started = std::time::Instant::now();
        let result = crate::util::fs::activity("checkpoint", || checkpoint_index(core, pid));
        // Job stats: a checkpoint runs as soon as this flush makes it due.
        core.counters.record_job(
            crate::stats::JobKind::IndexCheckpoint,
            std::time::Duration::ZERO,
            started.elapsed(),
        );
        result?;
    }
    Ok(())
}

/// Adds each new table's keys to its partition's hash index, rebuilding
/// the index bigger (from the tables' keys) when it gets too loaded.
///
/// Each partition is read from the current version once its
/// `index_changes` lock is held: no split runs beside a flush, but a merge
/// may have replaced the UnsortedStore tables an index would be rebuilt
/// from since the flush began. A merge removes its inputs from the index
/// under the same lock after installing its version, so either this sees
/// the inputs gone or the merge's removal comes after this change.
fn index_new_tables(core: &Core, files: &[(u64, FileMeta)], stats: &JobStats) -> Result<()> {
    for (pid, f) in files {
        let Some((_, keys)) = stats.table_keys.iter().find(|(n, _)| *n == f.number) else {
            continue;
        };
        let current = |core: &Core| core.state.lock().version.partition(*pid).cloned();
        let Some(lock) = current(core).map(|p| Arc::clone(&p.index_changes)) else {
            continue;
        };
        let _changes = lock.lock();
        let Some(part) = current(core) else {
            continue;
        };
        index_table(&part, f, keys, core.options.unsorted_limit)?;
    }
    Ok(())
}

/// Adds the new table `f` of `part` to the partition's index. A bigger
/// index, when one is needed, is built from the older tables, else the
/// index is copied; the table's keys go into the new
/// one, which is then swapped in ([`replace_index`]): readers keep using
/// the old index meanwhile. The caller holds the partition's
/// [`Partition::index_changes`], so
/// nothing else changes the index between the two.
pub(super) fn index_table(
    part: &Partition,
    f: &FileMeta,
    keys: &KeyList,
    unsorted_limit: u64,
) -> Result<()> {
    let index = &part.index;
    let mut next = {
        // Owned, not a guard: building a bigger index reads tables.
        let current = index.load_full();
        let bigger = grown_index(&current, &part.unsorted, keys.len(), f.size, unsorted_limit)?;
        bigger.unwrap_or_else(|| crate::store::hash_index::HashIndex::clone(&current))
    };
    install_table(&mut next, None, f.number, keys);
    replace_index(index, next);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::commit::failing_appends;
    use super::super::test_support::*;
    use crate::{Db, Options};

    /// Values inline; `N` keys merged pass `partition_size` once, so one
    /// split makes two partitions. No merge starts on its own.
    const N: u32 = 2000;
    fn options() -> Options {
        Options::default()
            .min_blob_size(usize::MAX)
            .unsorted_limit(64 << 20)
            .partition_size(150 << 10)
    }

    fn unsorted_tables(db: &Db) -> Vec<usize> {
        db.stats()
            .partitions
            .iter()
            .map(|p| p.unsorted_tables)
            .collect()
    }

    /// A flush writes one table into each partition its memtable touches,
    /// none into the others, and deletes the memtable's WAL.
    #[test]
    fn a_flush_writes_one_table_per_touched_partition_and_removes_its_wal() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), options()).unwrap();
        for i in 0..N {
            db.put(key(i), value(0, i, 100)).unwrap();
        }
        db.compact().unwrap();
        wait_until("the partition splits", || db.stats().splits == 1);
        let split_at = db.stats().partitions[1].lower.clone();
        let (left, right): (Vec<u32>, Vec<u32>) = (0..N).partition(|&i| key(i) < split_at);
        assert!(!left.is_empty() && !right.is_empty());

        let flush = |keys: &[u32], round: u32| {
            let tables = files_named(dir.path(), "sst").len();
            let wals = files_named(dir.path(), "log");
            for &i in keys {
                db.put(key(i), value(round, i, 100)).unwrap();
            }
            db.flush().unwrap();
            // Deleted just after the flush is installed (which `flush` waits for).
            wait_until("the flushed memtable's WAL is deleted", || {
                let now = files_named(dir.path(), "log");
                wals.iter().all(|w| !now.contains(w))
            });
            files_named(dir.path(), "sst").len() - tables
        };
        assert_eq!(flush(&left[..10], 1), 1, "left only");
        assert_eq!(unsorted_tables(&db), [1, 0]);
        assert_eq!(flush(&[left[20], right[20], right[30]], 2), 2, "both sides");
        assert_eq!(unsorted_tables(&db), [2, 1]);
        for i in 0..N {
            assert!(db.get(key(i)).unwrap().is_some(), "key {i}");
        }
        assert_eq!(
            db.get(key(right[30])).unwrap(),
            Some(value(2, right[30], 100))
        );
    }

    /// A flush whose manifest append fails deletes the tables it wrote and
    /// keeps the WAL, from which a reopen recovers every write.
    #[test]
    fn a_flush_whose_commit_fails_leaves_no_table_and_keeps_its_wal() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), options()).unwrap();
        let armed = failing_appends::arm(dir.path(), |e| e.log_number.is_some());
        let wals = files_named(dir.path(), "log");
        for i in 0..N {
            db.put(key(i), value(0, i, 100)).unwrap();
        }
        assert!(db.flush().is_err(), "the flush was not refused");
        assert_eq!(files_named(dir.path(), "sst"), Vec::<String>::new());
        let now = files_named(dir.path(), "log");
        assert!(wals.iter().all(|w| now.contains(w)), "{wals:?} → {now:?}");
        drop(db);
        drop(armed);
        let db = Db::open(dir.path(), options()).unwrap();
        assert_every_key_reads(&db, N, |i| value(0, i, 100));
    }
}
