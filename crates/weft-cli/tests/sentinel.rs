//! Failover by real Redis Sentinels (`docs/DESIGN.md` §1.11): one
//! `weft serve` primary, two `weft serve --replicaof` replicas and three
//! `redis-sentinel` processes (Redis 7.0's) on loopback, every one a
//! child process killed on drop.
//!
//! - `sentinel_promotes_a_replica_that_holds_every_acknowledged_write`:
//!   a client writes through the primary, each `SET` followed by `WAIT 1`;
//!   the primary is killed with SIGKILL mid-load; the Sentinels agree on
//!   a new primary, which holds every write `WAIT` acknowledged and takes
//!   writes; the other replica follows it and holds the same keys; the
//!   old primary, restarted on its directory and port, is turned into a
//!   replica of the new one by Sentinel and converges too.
//!
//! Sentinel's timings are tightened (`down-after-milliseconds` 1000, and
//! `SENTINEL DEBUG` periods), and its TILT mode is switched off: on a
//! loaded machine a late timer would otherwise stop every Sentinel from
//! acting for 30 seconds. Every wait is bounded by a generous deadline;
//! nothing is timed.

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::Served;

/// The name the Sentinels know the replicated group by.
const GROUP: &str = "weft";
/// How long a failover step may take on a loaded machine.
const DEADLINE: Duration = Duration::from_secs(90);
/// Writes `WAIT` acknowledged before the primary is killed.
const ACKED_BEFORE_KILL: usize = 300;

/// A `redis-sentinel` child process, killed (SIGKILL) and reaped on drop;
/// its log is printed when the test failed.
struct Sentinel {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Sentinel {
    /// Starts one monitoring the primary on `primary_port` (quorum 2) on
    /// a free port. Tests run in parallel: another test may take the port
    /// between the pick and the bind, so a Sentinel that exited is
    /// started again on another port.
    fn start(dir: &Path, n: usize, primary_port: u16) -> Sentinel {
        for _ in 0..20 {
            let port = free_port();
            let conf = dir.join(format!("sentinel{n}-{port}.conf"));
            let log = dir.join(format!("sentinel{n}-{port}.log"));
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndaemonize no\nlogfile {}\ndir {}\n\
                     sentinel monitor {GROUP} 127.0.0.1 {primary_port} 2\n\
                     sentinel down-after-milliseconds {GROUP} 1000\n\
                     sentinel failover-timeout {GROUP} 5000\n\
                     sentinel parallel-syncs {GROUP} 1\n",
                    log.display(),
                    dir.display(),
                ),
            )
            .unwrap();
            let mut child = Command::new("redis-sentinel")
                .arg(&conf)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-sentinel 7 must be installed (scripts/test-packages)");
            let deadline = Instant::now() + common::TIMEOUT;
            loop {
                if child.try_wait().unwrap().is_some() {
                    break; // exited: the port was taken
                }
                if let Ok(mut c) = try_conn(port) {
                    // Periods short enough for a test. The ping period
                    // also spaces reconnections: at Sentinel's 1 s, a
                    // Sentinel that switches to the new primary may
                    // connect to it only a second later, past
                    // down-after-milliseconds, and fail it over again.
                    // TILT off (a timer 2 s late, which a loaded machine
                    // may see, would freeze the Sentinel for 30 s).
                    let ok: String = redis::cmd("SENTINEL")
                        .arg(&[
                            "DEBUG",
                            "info-period",
                            "500",
                            "publish-period",
                            "500",
                            "ping-period",
                            "400",
                            "ask-period",
                            "250",
                            "tilt-trigger",
                            "3600000",
                        ])
                        .query(&mut c)
                        .unwrap();
                    assert_eq!(ok, "OK");
                    return Sentinel { child, port, log };
                }
                assert!(Instant::now() < deadline, "redis-sentinel did not start");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("redis-sentinel did not start on any of 20 free ports");
    }

    /// The primary's port this Sentinel names (`SENTINEL
    /// get-master-addr-by-name`, what a Sentinel-aware client asks).
    fn primary(&self) -> Option<u16> {
        let mut c = try_conn(self.port).ok()?;
        let addr: Option<(String, String)> = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(GROUP)
            .query(&mut c)
            .ok()?;
        addr?.1.parse().ok()
    }

    /// How many entries `SENTINEL <what> weft` lists.
    fn count(&self, what: &str) -> Option<usize> {
        let mut c = try_conn(self.port).ok()?;
        let v: Vec<redis::Value> = redis::cmd("SENTINEL")
            .arg(what)
            .arg(GROUP)
            .query(&mut c)
            .ok()?;
        Some(v.len())
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            eprintln!("--- sentinel on port {} ---\n{log}", self.port);
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn try_conn(port: u16) -> redis::RedisResult<redis::Connection> {
    let c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let con = c.get_connection_with_timeout(common::TIMEOUT)?;
    con.set_read_timeout(Some(common::TIMEOUT))?;
    con.set_write_timeout(Some(common::TIMEOUT))?;
    Ok(con)
}

/// `INFO replication`'s `field` on the server on `port`, if it answers.
fn replication_field(port: u16, field: &str) -> Option<String> {
    let mut c = try_conn(port).ok()?;
    let text: String = redis::cmd("INFO").arg("replication").query(&mut c).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(str::to_string)
}

/// Whether the server on `port` is a replica of `primary` with its link
/// up.
fn follows(port: u16, primary: u16) -> bool {
    replication_field(port, "role").as_deref() == Some("slave")
        && replication_field(port, "master_port") == Some(primary.to_string())
        && replication_field(port, "master_link_status").as_deref() == Some("up")
}

/// The primary every Sentinel names, if they agree on one other than
/// `old` and it says it is one.
fn agreed_primary(sentinels: &[Sentinel], old: u16) -> Option<u16> {
    let p = sentinels[0].primary().filter(|&p| p != old)?;
    (sentinels[1..].iter().all(|s| s.primary() == Some(p))
        && replication_field(p, "role").as_deref() == Some("master"))
    .then_some(p)
}

/// Calls `f` until it gives a value; panics naming `what` after
/// [`DEADLINE`].
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn key(i: u64) -> String {
    format!("k:{i:06}")
}

fn value(i: u64) -> String {
    format!("v{i}-{}", "x".repeat((i % 37) as usize))
}

/// Every key and its value (the writes are strings).
fn contents(port: u16) -> BTreeMap<String, String> {
    let mut c = try_conn(port).unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
    let mut out = BTreeMap::new();
    for chunk in keys.chunks(500) {
        let values: Vec<Option<String>> = redis::cmd("MGET").arg(chunk).query(&mut c).unwrap();
        for (k, v) in chunk.iter().zip(values) {
            out.insert(k.clone(), v.unwrap());
        }
    }
    out
}

/// Writes a key on `primary` and waits (bounded) until `replicas`
/// replicas acknowledged it, so they hold all it holds.
fn settle(primary: u16, replicas: i64, mark: &str) {
    let mut c = try_conn(primary).unwrap();
    let _: () = redis::cmd("SET").arg(mark).arg("1").query(&mut c).unwrap();
    let n: i64 = redis::cmd("WAIT")
        .arg(replicas)
        .arg(DEADLINE.as_millis() as u64)
        .query(&mut c)
        .unwrap();
    assert_eq!(n, replicas, "replicas acknowledging {mark}");
}

#[test]
fn sentinel_promotes_a_replica_that_holds_every_acknowledged_write() {
    let base = tempfile::tempdir().unwrap();
    let primary_dir = base.path().join("primary");
    let mut primary = Served::start(&primary_dir, &[]);
    let old = primary.port;
    let replicas: Vec<Served> = (0..2)
        .map(|i| {
            Served::start(
                &base.path().join(format!("replica{i}")),
                &["--replicaof", "127.0.0.1", &old.to_string()],
            )
        })
        .collect();
    for r in &replicas {
        let port = r.port;
        wait_for("a replica's first sync", || {
            follows(port, old).then_some(())
        });
    }
    let sentinels: Vec<Sentinel> = (0..3)
        .map(|i| Sentinel::start(base.path(), i, old))
        .collect();
    // The Sentinels find the replicas in the primary's INFO and each
    // other through its `__sentinel__:hello` channel: a failover needs
    // a majority of them to know each other.
    wait_for(
        "the Sentinels to discover the replicas and each other",
        || {
            sentinels
                .iter()
                .all(|s| s.count("replicas") == Some(2) && s.count("sentinels") == Some(2))
                .then_some(())
        },
    );

    // A client writing through the primary, each write followed by
    // `WAIT 1`; it stops at the first error (the primary killed).
    let acked_count = Arc::new(AtomicUsize::new(0));
    let writer = {
        let acked_count = Arc::clone(&acked_count);
        std::thread::spawn(move || {
            let mut acked = Vec::new();
            let Ok(mut c) = try_conn(old) else {
                return acked;
            };
            for i in 0..1_000_000u64 {
                let r: redis::RedisResult<(i64,)> = redis::pipe()
                    .cmd("SET")
                    .arg(key(i))
                    .arg(value(i))
                    .ignore()
                    .cmd("WAIT")
                    .arg(1)
                    .arg(5000)
                    .query(&mut c);
                match r {
                    Ok((n,)) if n >= 1 => {
                        acked.push(i);
                        acked_count.store(acked.len(), Ordering::Relaxed);
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            acked
        })
    };
    wait_for("writes acknowledged by WAIT", || {
        (acked_count.load(Ordering::Relaxed) >= ACKED_BEFORE_KILL).then_some(())
    });
    // Nothing failed over yet: the kill is what Sentinel must handle.
    for s in &sentinels {
        assert_eq!(s.primary(), Some(old), "a failover before the kill");
    }
    primary.child.kill().unwrap();
    primary.child.wait().unwrap();
    let acked = writer.join().unwrap();
    assert!(acked.len() >= ACKED_BEFORE_KILL);

    // A client asking Sentinel finds a new primary, and it is one.
    let new = wait_for("the Sentinels to agree on a promoted replica", || {
        agreed_primary(&sentinels, old)
    });
    assert!(
        replicas.iter().any(|r| r.port == new),
        "{new} is no replica"
    );

    // Every write WAIT acknowledged is there.
    let on_new = contents(new);
    for &i in &acked {
        assert_eq!(
            on_new.get(&key(i)),
            Some(&value(i)),
            "acknowledged write {i} lost in the failover ({} acknowledged)",
            acked.len()
        );
    }

    // The other replica follows the new primary and holds what it holds.
    // From here on the primary is the one the Sentinels name when each
    // step is checked: on a loaded machine a Sentinel may still find a
    // new primary silent past down-after-milliseconds and fail over
    // again, which is Sentinel's call, not a Weft failure.
    let other_of = |p: u16| replicas.iter().find(|r| r.port != p).unwrap().port;
    let new = wait_for("the other replica to follow the new primary", || {
        let p = agreed_primary(&sentinels, old)?;
        follows(other_of(p), p).then_some(p)
    });
    settle(new, 1, "after-failover");
    assert_eq!(contents(other_of(new)), contents(new));

    // The old primary, restarted on its directory and port, comes back a
    // primary with its own data; Sentinel turns it into a replica of the
    // new primary, and it converges.
    let restarted = {
        let mut tries = 0;
        loop {
            // Its port may be briefly unavailable after the kill.
            let r = std::panic::catch_unwind(|| Served::start_on(&primary_dir, old, &[]));
            match r {
                Ok(s) => break s,
                Err(e) if tries >= 10 => std::panic::resume_unwind(e),
                Err(_) => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(500));
                }
            }
        }
    };
    let new = wait_for("Sentinel to turn the old primary into a replica", || {
        let p = agreed_primary(&sentinels, old)?;
        (follows(restarted.port, p) && follows(other_of(p), p)).then_some(p)
    });
    settle(new, 2, "after-rejoin");
    let expected = contents(new);
    assert!(expected.contains_key("after-rejoin"));
    assert_eq!(contents(other_of(new)), expected);
    assert_eq!(contents(restarted.port), expected);
}
