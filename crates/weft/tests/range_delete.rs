//! Range deletes (`Db::delete_range`, `WriteBatch::delete_range`): what
//! reads see before and after flushes, merges, reopens and snapshots,
//! that merges drop what they cover and then the tombstones themselves,
//! and the errors for bad ranges. The model test (tests/model.rs) draws
//! them among every other operation.

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use weft::{Db, Error, MemtableKind, Options, ReadOptions, WriteBatch, WriteOptions};

fn key(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

fn keys(db: &Db, opts: &ReadOptions) -> Vec<Vec<u8>> {
    scan_cursor(db, opts).into_iter().map(|(k, _)| k).collect()
}

fn options(kind: MemtableKind) -> Options {
    tiny_options(kind)
}

/// Keys 0..n, each put once.
fn fill(db: &Db, n: u32) {
    for i in 0..n {
        db.put(key(i), format!("value {i}")).unwrap();
    }
}

/// Gets and cursors skip what a range delete covers, in the memtable,
/// after a flush, after a merge and after a reopen; keys written after it
/// are seen; a snapshot taken before it sees everything, through a merge.
#[test]
fn reads_honour_a_range_delete_in_every_layer() {
    for kind in kinds() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = Db::open(dir.path(), options(kind)).unwrap();
        fill(&db, 400);
        db.flush().unwrap();
        let before = db.snapshot();
        db.delete_range(key(100), key(300)).unwrap();
        db.put(key(150), "again").unwrap();
        let want: Vec<Vec<u8>> = (0..100).chain([150]).chain(300..400).map(key).collect();
        for stage in ["memtable", "flushed", "merged", "merged again", "reopened"] {
            match stage {
                "flushed" => db.flush().unwrap(),
                "merged" | "merged again" => db.compact().unwrap(),
                "reopened" => {
                    db.close().unwrap();
                    db = Db::open(dir.path(), options(kind)).unwrap();
                }
                _ => {}
            }
            let what = format!("{kind} {stage}");
            assert_eq!(db.get(key(99)).unwrap().unwrap(), b"value 99", "{what}");
            assert_eq!(db.get(key(100)).unwrap(), None, "{what}");
            assert_eq!(db.get(key(299)).unwrap(), None, "{what}");
            assert_eq!(db.get(key(150)).unwrap().unwrap(), b"again", "{what}");
            assert_eq!(keys(&db, &ReadOptions::new()), want, "{what}");
            if stage != "reopened" {
                let old = ReadOptions::new().snapshot(&before);
                assert_eq!(
                    db.get_opt(key(200), &old).unwrap().unwrap(),
                    b"value 200",
                    "{what}: the snapshot from before the delete"
                );
                assert_eq!(keys(&db, &old).len(), 400, "{what}");
            }
        }
    }
}

/// With a snapshot older than the delete held through a merge, the merge
/// keeps what the snapshot sees and still hides it from newer reads;
/// once the snapshot is gone, the next merge drops the versions and the
/// tombstone.
#[test]
fn a_merge_under_an_older_snapshot_keeps_what_it_sees() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(MemtableKind::SkipList)).unwrap();
    fill(&db, 300);
    let snap = db.snapshot();
    db.delete_range(key(0), key(200)).unwrap();
    db.compact().unwrap();
    assert_eq!(db.stats().range_tombstones, 0, "applied everywhere");
    let old = ReadOptions::new().snapshot(&snap);
    assert_eq!(keys(&db, &old).len(), 300);
    assert_eq!(
        keys(&db, &ReadOptions::new()),
        (200..300).map(key).collect::<Vec<_>>()
    );
    assert_eq!(db.get(key(5)).unwrap(), None);
    drop(snap);
    db.compact().unwrap();
    assert_eq!(keys(&db, &ReadOptions::new()).len(), 100);
}

/// Without snapshots, the merge drops every version the delete covers
/// and then the tombstone: the store shrinks to what is left.
#[test]
fn merges_drop_what_a_range_delete_covers_and_then_the_delete() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..20_000 {
        db.put(key(i), vec![b'v'; 100]).unwrap();
    }
    db.compact().unwrap();
    let full = db.stats().live_bytes_estimate;
    db.delete_range(key(0), key(19_000)).unwrap();
    assert_eq!(db.stats().range_tombstones, 0, "still in the memtable");
    db.flush().unwrap();
    assert_eq!(db.stats().range_tombstones, 1);
    db.compact().unwrap();
    let s = db.stats();
    assert_eq!(s.range_tombstones, 0, "{s:?}");
    assert_eq!(s.range_deleted_versions, 19_000, "{s:?}");
    assert!(
        s.live_bytes_estimate * 5 < full,
        "{} of {full}",
        s.live_bytes_estimate
    );
    assert_eq!(keys(&db, &ReadOptions::new()).len(), 1000);
}

/// A range delete is one operation; a reversed range is refused and
/// writes nothing; an empty one deletes nothing; oversized keys are
/// refused.
#[test]
fn bad_ranges_are_refused_and_empty_ones_delete_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    fill(&db, 10);
    let seq = db.stats().sequence;
    let e = db.delete_range(key(5), key(2)).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("past its end"), "{e}");
    let huge = vec![b'k'; weft::MAX_KEY_SIZE + 1];
    assert!(matches!(
        db.delete_range(key(0), &huge),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(db.stats().sequence, seq, "nothing was written");
    db.delete_range(key(3), key(3)).unwrap();
    assert_eq!(keys(&db, &ReadOptions::new()).len(), 10);
    let mut b = WriteBatch::new();
    b.delete_range(key(0), key(10));
    assert_eq!(b.len(), 1);
    db.write(b, &WriteOptions::new()).unwrap();
    assert!(keys(&db, &ReadOptions::new()).is_empty());
}

/// The row cache never serves a key a range delete covers: the delete
/// drops the cached entries in its range before it is visible, and a
/// snapshot from before it still reads the values (from storage).
#[test]
fn the_row_cache_forgets_what_a_range_delete_covers() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default().row_cache_size(4 << 20)).unwrap();
    fill(&db, 100);
    db.flush().unwrap();
    for i in 0..100 {
        db.get(key(i)).unwrap().unwrap(); // fills the cache
    }
    let cached = db.stats().row_cache.entries;
    assert!(cached >= 100, "{:?}", db.stats().row_cache);
    let before = db.snapshot();
    db.delete_range(key(10), key(20)).unwrap();
    assert_eq!(db.stats().row_cache.entries, cached - 10);
    for i in 0..100 {
        let got = db.get(key(i)).unwrap();
        assert_eq!(got.is_none(), (10..20).contains(&i), "key {i}");
        let old = db
            .get_opt(key(i), &ReadOptions::new().snapshot(&before))
            .unwrap();
        assert_eq!(
            old.unwrap(),
            format!("value {i}").as_bytes(),
            "key {i} at the snapshot"
        );
    }
}
