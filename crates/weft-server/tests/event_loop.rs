//! The event loops: a client that does not read is paused, not buffered;
//! writes of many clients share batches and each reads its own; a client
//! that half-closes gets every reply; several loops serve together.

// A test (or benchmark) fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Read;
use std::net::Shutdown;
use std::time::{Duration, Instant};

use common::{Raw, TestServer, V};

fn rss(r: &mut Raw) -> u64 {
    let V::Bulk(info) = r.cmd(&["INFO", "memory"]) else {
        panic!("INFO memory is not a bulk string");
    };
    let info = String::from_utf8(info).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory_rss:"))
        .expect("used_memory_rss in INFO memory")
        .trim()
        .parse()
        .unwrap()
}

/// 400 pipelined GETs of a 256 KiB value are 100 MiB of replies. The
/// server must stop running them while the client is not reading (its
/// memory stays flat), keep serving another client on the same loop, and
/// deliver every reply in order once the client reads.
#[test]
fn a_client_that_does_not_read_is_paused_not_buffered() {
    let s = TestServer::with(|c| c.threads = 1);
    let mut other = s.raw();
    let value = "v".repeat(256 << 10);
    assert_eq!(other.cmd(&["SET", "big", &value]), V::Simple("OK".into()));
    let before = rss(&mut other);

    const N: usize = 400;
    let mut slow = s.raw();
    let get = Raw::encode(&[b"GET", b"big"]);
    let blob: Vec<u8> = get.iter().copied().cycle().take(get.len() * N).collect();
    slow.send_bytes(&blob);
    // Give the server time to run as much as it will.
    std::thread::sleep(Duration::from_millis(300));

    // The same loop still answers someone else, at once.
    let t = Instant::now();
    for i in 0..50 {
        let k = format!("k{i}");
        assert_eq!(other.cmd(&["SET", &k, "x"]), V::Simple("OK".into()));
        assert_eq!(other.cmd(&["GET", &k]), V::bulk("x"));
    }
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    let during = rss(&mut other);
    assert!(
        during < before + (48 << 20),
        "server buffered replies for a client that does not read: RSS {before} -> {during}"
    );

    for i in 0..N {
        assert_eq!(slow.read(), V::bulk(&value), "reply {i}");
    }
    assert_eq!(slow.cmd(&["PING"]), V::Simple("PONG".into()));
}

/// Many clients on two loops write concurrently; each reads its own write
/// back at once, MSETs stay atomic, and the final values are the last
/// ones each client acknowledged.
#[test]
fn concurrent_clients_share_batches_and_read_their_own_writes() {
    let s = TestServer::with(|c| c.threads = 2);
    const CLIENTS: usize = 12;
    const ROUNDS: usize = 300;
    std::thread::scope(|scope| {
        for c in 0..CLIENTS {
            let s = &s;
            scope.spawn(move || {
                let mut r = s.raw();
                let (k, a, b) = (format!("k{c}"), format!("a{c}"), format!("b{c}"));
                for i in 0..ROUNDS {
                    let v = i.to_string();
                    // Pipelined: a trailing SET run, then a read of it.
                    r.send(&["SET", &k, &v]);
                    assert_eq!(r.read(), V::Simple("OK".into()));
                    assert_eq!(r.cmd(&["GET", &k]), V::bulk(&v));
                    r.send(&["MSET", &a, &v, &b, &v]);
                    r.send(&["SET", &k, &format!("{v}!")]);
                    assert_eq!(r.read(), V::Simple("OK".into()));
                    assert_eq!(r.read(), V::Simple("OK".into()));
                    let V::Array(both) = r.cmd(&["MGET", &a, &b, &k]) else {
                        panic!("MGET is not an array");
                    };
                    assert_eq!(
                        both,
                        vec![V::bulk(&v), V::bulk(&v), V::bulk(&format!("{v}!"))]
                    );
                }
            });
        }
    });
    let mut r = s.raw();
    for c in 0..CLIENTS {
        let last = (ROUNDS - 1).to_string();
        assert_eq!(
            r.cmd(&["GET", &format!("k{c}")]),
            V::bulk(&format!("{last}!"))
        );
        assert_eq!(r.cmd(&["GET", &format!("a{c}")]), V::bulk(&last));
    }
    assert_eq!(r.cmd(&["DBSIZE"]), V::Int(3 * CLIENTS as i64));
}

/// A client that sends a long pipeline and shuts its sending side (as
/// `nc -q` does) gets every reply, including those the server held back
/// while its reply buffer was full, and then end-of-stream.
#[test]
fn a_half_closed_client_gets_every_reply() {
    let s = TestServer::with(|c| c.threads = 1);
    let mut r = s.raw();
    let value = "w".repeat(8 << 10);
    const N: usize = 400;
    let mut blob = Raw::encode(&[b"SET", b"x", value.as_bytes()]);
    for i in 0..N {
        blob.extend(Raw::encode(&[b"GET", b"x"]));
        blob.extend(Raw::encode(&[b"SET", format!("n{i}").as_bytes(), b"1"]));
    }
    r.send_bytes(&blob);
    r.w.shutdown(Shutdown::Write).unwrap();
    assert_eq!(r.read(), V::Simple("OK".into()));
    for _ in 0..N {
        assert_eq!(r.read(), V::bulk(&value));
        assert_eq!(r.read(), V::Simple("OK".into()));
    }
    let mut rest = Vec::new();
    r.r.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "bytes after the last reply: {rest:?}");
    let mut check = s.raw();
    assert_eq!(check.cmd(&["DBSIZE"]), V::Int(N as i64 + 1));
}

/// With several loops, connections are dealt over all of them and each
/// gets its own client id.
#[test]
fn several_loops_serve_distinct_clients() {
    let s = TestServer::with(|c| c.threads = 3);
    let mut clients: Vec<Raw> = (0..9).map(|_| s.raw()).collect();
    let mut ids = Vec::new();
    for (i, c) in clients.iter_mut().enumerate() {
        let V::Int(id) = c.cmd(&["CLIENT", "ID"]) else {
            panic!("CLIENT ID is not an integer");
        };
        ids.push(id);
        assert_eq!(
            c.cmd(&["SET", &format!("c{i}"), "v"]),
            V::Simple("OK".into())
        );
    }
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 9, "client ids repeat: {ids:?}");
    for c in &mut clients {
        assert_eq!(c.cmd(&["DBSIZE"]), V::Int(9));
    }
}

/// Plain GETs pipelined together are answered by one engine read; they
/// must still behave as if run one by one: each sees the writes before it
/// in the pipeline and none after, a GET of a hash gets WRONGTYPE between
/// its neighbours' values, other commands keep their place, and a
/// malformed frame after a run of GETs is answered after their values.
#[test]
fn pipelined_gets_keep_request_order_and_effects() {
    let s = TestServer::with(|c| c.threads = 1);
    let mut r = s.raw();
    assert_eq!(r.cmd(&["HSET", "h", "f", "1"]), V::Int(1));
    let mut blob = Vec::new();
    let mut want = Vec::new();
    for i in 0..40 {
        let v = i.to_string();
        blob.extend(Raw::encode(&[b"GET", b"k"]));
        want.push(if i == 0 {
            V::Nil
        } else {
            V::bulk(&(i - 1).to_string())
        });
        blob.extend(Raw::encode(&[b"GET", b"h"]));
        want.push(V::Err(
            "WRONGTYPE Operation against a key holding the wrong kind of value".into(),
        ));
        blob.extend(Raw::encode(&[b"SET", b"k", v.as_bytes()]));
        want.push(V::Simple("OK".into()));
        // A run longer than one engine read, spanning the write above.
        for j in 0..(i % 3) * 10 {
            blob.extend(Raw::encode(&[b"GET", b"k"]));
            want.push(V::bulk(&v));
            if j == 5 {
                blob.extend(Raw::encode(&[b"APPEND", b"k", b"+"]));
                want.push(V::Int(v.len() as i64 + 1));
                blob.extend(Raw::encode(&[b"SET", b"k", v.as_bytes()]));
                want.push(V::Simple("OK".into()));
            }
        }
    }
    blob.extend(Raw::encode(&[b"GET", b"k"]));
    want.push(V::bulk("39"));
    blob.extend(Raw::encode(&[b"GET", b"missing"]));
    want.push(V::Nil);
    blob.extend_from_slice(b"*1\r\n$x\r\n"); // malformed
    r.send_bytes(&blob);
    for (i, w) in want.iter().enumerate() {
        assert_eq!(&r.read(), w, "reply {i}");
    }
    let V::Err(e) = r.read() else {
        panic!("no protocol error after the GETs");
    };
    assert!(e.starts_with("ERR Protocol error"), "{e}");
    assert!(r.closed(), "a malformed frame closes the connection");
}
