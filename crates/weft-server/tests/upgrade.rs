//! Data format 0 → 1 at open (`docs/DESIGN.md` §1.9, "Format versions"):
//! a directory written in today's format 0 (hashes without a version,
//! fields under `h`, no format record), including the state a crash in
//! the middle of an upgrade leaves, opens with every key, value, field
//! and deadline intact; a directory of a newer format is refused with
//! nothing written.

// A test (or benchmark) fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;

use common::TestServer;
use redis::Commands;
use weft::{Db, Options, WriteBatch, WriteOptions};
use weft_server::encoding::{self, Kind, Meta};
use weft_server::{Config, Server};

fn q<T: redis::FromRedisValue>(c: &mut redis::Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap()
}

/// Writes a format-0 hash as format 0's server wrote it: metadata tag 2
/// with the field count, fields under `h`, the expiry index.
fn legacy_hash(b: &mut WriteBatch, key: &str, fields: &[(String, String)], expire_at: Option<u64>) {
    b.put(
        encoding::meta_key(key.as_bytes()),
        encoding::encode_legacy_hash(fields.len() as u64, expire_at),
    );
    for (f, v) in fields {
        b.put(encoding::legacy_field_key(key.as_bytes(), f.as_bytes()), v);
    }
    if let Some(t) = expire_at {
        b.put(encoding::expiry_key(t, key.as_bytes()), b"");
    }
}

fn fields(prefix: &str, n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| (format!("{prefix}{i:05}"), format!("value-{i}")))
        .collect()
}

/// The records of namespace `ns` of every version of `key`, by version.
fn versions(db: &Db, ns: u8, key: &str) -> BTreeMap<u64, usize> {
    let prefix = encoding::key_prefix(ns, key.as_bytes());
    let mut out = BTreeMap::new();
    for kv in db.prefix(&prefix).unwrap() {
        let (k, _) = kv.unwrap();
        let v = u64::from_be_bytes(k[prefix.len()..prefix.len() + 8].try_into().unwrap());
        *out.entry(v).or_default() += 1;
    }
    out
}

#[test]
fn a_format_0_directory_is_upgraded_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let far = 4_000_000_000_000u64; // a deadline in 2096
    let big = fields("f", 5000);
    let small = fields("g", 3);
    let mid = fields("h", 300);
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let mut b = WriteBatch::new();
        b.put(
            encoding::meta_key(b"s1"),
            encoding::encode_string(b"v1", None),
        );
        b.put(
            encoding::meta_key(b"s2"),
            encoding::encode_string(b"v2", Some(far)),
        );
        b.put(encoding::expiry_key(far, b"s2"), b"");
        legacy_hash(&mut b, "small", &small, None);
        legacy_hash(&mut b, "ttl", &small, Some(far));
        legacy_hash(&mut b, "mid", &mid, None);
        legacy_hash(&mut b, "big", &big, None);
        // The state a crash mid-upgrade leaves: one hash already moved
        // (format-1 metadata and fields) ...
        let mut done = Meta::new_collection(Kind::Hash, 77);
        done.count = 2;
        b.put(encoding::meta_key(b"done"), done.encode());
        for (f, v) in &small[..2] {
            b.put(
                encoding::element_key(encoding::HASH, b"done", 77, f.as_bytes()),
                v,
            );
        }
        // ... and fields a crashed attempt at the big one wrote under a
        // version no metadata names.
        for (f, _) in &big[..10] {
            b.put(
                encoding::element_key(encoding::HASH, b"big", 5, f.as_bytes()),
                "stale",
            );
        }
        db.write(b, &WriteOptions::new().sync(true)).unwrap();
        db.close().unwrap();
    }

    for round in 0..2 {
        let s = TestServer::at(dir.path(), |_| {});
        let mut c = s.conn();
        assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 7, "round {round}");
        assert_eq!(c.get::<_, String>("s1").unwrap(), "v1");
        assert_eq!(c.get::<_, String>("s2").unwrap(), "v2");
        assert!(c.ttl::<_, i64>("s2").unwrap() > 0);
        for (key, want) in [
            ("small", &small[..]),
            ("ttl", &small[..]),
            ("mid", &mid[..]),
            ("big", &big[..]),
            ("done", &small[..2]),
        ] {
            let got: Vec<(String, String)> = c.hgetall(key).unwrap();
            assert_eq!(got, want, "round {round}: {key}");
            assert_eq!(c.hlen::<_, usize>(key).unwrap(), want.len());
            assert_eq!(q::<String>(&mut c, &["TYPE", key]), "hash");
        }
        assert!(c.ttl::<_, i64>("ttl").unwrap() > 0);
        assert_eq!(c.ttl::<_, i64>("small").unwrap(), -1);
        assert_eq!(
            c.hget::<_, _, String>("big", "f04999").unwrap(),
            "value-4999"
        );
        if round == 0 {
            // The upgraded hashes take writes and the new types work.
            assert_eq!(c.hset::<_, _, _, i64>("small", "new", "1").unwrap(), 1);
            assert_eq!(c.hdel::<_, _, i64>("small", "new").unwrap(), 1);
            assert_eq!(c.rpush::<_, _, i64>("list", "x").unwrap(), 1);
            assert_eq!(c.del::<_, i64>("list").unwrap(), 1);
        }
        drop(c);
        s.stop().unwrap();
    }

    // No format-0 field is left, and each hash's fields are of the one
    // version its metadata names (the crashed attempt's are gone).
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.prefix([encoding::LEGACY_HASH]).unwrap().count(), 0);
    let record = db
        .get(encoding::system_key(encoding::FORMAT_RECORD))
        .unwrap();
    assert_eq!(
        record.as_deref(),
        Some(&encoding::FORMAT_VERSION.to_be_bytes()[..])
    );
    for (key, n) in [("small", 3), ("big", 5000), ("mid", 300), ("done", 2)] {
        let raw = db.get(encoding::meta_key(key.as_bytes())).unwrap().unwrap();
        let (meta, _) = encoding::decode(&raw).unwrap();
        assert_eq!(meta.count, n);
        let vs = versions(&db, encoding::HASH, key);
        assert_eq!(vs, BTreeMap::from([(meta.version, n as usize)]), "{key}");
    }
    db.close().unwrap();
}

#[test]
fn a_newer_format_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let mut b = WriteBatch::new();
        b.put(
            encoding::system_key(encoding::FORMAT_RECORD),
            (encoding::FORMAT_VERSION + 1).to_be_bytes(),
        );
        b.put(encoding::meta_key(b"k"), [42u8, 1, 2, 3]);
        db.write(b, &WriteOptions::new().sync(true)).unwrap();
        db.close().unwrap();
    }
    let mut config = Config::default();
    config.port = 0;
    config.dir = dir.path().to_path_buf();
    let e = match Server::bind(config) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a newer data format was opened"),
    };
    assert!(
        e.contains("data format 2") && e.contains("newer weft"),
        "unclear error: {e}"
    );
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(
        db.get(encoding::system_key(encoding::FORMAT_RECORD))
            .unwrap()
            .as_deref(),
        Some(&(encoding::FORMAT_VERSION + 1).to_be_bytes()[..])
    );
    assert_eq!(
        db.get(encoding::meta_key(b"k")).unwrap().as_deref(),
        Some(&[42u8, 1, 2, 3][..])
    );
    db.close().unwrap();
}
