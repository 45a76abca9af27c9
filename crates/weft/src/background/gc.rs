//! Value-log GC (UniKV §III-C): a partition's SortedStore is rewritten
//! ([`super::rewrite`]) with the live values of its victim logs copied to a
//! new log, and a victim no partition points into any more is deleted.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::rewrite::{rewrite_partition, Rewrite};
use crate::db::core::{Core, EngineState};
use crate::error::Result;

/// A partition due for value-log GC and the logs to collect: for garbage
/// first, else (if enabled) for key order.
pub(super) fn pick_gc(core: &Core, st: &EngineState) -> Option<(u64, BTreeSet<u64>)> {
    pick_gc_for_garbage(core, st).or_else(|| pick_gc_for_order(core, st))
}

/// A partition whose SortedStore points into more than `max_value_logs`
/// logs, and all of them: collected into one log in key order (see
/// [`crate::Options::max_value_logs`]). The most scattered partition first.
fn pick_gc_for_order(core: &Core, st: &EngineState) -> Option<(u64, BTreeSet<u64>)> {
    let max = core.options.max_value_logs;
    let v = &st.version;
    st.idle_partitions()
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
/// the partition is due when its victims hold `gc_min_garbage_bytes` (by
/// default an eighth of `partition_size`, see
/// [`crate::Options::gc_min_garbage_bytes`]). Judging the partition's logs
/// as a whole would let the newest log — all live, just written by a merge
/// — dilute the ratio and keep fully dead logs forever.
fn pick_gc_for_garbage(core: &Core, st: &EngineState) -> Option<(u64, BTreeSet<u64>)> {
    let opts = &core.options;
    let min_garbage = opts.gc_min_garbage();
    let v = &st.version;
    st.idle_partitions()
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
            (garbage >= min_garbage).then_some((garbage, p.id, victims))
        })
        .max_by_key(|(g, _, _)| *g)
        .map(|(_, id, victims)| (id, victims))
}

/// Collects the value logs `victims` of partition `pid`.
pub(super) fn collect_garbage(core: &Arc<Core>, pid: u64, victims: BTreeSet<u64>) -> Result<()> {
    rewrite_partition(core, pid, Rewrite::Collect(victims))
}

#[cfg(test)]
mod tests {
    use super::super::commit::failing_appends;
    use super::super::test_support::*;
    use crate::{Db, Options};

    /// Values of 200 bytes are separated by merges (the logs these tests
    /// collect); a log is collected once 60 % of it is dead, whatever the
    /// bytes. No merge starts on its own.
    fn options() -> Options {
        Options::default()
            .min_blob_size(64)
            .values_in_wal(false)
            .unsorted_limit(64 << 20)
            .gc_garbage_ratio(0.6)
            .gc_min_garbage_bytes(1)
    }

    /// 1000 keys merged into log A, then 700 of them overwritten and merged
    /// into log B: A is 70 % dead. Returns A's file name and the value key
    /// `i` must read.
    fn one_log_mostly_dead(db: &Db, dir: &std::path::Path) -> (String, impl Fn(u32) -> Vec<u8>) {
        for i in 0..1000 {
            db.put(key(i), value(0, i, 200)).unwrap();
        }
        db.compact().unwrap();
        let logs = files_named(dir, "vlog");
        assert_eq!(logs.len(), 1, "{logs:?}");
        for i in 0..700 {
            db.put(key(i), value(1, i, 200)).unwrap();
        }
        (logs[0].clone(), |i| {
            value(if i < 700 { 1 } else { 0 }, i, 200)
        })
    }

    /// GC copies the victim's live values to a new log and deletes the
    /// victim; every value still reads, before and after a reopen.
    #[test]
    fn gc_drops_a_victim_log_and_keeps_values_readable() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), options()).unwrap();
        let (victim, expected) = one_log_mostly_dead(&db, dir.path());
        db.compact().unwrap();
        wait_until("the victim log is collected and deleted", || {
            db.stats().gcs >= 1 && !files_named(dir.path(), "vlog").contains(&victim)
        });
        let s = db.stats();
        assert_eq!(s.partitions[0].value_log_garbage_bytes, 0, "{s:?}");
        assert_every_key_reads(&db, 1000, &expected);
        drop(db);
        let db = Db::open(dir.path(), options()).unwrap();
        assert_every_key_reads(&db, 1000, &expected);
    }

    /// A GC whose manifest append fails deletes the tables and the log it
    /// wrote; the victim stays, and every value still reads after a reopen.
    #[test]
    fn a_gc_whose_commit_fails_leaves_no_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), options()).unwrap();
        let (victim, expected) = one_log_mostly_dead(&db, dir.path());
        let armed = failing_appends::arm(dir.path(), |e| !e.dropped_value_logs.is_empty());
        db.compact().unwrap();
        wait_until("the failed GC poisons", || db.put(b"k", b"v").is_err());
        // Exactly the live tables, the victim and the merge's log remain.
        let s = db.stats();
        assert_eq!(s.gcs, 0);
        assert_eq!(
            files_named(dir.path(), "sst").len() as u64,
            s.tables,
            "{s:?}"
        );
        let logs = files_named(dir.path(), "vlog");
        assert_eq!(logs.len(), 2, "{logs:?}");
        assert!(logs.contains(&victim), "{logs:?}");
        drop(db);
        drop(armed);
        let db = Db::open(dir.path(), options()).unwrap();
        assert_every_key_reads(&db, 1000, &expected);
    }
}
