//! Reading a table: [`Table`] keeps the file open, the index block and the
//! Bloom filter in memory, and fetches data blocks in one of two ways
//! ([`BlockReads`]):
//!
//! * **Cached**: through the shared [`BlockCache`] with positional reads
//!   (no seek pointer, so any number of threads read one `Table` at once).
//!   Every block read from disk is checked against its trailer's CRC before
//!   it is parsed or cached; a cache hit is trusted (it was checked on the
//!   way in).
//! * **Mapped** (the default): gets and scans take data blocks straight
//!   from a read-only mapping of the file (`crate::util::mapping`), the page
//!   cache standing in for the block cache. A block's CRC is checked the
//!   first time this `Table` hands it out, and a bit per data block
//!   remembers it, as a cache hit is trusted. Background jobs still read
//!   with `pread` (sequential, so the kernel's readahead streams it, and
//!   not through the mapping's random-access advice).
//!
//! Why mapped: on a large store (`seekrandom`, 64 MiB cache) much of the
//! time went to the cache's lookups (four dependent cache misses:
//! hash control bytes, bucket, LRU node, the block's reference count) and
//! to each miss's `pread`, copy, CRC, allocation and eviction; a mapped
//! block costs a bit test and the misses on its own bytes. This departs
//! from DESIGN.md ("blocks go through a byte-bounded block cache"): the
//! memory for blocks is the kernel's page cache, bounded and reclaimed by
//! the kernel; `Options::mmap_reads = false` restores the block cache.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::stats::ReadPurpose;
use crate::table::BlockCache;

use crate::table::block::{Block, BlockIter};
use crate::table::filter::BloomFilter;
use crate::table::format::{
    check_block, check_data_block, BlockHandle, Footer, BLOCK_TRAILER_SIZE,
    BLOCK_TYPE_UNCOMPRESSED, FOOTER_SIZE,
};
use crate::util::fs::FileSystem;
use crate::util::mapping::ReadMapping;

/// How a table fetches its data blocks for gets and scans (see the module
/// docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockReads {
    /// Through the block cache, reading misses with `pread`.
    Cached,
    /// From a read-only mapping of the file; falls back to [`Self::Cached`]
    /// for a table the kernel will not map.
    Mapped,
}

/// A table's mapping and which of its data blocks were verified.
struct MappedBlocks {
    map: Arc<ReadMapping>,
    /// Bit `i` set: data block `i` (the index's `i`-th entry) passed its
    /// CRC check through this mapping.
    verified: Box<[AtomicU64]>,
    /// Readahead requests made by scans ([`Table::read_ahead`]).
    read_aheads: AtomicU64,
}

/// An open table: index and filter in memory, data blocks via the cache or
/// a mapping.
pub struct Table {
    path: PathBuf,
    file: File,
    file_number: u64,
    file_size: u64,
    cache: Arc<BlockCache>,
    pub(super) index: Arc<Block>,
    filter: Option<BloomFilter>,
    entries: u64,
    /// Data blocks lie in `[0, data_end)`; the filter/index region follows.
    data_end: u64,
    /// Where the filter block starts (verified by `verify_checksums`).
    filter_handle: Option<BlockHandle>,
    index_handle: BlockHandle,
    mapped: Option<MappedBlocks>,
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
        fs: &dyn FileSystem,
        path: &Path,
        file_number: u64,
        file_size: u64,
        cache: Arc<BlockCache>,
        reads: BlockReads,
    ) -> Result<Arc<Table>> {
        let file = fs
            .open(path)
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
        let mapped = match reads {
            BlockReads::Mapped if index_is_dense(&index) => {
                ReadMapping::new(&file, file_size).map(|map| MappedBlocks {
                    map: Arc::new(map),
                    verified: (0..index.num_restarts().div_ceil(64))
                        .map(|_| AtomicU64::new(0))
                        .collect(),
                    read_aheads: AtomicU64::new(0),
                })
            }
            _ => None,
        };
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
            mapped,
        }))
    }

    /// True if gets and scans read this table's data blocks from a mapping.
    pub fn is_mapped(&self) -> bool {
        self.mapped.is_some()
    }

    /// Asks the kernel to read `len` bytes of a mapped table at `offset`
    /// into the page cache (`MADV_WILLNEED`); a no-op when not mapped.
    pub(crate) fn read_ahead(&self, offset: u64, len: u64) {
        if let Some(m) = &self.mapped {
            m.map.will_need(offset as usize, len as usize);
            m.read_aheads.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Readahead requests made so far (a mapped table's scans).
    #[cfg(test)]
    pub fn read_aheads(&self) -> u64 {
        self.mapped
            .as_ref()
            .map_or(0, |m| m.read_aheads.load(Ordering::Relaxed))
    }

    /// Reads and verifies every block (data, filter, index) from disk,
    /// bypassing the cache; returns the number of blocks.
    pub fn verify_checksums(&self) -> Result<u64> {
        let mut blocks = 0u64;
        let mut index = BlockIter::new(self.index.clone());
        index.seek_to_first().map_err(|r| self.corrupt_index(r))?;
        while index.valid() {
            let handle = self.data_handle(index.value())?;
            read_data_block(&self.file, &self.path, handle)?;
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

    /// Every data block read from disk, in order, with its type byte
    /// (uncompressed, or the codec it is stored with): what the tests read
    /// to see which codec each keyspace's blocks got.
    pub(crate) fn data_blocks_with_types(&self) -> Result<Vec<(u8, Block)>> {
        let mut out = Vec::new();
        let mut index = BlockIter::new(self.index.clone());
        index.seek_to_first().map_err(|r| self.corrupt_index(r))?;
        while index.valid() {
            let handle = self.data_handle(index.value())?;
            let len = usize::try_from(handle.size)
                .ok()
                .and_then(|n| n.checked_add(BLOCK_TRAILER_SIZE))
                .ok_or_else(|| {
                    Error::corruption(&self.path, handle.offset, "block size overflows")
                })?;
            let raw = read_exact_at(&self.file, &self.path, len, handle.offset)?;
            let block_type = raw[raw.len() - BLOCK_TRAILER_SIZE];
            out.push((block_type, decode_data_block(&raw, &self.path, handle)?));
            index.next_entry().map_err(|r| self.corrupt_index(r))?;
        }
        Ok(out)
    }

    /// The table's file number.
    #[cfg(test)]
    pub fn file_number(&self) -> u64 {
        self.file_number
    }

    /// The table's file size.
    #[cfg(test)]
    pub fn file_size(&self) -> u64 {
        self.file_size
    }

    /// The table's path.
    #[cfg(test)]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file: a checkpoint copies a table from it when it cannot
    /// link the name (another file system, or the name already deleted
    /// while this version still holds the table).
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// Entries in the table (from the footer).
    #[cfg(test)]
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// True when the table was built with a Bloom filter.
    #[cfg(test)]
    pub fn has_filter(&self) -> bool {
        self.filter.is_some()
    }

    /// False only if the table certainly holds no version of `user_key`
    /// (always true for a table built without a filter).
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        match &self.filter {
            Some(filter) => filter.may_contain(user_key),
            None => true,
        }
    }

    /// Decodes a data-block handle from an index value, checking it lies in
    /// the data region.
    pub(crate) fn data_handle(&self, value: &[u8]) -> Result<BlockHandle> {
        match BlockHandle::decode(value) {
            Some(h) if h.fits_before(self.data_end) => Ok(h),
            _ => Err(self.corrupt_index("bad data block handle in index")),
        }
    }

    /// Data block `ordinal` (the index entry that gave `handle`): from the
    /// mapping for gets and scans of a mapped table (verified on first
    /// use), else from the cache or from disk (verified, counted for
    /// `purpose`, and cached if the purpose fills the cache).
    pub(crate) fn data_block(
        &self,
        handle: BlockHandle,
        ordinal: usize,
        purpose: ReadPurpose,
    ) -> Result<Arc<Block>> {
        if let Some(m) = self
            .mapped
            .as_ref()
            .filter(|_| purpose != ReadPurpose::Background)
        {
            return self.mapped_block(m, handle, ordinal, purpose);
        }
        // A mapped table's blocks never enter the cache (a background job,
        // the only reader here, does not fill it): no use looking.
        if self.mapped.is_none() {
            if let Some(block) = self.cache.get(self.file_number, handle.offset) {
                return Ok(block);
            }
        }
        let block = Arc::new(read_data_block(&self.file, &self.path, handle)?);
        Ok(self.note_read(block, handle, purpose))
    }

    /// Counts a block read from disk (or decoded from the mapping) for
    /// `purpose`, and caches it if the purpose fills the cache.
    fn note_read(
        &self,
        block: Arc<Block>,
        handle: BlockHandle,
        purpose: ReadPurpose,
    ) -> Arc<Block> {
        self.cache
            .disk_reads()
            .add(purpose, handle.size + BLOCK_TRAILER_SIZE as u64);
        if purpose.fills_cache() {
            let charge = block.charge();
            self.cache
                .insert(self.file_number, handle.offset, block.clone(), charge);
        }
        block
    }

    fn mapped_block(
        &self,
        m: &MappedBlocks,
        handle: BlockHandle,
        ordinal: usize,
        purpose: ReadPurpose,
    ) -> Result<Arc<Block>> {
        let corrupt = |reason| Error::corruption(&self.path, handle.offset, reason);
        // `data_handle` held the block and its trailer before `data_end`,
        // which lies inside the mapped `file_size` bytes.
        let start = handle.offset as usize;
        let len = handle.size as usize;
        let (word, bit) = (ordinal / 64, 1u64 << (ordinal % 64));
        let Some(verified) = m.verified.get(word) else {
            return Err(corrupt("data block ordinal past the index"));
        };
        let block_type = m
            .map
            .bytes()
            .get(start + len)
            .copied()
            .ok_or_else(|| corrupt("block past the end of the mapped table"))?;
        if block_type != BLOCK_TYPE_UNCOMPRESSED {
            return self.mapped_compressed_block(m, handle, purpose);
        }
        if verified.load(Ordering::Relaxed) & bit == 0 {
            let raw = m
                .map
                .bytes()
                .get(start..start + len + BLOCK_TRAILER_SIZE)
                .ok_or_else(|| corrupt("block past the end of the mapped table"))?;
            check_block(raw).map_err(corrupt)?;
            // Relaxed: the bit guards no other data (the bytes are
            // immutable); a racing reader at worst checks the block twice.
            verified.fetch_or(bit, Ordering::Relaxed);
        }
        self.cache
            .disk_reads()
            .add(purpose, handle.size + BLOCK_TRAILER_SIZE as u64);
        Block::mapped(Arc::clone(&m.map), start, len, handle.offset)
            .map(Arc::new)
            .map_err(corrupt)
    }

    /// A compressed data block of a mapped table: its decoded copy comes
    /// from the block cache, or is decoded from the mapping (checked every
    /// time: a decode is rarer than a hit and costs more than the CRC).
    fn mapped_compressed_block(
        &self,
        m: &MappedBlocks,
        handle: BlockHandle,
        purpose: ReadPurpose,
    ) -> Result<Arc<Block>> {
        if let Some(block) = self.cache.get(self.file_number, handle.offset) {
            return Ok(block);
        }
        let corrupt = |reason| Error::corruption(&self.path, handle.offset, reason);
        let (start, len) = (handle.offset as usize, handle.size as usize);
        let raw = m
            .map
            .bytes()
            .get(start..start + len + BLOCK_TRAILER_SIZE)
            .ok_or_else(|| corrupt("block past the end of the mapped table"))?;
        let block = Arc::new(decode_data_block(raw, &self.path, handle)?);
        Ok(self.note_read(block, handle, purpose))
    }

    pub(crate) fn corrupt_index(&self, reason: &str) -> Error {
        Error::corruption(&self.path, self.index_handle.offset, reason)
    }

    pub(crate) fn corrupt_block(&self, block: &Block, reason: &str) -> Error {
        Error::corruption(&self.path, block.file_offset(), reason)
    }
}

/// True if every entry of `index` sits at a restart point of its own, so a
/// cursor's restart index is the entry's ordinal (what the builder writes;
/// a table whose index is not so is read through the cache, not mapped).
fn index_is_dense(index: &Arc<Block>) -> bool {
    let mut it = BlockIter::new(Arc::clone(index));
    if it.seek_to_first().is_err() {
        return false;
    }
    let mut n = 0;
    while it.valid() {
        if it.restart_index() != n {
            return false;
        }
        n += 1;
        if it.next_entry().is_err() {
            return false;
        }
    }
    n == index.num_restarts()
}

/// Reads `len` bytes at `offset` into a new buffer; a short file is
/// corruption.
fn read_exact_at(file: &File, path: &Path, len: usize, offset: u64) -> Result<Vec<u8>> {
    crate::util::pread::read_exact_at(file, len, offset).map_err(|e| {
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

/// The most a data block may decode to: one maximal entry past the target
/// size (`TableBuilder` cuts blocks after the entry that reaches it).
const MAX_DATA_BLOCK: usize = crate::key::MAX_VALUE_SIZE + crate::key::MAX_KEY_SIZE + (1 << 20);

/// Reads a data block (contents and trailer), verifies it, and decodes it
/// whatever its type.
fn read_data_block(file: &File, path: &Path, handle: BlockHandle) -> Result<Block> {
    let len = usize::try_from(handle.size)
        .ok()
        .and_then(|n| n.checked_add(BLOCK_TRAILER_SIZE))
        .ok_or_else(|| Error::corruption(path, handle.offset, "block size overflows"))?;
    let raw = read_exact_at(file, path, len, handle.offset)?;
    decode_data_block(&raw, path, handle)
}

/// Verifies `raw` (a data block's stored contents and trailer) and parses
/// it, decompressing a compressed one.
fn decode_data_block(raw: &[u8], path: &Path, handle: BlockHandle) -> Result<Block> {
    let corrupt = |reason| Error::corruption(path, handle.offset, reason);
    let (n, block_type) = check_data_block(raw).map_err(corrupt)?;
    let contents = if block_type == BLOCK_TYPE_UNCOMPRESSED {
        raw[..n].to_vec()
    } else {
        crate::compression::decompress(block_type, &raw[..n], MAX_DATA_BLOCK).map_err(corrupt)?
    };
    Block::new(contents, handle.offset).map_err(corrupt)
}

/// [`read_block_contents`], parsed as a [`Block`].
fn read_block(file: &File, path: &Path, handle: BlockHandle) -> Result<Block> {
    let contents = read_block_contents(file, path, handle)?;
    Block::new(contents, handle.offset)
        .map_err(|reason| Error::corruption(path, handle.offset, reason))
}
