//! Merge (UniKV §III-C): a partition's UnsortedStore is merged into its
//! SortedStore ([`super::rewrite`]), separating large values into a new
//! value log on the way.

use std::sync::Arc;

use super::rewrite::{rewrite_partition, Rewrite};
use crate::db::core::{Core, EngineState};
use crate::error::Result;

/// A partition whose UnsortedStore passed the limit, or one a manual
/// compaction asked for.
pub(super) fn pick_merge(core: &Core, st: &mut EngineState) -> Option<u64> {
    while let Some((&p, &requested_at)) = st.manual_merges.iter().next() {
        let pending = st
            .version
            .partition(p)
            .is_some_and(|x| x.unsorted.iter().any(|t| t.meta.number < requested_at));
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

/// Merges partition `pid`. A manual request for it is not settled here:
/// a flush may have added a table while the merge ran, so `pick_merge`
/// drops the request only once the partition's UnsortedStore is empty
/// (and `compact()` returns only then).
pub(super) fn merge_partition(core: &Arc<Core>, pid: u64) -> Result<()> {
    rewrite_partition(core, pid, Rewrite::Merge)
}
