//! Consolidation (UniKV §III-F): while scans run, a partition's many
//! UnsortedStore tables are rewritten into one, so a scan opens one cursor
//! there instead of many.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::commit::{commit_edit, open_new_tables, NewFiles};
use super::flush::index_table;
use super::FlushesHeld;
use crate::db::core::{Core, Counters, EngineState};
use crate::error::Result;
use crate::iter::MergedEntries;
use crate::manifest::VersionEdit;
use crate::store::compaction::{
    write_tables, JobStats, KeyspaceOutputs, Layer, OutputSpec, RetentionPolicy,
};
use crate::store::{change_index, Partition, Placement};

/// A partition whose UnsortedStore has more than `scan_merge_limit` tables
/// while scans are running (UniKV §III-F).
pub(super) fn pick_consolidation(core: &Core, st: &EngineState) -> Option<u64> {
    if !core
        .counters
        .scanned_since_consolidation
        .load(Ordering::Relaxed)
    {
        return None;
    }
    // A munk'd partition's scans read its munk, not its tables.
    st.idle_partitions()
        .filter(|p| p.unsorted.len() > core.options.scan_merge_limit && !p.munk.is_loaded())
        .max_by_key(|p| p.unsorted.len())
        .map(|p| p.id)
}

/// Rewrites partition `pid`'s UnsortedStore tables into one sorted table
/// that stays in the UnsortedStore (values inline, tombstones kept: older
/// data may sit in the SortedStore), so scans merge one cursor there
/// instead of many. The new table is indexed before it becomes visible; the
/// inputs leave the index after.
pub(super) fn consolidate_unsorted(core: &Arc<Core>, pid: u64) -> Result<()> {
    // The output must be older than every table flushed after its inputs
    // (recovery orders an UnsortedStore by manifest order): no flush runs
    // meanwhile.
    let _held = FlushesHeld::new(core);
    core.counters
        .scanned_since_consolidation
        .store(false, Ordering::Relaxed);
    let part = {
        let st = core.state.lock();
        match st.version.partition(pid) {
            Some(p) => Arc::clone(p),
            None => return Ok(()),
        }
    };
    if part.unsorted.len() < 2 {
        return Ok(());
    }
    let inputs = part.unsorted.clone();
    let children = super::table_cursors(&inputs);
    let mut input = MergedEntries::new(children);
    input.seek_to_first()?;
    let policy = RetentionPolicy {
        snapshots: core.snapshots.sequences(),
        bottommost: false,
    };
    let settings = core.keyspace_settings.load_full();
    let spec = OutputSpec {
        fs: &core.job_fs,
        dir: &core.dir,
        table: core.table_options.for_unsorted_store(),
        target_size: u64::MAX,
        upper: None,
        min_blob_size: None,
        value_log_compression: crate::Compression::None,
        filter: None,
        range_tombstones: None,
        collect_keys: true,
        logged: None,
        keyspaces: Some(KeyspaceOutputs {
            settings: &settings,
            layer: Layer::Unsorted,
            separates: false,
        }),
    };
    let mut stats = JobStats::default();
    let mut new_file = || core.state.lock().new_file_number();
    let outputs = write_tables(&mut input, &policy, &spec, &mut new_file, &mut stats)?;
    let mut new_files = NewFiles::new(&core.fs, &core.dir);
    new_files.add_tables(&outputs);
    let opened = open_new_tables(core, &outputs)?;
    crate::fault::crash_point("consolidate.tables_written");
    {
        let _changes = part.index_changes.lock();
        for t in &opened {
            if let Some((_, keys)) = stats.table_keys.iter().find(|(n, _)| *n == t.meta.number) {
                index_table(&part, &t.meta, keys, core.options.unsorted_limit)?;
            }
        }
    }
    let installed = commit_edit(
        core,
        new_files,
        Some("consolidate.manifest_written"),
        |st| {
            // Never gone (the partition is busy with this job, so no split
            // removes it), but if it were there would be nothing to put the
            // output into.
            let current = Arc::clone(st.version.partition(pid)?);
            let edit = VersionEdit {
                next_file_number: Some(st.next_file_number),
                ..VersionEdit::replace_tables(
                    pid,
                    Placement::Unsorted,
                    &outputs,
                    inputs.iter().map(|t| t.meta.number),
                )
            };
            Some((edit, current))
        },
        |st, current| {
            let mut p: Partition = (*current).clone();
            p.unsorted
                .retain(|t| !inputs.iter().any(|i| i.meta.number == t.meta.number));
            // The consolidated table holds data older than any table flushed
            // since (none: flushes are held) and newer than the SortedStore:
            // it goes first.
            let mut unsorted = opened;
            unsorted.append(&mut p.unsorted);
            p.unsorted = unsorted;
            st.version = Arc::new(st.version.with_partition(p));
        },
    )?;
    if installed.is_none() {
        return Ok(());
    }
    let numbers: Vec<u64> = inputs.iter().map(|t| t.meta.number).collect();
    let _changes = part.index_changes.lock();
    change_index(&part.index, |index| index.remove_tables(&numbers));
    for t in &inputs {
        t.mark_obsolete();
    }
    Counters::add(&core.counters.consolidation_bytes, stats.bytes_written);
    Counters::add(&core.counters.consolidations, 1);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::commit::failing_appends;
    use super::super::test_support::*;
    use crate::store::Placement;
    use crate::{Db, Options};

    const N: u32 = 1000;

    /// A scan asks for consolidation past two UnsortedStore tables; no merge
    /// starts on its own.
    fn options() -> Options {
        Options::default()
            .unsorted_limit(64 << 20)
            .scan_merge_limit(2)
    }

    /// Four flushes, each rewriting every third key (and the first all of
    /// them); returns the tables they wrote.
    fn four_flushes(db: &Db, dir: &std::path::Path) -> Vec<String> {
        for round in 0..4 {
            for i in (0..N).filter(|i| round == 0 || i % 3 == round % 3) {
                db.put(key(i), value(round, i, 50)).unwrap();
            }
            db.flush().unwrap();
        }
        assert_eq!(db.stats().partitions[0].unsorted_tables, 4);
        files_named(dir, "sst")
    }

    fn newest(i: u32) -> Vec<u8> {
        let round = [3, 1, 2][(i % 3) as usize];
        value(round, i, 50)
    }

    fn scan_once(db: &Db) {
        assert_eq!(db.range(key(0)..).unwrap().count(), N as usize);
    }

    /// A scan over many UnsortedStore tables has them consolidated into one,
    /// the inputs deleted, and every key reads its newest value, before and
    /// after a reopen.
    #[test]
    fn consolidation_leaves_one_unsorted_table() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), options()).unwrap();
        let flushed = four_flushes(&db, dir.path());
        scan_once(&db);
        wait_until("the UnsortedStore is consolidated", || {
            db.stats().consolidations == 1
        });
        let s = db.stats();
        assert_eq!((s.partitions[0].unsorted_tables, s.merges), (1, 0), "{s:?}");
        wait_until("the inputs are deleted", || {
            let now = files_named(dir.path(), "sst");
            now.len() == 1 && !flushed.contains(&now[0])
        });
        assert_every_key_reads(&db, N, newest);
        drop(db);
        let db = Db::open(dir.path(), options()).unwrap();
        assert_eq!(db.stats().partitions[0].unsorted_tables, 1);
        assert_every_key_reads(&db, N, newest);
    }

    /// A consolidation whose manifest append fails deletes the table it
    /// wrote; its inputs stay.
    #[test]
    fn a_consolidation_whose_commit_fails_leaves_no_new_table() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), options()).unwrap();
        let flushed = four_flushes(&db, dir.path());
        let armed = failing_appends::arm(dir.path(), |e| {
            !e.removed_files.is_empty()
                && e.added_files
                    .iter()
                    .any(|(_, place, _)| matches!(place, Placement::Unsorted))
        });
        scan_once(&db);
        wait_until("the failed consolidation poisons", || {
            db.put(b"k", b"v").is_err()
        });
        assert_eq!(db.stats().consolidations, 0);
        assert_eq!(files_named(dir.path(), "sst"), flushed);
        drop(db);
        drop(armed);
        let db = Db::open(dir.path(), options()).unwrap();
        assert_every_key_reads(&db, N, newest);
    }
}
