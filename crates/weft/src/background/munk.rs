//! Munk jobs (`store::munk`): loading a hot partition's munk, rebalancing
//! one with the tables flushed since (EvenDB's in-memory compaction), and
//! evicting cold ones to stay within `Options::munk_cache_size`.
//!
//! Loads and rebalances are pool jobs like any other (the partition is
//! busy meanwhile, so no merge, GC or split runs on it), picked last by
//! urgency ([`super::policy`]): a munk only makes reads cheaper, and a read
//! never waits for one — without a munk standing for its version of the
//! partition, it reads the tables. Evictions are made by the picker
//! itself, under the state lock: dropping a munk is one pointer store.
//!
//! A munk is built from one version of its partition and installed only if
//! it still stands for the current one (flushes may have added tables
//! meanwhile; it then simply has more to fold at its next rebalance).

use std::sync::Arc;

use crate::db::core::{Core, Counters, EngineState};
use crate::error::Result;
use crate::iter::{InternalIterator, MergedEntries};
use crate::key::ValueKind;
use crate::stats::ReadPurpose;
use crate::store::compaction::RetentionPolicy;
use crate::store::munk::{Munk, MunkBuilder, MunkRunIter};
use crate::store::sorted_run::SortedRunIter;
use crate::store::value_reader::ValueReader;
use crate::store::{Partition, Version};

/// A munk is evicted to make room only for a partition at least half as
/// hot again (`EVICT_MARGIN_NUM / EVICT_MARGIN_DEN` times), so two
/// partitions of similar heat do not take turns.
const EVICT_MARGIN_NUM: u64 = 3;
const EVICT_MARGIN_DEN: u64 = 2;

/// A munk is rebalanced once this many tables were flushed into its
/// partition since (reads probe those tables first, through the hash index,
/// as in any partition: a few cost little, and a rebalance copies the
/// whole image) ...
const REBALANCE_TABLES: usize = 8;

/// ... or once they hold a `1 / REBALANCE_SHARE` of its entries: a
/// rebalance copies the whole image, so a large munk waits for more.
const REBALANCE_SHARE: u64 = 4;

/// What a munk job does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MunkWork {
    /// Build the partition's munk from its tables.
    Load,
    /// Fold the tables flushed since into a new image.
    Rebalance,
}

/// Munk work due now, hottest partition first; evicts (in place) what
/// must go to stay within the budget or to make room for a hotter
/// partition.
pub(super) fn pick_munk(core: &Core, st: &EngineState) -> Option<(u64, MunkWork)> {
    if !core.munks_on() {
        return None;
    }
    let budget = core.options.munk_cache_size as u64;
    let v = &st.version;
    // Installed munks, coldest first.
    let mut loaded: Vec<(u64, u64, &Arc<Partition>)> = v
        .partitions
        .iter()
        .filter_map(|p| Some((p.munk.heat(), p.munk.load()?.image.bytes(), p)))
        .collect();
    loaded.sort_by_key(|(heat, _, _)| *heat);
    let mut installed: u64 = loaded.iter().map(|(_, b, _)| b).sum();
    // Over the budget (rebalances grow munks): drop the coldest.
    let mut loaded = loaded.into_iter().peekable();
    while installed > budget {
        let Some((_, bytes, p)) = loaded.next() else {
            break;
        };
        evict(core, p);
        installed -= bytes;
    }
    let loaded: Vec<_> = loaded.collect();

    // A munk behind its partition: fold the new tables in (or rebuild one
    // that no longer stands for it at all).
    let behind = loaded
        .iter()
        .rev()
        .filter(|(_, _, p)| !st.busy_partitions.contains(&p.id))
        .find_map(|(_, _, p)| {
            let m = p.munk.load()?;
            match m.covers(p) {
                Some(folded) => {
                    let new = &p.unsorted[folded..];
                    let entries: u64 = new.iter().map(|t| t.meta.entries).sum();
                    let due = new.len() >= REBALANCE_TABLES
                        || (!new.is_empty()
                            && entries.saturating_mul(REBALANCE_SHARE) >= m.image.len() as u64);
                    due.then_some((p.id, MunkWork::Rebalance))
                }
                None => Some((p.id, MunkWork::Load)),
            }
        });
    if behind.is_some() {
        return behind;
    }

    // The hottest partition without one, if worth it and if it fits.
    let (heat, estimate, p) = st
        .idle_partitions()
        .filter(|p| !p.munk.is_loaded())
        .map(|p| (p.munk.heat(), estimated_bytes(v, p), p))
        .filter(|(heat, estimate, p)| {
            *heat >= core.options.munk_min_heat && *estimate <= budget && !p.munk.refused(*estimate)
        })
        .max_by_key(|(heat, _, _)| *heat)?;
    let mut room = budget - installed;
    let mut victims = Vec::new();
    for (victim_heat, bytes, victim) in &loaded {
        if room >= estimate {
            break;
        }
        if victim_heat.saturating_mul(EVICT_MARGIN_NUM) >= heat.saturating_mul(EVICT_MARGIN_DEN)
            || st.busy_partitions.contains(&victim.id)
        {
            break;
        }
        victims.push(*victim);
        room += bytes;
    }
    if room < estimate {
        return None;
    }
    for victim in victims {
        evict(core, victim);
    }
    Some((p.id, MunkWork::Load))
}

/// The memory a munk of `p` would take: the size of its last munk, or its
/// tables and its share of the values in the logs it points into. Only a
/// guess: logs count overwritten versions and garbage, and a WAL kept as a
/// value log is shared by every partition its memtable touched, each
/// counted an equal share however many of its values are theirs.
fn estimated_bytes(v: &Version, p: &Partition) -> u64 {
    (v.partition_bytes(p) + p.unsorted_bytes()).max(p.munk.last_bytes())
}

/// Drops `p`'s munk, if it has one (a merge or GC whose compaction filter
/// removed versions the munk holds drops it too).
pub(super) fn evict(core: &Core, p: &Partition) {
    if p.munk.load().is_some() {
        p.munk.store(None);
        Counters::add(&core.counters.munk_evictions, 1);
    }
}

/// Runs `work` on partition `pid`.
pub(super) fn run_munk_job(core: &Arc<Core>, pid: u64, work: MunkWork) -> Result<()> {
    let Some((part, version)) = super::pin_partition(core, pid) else {
        return Ok(());
    };
    match work {
        MunkWork::Load => load(core, &part, &version),
        MunkWork::Rebalance => fold_new_tables(core, &part, &version),
    }
}

/// Brings `part`'s munk up to every table of `part` (a rebalance), if it
/// has one that stands for `part` with tables left to fold. A merge or GC
/// calls it on the version it starts from, so that its munk holds every
/// input and can be relabeled at its commit.
pub(super) fn fold_new_tables(
    core: &Arc<Core>,
    part: &Partition,
    version: &Arc<Version>,
) -> Result<()> {
    if !core.munks_on() {
        return Ok(());
    }
    let Some(m) = part.munk.load() else {
        return Ok(());
    };
    let Some(folded) = m.covers(part) else {
        // Stale (never expected: relabels keep munks current): rebuild.
        return load(core, part, version);
    };
    if folded == part.unsorted.len() {
        return Ok(());
    }
    let mut children: Vec<Box<dyn InternalIterator>> =
        vec![Box::new(MunkRunIter::new(vec![Arc::clone(&m.image)]))];
    children.extend(super::table_cursors(&part.unsorted[folded..]));
    if build_and_install(core, part, version, children)? {
        Counters::add(&core.counters.munk_rebalances, 1);
    }
    Ok(())
}

/// Builds `part`'s munk from its tables.
fn load(core: &Arc<Core>, part: &Partition, version: &Arc<Version>) -> Result<()> {
    let mut children = super::table_cursors(&part.unsorted);
    if !part.sorted.is_empty() {
        children.push(Box::new(SortedRunIter::new(
            part.sorted.clone(),
            ReadPurpose::Background,
        )));
    }
    if build_and_install(core, part, version, children)? {
        Counters::add(&core.counters.munk_loads, 1);
    }
    Ok(())
}

/// Builds an image of every version `children` hold (all of `part`:
/// SortedStore and UnsortedStore, or an image of them and the tables
/// flushed since) and installs it as standing for `part`, if it still
/// stands for the current version of the partition. False when it was not
/// installed: too large for the budget (the partition's heat restarts, so
/// it is not tried again at once), or the partition is gone.
fn build_and_install(
    core: &Arc<Core>,
    part: &Partition,
    version: &Arc<Version>,
    children: Vec<Box<dyn InternalIterator>>,
) -> Result<bool> {
    let policy = RetentionPolicy {
        snapshots: core.snapshots.sequences(),
        bottommost: true,
    };
    let budget = core.options.munk_cache_size as u64;
    let mut builder = MunkBuilder::new(&policy, budget);
    builder.reserve(part.munk.last_bytes());
    let mut values = ValueReader::new(ReadPurpose::Background, Arc::clone(core.cache.disk_reads()));
    let mut input = MergedEntries::new(children);
    input.seek_to_first()?;
    while input.valid() {
        let e = input.entry();
        let (seq, kind) = (e.seq(), e.kind());
        let offered = builder.offer(e.user_key(), seq, kind, || match kind {
            ValueKind::Pointer => values.read(version, e.value()),
            _ => Ok(e.value().to_vec()),
        });
        if !offered? {
            // Larger than the whole budget: not a candidate again until
            // it shrinks (a GC, a split). Slots change under the state
            // lock only.
            let _st = core.state.lock();
            part.munk.store(None);
            part.munk.refuse(estimated_bytes(version, part).max(1));
            return Ok(false);
        }
        input.next()?;
    }
    let image = Arc::new(builder.finish(&core.munk_bytes));
    Counters::add(&core.counters.munk_build_bytes, image.bytes());
    let munk = Arc::new(Munk::new(image, part, part.unsorted.len()));
    let st = core.state.lock();
    let Some(current) = st.version.partition(part.id) else {
        return Ok(false);
    };
    // Only flushes change a busy partition: they add newer tables, which
    // the munk leaves to its next rebalance.
    if munk.covers(current).is_none() {
        return Ok(false);
    }
    current.munk.store(Some(munk));
    Ok(true)
}

/// Keeps `p`'s munk through a rewrite that consumed `inputs` (table
/// numbers) and produced `p`, or drops it when it did not hold every
/// input. Called by merge and GC at their install, under the state lock.
pub(super) fn relabel(core: &Core, p: &Partition, inputs: impl IntoIterator<Item = u64>) {
    let Some(m) = p.munk.load() else { return };
    let kept = if m.holds_all(inputs) {
        m.relabeled(p)
    } else {
        None
    };
    match kept {
        Some(n) => {
            p.munk.store(Some(Arc::new(n)));
            Counters::add(&core.counters.munk_relabels, 1);
        }
        None => evict(core, p),
    }
}
