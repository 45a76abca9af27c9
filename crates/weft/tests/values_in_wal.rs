//! Values written once (`Options::values_in_wal`, EvenDB's and WiscKey's
//! "the log is the value log"):
//!
//! * a large value's only write before GC is its WAL record: the flush
//!   points into the WAL and keeps it as a value log, and merges copy the
//!   pointers;
//! * a WAL shared by several partitions is deleted only once every one of
//!   them has collected it, and every value still reads, across reopens;
//! * a damaged value in a kept WAL is `Error::Corruption` naming the file.

// A test (or benchmark) fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::*;
use weft::{Db, Options};

const VALUE: usize = 1024;

fn key(i: u32) -> Vec<u8> {
    format!("key{:06}", (i * 7919) % 100_003).into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("{i}:{round}:").into_bytes();
    v.resize(VALUE, b'a' + (round % 26) as u8);
    v
}

/// No merge, GC or split starts on its own.
fn options() -> Options {
    Options::default()
        .unsorted_limit(1 << 30)
        .unsorted_slowdown_tables(40)
        .unsorted_stop_tables(80)
        .partition_size(1 << 30)
}

fn files(dir: &Path, ext: &str) -> Vec<String> {
    files_where(dir, |n| n.ends_with(ext))
        .into_iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

fn check_all(db: &Db, n: u32, round: impl Fn(u32) -> u32, ctx: &str) {
    for i in 0..n {
        assert_eq!(
            db.get(key(i)).unwrap(),
            Some(value(i, round(i))),
            "{ctx}: key {i}"
        );
    }
    assert_eq!(scan_all(db).len(), n as usize, "{ctx}: scan");
}

/// A flush of 1 KiB values writes tables of keys and pointers, keeps the
/// WAL as a value log, and copies no value: WAL plus tables come to
/// little more than the user's bytes. The merge after it writes no value
/// log. Every value reads after a reopen, and the checksums verify.
#[test]
fn a_flush_points_into_the_wal_instead_of_copying_values() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    let n = 3000;
    for i in 0..n {
        db.put(key(i), value(i, 0)).unwrap();
    }
    let wals = files(dir.path(), ".log");
    db.flush().unwrap();
    let mut waited = 0;
    while db.stats().flushes == 0 {
        // The counters follow the install `flush` waits for.
        std::thread::sleep(std::time::Duration::from_millis(5));
        waited += 1;
        assert!(waited < 2000);
    }
    let s = db.stats();
    let user = s.user_bytes_written as f64;
    assert!(
        s.values_kept_in_wal_bytes >= u64::from(n) * VALUE as u64,
        "{s:?}"
    );
    assert!(
        (s.flush_bytes_written as f64) < 0.1 * user,
        "the flush copied values: {s:?}"
    );
    assert!(
        ((s.wal_bytes_written + s.flush_bytes_written) as f64) < 1.15 * user,
        "{s:?}"
    );
    // The flushed WAL is still there, now a value log.
    let now = files(dir.path(), ".log");
    assert!(wals.iter().all(|w| now.contains(w)), "{wals:?} → {now:?}");
    assert!(s.disk.value_logs > u64::from(n) * VALUE as u64, "{s:?}");
    assert_eq!(s.partitions[0].value_logs, 1, "{s:?}");

    db.compact().unwrap();
    let s = db.stats();
    assert_eq!(s.merges, 1, "{s:?}");
    assert_eq!(s.value_log_bytes_written, 0, "a merge moved values: {s:?}");
    assert!(files(dir.path(), ".vlog").is_empty());
    check_all(&db, n, |_| 0, "after the merge");
    db.verify_checksums().unwrap();
    drop(db);

    let db = Db::open(dir.path(), options()).unwrap();
    check_all(&db, n, |_| 0, "after a reopen");
    db.verify_checksums().unwrap();
    assert!(
        wals.iter().all(|w| files(dir.path(), ".log").contains(w)),
        "the open's sweep removed a WAL kept as a value log"
    );
}

/// With `values_in_wal` off, the flushed WAL goes and the merge separates
/// the values into a log of its own, as before.
#[test]
fn with_values_in_wal_off_the_merge_separates_the_values() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options().values_in_wal(false)).unwrap();
    for i in 0..500 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    let wals = files(dir.path(), ".log");
    db.compact().unwrap();
    let s = db.stats();
    assert_eq!(s.values_kept_in_wal_bytes, 0, "{s:?}");
    assert!(s.value_log_bytes_written >= 500 * VALUE as u64, "{s:?}");
    assert_eq!(files(dir.path(), ".vlog").len(), 1);
    let now = files(dir.path(), ".log");
    assert!(wals.iter().all(|w| !now.contains(w)), "{wals:?} → {now:?}");
    check_all(&db, 500, |_| 0, "merged");
}

/// One WAL shared by every partition (two or more after a split):
/// overwriting most keys makes it a GC victim; it is deleted only after
/// every partition collected it, and every value reads before and after
/// a reopen.
#[test]
fn a_wal_shared_by_partitions_goes_only_when_all_collected_it() {
    let dir = tempfile::tempdir().unwrap();
    let n = 2000;
    // Split: two or more partitions.
    let split = options().partition_size(1 << 20);
    let db = Db::open(dir.path(), split.clone()).unwrap();
    for i in 0..n {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.compact().unwrap();
    let mut waited = 0;
    while db.stats().partitions.len() < 2 {
        std::thread::sleep(std::time::Duration::from_millis(10));
        waited += 1;
        assert!(waited < 3000, "no split: {:?}", db.stats());
    }
    drop(db);

    // Round 1 in one memtable, one WAL: both partitions point into it.
    let no_gc = options().gc_min_garbage_bytes(u64::MAX);
    let db = Db::open(dir.path(), no_gc.clone()).unwrap();
    for i in 0..n {
        db.put(key(i), value(i, 1)).unwrap();
    }
    db.compact().unwrap();
    let s = db.stats();
    let partitions = s.partitions.len() as u64;
    assert!(partitions >= 2, "{s:?}");
    assert!(
        s.partitions.iter().all(|p| p.value_logs >= 1),
        "every partition points into the round-1 WAL: {s:?}"
    );
    drop(db);
    // Every WAL now is round 0's or round 1's (kept as value logs), or the
    // empty last one, which the next open replays and deletes.
    let shared: Vec<String> = files(dir.path(), ".log");
    // Round 2 overwrites 90 % of the keys: round 1's WAL is mostly dead
    // (round 0's wholly).
    let db = Db::open(dir.path(), no_gc.clone()).unwrap();
    let newest = |i: u32| if i.is_multiple_of(10) { 1 } else { 2 };
    for i in (0..n).filter(|i| !i.is_multiple_of(10)) {
        db.put(key(i), value(i, 2)).unwrap();
    }
    db.compact().unwrap();
    check_all(&db, n, newest, "before GC");
    drop(db);

    // Now let GC run: each partition collects the shared WAL. (A
    // reference dropped by one partition's GC while another still holds
    // it must leave the file: the reads after the last GC would fail.)
    let gc = options().gc_min_garbage_bytes(1).gc_garbage_ratio(0.5);
    let db = Db::open(dir.path(), gc.clone()).unwrap();
    let mut waited = 0;
    loop {
        let now = files(dir.path(), ".log");
        if shared.iter().all(|w| !now.contains(w)) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        waited += 1;
        assert!(
            waited < 3000,
            "the shared WAL was never collected: {now:?} {:?}",
            db.stats()
        );
    }
    let s = db.stats();
    assert!(s.gcs >= partitions, "every partition collected: {s:?}");
    check_all(&db, n, newest, "after GC");
    db.verify_checksums().unwrap();
    drop(db);
    let db = Db::open(dir.path(), gc).unwrap();
    check_all(&db, n, newest, "after GC and a reopen");
}

/// A flipped byte in a value kept in a WAL: a get of that key is
/// `Error::Corruption` naming the WAL file; the other keys still read.
#[test]
fn a_damaged_value_in_a_kept_wal_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..100 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    let wal = files_where(dir.path(), |n| n.ends_with(".log"))
        .pop()
        .unwrap();
    db.flush().unwrap();
    drop(db);
    // Key 50's value: find its bytes in the file and flip one.
    let bytes = std::fs::read(&wal).unwrap();
    let needle = value(50, 0);
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle.as_slice())
        .unwrap();
    flip_byte(&wal, (at + 10) as u64);
    let db = Db::open(dir.path(), options()).unwrap();
    let e = db.get(key(50)).unwrap_err();
    assert_corruption_in(&e, &wal, "get of the damaged value");
    for i in (0..100).filter(|i| *i != 50) {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 0)), "key {i}");
    }
    assert!(db.verify_checksums().is_err());
}

/// A WAL whose keys were overwritten within its own memtable is mostly
/// garbage the moment it is flushed, while the flushed UnsortedStore
/// table still points into it: GC collects it at once, and must read the
/// UnsortedStore too (a GC of the SortedStore alone would drop the
/// reference and delete the WAL under the table's pointers).
#[test]
fn a_gc_collects_a_wal_the_unsorted_store_points_into() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options().gc_min_garbage_bytes(1).gc_garbage_ratio(0.5);
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    let n = 200;
    for round in 0..10 {
        for i in 0..n {
            db.put(key(i), value(i, round)).unwrap();
        }
    }
    let before = files(dir.path(), ".log");
    db.flush().unwrap();
    let mut waited = 0;
    while files(dir.path(), ".log").iter().any(|w| before.contains(w)) {
        std::thread::sleep(std::time::Duration::from_millis(10));
        waited += 1;
        assert!(waited < 3000, "never collected: {:?}", db.stats());
    }
    let s = db.stats();
    assert!(s.gcs >= 1, "{s:?}");
    check_all(&db, n, |_| 9, "after GC");
    db.verify_checksums().unwrap();
    drop(db);
    let db = Db::open(dir.path(), opts).unwrap();
    check_all(&db, n, |_| 9, "after a reopen");
}
