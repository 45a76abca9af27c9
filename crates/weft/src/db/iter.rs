//! The public cursors over a database: [`DbIterator`] (positioned, one
//! snapshot for its whole life) and [`Range`] (a `std::iter::Iterator`
//! over a key range, either direction).

use std::sync::Arc;

use super::core::SuperVersion;
use super::watermark::OwnedReadGuard;
use crate::error::Result;
use crate::iter::MergingIter;
use crate::key::{SequenceNumber, ValueKind};
use crate::range_delete::RangeTombstoneSet;
use crate::stats::ReadPurpose;
use crate::store::value_reader::ValueReader;

/// A cursor over the database at one snapshot (an atomic scan), bounded by
/// the `lower_bound` (inclusive) and `upper_bound` (exclusive) of its
/// [`crate::ReadOptions`]. It pins the memtables and tables it reads, so it
/// sees exactly one point in time however long it lives.
///
/// Positioning calls return storage errors; after an error the cursor is
/// invalid.
pub struct DbIterator {
    merged: MergingIter,
    /// The sequence it reads at.
    seq: SequenceNumber,
    /// The range deletes of the pinned state when its memtables hold
    /// some (`SuperVersion::memtable_range_tombstones`); else the pinned
    /// version's are read through the pin. A key one of them deletes is
    /// stepped over like a tombstone.
    mem_range_tombstones: Option<Arc<RangeTombstoneSet>>,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    valid: bool,
    /// The current value when it is separated (read from its value log).
    resolved: Option<Vec<u8>>,
    /// Reads separated values, with readahead while the cursor walks a log
    /// in order.
    /// Made at the first separated value: most scans meet none, and making
    /// one clones the shared `Arc<DiskReads>` it counts in.
    values: Option<ValueReader>,
    /// What `values` counts its reads as.
    purpose: ReadPurpose,
    /// The super version it reads, held by the guard that counts the
    /// iterator as a reader in flight for its whole life, so the memtables'
    /// read watermark stays at or below its sequence.
    pin: OwnedReadGuard<Arc<SuperVersion>>,
    /// Munks are on (`Options::munk_cache_size`): each seek counts toward
    /// the heat of the partition it lands in (`store::munk`).
    munks: bool,
    /// What every stored key of its keyspace starts with (`db::keyspace`;
    /// empty for the default keyspace): added to seek targets, cut from the
    /// keys it returns.
    prefix: Vec<u8>,
    /// Steps over the span reserved for the other keyspaces: a cursor of
    /// the default keyspace.
    hide_reserved: bool,
}

// A positioned cursor (RocksDB style), not a `std::iter::Iterator`: `next`
// moves and reports errors; the current entry is read separately.
#[allow(clippy::should_implement_trait)]
impl DbIterator {
    pub(crate) fn new(
        merged: MergingIter,
        seq: SequenceNumber,
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
        purpose: ReadPurpose,
        pin: OwnedReadGuard<Arc<SuperVersion>>,
        munks: bool,
    ) -> Self {
        DbIterator {
            mem_range_tombstones: pin.holder().memtable_range_tombstones(),
            merged,
            seq,
            lower,
            upper,
            valid: false,
            resolved: None,
            values: None,
            purpose,
            pin,
            munks,
            prefix: Vec::new(),
            hide_reserved: true,
        }
    }

    /// This cursor made a cursor of the keyspace whose stored keys start
    /// with `prefix` (its bounds already stored keys); an empty prefix
    /// leaves it the default keyspace's.
    pub(crate) fn within(mut self, prefix: &[u8]) -> Self {
        if !prefix.is_empty() {
            self.prefix = prefix.to_vec();
            self.hide_reserved = false;
        }
        self
    }

    /// `key` of its keyspace as a stored key.
    fn stored(&self, key: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.prefix.len() + key.len());
        k.extend_from_slice(&self.prefix);
        k.extend_from_slice(key);
        k
    }

    /// Counts a seek to `key` toward its partition's heat (munks on).
    fn touch(&self, key: &[u8]) {
        if self.munks {
            self.pin.holder().version.partition_for(key).munk.touch();
        }
    }

    /// True when positioned on a key.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// Positions on the first key.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.touch(self.lower.as_deref().unwrap_or_default());
        let r = match self.lower.clone() {
            Some(l) => self.merged.seek(&l),
            None => self.merged.seek_to_first(),
        };
        self.settle(r, true)
    }

    /// Positions on the last key.
    pub fn seek_to_last(&mut self) -> Result<()> {
        if let Some(u) = &self.upper {
            self.touch(u);
        }
        let r = match self.upper.clone() {
            Some(u) => self.merged.seek_before(&u),
            None => self.merged.seek_to_last(),
        };
        self.settle(r, false)
    }

    /// Positions on the first key `>= key`.
    pub fn seek(&mut self, key: &[u8]) -> Result<()> {
        let key = self.stored(key);
        let target = match &self.lower {
            Some(l) if *l > key => l.clone(),
            _ => key,
        };
        self.touch(&target);
        let r = self.merged.seek(&target);
        self.settle(r, true)
    }

    /// Positions on the last key `<= key`.
    pub fn seek_for_prev(&mut self, key: &[u8]) -> Result<()> {
        // The last key < key + "\0" is the last key <= key.
        let mut after = self.stored(key);
        self.touch(&after);
        after.push(0);
        let target = match &self.upper {
            Some(u) if *u < after => u.clone(),
            _ => after,
        };
        let r = self.merged.seek_before(&target);
        self.settle(r, false)
    }

    /// Moves to the next key. Requires `valid()`.
    pub fn next(&mut self) -> Result<()> {
        assert!(self.valid, "DbIterator::next on an invalid iterator");
        let r = self.merged.next();
        self.settle(r, true)
    }

    /// Moves to the previous key. Requires `valid()`.
    pub fn prev(&mut self) -> Result<()> {
        assert!(self.valid, "DbIterator::prev on an invalid iterator");
        let r = self.merged.prev();
        self.settle(r, false)
    }

    /// The current key. Requires `valid()`.
    pub fn key(&self) -> &[u8] {
        assert!(self.valid, "DbIterator::key on an invalid iterator");
        &self.merged.key()[self.prefix.len()..]
    }

    /// The current value. Requires `valid()`.
    pub fn value(&self) -> &[u8] {
        assert!(self.valid, "DbIterator::value on an invalid iterator");
        match &self.resolved {
            Some(v) => v,
            None => self.merged.value(),
        }
    }

    /// True when the current version is deleted: a tombstone, or a
    /// version a range delete covers.
    fn deleted(&self) -> bool {
        self.merged.kind() == ValueKind::Delete
            || self
                .mem_range_tombstones
                .as_deref()
                .unwrap_or(self.pin.holder().version.range_tombstones.set())
                .deletes(self.merged.key(), self.merged.seq(), self.seq)
    }

    /// Skips deleted keys in the direction of travel and applies the bounds.
    fn settle(&mut self, r: Result<()>, forward: bool) -> Result<()> {
        self.valid = false;
        r?;
        loop {
            if !self.merged.valid() {
                break;
            }
            if self.hide_reserved && crate::keyspace_prefix::is_reserved(self.merged.key()) {
                // The other keyspaces' keys: one seek past them all.
                if forward {
                    if self.past_upper() {
                        return Ok(());
                    }
                    self.merged.seek(crate::keyspace_prefix::RESERVED_END)?;
                } else {
                    if self.before_lower() {
                        return Ok(());
                    }
                    self.merged.seek_before(crate::keyspace_prefix::RESERVED)?;
                }
                continue;
            }
            if !self.deleted() {
                break;
            }
            if forward {
                if self.past_upper() {
                    return Ok(());
                }
                self.merged.next()?;
            } else {
                if self.before_lower() {
                    return Ok(());
                }
                self.merged.prev()?;
            }
        }
        self.valid = self.merged.valid() && !self.past_upper() && !self.before_lower();
        self.resolved = None;
        if self.valid {
            if let Err(e) = self.merged.prepare_value() {
                self.valid = false;
                return Err(e);
            }
        }
        if self.valid && self.merged.kind() == ValueKind::Pointer {
            let sv = self.pin.holder();
            let values = self
                .values
                .get_or_insert_with(|| ValueReader::new(self.purpose, Arc::clone(&sv.disk_reads)));
            match values.read(&sv.version, self.merged.value()) {
                Ok(v) => self.resolved = Some(v),
                Err(e) => {
                    self.valid = false;
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    fn past_upper(&self) -> bool {
        self.upper
            .as_deref()
            .is_some_and(|u| self.merged.key() >= u)
    }

    fn before_lower(&self) -> bool {
        self.lower.as_deref().is_some_and(|l| self.merged.key() < l)
    }
}

/// A Rust iterator over `(key, value)` pairs of a key range at one snapshot;
/// double-ended, so `.rev()` scans backwards. Both ends read the same
/// snapshot and stop where they meet.
pub struct Range {
    front: DbIterator,
    back: DbIterator,
    front_started: bool,
    back_started: bool,
    /// Last key returned from the front / back, to stop where the ends meet.
    front_key: Option<Vec<u8>>,
    back_key: Option<Vec<u8>>,
    done: bool,
}

impl Range {
    /// Two cursors over the same pinned state and snapshot.
    pub(crate) fn new(front: DbIterator, back: DbIterator) -> Self {
        Range {
            front,
            back,
            front_started: false,
            back_started: false,
            front_key: None,
            back_key: None,
            done: false,
        }
    }

    fn step(&mut self, forward: bool) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        if self.done {
            return None;
        }
        let (it, started) = if forward {
            (&mut self.front, &mut self.front_started)
        } else {
            (&mut self.back, &mut self.back_started)
        };
        let r = match (*started, forward) {
            (false, true) => it.seek_to_first(),
            (false, false) => it.seek_to_last(),
            (true, true) => it.next(),
            (true, false) => it.prev(),
        };
        *started = true;
        if let Err(e) = r {
            self.done = true;
            return Some(Err(e));
        }
        let crossed = if forward {
            self.back_key
                .as_deref()
                .is_some_and(|b| it.valid() && it.key() >= b)
        } else {
            self.front_key
                .as_deref()
                .is_some_and(|f| it.valid() && it.key() <= f)
        };
        if !it.valid() || crossed {
            self.done = true;
            return None;
        }
        let k = it.key().to_vec();
        let v = it.value().to_vec();
        if forward {
            self.front_key = Some(k.clone());
        } else {
            self.back_key = Some(k.clone());
        }
        Some(Ok((k, v)))
    }
}

impl Iterator for Range {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step(true)
    }
}

impl DoubleEndedIterator for Range {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.step(false)
    }
}
