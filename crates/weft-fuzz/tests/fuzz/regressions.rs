//! What the fuzz targets found, each pinned by a test named for it (the
//! inputs are also in the targets' corpora).

use std::path::Path;

use weft::internals::fuzz::{
    decode_write_batch, encode_write_batch, recover_wal, write_log, OpKind,
};

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
        (OpKind::Put, b"a".to_vec(), b"1".to_vec()),
        (OpKind::Delete, b"b".to_vec(), Vec::new()),
    ];
    let mut enc = encode_write_batch(9, &ops);
    enc[8] = 1;
    let e = decode_write_batch(path, 0, enc).unwrap_err();
    assert!(e.is_corruption(), "{e}");
}

/// `wal_round_trip` (libFuzzer, 2026-11-27): a flipped bit in the length
/// of a WAL record that has records behind it was taken for a torn tail,
/// and every later (synced) record was dropped without an error, when the
/// flipped length made the record end where only zeros follow to the end
/// of the file (here: inside an empty batch, whose sequence and count are
/// zeros) — as when it runs past the end of the file. Recovery now checks
/// that a "torn" record's bytes do not hold a whole batch over which its
/// checksum holds (`db::open::check_wal_tail`).
#[test]
fn wal_length_flip_into_trailing_zeros_is_not_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let a = encode_write_batch(1, &[(OpKind::Put, b"k".to_vec(), b"v".to_vec())]);
    let b = encode_write_batch(0, &[]);
    write_log(&path, &[a.clone(), b]).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    // The first record now claims to end 4 bytes into the second one's
    // all-zero payload.
    bytes[4] = (a.len() + 12) as u8;
    std::fs::write(&path, &bytes).unwrap();
    let e = recover_wal(&path).unwrap_err();
    assert!(e.is_corruption(), "{e}");
}
