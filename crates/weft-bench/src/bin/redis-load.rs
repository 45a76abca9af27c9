//! `redis-load`: what `redis-benchmark` cannot express, against any
//! Redis-protocol server (`weft serve`, `redis-server`), over raw RESP on
//! loopback TCP with only the standard library.
//!
//! * `publish`: `--subscribers` connections (10) `SUBSCRIBE` one channel;
//!   `--clients` publishers (50) `PUBLISH` to it, one request in flight
//!   each, `--requests` (200000) in all. Reports publishes/s and messages
//!   delivered/s: every message the subscribers read, over the time from
//!   the first publish to the last message read.
//! * `multi`: `--clients` connections (50) each send `MULTI`, `--incrs`
//!   (10) `INCR`s of random keys out of `--keyspace` (1000000), `EXEC` in
//!   one write, as a client library sends a transaction, and read the
//!   replies; `--requests` transactions in all. Reports transactions/s.
//!
//! Connections are driven in lockstep by `--threads` threads (2): a thread
//! sends one request on each of its connections, then reads each reply, so
//! `--clients` requests are in flight as with `redis-benchmark -c`.
//! `-a PASSWORD` authenticates every connection first. The last line is
//! `scenario,ops_per_s,messages_per_s` for scripts (`bench/redis-compare`).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const USAGE: &str = "usage: redis-load publish|multi [-h HOST] [-p PORT] [-a PASSWORD] \
[-c CLIENTS] [-n REQUESTS] [--threads N] [--subscribers N] [--data-size BYTES] [--incrs N] \
[--keyspace N]";

struct Opts {
    scenario: String,
    host: String,
    port: u16,
    password: Option<String>,
    clients: usize,
    requests: u64,
    threads: usize,
    subscribers: usize,
    data_size: usize,
    incrs: usize,
    keyspace: u64,
}

fn parse_args() -> Result<Opts, String> {
    let mut args = std::env::args().skip(1);
    let scenario = args.next().ok_or(USAGE)?;
    if scenario != "publish" && scenario != "multi" {
        return Err(USAGE.into());
    }
    let mut o = Opts {
        scenario,
        host: "127.0.0.1".into(),
        port: 6379,
        password: None,
        clients: 50,
        requests: 200_000,
        threads: 2,
        subscribers: 10,
        data_size: 3,
        incrs: 10,
        keyspace: 1_000_000,
    };
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .ok_or(format!("{flag} needs a value\n{USAGE}"))?;
        let num = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("{flag}: not a number: {value}"))
        };
        match flag.as_str() {
            "-h" => o.host = value.clone(),
            "-p" => o.port = num()? as u16,
            "-a" => o.password = Some(value.clone()),
            "-c" => o.clients = num()?.max(1) as usize,
            "-n" => o.requests = num()?,
            "--threads" => o.threads = num()?.max(1) as usize,
            "--subscribers" => o.subscribers = num()? as usize,
            "--data-size" => o.data_size = num()? as usize,
            "--incrs" => o.incrs = num()?.max(1) as usize,
            "--keyspace" => o.keyspace = num()?.max(1),
            _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
        }
    }
    o.threads = o.threads.min(o.clients);
    Ok(o)
}

/// One request as RESP.
fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// The end of the complete RESP value starting at `at` in `buf`, if all
/// of it is there; an error for a reply that is an error or not RESP.
fn value_end(buf: &[u8], at: usize) -> io::Result<Option<usize>> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
    let Some(&kind) = buf.get(at) else {
        return Ok(None);
    };
    let Some(nl) = buf[at..].windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    let line = &buf[at + 1..at + nl];
    let next = at + nl + 2;
    let int = || -> io::Result<i64> {
        std::str::from_utf8(line)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("a bad length"))
    };
    match kind {
        b'+' | b':' => Ok(Some(next)),
        b'-' => Err(bad(&format!(
            "the server answered an error: {}",
            String::from_utf8_lossy(line)
        ))),
        b'$' => {
            let n = int()?;
            if n < 0 {
                return Ok(Some(next));
            }
            let end = next + n as usize + 2;
            Ok((buf.len() >= end).then_some(end))
        }
        b'*' | b'>' => {
            let n = int()?;
            let mut pos = next;
            for _ in 0..n.max(0) {
                match value_end(buf, pos)? {
                    Some(p) => pos = p,
                    None => return Ok(None),
                }
            }
            Ok(Some(pos))
        }
        _ => Err(bad("not RESP")),
    }
}

/// A connection that reads whole replies.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl Conn {
    fn open(o: &Opts) -> io::Result<Conn> {
        let stream = TcpStream::connect((o.host.as_str(), o.port))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        let mut c = Conn {
            stream,
            buf: vec![0; 64 << 10],
            start: 0,
            end: 0,
        };
        if let Some(pw) = &o.password {
            let mut req = Vec::new();
            encode(&mut req, &[b"AUTH", pw.as_bytes()]);
            c.stream.write_all(&req)?;
            c.replies(1)?;
        }
        Ok(c)
    }

    /// Reads until `n` more whole replies have arrived.
    fn replies(&mut self, n: usize) -> io::Result<()> {
        let mut left = n;
        while left > 0 {
            match value_end(&self.buf[..self.end], self.start)? {
                Some(e) => {
                    self.start = e;
                    left -= 1;
                }
                None => self.fill()?,
            }
        }
        Ok(())
    }

    /// Reads more, keeping the unparsed tail.
    fn fill(&mut self) -> io::Result<()> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        let n = self.stream.read(&mut self.buf[self.end..])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            ));
        }
        self.end += n;
        Ok(())
    }
}

/// A small xorshift generator per thread (keys only need to spread).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Sends `--requests` requests over `--clients` connections driven by
/// `--threads` threads in lockstep rounds: `request` makes the bytes of
/// one (and says how many replies it gets). Returns when the first round
/// started and how long they all took.
fn drive(
    o: &Opts,
    request: impl Fn(&mut Rng, &mut Vec<u8>) -> usize + Sync,
) -> io::Result<(Instant, Duration)> {
    let per_thread = o.clients / o.threads;
    let extra = o.clients % o.threads;
    let total_rounds = o.requests.div_ceil(o.clients as u64);
    let mut groups = Vec::new();
    for t in 0..o.threads {
        let n = per_thread + usize::from(t < extra);
        let conns = (0..n)
            .map(|_| Conn::open(o))
            .collect::<io::Result<Vec<_>>>()?;
        groups.push(conns);
    }
    let go = Barrier::new(o.threads + 1);
    let started = std::thread::scope(|s| -> io::Result<Instant> {
        let handles: Vec<_> = groups
            .into_iter()
            .enumerate()
            .map(|(t, mut conns)| {
                let go = &go;
                let request = &request;
                s.spawn(move || -> io::Result<()> {
                    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((t as u64 + 1) * 0x2545_f491));
                    let mut req = Vec::with_capacity(512);
                    let mut expect = vec![0usize; conns.len()];
                    go.wait();
                    for _ in 0..total_rounds {
                        for (c, e) in conns.iter_mut().zip(expect.iter_mut()) {
                            req.clear();
                            *e = request(&mut rng, &mut req);
                            c.stream.write_all(&req)?;
                        }
                        for (c, &e) in conns.iter_mut().zip(&expect) {
                            c.replies(e)?;
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        go.wait();
        let started = Instant::now();
        for h in handles {
            h.join()
                .map_err(|_| io::Error::other("a client thread panicked"))??;
        }
        Ok(started)
    })?;
    Ok((started, started.elapsed()))
}

fn multi(o: &Opts) -> io::Result<(f64, f64)> {
    let done = o.requests.div_ceil(o.clients as u64) * o.clients as u64;
    let (_, took) = drive(o, |rng, req| {
        encode(req, &[b"MULTI"]);
        for _ in 0..o.incrs {
            let key = format!("tx:{}", rng.next() % o.keyspace);
            encode(req, &[b"INCR", key.as_bytes()]);
        }
        encode(req, &[b"EXEC"]);
        o.incrs + 2
    })?;
    Ok((done as f64 / took.as_secs_f64(), 0.0))
}

fn publish(o: &Opts) -> io::Result<(f64, f64)> {
    let channel = b"redis-load";
    let received = Arc::new(AtomicU64::new(0));
    let last_read = Arc::new(std::sync::Mutex::new(Instant::now()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut subs = Vec::new();
    for _ in 0..o.subscribers {
        let mut c = Conn::open(o)?;
        let mut req = Vec::new();
        encode(&mut req, &[b"SUBSCRIBE", channel]);
        c.stream.write_all(&req)?;
        c.replies(1)?;
        c.stream
            .set_read_timeout(Some(Duration::from_millis(200)))?;
        let (received, last_read, stop) = (
            Arc::clone(&received),
            Arc::clone(&last_read),
            Arc::clone(&stop),
        );
        subs.push(std::thread::spawn(move || -> io::Result<()> {
            while !stop.load(Ordering::Relaxed) {
                let mut n = 0;
                while let Some(e) = value_end(&c.buf[..c.end], c.start)? {
                    c.start = e;
                    n += 1;
                }
                if n > 0 {
                    received.fetch_add(n, Ordering::Relaxed);
                    if let Ok(mut t) = last_read.lock() {
                        *t = Instant::now();
                    }
                }
                match c.fill() {
                    Ok(()) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        }));
    }
    // Every subscriber must be registered before the first publish.
    let mut check = Conn::open(o)?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut req = Vec::new();
        encode(&mut req, &[b"PUBLISH", channel, b"warm-up"]);
        check.stream.write_all(&req)?;
        let at = check.start;
        check.replies(1)?;
        let reply = &check.buf[at..check.start];
        if reply == format!(":{}\r\n", o.subscribers).as_bytes() {
            break;
        }
        if Instant::now() > deadline {
            return Err(io::Error::other("the subscribers never all registered"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // Let the warm-up messages arrive, then count from zero.
    std::thread::sleep(Duration::from_millis(300));
    received.store(0, Ordering::Relaxed);
    let payload = vec![b'x'; o.data_size];
    let done = o.requests.div_ceil(o.clients as u64) * o.clients as u64;
    let (started, took) = drive(o, |_, req| {
        encode(req, &[b"PUBLISH", channel, &payload]);
        1
    })?;
    let want = done * o.subscribers as u64;
    let deadline = Instant::now() + Duration::from_secs(60);
    while received.load(Ordering::Relaxed) < want && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    for s in subs {
        s.join()
            .map_err(|_| io::Error::other("a subscriber thread panicked"))??;
    }
    let got = received.load(Ordering::Relaxed);
    if got < want {
        eprintln!("redis-load: only {got} of {want} messages arrived");
    }
    let last = last_read
        .lock()
        .map(|t| *t)
        .unwrap_or_else(|_| Instant::now());
    let spread = last.saturating_duration_since(started).max(took);
    Ok((
        done as f64 / took.as_secs_f64(),
        got as f64 / spread.as_secs_f64(),
    ))
}

fn main() -> ExitCode {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let r = match o.scenario.as_str() {
        "publish" => publish(&o),
        _ => multi(&o),
    };
    match r {
        Ok((ops, msgs)) => {
            if o.scenario == "publish" {
                println!(
                    "PUBLISH to {} subscribers, {} publishers: {ops:.0} publishes/s, {msgs:.0} \
                     messages delivered/s",
                    o.subscribers, o.clients
                );
            } else {
                println!(
                    "MULTI + {} INCR + EXEC, {} clients: {ops:.0} transactions/s",
                    o.incrs, o.clients
                );
            }
            println!("{},{ops:.0},{msgs:.0}", o.scenario);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("redis-load {}: {e}", o.scenario);
            ExitCode::FAILURE
        }
    }
}
