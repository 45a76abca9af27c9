//! Keyspaces (`Db::keyspace`, `WriteBatch::put_in`, `Db::drop_keyspace`):
//! isolation between keyspaces and from the default one (gets, scans both
//! ways, bounds), batches atomic across keyspaces, recovery by name after
//! a reopen and a crash (WAL replay), drop and re-create, and a model test
//! against one `BTreeMap` per keyspace.

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;

use common::*;
use weft::{CloseOptions, Db, Error, Keyspace, Options, ReadOptions, WriteBatch, WriteOptions};

fn all(ks: &Keyspace) -> Vec<(Vec<u8>, Vec<u8>)> {
    ks.range::<&[u8], _>(..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

fn all_rev(ks: &Keyspace) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut v: Vec<_> = ks
        .range::<&[u8], _>(..)
        .unwrap()
        .rev()
        .map(|r| r.unwrap())
        .collect();
    v.reverse();
    v
}

fn pairs(items: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
    items
        .iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

#[test]
fn keyspaces_are_isolated_for_gets_scans_and_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let a = db.keyspace("a").unwrap();
    let b = db.keyspace("b").unwrap();
    let default = db.keyspace("default").unwrap();
    for k in ["k1", "k2", "k3"] {
        a.put(k, format!("a-{k}")).unwrap();
    }
    b.put("k2", "b-k2").unwrap();
    db.put("k1", "d-k1").unwrap();
    // Keys around the reserved span, so the default cursor must step over it.
    db.put(b"\xff", "d-ff").unwrap();
    db.put(b"\xffWKT", "d-after").unwrap();
    db.put(b"\xffWKR\xff", "d-before").unwrap();

    for round in 0..2 {
        assert_eq!(a.get("k1").unwrap().as_deref(), Some(&b"a-k1"[..]));
        assert_eq!(b.get("k1").unwrap(), None);
        assert_eq!(db.get("k2").unwrap(), None);
        assert_eq!(default.get("k1").unwrap().as_deref(), Some(&b"d-k1"[..]));
        let want_a = pairs(&[("k1", "a-k1"), ("k2", "a-k2"), ("k3", "a-k3")]);
        assert_eq!(all(&a), want_a);
        assert_eq!(all_rev(&a), want_a);
        assert_eq!(all(&b), pairs(&[("k2", "b-k2")]));
        assert_eq!(all_rev(&b), pairs(&[("k2", "b-k2")]));
        let want_d = vec![
            (b"k1".to_vec(), b"d-k1".to_vec()),
            (b"\xff".to_vec(), b"d-ff".to_vec()),
            (b"\xffWKR\xff".to_vec(), b"d-before".to_vec()),
            (b"\xffWKT".to_vec(), b"d-after".to_vec()),
        ];
        let fwd: Vec<_> = db
            .range::<&[u8], _>(..)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(fwd, want_d);
        let mut back: Vec<_> = db
            .range::<&[u8], _>(..)
            .unwrap()
            .rev()
            .map(|r| r.unwrap())
            .collect();
        back.reverse();
        assert_eq!(back, want_d);
        // Bounds are keys of the keyspace.
        let mid: Vec<_> = a.range("k2".."k3").unwrap().map(|r| r.unwrap().0).collect();
        assert_eq!(mid, vec![b"k2".to_vec()]);
        let tail: Vec<_> = a
            .range("k2"..)
            .unwrap()
            .rev()
            .map(|r| r.unwrap().0)
            .collect();
        assert_eq!(tail, vec![b"k3".to_vec(), b"k2".to_vec()]);
        // A cursor's seeks are keys of the keyspace too.
        let mut it = a.iter(&ReadOptions::new().upper_bound("k3")).unwrap();
        it.seek(b"k15").unwrap();
        assert_eq!(it.key(), b"k2");
        it.next().unwrap();
        assert!(!it.valid());
        it.seek_for_prev(b"k9").unwrap();
        assert_eq!(it.key(), b"k2");
        it.seek_to_first().unwrap();
        assert_eq!(it.key(), b"k1");
        it.prev().unwrap();
        assert!(!it.valid());
        // Prefix scans and multi-gets stay inside their keyspace too.
        assert_eq!(a.prefix("k").unwrap().count(), 3);
        assert_eq!(db.prefix(b"\xffWKS").unwrap().count(), 0);
        let got = a.multi_get(&["k1", "zz"]);
        assert_eq!(got[0].as_ref().unwrap().as_deref(), Some(&b"a-k1"[..]));
        assert_eq!(got[1].as_ref().unwrap(), &None);
        let stored_a_k1 = [&b"\xffWKS"[..], &1u32.to_be_bytes(), b"k1"].concat();
        assert_eq!(db.get(&stored_a_k1).unwrap(), None);
        assert_eq!(db.multi_get(&[&stored_a_k1])[0].as_ref().unwrap(), &None);
        if round == 0 {
            db.flush().unwrap();
            db.compact().unwrap();
        }
    }
    // The default keyspace refuses keys of the reserved span.
    assert!(matches!(
        db.put(b"\xffWKSx", "v"),
        Err(Error::InvalidArgument(_))
    ));
    let mut batch = WriteBatch::new();
    batch.put(b"\xffWKS\0\0\0\x01k1", "smuggled");
    assert!(matches!(
        db.write(batch, &WriteOptions::default()),
        Err(Error::InvalidArgument(_))
    ));
    // A default range delete over everything leaves the keyspaces.
    db.delete_range(b"", b"\xff\xff").unwrap();
    assert_eq!(db.range::<&[u8], _>(..).unwrap().count(), 0);
    assert_eq!(all(&a).len(), 3);
    assert_eq!(all(&b).len(), 1);
}

#[test]
fn a_batch_is_atomic_across_keyspaces_and_survives_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let a = db.keyspace("a").unwrap();
        let b = db.keyspace("b").unwrap();
        let mut batch = WriteBatch::new();
        batch
            .put_in(&a, "x", "1")
            .put_in(&b, "x", "2")
            .put("x", "0")
            .delete_in(&a, "gone");
        db.write(batch, &WriteOptions::default()).unwrap();
        // A batch with one bad op writes nothing at all.
        let mut bad = WriteBatch::new();
        bad.put_in(&a, "y", "1").put(b"\xffWKSy", "bad");
        assert!(db.write(bad, &WriteOptions::default()).is_err());
        assert_eq!(a.get("y").unwrap(), None);
        // A crash: nothing flushed, the WAL replays.
        db.close_with(&CloseOptions::new().flush(false)).unwrap();
    }
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.keyspaces(), vec!["default", "a", "b"]);
    let a = db.keyspace("a").unwrap();
    let b = db.keyspace("b").unwrap();
    assert_eq!(a.get("x").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(b.get("x").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(db.get("x").unwrap().as_deref(), Some(&b"0"[..]));
    assert_eq!(a.get("y").unwrap(), None);
}

/// A default range delete over the reserved span and a keyspace's own
/// range delete in one batch: the default's is cut around the span, the
/// keyspace's is kept whole (it lies inside the span); a default range
/// delete wholly inside the span reaches no keyspace. Also through the
/// values-in-WAL copy of the batch (values of at least `min_blob_size`).
#[test]
fn default_and_keyspace_range_deletes_in_one_batch_each_do_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let a = db.keyspace("a").unwrap();
    let b = db.keyspace("b").unwrap();
    let big = vec![b'v'; 4096];
    for k in ["k1", "k2", "k3"] {
        a.put(k, &big).unwrap();
        b.put(k, "small").unwrap();
        db.put(k, "d").unwrap();
    }
    let mut batch = WriteBatch::new();
    batch
        .delete_range("k", b"\xff\xff".as_slice())
        .delete_range_in(&a, "k1", "k3")
        .put_in(&b, "k9", &big);
    db.write(batch, &WriteOptions::default()).unwrap();
    assert_eq!(db.get("k2").unwrap(), None, "the default's range delete");
    assert!(
        a.get("k1").unwrap().is_none(),
        "a's own range delete was lost"
    );
    assert!(
        a.get("k2").unwrap().is_none(),
        "a's own range delete was lost"
    );
    assert!(a.get("k3").unwrap().is_some());
    assert!(
        b.get("k1").unwrap().is_some(),
        "the default's delete reached b"
    );
    // Wholly inside the span through the default API: reaches nobody.
    let mut inside = WriteBatch::new();
    inside.delete_range(b"\xffWKS".as_slice(), b"\xffWKT".as_slice());
    assert_eq!(inside.len(), 1);
    db.write(inside, &WriteOptions::default()).unwrap();
    db.delete_range(b"\xffWKS".as_slice(), b"\xffWKT".as_slice())
        .unwrap();
    assert!(a.get("k3").unwrap().is_some());
    assert_eq!(b.range::<&str, _>(..).unwrap().count(), 4);
}

#[test]
fn keyspaces_are_recovered_by_name_after_reopen_and_drop_crash() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        db.keyspace("one").unwrap().put("k", "1").unwrap();
        db.keyspace("two").unwrap().put("k", "2").unwrap();
        db.flush().unwrap();
        db.keyspace("three").unwrap().put("k", "3").unwrap();
        db.close().unwrap();
    }
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        assert_eq!(db.keyspaces(), vec!["default", "one", "three", "two"]);
        for (name, v) in [("one", "1"), ("two", "2"), ("three", "3")] {
            let ks = db.keyspace(name).unwrap();
            assert_eq!(ks.get("k").unwrap().as_deref(), Some(v.as_bytes()));
        }
        db.drop_keyspace("two").unwrap();
        // Dropped in the WAL only: the replay must redo it.
        drop(db);
    }
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.keyspaces(), vec!["default", "one", "three"]);
    let two = db.keyspace("two").unwrap();
    assert_eq!(two.get("k").unwrap(), None);
    assert_eq!(
        db.keyspace("one").unwrap().get("k").unwrap().as_deref(),
        Some(&b"1"[..])
    );
}

/// Bytes in the tables of every partition.
fn table_bytes(db: &Db) -> u64 {
    db.stats()
        .partitions
        .iter()
        .map(|p| p.unsorted_bytes + p.sorted_bytes)
        .sum()
}

#[test]
fn drop_is_one_write_and_a_recreated_name_starts_empty() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), tiny_options(kinds()[0])).unwrap();
    let ks = db.keyspace("big").unwrap();
    let other = db.keyspace("other").unwrap();
    for i in 0..2000u32 {
        ks.put(format!("k{i:05}"), [b'v'; 100]).unwrap();
    }
    other.put("keep", "me").unwrap();
    db.flush().unwrap();
    db.compact().unwrap();
    let full = table_bytes(&db);
    let before = db.stats().sequence;
    db.drop_keyspace("big").unwrap();
    // O(1): one batch of two ops (the registry row, the range delete).
    assert_eq!(db.stats().sequence, before + 2);
    assert!(matches!(ks.get("k00001"), Err(Error::InvalidArgument(_))));
    assert!(matches!(ks.put("k", "v"), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        db.drop_keyspace("big"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        db.drop_keyspace("default"),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(db.keyspaces(), vec!["default", "other"]);
    let again = db.keyspace("big").unwrap();
    assert_eq!(again.get("k00001").unwrap(), None);
    assert_eq!(all(&again), vec![]);
    again.put("new", "1").unwrap();
    assert_eq!(all(&again), pairs(&[("new", "1")]));
    assert_eq!(all(&other), pairs(&[("keep", "me")]));
    db.compact().unwrap();
    assert_eq!(all(&again), pairs(&[("new", "1")]));
    // The space comes back: the merges drop what the drop's range delete
    // covers.
    let left = table_bytes(&db);
    assert!(
        left * 4 < full,
        "tables hold {left} bytes after the drop, {full} before"
    );
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(all(&db.keyspace("big").unwrap()), pairs(&[("new", "1")]));
}

/// Random puts, deletes, range deletes and cross-keyspace batches over a
/// few keyspaces, with drops, re-creates, reopens and crashes, checked
/// against one `BTreeMap` per keyspace (the default one included).
#[test]
fn model_per_keyspace() {
    let steps = env_usize("WEFT_KEYSPACE_STEPS", 3000);
    for seed in seeds(&[1, 2]) {
        let _guard = SeedGuard::new(format!("keyspaces model seed {seed}"));
        let mut r = rng(seed);
        let dir = tempfile::tempdir().unwrap();
        let names = ["default", "a", "b", "c"];
        let mut db = Some(Db::open(dir.path(), tiny_options(kinds()[0])).unwrap());
        let mut model: BTreeMap<&str, BTreeMap<Vec<u8>, Vec<u8>>> = BTreeMap::new();
        model.insert("default", BTreeMap::new());
        let key = |r: &mut StdRng| format!("k{:03}", r.gen_range(0..200)).into_bytes();
        for step in 0..steps {
            let d = db.as_ref().unwrap();
            let name = names[r.gen_range(0..names.len())];
            let ks = d.keyspace(name).unwrap();
            model.entry(name).or_default();
            match r.gen_range(0..100) {
                0..=44 => {
                    let k = key(&mut r);
                    let v = format!("{name}-{step}").into_bytes();
                    ks.put(&k, &v).unwrap();
                    model.get_mut(name).unwrap().insert(k, v);
                }
                45..=59 => {
                    let k = key(&mut r);
                    ks.delete(&k).unwrap();
                    model.get_mut(name).unwrap().remove(&k);
                }
                60..=64 => {
                    let (x, y) = (key(&mut r), key(&mut r));
                    let (s, e) = if x <= y { (x, y) } else { (y, x) };
                    ks.delete_range(&s, &e).unwrap();
                    model
                        .get_mut(name)
                        .unwrap()
                        .retain(|k, _| !(*k >= s && *k < e));
                }
                65..=79 => {
                    let mut batch = WriteBatch::new();
                    for _ in 0..r.gen_range(1..5) {
                        let n = names[r.gen_range(0..names.len())];
                        let h = d.keyspace(n).unwrap();
                        model.entry(n).or_default();
                        let k = key(&mut r);
                        if r.gen_bool(0.7) {
                            let v = format!("batch-{n}-{step}").into_bytes();
                            batch.put_in(&h, &k, &v);
                            model.get_mut(n).unwrap().insert(k, v);
                        } else {
                            batch.delete_in(&h, &k);
                            model.get_mut(n).unwrap().remove(&k);
                        }
                    }
                    d.write(batch, &WriteOptions::default()).unwrap();
                }
                80..=84 if name != "default" => {
                    d.drop_keyspace(name).unwrap();
                    model.remove(name);
                }
                85..=87 => {
                    let d = db.take().unwrap();
                    if r.gen_bool(0.5) {
                        d.close_with(&CloseOptions::new().flush(false)).unwrap();
                    } else {
                        d.close().unwrap();
                    }
                    db = Some(Db::open(dir.path(), tiny_options(kinds()[0])).unwrap());
                }
                88..=89 => d.flush().unwrap(),
                _ => {
                    // Point reads.
                    let k = key(&mut r);
                    let want = model.get(name).and_then(|m| m.get(&k)).cloned();
                    assert_eq!(ks.get(&k).unwrap(), want, "step {step} get {name}");
                }
            }
            if step % 97 == 0 || step + 1 == steps {
                let d = db.as_ref().unwrap();
                let mut listed: Vec<String> = model.keys().map(|s| s.to_string()).collect();
                listed.retain(|n| n != "default");
                listed.sort();
                listed.insert(0, "default".into());
                assert_eq!(d.keyspaces(), listed, "step {step}");
                for (n, m) in &model {
                    let h = d.keyspace(n).unwrap();
                    let want: Vec<_> = m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                    assert_eq!(all(&h), want, "step {step} scan {n}");
                    assert_eq!(all_rev(&h), want, "step {step} reverse scan {n}");
                }
            }
        }
    }
}

#[test]
fn a_read_only_db_sees_keyspaces_and_refresh_catches_up() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Db::open(dir.path(), Options::default()).unwrap();
    writer.keyspace("first").unwrap().put("k", "1").unwrap();
    let reader = Db::open_read_only(dir.path(), Options::default()).unwrap();
    assert_eq!(reader.keyspaces(), vec!["default", "first"]);
    let first = reader.keyspace("first").unwrap();
    assert_eq!(first.get("k").unwrap().as_deref(), Some(&b"1"[..]));
    writer.keyspace("second").unwrap().put("k", "2").unwrap();
    reader.refresh().unwrap();
    assert_eq!(reader.keyspaces(), vec!["default", "first", "second"]);
    let second = reader.keyspace("second").unwrap();
    assert_eq!(second.get("k").unwrap().as_deref(), Some(&b"2"[..]));
    assert!(matches!(
        reader.keyspace("third"),
        Err(Error::ReadOnly { .. })
    ));
}
