//! A clean close and the lifetime counters: what `Db::close`,
//! `Db::close_with` and dropping the last clone keep (writes made with
//! `disable_wal` included), when the directory can be opened again, and the
//! `STATS` file that carries `Stats::lifetime` from one open to the next —
//! its sums, and what a damaged, missing or unwritable one does (never a
//! failed open).
//!
//! The kill -9 side of the lifetime counters (what a crash loses) is in
//! `tests/crash.rs`.

// A test (or benchmark) fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use weft::{CloseOptions, Db, Error, JobKind, MemtableKind, Options, WriteOptions};

fn unlogged() -> WriteOptions {
    WriteOptions::new().disable_wal(true)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(i: u32, tag: &str) -> Vec<u8> {
    format!("{tag}-{i}-{}", "v".repeat(40)).into_bytes()
}

fn stats_path(dir: &Path) -> std::path::PathBuf {
    dir.join("STATS")
}

// ------------------------------------------------------------- close ----

/// Unlogged writes survive a clean close, with the memtable rotated by
/// the writes (small buffers: immutable memtables may still wait for their
/// flush at the close) and without, for every memtable kind.
#[test]
fn a_clean_close_keeps_unlogged_writes() {
    for kind in kinds() {
        for small in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let opts = match small {
                true => tiny_options(kind),
                false => Options::default().memtable(kind),
            };
            let db = Db::open(dir.path(), opts.clone()).unwrap();
            let mut model = Model::new();
            for i in 0..2000u32 {
                let (k, v) = (key(i % 700), value(i, "u"));
                if i % 3 == 0 {
                    db.put(&k, &v).unwrap();
                } else {
                    db.put_opt(&k, &v, &unlogged()).unwrap();
                }
                model.insert(k, v);
            }
            db.close().unwrap();
            let db = Db::open(dir.path(), opts).unwrap();
            assert_db_eq(&db, &model, &format!("{kind} small={small} after close"));
            db.verify_checksums().unwrap();
        }
    }
}

/// `flush(false)` leaves the memtable to the WAL: the logged writes come
/// back from it, the unlogged ones written since the last flush are gone,
/// exactly those.
#[test]
fn a_close_without_flush_loses_exactly_the_unlogged_writes_since_the_last_flush() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put_opt("flushed-unlogged", "1", &unlogged()).unwrap();
    db.flush().unwrap();
    db.put("logged", "2").unwrap();
    db.put_opt("unlogged", "3", &unlogged()).unwrap();
    // An unlogged write overwriting a logged one loses only itself.
    db.put("overwritten", "logged").unwrap();
    db.put_opt("overwritten", "unlogged", &unlogged()).unwrap();
    db.close_with(&CloseOptions::new().flush(false)).unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let get = |k: &str| db.get(k).unwrap().map(|v| String::from_utf8(v).unwrap());
    assert_eq!(get("flushed-unlogged").as_deref(), Some("1"));
    assert_eq!(get("logged").as_deref(), Some("2"));
    assert_eq!(
        get("unlogged"),
        None,
        "an unlogged write outlived a close without flush"
    );
    assert_eq!(get("overwritten").as_deref(), Some("logged"));
    // The close wrote no table: the WAL was replayed by this open.
    assert_eq!(db.stats().lifetime.flushes, 1);
}

/// Dropping the last clone closes as `close()` does: the unlogged writes
/// are flushed, and the directory is free at once.
#[test]
fn dropping_the_last_clone_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let clone = db.clone();
    db.put_opt("a", "1", &unlogged()).unwrap();
    clone.put_opt("b", "2", &unlogged()).unwrap();
    drop(db);
    // A clone is alive: nothing closed yet.
    assert_eq!(clone.get("a").unwrap().as_deref(), Some(&b"1"[..]));
    drop(clone);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get("a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get("b").unwrap().as_deref(), Some(&b"2"[..]));
}

/// `close()` releases the directory even while another clone, an iterator
/// and a snapshot of the closed database are alive: a new open works at
/// once, the old handles get `Closed` (a second close waits and succeeds),
/// and when they finally drop they change nothing the new database uses.
#[test]
fn the_directory_opens_again_right_after_close_while_a_clone_lives() {
    let dir = tempfile::tempdir().unwrap();
    let opts = tiny_options(MemtableKind::default());
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    let mut model = Model::new();
    for i in 0..500u32 {
        let (k, v) = (key(i), value(i, "old"));
        db.put_opt(&k, &v, &unlogged()).unwrap();
        model.insert(k, v);
    }
    let clone = db.clone();
    let snapshot = clone.snapshot();
    let mut it = clone.iter(&weft::ReadOptions::new()).unwrap();
    it.seek_to_first().unwrap();
    db.close().unwrap();

    assert!(matches!(clone.put("x", "y"), Err(Error::Closed)));
    assert!(matches!(clone.get(key(1)), Err(Error::Closed)));
    assert!(matches!(clone.flush(), Err(Error::Closed)));
    assert!(matches!(clone.compact(), Err(Error::Closed)));
    assert!(clone.iter(&weft::ReadOptions::new()).is_err());

    let new = Db::open(dir.path(), opts.clone()).expect("open right after close");
    assert_db_eq(&new, &model, "reopened while a clone lives");
    // Work that deletes and creates files while the old handles live.
    for i in 0..500u32 {
        let (k, v) = (key(i + 250), value(i, "new"));
        new.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    new.compact().unwrap();
    // The iterator made before the close still reads what it pinned.
    let mut seen = 0;
    while it.valid() {
        seen += 1;
        it.next().unwrap();
    }
    assert_eq!(seen, 500, "an iterator made before the close");
    // A second close of the old database waits for nothing and succeeds.
    clone.close().unwrap();
    drop((it, snapshot));
    assert_db_eq(&new, &model, "after the old handles dropped");
    new.close().unwrap();
    let db = Db::open(dir.path(), opts).unwrap();
    assert_db_eq(&db, &model, "reopened at the end");
    db.verify_checksums().unwrap();
}

/// Writers on other clones race the close: every write acknowledged
/// before it (unlogged ones included) is kept, every one after it gets
/// `Closed`, none is half there.
#[test]
fn writes_racing_a_close_are_kept_or_refused() {
    for round in 0..4u32 {
        let dir = tempfile::tempdir().unwrap();
        let opts = tiny_options(MemtableKind::default());
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        let started = Arc::new(AtomicUsize::new(0));
        let writers: Vec<_> = (0..4u32)
            .map(|t| {
                let db = db.clone();
                let started = Arc::clone(&started);
                std::thread::spawn(move || {
                    let mut acked = 0u32;
                    loop {
                        let k = format!("t{t}-{acked:06}");
                        let opts = WriteOptions::new().disable_wal(acked.is_multiple_of(2));
                        match db.put_opt(&k, value(acked, "r"), &opts) {
                            Ok(()) => {
                                acked += 1;
                                if acked == 10 {
                                    started.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                            Err(Error::Closed) => return acked,
                            Err(e) => panic!("writer {t}: {e}"),
                        }
                    }
                })
            })
            .collect();
        // Every writer under way (a loaded machine may start them late).
        while started.load(Ordering::Relaxed) < 4 {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(5 + 10 * u64::from(round)));
        db.close().unwrap();
        let acked: Vec<u32> = writers.into_iter().map(|w| w.join().unwrap()).collect();
        let db = Db::open(dir.path(), opts).unwrap();
        for (t, &n) in acked.iter().enumerate() {
            assert!(n > 0, "writer {t} never wrote");
            for i in 0..n {
                let k = format!("t{t}-{i:06}");
                assert_eq!(
                    db.get(&k).unwrap(),
                    Some(value(i, "r")),
                    "round {round}: writer {t}'s acknowledged write {i} of {n}"
                );
            }
            let refused = format!("t{t}-{n:06}");
            assert_eq!(db.get(&refused).unwrap(), None, "a refused write is there");
        }
    }
}

// ---------------------------------------------------- lifetime counters ----

/// Writes, flushes and a compaction: some of every counter the sums check.
fn session_work(db: &Db, round: u32) {
    for i in 0..300u32 {
        db.put(key(i), value(i, &format!("s{round}"))).unwrap();
    }
    for i in (0..300u32).step_by(11) {
        db.get(key(i)).unwrap();
    }
    db.flush().unwrap();
    for i in 0..300u32 {
        db.put_opt(key(i + 150), value(i, "again"), &unlogged())
            .unwrap();
    }
    db.compact().unwrap();
    for i in (0..450u32).step_by(7) {
        db.get(key(i)).unwrap();
    }
}

/// The lifetime counters of a third open are exactly the sums of the two
/// sessions before it (read just before each close, which had nothing left
/// to flush) and its own; its since-open counters are its own only. The
/// second session saves every millisecond, and periodic saves add nothing
/// to the sums.
#[test]
fn lifetime_counters_are_the_sums_of_every_session() {
    let dir = tempfile::tempdir().unwrap();
    let mut sessions = Vec::new();
    for round in 0..2u32 {
        let interval = [Duration::ZERO, Duration::from_millis(1)][round as usize];
        let db = Db::open(dir.path(), Options::default().stats_save_interval(interval)).unwrap();
        session_work(&db, round);
        std::thread::sleep(Duration::from_millis(30));
        let s = db.stats();
        assert!(s.flushes >= 2 && s.merges >= 1, "{s:?}");
        assert_eq!(s.lifetime.opens, u64::from(round) + 1);
        sessions.push(s);
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.get(key(3)).unwrap();
    let now = db.stats();
    let l = &now.lifetime;
    assert_eq!(
        now.flushes, 0,
        "since-open flushes of an open that flushed nothing"
    );
    assert_eq!(now.merges, 0);
    assert_eq!((l.opens, l.restarts, l.unclean_closes), (3, 0, 0), "{l:?}");
    assert_eq!(l.restart_reason, None);
    assert_eq!(l.save_error, None);
    let sum = |f: fn(&weft::Stats) -> u64| sessions.iter().map(f).sum::<u64>() + f(&now);
    type Field = fn(&weft::Stats) -> u64;
    let fields: [(&str, Field, u64); 11] = [
        ("flushes", |s| s.flushes, l.flushes),
        ("merges", |s| s.merges, l.merges),
        (
            "user_bytes_written",
            |s| s.user_bytes_written,
            l.user_bytes_written,
        ),
        (
            "wal_bytes_written",
            |s| s.wal_bytes_written,
            l.wal_bytes_written,
        ),
        (
            "flush_bytes_written",
            |s| s.flush_bytes_written,
            l.flush_bytes_written,
        ),
        (
            "merge_bytes_written",
            |s| s.merge_bytes_written,
            l.merge_bytes_written,
        ),
        (
            "manifest_bytes_written",
            |s| s.manifest_bytes_written,
            l.manifest_bytes_written,
        ),
        (
            "memtable_hits",
            |s| s.reads.memtable_hits,
            l.reads.memtable_hits,
        ),
        (
            "gets answered by tables",
            |s| s.reads.sorted_hits + s.reads.unsorted_hits,
            l.reads.sorted_hits + l.reads.unsorted_hits,
        ),
        (
            "flush jobs",
            |s| s.background_job(JobKind::Flush).count,
            l.background_job(JobKind::Flush).count,
        ),
        (
            "merge job bytes",
            |s| s.background_job(JobKind::Merge).bytes_written,
            l.background_job(JobKind::Merge).bytes_written,
        ),
    ];
    for (name, field, lifetime) in fields {
        assert_eq!(lifetime, sum(field), "lifetime {name}");
        assert!(lifetime > 0, "no {name} counted: the test tests nothing");
    }
    let written = |s: &weft::Stats| s.user_bytes_written;
    assert!(l.user_bytes_written > written(&now));
    assert!(l.write_amplification > 0.0);
    assert!(stats_path(dir.path()).exists());
}

/// What an open makes of a `STATS` it cannot use: damaged (a flipped
/// byte, a truncation), missing in an existing database, or not a file at
/// all. The open succeeds with the data whole, the lifetime counters
/// restart and say why; the next clean close writes a good file again.
#[test]
fn an_unusable_stats_file_restarts_the_counters_and_never_fails_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = stats_path(dir.path());
    let open = || Db::open(dir.path(), Options::default()).expect("open");
    let mut model = Model::new();
    let mut work = |db: &Db, i: u32| {
        db.put(key(i), value(i, "w")).unwrap();
        model.insert(key(i), value(i, "w"));
        assert_db_eq(db, &model, &format!("session {i}"));
    };
    let db = open();
    work(&db, 0);
    db.close().unwrap();

    type Damage = fn(&Path);
    let damages: [(&str, Damage, &str); 4] = [
        ("a flipped byte", |p| flip_byte(p, 12), "checksum"),
        ("a truncation", |p| truncate_file(p, 6), "shorter"),
        (
            "no file",
            |p| std::fs::remove_file(p).unwrap(),
            "no STATS file",
        ),
        (
            "a directory in its place",
            |p| {
                std::fs::remove_file(p).unwrap();
                std::fs::create_dir(p).unwrap();
            },
            "STATS",
        ),
    ];
    let mut restarts = 0;
    for (i, (what, damage, reason)) in damages.into_iter().enumerate() {
        let before = open().stats().lifetime;
        assert!(before.opens > 0 && before.flushes > 0, "{what}: {before:?}");
        damage(&path);
        let db = open();
        restarts += 1;
        let l = db.stats().lifetime;
        assert_eq!(l.restarts, 1, "{what}: {l:?}");
        assert_eq!(l.opens, 1, "{what}: counting starts again");
        assert_eq!(l.flushes, 0, "{what}");
        let why = l.restart_reason.as_deref().unwrap_or_default();
        assert!(why.contains(reason), "{what}: {why}");
        work(&db, i as u32 + 1);
        if what == "a directory in its place" {
            // Saves fail (a rename over a directory): noted, not fatal.
            let e = l.save_error.expect("a failed save is noted");
            assert!(e.contains("STATS"), "{e}");
            db.close().unwrap();
            std::fs::remove_dir(&path).unwrap();
        } else {
            db.close().unwrap();
            let l = open().stats().lifetime;
            assert_eq!((l.restarts, l.opens), (1, 2), "{what}: {l:?}");
            assert_eq!(l.restart_reason, None, "{what}");
            assert_eq!(l.flushes, 1, "{what}: the close flushed");
        }
    }
    assert_eq!(restarts, 4);
    let db = open();
    assert_db_eq(&db, &model, "at the end");
    db.verify_checksums().unwrap();
}

/// A `STATS.tmp` left by a crash in the middle of a save is never read:
/// the open keeps the counters of `STATS` and removes the leftover — also
/// an open that fails after its sweep, before any save of its own could
/// replace the file — and never removes or changes `STATS` itself.
#[test]
fn a_torn_temporary_stats_file_is_ignored_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put("k", "v").unwrap();
    db.close().unwrap();
    let tmp = dir.path().join("STATS.tmp");
    let torn = b"WEFTSTAT\x01\x00\x05torn";
    std::fs::write(&tmp, torn).unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let l = db.stats().lifetime;
    assert_eq!((l.opens, l.restarts, l.flushes), (2, 0, 1), "{l:?}");
    assert!(!tmp.exists(), "the open left STATS.tmp");
    assert!(stats_path(dir.path()).exists(), "the open removed STATS");
    db.close().unwrap();

    // An open that fails on a damaged table, after the sweep.
    let saved = std::fs::read(stats_path(dir.path())).unwrap();
    std::fs::write(&tmp, torn).unwrap();
    let sst = sst_files(dir.path())
        .pop()
        .expect("the close flushed a table");
    truncate_file(&sst, file_len(&sst) - 1);
    let e = Db::open(dir.path(), Options::default())
        .err()
        .expect("a damaged table");
    assert!(e.is_corruption(), "{e}");
    assert!(!tmp.exists(), "the failed open left STATS.tmp");
    assert_eq!(std::fs::read(stats_path(dir.path())).unwrap(), saved);
}
