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

/// Collects the value logs `victims` of partition `pid`.
pub(super) fn collect_garbage(core: &Arc<Core>, pid: u64, victims: BTreeSet<u64>) -> Result<()> {
    rewrite_partition(core, pid, Rewrite::Collect(victims))
}
