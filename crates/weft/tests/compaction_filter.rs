//! The compaction filter (`Options::compaction_filter`): merges and GC drop
//! what it removes, never a version a live snapshot can see, and a
//! removed version never lets an older one come back.

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::*;
use rand::Rng;
use weft::{
    CompactionFilter, Db, FilterDecision, FilterEntry, MemtableKind, Options, ReadOptions, Snapshot,
};

/// Removes every value that starts with `doomed`, reading separated
/// values when it must; counts the calls.
struct DropDoomed {
    calls: AtomicU64,
    /// Decide by key alone (`key` starts with `doomed`): never reads a value.
    by_key: bool,
}

impl DropDoomed {
    fn new(by_key: bool) -> Arc<DropDoomed> {
        Arc::new(DropDoomed {
            calls: AtomicU64::new(0),
            by_key,
        })
    }
}

impl CompactionFilter for DropDoomed {
    fn name(&self) -> &str {
        "drop-doomed"
    }

    fn filter(&self, entry: &FilterEntry<'_>) -> FilterDecision {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let doomed = if self.by_key {
            entry.key().starts_with(b"doomed")
        } else {
            entry.value().is_some_and(|v| v.starts_with(b"doomed"))
        };
        if doomed {
            FilterDecision::Remove
        } else {
            FilterDecision::Keep
        }
    }
}

fn options(filter: Arc<DropDoomed>) -> Options {
    Options::default()
        .write_buffer_size(32 << 10)
        .table_size(32 << 10)
        .unsorted_limit(64 << 10)
        .min_blob_size(100)
        .compaction_filter(Some(filter))
}

#[test]
fn removed_keys_read_as_deleted_and_the_rest_stay() {
    for by_key in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let filter = DropDoomed::new(by_key);
        let db = Db::open(dir.path(), options(Arc::clone(&filter))).unwrap();
        for i in 0..2000u32 {
            // Small values inline, large ones separated (read on demand).
            let pad = if i % 2 == 0 { 10 } else { 300 };
            let (k, v) = if i % 3 == 0 {
                (
                    format!("doomed{i:05}"),
                    format!("doomed{}", "x".repeat(pad)),
                )
            } else {
                (format!("kept{i:05}"), format!("kept{}", "y".repeat(pad)))
            };
            db.put(k, v).unwrap();
        }
        db.compact().unwrap();
        let s = db.stats();
        assert_eq!(s.compaction_filter_removed, 667, "by_key {by_key}: {s:?}");
        assert!(filter.calls.load(Ordering::Relaxed) >= 2000);
        let all = scan_all(&db);
        assert_eq!(all.len(), 2000 - 667);
        assert!(all
            .iter()
            .all(|(k, v)| k.starts_with(b"kept") && v.starts_with(b"kept")));
        assert_eq!(db.get("doomed00000").unwrap(), None);
        // The removals are durable: the tables hold no trace of them.
        db.close().unwrap();
        let db = Db::open(dir.path(), Options::default()).unwrap();
        assert_eq!(scan_all(&db).len(), 2000 - 667);
    }
}

/// A version a snapshot sees is never offered; once a newer version is
/// removed, the snapshot still reads the older one and a reader after it
/// reads the key as deleted (the older value does not come back).
#[test]
fn snapshots_keep_what_they_see_and_old_values_never_return() {
    let dir = tempfile::tempdir().unwrap();
    let filter = DropDoomed::new(false);
    let db = Db::open(dir.path(), options(Arc::clone(&filter))).unwrap();
    db.put("k", "doomed but seen by a snapshot").unwrap();
    db.put("j", "live").unwrap();
    let snap = db.snapshot();
    db.compact().unwrap();
    let at = |s: &Snapshot, k: &str| db.get_opt(k, &ReadOptions::new().snapshot(s)).unwrap();
    assert_eq!(
        at(&snap, "k").as_deref(),
        Some(&b"doomed but seen by a snapshot"[..])
    );
    assert_eq!(
        db.get("k").unwrap().as_deref(),
        Some(&b"doomed but seen by a snapshot"[..])
    );
    // A newer doomed version over an older live one, the older seen by a
    // snapshot: the newer goes, the older stays for the snapshot only.
    db.put("j", "doomed now").unwrap();
    db.compact().unwrap();
    assert_eq!(db.get("j").unwrap(), None, "the older value came back");
    assert_eq!(at(&snap, "j").as_deref(), Some(&b"live"[..]));
    assert!(db.stats().compaction_filter_removed >= 1);
    // Without the snapshot, everything doomed goes once a merge rewrites
    // it (a merge rewrites the SortedStore tables the new ones overlap).
    drop(snap);
    db.put("a", "x").unwrap();
    db.put("z", "x").unwrap();
    db.compact().unwrap();
    assert_eq!(db.get("k").unwrap(), None);
    assert_eq!(db.get("j").unwrap(), None);
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get("j").unwrap(), None, "after reopen");
    let x = || b"x".to_vec();
    assert_eq!(
        scan_all(&db),
        vec![(b"a".to_vec(), x()), (b"z".to_vec(), x())]
    );
}

/// Checks a read of the whole store against the model: a key whose newest
/// version is doomed reads that version or nothing (the filter may have
/// removed it), any other key exactly its newest version, and no key the
/// model lacks comes back.
fn check_against_model(
    got: &[(Vec<u8>, Vec<u8>)],
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    by_key: bool,
    ctx: &str,
) {
    let got: BTreeMap<&[u8], &[u8]> = got.iter().map(|(k, v)| (&k[..], &v[..])).collect();
    for (k, v) in model {
        match got.get(&k[..]) {
            Some(g) => assert_eq!(g, &&v[..], "{ctx}: key {}", show(k)),
            None => assert!(
                if by_key {
                    k.starts_with(b"doomed")
                } else {
                    v.starts_with(b"doomed")
                },
                "{ctx}: key {} lost",
                show(k)
            ),
        }
    }
    for k in got.keys() {
        assert!(model.contains_key(*k), "{ctx}: key {} came back", show(k));
    }
}

/// Random histories with snapshots, merges, GC and splits (and munks in
/// half the seeds). What a snapshot reads when it is taken agrees with the
/// model ([`check_against_model`]), and it reads exactly that for as long
/// as it lives, however many merges remove versions meanwhile.
#[test]
fn random_histories_keep_snapshot_views_stable() {
    for seed in seeds(&[1, 2, 3]) {
        let _guard = SeedGuard::new(format!("compaction filter seed {seed} (WEFT_SEED={seed})"));
        let mut rng = rng(seed);
        let dir = tempfile::tempdir().unwrap();
        let by_key = rng.gen_bool(0.5);
        let mut opts =
            tiny_options(MemtableKind::default()).compaction_filter(Some(DropDoomed::new(by_key)));
        if rng.gen_bool(0.5) {
            opts = opts.munk_cache_size(256 << 10).munk_min_heat(0);
        }
        let db = Db::open(dir.path(), opts).unwrap();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        type View = Vec<(Vec<u8>, Vec<u8>)>;
        let mut snaps: Vec<(Snapshot, View)> = Vec::new();
        let view = |s: &Snapshot| scan_cursor(&db, &ReadOptions::new().snapshot(s));
        for step in 0..6000u32 {
            let prefix = if rng.gen_bool(0.3) { "doomed" } else { "k" };
            let k = format!("{prefix}{:03}", rng.gen_range(0..300));
            match rng.gen_range(0..100) {
                0..=74 => {
                    let doomed = rng.gen_bool(0.3);
                    let len = if rng.gen_bool(0.3) { 200 } else { 20 };
                    let tag = if doomed { "doomed" } else { "v" };
                    let mut v = format!("{tag}{step}:").into_bytes();
                    v.resize(len, b'.');
                    db.put(&k, &v).unwrap();
                    model.insert(k.into_bytes(), v);
                }
                75..=89 => {
                    db.delete(&k).unwrap();
                    model.remove(k.as_bytes());
                }
                90..=93 if snaps.len() < 4 => {
                    let s = db.snapshot();
                    let seen = view(&s);
                    check_against_model(
                        &seen,
                        &model,
                        by_key,
                        &format!("seed {seed} step {step}: new snapshot"),
                    );
                    snaps.push((s, seen));
                }
                90..=95 if !snaps.is_empty() => {
                    let (s, seen) = snaps.remove(rng.gen_range(0..snaps.len()));
                    assert_pairs_eq(
                        &view(&s),
                        &seen,
                        &format!("seed {seed} step {step}: released snapshot"),
                    );
                }
                _ => db.compact().unwrap(),
            }
        }
        db.compact().unwrap();
        for (i, (s, seen)) in snaps.iter().enumerate() {
            assert_pairs_eq(
                &view(s),
                seen,
                &format!("seed {seed}: snapshot #{i} at the end"),
            );
        }
        check_against_model(
            &scan_all(&db),
            &model,
            by_key,
            &format!("seed {seed}: the end"),
        );
        let s = db.stats();
        assert!(
            s.compaction_filter_removed > 0,
            "seed {seed}: the filter never removed"
        );
    }
}
