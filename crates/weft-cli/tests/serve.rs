//! `weft serve` as a process: the `listening on` line, `redis-cli`,
//! SIGTERM, kill -9 under `--sync always`, and twemproxy in front of
//! several instances. Loopback only; every child is killed on drop.

// A test (or benchmark) fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::{Served, TIMEOUT};

fn need(program: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        found,
        "{program} is not installed: run scripts/test, which installs scripts/test-packages"
    );
}

fn run_timeout(cmd: &mut Command) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{cmd:?} timed out\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn cli(port: u16, args: &[&str]) -> String {
    let out = run_timeout(
        Command::new("redis-cli")
            .arg("-p")
            .arg(port.to_string())
            .args(args),
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn redis_cli_and_sigterm() {
    need("redis-cli");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut s = Served::start(&data, &[]);
    let p = s.port;
    assert_eq!(cli(p, &["PING"]), "PONG\n");
    assert_eq!(cli(p, &["SET", "greeting", "hello world"]), "OK\n");
    assert_eq!(cli(p, &["GET", "greeting"]), "hello world\n");
    assert_eq!(cli(p, &["GET", "nope"]), "\n");
    assert_eq!(cli(p, &["HSET", "h", "f", "v", "g", "w"]), "2\n");
    assert_eq!(cli(p, &["HGETALL", "h"]), "f\nv\ng\nw\n");
    // RESP3: a map, which redis-cli prints as "field value" lines.
    assert_eq!(cli(p, &["-3", "HGETALL", "h"]), "f v\ng w\n");
    assert_eq!(
        cli(p, &["-3", "HELLO", "3"]).lines().next(),
        Some("server redis")
    );
    assert_eq!(cli(p, &["INCR", "n"]), "1\n");
    assert_eq!(cli(p, &["SET", "tmp", "x", "PX", "100"]), "OK\n");
    assert_eq!(cli(p, &["KEYS", "*"]), "greeting\nh\nn\ntmp\n");
    assert_eq!(
        cli(p, &["WEFT.RANGE", "a", "", "LIMIT", "1"]),
        "greeting\nhello world\n"
    );
    assert_eq!(
        cli(p, &["GET", "h"]),
        // (redis-cli prints errors followed by an empty line, for
        // redis-server too.)
        "WRONGTYPE Operation against a key holding the wrong kind of value\n\n"
    );
    assert_eq!(
        cli(p, &["NOSUCH", "x"]),
        "ERR unknown command 'NOSUCH', with args beginning with: 'x' \n\n"
    );
    assert_eq!(
        cli(p, &["GET"]),
        "ERR wrong number of arguments for 'get' command\n\n"
    );
    // Pipelined input (redis-cli --pipe speaks raw RESP).
    let mut pipe = String::new();
    for i in 0..1000 {
        pipe.push_str(&format!(
            "*3\r\n$3\r\nSET\r\n${}\r\npipe{i}\r\n$1\r\nv\r\n",
            4 + i.to_string().len()
        ));
    }
    let mut child = Command::new("redis-cli")
        .args(["-p", &p.to_string(), "--pipe"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(pipe.as_bytes()).unwrap();
    }
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(child.wait().unwrap().success());
    assert!(out.contains("errors: 0, replies: 1000"), "{out}");
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(cli(p, &["DBSIZE"]), "1003\n");

    // SIGTERM: graceful exit 0, and nothing more on stdout.
    let st = Command::new("kill")
        .args(["-TERM", &s.child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(s.wait(), Some(0));
    assert!(
        s.stdout_rest.recv_timeout(Duration::from_secs(2)).is_err(),
        "exactly one line on stdout"
    );
    drop(s);
    // The data is there for the next server.
    let s = Served::start(&data, &[]);
    assert_eq!(cli(s.port, &["GET", "pipe999"]), "v\n");
    assert_eq!(cli(s.port, &["HGET", "h", "g"]), "w\n");
}

/// kill -9 while clients write under `--sync always`; after a restart every
/// acknowledged write is there (and acknowledged counters are not behind).
#[test]
fn kill9_under_sync_always_loses_no_acknowledged_write() {
    kill9_loses_no_acknowledged_write("always");
}

/// The same under `--sync no`: a process crash loses nothing acknowledged
/// either, because replies go out only after the loop's `flush_wal` (the
/// database runs with `manual_wal_flush`).
#[test]
fn kill9_under_sync_no_loses_no_acknowledged_write() {
    kill9_loses_no_acknowledged_write("no");
}

fn kill9_loses_no_acknowledged_write(sync: &str) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for cycle in 0..2 {
        let mut s = Served::start(&data, &["--sync", sync]);
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..4)
            .map(|t| {
                let mut c = s.conn();
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    // (acknowledged keys, acknowledged increments)
                    let mut acked = Vec::new();
                    let mut incrs = 0u64;
                    for i in 0u64.. {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let key = format!("c{cycle}:t{t}:{i:06}");
                        let val = format!("value-{i}-{}", "x".repeat((i % 50) as usize));
                        let r: redis::RedisResult<()> =
                            redis::cmd("SET").arg(&key).arg(&val).query(&mut c);
                        if r.is_err() {
                            break;
                        }
                        acked.push((key, val));
                        let r: redis::RedisResult<i64> = redis::cmd("HINCRBY")
                            .arg(format!("ctr{t}"))
                            .arg("n")
                            .arg(1)
                            .query(&mut c);
                        match r {
                            Ok(_) => incrs += 1,
                            Err(_) => break,
                        }
                    }
                    (acked, incrs)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(1200));
        s.child.kill().unwrap(); // SIGKILL
        let _ = s.child.wait();
        stop.store(true, Ordering::Relaxed);
        let results: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
        drop(s);

        let s = Served::start(&data, &["--sync", sync]);
        let mut c = s.conn();
        let mut total = 0;
        for (t, (acked, incrs)) in results.iter().enumerate() {
            assert!(!acked.is_empty(), "writer {t} never got an acknowledgement");
            for (k, v) in acked {
                let got: Option<String> = s.read_query(&mut c, redis::cmd("GET").arg(k));
                assert_eq!(
                    got.as_deref(),
                    Some(v.as_str()),
                    "--sync {sync}, cycle {cycle}: acknowledged {k} lost"
                );
            }
            let n: i64 = s
                .read_query::<Option<i64>>(
                    &mut c,
                    redis::cmd("HGET").arg(format!("ctr{t}")).arg("n"),
                )
                .unwrap_or(0);
            // Earlier cycles added to the same counters.
            assert!(
                n as u64 >= *incrs,
                "cycle {cycle}: counter {t} is {n}, {incrs} acknowledged"
            );
            total += acked.len();
        }
        assert!(total > 50, "too few writes to mean anything: {total}");
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Three `weft serve` behind twemproxy (ketama): strings and hashes through
/// the proxy with redis-benchmark and redis-cli, keys spread over all three.
#[test]
fn twemproxy_ketama_over_three_instances() {
    need("nutcracker");
    need("redis-benchmark");
    need("redis-cli");
    let dir = tempfile::tempdir().unwrap();
    let servers: Vec<Served> = (0..3)
        .map(|i| Served::start(&dir.path().join(format!("w{i}")), &["--sync", "no"]))
        .collect();
    let proxy_port = free_port();
    let stats_port = free_port();
    let mut conf = format!(
        "weft:\n  listen: 127.0.0.1:{proxy_port}\n  hash: fnv1a_64\n  distribution: ketama\n  \
         redis: true\n  auto_eject_hosts: false\n  timeout: 5000\n  server_connections: 1\n  servers:\n"
    );
    for (i, s) in servers.iter().enumerate() {
        conf.push_str(&format!("   - 127.0.0.1:{}:1 weft{i}\n", s.port));
    }
    let conf_path: PathBuf = dir.path().join("nutcracker.yml");
    std::fs::write(&conf_path, conf).unwrap();
    let proxy = Command::new("nutcracker")
        .arg("-c")
        .arg(&conf_path)
        .args(["-s", &stats_port.to_string(), "-a", "127.0.0.1"])
        .arg("-o")
        .arg(dir.path().join("nutcracker.log"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    struct Kill(Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _proxy = Kill(proxy);
    let deadline = Instant::now() + TIMEOUT;
    while cli(proxy_port, &["SET", "probe", "1"]) != "OK\n" {
        assert!(Instant::now() < deadline, "twemproxy did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = run_timeout(Command::new("redis-benchmark").args([
        "-p",
        &proxy_port.to_string(),
        "-t",
        "set,get,hset",
        "-n",
        "3000",
        "-c",
        "10",
        "-r",
        "100000",
        "-q",
    ]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for t in ["SET", "GET", "HSET"] {
        assert!(text.contains(&format!("{t}: ")), "no {t} result in {text}");
    }
    // Strings and hashes through the proxy.
    for i in 0..60 {
        assert_eq!(
            cli(proxy_port, &["SET", &format!("s{i}"), &format!("v{i}")]),
            "OK\n"
        );
        assert_eq!(
            cli(
                proxy_port,
                &["HSET", &format!("h{i}"), "f", &format!("{i}")]
            ),
            "1\n"
        );
    }
    for i in 0..60 {
        assert_eq!(
            cli(proxy_port, &["GET", &format!("s{i}")]),
            format!("v{i}\n")
        );
        assert_eq!(
            cli(proxy_port, &["HGET", &format!("h{i}"), "f"]),
            format!("{i}\n")
        );
    }
    // Ketama spread the keys over every instance.
    let mut sum = 0;
    for s in &servers {
        let n: u64 = cli(s.port, &["DBSIZE"]).trim().parse().unwrap();
        assert!(n > 10, "instance {} holds only {n} keys", s.port);
        sum += n;
    }
    assert!(sum >= 241, "{sum}");
}
