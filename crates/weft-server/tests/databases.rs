//! The databases (`SELECT`, `--databases`) over loopback: the same key in
//! two databases, `DBSIZE`/`INFO keyspace` per database, `FLUSHDB` against
//! `FLUSHALL`, `MOVE`, expiry and `SCAN` in a database other than 0, the
//! fast paths honouring `SELECT`, the `redis://host/N` URL, and a restart
//! that keeps every database.

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{TestServer, V};

fn ok() -> V {
    V::Simple("OK".into())
}

fn b(s: &str) -> V {
    V::bulk(s)
}

fn text(v: V) -> String {
    match v {
        V::Bulk(t) => String::from_utf8(t).unwrap(),
        V::Verbatim(t) => t,
        other => panic!("{other:?}"),
    }
}

/// The `dbN:...` lines of `INFO keyspace`.
fn keyspace_lines(r: &mut common::Raw) -> Vec<String> {
    text(r.cmd(&["INFO", "keyspace"]))
        .lines()
        .filter(|l| l.starts_with("db"))
        .map(|l| l.split(",avg_ttl").next().unwrap_or(l).to_string())
        .collect()
}

#[test]
fn the_same_key_in_two_databases_is_two_keys() {
    let s = TestServer::start();
    let mut r = s.raw();
    assert_eq!(r.cmd(&["SET", "k", "zero"]), ok());
    assert_eq!(r.cmd(&["HSET", "h", "f", "0"]), V::Int(1));
    assert_eq!(r.cmd(&["SELECT", "3"]), ok());
    assert_eq!(r.cmd(&["GET", "k"]), V::Nil);
    assert_eq!(r.cmd(&["EXISTS", "h"]), V::Int(0));
    assert_eq!(r.cmd(&["SET", "k", "three"]), ok());
    assert_eq!(r.cmd(&["HSET", "h", "g", "3"]), V::Int(1));
    assert_eq!(r.cmd(&["RPUSH", "l", "a"]), V::Int(1));
    assert_eq!(r.cmd(&["DBSIZE"]), V::Int(3));
    assert_eq!(r.cmd(&["HGETALL", "h"]), V::Array(vec![b("g"), b("3")]));
    assert_eq!(
        r.cmd(&["KEYS", "*"]),
        V::Array(vec![b("h"), b("k"), b("l")])
    );
    match r.cmd(&["SCAN", "0", "COUNT", "100"]) {
        V::Array(v) => assert_eq!(v[1], V::Array(vec![b("h"), b("k"), b("l")])),
        other => panic!("{other:?}"),
    }
    let mut other = s.raw();
    assert_eq!(other.cmd(&["GET", "k"]), b("zero"));
    assert_eq!(other.cmd(&["DBSIZE"]), V::Int(2));
    assert_eq!(
        keyspace_lines(&mut other),
        vec!["db0:keys=2,expires=0", "db3:keys=3,expires=0"]
    );
    assert_eq!(r.cmd(&["SELECT", "0"]), ok());
    assert_eq!(r.cmd(&["HGETALL", "h"]), V::Array(vec![b("f"), b("0")]));
    // CONFIG GET databases and CLIENT LIST's db.
    assert_eq!(
        r.cmd(&["CONFIG", "GET", "databases"]),
        V::Array(vec![b("databases"), b("16")])
    );
    other.cmd(&["SELECT", "7"]);
    let list = text(r.cmd(&["CLIENT", "LIST"]));
    assert!(list.contains(" db=7 "), "{list}");
}

#[test]
fn flushdb_empties_one_database_and_flushall_every_one() {
    let s = TestServer::start();
    let mut r = s.raw();
    for db in ["0", "1", "5"] {
        r.cmd(&["SELECT", db]);
        r.cmd(&["MSET", "a", "1", "b", "2"]);
        r.cmd(&["SET", "t", "x", "EX", "100"]);
        r.cmd(&["ZADD", "z", "1", "m"]);
    }
    r.cmd(&["SELECT", "1"]);
    assert_eq!(r.cmd(&["FLUSHDB"]), ok());
    assert_eq!(r.cmd(&["DBSIZE"]), V::Int(0));
    assert_eq!(r.cmd(&["GET", "a"]), V::Nil);
    assert_eq!(
        keyspace_lines(&mut r),
        vec!["db0:keys=4,expires=1", "db5:keys=4,expires=1"]
    );
    r.cmd(&["SELECT", "5"]);
    assert_eq!(r.cmd(&["GET", "a"]), b("1"));
    assert_eq!(r.cmd(&["FLUSHALL"]), ok());
    assert_eq!(r.cmd(&["DBSIZE"]), V::Int(0));
    assert_eq!(keyspace_lines(&mut r), Vec::<String>::new());
    r.cmd(&["SELECT", "0"]);
    assert_eq!(r.cmd(&["EXISTS", "a", "b", "t", "z"]), V::Int(0));
    // Writes after a flush are counted from zero.
    r.cmd(&["SET", "a", "again"]);
    assert_eq!(keyspace_lines(&mut r), vec!["db0:keys=1,expires=0"]);
}

#[test]
fn move_takes_a_key_with_its_elements_and_deadline() {
    let s = TestServer::start();
    let mut r = s.raw();
    r.cmd(&["SET", "s", "v", "EX", "1000"]);
    let many: Vec<String> = (0..300).map(|i| format!("m{i}")).collect();
    let mut sadd = vec!["SADD", "big"];
    sadd.extend(many.iter().map(String::as_str));
    assert_eq!(r.cmd(&sadd), V::Int(300));
    r.cmd(&["RPUSH", "l", "a", "b", "c"]);
    r.cmd(&["ZADD", "z", "1", "x", "2", "y"]);
    for k in ["s", "big", "l", "z"] {
        assert_eq!(r.cmd(&["MOVE", k, "2"]), V::Int(1), "{k}");
    }
    assert_eq!(r.cmd(&["DBSIZE"]), V::Int(0));
    assert_eq!(r.cmd(&["MOVE", "nosuch", "2"]), V::Int(0));
    assert_eq!(
        r.cmd(&["MOVE", "s", "0"]),
        V::Err("ERR source and destination objects are the same".into())
    );
    assert_eq!(
        r.cmd(&["MOVE", "s", "16"]),
        V::Err("ERR DB index is out of range".into())
    );
    assert_eq!(
        r.cmd(&["MOVE", "s", "x"]),
        V::Err("ERR value is not an integer or out of range".into())
    );
    r.cmd(&["SELECT", "2"]);
    assert_eq!(r.cmd(&["GET", "s"]), b("v"));
    assert!(matches!(r.cmd(&["TTL", "s"]), V::Int(t) if t > 900));
    assert_eq!(r.cmd(&["SCARD", "big"]), V::Int(300));
    assert_eq!(r.cmd(&["SISMEMBER", "big", "m299"]), V::Int(1));
    assert_eq!(
        r.cmd(&["LRANGE", "l", "0", "-1"]),
        V::Array(vec![b("a"), b("b"), b("c")])
    );
    assert_eq!(r.cmd(&["ZSCORE", "z", "y"]), b("2"));
    assert_eq!(keyspace_lines(&mut r), vec!["db2:keys=4,expires=1"]);
    // A key already in the destination stays where it is.
    r.cmd(&["SELECT", "0"]);
    r.cmd(&["SET", "s", "zero's"]);
    assert_eq!(r.cmd(&["MOVE", "s", "2"]), V::Int(0));
    assert_eq!(r.cmd(&["GET", "s"]), b("zero's"));
    // Moving back and forth leaves nothing behind.
    r.cmd(&["SELECT", "2"]);
    assert_eq!(r.cmd(&["MOVE", "big", "3"]), V::Int(1));
    r.cmd(&["SELECT", "3"]);
    assert_eq!(r.cmd(&["MOVE", "big", "2"]), V::Int(1));
    assert_eq!(r.cmd(&["DBSIZE"]), V::Int(0));
    assert_eq!(r.cmd(&["SCARD", "big"]), V::Int(0));
}

#[test]
fn keys_expire_in_every_database() {
    let s = TestServer::start();
    let mut r = s.raw();
    r.cmd(&["SELECT", "9"]);
    r.cmd(&["SET", "short", "v", "PX", "50"]);
    r.cmd(&["RPUSH", "shortlist", "a"]);
    r.cmd(&["PEXPIRE", "shortlist", "50"]);
    r.cmd(&["SET", "keep", "v"]);
    // The background expirer deletes them without any read of them.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if keyspace_lines(&mut r) == vec!["db9:keys=1,expires=0"] {
            break;
        }
        assert!(Instant::now() < deadline, "{:?}", keyspace_lines(&mut r));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(r.cmd(&["GET", "keep"]), b("v"));
}

#[test]
fn pipelined_plain_gets_and_sets_honour_select() {
    let s = TestServer::start();
    let mut r = s.raw();
    let mut other = s.raw();
    r.cmd(&["SELECT", "4"]);
    for i in 0..50 {
        r.send(&["SET", &format!("k{i}"), &format!("four{i}")]);
    }
    for i in 0..50 {
        r.send(&["GET", &format!("k{i}")]);
    }
    r.send(&["MSET", "m1", "x", "m2", "y"]);
    for _ in 0..50 {
        assert_eq!(r.read(), ok());
    }
    for i in 0..50 {
        assert_eq!(r.read(), b(&format!("four{i}")));
    }
    assert_eq!(r.read(), ok());
    // Meanwhile database 0 saw none of it, and its own group commit works.
    other.send(&["SET", "k0", "zero"]);
    other.send(&["GET", "k0"]);
    assert_eq!(other.read(), ok());
    assert_eq!(other.read(), b("zero"));
    assert_eq!(other.cmd(&["DBSIZE"]), V::Int(1));
    assert_eq!(r.cmd(&["DBSIZE"]), V::Int(52));
    assert_eq!(r.cmd(&["GET", "k0"]), b("four0"));
}

#[test]
fn the_url_database_selects_on_connect() {
    let s = TestServer::start();
    let open = |db: u32| {
        let c = redis::Client::open(format!("redis://{}/{db}", s.addr)).unwrap();
        c.get_connection_with_timeout(common::TIMEOUT).unwrap()
    };
    let mut three = open(3);
    redis::cmd("SET")
        .arg("k")
        .arg("3")
        .query::<()>(&mut three)
        .unwrap();
    let mut zero = open(0);
    let v: Option<String> = redis::cmd("GET").arg("k").query(&mut zero).unwrap();
    assert_eq!(v, None);
    let v: Option<String> = redis::cmd("GET").arg("k").query(&mut open(3)).unwrap();
    assert_eq!(v.as_deref(), Some("3"));
    let c = redis::Client::open(format!("redis://{}/16", s.addr)).unwrap();
    assert!(c.get_connection_with_timeout(common::TIMEOUT).is_err());
}

#[test]
fn a_restart_keeps_every_database_and_its_counts() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = TestServer::at(dir.path(), |_| {});
        let mut r = s.raw();
        for db in ["0", "2", "15"] {
            r.cmd(&["SELECT", db]);
            r.cmd(&["SET", "k", db]);
            r.cmd(&["HSET", "h", "db", db]);
            r.cmd(&["SET", "t", "x", "EX", "1000"]);
        }
        // A database read but never written is not created.
        r.cmd(&["SELECT", "7"]);
        assert_eq!(r.cmd(&["GET", "k"]), V::Nil);
        s.stop().unwrap();
    }
    let s = TestServer::at(dir.path(), |_| {});
    let mut r = s.raw();
    assert_eq!(
        keyspace_lines(&mut r),
        vec![
            "db0:keys=3,expires=1",
            "db2:keys=3,expires=1",
            "db15:keys=3,expires=1"
        ]
    );
    for db in ["0", "2", "15"] {
        r.cmd(&["SELECT", db]);
        assert_eq!(r.cmd(&["GET", "k"]), b(db));
        assert_eq!(r.cmd(&["HGET", "h", "db"]), b(db));
    }
    s.stop().unwrap();
    let engine = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    assert_eq!(engine.keyspaces(), vec!["default", "db15", "db2"]);
    drop(engine);
    // Fewer databases than the directory holds: refused, as Redis refuses
    // such a data file.
    let mut c = weft_server::Config::default();
    c.port = 0;
    c.dir = dir.path().to_path_buf();
    c.databases = 8;
    match weft_server::Server::bind(c) {
        Err(e) => assert!(e.to_string().contains("database 15"), "{e}"),
        Ok(_) => panic!("a server with 8 databases opened a directory holding db15"),
    }
}
