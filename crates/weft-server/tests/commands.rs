//! Every command through a real client library (the `redis` crate) and a
//! raw RESP client, against an in-process server on 127.0.0.1:0.

// A test (or benchmark) fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::{Raw, TestServer, V};
use redis::{Commands, Value};

fn q<T: redis::FromRedisValue>(
    con: &mut redis::Connection,
    args: &[&str],
) -> redis::RedisResult<T> {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con)
}

fn err(v: V) -> String {
    match v {
        V::Err(e) => e,
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn connection_commands() {
    let s = TestServer::start();
    let mut r = s.raw();
    assert_eq!(r.cmd(&["PING"]), V::Simple("PONG".into()));
    assert_eq!(r.cmd(&["ping", "hi"]), V::bulk("hi"));
    assert_eq!(r.cmd(&["ECHO", "x y"]), V::bulk("x y"));
    assert_eq!(r.cmd(&["SELECT", "0"]), V::Simple("OK".into()));
    assert_eq!(r.cmd(&["SELECT", "1"]), V::Simple("OK".into()));
    assert_eq!(
        err(r.cmd(&["SELECT", "16"])),
        "ERR DB index is out of range"
    );
    assert_eq!(
        err(r.cmd(&["SELECT", "-1"])),
        "ERR DB index is out of range"
    );
    assert_eq!(r.cmd(&["SELECT", "0"]), V::Simple("OK".into()));
    assert_eq!(
        r.cmd(&["COMMAND", "COUNT"]),
        V::Int(weft_server::cmd::COMMANDS.len() as i64)
    );
    assert!(
        matches!(r.cmd(&["COMMAND", "DOCS"]), V::Array(d) if d.len() == 2 * weft_server::cmd::COMMANDS.len())
    );
    match r.cmd(&["COMMAND"]) {
        V::Array(a) => assert_eq!(a.len(), weft_server::cmd::COMMANDS.len()),
        other => panic!("{other:?}"),
    }
    assert_eq!(r.cmd(&["CLIENT", "SETNAME", "me"]), V::Simple("OK".into()));
    assert_eq!(r.cmd(&["CLIENT", "GETNAME"]), V::bulk("me"));
    assert!(matches!(r.cmd(&["CLIENT", "ID"]), V::Int(n) if n > 0));
    match r.cmd(&["CONFIG", "GET", "appendonly"]) {
        V::Array(a) => assert_eq!(a, vec![V::bulk("appendonly"), V::bulk("yes")]),
        other => panic!("{other:?}"),
    }
    // HELLO without arguments: RESP2 map as a flat array.
    match r.cmd(&["HELLO"]) {
        V::Array(a) => {
            assert_eq!(a.len(), 14);
            assert_eq!(a[4], V::bulk("proto"));
            assert_eq!(a[5], V::Int(2));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        err(r.cmd(&["HELLO", "4"])),
        "NOPROTO unsupported protocol version"
    );
    assert_eq!(
        err(r.cmd(&["HELLO", "x"])),
        "ERR Protocol version is not an integer or out of range"
    );
    // HELLO 3 switches to RESP3: the reply itself is a map.
    match r.cmd(&["HELLO", "3", "SETNAME", "c3"]) {
        V::Map(m) => assert!(m.contains(&(V::bulk("proto"), V::Int(3)))),
        other => panic!("{other:?}"),
    }
    assert_eq!(r.cmd(&["GET", "nokey"]), V::Nil);
    assert_eq!(r.cmd(&["CLIENT", "GETNAME"]), V::bulk("c3"));
    assert!(matches!(r.cmd(&["INFO", "server"]), V::Verbatim(t) if t.contains("redis_version:")));
    assert!(matches!(r.cmd(&["HELLO", "2"]), V::Array(_)));
    assert_eq!(r.cmd(&["GET", "nokey"]), V::Nil);
    assert_eq!(r.cmd(&["QUIT"]), V::Simple("OK".into()));
    assert!(r.closed());
}

#[test]
fn error_wording() {
    let s = TestServer::start();
    let mut r = s.raw();
    assert_eq!(
        err(r.cmd(&["NOSUCH", "a", "b"])),
        "ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' "
    );
    assert_eq!(
        err(r.cmd(&["get"])),
        "ERR wrong number of arguments for 'get' command"
    );
    assert_eq!(
        err(r.cmd(&["GET", "a", "b"])),
        "ERR wrong number of arguments for 'get' command"
    );
    assert_eq!(
        err(r.cmd(&["MSET", "a", "1", "b"])),
        "ERR wrong number of arguments for 'mset' command"
    );
    assert_eq!(
        err(r.cmd(&["HSET", "h", "f", "v", "g"])),
        "ERR wrong number of arguments for 'hset' command"
    );
    assert_eq!(err(r.cmd(&["SET", "a", "1", "BOGUS"])), "ERR syntax error");
    assert_eq!(
        err(r.cmd(&["SET", "a", "1", "NX", "XX"])),
        "ERR syntax error"
    );
    assert_eq!(
        err(r.cmd(&["SET", "a", "1", "EX", "1", "PX", "5"])),
        "ERR syntax error"
    );
    assert_eq!(
        err(r.cmd(&["SET", "a", "1", "EX", "x"])),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(r.cmd(&["SET", "a", "1", "PX", "-5"])),
        "ERR invalid expire time in 'set' command"
    );
    assert_eq!(
        err(r.cmd(&["INCRBY", "a", "1.5"])),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(r.cmd(&["SET", "s", "abc"]), V::Simple("OK".into()));
    assert_eq!(
        err(r.cmd(&["INCR", "s"])),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        r.cmd(&["SET", "big", &i64::MAX.to_string()]),
        V::Simple("OK".into())
    );
    assert_eq!(
        err(r.cmd(&["INCR", "big"])),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(r.cmd(&["GET", "big"]), V::bulk(&i64::MAX.to_string()));
    assert_eq!(err(r.cmd(&["SCAN", "x"])), "ERR invalid cursor");
    assert_eq!(err(r.cmd(&["SCAN", "0", "COUNT", "0"])), "ERR syntax error");
    assert_eq!(r.cmd(&["HSET", "h", "f", "x"]), V::Int(1));
    assert_eq!(
        err(r.cmd(&["HINCRBY", "h", "f", "1"])),
        "ERR hash value is not an integer"
    );
    assert_eq!(
        err(r.cmd(&["EXPIRE", "h", "10", "NX", "XX"])),
        "ERR NX and XX, GT or LT options at the same time are not compatible"
    );
    // Errors never close the connection.
    assert_eq!(r.cmd(&["PING"]), V::Simple("PONG".into()));
}

#[test]
fn strings() {
    let s = TestServer::start();
    let mut c = s.conn();
    let () = c.set("k", "v").unwrap();
    assert_eq!(c.get::<_, String>("k").unwrap(), "v");
    assert_eq!(c.get::<_, Option<String>>("missing").unwrap(), None);
    // NX / XX / GET.
    assert_eq!(
        q::<Option<String>>(&mut c, &["SET", "k", "w", "NX"]).unwrap(),
        None
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["SET", "n", "w", "XX"]).unwrap(),
        None
    );
    assert_eq!(q::<String>(&mut c, &["SET", "k", "w", "XX"]).unwrap(), "OK");
    assert_eq!(
        q::<Option<String>>(&mut c, &["SET", "k", "x", "GET"])
            .unwrap()
            .as_deref(),
        Some("w")
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["SET", "new", "x", "GET"]).unwrap(),
        None
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["SET", "k", "y", "NX", "GET"])
            .unwrap()
            .as_deref(),
        Some("x")
    );
    assert_eq!(c.get::<_, String>("k").unwrap(), "x");
    // SETNX, GETSET.
    assert_eq!(q::<i64>(&mut c, &["SETNX", "k", "z"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["SETNX", "nx", "z"]).unwrap(), 1);
    assert_eq!(
        q::<Option<String>>(&mut c, &["GETSET", "nx", "zz"])
            .unwrap()
            .as_deref(),
        Some("z")
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["GETSET", "gs", "1"]).unwrap(),
        None
    );
    // MSET / MGET (binary-safe, empty values).
    let () = q(&mut c, &["MSET", "a", "1", "b", "", "c", "3"]).unwrap();
    let vals: Vec<Option<Vec<u8>>> = q(&mut c, &["MGET", "a", "b", "zz", "c"]).unwrap();
    assert_eq!(
        vals,
        vec![Some(b"1".to_vec()), Some(vec![]), None, Some(b"3".to_vec())]
    );
    let bin: Vec<u8> = (0..=255u8).collect();
    let () = c.set(&bin[..], &bin[..]).unwrap();
    assert_eq!(c.get::<_, Vec<u8>>(&bin[..]).unwrap(), bin);
    // DEL / UNLINK / EXISTS.
    assert_eq!(
        q::<i64>(&mut c, &["EXISTS", "a", "a", "b", "zz"]).unwrap(),
        3
    );
    assert_eq!(q::<i64>(&mut c, &["DEL", "a", "a", "zz"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["UNLINK", "b", "c"]).unwrap(), 2);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "a", "b", "c"]).unwrap(), 0);
    // Counters.
    assert_eq!(q::<i64>(&mut c, &["INCR", "ctr"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["INCRBY", "ctr", "41"]).unwrap(), 42);
    assert_eq!(q::<i64>(&mut c, &["DECR", "ctr"]).unwrap(), 41);
    assert_eq!(q::<i64>(&mut c, &["DECRBY", "ctr", "-9"]).unwrap(), 50);
    assert_eq!(q::<i64>(&mut c, &["DECRBY", "ctr", "100"]).unwrap(), -50);
    assert_eq!(c.get::<_, String>("ctr").unwrap(), "-50");
    // APPEND / STRLEN / GETRANGE.
    assert_eq!(q::<i64>(&mut c, &["APPEND", "s", "This is"]).unwrap(), 7);
    assert_eq!(q::<i64>(&mut c, &["APPEND", "s", " a string"]).unwrap(), 16);
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "s"]).unwrap(), 16);
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "nope"]).unwrap(), 0);
    for (a, b, want) in [
        ("0", "3", "This"),
        ("-3", "-1", "ing"),
        ("0", "-1", "This is a string"),
        ("10", "100", "string"),
        ("5", "2", ""),
    ] {
        assert_eq!(q::<String>(&mut c, &["GETRANGE", "s", a, b]).unwrap(), want);
    }
    assert_eq!(
        q::<String>(&mut c, &["GETRANGE", "nope", "0", "-1"]).unwrap(),
        ""
    );
}

#[test]
fn keys_scan_and_type_list_user_keys_in_order() {
    let s = TestServer::start();
    let mut c = s.conn();
    // Inserted out of order, with hashes among strings.
    for k in ["m", "b", "user:2", "a", "user:10", "z", "user:1"] {
        let () = c.set(k, "v").unwrap();
    }
    let () = q(&mut c, &["HSET", "hash", "f", "v", "g", "w"]).unwrap();
    let () = q(&mut c, &["SET", "tmp", "x", "PX", "60000"]).unwrap();
    let all: Vec<String> = c.keys("*").unwrap();
    assert_eq!(
        all,
        ["a", "b", "hash", "m", "tmp", "user:1", "user:10", "user:2", "z"]
    );
    let users: Vec<String> = c.keys("user:*").unwrap();
    assert_eq!(users, ["user:1", "user:10", "user:2"]);
    let some: Vec<String> = c.keys("user:?").unwrap();
    assert_eq!(some, ["user:1", "user:2"]);
    let cls: Vec<String> = c.keys("[a-c]*").unwrap();
    assert_eq!(cls, ["a", "b"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 9);
    assert_eq!(q::<String>(&mut c, &["TYPE", "hash"]).unwrap(), "hash");
    assert_eq!(q::<String>(&mut c, &["TYPE", "a"]).unwrap(), "string");
    assert_eq!(q::<String>(&mut c, &["TYPE", "nope"]).unwrap(), "none");
    // SCAN: small COUNT, numeric cursors, every key once, in key order.
    let mut cursor = "0".to_string();
    let mut seen = Vec::new();
    let mut rounds = 0;
    loop {
        let (next, keys): (String, Vec<String>) =
            q(&mut c, &["SCAN", &cursor, "COUNT", "2"]).unwrap();
        assert!(next.parse::<u64>().is_ok());
        seen.extend(keys);
        rounds += 1;
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen, all);
    assert!(rounds >= 5);
    // MATCH and TYPE filters.
    let (_, keys): (String, Vec<String>) =
        q(&mut c, &["SCAN", "0", "MATCH", "user:1*", "COUNT", "100"]).unwrap();
    assert_eq!(keys, ["user:1", "user:10"]);
    let (_, keys): (String, Vec<String>) =
        q(&mut c, &["SCAN", "0", "TYPE", "hash", "COUNT", "100"]).unwrap();
    assert_eq!(keys, ["hash"]);
    // FLUSHDB empties everything, internal records included.
    let () = q(&mut c, &["FLUSHDB"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 0);
    assert!(c.keys::<_, Vec<String>>("*").unwrap().is_empty());
    assert_eq!(q::<i64>(&mut c, &["HLEN", "hash"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["HSET", "hash", "f", "v"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "hash"]).unwrap(), 1);
}

#[test]
fn expiry_lazy_and_background() {
    let s = TestServer::start();
    let mut c = s.conn();
    let () = q(&mut c, &["SET", "p", "v", "PX", "150"]).unwrap();
    let () = q(&mut c, &["SET", "e", "v", "EX", "100"]).unwrap();
    let pttl: i64 = q(&mut c, &["PTTL", "p"]).unwrap();
    assert!(pttl > 0 && pttl <= 150, "{pttl}");
    let ttl: i64 = q(&mut c, &["TTL", "e"]).unwrap();
    assert!((99..=100).contains(&ttl), "{ttl}");
    assert_eq!(q::<i64>(&mut c, &["TTL", "nokey"]).unwrap(), -2);
    let () = c.set("plain", "v").unwrap();
    assert_eq!(q::<i64>(&mut c, &["TTL", "plain"]).unwrap(), -1);
    // KEEPTTL and TTL-clearing SET.
    let () = q(&mut c, &["SET", "e", "w", "KEEPTTL"]).unwrap();
    assert!(q::<i64>(&mut c, &["TTL", "e"]).unwrap() > 0);
    // INCR keeps the TTL.
    let () = q(&mut c, &["SET", "n", "1", "PX", "100000"]).unwrap();
    let () = q(&mut c, &["INCR", "n"]).unwrap();
    assert!(q::<i64>(&mut c, &["PTTL", "n"]).unwrap() > 0);
    let () = q(&mut c, &["SET", "e", "w"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["TTL", "e"]).unwrap(), -1);
    // EXPIRE / PEXPIRE / PERSIST and their options.
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "e", "50"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "e", "60", "NX"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "e", "40", "GT"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "e", "70", "GT"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "e", "30", "LT"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["TTL", "e"]).unwrap(), 30);
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "e"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "e"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "e", "30", "XX"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "nokey", "30"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "e", "100"]).unwrap(), 1);
    // A non-positive EXPIRE deletes at once.
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "plain", "-1"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "plain"]).unwrap(), 0);
    // Hashes expire too.
    let () = q(&mut c, &["HSET", "h", "f", "v"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "h", "100"]).unwrap(), 1);
    std::thread::sleep(Duration::from_millis(250));
    // Lazy: reads never see expired keys.
    assert_eq!(c.get::<_, Option<String>>("p").unwrap(), None);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "p", "e", "h"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["PTTL", "p"]).unwrap(), -2);
    assert_eq!(
        q::<Option<String>>(&mut c, &["HGET", "h", "f"]).unwrap(),
        None
    );
    assert!(!c
        .keys::<_, Vec<String>>("*")
        .unwrap()
        .contains(&"p".to_string()));
    // A writer on an expired hash starts a fresh key (old fields gone).
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "g", "w"]).unwrap(), 1);
    let m: HashMap<String, String> = c.hgetall("h").unwrap();
    assert_eq!(m.len(), 1);
    // Even when it writes a field the expired hash had: the field is new.
    // (Expired 5 ms before the write, almost always before the background
    // expirer, which runs every 100 ms, has removed its records.)
    let () = q(&mut c, &["HSET", "h2", "f", "v", "g", "v"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "h2", "1"]).unwrap(), 1);
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(q::<i64>(&mut c, &["HSET", "h2", "f", "w"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h2"]).unwrap(), 1);
    let m: HashMap<String, String> = c.hgetall("h2").unwrap();
    assert_eq!(m, HashMap::from([("f".to_string(), "w".to_string())]));
    // Background: the expirer deletes the records (counted in INFO stats).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = q(&mut c, &["INFO", "stats"]).unwrap();
        let n: u64 = info
            .lines()
            .find_map(|l| l.strip_prefix("expired_keys:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        if n >= 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "background expiry did not run: {info}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn hashes() {
    let s = TestServer::start();
    let mut c = s.conn();
    assert_eq!(
        q::<i64>(&mut c, &["HSET", "h", "b", "2", "a", "1", "b", "22"]).unwrap(),
        2
    );
    assert_eq!(
        q::<i64>(&mut c, &["HSET", "h", "a", "11", "c", "3"]).unwrap(),
        1
    );
    assert_eq!(
        q::<String>(&mut c, &["HMSET", "h", "d", "4"]).unwrap(),
        "OK"
    );
    assert_eq!(q::<i64>(&mut c, &["HSETNX", "h", "a", "x"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["HSETNX", "h", "e", "5"]).unwrap(), 1);
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "b"]).unwrap(), "22");
    assert_eq!(
        q::<Option<String>>(&mut c, &["HGET", "h", "zz"]).unwrap(),
        None
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["HGET", "nohash", "zz"]).unwrap(),
        None
    );
    let v: Vec<Option<String>> = q(&mut c, &["HMGET", "h", "a", "zz", "e"]).unwrap();
    assert_eq!(v, vec![Some("11".into()), None, Some("5".into())]);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]).unwrap(), 5);
    // HGETALL/HKEYS/HVALS: field order.
    let flat: Vec<String> = q(&mut c, &["HGETALL", "h"]).unwrap();
    assert_eq!(flat, ["a", "11", "b", "22", "c", "3", "d", "4", "e", "5"]);
    let keys: Vec<String> = q(&mut c, &["HKEYS", "h"]).unwrap();
    assert_eq!(keys, ["a", "b", "c", "d", "e"]);
    let vals: Vec<String> = q(&mut c, &["HVALS", "h"]).unwrap();
    assert_eq!(vals, ["11", "22", "3", "4", "5"]);
    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "h", "a"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "h", "zz"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "h", "a", "-12"]).unwrap(), -1);
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "h", "n", "7"]).unwrap(), 7);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]).unwrap(), 6);
    assert_eq!(
        q::<i64>(&mut c, &["HDEL", "h", "a", "a", "zz", "n"]).unwrap(),
        2
    );
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]).unwrap(), 4);
    // A hash whose key is a prefix of another's keeps its own fields.
    assert_eq!(q::<i64>(&mut c, &["HSET", "hh", "a", "x"]).unwrap(), 1);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["HKEYS", "h"]).unwrap(),
        ["b", "c", "d", "e"]
    );
    // HSCAN with small COUNT, MATCH, NOVALUES.
    let mut cursor = "0".to_string();
    let mut got = Vec::new();
    loop {
        let (next, kv): (String, Vec<String>) =
            q(&mut c, &["HSCAN", "h", &cursor, "COUNT", "1"]).unwrap();
        got.extend(kv);
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(got, ["b", "22", "c", "3", "d", "4", "e", "5"]);
    let (_, kv): (String, Vec<String>) =
        q(&mut c, &["HSCAN", "h", "0", "MATCH", "[cd]", "NOVALUES"]).unwrap();
    assert_eq!(kv, ["c", "d"]);
    // Deleting every field deletes the key.
    assert_eq!(
        q::<i64>(&mut c, &["HDEL", "h", "b", "c", "d", "e"]).unwrap(),
        4
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h"]).unwrap(), 0);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["HGETALL", "h"]).unwrap(),
        Vec::<String>::new()
    );
    // DEL of a hash drops its fields: a new hash at that key starts empty.
    assert_eq!(q::<i64>(&mut c, &["DEL", "hh"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["HSET", "hh", "b", "y"]).unwrap(), 1);
    assert_eq!(q::<Vec<String>>(&mut c, &["HKEYS", "hh"]).unwrap(), ["b"]);
    // SET over a hash replaces it entirely.
    let () = c.set("hh", "str").unwrap();
    assert_eq!(q::<i64>(&mut c, &["HSET", "hh2", "x", "1"]).unwrap(), 1);
    let () = q(&mut c, &["DEL", "hh"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["HSET", "hh", "z", "1"]).unwrap(), 1);
    assert_eq!(q::<Vec<String>>(&mut c, &["HKEYS", "hh"]).unwrap(), ["z"]);
}

#[test]
fn wrongtype_everywhere() {
    let s = TestServer::start();
    let mut r = s.raw();
    r.cmd(&["SET", "str", "1"]);
    r.cmd(&["HSET", "hash", "f", "1"]);
    let wt = "WRONGTYPE Operation against a key holding the wrong kind of value";
    for c in [
        &["GET", "hash"][..],
        &["SET", "hash", "x", "GET"],
        &["GETSET", "hash", "x"],
        &["INCR", "hash"],
        &["INCRBY", "hash", "2"],
        &["DECR", "hash"],
        &["DECRBY", "hash", "2"],
        &["APPEND", "hash", "x"],
        &["STRLEN", "hash"],
        &["GETRANGE", "hash", "0", "1"],
        &["HSET", "str", "f", "v"],
        &["HSETNX", "str", "f", "v"],
        &["HMSET", "str", "f", "v"],
        &["HGET", "str", "f"],
        &["HMGET", "str", "f"],
        &["HGETALL", "str"],
        &["HDEL", "str", "f"],
        &["HEXISTS", "str", "f"],
        &["HLEN", "str"],
        &["HKEYS", "str"],
        &["HVALS", "str"],
        &["HINCRBY", "str", "f", "1"],
        &["HSCAN", "str", "0"],
    ] {
        assert_eq!(err(r.cmd(c)), wt, "{c:?}");
    }
    // Type-blind commands work on both; MGET answers nil for a hash.
    assert_eq!(
        r.cmd(&["MGET", "str", "hash"]),
        V::Array(vec![V::bulk("1"), V::Nil])
    );
    assert_eq!(r.cmd(&["EXISTS", "str", "hash"]), V::Int(2));
    // Nothing was changed by the refused commands.
    assert_eq!(
        r.cmd(&["HGETALL", "hash"]),
        V::Array(vec![V::bulk("f"), V::bulk("1")])
    );
    assert_eq!(r.cmd(&["GET", "str"]), V::bulk("1"));
    // Plain SET overwrites any type.
    assert_eq!(r.cmd(&["SET", "hash", "s"]), V::Simple("OK".into()));
    assert_eq!(r.cmd(&["TYPE", "hash"]), V::Simple("string".into()));
}

#[test]
fn resp3_replies() {
    let s = TestServer::start();
    let mut c = s.conn_proto(true);
    let () = q(&mut c, &["HSET", "h", "f", "v", "g", "w"]).unwrap();
    match q::<Value>(&mut c, &["HGETALL", "h"]).unwrap() {
        Value::Map(m) => assert_eq!(m.len(), 2),
        other => panic!("HGETALL under RESP3 is a map: {other:?}"),
    }
    assert_eq!(q::<Value>(&mut c, &["GET", "nope"]).unwrap(), Value::Nil);
    let m: HashMap<String, String> = c.hgetall("h").unwrap();
    assert_eq!(m["g"], "w");
    let () = c.set("a", "1").unwrap();
    match q::<Value>(&mut c, &["WEFT.RANGE", "a", ""]).unwrap() {
        Value::Map(m) => assert_eq!(m.len(), 1),
        other => panic!("{other:?}"),
    }
    // RESP2 gives flat arrays for the same commands.
    let mut c2 = s.conn_proto(false);
    assert!(
        matches!(q::<Value>(&mut c2, &["HGETALL", "h"]).unwrap(), Value::Array(a) if a.len() == 4)
    );
    // Raw bytes of RESP3 null and map.
    let mut r = s.raw();
    r.cmd(&["HELLO", "3"]);
    r.send(&["GET", "nope"]);
    r.send(&["HGETALL", "h"]);
    r.send(&["MGET", "nope"]);
    let mut buf = [0u8; 3];
    use std::io::Read;
    r.r.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"_\r\n");
    assert!(matches!(r.read(), V::Map(m) if m.len() == 2));
    assert_eq!(r.read(), V::Array(vec![V::Nil]));
}

#[test]
fn pipelining() {
    let s = TestServer::start();
    let mut c = s.conn();
    let mut p = redis::pipe();
    for i in 0..2000 {
        p.cmd("SET").arg(format!("k{i:05}")).arg(i).ignore();
    }
    for i in 0..2000 {
        p.cmd("GET").arg(format!("k{i:05}"));
    }
    let got: Vec<i64> = p.query(&mut c).unwrap();
    assert_eq!(got, (0..2000).collect::<Vec<_>>());
    // Raw: many requests in one write, split at odd places, answered in order.
    let mut r = s.raw();
    let mut blob = Vec::new();
    for i in 0..500 {
        blob.extend(Raw::encode(&[b"ECHO", format!("m{i}").as_bytes()]));
        blob.extend(b"PING\r\n");
    }
    for chunk in blob.chunks(77) {
        r.send_bytes(chunk);
    }
    for i in 0..500 {
        assert_eq!(r.read(), V::bulk(&format!("m{i}")));
        assert_eq!(r.read(), V::Simple("PONG".into()));
    }
}

/// Pipelined plain SET/MSET runs are committed as one batch: replies stay
/// in order and later requests in the same pipeline see the writes.
#[test]
fn coalesced_sets_keep_order_and_read_your_writes() {
    let s = TestServer::start();
    let mut r = s.raw();
    assert_eq!(r.cmd(&["HSET", "hash", "f", "v", "g", "w"]), V::Int(2));
    assert_eq!(
        r.cmd(&["SET", "ttl", "x", "EX", "100"]),
        V::Simple("OK".into())
    );
    let reqs: &[&[&str]] = &[
        &["SET", "k", "1"],
        &["SET", "k", "2"],
        &["GET", "k"],
        &["MSET", "k", "3", "j", "4"],
        &["SET", "k", "5"],
        &["SET", "hash", "now a string"],
        &["SET", "ttl", "y"],
        &["GET", "k"],
        &["GET", "j"],
        &["INCR", "k"],
        &["SET", "k", "7"],
        &["MSET", "odd"],
        &["TYPE", "hash"],
        &["HGET", "hash", "f"],
        &["TTL", "ttl"],
        &["GET", "k"],
    ];
    let mut blob = Vec::new();
    for q in reqs {
        let a: Vec<&[u8]> = q.iter().map(|x| x.as_bytes()).collect();
        blob.extend(Raw::encode(&a));
    }
    r.send_bytes(&blob);
    let ok = || V::Simple("OK".into());
    let want = vec![
        ok(),
        ok(),
        V::bulk("2"),
        ok(),
        ok(),
        ok(),
        ok(),
        V::bulk("5"),
        V::bulk("4"),
        V::Int(6),
        ok(),
        V::Err("ERR wrong number of arguments for 'mset' command".into()),
        V::Simple("string".into()),
        V::Err("WRONGTYPE Operation against a key holding the wrong kind of value".into()),
        V::Int(-1),
        V::bulk("7"),
    ];
    let got: Vec<V> = (0..want.len()).map(|_| r.read()).collect();
    assert_eq!(got, want);
    // The old hash's fields are gone with it.
    assert_eq!(r.cmd(&["DEL", "hash"]), V::Int(1));
    assert_eq!(r.cmd(&["HSET", "hash", "z", "1"]), V::Int(1));
    assert_eq!(r.cmd(&["HLEN", "hash"]), V::Int(1));
    // Many SETs in one write (more than one group).
    let mut blob = Vec::new();
    for i in 0..2000 {
        blob.extend(Raw::encode(&[
            b"SET",
            format!("g{i}").as_bytes(),
            format!("{i}").as_bytes(),
        ]));
    }
    blob.extend(Raw::encode(&[b"DBSIZE"]));
    r.send_bytes(&blob);
    for _ in 0..2000 {
        assert_eq!(r.read(), ok());
    }
    assert_eq!(r.read(), V::Int(2000 + 4)); // k, j, hash, ttl
}

#[test]
fn weft_range() {
    let s = TestServer::start();
    let mut c = s.conn();
    for (k, v) in [("b", "2"), ("a", "1"), ("d", "4"), ("c", "3"), ("e", "5")] {
        let () = c.set(k, v).unwrap();
    }
    let () = q(&mut c, &["HSET", "cc", "f", "v"]).unwrap();
    let () = q(&mut c, &["SET", "bb", "gone", "PX", "1"]).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let r: Vec<String> = q(&mut c, &["WEFT.RANGE", "b", "e"]).unwrap();
    assert_eq!(r, ["b", "2", "c", "3", "d", "4"]);
    let r: Vec<String> = q(&mut c, &["WEFT.RANGE", "b", "", "LIMIT", "2"]).unwrap();
    assert_eq!(r, ["b", "2", "c", "3"]);
    let r: Vec<String> = q(&mut c, &["WEFT.RANGE", "a", "", "REV", "LIMIT", "3"]).unwrap();
    assert_eq!(r, ["e", "5", "d", "4", "c", "3"]);
    let r: Vec<String> = q(&mut c, &["WEFT.RANGE", "", "", "LIMIT", "0"]).unwrap();
    assert!(r.is_empty());
    let r: Vec<String> = q(&mut c, &["WEFT.RANGE", "d", "b"]).unwrap();
    assert!(r.is_empty());
    let e = q::<Value>(&mut c, &["WEFT.RANGE", "a", "b", "SIDEWAYS"]).unwrap_err();
    assert!(e.to_string().contains("syntax error"), "{e}");
}

#[test]
fn info_sections() {
    let s = TestServer::start();
    let mut c = s.conn();
    let () = c.set("a", "1").unwrap();
    let info: String = q(&mut c, &["INFO"]).unwrap();
    for section in [
        "# Server",
        "# Clients",
        "# Memory",
        "# Stats",
        "# Keyspace",
        "# Weft",
    ] {
        assert!(info.contains(section), "{section} missing from {info}");
    }
    assert!(info.contains("db0:keys=1,expires=0"));
    assert!(info.contains("connected_clients:1"));
    assert!(info.contains("memtable_kind:"));
    let only: String = q(&mut c, &["INFO", "keyspace"]).unwrap();
    assert!(!only.contains("# Server") && only.contains("# Keyspace"));
}

/// INCR, HINCRBY, APPEND and SETNX from many connections at once: the
/// stripe locks make each read-modify-write atomic.
#[test]
fn concurrent_read_modify_write_is_atomic() {
    let s = TestServer::start();
    let threads = 8;
    let per = 300;
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let mut c = s.conn();
            std::thread::spawn(move || {
                let mut won = 0;
                for i in 0..per {
                    let _: i64 = q(&mut c, &["INCR", "ctr"]).unwrap();
                    let _: i64 = q(&mut c, &["HINCRBY", "h", "f", "2"]).unwrap();
                    let _: i64 = q(&mut c, &["APPEND", "s", "x"]).unwrap();
                    won +=
                        q::<i64>(&mut c, &["SETNX", &format!("once{i}"), &t.to_string()]).unwrap();
                }
                won
            })
        })
        .collect();
    let won: i64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    let mut c = s.conn();
    let total = (threads * per) as i64;
    assert_eq!(c.get::<_, i64>("ctr").unwrap(), total);
    assert_eq!(q::<i64>(&mut c, &["HGET", "h", "f"]).unwrap(), 2 * total);
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "s"]).unwrap(), total);
    assert_eq!(won, per as i64, "each SETNX key is won exactly once");
}

/// The checkpoints in `dir` (SAVE and BGSAVE's), sorted.
fn checkpoints_in(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// SAVE and BGSAVE write a checkpoint that a server opens as the data was
/// at the save; the newest is kept; LASTSAVE and INFO persistence follow.
#[test]
fn save_and_bgsave_write_checkpoints_a_server_opens() {
    let tmp = tempfile::tempdir().unwrap();
    let save_dir = tmp.path().join("saves");
    let s = TestServer::with(|c| c.save_dir = Some(save_dir.clone()));
    let mut c = s.conn();
    let started: i64 = q(&mut c, &["LASTSAVE"]).unwrap();
    for i in 0..200 {
        let _: () = c.set(format!("k{i:03}"), i).unwrap();
    }
    let _: () = c.hset("h", "f", "v1").unwrap();
    let reply: String = q(&mut c, &["SAVE"]).unwrap();
    assert_eq!(reply, "OK");
    let first = checkpoints_in(&save_dir);
    assert_eq!(first.len(), 1, "{first:?}");
    assert!(q::<i64>(&mut c, &["LASTSAVE"]).unwrap() >= started);

    let _: () = c.set("after-save", "x").unwrap();
    let _: () = c.del("k000").unwrap();
    let _: () = c.hset("h", "f", "v2").unwrap();
    let reply: String = q(&mut c, &["BGSAVE"]).unwrap();
    assert_eq!(reply, "Background saving started");
    // Clients learn a background save's end from INFO (or LASTSAVE).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let info: String = q(&mut c, &["INFO", "persistence"]).unwrap();
        if info.contains("rdb_bgsave_in_progress:0") {
            assert!(info.contains("rdb_last_bgsave_status:ok"), "{info}");
            assert!(info.contains("rdb_changes_since_last_save:0"), "{info}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "BGSAVE never ended");
        std::thread::sleep(Duration::from_millis(10));
    }
    let second = checkpoints_in(&save_dir);
    assert_eq!(second.len(), 1, "only the newest is kept: {second:?}");
    assert_ne!(second, first);
    assert_eq!(
        err(s.raw().cmd(&["BGSAVE", "NOW"])),
        "ERR syntax error",
        "BGSAVE takes only SCHEDULE"
    );
    let _: () = c.set("after-bgsave", "y").unwrap();

    // The checkpoint is a data directory of its own.
    let copy = TestServer::at(&second[0], |_| {});
    let mut r = copy.conn();
    assert_eq!(r.get::<_, Option<String>>("k000").unwrap(), None);
    assert_eq!(r.get::<_, String>("k199").unwrap(), "199");
    assert_eq!(r.get::<_, String>("after-save").unwrap(), "x");
    assert_eq!(r.get::<_, Option<String>>("after-bgsave").unwrap(), None);
    assert_eq!(r.hget::<_, _, String>("h", "f").unwrap(), "v2");
    assert_eq!(q::<i64>(&mut r, &["DBSIZE"]).unwrap(), 201);
}

/// A hash with many fields is deleted by one range delete over its fields
/// (`Keyspace::delete_into`), and `FLUSHDB` by three: nothing of either
/// comes back, not after a restart either, and a key made again starts
/// empty.
#[test]
fn big_hash_deletes_and_flushdb_leave_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::at(dir.path(), |_| {});
    let mut c = s.conn();
    let fields: Vec<(String, String)> = (0..600)
        .map(|i| (format!("f{i}"), format!("v{i}")))
        .collect();
    let () = c.hset_multiple("big", &fields).unwrap();
    let () = c.hset_multiple("small", &fields[..3]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["HLEN", "big"]).unwrap(), 600);
    assert_eq!(q::<i64>(&mut c, &["DEL", "big"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "big"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["HSET", "big", "new", "1"]).unwrap(), 1);
    let all: Vec<String> = q(&mut c, &["HGETALL", "big"]).unwrap();
    assert_eq!(all, ["new", "1"]);
    // A string replacing a big hash drops its fields too.
    let () = c.hset_multiple("big2", &fields).unwrap();
    let () = c.set("big2", "s").unwrap();
    let () = c.hset_multiple("big3", &fields).unwrap();
    for i in 0..2000 {
        let () = c.set(format!("k{i}"), i).unwrap();
    }
    drop(c);
    s.stop().unwrap();
    let s = TestServer::at(dir.path(), |_| {});
    let mut c = s.conn();
    let all: Vec<String> = q(&mut c, &["HGETALL", "big"]).unwrap();
    assert_eq!(all, ["new", "1"], "after a restart");
    assert_eq!(q::<String>(&mut c, &["GET", "big2"]).unwrap(), "s");
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 2004);
    let () = q(&mut c, &["FLUSHDB"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 0);
    assert!(c.keys::<_, Vec<String>>("*").unwrap().is_empty());
    assert_eq!(q::<i64>(&mut c, &["HLEN", "big3"]).unwrap(), 0);
    let () = c.hset_multiple("big3", &fields[..2]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["HLEN", "big3"]).unwrap(), 2);
    drop(c);
    s.stop().unwrap();
    let s = TestServer::at(dir.path(), |_| {});
    let mut c = s.conn();
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 1, "after a restart");
    let all: Vec<String> = q(&mut c, &["HKEYS", "big3"]).unwrap();
    assert_eq!(all, ["f0", "f1"]);
}
