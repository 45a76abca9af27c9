//! Concurrency tests: writer and reader threads on one `Db` with a tiny write
//! buffer, so memtable rotation, flushes and merges happen during the run.
//!
//! * snapshot reads are repeatable, and point reads agree with scans;
//! * an iterator is an atomic scan (pairs written in one batch are seen
//!   together, with the same generation, even when the scan pauses);
//! * sequences become visible in order (a reader that sees `counter = i`
//!   sees every earlier write of that writer, and nothing two steps ahead);
//! * an acknowledged write is visible to any read that starts after it;
//! * sync writes from many threads (group commit) all land;
//! * flush/compact/verify running concurrently with writers lose nothing.
//!
//! Knobs: `WEFT_SEED` (writers' random choices), `WEFT_CONC_OPS` (writes per
//! writer thread, default 1500).

// A test (or benchmark) fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use weft::{Db, MemtableKind, ReadOptions, WriteBatch, WriteOptions};

/// Counts finished writer threads, also when one panics, so readers stop.
struct Done<'a>(&'a AtomicUsize);
impl Drop for Done<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn ops_per_writer() -> usize {
    env_usize("WEFT_CONC_OPS", 1500)
}

fn pad(rng: &mut StdRng) -> String {
    "p".repeat(rng.gen_range(20..120))
}

fn for_each_kind_and_seed(name: &str, f: impl Fn(u64, MemtableKind)) {
    install_panic_counter();
    for seed in seeds(&[7]) {
        for kind in kinds() {
            let _g = SeedGuard::new(format!(
                "{name} seed={seed} kind={kind}; replay with WEFT_SEED={seed} (thread timing is not replayable)"
            ));
            let before = panic_count();
            f(seed, kind);
            assert_eq!(
                panic_count(),
                before,
                "{name}: an engine (non-test) thread panicked"
            );
        }
    }
}

fn assert_flushed(db: &Db, what: &str) {
    let st = db.stats();
    eprintln!(
        "{what}: flushes={} merges={} stalls={} slowdowns={}",
        st.flushes, st.merges, st.write_stalls, st.write_slowdowns
    );
    assert!(
        st.flushes > 0,
        "{what}: no flush happened during the run; the test did not cover rotation"
    );
}

#[test]
fn snapshot_reads_are_repeatable() {
    for_each_kind_and_seed("snapshot_reads_are_repeatable", |seed, kind| {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), tiny_options(kind)).unwrap();
        let keys: Vec<Vec<u8>> = (0..64).map(|i| format!("key{i:02}").into_bytes()).collect();
        let writers = 3;
        let done = AtomicUsize::new(0);
        let checks = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for w in 0..writers {
                let (db, keys, done) = (&db, &keys, &done);
                s.spawn(move || {
                    mark_test_thread();
                    let _d = Done(done);
                    let mut rng = rng(seed ^ (w as u64 + 1));
                    for n in 0..ops_per_writer() {
                        let k = &keys[rng.gen_range(0..keys.len())];
                        match rng.gen_range(0..10) {
                            0 => db.delete(k).unwrap(),
                            1 => {
                                let mut b = WriteBatch::new();
                                for _ in 0..4 {
                                    let k = &keys[rng.gen_range(0..keys.len())];
                                    b.put(k, format!("w{w}-{n}-b-{}", pad(&mut rng)));
                                }
                                db.write(b, &WriteOptions::new()).unwrap();
                            }
                            _ => db.put(k, format!("w{w}-{n}-{}", pad(&mut rng))).unwrap(),
                        }
                    }
                });
            }
            for _ in 0..2 {
                let (db, keys, done, checks) = (&db, &keys, &done, &checks);
                s.spawn(move || {
                    mark_test_thread();
                    while done.load(Ordering::SeqCst) < writers {
                        let snap = db.snapshot();
                        let ro = ReadOptions::new().snapshot(&snap);
                        let read = || -> Vec<Option<Vec<u8>>> {
                            keys.iter().map(|k| db.get_opt(k, &ro).unwrap()).collect()
                        };
                        let scan = || -> Vec<(Vec<u8>, Vec<u8>)> {
                            db.range_opt::<&[u8], _>(.., &ro)
                                .unwrap()
                                .map(|r| r.unwrap())
                                .collect()
                        };
                        let first = read();
                        let scan1 = scan();
                        // Scans and point reads at one snapshot agree.
                        let from_gets: Vec<(Vec<u8>, Vec<u8>)> = keys
                            .iter()
                            .zip(&first)
                            .filter_map(|(k, v)| v.clone().map(|v| (k.clone(), v)))
                            .collect();
                        assert_pairs_eq(&scan1, &from_gets, "scan vs gets at one snapshot");
                        std::thread::sleep(Duration::from_millis(2));
                        let second = read();
                        assert_eq!(first, second, "reads at one snapshot changed over time");
                        let scan2 = scan_cursor(db, &ro);
                        assert_pairs_eq(&scan2, &scan1, "second scan at one snapshot");
                        checks.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        assert!(
            checks.load(Ordering::Relaxed) > 0,
            "readers never ran a check"
        );
        assert_flushed(&db, "snapshot_reads_are_repeatable");
    });
}

#[test]
fn iterators_are_atomic_scans() {
    for_each_kind_and_seed("iterators_are_atomic_scans", |seed, kind| {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), tiny_options(kind)).unwrap();
        let pairs = 50u64;
        let writers = 3;
        let done = AtomicUsize::new(0);
        let scans = AtomicUsize::new(0);
        // a_* keys all sort before b_* keys, so a scan reaches b_i long
        // after a_i: only a true snapshot keeps them consistent.
        let a = |i: u64| format!("a_{i:03}").into_bytes();
        let b = |i: u64| format!("b_{i:03}").into_bytes();
        std::thread::scope(|s| {
            for w in 0..writers {
                let (db, done) = (&db, &done);
                s.spawn(move || {
                    mark_test_thread();
                    let _d = Done(done);
                    let mut rng = rng(seed ^ (0xab + w as u64));
                    for n in 0..ops_per_writer() {
                        let i = rng.gen_range(0..pairs);
                        let mut batch = WriteBatch::new();
                        if rng.gen_ratio(1, 8) {
                            batch.delete(a(i)).delete(b(i));
                        } else {
                            let gen = format!("w{w}g{n}-{}", pad(&mut rng));
                            // Alternate the order inside the batch.
                            if n % 2 == 0 {
                                batch.put(a(i), &gen).put(b(i), &gen);
                            } else {
                                batch.put(b(i), &gen).put(a(i), &gen);
                            }
                        }
                        db.write(batch, &WriteOptions::new()).unwrap();
                    }
                });
            }
            for r in 0..2 {
                let (db, done, scans) = (&db, &done, &scans);
                s.spawn(move || {
                    mark_test_thread();
                    let mut turn = 0u64;
                    while done.load(Ordering::SeqCst) < writers {
                        turn += 1;
                        let mode = (turn + r) % 4;
                        let mut seen: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
                        match mode {
                            0 | 1 => {
                                let mut it = db.iter(&ReadOptions::new()).unwrap();
                                if mode == 0 {
                                    it.seek_to_first().unwrap();
                                } else {
                                    it.seek_to_last().unwrap();
                                }
                                let mut steps = 0;
                                while it.valid() {
                                    seen.push((it.key().to_vec(), it.value().to_vec()));
                                    steps += 1;
                                    if steps == pairs as usize / 2 {
                                        // Pause mid-scan while writers run.
                                        std::thread::sleep(Duration::from_millis(3));
                                    }
                                    if mode == 0 {
                                        it.next().unwrap();
                                    } else {
                                        it.prev().unwrap();
                                    }
                                }
                            }
                            2 => {
                                let mut range = db.range::<&[u8], _>(..).unwrap();
                                if let Some(first) = range.next() {
                                    seen.push(first.unwrap());
                                }
                                std::thread::sleep(Duration::from_millis(3));
                                seen.extend(range.map(|x| x.unwrap()));
                            }
                            _ => {
                                let range = db.range::<&[u8], _>(..).unwrap();
                                std::thread::sleep(Duration::from_millis(3));
                                seen.extend(range.rev().map(|x| x.unwrap()));
                            }
                        }
                        let map: std::collections::BTreeMap<_, _> = seen.iter().cloned().collect();
                        assert_eq!(
                            map.len(),
                            seen.len(),
                            "scan mode {mode} returned a key twice"
                        );
                        for i in 0..pairs {
                            let (va, vb) = (map.get(&a(i)), map.get(&b(i)));
                            assert_eq!(
                                va.map(|v| show(v)),
                                vb.map(|v| show(v)),
                                "scan mode {mode} is not atomic: pair {i} differs"
                            );
                        }
                        // Point reads at one snapshot are atomic too.
                        let snap = db.snapshot();
                        let ro = ReadOptions::new().snapshot(&snap);
                        for i in 0..pairs {
                            let va = db.get_opt(a(i), &ro).unwrap();
                            let vb = db.get_opt(b(i), &ro).unwrap();
                            assert_eq!(va, vb, "gets at one snapshot: pair {i} differs");
                        }
                        scans.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        assert!(scans.load(Ordering::Relaxed) > 0, "readers never scanned");
        assert_flushed(&db, "iterators_are_atomic_scans");
    });
}

#[test]
fn sequences_become_visible_in_order() {
    for_each_kind_and_seed("sequences_become_visible_in_order", |seed, kind| {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), tiny_options(kind)).unwrap();
        let writers = 3usize;
        let done = AtomicUsize::new(0);
        let acked: Vec<AtomicU64> = (0..writers).map(|_| AtomicU64::new(u64::MAX)).collect();
        let item = |w: usize, i: u64| format!("s{w}_{i:06}").into_bytes();
        let counter = |w: usize| format!("c{w}").into_bytes();
        let parse = |v: &[u8]| -> u64 { std::str::from_utf8(v).unwrap().parse().unwrap() };
        let n_ops = ops_per_writer() as u64;
        std::thread::scope(|s| {
            for w in 0..writers {
                let (db, done, acked) = (&db, &done, &acked);
                s.spawn(move || {
                    mark_test_thread();
                    let _d = Done(done);
                    let mut rng = rng(seed ^ (0x5e9 + w as u64));
                    for i in 0..n_ops {
                        db.put(item(w, i), format!("{i}-{}", pad(&mut rng)))
                            .unwrap();
                        acked[w].store(i, Ordering::SeqCst);
                        db.put(counter(w), i.to_string()).unwrap();
                    }
                });
            }
            for r in 0..2 {
                let (db, done, acked) = (&db, &done, &acked);
                s.spawn(move || {
                    mark_test_thread();
                    while done.load(Ordering::SeqCst) < writers {
                        // (1) Acknowledged writes are visible to later reads.
                        for (w, ack) in acked.iter().enumerate() {
                            let i = ack.load(Ordering::SeqCst);
                            if i != u64::MAX {
                                assert!(
                                    db.get(item(w, i)).unwrap().is_some(),
                                    "write {i} of writer {w} was acknowledged but a later get misses it"
                                );
                            }
                        }
                        // (2) Within one atomic scan: counter = c implies
                        // items 0..=c present and nothing past c + 1.
                        let all: Vec<(Vec<u8>, Vec<u8>)> = if r == 0 {
                            scan_all(db)
                        } else {
                            scan_cursor(db, &ReadOptions::new())
                        };
                        let map: std::collections::BTreeMap<_, _> = all.into_iter().collect();
                        for w in 0..writers {
                            let c = map.get(&counter(w)).map(|v| parse(v));
                            let present: Vec<u64> = map
                                .range(item(w, 0)..=item(w, n_ops))
                                .map(|(k, _)| {
                                    let s = std::str::from_utf8(k).unwrap();
                                    s[s.find('_').unwrap() + 1..].parse().unwrap()
                                })
                                .collect();
                            let expect_min = c.map_or(0, |c| c + 1);
                            let n = present.len() as u64;
                            assert!(
                                present.iter().enumerate().all(|(j, &x)| x == j as u64),
                                "writer {w}: scan shows a gap in its items (counter {c:?}): \
                                 a later write is visible before an earlier one"
                            );
                            assert!(
                                n >= expect_min && n <= expect_min + 1,
                                "writer {w}: counter = {c:?} but the same scan shows {n} items"
                            );
                        }
                        // (3) Monotonic point reads: after seeing counter c,
                        // item c is visible.
                        for w in 0..writers {
                            if let Some(c) = db.get(counter(w)).unwrap() {
                                let c = parse(&c);
                                assert!(
                                    db.get(item(w, c)).unwrap().is_some(),
                                    "writer {w}: saw counter {c} but item {c} is not visible afterwards"
                                );
                            }
                        }
                    }
                });
            }
        });
        for w in 0..writers {
            assert_eq!(
                db.get(counter(w)).unwrap(),
                Some((n_ops - 1).to_string().into_bytes())
            );
        }
        assert_flushed(&db, "sequences_become_visible_in_order");
    });
}

#[test]
fn sync_group_commit_from_many_threads() {
    for_each_kind_and_seed("sync_group_commit_from_many_threads", |_seed, kind| {
        // Default (large) write buffer: no background flush may race the
        // crash image taken below.
        let opts = weft::Options::default().memtable(kind);
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        let threads = 8;
        let per_thread = 40;
        std::thread::scope(|s| {
            for t in 0..threads {
                let db = &db;
                s.spawn(move || {
                    mark_test_thread();
                    let sync = WriteOptions::new().sync(true);
                    for i in 0..per_thread {
                        let k = format!("t{t}-{i:03}");
                        if i % 5 == 4 {
                            let mut b = WriteBatch::new();
                            b.put(&k, format!("v{t}.{i}")).put(format!("{k}-x"), "x");
                            db.write(b, &sync).unwrap();
                        } else {
                            db.put_opt(&k, format!("v{t}.{i}"), &sync).unwrap();
                        }
                    }
                });
            }
        });
        let check = |db: &Db, what: &str| {
            for t in 0..threads {
                for i in 0..per_thread {
                    let k = format!("t{t}-{i:03}");
                    assert_eq!(
                        db.get(&k).unwrap(),
                        Some(format!("v{t}.{i}").into_bytes()),
                        "{what}: {k}"
                    );
                    if i % 5 == 4 {
                        assert_eq!(
                            db.get(format!("{k}-x")).unwrap().as_deref(),
                            Some(&b"x"[..])
                        );
                    }
                }
            }
        };
        check(&db, "after concurrent sync writes");
        // Synced writes are in the WAL: a crash image has them all.
        let image = tempfile::tempdir().unwrap();
        copy_dir(dir.path(), image.path());
        drop(db);
        let db = Db::open(image.path(), opts).unwrap();
        check(&db, "crash image after concurrent sync writes");
    });
}

#[test]
fn maintenance_concurrent_with_writers_loses_nothing() {
    for_each_kind_and_seed("maintenance_concurrent_with_writers", |seed, kind| {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), tiny_options(kind)).unwrap();
        let writers = 3usize;
        let done = AtomicUsize::new(0);
        let stop_maint = AtomicBool::new(false);
        let models: Vec<Model> = std::thread::scope(|s| {
            let maint = {
                let (db, done, stop) = (&db, &done, &stop_maint);
                s.spawn(move || {
                    mark_test_thread();
                    let mut n = 0u64;
                    while done.load(Ordering::SeqCst) < writers && !stop.load(Ordering::SeqCst) {
                        match n % 3 {
                            0 => db.flush().unwrap(),
                            1 => db.compact().unwrap(),
                            _ => {
                                db.verify_checksums().unwrap();
                            }
                        }
                        n += 1;
                    }
                    n
                })
            };
            let handles: Vec<_> = (0..writers)
                .map(|w| {
                    let (db, done) = (&db, &done);
                    s.spawn(move || {
                        mark_test_thread();
                        let _d = Done(done);
                        let mut rng = rng(seed ^ (0x3a1 + w as u64));
                        let mut model = Model::new();
                        for n in 0..ops_per_writer() {
                            // Disjoint key spaces: each writer's model is exact.
                            let k = format!("w{w}k{:03}", rng.gen_range(0..150)).into_bytes();
                            if rng.gen_ratio(1, 5) {
                                db.delete(&k).unwrap();
                                model.remove(&k);
                            } else {
                                let v = format!("{n}-{}", pad(&mut rng)).into_bytes();
                                db.put(&k, &v).unwrap();
                                model.insert(k, v);
                            }
                        }
                        model
                    })
                })
                .collect();
            let models: Vec<Model> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            stop_maint.store(true, Ordering::SeqCst);
            let rounds = maint.join().unwrap();
            eprintln!("maintenance rounds during the run: {rounds}");
            models
        });
        let mut all = Model::new();
        for m in models {
            all.extend(m);
        }
        assert_db_eq(&db, &all, "after writers raced flush/compact/verify");
        assert_flushed(&db, "maintenance_concurrent_with_writers");
        db.close().unwrap();
        let db = Db::open(dir.path(), tiny_options(kind)).unwrap();
        assert_db_eq(&db, &all, "after reopen");
    });
}

/// Large batches from several threads at once: groups whose members carry
/// many operations are inserted into the memtable by the members' own
/// threads in parallel. Every batch must land whole, with all its versions
/// at consecutive sequences (a reader never sees part of one), and a batch
/// acknowledged before a snapshot must be entirely visible in it.
#[test]
fn large_batches_insert_in_parallel_and_stay_atomic() {
    for kind in kinds() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), weft::Options::default().memtable(kind)).unwrap();
        let writers = 4;
        let batches = 150;
        let per_batch = 64; // above the parallel-insert threshold
        let done = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for w in 0..writers {
                let (db, done) = (&db, &done);
                s.spawn(move || {
                    mark_test_thread();
                    let _d = Done(done);
                    for b in 0..batches {
                        let mut batch = WriteBatch::new();
                        for j in 0..per_batch {
                            batch.put(format!("w{w}/k{j:03}"), format!("{b}"));
                        }
                        db.write(batch, &WriteOptions::new().sync(b % 10 == 0))
                            .unwrap();
                    }
                });
            }
            let (db, done) = (&db, &done);
            s.spawn(move || {
                mark_test_thread();
                while done.load(Ordering::SeqCst) < writers {
                    let snap = db.snapshot();
                    let ro = ReadOptions::new().snapshot(&snap);
                    for w in 0..writers {
                        // All keys of writer w show one generation: no torn batch.
                        let gens: std::collections::BTreeSet<Vec<u8>> = db
                            .range_opt(format!("w{w}/")..format!("w{w}0"), &ro)
                            .unwrap()
                            .map(|r| r.unwrap().1)
                            .collect();
                        assert!(gens.len() <= 1, "writer {w}: torn batch visible: {gens:?}");
                    }
                }
            });
        });
        for w in 0..writers {
            let got: Vec<_> = db
                .range(format!("w{w}/")..format!("w{w}0"))
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            assert_eq!(got.len(), per_batch, "writer {w}: keys missing");
            assert!(got
                .iter()
                .all(|(_, v)| v == format!("{}", batches - 1).as_bytes()));
        }
        assert_eq!(
            db.stats().sequence,
            (writers * batches * per_batch) as u64,
            "every op got exactly one sequence"
        );
    }
}

/// `verify_checksums` reads the manifest and the active WAL while they are
/// appended to. It must stop at what their writers had written when it
/// listed them: scanning on, it meets records being stored at that moment
/// (a header still zero, the payload already behind it) and would report
/// damage that is not there.
#[test]
fn checksums_verify_while_writers_append() {
    let dir = tempfile::tempdir().unwrap();
    let opts = weft::Options::default()
        .write_buffer_size(256 << 10)
        .unsorted_limit(1 << 20);
    let db = Db::open(dir.path(), opts).unwrap();
    let writers_done = AtomicUsize::new(0);
    let writers = 2;
    let checks = std::thread::scope(|s| {
        for w in 0..writers {
            let (db, done) = (&db, &writers_done);
            s.spawn(move || {
                mark_test_thread();
                let _d = Done(done);
                let mut rng = rng(0x5eed + w as u64);
                for n in 0..200_000 {
                    let k = format!("w{w}k{:05}", rng.gen_range(0..5000));
                    db.put(k, format!("{n}-{}", pad(&mut rng))).unwrap();
                }
            });
        }
        let mut checks = 0u64;
        while writers_done.load(Ordering::SeqCst) < writers {
            if let Err(e) = db.verify_checksums() {
                panic!("verify_checksums during writes, check {checks}: {e}");
            }
            checks += 1;
        }
        checks
    });
    eprintln!("checks while writing: {checks}");
    assert!(checks > 0);
    db.verify_checksums().unwrap();
}

/// Many more threads than cores (32), each mixing puts, deletes, batches,
/// gets, seeks and long iterators on one store whose memtable rotates
/// every few writes, for a bounded number of operations:
///
/// * each thread owns a key range and keeps a `BTreeMap` model of it; its
///   gets and its scans of its own range must equal the model exactly (an
///   acknowledged write is visible to the writer's next read, however the
///   inserts of the other 31 threads interleave with its own);
/// * every batch also writes the thread's twin keys `t/a` and `t/b` with
///   one value: an iterator (paused now and then, so it spans rotations and
///   flushes) and a snapshot's gets must never see the twins differ, and the
///   value it sees for a thread never goes backwards between the scans one
///   reader makes (visibility in order, atomic batches).
///
/// The write path publishes the writes of concurrent writers out of order
/// of completion; with more threads than cores a writer is often
/// descheduled between its WAL append and its insert.
#[test]
fn many_more_threads_than_cores_against_a_model() {
    use std::collections::BTreeMap;
    const THREADS: usize = 32;
    let ops = env_usize("WEFT_CONC_STRESS_OPS", 150);
    for_each_kind_and_seed("many_more_threads_than_cores", |seed, kind| {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), tiny_options(kind)).unwrap();
        let key = |t: usize, k: u32| format!("k{t:02}/{k:03}").into_bytes();
        let twin = |t: usize, which: &str| format!("t{t:02}/{which}").into_bytes();
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let db = &db;
                s.spawn(move || {
                    mark_test_thread();
                    let mut rng = rng(seed ^ (0x3200 + t as u64));
                    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
                    // Highest twin value seen per thread by this reader.
                    let mut seen = [0u64; THREADS];
                    let mut generation = 0u64;
                    for i in 0..ops {
                        match rng.gen_range(0..100) {
                            0..=29 => {
                                let k = key(t, rng.gen_range(0..40));
                                let v = format!("{t}-{i}-{}", pad(&mut rng)).into_bytes();
                                db.put(&k, &v).unwrap();
                                model.insert(k, v);
                            }
                            30..=39 => {
                                let k = key(t, rng.gen_range(0..40));
                                db.delete(&k).unwrap();
                                model.remove(&k);
                            }
                            40..=59 => {
                                generation += 1;
                                let mut b = WriteBatch::new();
                                for _ in 0..rng.gen_range(1..6) {
                                    let k = key(t, rng.gen_range(0..40));
                                    let v = format!("b{generation}-{}", pad(&mut rng)).into_bytes();
                                    b.put(&k, &v);
                                    model.insert(k, v);
                                }
                                let g = generation.to_string();
                                b.put(twin(t, "a"), &g).put(twin(t, "b"), &g);
                                db.write(b, &WriteOptions::default()).unwrap();
                            }
                            60..=74 => {
                                let k = key(t, rng.gen_range(0..40));
                                assert_eq!(
                                    db.get(&k).unwrap(),
                                    model.get(&k).cloned(),
                                    "thread {t} get"
                                );
                            }
                            75..=89 => {
                                // A seek into its own range, a few nexts.
                                let from = key(t, rng.gen_range(0..40));
                                let mut it = db.iter(&ReadOptions::new()).unwrap();
                                it.seek(&from).unwrap();
                                for (mk, mv) in model.range(from..).take(5) {
                                    assert!(it.valid(), "thread {t}: scan ended before {mk:?}");
                                    assert_eq!(
                                        (it.key(), it.value()),
                                        (&mk[..], &mv[..]),
                                        "thread {t} scan"
                                    );
                                    it.next().unwrap();
                                }
                            }
                            _ => {
                                // A long iterator over every thread's twins,
                                // paused halfway, and a snapshot's gets.
                                let snap = db.snapshot();
                                let mut it = db
                                    .iter(&ReadOptions::new().lower_bound("t").upper_bound("u"))
                                    .unwrap();
                                it.seek_to_first().unwrap();
                                let mut values = BTreeMap::new();
                                let mut n = 0;
                                while it.valid() {
                                    values.insert(it.key().to_vec(), it.value().to_vec());
                                    n += 1;
                                    if n == THREADS {
                                        std::thread::sleep(Duration::from_micros(200));
                                    }
                                    it.next().unwrap();
                                }
                                let at = ReadOptions::new().snapshot(&snap);
                                for (u, high) in seen.iter_mut().enumerate() {
                                    let a = values.get(&twin(u, "a"));
                                    assert_eq!(
                                        a,
                                        values.get(&twin(u, "b")),
                                        "thread {u}'s twins differ in a scan"
                                    );
                                    let ga = db.get_opt(twin(u, "a"), &at).unwrap();
                                    assert_eq!(
                                        ga,
                                        db.get_opt(twin(u, "b"), &at).unwrap(),
                                        "thread {u}'s twins differ at a snapshot"
                                    );
                                    let v: u64 = a.map_or(0, |v| {
                                        std::str::from_utf8(v).unwrap().parse().unwrap()
                                    });
                                    assert!(
                                        v >= *high,
                                        "thread {u}'s batches went back from {high} to {v}"
                                    );
                                    *high = v;
                                }
                            }
                        }
                    }
                    // Its whole range, once more, against the model.
                    let got: Vec<(Vec<u8>, Vec<u8>)> = db
                        .prefix(format!("k{t:02}/"))
                        .unwrap()
                        .map(|r| r.unwrap())
                        .collect();
                    let want: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
                    assert_eq!(got, want, "thread {t}'s range at the end");
                });
            }
        });
        assert_flushed(&db, "many_more_threads_than_cores");
        db.verify_checksums().unwrap();
    });
}
