//! Value-log garbage collection's view of a SortedStore (UniKV §III-C).
//!
//! GC rewrites a partition's SortedStore through [`ResolvingIter`], which
//! presents every entry pointing into a *victim* log as a plain put of the
//! value read from that log. The ordinary table writer then separates those
//! values again — into a fresh log — and copies everything else (inline
//! values, tombstones, pointers into other logs) unchanged. Validity needs
//! no extra bookkeeping: the SortedStore holds exactly the versions that are
//! still needed, so every pointer it holds is live and nothing else is.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::value_log::ValuePointer;
use super::value_reader::ValueReader;
use super::Version;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{SequenceNumber, ValueKind};

/// See the module docs.
pub struct ResolvingIter {
    inner: Box<dyn InternalIterator>,
    version: Arc<Version>,
    victims: BTreeSet<u64>,
    /// Reads the victims' values; a rewrite walks each log in order, so
    /// mostly from its readahead windows.
    values: ValueReader,
    /// The value of the current entry when it was resolved from a victim.
    resolved: Option<Vec<u8>>,
    /// Bytes of records resolved per victim log (positions may be revisited
    /// by seeks; a rewrite reads each entry once, front to back).
    moved: Arc<parking_lot::Mutex<BTreeMap<u64, u64>>>,
}

impl ResolvingIter {
    /// Resolves pointers of `inner` into `victims` through `version`.
    pub fn new(
        inner: Box<dyn InternalIterator>,
        version: Arc<Version>,
        victims: BTreeSet<u64>,
        values: ValueReader,
        moved: Arc<parking_lot::Mutex<BTreeMap<u64, u64>>>,
    ) -> Self {
        ResolvingIter {
            inner,
            version,
            victims,
            values,
            resolved: None,
            moved,
        }
    }

    fn settle(&mut self) -> Result<()> {
        self.resolved = None;
        if self.inner.valid() {
            self.inner.prepare_value()?;
        }
        if self.inner.valid() && self.inner.kind() == ValueKind::Pointer {
            let raw = self.inner.value();
            let ptr = ValuePointer::parse(raw)?;
            if self.victims.contains(&ptr.log) {
                self.resolved = Some(self.values.read(&self.version, raw)?);
                *self.moved.lock().entry(ptr.log).or_default() += ptr.record_size();
            }
        }
        Ok(())
    }
}

impl InternalIterator for ResolvingIter {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.inner.seek_to_first()?;
        self.settle()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.inner.seek_to_last()?;
        self.settle()
    }
    fn seek(&mut self, user_key: &[u8], seq: SequenceNumber) -> Result<()> {
        self.inner.seek(user_key, seq)?;
        self.settle()
    }
    fn next(&mut self) -> Result<()> {
        self.inner.next()?;
        self.settle()
    }
    fn prev(&mut self) -> Result<()> {
        self.inner.prev()?;
        self.settle()
    }
    fn user_key(&self) -> &[u8] {
        self.inner.user_key()
    }
    fn seq(&self) -> SequenceNumber {
        self.inner.seq()
    }
    fn kind(&self) -> ValueKind {
        if self.resolved.is_some() {
            ValueKind::Put
        } else {
            self.inner.kind()
        }
    }
    fn value(&self) -> &[u8] {
        match &self.resolved {
            Some(v) => v,
            None => self.inner.value(),
        }
    }
}
