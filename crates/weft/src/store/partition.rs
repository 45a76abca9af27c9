//! One range partition and its point lookup through the layers
//! (UnsortedStore by the hash index, newest first; then the SortedStore by
//! fence keys), with the per-layer read accounting.

use std::sync::Arc;

use crate::error::Result;
use crate::key::{SequenceNumber, ValueKind};
use crate::util::stripe::StripedCounter;

use super::munk::MunkSlot;
use super::{hash_index, shared_index, SharedIndex, TableFile, INITIAL_INDEX_CAPACITY};

/// Where point reads were answered and what they read: the per-layer I/O
/// accounting of UniKV §III-B (a recent key costs one UnsortedStore block
/// read, an old one a SortedStore block plus, if separated, one value read).
///
/// Every get bumps at least one of them, so each is striped
/// ([`StripedCounter`]): one shared atomic each made every get on every core
/// write the same cache lines.
#[derive(Debug, Default)]
pub struct ReadCounters {
    /// Gets answered from a memtable.
    pub memtable_hits: StripedCounter,
    /// Gets answered from an UnsortedStore table.
    pub unsorted_hits: StripedCounter,
    /// Gets answered from the SortedStore.
    pub sorted_hits: StripedCounter,
    /// Gets answered from a munk (`store::munk`).
    pub munk_hits: StripedCounter,
    /// Iterators that read at least one munk.
    pub munk_scans: StripedCounter,
    /// Gets that found nothing.
    pub misses: StripedCounter,
    /// UnsortedStore tables read by gets (index candidates and unknown tables).
    pub unsorted_probes: StripedCounter,
    /// ...of which held no version of the key visible to the get (tag
    /// collisions, tables the index did not know, only newer versions).
    pub unsorted_false_probes: StripedCounter,
    /// SortedStore tables read by gets.
    pub sorted_probes: StripedCounter,
    /// Values read from value logs by gets.
    pub value_log_reads: StripedCounter,
}

impl ReadCounters {
    pub(super) fn bump(c: &StripedCounter) {
        c.add(1);
    }
}

/// One range partition `[lower, upper)`.
#[derive(Clone)]
pub struct Partition {
    /// Stable id (recorded in the manifest).
    pub id: u64,
    /// Inclusive lower bound; empty = unbounded.
    pub lower: Vec<u8>,
    /// Exclusive upper bound; `None` = unbounded.
    pub upper: Option<Vec<u8>>,
    /// UnsortedStore tables, oldest first.
    pub unsorted: Vec<Arc<TableFile>>,
    /// SortedStore tables, ascending and non-overlapping.
    pub sorted: Vec<Arc<TableFile>>,
    /// Hash index over the UnsortedStore's keys (UniKV §III-B).
    pub index: SharedIndex,
    /// Held by a job while it changes [`Partition::index`] (copy, change,
    /// swap: [`super::change_index`]), so a flush adding tables and a merge
    /// removing them never interleave and lose one change. One per
    /// partition, shared by the copies of it in successive versions: jobs
    /// on other partitions change their own indexes meanwhile.
    pub index_changes: Arc<parking_lot::Mutex<()>>,
    /// The partition's munk and heat (`store::munk`), likewise shared by
    /// its copies in successive versions.
    pub munk: Arc<MunkSlot>,
}

impl Partition {
    /// An empty partition.
    pub fn new(id: u64, lower: Vec<u8>, upper: Option<Vec<u8>>) -> Self {
        Partition {
            id,
            lower,
            upper,
            unsorted: Vec::new(),
            sorted: Vec::new(),
            index: shared_index(hash_index::HashIndex::with_capacity(INITIAL_INDEX_CAPACITY)),
            index_changes: Arc::default(),
            munk: Arc::default(),
        }
    }

    /// True when `key` falls in this partition's range.
    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.lower.as_slice() && self.upper.as_deref().is_none_or(|u| key < u)
    }

    /// Bytes of UnsortedStore tables.
    pub fn unsorted_bytes(&self) -> u64 {
        self.unsorted.iter().map(|t| t.meta.size).sum()
    }

    /// Bytes of SortedStore tables.
    pub fn sorted_bytes(&self) -> u64 {
        self.sorted.iter().map(|t| t.meta.size).sum()
    }

    /// The newest version of `key` at `snapshot` in this partition. With
    /// `munks` on, the read counts toward the partition's heat, and a munk
    /// standing for this version of the partition answers in place of the
    /// tables it folded in.
    pub fn get(
        &self,
        key: &[u8],
        snapshot: SequenceNumber,
        counters: &ReadCounters,
        munks: bool,
    ) -> Result<Option<(SequenceNumber, ValueKind, Vec<u8>)>> {
        let munk = match munks {
            true => {
                self.munk.touch();
                Some(self.munk.current())
            }
            false => None,
        };
        let munk = munk
            .as_ref()
            .and_then(|g| g.as_ref())
            .and_then(|m| m.covers(self).map(|folded| (m, folded)));
        let folded = munk.as_ref().map_or(0, |(_, folded)| *folded);
        // The hash index names the UnsortedStore tables that may hold the
        // key (tags collide, so each candidate is read and its key compared).
        // A table the index does not know is probed too: an older version
        // pinned by a reader may still list tables a later merge removed from
        // the shared index.
        let mut candidates = Vec::new();
        // Almost always every table is indexed; only when one is not is the
        // per-table list of unknown tables worth building.
        let unknown: Option<Vec<bool>> = {
            let index = self.index.load();
            index.lookup(key, &mut candidates);
            let known = |t: &Arc<TableFile>| index.contains_table(t.meta.number);
            if self.unsorted.iter().all(known) {
                None
            } else {
                Some(self.unsorted.iter().map(|t| !known(t)).collect())
            }
        };
        for (i, t) in self.unsorted.iter().enumerate().skip(folded).rev() {
            let unknown = unknown.as_ref().is_some_and(|u| u[i]);
            if !unknown && !candidates.contains(&t.meta.number) {
                continue;
            }
            if key < t.meta.smallest_user_key() || key > t.meta.largest_user_key() {
                continue;
            }
            if !t.table.may_contain(key) {
                continue;
            }
            ReadCounters::bump(&counters.unsorted_probes);
            if let Some(found) = t.table.get(key, snapshot)? {
                ReadCounters::bump(&counters.unsorted_hits);
                return Ok(Some(found));
            }
            ReadCounters::bump(&counters.unsorted_false_probes);
        }
        if let Some((m, _)) = munk {
            // The munk holds the SortedStore and the older tables, values
            // resolved.
            let found = m.image.get(key, snapshot);
            if found.is_some() {
                ReadCounters::bump(&counters.munk_hits);
            }
            return Ok(found);
        }
        // Merges never split one user key's versions across sorted tables,
        // so at most one table can hold the key.
        let i = self
            .sorted
            .partition_point(|t| t.meta.largest_user_key() < key);
        match self.sorted.get(i) {
            Some(t) if t.meta.smallest_user_key() <= key => {
                ReadCounters::bump(&counters.sorted_probes);
                let found = t.table.get(key, snapshot)?;
                if found.is_some() {
                    ReadCounters::bump(&counters.sorted_hits);
                }
                Ok(found)
            }
            _ => Ok(None),
        }
    }

    pub(super) fn check_invariants(&self) {
        debug_assert!(self
            .sorted
            .windows(2)
            .all(|w| w[0].meta.largest_user_key() < w[1].meta.smallest_user_key()));
        debug_assert!(self
            .unsorted
            .windows(2)
            .all(|w| w[0].meta.number < w[1].meta.number));
    }
}
