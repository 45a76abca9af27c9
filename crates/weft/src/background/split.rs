//! Split (UniKV §III-D): a partition grown past `partition_size` becomes
//! two, at its median key.

use std::sync::Arc;

use super::commit::{commit_edit, open_new_tables, NewFiles};
use super::rewrite::{rewrite_partition, Rewrite};
use super::FlushesHeld;
use crate::db::core::{Core, Counters, EngineState};
use crate::error::Result;
use crate::iter::{InternalIterator, MergedEntries};
use crate::key::MAX_SEQUENCE;
use crate::manifest::VersionEdit;
use crate::stats::ReadPurpose;
use crate::store::compaction::{
    write_tables, JobStats, KeyspaceOutputs, Layer, OutputSpec, RetentionPolicy,
};
use crate::store::munk::Munk;
use crate::store::{Partition, Placement, TableFile};

/// A partition past `partition_size` whose SortedStore holds at least two
/// distinct keys (so there is a key to cut at).
pub(super) fn pick_split(core: &Core, st: &EngineState) -> Option<u64> {
    let v = &st.version;
    st.idle_partitions()
        .filter(|p| match (p.sorted.first(), p.sorted.last()) {
            (Some(first), Some(last)) => {
                first.meta.smallest_user_key() < last.meta.largest_user_key()
                    && v.partition_bytes(p) > core.options.partition_size
            }
            _ => false,
        })
        .max_by_key(|p| v.partition_bytes(p))
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

/// Where a partition is cut: the split key and the SortedStore tables of
/// each side.
type Cut = (Vec<u8>, Vec<Arc<TableFile>>, Vec<Arc<TableFile>>);

/// Cuts a run of two or more tables at the first table at or past half the
/// bytes, never the first table, so both sides are non-empty. Pure
/// metadata: the tables move to their side untouched.
fn cut_between_tables(part: &Partition) -> Cut {
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
    )
}

/// Cuts the one table `t` at its median key by rewriting it into two
/// (`new_files` takes them on); `None` if it holds one user key only.
fn cut_table(core: &Core, t: &TableFile, new_files: &mut NewFiles<'_>) -> Result<Option<Cut>> {
    let Some(key) = median_key(t)? else {
        return Ok(None);
    };
    let policy = RetentionPolicy {
        snapshots: core.snapshots.sequences(),
        bottommost: true,
    };
    let mut stats = JobStats::default();
    let mut new_file = || core.state.lock().new_file_number();
    let settings = core.keyspace_settings.load_full();
    let spec = |upper| OutputSpec {
        fs: &core.job_fs,
        dir: &core.dir,
        table: core.table_options,
        target_size: core.options.table_size,
        upper,
        // Values stay where they are: pointers are copied, inline
        // values stay inline.
        min_blob_size: None,
        value_log_compression: crate::Compression::None,
        filter: None,
        range_tombstones: None,
        collect_keys: false,
        logged: None,
        keyspaces: Some(KeyspaceOutputs {
            settings: &settings,
            layer: Layer::Sorted,
            separates: false,
        }),
    };
    let mut input = MergedEntries::new(vec![Box::new(t.table.iter_for(ReadPurpose::Background))]);
    input.seek_to_first()?;
    let left = write_tables(
        &mut input,
        &policy,
        &spec(Some(&key)),
        &mut new_file,
        &mut stats,
    )?;
    new_files.add_tables(&left);
    input.seek(&key, MAX_SEQUENCE)?;
    let right = write_tables(&mut input, &policy, &spec(None), &mut new_file, &mut stats)?;
    new_files.add_tables(&right);
    let l = open_new_tables(core, &left)?;
    let r = open_new_tables(core, &right)?;
    Counters::add(&core.counters.split_bytes, stats.bytes_written);
    Ok(Some((key, l, r)))
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
pub(super) fn split_partition(core: &Arc<Core>, pid: u64) -> Result<()> {
    // No flush for the whole job: one landing between the merge and the
    // split would leave UnsortedStore tables the split cannot divide, and
    // a busy writer could put off the split forever. Splits are rare (one
    // per `partition_size` of growth), so writers wait out one merge.
    let _held = FlushesHeld::new(core);
    rewrite_partition(core, pid, Rewrite::Merge)?;
    // The partition is busy with this job (no other job touches it) and no
    // flush runs: the copy stays current.
    let part = {
        let st = core.state.lock();
        match st.version.partition(pid) {
            Some(p) => Arc::clone(p),
            None => return Ok(()),
        }
    };
    if !part.unsorted.is_empty() || part.sorted.is_empty() {
        return Ok(());
    }
    let mut new_files = NewFiles::new(&core.fs, &core.dir);
    let ((split_key, left_tables, right_tables), rewritten) = if part.sorted.len() >= 2 {
        (cut_between_tables(&part), None)
    } else {
        let t = &part.sorted[0];
        match cut_table(core, t, &mut new_files)? {
            Some(cut) => (cut, Some(Arc::clone(t))),
            None => return Ok(()),
        }
    };

    // A munk of the partition splits with it (flushes are held, so it
    // still stands for `part` at the install): each half keeps its image.
    let munk_halves = part
        .munk
        .load()
        .filter(|m| m.covers(&part).is_some())
        .map(|m| m.image.split_at(&split_key));
    let removed_checkpoint = commit_edit(
        core,
        new_files,
        Some("split.manifest_written"),
        |st| {
            // Never gone (see above), but then there would be nothing to
            // replace. Its position is taken now: jobs on other partitions
            // may have split them since this one started.
            let at = st.version.partitions.iter().position(|p| p.id == pid)?;
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
            let bounds = |p: &Partition| (p.id, p.lower.clone(), p.upper.clone());
            // Range deletes still pending here are pending in the halves
            // they overlap.
            let range_tombstones = st.version.range_tombstones.replaced(
                pid,
                &[
                    (left_id, &left.lower, left.upper.as_deref()),
                    (right_id, &right.lower, right.upper.as_deref()),
                ],
            );
            let mut edit = VersionEdit {
                next_file_number: Some(st.next_file_number),
                new_partitions: vec![bounds(&left), bounds(&right)],
                removed_partitions: vec![pid],
                range_tombstones: range_tombstones.clone(),
                ..Default::default()
            };
            for t in &part.sorted {
                edit.removed_files.push((pid, t.meta.number));
            }
            for p in [&left, &right] {
                for t in &p.sorted {
                    edit.added_files
                        .push((p.id, Placement::Sorted, t.meta.clone()));
                }
            }
            for (n, size) in &shared {
                edit.added_value_logs.push((left_id, *n, *size));
                edit.added_value_logs.push((right_id, *n, *size));
                edit.dropped_value_logs.push((pid, *n));
            }
            Some((edit, (at, left, right, shared, range_tombstones)))
        },
        |st, (at, left, right, shared, range_tombstones)| {
            let (left_id, right_id) = (left.id, right.id);
            for p in [&left, &right] {
                p.munk.inherit_heat(&part.munk);
            }
            if let Some((l, r)) = munk_halves {
                left.munk
                    .store(Some(Arc::new(Munk::new(Arc::new(l), &left, 0))));
                right
                    .munk
                    .store(Some(Arc::new(Munk::new(Arc::new(r), &right, 0))));
            }
            // Readers of older versions keep the whole image as long as
            // they hold it; the slot lets it go.
            part.munk.store(None);
            st.next_partition_id += 2;
            // The split partition's index checkpoint went with it (the
            // manifest forgets checkpoints of removed partitions).
            st.flushed_since_checkpoint.remove(&pid);
            let old_checkpoint = st.index_checkpoints.remove(&pid);
            let mut v = (*st.version).clone();
            v.partitions
                .splice(at..=at, [Arc::new(left), Arc::new(right)]);
            if !range_tombstones.is_empty() {
                v.range_tombstones = Arc::new(v.range_tombstones.with(range_tombstones));
            }
            for (n, _) in &shared {
                if let Some(log) = v.value_logs.get_mut(n) {
                    log.refs.remove(&pid);
                    log.refs.insert(left_id);
                    log.refs.insert(right_id);
                    // Half of a known share to each side.
                    if let Some(bytes) = log.shares.remove(&pid) {
                        log.shares.insert(left_id, bytes / 2);
                        log.shares.insert(right_id, bytes - bytes / 2);
                    }
                }
            }
            st.version = Arc::new(v);
            old_checkpoint
        },
    )?;
    let Some(old_checkpoint) = removed_checkpoint else {
        return Ok(());
    };
    if let Some(old) = old_checkpoint {
        let _ = core
            .fs
            .remove_file(&crate::filename::index_checkpoint_path(&core.dir, old));
    }
    if let Some(t) = rewritten {
        t.mark_obsolete();
    }
    Counters::add(&core.counters.splits, 1);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::commit::failing_appends;
    use super::super::test_support::*;
    use crate::{Db, Options};

    const N: u32 = 2000;

    /// Values inline, so a partition's bytes are its tables': `N` keys
    /// pass `partition_size` and each half of them does not, so exactly one
    /// split runs.
    fn options(table_size: u64) -> Options {
        Options::default()
            .min_blob_size(usize::MAX)
            .unsorted_limit(64 << 20)
            .partition_size(150 << 10)
            .table_size(table_size)
    }

    fn fill_and_merge(db: &Db) {
        for i in 0..N {
            db.put(key(i), value(0, i, 100)).unwrap();
        }
        db.compact().unwrap();
    }

    fn every_key_reads(db: &Db) {
        let scanned: Vec<(Vec<u8>, Vec<u8>)> =
            db.range(key(0)..).unwrap().map(Result::unwrap).collect();
        let expected: Vec<(Vec<u8>, Vec<u8>)> =
            (0..N).map(|i| (key(i), value(0, i, 100))).collect();
        assert!(
            scanned == expected,
            "a scan read {} entries, not the {N} written",
            scanned.len()
        );
        assert_every_key_reads(db, N, |i| value(0, i, 100));
    }

    /// A split leaves two partitions whose bounds meet at the split key and
    /// cover every key, and every key still reads, before and after a
    /// reopen: for a run of many tables (moved untouched) and of one table
    /// (rewritten into two, the old one deleted).
    #[test]
    fn a_split_makes_two_partitions_meeting_at_the_split_key() {
        for (table_size, rewrites) in [(32 << 10, false), (64 << 20, true)] {
            let dir = tempfile::tempdir().unwrap();
            let db = Db::open(dir.path(), options(table_size)).unwrap();
            fill_and_merge(&db);
            wait_until("the partition splits", || db.stats().splits == 1);
            let s = db.stats();
            let [left, right] = &s.partitions[..] else {
                panic!("not two partitions: {s:?}");
            };
            assert!(left.lower.is_empty() && right.upper.is_none(), "{s:?}");
            assert_eq!(left.upper.as_ref(), Some(&right.lower), "{s:?}");
            assert!(key(0) < right.lower && right.lower <= key(N - 1), "{s:?}");
            assert!(left.sorted_tables >= 1 && right.sorted_tables >= 1, "{s:?}");
            assert_eq!(s.split_bytes_written > 0, rewrites, "{s:?}");
            wait_until("only live tables are left", || {
                files_named(dir.path(), "sst").len() as u64 == db.stats().tables
            });
            every_key_reads(&db);
            let bounds = |s: &crate::Stats| -> Vec<_> {
                s.partitions
                    .iter()
                    .map(|p| (p.lower.clone(), p.upper.clone()))
                    .collect()
            };
            let before = bounds(&s);
            drop(db);
            let db = Db::open(dir.path(), options(table_size)).unwrap();
            assert_eq!(bounds(&db.stats()), before);
            every_key_reads(&db);
        }
    }

    /// A split that rewrites its one table and whose manifest append fails
    /// deletes the two tables it wrote; the partition stays whole.
    #[test]
    fn a_split_whose_commit_fails_leaves_no_new_table() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), options(64 << 20)).unwrap();
        let armed = failing_appends::arm(dir.path(), |e| !e.new_partitions.is_empty());
        fill_and_merge(&db);
        wait_until("the failed split poisons", || db.put(b"k", b"v").is_err());
        let s = db.stats();
        assert_eq!((s.splits, s.partitions.len(), s.tables), (0, 1, 1), "{s:?}");
        assert_eq!(files_named(dir.path(), "sst").len(), 1);
        drop(db);
        drop(armed);
        let db = Db::open(dir.path(), options(64 << 20)).unwrap();
        every_key_reads(&db);
    }
}
