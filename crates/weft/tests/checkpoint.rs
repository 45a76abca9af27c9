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
//!   and WALs kept as value logs (every layer compressed), linked into the
//!   copy; the source directory removed; the copy reads everything, takes
//!   writes, reopens.
//! - `files_are_linked_on_one_file_system_and_the_tail_is_copied`.
//! - `the_destination_must_be_new_or_empty`.
//! - `a_failed_checkpoint_leaves_nothing_under_the_destination`: every
//!   operation of a checkpoint failed in turn (`FaultFs`): an error, no
//!   directory under the destination's name or beside it, the source
//!   unharmed.
//! - `a_power_cut_during_a_checkpoint_leaves_the_whole_copy_or_none`.
//!
//! Backups:
//! - `backups_restore_and_the_second_copies_only_new_files`: the second
//!   backup copies exactly the files the first did not hold byte for byte;
//!   each restores its own state, with the source gone too.
//! - `files_of_one_name_and_size_are_told_apart_by_their_bytes`: two
//!   databases' tables of one name and size, in one backup directory.
//! - `deleting_a_backup_purges_only_what_no_other_needs`: deletes and
//!   purges keep the rest restorable and leave only listed files, each
//!   once; leftovers of an interrupted backup go at the next open.
//! - `a_corrupted_backup_file_is_corruption_on_restore`: a flipped byte, a
//!   cut or a missing file is `Error::Corruption` naming it, nothing is
//!   restored; a damaged meta file is corruption too.

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::*;
use weft::internals::fs::{FaultFs, FaultKind, FileSystem, OpKind};
use weft::{BackupEngine, ChangeOp, Db, Error, FeedLimit, Options, WriteBatch, WriteOptions};

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
                ChangeOp::DeleteRange { start, end } => {
                    model.retain(|k, _| k < start || k >= end);
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

/// Small sizes, and every layer compressed: the copy's files are the
/// source's bytes, whatever their encoding.
fn compressed() -> Options {
    use weft::Compression;
    tiny_options(weft::MemtableKind::default())
        .unsorted_compression(Compression::Lz4)
        .sorted_compression(Compression::Zstd(3))
        .value_log_compression(Compression::Zstd(3))
}

/// With values kept in the WAL, a `.vlog` exists only once background GC
/// has moved live values out of retained WALs; a loaded machine can run
/// the checkpoint before GC gets a core. Waits (bounded) for one, so the
/// copy is checked with every kind of file in it.
fn wait_for_a_gc_value_log(dir: &std::path::Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let any = std::fs::read_dir(dir)
            .unwrap()
            .any(|e| e.unwrap().file_name().to_string_lossy().ends_with(".vlog"));
        if any {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "GC wrote no value log in two minutes"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_checkpoint_survives_the_source_being_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("db");
    let db = Db::open(&src, compressed()).unwrap();
    let mut model = Model::new();
    fill(&db, &mut model, 0, 2500);
    wait_for_a_gc_value_log(&src);
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
    let copy = Db::open(&dest, compressed()).unwrap();
    assert_eq!(copy.stats().sequence, info.sequence);
    assert_db_eq(&copy, &model, "the copy, its source deleted");
    assert_eq!(copy.get("later").unwrap(), None);
    copy.verify_checksums().unwrap();
    fill(&copy, &mut model, 2500, 800);
    copy.close().unwrap();
    let copy = Db::open(&dest, compressed()).unwrap();
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

/// A database on `fs` with tables in many partitions, value logs, kept
/// WALs and an unflushed tail, and its model. Quiet: filled with small
/// sizes, then reopened with the default ones, under which nothing is due,
/// so every operation a fault or power cut hits is the checkpoint's.
fn quiet_db_on(fs: &Arc<FaultFs>, dir: &Path) -> (Db, Model) {
    // Filled once per test process, copied for each database.
    static FILLED: std::sync::OnceLock<(tempfile::TempDir, Model)> = std::sync::OnceLock::new();
    let (template, model) = FILLED.get_or_init(|| {
        let t = tempfile::tempdir().unwrap();
        let mut model = Model::new();
        let busy = Db::open(t.path(), tiny_options(weft::MemtableKind::default())).unwrap();
        fill(&busy, &mut model, 0, 1100);
        busy.close().unwrap();
        (t, model)
    });
    copy_dir(template.path(), dir);
    let mut model = model.clone();
    let opts = Options::default().file_system(Arc::clone(fs) as Arc<dyn FileSystem>);
    let db = Db::open(dir, opts).unwrap();
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
        // (Its name made durable whatever the checkpoint did, so that the
        // power loss below has nothing of the probe's to undo.)
        fs.sync_dir(dir.path()).unwrap();
        std::fs::remove_dir_all(dir.path().join("probe")).unwrap();
        // Even seeds cut at the last operations (the rename, the parent's
        // fsync) or just after the last (the checkpoint returns); odd
        // seeds anywhere.
        let at = match seed % 2 {
            0 => (ops + 2).saturating_sub(seed / 2).max(1),
            _ => 1 + seed * 7919 % ops,
        };
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
            assert!(n == "copy" || n.starts_with('.'), "{n} left behind");
        }
    }
    assert!(none > 0, "some cut came before the copy was published");
    assert!(whole > 0, "some copy survived (a cut after it returned)");
}

// ------------------------------------------------------------ backups ----

/// The files of a database directory (a restored backup), by name.
fn files_of(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file() && e.file_name() != "LOCK")
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

/// Bytes and count of the files in `dir`.
fn usage(dir: &Path) -> (u64, usize) {
    let files: Vec<_> = std::fs::read_dir(dir).unwrap().collect();
    let bytes = files
        .iter()
        .map(|e| e.as_ref().unwrap().metadata().unwrap().len())
        .sum();
    (bytes, files.len())
}

/// Restores backup `id` into `dest`, checks it opens as `model`, and
/// returns its files as restored (before the open recovered it).
fn restore_and_check(
    backups: &BackupEngine,
    id: u64,
    dest: &Path,
    model: &Model,
    ctx: &str,
) -> BTreeMap<String, Vec<u8>> {
    backups.restore(id, dest).unwrap();
    let restored = files_of(dest);
    let db = Db::open(dest, Options::default()).unwrap();
    assert_db_eq(&db, model, ctx);
    db.verify_checksums().unwrap();
    db.close().unwrap();
    restored
}

/// Puts `n` keys from `from` on, values large enough to be logged in the
/// WAL (and kept there as a value log once flushed).
fn put_many(db: &Db, model: &mut Model, from: u64, n: u64) {
    for i in from..from + n {
        let key = format!("key-{:05}", i % 3000).into_bytes();
        let value = format!("{i:08}-").repeat(40).into_bytes();
        db.put(&key, &value).unwrap();
        model.insert(key, value);
    }
}

#[test]
fn backups_restore_and_the_second_copies_only_new_files() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db"), Options::default()).unwrap();
    let mut model = Model::new();
    put_many(&db, &mut model, 0, 2000);
    db.flush().unwrap();
    put_many(&db, &mut model, 2000, 1500);
    db.compact().unwrap();
    put_many(&db, &mut model, 3500, 100); // unflushed: the WAL tail
    let model1 = model.clone();
    let backups = BackupEngine::open(dir.path().join("backups")).unwrap();
    let first = backups.create_backup(&db).unwrap();
    let shared = dir.path().join("backups/shared");
    let after_first = usage(&shared);

    put_many(&db, &mut model, 3600, 800);
    db.flush().unwrap();
    put_many(&db, &mut model, 4400, 50);
    let second = backups.create_backup(&db).unwrap();
    assert_eq!((first, second), (1, 2));

    let list = backups.list().unwrap();
    assert_eq!(list.len(), 2);
    let (one, two) = (&list[0], &list[1]);
    assert_eq!((one.id, two.id), (first, second));
    assert!(one.sequence < two.sequence);
    assert_eq!(
        (one.new_files, one.new_bytes),
        (one.files, one.bytes),
        "the first backup copies everything"
    );
    assert_eq!(after_first, (one.bytes, one.files as usize));

    let r1 = dir.path().join("restored-1");
    let r2 = dir.path().join("restored-2");
    let f1 = restore_and_check(&backups, first, &r1, &model1, "the older backup");
    let f2 = restore_and_check(&backups, second, &r2, &model, "the newer backup");
    // What the second had to copy: its files that the first did not hold
    // byte for byte (new tables and logs, a WAL cut elsewhere, a manifest,
    // CURRENT); the rest (the first's tables and logs) is shared.
    let fresh: Vec<(&String, &Vec<u8>)> =
        f2.iter().filter(|(n, b)| f1.get(*n) != Some(b)).collect();
    let fresh_bytes: u64 = fresh.iter().map(|(_, b)| b.len() as u64).sum();
    assert_eq!(
        (two.new_files, two.new_bytes),
        (fresh.len() as u64, fresh_bytes),
        "the second backup copied exactly its new files"
    );
    assert!(
        two.new_bytes < two.bytes / 2,
        "most of the second backup is the first's files: {two:?}"
    );
    assert!(f2.keys().any(|n| n.ends_with(".sst") && f1.contains_key(n)));
    let after_second = usage(&shared);
    assert_eq!(
        after_second,
        (
            after_first.0 + two.new_bytes,
            after_first.1 + two.new_files as usize
        )
    );
    // The backup directory is independent of the source.
    db.close().unwrap();
    std::fs::remove_dir_all(dir.path().join("db")).unwrap();
    std::fs::remove_dir_all(&r2).unwrap();
    restore_and_check(&backups, second, &r2, &model, "the source deleted");
    // One engine per directory.
    assert!(matches!(
        BackupEngine::open(dir.path().join("backups")).unwrap_err(),
        Error::Locked { .. }
    ));
    // A restore needs a new or empty destination.
    assert!(matches!(
        backups.restore(first, &r1).unwrap_err(),
        Error::InvalidArgument(_)
    ));
    assert!(matches!(
        backups.restore(9, dir.path().join("r9")).unwrap_err(),
        Error::InvalidArgument(_)
    ));
}

#[test]
fn deleting_a_backup_purges_only_what_no_other_needs() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path().join("db"),
        tiny_options(weft::MemtableKind::default()),
    )
    .unwrap();
    let backups = BackupEngine::open(dir.path().join("backups")).unwrap();
    let shared = dir.path().join("backups/shared");
    let mut model = Model::new();
    let mut models = Vec::new();
    for round in 0..4 {
        // Merges and GC between backups drop files the older ones hold.
        fill(&db, &mut model, round * 1000, 1000);
        let id = backups.create_backup(&db).unwrap();
        models.push((id, model.clone()));
    }
    db.close().unwrap();
    let total =
        |backups: &BackupEngine| -> u64 { backups.list().unwrap().iter().map(|b| b.bytes).sum() };
    let (before, _) = usage(&shared);
    assert!(before < total(&backups), "backups share files");

    backups.delete(2).unwrap();
    let (after, _) = usage(&shared);
    assert!(
        after < before,
        "backup 2's own files went ({before} -> {after})"
    );
    assert!(matches!(
        backups.delete(2).unwrap_err(),
        Error::InvalidArgument(_)
    ));
    for (id, m) in [&models[0], &models[2], &models[3]] {
        let dest = dir.path().join(format!("r{id}"));
        restore_and_check(
            &backups,
            *id,
            &dest,
            m,
            &format!("backup {id} after deleting 2"),
        );
        std::fs::remove_dir_all(&dest).unwrap();
    }
    assert_eq!(backups.purge_old_backups(1).unwrap(), vec![1, 3]);
    let list = backups.list().unwrap();
    assert_eq!(list.iter().map(|b| b.id).collect::<Vec<_>>(), vec![4]);
    // Only backup 4's files are left, each once.
    assert_eq!(usage(&shared), (list[0].bytes, list[0].files as usize));
    restore_and_check(
        &backups,
        4,
        &dir.path().join("r4"),
        &models[3].1,
        "the last backup",
    );

    // Leftovers of an interrupted backup go at the next open.
    drop(backups);
    std::fs::write(shared.join("000999_00000000_5.sst"), b"stray").unwrap();
    std::fs::write(shared.join("000998.sst.tmp"), b"half").unwrap();
    std::fs::write(dir.path().join("backups/meta/7.tmp"), b"half").unwrap();
    let backups = BackupEngine::open(dir.path().join("backups")).unwrap();
    assert_eq!(usage(&shared), (list[0].bytes, list[0].files as usize));
    assert_eq!(usage(&dir.path().join("backups/meta")).1, 1);
    // A new backup takes the next id.
    let db = Db::open(dir.path().join("db"), Options::default()).unwrap();
    assert_eq!(backups.create_backup(&db).unwrap(), 5);
}

#[test]
fn a_corrupted_backup_file_is_corruption_on_restore() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db"), Options::default()).unwrap();
    let mut model = Model::new();
    put_many(&db, &mut model, 0, 1000);
    db.flush().unwrap();
    put_many(&db, &mut model, 1000, 10);
    let backups = BackupEngine::open(dir.path().join("backups")).unwrap();
    let id = backups.create_backup(&db).unwrap();
    let shared = dir.path().join("backups/shared");
    let table = files_where(&shared, |n| n.ends_with(".sst")).pop().unwrap();
    let dest = dir.path().join("restored");
    let expect_corruption = |what: &str| {
        let e = backups.restore(id, &dest).unwrap_err();
        assert_corruption_in(&e, &table, what);
        assert!(!dest.exists(), "{what}: nothing restored");
        assert_eq!(
            others_in(dir.path()),
            vec!["backups"],
            "{what}: nothing left"
        );
    };
    flip_byte(&table, file_len(&table) / 2);
    expect_corruption("a flipped byte");
    flip_byte(&table, file_len(&table) / 2);
    truncate_file(&table, file_len(&table) - 1);
    expect_corruption("a truncated file");
    std::fs::remove_file(&table).unwrap();
    expect_corruption("a missing file");
    // The meta file is checked too.
    let meta = dir.path().join(format!("backups/meta/{id}"));
    flip_byte(&meta, 20);
    match backups.list().unwrap_err() {
        Error::Corruption { file, .. } => assert_eq!(file, meta),
        e => panic!("{e}"),
    }
}

/// Two databases with the same history of file numbers and sizes but other
/// bytes, backed up into one directory: the second's tables share names
/// and sizes with the first's and are still stored, and restored, as its
/// own (files are confirmed by their checksum, not their name).
#[test]
fn files_of_one_name_and_size_are_told_apart_by_their_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let backups = BackupEngine::open(dir.path().join("backups")).unwrap();
    let mut models = Vec::new();
    for fill_byte in [b'a', b'b'] {
        let db = Db::open(
            dir.path().join(format!("db-{}", fill_byte as char)),
            Options::default(),
        )
        .unwrap();
        let mut model = Model::new();
        for i in 0..500u32 {
            let key = format!("key-{i:04}").into_bytes();
            let value = vec![fill_byte; 100];
            db.put(&key, &value).unwrap();
            model.insert(key, value);
        }
        db.flush().unwrap();
        backups.create_backup(&db).unwrap();
        models.push(model);
    }
    let list = backups.list().unwrap();
    let tables = |id: u64| {
        let f = restore_and_check(
            &backups,
            id,
            &dir.path().join(format!("r{id}")),
            &models[id as usize - 1],
            &format!("backup {id}"),
        );
        f.into_iter()
            .filter(|(n, _)| n.ends_with(".sst"))
            .collect::<Vec<_>>()
    };
    let (one, two) = (tables(1), tables(2));
    assert_eq!(one.len(), 1);
    assert_eq!(
        (&one[0].0, one[0].1.len()),
        (&two[0].0, two[0].1.len()),
        "one name, one size"
    );
    assert_ne!(one[0].1, two[0].1);
    // Both tables are stored; what is byte for byte the same (the empty
    // WAL, here even the manifest and CURRENT) is stored once.
    let stem = one[0].0.trim_end_matches(".sst").to_string();
    let stored = files_where(&dir.path().join("backups/shared"), |n| {
        n.starts_with(&format!("{stem}_")) && n.ends_with(".sst")
    });
    assert_eq!(stored.len(), 2, "{stored:?}");
    assert!(list[1].new_files >= 1 && list[1].new_files < list[1].files);
}

/// A checkpoint and a restored backup carry the lifetime counters
/// (`STATS`): the copy's first open counts on from the source's saves.
#[test]
fn copies_keep_counting_the_lifetime_counters() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put("k", "v").unwrap();
    db.flush().unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.stats().lifetime.opens, 2);
    let copies = tempfile::tempdir().unwrap();
    let checkpoint = copies.path().join("checkpoint");
    db.checkpoint(&checkpoint).unwrap();
    let backups = BackupEngine::open(copies.path().join("backups")).unwrap();
    let id = backups.create_backup(&db).unwrap();
    let restored = copies.path().join("restored");
    backups.restore(id, &restored).unwrap();
    for copy in [&checkpoint, &restored] {
        let c = Db::open(copy, Options::default()).unwrap();
        let life = c.stats().lifetime;
        assert_eq!(life.opens, 3, "{}: {life:?}", copy.display());
        assert!(life.flushes >= 1, "{}: {life:?}", copy.display());
        assert_eq!(c.get("k").unwrap().as_deref(), Some(&b"v"[..]));
    }
}
