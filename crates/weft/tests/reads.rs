//! Reads across the layers: range and prefix edge cases, deletes that
//! shadow older layers, snapshots and iterators that keep their view
//! through writes, flushes and compactions — for every memtable kind.

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::ops::Bound;

use common::*;
use weft::{Db, MemtableKind, Options, ReadOptions, Snapshot};

fn each_kind(f: impl Fn(MemtableKind)) {
    for k in kinds() {
        let _g = SeedGuard::new(format!("memtable kind {k}"));
        f(k);
    }
}

fn edge_keys() -> Vec<Vec<u8>> {
    [
        &b""[..],
        b"\x00",
        b"\x00\x00",
        b"a",
        b"a\x00",
        b"a\xff",
        b"ab",
        b"b",
        b"\xfe\xff",
        b"\xff",
        b"\xff\x00",
        b"\xff\xff",
        b"\xff\xff\x00",
        b"\xff\xff\xff",
    ]
    .iter()
    .map(|k| k.to_vec())
    .collect()
}

fn check_ranges(db: &Db, model: &Model, stage: &str) {
    let keys = edge_keys();
    let mut probes = keys.clone();
    probes.extend([b"0".to_vec(), b"aa".to_vec(), b"zz".to_vec(), vec![0xff; 4]]);
    let mut bounds = vec![Bound::Unbounded];
    for p in &probes {
        bounds.push(Bound::Included(p.clone()));
        bounds.push(Bound::Excluded(p.clone()));
    }
    for lo in &bounds {
        for hi in &bounds {
            let want: Vec<_> = model
                .iter()
                .filter(|(k, _)| in_bounds(k, lo, hi))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let ctx = format!("{stage}: range({}, {})", show_bound(lo), show_bound(hi));
            let got: Vec<_> = db
                .range((lo.clone(), hi.clone()))
                .unwrap_or_else(|e| panic!("{ctx}: {e}"))
                .map(|r| r.unwrap())
                .collect();
            assert_pairs_eq(&got, &want, &ctx);
            let mut rev: Vec<_> = db
                .range((lo.clone(), hi.clone()))
                .unwrap()
                .rev()
                .map(|r| r.unwrap())
                .collect();
            rev.reverse();
            assert_pairs_eq(&rev, &want, &format!("{ctx} reversed"));
        }
    }
    // Reversed and empty std ranges: empty, no panic (BTreeMap would panic).
    assert_eq!(db.range(b"b".to_vec()..b"a".to_vec()).unwrap().count(), 0);
    assert_eq!(db.range(b"a".to_vec()..b"a".to_vec()).unwrap().count(), 0);
    assert_eq!(db.range(&b"b"[..]..=&b"a"[..]).unwrap().rev().count(), 0);
    assert_eq!(db.range::<&[u8], _>(..&b""[..]).unwrap().count(), 0);
    // Prefixes, including all-0xff ones (no successor).
    let prefixes: Vec<Vec<u8>> = vec![
        vec![],
        b"\x00".to_vec(),
        b"a".to_vec(),
        b"a\xff".to_vec(),
        b"\xff".to_vec(),
        b"\xff\xff".to_vec(),
        b"\xff\xff\xff".to_vec(),
        b"\xff\xff\xff\xff".to_vec(),
        b"zz".to_vec(),
    ];
    for p in &prefixes {
        let want: Vec<_> = model
            .iter()
            .filter(|(k, _)| k.starts_with(p))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let ctx = format!("{stage}: prefix({})", show(p));
        let got: Vec<_> = db.prefix(p).unwrap().map(|r| r.unwrap()).collect();
        assert_pairs_eq(&got, &want, &ctx);
        let mut rev: Vec<_> = db.prefix(p).unwrap().rev().map(|r| r.unwrap()).collect();
        rev.reverse();
        assert_pairs_eq(&rev, &want, &format!("{ctx} reversed"));
        let cur = scan_cursor(db, &ReadOptions::new().prefix(p));
        assert_pairs_eq(&cur, &want, &format!("{ctx} via ReadOptions::prefix"));
        // Cursor from the end of a prefix.
        let mut it = db.iter(&ReadOptions::new().prefix(p)).unwrap();
        it.seek_to_last().unwrap();
        match want.last() {
            None => assert!(!it.valid(), "{ctx}: seek_to_last on an empty prefix"),
            Some((k, _)) => {
                assert!(it.valid(), "{ctx}: seek_to_last");
                assert_eq!(show(it.key()), show(k), "{ctx}: seek_to_last");
            }
        }
    }
    // Cursor bounds clamp seeks: seek below the lower bound lands on the
    // first key in bounds; seek_for_prev above the upper bound on the last.
    let ro = ReadOptions::new()
        .lower_bound(b"a".to_vec())
        .upper_bound(b"b".to_vec());
    let in_ab: Vec<&Vec<u8>> = model
        .keys()
        .filter(|k| k.as_slice() >= &b"a"[..] && k.as_slice() < &b"b"[..])
        .collect();
    let mut it = db.iter(&ro).unwrap();
    it.seek(b"").unwrap();
    assert_eq!(
        it.valid().then(|| it.key().to_vec()).as_ref(),
        in_ab.first().copied(),
        "{stage}: seek below lower bound"
    );
    it.seek_for_prev(b"\xff\xff\xff\xff").unwrap();
    assert_eq!(
        it.valid().then(|| it.key().to_vec()).as_ref(),
        in_ab.last().copied(),
        "{stage}: seek_for_prev above upper bound"
    );
    it.seek(b"b").unwrap();
    assert!(
        !it.valid(),
        "{stage}: seek to the upper bound must be invalid"
    );
    // lower == upper: nothing.
    let mut it = db
        .iter(
            &ReadOptions::new()
                .lower_bound(b"a".to_vec())
                .upper_bound(b"a".to_vec()),
        )
        .unwrap();
    it.seek_to_first().unwrap();
    assert!(!it.valid(), "{stage}: lower == upper");
    it.seek_to_last().unwrap();
    assert!(!it.valid(), "{stage}: lower == upper (seek_to_last)");
    // lower > upper: nothing, no panic.
    let mut it = db
        .iter(
            &ReadOptions::new()
                .lower_bound(b"b".to_vec())
                .upper_bound(b"a".to_vec()),
        )
        .unwrap();
    it.seek_to_first().unwrap();
    assert!(!it.valid(), "{stage}: lower > upper");
}

#[test]
fn range_and_prefix_edge_cases() {
    each_kind(|kind| {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default().memtable(kind)).unwrap();
        let mut model = Model::new();
        check_ranges(&db, &model, "empty db");
        for (i, k) in edge_keys().into_iter().enumerate() {
            let v = format!("v{i}").into_bytes();
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        check_ranges(&db, &model, "memtable");
        db.flush().unwrap();
        check_ranges(&db, &model, "flushed");
        // Mix layers: some keys overwritten or deleted in the memtable.
        db.compact().unwrap();
        for k in [&b"a"[..], b"\xff\xff", b""] {
            db.delete(k).unwrap();
            model.remove(k);
        }
        db.put(b"ab", b"new").unwrap();
        model.insert(b"ab".to_vec(), b"new".to_vec());
        check_ranges(&db, &model, "sorted + memtable");
    });
}

#[test]
fn deletes_shadow_older_layers() {
    each_kind(|kind| {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options::default().memtable(kind);
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        db.put(b"k", b"v1").unwrap();
        db.flush().unwrap();
        db.compact().unwrap(); // v1 in the SortedStore
        db.put(b"k", b"v2").unwrap();
        db.flush().unwrap(); // v2 in the UnsortedStore
        let s_v2 = db.snapshot();
        db.delete(b"k").unwrap(); // tombstone in the memtable
        let check = |db: &Db, stage: &str| {
            assert_eq!(
                db.get(b"k").unwrap(),
                None,
                "{stage}: deleted key resurfaced"
            );
            assert!(scan_all(db).is_empty(), "{stage}: scan shows a deleted key");
            assert_eq!(
                db.range::<&[u8], _>(..).unwrap().rev().count(),
                0,
                "{stage}: reverse"
            );
        };
        check(&db, "tombstone in memtable");
        let ro = ReadOptions::new().snapshot(&s_v2);
        assert_eq!(db.get_opt(b"k", &ro).unwrap().as_deref(), Some(&b"v2"[..]));
        db.flush().unwrap();
        check(&db, "tombstone in UnsortedStore");
        db.compact().unwrap();
        check(&db, "after compact");
        // The snapshot taken before the delete still reads v2 after merges.
        assert_eq!(
            db.get_opt(b"k", &ro).unwrap().as_deref(),
            Some(&b"v2"[..]),
            "snapshot lost its version in a merge"
        );
        assert_eq!(scan_cursor(&db, &ro), vec![(b"k".to_vec(), b"v2".to_vec())]);
        drop(ro);
        drop(s_v2);
        db.compact().unwrap();
        check(&db, "after compact without snapshots");
        db.close().unwrap();
        let db = Db::open(dir.path(), opts).unwrap();
        check(&db, "after reopen");
    });
}

#[test]
fn snapshots_survive_flush_compact_and_count() {
    each_kind(|kind| {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), tiny_options(kind)).unwrap();
        assert_eq!(db.stats().live_snapshots, 0);
        let mut frozen: Vec<(Snapshot, Model)> = Vec::new();
        let mut model = Model::new();
        for round in 0..5u32 {
            for i in 0..200u32 {
                let k = format!("k{:03}", (i * 7 + round) % 150).into_bytes();
                let v = format!("r{round}i{i}-{}", "z".repeat(40)).into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            frozen.push((db.snapshot(), model.clone()));
        }
        let extra = frozen[0].0.clone();
        assert_eq!(db.stats().live_snapshots, 5, "clones count once");
        db.flush().unwrap();
        db.compact().unwrap();
        for (i, (s, m)) in frozen.iter().enumerate() {
            let got = scan_cursor(&db, &ReadOptions::new().snapshot(s));
            assert_pairs_eq(&got, &model_vec(m), &format!("snapshot {i} after compact"));
        }
        drop(frozen);
        assert_eq!(db.stats().live_snapshots, 1, "the clone keeps one alive");
        drop(extra);
        assert_eq!(db.stats().live_snapshots, 0, "all snapshots released");
        assert_db_eq(&db, &model, "latest");
    });
}

#[test]
fn iterator_keeps_its_view_through_writes_flush_and_compact() {
    each_kind(|kind| {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), tiny_options(kind)).unwrap();
        let mut model = Model::new();
        for i in 0..300u32 {
            let k = format!("k{i:03}").into_bytes();
            let v = format!("old{i}-{}", "o".repeat(30)).into_bytes();
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        db.flush().unwrap();
        let mut it = db.iter(&ReadOptions::new()).unwrap();
        let mut range = db.range::<&[u8], _>(..).unwrap();
        it.seek_to_first().unwrap();
        let mut got = Vec::new();
        let mut got_range = Vec::new();
        for _ in 0..10 {
            got.push((it.key().to_vec(), it.value().to_vec()));
            it.next().unwrap();
            got_range.push(range.next().unwrap().unwrap());
        }
        // Rewrite and delete everything, flush and merge (old files may go).
        for i in 0..300u32 {
            let k = format!("k{i:03}");
            if i % 2 == 0 {
                db.delete(&k).unwrap();
            } else {
                db.put(&k, "new").unwrap();
            }
            db.put(format!("n{i:03}"), "added").unwrap();
        }
        db.flush().unwrap();
        db.compact().unwrap();
        while it.valid() {
            got.push((it.key().to_vec(), it.value().to_vec()));
            it.next().unwrap();
        }
        got_range.extend(range.map(|r| r.unwrap()));
        assert_pairs_eq(&got, &model_vec(&model), "cursor opened before the rewrite");
        assert_pairs_eq(
            &got_range,
            &model_vec(&model),
            "range opened before the rewrite",
        );
    });
}
