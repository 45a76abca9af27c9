//! Munks (`Options::munk_cache_size`, `store::munk`): hot partitions held
//! whole in memory, rebalanced there, relabeled through merges and GC,
//! evicted when colder ones must make room.
//!
//! * `a_munk_serves_reads_and_follows_flushes_and_merges`: one partition,
//!   loaded; gets and scans come from it; new writes, flushed, are folded
//!   in by rebalances; a compaction keeps it (relabel); every read checked
//!   against a `BTreeMap`. Catches a munk that hides newer tables, or one
//!   kept through a rewrite it does not match.
//! * `munks_race_writes_scans_and_snapshots`: writers rewrite groups of
//!   keys atomically (every key of a group holds the same generation)
//!   while readers scan the groups and get their keys at snapshots, and a
//!   budget too small for every partition keeps munks loading, evicting
//!   and rebalancing under them. Every scan and every snapshot must see
//!   whole batches. Catches a scan or get that mixes a munk with tables of
//!   another version of its partition.
//! * `model_with_munks`: random puts, deletes, batches, gets, scans and
//!   snapshot reads, flushes, compactions and reopens against a `BTreeMap`
//!   with munks loading eagerly.
//!
//! Knobs: `WEFT_SEED=<u64>` runs one model seed; `WEFT_MUNK_STEPS` the
//! model's steps per seed (default 3000); `WEFT_MUNK_MS` the race's run
//! time (default 5000 ms).

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use weft::{Db, MemtableKind, Options, ReadOptions, WriteBatch, WriteOptions};

/// Waits until `cond` holds on the stats, polling (munks are loaded by the
/// job pool, which looks a few times a second).
fn wait_for(db: &Db, what: &str, cond: impl Fn(&weft::Stats) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let st = db.stats();
        if cond(&st) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {:?}",
            st.munks
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn check_all(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, ctx: &str) {
    for (k, v) in model {
        assert_eq!(
            db.get(k).unwrap().as_deref(),
            Some(v.as_slice()),
            "{ctx}: get {}",
            show(k)
        );
    }
    let got: Vec<(Vec<u8>, Vec<u8>)> = db
        .range::<Vec<u8>, _>(..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_pairs_eq(&got, &want, ctx);
    let back: Vec<(Vec<u8>, Vec<u8>)> = db
        .range::<Vec<u8>, _>(..)
        .unwrap()
        .rev()
        .map(|r| r.unwrap())
        .collect();
    let want_back: Vec<(Vec<u8>, Vec<u8>)> = want.into_iter().rev().collect();
    assert_pairs_eq(&back, &want_back, &format!("{ctx} (reverse)"));
}

#[test]
fn a_munk_serves_reads_and_follows_flushes_and_merges() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .write_buffer_size(64 << 10)
        .min_blob_size(64)
        .munk_cache_size(16 << 20)
        .munk_min_heat(0);
    let db = Db::open(dir.path(), opts).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..2000u32 {
        // Small values inline, large ones logged in the WAL.
        let v = if i % 3 == 0 {
            vec![b'x'; 300]
        } else {
            format!("v{i}").into_bytes()
        };
        let mut v = v;
        v.extend_from_slice(&i.to_le_bytes());
        db.put(key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    for i in (0..2000u32).step_by(7) {
        db.delete(key(i)).unwrap();
        model.remove(&key(i));
    }
    db.flush().unwrap();
    db.compact().unwrap();
    wait_for(&db, "a munk", |st| st.munks.munks == 1);
    let hits = db.stats().munks.hits;
    check_all(&db, &model, "loaded");
    let st = db.stats();
    assert!(
        st.munks.hits >= hits + model.len() as u64,
        "gets did not read the munk: {:?}",
        st.munks
    );
    assert!(st.munks.bytes > 0 && st.munks.resident_bytes >= st.munks.bytes);

    // Newer versions, flushed into tables the munk does not hold yet: they
    // must win over it, then be folded in.
    for round in 0..6u32 {
        for i in (round..2000).step_by(5) {
            let v = format!("r{round}-{i}").into_bytes();
            db.put(key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        db.delete(key(round * 11)).unwrap();
        model.remove(&key(round * 11));
        db.flush().unwrap();
        check_all(&db, &model, &format!("after flush {round}"));
    }
    wait_for(&db, "a rebalance", |st| st.munks.rebalances > 0);
    check_all(&db, &model, "rebalanced");

    // A merge rewrites every table the munk stands for: it stays.
    let relabels = db.stats().munks.relabels;
    db.compact().unwrap();
    let st = db.stats();
    assert_eq!(st.munks.munks, 1, "{:?}", st.munks);
    assert!(
        st.munks.relabels > relabels,
        "the merge dropped the munk: {:?}",
        st.munks
    );
    let hits = st.munks.hits;
    check_all(&db, &model, "after compaction");
    assert!(
        db.stats().munks.hits > hits,
        "reads after the merge missed the munk"
    );

    // Snapshots: a version the munk may have dropped must not be needed.
    let snap = db.snapshot();
    let frozen = model.clone();
    for i in 0..500u32 {
        db.put(key(i), b"later").unwrap();
        model.insert(key(i), b"later".to_vec());
    }
    db.flush().unwrap();
    wait_for(&db, "another rebalance", |st| st.munks.rebalances > 1);
    let ro = ReadOptions::new().snapshot(&snap);
    for (k, v) in &frozen {
        assert_eq!(
            db.get_opt(k, &ro).unwrap().as_deref(),
            Some(v.as_slice()),
            "snapshot get {}",
            show(k)
        );
    }
    let got = scan_cursor(&db, &ro);
    let want: Vec<_> = frozen.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_pairs_eq(&got, &want, "snapshot scan");
    check_all(&db, &model, "latest beside the snapshot");
    drop(snap);

    // Munks are memory only: a reopen starts without and loads again.
    db.close().unwrap();
    let db = Db::open(
        dir.path(),
        Options::default()
            .munk_cache_size(16 << 20)
            .munk_min_heat(0),
    )
    .unwrap();
    check_all(&db, &model, "reopened");
    wait_for(&db, "a munk after reopen", |st| st.munks.munks == 1);
    check_all(&db, &model, "reopened, munk loaded");
}

/// A partition read much more than the one holding the only munk the
/// budget allows takes its place; one barely hotter does not.
#[test]
fn a_hotter_partition_takes_the_munk_of_a_colder_one() {
    let dir = tempfile::tempdir().unwrap();
    // Two partitions of about 40 KiB (split at 64 KiB), a budget for one
    // munk.
    let opts = Options::default()
        .write_buffer_size(32 << 10)
        .partition_size(64 << 10)
        .munk_cache_size(96 << 10)
        .munk_min_heat(64);
    let db = Db::open(dir.path(), opts).unwrap();
    for i in 0..1600u32 {
        db.put(key(i), [b'v'; 40]).unwrap();
    }
    db.flush().unwrap();
    db.compact().unwrap();
    wait_for(&db, "a split", |st| st.partitions.len() >= 2);
    let parts = db.stats().partitions;
    let first_upper = parts[0].upper.clone().unwrap();
    let in_first = |k: &[u8]| k < first_upper.as_slice();
    let (a, b) = (key(0), key(1599));
    assert!(in_first(&a) && !in_first(&b));
    let read = |k: &[u8], n: usize| {
        for _ in 0..n {
            db.get(k).unwrap().unwrap();
        }
    };
    read(&a, 20_000);
    wait_for(&db, "the first partition's munk", |st| st.munks.munks == 1);
    // About as hot: no swap.
    read(&b, 20_000);
    std::thread::sleep(Duration::from_millis(600));
    let st = db.stats();
    assert_eq!(
        (st.munks.munks, st.munks.evictions),
        (1, 0),
        "{:?}",
        st.munks
    );
    // Far hotter: it takes the budget.
    read(&b, 80_000);
    wait_for(&db, "the swap", |st| {
        st.munks.evictions == 1 && st.munks.loads == 2
    });
    let hits = db.stats().munks.hits;
    read(&b, 100);
    assert!(
        db.stats().munks.hits >= hits + 100,
        "the hot key is not read from its munk"
    );
}

/// Gets of a munk'd partition neither read nor fill the row cache (EvenDB
/// keeps it for munk-less ranges); they still see every write.
#[test]
fn the_row_cache_leaves_munked_partitions_alone() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .munk_cache_size(16 << 20)
        .row_cache_size(4 << 20)
        .munk_min_heat(0);
    let db = Db::open(dir.path(), opts).unwrap();
    for i in 0..500u32 {
        db.put(key(i), format!("v{i}")).unwrap();
    }
    db.flush().unwrap();
    db.compact().unwrap();
    wait_for(&db, "a munk", |st| st.munks.munks == 1);
    for i in 0..500u32 {
        assert_eq!(db.get(key(i)).unwrap(), Some(format!("v{i}").into_bytes()));
    }
    let st = db.stats();
    assert_eq!(st.row_cache.fills, 0, "{:?}", st.row_cache);
    assert!(st.munks.hits >= 500, "{:?}", st.munks);
    db.put(key(7), b"new").unwrap();
    db.flush().unwrap();
    assert_eq!(db.get(key(7)).unwrap().as_deref(), Some(&b"new"[..]));
}

/// With munks off nothing is loaded and no munk counter moves.
#[test]
fn munks_off_load_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default().munk_min_heat(0)).unwrap();
    for i in 0..100u32 {
        db.put(key(i), b"v").unwrap();
    }
    db.flush().unwrap();
    for i in 0..100u32 {
        db.get(key(i)).unwrap();
    }
    std::thread::sleep(Duration::from_millis(600));
    let st = db.stats();
    assert_eq!(st.munks, weft::MunkStats::default());
}

const GROUPS: u32 = 40;
const GROUP_KEYS: u32 = 12;

fn group_key(g: u32, i: u32) -> Vec<u8> {
    format!("g{g:03}/{i:02}").into_bytes()
}

/// Every key of group `g` at one moment: all must hold one generation.
fn check_group(pairs: &[(Vec<u8>, Vec<u8>)], g: u32, ctx: &str) {
    assert_eq!(
        pairs.len(),
        GROUP_KEYS as usize,
        "{ctx}: group {g} has {} keys",
        pairs.len()
    );
    let first = &pairs[0].1[..8];
    for (k, v) in pairs {
        assert_eq!(&v[..8], first, "{ctx}: group {g} torn at {}", show(k));
    }
}

#[test]
fn munks_race_writes_scans_and_snapshots() {
    let run_ms = env_usize("WEFT_MUNK_MS", 5000) as u64;
    let dir = tempfile::tempdir().unwrap();
    // Small partitions, a budget for a few of them, eager loads: munks come
    // and go all the time.
    let opts = tiny_options(MemtableKind::default())
        .partition_size(16 << 10)
        .munk_cache_size(12 << 10)
        .munk_min_heat(0);
    let db = Db::open(dir.path(), opts).unwrap();
    let write_group = |db: &Db, g: u32, generation: u64| {
        let mut b = WriteBatch::new();
        for i in 0..GROUP_KEYS {
            let mut v = generation.to_be_bytes().to_vec();
            // Some values separated (min_blob_size 48), most inline.
            let pad = if (g + i).is_multiple_of(4) { 120 } else { 24 };
            v.extend(std::iter::repeat_n(b'.', pad));
            b.put(group_key(g, i), v);
        }
        db.write(b, &WriteOptions::new()).unwrap();
    };
    for g in 0..GROUPS {
        write_group(&db, g, 0);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let generation = Arc::new(AtomicU64::new(1));
    let checks = Arc::new(AtomicU64::new(0));
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let (db, stop, generation) = (&db, &stop, &generation);
            s.spawn(move || {
                let mut rng = rng(w);
                while !stop.load(Ordering::Relaxed) {
                    let g = rng.gen_range(0..GROUPS);
                    write_group(db, g, generation.fetch_add(1, Ordering::Relaxed));
                    if rng.gen_ratio(1, 200) {
                        db.flush().unwrap();
                    }
                }
            });
        }
        for r in 0..2u64 {
            let (db, stop, checks) = (&db, &stop, &checks);
            s.spawn(move || {
                let mut rng = rng(100 + r);
                let started = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    // Reads go to a window of groups that moves on every
                    // 1.5 s: the hot partitions change, so munks of
                    // cooled ones are evicted for the newly hot.
                    let window = (started.elapsed().as_millis() / 1500) as u32 * 7;
                    let g = (window + rng.gen_range(0..4)) % GROUPS;
                    if rng.gen_bool(0.5) {
                        // An atomic scan of one group.
                        let lo = group_key(g, 0);
                        let hi = group_key(g + 1, 0);
                        let pairs: Vec<_> = db.range(lo..hi).unwrap().map(|x| x.unwrap()).collect();
                        check_group(&pairs, g, "scan");
                    } else {
                        // Gets at one snapshot.
                        let snap = db.snapshot();
                        let ro = ReadOptions::new().snapshot(&snap);
                        let pairs: Vec<_> = (0..GROUP_KEYS)
                            .map(|i| {
                                (
                                    group_key(g, i),
                                    db.get_opt(group_key(g, i), &ro).unwrap().unwrap(),
                                )
                            })
                            .collect();
                        check_group(&pairs, g, "snapshot gets");
                    }
                    checks.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        std::thread::sleep(Duration::from_millis(run_ms));
        stop.store(true, Ordering::Relaxed);
    });
    let st = db.stats();
    eprintln!(
        "race: checks={} munks={:?} partitions={}",
        checks.load(Ordering::Relaxed),
        st.munks,
        st.partitions.len()
    );
    assert!(
        st.partitions.len() > 2,
        "the store never split: {}",
        st.partitions.len()
    );
    assert!(
        st.munks.loads > 0,
        "no munk was ever loaded: {:?}",
        st.munks
    );
    // Writers rewrite every group all the time, so a get mostly finds its
    // key in a memtable or a newer table first: scans or gets, some read
    // must have gone through a munk.
    assert!(
        st.munks.hits + st.munks.scans > 0,
        "no read went through a munk: {:?}",
        st.munks
    );
    assert!(
        st.munks.rebalances + st.munks.relabels > 0,
        "munks never followed a flush or merge: {:?}",
        st.munks
    );
    for g in 0..GROUPS {
        let pairs: Vec<_> = db
            .range(group_key(g, 0)..group_key(g + 1, 0))
            .unwrap()
            .map(|x| x.unwrap())
            .collect();
        check_group(&pairs, g, "final");
    }
}

#[test]
fn model_with_munks() {
    let steps = env_usize("WEFT_MUNK_STEPS", 3000);
    for seed in seeds(&[7, 8]) {
        run_model(seed, steps);
    }
}

fn run_model(seed: u64, steps: usize) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rng(seed);
    let budget = if rng.gen_bool(0.5) { 1 << 20 } else { 24 << 10 };
    // The row cache beside munks (it serves only partitions without one).
    let rows = if rng.gen_bool(0.5) { 64 << 10 } else { 0 };
    // Partitions larger than the tiny options' (fewer splits, which drop
    // munks), so munks live long enough to be read, rebalanced and kept.
    let opts = tiny_options(MemtableKind::default())
        .partition_size(64 << 10)
        .munk_cache_size(budget)
        .row_cache_size(rows)
        .munk_min_heat(0);
    let mut db = Some(Db::open(dir.path(), opts.clone()).unwrap());
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut snaps: Vec<(weft::Snapshot, Model)> = Vec::new();
    // Munk loads, hits, and rebalances + relabels, over every session.
    let mut totals = (0, 0, 0);
    let k = |rng: &mut StdRng| format!("m{:04}", rng.gen_range(0..2000)).into_bytes();
    for step in 0..steps {
        let d = db.as_ref().unwrap();
        let ctx = format!("seed {seed} step {step}");
        match rng.gen_range(0..100) {
            0..=34 => {
                let key = k(&mut rng);
                let mut v = format!("{step}:").into_bytes();
                let n = if rng.gen_ratio(1, 4) { 100 } else { 5 };
                v.extend(std::iter::repeat_n(b'v', n));
                d.put(&key, &v).unwrap();
                model.insert(key, v);
            }
            35..=44 => {
                let key = k(&mut rng);
                d.delete(&key).unwrap();
                model.remove(&key);
            }
            45..=49 => {
                let mut b = WriteBatch::new();
                for _ in 0..rng.gen_range(1..6) {
                    let key = k(&mut rng);
                    if rng.gen_bool(0.7) {
                        let v = format!("b{step}").into_bytes();
                        b.put(&key, &v);
                        model.insert(key, v);
                    } else {
                        b.delete(&key);
                        model.remove(&key);
                    }
                }
                d.write(b, &WriteOptions::new()).unwrap();
            }
            50..=74 => {
                let key = k(&mut rng);
                match snaps.is_empty() || rng.gen_bool(0.6) {
                    true => assert_eq!(
                        d.get(&key).unwrap(),
                        model.get(&key).cloned(),
                        "{ctx}: get {}",
                        show(&key)
                    ),
                    false => {
                        let (s, m) = &snaps[rng.gen_range(0..snaps.len())];
                        let ro = ReadOptions::new().snapshot(s);
                        assert_eq!(
                            d.get_opt(&key, &ro).unwrap(),
                            m.get(&key).cloned(),
                            "{ctx}: snapshot get {}",
                            show(&key)
                        );
                    }
                }
            }
            75..=84 => {
                let lo = k(&mut rng);
                let hi = k(&mut rng);
                let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
                let (got, want): (Vec<_>, Vec<_>) = match snaps.is_empty() || rng.gen_bool(0.6) {
                    true => (
                        d.range(lo.clone()..hi.clone())
                            .unwrap()
                            .map(|x| x.unwrap())
                            .collect(),
                        model
                            .range(lo..hi)
                            .map(|(a, b)| (a.clone(), b.clone()))
                            .collect(),
                    ),
                    false => {
                        let (s, m) = &snaps[rng.gen_range(0..snaps.len())];
                        let ro = ReadOptions::new()
                            .snapshot(s)
                            .lower_bound(lo.clone())
                            .upper_bound(hi.clone());
                        (
                            scan_cursor(d, &ro),
                            m.range(lo..hi)
                                .map(|(a, b)| (a.clone(), b.clone()))
                                .collect(),
                        )
                    }
                };
                assert_pairs_eq(&got, &want, &format!("{ctx}: scan"));
            }
            85..=88 => {
                if snaps.len() < 4 {
                    snaps.push((d.snapshot(), model.clone()));
                } else {
                    snaps.remove(rng.gen_range(0..snaps.len()));
                }
            }
            89..=93 => d.flush().unwrap(),
            94 | 95 => d.compact().unwrap(),
            96 | 97 => {
                // Give the pool a moment to load and rebalance munks.
                std::thread::sleep(Duration::from_millis(30));
            }
            _ => {
                snaps.clear();
                let st = d.stats().munks;
                totals = (
                    totals.0 + st.loads,
                    totals.1 + st.hits,
                    totals.2 + st.rebalances + st.relabels,
                );
                db.take().unwrap().close().unwrap();
                db = Some(Db::open(dir.path(), opts.clone()).unwrap());
            }
        }
    }
    let d = db.as_ref().unwrap();
    let got = scan_all(d);
    let want: Vec<_> = model.iter().map(|(a, b)| (a.clone(), b.clone())).collect();
    assert_pairs_eq(&got, &want, &format!("seed {seed}: final"));
    let st = d.stats().munks;
    let totals = (
        totals.0 + st.loads,
        totals.1 + st.hits,
        totals.2 + st.rebalances + st.relabels,
    );
    eprintln!(
        "model seed={seed} budget={budget}: munk loads, hits, rebalances+relabels: {totals:?}"
    );
    assert!(
        totals.0 > 0 && totals.1 > 0,
        "munks were never loaded or read: {totals:?}"
    );
}
