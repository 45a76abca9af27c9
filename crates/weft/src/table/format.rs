//! Framing shared by the table builder and reader: varints, block handles,
//! the block trailer and the footer.
//!
//! Everything here is a pure encode/decode pair. Decoders never trust their
//! input: every length is bounds-checked and every failure is a `None` or a
//! reason string that the caller turns into [`crate::Error::Corruption`] with
//! the file and offset it knows.
//!
//! Checksums are *masked* CRC32C (as LevelDB's): the CRC of a string that
//! itself contains CRCs is weak, and masking makes a block that embeds another
//! block's trailer checksum well.

use crate::util::coding::{get_varint64, put_varint64};
use crate::util::crc;

/// Bytes after every block: 1 type byte + 4-byte masked CRC32C.
pub const BLOCK_TRAILER_SIZE: usize = 5;

/// Block type byte of an uncompressed block. A compressed data block's
/// type byte is its codec (`crate::compression`: 1 = LZ4, 2 = zstd).
pub const BLOCK_TYPE_UNCOMPRESSED: u8 = crate::compression::CODEC_NONE;

/// Fixed size of the footer at the end of every table.
pub const FOOTER_SIZE: usize = 56;

/// Last 8 bytes of every table file ("weft-sst" read as LE bytes).
pub const TABLE_MAGIC: u64 = u64::from_le_bytes(*b"weft-sst");

/// Version of the format described in `table/mod.rs`.
pub const FORMAT_VERSION: u32 = 1;

/// The masked CRC32C stored in a block trailer: over contents then type byte.
pub fn block_checksum(contents: &[u8], block_type: u8) -> u32 {
    crc::masked_crc32c(&[contents, &[block_type]])
}

/// The 5-byte trailer that follows `contents` on disk.
pub fn block_trailer(contents: &[u8], block_type: u8) -> [u8; BLOCK_TRAILER_SIZE] {
    let crc = block_checksum(contents, block_type).to_le_bytes();
    [block_type, crc[0], crc[1], crc[2], crc[3]]
}

/// Checks `raw` = contents + trailer of an uncompressed block (index,
/// filter); returns the contents length on success.
pub fn check_block(raw: &[u8]) -> Result<usize, &'static str> {
    match check_data_block(raw)? {
        (n, BLOCK_TYPE_UNCOMPRESSED) => Ok(n),
        _ => Err("compressed block where only an uncompressed one may be"),
    }
}

/// Checks `raw` = contents + trailer of a data block; returns the contents
/// length and the block type (uncompressed, or a known codec).
pub fn check_data_block(raw: &[u8]) -> Result<(usize, u8), &'static str> {
    let Some(n) = raw.len().checked_sub(BLOCK_TRAILER_SIZE) else {
        return Err("block shorter than its trailer");
    };
    let (contents, trailer) = raw.split_at(n);
    let block_type = trailer[0];
    let stored = u32::from_le_bytes([trailer[1], trailer[2], trailer[3], trailer[4]]);
    if stored != block_checksum(contents, block_type) {
        return Err("block checksum mismatch");
    }
    use crate::compression::{CODEC_LZ4, CODEC_ZSTD};
    if !matches!(block_type, BLOCK_TYPE_UNCOMPRESSED | CODEC_LZ4 | CODEC_ZSTD) {
        return Err("unknown block type");
    }
    Ok((n, block_type))
}

/// Where a block lives: offset of its contents and their size (trailer not
/// included; it follows the contents).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockHandle {
    /// Offset of the block's first byte in the file.
    pub offset: u64,
    /// Size of the block's contents, without the trailer.
    pub size: u64,
}

impl BlockHandle {
    /// Appends the handle as two varints (the value of an index entry).
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.offset);
        put_varint64(dst, self.size);
    }

    /// Decodes a handle that must fill `src` exactly.
    pub fn decode(src: &[u8]) -> Option<BlockHandle> {
        let (offset, pos) = get_varint64(src, 0)?;
        let (size, pos) = get_varint64(src, pos)?;
        (pos == src.len()).then_some(BlockHandle { offset, size })
    }

    /// One past the trailer's last byte; `None` on overflow.
    pub fn end_with_trailer(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_SIZE as u64)
    }

    /// True if contents and trailer lie within `[0, limit)`.
    pub fn fits_before(&self, limit: u64) -> bool {
        self.end_with_trailer().is_some_and(|end| end <= limit)
    }
}

/// The fixed-size record at the end of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// The index block.
    pub index: BlockHandle,
    /// The Bloom filter block, if the table has one.
    pub filter: Option<BlockHandle>,
    /// Number of entries in the table.
    pub entries: u64,
}

impl Footer {
    /// Encodes the footer (layout in `table/mod.rs`).
    pub fn encode(&self) -> [u8; FOOTER_SIZE] {
        let filter = self.filter.unwrap_or_default();
        let mut out = [0u8; FOOTER_SIZE];
        out[0..8].copy_from_slice(&self.index.offset.to_le_bytes());
        out[8..16].copy_from_slice(&self.index.size.to_le_bytes());
        out[16..24].copy_from_slice(&filter.offset.to_le_bytes());
        out[24..32].copy_from_slice(&filter.size.to_le_bytes());
        out[32..40].copy_from_slice(&self.entries.to_le_bytes());
        out[40..44].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        let crc = crc::masked_crc32c(&[&out[0..44]]);
        out[44..48].copy_from_slice(&crc.to_le_bytes());
        out[48..56].copy_from_slice(&TABLE_MAGIC.to_le_bytes());
        out
    }

    /// Decodes and validates the footer found at `footer_offset`: magic,
    /// version, checksum, and that both handles lie before the footer.
    pub fn decode(src: &[u8; FOOTER_SIZE], footer_offset: u64) -> Result<Footer, &'static str> {
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&src[i..i + 8]);
            u64::from_le_bytes(b)
        };
        let u32_at = |i: usize| {
            let mut b = [0u8; 4];
            b.copy_from_slice(&src[i..i + 4]);
            u32::from_le_bytes(b)
        };
        if u64_at(48) != TABLE_MAGIC {
            return Err("bad table magic (not a table, or truncated)");
        }
        if u32_at(44) != crc::masked_crc32c(&[&src[0..44]]) {
            return Err("footer checksum mismatch");
        }
        if u32_at(40) != FORMAT_VERSION {
            return Err("unsupported table format version");
        }
        let index = BlockHandle {
            offset: u64_at(0),
            size: u64_at(8),
        };
        let filter = BlockHandle {
            offset: u64_at(16),
            size: u64_at(24),
        };
        if !index.fits_before(footer_offset) {
            return Err("index handle out of range");
        }
        let filter = if filter.size == 0 {
            None
        } else if filter.fits_before(index.offset) {
            Some(filter)
        } else {
            return Err("filter handle out of range");
        };
        Ok(Footer {
            index,
            filter,
            entries: u64_at(32),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footer_round_trips_and_rejects_each_flip() {
        let f = Footer {
            index: BlockHandle {
                offset: 1000,
                size: 200,
            },
            filter: Some(BlockHandle {
                offset: 900,
                size: 95,
            }),
            entries: 77,
        };
        let enc = f.encode();
        assert_eq!(Footer::decode(&enc, 1205), Ok(f));
        assert!(Footer::decode(&enc, 1204).is_err(), "index past footer");
        for i in 0..FOOTER_SIZE {
            let mut bad = enc;
            bad[i] ^= 0x10;
            assert!(Footer::decode(&bad, 1205).is_err(), "flip at {i}");
        }
    }

    #[test]
    fn trailer_detects_flips() {
        let contents = b"hello block".to_vec();
        let mut raw = contents.clone();
        raw.extend_from_slice(&block_trailer(&contents, BLOCK_TYPE_UNCOMPRESSED));
        assert_eq!(check_block(&raw), Ok(contents.len()));
        for i in 0..raw.len() {
            let mut bad = raw.clone();
            bad[i] ^= 1;
            assert!(check_block(&bad).is_err(), "flip at {i}");
        }
        assert!(check_block(&raw[..3]).is_err());
    }
}
