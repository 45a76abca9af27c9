//! Shared helpers for the `weft serve` process tests: start the server on
//! a directory, read its `listening on` line, connect, kill on drop.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a start, a connection or a reply may take.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// A running `weft serve` child process, killed (SIGKILL) and reaped on drop.
pub struct Served {
    pub child: Child,
    pub port: u16,
    pub stdout_rest: mpsc::Receiver<String>,
}

impl Served {
    /// Starts `weft serve --port 0 --dir DIR EXTRA...` and waits for its
    /// `listening on 127.0.0.1:PORT` line.
    pub fn start(dir: &Path, extra: &[&str]) -> Served {
        Self::start_on(dir, 0, extra)
    }

    /// [`Served::start`] on `port` (0: one the OS picks).
    pub fn start_on(dir: &Path, port: u16, extra: &[&str]) -> Served {
        let mut child = Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(["serve", "--port", &port.to_string(), "--dir"])
            .arg(dir)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawning weft serve");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => {
                        if tx.send(l).is_err() {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        });
        let line = match rx.recv_timeout(TIMEOUT) {
            Ok(l) => l,
            Err(e) => {
                let _ = child.kill();
                panic!("no `listening on` line: {e}");
            }
        };
        let addr = line
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        assert!(addr.starts_with("127.0.0.1:"), "{addr}");
        let port = addr.rsplit(':').next().unwrap().parse().unwrap();
        Served {
            child,
            port,
            stdout_rest: rx,
        }
    }

    /// A new connection with read and write timeouts.
    pub fn conn(&self) -> redis::Connection {
        let c = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).unwrap();
        let con = c.get_connection_with_timeout(TIMEOUT).unwrap();
        con.set_read_timeout(Some(TIMEOUT)).unwrap();
        con.set_write_timeout(Some(TIMEOUT)).unwrap();
        con
    }

    /// Runs a read-only `cmd` on `c`, on a fresh connection if a read was
    /// interrupted: a socket with a timeout fails with EINTR, even without
    /// signal handlers, when this process is stopped and continued (as a
    /// shared machine's scheduler may do), and the reply then still sits in
    /// the old connection.
    pub fn read_query<T: redis::FromRedisValue>(
        &self,
        c: &mut redis::Connection,
        cmd: &redis::Cmd,
    ) -> T {
        for _ in 0..3 {
            match cmd.query(c) {
                Ok(v) => return v,
                Err(e)
                    if e.kind() == redis::ErrorKind::IoError
                        && e.to_string().contains("os error 4") =>
                {
                    *c = self.conn();
                }
                Err(e) => panic!("{e}"),
            }
        }
        panic!("reads interrupted three times");
    }

    /// Waits for the process to exit; kills it on timeout.
    pub fn wait(&mut self) -> Option<i32> {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st.code();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("weft serve did not exit");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
