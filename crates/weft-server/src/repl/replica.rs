//! The replica's side: the link thread (connect, handshake, full sync,
//! apply the stream, acknowledge), the staging of a full sync, and the
//! application of batches through the key space (key counts kept).
//!
//! # Where a replica stands
//!
//! The replication id followed and the last primary sequence applied are
//! one system record (`s` `replication`), written in the same engine
//! batch as each applied group: after a crash the replica asks `PSYNC`
//! for exactly what follows what it holds. Keyspaces other than the
//! default one are named by the primary's ids in the stream; their names
//! are recorded beside (`s` `replication-ks` + id).
//!
//! # A full sync, crash-safe
//!
//! The checkpoint's files are written to `<dir>.repl-sync.tmp`, each
//! fsynced, with a `REPLICATION` file naming the id and sequence; the
//! directory is fsynced and renamed to `<dir>.repl-sync` (the parent
//! fsynced). Only then is the live data replaced: every record deleted
//! and the checkpoint's copied in (commands meanwhile get `-LOADING`),
//! the position written last with a synced write, the staged directory
//! removed. A replica killed before the rename restarts with its old data
//! and position (the `.tmp` is removed); killed after it, it loads the
//! staged copy again at start ([`recover`]) — the load begins by deleting
//! everything, so it may run any number of times.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft::{ChangeOp, Db, KeyspaceOp, WriteBatch, WriteOptions};

use super::wire;
use crate::encoding::{self, Kind};
use crate::keyspace::{database_of, now_ms, Store};
use crate::server::Stop;
use crate::Shared;

/// The system record of the replica's position.
const POSITION: &[u8] = b"replication";
/// The prefix of the records naming the primary's keyspaces.
const KS_NAMES: &[u8] = b"replication-ks";
/// The file of a staged checkpoint naming its id and sequence.
const STAGED_INFO: &str = "REPLICATION";
/// How long a primary may stay silent before the link is dropped
/// (Redis's `repl-timeout`).
const REPL_TIMEOUT: Duration = Duration::from_secs(60);
/// Bytes of records copied per batch while loading a full sync.
const LOAD_BATCH: usize = 1 << 20;

fn position_key() -> Vec<u8> {
    encoding::system_key(POSITION)
}

fn ks_name_key(id: u32) -> Vec<u8> {
    let mut k = encoding::system_key(KS_NAMES);
    k.extend_from_slice(&id.to_be_bytes());
    k
}

/// The position recorded with the data, if any.
pub(crate) fn read_position(db: &Db) -> Result<Option<(String, u64)>, weft::Error> {
    Ok(db.get(position_key())?.and_then(|v| decode_position(&v)))
}

fn decode_position(v: &[u8]) -> Option<(String, u64)> {
    let (id, seq) = v.split_at_checked(v.len().checked_sub(8)?)?;
    let seq = u64::from_be_bytes(seq.try_into().ok()?);
    Some((String::from_utf8(id.to_vec()).ok()?, seq))
}

fn encode_position(id: &str, seq: u64) -> Vec<u8> {
    let mut v = id.as_bytes().to_vec();
    v.extend_from_slice(&seq.to_be_bytes());
    v
}

/// Forgets the recorded position (a server that is not a replica: the
/// writes it takes make its data no prefix of any primary's).
pub(crate) fn forget_position(db: &Db) -> Result<(), weft::Error> {
    if db.get(position_key())?.is_some() {
        db.delete_opt(position_key(), &WriteOptions::new().sync(true))?;
    }
    Ok(())
}

fn staged_dir(data: &Path, tmp: bool) -> PathBuf {
    let name = data
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "weft-data".into());
    let suffix = if tmp { ".repl-sync.tmp" } else { ".repl-sync" };
    data.with_file_name(format!("{name}{suffix}"))
}

/// At start, before serving: a full sync staged whole but not known
/// loaded is loaded again; a partial transfer is removed.
pub(crate) fn recover(store: &Store, data: &Path) -> Result<(), crate::Error> {
    let tmp = staged_dir(data, true);
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp)
            .map_err(|e| crate::Error::io(format!("removing {}", tmp.display()), e))?;
    }
    let staged = staged_dir(data, false);
    if staged.join(STAGED_INFO).exists() {
        load_staged(store, &staged).map_err(|e| {
            crate::Error::Config(format!(
                "loading the staged full sync {}: {e}",
                staged.display()
            ))
        })?;
    }
    Ok(())
}

/// The link thread: follows the primary while this server is a replica,
/// and trims the backlog once a second while it is not.
pub(crate) fn run(shared: &Arc<Shared>, stop: &Arc<Stop>) {
    let repl = &shared.repl;
    let mut last_trim = Instant::now();
    while !stop.stopped() {
        let generation = repl.generation();
        match repl.master() {
            Some(master) => {
                repl.link.state.store(1, Ordering::Relaxed);
                let r = Link::connect(shared, stop, &master, generation).and_then(|l| l.follow());
                repl.link.state.store(0, Ordering::Relaxed);
                repl.link.down_since_ms.store(now_ms(), Ordering::Relaxed);
                repl.set_loading(false);
                if let Err(e) = r {
                    if repl.generation() == generation && !stop.stopped() {
                        eprintln!(
                            "weft serve: replication from {}:{}: {e}",
                            master.0, master.1
                        );
                        stop.sleep(Duration::from_secs(1));
                    }
                }
            }
            None => {
                if last_trim.elapsed() >= Duration::from_secs(1) {
                    repl.trim_backlog(&shared.store.db);
                    last_trim = Instant::now();
                }
                stop.sleep(Duration::from_millis(100));
            }
        }
    }
}

struct Link<'a> {
    shared: &'a Shared,
    stop: &'a Stop,
    generation: u64,
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    last_io: Instant,
}

fn other(msg: impl Into<String>) -> io::Error {
    io::Error::other(msg.into())
}

fn eng(e: impl std::fmt::Display) -> io::Error {
    other(e.to_string())
}

impl<'a> Link<'a> {
    fn connect(
        shared: &'a Shared,
        stop: &'a Stop,
        master: &(String, u16),
        generation: u64,
    ) -> io::Result<Link<'a>> {
        let addr = (master.0.as_str(), master.1)
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| other("the primary's address resolves to nothing"))?;
        let sock = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        sock.set_nodelay(true)?;
        sock.set_read_timeout(Some(Duration::from_millis(200)))?;
        {
            let mut role = shared.repl.role.lock();
            if shared.repl.generation() != generation {
                return Err(other("REPLICAOF changed the primary"));
            }
            role.link_socket = Some(sock.try_clone()?);
        }
        let writer = sock.try_clone()?;
        Ok(Link {
            shared,
            stop,
            generation,
            reader: BufReader::with_capacity(256 << 10, sock),
            writer,
            last_io: Instant::now(),
        })
    }

    fn current(&self) -> io::Result<()> {
        if self.stop.stopped() || self.shared.repl.generation() != self.generation {
            return Err(other("replication stopped"));
        }
        if self.last_io.elapsed() > REPL_TIMEOUT {
            return Err(other("timeout: the primary sent nothing for 60 s"));
        }
        Ok(())
    }

    /// Reads exactly `buf.len()` bytes, through the read timeouts (which
    /// only let it look at `current`).
    fn read_full(&mut self, buf: &mut [u8]) -> io::Result<()> {
        let mut got = 0;
        while got < buf.len() {
            match self.reader.read(&mut buf[got..]) {
                Ok(0) => return Err(other("the primary closed the connection")),
                Ok(n) => {
                    got += n;
                    self.last_io = Instant::now();
                    self.shared
                        .repl
                        .link
                        .last_io_ms
                        .store(now_ms(), Ordering::Relaxed);
                }
                Err(e) if is_timeout(&e) => self.current()?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn read_line(&mut self) -> io::Result<String> {
        let mut line = Vec::new();
        loop {
            match self.reader.read_until(b'\n', &mut line) {
                Ok(0) => return Err(other("the primary closed the connection")),
                Ok(_) if line.ends_with(b"\n") => break,
                Ok(_) => {}
                Err(e) if is_timeout(&e) => self.current()?,
                Err(e) => return Err(e),
            }
            if line.len() > 4096 {
                return Err(other("a reply line past 4 KiB"));
            }
        }
        self.last_io = Instant::now();
        Ok(String::from_utf8_lossy(&line).trim_end().to_string())
    }

    fn command(&mut self, args: &[&str]) -> io::Result<String> {
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        self.writer.write_all(req.as_bytes())?;
        self.read_line()
    }

    fn follow(mut self) -> io::Result<()> {
        let repl = &self.shared.repl;
        // A primary with `requirepass` answers `-NOAUTH` until `AUTH`, as
        // Redis's replicas expect.
        let pong = self.command(&["PING"])?;
        if !(pong.starts_with('+') || pong.starts_with("-NOAUTH")) {
            return Err(other(format!("PING answered {pong}")));
        }
        let password = repl.masterauth.lock().clone();
        if let Some(pw) = password {
            let r = self.command(&["AUTH", &pw])?;
            if !r.starts_with('+') {
                return Err(other(format!("AUTH (masterauth) answered {r}")));
            }
        }
        let port = self.shared.port.to_string();
        let r = self.command(&["REPLCONF", "listening-port", &port])?;
        if !r.starts_with('+') {
            return Err(other(format!("REPLCONF answered {r}")));
        }
        self.command(&["REPLCONF", "capa", "psync2"])?;
        let (replid, offset) = match repl.position() {
            Some((id, applied)) => (id, (applied + 1).to_string()),
            None => ("?".to_string(), "-1".to_string()),
        };
        let answer = self.command(&["PSYNC", &replid, &offset])?;
        let mut words = answer.split_whitespace();
        match words.next() {
            Some("+FULLRESYNC") => {
                let id = words.next().unwrap_or("").to_string();
                repl.link.state.store(2, Ordering::Relaxed);
                self.full_sync(&id)?;
            }
            Some("+CONTINUE") => {
                if let Some(id) = words.next() {
                    if id != replid {
                        return Err(other(format!("CONTINUE with another id {id}")));
                    }
                }
            }
            _ => return Err(other(format!("PSYNC answered {answer}"))),
        }
        let Some((id, applied)) = repl.position() else {
            return Err(other("no position after the sync"));
        };
        repl.link.state.store(3, Ordering::Relaxed);
        repl.link.down_since_ms.store(0, Ordering::Relaxed);
        repl.link
            .master_offset
            .fetch_max(applied, Ordering::Relaxed);
        let mut applier = Applier::new(&self.shared.store, id)?;
        applier.applied = applied;
        self.ack(applied)?;
        let mut acked = applied;
        let mut header = [0u8; wire::HEADER];
        let mut payload = Vec::new();
        loop {
            self.read_full(&mut header)?;
            let len = u64::from_be_bytes(header[1..].try_into().map_err(eng)?);
            if len > wire::MAX_GROUP {
                return Err(other(format!("a frame of {len} bytes")));
            }
            payload.resize(len as usize, 0);
            self.read_full(&mut payload)?;
            match header[0] {
                wire::GROUP => {
                    let (first, ops) = wire::decode_group(&payload)
                        .ok_or_else(|| other("a batch frame that does not parse"))?;
                    if first <= applier.applied {
                        return Err(other(format!(
                            "batch at {first}, after {} was applied: not a prefix",
                            applier.applied
                        )));
                    }
                    let ready = applier.apply(first, ops).map_err(eng)?;
                    for (db, key) in ready {
                        crate::cmd::key_ready_now(self.shared, db, &key);
                    }
                    repl.link.applied.store(applier.applied, Ordering::Relaxed);
                    repl.link
                        .master_offset
                        .fetch_max(applier.applied, Ordering::Relaxed);
                }
                wire::HEARTBEAT => {
                    let through = u64::from_be_bytes(payload[..].try_into().map_err(eng)?);
                    repl.link
                        .master_offset
                        .fetch_max(through, Ordering::Relaxed);
                    // Everything through `through` was sent: sequences
                    // not in any batch (gaps) count as applied.
                    if through > applier.applied {
                        applier.applied = through;
                        repl.link.applied.store(through, Ordering::Relaxed);
                    }
                }
                t => return Err(other(format!("an unknown frame {t:#04x}"))),
            }
            // Acknowledge once what has arrived is applied, and at least
            // on every heartbeat (the primary's `lag` is the time since).
            let heartbeat = header[0] == wire::HEARTBEAT;
            if self.reader.buffer().is_empty() && (applier.applied != acked || heartbeat) {
                self.shared.store.db.flush_wal().map_err(eng)?;
                self.ack(applier.applied)?;
                acked = applier.applied;
            }
        }
    }

    fn ack(&mut self, applied: u64) -> io::Result<()> {
        let off = applied.to_string();
        let req = format!(
            "*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n${}\r\n{off}\r\n",
            off.len()
        );
        self.writer.write_all(req.as_bytes())
    }

    /// Receives the checkpoint into the staging directory, then loads it.
    fn full_sync(&mut self, replid: &str) -> io::Result<()> {
        let data = self.shared.config.dir.clone();
        let tmp = staged_dir(&data, true);
        let staged = staged_dir(&data, false);
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp)?;
        }
        std::fs::create_dir_all(&tmp)?;
        let mut header = [0u8; wire::HEADER];
        let mut chunk = vec![0u8; 1 << 20];
        let seq = loop {
            self.read_full(&mut header)?;
            let len = u64::from_be_bytes(header[1..].try_into().map_err(eng)?);
            match header[0] {
                wire::FILE => {
                    let mut n = [0u8; 4];
                    self.read_full(&mut n)?;
                    let name_len = u32::from_be_bytes(n) as u64;
                    if name_len > 255 || name_len + 4 > len {
                        return Err(other("a checkpoint file frame that does not parse"));
                    }
                    let mut name = vec![0u8; name_len as usize];
                    self.read_full(&mut name)?;
                    let name = String::from_utf8(name).map_err(eng)?;
                    if name.contains('/') || name.starts_with('.') || name == STAGED_INFO {
                        return Err(other(format!("a checkpoint file named {name:?}")));
                    }
                    let mut f = std::fs::File::create(tmp.join(&name))?;
                    let mut left = len - 4 - name_len;
                    while left > 0 {
                        let n = (left as usize).min(chunk.len());
                        self.read_full(&mut chunk[..n])?;
                        f.write_all(&chunk[..n])?;
                        left -= n as u64;
                    }
                    f.sync_all()?;
                }
                wire::END if len == 8 => {
                    let mut s = [0u8; 8];
                    self.read_full(&mut s)?;
                    break u64::from_be_bytes(s);
                }
                t => return Err(other(format!("an unknown frame {t:#04x} in a full sync"))),
            }
        };
        let mut info = std::fs::File::create(tmp.join(STAGED_INFO))?;
        info.write_all(format!("{replid} {seq}\n").as_bytes())?;
        info.sync_all()?;
        sync_dir(&tmp)?;
        if staged.exists() {
            std::fs::remove_dir_all(&staged)?;
        }
        std::fs::rename(&tmp, &staged)?;
        if let Some(parent) = staged.parent() {
            sync_dir(parent)?;
        }
        self.shared.repl.set_loading(true);
        let loaded = load_staged(&self.shared.store, &staged);
        // Every key may have changed: a `WATCH` made before the load
        // fails its `EXEC` (refused while loading, compared after).
        let locks = &self.shared.store.locks;
        for i in 0..locks.len() {
            let _guard = locks.acquire(i);
            locks.bump(i);
        }
        self.shared.repl.set_loading(false);
        let (id, seq) = loaded.map_err(eng)?;
        self.shared.repl.set_position(Some((id, seq)));
        Ok(())
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// The replica's engine keyspace for the primary's keyspace `name`, and
/// the database it is, if one: a database's keyspace is the server's own
/// handle (created if needed), so that its reads find what arrives.
fn local_keyspace(store: &Store, name: &str) -> Result<(weft::Keyspace, Option<usize>), String> {
    let e = |e: weft::Error| e.to_string();
    if let Some(n) = store.database_named(name) {
        return Ok((store.database_keyspace(n).map_err(e)?.clone(), Some(n)));
    }
    if let Some(n) = database_of(name) {
        return Err(format!(
            "the primary has database {n}; start this replica with --databases {} or more",
            n + 1
        ));
    }
    Ok((store.db.keyspace(name).map_err(e)?, None))
}

/// Replaces the live data with the staged checkpoint's (see the module
/// doc); returns the id and sequence it stands at.
fn load_staged(store: &Store, staged: &Path) -> Result<(String, u64), String> {
    let info = std::fs::read_to_string(staged.join(STAGED_INFO)).map_err(|e| e.to_string())?;
    let mut words = info.split_whitespace();
    let (Some(id), Some(seq)) = (words.next(), words.next().and_then(|s| s.parse().ok())) else {
        return Err(format!("a staged sync's {STAGED_INFO} file does not parse"));
    };
    let src = Db::open_read_only(staged, weft::Options::default()).map_err(|e| e.to_string())?;
    let e = |e: weft::Error| e.to_string();
    let db = &store.db;
    // Everything goes: the databases' keyspaces (whose handles the server
    // holds) are emptied, every other keyspace but the default one is
    // dropped, and every record of the default one deleted (one range
    // delete per first byte, as the reserved span of the other keyspaces
    // is cut out of default ranges).
    //
    // The databases' range deletes go in a batch of their own: in one
    // batch with the default keyspace's range delete over `[0xff, ..)`
    // the engine loses them (seen here; an engine bug to chase).
    let mut clear = WriteBatch::new();
    for name in db.keyspaces() {
        if name == weft::DEFAULT_KEYSPACE {
            continue;
        }
        match store.database_named(&name) {
            Some(n) => {
                let h = store.database_keyspace(n).map_err(e)?;
                clear.delete_range_in(h, [0u8], [0xffu8; 64]);
            }
            None => db.drop_keyspace(&name).map_err(e)?,
        }
    }
    if !clear.is_empty() {
        db.write(clear, &WriteOptions::default()).map_err(e)?;
    }
    let mut clear = WriteBatch::new();
    clear.delete_range([0u8], [0xffu8]);
    clear.delete_range(&[0xffu8][..], &[0xffu8; 64][..]);
    db.write(clear, &WriteOptions::default()).map_err(e)?;
    let position = position_key();
    let mut batch = WriteBatch::new();
    let mut bytes = 0usize;
    let flush = |batch: &mut WriteBatch, bytes: &mut usize| -> Result<(), String> {
        *bytes = 0;
        if !batch.is_empty() {
            db.write(std::mem::take(batch), &WriteOptions::default())
                .map_err(e)?;
        }
        Ok(())
    };
    for kv in src.range::<Vec<u8>, _>(..).map_err(e)? {
        let (k, v) = kv.map_err(e)?;
        if k == position || k.starts_with(&encoding::system_key(KS_NAMES)) {
            continue;
        }
        bytes += k.len() + v.len();
        batch.put(&k, &v);
        if bytes >= LOAD_BATCH {
            flush(&mut batch, &mut bytes)?;
        }
    }
    for name in src
        .keyspaces()
        .into_iter()
        .filter(|n| n != weft::DEFAULT_KEYSPACE)
    {
        let from = src.keyspace(&name).map_err(e)?;
        let (to, _) = local_keyspace(store, &name)?;
        batch.put(ks_name_key(from.id()), name.as_bytes());
        for kv in from.range::<Vec<u8>, _>(..).map_err(e)? {
            let (k, v) = kv.map_err(e)?;
            bytes += k.len() + v.len();
            batch.put_in(&to, &k, &v);
            if bytes >= LOAD_BATCH {
                flush(&mut batch, &mut bytes)?;
            }
        }
    }
    flush(&mut batch, &mut bytes)?;
    drop(src);
    let mut last = WriteBatch::new();
    last.put(&position, encode_position(id, seq));
    db.write(last, &WriteOptions::new().sync(true)).map_err(e)?;
    store.recount().map_err(|e| format!("{e:?}"))?;
    std::fs::remove_dir_all(staged).map_err(|e| e.to_string())?;
    if let Some(parent) = staged.parent() {
        let _ = sync_dir(parent);
    }
    Ok((id.to_string(), seq))
}

/// One of the primary's keyspaces, on the replica.
struct Target {
    handle: weft::Keyspace,
    /// The database it is, if one (its key counts are kept).
    db: Option<usize>,
}

/// Applies the primary's batches: each as one engine batch, the key counts
/// of every database following the metadata records it creates and
/// deletes.
///
/// Each batch is written holding the stripe locks of the keys it touches
/// (every stripe for a database-wide range delete or a dropped database),
/// taken in ascending order as a multi-key command takes them, and the
/// stripes' versions are bumped before they are released: a `WATCH` on
/// the replica notices the stream's writes as it notices a command's
/// (`crate::locks`). The lists and sorted sets whose metadata it wrote
/// are returned, for the wake-ups of clients blocked on them (with
/// `replica-read-only no`; the blocking pops are writes).
struct Applier<'a> {
    store: &'a Store,
    id: String,
    applied: u64,
    /// The primary's keyspace ids (0: the default keyspace, database 0),
    /// mapped to this replica's keyspaces.
    keyspaces: HashMap<u32, Target>,
}

impl<'a> Applier<'a> {
    fn new(store: &'a Store, id: String) -> io::Result<Applier<'a>> {
        let mut keyspaces = HashMap::new();
        let default = store.database_keyspace(0).map_err(eng)?.clone();
        keyspaces.insert(
            0,
            Target {
                handle: default,
                db: Some(0),
            },
        );
        let prefix = encoding::system_key(KS_NAMES);
        for kv in store.db.prefix(&prefix).map_err(eng)? {
            let (k, v) = kv.map_err(eng)?;
            let Some(id) = k[prefix.len()..].first_chunk::<4>() else {
                continue;
            };
            let name = String::from_utf8_lossy(&v).into_owned();
            let (handle, db) = local_keyspace(store, &name).map_err(other)?;
            keyspaces.insert(u32::from_be_bytes(*id), Target { handle, db });
        }
        Ok(Applier {
            store,
            id,
            applied: 0,
            keyspaces,
        })
    }

    /// The state of a metadata record of database `db`: `None` for no
    /// record, else `Some(has a deadline)`.
    fn meta_state(
        &self,
        handle: &weft::Keyspace,
        db: usize,
        key: &[u8],
        overlay: &HashMap<(usize, Vec<u8>), Option<bool>>,
    ) -> Result<Option<bool>, weft::Error> {
        if let Some(s) = overlay.get(&(db, key.to_vec())) {
            return Ok(*s);
        }
        Ok(handle
            .get(key)?
            .map(|v| encoding::decode(&v).is_some_and(|(m, _)| m.expire_at.is_some())))
    }

    fn apply(&mut self, first: u64, ops: Vec<ChangeOp>) -> Result<Vec<(usize, Vec<u8>)>, String> {
        let e = |e: weft::Error| e.to_string();
        let last = first + ops.len() as u64 - 1;
        let mut batch = WriteBatch::new();
        let locks = &self.store.locks;
        let mut stripes: Vec<usize> = Vec::new();
        let mut every_stripe = false;
        let mut ready: Vec<(usize, Vec<u8>)> = Vec::new();
        // Per database: (keys, keys with a deadline) created minus deleted.
        let mut tallies: Vec<(usize, i64, i64)> = Vec::new();
        let mut tally =
            |db: usize, keys: i64, expires: i64| match tallies.iter_mut().find(|t| t.0 == db) {
                Some(t) => {
                    t.1 += keys;
                    t.2 += expires;
                }
                None => tallies.push((db, keys, expires)),
            };
        let mut overlay: HashMap<(usize, Vec<u8>), Option<bool>> = HashMap::new();
        let mut recount = false;
        let mut drops = Vec::new();
        let mut forget = Vec::new();
        let position = position_key();
        let ks_names = encoding::system_key(KS_NAMES);
        let system = |keyspace: u32, key: &[u8]| {
            keyspace == 0 && (key == position || key.starts_with(&ks_names))
        };
        for op in &ops {
            match op.keyspace_op() {
                KeyspaceOp::Put {
                    keyspace,
                    key,
                    value,
                } => {
                    if system(keyspace, key) {
                        continue;
                    }
                    let t = self.keyspace(keyspace)?;
                    if let (Some(db), Some(&encoding::META)) = (t.db, key.first()) {
                        let old = self.meta_state(&t.handle, db, key, &overlay).map_err(e)?;
                        let meta = encoding::decode(value).map(|(m, _)| m);
                        let new = meta.as_ref().is_some_and(|m| m.expire_at.is_some());
                        tally(
                            db,
                            i64::from(old.is_none()),
                            i64::from(new) - i64::from(old == Some(true)),
                        );
                        overlay.insert((db, key.to_vec()), Some(new));
                        stripes.push(locks.index(db, &key[1..]));
                        if meta.is_some_and(|m| matches!(m.kind, Kind::List | Kind::ZSet)) {
                            ready.push((db, key[1..].to_vec()));
                        }
                    } else if let (Some(db), Some(owner)) = (t.db, encoding::element_owner(key)) {
                        stripes.push(locks.index(db, owner));
                    }
                    if keyspace == 0 {
                        batch.put(key, value);
                    } else {
                        batch.put_in(&t.handle, key, value);
                    }
                }
                KeyspaceOp::Delete { keyspace, key } => {
                    if system(keyspace, key) {
                        continue;
                    }
                    let t = self.keyspace(keyspace)?;
                    if let (Some(db), Some(&encoding::META)) = (t.db, key.first()) {
                        if let Some(old) =
                            self.meta_state(&t.handle, db, key, &overlay).map_err(e)?
                        {
                            tally(db, -1, -i64::from(old));
                        }
                        overlay.insert((db, key.to_vec()), None);
                        stripes.push(locks.index(db, &key[1..]));
                    } else if let (Some(db), Some(owner)) = (t.db, encoding::element_owner(key)) {
                        stripes.push(locks.index(db, owner));
                    }
                    if keyspace == 0 {
                        batch.delete(key);
                    } else {
                        batch.delete_in(&t.handle, key);
                    }
                }
                KeyspaceOp::DeleteRange {
                    keyspace,
                    start,
                    end,
                } => {
                    if drops.iter().any(|(id, _)| *id == keyspace) {
                        continue; // the drop below removes it all
                    }
                    let t = self.keyspace(keyspace)?;
                    let meta = [encoding::META];
                    let past_meta = [encoding::META + 1];
                    let end = end.unwrap_or(&[0xff; 64]);
                    if t.db.is_some() && start < &past_meta[..] && end > &meta[..] {
                        recount = true;
                    }
                    // One collection's elements (a deleted key's
                    // reclamation), or more: every stripe.
                    if let Some(db) = t.db {
                        match encoding::element_owner(start) {
                            Some(owner) if end.starts_with(&start[..5 + owner.len()]) => {
                                stripes.push(locks.index(db, owner));
                            }
                            _ => every_stripe = true,
                        }
                    }
                    if keyspace == 0 {
                        batch.delete_range(start, end);
                    } else {
                        batch.delete_range_in(&t.handle, start, end);
                    }
                }
                KeyspaceOp::Created { name, id, .. } => {
                    let (handle, db) = local_keyspace(self.store, name)?;
                    self.keyspaces.insert(id, Target { handle, db });
                    batch.put(ks_name_key(id), name.as_bytes());
                }
                KeyspaceOp::Dropped { name, .. } => {
                    let found = (self.keyspaces.iter())
                        .find(|(id, k)| **id != 0 && k.handle.name() == name)
                        .map(|(id, k)| (*id, k.db));
                    if let Some((id, db)) = found {
                        every_stripe |= db.is_some();
                        batch.delete(ks_name_key(id));
                        match db {
                            // A database's keyspace stays (the server holds
                            // its handle): the range delete that follows
                            // in this batch empties it.
                            Some(_) => forget.push(id),
                            None => drops.push((id, name.to_string())),
                        }
                    }
                }
                _ => {}
            }
        }
        batch.put(&position, encode_position(&self.id, last));
        if recount {
            tallies.clear();
        }
        if every_stripe {
            stripes = (0..locks.len()).collect();
        } else {
            stripes.sort_unstable();
            stripes.dedup();
        }
        let guards: Vec<_> = stripes.iter().map(|&i| locks.acquire(i)).collect();
        let written = self.store.write_tallied(batch, &tallies);
        if written.is_ok() {
            for &i in &stripes {
                locks.bump(i);
            }
        }
        drop(guards);
        written.map_err(|e| format!("{e:?}"))?;
        for id in forget {
            self.keyspaces.remove(&id);
        }
        for (id, name) in drops {
            self.keyspaces.remove(&id);
            self.store.db.drop_keyspace(&name).map_err(e)?;
        }
        if recount {
            self.store.recount().map_err(|e| format!("{e:?}"))?;
        }
        self.applied = last;
        Ok(ready)
    }

    fn keyspace(&self, id: u32) -> Result<&Target, String> {
        self.keyspaces
            .get(&id)
            .ok_or_else(|| format!("a batch names keyspace {id}, which no record names"))
    }
}
