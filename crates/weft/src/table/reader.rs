//! Reading a table: [`Table`] keeps the file open, the index block and the
//! Bloom filter in memory, and fetches data blocks through the shared
//! [`BlockCache`] with positional reads (no seek pointer, so any number of
//! threads read one `Table` at once).
//!
//! Every block read from disk is checked against its trailer's CRC before it
//! is parsed or cached; a cache hit is trusted (it was checked on the way in).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cache::{BlockCache, ReadPurpose};
use crate::error::{Error, Result};
use crate::key::{internal_key, parse_internal_key, SequenceNumber, ValueKind, MAX_SEQUENCE};
use crate::table::block::{Block, BlockIter};
use crate::table::filter::BloomFilter;
use crate::table::format::{check_block, BlockHandle, Footer, BLOCK_TRAILER_SIZE, FOOTER_SIZE};
use crate::table::iter::{TableIter, TwoLevel};

/// An open table: index and filter in memory, data blocks via the cache.
pub struct Table {
    path: PathBuf,
    file: File,
    file_number: u64,
    file_size: u64,
    cache: Arc<BlockCache>,
    index: Arc<Block>,
    filter: Option<BloomFilter>,
    entries: u64,
    /// Data blocks lie in `[0, data_end)`; the filter/index region follows.
    data_end: u64,
    /// Where the filter block starts (verified by `verify_checksums`).
    filter_handle: Option<BlockHandle>,
    index_handle: BlockHandle,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("path", &self.path)
            .field("file_number", &self.file_number)
            .field("file_size", &self.file_size)
            .field("entries", &self.entries)
            .finish()
    }
}

impl Table {
    /// Opens table `file_number` at `path`, verifying footer, index and filter.
    pub fn open(
        path: &Path,
        file_number: u64,
        file_size: u64,
        cache: Arc<BlockCache>,
    ) -> Result<Arc<Table>> {
        let file = File::open(path)
            .map_err(|e| Error::io(format!("opening table {}", path.display()), e))?;
        let actual = file
            .metadata()
            .map_err(|e| Error::io(format!("reading metadata of table {}", path.display()), e))?
            .len();
        if actual < file_size {
            return Err(Error::corruption(
                path,
                actual,
                format!("table is {actual} bytes, expected {file_size} (truncated)"),
            ));
        }
        let Some(footer_offset) = file_size.checked_sub(FOOTER_SIZE as u64) else {
            return Err(Error::corruption(
                path,
                0,
                "file too short for a table footer",
            ));
        };
        let raw: [u8; FOOTER_SIZE] = read_exact_at(&file, path, FOOTER_SIZE, footer_offset)?
            .try_into()
            .expect("read_exact_at returns exactly the bytes asked for");
        let footer = Footer::decode(&raw, footer_offset)
            .map_err(|reason| Error::corruption(path, footer_offset, reason))?;
        let index = Arc::new(read_block(&file, path, footer.index)?);
        let filter = match footer.filter {
            Some(handle) => {
                let block = read_block_contents(&file, path, handle)?;
                Some(
                    BloomFilter::new(block)
                        .map_err(|reason| Error::corruption(path, handle.offset, reason))?,
                )
            }
            None => None,
        };
        let data_end = footer.filter.map_or(footer.index.offset, |f| f.offset);
        Ok(Arc::new(Table {
            path: path.to_path_buf(),
            file,
            file_number,
            file_size,
            cache,
            index,
            filter,
            entries: footer.entries,
            data_end,
            filter_handle: footer.filter,
            index_handle: footer.index,
        }))
    }

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

    /// Reads and verifies every block (data, filter, index) from disk,
    /// bypassing the cache; returns the number of blocks.
    pub fn verify_checksums(&self) -> Result<u64> {
        let mut blocks = 0u64;
        let mut index = BlockIter::new(self.index.clone());
        index.seek_to_first().map_err(|r| self.corrupt_index(r))?;
        while index.valid() {
            let handle = self.data_handle(index.value())?;
            read_block(&self.file, &self.path, handle)?;
            blocks += 1;
            index.next_entry().map_err(|r| self.corrupt_index(r))?;
        }
        if let Some(handle) = self.filter_handle {
            read_block_contents(&self.file, &self.path, handle)?;
            blocks += 1;
        }
        read_block(&self.file, &self.path, self.index_handle)?;
        Ok(blocks + 1)
    }

    /// The table's file number.
    pub fn file_number(&self) -> u64 {
        self.file_number
    }

    /// The table's file size.
    pub fn file_size(&self) -> u64 {
        self.file_size
    }

    /// The table's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Entries in the table (from the footer).
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// False only if the table certainly holds no version of `user_key`
    /// (always true for a table built without a filter).
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        match &self.filter {
            Some(filter) => filter.may_contain(user_key),
            None => true,
        }
    }

    /// Bytes of index and filter held in memory while the table is open.
    pub fn memory_usage(&self) -> usize {
        self.index.charge() + self.filter.as_ref().map_or(0, BloomFilter::len)
    }

    /// Decodes a data-block handle from an index value, checking it lies in
    /// the data region.
    pub(crate) fn data_handle(&self, value: &[u8]) -> Result<BlockHandle> {
        match BlockHandle::decode(value) {
            Some(h) if h.fits_before(self.data_end) => Ok(h),
            _ => Err(self.corrupt_index("bad data block handle in index")),
        }
    }

    /// A data block, from the cache or from disk (verified, counted for
    /// `purpose`, and cached if the purpose fills the cache).
    pub(crate) fn data_block(
        &self,
        handle: BlockHandle,
        purpose: ReadPurpose,
    ) -> Result<Arc<Block>> {
        if let Some(block) = self.cache.get(self.file_number, handle.offset) {
            return Ok(block);
        }
        let block = Arc::new(read_block(&self.file, &self.path, handle)?);
        self.cache
            .disk_reads()
            .add(purpose, handle.size + BLOCK_TRAILER_SIZE as u64);
        if purpose.fills_cache() {
            let charge = block.charge();
            self.cache
                .insert(self.file_number, handle.offset, block.clone(), charge);
        }
        Ok(block)
    }

    pub(crate) fn corrupt_index(&self, reason: &str) -> Error {
        Error::corruption(&self.path, self.index_handle.offset, reason)
    }

    pub(crate) fn corrupt_block(&self, block: &Block, reason: &str) -> Error {
        Error::corruption(&self.path, block.file_offset(), reason)
    }
}

/// Reads `len` bytes at `offset` into a new buffer; a short file is
/// corruption.
fn read_exact_at(file: &File, path: &Path, len: usize, offset: u64) -> Result<Vec<u8>> {
    crate::pread::read_exact_at(file, len, offset).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            Error::corruption(path, offset, "table truncated")
        } else {
            Error::io(format!("reading table {} at {offset}", path.display()), e)
        }
    })
}

/// Reads a block's contents and trailer and verifies the checksum; returns
/// the contents.
fn read_block_contents(file: &File, path: &Path, handle: BlockHandle) -> Result<Vec<u8>> {
    let len = usize::try_from(handle.size)
        .ok()
        .and_then(|n| n.checked_add(BLOCK_TRAILER_SIZE))
        .ok_or_else(|| Error::corruption(path, handle.offset, "block size overflows"))?;
    let mut raw = read_exact_at(file, path, len, handle.offset)?;
    let n = check_block(&raw).map_err(|reason| Error::corruption(path, handle.offset, reason))?;
    raw.truncate(n);
    Ok(raw)
}

/// [`read_block_contents`], parsed as a [`Block`].
fn read_block(file: &File, path: &Path, handle: BlockHandle) -> Result<Block> {
    let contents = read_block_contents(file, path, handle)?;
    Block::new(contents, handle.offset)
        .map_err(|reason| Error::corruption(path, handle.offset, reason))
}
