//! Tables: immutable sorted files of versioned entries.
//!
//! STUB: signatures fixed; implementation to come.

pub mod block;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cache::BlockCache;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{SequenceNumber, ValueKind};

/// How tables are built.
#[derive(Debug, Clone, Copy)]
pub struct TableOptions {
    /// Target uncompressed data block size.
    pub block_size: usize,
    /// Entries between restart points in a block.
    pub restart_interval: usize,
    /// Bloom filter bits per user key; 0 = no filter.
    pub bloom_bits_per_key: usize,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_size: 4096,
            restart_interval: 16,
            bloom_bits_per_key: 10,
        }
    }
}

/// What a finished table holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSummary {
    /// File size in bytes.
    pub file_size: u64,
    /// Number of entries.
    pub entries: u64,
    /// Smallest internal key (encoded).
    pub smallest: Vec<u8>,
    /// Largest internal key (encoded).
    pub largest: Vec<u8>,
}

/// Writes a table file. Entries must come in strictly increasing internal order.
pub struct TableBuilder {
    _p: (),
}

impl TableBuilder {
    /// Creates the file at `path`.
    pub fn create(_path: &Path, _options: TableOptions) -> Result<TableBuilder> {
        unimplemented!()
    }
    /// Appends an entry.
    pub fn add(
        &mut self,
        _user_key: &[u8],
        _seq: SequenceNumber,
        _kind: ValueKind,
        _value: &[u8],
    ) -> Result<()> {
        unimplemented!()
    }
    /// Entries added so far.
    pub fn entries(&self) -> u64 {
        unimplemented!()
    }
    /// Bytes the file will have if finished now (approximately).
    pub fn estimated_size(&self) -> u64 {
        unimplemented!()
    }
    /// Writes filter, index and footer, fsyncs, and returns the summary.
    pub fn finish(self) -> Result<TableSummary> {
        unimplemented!()
    }
}

/// An open table: index and filter in memory, data blocks via the cache.
pub struct Table {
    _path: PathBuf,
}

impl Table {
    /// Opens table `file_number` at `path`, verifying footer, index and filter.
    pub fn open(
        _path: &Path,
        _file_number: u64,
        _file_size: u64,
        _cache: Arc<BlockCache>,
    ) -> Result<Arc<Table>> {
        unimplemented!()
    }
    /// The newest version of `user_key` with sequence `<= snapshot`.
    pub fn get(
        &self,
        _user_key: &[u8],
        _snapshot: SequenceNumber,
    ) -> Result<Option<(SequenceNumber, ValueKind, Vec<u8>)>> {
        unimplemented!()
    }
    /// A cursor over every entry.
    pub fn iter(self: &Arc<Self>) -> TableIter {
        unimplemented!()
    }
    /// A cursor that may bypass the block cache.
    pub fn iter_with_fill_cache(self: &Arc<Self>, _fill: bool) -> TableIter {
        unimplemented!()
    }
    /// Reads and verifies every block; returns the number of blocks.
    pub fn verify_checksums(&self) -> Result<u64> {
        unimplemented!()
    }
    /// The table's file number.
    pub fn file_number(&self) -> u64 {
        unimplemented!()
    }
    /// The table's file size.
    pub fn file_size(&self) -> u64 {
        unimplemented!()
    }
}

/// Cursor over a table.
pub struct TableIter {
    _p: (),
}

impl InternalIterator for TableIter {
    fn valid(&self) -> bool {
        unimplemented!()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        unimplemented!()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        unimplemented!()
    }
    fn seek(&mut self, _user_key: &[u8], _seq: SequenceNumber) -> Result<()> {
        unimplemented!()
    }
    fn next(&mut self) -> Result<()> {
        unimplemented!()
    }
    fn prev(&mut self) -> Result<()> {
        unimplemented!()
    }
    fn user_key(&self) -> &[u8] {
        unimplemented!()
    }
    fn seq(&self) -> SequenceNumber {
        unimplemented!()
    }
    fn kind(&self) -> ValueKind {
        unimplemented!()
    }
    fn value(&self) -> &[u8] {
        unimplemented!()
    }
}
