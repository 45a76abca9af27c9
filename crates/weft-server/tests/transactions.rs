//! `MULTI`/`EXEC`/`DISCARD`/`WATCH`/`UNWATCH` over loopback: Redis's
//! replies, `EXECABORT`, `WATCH` conflicts, an `EXEC` reading its own
//! writes, key counts across `EXEC`s, and a randomized test of atomicity
//! and isolation against a model.

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{TestServer, V};
use rand::{Rng, SeedableRng};

fn ok() -> V {
    V::Simple("OK".into())
}

fn queued() -> V {
    V::Simple("QUEUED".into())
}

fn b(s: &str) -> V {
    V::bulk(s)
}

#[test]
fn multi_exec_runs_the_queue_in_order_and_sees_its_own_writes() {
    let s = TestServer::start();
    let mut r = s.raw();
    assert_eq!(r.cmd(&["SET", "pre", "x"]), ok());
    assert_eq!(r.cmd(&["MULTI"]), ok());
    for c in [
        &["INCR", "n"][..],
        &["INCR", "n"],
        &["RPUSH", "l", "a", "b"],
        &["LPUSH", "l", "z"],
        &["LRANGE", "l", "0", "-1"],
        &["HSET", "h", "f", "1"],
        &["HINCRBY", "h", "f", "41"],
        &["HGETALL", "h"],
        &["SADD", "s", "m1", "m2"],
        &["SMEMBERS", "s"],
        &["ZADD", "z", "1", "a", "2", "b"],
        &["ZRANGE", "z", "0", "-1"],
        &["DEL", "pre"],
        &["EXISTS", "pre"],
        &["DBSIZE"],
        &["GET", "n"],
        &["KEYS", "*"],
    ] {
        assert_eq!(r.cmd(c), queued(), "{c:?}");
    }
    // Nothing ran yet.
    assert_eq!(s.raw().cmd(&["GET", "n"]), V::Nil);
    let got = r.cmd(&["EXEC"]);
    let want = V::Array(vec![
        V::Int(1),
        V::Int(2),
        V::Int(2),
        V::Int(3),
        V::Array(vec![b("z"), b("a"), b("b")]),
        V::Int(1),
        V::Int(42),
        V::Array(vec![b("f"), b("42")]),
        V::Int(2),
        V::Array(vec![b("m1"), b("m2")]),
        V::Int(2),
        V::Array(vec![b("a"), b("b")]),
        V::Int(1),
        V::Int(0),
        V::Int(5),
        b("2"),
        V::Array(vec![b("h"), b("l"), b("n"), b("s"), b("z")]),
    ]);
    assert_eq!(got, want);
    let mut o = s.raw();
    assert_eq!(o.cmd(&["GET", "n"]), b("2"));
    assert_eq!(
        o.cmd(&["LRANGE", "l", "0", "-1"]),
        V::Array(vec![b("z"), b("a"), b("b")])
    );
    assert_eq!(o.cmd(&["DBSIZE"]), V::Int(5));
    assert_eq!(o.cmd(&["EXISTS", "pre"]), V::Int(0));
}

#[test]
fn errors_at_exec_time_are_replies_and_the_rest_runs() {
    let s = TestServer::start();
    let mut r = s.raw();
    r.cmd(&["RPUSH", "list", "x"]);
    assert_eq!(r.cmd(&["MULTI"]), ok());
    assert_eq!(r.cmd(&["SET", "a", "1"]), queued());
    assert_eq!(r.cmd(&["INCR", "list"]), queued());
    assert_eq!(r.cmd(&["SELECT", "99"]), queued());
    assert_eq!(r.cmd(&["INCR", "a"]), queued());
    match r.cmd(&["EXEC"]) {
        V::Array(v) => {
            assert_eq!(v[0], ok());
            assert!(
                matches!(&v[1], V::Err(e) if e.starts_with("WRONGTYPE")),
                "{v:?}"
            );
            assert_eq!(v[2], V::Err("ERR DB index is out of range".into()));
            assert_eq!(v[3], V::Int(2));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(r.cmd(&["GET", "a"]), b("2"));
}

#[test]
fn discard_and_the_errors_of_misplaced_commands() {
    let s = TestServer::start();
    let mut r = s.raw();
    assert_eq!(r.cmd(&["EXEC"]), V::Err("ERR EXEC without MULTI".into()));
    assert_eq!(
        r.cmd(&["DISCARD"]),
        V::Err("ERR DISCARD without MULTI".into())
    );
    assert_eq!(r.cmd(&["MULTI"]), ok());
    assert_eq!(
        r.cmd(&["MULTI"]),
        V::Err("ERR MULTI calls can not be nested".into())
    );
    assert_eq!(
        r.cmd(&["WATCH", "k"]),
        V::Err("ERR WATCH inside MULTI is not allowed".into())
    );
    assert_eq!(r.cmd(&["SET", "k", "v"]), queued());
    assert_eq!(r.cmd(&["DISCARD"]), ok());
    assert_eq!(r.cmd(&["GET", "k"]), V::Nil);
    // Nesting and WATCH errors do not abort the transaction (as in Redis).
    assert_eq!(r.cmd(&["MULTI"]), ok());
    r.cmd(&["MULTI"]);
    assert_eq!(r.cmd(&["SET", "k", "v"]), queued());
    assert_eq!(r.cmd(&["EXEC"]), V::Array(vec![ok()]));
    // Plain GETs and SETs queue too (the fast paths are off in MULTI).
    assert_eq!(r.cmd(&["MULTI"]), ok());
    r.send(&["SET", "p", "1"]);
    r.send(&["GET", "p"]);
    r.send(&["MSET", "q", "2", "r", "3"]);
    r.send(&["EXEC"]);
    assert_eq!(r.read(), queued());
    assert_eq!(r.read(), queued());
    assert_eq!(r.read(), queued());
    assert_eq!(r.read(), V::Array(vec![ok(), b("1"), ok()]));
}

#[test]
fn a_queuing_error_aborts_the_exec() {
    let s = TestServer::start();
    let mut r = s.raw();
    let abort = V::Err("EXECABORT Transaction discarded because of previous errors.".into());
    for bad in [
        &["NOSUCHCOMMAND", "x"][..],
        &["SET", "x"],
        &["GET"],
        &["SAVE"],
        &["SUBSCRIBE", "ch"],
    ] {
        assert_eq!(r.cmd(&["MULTI"]), ok());
        assert_eq!(r.cmd(&["SET", "x", "1"]), queued());
        assert!(matches!(r.cmd(bad), V::Err(_)), "{bad:?}");
        assert_eq!(r.cmd(&["SET", "y", "1"]), queued());
        assert_eq!(r.cmd(&["EXEC"]), abort, "{bad:?}");
        assert_eq!(r.cmd(&["EXISTS", "x", "y"]), V::Int(0), "{bad:?}");
        // The connection is out of MULTI.
        assert_eq!(r.cmd(&["PING"]), V::Simple("PONG".into()));
    }
}

#[test]
fn monitor_inside_exec_is_refused() {
    let s = TestServer::start();
    let mut r = s.raw();
    r.cmd(&["MULTI"]);
    r.cmd(&["MONITOR"]);
    r.cmd(&["SET", "a", "1"]);
    assert_eq!(
        r.cmd(&["EXEC"]),
        V::Array(vec![
            V::Err("ERR MONITOR isn't allowed for DENY BLOCKING client".into()),
            ok()
        ])
    );
}

#[test]
fn watch_fails_the_exec_after_another_clients_write() {
    let s = TestServer::start();
    let mut a = s.raw();
    let mut other = s.raw();
    a.cmd(&["SET", "k", "0"]);
    assert_eq!(a.cmd(&["WATCH", "k", "unrelated"]), ok());
    assert_eq!(other.cmd(&["SET", "k", "theirs"]), ok());
    a.cmd(&["MULTI"]);
    a.cmd(&["SET", "k", "mine"]);
    a.cmd(&["SET", "side", "effect"]);
    assert_eq!(a.cmd(&["EXEC"]), V::NilArray);
    assert_eq!(a.cmd(&["GET", "k"]), b("theirs"));
    assert_eq!(a.cmd(&["EXISTS", "side"]), V::Int(0));
    // EXEC unwatched everything: the next transaction runs.
    a.cmd(&["MULTI"]);
    a.cmd(&["SET", "k", "mine"]);
    assert_eq!(a.cmd(&["EXEC"]), V::Array(vec![ok()]));

    // Without a conflicting write the EXEC runs; a read is no conflict.
    a.cmd(&["WATCH", "k"]);
    other.cmd(&["GET", "k"]);
    other.cmd(&["SET", "elsewhere", "1"]);
    a.cmd(&["MULTI"]);
    a.cmd(&["INCR", "c"]);
    assert_eq!(a.cmd(&["EXEC"]), V::Array(vec![V::Int(1)]));

    // A deletion, an expiry set, a collection write: all conflicts.
    for write in [
        &["DEL", "k"][..],
        &["EXPIRE", "k", "100"],
        &["SET", "k", "again"],
    ] {
        a.cmd(&["SET", "k", "v"]);
        a.cmd(&["WATCH", "k"]);
        other.cmd(write);
        a.cmd(&["MULTI"]);
        a.cmd(&["INCR", "c"]);
        assert_eq!(a.cmd(&["EXEC"]), V::NilArray, "{write:?}");
    }
    other.cmd(&["DEL", "h"]);
    a.cmd(&["WATCH", "h"]);
    other.cmd(&["HSET", "h", "f", "v"]);
    a.cmd(&["MULTI"]);
    a.cmd(&["INCR", "c"]);
    assert_eq!(a.cmd(&["EXEC"]), V::NilArray);

    // The same client's own write outside MULTI counts, as in Redis.
    a.cmd(&["WATCH", "k"]);
    a.cmd(&["SET", "k", "self"]);
    a.cmd(&["MULTI"]);
    a.cmd(&["INCR", "c"]);
    assert_eq!(a.cmd(&["EXEC"]), V::NilArray);

    // UNWATCH and DISCARD forget the watched keys.
    a.cmd(&["WATCH", "k"]);
    assert_eq!(a.cmd(&["UNWATCH"]), ok());
    other.cmd(&["SET", "k", "x"]);
    a.cmd(&["MULTI"]);
    a.cmd(&["INCR", "c"]);
    assert_eq!(a.cmd(&["EXEC"]), V::Array(vec![V::Int(2)]));
    a.cmd(&["WATCH", "k"]);
    a.cmd(&["MULTI"]);
    a.cmd(&["DISCARD"]);
    other.cmd(&["SET", "k", "y"]);
    a.cmd(&["MULTI"]);
    a.cmd(&["INCR", "c"]);
    assert_eq!(a.cmd(&["EXEC"]), V::Array(vec![V::Int(3)]));

    // A watched key in another database is that database's key.
    a.cmd(&["SELECT", "2"]);
    a.cmd(&["WATCH", "k"]);
    a.cmd(&["SELECT", "0"]);
    other.cmd(&["SET", "k", "db0's"]);
    a.cmd(&["MULTI"]);
    a.cmd(&["INCR", "c"]);
    assert_eq!(a.cmd(&["EXEC"]), V::Array(vec![V::Int(4)]));
}

#[test]
fn watch_fails_the_exec_once_a_watched_key_expires() {
    let s = TestServer::start();
    let mut a = s.raw();
    a.cmd(&["SET", "k", "v", "PX", "150"]);
    a.cmd(&["WATCH", "k"]);
    std::thread::sleep(Duration::from_millis(300));
    a.cmd(&["MULTI"]);
    a.cmd(&["SET", "other", "1"]);
    assert_eq!(a.cmd(&["EXEC"]), V::NilArray);
    assert_eq!(a.cmd(&["EXISTS", "other"]), V::Int(0));
}

#[test]
fn watch_with_the_redis_crate_from_a_second_client() {
    let s = TestServer::start();
    let mut c = s.conn();
    let mut d = s.conn();
    redis::cmd("SET")
        .arg("bal")
        .arg(10)
        .query::<()>(&mut c)
        .unwrap();
    redis::cmd("WATCH").arg("bal").query::<()>(&mut c).unwrap();
    let bal: i64 = redis::cmd("GET").arg("bal").query(&mut c).unwrap();
    redis::cmd("SET")
        .arg("bal")
        .arg(100)
        .query::<()>(&mut d)
        .unwrap();
    let r: Option<(i64,)> = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("bal")
        .arg(bal - 3)
        .ignore()
        .cmd("GET")
        .arg("bal")
        .query(&mut c)
        .unwrap();
    assert_eq!(r, None, "EXEC must fail after the other client's SET");
    let r: (i64, i64) = redis::pipe()
        .atomic()
        .cmd("INCRBY")
        .arg("bal")
        .arg(5)
        .cmd("DECRBY")
        .arg("bal")
        .arg(1)
        .query(&mut c)
        .unwrap();
    assert_eq!(r, (105, 104));
    // The redis crate's transaction helper retries until the WATCH holds.
    let v: (i64,) = redis::transaction(&mut c, &["bal"], |con, pipe| {
        let cur: i64 = redis::cmd("GET").arg("bal").query(con)?;
        pipe.cmd("SET").arg("bal").arg(cur * 2).ignore();
        pipe.cmd("GET").arg("bal").query(con)
    })
    .unwrap();
    assert_eq!(v, (208,));
}

#[test]
fn key_counts_stay_exact_across_execs_and_aborted_ones() {
    let s = TestServer::start();
    let mut r = s.raw();
    let mut other = s.raw();
    r.cmd(&["MSET", "a", "1", "b", "2"]);
    r.cmd(&["MULTI"]);
    r.cmd(&["SET", "c", "3", "EX", "100"]);
    r.cmd(&["DEL", "a"]);
    r.cmd(&["SET", "a", "again"]);
    r.cmd(&["DEL", "b", "nosuch"]);
    r.cmd(&["RPUSH", "l", "x"]);
    r.cmd(&["LPOP", "l"]);
    r.cmd(&["DBSIZE"]);
    match r.cmd(&["EXEC"]) {
        V::Array(v) => assert_eq!(v.last(), Some(&V::Int(2))),
        other => panic!("{other:?}"),
    }
    assert_eq!(r.cmd(&["DBSIZE"]), V::Int(2));
    // An aborted EXEC changes no count.
    r.cmd(&["WATCH", "a"]);
    other.cmd(&["SET", "a", "x"]);
    r.cmd(&["MULTI"]);
    r.cmd(&["SET", "new1", "1"]);
    r.cmd(&["SET", "new2", "1", "EX", "100"]);
    assert_eq!(r.cmd(&["EXEC"]), V::NilArray);
    r.cmd(&["MULTI"]);
    r.cmd(&["SET", "new1", "1"]);
    r.cmd(&["NOSUCH"]);
    r.cmd(&["EXEC"]);
    assert_eq!(r.cmd(&["DBSIZE"]), V::Int(2));
    let info = match r.cmd(&["INFO", "keyspace"]) {
        V::Bulk(t) => String::from_utf8(t).unwrap(),
        V::Verbatim(t) => t,
        other => panic!("{other:?}"),
    };
    assert!(info.contains("db0:keys=2,expires=1,"), "{info}");
    // FLUSHDB inside an EXEC, then writes after it in the same EXEC.
    r.cmd(&["MULTI"]);
    r.cmd(&["SET", "before", "1"]);
    r.cmd(&["FLUSHDB"]);
    r.cmd(&["SET", "after", "1"]);
    r.cmd(&["DBSIZE"]);
    r.cmd(&["KEYS", "*"]);
    assert_eq!(
        r.cmd(&["EXEC"]),
        V::Array(vec![
            ok(),
            ok(),
            ok(),
            V::Int(1),
            V::Array(vec![b("after")])
        ])
    );
    assert_eq!(r.cmd(&["DBSIZE"]), V::Int(1));
    assert_eq!(r.cmd(&["GET", "a"]), V::Nil);
    assert_eq!(r.cmd(&["GET", "after"]), b("1"));
}

#[test]
fn exec_with_select_and_move_spans_databases() {
    let s = TestServer::start();
    let mut r = s.raw();
    r.cmd(&["MULTI"]);
    r.cmd(&["SET", "k", "zero"]);
    r.cmd(&["SELECT", "3"]);
    r.cmd(&["SET", "k", "three"]);
    r.cmd(&["RPUSH", "l", "a", "b"]);
    r.cmd(&["MOVE", "l", "0"]);
    r.cmd(&["DBSIZE"]);
    assert_eq!(
        r.cmd(&["EXEC"]),
        V::Array(vec![ok(), ok(), ok(), V::Int(2), V::Int(1), V::Int(1)])
    );
    // The SELECT inside the EXEC stays in force, as in Redis.
    assert_eq!(r.cmd(&["GET", "k"]), b("three"));
    r.cmd(&["SELECT", "0"]);
    assert_eq!(r.cmd(&["GET", "k"]), b("zero"));
    assert_eq!(
        r.cmd(&["LRANGE", "l", "0", "-1"]),
        V::Array(vec![b("a"), b("b")])
    );
}

/// Clients transfer between counters in `EXEC`s (some `WATCH`ing a
/// balance first, so that it never goes negative), others read all the
/// counters in `EXEC`s and with `MGET`, others run plain commands on keys
/// of their own. Every read sees the totals intact (atomic and isolated
/// `EXEC`s, across two databases); at the end the counters are what the
/// successful `EXEC`s made them (the model), no watched balance is
/// negative (`WATCH` caught every conflict), and each plain writer's keys
/// hold its last values.
#[test]
fn randomized_execs_are_atomic_and_isolated() {
    const COUNTERS: usize = 6;
    // The watched group is poor: its balances often run low, so that
    // transfers racing for one balance would overdraw it without WATCH.
    const TOTALS: [i64; 2] = [600, 60];
    let s = TestServer::with(|c| c.threads = 2);
    let mut setup = s.raw();
    // Unwatched writers move between `acct:*`, watched ones between
    // `wacct:*` (never below zero).
    let groups: Vec<Vec<String>> = ["acct", "wacct"]
        .iter()
        .map(|g| (0..COUNTERS).map(|i| format!("{g}:{i}")).collect())
        .collect();
    for (k, total) in groups
        .iter()
        .zip(TOTALS)
        .flat_map(|(g, t)| g.iter().map(move |k| (k, t)))
    {
        setup.cmd(&["SET", k, &(total / COUNTERS as i64).to_string()]);
        // Database 1 holds a mirror moved in the same EXECs.
        setup.cmd(&["SELECT", "1"]);
        setup.cmd(&["SET", k, "0"]);
        setup.cmd(&["SELECT", "0"]);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..5u64 {
        let mut c = s.raw();
        let watched = w % 2 == 0;
        let keys = groups[usize::from(watched)].clone();
        let stop = Arc::clone(&stop);
        writers.push(std::thread::spawn(move || {
            let mut rng = rand::rngs::StdRng::seed_from_u64(w);
            let mut applied: Vec<(usize, usize, i64)> = Vec::new();
            let mut aborted = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let (from, to) = (rng.gen_range(0..COUNTERS), rng.gen_range(0..COUNTERS));
                let amount = rng.gen_range(1..20i64);
                if watched {
                    c.cmd(&["WATCH", &keys[from]]);
                    let bal: i64 = match c.cmd(&["GET", &keys[from]]) {
                        V::Bulk(v) => String::from_utf8(v).unwrap().parse().unwrap(),
                        other => panic!("{other:?}"),
                    };
                    if bal < amount {
                        c.cmd(&["UNWATCH"]);
                        continue;
                    }
                }
                c.cmd(&["MULTI"]);
                c.cmd(&["DECRBY", &keys[from], &amount.to_string()]);
                c.cmd(&["INCRBY", &keys[to], &amount.to_string()]);
                c.cmd(&["SELECT", "1"]);
                c.cmd(&["INCRBY", &keys[from], &amount.to_string()]);
                c.cmd(&["DECRBY", &keys[to], &amount.to_string()]);
                c.cmd(&["SELECT", "0"]);
                match c.cmd(&["EXEC"]) {
                    V::NilArray => {
                        assert!(watched, "an unwatched EXEC cannot fail");
                        aborted += 1;
                    }
                    V::Array(v) => {
                        assert_eq!(v.len(), 6, "{v:?}");
                        assert!(v.iter().all(|r| !matches!(r, V::Err(_))), "{v:?}");
                        applied.push((from, to, amount));
                    }
                    other => panic!("{other:?}"),
                }
            }
            (watched, applied, aborted)
        }));
    }
    let mut readers = Vec::new();
    for rd in 0..2 {
        let mut c = s.raw();
        let keys = groups[rd % 2].clone();
        let total = TOTALS[rd % 2];
        let stop = Arc::clone(&stop);
        readers.push(std::thread::spawn(move || {
            let to_int = |v: &V| match v {
                V::Bulk(v) => String::from_utf8(v.clone())
                    .unwrap()
                    .parse::<i64>()
                    .unwrap(),
                other => panic!("{other:?}"),
            };
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let mut args: Vec<&str> = vec!["MGET"];
                args.extend(keys.iter().map(String::as_str));
                let vals = if rd == 0 {
                    c.cmd(&["MULTI"]);
                    c.cmd(&args);
                    c.cmd(&["SELECT", "1"]);
                    c.cmd(&args);
                    c.cmd(&["SELECT", "0"]);
                    match c.cmd(&["EXEC"]) {
                        V::Array(v) => v,
                        other => panic!("{other:?}"),
                    }
                } else {
                    vec![c.cmd(&args)]
                };
                let sums: Vec<i64> = vals
                    .iter()
                    .filter_map(|v| match v {
                        V::Array(a) => Some(a.iter().map(to_int).sum()),
                        _ => None,
                    })
                    .collect();
                assert_eq!(sums[0], total, "a read saw a transfer half done: {vals:?}");
                if let Some(mirror) = sums.get(1) {
                    assert_eq!(*mirror, 0, "database 1's mirror half done: {vals:?}");
                }
                reads += 1;
            }
            reads
        }));
    }
    let mut plain = Vec::new();
    for p in 0..2u64 {
        let mut c = s.raw();
        let stop = Arc::clone(&stop);
        plain.push(std::thread::spawn(move || {
            let mut rng = rand::rngs::StdRng::seed_from_u64(100 + p);
            let mut model = std::collections::BTreeMap::new();
            while !stop.load(Ordering::Relaxed) {
                let k = format!("plain:{p}:{}", rng.gen_range(0..8));
                match rng.gen_range(0..3) {
                    0 => {
                        let v = rng.gen_range(0..1000).to_string();
                        assert_eq!(c.cmd(&["SET", &k, &v]), ok());
                        model.insert(k, v);
                    }
                    1 => {
                        let n = match c.cmd(&["INCR", &k]) {
                            V::Int(n) => n,
                            other => panic!("{other:?}"),
                        };
                        let want = model
                            .get(&k)
                            .map_or(0, |v: &String| v.parse::<i64>().unwrap())
                            + 1;
                        assert_eq!(n, want);
                        model.insert(k, n.to_string());
                    }
                    _ => {
                        let got = c.cmd(&["GET", &k]);
                        assert_eq!(got, model.get(&k).map_or(V::Nil, |v| b(v)));
                    }
                }
            }
            model
        }));
    }
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let mut want: Vec<Vec<i64>> = TOTALS
        .iter()
        .map(|t| vec![t / COUNTERS as i64; COUNTERS])
        .collect();
    let mut mirror = vec![vec![0i64; COUNTERS]; 2];
    let (mut execs, mut aborts) = (0, 0);
    for w in writers {
        let (watched, applied, aborted) = w.join().unwrap();
        let g = usize::from(watched);
        execs += applied.len();
        aborts += aborted;
        for (from, to, amount) in applied {
            want[g][from] -= amount;
            want[g][to] += amount;
            mirror[g][from] += amount;
            mirror[g][to] -= amount;
        }
    }
    let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(
        execs > 100 && reads > 50,
        "too little happened: {execs} EXECs, {reads} reads"
    );
    let mut c = s.raw();
    for (g, keys) in groups.iter().enumerate() {
        for (i, k) in keys.iter().enumerate() {
            let got = c.cmd(&["GET", k]);
            assert_eq!(
                got,
                b(&want[g][i].to_string()),
                "{k} ({execs} EXECs, {aborts} aborted)"
            );
        }
    }
    // Watched transfers never overdraw (unwatched ones may).
    assert!(
        want[1].iter().all(|&v| v >= 0),
        "WATCH let an overdraft through: {:?}",
        want[1]
    );
    c.cmd(&["SELECT", "1"]);
    for (g, keys) in groups.iter().enumerate() {
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(c.cmd(&["GET", k]), b(&mirror[g][i].to_string()), "db1 {k}");
        }
    }
    c.cmd(&["SELECT", "0"]);
    for p in plain {
        for (k, v) in p.join().unwrap() {
            assert_eq!(c.cmd(&["GET", &k]), b(&v));
        }
    }
}

/// Long `EXEC`s of `INCR x` race plain `INCR x`s from other clients: each
/// `EXEC`'s replies are consecutive (no other write came between its
/// commands, visibly or not), and no increment is lost.
#[test]
fn an_exec_is_isolated_from_concurrent_writers_of_its_keys() {
    const PER_EXEC: usize = 50;
    let s = TestServer::with(|c| c.threads = 2);
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for id in 0..4 {
        let mut c = s.raw();
        let stop = Arc::clone(&stop);
        clients.push(std::thread::spawn(move || {
            let mut done = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if id % 2 == 0 {
                    c.send(&["MULTI"]);
                    for _ in 0..PER_EXEC {
                        c.send(&["INCR", "x"]);
                    }
                    c.send(&["EXEC"]);
                    for _ in 0..=PER_EXEC {
                        c.read();
                    }
                    let got = match c.read() {
                        V::Array(v) => v,
                        other => panic!("{other:?}"),
                    };
                    let first = match got[0] {
                        V::Int(n) => n,
                        ref other => panic!("{other:?}"),
                    };
                    let want: Vec<V> = (0..PER_EXEC as i64).map(|i| V::Int(first + i)).collect();
                    assert_eq!(got, want, "another write came inside an EXEC");
                    done += PER_EXEC as u64;
                } else {
                    assert!(matches!(c.cmd(&["INCR", "x"]), V::Int(_)));
                    done += 1;
                }
            }
            done
        }));
    }
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let total: u64 = clients.into_iter().map(|c| c.join().unwrap()).sum();
    assert_eq!(
        s.raw().cmd(&["GET", "x"]),
        b(&total.to_string()),
        "increments lost"
    );
}
