//! `weft serve --sync always` killed with SIGKILL while clients run
//! `MULTI`/`EXEC` blocks that write strings, a list and a set in two
//! databases: after a restart every `EXEC` is applied whole or not at all,
//! and every acknowledged one is there (each client has at most one in
//! flight, which may or may not be).

// A test (or benchmark) fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod common;

use common::Served;

/// One `EXEC` of writer `tag`, generation `g`: five writes in database 0
/// and 2 that must all be there or none.
fn exec(c: &mut redis::Connection, tag: &str, g: u64) -> redis::RedisResult<()> {
    redis::pipe()
        .atomic()
        .cmd("SET")
        .arg(format!("{tag}:a"))
        .arg(g)
        .ignore()
        .cmd("RPUSH")
        .arg(format!("{tag}:log"))
        .arg(g)
        .ignore()
        .cmd("SELECT")
        .arg(2)
        .ignore()
        .cmd("SET")
        .arg(format!("{tag}:b"))
        .arg(g)
        .ignore()
        .cmd("SADD")
        .arg(format!("{tag}:set"))
        .arg(g)
        .ignore()
        .cmd("SELECT")
        .arg(0)
        .ignore()
        .cmd("INCR")
        .arg(format!("{tag}:n"))
        .ignore()
        .query(c)
}

#[test]
fn kill9_under_sync_always_never_leaves_half_an_exec() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for cycle in 0..2 {
        let mut s = Served::start(&data, &["--sync", "always"]);
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..3)
            .map(|w| {
                let mut c = s.conn();
                let stop = Arc::clone(&stop);
                let tag = format!("c{cycle}:w{w}");
                std::thread::spawn(move || {
                    let mut acked = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        match exec(&mut c, &tag, acked + 1) {
                            Ok(()) => acked += 1,
                            // The kill cut this one off.
                            Err(_) => break,
                        }
                    }
                    acked
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(1500));
        s.child.kill().unwrap(); // SIGKILL
        let _ = s.child.wait();
        stop.store(true, Ordering::Relaxed);
        let acked: Vec<u64> = writers.into_iter().map(|w| w.join().unwrap()).collect();
        drop(s);

        let s = Served::start(&data, &["--sync", "always"]);
        let mut c = s.conn();
        for (w, acked) in acked.into_iter().enumerate() {
            assert!(acked > 20, "writer {w} made too few EXECs: {acked}");
            let tag = format!("c{cycle}:w{w}");
            let get = |c: &mut redis::Connection, k: &str| -> u64 {
                let v: Option<u64> = s.read_query(c, redis::cmd("GET").arg(format!("{tag}:{k}")));
                v.unwrap_or(0)
            };
            let a = get(&mut c, "a");
            let n = get(&mut c, "n");
            let llen: u64 = s.read_query(&mut c, redis::cmd("LLEN").arg(format!("{tag}:log")));
            let _: () = s.read_query(&mut c, redis::cmd("SELECT").arg(2));
            let b = get(&mut c, "b");
            let scard: u64 = s.read_query(&mut c, redis::cmd("SCARD").arg(format!("{tag}:set")));
            let _: () = s.read_query(&mut c, redis::cmd("SELECT").arg(0));
            let all = [a, n, llen, b, scard];
            assert!(
                all.iter().all(|&x| x == a),
                "cycle {cycle}, writer {w}: half an EXEC after the kill: \
                 a={a} n={n} llen={llen} b={b} scard={scard}"
            );
            assert!(
                a == acked || a == acked + 1,
                "cycle {cycle}, writer {w}: {acked} EXECs acknowledged, {a} found"
            );
        }
    }
}
