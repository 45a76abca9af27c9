//! `weft serve`: a Redis-protocol (RESP2/RESP3) server over the Weft engine.
//!
//! # Commands
//!
//! Connection/server: `PING ECHO HELLO [2|3 [AUTH u p] [SETNAME n]] AUTH
//! [user] pass QUIT SELECT COMMAND [COUNT|DOCS|INFO|LIST|GETKEYS] INFO
//! [section...|all|everything] DBSIZE FLUSHDB FLUSHALL TYPE CONFIG
//! GET|SET|RESETSTAT CLIENT ID|SETNAME|GETNAME|SETINFO|INFO|LIST|KILL TIME
//! SAVE BGSAVE [SCHEDULE] LASTSAVE SLOWLOG GET|LEN|RESET LATENCY
//! LATEST|HISTORY|RESET|DOCTOR MONITOR SHUTDOWN [NOSAVE|SAVE]` (a save is an
//! engine checkpoint: the `save` module). Pub/sub: `SUBSCRIBE UNSUBSCRIBE
//! PSUBSCRIBE PUNSUBSCRIBE PUBLISH PUBSUB CHANNELS|NUMSUB|NUMPAT` ([`pubsub`];
//! delivery between event loops: [`deliver`]). Passwords: [`auth`].
//! Counters, slow log, latency: [`stats`]. `COMMAND` metadata:
//! [`cmd::meta`]. Replication: `REPLICAOF SLAVEOF ROLE REPLCONF PSYNC
//! WAIT` ([`repl`]; `docs/DESIGN.md` §1.11). Transactions: `MULTI EXEC
//! DISCARD WATCH UNWATCH` (an `EXEC` is one atomic engine batch, isolated
//! by its keys' stripe locks: [`keyspace`]'s *Transactions*). Databases:
//! `SELECT MOVE FLUSHDB FLUSHALL` over `Config::databases` databases, each
//! an engine keyspace (`SWAPDB` is refused).
//! Strings: `GET SET [EX|PX|EXAT|PXAT|KEEPTTL] [NX|XX] [GET] SETNX GETSET
//! SETEX PSETEX GETEX [EX|PX|EXAT|PXAT|PERSIST] GETDEL MGET MSET MSETNX
//! INCR INCRBY DECR DECRBY INCRBYFLOAT APPEND STRLEN GETRANGE SUBSTR
//! SETRANGE GETBIT SETBIT BITCOUNT [BYTE|BIT] BITPOS [BYTE|BIT] LCS [LEN]
//! [IDX] [MINMATCHLEN] [WITHMATCHLEN]`. Keys: `DEL UNLINK EXISTS TOUCH
//! KEYS SCAN [MATCH] [COUNT] [TYPE] RANDOMKEY RENAME RENAMENX COPY [DB n]
//! [REPLACE] EXPIRE PEXPIRE EXPIREAT PEXPIREAT [NX|XX|GT|LT] TTL PTTL
//! EXPIRETIME PEXPIRETIME PERSIST OBJECT ENCODING|FREQ|IDLETIME|REFCOUNT|HELP
//! DUMP RESTORE [REPLACE] [ABSTTL] [IDLETIME] [FREQ] MIGRATE [COPY]
//! [REPLACE] [AUTH|AUTH2] [KEYS] WAIT` (Redis's RDB serialization:
//! `cmd/dump.rs`; what `OBJECT`, `WAIT` and moving a collection cost and
//! answer: `docs/DESIGN.md` §1.9). Hashes: `HSET HSETNX HGET HMGET HMSET
//! HGETALL HDEL HEXISTS HLEN HSTRLEN HKEYS HVALS HINCRBY HINCRBYFLOAT
//! HRANDFIELD [count [WITHVALUES]] HSCAN [MATCH] [COUNT] [NOVALUES]`. Lists: `LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP [count] LLEN
//! LRANGE LINDEX LSET LINSERT LREM LTRIM LPOS [RANK] [COUNT] [MAXLEN] LMOVE
//! RPOPLPUSH LMPOP BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP` (blocking: see
//! [`blocking`]). Sets: `SADD SREM
//! SMEMBERS SISMEMBER SMISMEMBER SCARD SPOP SRANDMEMBER SMOVE SINTER SUNION
//! SDIFF SINTERSTORE SUNIONSTORE SDIFFSTORE SINTERCARD SSCAN`. Sorted sets:
//! `ZADD [NX|XX] [GT|LT] [CH] [INCR] ZINCRBY ZREM ZSCORE ZMSCORE ZCARD ZCOUNT
//! ZLEXCOUNT ZRANGE [BYSCORE|BYLEX] [REV] [LIMIT] [WITHSCORES] ZRANGESTORE
//! ZRANGEBYSCORE ZREVRANGEBYSCORE ZRANGEBYLEX ZREVRANGEBYLEX ZREVRANGE ZRANK
//! ZREVRANK ZPOPMIN ZPOPMAX ZMPOP BZPOPMIN BZPOPMAX BZMPOP ZRANDMEMBER
//! ZREMRANGEBYSCORE ZREMRANGEBYRANK ZREMRANGEBYLEX ZUNION ZINTER ZDIFF ZUNIONSTORE
//! ZINTERSTORE ZDIFFSTORE ZINTERCARD ZSCAN` (Redis 7.0's replies in RESP2
//! and RESP3). Weft: `WEFT.RANGE start end [LIMIT n] [REV]` returns the
//! string keys in `[start, end)` (empty `end` = no upper bound) with their
//! values, in key order or reversed, from one engine snapshot (a map under
//! RESP3, a flat array under RESP2); hashes in the range are skipped.
//!
//! `SCAN`/`HSCAN` cursors are numbers that name a server-side resume key
//! (the last 16 Ki cursors are remembered; an unknown one, which Redis
//! also accepts, scans from the start), so keys come back in key order,
//! each live key once per pass.
//! `DBSIZE` and `INFO keyspace` read counters kept by every write (O(1), as
//! Redis; opening counts the keys once). User keys are limited to 64 KiB − 9
//! bytes and a collection's key + field or member to 64 KiB − 13 (a sorted
//! set's to 64 KiB − 21: the score index adds the score), the engine's key
//! limit.
//!
//! # Threading
//!
//! A few event loops (`Config::threads`, `--threads`; one per two cores by
//! default, at least one), each multiplexing its connections over one
//! `epoll` set; see
//! `event_loop.rs` for why and how. Each connection reads what the kernel
//! has, runs every complete request in it (pipelining) and answers with
//! one write when the socket has room. Engine calls block the loop (a
//! `--sync always` write waits for its fsync), so the loop gives each
//! engine write as much as it can: a run of plain `SET k v` / `MSET`
//! requests that ends what a connection has read is committed together
//! with those of every other connection ready in the same wake-up, as one
//! atomic batch, before their `+OK`s go out; a run followed by any other
//! request is committed by its connection first, so replies keep their
//! order and later requests see the writes. Concurrent loops still meet
//! in the engine's group commit. After a wake-up that found work a loop
//! polls its sockets for `Config::busy_poll` (`--busy-poll-us`, default
//! 50 µs) before it sleeps, so a busy loop is not woken for each request.
//!
//! # Key encoding
//!
//! Types and expiry are encoded on the ordered engine as Kvrocks does: one
//! metadata record per user key (strings inline; a collection's version
//! and size), one record per element under the collection's version (a
//! sorted set also keeps a score index), and an expiry index ordered by
//! deadline. See [`encoding`] for the layout and `docs/DESIGN.md` §1.9 for
//! reclamation and the data format upgrade at open;
//! `KEYS`/`SCAN`/`WEFT.RANGE` read only the metadata namespace, so they list
//! user keys in bytewise order and never show internal records.
//!
//! # Atomicity
//!
//! Every command's writes are one `WriteBatch`, and an `EXEC`'s are one
//! for all its commands. Commands that read before they write hold their
//! keys' stripe locks across the read and the batch ([`locks`]); an `EXEC`
//! holds those of every key its commands name for its whole run;
//! multi-record reads (`MGET`, `HGETALL`, `WEFT.RANGE`, ...) use one engine
//! snapshot. Handlers reach the data through [`cmd::Ctx::ks`], a view of
//! the connection's database that goes through the running `EXEC` if any.
//!
//! # Expiry
//!
//! Lazy: every read checks the deadline in the metadata record and treats an
//! expired key as absent; a writer that finds one deletes it in its batch.
//! Background: every 100 ms a thread deletes keys from the front of the
//! expiry index whose deadline has passed.
//!
//! # Durability (`--sync`, as Redis's `appendfsync`)
//!
//! - `always`: every write batch is written with `WriteOptions::sync(true)`:
//!   the reply is sent after the WAL's fdatasync (group commit shares it).
//! - `everysec` (default): writes use `sync(false)`; a background thread,
//!   once a second and only if something was written, calls
//!   `Db::sync_wal` (an fdatasync of the WAL on a second handle, writers
//!   not held up), so at most about a second is lost on a machine crash
//!   (nothing on a process crash).
//! - `no`: `sync(false)` only; the OS decides when the WAL reaches the disk.
//!
//! Under `everysec` and `no` the database runs with
//! `Options::manual_wal_flush`: the WAL records of the writes an event loop
//! runs in one wake-up stay in the engine's buffer, and the loop calls
//! `Db::flush_wal` — one `write` — before it sends any reply (Redis writes
//! its AOF buffer before replies the same way). So a reply always follows
//! the WAL record of every write it acknowledges, and a kill -9 loses no
//! acknowledged write. As in Redis, a client on another loop may read a
//! write whose own reply is not yet out. If the flush fails the database
//! is poisoned and the loop closes the connections it was about to answer
//! instead of acknowledging writes that may be lost.
//!
//! # Bad input
//!
//! A malformed frame gets a Redis-worded `-ERR Protocol error: ...` and the
//! connection is closed. Bulk strings are bounded by `max_bulk` (512 MiB by
//! default, as Redis's `proto-max-bulk-len`), arrays by 1 Mi elements, the
//! bytes of one incomplete request by `max_query_buffer`; a connection with
//! 64 KiB of replies its client has not read stops running requests and
//! reading until the client catches up, so a client that does not read holds
//! up only itself, not the server's memory.

pub mod auth;
pub mod blocking;
pub mod clients;
pub mod cmd;
mod conn;
pub mod deliver;
pub mod encoding;
mod event_loop;
pub mod glob;
pub mod keyspace;
pub mod locks;
pub mod notify;
mod poll;
pub mod pubsub;
pub mod repl;
pub mod resp;
mod save;
mod server;
#[cfg(unix)]
pub mod signal;
pub mod stats;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use save::default_save_dir;
pub use server::{Server, ShutdownHandle};

/// Errors starting or stopping the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A socket or thread operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What the server was doing.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The engine failed.
    #[error("{0}")]
    Db(#[from] weft::Error),
    /// An invalid configuration value.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A record the server wrote does not decode (the key, escaped).
    #[error("malformed metadata record of key '{0}'")]
    BadRecord(String),
    /// The data directory holds server data in a format this build does
    /// not read (`docs/DESIGN.md` §1.9, "Format versions").
    #[error("unsupported data directory: {0}")]
    DataFormat(String),
}

impl From<keyspace::StoreError> for Error {
    fn from(e: keyspace::StoreError) -> Self {
        match e {
            keyspace::StoreError::Engine(e) => Error::Db(e),
            keyspace::StoreError::BadMeta(k) => Error::BadRecord(k.escape_ascii().to_string()),
            keyspace::StoreError::Unsupported(m) => Error::DataFormat(m),
        }
    }
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

/// Durability of acknowledged writes (Redis's `appendfsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncMode {
    /// fsync before every reply.
    Always,
    /// fsync once a second in the background.
    #[default]
    EverySec,
    /// Never fsync explicitly.
    No,
}

impl SyncMode {
    /// The name as `--sync` spells it.
    pub fn name(self) -> &'static str {
        match self {
            SyncMode::Always => "always",
            SyncMode::EverySec => "everysec",
            SyncMode::No => "no",
        }
    }
}

impl std::str::FromStr for SyncMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Ok(SyncMode::Always),
            "everysec" => Ok(SyncMode::EverySec),
            "no" => Ok(SyncMode::No),
            _ => Err(format!("expected always, everysec or no, got {s:?}")),
        }
    }
}

/// Server configuration. `Config::default()` is `weft serve` without flags.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// Address to listen on. Default `127.0.0.1`.
    pub bind: String,
    /// Port; 0 picks a free one. Default 6379.
    pub port: u16,
    /// Database directory. Default `./weft-data`.
    pub dir: PathBuf,
    /// Durability. Default `everysec`.
    pub sync: SyncMode,
    /// Most simultaneous clients; more are refused with an error. Default 10000.
    pub maxclients: usize,
    /// Close a client idle this long; `None` never. Default `None` (as Redis).
    pub timeout: Option<Duration>,
    /// Longest bulk string accepted. Default 512 MiB.
    pub max_bulk: usize,
    /// Most bytes one incomplete request may hold. Default 1 GiB (Redis's
    /// `client-query-buffer-limit`), and never less than `max_bulk` + 64 KiB.
    pub max_query_buffer: usize,
    /// Event-loop threads serving the connections. Default half the
    /// cores, at least one ([`default_threads`]).
    pub threads: usize,
    /// How long a loop keeps polling its sockets without sleeping after a
    /// wake-up that found work; zero sleeps at once. Default
    /// [`DEFAULT_BUSY_POLL`] (see the `event_loop` module's "Polling before
    /// sleeping").
    pub busy_poll: Duration,
    /// Where `SAVE` and `BGSAVE` write their checkpoints (`save` module
    /// docs). Default `None`: `<dir>-checkpoints` beside the data directory
    /// ([`default_save_dir`]).
    pub save_dir: Option<PathBuf>,
    /// The password clients must give (`AUTH`, `HELLO ... AUTH`) before
    /// anything else; `None` (default): no password, as Redis's
    /// `requirepass ""`. `CONFIG SET requirepass` changes it at run time.
    pub requirepass: Option<String>,
    /// Redis's `client-output-buffer-limit pubsub`: a subscriber (or
    /// `MONITOR` client) whose unsent output passes the hard limit, or
    /// stays over the soft limit for the soft seconds, is disconnected.
    /// Default 32 MiB, 8 MiB, 60 s (Redis's).
    pub pubsub_output_limit: OutputLimit,
    /// Follow this primary at start (`--replicaof host port`, Redis's
    /// `replicaof`); `None`: a primary. `REPLICAOF` changes it at run
    /// time (`docs/DESIGN.md` §1.11).
    pub replicaof: Option<(String, u16)>,
    /// The password a replica gives its primary (`AUTH`) when the
    /// primary has `requirepass` (Redis's `masterauth`); `CONFIG SET
    /// masterauth` changes it for the next connection.
    pub masterauth: Option<String>,
    /// A replica refuses writes (`-READONLY`). Default true (Redis's
    /// `replica-read-only yes`).
    pub replica_read_only: bool,
    /// Bytes of flushed WALs the replication backlog may keep for
    /// replicas that are not connected (`repl-backlog-size`; disk, not
    /// memory). Default 64 MiB.
    pub repl_backlog_size: u64,
    /// `replica-priority` (Sentinel's; 0: never promoted). Default 100.
    pub replica_priority: u32,
    /// How many databases `SELECT` chooses among (Redis's `databases`).
    /// Default 16. Database 0 is the engine's default keyspace, database
    /// `n` the engine keyspace `"db<n>"`.
    pub databases: usize,
    /// Redis's `notify-keyspace-events`: which writes publish keyspace
    /// events, as flags from [`notify::parse`]. Default 0 (none).
    /// `CONFIG SET notify-keyspace-events` changes it at run time.
    pub notify_keyspace_events: u32,
    /// Engine options.
    pub db_options: weft::Options,
}

/// One class of Redis's `client-output-buffer-limit`; zero turns a limit
/// off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimit {
    /// Bytes past which the client is disconnected at once.
    pub hard: u64,
    /// Bytes the client may stay above for `soft_seconds` only.
    pub soft: u64,
    /// Seconds over `soft` allowed.
    pub soft_seconds: u64,
}

impl OutputLimit {
    /// Redis's default for the pub/sub class.
    pub const PUBSUB_DEFAULT: OutputLimit = OutputLimit {
        hard: 32 << 20,
        soft: 8 << 20,
        soft_seconds: 60,
    };
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: "127.0.0.1".into(),
            port: 6379,
            dir: PathBuf::from("./weft-data"),
            sync: SyncMode::EverySec,
            maxclients: 10_000,
            timeout: None,
            max_bulk: 512 << 20,
            max_query_buffer: 1 << 30,
            threads: default_threads(),
            busy_poll: DEFAULT_BUSY_POLL,
            save_dir: None,
            requirepass: None,
            pubsub_output_limit: OutputLimit::PUBSUB_DEFAULT,
            replicaof: None,
            masterauth: None,
            replica_read_only: true,
            repl_backlog_size: 64 << 20,
            replica_priority: 100,
            databases: 16,
            notify_keyspace_events: 0,
            db_options: weft::Options::default(),
        }
    }
}

/// How long an event loop polls before it sleeps, by default. Chosen by
/// measurement at `redis-benchmark -P 1 -c 50`: polling served more
/// requests per second than a loop that sleeps at once, and a longer poll
/// served no more than this one (see
/// `bench/journal/2026-11-25-05-serve-busy-poll.md`, "A loop that polls
/// before it sleeps").
pub const DEFAULT_BUSY_POLL: Duration = Duration::from_micros(50);

/// The default number of event loops: half the cores (at least one). The
/// other half is left to the engine's own threads (the `teks` linker,
/// flushes and merges) and, in a benchmark, to the client.
///
/// A second loop keeps serving while an engine call blocks the first (a
/// get that misses the page cache, a `--sync always` write), but on 2
/// cores one loop measured better in every cell once the engine's
/// background work got cheaper, and used less server CPU
/// (`bench/redis-compare`-style runs against Redis:
/// `bench/journal/2026-11-24-05-teks-linking-multi-get.md`, "One event
/// loop on 2 cores"). `--threads` overrides it.
pub fn default_threads() -> usize {
    threads_for(std::thread::available_parallelism().map_or(1, |n| n.get()))
}

fn threads_for(cores: usize) -> usize {
    (cores / 2).max(1)
}

/// Server-wide counters (INFO stats), written per connection, never per
/// command (commands are counted per loop: [`stats`]).
#[derive(Debug)]
pub struct Counters {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Connections refused (maxclients).
    pub rejected: AtomicU64,
    /// Open connections.
    pub connected: AtomicU64,
    /// The id of the next client (`CLIENT ID`); ids start at 1.
    pub next_client_id: AtomicU64,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            connections: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            connected: AtomicU64::new(0),
            next_client_id: AtomicU64::new(1),
        }
    }
}

/// State shared by every connection.
pub struct Shared {
    /// The data over the engine: its databases, key locks, key counts.
    /// Commands reach it through a view ([`cmd::Ctx::ks`]).
    pub store: keyspace::Store,
    /// The configuration.
    pub config: Config,
    /// The port actually bound.
    pub port: u16,
    /// Counters.
    pub counters: Counters,
    /// Start time.
    pub started: Instant,
    /// `SAVE` / `BGSAVE` state.
    pub(crate) saves: Arc<save::Saves>,
    /// Every loop's mailbox: the delivery primitive ([`deliver`]).
    pub postal: deliver::Postal,
    /// Pub/sub subscriptions.
    pub hub: pubsub::Hub,
    /// Open connections (`CLIENT`), `MONITOR` clients.
    pub clients: clients::Registry,
    /// Clients parked in blocking commands, by key.
    pub waiters: blocking::Waiters,
    /// The password and the guessing gate.
    pub auth: auth::Auth,
    /// Per-loop command counters, slow log, latency monitor.
    pub stats: stats::Stats,
    /// Settings `CONFIG SET` may change.
    pub runtime: Runtime,
    /// Fired by `SHUTDOWN` (and [`ShutdownHandle`]).
    pub(crate) stop: Arc<server::Stop>,
    /// A random id of this run (`INFO server` `run_id`).
    pub run_id: String,
    /// Replication: role, replicas, the link to a primary ([`repl`]).
    pub repl: Arc<repl::Replication>,
}

/// Settings `CONFIG SET` changes while the server runs (read with relaxed
/// loads where they are used).
#[derive(Debug)]
pub struct Runtime {
    /// `maxclients`.
    pub maxclients: AtomicUsize,
    /// `timeout`, milliseconds; 0: never.
    pub timeout_ms: AtomicU64,
    /// `client-output-buffer-limit pubsub`: hard, soft, soft seconds.
    pub pubsub_limit: [AtomicU64; 3],
}

impl Runtime {
    fn new(c: &Config) -> Runtime {
        let l = c.pubsub_output_limit;
        Runtime {
            maxclients: AtomicUsize::new(c.maxclients),
            timeout_ms: AtomicU64::new(c.timeout.map_or(0, |d| (d.as_millis() as u64).max(1))),
            pubsub_limit: [
                AtomicU64::new(l.hard),
                AtomicU64::new(l.soft),
                AtomicU64::new(l.soft_seconds),
            ],
        }
    }

    /// The idle timeout.
    pub fn timeout(&self) -> Option<Duration> {
        match self.timeout_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    /// The pub/sub output limit.
    pub fn pubsub_limit(&self) -> OutputLimit {
        let [h, s, t] = &self.pubsub_limit;
        OutputLimit {
            hard: h.load(Ordering::Relaxed),
            soft: s.load(Ordering::Relaxed),
            soft_seconds: t.load(Ordering::Relaxed),
        }
    }

    /// Sets the pub/sub output limit.
    pub fn set_pubsub_limit(&self, l: OutputLimit) {
        let [h, s, t] = &self.pubsub_limit;
        h.store(l.hard, Ordering::Relaxed);
        s.store(l.soft, Ordering::Relaxed);
        t.store(l.soft_seconds, Ordering::Relaxed);
    }
}

impl Shared {
    /// The state of a server over `store` with `config`, bound to `port`.
    pub(crate) fn new(
        store: keyspace::Store,
        config: Config,
        port: u16,
        stop: Arc<server::Stop>,
    ) -> Result<Shared, Error> {
        let save_dir =
            (config.save_dir.clone()).unwrap_or_else(|| save::default_save_dir(&config.dir));
        let loops = config.threads.max(1);
        store.notify.store(config.notify_keyspace_events);
        Ok(Shared {
            store,
            port,
            counters: Counters::default(),
            started: Instant::now(),
            saves: Arc::new(save::Saves::new(save_dir)),
            postal: deliver::Postal::new(loops).map_err(|e| Error::io("creating an eventfd", e))?,
            hub: pubsub::Hub::default(),
            clients: clients::Registry::default(),
            waiters: blocking::Waiters::new(loops),
            auth: auth::Auth::new(config.requirepass.as_deref().map(str::as_bytes)),
            stats: stats::Stats::new(loops, cmd::COMMANDS.len()),
            runtime: Runtime::new(&config),
            stop,
            run_id: random_run_id(),
            repl: Arc::new(repl::Replication::new(&config, None)),
            config,
        })
    }

    /// Commands processed (summed over the loops).
    pub fn commands_processed(&self) -> u64 {
        self.stats.commands().iter().map(|c| c.calls).sum()
    }
}

/// 40 hex digits, different every run (Redis's `run_id`).
fn random_run_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut s = String::with_capacity(40);
    let mut i = 0u64;
    while s.len() < 40 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(i);
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        s.push_str(&format!("{:016x}", h.finish()));
        i += 1;
    }
    s.truncate(40);
    s
}

/// True when `bind` reaches beyond this machine (not a loopback address).
pub fn exposed(bind: &str) -> bool {
    match bind.parse::<std::net::IpAddr>() {
        Ok(ip) => !ip.is_loopback(),
        Err(_) => bind != "localhost",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_loops_are_half_the_cores_and_at_least_one() {
        assert_eq!(threads_for(1), 1);
        assert_eq!(threads_for(2), 1);
        assert_eq!(threads_for(3), 1);
        assert_eq!(threads_for(4), 2);
        assert_eq!(threads_for(8), 4);
        assert_eq!(threads_for(64), 32);
    }

    #[test]
    fn loopback_binds_are_not_exposed() {
        assert!(!exposed("127.0.0.1"));
        assert!(!exposed("127.0.0.2"));
        assert!(!exposed("::1"));
        assert!(!exposed("localhost"));
        assert!(exposed("0.0.0.0"));
        assert!(exposed("::"));
        assert!(exposed("192.168.1.5"));
        assert!(exposed("example.org"));
    }
}
