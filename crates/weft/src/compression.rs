//! Compression of table blocks and value-log records: which codec a layer
//! uses ([`Compression`], chosen per layer in `Options`), and the one
//! stored form every compressed unit takes.
//!
//! # The stored form
//!
//! ```text
//! compressed := raw_len: varint32 | codec stream (LZ4 block or zstd frame)
//! ```
//!
//! The codec itself is named outside the bytes: by a table block's type
//! byte (§2.6 of DESIGN.md) or by a value pointer's codec field (§2.7). The
//! checksum that guards the unit (block trailer, record header) covers the
//! *stored* bytes, so damage is caught before a decompressor ever runs.
//! The decompressors still never trust their input (a checksum collision
//! or a writer bug must not be a panic or an unbounded allocation): the
//! stated length is bounded by the caller's limit and by what the stream
//! could possibly expand to (and a zstd frame must state the same length
//! in its header), so no allocation is larger than the data could fill,
//! and the output must fill exactly the stated length.
//!
//! # When a unit is stored compressed
//!
//! Only when it saves at least an eighth of the bytes (RocksDB's default
//! rule): a block of random bytes is stored raw, and a read of it pays no
//! decompression for a saving too small to matter.
//!
//! # Crates
//!
//! `lz4_flex` (pure Rust, safe decoding) and `zstd` (bindings to the
//! reference C library). Each thread keeps one zstd compression and one
//! decompression context: creating a context costs more than compressing
//! a 4 KiB block.

use std::cell::RefCell;

use crate::util::coding::{get_varint32, put_varint32};

/// The codec a layer compresses with (`Options::unsorted_compression`,
/// `Options::sorted_compression`, `Options::value_log_compression`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// Stored as is.
    #[default]
    None,
    /// LZ4 (block format): fast to compress and decompress, about half the
    /// saving of zstd.
    Lz4,
    /// Zstandard at the given level (1–22; 3 is zstd's default, negative
    /// levels trade ratio for speed).
    Zstd(i32),
}

impl Compression {
    /// Zstandard at its default level (3), as RocksDB's `kZSTD` uses.
    pub const ZSTD: Compression = Compression::Zstd(3);

    /// Parses `none`, `lz4`, `zstd` or `zstd:LEVEL` (the names `weft
    /// bench --compression_type` takes; `no` is db_bench's spelling of
    /// `none`).
    pub fn parse(name: &str) -> Option<Compression> {
        match name.to_ascii_lowercase().as_str() {
            "none" | "no" => Some(Compression::None),
            "lz4" => Some(Compression::Lz4),
            "zstd" => Some(Compression::ZSTD),
            other => {
                let level = other.strip_prefix("zstd:")?.parse().ok()?;
                (-7..=22)
                    .contains(&level)
                    .then_some(Compression::Zstd(level))
            }
        }
    }

    /// The codec byte stored for a unit this compression shrank.
    pub(crate) fn codec(self) -> u8 {
        match self {
            Compression::None => CODEC_NONE,
            Compression::Lz4 => CODEC_LZ4,
            Compression::Zstd(_) => CODEC_ZSTD,
        }
    }
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Compression::None => f.write_str("none"),
            Compression::Lz4 => f.write_str("lz4"),
            Compression::Zstd(3) => f.write_str("zstd"),
            Compression::Zstd(level) => write!(f, "zstd:{level}"),
        }
    }
}

/// Codec byte: stored as is.
pub(crate) const CODEC_NONE: u8 = 0;
/// Codec byte: LZ4 block.
pub(crate) const CODEC_LZ4: u8 = 1;
/// Codec byte: zstd frame.
pub(crate) const CODEC_ZSTD: u8 = 2;

/// The most an LZ4 block expands: a match token codes at most 255 bytes per
/// byte of length extension, so no valid stream of `n` bytes decodes to
/// more than about `255 n` (the slack covers the last literals).
const LZ4_MAX_RATIO: usize = 255;

/// The most a zstd frame expands: its densest block is an RLE block, 4
/// bytes (3 of header, 1 repeated) for at most 128 KiB.
const ZSTD_MAX_RATIO: usize = 32 << 10;

thread_local! {
    static ZSTD_COMPRESSOR: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { RefCell::new(None) };
    static ZSTD_DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
}

/// Compresses `raw` with `compression` into its stored form, appended to
/// `out`, and returns the codec byte; returns [`CODEC_NONE`] and leaves
/// `out` as it was when the codec is `None`, when it fails, or when the
/// result would not save an eighth of `raw`.
pub(crate) fn compress(compression: Compression, raw: &[u8], out: &mut Vec<u8>) -> u8 {
    let Ok(raw_len) = u32::try_from(raw.len()) else {
        return CODEC_NONE;
    };
    if compression == Compression::None || raw.is_empty() {
        return CODEC_NONE;
    }
    let start = out.len();
    put_varint32(out, raw_len);
    let ok = match compression {
        Compression::None => false,
        Compression::Lz4 => lz4_into(raw, out),
        Compression::Zstd(level) => zstd_into(level, raw, out),
    };
    if ok && out.len() - start <= raw.len() - raw.len() / 8 {
        compression.codec()
    } else {
        out.truncate(start);
        CODEC_NONE
    }
}

fn lz4_into(raw: &[u8], out: &mut Vec<u8>) -> bool {
    let at = out.len();
    out.resize(at + lz4_flex::block::get_maximum_output_size(raw.len()), 0);
    match lz4_flex::block::compress_into(raw, &mut out[at..]) {
        Ok(n) => {
            out.truncate(at + n);
            true
        }
        Err(_) => false,
    }
}

fn zstd_into(level: i32, raw: &[u8], out: &mut Vec<u8>) -> bool {
    ZSTD_COMPRESSOR.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.as_ref().is_none_or(|(l, _)| *l != level) {
            match zstd::bulk::Compressor::new(level) {
                Ok(c) => *cell = Some((level, c)),
                Err(_) => return false,
            }
        }
        let Some((_, compressor)) = cell.as_mut() else {
            return false;
        };
        // Straight into `out`, as `lz4_into` does: no frame buffer to copy.
        let at = out.len();
        out.resize(at + zstd::zstd_safe::compress_bound(raw.len()), 0);
        match compressor.compress_to_buffer(raw, &mut out[at..]) {
            Ok(n) => {
                out.truncate(at + n);
                true
            }
            Err(_) => false,
        }
    })
}

/// Decodes the stored form of a unit compressed with `codec` (never
/// [`CODEC_NONE`]: the caller uses such bytes as they are) into the raw
/// bytes, at most `limit` of them. Every failure is a reason for
/// `Error::Corruption` at the unit's file and offset.
pub(crate) fn decompress(codec: u8, stored: &[u8], limit: usize) -> Result<Vec<u8>, &'static str> {
    let (raw_len, at) = get_varint32(stored, 0).ok_or("compressed unit without its length")?;
    let raw_len = raw_len as usize;
    let stream = &stored[at..];
    if raw_len > limit {
        return Err("compressed unit states a length past the limit");
    }
    let mut raw = vec![0u8; raw_len];
    let n = match codec {
        CODEC_LZ4 => {
            if raw_len
                > stream
                    .len()
                    .saturating_mul(LZ4_MAX_RATIO)
                    .saturating_add(16)
            {
                return Err("LZ4 unit states a length its stream cannot produce");
            }
            lz4_flex::block::decompress_into(stream, &mut raw).map_err(|_| "malformed LZ4 block")?
        }
        CODEC_ZSTD => {
            if raw_len
                > stream
                    .len()
                    .saturating_mul(ZSTD_MAX_RATIO)
                    .saturating_add(1 << 17)
            {
                return Err("zstd unit states a length its frame cannot produce");
            }
            match zstd::zstd_safe::get_frame_content_size(stream) {
                Ok(Some(n)) if n == raw_len as u64 => {}
                _ => return Err("zstd frame does not state the unit's length"),
            }
            ZSTD_DECOMPRESSOR.with(|cell| {
                let mut cell = cell.borrow_mut();
                if cell.is_none() {
                    *cell = Some(
                        zstd::bulk::Decompressor::new()
                            .map_err(|_| "cannot create a zstd decompression context")?,
                    );
                }
                let d = cell
                    .as_mut()
                    .ok_or("cannot create a zstd decompression context")?;
                d.decompress_to_buffer(stream, &mut raw[..])
                    .map_err(|_| "malformed zstd frame")
            })?
        }
        _ => return Err("unknown compression codec"),
    };
    if n != raw_len {
        return Err("compressed unit decodes to a length other than it states");
    }
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compressible(n: usize) -> Vec<u8> {
        (0..n)
            .map(|i| b"weft block "[i % 11] ^ (i / 97) as u8)
            .collect()
    }

    #[test]
    fn every_codec_round_trips_and_only_stores_what_it_shrinks() {
        for c in [Compression::Lz4, Compression::ZSTD, Compression::Zstd(-3)] {
            let raw = compressible(4096);
            let mut out = b"prefix".to_vec();
            let codec = compress(c, &raw, &mut out);
            assert_eq!(codec, c.codec());
            assert!(out.len() < 6 + raw.len() / 2, "{c}: {}", out.len());
            assert_eq!(decompress(codec, &out[6..], raw.len()).unwrap(), raw);
            // Random bytes do not compress: stored raw, `out` untouched.
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            let noise: Vec<u8> = (0..4096)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x >> 32) as u8
                })
                .collect();
            let mut out = Vec::new();
            assert_eq!(compress(c, &noise, &mut out), CODEC_NONE, "{c}");
            assert!(out.is_empty());
        }
        let mut out = Vec::new();
        assert_eq!(compress(Compression::None, &compressible(100), &mut out), 0);
        assert!(out.is_empty());
    }

    #[test]
    fn damaged_streams_are_errors_never_panics() {
        for c in [Compression::Lz4, Compression::ZSTD] {
            let raw = compressible(3000);
            let mut good = Vec::new();
            let codec = compress(c, &raw, &mut good);
            assert!(decompress(codec, &good, raw.len() - 1).is_err(), "limit");
            for i in 0..good.len() {
                for bit in [1u8, 0x80] {
                    let mut bad = good.clone();
                    bad[i] ^= bit;
                    if let Ok(v) = decompress(codec, &bad, 1 << 20) {
                        // A flip the codec cannot see (a literal byte) gives
                        // other bytes of the stated length, never a panic.
                        assert_eq!(v.len(), raw.len());
                    }
                }
            }
            for cut in 0..good.len() {
                let _ = decompress(codec, &good[..cut], 1 << 20);
            }
            assert!(decompress(9, &good, 1 << 20).is_err());
        }
    }

    #[test]
    fn names_parse_as_db_bench_spells_them() {
        assert_eq!(Compression::parse("none"), Some(Compression::None));
        assert_eq!(Compression::parse("no"), Some(Compression::None));
        assert_eq!(Compression::parse("LZ4"), Some(Compression::Lz4));
        assert_eq!(Compression::parse("zstd"), Some(Compression::Zstd(3)));
        assert_eq!(Compression::parse("zstd:9"), Some(Compression::Zstd(9)));
        assert_eq!(Compression::parse("zstd:99"), None);
        assert_eq!(Compression::parse("snappy"), None);
        for c in [Compression::None, Compression::Lz4, Compression::Zstd(7)] {
            assert_eq!(Compression::parse(&c.to_string()), Some(c));
        }
    }
}
