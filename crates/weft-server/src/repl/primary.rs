//! The primary's side: one sender thread per replica.
//!
//! `PSYNC` runs on an event loop like any command; the connection then
//! hands a second handle of its socket to [`start`] and stays in its loop
//! to read the replica's `REPLCONF ACK`s (its replies are discarded). The
//! sender answers `+CONTINUE` when the replica's replication id is this
//! run's and the change feed still holds its offset, else `+FULLRESYNC`
//! with an engine checkpoint's files; then it tails the change feed
//! ([`weft::ChangeFeed::next_feed`], each WAL record read once), one `G`
//! frame per committed batch ([`super::wire`]). The socket stays
//! non-blocking (the loop shares it), so the sender waits for room with
//! `poll`. The thread ends when the replica's connection closes, on
//! shutdown, or when the feed lost what it needs (the replica then
//! reconnects and gets a full sync).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft::{Db, FeedLimit};

use super::{wire, Psync, ReplicaLink, Replication};
use crate::keyspace::now_ms;
use crate::server::Stop;
use crate::Shared;

/// Bytes of frames gathered before a write.
const SEND_CHUNK: usize = 256 << 10;
/// Heartbeat period while idle.
const HEARTBEAT: Duration = Duration::from_secs(1);
/// Longest sleep between two looks at the feed while idle.
const MAX_IDLE_SLEEP: Duration = Duration::from_millis(2);

/// Starts the sender of the replica that sent `req` on the connection
/// whose socket `stream` is (a second handle), after first sending
/// `pending`, the replies the connection had not sent yet. Returns the
/// link the connection keeps (for the replica's `ACK`s).
pub(crate) fn start(
    shared: &Shared,
    stream: TcpStream,
    pending: Vec<u8>,
    req: Psync,
    id: u64,
    ip: String,
) -> Arc<ReplicaLink> {
    let link = Arc::new(ReplicaLink {
        id,
        ip,
        port: req.port,
        state: AtomicU8::new(0),
        sent: AtomicU64::new(0),
        acked: AtomicU64::new(0),
        last_ack_ms: AtomicU64::new(now_ms()),
        closed: AtomicBool::new(false),
    });
    let sender = Sender {
        db: shared.store.db.clone(),
        repl: Arc::clone(&shared.repl),
        link: Arc::clone(&link),
        stop: Arc::clone(&shared.stop),
        sock: stream,
        dir: shared.config.dir.clone(),
    };
    let l = Arc::clone(&link);
    let spawned = std::thread::Builder::new()
        .name("weft-repl-send".into())
        .spawn(move || sender.run(pending, req));
    if let Err(e) = spawned {
        eprintln!("weft serve: starting a replica's sender: {e}");
        l.closed.store(true, Ordering::Release);
    }
    link
}

struct Sender {
    db: Db,
    repl: Arc<Replication>,
    link: Arc<ReplicaLink>,
    stop: Arc<Stop>,
    sock: TcpStream,
    dir: PathBuf,
}

impl Sender {
    fn run(mut self, pending: Vec<u8>, req: Psync) {
        self.repl.add_replica(Arc::clone(&self.link));
        if let Err(e) = self.serve(&pending, &req) {
            if !self.link.closed.load(Ordering::Acquire) && !self.stop.stopped() {
                eprintln!(
                    "weft serve: replica {}:{}: {e}",
                    self.link.ip, self.link.port
                );
            }
        }
        self.repl.remove_replica(self.link.id);
        // The connection, still in its event loop, sees the end and closes.
        let _ = self.sock.shutdown(Shutdown::Both);
    }

    fn serve(&mut self, pending: &[u8], req: &Psync) -> io::Result<()> {
        self.send(pending)?;
        let replid = self.repl.replid();
        let visible = self.db.visible_sequence();
        let can_continue = req.replid == replid
            && req.offset >= 1
            && (req.offset as u64) <= visible + 1
            && self.repl.hold_from(&self.db, req.offset as u64).is_ok();
        let mut next = if can_continue {
            self.repl.sync_partial_ok.fetch_add(1, Ordering::Relaxed);
            self.send(format!("+CONTINUE {replid}\r\n").as_bytes())?;
            req.offset as u64
        } else {
            if req.replid != "?" {
                self.repl.sync_partial_err.fetch_add(1, Ordering::Relaxed);
            }
            self.repl.sync_full.fetch_add(1, Ordering::Relaxed);
            self.full_sync(&replid)?
        };
        self.link.sent.store(next - 1, Ordering::Release);
        self.link.acked.fetch_max(0, Ordering::Relaxed);
        self.link.state.store(2, Ordering::Release);
        let mut feed = self
            .db
            .changes_from(next, FeedLimit::Visible)
            .map_err(eng)?;
        let mut buf = Vec::new();
        let mut last_sent = Instant::now();
        let mut idle_sleep = Duration::from_micros(100);
        loop {
            if self.link.closed.load(Ordering::Acquire) || self.stop.stopped() {
                return Ok(());
            }
            self.drain(&mut feed, &mut buf)?;
            next = next.max(feed.next_seq());
            if !buf.is_empty() {
                self.send(&buf)?;
                buf.clear();
                last_sent = Instant::now();
                idle_sleep = Duration::from_micros(100);
            } else if last_sent.elapsed() >= HEARTBEAT {
                let (through, rest) = self.heartbeat_through(&feed, &mut buf)?;
                feed = rest;
                next = next.max(through + 1);
                wire::u64_frame(&mut buf, wire::HEARTBEAT, through);
                self.send(&buf)?;
                buf.clear();
                last_sent = Instant::now();
            } else {
                std::thread::sleep(idle_sleep);
                idle_sleep = (idle_sleep * 2).min(MAX_IDLE_SLEEP);
            }
            self.link.sent.store(next - 1, Ordering::Release);
            feed = feed.next_feed(FeedLimit::Visible).map_err(eng)?;
        }
    }

    /// Frames every batch `feed` yields into `buf`, sending each
    /// [`SEND_CHUNK`].
    fn drain(&mut self, feed: &mut weft::ChangeFeed, buf: &mut Vec<u8>) -> io::Result<()> {
        for g in feed.by_ref() {
            let g = g.map_err(eng)?;
            wire::group(buf, g.first_seq(), g.ops());
            if buf.len() >= SEND_CHUNK {
                self.send(buf)?;
                buf.clear();
            }
        }
        Ok(())
    }

    /// What a heartbeat may say was sent, "everything through here",
    /// sequences no batch holds (gaps) included, after the batches sent
    /// to reach it are framed into `buf`; with the feed to go on from.
    ///
    /// A feed's limit is not that: a record is appended before its
    /// sequence is visible, and under `manual_wal_flush` (`--sync
    /// everysec`) it stays in the appender's buffer, which no feed reads,
    /// until a flush — an event loop's before its replies, or never soon
    /// for the expirer's deletions. Counted sent, such a record would be
    /// acknowledged by the replica (a `WAIT` answered for a write it does
    /// not have) and then arrive below what it applied. So the visible
    /// sequence is taken first, the WAL's buffer handed to the OS, and a
    /// feed made after that holds every record through it.
    fn heartbeat_through(
        &mut self,
        feed: &weft::ChangeFeed,
        buf: &mut Vec<u8>,
    ) -> io::Result<(u64, weft::ChangeFeed)> {
        let visible = self.db.visible_sequence();
        self.db.flush_wal().map_err(eng)?;
        let mut rest = feed.next_feed(FeedLimit::Visible).map_err(eng)?;
        self.drain(&mut rest, buf)?;
        Ok(((rest.next_seq() - 1).max(visible), rest))
    }

    /// Sends `+FULLRESYNC` and a checkpoint's files; returns the first
    /// sequence after the checkpoint.
    fn full_sync(&mut self, replid: &str) -> io::Result<u64> {
        // Held before the checkpoint is cut, so what follows it stays.
        let from = self.db.visible_sequence() + 1;
        self.repl.hold_from(&self.db, from).map_err(eng)?;
        let tmp = checkpoint_dir(&self.dir, self.link.id);
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp)?;
        }
        let info = self.db.checkpoint(&tmp).map_err(eng)?;
        let result = self.send_checkpoint(replid, &tmp, info.sequence);
        let _ = std::fs::remove_dir_all(&tmp);
        result?;
        Ok(info.sequence + 1)
    }

    fn send_checkpoint(&mut self, replid: &str, dir: &Path, seq: u64) -> io::Result<()> {
        self.send(format!("+FULLRESYNC {replid} {seq}\r\n").as_bytes())?;
        self.link.state.store(1, Ordering::Release);
        let mut files: Vec<_> = std::fs::read_dir(dir)?
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.path())
            .collect();
        files.sort();
        let mut chunk = vec![0u8; 1 << 20];
        for path in files {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let mut f = std::fs::File::open(&path)?;
            let size = f.metadata()?.len();
            let mut head = Vec::with_capacity(wire::HEADER + 4 + name.len());
            wire::header(&mut head, wire::FILE, 4 + name.len() as u64 + size);
            head.extend_from_slice(&(name.len() as u32).to_be_bytes());
            head.extend_from_slice(name.as_bytes());
            self.send(&head)?;
            let mut left = size;
            while left > 0 {
                let n = (left as usize).min(chunk.len());
                f.read_exact(&mut chunk[..n])?;
                self.send(&chunk[..n])?;
                left -= n as u64;
            }
        }
        let mut end = Vec::new();
        wire::u64_frame(&mut end, wire::END, seq);
        self.send(&end)
    }

    /// Writes all of `buf`, waiting for room (the socket is non-blocking).
    fn send(&mut self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            if self.link.closed.load(Ordering::Acquire) || self.stop.stopped() {
                return Err(io::Error::other("the replica's connection closed"));
            }
            match self.sock.write(buf) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    wait_writable(&self.sock, 100);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Where the checkpoint for replica `id`'s full sync is cut: beside the
/// data directory (same file system, so its files are hard links).
fn checkpoint_dir(data: &Path, id: u64) -> PathBuf {
    let name = data
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "weft-data".into());
    data.with_file_name(format!(".{name}.repl-checkpoint-{id}"))
}

/// Waits up to `ms` for room to write on `sock`.
fn wait_writable(sock: &TcpStream, ms: i32) {
    let mut p = libc::pollfd {
        fd: sock.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: `p` is one valid, initialised pollfd that outlives the call,
    // and nfds is 1; the fd is open (`sock` owns it).
    unsafe {
        libc::poll(&mut p, 1, ms);
    }
}

fn eng(e: weft::Error) -> io::Error {
    io::Error::other(e.to_string())
}
