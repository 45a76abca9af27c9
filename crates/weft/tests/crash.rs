//! Crash tests with real processes killed by SIGKILL.
//!
//! The test binary re-executes itself: the parent runs
//! `current_exe() --exact child_writer --nocapture --test-threads=1` with
//! `WEFT_CRASH_DIR`, `WEFT_CRASH_SEED`, `WEFT_CRASH_START` and
//! `WEFT_CRASH_KIND` set. The `child_writer` test does nothing when
//! `WEFT_CRASH_DIR` is absent (a normal `cargo test` run).
//!
//! The child writes deterministic batches (puts, deletes and now and then a
//! range delete; batch `i` is a function of the seed and `i` only, and sets
//! `__last = i`) and prints `ack i` after each `write`
//! returns. The parent kills it after a random delay, reopens the directory
//! and checks that the database holds exactly batches `0..n` for some
//! `n > highest ack` (every acknowledged write survives a process crash, and
//! recovery yields a prefix of the history, never part of a batch). The next
//! cycle resumes writing at batch `n` in the same directory, so later cycles
//! crash a database that has already been recovered, possibly more than once.
//!
//! Knobs: `WEFT_SEED` (default one fixed seed), `WEFT_CRASH_CYCLES` (kill
//! cycles per memtable kind, default 40).

// A test (or benchmark) fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use weft::{Db, Error, MemtableKind, Options, WriteBatch, WriteOptions};

const KEY_SPACE: u64 = 200;

fn crash_options(kind: MemtableKind) -> Options {
    tiny_options(kind)
}

/// Batch `i` of the history of `seed`, and whether it is written with sync.
fn batch_ops(seed: u64, i: u64) -> (Vec<Op>, bool) {
    let mut rng = StdRng::seed_from_u64(seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let n = rng.gen_range(1..=8);
    let mut ops = Vec::with_capacity(n + 1);
    for j in 0..n {
        let at = rng.gen_range(0..KEY_SPACE);
        let key = format!("k{at:03}").into_bytes();
        if rng.gen_ratio(1, 50) {
            let end = format!("k{:03}", at + rng.gen_range(0..20)).into_bytes();
            ops.push(Op::DeleteRange(key, end));
        } else if rng.gen_ratio(1, 4) {
            ops.push(Op::Delete(key));
        } else {
            let mut v = format!("b{i}.{j}:").into_bytes();
            let pad = rng.gen_range(0..120);
            v.extend((0..pad).map(|_| b'a' + rng.gen_range(0..26u8)));
            ops.push(Op::Put(key, v));
        }
    }
    ops.push(Op::Put(b"__last".to_vec(), i.to_string().into_bytes()));
    let sync = rng.gen_ratio(1, 8);
    (ops, sync)
}

fn env_of(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The child side of [`crash_cycles`]: writes batches from `WEFT_CRASH_START`
/// on, acknowledging each on stdout, until killed.
#[test]
fn child_writer() {
    let Some(dir) = env_of("WEFT_CRASH_DIR") else {
        return;
    };
    let seed: u64 = env_of("WEFT_CRASH_SEED").unwrap().parse().unwrap();
    let start: u64 = env_of("WEFT_CRASH_START").unwrap().parse().unwrap();
    let kind: MemtableKind = env_of("WEFT_CRASH_KIND").unwrap().parse().unwrap();
    let db = Db::open(&dir, crash_options(kind)).expect("child: open");
    let mut out = std::io::stdout();
    // libtest prints "test child_writer ... " without a newline first.
    writeln!(out, "\nready").unwrap();
    out.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut i = start;
    while Instant::now() < deadline {
        let (ops, sync) = batch_ops(seed, i);
        let mut b = WriteBatch::new();
        add_ops(&mut b, &ops);
        db.write(b, &WriteOptions::new().sync(sync))
            .expect("child: write");
        writeln!(out, "ack {i}").unwrap();
        out.flush().unwrap();
        i += 1;
    }
    // Never reached in a normal run: the parent kills us long before.
    eprintln!("child_writer: parent never killed us; exiting");
}

fn crash_cycles(seed: u64, kind: MemtableKind, cycles: usize) {
    let _guard = SeedGuard::new(format!(
        "crash_cycles seed={seed} kind={kind}; replay with WEFT_SEED={seed}"
    ));
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let mut rng = rng(seed);
    let mut model = Model::new();
    let mut applied: u64 = 0; // batches 0..applied are in `model`
    let mut total_acks = 0u64;
    for cycle in 0..cycles {
        let start = applied;
        let stderr_path = logs.path().join(format!("child-{cycle}.stderr"));
        let (mut child, rx, reader) = spawn_child(
            "child_writer",
            &[
                ("WEFT_CRASH_DIR", dir.path().display().to_string()),
                ("WEFT_CRASH_SEED", seed.to_string()),
                ("WEFT_CRASH_START", start.to_string()),
                ("WEFT_CRASH_KIND", kind.name().to_string()),
            ],
            &stderr_path,
        );
        // Half the cycles count the delay from spawn, so some kills land
        // during open/recovery; the others from "ready", so they land
        // mid-write.
        let from_ready = rng.gen_bool(0.5);
        let delay = Duration::from_millis(rng.gen_range(10..=300));
        let mut lines = Vec::new();
        if from_ready && !wait_for_line(&rx, "ready", Duration::from_secs(60), &mut lines) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "cycle {cycle}: child never became ready (open failed after a crash?)\nchild stderr:\n{}",
                child_stderr(&stderr_path)
            );
        }
        std::thread::sleep(delay);
        if let Some(status) = child.try_wait().expect("try_wait") {
            panic!(
                "cycle {cycle}: child exited on its own ({status}) before the kill\nchild stderr:\n{}",
                child_stderr(&stderr_path)
            );
        }
        child.kill().expect("kill child"); // SIGKILL on Unix
        child.wait().expect("wait child");
        reader.join().expect("reader thread");
        lines.extend(rx.try_iter());
        let acks: Vec<u64> = lines
            .iter()
            .filter_map(|l| l.strip_prefix("ack "))
            .map(|n| n.trim().parse().expect("ack line"))
            .collect();
        for w in acks.windows(2) {
            assert_eq!(w[1], w[0] + 1, "cycle {cycle}: acks out of order");
        }
        if let Some(&first) = acks.first() {
            assert_eq!(
                first, start,
                "cycle {cycle}: child started at the wrong batch"
            );
        }
        let max_ack = acks.last().copied();
        total_acks += acks.len() as u64;

        // Recover and check.
        let db = Db::open(dir.path(), crash_options(kind)).unwrap_or_else(|e| {
            panic!(
                "cycle {cycle}: open after kill -9 failed: {e}\nchild stderr:\n{}",
                child_stderr(&stderr_path)
            )
        });
        let n = match db.get(b"__last").expect("get __last") {
            Some(v) => {
                String::from_utf8(v)
                    .expect("__last utf8")
                    .parse::<u64>()
                    .expect("__last number")
                    + 1
            }
            None => 0,
        };
        let min_n = max_ack.map_or(start, |a| a + 1);
        assert!(
            n >= min_n,
            "cycle {cycle}: lost acknowledged writes: recovered through batch {n} (exclusive) \
             but batch {} was acknowledged (cycle started at {start})",
            min_n - 1
        );
        // The child writes one batch at a time: at most one unacknowledged
        // batch can have reached the WAL.
        let max_n = max_ack.map_or(start + 1, |a| a + 2);
        assert!(
            n <= max_n,
            "cycle {cycle}: recovered batch {} which was never written (highest ack {max_ack:?})",
            n - 1
        );
        while applied < n {
            apply_ops(&mut model, &batch_ops(seed, applied).0);
            applied += 1;
        }
        let ctx = format!(
            "cycle {cycle}: state after recovery must be exactly batches 0..{n} \
             (acks {}..={max_ack:?}, delay {delay:?} from {})",
            start,
            if from_ready { "ready" } else { "spawn" }
        );
        assert_db_eq(&db, &model, &ctx);
        let mut rev: Vec<_> = db
            .range::<&[u8], _>(..)
            .expect("range")
            .rev()
            .map(|r| r.expect("reverse scan"))
            .collect();
        rev.reverse();
        assert_pairs_eq(&rev, &model_vec(&model), &format!("{ctx} (reverse scan)"));
        db.verify_checksums()
            .unwrap_or_else(|e| panic!("cycle {cycle}: verify_checksums after recovery: {e}"));
        if rng.gen_bool(0.5) {
            db.close().expect("close");
        } else {
            drop(db);
        }
    }
    eprintln!(
        "crash seed={seed} kind={kind}: {cycles} kills, {applied} batches recovered, {total_acks} acks, {} tables at the end",
        sst_files(dir.path()).len()
    );
    assert!(
        applied > 0,
        "no batch was ever recovered: the test wrote nothing"
    );
    assert!(
        !sst_files(dir.path()).is_empty(),
        "no table was ever written: crashes never hit a database with flushed data"
    );
}

#[test]
fn crash_cycles_recover_a_prefix() {
    let cycles = env_usize("WEFT_CRASH_CYCLES", 40);
    for seed in seeds(&[0xC0FF_EE00_1234]) {
        for kind in kinds() {
            crash_cycles(seed, kind, cycles);
        }
    }
}

// ----------------------------------------------------------------- lock ----

/// Child side of [`lock_released_after_kill9`]: holds the database open.
#[test]
fn child_locker() {
    let Some(dir) = env_of("WEFT_LOCK_DIR") else {
        return;
    };
    let db = Db::open(&dir, Options::default()).expect("child: open");
    db.put(b"held", b"by child").expect("child: put");
    let mut out = std::io::stdout();
    writeln!(out, "\nlocked").unwrap();
    out.flush().unwrap();
    std::thread::sleep(Duration::from_secs(60));
    drop(db);
}

fn assert_locked(r: weft::Result<Db>, dir: &Path, ctx: &str) {
    match r {
        Err(Error::Locked { path }) => {
            assert_eq!(
                path.file_name(),
                weft::internals::lock_path(dir).file_name(),
                "{ctx}: Locked names {}",
                path.display()
            );
        }
        Err(e) => panic!("{ctx}: expected Error::Locked, got {e:?}"),
        Ok(_) => panic!("{ctx}: a second open of a held directory succeeded"),
    }
}

#[test]
fn lock_is_exclusive_in_process() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    assert_locked(
        Db::open(dir.path(), Options::default()),
        dir.path(),
        "second open while the first is live",
    );
    // The failed open must not have disturbed the live database.
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    // A clone keeps it open and locked.
    let clone = db.clone();
    drop(db);
    assert_locked(
        Db::open(dir.path(), Options::default()),
        dir.path(),
        "open while a clone is live",
    );
    drop(clone);
    // Dropping the last clone releases the lock.
    let db = Db::open(dir.path(), Options::default()).expect("open after drop");
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    db.close().unwrap();
    // So does close().
    let db = Db::open(dir.path(), Options::default()).expect("open after close");
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

/// Dropping the last handle releases the lock at once even while this
/// process forks children (a child holds a copy of every descriptor until
/// it execs; an flock released only by closing would outlive the drop).
#[test]
fn lock_released_at_drop_while_children_are_spawned() {
    let dir = tempfile::tempdir().unwrap();
    use std::sync::atomic::{AtomicBool, Ordering};
    /// Stops the spawner even when an assertion below panics, so a failure
    /// reports instead of hanging the scope.
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let _ = std::process::Command::new("true").status();
            }
        });
        let _stop = StopOnDrop(&stop);
        for i in 0..300 {
            let db = Db::open(dir.path(), Options::default())
                .unwrap_or_else(|e| panic!("open {i} after the previous drop: {e}"));
            drop(db);
        }
    });
}

#[test]
fn lock_released_after_kill9() {
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let stderr_path = logs.path().join("locker.stderr");
    let (mut child, rx, reader) = spawn_child(
        "child_locker",
        &[("WEFT_LOCK_DIR", dir.path().display().to_string())],
        &stderr_path,
    );
    let mut lines = Vec::new();
    if !wait_for_line(&rx, "locked", Duration::from_secs(60), &mut lines) {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "child never opened the db\nchild stderr:\n{}",
            child_stderr(&stderr_path)
        );
    }
    let r = Db::open(dir.path(), Options::default());
    if !matches!(r, Err(Error::Locked { .. })) {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert_locked(r, dir.path(), "open while another process holds the db");
    child.kill().expect("kill");
    child.wait().expect("wait");
    reader.join().unwrap();
    let db = Db::open(dir.path(), Options::default())
        .expect("open after the holder was killed with SIGKILL");
    assert_eq!(
        db.get(b"held").unwrap().as_deref(),
        Some(&b"by child"[..]),
        "the killed holder's acknowledged write"
    );
}

// ------------------------------------------ write, then wait for kill -9 ----

/// Child side of [`kill_once_written`]: says `written`, then waits to be
/// killed holding `db` open (no close, no flush).
fn written_then_wait_for_kill(db: Db) {
    let mut out = std::io::stdout();
    writeln!(out, "\nwritten").unwrap();
    out.flush().unwrap();
    std::thread::sleep(Duration::from_secs(60));
    drop(db);
}

/// Runs the child test `name` on `dir` (passed in `env`), waits for it to
/// say `written`, and kills it with SIGKILL.
fn kill_once_written(name: &str, env: &str, dir: &Path) {
    kill_once_written_with(name, &[(env, dir.display().to_string())]);
}

/// [`kill_once_written`] with the child's environment in `envs`.
fn kill_once_written_with(name: &str, envs: &[(&str, String)]) {
    let logs = tempfile::tempdir().unwrap();
    let stderr_path = logs.path().join(format!("{name}.stderr"));
    let (mut child, rx, reader) = spawn_child(name, envs, &stderr_path);
    let mut lines = Vec::new();
    let written = wait_for_line(&rx, "written", Duration::from_secs(60), &mut lines);
    child.kill().expect("kill");
    child.wait().expect("wait");
    reader.join().unwrap();
    assert!(
        written,
        "{name} never wrote\nchild stderr:\n{}",
        child_stderr(&stderr_path)
    );
}

// ---------------------------------------------------------- disable_wal ----

/// Child side of [`unlogged_writes_are_lost_logged_ones_kept_after_kill9`].
#[test]
fn child_unlogged_writer() {
    let Some(dir) = env_of("WEFT_UNLOGGED_DIR") else {
        return;
    };
    let db = Db::open(&dir, Options::default()).expect("child: open");
    let unlogged = WriteOptions::new().disable_wal(true);
    db.put(b"a", b"logged").expect("child: put a");
    db.put_opt(b"b", b"unlogged", &unlogged)
        .expect("child: put b");
    db.put_opt(b"c", b"logged, synced", &WriteOptions::new().sync(true))
        .expect("child: put c");
    assert_eq!(db.get(b"b").unwrap().as_deref(), Some(&b"unlogged"[..]));
    written_then_wait_for_kill(db);
}

/// `WriteOptions::disable_wal`: the write is served from the memtable but
/// never logged, so a kill -9 before a flush loses it; the logged writes
/// around it survive.
#[test]
fn unlogged_writes_are_lost_logged_ones_kept_after_kill9() {
    let dir = tempfile::tempdir().unwrap();
    kill_once_written("child_unlogged_writer", "WEFT_UNLOGGED_DIR", dir.path());
    let db = Db::open(dir.path(), Options::default()).expect("reopen");
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"logged"[..]));
    assert_eq!(
        db.get(b"b").unwrap(),
        None,
        "an unlogged write survived kill -9"
    );
    assert_eq!(
        db.get(b"c").unwrap().as_deref(),
        Some(&b"logged, synced"[..])
    );
    // A sync write needs the WAL.
    assert!(matches!(
        db.put_opt(
            b"d",
            b"x",
            &WriteOptions::new().sync(true).disable_wal(true)
        ),
        Err(Error::InvalidArgument(_))
    ));
}

// ---------------------------------------------------- lifetime counters ----

/// Explicit flushes the child of
/// [`lifetime_counters_after_kill9_lose_at_most_what_was_not_saved`] makes.
const CHILD_FLUSHES: u64 = 3;

/// Child side of
/// [`lifetime_counters_after_kill9_lose_at_most_what_was_not_saved`]: one
/// flush of one write, [`CHILD_FLUSHES`] times, an unlogged write left in
/// the memtable, then (if `WEFT_STATS_INTERVAL_MS` is not 0) a wait of many
/// save intervals, and a kill.
#[test]
fn child_stats_worker() {
    let Some(dir) = env_of("WEFT_STATS_DIR") else {
        return;
    };
    let ms: u64 = env_of("WEFT_STATS_INTERVAL_MS").unwrap().parse().unwrap();
    let interval = Duration::from_millis(ms);
    let opts = Options::default().stats_save_interval(interval);
    let db = Db::open(&dir, opts).expect("child: open");
    let round = db.stats().lifetime.opens;
    for i in 0..CHILD_FLUSHES {
        db.put(format!("child{round}-{i}"), b"v")
            .expect("child: put");
        db.flush().expect("child: flush");
    }
    assert_eq!(db.stats().flushes, CHILD_FLUSHES);
    db.put_opt(
        b"child-unlogged",
        b"v",
        &WriteOptions::new().disable_wal(true),
    )
    .expect("child: unlogged put");
    std::thread::sleep(interval * 25);
    written_then_wait_for_kill(db);
}

/// The lifetime counters after kill -9: a child that saved them at an
/// interval loses nothing it counted before its last save (its flushes are
/// all there), a child that saves only at open and close loses exactly what
/// it counted after the open (its flushes are not); the counters never go
/// back, count each open, and count each killed session as unclean.
#[test]
fn lifetime_counters_after_kill9_lose_at_most_what_was_not_saved() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..200u32 {
        db.put(format!("k{i:03}"), b"value").unwrap();
    }
    db.compact().unwrap();
    let clean = db.stats().lifetime;
    db.close().unwrap();
    assert!(clean.flushes >= 1 && clean.merges >= 1, "{clean:?}");
    let child = |interval_ms: u64| {
        kill_once_written_with(
            "child_stats_worker",
            &[
                ("WEFT_STATS_DIR", dir.path().display().to_string()),
                ("WEFT_STATS_INTERVAL_MS", interval_ms.to_string()),
            ],
        )
    };
    let never_back = |before: &weft::LifetimeStats, after: &weft::LifetimeStats| {
        for (name, b, a) in [
            ("flushes", before.flushes, after.flushes),
            ("merges", before.merges, after.merges),
            (
                "user bytes",
                before.user_bytes_written,
                after.user_bytes_written,
            ),
            (
                "wal bytes",
                before.wal_bytes_written,
                after.wal_bytes_written,
            ),
            (
                "manifest bytes",
                before.manifest_bytes_written,
                after.manifest_bytes_written,
            ),
            ("opens", before.opens, after.opens),
        ] {
            assert!(a >= b, "lifetime {name} went back from {b} to {a}");
        }
    };

    // Saved every 10 ms: the kill loses nothing counted before the wait.
    child(10);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let after_first = db.stats().lifetime;
    never_back(&clean, &after_first);
    assert_eq!(after_first.opens, 3, "{after_first:?}");
    assert_eq!(after_first.unclean_closes, 1, "{after_first:?}");
    assert_eq!(after_first.restarts, 0, "{after_first:?}");
    assert_eq!(
        after_first.flushes,
        clean.flushes + CHILD_FLUSHES,
        "the child's flushes were saved before the kill"
    );
    assert_eq!(after_first.merges, clean.merges);
    assert!(after_first.user_bytes_written > clean.user_bytes_written);
    assert_eq!(db.get(b"child-unlogged").unwrap(), None);
    db.close().unwrap();

    // Saved only at open: the kill loses the child's flushes (and nothing
    // before its open), and its data is all there.
    child(0);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let after_second = db.stats().lifetime;
    never_back(&after_first, &after_second);
    assert_eq!(after_second.opens, 5, "{after_second:?}");
    assert_eq!(after_second.unclean_closes, 2, "{after_second:?}");
    assert_eq!(
        after_second.flushes, after_first.flushes,
        "counts made after the last save were kept"
    );
    for i in 0..CHILD_FLUSHES {
        assert_eq!(
            db.get(format!("child4-{i}")).unwrap().as_deref(),
            Some(&b"v"[..]),
            "the second child's flushed write {i}"
        );
    }
}

// ----------------------------------------------------- manual_wal_flush ----

/// Child side of [`manual_wal_flush_keeps_flushed_writes_after_kill9`].
#[test]
fn child_deferred_writer() {
    let Some(dir) = env_of("WEFT_DEFERRED_DIR") else {
        return;
    };
    let db = Db::open(&dir, Options::default().manual_wal_flush(true)).expect("child: open");
    for i in 0..100u32 {
        db.put(format!("flushed{i:03}"), b"v").expect("child: put");
    }
    db.flush_wal().expect("child: flush_wal");
    for i in 0..100u32 {
        db.put(format!("deferred{i:03}"), b"v").expect("child: put");
    }
    // Readable before they reach the file.
    assert_eq!(db.get(b"deferred099").unwrap().as_deref(), Some(&b"v"[..]));
    db.put_opt(b"synced", b"v", &WriteOptions::new().sync(true))
        .expect("child: put synced");
    db.put(b"after-sync", b"v").expect("child: put");
    written_then_wait_for_kill(db);
}

/// `Options::manual_wal_flush`: writes reach the WAL file at `flush_wal` or
/// with the next `sync` write (everything before it, in order); a kill -9
/// loses only what was written after the last of those.
#[test]
fn manual_wal_flush_keeps_flushed_writes_after_kill9() {
    let dir = tempfile::tempdir().unwrap();
    kill_once_written("child_deferred_writer", "WEFT_DEFERRED_DIR", dir.path());
    let db = Db::open(dir.path(), Options::default()).expect("reopen");
    for i in 0..100u32 {
        for prefix in ["flushed", "deferred"] {
            assert_eq!(
                db.get(format!("{prefix}{i:03}")).unwrap().as_deref(),
                Some(&b"v"[..]),
                "{prefix}{i:03} (written before a flush_wal or a sync write)"
            );
        }
    }
    assert_eq!(db.get(b"synced").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(
        db.get(b"after-sync").unwrap(),
        None,
        "a deferred write reached the file without flush_wal"
    );
}
