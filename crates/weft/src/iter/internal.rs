//! The cursor every layer exposes to the engine: memtables, tables, stores.
//!
//! An [`InternalIterator`] walks *every version* of every key in internal
//! order (user key ascending, sequence descending). It knows nothing of
//! snapshots: [`super::visible::VisibleIter`] adds the snapshot filter and
//! turns it into a cursor over user keys, for every source the same way.
//!
//! Fallible layers (tables read blocks from disk) report errors through the
//! `Result` of the positioning calls; after an error the iterator is invalid.

use crate::error::Result;
use crate::key::compares;
use crate::key::{SequenceNumber, ValueKind};

/// A bidirectional cursor over versioned entries in internal order.
pub trait InternalIterator: Send {
    /// True when positioned on an entry.
    fn valid(&self) -> bool;
    /// Positions on the first entry.
    fn seek_to_first(&mut self) -> Result<()>;
    /// Positions on the last entry.
    fn seek_to_last(&mut self) -> Result<()>;
    /// Positions on the first entry at or after `(user_key, seq)` in internal
    /// order: the newest version of `user_key` with sequence `<= seq`, or the
    /// first entry of a later key.
    fn seek(&mut self, user_key: &[u8], seq: SequenceNumber) -> Result<()>;
    /// Moves to the next entry. Requires `valid()`.
    fn next(&mut self) -> Result<()>;
    /// Moves to the previous entry. Requires `valid()`.
    fn prev(&mut self) -> Result<()>;
    /// True when [`Self::next_key`] ignores its `current_key` (it follows a
    /// link from the current key's node), so a caller need not copy the
    /// key first. Fixed for the cursor's life.
    fn next_key_ignores_key(&self) -> bool {
        false
    }
    /// Moves past every remaining version of the current user key, which
    /// the caller passes as `current_key` (a copy: the cursor moves), onto
    /// the first entry of the next key or the end. Requires `valid()`.
    ///
    /// The default steps with `next` a few times, then jumps with a seek to
    /// `(current_key, 0)` (sequence 0 is never assigned, so that lands past
    /// every version). Sources that group versions under one node per key
    /// (the `jellyfish` and `esl` memtables) override it with one link load.
    fn next_key(&mut self, current_key: &[u8]) -> Result<()> {
        const STEPS_BEFORE_SEEK: usize = 8;
        for _ in 0..STEPS_BEFORE_SEEK {
            self.next()?;
            if !self.valid() || !compares::eq(self.user_key(), current_key) {
                return Ok(());
            }
        }
        self.seek(current_key, 0)?;
        while self.valid() && compares::eq(self.user_key(), current_key) {
            self.next()?;
        }
        Ok(())
    }
    /// Moves past every remaining version of the current user key onto the
    /// newest version with sequence `<= snapshot` of the first later key
    /// that has one, or the end: one forward step of a snapshot scan
    /// ([`crate::iter::visible::VisibleIter`]). `current_key` as for
    /// [`Self::next_key`] (empty when [`Self::next_key_ignores_key`]).
    /// Requires `valid()`.
    ///
    /// The default is `next_key` and then `next` past versions newer than
    /// the snapshot. The key-node cursors override it with one loop over
    /// their nodes, so a scan step is one call through the trait object
    /// instead of three (the memtable benchmark's Zipfian scans spent a
    /// noticeable part of their time in those calls).
    fn next_visible_key(&mut self, current_key: &[u8], snapshot: SequenceNumber) -> Result<()> {
        self.next_key(current_key)?;
        while self.valid() && self.seq() > snapshot {
            self.next()?;
        }
        Ok(())
    }
    /// The current entry's user key. Requires `valid()`.
    fn user_key(&self) -> &[u8];
    /// The current entry's sequence. Requires `valid()`.
    fn seq(&self) -> SequenceNumber;
    /// The current entry's kind. Requires `valid()`.
    fn kind(&self) -> ValueKind;
    /// The current entry's value (empty for deletes). Requires `valid()`
    /// and, for a source that may rest lazily, [`Self::prepare_value`].
    fn value(&self) -> &[u8];
    /// Makes the current entry's value readable. A sorted run that rests on
    /// a table it has not opened (known by its metadata's first key) opens
    /// it here; every other source has nothing to do. A user scan calls it
    /// on each entry whose value it reads; background jobs read runs that
    /// never rest. Requires `valid()`.
    fn prepare_value(&mut self) -> Result<()> {
        Ok(())
    }
}

/// An iterator over a sorted in-memory vector of entries; used by tests and
/// by small in-memory sources. Entries must be in internal order.
#[cfg(test)]
pub struct VecIter {
    entries: Vec<(Vec<u8>, SequenceNumber, ValueKind, Vec<u8>)>,
    pos: usize,
}

#[cfg(test)]
impl VecIter {
    /// Wraps entries already in internal order.
    pub fn new(entries: Vec<(Vec<u8>, SequenceNumber, ValueKind, Vec<u8>)>) -> Self {
        debug_assert!(entries.windows(2).all(|w| crate::key::compare_positions(
            &w[0].0, w[0].1, &w[1].0, w[1].1
        ) == std::cmp::Ordering::Less));
        let pos = entries.len();
        VecIter { entries, pos }
    }
}

#[cfg(test)]
impl InternalIterator for VecIter {
    fn valid(&self) -> bool {
        self.pos < self.entries.len()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.pos = 0;
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.pos = if self.entries.is_empty() {
            0
        } else {
            self.entries.len() - 1
        };
        Ok(())
    }
    fn seek(&mut self, user_key: &[u8], seq: SequenceNumber) -> Result<()> {
        self.pos = self.entries.partition_point(|e| {
            crate::key::compare_positions(&e.0, e.1, user_key, seq) == std::cmp::Ordering::Less
        });
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        self.pos += 1;
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        self.pos = if self.pos == 0 {
            self.entries.len()
        } else {
            self.pos - 1
        };
        Ok(())
    }
    fn user_key(&self) -> &[u8] {
        &self.entries[self.pos].0
    }
    fn seq(&self) -> SequenceNumber {
        self.entries[self.pos].1
    }
    fn kind(&self) -> ValueKind {
        self.entries[self.pos].2
    }
    fn value(&self) -> &[u8] {
        &self.entries[self.pos].3
    }
}
