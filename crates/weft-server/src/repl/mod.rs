//! Replication in Redis's protocol (`docs/DESIGN.md` §1.11): `REPLICAOF`,
//! `ROLE`, `INFO replication`, `REPLCONF`, `PSYNC`, `WAIT`.
//!
//! * The stream is the engine's change feed (committed batches in
//!   sequence order, [`weft::Db::changes_from`]), so a replica always
//!   holds a prefix of its primary's history. The replication offset is
//!   the engine sequence: a primary's `master_repl_offset` is its visible
//!   sequence, a replica's offset the last primary sequence it applied.
//! * A full sync ships an engine checkpoint's files ([`primary`]); the
//!   replica stages them beside its data directory, fsyncs them, and only
//!   then replaces its data with them ([`replica`]), so a replica killed
//!   mid-transfer restarts with its old data, and one killed mid-load
//!   loads the staged copy again at start.
//! * The backlog for partial resyncs is the change feed's retention: one
//!   engine hold, `replication`, kept at or below every connected
//!   replica's position and, for replicas that left, trimmed once the
//!   WALs it keeps pass `repl-backlog-size` (disk, not memory).
//!
//! The primary side runs one sender thread per replica ([`primary`]); the
//! replica side one link thread ([`replica`]), started with the server
//! ([`start`]).

pub(crate) mod primary;
pub(crate) mod replica;
pub mod wire;

use std::fmt::Write as _;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::keyspace::now_ms;
use crate::resp::Out;
use crate::Shared;

/// The engine hold that keeps the WALs replicas may still ask for.
pub const HOLD: &str = "replication";

/// How often a `WAIT`ing client checks its replicas' acknowledgements.
const WAIT_POLL: Duration = Duration::from_millis(1);

/// The bits of [`Replication::gate`].
const GATE_READ_ONLY: u8 = 1;
const GATE_LOADING: u8 = 2;

/// A primary's view of one connected replica.
#[derive(Debug)]
pub struct ReplicaLink {
    /// The client id of its connection.
    pub id: u64,
    /// Its address as seen from here.
    pub ip: String,
    /// The port it listens on (`REPLCONF listening-port`).
    pub port: u16,
    /// `wait_bgsave`, `send_bulk`, `online` (Redis's names): 0, 1, 2.
    state: AtomicU8,
    /// The last sequence sent.
    pub sent: AtomicU64,
    /// The last sequence it acknowledged applying (`REPLCONF ACK`).
    pub acked: AtomicU64,
    /// When it last acknowledged, ms since the epoch.
    pub last_ack_ms: AtomicU64,
    /// Set when its connection closed: the sender stops.
    pub closed: AtomicBool,
}

impl ReplicaLink {
    /// Records a `REPLCONF ACK`.
    pub fn ack(&self, offset: u64) {
        self.acked.fetch_max(offset, Ordering::AcqRel);
        self.last_ack_ms.store(now_ms(), Ordering::Relaxed);
    }

    fn state_name(&self) -> &'static str {
        match self.state.load(Ordering::Relaxed) {
            0 => "wait_bgsave",
            1 => "send_bulk",
            _ => "online",
        }
    }
}

/// What `PSYNC` asked for, handed from the command to the connection,
/// which gives its socket to a sender thread ([`primary::start`]).
#[derive(Debug)]
pub struct Psync {
    /// The replication id the replica follows (`?` for none).
    pub replid: String,
    /// The first sequence it needs (`-1` for a full sync).
    pub offset: i64,
    /// Its listening port (`REPLCONF listening-port`, else 0).
    pub port: u16,
}

/// A client blocked in `WAIT`.
#[derive(Debug, Clone, Copy)]
pub struct Waiting {
    /// The primary offset replicas must have acknowledged.
    pub target: u64,
    /// How many replicas.
    pub replicas: u64,
    /// When to answer anyway; `None`: never (timeout 0).
    pub deadline: Option<Instant>,
}

/// The replica side's link state (what `INFO replication` shows).
#[derive(Debug, Default)]
pub struct LinkStatus {
    /// 0 connect, 1 connecting, 2 sync, 3 connected.
    pub state: AtomicU8,
    /// The primary's offset, as its last frame told.
    pub master_offset: AtomicU64,
    /// The last primary sequence applied here.
    pub applied: AtomicU64,
    /// When the primary last sent anything, ms since the epoch.
    pub last_io_ms: AtomicU64,
    /// Since when the link has been down, ms since the epoch (0: up).
    pub down_since_ms: AtomicU64,
}

/// The role and its settings, changed by `REPLICAOF` (rarely).
#[derive(Debug, Default)]
struct Role {
    /// The primary followed, if a replica.
    master: Option<(String, u16)>,
    /// The replication id of the history followed and the last sequence
    /// of it applied here (`None`: a full sync is needed).
    position: Option<(String, u64)>,
    /// The link's socket, so `REPLICAOF` can cut it.
    link_socket: Option<TcpStream>,
}

/// Replication state shared by the connections and the threads.
pub struct Replication {
    role: Mutex<Role>,
    /// Bumped by every `REPLICAOF`: a link thread of an older generation
    /// stops.
    generation: AtomicU64,
    /// Read-only replica and loading bits, one relaxed load per command.
    gate: AtomicU8,
    /// `replica-read-only`.
    pub read_only: AtomicBool,
    /// `repl-backlog-size`: bytes of flushed WALs the hold may keep for
    /// replicas that are not connected.
    pub backlog_size: AtomicU64,
    /// `replica-priority`.
    pub priority: AtomicU64,
    /// `masterauth`: the password given to the primary, read at each
    /// connection.
    pub masterauth: Mutex<Option<String>>,
    /// This server's replication id as a primary (new each run and at
    /// each promotion).
    replid: Mutex<String>,
    /// Connected replicas.
    replicas: Mutex<Vec<Arc<ReplicaLink>>>,
    /// Where the engine hold stands (`None`: no hold).
    hold: Mutex<Option<u64>>,
    /// The replica side's link.
    pub link: LinkStatus,
    /// Full syncs served, partial resyncs served, refused.
    pub sync_full: AtomicU64,
    /// Partial resyncs accepted.
    pub sync_partial_ok: AtomicU64,
    /// Partial resyncs refused (a full sync instead).
    pub sync_partial_err: AtomicU64,
}

impl std::fmt::Debug for Replication {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replication")
            .field("role", &*self.role.lock())
            .finish_non_exhaustive()
    }
}

impl Replication {
    /// The state at start: a replica of `config.replicaof` if set, keeping
    /// the position a replica recorded with its data (`position`).
    pub(crate) fn new(config: &crate::Config, position: Option<(String, u64)>) -> Replication {
        let r = Replication {
            role: Mutex::new(Role::default()),
            generation: AtomicU64::new(0),
            gate: AtomicU8::new(0),
            read_only: AtomicBool::new(config.replica_read_only),
            backlog_size: AtomicU64::new(config.repl_backlog_size),
            priority: AtomicU64::new(u64::from(config.replica_priority)),
            masterauth: Mutex::new(config.masterauth.clone()),
            replid: Mutex::new(crate::random_run_id()),
            replicas: Mutex::new(Vec::new()),
            hold: Mutex::new(None),
            link: LinkStatus::default(),
            sync_full: AtomicU64::new(0),
            sync_partial_ok: AtomicU64::new(0),
            sync_partial_err: AtomicU64::new(0),
        };
        if let Some((_, applied)) = &position {
            r.link.applied.store(*applied, Ordering::Relaxed);
        }
        {
            let mut role = r.role.lock();
            role.master = config.replicaof.clone();
            role.position = position;
        }
        r.update_gate();
        r
    }

    /// True while this server follows a primary.
    pub fn is_replica(&self) -> bool {
        self.role.lock().master.is_some()
    }

    /// Whether a write command must be refused now: a read-only replica
    /// (one relaxed load).
    #[inline]
    pub fn refuses_writes(&self) -> bool {
        self.gate.load(Ordering::Relaxed) & GATE_READ_ONLY != 0
    }

    /// Whether a full sync is being loaded (commands without Redis's
    /// `loading` flag are refused).
    #[inline]
    pub fn loading(&self) -> bool {
        self.gate.load(Ordering::Relaxed) & GATE_LOADING != 0
    }

    /// Either gate bit set (the one load dispatch makes).
    #[inline]
    pub fn gated(&self) -> bool {
        self.gate.load(Ordering::Relaxed) != 0
    }

    pub(crate) fn set_loading(&self, on: bool) {
        if on {
            self.gate.fetch_or(GATE_LOADING, Ordering::AcqRel);
        } else {
            self.gate.fetch_and(!GATE_LOADING, Ordering::AcqRel);
        }
    }

    /// Recomputes the read-only bit from the role and `replica-read-only`.
    pub fn update_gate(&self) {
        let ro = self.is_replica() && self.read_only.load(Ordering::Relaxed);
        if ro {
            self.gate.fetch_or(GATE_READ_ONLY, Ordering::AcqRel);
        } else {
            self.gate.fetch_and(!GATE_READ_ONLY, Ordering::AcqRel);
        }
    }

    /// This server's replication id.
    pub fn replid(&self) -> String {
        self.replid.lock().clone()
    }

    /// The primary followed, if any.
    pub fn master(&self) -> Option<(String, u16)> {
        self.role.lock().master.clone()
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The position to ask `PSYNC` for.
    fn position(&self) -> Option<(String, u64)> {
        self.role.lock().position.clone()
    }

    fn set_position(&self, p: Option<(String, u64)>) {
        if let Some((_, applied)) = &p {
            self.link.applied.store(*applied, Ordering::Relaxed);
        }
        self.role.lock().position = p;
    }

    /// `REPLICAOF host port`: follow `master` (the link thread connects);
    /// `None` (`REPLICAOF NO ONE`): become a primary with a new
    /// replication id. Returns whether anything changed.
    pub fn set_master(&self, master: Option<(String, u16)>) -> bool {
        let mut role = self.role.lock();
        if role.master == master {
            return false;
        }
        let was_replica = role.master.is_some();
        role.master = master.clone();
        if let Some(s) = role.link_socket.take() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        if master.is_none() || !was_replica {
            // A promoted replica starts a history of its own: its
            // sequences are not its old primary's, so no replica of that
            // primary may continue from it, nor it from that primary once
            // it took writes (a full sync).
            role.position = None;
            *self.replid.lock() = crate::random_run_id();
        }
        self.generation.fetch_add(1, Ordering::AcqRel);
        drop(role);
        self.link.state.store(0, Ordering::Relaxed);
        self.link.down_since_ms.store(now_ms(), Ordering::Relaxed);
        self.update_gate();
        if master.is_some() {
            // Replicas of this server follow it no more (no chained
            // replication): cut them.
            for l in self.replicas.lock().iter() {
                l.closed.store(true, Ordering::Release);
            }
        }
        true
    }

    /// `CLIENT KILL TYPE master`: cuts a replica's link to its primary;
    /// the link thread connects again and asks `PSYNC` to continue.
    /// Returns whether a synced link was cut (Redis's master client
    /// exists only then).
    pub fn cut_master_link(&self) -> bool {
        let role = self.role.lock();
        let Some(s) = &role.link_socket else {
            return false;
        };
        let connected = self.link.state.load(Ordering::Relaxed) == 3;
        let _ = s.shutdown(std::net::Shutdown::Both);
        connected
    }

    pub(crate) fn add_replica(&self, link: Arc<ReplicaLink>) {
        self.replicas.lock().push(link);
    }

    pub(crate) fn remove_replica(&self, id: u64) {
        self.replicas.lock().retain(|l| l.id != id);
    }

    /// The connected replicas.
    pub fn replicas(&self) -> Vec<Arc<ReplicaLink>> {
        self.replicas.lock().clone()
    }

    /// How many online replicas acknowledged `offset`.
    pub fn acked(&self, offset: u64) -> u64 {
        self.replicas
            .lock()
            .iter()
            .filter(|l| l.acked.load(Ordering::Acquire) >= offset)
            .count() as u64
    }

    /// Ensures the engine hold keeps sequences from `from` on; fails with
    /// `ChangesReleased` if they are gone already.
    pub(crate) fn hold_from(&self, db: &weft::Db, from: u64) -> weft::Result<()> {
        let mut hold = self.hold.lock();
        if hold.is_some_and(|h| h <= from) {
            return Ok(());
        }
        db.hold_changes(HOLD, from)?;
        *hold = Some(from);
        Ok(())
    }

    /// Once a second on a primary: moves the hold up to the lowest
    /// position a connected replica still reads from, if the WALs it
    /// keeps pass `repl-backlog-size`.
    pub(crate) fn trim_backlog(&self, db: &weft::Db) {
        let mut hold = self.hold.lock();
        let Some(at) = *hold else {
            return;
        };
        if db.feed_retained_bytes() <= self.backlog_size.load(Ordering::Relaxed) {
            return;
        }
        let visible = db.visible_sequence();
        let needed = (self.replicas.lock().iter())
            .map(|l| l.sent.load(Ordering::Acquire) + 1)
            .fold(visible + 1, u64::min);
        if needed > at {
            match db.release_changes(HOLD, needed - 1) {
                Ok(()) => *hold = Some(needed),
                Err(e) => eprintln!("weft serve: replication backlog: {e}"),
            }
        }
    }

    /// Drops a hold left by an earlier run (its replication id is gone
    /// with it, so no replica can continue from it).
    pub(crate) fn drop_stale_hold(&self, db: &weft::Db) {
        if db.stats().feed_holds.iter().any(|h| h.name == HOLD) {
            if let Err(e) = db.drop_hold(HOLD) {
                eprintln!("weft serve: dropping the old replication hold: {e}");
            }
        }
    }

    /// The first sequence the backlog keeps (the hold), if any.
    fn backlog_first(&self) -> Option<u64> {
        *self.hold.lock()
    }
}

/// Starts the replication thread: the replica link when following a
/// primary, the backlog trimming when serving replicas.
pub(crate) fn start(
    shared: &Arc<Shared>,
    stop: &Arc<crate::server::Stop>,
) -> Result<std::thread::JoinHandle<()>, crate::Error> {
    if !shared.repl.is_replica() {
        shared.repl.drop_stale_hold(&shared.store.db);
    }
    let sh = Arc::clone(shared);
    let st = Arc::clone(stop);
    std::thread::Builder::new()
        .name("weft-repl".into())
        .spawn(move || replica::run(&sh, &st))
        .map_err(|e| crate::Error::io("starting thread weft-repl", e))
}

/// `WAIT`'s answer once its client's hold ends ([`crate::conn`]): true
/// while it must wait on (its next check is set as the hold), false once
/// it answered.
pub(crate) fn wait_resume(
    shared: &Shared,
    session: &mut crate::cmd::Session,
    out: &mut Out,
    now: Instant,
) -> bool {
    let Some(w) = session.wait else {
        return false;
    };
    let acked = shared.repl.acked(w.target);
    if acked >= w.replicas || w.deadline.is_some_and(|d| d <= now) {
        session.wait = None;
        out.int(acked as i64);
        return false;
    }
    let next = now + WAIT_POLL;
    session.hold_until = Some(w.deadline.map_or(next, |d| d.min(next)));
    true
}

/// The `# Replication` section of `INFO`.
pub fn info(shared: &Shared, t: &mut String) {
    let r = &shared.repl;
    let db = &shared.store.db;
    t.push_str("# Replication\r\n");
    let now = now_ms();
    match r.master() {
        Some((host, port)) => {
            let l = &r.link;
            let state = l.state.load(Ordering::Relaxed);
            let up = state == 3;
            let applied = l.applied.load(Ordering::Relaxed);
            let last_io = l.last_io_ms.load(Ordering::Relaxed);
            let _ = write!(
                t,
                "role:slave\r\nmaster_host:{host}\r\nmaster_port:{port}\r\n\
                 master_link_status:{}\r\nmaster_last_io_seconds_ago:{}\r\n\
                 master_sync_in_progress:{}\r\nslave_read_repl_offset:{applied}\r\n\
                 slave_repl_offset:{applied}\r\n",
                if up { "up" } else { "down" },
                if last_io == 0 {
                    -1
                } else {
                    (now.saturating_sub(last_io) / 1000) as i64
                },
                u8::from(state == 2),
            );
            if !up {
                let since = l.down_since_ms.load(Ordering::Relaxed);
                let _ = write!(
                    t,
                    "master_link_down_since_seconds:{}\r\n",
                    if since == 0 {
                        -1
                    } else {
                        (now.saturating_sub(since) / 1000) as i64
                    }
                );
            }
            let master_offset = l.master_offset.load(Ordering::Relaxed);
            let _ = write!(
                t,
                "slave_priority:{}\r\nslave_read_only:{}\r\nreplica_announced:1\r\n\
                 weft_replica_lag_sequences:{}\r\n",
                r.priority.load(Ordering::Relaxed),
                u8::from(r.read_only.load(Ordering::Relaxed)),
                master_offset.saturating_sub(applied),
            );
        }
        None => t.push_str("role:master\r\n"),
    }
    let replicas = r.replicas();
    let _ = write!(t, "connected_slaves:{}\r\n", replicas.len());
    for (i, l) in replicas.iter().enumerate() {
        let _ = write!(
            t,
            "slave{i}:ip={},port={},state={},offset={},lag={}\r\n",
            l.ip,
            l.port,
            l.state_name(),
            l.acked.load(Ordering::Relaxed),
            now.saturating_sub(l.last_ack_ms.load(Ordering::Relaxed)) / 1000,
        );
    }
    // A replica shows the history it follows, as Redis does.
    let (replid, offset) = match (r.is_replica(), r.position()) {
        (true, Some((id, _))) => (id, r.link.applied.load(Ordering::Relaxed)),
        _ => (r.replid(), db.visible_sequence()),
    };
    let first = r.backlog_first();
    let _ = write!(
        t,
        "master_failover_state:no-failover\r\nmaster_replid:{}\r\n\
         master_replid2:0000000000000000000000000000000000000000\r\n\
         master_repl_offset:{offset}\r\nsecond_repl_offset:-1\r\n\
         repl_backlog_active:{}\r\nrepl_backlog_size:{}\r\n\
         repl_backlog_first_byte_offset:{}\r\nrepl_backlog_histlen:{}\r\n\
         weft_repl_backlog_retained_bytes:{}\r\n\r\n",
        replid,
        u8::from(first.is_some()),
        r.backlog_size.load(Ordering::Relaxed),
        first.unwrap_or(0),
        first.map_or(0, |f| (offset + 1).saturating_sub(f)),
        db.feed_retained_bytes(),
    );
}

/// `ROLE`.
pub fn role(shared: &Shared, out: &mut Out) {
    let r = &shared.repl;
    match r.master() {
        Some((host, port)) => {
            out.array(5);
            out.bulk(b"slave");
            out.bulk(host.as_bytes());
            out.int(i64::from(port));
            out.bulk(match r.link.state.load(Ordering::Relaxed) {
                0 => b"connect".as_slice(),
                1 => b"connecting",
                2 => b"sync",
                _ => b"connected",
            });
            out.int(r.link.applied.load(Ordering::Relaxed) as i64);
        }
        None => {
            let replicas = r.replicas();
            out.array(3);
            out.bulk(b"master");
            out.int(shared.store.db.visible_sequence() as i64);
            out.array(replicas.len());
            for l in replicas {
                out.array(3);
                out.bulk(l.ip.as_bytes());
                out.bulk(l.port.to_string().as_bytes());
                out.bulk(l.acked.load(Ordering::Relaxed).to_string().as_bytes());
            }
        }
    }
}

/// At open, before serving: finishes a full sync a crash interrupted,
/// reads the position a replica recorded (a primary forgets it: its own
/// writes make its data no prefix of its old primary's), and makes the
/// state.
pub(crate) fn open(
    store: &crate::keyspace::Store,
    config: &crate::Config,
) -> Result<Replication, crate::Error> {
    replica::recover(store, &config.dir)?;
    let position = if config.replicaof.is_some() {
        replica::read_position(&store.db)?
    } else {
        replica::forget_position(&store.db)?;
        None
    };
    Ok(Replication::new(config, position))
}
