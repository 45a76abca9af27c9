//! Tables: immutable sorted files of versioned entries.
//!
//! A table is written once by [`TableBuilder`] (flush or merge), then only
//! read through [`Table`] (point gets) and [`TableIter`] (scans, merges). The
//! format is LevelDB's in spirit, simplified where Weft does not need the
//! generality: one whole-table Bloom filter instead of per-block filters, no
//! metaindex (the footer names the filter directly). Data blocks may be
//! compressed (LZ4 or zstd, chosen per layer: [`TableOptions::compression`]);
//! the trailer's type byte says how each one is stored.
//!
//! # File layout (format version 1)
//!
//! ```text
//! +--------------------+ 0
//! | data block 0       |  entries in internal order (user key asc, seq desc)
//! | trailer (5 B)      |
//! | data block 1       |
//! | trailer            |
//! | ...                |
//! +--------------------+ data_end = filter offset (or index offset)
//! | filter block       |  optional (bloom_bits_per_key > 0)
//! | trailer            |
//! +--------------------+
//! | index block        |  one entry per data block
//! | trailer            |
//! +--------------------+ file_size - 56
//! | footer (56 B)      |
//! +--------------------+ file_size
//! ```
//!
//! **Block** (data and index; see [`block`]):
//!
//! ```text
//! entry*  | restart[0..n]: u32 LE | n: u32 LE
//! entry = shared: varint32 | unshared: varint32 | value_len: varint32
//!         | key[shared..]: unshared bytes | value: value_len bytes
//! ```
//!
//! Keys are encoded internal keys (user key + 8-byte LE trailer `seq<<8|kind`),
//! prefix-compressed against the previous key; every `restart_interval`-th
//! entry stores its key whole and is listed in the restart array. Data blocks
//! are cut once they reach `block_size`.
//!
//! **Index block**: same block format, restart interval 1. Entry `i` maps an
//! internal key `K_i` to the handle `offset: varint64 | size: varint64` of
//! data block `i`, where `last(i) <= K_i < first(i+1)`: a short separator
//! (LevelDB's shortest-separator on the user key), or the block's last key.
//!
//! **Filter block**: Bloom bits over every distinct *user* key, then one byte
//! `k` (probe count); hashing described in [`filter`].
//!
//! **Block trailer** (after every block, filter and index included):
//!
//! ```text
//! type: u8 | masked crc32c(contents ++ type): u32 LE
//! ```
//!
//! Type 0: the contents are the block. Types 1 (LZ4) and 2 (zstd), data
//! blocks only: the contents are the block in `crate::compression`'s
//! stored form (`raw_len: varint32 | codec stream`), and the handle's size
//! is of those stored bytes. The CRC covers what is stored, so damage is
//! found before the decompressor runs.
//!
//! **Footer** (56 bytes, all little endian):
//!
//! ```text
//!  0 index offset  u64 |  8 index size  u64
//! 16 filter offset u64 | 24 filter size u64   (size 0 = no filter)
//! 32 entries       u64
//! 40 format version u32 (= 1)
//! 44 masked crc32c of bytes 0..44 u32
//! 48 magic u64 = "weft-sst"
//! ```
//!
//! # Trust
//!
//! Every block read from disk is verified against its CRC before use; the
//! footer has its own CRC, magic and version, and its handles must lie before
//! it. Past the checksums, every length, varint, restart index and handle is
//! still bounds-checked (a checksum collision or a writer bug must not be a
//! panic): anything malformed is [`crate::Error::Corruption`] naming the file
//! and the offset of the block (or footer) at fault.
//!
//! # Reads
//!
//! [`Table::get`] asks the in-memory Bloom filter first, then seeks the
//! in-memory index and reads one data block (two if the versions of the key
//! straddle a block boundary), from the table's mapping or through the
//! shared [`BlockCache`] ([`BlockReads`]). [`TableIter`] walks
//! index and data blocks in both directions.

pub mod block;
mod builder;
pub mod filter;
pub mod format;
mod iter;
mod reader;
#[cfg(test)]
mod tests;

pub use builder::TableBuilder;

use crate::compression::Compression;
pub use iter::TableIter;
pub use reader::{BlockReads, Table};

/// The block cache tables share: decoded blocks by (file, offset).
pub type BlockCache = crate::cache::Cache<block::Block>;

/// How tables are built.
#[derive(Debug, Clone, Copy)]
pub struct TableOptions {
    /// Target uncompressed data block size.
    pub block_size: usize,
    /// Entries between restart points in a block.
    pub restart_interval: usize,
    /// Bloom filter bits per user key; 0 = no filter.
    pub bloom_bits_per_key: usize,
    /// How data blocks are compressed (index and filter blocks never are:
    /// they are read once, at open, and kept in memory decoded).
    pub compression: Compression,
    /// The compression of an UnsortedStore table's data blocks
    /// ([`TableOptions::for_unsorted_store`] moves it to `compression`).
    pub unsorted_compression: Compression,
}

impl TableOptions {
    /// The options for an UnsortedStore table: no Bloom filter. Its keys
    /// are found through the partition's hash index (UniKV §III-B), whose
    /// 2-byte tags already rule out the tables that cannot hold a key; a
    /// filter would repeat that test on every hit and cost every flush its
    /// build (measured: a noticeable share of the flush thread's time in a
    /// long `fillrandom`).
    pub fn for_unsorted_store(self) -> Self {
        TableOptions {
            bloom_bits_per_key: 0,
            compression: self.unsorted_compression,
            ..self
        }
    }
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_size: 4096,
            restart_interval: 16,
            bloom_bits_per_key: 10,
            compression: Compression::None,
            unsorted_compression: Compression::None,
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
