//! Checkpoints (`Db::checkpoint`) and the backup engine (`BackupEngine`),
//! `docs/DESIGN.md` §1.5.2 and §5.14.
//!
//! Checkpoints:
//! - `a_checkpoint_under_concurrent_writers_is_the_database_at_one_sequence`:
//!   writer threads commit batches with a recognisable shape while
//!   checkpoints are taken and flushes, merges and GC run; each copy
//!   opens and equals the model replayed from the change feed up to the
//!   sequence the checkpoint returned: every batch up to it, none after,
//!   values logged in WALs included.
//! - `a_checkpoint_survives_the_source_being_deleted`: tables, value logs
//!   and WALs kept as value logs, linked into the copy; the source
//!   directory removed; the copy reads everything, takes writes, reopens.
//! - `files_are_linked_on_one_file_system_and_the_tail_is_copied`.
//! - `the_destination_must_be_new_or_empty`.
//! - `a_failed_checkpoint_leaves_nothing_under_the_destination`: every
//!   operation of a checkpoint failed in turn (`FaultFs`): an error, no
//!   directory under the destination's name or beside it, the source
//!   unharmed.
//! - `a_power_cut_during_a_checkpoint_leaves_the_whole_copy_or_none`.
//!
//! Backups:
//! - `backups_restore_and_the_second_copies_only_new_files`.
//! - `deleting_a_backup_purges_only_what_no_other_needs`.
//! - `a_corrupted_backup_file_is_corruption_on_restore`.

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::*;
use weft::internals::fs::{FaultFs, FaultKind, FileSystem, OpKind};
use weft::{ChangeOp, Db, Error, FeedLimit, Options, WriteBatch, WriteOptions};

/// Small buffers and tables, so that flushes, merges, GC and splits run
/// while the writers do; values of 48 bytes and more are logged in the WAL
/// and pointed at from there (`values_in_wal`).
fn busy_options() -> Options {
    tiny_options(weft::MemtableKind::default())
        .write_buffer_size(128 << 10)
        .max_immutable_memtables(4)
}

/// The batch thread `t` commits as its `n`-th: a marker key holding `n`,
/// and two data keys whose values name the batch (one long enough to be
/// logged in the WAL); every fifth batch also deletes a key. Any copy
/// holding part of a batch and not the rest shows it at once.
fn shaped_batch(t: usize, n: u64) -> WriteBatch {
    let mut b = WriteBatch::new();
    let tag = format!("t{t}-n{n:06}");
    b.put(format!("marker-t{t}"), n.to_string());
    b.put(format!("t{t}-small-{:03}", n % 97), &tag);
    let long = format!("{tag}-").repeat(12);
    b.put(format!("t{t}-long-{:03}", n % 61), long);
    if n.is_multiple_of(5) {
        b.delete(format!("t{t}-small-{:03}", (n + 40) % 97));
    }
    b
}

/// The database the feed's batches up to `seq` make.
fn replay_through(feed: &[weft::ChangeGroup], seq: u64) -> Model {
    let mut model = Model::new();
    for g in feed {
        if g.first_seq() > seq {
            break;
        }
        assert!(
            g.last_seq() <= seq,
            "batch {}..={} straddles the checkpoint's sequence {seq}",
            g.first_seq(),
            g.last_seq()
        );
        for op in g.ops() {
            match op {
                ChangeOp::Put { key, value } => {
                    model.insert(key.clone(), value.clone());
                }
                ChangeOp::Delete { key } => {
                    model.remove(key);
                }
            }
        }
    }
    model
}

#[test]
fn a_checkpoint_under_concurrent_writers_is_the_database_at_one_sequence() {
    install_panic_counter();
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db"), busy_options()).unwrap();
    // The model: every batch with its sequence, read back from the feed.
    db.hold_changes("model", 1).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..4)
        .map(|t| {
            let (db, stop, written) = (db.clone(), Arc::clone(&stop), Arc::clone(&written));
            std::thread::spawn(move || {
                mark_test_thread();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let opts = WriteOptions::new().sync(n.is_multiple_of(50));
                    db.write(shaped_batch(t, n), &opts).unwrap();
                    written.fetch_add(1, Ordering::Relaxed);
                    n += 1;
                }
            })
        })
        .collect();
    let wait_for = |batches: u64| {
        while written.load(Ordering::Relaxed) < batches {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    };
    let mut taken = Vec::new();
    for i in 0..5u64 {
        wait_for(1000 * (i + 1));
        if i == 2 {
            // A merge of every partition while the writers go on.
            db.compact().unwrap();
        }
        let acknowledged = db.stats().sequence;
        let dest = dir.path().join(format!("copy-{i}"));
        let info = db.checkpoint(&dest).unwrap();
        assert!(
            info.sequence >= acknowledged,
            "checkpoint {i} at {} misses writes acknowledged before it (through {acknowledged})",
            info.sequence
        );
        taken.push((dest, info));
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    let feed: Vec<_> = db
        .changes_from(1, FeedLimit::Visible)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let stats = db.stats();
    assert!(stats.flushes > 0 && stats.merges > 0, "{stats:?}");
    assert!(
        stats.values_kept_in_wal_bytes > 0,
        "values logged in WALs were pointed at"
    );
    db.close().unwrap();
    let mut sequences = Vec::new();
    for (dest, info) in taken {
        let ctx = format!("checkpoint at {}", info.sequence);
        let copy = Db::open(&dest, busy_options()).unwrap();
        assert_eq!(copy.stats().sequence, info.sequence, "{ctx}");
        assert_db_eq(&copy, &replay_through(&feed, info.sequence), &ctx);
        copy.verify_checksums().unwrap();
        // The copy is a database of its own: it takes writes and keeps
        // them.
        copy.put("after", "copy").unwrap();
        copy.close().unwrap();
        let copy = Db::open(&dest, busy_options()).unwrap();
        assert_eq!(copy.get("after").unwrap().as_deref(), Some(&b"copy"[..]));
        sequences.push(info.sequence);
    }
    assert!(
        sequences.windows(2).all(|w| w[0] < w[1]),
        "each checkpoint was taken after more writes: {sequences:?}"
    );
    assert_eq!(panic_count(), 0);
}

/// Writes `n` keys with values of mixed sizes (inline, logged in the
/// WAL, moved to value logs by merges), flushing and merging on the way.
fn fill(db: &Db, model: &mut Model, from: u64, n: u64) {
    for i in from..from + n {
        let key = format!("key-{:05}", i % 700).into_bytes();
        let len = [8, 60, 300, 1500][(i % 4) as usize];
        let value: Vec<u8> = (0..len).map(|j| (i as usize * 31 + j) as u8).collect();
        db.put(&key, &value).unwrap();
        model.insert(key, value);
        if i % 97 == 0 {
            let key = format!("key-{:05}", (i / 2) % 700).into_bytes();
            db.delete(&key).unwrap();
            model.remove(&key);
        }
        if i % 400 == 399 {
            db.flush().unwrap();
        }
        if i % 1000 == 999 {
            db.compact().unwrap();
        }
    }
}

#[test]
fn a_checkpoint_survives_the_source_being_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("db");
    let db = Db::open(&src, tiny_options(weft::MemtableKind::default())).unwrap();
    let mut model = Model::new();
    fill(&db, &mut model, 0, 2500);
    let dest = dir.path().join("copy");
    let info = db.checkpoint(&dest).unwrap();
    assert!(info.files_linked > 0, "{info:?}");
    let kinds: Vec<String> = std::fs::read_dir(&dest)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for ext in [".sst", ".vlog", ".log"] {
        assert!(
            kinds.iter().any(|n| n.ends_with(ext)),
            "no {ext} file in the copy: {kinds:?}"
        );
    }
    // Later writes stay in the source.
    db.put("later", "x").unwrap();
    db.close().unwrap();
    std::fs::remove_dir_all(&src).unwrap();
    let copy = Db::open(&dest, tiny_options(weft::MemtableKind::default())).unwrap();
    assert_eq!(copy.stats().sequence, info.sequence);
    assert_db_eq(&copy, &model, "the copy, its source deleted");
    assert_eq!(copy.get("later").unwrap(), None);
    copy.verify_checksums().unwrap();
    fill(&copy, &mut model, 2500, 800);
    copy.close().unwrap();
    let copy = Db::open(&dest, tiny_options(weft::MemtableKind::default())).unwrap();
    assert_db_eq(&copy, &model, "the copy, written to and reopened");
}

#[test]
fn files_are_linked_on_one_file_system_and_the_tail_is_copied() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("db");
    let db = Db::open(&src, tiny_options(weft::MemtableKind::default())).unwrap();
    let mut model = Model::new();
    fill(&db, &mut model, 0, 1200);
    db.put("unflushed", "in the WAL").unwrap();
    let dest = dir.path().join("nested/dirs/copy");
    let info = db.checkpoint(&dest).unwrap();
    db.close().unwrap();
    // Tables a merge has deleted from the source since are still in the
    // copy (its links); those still in both are one file.
    let tables = sst_files(&dest);
    let mut shared = 0;
    for t in &tables {
        let Ok(b) = std::fs::metadata(src.join(t.file_name().unwrap())) else {
            continue;
        };
        let a = std::fs::metadata(t).unwrap();
        assert_eq!(a.ino(), b.ino(), "{} is a link, not a copy", t.display());
        shared += 1;
    }
    assert!(
        shared > 0,
        "{} tables, none still in the source",
        tables.len()
    );
    // Copied: the WAL prefix, the manifest, CURRENT; nothing else.
    assert_eq!(info.files_copied, 3, "{info:?}");
    let copied: u64 = [
        wal_files(&dest).last().unwrap().clone(),
        current_manifest(&dest),
        weft::internals::current_path(&dest),
    ]
    .iter()
    .map(|p| file_len(p))
    .sum();
    assert_eq!(info.bytes_copied, copied);
    assert!(info.bytes_linked > info.bytes_copied, "{info:?}");
    let copy = Db::open(&dest, Options::default()).unwrap();
    model.insert(b"unflushed".to_vec(), b"in the WAL".to_vec());
    assert_db_eq(&copy, &model, "copy");
    // No hidden staging directory is left beside the copy.
    let beside: Vec<_> = std::fs::read_dir(dest.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(beside, vec![std::ffi::OsString::from("copy")]);
}

#[test]
fn the_destination_must_be_new_or_empty() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db"), Options::default()).unwrap();
    db.put("k", "v").unwrap();
    let full = dir.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("keep"), b"mine").unwrap();
    let e = db.checkpoint(&full).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert_eq!(std::fs::read(full.join("keep")).unwrap(), b"mine");
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    assert!(matches!(
        db.checkpoint(&file).unwrap_err(),
        Error::InvalidArgument(_)
    ));
    // An existing empty directory is taken.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    db.checkpoint(&empty).unwrap();
    // And a checkpoint's own destination, once taken, is not.
    assert!(matches!(
        db.checkpoint(&empty).unwrap_err(),
        Error::InvalidArgument(_)
    ));
    db.close().unwrap();
    let copy = Db::open(&empty, Options::default()).unwrap();
    assert_eq!(copy.get("k").unwrap().as_deref(), Some(&b"v"[..]));
}

/// A database on `fs` with flushed tables, value logs, a kept WAL and an
/// unflushed tail, quiet (no job running), and its model.
fn quiet_db_on(fs: &Arc<FaultFs>, dir: &Path) -> (Db, Model) {
    let opts = tiny_options(weft::MemtableKind::default())
        .file_system(Arc::clone(fs) as Arc<dyn FileSystem>);
    let db = Db::open(dir, opts).unwrap();
    let mut model = Model::new();
    fill(&db, &mut model, 0, 1100);
    db.put("tail", "unflushed").unwrap();
    model.insert(b"tail".to_vec(), b"unflushed".to_vec());
    (db, model)
}

/// Names in `dir` other than the database's own directory.
fn others_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "db")
        .collect();
    v.sort();
    v
}

#[test]
fn a_failed_checkpoint_leaves_nothing_under_the_destination() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new(1);
    let (db, model) = quiet_db_on(&fs, &dir.path().join("db"));
    let kinds = [
        OpKind::Create,
        OpKind::Write,
        OpKind::Sync,
        OpKind::Rename,
        OpKind::SyncDir,
        OpKind::Remove,
    ];
    let mut failed = 0;
    for kind in kinds {
        for nth in 1.. {
            let dest = dir.path().join("copy");
            fs.inject(kind, nth, FaultKind::Eio, false);
            let result = db.checkpoint(&dest);
            fs.clear_faults();
            match result {
                Err(e) => {
                    failed += 1;
                    assert!(!e.is_corruption(), "{kind:?} #{nth}: {e}");
                    assert_eq!(
                        others_in(dir.path()),
                        Vec::<String>::new(),
                        "{kind:?} #{nth} failed: nothing may be left ({e})"
                    );
                }
                Ok(_) => {
                    // The fault hit no operation of the checkpoint: every
                    // one of this kind has been failed once.
                    let copy = Db::open(&dest, Options::default()).unwrap();
                    assert_db_eq(&copy, &model, "a checkpoint that succeeded");
                    copy.close().unwrap();
                    std::fs::remove_dir_all(&dest).unwrap();
                    break;
                }
            }
        }
    }
    assert!(failed > 10, "only {failed} operations failed");
    // The source is unharmed and still writable.
    assert_db_eq(&db, &model, "the source");
    db.put("still", "writable").unwrap();
}

#[test]
fn a_power_cut_during_a_checkpoint_leaves_the_whole_copy_or_none() {
    let (mut whole, mut none) = (0, 0);
    for seed in seeds(&[1, 2, 3, 4, 5, 6, 7, 8]) {
        let _guard = SeedGuard::new(format!(
            "seed {seed}: replay with WEFT_SEED={seed} cargo test -p weft --test checkpoint \
             a_power_cut"
        ));
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new(seed);
        let (db, model) = quiet_db_on(&fs, &dir.path().join("db"));
        // Count a checkpoint's operations once, then cut the power at one
        // of them.
        let before = fs.ops();
        db.checkpoint(dir.path().join("probe")).unwrap();
        let ops = fs.ops() - before;
        std::fs::remove_dir_all(dir.path().join("probe")).unwrap();
        let at = 1 + seed * 7919 % ops;
        fs.cut_power_at(fs.ops() + at);
        let dest = dir.path().join("copy");
        // Ok if the cut came after its last operation (a background job
        // may have taken some of the probe's count).
        let result = db.checkpoint(&dest);
        drop(db);
        fs.apply_power_loss().unwrap();
        if result.is_ok() {
            assert!(dest.exists(), "a checkpoint that returned is durable");
        }
        if dest.exists() {
            whole += 1;
            let copy = Db::open(&dest, Options::default()).unwrap();
            assert_db_eq(&copy, &model, "a copy that survived the cut");
        } else {
            none += 1;
        }
        // Whatever is left beside it is hidden, and never a database
        // under the destination's name.
        for n in others_in(dir.path()) {
            assert!(n.starts_with('.'), "{n} left behind");
        }
    }
    assert!(none > 0, "some cut came before the copy was published");
    let _ = whole;
}
