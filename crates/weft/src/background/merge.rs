//! Merge (UniKV §III-C): a partition's UnsortedStore is merged into its
//! SortedStore ([`super::rewrite`]), separating large values into a new
//! value log on the way.

use std::sync::Arc;

use super::rewrite::{rewrite_partition, Rewrite};
use crate::db::core::{Core, EngineState};
use crate::error::Result;
use crate::store::Partition;

/// How many times `unsorted_limit` a partition with a munk may hold in its
/// UnsortedStore before a merge is due.
const MUNK_UNSORTED_FACTOR: u64 = 8;

/// A partition whose UnsortedStore passed the limit, or one a manual
/// compaction asked for, and whether it is urgent: it has reached
/// `unsorted_slowdown_tables`, so writers are being slowed for it (see
/// [`super::policy`]). An urgent partition goes before a manual request.
pub(super) fn pick_merge(core: &Core, st: &mut EngineState) -> Option<(u64, bool)> {
    let opts = &core.options;
    let urgent = |p: &Partition| p.unsorted.len() >= opts.unsorted_slowdown_tables;
    // A range delete pending in a partition makes a merge due there: it
    // drops what the delete covers, and the delete itself once no
    // partition is left pending (until then every read of its range
    // checks it).
    let range_deletes = std::sync::Arc::clone(&st.version.range_tombstones);
    let range_deleted = |p: &Partition| range_deletes.any_pending_in(p.id);
    let mut manual = None;
    let requests: Vec<(u64, u64)> = st.manual_merges.iter().map(|(p, r)| (*p, *r)).collect();
    for (p, requested_at) in requests {
        if st.busy_partitions.contains(&p) {
            // A job is on it (maybe this very merge): judged once it is done.
            continue;
        }
        if let Some(x) = st.version.partition(p) {
            if x.unsorted.iter().any(|t| t.meta.number < requested_at) || range_deleted(x) {
                manual = Some((p, urgent(x)));
                break;
            }
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
    //
    // With values kept in the WAL (`Options::values_in_wal`), half the
    // slowdown count is due too, before writers are slowed: a flushed
    // table then holds keys and pointers, tens of times smaller than the
    // data it stands for, so the byte limit alone would leave merges to
    // the slowdown trigger.
    let due_by_count = match core
        .min_logged_from
        .load(std::sync::atomic::Ordering::Acquire)
    {
        usize::MAX => usize::MAX,
        _ => (opts.unsorted_slowdown_tables / 2).max(2),
    };
    // A partition with a munk standing for it reads from memory, not from
    // its UnsortedStore tables: its merge waits for a larger UnsortedStore
    // (EvenDB lets a munk'd chunk's log grow tenfold), so disk rewrites go
    // to cold partitions.
    let munk_due_by_count = (opts.unsorted_slowdown_tables * 3 / 4).max(2);
    let munk_limit = opts.unsorted_limit.saturating_mul(MUNK_UNSORTED_FACTOR);
    let has_munk =
        |p: &Partition| core.munks_on() && p.munk.load().is_some_and(|m| m.covers(p).is_some());
    let by_size = st
        .idle_partitions()
        .filter(|p| {
            urgent(p)
                || range_deleted(p)
                || match has_munk(p) {
                    true => {
                        p.unsorted_bytes() > munk_limit || p.unsorted.len() >= munk_due_by_count
                    }
                    false => {
                        p.unsorted_bytes() > opts.unsorted_limit || p.unsorted.len() >= due_by_count
                    }
                }
        })
        .max_by_key(|p| (urgent(p), p.unsorted_bytes()))
        .map(|p| (p.id, urgent(p)));
    match by_size {
        Some((_, true)) => by_size,
        _ => manual.or(by_size),
    }
}

/// Merges partition `pid`. A manual request for it is not settled here:
/// a flush may have added a table while the merge ran, so `pick_merge`
/// drops the request only once the partition's UnsortedStore is empty
/// (and `compact()` returns only then).
pub(super) fn merge_partition(core: &Arc<Core>, pid: u64) -> Result<()> {
    rewrite_partition(core, pid, Rewrite::Merge)
}

#[cfg(test)]
mod tests {
    use super::super::commit::failing_appends;
    use super::super::test_support::*;
    use crate::store::Placement;
    use crate::{Db, Options};

    /// Values of 100 bytes are separated into a value log by the merge
    /// (not kept in the WAL); no merge starts on its own.
    fn options() -> Options {
        Options::default()
            .min_blob_size(64)
            .values_in_wal(false)
            .unsorted_limit(64 << 20)
    }

    /// Three flushes, three UnsortedStore tables: the even keys, the odd
    /// ones, the even ones again.
    fn three_flushes(db: &Db) {
        for round in 0..3 {
            for i in (round % 2..3000).step_by(2) {
                db.put(key(i), value(round, i, 100)).unwrap();
            }
            db.flush().unwrap();
        }
    }

    fn newest(i: u32) -> Vec<u8> {
        value(if i.is_multiple_of(2) { 2 } else { 1 }, i, 100)
    }

    /// A merge leaves the UnsortedStore empty, deletes the tables it merged,
    /// separates the values into a log, and every key reads its newest
    /// value, before and after a reopen.
    #[test]
    fn a_merge_empties_the_unsorted_store_and_keeps_every_key() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), options()).unwrap();
        three_flushes(&db);
        let flushed = files_named(dir.path(), "sst");
        assert_eq!(db.stats().partitions[0].unsorted_tables, 3);
        db.compact().unwrap();
        let s = db.stats();
        let p = &s.partitions[0];
        assert_eq!(
            (s.merges, p.unsorted_tables, p.value_logs),
            (1, 0, 1),
            "{s:?}"
        );
        assert!(p.sorted_tables >= 1, "{s:?}");
        wait_until("the merged tables are deleted", || {
            let now = files_named(dir.path(), "sst");
            now.len() == p.sorted_tables && flushed.iter().all(|f| !now.contains(f))
        });
        assert_every_key_reads(&db, 3000, newest);
        drop(db);
        let db = Db::open(dir.path(), options()).unwrap();
        assert_every_key_reads(&db, 3000, newest);
    }

    /// A merge whose manifest append fails deletes the tables and the value
    /// log it wrote; the UnsortedStore it read stays, and after a reopen
    /// the merge can run again.
    #[test]
    fn a_merge_whose_commit_fails_leaves_no_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), options()).unwrap();
        three_flushes(&db);
        let before = files_named(dir.path(), "sst");
        let armed = failing_appends::arm(dir.path(), |e| {
            e.added_files
                .iter()
                .any(|(_, place, _)| matches!(place, Placement::Sorted))
        });
        assert!(db.compact().is_err(), "the merge was not refused");
        assert_eq!(files_named(dir.path(), "sst"), before);
        assert_eq!(files_named(dir.path(), "vlog"), Vec::<String>::new());
        assert_eq!(db.stats().merges, 0);
        drop(db);
        drop(armed);
        let db = Db::open(dir.path(), options()).unwrap();
        db.compact().unwrap();
        assert_eq!(db.stats().partitions[0].unsorted_tables, 0);
        assert_every_key_reads(&db, 3000, newest);
    }
}
