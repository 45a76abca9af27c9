//! Bad input, limits and lifecycle: malformed frames, garbage, bulk and
//! buffer bounds, maxclients, idle timeout, graceful shutdown and restart.

// A test (or benchmark) fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{Raw, TestServer, TIMEOUT, V};
use rand::{Rng, SeedableRng};

fn reply_then_closed(s: &TestServer, bytes: &[u8]) -> String {
    let mut r = s.raw();
    r.send_bytes(bytes);
    let e = match r.read() {
        V::Err(e) => e,
        other => panic!(
            "expected an error for {:?}, got {other:?}",
            bytes.escape_ascii().to_string()
        ),
    };
    assert!(
        r.closed(),
        "connection must be closed after a protocol error"
    );
    e
}

#[test]
fn malformed_frames_get_an_error_and_are_closed() {
    let s = TestServer::start();
    let cases: [(&[u8], &str); 6] = [
        (b"*x\r\n", "ERR Protocol error: invalid multibulk length"),
        (
            b"*2\r\n+GET\r\n",
            "ERR Protocol error: expected '$', got '+'",
        ),
        (b"*1\r\n$-3\r\n", "ERR Protocol error: invalid bulk length"),
        (
            b"*1\r\n$3\r\nGETXX",
            "ERR Protocol error: expected CRLF after bulk string",
        ),
        (
            b"*3000000\r\n",
            "ERR Protocol error: invalid multibulk length",
        ),
        (
            b"SET \"unterminated\r\n",
            "ERR Protocol error: unbalanced quotes in request",
        ),
    ];
    for (bytes, want) in cases {
        assert_eq!(reply_then_closed(&s, bytes), want);
    }
    // Replies to the requests before the bad frame are still sent, in order.
    let mut r = s.raw();
    r.send_bytes(b"PING\r\n*1\r\n$4\r\nPING\r\n*1\r\n!");
    assert_eq!(r.read(), V::Simple("PONG".into()));
    assert_eq!(r.read(), V::Simple("PONG".into()));
    assert!(matches!(r.read(), V::Err(e) if e.starts_with("ERR Protocol error")));
    assert!(r.closed());
    // A too long inline request.
    let mut big = vec![b'a'; 100 << 10];
    big.extend(b"\r\n");
    assert_eq!(
        reply_then_closed(&s, &big),
        "ERR Protocol error: too big inline request"
    );
    // The server is fine.
    assert_eq!(s.raw().cmd(&["PING"]), V::Simple("PONG".into()));
}

#[test]
fn bulk_strings_are_bounded() {
    let s = TestServer::with(|c| {
        c.max_bulk = 1024;
    });
    let mut r = s.raw();
    let ok = "x".repeat(1024);
    assert_eq!(r.cmd(&["SET", "k", &ok]), V::Simple("OK".into()));
    // APPEND past the bound is refused with Redis's error.
    assert_eq!(
        r.cmd(&["APPEND", "k", "y"]),
        V::Err("ERR string exceeds maximum allowed size (proto-max-bulk-len)".into())
    );
    // An announced bulk longer than the bound: error and close before any
    // of its bytes are read.
    assert_eq!(
        reply_then_closed(&s, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1025\r\n"),
        "ERR Protocol error: invalid bulk length"
    );
    // Claims of huge sizes allocate nothing.
    assert_eq!(
        reply_then_closed(&s, b"*1\r\n$99999999999999\r\n"),
        "ERR Protocol error: invalid bulk length"
    );
}

#[test]
fn large_values_arrive_in_pieces() {
    let s = TestServer::start();
    let mut r = s.raw();
    let v: Vec<u8> = (0..(3 << 20)).map(|i| (i % 251) as u8).collect();
    let frame = Raw::encode(&[b"SET", b"big", &v]);
    for chunk in frame.chunks(100_003) {
        r.send_bytes(chunk);
    }
    assert_eq!(r.read(), V::Simple("OK".into()));
    assert_eq!(r.cmd(&["GET", "big"]), V::Bulk(v.clone()));
    assert_eq!(r.cmd(&["STRLEN", "big"]), V::Int(v.len() as i64));
}

#[test]
fn query_buffer_is_bounded() {
    let s = TestServer::with(|c| {
        c.max_bulk = 4096;
        c.max_query_buffer = 64 << 10;
    });
    // Many maximal bulk strings in one never-ending request.
    let mut r = s.raw();
    r.send_bytes(b"*100000\r\n");
    let arg = Raw::encode(&[&[b'z'; 4096][..]]);
    let arg = &arg[4..]; // drop the "*1\r\n" header: just "$4096\r\n...\r\n"
    let mut sent = 0;
    let mut result = None;
    while sent < (8 << 20) {
        if let Err(e) = r.w.write_all(arg) {
            result = Some(e);
            break;
        }
        sent += arg.len();
        if sent > (200 << 10) {
            // The server has had time to refuse; stop pushing.
            break;
        }
    }
    let _ = result;
    match r.read() {
        V::Err(e) => assert_eq!(e, "ERR Protocol error: query buffer limit exceeded"),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.raw().cmd(&["PING"]), V::Simple("PONG".into()));
}

/// Random garbage and mutated frames on many sockets never crash the
/// server; it answers normally afterwards.
#[test]
fn garbage_on_the_socket_never_crashes_the_server() {
    let s = TestServer::start();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let seeds: [&[u8]; 4] = [
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n",
        b"*2\r\n$4\r\nHGETALL\r\n$1\r\nh\r\n",
        b"*4\r\n$4\r\nHSET\r\n$1\r\nh\r\n$1\r\nf\r\n$1\r\nv\r\n",
        b"*3\r\n$4\r\nSCAN\r\n$1\r\n0\r\n$5\r\nMATCH\r\n",
    ];
    for round in 0..300 {
        let mut bytes = Vec::new();
        if round % 3 == 0 {
            bytes = (0..rng.gen_range(1..2000)).map(|_| rng.gen()).collect();
        } else {
            for _ in 0..rng.gen_range(1..6) {
                bytes.extend_from_slice(seeds[rng.gen_range(0..seeds.len())]);
            }
            for _ in 0..rng.gen_range(1..5) {
                let i = rng.gen_range(0..bytes.len());
                bytes[i] = rng.gen();
            }
        }
        let mut sock = TcpStream::connect(s.addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let _ = sock.write_all(&bytes);
        let mut sink = [0u8; 4096];
        let _ = sock.read(&mut sink);
    }
    let mut r = s.raw();
    assert_eq!(r.cmd(&["PING"]), V::Simple("PONG".into()));
    assert_eq!(r.cmd(&["SET", "after", "ok"]), V::Simple("OK".into()));
    assert_eq!(r.cmd(&["GET", "after"]), V::bulk("ok"));
}

#[test]
fn maxclients_refuses_extra_connections() {
    let s = TestServer::with(|c| c.maxclients = 2);
    let mut a = s.raw();
    let mut b = s.raw();
    assert_eq!(a.cmd(&["PING"]), V::Simple("PONG".into()));
    assert_eq!(b.cmd(&["PING"]), V::Simple("PONG".into()));
    let mut c = s.raw();
    assert_eq!(c.read(), V::Err("ERR max number of clients reached".into()));
    assert!(c.closed());
    drop(a);
    // The freed slot becomes available once the server notices the close.
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let mut d = s.raw();
        d.send(&["PING"]);
        match d.read() {
            V::Simple(p) if p == "PONG" => break,
            _ => assert!(Instant::now() < deadline, "slot never freed"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(b.cmd(&["PING"]), V::Simple("PONG".into()));
}

#[test]
fn idle_clients_time_out() {
    let s = TestServer::with(|c| c.timeout = Some(Duration::from_millis(300)));
    let mut r = s.raw();
    assert_eq!(r.cmd(&["PING"]), V::Simple("PONG".into()));
    let t = Instant::now();
    assert!(r.closed());
    let idle = t.elapsed();
    assert!(
        idle >= Duration::from_millis(200) && idle < Duration::from_secs(10),
        "{idle:?}"
    );
}

/// Shutdown finishes what was read, flushes and closes the database; a
/// new server on the same directory sees every acknowledged write.
#[test]
fn graceful_shutdown_then_restart_keeps_data() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::at(dir.path(), |c| c.sync = weft_server::SyncMode::No);
    let mut r = s.raw();
    for i in 0..200 {
        r.send(&["SET", &format!("k{i}"), &format!("v{i}")]);
    }
    r.send(&["HSET", "h", "f", "v"]);
    r.send(&["SET", "ttl", "v", "EX", "1000"]);
    for _ in 0..202 {
        assert!(matches!(r.read(), V::Simple(_) | V::Int(_)));
    }
    // An idle connection does not hold shutdown up.
    let _idle = s.raw();
    let t = Instant::now();
    s.stop().unwrap();
    assert!(t.elapsed() < Duration::from_secs(10));
    assert!(r.closed());

    let s = TestServer::at(dir.path(), |_| {});
    let mut r = s.raw();
    assert_eq!(r.cmd(&["DBSIZE"]), V::Int(202));
    assert_eq!(r.cmd(&["GET", "k199"]), V::bulk("v199"));
    assert_eq!(r.cmd(&["HGET", "h", "f"]), V::bulk("v"));
    assert!(matches!(r.cmd(&["TTL", "ttl"]), V::Int(t) if t > 900));
}
