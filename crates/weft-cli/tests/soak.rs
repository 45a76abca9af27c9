//! Server soak: `weft serve --sync always` under many loopback clients,
//! killed with SIGKILL every 0.5–3 s and restarted on the same directory.
//!
//! Each client thread owns its keys — strings `client-C-key-K` (SET, MSET,
//! DEL), counters `client-C-ctr-J` (INCR) and the fields of the hash
//! `client-C-hash` (HSET) — and writes ever newer versions
//! (`cC-kK-vN...`). It records the last acknowledged value of each key and
//! the writes it sent without an answer (in flight when the server died).
//! After every restart, with the clients parked, a checker reads every key
//! and field: the value must be the last acknowledged one or a later write
//! in flight of that client, never older (a counter: at least its last
//! acknowledged value, at most that plus its unanswered increments), and
//! no key may exist that no client wrote. An INCR's reply is checked the
//! same way while the server runs. Then the clients reconnect and go on.
//!
//! Knobs: `WEFT_SOAK_SECS` (default 20; `bench/soak-server` runs it for an
//! hour), `WEFT_SOAK_CLIENTS` (default 16), `WEFT_SOAK_KEYS` (string keys
//! per client, default 64), `WEFT_SEED` (kill intervals and client
//! operations), `WEFT_SOAK_SERVE_ARGS` (extra `weft serve` flags, space
//! separated). Loopback only; the server is killed on drop.

// A test (or benchmark) fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use common::{Served, TIMEOUT};

/// Counters per client (INCR).
const COUNTERS: usize = 4;
/// Fields of each client's hash (HSET).
const FIELDS: usize = 8;
/// Violation messages kept (all are counted).
const KEEP: usize = 50;

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={s:?} is not an integer")),
        Err(_) => default,
    }
}

/// SplitMix64: a small seeded generator (the kill schedule and each
/// client's operations replay from `WEFT_SEED`, timing aside).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What a key (or hash field) may read: its last acknowledged value, or
/// one of the writes sent after it that were never answered.
#[derive(Debug, Default)]
struct Slot {
    /// `None`: absent (never written, or deleted).
    acked: Option<String>,
    pending: Vec<Option<String>>,
    /// Written at least once (so a check of it checks a write).
    written: bool,
}

impl Slot {
    fn send(&mut self, v: Option<String>) {
        self.pending.push(v);
        self.written = true;
    }
    fn ack(&mut self) {
        self.acked = self.pending.pop().expect("an acknowledged write was sent");
        self.pending.clear();
    }
    /// Whether `got` may be read now.
    fn allows(&self, got: &Option<String>) -> bool {
        *got == self.acked || self.pending.contains(got)
    }
    /// After a check: what was read is what the store holds for good (the
    /// process that might still have applied a write in flight is dead).
    fn settle(&mut self, got: Option<String>) {
        self.acked = got;
        self.pending.clear();
    }
}

#[derive(Debug, Default)]
struct Counter {
    acked: i64,
    pending: i64,
}

/// One client's keys and what it knows about them.
#[derive(Debug, Default)]
struct ClientState {
    keys: Vec<Slot>,
    fields: Vec<Slot>,
    counters: Vec<Counter>,
    acked_writes: u64,
    unanswered: u64,
}

/// Running figures and violations, shared by all threads.
#[derive(Default)]
struct Report {
    violations: AtomicU64,
    messages: Mutex<Vec<String>>,
}

impl Report {
    fn violation(&self, msg: String) {
        self.violations.fetch_add(1, Ordering::SeqCst);
        eprintln!("VIOLATION: {msg}");
        let mut m = self.messages.lock().unwrap();
        if m.len() < KEEP {
            m.push(msg);
        }
    }
}

/// The server's state as the clients see it.
struct Control {
    state: Mutex<ControlState>,
    cv: Condvar,
}

struct ControlState {
    /// The port of the running server; `None` while it is down.
    port: Option<u16>,
    /// Clients not parked.
    running: usize,
    stop: bool,
}

fn key(c: usize, k: usize) -> String {
    format!("client-{c}-key-{k}")
}

fn counter(c: usize, j: usize) -> String {
    format!("client-{c}-ctr-{j}")
}

fn hash(c: usize) -> String {
    format!("client-{c}-hash")
}

fn field(f: usize) -> String {
    format!("f{f}")
}

/// A value that names its writer, key and version, 16 to ~200 bytes.
fn value(c: usize, what: &str, n: u64) -> String {
    let pad = (n.wrapping_mul(2_654_435_761) % 180) as usize;
    format!("c{c}-{what}-v{n}-{}", "x".repeat(pad))
}

fn connect(port: u16) -> redis::RedisResult<redis::Connection> {
    let c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let con = c.get_connection_with_timeout(TIMEOUT)?;
    con.set_read_timeout(Some(TIMEOUT))?;
    con.set_write_timeout(Some(TIMEOUT))?;
    Ok(con)
}

/// An error that a dying server explains (a dropped or refused connection,
/// an interrupted read), not a wrong reply.
fn is_disconnect(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || e.kind() == redis::ErrorKind::IoError
}

/// One client: writes until its connection fails, then parks until the
/// server is back (or reconnects at once if it never went down).
fn client(
    c: usize,
    seed: u64,
    ctl: Arc<Control>,
    me: Arc<Mutex<ClientState>>,
    report: Arc<Report>,
    version: Arc<AtomicU64>,
) {
    let mut rng = Rng(seed ^ (c as u64).wrapping_mul(0xa076_1d64_78bd_642f));
    let nkeys = me.lock().unwrap().keys.len();
    let mut port: Option<u16> = None;
    loop {
        // Wait for a server (parking if the last one died).
        {
            let mut st = ctl.state.lock().unwrap();
            loop {
                if st.stop {
                    if port.is_some() {
                        st.running -= 1;
                        ctl.cv.notify_all();
                    }
                    return;
                }
                if st.port.is_some() && st.port == port {
                    break; // the same server: a spurious failure, go on
                }
                if st.port.is_some() {
                    port = st.port;
                    st.running += 1;
                    break;
                }
                if port.is_some() {
                    // It died: park.
                    port = None;
                    st.running -= 1;
                    ctl.cv.notify_all();
                }
                st = ctl.cv.wait(st).unwrap();
            }
        }
        let Ok(mut con) = connect(port.unwrap()) else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        loop {
            if ctl.state.lock().unwrap().port != port {
                break;
            }
            let n = version.fetch_add(1, Ordering::Relaxed);
            let r = one_write(c, n, nkeys, &mut rng, &mut con, &me, &report);
            match r {
                Ok(()) => me.lock().unwrap().acked_writes += 1,
                Err(e) => {
                    me.lock().unwrap().unanswered += 1;
                    if !is_disconnect(&e) {
                        report.violation(format!("client {c}: unexpected error reply {e}"));
                    }
                    break;
                }
            }
        }
    }
}

/// Sends one write, recording what is in flight first and what was
/// acknowledged after.
fn one_write(
    c: usize,
    n: u64,
    nkeys: usize,
    rng: &mut Rng,
    con: &mut redis::Connection,
    me: &Mutex<ClientState>,
    report: &Report,
) -> redis::RedisResult<()> {
    let pick = rng.below(100);
    match pick {
        0..=49 => {
            let k = rng.below(nkeys as u64) as usize;
            let v = value(c, &format!("k{k}"), n);
            me.lock().unwrap().keys[k].send(Some(v.clone()));
            redis::cmd("SET").arg(key(c, k)).arg(&v).query::<()>(con)?;
            me.lock().unwrap().keys[k].ack();
        }
        50..=61 => {
            let count = 2 + rng.below(3) as usize;
            let mut ks: Vec<usize> = Vec::new();
            while ks.len() < count.min(nkeys) {
                let k = rng.below(nkeys as u64) as usize;
                if !ks.contains(&k) {
                    ks.push(k);
                }
            }
            let mut cmd = redis::cmd("MSET");
            {
                let mut st = me.lock().unwrap();
                for &k in &ks {
                    let v = value(c, &format!("k{k}"), n);
                    st.keys[k].send(Some(v.clone()));
                    cmd.arg(key(c, k)).arg(v);
                }
            }
            cmd.query::<()>(con)?;
            let mut st = me.lock().unwrap();
            for &k in &ks {
                st.keys[k].ack();
            }
        }
        62..=71 => {
            let k = rng.below(nkeys as u64) as usize;
            me.lock().unwrap().keys[k].send(None);
            redis::cmd("DEL").arg(key(c, k)).query::<i64>(con)?;
            me.lock().unwrap().keys[k].ack();
        }
        72..=85 => {
            let j = rng.below(COUNTERS as u64) as usize;
            me.lock().unwrap().counters[j].pending += 1;
            let got: i64 = redis::cmd("INCR").arg(counter(c, j)).query(con)?;
            let mut st = me.lock().unwrap();
            let ctr = &mut st.counters[j];
            if got <= ctr.acked || got > ctr.acked + ctr.pending {
                report.violation(format!(
                    "client {c}: INCR {} replied {got}, acknowledged {} with {} increments since",
                    counter(c, j),
                    ctr.acked,
                    ctr.pending
                ));
            }
            ctr.acked = got;
            ctr.pending = 0;
        }
        _ => {
            let count = 1 + rng.below(2) as usize;
            let mut fs: Vec<usize> = Vec::new();
            while fs.len() < count {
                let f = rng.below(FIELDS as u64) as usize;
                if !fs.contains(&f) {
                    fs.push(f);
                }
            }
            let mut cmd = redis::cmd("HSET");
            cmd.arg(hash(c));
            {
                let mut st = me.lock().unwrap();
                for &f in &fs {
                    let v = value(c, &format!("f{f}"), n);
                    st.fields[f].send(Some(v.clone()));
                    cmd.arg(field(f)).arg(v);
                }
            }
            cmd.query::<i64>(con)?;
            let mut st = me.lock().unwrap();
            for &f in &fs {
                st.fields[f].ack();
            }
        }
    }
    Ok(())
}

/// Runs a read on `con`, reconnecting up to three times if it is
/// interrupted (a stopped and continued test process sees EINTR).
fn read<T: redis::FromRedisValue>(port: u16, con: &mut redis::Connection, cmd: &redis::Cmd) -> T {
    let what = String::from_utf8_lossy(&cmd.get_packed_command()).replace("\r\n", " ");
    let mut last = None;
    for _ in 0..3 {
        match cmd.query(con) {
            Ok(v) => return v,
            Err(e) if is_disconnect(&e) => {
                last = Some(e);
                *con = connect(port).expect("checker reconnect");
            }
            Err(e) => panic!("checker read {what}: {e}"),
        }
    }
    panic!("checker read {what} failed three times: {last:?}");
}

/// Checks every client's keys against what it knows, then settles them.
/// Returns the values checked that hold (or held) an acknowledged write.
fn check(round: usize, port: u16, clients: &[Arc<Mutex<ClientState>>], report: &Report) -> u64 {
    let mut con = connect(port).expect("checker connect");
    let mut checked = 0u64;
    for (c, me) in clients.iter().enumerate() {
        let mut st = me.lock().unwrap();
        let names: Vec<String> = (0..st.keys.len()).map(|k| key(c, k)).collect();
        let got: Vec<Option<String>> = read(port, &mut con, redis::cmd("MGET").arg(&names));
        assert_eq!(got.len(), names.len(), "MGET reply length");
        for (k, got) in got.into_iter().enumerate() {
            let slot = &mut st.keys[k];
            if !slot.allows(&got) {
                report.violation(format!(
                    "after kill {round}: {} reads {got:?}, acknowledged {:?}, in flight {:?}",
                    names[k], slot.acked, slot.pending
                ));
            }
            checked += u64::from(slot.written);
            slot.settle(got);
        }
        let mut fields: HashMap<String, String> =
            read(port, &mut con, redis::cmd("HGETALL").arg(hash(c)));
        for f in 0..st.fields.len() {
            let got = fields.remove(&field(f));
            let slot = &mut st.fields[f];
            if !slot.allows(&got) {
                report.violation(format!(
                    "after kill {round}: {} {} reads {got:?}, acknowledged {:?}, in flight {:?}",
                    hash(c),
                    field(f),
                    slot.acked,
                    slot.pending
                ));
            }
            checked += u64::from(slot.written);
            slot.settle(got);
        }
        if !fields.is_empty() {
            report.violation(format!(
                "after kill {round}: {} holds fields no client wrote: {:?}",
                hash(c),
                fields.keys().collect::<Vec<_>>()
            ));
        }
        let names: Vec<String> = (0..COUNTERS).map(|j| counter(c, j)).collect();
        let got: Vec<Option<i64>> = read(port, &mut con, redis::cmd("MGET").arg(&names));
        for (j, got) in got.into_iter().enumerate() {
            let ctr = &mut st.counters[j];
            let v = got.unwrap_or(0);
            if v < ctr.acked || v > ctr.acked + ctr.pending {
                report.violation(format!(
                    "after kill {round}: {} reads {got:?}, acknowledged {} with {} increments in flight",
                    names[j], ctr.acked, ctr.pending
                ));
            }
            checked += u64::from(ctr.acked > 0 || ctr.pending > 0);
            ctr.acked = v;
            ctr.pending = 0;
        }
    }
    // No key that no client wrote.
    let all: Vec<String> = read(port, &mut con, redis::cmd("KEYS").arg("*"));
    let nkeys = clients.first().map_or(0, |c| c.lock().unwrap().keys.len());
    for k in all {
        let known = (0..clients.len()).any(|c| {
            k == hash(c)
                || (0..nkeys).any(|i| k == key(c, i))
                || (0..COUNTERS).any(|j| k == counter(c, j))
        });
        if !known {
            report.violation(format!(
                "after kill {round}: key {k:?} that no client wrote"
            ));
        }
    }
    checked
}

/// Kills the server (SIGKILL) and reaps it.
fn kill9(mut s: Served) {
    s.child.kill().unwrap();
    let _ = s.child.wait();
}

fn soak(secs: u64, clients_n: usize, keys_n: usize, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let extra_args = std::env::var("WEFT_SOAK_SERVE_ARGS").unwrap_or_default();
    let mut args: Vec<&str> = vec!["--sync", "always"];
    args.extend(extra_args.split_whitespace());
    let mut rng = Rng(seed);
    let ctl = Arc::new(Control {
        state: Mutex::new(ControlState {
            port: None,
            running: 0,
            stop: false,
        }),
        cv: Condvar::new(),
    });
    let report = Arc::new(Report::default());
    let version = Arc::new(AtomicU64::new(1));
    let states: Vec<Arc<Mutex<ClientState>>> = (0..clients_n)
        .map(|_| {
            Arc::new(Mutex::new(ClientState {
                keys: (0..keys_n).map(|_| Slot::default()).collect(),
                fields: (0..FIELDS).map(|_| Slot::default()).collect(),
                counters: (0..COUNTERS).map(|_| Counter::default()).collect(),
                ..Default::default()
            }))
        })
        .collect();
    let threads: Vec<_> = states
        .iter()
        .enumerate()
        .map(|(c, me)| {
            let (ctl, me, report, version) = (
                Arc::clone(&ctl),
                Arc::clone(me),
                Arc::clone(&report),
                Arc::clone(&version),
            );
            std::thread::Builder::new()
                .name(format!("soak-client-{c}"))
                .spawn(move || client(c, seed, ctl, me, report, version))
                .unwrap()
        })
        .collect();

    let set_port = |port: Option<u16>| {
        let mut st = ctl.state.lock().unwrap();
        st.port = port;
        ctl.cv.notify_all();
    };
    // Waits until every client has parked (after a kill).
    let wait_parked = || {
        let deadline = Instant::now() + TIMEOUT;
        let mut st = ctl.state.lock().unwrap();
        while st.running > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "{} clients did not notice the kill",
                st.running
            );
            st = ctl.cv.wait_timeout(st, left).unwrap().0;
        }
    };

    let started = Instant::now();
    let mut kills = 0usize;
    let mut checked = 0u64;
    let mut restart_secs = 0f64;
    let mut server = Served::start(&data, &args);
    set_port(Some(server.port));
    loop {
        let last = started.elapsed() >= Duration::from_secs(secs);
        if !last {
            let ms = 500 + rng.below(2500);
            std::thread::sleep(Duration::from_millis(ms));
        }
        kill9(server);
        kills += 1;
        set_port(None);
        wait_parked();
        let t = Instant::now();
        server = Served::start(&data, &args);
        restart_secs += t.elapsed().as_secs_f64();
        checked += check(kills, server.port, &states, &report);
        if last {
            break;
        }
        set_port(Some(server.port));
        if kills.is_multiple_of(50) {
            eprintln!(
                "soak: {:.0}s, {kills} kills, {checked} acknowledged values checked, {} violations",
                started.elapsed().as_secs_f64(),
                report.violations.load(Ordering::SeqCst)
            );
        }
    }
    {
        let mut st = ctl.state.lock().unwrap();
        st.stop = true;
        ctl.cv.notify_all();
    }
    for t in threads {
        t.join().unwrap();
    }
    drop(server);

    let acked: u64 = states.iter().map(|s| s.lock().unwrap().acked_writes).sum();
    let unanswered: u64 = states.iter().map(|s| s.lock().unwrap().unanswered).sum();
    let violations = report.violations.load(Ordering::SeqCst);
    println!(
        "soak: seed {seed}, {:.1}s, {clients_n} clients x ({keys_n} keys + {FIELDS} hash fields + {COUNTERS} counters), \
         --sync always: {kills} kills (mean restart {:.0} ms), {acked} acknowledged writes, \
         {unanswered} unanswered, {checked} acknowledged values checked, {violations} violations",
        started.elapsed().as_secs_f64(),
        1000.0 * restart_secs / kills as f64,
    );
    let messages = report.messages.lock().unwrap();
    assert_eq!(
        violations,
        0,
        "seed {seed} (replay with WEFT_SEED={seed}): violations, first {}:\n{}",
        messages.len(),
        messages.join("\n")
    );
    // Enough happened for the run to mean something.
    assert!(kills >= 3, "only {kills} kills");
    assert!(
        acked >= 100 * kills as u64 / 2,
        "only {acked} acknowledged writes in {kills} kills"
    );
    assert!(checked > 0, "nothing checked");
}

/// The bounded run: about 20 s, about 8 kills, 16 clients.
#[test]
fn soak_kill9_sync_always() {
    let secs = env_u64("WEFT_SOAK_SECS", 20);
    let clients = env_u64("WEFT_SOAK_CLIENTS", 16) as usize;
    let keys = env_u64("WEFT_SOAK_KEYS", 64) as usize;
    let seed = env_u64("WEFT_SEED", 0x50ac);
    soak(secs, clients, keys.max(4), seed);
}
