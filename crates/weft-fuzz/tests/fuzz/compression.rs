//! Compressed units (`compression.rs`): the stored form of a compressed
//! table block or value-log record, decoded as the readers decode it.
//! The table and value-log targets reach the decompressors through whole
//! files too; these feed them directly, so every input is a stream.

use weft::internals::fuzz::{compress_unit, decompress_unit};
use weft::Compression;

use crate::harness::{ok_or_corruption, Mutation};
use crate::{fuzz_bytes, fuzz_typed};

/// A limit that any input here could state (the readers' own limits are
/// larger than the guarded allocator allows).
const LIMIT: usize = 64 << 20;

#[test]
fn compressed_unit() {
    fuzz_bytes!("compressed_unit", |input: &[u8]| {
        for codec in [1, 2, 3] {
            ok_or_corruption(decompress_unit(codec, input, LIMIT));
        }
    });
}

#[test]
fn compressed_unit_round_trip() {
    fuzz_typed!(
        "compressed_unit_round_trip",
        (Vec<u8>, u8, u8, Mutation),
        |(seed, repeat, pick, mutation): &(Vec<u8>, u8, u8, Mutation)| {
            // Repeated so that most inputs compress.
            let raw = seed.repeat(usize::from(*repeat % 32) + 1);
            let compression = [Compression::Lz4, Compression::ZSTD, Compression::Zstd(-5)]
                [usize::from(*pick % 3)];
            let (codec, mut stored) = compress_unit(compression, &raw);
            if codec == 0 {
                // Not worth storing compressed: the caller keeps `raw`.
                assert!(stored.is_empty());
                return;
            }
            assert!(stored.len() <= raw.len() - raw.len() / 8);
            assert_eq!(decompress_unit(codec, &stored, LIMIT).unwrap(), raw);
            // Damage behind the checksum: an error, or bytes of the length
            // the unit states (a changed literal is invisible to a codec).
            if mutation.apply(&mut stored) {
                if let Some(got) = ok_or_corruption(decompress_unit(codec, &stored, LIMIT)) {
                    assert!(got.len() <= LIMIT);
                }
            }
        }
    );
}
