//! Replication (`docs/DESIGN.md` §1.11) between a primary and replicas
//! on loopback: the primary runs in this process (small memtables, so
//! WALs rotate and the backlog can be made to go), the replicas are real
//! `weft serve --replicaof` processes, killed with SIGKILL.
//!
//! - `replicas_converge_and_catch_up_after_kill_9`: random writes of
//!   every type (strings, hashes, lists, sets, sorted sets, expiries,
//!   deletes) through the primary, into databases 0 and 3 (`SELECT`) and
//!   as `MULTI`/`EXEC` blocks spanning both; database 3 is created by the
//!   stream on one replica and arrives by full sync on the other; both
//!   replicas hold the same keys, values, deadlines, `DBSIZE` per
//!   database and `INFO keyspace`; a replica killed mid-stream and
//!   restarted catches up by a partial resync; killed again and restarted
//!   after the backlog is gone, by a full sync.
//! - `psync_never_gets_a_wrong_stream`: `PSYNC` with an unknown id, an
//!   offset past the primary's or below what it keeps gets a full sync
//!   (checkpoint frames); the right id and a kept offset get exactly the
//!   batches from that offset.
//! - `a_replica_cut_off_mid_checkpoint_keeps_its_data`: a proxy cuts the
//!   full sync's transfer half way; the replica keeps serving its old
//!   data whole, also after a SIGKILL and restart, and converges once the
//!   transfer goes through.
//! - `client_kill_types_keep_replication_links_apart`: a replica's link
//!   is a `replica` client (`flags=S`), not cut by `CLIENT KILL TYPE
//!   normal`; `TYPE replica` on the primary and `TYPE master` on the
//!   replica cut it, and it continues by a partial resync.
//! - `masterauth_lets_a_replica_follow_a_primary_with_a_password`: a
//!   primary with `--requirepass` refuses a replica without the password
//!   or with a wrong one; `--masterauth` and `CONFIG SET masterauth` let
//!   it sync.
//! - `heartbeats_never_claim_what_the_wal_buffer_holds`: under `--sync
//!   no` the expirer's deletions stay in the WAL's buffer while the idle
//!   sender sends heartbeats; once a write flushes them they reach the
//!   replica in order (no reconnect, the same content).
//! - `watch_and_blocked_clients_on_a_replica_see_the_stream`: a `WATCH`
//!   on a replica fails its `EXEC` when the stream writes the key (a
//!   `SET`, a hash field, a `FLUSHALL`) or a full sync replaces the data,
//!   and runs it when nothing was written; a writable replica's `BLPOP`
//!   is woken by a push from the stream.
//! - `wait_readonly_and_promotion`: `WAIT 1` answers 1 once the replica
//!   applied the write; writes to a replica get `-READONLY` (the plain
//!   `SET` path too), inside `MULTI` too (the `EXEC` fails); Sentinel's
//!   promotion transaction (`SLAVEOF NO ONE`, `CONFIG REWRITE`, `CLIENT
//!   KILL`s) promotes it; a write queued before the server became a
//!   replica makes the `EXEC` fail.

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{rngs::StdRng, Rng, SeedableRng};
use redis::Commands;

mod common;

use common::Served;

/// An in-process primary.
struct Primary {
    port: u16,
    handle: weft_server::ShutdownHandle,
    thread: Option<std::thread::JoinHandle<Result<(), weft_server::Error>>>,
}

impl Primary {
    fn start(dir: &Path) -> Primary {
        Self::start_on(dir, 0)
    }

    fn start_on(dir: &Path, port: u16) -> Primary {
        Self::start_with(dir, port, weft_server::SyncMode::EverySec)
    }

    fn start_with(dir: &Path, port: u16, sync: weft_server::SyncMode) -> Primary {
        let mut c = weft_server::Config::default();
        c.sync = sync;
        c.port = port;
        c.dir = dir.to_path_buf();
        c.threads = 1;
        c.db_options = weft::Options::default().write_buffer_size(256 << 10);
        let server = weft_server::Server::bind(c).unwrap();
        let port = server.local_addr().port();
        let handle = server.shutdown_handle();
        let thread = Some(std::thread::spawn(move || server.run()));
        Primary {
            port,
            handle,
            thread,
        }
    }

    fn conn(&self) -> redis::Connection {
        conn(self.port)
    }
}

impl Drop for Primary {
    fn drop(&mut self) {
        self.handle.shutdown();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn conn(port: u16) -> redis::Connection {
    let c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let con = c.get_connection_with_timeout(common::TIMEOUT).unwrap();
    con.set_read_timeout(Some(common::TIMEOUT)).unwrap();
    con.set_write_timeout(Some(common::TIMEOUT)).unwrap();
    con
}

fn replica(dir: &Path, primary_port: u16) -> Served {
    Served::start(
        dir,
        &["--replicaof", "127.0.0.1", &primary_port.to_string()],
    )
}

fn info_field(c: &mut redis::Connection, section: &str, field: &str) -> String {
    let text: String = redis::cmd("INFO").arg(section).query(c).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}:\n{text}"))
        .to_string()
}

/// Every key with its type, value and deadline, and `DBSIZE`.
type Dump = (BTreeMap<String, (String, Vec<String>, i64)>, u64);

fn dump(c: &mut redis::Connection) -> Dump {
    let keys: Vec<String> = c.keys("*").unwrap();
    let mut out = BTreeMap::new();
    for k in keys {
        let t: String = redis::cmd("TYPE").arg(&k).query(c).unwrap();
        let mut v: Vec<String> = match t.as_str() {
            "string" => vec![c.get(&k).unwrap()],
            "list" => c.lrange(&k, 0, -1).unwrap(),
            "set" => c.smembers(&k).unwrap(),
            "hash" => c
                .hgetall::<_, BTreeMap<String, String>>(&k)
                .unwrap()
                .into_iter()
                .map(|(f, v)| format!("{f}={v}"))
                .collect(),
            "zset" => c
                .zrange_withscores::<_, Vec<(String, f64)>>(&k, 0, -1)
                .unwrap()
                .into_iter()
                .map(|(m, s)| format!("{m}={s}"))
                .collect(),
            "none" => continue, // expired between KEYS and TYPE
            other => panic!("type {other}"),
        };
        if t == "set" {
            v.sort();
        }
        let at: i64 = redis::cmd("PEXPIRETIME").arg(&k).query(c).unwrap();
        out.insert(k, (t, v, at));
    }
    let n: u64 = redis::cmd("DBSIZE").query(c).unwrap();
    (out, n)
}

/// One random write of any type; some keys get short deadlines (so the
/// primary's expirer deletes them while the stream runs), some long ones.
fn random_write(rng: &mut StdRng, c: &mut redis::Connection) {
    let _: redis::Value = random_cmd(rng).query(c).unwrap();
}

/// The databases the convergence test writes.
const DBS: [u32; 2] = [0, 3];

/// Connections to the primary's databases 0 and 3 (`SELECT`).
struct Writer {
    db0: redis::Connection,
    db3: redis::Connection,
}

impl Writer {
    fn new(port: u16) -> Writer {
        let mut db3 = conn(port);
        let _: () = redis::cmd("SELECT").arg(3).query(&mut db3).unwrap();
        Writer {
            db0: conn(port),
            db3,
        }
    }
}

/// A random write into database 0 or 3, or a `MULTI`/`EXEC` block of a
/// few, some of them `SELECT`ing database 3 and back (one engine batch
/// over both databases' keyspaces).
fn random_write_dbs(rng: &mut StdRng, w: &mut Writer) {
    match rng.gen_range(0..10) {
        0 => {
            let mut pipe = redis::pipe();
            pipe.atomic();
            for _ in 0..rng.gen_range(1..4) {
                pipe.add_command(random_cmd(rng));
            }
            if rng.gen_bool(0.5) {
                pipe.cmd("SELECT").arg(3);
                for _ in 0..rng.gen_range(1..4) {
                    pipe.add_command(random_cmd(rng));
                }
                pipe.cmd("SELECT").arg(0);
            }
            let _: redis::Value = pipe.query(&mut w.db0).unwrap();
        }
        1..=3 => random_write(rng, &mut w.db3),
        _ => random_write(rng, &mut w.db0),
    }
}

/// A random write command.
fn random_cmd(rng: &mut StdRng) -> redis::Cmd {
    let k = format!("k{}", rng.gen_range(0..200));
    let m = format!("m{}", rng.gen_range(0..20));
    let v = format!("v{}", rng.gen_range(0..1000));
    let cmd = match rng.gen_range(0..16) {
        0 => redis::cmd("SET").arg(format!("s:{k}")).arg(&v).clone(),
        1 => redis::cmd("SET")
            .arg(format!("s:{k}"))
            .arg(&v)
            .arg("PX")
            .arg(rng.gen_range(1..300))
            .clone(),
        2 => redis::cmd("HSET")
            .arg(format!("h:{k}"))
            .arg(&m)
            .arg(&v)
            .clone(),
        3 => redis::cmd("HDEL").arg(format!("h:{k}")).arg(&m).clone(),
        4 => redis::cmd("RPUSH").arg(format!("l:{k}")).arg(&v).clone(),
        5 => redis::cmd("LPUSH").arg(format!("l:{k}")).arg(&v).clone(),
        6 => redis::cmd("LPOP").arg(format!("l:{k}")).clone(),
        7 => redis::cmd("SADD").arg(format!("t:{k}")).arg(&m).clone(),
        8 => redis::cmd("SREM").arg(format!("t:{k}")).arg(&m).clone(),
        9 => redis::cmd("ZADD")
            .arg(format!("z:{k}"))
            .arg(rng.gen_range(-50..50))
            .arg(&m)
            .clone(),
        10 => redis::cmd("ZREM").arg(format!("z:{k}")).arg(&m).clone(),
        11 => {
            let t = ["s", "h", "l", "t", "z"][rng.gen_range(0..5)];
            redis::cmd("DEL").arg(format!("{t}:{k}")).clone()
        }
        12 => {
            let t = ["s", "h", "l", "t", "z"][rng.gen_range(0..5)];
            let ms = if rng.gen_bool(0.5) {
                rng.gen_range(1..300)
            } else {
                100_000
            };
            redis::cmd("PEXPIRE")
                .arg(format!("{t}:{k}"))
                .arg(ms)
                .clone()
        }
        13 => {
            // A big collection: its deletion is a range delete.
            let key = format!("big:{}", rng.gen_range(0..3));
            let mut c = redis::cmd("SADD");
            c.arg(&key);
            for i in 0..300 {
                c.arg(format!("{v}-{i}"));
            }
            c
        }
        14 => redis::cmd("DEL")
            .arg(format!("big:{}", rng.gen_range(0..3)))
            .clone(),
        _ => redis::cmd("MSET")
            .arg(format!("s:{k}"))
            .arg(&v)
            .arg(format!("s:{m}"))
            .arg(&v)
            .clone(),
    };
    cmd
}

/// Waits until every key with a short deadline has passed it and the
/// primary's expirer deleted it (its `DBSIZE` is the live keys), then
/// until `replicas` replicas acknowledged everything.
fn settle(p: &mut redis::Connection, replicas: u64) {
    std::thread::sleep(Duration::from_millis(400));
    let deadline = Instant::now() + Duration::from_secs(10);
    for db in DBS {
        let _: () = redis::cmd("SELECT").arg(db).query(p).unwrap();
        loop {
            let n: u64 = redis::cmd("DBSIZE").query(p).unwrap();
            let live: Vec<String> = p.keys("*").unwrap();
            if n == live.len() as u64 {
                break;
            }
            assert!(Instant::now() < deadline, "the expirer did not catch up");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let _: () = redis::cmd("SELECT").arg(0).query(p).unwrap();
    let acked: u64 = redis::cmd("WAIT")
        .arg(replicas)
        .arg(20_000)
        .query(p)
        .unwrap();
    assert_eq!(acked, replicas, "replicas acknowledging");
}

/// The `dbN:keys=..,expires=..` lines of `INFO keyspace`.
fn keyspace_lines(c: &mut redis::Connection) -> Vec<String> {
    let text: String = redis::cmd("INFO").arg("keyspace").query(c).unwrap();
    text.lines()
        .filter(|l| l.starts_with("db"))
        .map(str::to_string)
        .collect()
}

/// The replica holds what the primary holds in databases 0 and 3, and
/// both say the same in `INFO keyspace`.
fn assert_same(p: &mut redis::Connection, r: &mut redis::Connection, what: &str) {
    for db in DBS {
        let _: () = redis::cmd("SELECT").arg(db).query(p).unwrap();
        let _: () = redis::cmd("SELECT").arg(db).query(r).unwrap();
        assert_same_db(p, r, db, &format!("{what}, database {db}"));
    }
    let _: () = redis::cmd("SELECT").arg(0).query(p).unwrap();
    let _: () = redis::cmd("SELECT").arg(0).query(r).unwrap();
    assert_eq!(
        keyspace_lines(p),
        keyspace_lines(r),
        "{what}: INFO keyspace"
    );
}

fn assert_same_db(p: &mut redis::Connection, r: &mut redis::Connection, db: u32, what: &str) {
    let want = dump(p);
    let got = dump(r);
    assert!(db != 0 || want.1 > 0, "{what}: the primary holds nothing");
    if want != got {
        let only_p: Vec<_> = want.0.keys().filter(|k| !got.0.contains_key(*k)).collect();
        let only_r: Vec<_> = got.0.keys().filter(|k| !want.0.contains_key(*k)).collect();
        let differ: Vec<_> = (want.0.iter())
            .filter(|(k, v)| got.0.get(*k).is_some_and(|g| g != *v))
            .map(|(k, _)| k)
            .collect();
        panic!(
            "{what}: the replica differs: DBSIZE {} vs {}; only on the primary {only_p:?}; \
             only on the replica {only_r:?}; different {differ:?}",
            want.1, got.1
        );
    }
}

/// Waits until the replica's link is up.
fn wait_link_up(r: &Served) {
    let deadline = Instant::now() + common::TIMEOUT;
    loop {
        if let Ok(mut c) = redis::Client::open(format!("redis://127.0.0.1:{}/", r.port))
            .and_then(|c| c.get_connection_with_timeout(common::TIMEOUT))
        {
            let text: redis::RedisResult<String> =
                redis::cmd("INFO").arg("replication").query(&mut c);
            if text.is_ok_and(|t| t.contains("master_link_status:up")) {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the replica's link never came up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn replicas_converge_and_catch_up_after_kill_9() {
    let base = tempfile::tempdir().unwrap();
    let primary = Primary::start(&base.path().join("p"));
    let mut p = primary.conn();
    let mut rng = StdRng::seed_from_u64(43);
    for _ in 0..1500 {
        random_write(&mut rng, &mut p);
    }
    // Replica a starts from a full sync of database 0; database 3 and
    // the MULTI/EXEC blocks come after its link is up, so the stream
    // creates database 3's keyspace on it. Replica b joins later, from a
    // full sync holding both.
    let mut a = replica(&base.path().join("a"), primary.port);
    wait_link_up(&a);
    let mut w = Writer::new(primary.port);
    for _ in 0..1500 {
        random_write_dbs(&mut rng, &mut w);
    }
    let b = replica(&base.path().join("b"), primary.port);
    wait_link_up(&b);
    for _ in 0..1500 {
        random_write_dbs(&mut rng, &mut w);
    }
    settle(&mut p, 2);
    let lines = keyspace_lines(&mut p);
    assert!(
        lines.iter().any(|l| l.starts_with("db0:")) && lines.iter().any(|l| l.starts_with("db3:")),
        "the primary's keyspace: {lines:?}"
    );
    assert_same(&mut p, &mut a.conn(), "replica a");
    assert_same(&mut p, &mut b.conn(), "replica b");

    // Kill a mid-stream: a writer runs meanwhile.
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let writer = {
        let (stop, written, port) = (Arc::clone(&stop), Arc::clone(&written), primary.port);
        std::thread::spawn(move || {
            let mut w = Writer::new(port);
            let mut rng = StdRng::seed_from_u64(7);
            while !stop.load(Ordering::Relaxed) {
                random_write_dbs(&mut rng, &mut w);
                written.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let full_before: u64 = info_field(&mut p, "stats", "sync_full").parse().unwrap();
    let partial_before: u64 = info_field(&mut p, "stats", "sync_partial_ok")
        .parse()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let at_kill = written.load(Ordering::Relaxed);
    while written.load(Ordering::Relaxed) < at_kill + 300 {
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(a);
    let mut a = replica(&base.path().join("a"), primary.port);
    wait_link_up(&a);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    settle(&mut p, 2);
    assert_same(&mut p, &mut a.conn(), "replica a, restarted after SIGKILL");
    assert_same(&mut p, &mut b.conn(), "replica b");
    let full: u64 = info_field(&mut p, "stats", "sync_full").parse().unwrap();
    let partial: u64 = info_field(&mut p, "stats", "sync_partial_ok")
        .parse()
        .unwrap();
    assert_eq!(
        (full, partial),
        (full_before, partial_before + 1),
        "the restarted replica continued by a partial resync"
    );

    // Kill it again; the backlog goes (its bound set to nothing, and
    // enough written that the WALs it needs are flushed and released).
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("repl-backlog-size")
        .arg("0")
        .query(&mut p)
        .unwrap();
    for _ in 0..8000 {
        random_write_dbs(&mut rng, &mut w);
    }
    std::thread::sleep(Duration::from_millis(1500)); // the trim runs each second
    drop(a);
    let a = replica(&base.path().join("a"), primary.port);
    wait_link_up(&a);
    settle(&mut p, 2);
    assert_same(
        &mut p,
        &mut a.conn(),
        "replica a, after the backlog was gone",
    );
    assert_same(&mut p, &mut b.conn(), "replica b");
    let full: u64 = info_field(&mut p, "stats", "sync_full").parse().unwrap();
    assert_eq!(
        full,
        full_before + 1,
        "a full sync once the backlog was gone"
    );
}

/// A raw connection reading RESP lines and replication frames.
struct Raw(TcpStream);

impl Raw {
    fn connect(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(common::TIMEOUT)).unwrap();
        Raw(s)
    }

    fn send(&mut self, args: &[&str]) {
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        self.0.write_all(req.as_bytes()).unwrap();
    }

    fn line(&mut self) -> String {
        let mut line = Vec::new();
        let mut b = [0u8];
        while !line.ends_with(b"\r\n") {
            self.0.read_exact(&mut b).unwrap();
            line.push(b[0]);
        }
        String::from_utf8(line).unwrap().trim_end().to_string()
    }

    /// The next frame's tag and payload.
    fn frame(&mut self) -> (u8, Vec<u8>) {
        let mut h = [0u8; 9];
        self.0.read_exact(&mut h).unwrap();
        let len = u64::from_be_bytes(h[1..].try_into().unwrap());
        let mut p = vec![0u8; len as usize];
        self.0.read_exact(&mut p).unwrap();
        (h[0], p)
    }

    /// `PSYNC id offset`: the answer line.
    fn psync(port: u16, id: &str, offset: &str) -> (Raw, String) {
        let mut r = Raw::connect(port);
        r.send(&["PSYNC", id, offset]);
        let l = r.line();
        (r, l)
    }
}

/// Reads a full sync's frames to its end; returns the sequence.
fn read_full_sync(r: &mut Raw) -> u64 {
    let mut files = 0;
    loop {
        match r.frame() {
            (b'F', _) => files += 1,
            (b'E', p) => {
                assert!(files > 0, "a checkpoint without files");
                return u64::from_be_bytes(p.try_into().unwrap());
            }
            (t, _) => panic!("frame {t} inside a full sync"),
        }
    }
}

#[test]
fn psync_never_gets_a_wrong_stream() {
    let base = tempfile::tempdir().unwrap();
    let primary = Primary::start(&base.path().join("p"));
    let mut p = primary.conn();
    for i in 0..200 {
        let _: () = p.set(format!("a{i}"), i).unwrap();
    }
    let replid = info_field(&mut p, "replication", "master_replid");
    let offset: u64 = info_field(&mut p, "replication", "master_repl_offset")
        .parse()
        .unwrap();
    assert!(offset >= 200);

    // Unknown id, offsets past the primary's, 0 and negative: full syncs.
    for (id, off) in [
        ("0123456789012345678901234567890123456789", "5".to_string()),
        ("?", "-1".to_string()),
        (replid.as_str(), (offset + 2).to_string()),
        (replid.as_str(), "999999999999".to_string()),
        (replid.as_str(), "0".to_string()),
        (replid.as_str(), "-7".to_string()),
    ] {
        let (mut r, line) = Raw::psync(primary.port, id, &off);
        let want = format!("+FULLRESYNC {replid} ");
        assert!(line.starts_with(&want), "PSYNC {id} {off}: {line}");
        let seq: u64 = line[want.len()..].parse().unwrap();
        assert_eq!(read_full_sync(&mut r), seq);
    }

    // The right id and a kept offset: exactly the batches from there.
    let from = offset - 50;
    let (mut r, line) = Raw::psync(primary.port, &replid, &from.to_string());
    assert_eq!(line, format!("+CONTINUE {replid}"));
    let mut next = from;
    while next <= offset {
        let (t, payload) = r.frame();
        if t == b'H' {
            continue;
        }
        assert_eq!(t, b'G');
        let first = u64::from_be_bytes(payload[..8].try_into().unwrap());
        assert_eq!(first, next, "the stream starts where PSYNC asked");
        // Each SET is one batch of one put.
        next += 1;
    }

    // Below what the feed keeps (WALs flushed and no hold for them):
    // a full sync, not a stream with a hole.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("repl-backlog-size")
        .arg("0")
        .query(&mut p)
        .unwrap();
    drop(r);
    std::thread::sleep(Duration::from_millis(100));
    let big = "x".repeat(1000);
    for i in 0..3000 {
        let _: () = p.set(format!("b{i}"), &big).unwrap();
    }
    std::thread::sleep(Duration::from_millis(1500)); // the backlog trim
    let (mut r, line) = Raw::psync(primary.port, &replid, "1");
    assert!(line.starts_with("+FULLRESYNC "), "PSYNC from 1: {line}");
    read_full_sync(&mut r);
}

/// Forwards `listen` to `to`, cutting each connection once `limit` bytes
/// went from `to` to the client, while `cut` is set.
fn proxy(listen: TcpListener, to: u16, limit: u64, cut: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        for client in listen.incoming() {
            let Ok(client) = client else { return };
            let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else {
                continue;
            };
            let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut c2, &mut s2);
                let _ = s2.shutdown(std::net::Shutdown::Both);
            });
            let cut = Arc::clone(&cut);
            std::thread::spawn(move || {
                let (mut client, mut server) = (client, server);
                let mut buf = vec![0u8; 16 << 10];
                let mut sent = 0u64;
                loop {
                    let n = match server.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    let n = if cut.load(Ordering::Relaxed) {
                        n.min(limit.saturating_sub(sent) as usize)
                    } else {
                        n
                    };
                    if client.write_all(&buf[..n]).is_err() {
                        break;
                    }
                    sent += n as u64;
                    if cut.load(Ordering::Relaxed) && sent >= limit {
                        break;
                    }
                }
                let _ = client.shutdown(std::net::Shutdown::Both);
                let _ = server.shutdown(std::net::Shutdown::Both);
            });
        }
    });
}

#[test]
fn a_replica_cut_off_mid_checkpoint_keeps_its_data() {
    let base = tempfile::tempdir().unwrap();
    let pdir = base.path().join("p");
    let mut rng = StdRng::seed_from_u64(5);
    let primary = Primary::start(&pdir);
    let mut p = primary.conn();
    for _ in 0..2000 {
        random_write(&mut rng, &mut p);
    }
    let listen = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy_port = listen.local_addr().unwrap().port();
    let cut = Arc::new(AtomicBool::new(false));
    // The second sync's transfer is cut after 64 KiB (the checkpoint is
    // bigger: its WAL alone holds the 2000 + 2000 writes).
    proxy(listen, primary.port, 64 << 10, Arc::clone(&cut));
    let mut r = replica(&base.path().join("r"), proxy_port);
    wait_link_up(&r);
    settle(&mut p, 1);
    let before = dump(&mut p);
    assert!(dump(&mut r.conn()) == before, "the replica's first sync");

    // A new primary run (a new replication id): the replica must sync in
    // full, and the proxy cuts that transfer half way, every time.
    cut.store(true, Ordering::Relaxed);
    drop(p);
    let port = primary.port;
    drop(primary);
    let primary = Primary::start_on(&pdir, port);
    let mut p = primary.conn();
    for _ in 0..2000 {
        random_write(&mut rng, &mut p);
    }
    std::thread::sleep(Duration::from_millis(1500)); // attempts cut off
    let mut rc = r.conn();
    assert!(
        dump(&mut rc) == before,
        "the replica's data after a cut transfer"
    );
    r.child.kill().unwrap();
    r.child.wait().unwrap();
    drop(r);
    let r = replica(&base.path().join("r"), proxy_port);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        dump(&mut r.conn()) == before,
        "the replica's data after a cut transfer and a SIGKILL"
    );
    cut.store(false, Ordering::Relaxed);
    wait_link_up(&r);
    settle(&mut p, 1);
    assert_same(
        &mut p,
        &mut r.conn(),
        "the replica once the transfer went through",
    );
}

#[test]
fn wait_readonly_and_promotion() {
    let base = tempfile::tempdir().unwrap();
    let primary = Primary::start(&base.path().join("p"));
    let mut p = primary.conn();
    // No replica: WAIT answers 0 once its timeout passed.
    let t = Instant::now();
    let n: u64 = redis::cmd("WAIT").arg(1).arg(200).query(&mut p).unwrap();
    assert_eq!(n, 0);
    assert!(t.elapsed() >= Duration::from_millis(200));
    let n: u64 = redis::cmd("WAIT").arg(0).arg(0).query(&mut p).unwrap();
    assert_eq!(n, 0);

    let r = replica(&base.path().join("r"), primary.port);
    wait_link_up(&r);
    let mut rc = r.conn();
    for i in 0..50 {
        let _: () = p.rpush("list", i).unwrap();
        let n: u64 = redis::cmd("WAIT").arg(1).arg(10_000).query(&mut p).unwrap();
        assert_eq!(n, 1, "WAIT 1 after write {i}");
        // Acknowledged: the replica has it.
        let len: u64 = rc.llen("list").unwrap();
        assert_eq!(len, i + 1);
    }
    let role: redis::Value = redis::cmd("ROLE").query(&mut rc).unwrap();
    let s = format!("{role:?}");
    assert!(s.contains("slave") && s.contains("connected"), "{s}");
    let role: redis::Value = redis::cmd("ROLE").query(&mut p).unwrap();
    assert!(format!("{role:?}").contains("master"), "{role:?}");

    // Writes to the replica are refused, the plain SET path included.
    for cmd in [
        redis::cmd("SET").arg("x").arg("1").clone(),
        redis::cmd("MSET").arg("x").arg("1").clone(),
        redis::cmd("LPUSH").arg("list").arg("1").clone(),
        redis::cmd("DEL").arg("list").clone(),
        redis::cmd("FLUSHALL").clone(),
    ] {
        let e = cmd.query::<redis::Value>(&mut rc).unwrap_err();
        assert_eq!(e.code(), Some("READONLY"), "{e}");
    }
    let mut raw = Raw::connect(r.port);
    raw.send(&["SET", "x", "1"]);
    assert_eq!(
        raw.line(),
        "-READONLY You can't write against a read only replica."
    );
    let len: u64 = rc.llen("list").unwrap();
    assert_eq!(len, 50);

    // A transaction on the replica: a write is refused while queuing,
    // which fails the EXEC; reads run.
    let tx = |cmds: &[&[&str]]| {
        let mut raw = Raw::connect(r.port);
        raw.send(&["MULTI"]);
        assert_eq!(raw.line(), "+OK");
        let answers: Vec<String> = cmds
            .iter()
            .map(|c| {
                raw.send(c);
                raw.line()
            })
            .collect();
        raw.send(&["EXEC"]);
        let mut exec = vec![raw.line()];
        if let Some(n) = exec[0].strip_prefix('*') {
            for _ in 0..n.parse::<usize>().unwrap() {
                exec.push(raw.line());
            }
        }
        (answers, exec)
    };
    let (queued, exec) = tx(&[&["GET", "x"], &["SET", "x", "1"], &["LLEN", "list"]]);
    assert_eq!(
        queued,
        [
            "+QUEUED",
            "-READONLY You can't write against a read only replica.",
            "+QUEUED"
        ]
    );
    assert_eq!(
        exec,
        ["-EXECABORT Transaction discarded because of previous errors."]
    );
    let (queued, exec) = tx(&[&["LLEN", "list"], &["EXISTS", "x"]]);
    assert_eq!(queued, ["+QUEUED", "+QUEUED"]);
    assert_eq!(exec, ["*2", ":50", ":0"]);

    // Promotion as Sentinel does it: one transaction of SLAVEOF NO ONE,
    // CONFIG REWRITE (which fails, as Redis's does, when there is no
    // config file; the EXEC goes on), and CLIENT KILLs of the normal and
    // pub/sub clients (all but the caller: `rc` goes). Then writes are
    // accepted, the role is master, the data and counts are kept.
    let (queued, exec) = tx(&[
        &["SLAVEOF", "NO", "ONE"],
        &["CONFIG", "REWRITE"],
        &["CLIENT", "KILL", "TYPE", "normal"],
        &["CLIENT", "KILL", "TYPE", "pubsub"],
    ]);
    assert_eq!(queued, ["+QUEUED"; 4]);
    assert_eq!(
        exec[..3],
        [
            "*4",
            "+OK",
            "-ERR The server is running without a config file"
        ]
    );
    assert!(exec[3].starts_with(':') && exec[3] != ":0", "{exec:?}");
    assert_eq!(exec[4], ":0");
    assert!(
        redis::cmd("PING").query::<String>(&mut rc).is_err(),
        "rc was killed"
    );
    let mut rc = r.conn();
    let _: () = rc.set("x", "1").unwrap();
    let role: redis::Value = redis::cmd("ROLE").query(&mut rc).unwrap();
    assert!(format!("{role:?}").contains("master"), "{role:?}");
    let n: u64 = redis::cmd("DBSIZE").query(&mut rc).unwrap();
    assert_eq!(n, 2);
    assert_eq!(info_field(&mut rc, "replication", "role"), "master");
    // The old primary no longer has it as a replica.
    let deadline = Instant::now() + common::TIMEOUT;
    while info_field(&mut p, "replication", "connected_slaves") != "0" {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }

    // A write queued on a primary that becomes a replica before the EXEC:
    // the EXEC is refused whole.
    let mut raw = Raw::connect(r.port);
    raw.send(&["MULTI"]);
    assert_eq!(raw.line(), "+OK");
    raw.send(&["SET", "y", "1"]);
    assert_eq!(raw.line(), "+QUEUED");
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(primary.port)
        .query(&mut rc)
        .unwrap();
    raw.send(&["EXEC"]);
    assert_eq!(
        raw.line(),
        "-EXECABORT Transaction discarded because of: READONLY You can't write against a read \
         only replica."
    );
    let y: Option<String> = rc.get("y").unwrap();
    assert_eq!(y, None);
}

/// The ids of the clients `CLIENT LIST TYPE kind` lists, with their flags.
fn client_list(c: &mut redis::Connection, kind: &str) -> Vec<(String, String)> {
    let text: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg(kind)
        .query(c)
        .unwrap();
    text.lines()
        .map(|l| {
            let field = |name: &str| {
                l.split(' ')
                    .find_map(|f| f.strip_prefix(name))
                    .unwrap()
                    .to_string()
            };
            (field("id="), field("flags="))
        })
        .collect()
}

/// Waits until the primary's `INFO stats` `field` reaches `n`.
fn wait_stat(p: &mut redis::Connection, field: &str, n: u64) {
    let deadline = Instant::now() + common::TIMEOUT;
    while info_field(p, "stats", field).parse::<u64>().unwrap() < n {
        assert!(Instant::now() < deadline, "{field} never reached {n}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn client_kill_types_keep_replication_links_apart() {
    let base = tempfile::tempdir().unwrap();
    let primary = Primary::start(&base.path().join("p"));
    let mut p = primary.conn();
    let r = replica(&base.path().join("r"), primary.port);
    wait_link_up(&r);
    settle(&mut p, 1);

    // The replica's link is a `replica` client (flags S), not a `normal`
    // one, and not counted in `connected_clients`, as in Redis.
    let links = client_list(&mut p, "replica");
    assert_eq!(links.len(), 1, "{links:?}");
    assert_eq!(links[0].1, "S");
    assert!(client_list(&mut p, "slave") == links);
    assert!(client_list(&mut p, "normal")
        .iter()
        .all(|c| c.0 != links[0].0));
    let mut other = primary.conn();
    let _: String = redis::cmd("PING").query(&mut other).unwrap();
    assert_eq!(info_field(&mut p, "clients", "connected_clients"), "2");

    // Sentinel's `CLIENT KILL TYPE normal` leaves the stream alone.
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "normal"])
        .query(&mut p)
        .unwrap();
    assert_eq!(killed, 1, "the other normal client");
    assert!(client_list(&mut p, "replica") == links);
    settle(&mut p, 1);
    assert!(client_list(&mut p, "replica") == links);
    assert_eq!(info_field(&mut p, "stats", "sync_partial_ok"), "0");

    // `TYPE replica` cuts the link; the replica connects again and
    // continues (a partial resync).
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "replica"])
        .query(&mut p)
        .unwrap();
    assert_eq!(killed, 1);
    assert!(client_list(&mut p, "replica")
        .iter()
        .all(|c| c.0 != links[0].0));
    wait_stat(&mut p, "sync_partial_ok", 1);
    wait_link_up(&r);
    settle(&mut p, 1);

    // On the replica, `TYPE master` is its link to the primary: cut, it
    // connects again and continues; `TYPE normal` leaves it alone.
    let mut rc = r.conn();
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "normal"])
        .query(&mut rc)
        .unwrap();
    assert_eq!(killed, 0);
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "master"])
        .query(&mut rc)
        .unwrap();
    assert_eq!(killed, 1);
    wait_stat(&mut p, "sync_partial_ok", 2);
    wait_link_up(&r);
    settle(&mut p, 1);
    assert_eq!(info_field(&mut p, "stats", "sync_full"), "1");
    // A primary has no link of its own to cut.
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "master"])
        .query(&mut p)
        .unwrap();
    assert_eq!(killed, 0);
}

/// A connection to the server on `port` that gives `password`.
fn conn_auth(port: u16, password: &str) -> redis::Connection {
    let c = redis::Client::open(format!("redis://:{password}@127.0.0.1:{port}/")).unwrap();
    let con = c.get_connection_with_timeout(common::TIMEOUT).unwrap();
    con.set_read_timeout(Some(common::TIMEOUT)).unwrap();
    con.set_write_timeout(Some(common::TIMEOUT)).unwrap();
    con
}

#[test]
fn masterauth_lets_a_replica_follow_a_primary_with_a_password() {
    let base = tempfile::tempdir().unwrap();
    let primary = Served::start(&base.path().join("p"), &["--requirepass", "s3cret"]);
    let mut p = conn_auth(primary.port, "s3cret");
    for i in 0..100 {
        let _: () = p.set(format!("k{i}"), i).unwrap();
    }
    let port = primary.port.to_string();
    // `--masterauth`: the link authenticates and syncs.
    let with = Served::start(
        &base.path().join("with"),
        &["--replicaof", "127.0.0.1", &port, "--masterauth", "s3cret"],
    );
    wait_link_up(&with);
    // Without it the primary refuses the link (`-NOAUTH`): it stays down
    // while the other syncs and takes writes.
    let without = replica(&base.path().join("without"), primary.port);
    settle(&mut p, 1);
    let mut wc = without.conn();
    assert_eq!(
        info_field(&mut wc, "replication", "master_link_status"),
        "down"
    );
    assert_eq!(info_field(&mut p, "replication", "connected_slaves"), "1");
    let n: u64 = redis::cmd("DBSIZE").query(&mut wc).unwrap();
    assert_eq!(n, 0);
    // A wrong password is refused too; `CONFIG SET masterauth` with the
    // right one takes effect at the next connection.
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "masterauth", "wrong"])
        .query(&mut wc)
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500)); // a retry refused
    assert_eq!(
        info_field(&mut wc, "replication", "master_link_status"),
        "down"
    );
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "masterauth", "s3cret"])
        .query(&mut wc)
        .unwrap();
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg(&["GET", "masterauth"])
        .query(&mut wc)
        .unwrap();
    assert_eq!(got, ["masterauth", "s3cret"]);
    wait_link_up(&without);
    settle(&mut p, 2);
    assert_same(&mut p, &mut with.conn(), "the replica given --masterauth");
    assert_same(&mut p, &mut wc, "the replica given CONFIG SET masterauth");
}

#[test]
fn heartbeats_never_claim_what_the_wal_buffer_holds() {
    // `--sync no`: no background sync hands the WAL's buffer to the OS;
    // the expirer's deletions stay in it until a client's write flushes
    // it, while the idle sender sends its heartbeats.
    let base = tempfile::tempdir().unwrap();
    let primary = Primary::start_with(&base.path().join("p"), 0, weft_server::SyncMode::No);
    let mut p = primary.conn();
    let _: () = p.set("kept", 1).unwrap();
    let r = replica(&base.path().join("r"), primary.port);
    wait_link_up(&r);
    settle(&mut p, 1);
    for i in 0..20 {
        let _: () = redis::cmd("SET")
            .arg(format!("e{i}"))
            .arg(1)
            .arg("PX")
            .arg(20 + 10 * i)
            .query(&mut p)
            .unwrap();
    }
    // Expired and deleted, and a heartbeat or two sent meanwhile.
    std::thread::sleep(Duration::from_millis(2500));
    // A write flushes the buffer: the deletions reach the replica in
    // order, not below what a heartbeat said was sent (the replica would
    // refuse them and connect again).
    settle(&mut p, 1);
    assert_eq!(info_field(&mut p, "stats", "sync_partial_ok"), "0");
    assert_eq!(info_field(&mut p, "stats", "sync_full"), "1");
    assert_same(&mut p, &mut r.conn(), "the replica after the expiries");
}

/// `MULTI`, `EXISTS key`, `EXEC` on `c` after a `WATCH`: `None` when the
/// `EXEC` was aborted.
fn watched_exists(c: &mut redis::Connection, key: &str) -> Option<bool> {
    let r: Option<(bool,)> = redis::pipe().atomic().exists(key).query(c).unwrap();
    r.map(|(v,)| v)
}

#[test]
fn watch_and_blocked_clients_on_a_replica_see_the_stream() {
    let base = tempfile::tempdir().unwrap();
    let primary = Primary::start(&base.path().join("p"));
    let mut p = primary.conn();
    let _: () = p.set("k", "v1").unwrap();
    let _: () = p.hset("h", "f", "a").unwrap();
    let r = replica(&base.path().join("r"), primary.port);
    wait_link_up(&r);
    settle(&mut p, 1);
    let mut rc = r.conn();
    let watch = |c: &mut redis::Connection, key: &str| {
        let _: () = redis::cmd("WATCH").arg(key).query(c).unwrap();
    };

    // Nothing written: the EXEC runs.
    watch(&mut rc, "k");
    assert_eq!(watched_exists(&mut rc, "k"), Some(true));
    // The stream writes the watched key: the EXEC is aborted.
    watch(&mut rc, "k");
    let _: () = p.set("k", "v2").unwrap();
    settle(&mut p, 1);
    assert_eq!(watched_exists(&mut rc, "k"), None, "a SET from the stream");
    // A hash field changed in place (its element record only).
    watch(&mut rc, "h");
    let _: () = p.hset("h", "f", "b").unwrap();
    settle(&mut p, 1);
    assert_eq!(
        watched_exists(&mut rc, "h"),
        None,
        "an HSET from the stream"
    );
    // A key deleted by FLUSHALL (a range delete over the database).
    watch(&mut rc, "k");
    let _: () = redis::cmd("FLUSHALL").query(&mut p).unwrap();
    settle(&mut p, 1);
    assert_eq!(
        watched_exists(&mut rc, "k"),
        None,
        "a FLUSHALL from the stream"
    );
    let _: () = p.set("other", "1").unwrap();
    // A full sync replaces every key.
    watch(&mut rc, "other");
    let mut admin = r.conn();
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut admin)
        .unwrap();
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(primary.port)
        .query(&mut admin)
        .unwrap();
    wait_link_up(&r);
    settle(&mut p, 1);
    assert_eq!(info_field(&mut p, "stats", "sync_full"), "2");
    assert_eq!(watched_exists(&mut rc, "other"), None, "a full sync");

    // A writable replica's client blocked in BLPOP is woken by a push
    // from the stream.
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "replica-read-only", "no"])
        .query(&mut admin)
        .unwrap();
    let port = r.port;
    let blocked = std::thread::spawn(move || {
        let mut c = conn(port);
        let got: Option<(String, String)> = redis::cmd("BLPOP")
            .arg("queue")
            .arg(15)
            .query(&mut c)
            .unwrap();
        got
    });
    let deadline = Instant::now() + common::TIMEOUT;
    while info_field(&mut admin, "clients", "blocked_clients") != "1" {
        assert!(Instant::now() < deadline, "the BLPOP never blocked");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _: () = p.rpush("queue", "item").unwrap();
    assert_eq!(
        blocked.join().unwrap(),
        Some(("queue".to_string(), "item".to_string()))
    );
}
