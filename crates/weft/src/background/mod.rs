//! Background work: flushing immutable memtables into UnsortedStore tables
//! and reorganising partitions.
//!
//! [`crate::Options::background_jobs`] threads share it. One, the flush
//! thread ([`run_flushes`]), only flushes: flushes must land in memtable
//! order, and a late one stalls writers at once. The others form a pool
//! ([`run_jobs`]) that merges, consolidates, collects value logs and splits
//! partitions, in the order [`policy`] chooses (urgency first, and no due
//! job waits for ever), at most one job per partition at a time
//! ([`EngineState::busy_partitions`]): UniKV's partitions exist so that
//! reorganisation is local, and jobs of different partitions share nothing
//! but the manifest commit. With one thread doing everything, every merge
//! held up the flushes queued behind it; with one job thread, a merge of one
//! partition held up the split or GC of every other.
//!
//! One module per job: [`flush`], [`checkpoint`] (of a partition's hash
//! index), [`merge`] and [`gc`] (both rewrite a SortedStore: [`rewrite`]),
//! [`split`], [`consolidate`] and [`munk`] (loads and rebalances of
//! in-memory partitions). Each job ends in [`commit::commit_edit`],
//! the one place a manifest edit is made, appended and installed, and its
//! new files are held by a [`commit::NewFiles`] guard until then.
//!
//! What the threads may do at once, and what keeps it sound:
//! * A job's partition is marked busy when it is picked (under the state
//!   lock) and freed when the job ends; pickers see only idle partitions
//!   ([`EngineState::idle_partitions`]). So nothing but a flush changes a
//!   partition under a running job, and a partition a job works on is never
//!   split away under it.
//! * A flush adds tables to a partition's UnsortedStore; a merge or GC
//!   replaces the tables it read and keeps every other (`retain`), so each
//!   installs its result into the *current* version, never into the one it
//!   started from. Jobs of different partitions do the same: each replaces
//!   its own partition in whatever version is current when it commits, and
//!   edits of shared value logs (a log both halves of a split point into)
//!   are applied to the current version too.
//! * A split changes partitions and a consolidation rewrites the
//!   UnsortedStore in place (its output must stay older than every table
//!   flushed after its inputs). Neither runs beside a flush: each raises
//!   [`restructuring`], which keeps new flushes from starting, and waits
//!   until the running one is done ([`FlushesHeld`]). This wait stays global
//!   because a flush writes one table per partition its memtable touches
//!   and commits them at once: a flush cut by the bounds of before a split
//!   could not install its table for the split partition. Both are rare
//!   (a split per `partition_size` of growth, a consolidation only while
//!   scans run), and writers go on into the memtables meanwhile.
//! * Manifest edits ([`commit::commit_edit`]): a job makes its edit under
//!   the state lock, appends it (an fdatasync) with the state lock
//!   released, and installs it under the state lock again, holding
//!   [`Core::manifest`] throughout. Writers, who take the state lock when a
//!   memtable fills or work falls behind, go on during the fdatasync, which can take
//!   milliseconds while the disk writes tables back; the manifest's order
//!   stays the install order, and no version changes between an edit and
//!   its install (only these jobs change it, each under the manifest lock).
//!   The manifest lock stays held across the fdatasync: it is what makes
//!   the manifest's order the install order. Jobs last far longer than a
//!   commit, so the pool's threads rarely meet there.
//! * Hash-index changes (a flush adds its tables, a merge or consolidation
//!   removes its inputs) are serialized per partition by
//!   [`Partition::index_changes`], and a flush grows an index from the
//!   tables of the current version, so an index never keeps entries of
//!   tables merged away.
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
//! [`Partition::index_changes`]: crate::store::Partition::index_changes

mod checkpoint;
mod commit;
mod consolidate;
mod flush;
mod gc;
mod merge;
mod munk;
mod policy;
#[cfg(test)]
mod pool_tests;
mod rewrite;
mod split;
#[cfg(test)]
pub(crate) mod test_support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::db::core::{Core, EngineState};
use crate::db::lifetime::SaveAt;
use crate::stats::JobKind;
use crate::util::fs::activity;

pub(crate) use flush::write_memtable;
use policy::{Due, Kind, Policy};

/// A job of the pool, with the partition it works on.
enum Job {
    Consolidate(u64),
    Merge(u64),
    Collect(u64, BTreeSet<u64>),
    Split(u64),
    Munk(u64, munk::MunkWork),
}

impl Job {
    fn partition(&self) -> u64 {
        match self {
            Job::Consolidate(p)
            | Job::Merge(p)
            | Job::Collect(p, _)
            | Job::Split(p)
            | Job::Munk(p, _) => *p,
        }
    }

    /// The kind its stats are recorded under.
    fn kind(&self) -> JobKind {
        match self {
            Job::Consolidate(_) => JobKind::Consolidation,
            Job::Merge(_) => JobKind::Merge,
            Job::Collect(..) => JobKind::Gc,
            Job::Split(_) => JobKind::Split,
            Job::Munk(..) => JobKind::Munk,
        }
    }
}

/// How often an idle pool thread looks for munk work while munks are on.
const MUNK_LOOK_INTERVAL: Duration = Duration::from_millis(250);

/// A background thread's loop, to run on a thread of its own.
pub(crate) type ThreadLoop = Box<dyn FnOnce() + Send>;

/// The background threads' loops, each with its thread's name: the flush
/// thread's and [`crate::Options::background_jobs`]` - 1` pool threads',
/// all sharing one job policy. Each returns at shutdown.
pub(crate) fn thread_loops(core: &Arc<Core>) -> Vec<(String, ThreadLoop)> {
    let policy: Arc<Mutex<Policy>> = Arc::default();
    let flush: ThreadLoop = {
        let (core, policy) = (Arc::clone(core), Arc::clone(&policy));
        Box::new(move || run_flushes(&core, &policy))
    };
    let pool = (0..core.options.background_jobs - 1).map(|i| {
        let (core, policy) = (Arc::clone(core), Arc::clone(&policy));
        let run: ThreadLoop = Box::new(move || run_jobs(&core, &policy));
        (format!("weft-jobs-{i}"), run)
    });
    std::iter::once(("weft-flush".to_string(), flush))
        .chain(pool)
        .collect()
}

/// The flush thread's loop; returns at shutdown. Between flushes it also
/// saves the lifetime counters every [`crate::Options::stats_save_interval`]
/// (`db::lifetime`): a thread that is always there, and that waits on the
/// state's condition variable anyway.
fn run_flushes(core: &Arc<Core>, policy: &Mutex<Policy>) {
    loop {
        let queued = {
            let mut st = core.state.lock();
            loop {
                if st.shutting_down {
                    return;
                }
                let save_in = core.stats_save_due_in();
                if save_in == Some(Duration::ZERO) {
                    parking_lot::MutexGuard::unlocked(&mut st, || {
                        core.save_stats(SaveAt::Interval);
                    });
                    continue;
                }
                if !core.is_poisoned() && !st.imms.is_empty() && st.restructuring == 0 {
                    break;
                }
                match save_in {
                    Some(wait) => {
                        core.state_cv.wait_for(&mut st, wait);
                    }
                    None => core.state_cv.wait(&mut st),
                }
            }
            st.flushing = true;
            // Job stats: a flush is due from when its memtable became immutable.
            st.imms
                .front()
                .map_or(Duration::ZERO, |imm| imm.made_immutable.elapsed())
        };
        let started = Instant::now();
        let result = activity("flush", || flush::flush_oldest(core));
        core.counters
            .record_job(JobKind::Flush, queued, started.elapsed());
        if let Err(e) = &result {
            core.poison(e);
        }
        let mut st = core.state.lock();
        st.flushing = false;
        if result.is_ok() {
            observe_due(core, &mut st, policy);
        }
        core.state_cv.notify_all();
    }
}

/// The loop of one thread of the job pool ([`crate::Options::background_jobs`]
/// less the flush thread); returns at shutdown.
///
/// It runs at a lower CPU priority ([`crate::util::thread_priority`]):
/// merges, GC, splits and consolidations can lag the writes they follow,
/// and on a busy machine the threads serving reads and writes should keep
/// the cores. Writers that a lagging merge would hold up are slowed and
/// then stalled (`unsorted_slowdown_tables`, `unsorted_stop_tables`),
/// which frees the cores for it: a starved job costs latency, never
/// correctness. The flush thread keeps its priority, since a late flush
/// stalls writers at once.
fn run_jobs(core: &Arc<Core>, policy: &Mutex<Policy>) {
    crate::util::thread_priority::lower_current();
    loop {
        let (job, queued) = {
            let mut st = core.state.lock();
            loop {
                if st.shutting_down {
                    return;
                }
                if !core.is_poisoned() {
                    if let Some((job, queued)) = next_job(core, &mut st, policy) {
                        let fresh = st.busy_partitions.insert(job.partition());
                        debug_assert!(fresh, "a picker chose a busy partition");
                        break (job, queued);
                    }
                }
                if core.munks_on() {
                    // Reads heat partitions without waking anyone: look
                    // again a few times per half-life.
                    core.state_cv.wait_for(&mut st, MUNK_LOOK_INTERVAL);
                } else {
                    core.state_cv.wait(&mut st);
                }
            }
        };
        let (pid, kind) = (job.partition(), job.kind());
        let started = Instant::now();
        let result = match job {
            Job::Merge(p) => activity("merge", || merge::merge_partition(core, p)),
            Job::Consolidate(p) => {
                activity("consolidate", || consolidate::consolidate_unsorted(core, p))
            }
            Job::Collect(p, victims) => activity("gc", || gc::collect_garbage(core, p, victims)),
            Job::Split(p) => activity("split", || split::split_partition(core, p)),
            Job::Munk(p, work) => activity("munk", || munk::run_munk_job(core, p, work)),
        };
        core.counters.record_job(kind, queued, started.elapsed());
        if let Err(e) = result {
            core.poison(&e);
        }
        let mut st = core.state.lock();
        st.busy_partitions.remove(&pid);
        core.state_cv.notify_all();
    }
}

/// The job to run next, and how long a job of its kind had been due: what
/// each job's picker finds due among the partitions no job is working on,
/// chosen by the shared policy ([`policy`]: urgency first, and no due job
/// waits for ever).
fn next_job(core: &Core, st: &mut EngineState, policy: &Mutex<Policy>) -> Option<(Job, Duration)> {
    let (due, jobs) = due_jobs(core, st);
    let now = Instant::now();
    let mut policy = policy.lock();
    policy.observe(&due, now);
    let kind = policy.pick(&due)?;
    let queued = policy.take_queued(kind, now);
    // The policy picks only a kind that is due, so its job is `Some`.
    let job = match kind {
        Kind::Merge => Job::Merge(jobs.merge?),
        Kind::Split => Job::Split(jobs.split?),
        Kind::Gc => jobs.gc.map(|(p, victims)| Job::Collect(p, victims))?,
        Kind::Consolidate => Job::Consolidate(jobs.consolidate?),
        Kind::Munk => jobs.munk.map(|(p, work)| Job::Munk(p, work))?,
    };
    Some((job, queued))
}

/// Notes which kinds of job are due now, for their time queued (the
/// flush thread calls it after each flush: a flush is what makes most
/// merges due, often while every pool thread is busy).
fn observe_due(core: &Core, st: &mut EngineState, policy: &Mutex<Policy>) {
    let (due, _) = due_jobs(core, st);
    policy.lock().observe(&due, Instant::now());
}

/// The job each picker would choose now.
struct DueJobs {
    merge: Option<u64>,
    split: Option<u64>,
    gc: Option<(u64, BTreeSet<u64>)>,
    consolidate: Option<u64>,
    munk: Option<(u64, munk::MunkWork)>,
}

fn due_jobs(core: &Core, st: &mut EngineState) -> (Due, DueJobs) {
    let merge = merge::pick_merge(core, st);
    let split = split::pick_split(core, st);
    let gc = gc::pick_gc(core, st);
    let consolidate = consolidate::pick_consolidation(core, st);
    let munk = munk::pick_munk(core, st);
    let due = Due {
        merge: merge.map(|(_, urgent)| urgent),
        split: split.is_some(),
        gc: gc.is_some(),
        consolidate: consolidate.is_some(),
        munk: munk.is_some(),
    };
    let jobs = DueJobs {
        merge: merge.map(|(p, _)| p),
        split,
        gc,
        consolidate,
        munk,
    };
    (due, jobs)
}

/// One cursor per table, for a job that reads them whole (merge, GC,
/// consolidation, munk builds).
fn table_cursors(
    tables: &[Arc<crate::store::TableFile>],
) -> Vec<Box<dyn crate::iter::InternalIterator>> {
    tables
        .iter()
        .map(|t| {
            Box::new(t.table.iter_for(crate::stats::ReadPurpose::Background))
                as Box<dyn crate::iter::InternalIterator>
        })
        .collect()
}

/// Partition `pid` and the version it was taken from, as a job starts
/// (`None` when a split removed it).
fn pin_partition(
    core: &Core,
    pid: u64,
) -> Option<(Arc<crate::store::Partition>, Arc<crate::store::Version>)> {
    let st = core.state.lock();
    st.version
        .partition(pid)
        .map(|p| (Arc::clone(p), Arc::clone(&st.version)))
}

/// Keeps flushes from running while a job restructures a
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
        st.restructuring += 1;
        while st.flushing {
            core.state_cv.wait(&mut st);
        }
        FlushesHeld { core }
    }
}

impl Drop for FlushesHeld<'_> {
    fn drop(&mut self) {
        let mut st = self.core.state.lock();
        st.restructuring -= 1;
        self.core.state_cv.notify_all();
    }
}
