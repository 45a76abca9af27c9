//! [`Version`]: an immutable picture of the store (partitions in key order,
//! the value logs their SortedStores point into) that readers pin and
//! edits replace.

use std::sync::Arc;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{compare_positions, parse_internal_key, SequenceNumber, ValueKind};
use crate::range_delete::StoredRangeTombstones;
use crate::stats::{DiskReads, ReadPurpose};

use super::{sorted_run, value_log, Partition, ReadCounters, TableFile};

/// A live value log with its accounting.
#[derive(Clone)]
pub struct LiveValueLog {
    /// The open log.
    pub file: Arc<value_log::ValueLogFile>,
    /// Bytes of values no SortedStore entry points to any more.
    pub garbage: u64,
    /// Partitions whose SortedStore may point into the log.
    pub refs: std::collections::BTreeSet<u64>,
    /// Bytes of the log's records each partition's tables point at, where
    /// known: a WAL kept as a value log holds the values of every partition
    /// its memtable touched, in whatever proportion the writes had, and the
    /// flush counts them (`JobStats::logged_partitions`). Memory only: after
    /// a reopen, and for logs a merge or GC wrote (one partition's), a
    /// partition counts an equal share ([`LiveValueLog::share_of`]).
    pub shares: std::collections::BTreeMap<u64, u64>,
}

impl LiveValueLog {
    /// The live bytes of this log that count toward partition `pid`'s
    /// size: its known share of the records, scaled by the live fraction of
    /// the shares (garbage is not attributed), or else an equal share of
    /// the live bytes among the partitions that point into it.
    pub fn share_of(&self, pid: u64) -> u64 {
        let live = self.file.size().saturating_sub(self.garbage);
        let known: u64 = self.shares.values().sum();
        match self.shares.get(&pid) {
            Some(&bytes) if known > 0 => {
                let scaled = bytes as u128 * live.min(known) as u128 / known as u128;
                scaled as u64
            }
            _ => live / self.refs.len().max(1) as u64,
        }
    }
}

/// An immutable picture of the store: partitions in key order, and the
/// value logs their SortedStores point into.
#[derive(Clone)]
pub struct Version {
    /// Partitions, ascending and covering every key.
    pub partitions: Vec<Arc<Partition>>,
    /// Live value logs by file number.
    pub value_logs: std::collections::BTreeMap<u64, LiveValueLog>,
    /// Flushed range tombstones (`crate::range_delete`): a read checks
    /// the version it finds against them.
    pub range_tombstones: Arc<StoredRangeTombstones>,
}

impl Version {
    /// A store of one empty partition covering all keys.
    #[cfg(test)]
    pub fn new_single() -> Self {
        Version {
            partitions: vec![Arc::new(Partition::new(0, Vec::new(), None))],
            value_logs: Default::default(),
            range_tombstones: Default::default(),
        }
    }

    /// The live value logs partition `pid` points into, by file number.
    pub fn logs_of(&self, pid: u64) -> impl Iterator<Item = (u64, &LiveValueLog)> {
        self.value_logs
            .iter()
            .filter(move |(_, l)| l.refs.contains(&pid))
            .map(|(n, l)| (*n, l))
    }

    /// Bytes partition `p` holds, as a split judges it against
    /// `partition_size`: its SortedStore plus its share of the live values
    /// in the logs it points into ([`LiveValueLog::share_of`]: its own
    /// records where the flush counted them, else an equal share; a log
    /// shared after a split counts half in each side). The UnsortedStore is
    /// left out: a merge moves it in.
    pub fn partition_bytes(&self, p: &Partition) -> u64 {
        let logs: u64 = self.logs_of(p.id).map(|(_, l)| l.share_of(p.id)).sum();
        p.sorted_bytes() + logs
    }

    /// The live value log `ptr` points into.
    pub fn value_log(&self, ptr: &value_log::ValuePointer) -> Result<&value_log::ValueLogFile> {
        match self.value_logs.get(&ptr.log) {
            Some(log) => Ok(&log.file),
            None => Err(crate::Error::corruption(
                format!("{:06}.vlog", ptr.log),
                ptr.offset,
                "value pointer into a value log that is not live",
            )),
        }
    }

    /// Reads the value behind an encoded [`value_log::ValuePointer`] for a
    /// get (one exact read, counted in `disk_reads`). Cursors use a
    /// [`super::value_reader::ValueReader`] instead.
    pub fn resolve(&self, raw: &[u8], disk_reads: &DiskReads) -> Result<Vec<u8>> {
        let ptr = value_log::ValuePointer::parse(raw)?;
        let value = self.value_log(&ptr)?.read(&ptr)?;
        disk_reads.add(ReadPurpose::Get, ptr.record_size());
        Ok(value)
    }

    /// Partition `id`, if this version still has it (a split replaces a
    /// partition with two new ids).
    pub fn partition(&self, id: u64) -> Option<&Arc<Partition>> {
        self.partitions.iter().find(|p| p.id == id)
    }

    /// The partition whose range holds `key`.
    pub fn partition_for(&self, key: &[u8]) -> &Arc<Partition> {
        let i = self
            .partitions
            .partition_point(|p| p.lower.as_slice() <= key);
        let p = &self.partitions[i.saturating_sub(1)];
        debug_assert!(p.contains(key));
        p
    }

    /// True when the partition of `key` has a munk standing for its state
    /// in this version (`store::munk`).
    pub fn munk_covers(&self, key: &[u8]) -> bool {
        let p = self.partition_for(key);
        p.munk
            .current()
            .as_ref()
            .is_some_and(|m| m.covers(p).is_some())
    }

    /// The newest version of `key` at `snapshot` in the store; a separated
    /// value is read from its log, its bytes counted in `disk_reads`.
    pub fn get(
        &self,
        key: &[u8],
        snapshot: SequenceNumber,
        counters: &ReadCounters,
        disk_reads: &DiskReads,
        munks: bool,
    ) -> Result<Option<(SequenceNumber, ValueKind, Vec<u8>)>> {
        // Separated values are read from their value log, so a found version
        // is always `Put` or `Delete`.
        match self
            .partition_for(key)
            .get(key, snapshot, counters, munks)?
        {
            Some((seq, ValueKind::Pointer, raw)) => {
                ReadCounters::bump(&counters.value_log_reads);
                Ok(Some((seq, ValueKind::Put, self.resolve(&raw, disk_reads)?)))
            }
            None => {
                ReadCounters::bump(&counters.misses);
                Ok(None)
            }
            other => Ok(other),
        }
    }

    /// Cursors over every table for a scan: one sorted run spanning all
    /// partitions' SortedStores (partitions are disjoint and ordered, so
    /// their runs concatenate), and the UnsortedStore tables as runs too.
    ///
    /// A partition's UnsortedStore tables overlap each other, but tables of
    /// different partitions never do: run `k` strings together the `k`-th
    /// newest table of every partition, in partition order. So a scan opens
    /// as many UnsortedStore cursors as the fullest partition has tables,
    /// not as all partitions together: before, a `seek + 10` on a store of
    /// several partitions positioned a cursor in every UnsortedStore table
    /// of every partition and stepped a merge as wide. A table that would
    /// not follow its run's last table in key order (never expected: a
    /// partition's tables lie inside its range) gets a run of its own. A
    /// seek opens at most one table per run, and none where the run's next
    /// table starts past the target (the run rests on its metadata:
    /// `sorted_run`), so a short scan reads the tables of the partitions it
    /// covers.
    ///
    /// With munks on (`munk_scans` given, counting the iterators that read
    /// one), the munks standing for their partitions in this version form
    /// one more run (`store::munk::MunkRunIter`), and those partitions'
    /// SortedStores and folded tables are left out.
    pub fn iters(
        &self,
        fill_cache: bool,
        munk_scans: Option<&crate::util::stripe::StripedCounter>,
    ) -> Vec<Box<dyn InternalIterator>> {
        let munks = munk_scans.is_some();
        let purpose = ReadPurpose::Scan { fill_cache };
        let mut runs: Vec<Vec<Arc<TableFile>>> = Vec::new();
        let mut strays: Vec<Vec<Arc<TableFile>>> = Vec::new();
        let mut sorted = Vec::new();
        let mut images = Vec::new();
        for p in &self.partitions {
            // A munk standing for this version of the partition replaces
            // its SortedStore and the UnsortedStore tables it folded in.
            // The iterator outlives this call, so it holds the image by
            // an `Arc` (as it holds its super version); the munk itself
            // is only looked at.
            let folded = match munks {
                true => p.munk.current().as_ref().and_then(|m| {
                    let folded = m.covers(p)?;
                    images.push(Arc::clone(&m.image));
                    Some(folded)
                }),
                false => None,
            };
            for (k, t) in p.unsorted[folded.unwrap_or(0)..].iter().rev().enumerate() {
                if k == runs.len() {
                    runs.push(Vec::new());
                }
                let run = &mut runs[k];
                if run.last().is_none_or(|prev| ends_before(prev, t)) {
                    run.push(Arc::clone(t));
                } else {
                    strays.push(vec![Arc::clone(t)]);
                }
            }
            if folded.is_none() {
                sorted.extend(p.sorted.iter().cloned());
            }
        }
        runs.extend(strays);
        if !sorted.is_empty() {
            runs.push(sorted);
        }
        let mut iters: Vec<Box<dyn InternalIterator>> = runs
            .into_iter()
            .map(|run| {
                Box::new(sorted_run::SortedRunIter::new(run, purpose)) as Box<dyn InternalIterator>
            })
            .collect();
        if !images.is_empty() {
            if let Some(c) = munk_scans {
                c.add(1);
            }
            iters.push(Box::new(super::munk::MunkRunIter::new(images)));
        }
        iters
    }

    /// Every live table.
    pub fn all_tables(&self) -> impl Iterator<Item = &Arc<TableFile>> {
        self.partitions
            .iter()
            .flat_map(|p| p.unsorted.iter().chain(p.sorted.iter()))
    }

    /// The most UnsortedStore tables any one partition holds (what the
    /// write stall triggers compare against `unsorted_*_tables`).
    pub fn unsorted_tables(&self) -> usize {
        self.partitions
            .iter()
            .map(|p| p.unsorted.len())
            .max()
            .unwrap_or(0)
    }

    /// `t` as a flushed tombstone pending in every partition it overlaps
    /// (`None`: an empty range, which covers nothing).
    pub fn stored_range_tombstone(
        &self,
        t: crate::range_delete::RangeTombstone,
    ) -> Option<crate::range_delete::StoredRangeTombstone> {
        crate::range_delete::stored(
            t,
            self.partitions
                .iter()
                .map(|p| (p.id, p.lower.as_slice(), p.upper.as_deref())),
        )
    }

    /// Replaces partition `id` with `p`.
    pub fn with_partition(&self, p: Partition) -> Version {
        p.check_invariants();
        let mut v = self.clone();
        for slot in &mut v.partitions {
            if slot.id == p.id {
                *slot = Arc::new(p);
                return v;
            }
        }
        debug_assert!(false, "partition {} not in version", p.id);
        v
    }
}

/// True if every entry of `a` comes before every entry of `b` (internal
/// order), so a run may hold `b` right after `a`.
fn ends_before(a: &TableFile, b: &TableFile) -> bool {
    match (
        parse_internal_key(&a.meta.largest),
        parse_internal_key(&b.meta.smallest),
    ) {
        (Some(a), Some(b)) => {
            compare_positions(a.user_key, a.seq, b.user_key, b.seq) == std::cmp::Ordering::Less
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log of `size` zero bytes standing in for a kept WAL.
    fn log(dir: &std::path::Path, size: usize) -> Arc<value_log::ValueLogFile> {
        std::fs::write(crate::filename::value_log_path(dir, 9), vec![0u8; size]).unwrap();
        value_log::ValueLogFile::open(&crate::util::fs::real(), dir, 9, size as u64).unwrap()
    }

    /// A WAL holding 900 bytes of one partition's values and 100 of
    /// another's counts them so, not half each; garbage scales both; a
    /// partition with no known share gets an equal one.
    #[test]
    fn a_kept_wal_counts_toward_each_partition_by_its_records() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = LiveValueLog {
            file: log(dir.path(), 1000),
            garbage: 0,
            refs: [1, 2].into(),
            shares: [(1, 900), (2, 100)].into(),
        };
        assert_eq!((l.share_of(1), l.share_of(2)), (900, 100));
        l.garbage = 500;
        assert_eq!((l.share_of(1), l.share_of(2)), (450, 50));
        l.shares.clear();
        assert_eq!((l.share_of(1), l.share_of(2)), (250, 250));
    }
}
