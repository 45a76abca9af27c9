//! The two-level cursor: an index-block cursor picks a data block, a
//! data-block cursor walks it.
//!
//! [`TwoLevel`] holds only `Arc<Block>`s and takes the [`Table`] as an
//! argument, so `Table::get` can use it on `&self` while [`TableIter`] pairs
//! it with an `Arc<Table>` to be `Send` and self-contained. Data blocks may
//! be empty of matching entries after a seek (the index key is a separator,
//! not the block's last key): the cursor then moves on to the neighbouring
//! block, in either direction, until it finds an entry or runs out.

use std::sync::Arc;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{internal_key, parse_internal_key, SequenceNumber, ValueKind, MAX_SEQUENCE};
use crate::stats::ReadPurpose;
use crate::table::block::{Block, BlockIter};
use crate::table::format::{BlockHandle, BLOCK_TRAILER_SIZE};
use crate::table::reader::Table;

/// Index cursor + current data block cursor.
pub(crate) struct TwoLevel {
    index: BlockIter,
    data: Option<BlockIter>,
    data_handle: BlockHandle,
    purpose: ReadPurpose,
    /// Data blocks loaded in a row, each right after the one before.
    streak: u32,
    /// File offset up to which readahead was requested.
    read_ahead_to: u64,
}

/// Blocks loaded in file order before a scan of a mapped table asks the
/// kernel to read ahead (a seek + a few `next`s never does).
const READAHEAD_STREAK: u32 = 2;
/// Bytes of a mapped table requested ahead of a scan at a time.
const READAHEAD: u64 = 256 << 10;

impl TwoLevel {
    pub(crate) fn new(index: Arc<Block>, purpose: ReadPurpose) -> TwoLevel {
        TwoLevel {
            index: BlockIter::new(index),
            data: None,
            data_handle: BlockHandle::default(),
            purpose,
            streak: 0,
            read_ahead_to: 0,
        }
    }

    pub(crate) fn valid(&self) -> bool {
        self.data.as_ref().is_some_and(BlockIter::valid)
    }

    /// The current encoded internal key, if positioned.
    pub(crate) fn key(&self) -> Option<&[u8]> {
        self.data.as_ref().filter(|d| d.valid()).map(BlockIter::key)
    }

    pub(crate) fn value(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], BlockIter::value)
    }

    pub(crate) fn seek_to_first(&mut self, t: &Table) -> Result<()> {
        self.guard(|c| {
            c.index.seek_to_first().map_err(|r| t.corrupt_index(r))?;
            c.load_data_block(t)?;
            c.with_data(t, BlockIter::seek_to_first)?;
            c.skip_empty_forward(t)
        })
    }

    pub(crate) fn seek_to_last(&mut self, t: &Table) -> Result<()> {
        self.guard(|c| {
            c.index.seek_to_last().map_err(|r| t.corrupt_index(r))?;
            c.load_data_block(t)?;
            c.with_data(t, BlockIter::seek_to_last)?;
            c.skip_empty_backward(t)
        })
    }

    pub(crate) fn seek(&mut self, t: &Table, target: &[u8]) -> Result<()> {
        self.guard(|c| {
            c.index.seek(target).map_err(|r| t.corrupt_index(r))?;
            c.load_data_block(t)?;
            c.with_data(t, |d| d.seek(target))?;
            c.skip_empty_forward(t)
        })
    }

    pub(crate) fn next(&mut self, t: &Table) -> Result<()> {
        if !self.valid() {
            return Ok(());
        }
        self.guard(|c| {
            c.with_data(t, BlockIter::next_entry)?;
            c.skip_empty_forward(t)
        })
    }

    pub(crate) fn prev(&mut self, t: &Table) -> Result<()> {
        if !self.valid() {
            return Ok(());
        }
        self.guard(|c| {
            c.with_data(t, BlockIter::prev_entry)?;
            c.skip_empty_backward(t)
        })
    }

    /// Runs a positioning step; an error leaves the cursor invalid.
    fn guard(&mut self, f: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let r = f(self);
        if r.is_err() {
            self.data = None;
        }
        r
    }

    /// Applies a step to the data cursor, mapping its error to corruption at
    /// the data block's offset.
    fn with_data(
        &mut self,
        t: &Table,
        f: impl FnOnce(&mut BlockIter) -> std::result::Result<(), &'static str>,
    ) -> Result<()> {
        if let Some(d) = self.data.as_mut() {
            if let Err(reason) = f(d) {
                return Err(t.corrupt_block(d.block(), reason));
            }
        }
        Ok(())
    }

    /// Points the data cursor at the block the index cursor names (reusing
    /// the current one if it is the same block), unpositioned.
    fn load_data_block(&mut self, t: &Table) -> Result<()> {
        if !self.index.valid() {
            self.data = None;
            return Ok(());
        }
        let handle = t.data_handle(self.index.value())?;
        if self.data.is_some() && handle == self.data_handle {
            return Ok(());
        }
        self.data = None;
        let block = t.data_block(handle, self.index.restart_index(), self.purpose)?;
        self.data = Some(BlockIter::new(block));
        self.read_ahead(t, handle);
        self.data_handle = handle;
        Ok(())
    }

    /// A scan of a mapped table walking it in file order asks the kernel to
    /// read the next [`READAHEAD`] bytes (the mapping is advised random
    /// access, so a cold scan would otherwise fault in one page at a time;
    /// `pread` gets the kernel's own readahead).
    fn read_ahead(&mut self, t: &Table, handle: BlockHandle) {
        if !matches!(self.purpose, ReadPurpose::Scan { .. }) || !t.is_mapped() {
            return;
        }
        let prev_end = self.data_handle.offset + self.data_handle.size + BLOCK_TRAILER_SIZE as u64;
        self.streak = if self.data.is_some() && handle.offset == prev_end {
            self.streak + 1
        } else {
            0
        };
        let end = handle.offset + handle.size + BLOCK_TRAILER_SIZE as u64;
        if self.streak >= READAHEAD_STREAK && end > self.read_ahead_to {
            t.read_ahead(handle.offset, READAHEAD);
            self.read_ahead_to = handle.offset + READAHEAD;
        }
    }

    fn skip_empty_forward(&mut self, t: &Table) -> Result<()> {
        while !self.valid() {
            if !self.index.valid() {
                self.data = None;
                return Ok(());
            }
            self.index.next_entry().map_err(|r| t.corrupt_index(r))?;
            self.load_data_block(t)?;
            self.with_data(t, BlockIter::seek_to_first)?;
        }
        Ok(())
    }

    fn skip_empty_backward(&mut self, t: &Table) -> Result<()> {
        while !self.valid() {
            if !self.index.valid() {
                self.data = None;
                return Ok(());
            }
            self.index.prev_entry().map_err(|r| t.corrupt_index(r))?;
            self.load_data_block(t)?;
            self.with_data(t, BlockIter::seek_to_last)?;
        }
        Ok(())
    }
}

/// Cursor over a table: every version of every key in internal order.
///
/// Owns an `Arc<Table>` and the blocks it walks, so it may outlive the
/// caller's handle and move between threads. Errors from block reads come
/// back from the positioning call and leave the cursor invalid.
pub struct TableIter {
    table: Arc<Table>,
    cursor: TwoLevel,
    target: Vec<u8>,
}

impl TableIter {
    pub(crate) fn new(table: Arc<Table>, cursor: TwoLevel) -> TableIter {
        TableIter {
            table,
            cursor,
            target: Vec::new(),
        }
    }
}

impl InternalIterator for TableIter {
    fn valid(&self) -> bool {
        self.cursor.valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.cursor.seek_to_first(&self.table)
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.cursor.seek_to_last(&self.table)
    }
    fn seek(&mut self, user_key: &[u8], seq: SequenceNumber) -> Result<()> {
        self.target = internal_key(user_key, seq.min(MAX_SEQUENCE), ValueKind::MAX);
        self.cursor.seek(&self.table, &self.target)
    }
    fn next(&mut self) -> Result<()> {
        self.cursor.next(&self.table)
    }
    fn prev(&mut self) -> Result<()> {
        self.cursor.prev(&self.table)
    }
    fn user_key(&self) -> &[u8] {
        self.cursor
            .key()
            .and_then(parse_internal_key)
            .map_or(&[], |p| p.user_key)
    }
    fn seq(&self) -> SequenceNumber {
        self.cursor
            .key()
            .and_then(parse_internal_key)
            .map_or(0, |p| p.seq)
    }
    fn kind(&self) -> ValueKind {
        self.cursor
            .key()
            .and_then(parse_internal_key)
            .map_or(ValueKind::Delete, |p| p.kind)
    }
    fn value(&self) -> &[u8] {
        self.cursor.value()
    }
}

/// Lookups and cursors over a table, here beside the two-level cursor they
/// share, so the reader (open, blocks, filter) does not depend on them.
impl Table {
    /// The newest version of `user_key` with sequence `<= snapshot`.
    pub fn get(
        &self,
        user_key: &[u8],
        snapshot: SequenceNumber,
    ) -> Result<Option<(SequenceNumber, ValueKind, Vec<u8>)>> {
        if !self.may_contain(user_key) {
            return Ok(None);
        }
        let target = internal_key(user_key, snapshot.min(MAX_SEQUENCE), ValueKind::MAX);
        let mut cursor = TwoLevel::new(self.index.clone(), ReadPurpose::Get);
        // Usually one data block; the next one only when the index separator
        // of the first lies between the last key of its block and the target.
        cursor.seek(self, &target)?;
        let Some(key) = cursor.key() else {
            return Ok(None);
        };
        match parse_internal_key(key) {
            Some(p) if p.user_key == user_key => Ok(Some((p.seq, p.kind, cursor.value().to_vec()))),
            _ => Ok(None),
        }
    }

    /// A cursor over every entry for a user scan; data blocks it reads go
    /// into the cache.
    #[cfg(test)]
    pub fn iter(self: &Arc<Self>) -> TableIter {
        self.iter_for(ReadPurpose::Scan { fill_cache: true })
    }

    /// A cursor over every entry, reading for `purpose`: blocks found in the
    /// cache are used; blocks read from disk are added only if
    /// `purpose.fills_cache()` (bulk scans and merges would otherwise evict
    /// the hot set).
    pub fn iter_for(self: &Arc<Self>, purpose: ReadPurpose) -> TableIter {
        TableIter::new(self.clone(), TwoLevel::new(self.index.clone(), purpose))
    }
}
