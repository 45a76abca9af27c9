//! Real write failures: a child process runs with `RLIMIT_FSIZE`, so the OS
//! refuses to grow any file past a limit (`EFBIG`), exactly like a disk that
//! fills up. No fault injection in the engine: these are the errors a user
//! would see.
//!
//! DESIGN "Semantics": a failed write on the WAL or manifest (or a failed
//! background flush/merge) poisons the database — every later write returns
//! `Error::Poisoned`, reads keep working — and nothing acknowledged is lost:
//! after a reopen without the limit, every acknowledged write is there.

// A test (or benchmark) fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use weft::{Db, Error, Options, WriteOptions};

/// Files may not grow past this in the child.
const FILE_LIMIT: u64 = 256 << 10;

fn env_of(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Write `i`'s key: a permutation of `i` (7919 is invertible modulo the
/// prime 1_000_003), so consecutive writes scatter over the key space and
/// every merge overlaps, and rewrites, the SortedStore.
fn key(i: u64) -> Vec<u8> {
    format!("key{:08}", i * 7919 % 1_000_003).into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    let mut v = format!("value-{i}-").into_bytes();
    v.resize(700, b'a' + (i % 26) as u8);
    v
}

fn scenario_options(scenario: &str) -> Options {
    match scenario {
        // One big memtable: the WAL itself hits the limit.
        "wal" => Options::default().write_buffer_size(64 << 20),
        // Small memtables: WALs and flushed tables stay small, but merges
        // write a SortedStore table past the limit, in the background.
        "merge" => Options::default()
            .write_buffer_size(48 << 10)
            .unsorted_limit(128 << 10)
            .table_size(64 << 20),
        other => panic!("unknown scenario {other}"),
    }
}

/// Child: writes until the database refuses, then checks the poisoned state.
/// Prints `ack N` per acknowledged write and `checked` at the end.
#[test]
fn child_limited_writer() {
    let (Some(dir), Some(scenario)) = (env_of("WEFT_FAIL_DIR"), env_of("WEFT_FAIL_SCENARIO"))
    else {
        return;
    };
    // SAFETY: plain libc calls with valid arguments; ignoring SIGXFSZ makes
    // an oversized write fail with EFBIG instead of killing the process.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let lim = libc::rlimit {
            rlim_cur: FILE_LIMIT,
            rlim_max: FILE_LIMIT,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0);
    }
    let db = Db::open(&dir, scenario_options(&scenario)).expect("child: open");
    let mut out = std::io::stdout();
    writeln!(out).unwrap();
    let mut first_error = None;
    for i in 0..100_000u64 {
        let sync = i % 7 == 0;
        match db.put_opt(key(i), value(i), &WriteOptions::new().sync(sync)) {
            Ok(()) => {
                writeln!(out, "ack {i}").unwrap();
            }
            Err(e) => {
                first_error = Some((i, e));
                break;
            }
        }
    }
    out.flush().unwrap();
    let (failed_at, e) = first_error.expect("child: the file size limit was never hit");
    // The first failure is the I/O error itself (or, when a background job
    // failed first, the poison it left).
    assert!(
        matches!(e, Error::Io { .. } | Error::Poisoned(_)),
        "first failure should be Io or Poisoned, got {e:?}"
    );
    let msg = e.to_string();
    assert!(!msg.is_empty());
    // Every later write is refused with Poisoned...
    for j in 0..3 {
        match db.put(key(1_000_000 + j), b"x") {
            Err(Error::Poisoned(reason)) => assert!(!reason.is_empty(), "poison reason is empty"),
            other => panic!("write after failure: expected Poisoned, got {other:?}"),
        }
    }
    assert!(matches!(db.delete(key(0)), Err(Error::Poisoned(_))));
    assert!(matches!(db.flush(), Err(Error::Poisoned(_))));
    // ...while reads keep working and see every acknowledged write.
    for i in (0..failed_at).step_by(97).chain(failed_at.checked_sub(1)) {
        assert_eq!(
            db.get(key(i)).expect("read after poison").as_deref(),
            Some(&value(i)[..]),
            "key {i}"
        );
    }
    let mut n = 0u64;
    for r in db.range::<&[u8], _>(..).expect("range") {
        r.expect("scan after poison");
        n += 1;
    }
    assert!(
        n >= failed_at,
        "scan after poison sees {n} keys, {failed_at} were acknowledged"
    );
    writeln!(out, "checked {failed_at} {msg}").unwrap();
    out.flush().unwrap();
}

fn run_scenario(scenario: &str) {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let child = Command::new(exe)
        .args([
            "--exact",
            "child_limited_writer",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("WEFT_FAIL_DIR", dir.path())
        .env("WEFT_FAIL_SCENARIO", scenario)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "{scenario}: child failed ({}):\n{}\n{}",
        output.status,
        stdout
            .lines()
            .filter(|l| !l.starts_with("ack "))
            .collect::<Vec<_>>()
            .join("\n"),
        String::from_utf8_lossy(&output.stderr)
    );
    let mut acked = 0u64;
    let mut checked = None;
    for line in BufReader::new(stdout.as_bytes()).lines() {
        let line = line.unwrap();
        if let Some(n) = line.strip_prefix("ack ") {
            let n: u64 = n.trim().parse().unwrap();
            assert_eq!(n, acked, "acks in order");
            acked += 1;
        } else if let Some(rest) = line.trim().strip_prefix("checked ") {
            checked = Some(rest.to_string());
        }
    }
    let checked =
        checked.unwrap_or_else(|| panic!("{scenario}: child never finished its checks:\n{stdout}"));
    assert!(
        acked > 0,
        "{scenario}: nothing was acknowledged before the failure"
    );
    eprintln!("{scenario}: {acked} writes acknowledged; failure: {checked}");

    // Without the limit, the database opens and holds every acknowledged
    // write, and nothing that was refused.
    let db = Db::open(dir.path(), scenario_options(scenario)).expect("reopen after failure");
    for i in 0..acked {
        assert_eq!(
            db.get(key(i)).unwrap().as_deref(),
            Some(&value(i)[..]),
            "{scenario}: acknowledged write {i} lost"
        );
    }
    for j in 0..3 {
        assert_eq!(
            db.get(key(1_000_000 + j)).unwrap(),
            None,
            "a refused write appeared"
        );
    }
    // The failed write was never acknowledged: present or absent, but whole.
    if let Some(v) = db.get(key(acked)).unwrap() {
        assert_eq!(v, value(acked), "the failed write is torn");
    }
    db.verify_checksums().expect("checksums after recovery");
    // And it accepts writes again.
    db.put(b"after", b"recovery").unwrap();
    db.flush().unwrap();
    assert_eq!(db.get(b"after").unwrap().as_deref(), Some(&b"recovery"[..]));
}

#[test]
fn wal_write_failure_poisons_and_loses_nothing() {
    run_scenario("wal");
}

#[test]
fn background_merge_failure_poisons_and_loses_nothing() {
    run_scenario("merge");
}

/// A memtable rotation that cannot create its new WAL (here: the database
/// directory was deleted under the open database, as an operator's `rm -rf`
/// or a vanished mount would do) fails the write with an error and poisons
/// the database; it must not hang. It once did: the rotation held the
/// engine's state lock and poisoning took it again, so the writer — and
/// `weft serve`'s shutdown flush behind it — waited forever. Reads keep
/// working from memory.
#[test]
fn a_rotation_that_cannot_create_its_wal_fails_instead_of_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path, Options::default().write_buffer_size(64 << 10)).unwrap();
    for i in 0..100 {
        db.put(key(i), value(i)).unwrap();
    }
    // Background work may create a file while the tree is removed: retry.
    let mut tries = 0;
    while let Err(e) = std::fs::remove_dir_all(&path) {
        tries += 1;
        assert!(tries < 100, "could not remove {}: {e}", path.display());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let writer = db.clone();
    std::thread::spawn(move || {
        // Enough to fill the 64 KiB memtable several times over.
        let r = (100..20_000).try_for_each(|i| writer.put(key(i), value(i)));
        let _ = tx.send(r);
    });
    let r = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("a write that needed a new WAL hung instead of failing");
    let e = r.expect_err("writes went on with no directory to put a WAL in");
    assert!(
        matches!(e, Error::Io { .. } | Error::Poisoned(_)),
        "unexpected error: {e:?}"
    );
    assert!(
        matches!(db.put(b"later", b"x"), Err(Error::Poisoned(_))),
        "a poisoned database accepted a write"
    );
    for i in 0..100 {
        assert_eq!(
            db.get(key(i)).unwrap(),
            Some(value(i)),
            "key {i} after the failure"
        );
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(db.flush());
    });
    let r = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("flush of a poisoned database hung");
    assert!(r.is_err(), "flush of a poisoned database succeeded");
}
