//! `Db::open_read_only` and `Db::refresh`: a reader beside a writer, in
//! this process and in another one.

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{child_stderr, scan_all, spawn_child, tiny_options, wait_for_line};
use weft::{Db, Error, MemtableKind, Options, WriteBatch, WriteOptions};

/// Every file of `dir` (but LOCK) with its size.
fn listing(dir: &Path) -> BTreeMap<String, u64> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name() != "LOCK")
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, e.metadata().unwrap().len())
        })
        .collect()
}

/// Every file of `dir` with its bytes.
fn contents(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    listing(dir)
        .into_keys()
        .map(|name| {
            let bytes = std::fs::read(dir.join(&name)).unwrap();
            (name, bytes)
        })
        .collect()
}

#[test]
fn reader_beside_writer_in_process() {
    let dir = tempfile::tempdir().unwrap();
    let opts = tiny_options(MemtableKind::SkipList);
    let writer = Db::open(dir.path(), opts.clone()).unwrap();
    // Flushed tables, then writes only in the WAL.
    for i in 0..300u32 {
        writer
            .put(format!("t{i:04}"), format!("table value {i:0>60}"))
            .unwrap();
    }
    writer.flush().unwrap();
    writer.put(b"wal-only", b"in the log").unwrap();
    writer.delete(b"t0001").unwrap();
    writer.delete_range(b"t0100", b"t0110").unwrap();

    let reader =
        Db::open_read_only(dir.path(), opts.clone()).expect("read-only open beside a writer");
    assert!(reader.is_read_only());
    assert_eq!(
        reader.get(b"wal-only").unwrap().as_deref(),
        Some(&b"in the log"[..])
    );
    assert_eq!(reader.get(b"t0001").unwrap(), None);
    assert_eq!(reader.get(b"t0105").unwrap(), None);
    assert_eq!(scan_all(&reader), scan_all(&writer));

    // Later writes: unseen until refresh.
    writer.put(b"later", b"1").unwrap();
    writer.delete(b"t0002").unwrap();
    assert_eq!(reader.get(b"later").unwrap(), None);
    assert!(reader.get(b"t0002").unwrap().is_some());
    let old_view = reader.range::<&[u8], _>(..).unwrap();
    reader.refresh().unwrap();
    assert_eq!(reader.get(b"later").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(reader.get(b"t0002").unwrap(), None);
    assert_eq!(scan_all(&reader), scan_all(&writer));
    // An iterator made before the refresh keeps its view.
    let old: Vec<Vec<u8>> = old_view.map(|kv| kv.unwrap().0).collect();
    assert!(old.iter().any(|k| k == b"t0002"));
    assert!(!old.iter().any(|k| k == b"later"));

    // After flushes and compactions that delete the files it read.
    for i in 0..300u32 {
        writer
            .put(format!("t{i:04}"), format!("rewritten {i:0>60}"))
            .unwrap();
    }
    writer.flush().unwrap();
    writer.compact().unwrap();
    assert!(reader
        .get(b"t0200")
        .unwrap()
        .unwrap()
        .starts_with(b"table value"));
    reader.refresh().unwrap();
    assert!(reader
        .get(b"t0200")
        .unwrap()
        .unwrap()
        .starts_with(b"rewritten"));
    assert_eq!(scan_all(&reader), scan_all(&writer));

    // Writes are refused, naming what.
    let refused = [
        ("put", reader.put(b"x", b"y")),
        ("delete", reader.delete(b"x")),
        ("delete_range", reader.delete_range(b"a", b"b")),
        (
            "write",
            reader.write(WriteBatch::new(), &WriteOptions::new()),
        ),
        ("flush", reader.flush()),
        ("compact", reader.compact()),
        ("sync_wal", reader.sync_wal()),
        ("hold_changes", reader.hold_changes("h", 1)),
    ];
    for (what, r) in refused {
        assert!(matches!(r, Err(Error::ReadOnly { .. })), "{what}: {r:?}");
    }
    let cp = tempfile::tempdir().unwrap();
    assert!(matches!(
        reader.checkpoint(cp.path().join("c")),
        Err(Error::ReadOnly {
            operation: "checkpoint"
        })
    ));
    assert!(matches!(writer.refresh(), Err(Error::InvalidArgument(_))));
    reader.verify_checksums().unwrap();
    let _ = reader.stats();
    drop(reader);

    // With the writer closed, a read-only open, its reads, refresh, check
    // and close leave the directory byte for byte as they found it.
    writer.close().unwrap();
    let before = contents(dir.path());
    let reader = Db::open_read_only(dir.path(), opts).unwrap();
    assert_eq!(reader.get(b"later").unwrap().as_deref(), Some(&b"1"[..]));
    let _ = scan_all(&reader);
    reader.refresh().unwrap();
    reader.verify_checksums().unwrap();
    let _ = reader.stats();
    assert!(reader.put(b"x", b"y").is_err());
    reader.close().unwrap();
    assert_eq!(
        contents(dir.path()),
        before,
        "a read-only open changed the directory"
    );
    assert!(!dir.path().join("LOCK").exists() || listing(dir.path()).len() == before.len());
}

#[test]
fn read_only_open_needs_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let r = Db::open_read_only(dir.path().join("none"), Options::default());
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{:?}", r.err());
    assert!(!dir.path().join("none").exists());
}

const KEYS: u32 = 24;

fn value(batch: u64, key: u32) -> Vec<u8> {
    format!("batch {batch} key {key} {:->50}", "").into_bytes()
}

/// The child side of [`reader_beside_writer_process`]: batch `n` sets
/// every `kNN` to `value(n, NN)` and `marker` to `n`, flushing and
/// compacting now and then, until killed.
#[test]
fn child_batch_writer() {
    let Ok(dir) = std::env::var("WEFT_RO_DIR") else {
        return;
    };
    let db = Db::open(&dir, tiny_options(MemtableKind::SkipList)).expect("child: open");
    let mut out = std::io::stdout();
    writeln!(out, "\nready").unwrap();
    out.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut n = 0u64;
    while Instant::now() < deadline {
        let mut b = WriteBatch::new();
        for k in 0..KEYS {
            b.put(format!("k{k:02}"), value(n, k));
        }
        b.put(b"marker", n.to_string());
        db.write(b, &WriteOptions::new()).expect("child: write");
        if n % 17 == 16 {
            db.flush().expect("child: flush");
        }
        if n % 53 == 52 {
            db.compact().expect("child: compact");
        }
        n += 1;
    }
}

/// The batch a view holds (`None`: none yet); panics unless the view is
/// exactly the state after that batch.
fn check_prefix(db: &Db, ctx: &str) -> Option<u64> {
    let pairs = scan_all(db);
    let marker = pairs.iter().find(|(k, _)| k == b"marker");
    let Some((_, m)) = marker else {
        assert!(
            pairs.is_empty(),
            "{ctx}: keys without a marker: {}",
            pairs.len()
        );
        return None;
    };
    let n: u64 = std::str::from_utf8(m).unwrap().parse().unwrap();
    assert_eq!(pairs.len(), KEYS as usize + 1, "{ctx}: marker {n}");
    for (k, v) in &pairs {
        if k == b"marker" {
            continue;
        }
        let key: u32 = std::str::from_utf8(&k[1..]).unwrap().parse().unwrap();
        assert_eq!(
            v,
            &value(n, key),
            "{ctx}: marker {n} but key {} holds another batch's value",
            String::from_utf8_lossy(k)
        );
    }
    Some(n)
}

#[test]
fn reader_beside_writer_process() {
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let stderr_path = logs.path().join("child.stderr");
    let (mut child, rx, reader_thread) = spawn_child(
        "child_batch_writer",
        &[("WEFT_RO_DIR", dir.path().display().to_string())],
        &stderr_path,
    );
    let mut lines = Vec::new();
    if !wait_for_line(&rx, "ready", Duration::from_secs(60), &mut lines) {
        let _ = child.kill();
        let _ = child.wait();
        panic!("child never ready\n{}", child_stderr(&stderr_path));
    }
    // Until the writer has gone far enough to flush and compact many
    // times and the reader has opened often: progress, not a time window
    // (a slow machine takes longer; the deadline only bounds a hang).
    let run = || -> (u64, u64) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let (mut opens, mut refreshes) = (0u64, 0u64);
        let mut highest = None;
        while Instant::now() < deadline && !(opens > 20 && highest.unwrap_or(0) > 600) {
            let db = Db::open_read_only(dir.path(), Options::default())
                .unwrap_or_else(|e| panic!("open {opens}: {e}"));
            opens += 1;
            let mut last = check_prefix(&db, &format!("open {opens}"));
            for _ in 0..5 {
                std::thread::sleep(Duration::from_millis(5));
                db.refresh()
                    .unwrap_or_else(|e| panic!("refresh {refreshes}: {e}"));
                refreshes += 1;
                let now = check_prefix(&db, &format!("refresh {refreshes}"));
                assert!(now >= last, "refresh went back from {last:?} to {now:?}");
                last = now;
            }
            highest = highest.max(last);
        }
        (opens, highest.unwrap_or(0))
    };
    let outcome = std::panic::catch_unwind(run);
    let _ = child.kill();
    let _ = child.wait();
    let _ = reader_thread.join();
    let (opens, highest) = match outcome {
        Ok(r) => r,
        Err(p) => {
            eprintln!("child stderr:\n{}", child_stderr(&stderr_path));
            std::panic::resume_unwind(p)
        }
    };
    // The deadline passed first: the writer or the reader stalled.
    assert!(
        opens > 20 && highest > 600,
        "opens {opens}, highest batch {highest}"
    );
}
