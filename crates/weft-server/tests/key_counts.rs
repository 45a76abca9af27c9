//! `DBSIZE` and `INFO keyspace` come from counters every write keeps. A
//! random mix of every command that creates, replaces or deletes keys or
//! deadlines, checked after each step against a model of the key space
//! and against a full listing (`KEYS *` and `TTL`), then after a restart.

// A test (or benchmark) fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;

use common::{Raw, TestServer, V};
use rand::{Rng, SeedableRng};

/// What the model knows of a key: its type and whether it has a deadline.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Str { ttl: bool },
    Hash { fields: u32, ttl: bool },
}

fn counts(r: &mut Raw) -> (i64, i64) {
    let V::Int(n) = r.cmd(&["DBSIZE"]) else {
        panic!("DBSIZE is not an integer");
    };
    let V::Bulk(info) = r.cmd(&["INFO", "keyspace"]) else {
        panic!("INFO keyspace is not a bulk string");
    };
    let info = String::from_utf8(info).unwrap();
    let (keys, expires) = match info.lines().find_map(|l| l.strip_prefix("db0:")) {
        None => (0, 0),
        Some(l) => {
            let field = |name: &str| -> i64 {
                l.split(',')
                    .find_map(|kv| kv.strip_prefix(name))
                    .unwrap()
                    .parse()
                    .unwrap()
            };
            (field("keys="), field("expires="))
        }
    };
    assert_eq!(n, keys, "DBSIZE and INFO keyspace disagree");
    (keys, expires)
}

/// The counts from a full listing: every key, and those whose TTL is set.
fn listed(r: &mut Raw) -> (i64, i64) {
    let V::Array(keys) = r.cmd(&["KEYS", "*"]) else {
        panic!("KEYS is not an array");
    };
    let mut expires = 0;
    for k in &keys {
        let V::Bulk(k) = k else { panic!("{k:?}") };
        let k = String::from_utf8(k.clone()).unwrap();
        match r.cmd(&["TTL", &k]) {
            V::Int(t) if t >= 0 => expires += 1,
            V::Int(-1) => {}
            other => panic!("TTL {k}: {other:?}"),
        }
    }
    (keys.len() as i64, expires)
}

fn model_counts(m: &BTreeMap<String, Kind>) -> (i64, i64) {
    let ttl = m
        .values()
        .filter(|k| matches!(k, Kind::Str { ttl: true } | Kind::Hash { ttl: true, .. }))
        .count();
    (m.len() as i64, ttl as i64)
}

fn ok(v: V) {
    assert!(
        matches!(v, V::Simple(_) | V::Int(_) | V::Bulk(_) | V::Nil),
        "{v:?}"
    );
}

#[test]
fn key_counts_follow_every_write_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut model: BTreeMap<String, Kind> = BTreeMap::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    {
        let s = TestServer::at(dir.path(), |_| {});
        let mut r = s.raw();
        for step in 0..1500 {
            let k = format!("k{}", rng.gen_range(0..40));
            let k2 = format!("k{}", rng.gen_range(0..40));
            let is_str = matches!(model.get(&k), Some(Kind::Str { .. }));
            match rng.gen_range(0..14) {
                0 => {
                    ok(r.cmd(&["SET", &k, "v"]));
                    model.insert(k, Kind::Str { ttl: false });
                }
                1 => {
                    ok(r.cmd(&["SET", &k, "v", "EX", "1000"]));
                    model.insert(k, Kind::Str { ttl: true });
                }
                2 => {
                    // Pipelined plain SETs and an MSET naming a key twice:
                    // one shared batch.
                    r.send(&["SET", &k, "a"]);
                    r.send(&["MSET", &k2, "b", &k, "c", &k2, "d"]);
                    ok(r.read());
                    ok(r.read());
                    model.insert(k, Kind::Str { ttl: false });
                    model.insert(k2, Kind::Str { ttl: false });
                }
                3 => {
                    ok(r.cmd(&["DEL", &k, &k2, &k]));
                    model.remove(&k);
                    model.remove(&k2);
                }
                4 if !is_str => {
                    let f = format!("f{}", rng.gen_range(0..3));
                    let V::Int(added) = r.cmd(&["HSET", &k, &f, "x"]) else {
                        panic!("HSET")
                    };
                    let e = model.entry(k).or_insert(Kind::Hash {
                        fields: 0,
                        ttl: false,
                    });
                    if let Kind::Hash { fields, .. } = e {
                        *fields += added as u32;
                    }
                }
                5 if !is_str => {
                    let f = format!("f{}", rng.gen_range(0..3));
                    let V::Int(removed) = r.cmd(&["HDEL", &k, &f]) else {
                        panic!("HDEL")
                    };
                    if let Some(Kind::Hash { fields, .. }) = model.get_mut(&k) {
                        *fields -= removed as u32;
                        if *fields == 0 {
                            model.remove(&k);
                        }
                    }
                }
                6 => {
                    let V::Int(set) = r.cmd(&["EXPIRE", &k, "1000"]) else {
                        panic!("EXPIRE")
                    };
                    assert_eq!(set == 1, model.contains_key(&k));
                    match model.get_mut(&k) {
                        Some(Kind::Str { ttl }) | Some(Kind::Hash { ttl, .. }) => *ttl = true,
                        None => {}
                    }
                }
                7 => {
                    ok(r.cmd(&["PERSIST", &k]));
                    match model.get_mut(&k) {
                        Some(Kind::Str { ttl }) | Some(Kind::Hash { ttl, .. }) => *ttl = false,
                        None => {}
                    }
                }
                8 => {
                    // A deadline in the past deletes at once.
                    ok(r.cmd(&["PEXPIRE", &k, "-1"]));
                    model.remove(&k);
                }
                9 if is_str || !model.contains_key(&k) => {
                    ok(r.cmd(&["APPEND", &k, "z"]));
                    model.entry(k).or_insert(Kind::Str { ttl: false });
                }
                10 => {
                    let V::Int(n) = r.cmd(&["SETNX", &k, "n"]) else {
                        panic!("SETNX")
                    };
                    assert_eq!(n == 1, !model.contains_key(&k));
                    model.entry(k).or_insert(Kind::Str { ttl: false });
                }
                11 if is_str || !model.contains_key(&k) => {
                    ok(r.cmd(&["GETSET", &k, "g"]));
                    // GETSET clears the deadline, as SET does.
                    model.insert(k, Kind::Str { ttl: false });
                }
                12 if step % 500 == 499 => {
                    ok(r.cmd(&["FLUSHDB"]));
                    model.clear();
                }
                13 => {
                    // SET replaces a hash (and its fields) too.
                    ok(r.cmd(&["SET", &k, "over"]));
                    model.insert(k, Kind::Str { ttl: false });
                }
                _ => continue,
            }
            let want = model_counts(&model);
            assert_eq!(counts(&mut r), want, "step {step}");
            if step % 100 == 0 {
                assert_eq!(listed(&mut r), want, "listing at step {step}");
            }
        }
        s.stop().unwrap();
    }
    let s = TestServer::at(dir.path(), |_| {});
    let mut r = s.raw();
    let want = model_counts(&model);
    assert_eq!(counts(&mut r), want, "after restart");
    assert_eq!(listed(&mut r), want, "listing after restart");
}

/// Expired keys are counted until deleted (as Redis does); the background
/// expirer's deletions bring the counts down.
#[test]
fn expiry_brings_the_counts_down() {
    let s = TestServer::start();
    let mut r = s.raw();
    for i in 0..20 {
        ok(r.cmd(&["SET", &format!("t{i}"), "v", "PX", "1500"]));
    }
    ok(r.cmd(&["SET", "stay", "v"]));
    assert_eq!(counts(&mut r), (21, 20));
    let deadline = std::time::Instant::now() + common::TIMEOUT;
    while counts(&mut r) != (1, 0) {
        assert!(std::time::Instant::now() < deadline, "{:?}", counts(&mut r));
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(listed(&mut r), (1, 0));
}
