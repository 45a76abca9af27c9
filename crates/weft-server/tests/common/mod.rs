//! Shared helpers: an in-process server on 127.0.0.1:0 and a raw RESP client.
#![allow(dead_code)]

pub mod records;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::thread::JoinHandle;
use std::time::Duration;

use weft_server::{Config, Server, ShutdownHandle};

pub const TIMEOUT: Duration = Duration::from_secs(20);

pub struct TestServer {
    pub addr: SocketAddr,
    handle: ShutdownHandle,
    thread: Option<JoinHandle<Result<(), weft_server::Error>>>,
    pub dir: Option<tempfile::TempDir>,
}

impl TestServer {
    pub fn start() -> TestServer {
        Self::with(|_| {})
    }

    pub fn with(f: impl FnOnce(&mut Config)) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Self::at(dir.path(), f);
        s.dir = Some(dir);
        s
    }

    pub fn at(path: &Path, f: impl FnOnce(&mut Config)) -> TestServer {
        let mut c = Config::default();
        c.port = 0;
        c.dir = path.to_path_buf();
        c.db_options = weft::Options::default().write_buffer_size(1 << 20);
        f(&mut c);
        let server = Server::bind(c).unwrap();
        let addr = server.local_addr();
        let handle = server.shutdown_handle();
        let thread = Some(std::thread::spawn(move || server.run()));
        TestServer {
            addr,
            handle,
            thread,
            dir: None,
        }
    }

    pub fn url(&self, resp3: bool) -> String {
        format!(
            "redis://{}/{}",
            self.addr,
            if resp3 { "?protocol=resp3" } else { "" }
        )
    }

    pub fn conn(&self) -> redis::Connection {
        self.conn_proto(false)
    }

    pub fn conn_proto(&self, resp3: bool) -> redis::Connection {
        let c = redis::Client::open(self.url(resp3)).unwrap();
        let con = c.get_connection_with_timeout(TIMEOUT).unwrap();
        con.set_read_timeout(Some(TIMEOUT)).unwrap();
        con.set_write_timeout(Some(TIMEOUT)).unwrap();
        con
    }

    pub fn raw(&self) -> Raw {
        Raw::connect(self.addr)
    }

    /// Waits up to `within` for the server to stop by itself (`SHUTDOWN`);
    /// returns what `run` returned, or `None` if it is still running.
    pub fn wait_exit(&mut self, within: Duration) -> Option<Result<(), weft_server::Error>> {
        let deadline = std::time::Instant::now() + within;
        while !self.thread.as_ref()?.is_finished() {
            if std::time::Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Some(self.thread.take()?.join().unwrap())
    }

    /// Graceful shutdown; returns what `run` returned.
    pub fn stop(mut self) -> Result<(), weft_server::Error> {
        self.handle.shutdown();
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.handle.shutdown();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A decoded reply.
#[derive(Debug, Clone, PartialEq)]
pub enum V {
    Simple(String),
    Err(String),
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    NilArray,
    Array(Vec<V>),
    Map(Vec<(V, V)>),
    Verbatim(String),
    /// A RESP3 push (`>`).
    Push(Vec<V>),
    /// RESP3 `,` (the text as sent).
    Double(String),
    /// RESP3 `~`.
    Set(Vec<V>),
}

impl V {
    pub fn bulk(s: &str) -> V {
        V::Bulk(s.as_bytes().to_vec())
    }
}

/// A raw RESP client: exact bytes in, decoded replies out.
pub struct Raw {
    pub w: TcpStream,
    pub r: BufReader<TcpStream>,
}

impl Raw {
    pub fn connect(addr: SocketAddr) -> Raw {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(TIMEOUT)).unwrap();
        s.set_write_timeout(Some(TIMEOUT)).unwrap();
        Raw {
            r: BufReader::new(s.try_clone().unwrap()),
            w: s,
        }
    }

    pub fn send_bytes(&mut self, b: &[u8]) {
        self.w.write_all(b).unwrap();
    }

    pub fn encode(args: &[&[u8]]) -> Vec<u8> {
        let mut v = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            v.extend_from_slice(a);
            v.extend_from_slice(b"\r\n");
        }
        v
    }

    pub fn send(&mut self, args: &[&str]) {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        let b = Self::encode(&a);
        self.send_bytes(&b);
    }

    pub fn cmd(&mut self, args: &[&str]) -> V {
        self.send(args);
        self.read()
    }

    fn line(&mut self) -> String {
        let mut l = Vec::new();
        self.r.read_until(b'\n', &mut l).unwrap();
        assert!(
            l.ends_with(b"\r\n"),
            "bad line {:?}",
            String::from_utf8_lossy(&l)
        );
        l.truncate(l.len() - 2);
        String::from_utf8(l).unwrap()
    }

    pub fn read(&mut self) -> V {
        let l = self.line();
        let (t, rest) = l.split_at(1);
        match t {
            "+" => V::Simple(rest.into()),
            "-" => V::Err(rest.into()),
            ":" => V::Int(rest.parse().unwrap()),
            "_" => V::Nil,
            "$" | "=" => {
                let n: i64 = rest.parse().unwrap();
                if n < 0 {
                    return V::Nil;
                }
                let mut b = vec![0; n as usize + 2];
                self.r.read_exact(&mut b).unwrap();
                b.truncate(n as usize);
                if t == "=" {
                    V::Verbatim(String::from_utf8(b).unwrap())
                } else {
                    V::Bulk(b)
                }
            }
            "*" => {
                let n: i64 = rest.parse().unwrap();
                if n < 0 {
                    return V::NilArray;
                }
                V::Array((0..n).map(|_| self.read()).collect())
            }
            "%" => {
                let n: i64 = rest.parse().unwrap();
                V::Map((0..n).map(|_| (self.read(), self.read())).collect())
            }
            ">" => {
                let n: i64 = rest.parse().unwrap();
                V::Push((0..n).map(|_| self.read()).collect())
            }
            "," => V::Double(rest.into()),
            "~" => {
                let n: i64 = rest.parse().unwrap();
                V::Set((0..n).map(|_| self.read()).collect())
            }
            _ => panic!("unknown reply type {l:?}"),
        }
    }

    /// True when the server closed the connection (EOF within the timeout).
    pub fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.r.read(&mut b), Ok(0) | Err(_))
    }
}
