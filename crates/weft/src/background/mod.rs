//! Background work: flushing immutable memtables into UnsortedStore tables
//! and merging UnsortedStores into SortedStores.
//!
//! Two threads share it. The flush thread ([`run_flushes`]) only flushes;
//! the compaction thread ([`run`]) merges, consolidates, collects value
//! logs and splits partitions, in the order [`policy`] chooses: urgency
//! first, and no due job waits for ever. With one thread doing both, every merge held
//! up the flushes queued behind it, the queue of immutable memtables
//! filled, and writers stalled for most of each merge while a core sat
//! idle. A flush now runs beside a merge and writers keep going.
//!
//! One module per job: [`flush`], [`checkpoint`] (of a partition's hash
//! index), [`merge`] and [`gc`] (both rewrite a SortedStore: [`rewrite`]),
//! [`split`] and [`consolidate`]. Each job ends in [`commit::commit_edit`],
//! the one place a manifest edit is made, appended and installed, and its
//! new files are held by a [`commit::NewFiles`] guard until then.
//!
//! What the two threads may do at once, and what keeps it sound:
//! * A flush adds tables to a partition's UnsortedStore; a merge or GC
//!   replaces the tables it read and keeps every other (`retain`), so each
//!   installs its result into the *current* version, never into the one it
//!   started from.
//! * A split changes partitions and a consolidation rewrites the
//!   UnsortedStore in place (its output must stay older than every table
//!   flushed after its inputs). Neither runs beside a flush: the compaction
//!   thread raises [`restructuring`], which keeps new flushes
//!   from starting, and waits until the running one is done
//!   ([`FlushesHeld`]).
//! * Manifest edits ([`commit::commit_edit`]): a job makes its edit under
//!   the state lock, appends it (an fdatasync) with the state lock
//!   released, and installs it under the state lock again, holding
//!   [`Core::manifest`] throughout. Writers, whose every write group takes
//!   the state lock, go on during the fdatasync, which can take
//!   milliseconds while the disk writes tables back; the manifest's order
//!   stays the install order, and no version changes between an edit and
//!   its install (only these jobs change it, each under the manifest lock).
//! * Hash-index changes (a flush adds its tables, a merge or consolidation
//!   removes its inputs) are serialized by [`Core::index_changes`], and a
//!   flush grows an index from the tables of the current version, so an
//!   index never keeps entries of tables merged away.
//!
//! Every job follows the same crash-safe order: write and fsync the new
//! tables, fsync the directory (their names), append the manifest edit that
//! makes them live (and the inputs dead) and fsync it, install the new version, and only then delete what the
//! edit dropped (a flushed WAL; input tables, once no reader holds them). A
//! crash at any point leaves either the old state or the new one, plus
//! orphan files that the next open removes. A job that fails before its
//! edit is durable deletes its new files itself (the guard), so a poisoned
//! database that keeps serving reads does not keep them until a reopen.
//!
//! A failed job poisons the database (writes refuse; reads keep working):
//! retrying blindly on a full or failing disk would only hide the problem.
//!
//! [`restructuring`]: crate::db::core::EngineState::restructuring

mod checkpoint;
mod commit;
mod consolidate;
mod flush;
mod gc;
mod merge;
mod policy;
mod rewrite;
mod split;
#[cfg(test)]
mod test_support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::db::core::{Core, EngineState};
use crate::stats::JobKind;
use crate::util::fs::activity;

pub(crate) use flush::write_memtable;
use policy::{Due, Kind, Policy};

enum Job {
    Consolidate(u64),
    Merge(u64),
    Collect(u64, BTreeSet<u64>),
    Split(u64),
}

/// The flush thread's loop; returns at shutdown.
pub(crate) fn run_flushes(core: Arc<Core>) {
    loop {
        let queued = {
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
            // Job stats: a flush is due from when its memtable became immutable.
            st.imms
                .front()
                .map_or(Duration::ZERO, |imm| imm.made_immutable.elapsed())
        };
        let started = Instant::now();
        let result = activity("flush", || flush::flush_oldest(&core));
        core.counters
            .record_job(JobKind::Flush, queued, started.elapsed());
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
    let mut policy = Policy::default();
    loop {
        let job = {
            let mut st = core.state.lock();
            loop {
                if st.shutting_down {
                    return;
                }
                if !core.is_poisoned() {
                    if let Some(job) = next_job(&core, &mut st, &mut policy) {
                        break job;
                    }
                }
                core.state_cv.wait(&mut st);
            }
        };
        let kind = job.kind();
        let started = Instant::now();
        let result = match job {
            Job::Merge(p) => activity("merge", || merge::merge_partition(&core, p)),
            Job::Consolidate(p) => activity("consolidate", || {
                consolidate::consolidate_unsorted(&core, p)
            }),
            Job::Collect(p, victims) => activity("gc", || gc::collect_garbage(&core, p, victims)),
            Job::Split(p) => activity("split", || split::split_partition(&core, p)),
        };
        // Job stats: a job starts as soon as it is picked, so none queues.
        core.counters
            .record_job(kind, Duration::ZERO, started.elapsed());
        if let Err(e) = result {
            core.poison(&e);
        }
        let _st = core.state.lock();
        core.state_cv.notify_all();
    }
}

impl Job {
    /// The kind its stats are recorded under.
    fn kind(&self) -> JobKind {
        match self {
            Job::Consolidate(_) => JobKind::Consolidation,
            Job::Merge(_) => JobKind::Merge,
            Job::Collect(..) => JobKind::Gc,
            Job::Split(_) => JobKind::Split,
        }
    }
}

/// The job to run next: what each job's picker finds due, chosen by
/// `policy` ([`policy`]: urgency first, and no due job waits for ever).
fn next_job(core: &Core, st: &mut EngineState, policy: &mut Policy) -> Option<Job> {
    let merge = merge::pick_merge(core, st);
    let split = split::pick_split(core, st);
    let gc = gc::pick_gc(core, st);
    let consolidate = consolidate::pick_consolidation(core, st);
    let due = Due {
        merge: merge.map(|(_, urgent)| urgent),
        split: split.is_some(),
        gc: gc.is_some(),
        consolidate: consolidate.is_some(),
    };
    // The policy picks only a kind that is due, so its job is `Some`.
    Some(match policy.pick(&due)? {
        Kind::Merge => Job::Merge(merge?.0),
        Kind::Split => Job::Split(split?),
        Kind::Gc => gc.map(|(p, victims)| Job::Collect(p, victims))?,
        Kind::Consolidate => Job::Consolidate(consolidate?),
    })
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
