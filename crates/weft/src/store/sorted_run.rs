//! A cursor over a sorted run: non-overlapping tables in key order, opened
//! one at a time (LevelDB's "level iterator").

use std::sync::Arc;

use super::TableFile;
use crate::cache::ReadPurpose;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{compare_positions, parse_internal_key, SequenceNumber, ValueKind};
use crate::table::TableIter;

/// See the module docs.
pub struct SortedRunIter {
    tables: Vec<Arc<TableFile>>,
    index: usize,
    current: Option<TableIter>,
    purpose: ReadPurpose,
}

impl SortedRunIter {
    /// A cursor over `tables`, which must be ascending and disjoint.
    pub fn new(tables: Vec<Arc<TableFile>>, purpose: ReadPurpose) -> Self {
        SortedRunIter {
            tables,
            index: 0,
            current: None,
            purpose,
        }
    }

    fn open(&mut self, i: usize) -> &mut TableIter {
        self.index = i;
        let it = self.tables[i].table.iter_for(self.purpose);
        self.current.insert(it)
    }

    fn cur_valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }

    /// Skips forward over exhausted (or empty) tables.
    fn settle_forward(&mut self) -> Result<()> {
        while !self.cur_valid() {
            if self.current.is_none() || self.index + 1 >= self.tables.len() {
                self.current = None;
                return Ok(());
            }
            let i = self.index + 1;
            self.open(i).seek_to_first()?;
        }
        Ok(())
    }

    /// Skips backward over exhausted (or empty) tables.
    fn settle_backward(&mut self) -> Result<()> {
        while !self.cur_valid() {
            if self.current.is_none() || self.index == 0 {
                self.current = None;
                return Ok(());
            }
            let i = self.index - 1;
            self.open(i).seek_to_last()?;
        }
        Ok(())
    }

    fn cur(&self) -> &TableIter {
        self.current.as_ref().expect("SortedRunIter not valid")
    }
}

impl InternalIterator for SortedRunIter {
    fn valid(&self) -> bool {
        self.cur_valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        if self.tables.is_empty() {
            self.current = None;
            return Ok(());
        }
        self.open(0).seek_to_first()?;
        self.settle_forward()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        if self.tables.is_empty() {
            self.current = None;
            return Ok(());
        }
        let last = self.tables.len() - 1;
        self.open(last).seek_to_last()?;
        self.settle_backward()
    }

    fn seek(&mut self, user_key: &[u8], seq: SequenceNumber) -> Result<()> {
        // First table whose largest entry is at or after the target.
        let i = self.tables.partition_point(|t| {
            let (k, s) = match parse_internal_key(&t.meta.largest) {
                Some(p) => (p.user_key, p.seq),
                None => (t.meta.largest_user_key(), 0),
            };
            compare_positions(k, s, user_key, seq) == std::cmp::Ordering::Less
        });
        if i >= self.tables.len() {
            self.current = None;
            return Ok(());
        }
        self.open(i).seek(user_key, seq)?;
        self.settle_forward()
    }

    fn next(&mut self) -> Result<()> {
        if let Some(c) = self.current.as_mut() {
            c.next()?;
        }
        self.settle_forward()
    }

    fn prev(&mut self) -> Result<()> {
        if let Some(c) = self.current.as_mut() {
            c.prev()?;
        }
        self.settle_backward()
    }

    fn user_key(&self) -> &[u8] {
        self.cur().user_key()
    }
    fn seq(&self) -> SequenceNumber {
        self.cur().seq()
    }
    fn kind(&self) -> ValueKind {
        self.cur().kind()
    }
    fn value(&self) -> &[u8] {
        self.cur().value()
    }
}
