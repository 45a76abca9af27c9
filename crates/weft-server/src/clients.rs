//! The client registry: what `CLIENT LIST`, `CLIENT INFO` and `CLIENT
//! KILL` see of connections that live on every loop, and the `MONITOR`
//! clients.
//!
//! Each connection registers a [`ClientInfo`] when it is admitted and
//! removes it when it closes (a sharded lock taken twice per connection,
//! never per command). The fields that change while the client runs are
//! atomics written only by the connection's own loop, on the client's own
//! allocation, so keeping them costs no shared cache line; other loops
//! only read them for `CLIENT LIST`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use crate::deliver::ClientRef;

const SHARDS: usize = 16;

type Shard = Mutex<HashMap<u64, Arc<ClientInfo>>>;

/// One connection as others see it.
#[derive(Debug)]
pub struct ClientInfo {
    /// Where it lives (and its id).
    pub at: ClientRef,
    /// The peer's address, `ip:port`.
    pub addr: String,
    /// The local address, `ip:port`.
    pub laddr: String,
    /// The socket's descriptor.
    pub fd: i32,
    /// When it connected.
    pub created: Instant,
    /// `CLIENT SETNAME`.
    pub name: Mutex<Vec<u8>>,
    /// Milliseconds since `created` of the last request read.
    pub last_active_ms: AtomicU64,
    /// Index in [`crate::cmd::COMMANDS`] + 1 of the last command (0: none).
    pub last_cmd: AtomicUsize,
    /// Channel subscriptions.
    pub subs: AtomicU32,
    /// Pattern subscriptions.
    pub psubs: AtomicU32,
    /// Protocol (2 or 3).
    pub resp: AtomicU8,
    /// In `MONITOR` mode.
    pub monitor: AtomicBool,
    /// Killed: no longer listed, its loop closes it.
    pub killed: AtomicBool,
    /// The ticket of the blocking command it is parked in
    /// ([`crate::blocking::Parked::ticket`], from 1; `flags=b`), 0 when
    /// not parked: what `CLIENT UNBLOCK` names.
    pub parking: AtomicU64,
    /// A replica's link (after `PSYNC`): `flags=S`, `CLIENT KILL TYPE
    /// replica`, and not a `normal` client, so Sentinel's `CLIENT KILL
    /// TYPE normal` leaves the replication stream alone.
    pub replica: AtomicBool,
    /// Reply bytes waiting for the client, as of its last wake-up.
    pub omem: AtomicU64,
    /// The selected database (`SELECT`).
    pub db: AtomicUsize,
}

impl ClientInfo {
    /// A freshly connected client.
    pub fn new(at: ClientRef, addr: String, laddr: String, fd: i32) -> ClientInfo {
        ClientInfo {
            at,
            addr,
            laddr,
            fd,
            created: Instant::now(),
            name: Mutex::new(Vec::new()),
            last_active_ms: AtomicU64::new(0),
            last_cmd: AtomicUsize::new(0),
            subs: AtomicU32::new(0),
            psubs: AtomicU32::new(0),
            resp: AtomicU8::new(2),
            monitor: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            parking: AtomicU64::new(0),
            replica: AtomicBool::new(false),
            omem: AtomicU64::new(0),
            db: AtomicUsize::new(0),
        }
    }

    /// Notes activity at `now`.
    pub fn touch(&self, now: Instant) {
        let ms = now.saturating_duration_since(self.created).as_millis() as u64;
        self.last_active_ms.store(ms, Ordering::Relaxed);
    }

    /// True while subscribed to a channel or pattern.
    pub fn is_pubsub(&self) -> bool {
        self.subs.load(Ordering::Relaxed) + self.psubs.load(Ordering::Relaxed) > 0
    }

    /// Redis's client type, as `CLIENT KILL TYPE` and `CLIENT LIST TYPE`
    /// match it: `replica` for a replica's link, else `pubsub` while
    /// subscribed, else `normal` (a `MONITOR` client is `normal`, as in
    /// Redis). The one `master` client, a replica's link to its primary,
    /// is no connection here ([`crate::repl`]).
    pub fn kind(&self) -> &'static str {
        if self.replica.load(Ordering::Relaxed) {
            "replica"
        } else if self.is_pubsub() {
            "pubsub"
        } else {
            "normal"
        }
    }

    /// `CLIENT LIST` / `CLIENT INFO` line (without the newline), in
    /// Redis 7.0's field order.
    pub fn line(&self) -> String {
        let age = self.created.elapsed();
        let idle_ms =
            (age.as_millis() as u64).saturating_sub(self.last_active_ms.load(Ordering::Relaxed));
        let mut flags = String::new();
        if self.replica.load(Ordering::Relaxed) {
            flags.push('S');
        }
        if self.monitor.load(Ordering::Relaxed) {
            flags.push('O');
        }
        if self.is_pubsub() {
            flags.push('P');
        }
        if self.parking.load(Ordering::Relaxed) != 0 {
            flags.push('b');
        }
        if flags.is_empty() {
            flags.push('N');
        }
        let cmd = match self.last_cmd.load(Ordering::Relaxed) {
            0 => "NULL",
            i => crate::cmd::COMMANDS.get(i - 1).map_or("NULL", |c| c.name),
        };
        let name = self.name.lock().clone();
        let omem = self.omem.load(Ordering::Relaxed);
        let mut s = String::with_capacity(256);
        let _ = write!(
            s,
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={flags} db={} sub={} psub={} \
             ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 \
             omem={omem} tot-mem={omem} events=r cmd={cmd} user=default redir=-1 resp={}",
            self.at.id,
            self.addr,
            self.laddr,
            self.fd,
            String::from_utf8_lossy(&name),
            age.as_secs(),
            idle_ms / 1000,
            self.db.load(Ordering::Relaxed),
            self.subs.load(Ordering::Relaxed),
            self.psubs.load(Ordering::Relaxed),
            self.resp.load(Ordering::Relaxed),
        );
        s
    }
}

/// Every open connection, by id; and the `MONITOR` clients.
pub struct Registry {
    shards: Box<[Shard]>,
    monitors: ArcSwap<Vec<ClientRef>>,
    monitor_write: Mutex<()>,
    /// True while any client monitors: read (not written) per command.
    monitoring: AtomicBool,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            monitors: ArcSwap::from_pointee(Vec::new()),
            monitor_write: Mutex::new(()),
            monitoring: AtomicBool::new(false),
        }
    }
}

impl Registry {
    fn shard(&self, id: u64) -> &Shard {
        &self.shards[(id as usize) % SHARDS]
    }

    /// Adds a connection.
    pub fn add(&self, info: Arc<ClientInfo>) {
        self.shard(info.at.id).lock().insert(info.at.id, info);
    }

    /// Removes a connection (and its monitor registration).
    pub fn remove(&self, id: u64) {
        let info = self.shard(id).lock().remove(&id);
        if info.is_some_and(|i| i.monitor.load(Ordering::Relaxed)) {
            self.unmonitor(id);
        }
    }

    /// The connection with this id, unless killed.
    pub fn get(&self, id: u64) -> Option<Arc<ClientInfo>> {
        let i = self.shard(id).lock().get(&id).cloned()?;
        (!i.killed.load(Ordering::Relaxed)).then_some(i)
    }

    /// Every connection not killed, by id.
    pub fn all(&self) -> Vec<Arc<ClientInfo>> {
        let mut v: Vec<Arc<ClientInfo>> = Vec::new();
        for s in self.shards.iter() {
            v.extend(
                s.lock()
                    .values()
                    .filter(|i| !i.killed.load(Ordering::Relaxed))
                    .cloned(),
            );
        }
        v.sort_by_key(|i| i.at.id);
        v
    }

    /// Starts feeding `who` every command.
    pub fn monitor(&self, who: ClientRef) {
        let _w = self.monitor_write.lock();
        let mut v = Vec::clone(&self.monitors.load());
        if !v.iter().any(|c| c.id == who.id) {
            v.push(who);
        }
        self.monitoring.store(true, Ordering::Release);
        self.monitors.store(Arc::new(v));
    }

    fn unmonitor(&self, id: u64) {
        let _w = self.monitor_write.lock();
        let v: Vec<ClientRef> = self
            .monitors
            .load()
            .iter()
            .copied()
            .filter(|c| c.id != id)
            .collect();
        self.monitoring.store(!v.is_empty(), Ordering::Release);
        self.monitors.store(Arc::new(v));
    }

    /// True while some client monitors (one relaxed load).
    pub fn monitoring(&self) -> bool {
        self.monitoring.load(Ordering::Relaxed)
    }

    /// The monitoring clients.
    pub fn monitors(&self) -> Arc<Vec<ClientRef>> {
        self.monitors.load_full()
    }
}
