//! Corruption tests: damaged WAL, tables, manifest and CURRENT must give
//! `Error::Corruption { file, offset }` naming the damaged file (or, for a torn
//! WAL tail, a clean truncation to a prefix of the writes), never a wrong
//! value, never a panic.
//!
//! WAL images are taken while the database is open (a copy of the directory
//! after the writes reached the OS, as a process crash would leave it), so the
//! tests do not depend on what `close` does with the memtable.
//!
//! All runs are in-process; a panic hook counts panics on every thread
//! (including engine background threads) and each test asserts none happened.

// A test (or benchmark) fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use common::*;
use weft::{Db, Error, Options};

type ScanItem = weft::Result<(Vec<u8>, Vec<u8>)>;

fn open_no_panic(dir: &Path, opts: Options, ctx: &str) -> weft::Result<Db> {
    match catch_unwind(AssertUnwindSafe(|| Db::open(dir, opts))) {
        Ok(r) => r,
        Err(_) => panic!("{ctx}: Db::open panicked"),
    }
}

fn no_panics_since(before: usize, ctx: &str) {
    assert_eq!(
        panic_count(),
        before,
        "{ctx}: an engine (non-test) thread panicked (see the message above)"
    );
}

// ------------------------------------------------------------------ WAL ----

struct WalImage {
    /// Crash image of the directory (all writes in the WAL, nothing flushed).
    image: tempfile::TempDir,
    /// File name of the WAL holding the writes.
    log_name: PathBuf,
    /// `starts[i]..ends[i]` is the byte range of measured write `i`'s record.
    starts: Vec<u64>,
    ends: Vec<u64>,
    /// The warm-up write, then the `WAL_WRITES` measured writes.
    writes: Vec<(Vec<u8>, Vec<u8>)>,
}

impl WalImage {
    fn log_in(&self, dir: &Path) -> PathBuf {
        dir.join(&self.log_name)
    }
    /// A fresh copy of the image to damage.
    fn copy(&self) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        copy_dir(self.image.path(), d.path());
        d
    }
    /// The state holding the warm-up write and the first `n` measured writes.
    fn model_of_first(&self, n: usize) -> Model {
        self.writes[..n + 1].iter().cloned().collect()
    }
}

const WAL_WRITES: usize = 12;

/// The end of the last record of a log, by its documented framing (8-byte
/// header: CRC, then the payload length, both u32 LE): the WAL may carry
/// reserved zeros past its records, so its length is not their end.
fn records_end(log: &Path) -> u64 {
    let bytes = std::fs::read(log).unwrap();
    let mut at = 0usize;
    while at + 8 <= bytes.len() && bytes[at..at + 8] != [0u8; 8] {
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        assert!(
            at + 8 + len <= bytes.len(),
            "record at {at} runs past the end"
        );
        at += 8 + len;
    }
    assert!(
        bytes[at..].iter().all(|&b| b == 0),
        "non-zero bytes after the records"
    );
    at as u64
}

/// Writes `WAL_WRITES` puts one by one to a fresh database with a large write
/// buffer, measuring the WAL after each so record boundaries are known
/// (every `put` reaches the OS before it returns), then takes a crash image.
fn make_wal_image() -> WalImage {
    make_wal_image_of(WAL_WRITES)
}

/// [`make_wal_image`] with `count` measured writes.
fn make_wal_image_of(count: usize) -> WalImage {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    // A first write, in case the WAL is created lazily; it is part of every
    // prefix the tests expect.
    let mut writes = vec![(b"__warmup".to_vec(), b"w".to_vec())];
    db.put(&writes[0].0, &writes[0].1).unwrap();
    let logs = wal_files(dir.path());
    let log = logs
        .last()
        .expect("a database that took a write has a WAL (NNNNNN.log)")
        .clone();
    let mut starts = Vec::new();
    let mut ends = Vec::new();
    let mut pos = records_end(&log);
    for i in 0..count {
        let k = format!("key{i:02}").into_bytes();
        let v = format!("value-{i:02}-{}", "v".repeat(80)).into_bytes();
        db.put(&k, &v).unwrap();
        let end = records_end(&log);
        assert!(
            end > pos,
            "WAL {} did not grow after put #{i}: the test assumes each put appends \
             its record to the newest .log before returning",
            log.display()
        );
        starts.push(pos);
        ends.push(end);
        pos = end;
        writes.push((k, v));
    }
    assert_eq!(
        wal_files(dir.path()).last(),
        Some(&log),
        "the WAL rotated during {count} small writes with a 64 MiB buffer"
    );
    let image = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), image.path());
    drop(db);
    WalImage {
        image,
        log_name: PathBuf::from(log.file_name().unwrap()),
        starts,
        ends,
        writes,
    }
}

#[test]
fn wal_image_opens_intact() {
    install_panic_counter();
    let before = panic_count();
    let w = make_wal_image();
    let d = w.copy();
    let db = open_no_panic(d.path(), Options::default(), "intact image").expect("open image");
    assert_db_eq(&db, &w.model_of_first(WAL_WRITES), "intact WAL image");
    assert_eq!(db.stats().wal_tail_truncated_bytes, 0);
    no_panics_since(before, "intact image");
}

/// A flipped byte in the middle of a record followed by other records is
/// corruption, not a torn tail: open must fail naming the WAL.
#[test]
fn wal_flip_mid_log_is_corruption() {
    install_panic_counter();
    let before = panic_count();
    let w = make_wal_image();
    for rec in [0, 1, WAL_WRITES / 2, WAL_WRITES - 2] {
        let d = w.copy();
        let log = w.log_in(d.path());
        let pos = w.starts[rec] + (w.ends[rec] - w.starts[rec]) / 2;
        flip_byte(&log, pos);
        let ctx = format!("WAL byte {pos} flipped (middle of record {rec} of {WAL_WRITES})");
        match open_no_panic(d.path(), Options::default(), &ctx) {
            Err(e) => {
                assert_corruption_in(&e, &log, &ctx);
                if let Error::Corruption { offset, .. } = e {
                    assert!(
                        offset <= pos,
                        "{ctx}: the reported bad region starts at {offset}, after the flipped byte"
                    );
                }
            }
            Ok(db) => {
                let got = scan_all(&db);
                panic!(
                    "{ctx}: open succeeded ({} keys visible) instead of reporting corruption; \
                     acknowledged writes after the damage would be silently lost",
                    got.len()
                );
            }
        }
    }
    no_panics_since(before, "wal flip");
}

/// A flipped byte inside the final record is indistinguishable from a torn
/// write: open succeeds with exactly the earlier writes.
#[test]
fn wal_flip_in_last_record_truncates_cleanly() {
    install_panic_counter();
    let before = panic_count();
    let w = make_wal_image();
    let last = WAL_WRITES - 1;
    let want = w.model_of_first(last);
    for pos in w.starts[last]..w.ends[last] {
        let d = w.copy();
        let log = w.log_in(d.path());
        flip_byte(&log, pos);
        let ctx = format!(
            "WAL byte {pos} flipped (final record spans {}..{})",
            w.starts[last], w.ends[last]
        );
        match open_no_panic(d.path(), Options::default(), &ctx) {
            Ok(db) => {
                assert_db_eq(&db, &want, &ctx);
                assert!(
                    db.stats().wal_tail_truncated_bytes > 0,
                    "{ctx}: stats().wal_tail_truncated_bytes is 0 after dropping a torn record"
                );
            }
            // A damaged length/type in the header may make the record look
            // shorter than the file, with bytes after it: reporting that as
            // corruption is acceptable. Past the header it must truncate.
            Err(e) if pos < w.starts[last] + 16 => assert_corruption_in(&e, &log, &ctx),
            Err(e) => panic!("{ctx}: open failed instead of truncating the torn tail: {e:?}"),
        }
    }
    no_panics_since(before, "wal flip in last record");
}

/// A machine crash may leave a never-synced page of the WAL as zeros with
/// later pages on disk: open recovers the writes before the lost page (a
/// prefix), not an error, and the database goes on from there. Also when
/// the crash hit a rotation or an open, which leaves a newer, blank WAL
/// (empty, or all reserved zeros) behind the damaged one.
#[test]
fn wal_lost_page_recovers_the_writes_before_it() {
    install_panic_counter();
    let before = panic_count();
    let w = make_wal_image_of(200);
    let page = 4096u64;
    assert!(*w.ends.last().unwrap() > 4 * page, "the WAL spans 4 pages");
    for (lost, blank_after) in [(1, None), (2, Some(0)), (3, Some(4 << 20))] {
        let d = w.copy();
        let log = w.log_in(d.path());
        let (from, to) = (lost * page, (lost + 1) * page);
        let mut bytes = std::fs::read(&log).unwrap();
        bytes[from as usize..to as usize].fill(0);
        std::fs::write(&log, &bytes).unwrap();
        if let Some(len) = blank_after {
            let newer = weft::internals::wal_path(d.path(), 999_000);
            std::fs::write(newer, vec![0u8; len]).unwrap();
        }
        let whole = w.ends.iter().filter(|&&e| e <= from).count();
        let ctx = format!(
            "WAL page {from}..{to} zeroed ({whole} writes before it), blank newer WAL: \
             {blank_after:?}"
        );
        let db = open_no_panic(d.path(), Options::default(), &ctx)
            .unwrap_or_else(|e| panic!("{ctx}: open failed: {e:?}"));
        let mut model = w.model_of_first(whole);
        assert_db_eq(&db, &model, &ctx);
        assert!(
            db.stats().wal_tail_truncated_bytes > 0,
            "{ctx}: the records after the lost page were dropped but not counted"
        );
        db.put(b"after", b"recovery").unwrap();
        model.insert(b"after".to_vec(), b"recovery".to_vec());
        drop(db);
        let db = open_no_panic(d.path(), Options::default(), &ctx).unwrap();
        assert_db_eq(&db, &model, &format!("{ctx}, reopened after a write"));
    }
    no_panics_since(before, "wal lost page");
}

/// Truncating the WAL anywhere leaves exactly the records that fit whole.
#[test]
fn wal_truncation_at_every_length_gives_a_prefix() {
    install_panic_counter();
    let before = panic_count();
    let w = make_wal_image();
    let last = WAL_WRITES - 1;
    // Every length within the last record; every 7th byte before it.
    let mut cuts: Vec<u64> = (w.starts[last]..=w.ends[last]).collect();
    cuts.extend((w.starts[0]..w.starts[last]).step_by(7));
    for cut in cuts {
        let d = w.copy();
        let log = w.log_in(d.path());
        truncate_file(&log, cut);
        let whole = w.ends.iter().filter(|&&e| e <= cut).count();
        let ctx = format!("WAL truncated to {cut} bytes ({whole} whole records)");
        let db = open_no_panic(d.path(), Options::default(), &ctx)
            .unwrap_or_else(|e| panic!("{ctx}: open failed: {e:?}"));
        assert_db_eq(&db, &w.model_of_first(whole), &ctx);
        let torn = !w.ends.contains(&cut) && cut != w.starts[0];
        if torn {
            assert!(
                db.stats().wal_tail_truncated_bytes > 0,
                "{ctx}: a torn record was dropped but wal_tail_truncated_bytes is 0"
            );
        }
    }
    no_panics_since(before, "wal truncation");
}

/// After recovering from a torn tail, new writes must survive the next crash
/// too (the torn bytes must not hide records appended after them).
#[test]
fn wal_writes_after_torn_tail_survive_next_crash() {
    install_panic_counter();
    let before = panic_count();
    let w = make_wal_image();
    let last = WAL_WRITES - 1;
    let d = w.copy();
    let log = w.log_in(d.path());
    truncate_file(&log, w.starts[last] + (w.ends[last] - w.starts[last]) / 2);
    let mut want = w.model_of_first(last);
    let db = Db::open(d.path(), Options::default()).expect("open torn image");
    assert_db_eq(&db, &want, "torn image");
    for i in 0..5 {
        let k = format!("after{i}").into_bytes();
        db.put(&k, b"new").unwrap();
        want.insert(k, b"new".to_vec());
    }
    // Second crash: image of the live, recovered database.
    let d2 = tempfile::tempdir().unwrap();
    copy_dir(d.path(), d2.path());
    drop(db);
    let db2 = Db::open(d2.path(), Options::default()).expect("open second crash image");
    assert_db_eq(
        &db2,
        &want,
        "writes after a torn-tail recovery, then a crash",
    );
    drop(db2);
    // And after a clean close.
    let db = Db::open(d.path(), Options::default()).expect("reopen");
    assert_db_eq(
        &db,
        &want,
        "writes after a torn-tail recovery, then a clean reopen",
    );
    no_panics_since(before, "wal after torn tail");
}

// ---------------------------------------------------------------- tables ----

fn table_opts() -> Options {
    Options::default().block_size(256)
}

/// A database whose data lives only in tables: 300 keys (and some deleted),
/// flushed (and merged if `compact`), then closed.
fn make_table_db(compact: bool) -> (tempfile::TempDir, Model, Vec<Vec<u8>>) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), table_opts()).unwrap();
    let mut model = Model::new();
    let mut deleted = Vec::new();
    for i in 0..300u32 {
        let k = format!("key{i:04}").into_bytes();
        let v = format!("value{i:04}-{}", "x".repeat((i % 50) as usize)).into_bytes();
        db.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    if compact {
        db.flush().unwrap();
        db.compact().unwrap();
    }
    for i in (0..300u32).step_by(17) {
        let k = format!("key{i:04}").into_bytes();
        db.delete(&k).unwrap();
        model.remove(&k);
        deleted.push(k);
    }
    db.flush().unwrap();
    if compact {
        db.compact().unwrap();
    }
    db.close().unwrap();
    (dir, model, deleted)
}

/// Reads everything from a database whose table `sst` is damaged: each read
/// must be correct or `Corruption` naming `sst`. Returns whether any read
/// reported corruption.
fn check_damaged_reads(db: &Db, model: &Model, deleted: &[Vec<u8>], sst: &Path, ctx: &str) -> bool {
    let mut saw = false;
    for (k, v) in model {
        match db.get(k) {
            Ok(Some(got)) => assert_eq!(
                show(&got),
                show(v),
                "{ctx}: get({}) returned a wrong value",
                show(k)
            ),
            Ok(None) => panic!("{ctx}: get({}) lost a live key (returned None)", show(k)),
            Err(e) => {
                assert_corruption_in(&e, sst, &format!("{ctx}: get({})", show(k)));
                saw = true;
            }
        }
    }
    for k in deleted {
        match db.get(k) {
            Ok(None) => {}
            Ok(Some(v)) => panic!(
                "{ctx}: deleted key {} came back with value {}",
                show(k),
                show(&v)
            ),
            Err(e) => {
                assert_corruption_in(&e, sst, &format!("{ctx}: get(deleted {})", show(k)));
                saw = true;
            }
        }
    }
    let want = model_vec(model);
    for reverse in [false, true] {
        let dir = if reverse { "reverse" } else { "forward" };
        let r = match db.range::<&[u8], _>(..) {
            Ok(r) => r,
            Err(e) => {
                assert_corruption_in(&e, sst, &format!("{ctx}: range(..)"));
                saw = true;
                continue;
            }
        };
        let items: Box<dyn Iterator<Item = ScanItem>> = if reverse {
            Box::new(r.rev())
        } else {
            Box::new(r)
        };
        let mut expect: Box<dyn Iterator<Item = &(Vec<u8>, Vec<u8>)>> = if reverse {
            Box::new(want.iter().rev())
        } else {
            Box::new(want.iter())
        };
        let mut n = 0usize;
        let mut failed = false;
        for item in items {
            match item {
                Ok((k, v)) => {
                    let w = expect.next().unwrap_or_else(|| {
                        panic!("{ctx}: {dir} scan returned extra key {}", show(&k))
                    });
                    assert_eq!(
                        (show(&k), show(&v)),
                        (show(&w.0), show(&w.1)),
                        "{ctx}: {dir} scan item #{n} is wrong (a damaged block skipped or misread?)"
                    );
                    n += 1;
                }
                Err(e) => {
                    assert_corruption_in(&e, sst, &format!("{ctx}: {dir} scan"));
                    failed = true;
                    saw = true;
                    break;
                }
            }
        }
        if !failed {
            assert!(
                expect.next().is_none(),
                "{ctx}: {dir} scan ended early after {n} of {} pairs without an error",
                want.len()
            );
        }
    }
    saw
}

fn table_corruption(compact: bool) {
    install_panic_counter();
    let before = panic_count();
    let (pristine, model, deleted) = make_table_db(compact);
    // Open and close once: whatever open cleans up (obsolete files) is gone
    // before we pick the tables to damage.
    Db::open(pristine.path(), table_opts())
        .unwrap()
        .close()
        .unwrap();
    let ssts = sst_files(pristine.path());
    assert!(!ssts.is_empty(), "flush() left no .sst file");
    let mut rng = rng(0x7ab1e);
    for sst in &ssts {
        let name = sst.file_name().unwrap().to_owned();
        let len = file_len(sst);
        let mut offsets = vec![
            0,
            1,
            len / 7,
            len / 3,
            len / 2,
            2 * len / 3,
            len.saturating_sub(48),
            len.saturating_sub(9),
            len.saturating_sub(4),
            len - 1,
        ];
        for _ in 0..6 {
            offsets.push(rng.gen_range(0..len));
        }
        offsets.retain(|&o| o < len);
        offsets.sort();
        offsets.dedup();
        for off in offsets {
            let d = tempfile::tempdir().unwrap();
            copy_dir(pristine.path(), d.path());
            let target = d.path().join(&name);
            flip_byte(&target, off);
            let ctx = format!(
                "{} byte {off} of {len} flipped ({})",
                name.to_string_lossy(),
                if compact {
                    "SortedStore"
                } else {
                    "UnsortedStore"
                }
            );
            let db = match open_no_panic(d.path(), table_opts(), &ctx) {
                Err(e) => {
                    assert_corruption_in(&e, &target, &format!("{ctx}: open"));
                    continue;
                }
                Ok(db) => db,
            };
            let r = catch_unwind(AssertUnwindSafe(|| {
                check_damaged_reads(&db, &model, &deleted, &target, &ctx)
            }));
            assert!(r.is_ok(), "{ctx}: reads panicked");
            match catch_unwind(AssertUnwindSafe(|| db.verify_checksums())) {
                Err(_) => panic!("{ctx}: verify_checksums panicked"),
                Ok(Ok(rep)) => {
                    panic!("{ctx}: verify_checksums passed ({rep:?}) over a damaged table")
                }
                Ok(Err(e)) => {
                    assert_corruption_in(&e, &target, &format!("{ctx}: verify_checksums"))
                }
            }
            // Reads keep working (or keep reporting) after the check.
            let _ = db.get(b"key0001");
        }
    }
    // And the pristine copy is fine.
    let db = Db::open(pristine.path(), table_opts()).unwrap();
    assert_db_eq(&db, &model, "undamaged table db");
    let rep = db
        .verify_checksums()
        .expect("verify_checksums on a healthy db");
    assert!(
        rep.files >= ssts.len() as u64 && rep.blocks > 0 && rep.bytes > 0,
        "{rep:?}"
    );
    no_panics_since(before, "table corruption");
}

#[test]
fn table_corruption_unsorted_store() {
    table_corruption(false);
}

#[test]
fn table_corruption_sorted_store() {
    table_corruption(true);
}

/// A table the manifest references but that is gone: errors, never a
/// silently empty answer.
#[test]
fn missing_table_is_an_error_not_missing_data() {
    install_panic_counter();
    let before = panic_count();
    let (d, model, _) = make_table_db(true);
    for sst in sst_files(d.path()) {
        fs::remove_file(&sst).unwrap();
    }
    match open_no_panic(d.path(), table_opts(), "missing tables") {
        Err(e) => assert!(
            matches!(e, Error::Corruption { .. } | Error::Io { .. }),
            "open with missing tables: expected Corruption or Io, got {e:?}"
        ),
        Ok(db) => {
            for (k, v) in &model {
                match db.get(k) {
                    Ok(Some(got)) => assert_eq!(got, *v),
                    Ok(None) => panic!("missing table: get({}) returned None", show(k)),
                    Err(_) => {}
                }
            }
            assert!(
                db.verify_checksums().is_err(),
                "verify_checksums with missing tables"
            );
        }
    }
    no_panics_since(before, "missing table");
}

// -------------------------------------------------------------- manifest ----

/// A database with several flushes, each adding manifest edits. Returns the
/// directory, the model, the manifest name and its size after each flush.
fn make_manifest_db() -> (tempfile::TempDir, Model, PathBuf, Vec<u64>) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let manifest = current_manifest(dir.path());
    let mut sizes = vec![file_len(&manifest)];
    let mut model = Model::new();
    for round in 0..6 {
        for i in 0..20 {
            let k = format!("r{round}k{i:02}").into_bytes();
            let v = format!("v{round}.{i}").into_bytes();
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        db.flush().unwrap();
        sizes.push(file_len(&manifest));
    }
    drop(db);
    assert_eq!(
        current_manifest(dir.path()),
        manifest,
        "the manifest was replaced during the test; boundaries are unknown"
    );
    for w in sizes.windows(2) {
        assert!(
            w[1] > w[0],
            "a flush did not append to the manifest: sizes {sizes:?}"
        );
    }
    let name = PathBuf::from(manifest.file_name().unwrap());
    (dir, model, name, sizes)
}

#[test]
fn manifest_flip_mid_log_is_corruption() {
    install_panic_counter();
    let before = panic_count();
    let (pristine, model, name, sizes) = make_manifest_db();
    // The edits of flushes 1..=4; each has at least one more edit after it.
    for e in 1..=4 {
        let pos = sizes[e] + (sizes[e + 1] - sizes[e]) / 2;
        let d = tempfile::tempdir().unwrap();
        copy_dir(pristine.path(), d.path());
        let m = d.path().join(&name);
        flip_byte(&m, pos);
        let ctx = format!(
            "{} byte {pos} flipped (edit of flush {e}, spans {}..{})",
            name.display(),
            sizes[e],
            sizes[e + 1]
        );
        match open_no_panic(d.path(), Options::default(), &ctx) {
            Err(err) => assert_corruption_in(&err, &m, &ctx),
            Ok(db) => {
                let n = scan_all(&db).len();
                panic!(
                    "{ctx}: open succeeded ({n} of {} keys visible)",
                    model.len()
                );
            }
        }
    }
    let db = Db::open(pristine.path(), Options::default()).unwrap();
    assert_db_eq(&db, &model, "undamaged manifest db");
    no_panics_since(before, "manifest flip");
}

#[test]
fn garbage_current_is_an_error_and_harmless() {
    install_panic_counter();
    let before = panic_count();
    let (d, model, _name, _) = make_manifest_db();
    let current = weft::internals::current_path(d.path());
    let original = fs::read(&current).unwrap();
    let garbage: &[&[u8]] = &[
        b"",
        b"\n",
        b"garbage\n",
        b"MANIFEST-999999\n",
        b"MANIFEST-\n",
        b"MANIFEST-abc\n",
        b"../../etc/passwd\n",
        b"\xff\xfe\x00\x01junk",
    ];
    for g in garbage {
        fs::write(&current, g).unwrap();
        let ctx = format!("CURRENT = {}", show(g));
        match open_no_panic(d.path(), Options::default(), &ctx) {
            Ok(db) => panic!(
                "{ctx}: open succeeded ({} keys visible): an unreadable CURRENT must be an error",
                scan_all(&db).len()
            ),
            Err(e) => assert!(
                !matches!(e, Error::Locked { .. } | Error::Closed),
                "{ctx}: unexpected error kind {e:?}"
            ),
        }
    }
    // The failed opens must not have destroyed anything.
    fs::write(&current, &original).unwrap();
    let db = Db::open(d.path(), Options::default()).expect("open with CURRENT restored");
    assert_db_eq(&db, &model, "after failed opens with garbage CURRENT");
    no_panics_since(before, "garbage CURRENT");
}

/// The files of `dir` whose names carry a number, with it.
fn numbered_files(dir: &Path) -> Vec<(String, u64)> {
    fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            let stem = name.split('.').next().unwrap();
            let n = stem.trim_start_matches("MANIFEST-").parse().ok()?;
            Some((name, n))
        })
        .collect()
}

/// Stray files with huge numbers (issue 35, defect 1): a `.tmp` (or any
/// other orphan kind) does not steer file numbering, so new files never
/// wrap to small numbers and overwrite live tables; a `.log` past any
/// number Weft hands out is refused at open, naming it, and nothing is
/// lost once it is moved away.
#[test]
fn stray_files_with_huge_numbers_do_not_steer_file_numbering() {
    let d = tempfile::tempdir().unwrap();
    let opts = || Options::default().write_buffer_size(64 << 10);
    let key = |i: u32| format!("key{i:06}").into_bytes();
    let value = |round: u32, i: u32| format!("value-{round}-{i}-{}", "x".repeat(100)).into_bytes();
    let mut model = std::collections::BTreeMap::new();
    {
        let db = Db::open(d.path(), opts()).unwrap();
        for i in 0..300 {
            db.put(key(i), value(0, i)).unwrap();
            model.insert(key(i), value(0, i));
        }
        db.flush().unwrap();
        db.close().unwrap();
    }
    let before: Vec<String> = numbered_files(d.path())
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let first_max = numbered_files(d.path())
        .iter()
        .map(|(_, n)| *n)
        .max()
        .unwrap();
    for stray in [
        "18446744073709551614.tmp",
        "18446744073709551614.sst",
        "72057594037927936.vlog",
    ] {
        fs::write(d.path().join(stray), b"not weft's").unwrap();
    }
    {
        let db = Db::open(d.path(), opts()).unwrap();
        // Enough flushes that new numbers would pass the live tables'.
        for i in 0..4000 {
            let k = (i * 7) % 900;
            db.put(key(k), value(1, k)).unwrap();
            model.insert(key(k), value(1, k));
        }
        db.flush().unwrap();
        assert_db_eq(&db, &model, "after the strays");
        // Numbers only grow: every file this session made is numbered past
        // every file the first one left (a wrapped counter starts over).
        for (name, n) in numbered_files(d.path()) {
            if !before.contains(&name) {
                assert!(n > first_max, "{name} made after {first_max}: {before:?}");
            }
        }
        db.close().unwrap();
    }
    let numbers: Vec<u64> = numbered_files(d.path())
        .into_iter()
        .map(|(_, n)| n)
        .collect();
    assert!(
        numbers.iter().all(|n| *n < 1 << 56),
        "a file number came from a stray name: {numbers:?}"
    );
    let db = Db::open(d.path(), opts()).unwrap();
    assert_db_eq(&db, &model, "reopened");
    db.close().unwrap();

    let stray_log = d.path().join("18446744073709551614.log");
    fs::write(&stray_log, b"").unwrap();
    match Db::open(d.path(), opts()) {
        Err(e) => assert_corruption_in(&e, &stray_log, "a stray log"),
        Ok(_) => panic!("a log numbered past any Weft writes was taken"),
    }
    fs::remove_file(&stray_log).unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    assert_db_eq(&db, &model, "the stray log moved away");
}

/// A damaged last manifest record (issue 35, defects 2 and 3): cut short or
/// with a flipped bit, the record still had taken effect (the WAL it
/// replaced, the tables it dropped are gone), so it is not a crash's torn
/// tail. Every such open is `Error::Corruption` naming the manifest, or a
/// state with every key at its newest value — never old values, never an
/// I/O error for a vanished file.
#[test]
fn a_damaged_last_manifest_record_is_corruption_not_an_older_state() {
    let src = tempfile::tempdir().unwrap();
    let opts = || Options::default().write_buffer_size(64 << 10);
    let key = |i: u32| format!("key{i:06}").into_bytes();
    let mut model = std::collections::BTreeMap::new();
    {
        let db = Db::open(src.path(), opts()).unwrap();
        for i in 0..4000 {
            db.put(key(i), format!("v0-{i}")).unwrap();
            model.insert(key(i), format!("v0-{i}").into_bytes());
        }
        db.compact().unwrap();
        for i in (0..4000).step_by(3) {
            db.put(key(i), format!("v1-{i}")).unwrap();
            model.insert(key(i), format!("v1-{i}").into_bytes());
        }
        db.flush().unwrap();
        for i in (0..4000).step_by(5) {
            db.put(key(i), format!("v2-{i}")).unwrap();
            model.insert(key(i), format!("v2-{i}").into_bytes());
        }
        db.close().unwrap();
    }
    let manifest = current_manifest(src.path());
    let full = fs::read(&manifest).unwrap();
    let last = records_end_before(&full);
    let mut damaged = Vec::new();
    for cut in (last + 1..full.len()).rev().take(40) {
        damaged.push((format!("cut to {cut}"), full[..cut].to_vec()));
    }
    for at in (last..full.len()).step_by(((full.len() - last) / 20).max(1)) {
        let mut b = full.clone();
        b[at] ^= 0x10;
        damaged.push((format!("bit flip at {at}"), b));
    }
    let (mut refused, mut intact) = (0, 0);
    for (what, bytes) in damaged {
        let img = tempfile::tempdir().unwrap();
        copy_dir(src.path(), img.path());
        fs::write(img.path().join(manifest.file_name().unwrap()), &bytes).unwrap();
        match Db::open(img.path(), opts()) {
            Err(e) => {
                let damaged = img.path().join(manifest.file_name().unwrap());
                assert_corruption_in(&e, &damaged, &what);
                refused += 1;
            }
            Ok(db) => {
                assert_db_eq(&db, &model, &what);
                intact += 1;
            }
        }
    }
    assert!(refused > 0, "no damage was caught ({intact} intact)");
}

/// Where the manifest's last record starts: the end of the records before
/// it (each an 8-byte header and its payload).
fn records_end_before(manifest: &[u8]) -> usize {
    let mut at = 0;
    let mut last = 0;
    while at + 8 <= manifest.len() {
        let len = u32::from_le_bytes(manifest[at + 4..at + 8].try_into().unwrap()) as usize;
        if at + 8 + len > manifest.len() {
            break;
        }
        last = at;
        at += 8 + len;
    }
    last
}
