//! Tests of the engine through `Db` that look inside it: the hash index,
//! the closed WALs, gates that hold a background job at a point, the store
//! format version.

use super::*;
use crate::background::test_support::copy_dir;
use crate::fault::gates;
use crate::stats::{BackgroundJobStats, DiskUsage, JobKind};
use crate::store::hash_index::HashIndex;
use std::time::Duration;

/// Waits until a background job of `db` (in `dir`) reaches the closed
/// gate `point`; the gate's guard opens it if this fails.
fn wait_at_gate(point: &str, dir: &Path, db: &Db) {
    assert!(
        gates::wait_reached(point, dir, Duration::from_secs(60)),
        "no job reached {point}: {:?}",
        db.stats()
    );
}

fn index_of(db: &Db) -> HashIndex {
    db.core().super_version().version.partitions[0]
        .index
        .load()
        .as_ref()
        .clone()
}

fn lookups(index: &HashIndex, n: u32) -> Vec<Vec<u64>> {
    (0..n)
        .map(|i| {
            let mut out = Vec::new();
            index.lookup(format!("key{i:06}").as_bytes(), &mut out);
            out
        })
        .collect()
}

/// UnsortedStore tables are found through the hash index and carry no
/// Bloom filter; the SortedStore's tables, found by key range alone,
/// keep theirs (a get of an absent key then reads no block).
#[test]
fn only_sorted_store_tables_carry_bloom_filters() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..2000u32 {
        db.put(format!("key{i:06}"), b"value").unwrap();
    }
    db.flush().unwrap();
    let version = db.core().super_version().version.clone();
    let unsorted = &version.partitions[0].unsorted;
    assert!(!unsorted.is_empty(), "the flush wrote no table");
    assert!(unsorted.iter().all(|t| !t.table.has_filter()));
    db.compact().unwrap();
    let version = db.core().super_version().version.clone();
    let sorted = &version.partitions[0].sorted;
    assert!(!sorted.is_empty(), "the merge wrote no table");
    assert!(sorted.iter().all(|t| t.table.has_filter()));
    for i in (0..2000u32).step_by(7) {
        assert_eq!(
            db.get(format!("key{i:06}")).unwrap().as_deref(),
            Some(&b"value"[..])
        );
    }
}

/// UniKV §III-G: the index restored on open (its checkpoint plus the
/// tables flushed after it) equals the one lost with the process.
#[test]
fn index_restored_from_checkpoint_equals_the_lost_one() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .unsorted_limit(320 << 10)
        .unsorted_slowdown_tables(40)
        .unsorted_stop_tables(80);
    let n = 3000u32;
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    // Five flushes of ~60 KB: a checkpoint after the third (half of
    // `unsorted_limit`), flushes 4 and 5 replayed from their tables, and
    // no merge due (300 KB < 320 KB), so the index keeps all five.
    for round in 0..5 {
        for i in (round..n).step_by(5) {
            db.put(format!("key{i:06}"), vec![b'v'; 90]).unwrap();
        }
        db.flush().unwrap();
    }
    let st = db.core().state.lock().index_checkpoints.clone();
    assert!(st.contains_key(&0), "no checkpoint was written: {st:?}");
    let before = index_of(&db);
    assert_eq!(
        before.tables().len(),
        5,
        "all flushes still in the UnsortedStore"
    );
    let checkpointed = st[&0];
    let latest_table = *before.tables().last().unwrap();
    assert!(
        latest_table > checkpointed,
        "the last table must postdate the checkpoint"
    );
    drop(db);

    let db = Db::open(dir.path(), opts.clone()).unwrap();
    let restored = index_of(&db);
    assert!(
        restored == before,
        "restored index differs from the lost one: before {:?} buckets {} entries {} / restored {:?} buckets {} entries {}",
        before.tables(),
        before.bucket_count(),
        before.entries(),
        restored.tables(),
        restored.bucket_count(),
        restored.entries()
    );
    drop(db);

    // A damaged checkpoint is only an optimisation lost.
    let hix: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "hix"))
        .collect();
    assert_eq!(hix.len(), 1, "exactly the live checkpoint remains: {hix:?}");
    let mut bytes = std::fs::read(&hix[0]).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x5a;
    std::fs::write(&hix[0], bytes).unwrap();
    let db = Db::open(dir.path(), opts).unwrap();
    let rebuilt = index_of(&db);
    assert_eq!(rebuilt.tables(), before.tables());
    assert_eq!(lookups(&rebuilt, n), lookups(&before, n));
    for i in (0..n).step_by(97) {
        assert!(db.get(format!("key{i:06}")).unwrap().is_some());
    }
}

/// A job appends its manifest edit (an fdatasync) with the state lock
/// released: held in the middle of a flush's append, writes (a rotation
/// among them) and reads go on, and the flush is installed afterwards.
#[test]
fn writes_and_reads_go_on_while_a_manifest_edit_is_appended() {
    const POINT: &str = "manifest.append";
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let _gate = gates::close(POINT, dir.path());
    let key = |p: &str, i: u32| format!("{p}{i:04}");
    for i in 0..500 {
        db.put(key("a", i), b"first").unwrap();
    }
    // Rotate: the flush of the old memtable stops inside its append.
    db.core()
        .write(WriteBatch::new(), false, true, true)
        .unwrap();
    wait_at_gate(POINT, dir.path(), &db);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let worker = {
        let db = db.clone();
        std::thread::spawn(move || {
            for i in 0..500 {
                db.put(key("b", i), b"second").unwrap();
                assert_eq!(db.get(key("a", i)).unwrap().as_deref(), Some(&b"first"[..]));
            }
            db.core()
                .write(WriteBatch::new(), false, true, true)
                .unwrap();
            let _ = done_tx.send(());
        })
    };
    let went_on = done_rx.recv_timeout(Duration::from_secs(60));
    // Not `lock()`: before the change the held flush kept the state lock.
    let imms = db
        .core()
        .state
        .try_lock_for(Duration::from_secs(5))
        .map(|st| st.imms.len());
    gates::open(POINT, dir.path());
    worker.join().unwrap();
    assert!(
        went_on.is_ok(),
        "writes and reads waited for the manifest append"
    );
    assert_eq!(
        imms,
        Some(2),
        "the held flush was installed early, or the rotation did not happen"
    );
    db.flush().unwrap();
    assert!(db.core().state.lock().imms.is_empty());
    drop(db);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..500 {
        assert_eq!(db.get(key("a", i)).unwrap().as_deref(), Some(&b"first"[..]));
        assert_eq!(
            db.get(key("b", i)).unwrap().as_deref(),
            Some(&b"second"[..])
        );
    }
}

/// A flush completes while a merge is held mid-way (the flush and
/// compaction threads run side by side), and once the merge lands the
/// index knows exactly the tables flushed beside it.
#[test]
fn flushes_go_on_while_a_merge_runs() {
    const POINT: &str = "merge.inputs_open";
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .unsorted_limit(140 << 10)
        .unsorted_slowdown_tables(40)
        .unsorted_stop_tables(80);
    let db = Db::open(dir.path(), opts).unwrap();
    const N: u32 = 3000;
    fn value(round: u32, i: u32) -> Vec<u8> {
        format!("r{round}-{i}").into_bytes().repeat(8)
    }
    fn put_round(db: &Db, round: u32) {
        for i in (round % 5..N).step_by(5) {
            db.put(format!("key{i:06}"), value(round, i)).unwrap();
        }
        db.flush().unwrap();
    }
    let _gate = gates::close(POINT, dir.path());
    // Four flushes of ~41 KB pass `unsorted_limit` (three do not): a merge
    // starts.
    for round in 0..4 {
        put_round(&db, round);
    }
    wait_at_gate(POINT, dir.path(), &db);
    // The merge is held; two more memtables must still reach disk.
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            for round in 4..6 {
                put_round(&db, round);
            }
            let _ = done_tx.send(());
        })
    };
    let flushed = done_rx.recv_timeout(Duration::from_secs(60));
    let during = db.stats();
    gates::open(POINT, dir.path());
    writer.join().unwrap();
    assert!(
        flushed.is_ok(),
        "flushes waited for the held merge: {during:?}"
    );
    assert_eq!(during.partitions[0].unsorted_tables, 6, "{during:?}");
    assert_eq!(during.merges, 0, "{during:?}");

    for _ in 0..600 {
        if db.stats().merges == 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let version = Arc::clone(&db.core().super_version().version);
    let unsorted: Vec<u64> = version.partitions[0]
        .unsorted
        .iter()
        .map(|t| t.meta.number)
        .collect();
    assert_eq!(db.stats().merges, 1);
    assert_eq!(unsorted.len(), 2, "the two tables flushed beside the merge");
    assert_eq!(index_of(&db).tables(), unsorted);
    let rebuilt = crate::store::build_index(&version.partitions[0].unsorted).unwrap();
    assert_eq!(lookups(&index_of(&db), N), lookups(&rebuilt, N));
    for i in 0..N {
        // Round r wrote the keys with i % 5 == r % 5; round 5 rewrote round 0's.
        let newest = if i % 5 == 0 { 5 } else { i % 5 };
        assert_eq!(
            db.get(format!("key{i:06}")).unwrap(),
            Some(value(newest, i)),
            "key {i}"
        );
    }
}

/// After a machine crash an older WAL can be torn while a newer one kept
/// its records (a rotation does not wait for the old WAL's fdatasync):
/// recovery stops at the torn record and drops the newer WAL, so what
/// survives is a prefix of the history. Intact, both WALs replay.
#[test]
fn a_torn_older_wal_ends_the_history_there() {
    const POINT: &str = "flush.started";
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let _gate = gates::close(POINT, dir.path());
    let old = |i: u32| format!("old{i:03}");
    let new = |i: u32| format!("new{i:03}");
    for i in 0..200 {
        db.put(old(i), [b'o'; 100]).unwrap();
    }
    // Rotate; the flush of the old memtable (and the deletion of its
    // WAL) is held.
    db.core()
        .write(WriteBatch::new(), false, true, true)
        .unwrap();
    wait_at_gate(POINT, dir.path(), &db);
    for i in 0..50 {
        db.put(new(i), b"n").unwrap();
    }
    let (intact, torn) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    copy_dir(dir.path(), intact.path());
    copy_dir(dir.path(), torn.path());
    gates::open(POINT, dir.path());
    drop(db);

    let db = Db::open(intact.path(), Options::default()).unwrap();
    for i in 0..200 {
        assert!(db.get(old(i)).unwrap().is_some(), "{}", old(i));
    }
    for i in 0..50 {
        assert!(db.get(new(i)).unwrap().is_some(), "{}", new(i));
    }
    drop(db);

    // The older WAL loses every page from its third on.
    let mut wals: Vec<std::path::PathBuf> = std::fs::read_dir(torn.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    wals.sort();
    assert_eq!(wals.len(), 2, "the held WAL and the new one: {wals:?}");
    let mut bytes = std::fs::read(&wals[0]).unwrap();
    assert!(bytes.len() > 3 * 4096, "the older WAL spans pages");
    bytes[2 * 4096..].fill(0);
    std::fs::write(&wals[0], bytes).unwrap();
    let db = Db::open(torn.path(), Options::default()).unwrap();
    let kept = (0..200)
        .take_while(|&i| db.get(old(i)).unwrap().is_some())
        .count() as u32;
    assert!(
        kept > 0 && kept < 200,
        "{kept} of the older WAL's writes kept"
    );
    for i in kept..200 {
        assert_eq!(db.get(old(i)).unwrap(), None, "{} after the tear", old(i));
    }
    for i in 0..50 {
        assert_eq!(db.get(new(i)).unwrap(), None, "{} of the newer WAL", new(i));
    }
    assert!(db.stats().wal_tail_truncated_bytes > 0);
}

/// A rotation leaves the old WAL to be synced later; a `sync` write and
/// `sync_wal` make it durable before they return, and the flush of its
/// memtable does before anything else.
#[test]
fn durable_writes_sync_the_rotated_wals_first() {
    const POINT: &str = "flush.started";
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let _gate = gates::close(POINT, dir.path());
    let rotate = |db: &Db| {
        db.put(b"k", b"v").unwrap();
        let wal = db.core().state.lock().mem_wal;
        db.core()
            .write(WriteBatch::new(), false, true, true)
            .unwrap();
        wal
    };
    let first = rotate(&db);
    wait_at_gate(POINT, dir.path(), &db);
    assert_eq!(db.core().closed_wals.numbers(), vec![first]);
    db.put(b"a", b"1").unwrap();
    assert_eq!(
        db.core().closed_wals.numbers(),
        vec![first],
        "not by a plain write"
    );
    db.put_opt(b"b", b"2", &WriteOptions::new().sync(true))
        .unwrap();
    assert!(db.core().closed_wals.numbers().is_empty(), "a sync write");
    let second = rotate(&db);
    assert_eq!(db.core().closed_wals.numbers(), vec![second]);
    db.sync_wal().unwrap();
    assert!(db.core().closed_wals.numbers().is_empty(), "sync_wal");
    db.put(b"c", b"3").unwrap();
    let third = db.core().state.lock().mem_wal;
    // Two memtables wait (the queue's limit): the next rotation is the
    // flush's, once the gate opens.
    gates::open(POINT, dir.path());
    db.flush().unwrap();
    assert!(db.core().closed_wals.numbers().is_empty(), "the flushes");
    assert!(db.core().state.lock().mem_wal > third);
}

/// A `sync_wal` that a rotation overtakes (the active WAL becomes a closed
/// one between the sync's two steps) still makes the rotated WAL durable:
/// a power cut right after it returns loses no write made before it. Each
/// seed's power loss keeps a different part of what was not synced.
#[test]
fn a_sync_overtaken_by_a_rotation_still_syncs_the_rotated_wal() {
    use crate::util::fs::FaultFs;
    const POINT: &str = "sync.wal_taken";
    for seed in 1..=8 {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new(seed);
        let opts =
            Options::default().file_system(Arc::clone(&fs) as Arc<dyn crate::util::fs::FileSystem>);
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        // No flush: the rotated WAL stays the only copy of its records.
        let _no_flush = gates::close("flush.started", dir.path());
        db.put(b"before", vec![7u8; 5000]).unwrap();
        let gate = gates::close(POINT, dir.path());
        let syncer = {
            let db = db.clone();
            std::thread::spawn(move || db.sync_wal())
        };
        assert!(gates::wait_reached(
            POINT,
            dir.path(),
            Duration::from_secs(60)
        ));
        // Rotate: the WAL holding "before" is closed.
        db.core()
            .write(WriteBatch::new(), false, true, true)
            .unwrap();
        gates::open(POINT, dir.path());
        drop(gate);
        syncer.join().unwrap().unwrap();
        fs.cut_power_now();
        drop(_no_flush);
        let _ = db.close();
        fs.apply_power_loss().unwrap();
        let db = Db::open(dir.path(), opts).unwrap();
        let got = db.get(b"before").unwrap();
        assert!(
            got.as_deref() == Some(&[7u8; 5000][..]),
            "seed {seed}: a write acknowledged before sync_wal returned is lost ({:?} bytes)",
            got.map(|v| v.len())
        );
    }
}

/// A store whose manifest records a newer format version is refused by
/// `Db::open` with `Error::Unsupported`, and left exactly as it was; the
/// same store recorded without a version (as written before versions were
/// recorded) opens, keeps its data, and is upgraded to this build's version.
#[test]
fn open_refuses_a_newer_store_format_and_upgrades_an_unversioned_one() {
    use crate::manifest::{self, ManifestState, VersionEdit, FORMAT_VERSION};
    use crate::wal::LogWriter;

    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.flush().unwrap();
    db.close().unwrap();
    let (number, state) = manifest::recover(&*crate::util::fs::real(), dir.path()).unwrap();
    assert_eq!(state.format_version, FORMAT_VERSION);

    // Rewrite the manifest in place as a build of another version would.
    let rewrite = |version: Option<u64>| {
        let mut edit: VersionEdit = state.snapshot_edit();
        edit.format_version = version;
        let path = crate::filename::manifest_path(dir.path(), number);
        let mut log = LogWriter::create(&*crate::util::fs::real(), &path).unwrap();
        log.add_record(&edit.encode()).unwrap();
        log.sync().unwrap();
    };
    let listing = || {
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let name = e.file_name().to_string_lossy().into_owned();
                (name, std::fs::read(e.path()).unwrap())
            })
            .collect();
        files.sort();
        files
    };

    rewrite(Some(FORMAT_VERSION + 1));
    let before = listing();
    match Db::open(dir.path(), Options::default()) {
        Err(Error::Unsupported {
            found, supported, ..
        }) => {
            assert_eq!((found, supported), (FORMAT_VERSION + 1, FORMAT_VERSION));
        }
        Err(other) => panic!("expected Unsupported, got {other}"),
        Ok(_) => panic!("a store of a newer format opened"),
    }
    assert_eq!(listing(), before, "a refused open changed the directory");

    rewrite(None);
    assert_eq!(
        manifest::recover(&*crate::util::fs::real(), dir.path())
            .unwrap()
            .1
            .format_version,
        0
    );
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    db.close().unwrap();
    let upgraded: ManifestState = manifest::recover(&*crate::util::fs::real(), dir.path())
        .unwrap()
        .1;
    assert_eq!(upgraded.format_version, FORMAT_VERSION);
}

/// A format-7 store (keyspaces whose registry rows hold the id alone)
/// opens with this build: its keyspaces are recovered with no option set,
/// new ones take options, and the fresh manifest upgrades it to this
/// build's format (§3: 7 → 8 needs no rewrite).
#[test]
fn a_format_7_store_opens_with_its_keyspaces_and_is_upgraded() {
    use crate::manifest::{self, VersionEdit, FORMAT_VERSION};
    use crate::wal::LogWriter;
    use crate::{Compression, KeyspaceOptions};

    assert_eq!(
        FORMAT_VERSION, 8,
        "this test writes the store of the step before"
    );
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    // What a format-7 build wrote: `keyspace` makes the 4-byte rows.
    db.keyspace("flushed").unwrap().put(b"k", b"1").unwrap();
    db.flush().unwrap();
    db.keyspace("logged").unwrap().put(b"k", b"2").unwrap();
    db.close_with(&crate::CloseOptions::new().flush(false))
        .unwrap();
    let (number, state) = manifest::recover(&*crate::util::fs::real(), dir.path()).unwrap();
    let mut edit: VersionEdit = state.snapshot_edit();
    edit.format_version = Some(7);
    let path = crate::filename::manifest_path(dir.path(), number);
    let mut log = LogWriter::create(&*crate::util::fs::real(), &path).unwrap();
    log.add_record(&edit.encode()).unwrap();
    log.sync().unwrap();
    drop(log);
    assert_eq!(
        manifest::recover(&*crate::util::fs::real(), dir.path())
            .unwrap()
            .1
            .format_version,
        7
    );

    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.keyspaces(), vec!["default", "flushed", "logged"]);
    for (name, v) in [("flushed", b"1"), ("logged", b"2")] {
        let ks = db.keyspace(name).unwrap();
        assert_eq!(ks.options(), KeyspaceOptions::new(), "{name}");
        assert_eq!(ks.get(b"k").unwrap().as_deref(), Some(&v[..]), "{name}");
    }
    let o = KeyspaceOptions::new().compression(Compression::Lz4);
    db.create_keyspace("new", o)
        .unwrap()
        .put(b"k", b"3")
        .unwrap();
    db.close().unwrap();
    let upgraded = manifest::recover(&*crate::util::fs::real(), dir.path())
        .unwrap()
        .1;
    assert_eq!(upgraded.format_version, FORMAT_VERSION);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.keyspace("new").unwrap().options(), o);
}

/// A WAL started by a rotation names the WAL before it and that WAL's
/// length (`wal::LogLink`): when the older WAL lost its last records at a
/// record boundary — a machine crash that wrote back the newer WAL's pages
/// but not the older one's — recovery stops at the hole instead of
/// replaying the newer WAL over it; with the older WAL whole, everything
/// is replayed; a link naming another WAL is corruption.
#[test]
fn recovery_stops_at_a_hole_a_wal_link_reveals() {
    use crate::batch::WriteBatch;
    use crate::wal::{LogLink, LogWriter};

    let fs = crate::util::fs::real();
    let batch = |seq: u64, k: &[u8]| {
        let mut b = WriteBatch::new();
        b.put(k, b"v");
        b.set_sequence(seq);
        b
    };
    // (older WAL cut after its first record?, a link naming a WAL this
    // many numbers past the older one instead of it)
    for (cut, named) in [(false, None), (true, None), (false, Some(500))] {
        let dir = tempfile::tempdir().unwrap();
        Db::open(dir.path(), Options::default())
            .unwrap()
            .close()
            .unwrap();
        let (_, state) = crate::manifest::recover(&*fs, dir.path()).unwrap();
        // Two WALs at and after the manifest's log number, as a rotation
        // leaves them: the older with k1, k2; the newer with its link, k3.
        let older = state.log_number;
        let newer = older + 1000;
        let path = crate::filename::wal_path(dir.path(), older);
        let mut log = LogWriter::create(&*fs, &path).unwrap();
        let first = log.add_record(batch(100, b"k1").encoded()).unwrap();
        log.add_record(batch(101, b"k2").encoded()).unwrap();
        let older_size = log.size();
        drop(log);
        let mut log =
            LogWriter::create(&*fs, &crate::filename::wal_path(dir.path(), newer)).unwrap();
        let link = LogLink {
            previous: older + named.unwrap_or(0),
            previous_size: older_size,
        };
        log.add_record(&link.encode()).unwrap();
        log.add_record(batch(102, b"k3").encoded()).unwrap();
        drop(log);
        if cut {
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(first)
                .unwrap();
        }
        let opened = Db::open(dir.path(), Options::default());
        if named.is_some() {
            match opened {
                Err(Error::Corruption { .. }) => continue,
                Err(e) => panic!("a link naming another WAL: expected Corruption, got {e}"),
                Ok(_) => panic!("a link naming another WAL opened"),
            }
        }
        let db = opened.unwrap();
        let got: Vec<_> = [&b"k1"[..], b"k2", b"k3"]
            .iter()
            .map(|k| db.get(k).unwrap().is_some())
            .collect();
        let want = if cut {
            [true, false, false] // k3 would follow a hole: dropped with it
        } else {
            [true, true, true]
        };
        assert_eq!(got, want, "older WAL cut: {cut}");
    }
}

/// Waits (up to a minute) until the stats of `db` are `done`, naming
/// `what` if they never are. A job is counted as run when it returns, a
/// little after the install that `flush` and `compact` wait for and the
/// count of completed jobs it adds to.
fn wait_for_stats(db: &Db, what: &str, done: impl Fn(&Stats) -> bool) -> Stats {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let s = db.stats();
        if done(&s) {
            return s;
        }
        assert!(std::time::Instant::now() < deadline, "never {what}: {s:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Each kind of background job counts its runs, the bytes it wrote (the
/// matching `*_bytes_written`) and the time it ran; kinds that did not
/// run read zero.
#[test]
fn stats_count_each_background_job_with_its_bytes_and_time() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .write_buffer_size(64 << 10)
        .unsorted_limit(256 << 10)
        .min_blob_size(64)
        .values_in_wal(false);
    let db = Db::open(dir.path(), opts).unwrap();
    for i in 0..4000u32 {
        db.put(format!("key{i:06}"), [b'v'; 200]).unwrap();
    }
    db.compact().unwrap();
    let s = wait_for_stats(&db, "every completed job counted as run", |s| {
        s.background_job(JobKind::Flush).count >= s.flushes
            && s.background_job(JobKind::Merge).count >= s.merges
    });
    let kinds: Vec<JobKind> = s.background_jobs.iter().map(|(k, _)| *k).collect();
    assert_eq!(kinds, JobKind::ALL);

    let flush = s.background_job(JobKind::Flush);
    assert!(s.flushes >= 1 && flush.count >= s.flushes, "{s:?}");
    assert_eq!(flush.bytes_written, s.flush_bytes_written);
    assert!(flush.bytes_written > 0, "{flush:?}");
    assert!(flush.running > Duration::ZERO, "{flush:?}");
    assert!(flush.queued > Duration::ZERO, "{flush:?}");

    let merge = s.background_job(JobKind::Merge);
    assert!(s.merges >= 1 && merge.count >= s.merges, "{s:?}");
    assert_eq!(
        merge.bytes_written,
        s.merge_bytes_written + s.value_log_bytes_written
    );
    assert!(s.merge_bytes_written > 0 && s.value_log_bytes_written > 0);
    assert!(merge.running > Duration::ZERO, "{merge:?}");

    let checkpoint = s.background_job(JobKind::IndexCheckpoint);
    assert!(checkpoint.count >= 1, "{s:?}");
    assert!(checkpoint.bytes_written > 0, "{checkpoint:?}");
    assert!(checkpoint.running > Duration::ZERO, "{checkpoint:?}");

    for kind in [JobKind::Gc, JobKind::Split, JobKind::Consolidation] {
        assert_eq!(
            s.background_job(kind),
            BackgroundJobStats::default(),
            "{}",
            kind.name()
        );
    }
}

/// A flush waiting behind another counts the wait as queued, from when
/// its memtable became immutable; the held flush counts it as running.
#[test]
fn stats_count_a_flush_held_behind_another_as_queued() {
    const POINT: &str = "manifest.append";
    let held = Duration::from_millis(50);
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let _gate = gates::close(POINT, dir.path());
    let rotate = || {
        db.core()
            .write(WriteBatch::new(), false, true, true)
            .unwrap()
    };
    db.put(b"a", b"first").unwrap();
    rotate();
    wait_at_gate(POINT, dir.path(), &db);
    db.put(b"b", b"second").unwrap();
    rotate();
    std::thread::sleep(held);
    gates::open(POINT, dir.path());
    db.flush().unwrap();
    let s = wait_for_stats(&db, "two flushes counted", |s| {
        s.background_job(JobKind::Flush).count >= 2
    });
    let flush = s.background_job(JobKind::Flush);
    assert_eq!(flush.count, 2, "{s:?}");
    assert!(flush.queued >= held, "{flush:?}");
    assert!(flush.running >= held, "{flush:?}");
}

/// Bytes of the files in `dir` by kind, as a listing by the test sees them.
fn disk_usage_listed(dir: &Path) -> DiskUsage {
    use crate::filename::{parse_file_name, FileKind};
    let mut usage = DiskUsage::default();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let size = entry.metadata().unwrap().len();
        let slot = match parse_file_name(&entry.file_name().to_string_lossy()) {
            Some(FileKind::Table(_)) => &mut usage.tables,
            Some(FileKind::ValueLog(_)) => &mut usage.value_logs,
            Some(FileKind::Wal(_)) => &mut usage.wals,
            Some(FileKind::Manifest(_) | FileKind::Current) => &mut usage.manifest,
            Some(FileKind::IndexCheckpoint(_)) => &mut usage.index_checkpoints,
            _ => &mut usage.other,
        };
        *slot += size;
    }
    usage
}

/// The disk figures are the directory's files by kind; the live estimate
/// and the partition's size are those of its tables and value logs, less
/// the garbage an overwrite left in the logs.
#[test]
fn stats_show_space_on_disk_live_data_and_partition_size() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .write_buffer_size(64 << 10)
        .unsorted_limit(256 << 10)
        .min_blob_size(64)
        .values_in_wal(false)
        .partition_size(64 << 20)
        .gc_min_garbage_bytes(u64::MAX);
    let db = Db::open(dir.path(), opts).unwrap();
    for round in 0..2u8 {
        for i in 0..2000u32 {
            if round == 0 || i % 2 == 0 {
                db.put(format!("key{i:06}"), [b'a' + round; 200]).unwrap();
            }
        }
        db.compact().unwrap();
    }
    // A listing taken just before and just after the stats, unchanged, is
    // what the stats listed (a background deletion may fall in between).
    let (s, listed) = (0..100)
        .find_map(|_| {
            let before = disk_usage_listed(dir.path());
            let s = db.stats();
            (disk_usage_listed(dir.path()) == before).then_some((s, before))
        })
        .expect("the directory never stood still");
    assert_eq!(s.disk, listed);
    assert!(s.disk.wals > 0 && s.disk.manifest > 0, "{:?}", s.disk);
    assert!(s.disk.index_checkpoints > 0, "{:?}", s.disk);

    assert_eq!(s.partition_size, 64 << 20);
    assert_eq!(s.partitions.len(), 1, "{s:?}");
    let p = &s.partitions[0];
    assert!(p.sorted_bytes > 0 && p.value_log_bytes > 0, "{p:?}");
    assert!(
        p.value_log_garbage_bytes > 0 && p.value_log_garbage_bytes < p.value_log_bytes,
        "{p:?}"
    );
    let live_logs = p.value_log_bytes - p.value_log_garbage_bytes;
    assert_eq!(p.size_bytes, p.sorted_bytes + live_logs);
    assert_eq!(
        s.live_bytes_estimate,
        p.unsorted_bytes + p.sorted_bytes + live_logs
    );
    assert!(s.disk.tables >= p.unsorted_bytes + p.sorted_bytes);
    assert!(s.disk.value_logs >= p.value_log_bytes);
    assert!(s.disk.total() > s.live_bytes_estimate);
    assert!(s.space_amplification() > 1.0, "{s:?}");
}

/// A close that begins while an unlogged write holds its sequence but has
/// not inserted it yet (the memtable still empty) waits for the insert and
/// flushes the write: a close that judged the memtable by its emptiness
/// alone would skip the flush and lose an acknowledged write.
#[test]
fn a_close_waits_for_an_unlogged_write_in_flight_and_flushes_it() {
    const POINT: &str = "write.unlogged_appended";
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let gate = gates::close(POINT, dir.path());
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || db.put_opt("k", "v", &WriteOptions::new().disable_wal(true)))
    };
    wait_at_gate(POINT, dir.path(), &db);
    let closer = {
        let db = db.clone();
        std::thread::spawn(move || db.close())
    };
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !closer.is_finished(),
        "the close ended while a write with a sequence was not inserted yet"
    );
    drop(gate);
    writer.join().unwrap().unwrap();
    closer.join().unwrap().unwrap();
    drop(db);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"v"[..]));
}
