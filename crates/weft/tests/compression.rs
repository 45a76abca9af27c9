//! Compression (`Options::{unsorted,sorted,value_log}_compression`): each
//! layer stores compressible data smaller and reads back exactly what was
//! written, through gets, scans and reopens, whichever compression the
//! store is reopened with; damage to a compressed block or value is
//! `Error::Corruption` naming the file, never a wrong value or a panic.

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::*;
use weft::{Compression, Db, Options};

const N: u32 = 3000;

fn options(values_in_wal: bool) -> Options {
    Options::default()
        .write_buffer_size(64 << 10)
        .table_size(64 << 10)
        .unsorted_limit(256 << 10)
        .min_blob_size(200)
        .values_in_wal(values_in_wal)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{:06}", (i * 7919) % 100_003).into_bytes()
}

/// Every third value is large (separated into a value log); all of them
/// compress well, as text does.
fn value(i: u32, round: u32) -> Vec<u8> {
    let len = if i.is_multiple_of(3) { 1200 } else { 80 };
    let mut v = format!("{i}:{round}:").into_bytes();
    while v.len() < len {
        v.extend_from_slice(format!("field{} ", v.len() % 7).as_bytes());
    }
    v.truncate(len);
    v
}

/// The key number a value of [`value`] starts with.
fn number_of(v: &[u8]) -> u32 {
    let text = std::str::from_utf8(v).unwrap();
    text.split(':').next().unwrap().parse().unwrap()
}

fn fill(db: &Db, round: u32) {
    for i in 0..N {
        db.put(key(i), value(i, round)).unwrap();
    }
    db.flush().unwrap();
    db.compact().unwrap();
}

fn check_all(db: &Db, round: u32, ctx: &str) {
    for i in (0..N).step_by(7) {
        assert_eq!(
            db.get(key(i)).unwrap(),
            Some(value(i, round)),
            "{ctx}: key {i}"
        );
    }
    let scanned = scan_all(db);
    assert_eq!(scanned.len(), N as usize, "{ctx}: scan length");
    for (k, v) in scanned {
        let i = number_of(&v);
        assert_eq!((k, v), (key(i), value(i, round)), "{ctx}: scan");
    }
}

/// Bytes of tables and of value logs (`.vlog` only: WALs kept as value
/// logs hold values as the writer logged them).
fn stored_bytes(dir: &Path) -> (u64, u64) {
    let size = |ext: &str| -> u64 {
        files_where(dir, |n| n.ends_with(ext))
            .iter()
            .map(|p| file_len(p))
            .sum()
    };
    (size(".sst"), size(".vlog"))
}

#[test]
fn each_layer_stores_compressible_data_smaller_and_reads_it_back() {
    let plain_dir = tempfile::tempdir().unwrap();
    let db = Db::open(plain_dir.path(), options(false)).unwrap();
    fill(&db, 0);
    check_all(&db, 0, "none");
    db.close().unwrap();
    let (plain_tables, plain_logs) = stored_bytes(plain_dir.path());
    assert!(plain_tables > 0 && plain_logs > 0);

    for compression in [Compression::Lz4, Compression::ZSTD] {
        let dir = tempfile::tempdir().unwrap();
        let opts = options(false).compression(compression);
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        fill(&db, 0);
        check_all(&db, 0, &format!("{compression}"));
        db.close().unwrap();
        let (tables, logs) = stored_bytes(dir.path());
        assert!(
            tables * 2 < plain_tables && logs * 2 < plain_logs,
            "{compression}: tables {tables} (uncompressed {plain_tables}), \
             value logs {logs} (uncompressed {plain_logs})"
        );
        // Reopened as written, then with another compression: each block
        // and value says how it is stored, so old and new files mix.
        let db = Db::open(dir.path(), opts).unwrap();
        check_all(&db, 0, &format!("{compression}, reopened"));
        assert!(db.verify_checksums().unwrap().files > 0);
        db.close().unwrap();
        let other = match compression {
            Compression::Lz4 => Compression::None,
            _ => Compression::Lz4,
        };
        let db = Db::open(dir.path(), options(false).compression(other)).unwrap();
        check_all(&db, 0, &format!("{compression}, reopened with {other}"));
        fill(&db, 1);
        check_all(&db, 1, &format!("{compression}, rewritten with {other}"));
        db.close().unwrap();
    }
}

/// With values kept in their WAL, the WAL holds them as written; GC moves
/// the live ones into value logs of the collecting partition, compressed.
#[test]
fn gc_compresses_the_values_it_moves_out_of_wals() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(true)
        .value_log_compression(Compression::ZSTD)
        .gc_min_garbage_bytes(64 << 10)
        .gc_garbage_ratio(0.2);
    let db = Db::open(dir.path(), opts).unwrap();
    fill(&db, 0);
    // Odd keys overwritten: the WALs holding round 0 become half garbage,
    // and GC moves the even keys' values out of them.
    let round = |i: u32| if i % 2 == 1 { 3 } else { 0 };
    for r in 1..=3 {
        for i in (1..N).step_by(2) {
            db.put(key(i), value(i, r)).unwrap();
        }
        db.flush().unwrap();
        db.compact().unwrap();
    }
    let check = |db: &Db, ctx: &str| {
        for i in 0..N {
            assert_eq!(
                db.get(key(i)).unwrap(),
                Some(value(i, round(i))),
                "{ctx}: key {i}"
            );
        }
        assert_eq!(scan_all(db).len(), N as usize, "{ctx}");
    };
    check(&db, "after overwrites");
    let s = db.stats();
    assert!(s.gcs > 0, "no GC ran: {} merges", s.merges);
    let (_, logs) = stored_bytes(dir.path());
    // The even keys' large values (a sixth of the keys, 1200 bytes each)
    // would take this much uncompressed.
    let plain = u64::from(N / 6) * 1200;
    assert!(logs > 0, "GC wrote no value log");
    assert!(
        logs < plain / 2,
        "value logs hold {logs} bytes (uncompressed about {plain})"
    );
    db.close().unwrap();
    let db = Db::open(dir.path(), options(true)).unwrap();
    check(&db, "reopened");
}

/// Flips a byte inside the first data block of every table (compressed: its
/// stored bytes) and a byte inside the first record of every value log:
/// every read is the value written or corruption naming a damaged file.
#[test]
fn damaged_compressed_blocks_and_values_are_corruption() {
    install_panic_counter();
    let before = panic_count();
    for compression in [Compression::Lz4, Compression::ZSTD] {
        let dir = tempfile::tempdir().unwrap();
        let opts = options(false).compression(compression);
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        fill(&db, 0);
        db.close().unwrap();
        let damaged: Vec<_> = (files_where(dir.path(), |n| n.ends_with(".sst")).into_iter())
            .chain(files_where(dir.path(), |n| n.ends_with(".vlog")))
            .collect();
        assert!(damaged.len() >= 2);
        for p in &damaged {
            // Offset 20: past a value record's 8-byte header, inside a
            // table's first (compressed) data block.
            flip_byte(p, 20);
        }
        let db = Db::open(dir.path(), opts).unwrap();
        let mut corrupt = 0;
        for i in 0..N {
            match db.get(key(i)) {
                Ok(v) => assert_eq!(v, Some(value(i, 0)), "{compression}: key {i}"),
                Err(e) => {
                    assert!(e.is_corruption(), "{compression}: {e}");
                    assert!(
                        damaged
                            .iter()
                            .any(|p| e.to_string().contains(&*p.to_string_lossy())),
                        "{compression}: {e} names no damaged file"
                    );
                    corrupt += 1;
                }
            }
        }
        assert!(corrupt > 0, "{compression}: no read met the damage");
        let e = db.verify_checksums().unwrap_err();
        assert!(e.is_corruption(), "{compression}: {e}");
    }
    assert_eq!(panic_count(), before, "an engine thread panicked");
}

/// With values kept in their WAL, `value_log_compression` compresses them
/// as they are logged: the WAL is smaller, and every path that reads them
/// back decodes them — gets and scans through the flush's pointers, the
/// replay of a crash image, and the change feed.
#[test]
fn values_logged_in_the_wal_are_compressed_and_read_back_everywhere() {
    let run = |compression: Compression| {
        let dir = tempfile::tempdir().unwrap();
        // One memtable holds everything: the crash image below is taken
        // with no background job running.
        let opts = (options(true).value_log_compression(compression)).write_buffer_size(64 << 20);
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        db.hold_changes("test", 1).unwrap();
        for i in 0..N {
            db.put(key(i), value(i, 0)).unwrap();
        }
        let wal_bytes = db.stats().wal_bytes_written;
        // A crash image: the WAL holds every write, nothing is flushed.
        let image = tempfile::tempdir().unwrap();
        copy_dir(dir.path(), image.path());
        db.flush().unwrap();
        check_all(
            &db,
            0,
            &format!("{compression}: through the flush's pointers"),
        );
        let feed = db.changes_from(1, weft::FeedLimit::Visible).unwrap();
        let mut puts = 0;
        for group in feed {
            for op in group.unwrap().ops() {
                if let weft::ChangeOp::Put { key: k, value: v } = op {
                    let i = number_of(v);
                    assert_eq!((k, v), (&key(i), &value(i, 0)), "{compression}: the feed");
                    puts += 1;
                }
            }
        }
        assert_eq!(puts, N, "{compression}: the feed");
        drop(db);
        let db = Db::open(image.path(), opts).unwrap();
        check_all(
            &db,
            0,
            &format!("{compression}: replayed from a crash image"),
        );
        wal_bytes
    };
    let plain = run(Compression::None);
    for compression in [Compression::Lz4, Compression::ZSTD] {
        let compressed = run(compression);
        assert!(
            compressed * 10 < plain * 6,
            "{compression}: {compressed} WAL bytes, {plain} uncompressed"
        );
    }
}
