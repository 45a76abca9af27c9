//! Iterators: internal cursors, the snapshot filter, merging, and the public
//! [`DbIterator`] and [`Range`].

pub mod internal;

pub use internal::{InternalIterator, VecIter};

use crate::error::Result;

/// A cursor over the database at one snapshot (an atomic scan), bounded by
/// the `lower_bound`/`upper_bound` of its [`crate::ReadOptions`].
///
/// Positioning calls return errors from the storage layers; after an error
/// the cursor is invalid.
pub struct DbIterator {
    _private: (),
}

impl DbIterator {
    /// True when positioned on a key.
    pub fn valid(&self) -> bool {
        unimplemented!()
    }
    /// Positions on the first key.
    pub fn seek_to_first(&mut self) -> Result<()> {
        unimplemented!()
    }
    /// Positions on the last key.
    pub fn seek_to_last(&mut self) -> Result<()> {
        unimplemented!()
    }
    /// Positions on the first key `>= key`.
    pub fn seek(&mut self, _key: &[u8]) -> Result<()> {
        unimplemented!()
    }
    /// Positions on the last key `<= key`.
    pub fn seek_for_prev(&mut self, _key: &[u8]) -> Result<()> {
        unimplemented!()
    }
    /// Moves to the next key.
    pub fn next(&mut self) -> Result<()> {
        unimplemented!()
    }
    /// Moves to the previous key.
    pub fn prev(&mut self) -> Result<()> {
        unimplemented!()
    }
    /// The current key.
    pub fn key(&self) -> &[u8] {
        unimplemented!()
    }
    /// The current value.
    pub fn value(&self) -> &[u8] {
        unimplemented!()
    }
}

/// A Rust iterator over `(key, value)` pairs of a key range at one snapshot;
/// double-ended, so `.rev()` scans backwards.
pub struct Range {
    _private: (),
}

impl Iterator for Range {
    type Item = Result<(Vec<u8>, Vec<u8>)>;
    fn next(&mut self) -> Option<Self::Item> {
        unimplemented!()
    }
}

impl DoubleEndedIterator for Range {
    fn next_back(&mut self) -> Option<Self::Item> {
        unimplemented!()
    }
}
