//! Per-keyspace options (`Db::create_keyspace`, `KeyspaceOptions`, DESIGN
//! §4.14): each keyspace's blocks stored with its own codec per layer (read
//! from the tables' block type bytes), its values kept inline or separated
//! by its own threshold and stored with its own value-log codec (read from
//! the tables' entries and value pointers), and the options recovered
//! after a reopen, a power cut, a read-only open and its refresh, a
//! checkpoint and a backup restore; `create_keyspace` on an existing name
//! with other options fails and changes nothing.

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use common::*;
use weft::internals::fs::{FaultFs, FileSystem};
use weft::internals::fuzz::{read_table, table_data_blocks, ValueKind, ValuePointer};
use weft::{Compression, Db, Error, Keyspace, KeyspaceOptions, Options, WriteOptions};

const RESERVED: &[u8] = b"\xffWKS";

/// The options of a keyspace created after the last sync.
fn late() -> KeyspaceOptions {
    KeyspaceOptions::new().min_blob_size(5)
}

/// The keyspace id of a stored key (0: the default keyspace, or the
/// registry's rows, which are written with the default's options).
fn id_of(stored: &[u8]) -> u32 {
    match stored.strip_prefix(RESERVED) {
        Some(rest) if rest.len() >= 4 => u32::from_be_bytes(rest[..4].try_into().unwrap()),
        _ => 0,
    }
}

/// A compressible value: text, as a real one would be.
fn value(ks: &str, i: u32, len: usize) -> Vec<u8> {
    let mut v = format!("{ks}:{i}:").into_bytes();
    while v.len() < len {
        v.extend_from_slice(b"field=value; ");
    }
    v.truncate(len);
    v
}

fn key(i: u32) -> String {
    format!("key{i:05}")
}

/// The block type bytes found for each keyspace id across the tables of
/// `dir`; fails if any block holds keys of two keyspaces whose codecs the
/// test set apart (`apart`).
fn block_types(dir: &Path, apart: &BTreeSet<u32>, ctx: &str) -> BTreeMap<u32, BTreeSet<u8>> {
    let mut types: BTreeMap<u32, BTreeSet<u8>> = BTreeMap::new();
    for path in sst_files(dir) {
        for (block_type, keys) in table_data_blocks(&path, file_len(&path)).unwrap() {
            let ids: BTreeSet<u32> = keys.iter().map(|k| id_of(k)).collect();
            if ids.len() > 1 {
                assert!(
                    ids.is_disjoint(apart),
                    "{ctx}: a block of {} holds keys of keyspaces {ids:?}",
                    path.display()
                );
            }
            for id in ids {
                types.entry(id).or_default().insert(block_type);
            }
        }
    }
    types
}

/// Closes `db` and opens and closes the directory once more, so that only
/// the live tables are left in it (the open removes the obsolete ones).
fn settle(db: Db, dir: &Path, opts: &Options) {
    db.close().unwrap();
    Db::open(dir, opts.clone()).unwrap().close().unwrap();
}

fn check_values(ks: &Keyspace, name: &str, n: u32, len: usize, ctx: &str) {
    for i in 0..n {
        assert_eq!(
            ks.get(key(i)).unwrap(),
            Some(value(name, i, len)),
            "{ctx}: {name}/{}",
            key(i)
        );
    }
    assert_eq!(
        ks.range::<&str, _>(..).unwrap().count(),
        n as usize,
        "{ctx}: {name} scan"
    );
}

/// Two keyspaces beside the default one and one made by `keyspace`: one
/// with zstd in both table layers, one with LZ4 for UnsortedStore tables
/// only, one with no compression where the database compresses its
/// SortedStore with LZ4. Each block read back from the tables carries its
/// keyspace's codec for its layer, and no block mixes keyspaces whose
/// codecs differ.
#[test]
fn each_keyspace_s_blocks_are_stored_with_its_own_codec() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .block_size(1024)
        .sorted_compression(Compression::Lz4);
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    let z = db
        .create_keyspace(
            "z",
            KeyspaceOptions::new()
                .unsorted_compression(Compression::ZSTD)
                .sorted_compression(Compression::ZSTD),
        )
        .unwrap();
    let u = db
        .create_keyspace(
            "u",
            KeyspaceOptions::new().unsorted_compression(Compression::Lz4),
        )
        .unwrap();
    let n = db
        .create_keyspace(
            "n",
            KeyspaceOptions::new().sorted_compression(Compression::None),
        )
        .unwrap();
    let p = db.keyspace("p").unwrap();
    let handles = [("z", &z), ("u", &u), ("n", &n), ("p", &p)];
    const N: u32 = 400;
    for i in 0..N {
        db.put(key(i), value("default", i, 200)).unwrap();
        for (name, ks) in handles {
            ks.put(key(i), value(name, i, 200)).unwrap();
        }
    }
    let apart: BTreeSet<u32> = [z.id(), u.id(), n.id()].into();
    // One flush, no merge yet: UnsortedStore tables only.
    db.flush().unwrap();
    let flushed = block_types(dir.path(), &apart, "after the flush");
    assert_eq!(
        flushed[&z.id()],
        BTreeSet::from([2]),
        "z: zstd when flushed"
    );
    assert_eq!(flushed[&u.id()], BTreeSet::from([1]), "u: LZ4 when flushed");
    assert_eq!(
        flushed[&n.id()],
        BTreeSet::from([0]),
        "n: the database's none"
    );
    assert_eq!(
        flushed[&p.id()],
        BTreeSet::from([0]),
        "p: the database's none"
    );
    assert_eq!(flushed[&0], BTreeSet::from([0]), "default: none");

    db.compact().unwrap();
    settle(db, dir.path(), &opts);
    let merged = block_types(dir.path(), &apart, "after the merge");
    assert_eq!(merged[&z.id()], BTreeSet::from([2]), "z: zstd when merged");
    assert_eq!(
        merged[&u.id()],
        BTreeSet::from([1]),
        "u: the database's LZ4"
    );
    assert_eq!(merged[&n.id()], BTreeSet::from([0]), "n: none when merged");
    assert_eq!(
        merged[&p.id()],
        BTreeSet::from([1]),
        "p: the database's LZ4"
    );
    // The default keyspace's last block may hold the registry's few short
    // rows alone, too short to compress.
    assert!(merged[&0].contains(&1), "default: LZ4 when merged");

    let db = Db::open(dir.path(), opts).unwrap();
    for name in ["z", "u", "n", "p"] {
        let ks = db.keyspace(name).unwrap();
        check_values(&ks, name, N, 200, "reopened");
    }
    assert_eq!(
        db.keyspace("z").unwrap().options(),
        KeyspaceOptions::new()
            .unsorted_compression(Compression::ZSTD)
            .sorted_compression(Compression::ZSTD)
    );
    assert!(db.verify_checksums().unwrap().files > 0);
}

/// Entries of the live tables of `dir` for keyspace `id`: each kind, and
/// the value pointer's codec where it is one.
fn entries_of(dir: &Path, id: u32) -> Vec<(ValueKind, Option<u8>)> {
    let mut out = Vec::new();
    for path in sst_files(dir) {
        let read = read_table(&path, file_len(&path), false, &[], usize::MAX).unwrap();
        for (k, _, kind, v) in read.forward {
            if id_of(&k) != id || (id == 0 && k.starts_with(RESERVED)) {
                continue;
            }
            let codec =
                (kind == ValueKind::Pointer).then(|| ValuePointer::decode(&v).unwrap().codec);
            out.push((kind, codec));
        }
    }
    out
}

/// What every entry of a keyspace is: all inline puts, or all pointers
/// with one codec.
#[derive(Debug, PartialEq, Eq)]
enum Placed {
    Inline,
    Separated(u8),
}

fn placed(dir: &Path, id: u32, ctx: &str) -> Placed {
    let entries = entries_of(dir, id);
    assert!(!entries.is_empty(), "{ctx}: no entry of keyspace {id}");
    assert!(
        entries.iter().all(|e| *e == entries[0]),
        "{ctx}: keyspace {id} mixes {:?} and others",
        entries[0]
    );
    match entries[0] {
        (ValueKind::Put, None) => Placed::Inline,
        (ValueKind::Pointer, Some(codec)) => Placed::Separated(codec),
        other => panic!("{ctx}: keyspace {id}: {other:?}"),
    }
}

/// The blob threshold and the value-log codec per keyspace: with the
/// database separating values of 64 bytes and more (and logging them in
/// the WAL), a keyspace with `min_blob_size = usize::MAX` keeps its large
/// values inline through the flush and the merge; one without
/// `values_in_wal` keeps them inline in the flush and has them separated
/// by the merge; one with zstd for its value logs gets compressed records
/// in the WAL already. And the other way round: a database that separates
/// nothing, with one keyspace that does.
#[test]
fn each_keyspace_s_values_are_placed_by_its_own_threshold_and_codec() {
    const N: u32 = 60;
    const LEN: usize = 1000;
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default().min_blob_size(64);
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    let inline = db
        .create_keyspace("inline", KeyspaceOptions::new().min_blob_size(usize::MAX))
        .unwrap();
    let late = db
        .create_keyspace("late", KeyspaceOptions::new().values_in_wal(false))
        .unwrap();
    let vz = db
        .create_keyspace(
            "vz",
            KeyspaceOptions::new().value_log_compression(Compression::ZSTD),
        )
        .unwrap();
    let handles = [("inline", &inline), ("late", &late), ("vz", &vz)];
    for i in 0..N {
        db.put(key(i), value("default", i, LEN)).unwrap();
        for (name, ks) in handles {
            ks.put(key(i), value(name, i, LEN)).unwrap();
        }
    }
    db.flush().unwrap();
    let d = dir.path();
    assert_eq!(placed(d, 0, "flushed default"), Placed::Separated(0));
    assert_eq!(placed(d, inline.id(), "flushed inline"), Placed::Inline);
    assert_eq!(placed(d, late.id(), "flushed late"), Placed::Inline);
    assert_eq!(placed(d, vz.id(), "flushed vz"), Placed::Separated(2));
    db.compact().unwrap();
    settle(db, d, &opts);
    assert_eq!(placed(d, 0, "merged default"), Placed::Separated(0));
    assert_eq!(placed(d, inline.id(), "merged inline"), Placed::Inline);
    assert_eq!(placed(d, late.id(), "merged late"), Placed::Separated(0));
    assert_eq!(placed(d, vz.id(), "merged vz"), Placed::Separated(2));
    let db = Db::open(d, opts).unwrap();
    check_values(
        &db.keyspace("default").unwrap(),
        "default",
        N,
        LEN,
        "reopened",
    );
    for (name, _) in handles {
        check_values(&db.keyspace(name).unwrap(), name, N, LEN, "reopened");
    }
    db.close().unwrap();

    // A database that keeps every value inline, and one keyspace that
    // separates (and so logs in the WAL) its large values.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let opts = Options::default().min_blob_size(usize::MAX);
    let db = Db::open(d, opts.clone()).unwrap();
    let blobs = db
        .create_keyspace("blobs", KeyspaceOptions::new().min_blob_size(64))
        .unwrap();
    for i in 0..N {
        db.put(key(i), value("default", i, LEN)).unwrap();
        blobs.put(key(i), value("blobs", i, LEN)).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(placed(d, 0, "flushed default"), Placed::Inline);
    assert_eq!(placed(d, blobs.id(), "flushed blobs"), Placed::Separated(0));
    db.compact().unwrap();
    settle(db, d, &opts);
    assert_eq!(placed(d, 0, "merged default"), Placed::Inline);
    assert_eq!(placed(d, blobs.id(), "merged blobs"), Placed::Separated(0));
    let db = Db::open(d, opts).unwrap();
    check_values(&db.keyspace("blobs").unwrap(), "blobs", N, LEN, "reopened");
}

/// `create_keyspace` on a name that exists: the same options give the same
/// keyspace, other options fail with `InvalidArgument` naming it and
/// change nothing; `keyspace` opens it with its own options; the default
/// keyspace takes none; a bad option is refused before anything is
/// written.
#[test]
fn create_keyspace_refuses_other_options_for_an_existing_name() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let o = KeyspaceOptions::new()
        .compression(Compression::ZSTD)
        .min_blob_size(1000);
    let a = db.create_keyspace("a", o).unwrap();
    a.put("k", "v").unwrap();
    assert_eq!(db.create_keyspace("a", o).unwrap().id(), a.id());
    match db.create_keyspace("a", o.min_blob_size(10)) {
        Err(Error::InvalidArgument(msg)) => {
            assert!(
                msg.contains("\"a\"") && msg.contains("other options"),
                "{msg}"
            )
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    assert!(matches!(
        db.create_keyspace("a", KeyspaceOptions::new()),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(db.keyspace("a").unwrap().options(), o);
    assert_eq!(
        db.keyspace("a").unwrap().get("k").unwrap().as_deref(),
        Some(&b"v"[..])
    );
    // A keyspace made by `keyspace` has none set, and `create_keyspace`
    // with none set opens it.
    let plain = db.keyspace("plain").unwrap();
    assert_eq!(plain.options(), KeyspaceOptions::new());
    assert_eq!(
        db.create_keyspace("plain", KeyspaceOptions::new())
            .unwrap()
            .id(),
        plain.id()
    );
    assert!(matches!(
        db.create_keyspace("default", o),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(
        db.create_keyspace("default", KeyspaceOptions::new())
            .unwrap()
            .id(),
        0
    );
    assert!(matches!(
        db.create_keyspace("zero", KeyspaceOptions::new().min_blob_size(0)),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(db.keyspaces(), vec!["default", "a", "plain"]);
}

/// Options set on keyspaces (one of each kind) and their data survive a
/// simulated power cut after a `sync_wal` (the creates only in the WAL),
/// and a reopen after a flush; the recovered options are applied again
/// (a merge after the recovery stores each keyspace with its own codec);
/// a read-only open sees them and its refresh sees a keyspace created
/// since; a checkpoint and a restored backup carry them.
#[test]
fn options_are_recovered_after_a_power_cut_and_carried_by_copies() {
    let fs = FaultFs::new(7);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let opts = Options::default()
        .block_size(1024)
        .file_system(Arc::clone(&fs) as Arc<dyn FileSystem>);
    let specs = [
        (
            "zstd",
            KeyspaceOptions::new().compression(Compression::ZSTD),
        ),
        (
            "lz4-inline",
            KeyspaceOptions::new()
                .sorted_compression(Compression::Lz4)
                .min_blob_size(usize::MAX),
        ),
        (
            "no-wal",
            KeyspaceOptions::new()
                .values_in_wal(false)
                .min_blob_size(100)
                .value_log_compression(Compression::Zstd(-1)),
        ),
        ("plain", KeyspaceOptions::new()),
    ];
    const N: u32 = 200;
    {
        let db = Db::open(d, opts.clone()).unwrap();
        for (name, o) in specs {
            let ks = db.create_keyspace(name, o).unwrap();
            for i in 0..N {
                ks.put(key(i), value(name, i, 300)).unwrap();
            }
        }
        db.sync_wal().unwrap();
        // Written after the sync: kept or lost with the power, whole.
        db.create_keyspace("late", late()).unwrap();
        fs.cut_power_now();
        let _ = db.close();
        fs.apply_power_loss().unwrap();
    }
    let check = |db: &Db, ctx: &str| {
        let mut names: Vec<String> = specs.iter().map(|(n, _)| n.to_string()).collect();
        let mut listed = db.keyspaces();
        if listed.iter().any(|n| n == "late") {
            assert_eq!(db.keyspace("late").unwrap().options(), late(), "{ctx}");
            listed.retain(|n| n != "late");
        }
        names.sort();
        names.insert(0, "default".into());
        assert_eq!(listed, names, "{ctx}");
        for (name, o) in specs {
            let ks = db.keyspace(name).unwrap();
            assert_eq!(ks.options(), o, "{ctx}: {name}'s options");
            check_values(&ks, name, N, 300, ctx);
        }
    };
    let db = Db::open(d, opts.clone()).unwrap();
    check(&db, "after the power cut");
    // The recovered options are applied: a merge now stores "zstd" with zstd.
    db.compact().unwrap();
    settle(db, d, &opts);
    let zstd_id = Db::open(d, opts.clone())
        .unwrap()
        .keyspace("zstd")
        .unwrap()
        .id();
    let types = block_types(d, &BTreeSet::from([zstd_id]), "merged after recovery");
    assert_eq!(types[&zstd_id], BTreeSet::from([2]));

    let db = Db::open(d, opts.clone()).unwrap();
    check(&db, "after a clean reopen");

    // A read-only open beside the writer, and its refresh.
    let reader = Db::open_read_only(d, opts.clone()).unwrap();
    check(&reader, "read-only");
    let later = KeyspaceOptions::new().unsorted_compression(Compression::Lz4);
    db.create_keyspace("later", later).unwrap();
    assert!(
        reader.keyspace("later").is_err(),
        "a read-only Db creates nothing"
    );
    reader.refresh().unwrap();
    assert_eq!(reader.keyspace("later").unwrap().options(), later);

    // A checkpoint and a backup carry the registry rows, options included.
    let copies = tempfile::tempdir().unwrap();
    let checkpoint = copies.path().join("checkpoint");
    db.checkpoint(&checkpoint).unwrap();
    let engine = weft::BackupEngine::open(copies.path().join("backups")).unwrap();
    let id = engine.create_backup(&db).unwrap();
    let restored = copies.path().join("restored");
    engine.restore(id, &restored).unwrap();
    db.close().unwrap();
    for copy in [&checkpoint, &restored] {
        let db = Db::open(copy, Options::default()).unwrap();
        for (name, o) in specs {
            assert_eq!(
                db.keyspace(name).unwrap().options(),
                o,
                "{}",
                copy.display()
            );
        }
        assert_eq!(db.keyspace("later").unwrap().options(), later);
        check_values(&db.keyspace("zstd").unwrap(), "zstd", N, 300, "copy");
    }
}

/// A keyspace's write with `disable_wal` never logs its value in the WAL,
/// whatever its options say (`values_in_wal` applies to logged writes).
#[test]
fn unlogged_writes_to_a_logging_keyspace_stay_inline_until_merged() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let opts = Options::default().min_blob_size(usize::MAX);
    let db = Db::open(d, opts).unwrap();
    let ks = db
        .create_keyspace("blobs", KeyspaceOptions::new().min_blob_size(64))
        .unwrap();
    for i in 0..20 {
        ks.put_opt(
            key(i),
            value("blobs", i, 500),
            &WriteOptions::new().disable_wal(true),
        )
        .unwrap();
    }
    db.flush().unwrap();
    assert_eq!(placed(d, ks.id(), "flushed"), Placed::Inline);
    check_values(&ks, "blobs", 20, 500, "flushed");
}

/// An error about a key of a keyspace quotes the key as the keyspace
/// knows it (without the stored prefix), names the keyspace, and states
/// the keyspace's own limits.
#[test]
fn errors_about_a_keyspace_s_keys_name_it_and_quote_its_keys() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let ks = db.keyspace("users").unwrap();
    let msg = ks.delete_range("m", "a").unwrap_err().to_string();
    assert!(
        msg.contains("\"m\" is past its end \"a\" in keyspace \"users\""),
        "{msg}"
    );
    assert!(!msg.contains("WKS"), "{msg}");
    let mut batch = weft::WriteBatch::new();
    let long = vec![b'k'; weft::MAX_KEY_SIZE - 7];
    batch.put_in(&ks, &long, "v");
    let msg = db
        .write(batch, &WriteOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains(&format!(
            "key of {} bytes in keyspace \"users\" exceeds the limit of {} bytes",
            long.len(),
            weft::MAX_KEY_SIZE - 8
        )),
        "{msg}"
    );
    // Through a batch.
    let mut batch = weft::WriteBatch::new();
    batch.delete_range_in(&ks, "z", "b");
    let msg = db
        .write(batch, &WriteOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("\"z\" is past its end \"b\" in keyspace \"users\""),
        "{msg}"
    );
}

/// The change feed reports a create with the options it was made with,
/// so a consumer can create the keyspace alike.
#[test]
fn the_change_feed_reports_a_create_s_options() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let from = db.snapshot().sequence() + 1;
    let o = KeyspaceOptions::new()
        .compression(Compression::Zstd(5))
        .values_in_wal(false);
    db.create_keyspace("a", o).unwrap();
    db.keyspace("b").unwrap();
    let mut created = Vec::new();
    for group in db.changes_from(from, weft::FeedLimit::Visible).unwrap() {
        for op in group.unwrap().ops() {
            if let weft::KeyspaceOp::Created { name, options, .. } = op.keyspace_op() {
                created.push((name.to_string(), options));
            }
        }
    }
    assert_eq!(
        created,
        vec![
            ("a".to_string(), o),
            ("b".to_string(), KeyspaceOptions::new())
        ]
    );
}
