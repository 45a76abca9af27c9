//! Writing a table: data blocks as entries arrive, then filter, index and
//! footer at [`TableBuilder::finish`].
//!
//! An index entry for a data block is written only when the *next* block's
//! first key is known (LevelDB's trick): the index key can then be a short
//! separator between the two blocks instead of the block's full last key,
//! which keeps the in-memory index small for long keys.

use std::cmp::Ordering;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::compression::{self, Compression, CODEC_NONE};
use crate::error::{Error, Result};
use crate::key::{
    compare_internal, encode_internal_key, internal_key, user_key_of, SequenceNumber, ValueKind,
    MAX_KEY_SIZE, MAX_SEQUENCE, MAX_VALUE_SIZE,
};
use crate::table::block::BlockBuilder;
use crate::table::filter::{build_filter, hash64};
use crate::table::format::{
    block_trailer, BlockHandle, Footer, BLOCK_TRAILER_SIZE, BLOCK_TYPE_UNCOMPRESSED, FOOTER_SIZE,
};
use crate::table::{TableOptions, TableSummary};
use crate::util::fs::{FileSystem, FileWriter};

/// Largest accepted `block_size`: keeps every in-block offset well inside u32
/// even with one maximal value appended past the target size.
const MAX_BLOCK_SIZE: usize = 256 << 20;

/// Largest accepted `bloom_bits_per_key` (more buys nothing).
const MAX_BLOOM_BITS: usize = 64;

/// Writes a table file. Entries must come in strictly increasing internal order.
///
/// `finish` fsyncs the file but not its directory: making the file durable
/// by name (directory fsync, manifest edit) is the caller's step. A builder
/// dropped without `finish` leaves a partial file for the caller to delete.
pub struct TableBuilder {
    out: BlockWriter,
    options: TableOptions,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    /// Handle of the last flushed data block, waiting for the next key to
    /// choose its index separator.
    pending_index: Option<BlockHandle>,
    last_key: Vec<u8>,
    smallest: Vec<u8>,
    /// [`hash64`] of each distinct user key, for the Bloom filter.
    key_hashes: Vec<u64>,
    entries: u64,
    scratch: Vec<u8>,
    /// A compressed data block on its way to the file.
    compressed: Vec<u8>,
}

/// The file being written, and where the next block goes.
struct BlockWriter {
    path: PathBuf,
    file: BufWriter<FileWriter>,
    /// Bytes written so far (buffered or not).
    offset: u64,
    /// Set after a write error: the file is unusable from then on.
    failed: bool,
}

impl BlockWriter {
    fn check_usable(&self) -> Result<()> {
        if self.failed {
            return Err(Error::io(
                format!("writing table {}", self.path.display()),
                std::io::Error::other("an earlier write to this table failed"),
            ));
        }
        Ok(())
    }

    /// Writes contents + trailer; returns the block's handle.
    fn write_block(&mut self, contents: &[u8]) -> Result<BlockHandle> {
        self.write_typed(contents, BLOCK_TYPE_UNCOMPRESSED)
    }

    /// Writes a data block: in `compression`'s stored form when that saves
    /// enough (`crate::compression::compress`), else as it is. The type
    /// byte says which; the handle's size is of the stored bytes.
    fn write_data_block(
        &mut self,
        contents: &[u8],
        compression: Compression,
        scratch: &mut Vec<u8>,
    ) -> Result<BlockHandle> {
        scratch.clear();
        match compression::compress(compression, contents, scratch) {
            CODEC_NONE => self.write_typed(contents, BLOCK_TYPE_UNCOMPRESSED),
            codec => self.write_typed(scratch, codec),
        }
    }

    fn write_typed(&mut self, contents: &[u8], block_type: u8) -> Result<BlockHandle> {
        let handle = BlockHandle {
            offset: self.offset,
            size: contents.len() as u64,
        };
        self.write_raw(contents)?;
        self.write_raw(&block_trailer(contents, block_type))?;
        Ok(handle)
    }

    fn write_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.check_usable()?;
        if let Err(e) = self.file.write_all(bytes) {
            self.failed = true;
            return Err(Error::io(
                format!("writing table {}", self.path.display()),
                e,
            ));
        }
        self.offset += bytes.len() as u64;
        Ok(())
    }

    /// Flushes the buffer and fsyncs the file.
    fn sync(&mut self) -> Result<()> {
        let r = self
            .file
            .flush()
            .and_then(|()| self.file.get_ref().0.sync_all());
        r.map_err(|e| {
            self.failed = true;
            Error::io(format!("syncing table {}", self.path.display()), e)
        })
    }
}

impl TableBuilder {
    /// Creates (or truncates) the file at `path`.
    pub fn create(fs: &dyn FileSystem, path: &Path, options: TableOptions) -> Result<TableBuilder> {
        if options.block_size == 0 || options.block_size > MAX_BLOCK_SIZE {
            return Err(Error::InvalidArgument(format!(
                "table block_size {} not in 1..={MAX_BLOCK_SIZE}",
                options.block_size
            )));
        }
        if options.restart_interval == 0 {
            return Err(Error::InvalidArgument(
                "table restart_interval must be at least 1".into(),
            ));
        }
        if options.bloom_bits_per_key > MAX_BLOOM_BITS {
            return Err(Error::InvalidArgument(format!(
                "bloom_bits_per_key {} exceeds {MAX_BLOOM_BITS}",
                options.bloom_bits_per_key
            )));
        }
        let file = fs
            .create(path, false)
            .map(FileWriter)
            .map_err(|e| Error::io(format!("creating table {}", path.display()), e))?;
        Ok(TableBuilder {
            out: BlockWriter {
                path: path.to_path_buf(),
                file: BufWriter::with_capacity(256 << 10, file),
                offset: 0,
                failed: false,
            },
            options,
            data_block: BlockBuilder::new(options.restart_interval),
            // Every index entry is a restart point: index seeks are pure
            // binary searches and index keys are short anyway.
            index_block: BlockBuilder::new(1),
            pending_index: None,
            last_key: Vec::new(),
            smallest: Vec::new(),
            key_hashes: Vec::new(),
            entries: 0,
            scratch: Vec::new(),
            compressed: Vec::new(),
        })
    }

    /// Appends an entry, which must sort strictly after the previous one.
    pub fn add(
        &mut self,
        user_key: &[u8],
        seq: SequenceNumber,
        kind: ValueKind,
        value: &[u8],
    ) -> Result<()> {
        self.out.check_usable()?;
        if user_key.len() > MAX_KEY_SIZE || value.len() > MAX_VALUE_SIZE || seq > MAX_SEQUENCE {
            return Err(Error::InvalidArgument(format!(
                "table entry out of limits: key {} bytes, value {} bytes, seq {seq}",
                user_key.len(),
                value.len()
            )));
        }
        let mut key = std::mem::take(&mut self.scratch);
        key.clear();
        encode_internal_key(&mut key, user_key, seq, kind);
        let r = self.add_encoded(&key, user_key, value);
        self.scratch = key;
        r
    }

    fn add_encoded(&mut self, key: &[u8], user_key: &[u8], value: &[u8]) -> Result<()> {
        let new_user_key = if self.entries == 0 {
            self.smallest = key.to_vec();
            true
        } else {
            let order = compare_internal(&self.last_key, key);
            debug_assert_eq!(order, Ordering::Less, "table keys out of order");
            if order != Ordering::Less {
                return Err(Error::InvalidArgument(format!(
                    "table {}: key added out of internal order",
                    self.out.path.display()
                )));
            }
            user_key_of(&self.last_key) != user_key
        };
        if let Some(handle) = self.pending_index.take() {
            let separator = shortest_separator(&self.last_key, key);
            self.add_index_entry(&separator, handle);
        }
        if new_user_key && self.options.bloom_bits_per_key > 0 {
            self.key_hashes.push(hash64(user_key));
        }
        self.data_block.add(key, value);
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.entries += 1;
        if self.data_block.size_estimate() >= self.options.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    /// Compresses the data blocks from the next entry on with
    /// `compression`, ending the block in progress first when its codec
    /// differs: each block has one codec, named by its type byte (a
    /// keyspace's own compression, `crate::keyspace_options`).
    pub fn set_compression(&mut self, compression: Compression) -> Result<()> {
        if compression != self.options.compression {
            self.flush_data_block()?;
            self.options.compression = compression;
        }
        Ok(())
    }

    /// Entries added so far.
    #[cfg(test)]
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Bytes the file will have if finished now (approximately).
    pub fn estimated_size(&self) -> u64 {
        let filter = if self.options.bloom_bits_per_key > 0 {
            (self.key_hashes.len() * self.options.bloom_bits_per_key).div_ceil(8) + 9
        } else {
            0
        };
        let pending = (self.data_block.size_estimate() + self.index_block.size_estimate()) as u64;
        self.out.offset + pending + filter as u64 + (2 * BLOCK_TRAILER_SIZE + FOOTER_SIZE) as u64
    }

    /// Writes filter, index and footer, fsyncs, and returns the summary.
    pub fn finish(mut self) -> Result<TableSummary> {
        self.out.check_usable()?;
        self.flush_data_block()?;
        if let Some(handle) = self.pending_index.take() {
            // The last block's index key is its last key: nothing follows to
            // separate it from, and it makes the index's last key exact.
            let last = self.last_key.clone();
            self.add_index_entry(&last, handle);
        }
        let filter = if self.options.bloom_bits_per_key > 0 {
            let contents = build_filter(&self.key_hashes, self.options.bloom_bits_per_key);
            Some(self.out.write_block(&contents)?)
        } else {
            None
        };
        let index = self.out.write_block(self.index_block.finish())?;
        let footer = Footer {
            index,
            filter,
            entries: self.entries,
        };
        self.out.write_raw(&footer.encode())?;
        self.out.sync()?;
        Ok(TableSummary {
            file_size: self.out.offset,
            entries: self.entries,
            smallest: std::mem::take(&mut self.smallest),
            largest: std::mem::take(&mut self.last_key),
        })
    }

    fn add_index_entry(&mut self, key: &[u8], handle: BlockHandle) {
        let mut value = Vec::with_capacity(20);
        handle.encode_to(&mut value);
        self.index_block.add(key, &value);
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        let handle = self.out.write_data_block(
            self.data_block.finish(),
            self.options.compression,
            &mut self.compressed,
        );
        self.data_block.reset();
        self.pending_index = Some(handle?);
        Ok(())
    }
}

/// An internal key `k` with `start <= k < limit`, shorter than `start` when
/// the user keys allow it (LevelDB's FindShortestSeparator on user keys):
/// `start`'s user key cut after the first differing byte, that byte
/// incremented, with the largest trailer so it sorts first among its versions.
fn shortest_separator(start: &[u8], limit: &[u8]) -> Vec<u8> {
    let su = user_key_of(start);
    let lu = user_key_of(limit);
    let shared = su.iter().zip(lu).take_while(|(a, b)| a == b).count();
    if shared < su.len().min(lu.len()) {
        let byte = su[shared];
        if byte < 0xff && byte + 1 < lu[shared] && shared + 1 < su.len() {
            let mut sep = su[..=shared].to_vec();
            sep[shared] = byte + 1;
            let key = internal_key(&sep, MAX_SEQUENCE, ValueKind::MAX);
            debug_assert_eq!(compare_internal(start, &key), Ordering::Less);
            debug_assert_eq!(compare_internal(&key, limit), Ordering::Less);
            return key;
        }
    }
    start.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators_are_between_and_short() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"abcdef", b"abzz"),
            (b"abc", b"abd"),
            (b"ab", b"abc"),
            (b"a\xff\xff", b"b"),
            (b"k", b"k"),
            (b"", b"a"),
            (b"helloworld", b"hellz"),
        ];
        for &(a, b) in cases {
            let start = internal_key(a, 5, ValueKind::Put);
            let limit = internal_key(b, 3, ValueKind::Delete);
            let sep = shortest_separator(&start, &limit);
            assert_ne!(compare_internal(&sep, &start), Ordering::Less);
            assert_eq!(compare_internal(&sep, &limit), Ordering::Less);
            assert!(sep.len() <= start.len());
        }
        let sep = shortest_separator(
            &internal_key(b"abcdef", 5, ValueKind::Put),
            &internal_key(b"abzz", 5, ValueKind::Put),
        );
        assert_eq!(user_key_of(&sep), b"abd");
    }
}
