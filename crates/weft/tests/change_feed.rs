//! The change feed (`Db::changes_from`, holds; `docs/DESIGN.md` §1.5.1),
//! checked against a model: the list of every batch written through the
//! WAL, with the sequences it was given.
//!
//! - `the_feed_is_exactly_the_committed_batches`: random multi-op batches
//!   (deletes, range deletes, values large and small, with `values_in_wal` on and off,
//!   `disable_wal` gaps, `sync` or not), flushes, merges, reopens and
//!   releases; the feed from the hold is exactly the batches written
//!   since, from any sequence the feed still holds; releases and dropping
//!   the hold let the WALs go; reads below what is held are
//!   `ChangesReleased`; holds survive reopen.
//! - `after_a_power_cut_the_feed_is_the_recovered_prefix`: the power goes
//!   out at a random file operation (`FaultFs`); after reopen the feed
//!   from the hold is the history's first `n` batches, `n` being what
//!   recovery kept (every synced batch among them), nothing past it.
//! - `a_tailing_reader_sees_every_logged_batch_in_order`: writers on
//!   several threads, a reader on another tailing with the visible limit
//!   and releasing as it goes: sequences strictly increase, every logged
//!   batch arrives whole, and the only gaps are the `disable_wal` ones.

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::*;
use weft::internals::fs::{FaultFs, FileSystem};
use weft::{ChangeGroup, ChangeOp, Db, Error, FeedLimit, Options, WriteBatch, WriteOptions};

/// One batch written through the WAL: its first sequence and operations.
type Logged = (u64, Vec<ChangeOp>);

fn random_ops(rng: &mut StdRng, large: bool) -> Vec<ChangeOp> {
    let n = rng.gen_range(1..=5);
    (0..n)
        .map(|_| {
            let key = format!("k{:04}", rng.gen_range(0..300)).into_bytes();
            if rng.gen_ratio(1, 40) {
                let end = format!("k{:04}", rng.gen_range(0..300)).into_bytes();
                let (start, end) = if key <= end { (key, end) } else { (end, key) };
                ChangeOp::DeleteRange { start, end }
            } else if rng.gen_ratio(1, 5) {
                ChangeOp::Delete { key }
            } else {
                let len = match large && rng.gen_ratio(1, 3) {
                    true => rng.gen_range(300..3000),
                    false => rng.gen_range(0..40),
                };
                let value = (0..len).map(|_| rng.gen::<u8>()).collect();
                ChangeOp::Put { key, value }
            }
        })
        .collect()
}

fn to_batch(ops: &[ChangeOp]) -> WriteBatch {
    let mut b = WriteBatch::new();
    for op in ops {
        match op {
            ChangeOp::Put { key, value } => b.put(key, value),
            ChangeOp::Delete { key } => b.delete(key),
            ChangeOp::DeleteRange { start, end } => b.delete_range(start, end),
        };
    }
    b
}

/// Everything the feed yields from `from`, up to `limit`.
fn read_feed(db: &Db, from: u64, limit: FeedLimit) -> weft::Result<Vec<Logged>> {
    db.changes_from(from, limit)?
        .map(|g| g.map(|g: ChangeGroup| (g.first_seq(), g.into_ops())))
        .collect()
}

/// The batches of `history` from sequence `from` on (the first one cut to
/// its operations from `from`, as the feed cuts it).
fn expected_from(history: &[Logged], from: u64) -> Vec<Logged> {
    history
        .iter()
        .filter(|(first, ops)| first + ops.len() as u64 > from)
        .map(|(first, ops)| {
            let skip = from.saturating_sub(*first) as usize;
            (first + skip as u64, ops[skip..].to_vec())
        })
        .collect()
}

fn assert_feed(got: &[Logged], want: &[Logged], ctx: &str) {
    if got != want {
        let seqs = |v: &[Logged]| v.iter().map(|(s, o)| (*s, o.len())).collect::<Vec<_>>();
        panic!(
            "{ctx}: the feed differs from the batches written\n got (first seq, ops): {:?}\nwant: {:?}",
            seqs(got),
            seqs(want)
        );
    }
}

fn wal_count(dir: &Path) -> usize {
    wal_files(dir).len()
}

/// Waits until `dir` holds `n` WALs: a flush deletes its WAL just after
/// `Db::flush` sees it installed.
fn wait_for_wals(dir: &Path, n: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while wal_count(dir) != n {
        assert!(
            std::time::Instant::now() < deadline,
            "{} WALs, not {n}: {:?}",
            wal_count(dir),
            wal_files(dir)
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Each hold's name and sequence.
fn holds(db: &Db) -> Vec<(String, u64)> {
    (db.stats().feed_holds.into_iter())
        .map(|h| (h.name, h.sequence))
        .collect()
}

fn options(rng: &mut StdRng, values_in_wal: bool) -> Options {
    Options::default()
        .write_buffer_size(rng.gen_range(16..64) << 10)
        .min_blob_size(256)
        .values_in_wal(values_in_wal)
        .table_size(32 << 10)
        .unsorted_limit(64 << 10)
        .gc_min_garbage_bytes(8 << 10)
        .gc_garbage_ratio(0.3)
}

fn feed_test(seed: u64, values_in_wal: bool) {
    let _guard = SeedGuard::new(format!(
        "change_feed seed {seed} values_in_wal={values_in_wal}"
    ));
    let mut rng = rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut db = Db::open(dir.path(), options(&mut rng, values_in_wal)).unwrap();
    db.hold_changes("model", 1).unwrap();
    let mut hold = 1u64;
    let mut history: Vec<Logged> = Vec::new();
    let mut retained_seen = false;
    for step in 0..600 {
        let ctx = format!("seed {seed} step {step}");
        let ops = random_ops(&mut rng, true);
        let unlogged = rng.gen_ratio(1, 8);
        let sync = !unlogged && rng.gen_ratio(1, 6);
        let opts = WriteOptions::new().sync(sync).disable_wal(unlogged);
        db.write(to_batch(&ops), &opts).unwrap();
        // One writer: the visible sequence is this batch's last.
        let last = db.stats().sequence;
        if !unlogged {
            history.push((last + 1 - ops.len() as u64, ops));
        }
        match rng.gen_range(0..60) {
            0..=3 => db.flush().unwrap(),
            4 => db.compact().unwrap(),
            5 | 6 => {
                // A clean reopen: the holds come back as they were.
                let before = holds(&db);
                db.close().unwrap();
                db = Db::open(dir.path(), options(&mut rng, values_in_wal)).unwrap();
                assert_eq!(holds(&db), before, "{ctx}: holds after reopen");
            }
            7..=10 if !history.is_empty() => {
                // Release through the end of a random batch written.
                let i = rng.gen_range(0..history.len());
                let (first, ops) = &history[i];
                let through = first + ops.len() as u64 - 1;
                db.release_changes("model", through).unwrap();
                hold = hold.max(through + 1);
            }
            _ => {}
        }
        retained_seen |= db.stats().feed_retained_bytes > 0;
        if step % 25 == 0 || step == 599 {
            let stats = db.stats();
            let h = &stats.feed_holds;
            assert_eq!(h.len(), 1, "{ctx}");
            assert_eq!(
                (h[0].name.as_str(), h[0].sequence),
                ("model", hold),
                "{ctx}"
            );
            for limit in [FeedLimit::Visible, FeedLimit::Durable] {
                let got = read_feed(&db, hold, limit).unwrap();
                let mut want = expected_from(&history, hold);
                if limit == FeedLimit::Durable {
                    // Up to a sync, flush or the open: a prefix of it.
                    want.truncate(got.len());
                }
                assert_feed(&got, &want, &format!("{ctx}: from the hold, {limit:?}"));
            }
            // From below the hold: what is still held, or ChangesReleased.
            let from = rng.gen_range(0..=hold);
            match read_feed(&db, from, FeedLimit::Visible) {
                Ok(got) => assert_feed(
                    &got,
                    &expected_from(&history, from.max(1)),
                    &format!("{ctx}: from {from}"),
                ),
                Err(Error::ChangesReleased { oldest, requested }) => {
                    assert_eq!(requested, from, "{ctx}");
                    assert!(
                        from < oldest && oldest <= hold,
                        "{ctx}: {from} < {oldest} <= {hold}"
                    );
                }
                Err(e) => panic!("{ctx}: reading from {from}: {e}"),
            }
            // From inside the history, past the hold.
            let from = rng.gen_range(hold..=stats.sequence + 1);
            let got = read_feed(&db, from, FeedLimit::Visible).unwrap();
            assert_feed(
                &got,
                &expected_from(&history, from),
                &format!("{ctx}: from {from}"),
            );
            db.verify_checksums().unwrap();
        }
    }
    assert!(retained_seen, "no WAL was ever retained for the hold");
    // Everything released: the WALs go (each once no table points into it).
    let last = db.stats().sequence;
    db.release_changes("model", last).unwrap();
    db.flush().unwrap();
    assert_eq!(db.stats().feed_retained_bytes, 0);
    let err = read_feed(&db, 1, FeedLimit::Visible).unwrap_err();
    assert!(
        matches!(err, Error::ChangesReleased { requested: 1, oldest } if oldest > 1),
        "{err}"
    );
    if !values_in_wal {
        // The active WAL alone (no WAL is a value log).
        wait_for_wals(dir.path(), 1);
    }
    db.drop_hold("model").unwrap();
    assert!(db.stats().feed_holds.is_empty());
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert!(db.stats().feed_holds.is_empty(), "a dropped hold came back");
}

#[test]
fn the_feed_is_exactly_the_committed_batches() {
    for seed in seeds(&[1, 2, 3]) {
        feed_test(seed, seed % 2 == 0);
        feed_test(seed + 100, seed % 2 == 1);
    }
}

/// Without a hold, a flushed WAL goes, and the feed says so; with one, the
/// WAL stays (also once GC has dropped every value-log reference to it),
/// until the hold is dropped.
#[test]
fn a_hold_keeps_wals_that_would_go_and_dropping_it_lets_them_go() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default().min_blob_size(usize::MAX);
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    db.put("a", "1").unwrap();
    db.flush().unwrap();
    wait_for_wals(dir.path(), 1);
    let err = db.changes_from(1, FeedLimit::Visible).unwrap_err();
    assert!(
        matches!(
            err,
            Error::ChangesReleased {
                requested: 1,
                oldest: 2
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("sequence 1"), "{err}");
    // A hold cannot reach back past what is held either.
    assert!(matches!(
        db.hold_changes("late", 1),
        Err(Error::ChangesReleased { oldest: 2, .. })
    ));
    db.hold_changes("h", 2).unwrap();
    for i in 0..3 {
        db.put(format!("k{i}"), "v").unwrap();
        db.flush().unwrap();
    }
    assert_eq!(wal_count(dir.path()), 4, "three flushed WALs retained");
    assert!(db.stats().feed_holds[0].retained_bytes > 0);
    // Release the first: its WAL goes at once (the edit is written first).
    db.release_changes("h", 2).unwrap();
    assert_eq!(wal_count(dir.path()), 3);
    // The hold survives a reopen, and so do the WALs it pins.
    db.close().unwrap();
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    let seqs: Vec<u64> = read_feed(&db, 3, FeedLimit::Durable)
        .unwrap()
        .iter()
        .map(|(s, _)| *s)
        .collect();
    assert_eq!(seqs, [3, 4]);
    db.drop_hold("h").unwrap();
    assert_eq!(wal_count(dir.path()), 1, "{:?}", wal_files(dir.path()));
    assert!(matches!(db.drop_hold("h"), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        db.release_changes("nobody", 1),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        db.hold_changes("", 1),
        Err(Error::InvalidArgument(_))
    ));
}

/// With values in the WAL, GC moves the live values out of a kept WAL and
/// drops its last reference; a hold keeps it, feed-only, and the feed
/// still reads its values.
#[test]
fn a_wal_gc_lets_go_of_stays_while_held() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .values_in_wal(true)
        .min_blob_size(100)
        .gc_min_garbage_bytes(1)
        .gc_garbage_ratio(0.01);
    let db = Db::open(dir.path(), opts).unwrap();
    db.hold_changes("h", 1).unwrap();
    let value = vec![7u8; 4000];
    let mut history = Vec::new();
    for round in 0..6u8 {
        for k in 0..20u8 {
            let mut v = value.clone();
            v[0] = round;
            db.put([k], &v).unwrap();
            history.push((
                db.stats().sequence,
                vec![ChangeOp::Put {
                    key: vec![k],
                    value: v,
                }],
            ));
        }
        db.compact().unwrap();
    }
    // Overwritten values are garbage; GC collects the oldest WALs.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while db.stats().gcs == 0 {
        assert!(std::time::Instant::now() < deadline, "no GC ran");
        db.compact().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_feed(
        &read_feed(&db, 1, FeedLimit::Durable).unwrap(),
        &history,
        "after GC",
    );
    db.verify_checksums().unwrap();
    db.drop_hold("h").unwrap();
}

/// The power goes out at a random file operation while batches are
/// written (some synced), memtables flushed and the hold released; after
/// the reopen the feed from the hold is exactly what recovery kept.
#[test]
fn after_a_power_cut_the_feed_is_the_recovered_prefix() {
    const MARKER: &[u8] = b"\xffmarker";
    let cycles = env_usize("WEFT_CHANGE_FEED_CYCLES", 25);
    for seed in seeds(&[21, 22]) {
        let _guard = SeedGuard::new(format!("change_feed power cut seed {seed}"));
        let mut rng = rng(seed);
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new(seed);
        let open = |rng: &mut StdRng| {
            let in_wal = rng.gen_bool(0.5);
            let opts = options(rng, in_wal).file_system(Arc::clone(&fs) as Arc<dyn FileSystem>);
            Db::open(dir.path(), opts).unwrap()
        };
        let mut db = open(&mut rng);
        db.hold_changes("replica", 1).unwrap();
        // Every batch written, as (first sequence, ops); its index is in
        // the marker it writes.
        let mut history: Vec<Logged> = Vec::new();
        let mut hold = 1;
        let mut attempted = 0;
        for cycle in 0..cycles {
            let ctx = format!("seed {seed} cycle {cycle}");
            let mut durable = history.len();
            let batches = rng.gen_range(20..200);
            let cut_after = rng.gen_range(0..batches);
            for b in 0..batches {
                if b == cut_after {
                    fs.cut_power_at(fs.ops() + rng.gen_range(1..=40));
                }
                let mut ops = random_ops(&mut rng, true);
                let index = history.len();
                ops.push(ChangeOp::Put {
                    key: MARKER.to_vec(),
                    value: index.to_string().into_bytes(),
                });
                let sync = rng.gen_ratio(1, 5);
                // One writer: the batch takes the sequences after the
                // visible one. A failed write may still have reached the
                // disk: it belongs to the history all the same.
                let first = db.stats().sequence + 1;
                let batch = to_batch(&ops);
                history.push((first, ops));
                if db.write(batch, &WriteOptions::new().sync(sync)).is_err() {
                    break; // the power is out
                }
                if sync {
                    durable = history.len();
                }
                match rng.gen_range(0..30) {
                    0 if db.flush().is_ok() => durable = history.len(),
                    1 if db.sync_wal().is_ok() => durable = history.len(),
                    2 => {
                        let (first, ops) = &history[rng.gen_range(0..history.len())];
                        let through = first + ops.len() as u64 - 1;
                        if through >= hold {
                            match db.release_changes("replica", through) {
                                Ok(()) => hold = through + 1,
                                // Its edit may have reached the disk.
                                Err(_) => attempted = attempted.max(through + 1),
                            }
                        }
                    }
                    _ => {}
                }
            }
            fs.cut_power_now();
            let _ = db.close();
            fs.apply_power_loss().unwrap();
            db = open(&mut rng);
            let kept = match db.get(MARKER).unwrap() {
                Some(v) => std::str::from_utf8(&v).unwrap().parse::<usize>().unwrap() + 1,
                None => 0,
            };
            assert!(
                kept >= durable && kept <= history.len(),
                "{ctx}: recovered {kept} batches, {durable} durable of {}",
                history.len()
            );
            history.truncate(kept);
            // The hold may be back (a release not yet written), never
            // ahead of the releases made (or tried as the power went).
            let stats = db.stats();
            let now = stats.feed_holds[0].sequence;
            let bound = hold.max(attempted);
            assert!(
                now <= bound,
                "{ctx}: hold at {now}, was released to {bound}"
            );
            hold = now;
            attempted = 0;
            let want = expected_from(&history, hold);
            for limit in [FeedLimit::Durable, FeedLimit::Visible] {
                let got = read_feed(&db, hold, limit)
                    .unwrap_or_else(|e| panic!("{ctx}: the feed from {hold}: {e}"));
                assert_feed(&got, &want, &format!("{ctx}: from the hold, {limit:?}"));
            }
            db.verify_checksums().unwrap();
        }
    }
}

/// Writers on several threads, some batches unlogged; a reader tails the
/// feed with the visible limit and releases what it read.
#[test]
fn a_tailing_reader_sees_every_logged_batch_in_order() {
    const WRITERS: u64 = 3;
    const BATCHES: u64 = 400;
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .write_buffer_size(32 << 10)
        .min_blob_size(200)
        .values_in_wal(true);
    let db = Db::open(dir.path(), opts).unwrap();
    db.hold_changes("tail", 1).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let unlogged_ops = Arc::new(AtomicU64::new(0));
    let reader = {
        let db = db.clone();
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let mut next = 1u64;
            let mut seen: BTreeMap<(u64, u64), u64> = BTreeMap::new();
            let mut ops_seen = 0u64;
            loop {
                let finished = done.load(Ordering::Acquire);
                for g in db.changes_from(next, FeedLimit::Visible).unwrap() {
                    let g = g.unwrap();
                    assert!(g.first_seq() >= next, "{} after {next}", g.first_seq());
                    next = g.last_seq() + 1;
                    ops_seen += g.ops().len() as u64;
                    // A batch arrives whole: its ops are writer w's batch
                    // i, numbered 0..n, each value saying n.
                    let key = g.ops()[0].key().to_vec();
                    let name = std::str::from_utf8(&key).unwrap();
                    let mut parts = name.split('-');
                    let w: u64 = parts.next().unwrap()[1..].parse().unwrap();
                    let i: u64 = parts.next().unwrap().parse().unwrap();
                    for (j, op) in g.ops().iter().enumerate() {
                        let want_key = format!("w{w}-{i}-{j}");
                        let ChangeOp::Put { key, value } = op else {
                            panic!("{op:?}")
                        };
                        assert_eq!(key, want_key.as_bytes());
                        assert_eq!(value[0] as usize, g.ops().len());
                    }
                    let prev = seen.insert((w, i), g.first_seq());
                    assert!(prev.is_none(), "batch {w}-{i} twice");
                }
                if next > 1 {
                    db.release_changes("tail", next - 1).unwrap();
                }
                if finished {
                    return (next, ops_seen, seen.len() as u64);
                }
                std::thread::yield_now();
            }
        })
    };
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let db = db.clone();
            let unlogged_ops = Arc::clone(&unlogged_ops);
            std::thread::spawn(move || {
                let mut rng = rng(w);
                let mut logged = 0;
                for i in 0..BATCHES {
                    let n = rng.gen_range(1..=4usize);
                    let large = rng.gen_ratio(1, 4);
                    let mut b = WriteBatch::new();
                    for j in 0..n {
                        let mut value = vec![0u8; if large { 500 } else { 20 }];
                        value[0] = n as u8;
                        b.put(format!("w{w}-{i}-{j}"), value);
                    }
                    let unlogged = rng.gen_ratio(1, 6);
                    let opts = WriteOptions::new().disable_wal(unlogged);
                    db.write(b, &opts).unwrap();
                    if unlogged {
                        unlogged_ops.fetch_add(n as u64, Ordering::Relaxed);
                    } else {
                        logged += 1;
                    }
                }
                logged
            })
        })
        .collect();
    let logged: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    done.store(true, Ordering::Release);
    let (next, ops_seen, batches_seen) = reader.join().unwrap();
    let last = db.stats().sequence;
    assert_eq!(batches_seen, logged, "every logged batch, once");
    // The sequences not seen are exactly the unlogged batches' operations.
    assert_eq!(ops_seen + unlogged_ops.load(Ordering::Relaxed), last);
    assert!(next <= last + 1);
}

/// The feed read through `ChangeOp::keyspace_op` rebuilds every keyspace:
/// replaying it by keyspace id, with keys as handles take them, gives each
/// live keyspace's content, and a default range delete never reaches into
/// another keyspace (it is cut around the reserved span before logging).
#[test]
fn keyspace_ops_replay_every_keyspace() {
    use weft::KeyspaceOp;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let mut rng = rng(39);
    let names = ["a", "b", "c"];
    for step in 0..400 {
        let name = names[rng.gen_range(0..names.len())];
        match rng.gen_range(0..20) {
            0 => {
                if db.keyspaces().iter().any(|n| n == name) {
                    db.drop_keyspace(name).unwrap();
                }
            }
            1 => db.delete_range("k", "l").unwrap(),
            2..=5 => {
                let ks = db.keyspace(name).unwrap();
                let mut txn = db.transaction();
                txn.put_in(
                    &ks,
                    format!("k{:02}", rng.gen_range(0..20)),
                    format!("{step}"),
                )
                .unwrap();
                txn.delete(format!("k{:02}", rng.gen_range(0..20))).unwrap();
                txn.commit().unwrap();
            }
            6..=8 => {
                let ks = db.keyspace(name).unwrap();
                let a = rng.gen_range(0..20);
                ks.delete_range(format!("k{a:02}"), format!("k{:02}", a + 5))
                    .unwrap();
            }
            _ => {
                let ks = db.keyspace(name).unwrap();
                let mut batch = WriteBatch::new();
                batch
                    .put_in(
                        &ks,
                        format!("k{:02}", rng.gen_range(0..20)),
                        format!("{step}"),
                    )
                    .put(format!("k{:02}", rng.gen_range(0..20)), format!("{step}"));
                db.write(batch, &WriteOptions::default()).unwrap();
            }
        }
    }
    // Replay by keyspace id.
    let mut by_id: BTreeMap<u32, BTreeMap<Vec<u8>, Vec<u8>>> = BTreeMap::new();
    let mut names_by_id: BTreeMap<u32, String> = BTreeMap::new();
    let (mut created, mut dropped) = (0, 0);
    for group in db.changes_from(1, FeedLimit::Visible).unwrap() {
        for op in group.unwrap().ops() {
            match op.keyspace_op() {
                KeyspaceOp::Put {
                    keyspace,
                    key,
                    value,
                } => {
                    by_id
                        .entry(keyspace)
                        .or_default()
                        .insert(key.to_vec(), value.to_vec());
                }
                KeyspaceOp::Delete { keyspace, key } => {
                    by_id.entry(keyspace).or_default().remove(key);
                }
                KeyspaceOp::DeleteRange {
                    keyspace,
                    start,
                    end,
                } => {
                    by_id.entry(keyspace).or_default().retain(|k, _| {
                        k.as_slice() < start || end.is_some_and(|e| k.as_slice() >= e)
                    });
                }
                KeyspaceOp::Created { name, id, .. } => {
                    created += 1;
                    names_by_id.insert(id, name.to_string());
                }
                KeyspaceOp::Dropped { name } => {
                    dropped += 1;
                    names_by_id.retain(|_, n| n != name);
                }
                KeyspaceOp::Registry => {}
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    assert!(
        created > 3 && dropped > 0,
        "created {created}, dropped {dropped}"
    );
    names_by_id.insert(0, "default".into());
    let live: Vec<String> = names_by_id.values().cloned().collect();
    let mut listed = db.keyspaces();
    listed.sort();
    let mut live_sorted = live.clone();
    live_sorted.sort();
    assert_eq!(live_sorted, listed);
    for (id, name) in &names_by_id {
        let ks = db.keyspace(name).unwrap();
        assert_eq!(ks.id(), *id);
        assert_eq!(db.keyspace_name(*id).as_deref(), Some(name.as_str()));
        let got: Vec<(Vec<u8>, Vec<u8>)> = ks
            .range::<&[u8], _>(..)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> = by_id
            .get(id)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        assert_eq!(
            got, want,
            "keyspace {name} (id {id}) replayed from the feed"
        );
    }
}

/// `ChangeFeed::next_feed`, the tailing read that resumes inside a WAL:
/// random batches written between reads (small memtables, so reads cross
/// rotations and flushes, a hold keeping the flushed WALs), each next feed
/// yields exactly the batches written since the last one, none twice,
/// none skipped, whole; and it resumes where the last feed stopped
/// (a read of one new batch in a long WAL is as fast as the batch).
#[test]
fn next_feed_resumes_where_the_last_one_stopped() {
    for (seed, values_in_wal) in [(1u64, false), (2, true)] {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = StdRng::seed_from_u64(seed);
        let db = Db::open(dir.path(), options(&mut rng, values_in_wal)).unwrap();
        db.hold_changes("tail", 1).unwrap();
        let mut history: Vec<Logged> = Vec::new();
        let mut prev: Option<weft::ChangeFeed> = None;
        let mut got: Vec<Logged> = Vec::new();
        for round in 0..300 {
            for _ in 0..rng.gen_range(0..6) {
                let ops = random_ops(&mut rng, true);
                let first = db.visible_sequence() + 1;
                db.write(to_batch(&ops), &WriteOptions::default()).unwrap();
                history.push((first, ops));
            }
            if round % 97 == 96 {
                db.flush().unwrap();
            }
            let mut feed = match &prev {
                Some(p) => p.next_feed(FeedLimit::Visible).unwrap(),
                None => db.changes_from(1, FeedLimit::Visible).unwrap(),
            };
            for g in feed.by_ref() {
                let g = g.unwrap();
                got.push((g.first_seq(), g.into_ops()));
            }
            assert_eq!(feed.next_seq(), db.visible_sequence() + 1, "round {round}");
            assert_feed(&got, &history, &format!("seed {seed}, round {round}"));
            prev = Some(feed);
        }
    }
}
