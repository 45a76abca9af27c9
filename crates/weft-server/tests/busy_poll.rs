//! An event loop polls for a while after work and then sleeps: it keeps
//! its core while requests come, and an idle server costs no CPU.
//!
//! In a file of its own so that its process runs one server: the loop's
//! CPU time and the times it blocked are read from `/proc/self/task/*/`
//! by thread name. Polling is asserted by blocks, not CPU time: a loop
//! that yields between polls gets little CPU on a machine busy with other
//! work (the CPU bound failed once so, in a full test run beside two
//! benchmarks), but it still never blocks while it polls.

// A test (or benchmark) fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{TestServer, V};

/// The contents of `/proc/self/task/TID/<file>` for the one thread of this
/// process named `name`.
fn thread_file(name: &str, file: &str) -> String {
    let mut found = None;
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let path = task.unwrap().path();
        let Ok(comm) = std::fs::read_to_string(path.join("comm")) else {
            continue; // the thread ended
        };
        if comm.trim_end() != name {
            continue;
        }
        assert!(found.is_none(), "two threads named {name}");
        found = Some(std::fs::read_to_string(path.join(file)).unwrap());
    }
    found.unwrap_or_else(|| panic!("no thread named {name}"))
}

/// CPU time (user + system) of the thread named `name` in this process.
fn thread_cpu(name: &str) -> Duration {
    let ticks_per_s = {
        // SAFETY: sysconf takes no pointers and only reads a constant.
        let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        assert!(t > 0, "sysconf(_SC_CLK_TCK) = {t}");
        t as u64
    };
    let stat = thread_file(name, "stat");
    // Fields after the parenthesised name: state is field 3, utime 14,
    // stime 15 (proc(5)).
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 1000 / ticks_per_s)
}

/// How often the thread named `name` has blocked (`voluntary_ctxt_switches`
/// in its `/proc` status: a wait that put it to sleep; a preemption or a
/// `sched_yield` counts as involuntary, proc(5)).
fn thread_sleeps(name: &str) -> u64 {
    thread_file(name, "status")
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .expect("a thread's status lists its voluntary switches")
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_loop_polls_after_work_then_sleeps() {
    const POLL: Duration = Duration::from_millis(300);
    let s = TestServer::with(|c| {
        c.threads = 1;
        c.busy_poll = POLL;
    });
    let mut r = s.raw();
    assert_eq!(r.cmd(&["PING"]), V::Simple("PONG".into()));
    std::thread::sleep(POLL * 2);

    // Idle: the loop sleeps in epoll_wait (a loop that never stopped
    // polling would spend the whole second on the CPU).
    let before = thread_cpu("weft-loop-0");
    std::thread::sleep(Duration::from_secs(1));
    let idle = thread_cpu("weft-loop-0") - before;
    assert!(
        idle < Duration::from_millis(150),
        "an idle loop used {idle:?} of CPU in 1 s"
    );

    // One request: the loop keeps polling for `POLL` after it instead of
    // going back to sleep in `epoll_wait`. Counted by the times it blocked,
    // not by CPU time, which a machine busy with other work takes from a
    // loop that yields between polls: the loop sleeps now (idle), wakes for
    // the request, and must not block again until `POLL` has passed (a
    // loop that slept at once, or at its next tick, would have).
    let before = thread_sleeps("weft-loop-0");
    assert_eq!(r.cmd(&["PING"]), V::Simple("PONG".into()));
    std::thread::sleep(POLL / 2);
    let during = thread_sleeps("weft-loop-0") - before;
    assert_eq!(
        during,
        0,
        "the loop blocked {during} times within {:?} of a request (busy_poll {POLL:?})",
        POLL / 2
    );
    // And then it stops polling and sleeps.
    std::thread::sleep(POLL * 2);
    let after = thread_sleeps("weft-loop-0") - before;
    assert!(
        after >= 1,
        "the loop never went back to sleep after polling"
    );

    // Zero turns polling off.
    drop(r);
    s.stop().unwrap();
    let s = TestServer::with(|c| {
        c.threads = 1;
        c.busy_poll = Duration::ZERO;
    });
    let mut r = s.raw();
    // The loops start with the server: measure once one has answered.
    assert_eq!(r.cmd(&["PING"]), V::Simple("PONG".into()));
    let before = thread_cpu("weft-loop-0");
    for _ in 0..10 {
        assert_eq!(r.cmd(&["PING"]), V::Simple("PONG".into()));
    }
    std::thread::sleep(POLL * 2);
    let off = thread_cpu("weft-loop-0") - before;
    assert!(
        off < Duration::from_millis(100),
        "with busy_poll 0 the loop used {off:?} of CPU for 10 PINGs"
    );
}

/// A poll longer than a second is a mistake, refused at start with a
/// message that names it (and `Instant + Duration` can never overflow).
#[test]
fn an_overlong_busy_poll_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (poll, ok) in [
        (Duration::from_secs(1), true),
        (Duration::from_secs(2), false),
        (Duration::MAX, false),
    ] {
        let mut c = weft_server::Config::default();
        c.port = 0;
        c.dir = dir.path().to_path_buf();
        c.busy_poll = poll;
        match weft_server::Server::bind(c) {
            Ok(server) => {
                assert!(ok, "busy_poll {poll:?} was accepted");
                drop(server);
            }
            Err(e) => {
                assert!(!ok, "busy_poll {poll:?} was refused: {e}");
                assert!(e.to_string().contains("busy poll"), "{e}");
            }
        }
    }
}
