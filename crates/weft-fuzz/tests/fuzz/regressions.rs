//! What the fuzz targets found, each pinned by a test named for it (the
//! inputs are also in the targets' corpora).

use std::path::Path;

use weft::internals::fuzz::{decode_write_batch, encode_write_batch, ValueKind};

/// `write_batch_round_trip`: bytes after a batch's last operation were
/// ignored, so a WAL record whose count was damaged downwards (or that
/// carried garbage) replayed as a shorter batch without a word.
#[test]
fn write_batch_with_trailing_bytes_is_corruption() {
    let path = Path::new("000001.log");
    let mut enc = encode_write_batch(7, &[]);
    enc.push(0);
    let e = decode_write_batch(path, 0, enc).unwrap_err();
    assert!(e.is_corruption(), "{e}");
    // A count one too low: the second op is trailing bytes.
    let ops = vec![
        (ValueKind::Put, b"a".to_vec(), b"1".to_vec()),
        (ValueKind::Delete, b"b".to_vec(), Vec::new()),
    ];
    let mut enc = encode_write_batch(9, &ops);
    enc[8] = 1;
    let e = decode_write_batch(path, 0, enc).unwrap_err();
    assert!(e.is_corruption(), "{e}");
}
