//! The `skiplist` memtable. STUB.

use std::sync::Arc;

use super::{Found, Memtable, MemtableKind};
use crate::iter::InternalIterator;
use crate::key::{SequenceNumber, ValueKind};

/// Append-only concurrent skiplist memtable, one node per version.
pub struct SkipListMemtable {
    _p: (),
}

impl Default for SkipListMemtable {
    fn default() -> Self {
        Self::new()
    }
}

impl SkipListMemtable {
    /// An empty skiplist.
    pub fn new() -> Self {
        SkipListMemtable { _p: () }
    }
}

impl Memtable for SkipListMemtable {
    fn kind(&self) -> MemtableKind {
        MemtableKind::SkipList
    }
    fn insert(&self, _user_key: &[u8], _seq: SequenceNumber, _kind: ValueKind, _value: &[u8]) {
        unimplemented!()
    }
    fn get(&self, _user_key: &[u8], _snapshot: SequenceNumber) -> Option<Found<'_>> {
        unimplemented!()
    }
    fn iter(self: Arc<Self>) -> Box<dyn InternalIterator> {
        unimplemented!()
    }
    fn approximate_memory(&self) -> usize {
        unimplemented!()
    }
    fn len(&self) -> usize {
        unimplemented!()
    }
}
