//! The blocking pops across clients on several event loops: a push from
//! another loop wakes a blocked client, waiters are served first come first
//! served, timeouts, BLMOVE's move, sorted sets, BLMPOP/BZMPOP counts, and
//! departures (CLIENT KILL, hang-ups) that leave no waiter behind and no
//! element with a waiter asleep.

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{Raw, TestServer, V};
use redis::Commands;

/// Four loops: consecutive connections land on different loops, so every
/// wake-up below crosses threads.
fn server() -> TestServer {
    TestServer::with(|c| c.threads = 4)
}

fn b(s: &str) -> V {
    V::bulk(s)
}

fn arr(items: &[&str]) -> V {
    V::Array(items.iter().map(|s| b(s)).collect())
}

/// Polls `f` until it is true or 10 s pass.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A field of `INFO clients`.
fn info_field(c: &mut redis::Connection, name: &str) -> u64 {
    let text: String = redis::cmd("INFO").arg("clients").query(c).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("INFO clients has no {name}: {text}"))
        .trim()
        .parse()
        .unwrap()
}

fn blocked(c: &mut redis::Connection) -> u64 {
    info_field(c, "blocked_clients")
}

/// Waits until exactly `n` clients are blocked.
fn wait_blocked(c: &mut redis::Connection, n: u64) {
    eventually(&format!("{n} blocked clients"), || blocked(c) == n);
}

/// Nobody blocked and no key with a waiter: the registry is empty.
fn assert_no_waiters(c: &mut redis::Connection) {
    eventually("no blocked client", || blocked(c) == 0);
    assert_eq!(info_field(c, "total_blocking_keys"), 0);
    assert_eq!(info_field(c, "clients_in_timeout_table"), 0);
}

fn client_id(r: &mut Raw) -> i64 {
    match r.cmd(&["CLIENT", "ID"]) {
        V::Int(n) => n,
        other => panic!("CLIENT ID: {other:?}"),
    }
}

#[test]
fn blpop_is_woken_by_a_push_from_another_loop() {
    let s = server();
    let mut ctl = s.conn();
    for resp3 in [false, true] {
        let mut waiter = s.raw();
        if resp3 {
            waiter.cmd(&["HELLO", "3"]);
        }
        waiter.send(&["BLPOP", "nothing", "queue", "0"]);
        wait_blocked(&mut ctl, 1);
        assert_eq!(info_field(&mut ctl, "total_blocking_keys"), 2);
        let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut ctl).unwrap();
        assert!(
            list.lines()
                .any(|l| l.contains("flags=b") && l.contains("cmd=blpop")),
            "{list}"
        );
        // The pusher, a connection of another loop.
        let mut pusher = s.conn();
        let n: i64 = pusher.rpush("queue", &["job1", "job2"]).unwrap();
        assert_eq!(n, 2);
        assert_eq!(waiter.read(), arr(&["queue", "job1"]));
        assert_no_waiters(&mut ctl);
        let left: Vec<String> = pusher.lrange("queue", 0, -1).unwrap();
        assert_eq!(left, ["job2"]);
        let _: i64 = pusher.del("queue").unwrap();
        // The connection serves requests again.
        assert_eq!(waiter.cmd(&["PING"]), V::Simple("PONG".into()));
    }
    // The redis crate's own BLPOP, woken from another loop.
    let mut c = s.conn();
    let h = std::thread::spawn(move || {
        let got: Option<(String, String)> = c.blpop("jobs", 0.0).unwrap();
        got
    });
    wait_blocked(&mut ctl, 1);
    let _: i64 = ctl.lpush("jobs", "x").unwrap();
    assert_eq!(h.join().unwrap(), Some(("jobs".into(), "x".into())));
}

#[test]
fn requests_pipelined_after_a_blocked_one_wait_for_its_reply() {
    let s = server();
    let mut ctl = s.conn();
    let mut waiter = s.raw();
    let mut both = Raw::encode(&[b"BRPOP", b"k", b"0"]);
    both.extend(Raw::encode(&[b"LLEN", b"k"]));
    waiter.send_bytes(&both);
    wait_blocked(&mut ctl, 1);
    let _: i64 = ctl.rpush("k", &["a", "b"]).unwrap();
    assert_eq!(waiter.read(), arr(&["k", "b"]));
    // LLEN ran after the pop, not while the client was blocked.
    assert_eq!(waiter.read(), V::Int(1));
}

#[test]
fn waiters_are_served_first_come_first_served() {
    let s = server();
    let mut ctl = s.conn();
    let mut clients: Vec<Raw> = (0..3).map(|_| s.raw()).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        c.send(&["BLPOP", "q", "0"]);
        wait_blocked(&mut ctl, i as u64 + 1);
    }
    // One push of three: each waiter gets the one its turn gives it.
    let _: i64 = ctl.rpush("q", &["1", "2", "3"]).unwrap();
    for (c, want) in clients.iter_mut().zip(["1", "2", "3"]) {
        assert_eq!(c.read(), arr(&["q", want]));
    }
    assert_no_waiters(&mut ctl);

    // Pushes one at a time: only the first in line is served each time.
    for (i, c) in clients.iter_mut().enumerate() {
        c.send(&["BLPOP", "q", "0"]);
        wait_blocked(&mut ctl, i as u64 + 1);
    }
    for (i, want) in ["a", "b", "c"].iter().enumerate() {
        let _: i64 = ctl.rpush("q", *want).unwrap();
        assert_eq!(clients[i].read(), arr(&["q", want]));
        wait_blocked(&mut ctl, 2 - i as u64);
    }
    assert_no_waiters(&mut ctl);
}

#[test]
fn many_waiters_are_woken_in_order_by_one_many_element_push() {
    let s = server();
    let mut ctl = s.conn();
    const N: usize = 40;
    let mut clients: Vec<Raw> = (0..N).map(|_| s.raw()).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        c.send(&["BRPOP", "other", "many", "0"]);
        wait_blocked(&mut ctl, i as u64 + 1);
    }
    let elems: Vec<String> = (0..N + 5).map(|i| format!("e{i}")).collect();
    let _: i64 = ctl.rpush("many", &elems).unwrap();
    // BRPOP takes from the tail: the first waiter gets the last element.
    for (i, c) in clients.iter_mut().enumerate() {
        assert_eq!(c.read(), arr(&["many", &elems[N + 4 - i]]));
    }
    assert_no_waiters(&mut ctl);
    let n: i64 = ctl.llen("many").unwrap();
    assert_eq!(n, 5);
}

#[test]
fn timeouts_are_fractional_seconds_and_reply_nil() {
    let s = server();
    let mut ctl = s.conn();
    for resp3 in [false, true] {
        let mut c = s.raw();
        if resp3 {
            c.cmd(&["HELLO", "3"]);
        }
        let nil = if resp3 { V::Nil } else { V::NilArray };
        for cmd in [
            &["BLPOP", "none", "0.25"][..],
            &["BRPOP", "none", "none2", "0.25"],
            &["BLMOVE", "none", "dst", "LEFT", "RIGHT", "0.25"],
            &["BRPOPLPUSH", "none", "dst", "0.25"],
            &["BLMPOP", "0.25", "1", "none", "LEFT", "COUNT", "3"],
            &["BZPOPMIN", "none", "0.25"],
            &["BZPOPMAX", "none", "0.25"],
            &["BZMPOP", "0.25", "2", "none", "none2", "MIN"],
        ] {
            let started = Instant::now();
            assert_eq!(c.cmd(cmd), nil, "{cmd:?}");
            let took = started.elapsed();
            assert!(
                took >= Duration::from_millis(250) && took < Duration::from_secs(3),
                "{cmd:?} took {took:?}"
            );
        }
        assert_no_waiters(&mut ctl);
        // A request pipelined behind a timed-out one runs after it.
        let mut both = Raw::encode(&[b"BLPOP", b"none", b"0.05"]);
        both.extend(Raw::encode(&[b"PING"]));
        c.send_bytes(&both);
        assert_eq!(c.read(), nil);
        assert_eq!(c.read(), V::Simple("PONG".into()));
    }
    // Bad timeouts in Redis's words.
    let mut c = s.raw();
    assert_eq!(
        c.cmd(&["BLPOP", "k", "-1"]),
        V::Err("ERR timeout is negative".into())
    );
    assert_eq!(
        c.cmd(&["BZPOPMIN", "k", "soon"]),
        V::Err("ERR timeout is not a float or out of range".into())
    );
}

#[test]
fn a_timeout_racing_a_push_loses_nothing() {
    // Many short waits against a stream of pushes: every element pushed
    // is either popped by exactly one client or still in the list.
    let s = server();
    let mut ctl = s.conn();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hs: Vec<_> = (0..4)
        .map(|_| {
            let mut c = s.conn();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let r: Option<(String, String)> = c.blpop("race", 0.001).unwrap();
                    if let Some((_, v)) = r {
                        got.push(v);
                    }
                }
                got
            })
        })
        .collect();
    let mut pushed = Vec::new();
    for i in 0..400 {
        let v = format!("v{i}");
        let _: i64 = ctl.rpush("race", &v).unwrap();
        pushed.push(v);
        if i % 50 == 0 {
            std::thread::sleep(Duration::from_millis(3));
        }
    }
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut seen: Vec<String> = hs.into_iter().flat_map(|h| h.join().unwrap()).collect();
    let left: Vec<String> = ctl.lrange("race", 0, -1).unwrap();
    seen.extend(left);
    seen.sort();
    pushed.sort();
    assert_eq!(seen, pushed);
    assert_no_waiters(&mut ctl);
}

#[test]
fn blmove_and_brpoplpush_move_atomically_and_wake_the_destination() {
    let s = server();
    let mut ctl = s.conn();
    let mut mover = s.raw();
    mover.send(&["BLMOVE", "src", "dst", "RIGHT", "LEFT", "0"]);
    wait_blocked(&mut ctl, 1);
    assert_eq!(info_field(&mut ctl, "total_blocking_keys"), 1, "src only");
    let _: i64 = ctl.rpush("src", &["a", "b"]).unwrap();
    assert_eq!(mover.read(), b("b"));
    let src: Vec<String> = ctl.lrange("src", 0, -1).unwrap();
    let dst: Vec<String> = ctl.lrange("dst", 0, -1).unwrap();
    assert_eq!((src, dst), (vec!["a".to_string()], vec!["b".to_string()]));

    // A chain: a client blocked on the destination is served by the move
    // a woken BRPOPLPUSH makes.
    let _: i64 = ctl.del(&["src", "dst"]).unwrap();
    let mut taker = s.raw();
    mover.send(&["BRPOPLPUSH", "src", "dst", "0"]);
    wait_blocked(&mut ctl, 1);
    taker.send(&["BLPOP", "dst", "0"]);
    wait_blocked(&mut ctl, 2);
    let _: i64 = ctl.rpush("src", "x").unwrap();
    assert_eq!(mover.read(), b("x"));
    assert_eq!(taker.read(), arr(&["dst", "x"]));
    assert_no_waiters(&mut ctl);
    let n: i64 = ctl.exists(&["src", "dst"]).unwrap();
    assert_eq!(n, 0);

    // A destination of another type: the woken client gets WRONGTYPE (as
    // in Redis) and the element stays where it was.
    let _: () = ctl.set("str", "v").unwrap();
    mover.send(&["BLMOVE", "src", "str", "LEFT", "LEFT", "0"]);
    wait_blocked(&mut ctl, 1);
    let _: i64 = ctl.rpush("src", "y").unwrap();
    assert_eq!(
        mover.read(),
        V::Err("WRONGTYPE Operation against a key holding the wrong kind of value".into())
    );
    assert_no_waiters(&mut ctl);
    let n: i64 = ctl.llen("src").unwrap();
    assert_eq!(n, 1);

    // BLMOVE onto its own source rotates.
    let _: i64 = ctl.del("ring").unwrap();
    mover.send(&["BLMOVE", "ring", "ring", "LEFT", "RIGHT", "0"]);
    wait_blocked(&mut ctl, 1);
    let _: i64 = ctl.rpush("ring", &["1", "2", "3"]).unwrap();
    assert_eq!(mover.read(), b("1"));
    let ring: Vec<String> = ctl.lrange("ring", 0, -1).unwrap();
    assert_eq!(ring, ["2", "3", "1"]);
}

#[test]
fn bzpopmin_and_bzpopmax_are_woken_by_zadd_in_resp2_and_resp3() {
    let s = server();
    let mut ctl = s.conn();
    for resp3 in [false, true] {
        let mut c = s.raw();
        if resp3 {
            c.cmd(&["HELLO", "3"]);
        }
        let score = |t: &str| {
            if resp3 {
                V::Double(t.into())
            } else {
                b(t)
            }
        };
        c.send(&["BZPOPMIN", "z0", "z", "0"]);
        wait_blocked(&mut ctl, 1);
        let _: i64 = ctl
            .zadd_multiple("z", &[(2, "b"), (1, "a"), (3, "c")])
            .unwrap();
        assert_eq!(c.read(), V::Array(vec![b("z"), b("a"), score("1")]));
        c.send(&["BZPOPMAX", "z", "0"]);
        assert_eq!(c.read(), V::Array(vec![b("z"), b("c"), score("3")]));
        c.send(&["BZPOPMAX", "z1", "0"]);
        wait_blocked(&mut ctl, 1);
        let _: f64 = ctl.zincr("z1", "m", 2.5).unwrap();
        assert_eq!(c.read(), V::Array(vec![b("z1"), b("m"), score("2.5")]));
        let _: i64 = ctl.del(&["z", "z1"]).unwrap();
    }
    assert_no_waiters(&mut ctl);

    // A list waiter is not woken by a sorted set (Redis 7.0 leaves it
    // blocked), and a sorted-set waiter not by a list.
    let mut lw = s.raw();
    lw.send(&["BLPOP", "k", "0"]);
    wait_blocked(&mut ctl, 1);
    let mut zw = s.raw();
    zw.send(&["BZPOPMIN", "k", "0"]);
    wait_blocked(&mut ctl, 2);
    let _: i64 = ctl.zadd("k", "m", 1).unwrap();
    assert_eq!(zw.read(), V::Array(vec![b("k"), b("m"), b("1")]));
    zw.send(&["BZPOPMIN", "k", "0"]);
    wait_blocked(&mut ctl, 2);
    let _: i64 = ctl.rpush("k", "e").unwrap();
    assert_eq!(lw.read(), arr(&["k", "e"]));
    wait_blocked(&mut ctl, 1);
    let _: i64 = ctl.zadd("k", "n", 5).unwrap();
    assert_eq!(zw.read(), V::Array(vec![b("k"), b("n"), b("5")]));
    assert_no_waiters(&mut ctl);
}

#[test]
fn blmpop_and_bzmpop_pop_up_to_count_from_the_first_key_with_elements() {
    let s = server();
    let mut ctl = s.conn();
    let mut c = s.raw();
    c.send(&["BLMPOP", "0", "2", "a", "b", "LEFT", "COUNT", "2"]);
    wait_blocked(&mut ctl, 1);
    let _: i64 = ctl.rpush("b", &["1", "2", "3"]).unwrap();
    assert_eq!(c.read(), V::Array(vec![b("b"), arr(&["1", "2"])]));
    c.send(&["BLMPOP", "0", "2", "a", "b", "RIGHT", "COUNT", "10"]);
    assert_eq!(c.read(), V::Array(vec![b("b"), arr(&["3"])]));

    c.cmd(&["HELLO", "3"]);
    c.send(&["BZMPOP", "0", "1", "z", "MAX", "COUNT", "5"]);
    wait_blocked(&mut ctl, 1);
    let _: i64 = ctl.zadd_multiple("z", &[(1, "a"), (2, "b")]).unwrap();
    let pair = |m: &str, s: &str| V::Array(vec![b(m), V::Double(s.into())]);
    assert_eq!(
        c.read(),
        V::Array(vec![b("z"), V::Array(vec![pair("b", "2"), pair("a", "1")])])
    );
    assert_no_waiters(&mut ctl);
}

#[test]
fn a_killed_or_departed_waiter_leaves_no_waiter_behind() {
    let s = server();
    let mut ctl = s.conn();
    // Killed by CLIENT KILL from another loop.
    let mut victim = s.raw();
    let id = client_id(&mut victim);
    victim.send(&["BLPOP", "k1", "k2", "0"]);
    wait_blocked(&mut ctl, 1);
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(id)
        .query(&mut ctl)
        .unwrap();
    assert_eq!(killed, 1);
    assert!(victim.closed());
    assert_no_waiters(&mut ctl);
    // Nobody takes what is pushed now.
    let _: i64 = ctl.rpush("k1", "x").unwrap();
    let n: i64 = ctl.llen("k1").unwrap();
    assert_eq!(n, 1);

    // Hangs up while blocked; so does one blocked with a timeout.
    let mut gone = s.raw();
    gone.send(&["BZPOPMIN", "z", "0"]);
    let mut gone2 = s.raw();
    gone2.send(&["BLPOP", "k3", "100"]);
    wait_blocked(&mut ctl, 2);
    assert_eq!(info_field(&mut ctl, "clients_in_timeout_table"), 1);
    drop(gone);
    drop(gone2);
    assert_no_waiters(&mut ctl);

    // The next in line is served once those ahead of it left.
    let mut first = s.raw();
    first.send(&["BLPOP", "q", "0"]);
    wait_blocked(&mut ctl, 1);
    let mut second = s.raw();
    second.send(&["BLPOP", "q", "0"]);
    wait_blocked(&mut ctl, 2);
    drop(first);
    wait_blocked(&mut ctl, 1);
    let _: i64 = ctl.rpush("q", "v").unwrap();
    assert_eq!(second.read(), arr(&["q", "v"]));
    assert_no_waiters(&mut ctl);
}

#[test]
fn departures_racing_pushes_leave_no_element_with_a_waiter_asleep() {
    // 30 waiters on 4 loops; 30 elements pushed one by one while 10 of the
    // waiters are killed. A killed waiter may take an element before it
    // dies (as in Redis, it is lost with its reply), or be woken and die
    // before taking it: then the wake-up must reach the next in line.
    // With 30 elements and at most 10 lost, all 20 survivors are served.
    let s = server();
    let mut ctl = s.conn();
    const N: usize = 30;
    let mut ids = Vec::new();
    let mut clients: Vec<Raw> = (0..N)
        .map(|_| {
            let mut c = s.raw();
            ids.push(client_id(&mut c));
            c
        })
        .collect();
    for (i, c) in clients.iter_mut().enumerate() {
        c.send(&["BLPOP", "jobs", "0"]);
        wait_blocked(&mut ctl, i as u64 + 1);
    }
    let victims: Vec<i64> = ids.iter().copied().step_by(3).collect();
    let mut killer = s.conn();
    let kills = std::thread::spawn(move || {
        for id in victims {
            let _: i64 = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("ID")
                .arg(id)
                .query(&mut killer)
                .unwrap();
            std::thread::sleep(Duration::from_micros(300));
        }
    });
    for i in 0..N {
        let _: i64 = ctl.rpush("jobs", format!("j{i}")).unwrap();
        std::thread::sleep(Duration::from_micros(200));
    }
    kills.join().unwrap();
    let mut got = Vec::new();
    for (i, c) in clients.iter_mut().enumerate() {
        if i % 3 == 0 {
            continue; // killed
        }
        match c.read() {
            V::Array(v) => got.push(v[1].clone()),
            other => panic!("client {i}: {other:?}"),
        }
    }
    assert_eq!(got.len(), N - N / 3);
    got.sort_by_key(|v| format!("{v:?}"));
    got.dedup();
    assert_eq!(got.len(), N - N / 3, "an element was given twice");
    assert_no_waiters(&mut ctl);
}

#[test]
fn wrong_types_are_refused_before_blocking() {
    let s = server();
    let mut ctl = s.conn();
    let _: () = ctl.set("s", "v").unwrap();
    let mut c = s.raw();
    let wrongtype =
        V::Err("WRONGTYPE Operation against a key holding the wrong kind of value".into());
    assert_eq!(c.cmd(&["BLPOP", "none", "s", "0"]), wrongtype);
    assert_eq!(c.cmd(&["BZPOPMIN", "s", "0"]), wrongtype);
    assert_eq!(c.cmd(&["BLMOVE", "s", "d", "LEFT", "LEFT", "0"]), wrongtype);
    // A list before the wrong type is served first.
    let _: i64 = ctl.rpush("l", "x").unwrap();
    assert_eq!(c.cmd(&["BLPOP", "l", "s", "0"]), arr(&["l", "x"]));
    assert_eq!(blocked(&mut ctl), 0);
}

/// How the first waiter fails to take what woke it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Miss {
    /// Killed after the push woke it, before it ran.
    KilledAfterWake,
    /// Killed before the push, but its loop had not closed it yet.
    KilledBeforeWake,
    /// Its timeout passed while the wake-up waited in its loop's mailbox.
    TimedOut,
    /// Another client took the element first: it keeps its turn.
    Stolen,
}

/// LPOS scans of 500 000 elements the staller pipelines: long after the
/// first one ends, the loop is still busy with the rest.
const STALLING_SCANS: usize = 12;

/// Waits (bounded) until `CLIENT LIST`, asked on another loop, shows that
/// client `id` has finished an `LPOS`.
fn wait_ran_lpos(c: &mut redis::Connection, id: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let me = format!("id={id} ");
    loop {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(c).unwrap();
        if list
            .lines()
            .any(|l| l.starts_with(&me) && l.contains(" cmd=lpos "))
        {
            return;
        }
        assert!(Instant::now() < deadline, "the staller never ran: {list}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_waiter_woken_that_cannot_take_passes_its_wake_up_on() {
    // Two loops; connections are dealt to them in turn: 0 1 0 1 0.
    let s = TestServer::with(|c| c.threads = 2);
    let mut ctl = s.conn(); // loop 0
    let mut other = s.conn(); // loop 1
                              // A long list for the staller to scan.
    let chunk: Vec<String> = (0..20_000).map(|i| format!("{i:08}")).collect();
    for _ in 0..25 {
        let _: i64 = other.rpush("big", &chunk).unwrap();
    }
    for miss in [
        Miss::KilledAfterWake,
        Miss::KilledBeforeWake,
        Miss::TimedOut,
        Miss::Stolen,
    ] {
        let mut first = s.raw(); // loop 0
        let id = client_id(&mut first);
        let timeout = if miss == Miss::TimedOut { "0.1" } else { "0" };
        first.send(&["BLPOP", "k", timeout]);
        wait_blocked(&mut ctl, 1);
        let mut second = s.raw(); // loop 1
        second.send(&["BLPOP", "k", "0"]);
        wait_blocked(&mut ctl, 2);
        let mut staller = s.raw(); // loop 0
        let staller_id = client_id(&mut staller);
        // Keeps loop 0 busy while the wake-up (and the kill) reach its
        // mailbox: `first` is woken and cannot run before it is killed or
        // its deadline passes.
        let mut scans = Vec::new();
        for _ in 0..STALLING_SCANS {
            scans.extend(Raw::encode(&[b"LPOS", b"big", b"none"]));
        }
        let started = Instant::now();
        staller.send_bytes(&scans);
        // Loop 0 is inside the staller's pipeline once its first scan is
        // done (a loaded machine may start it late: no fixed sleep).
        wait_ran_lpos(&mut other, staller_id);
        let kill = |c: &mut redis::Connection| {
            let n: i64 = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("ID")
                .arg(id)
                .query(c)
                .unwrap();
            assert_eq!(n, 1);
        };
        if miss == Miss::KilledBeforeWake {
            kill(&mut other);
        }
        let _: i64 = other.rpush("k", "x").unwrap();
        if miss == Miss::KilledAfterWake {
            kill(&mut other);
        }
        if miss == Miss::Stolen {
            let got: Option<String> = other.lpop("k", None).unwrap();
            assert_eq!(got.as_deref(), Some("x"));
        }
        let pushed = started.elapsed();
        for _ in 0..STALLING_SCANS {
            assert_eq!(staller.read(), V::Nil);
        }
        let scanned = started.elapsed();
        assert!(
            scanned > pushed + Duration::from_millis(100),
            "the staller must still run when the push is made ({pushed:?}, {scanned:?})"
        );
        match miss {
            Miss::Stolen => {
                // Nothing was left: both still wait, `first` still first.
                wait_blocked(&mut ctl, 2);
                let _: i64 = other.rpush("k", "y").unwrap();
                assert_eq!(first.read(), arr(&["k", "y"]));
                let _: i64 = other.rpush("k", "z").unwrap();
                assert_eq!(second.read(), arr(&["k", "z"]));
            }
            Miss::TimedOut => {
                assert_eq!(second.read(), arr(&["k", "x"]), "{miss:?}");
                assert_eq!(first.read(), V::NilArray);
            }
            _ => {
                assert_eq!(second.read(), arr(&["k", "x"]), "{miss:?}");
                assert!(first.closed());
            }
        }
        assert_no_waiters(&mut ctl);
        drop(staller);
        drop(first);
        // Keep the dealing order: this one lands on loop 1, so the next
        // `first` lands on loop 0.
        let _ = s.raw();
    }
}

#[test]
fn rename_copy_and_restore_onto_a_waited_key_wake_its_waiter() {
    let s = server();
    let mut ctl = s.conn();
    let mut waiter = s.raw();
    // RENAME of a list onto the key a client waits on.
    let _: i64 = ctl.rpush("src", &["a", "b"]).unwrap();
    waiter.send(&["BLPOP", "dst", "0"]);
    wait_blocked(&mut ctl, 1);
    let _: () = redis::cmd("RENAME")
        .arg("src")
        .arg("dst")
        .query(&mut ctl)
        .unwrap();
    assert_eq!(waiter.read(), arr(&["dst", "a"]));
    assert_no_waiters(&mut ctl);
    // COPY of a sorted set onto a key a BZPOPMIN waits on.
    let _: i64 = ctl.zadd("zsrc", "m", 1).unwrap();
    waiter.send(&["BZPOPMIN", "zdst", "0"]);
    wait_blocked(&mut ctl, 1);
    let copied: i64 = redis::cmd("COPY")
        .arg("zsrc")
        .arg("zdst")
        .query(&mut ctl)
        .unwrap();
    assert_eq!(copied, 1);
    assert_eq!(waiter.read(), arr(&["zdst", "m", "1"]));
    assert_no_waiters(&mut ctl);
    // RESTORE of a DUMPed list onto a waited key.
    let payload: Vec<u8> = redis::cmd("DUMP").arg("dst").query(&mut ctl).unwrap();
    waiter.send(&["BRPOP", "restored", "0"]);
    wait_blocked(&mut ctl, 1);
    let _: () = redis::cmd("RESTORE")
        .arg("restored")
        .arg(0)
        .arg(payload)
        .query(&mut ctl)
        .unwrap();
    assert_eq!(waiter.read(), arr(&["restored", "b"]));
    assert_no_waiters(&mut ctl);
}

#[test]
fn blocking_pops_inside_exec_answer_at_once() {
    let s = server();
    let mut ctl = s.conn();
    let mut c = s.raw();
    assert_eq!(c.cmd(&["MULTI"]), V::Simple("OK".into()));
    assert_eq!(c.cmd(&["BLPOP", "empty", "0"]), V::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["RPUSH", "full", "x"]), V::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["BRPOP", "full", "0"]), V::Simple("QUEUED".into()));
    assert_eq!(
        c.cmd(&["EXEC"]),
        V::Array(vec![V::NilArray, V::Int(1), arr(&["full", "x"])])
    );
    assert_no_waiters(&mut ctl);
}
