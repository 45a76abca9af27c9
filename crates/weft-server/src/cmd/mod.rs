//! Command dispatch: the command table (name, arity, handler), argument
//! helpers and the error replies in Redis's words.

mod bits;
pub(crate) mod blocking;
mod coll;
mod dump;
mod hash;
mod keys;
mod list;
mod long_double;
pub mod meta;
mod meta_table;
mod multi;
mod pubsub;
mod repl;
mod server;
mod set;
mod string;
mod strtod;
mod value;
mod zset;

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use crate::keyspace::{Exec, Keyspace, StoreError};
use crate::resp::Out;
use crate::Shared;

/// A command's error reply (without the leading `-`).
#[derive(Debug)]
pub struct CmdError(pub Cow<'static, str>);

impl From<StoreError> for CmdError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Engine(weft::Error::InvalidArgument(m)) => {
                CmdError(format!("ERR {m}").into())
            }
            StoreError::Engine(e) => CmdError(format!("ERR weft: {e}").into()),
            StoreError::BadMeta(k) => CmdError(
                format!("ERR weft: malformed metadata of key '{}'", k.escape_ascii()).into(),
            ),
            StoreError::Unsupported(m) => CmdError(format!("ERR weft: {m}").into()),
        }
    }
}

impl From<weft::Error> for CmdError {
    fn from(e: weft::Error) -> Self {
        StoreError::Engine(e).into()
    }
}

/// Result of a command handler.
pub type CmdResult = Result<(), CmdError>;

pub(crate) const WRONGTYPE: &str =
    "WRONGTYPE Operation against a key holding the wrong kind of value";
pub(crate) const NOT_INT: &str = "ERR value is not an integer or out of range";
pub(crate) const SYNTAX: &str = "ERR syntax error";
pub(crate) const OVERFLOW: &str = "ERR increment or decrement would overflow";

pub(crate) fn err<T>(msg: &'static str) -> Result<T, CmdError> {
    Err(CmdError(Cow::Borrowed(msg)))
}

/// Per-connection state commands can change.
#[derive(Debug, Default)]
pub struct Session {
    /// Client id (`CLIENT ID`, `HELLO`).
    pub id: u64,
    /// `CLIENT SETNAME`.
    pub name: Vec<u8>,
    /// Close after replying (`QUIT`).
    pub quit: bool,
    /// Where this connection lives: the address deliveries to it use.
    pub me: crate::deliver::ClientRef,
    /// What other connections see of this one (`CLIENT LIST`).
    pub info: Option<Arc<crate::clients::ClientInfo>>,
    /// Passed `AUTH` (or no password was required at connect).
    pub authenticated: bool,
    /// Failed `AUTH`s on this connection.
    pub auth_failures: u32,
    /// Run and send nothing before this time (a slowed `AUTH`).
    pub hold_until: Option<Instant>,
    /// Subscribed channels.
    pub channels: HashSet<Vec<u8>>,
    /// Subscribed patterns.
    pub patterns: HashSet<Vec<u8>>,
    /// In `MONITOR` mode.
    pub monitor: bool,
    /// Deliveries the commands run so far made to other connections; the
    /// connection sends them before their replies ([`crate::deliver`]).
    pub posts: Vec<(crate::deliver::ClientRef, crate::deliver::Delivery)>,
    /// `REPLCONF listening-port`: the port a replica on this connection
    /// listens on.
    pub repl_port: u16,
    /// Set by `PSYNC`: the connection hands its socket to a sender
    /// thread after the command ([`crate::repl::primary::start`]).
    pub psync: Option<crate::repl::Psync>,
    /// This connection is a replica's link: its `REPLCONF ACK`s land
    /// here, and replies to it are dropped (the sender owns the stream).
    pub repl_link: Option<Arc<crate::repl::ReplicaLink>>,
    /// In `WAIT` (held until answered: [`crate::repl::wait_resume`]).
    pub wait: Option<crate::repl::Waiting>,
    /// Blocking commands must not block (Redis's `CLIENT_DENY_BLOCKING`):
    /// they answer as if their timeout passed at once. Commands an `EXEC`
    /// runs are denied blocking the same way, through [`Ctx::in_exec`].
    pub deny_blocking: bool,
    /// Where this connection is in a blocking command
    /// ([`crate::blocking`]).
    pub blocking: crate::blocking::BlockState,
    /// The selected database (`SELECT`).
    pub db: usize,
    /// Between `MULTI` and `EXEC`/`DISCARD`: the queued commands.
    pub multi: Option<multi::Queue>,
    /// The keys `WATCH`ed since the last `EXEC`, `DISCARD` or `UNWATCH`.
    pub watched: Vec<multi::Watched>,
}

impl Session {
    /// True while subscribed to any channel or pattern.
    pub fn in_pubsub(&self) -> bool {
        !self.channels.is_empty() || !self.patterns.is_empty()
    }

    /// True between `MULTI` and `EXEC`/`DISCARD`.
    pub fn in_multi(&self) -> bool {
        self.multi.is_some()
    }
}

/// What a handler gets.
pub struct Ctx<'a> {
    /// Server-wide state.
    pub shared: &'a Shared,
    /// This connection.
    pub session: &'a mut Session,
    /// Reply buffer.
    pub out: &'a mut Out,
    /// The running `EXEC`, when this command is one of its queued
    /// commands: it reads and writes through it ([`Ctx::ks`]), and a
    /// blocking command must not block ([`Ctx::in_exec`]).
    pub exec: Option<&'a Exec>,
}

impl<'a> Ctx<'a> {
    /// The data as this command sees it: the connection's database,
    /// through the running `EXEC` if any. Every handler reaches the store
    /// through it.
    pub fn ks(&self) -> Keyspace<'a> {
        match self.exec {
            Some(e) => self.shared.store.exec_view(self.session.db, e),
            None => self.shared.store.view(self.session.db),
        }
    }

    /// True when this command runs inside `EXEC`: blocking commands
    /// (`BLPOP`, ...) answer at once as if their timeout had passed, as
    /// Redis's do inside `MULTI`.
    pub fn in_exec(&self) -> bool {
        self.exec.is_some()
    }

    /// Raises keyspace event `event` of `class` (`crate::notify`'s
    /// constants) on `key` in the connection's database, after the
    /// events its writes left pending (`expired`, `new`). When the class
    /// is off: one load and one branch.
    #[inline]
    pub fn notify(&mut self, class: u32, event: &'static str, key: &[u8]) {
        if self.shared.store.notify.wants(class) {
            let db = self.session.db;
            self.raise(db, class, event, key);
        }
    }

    /// [`Ctx::notify`] in database `db` (`MOVE`, `COPY ... DB`).
    #[inline]
    pub fn notify_in(&mut self, db: usize, class: u32, event: &'static str, key: &[u8]) {
        if self.shared.store.notify.wants(class) {
            self.raise(db, class, event, key);
        }
    }

    /// Publishes the events this command's writes left pending (`new`,
    /// `expired`) now: for a command whose key creation Redis raises before
    /// its events on other keys (`RENAME`'s `new` on the destination comes
    /// before `rename_from` on the source).
    pub fn raise_pending(&mut self) {
        if self.shared.store.notify.effective() != 0 {
            crate::notify::publish_pending(
                &self.shared.hub,
                &self.shared.store.notify,
                None,
                &mut self.session.posts,
            );
        }
    }

    #[cold]
    fn raise(&mut self, db: usize, class: u32, event: &'static str, key: &[u8]) {
        let ev = crate::notify::Event {
            db,
            class,
            name: event,
            key: key.to_vec(),
        };
        crate::notify::publish_pending(
            &self.shared.hub,
            &self.shared.store.notify,
            Some(&ev),
            &mut self.session.posts,
        );
    }
}

type Handler = fn(&mut Ctx<'_>, &[Vec<u8>]) -> CmdResult;

/// One command: name (lowercase), arity as Redis counts it (positive =
/// exact, negative = at least), handler.
pub struct Command {
    /// The command's name, lowercase.
    pub name: &'static str,
    /// Arity as Redis counts it, the name included.
    pub arity: i32,
    handler: Handler,
}

macro_rules! commands {
    ($($name:literal $arity:literal $h:path),* $(,)?) => {
        &[$(Command { name: $name, arity: $arity, handler: $h }),*]
    };
}

/// Every command the server knows.
pub static COMMANDS: &[Command] = commands![
    "ping" -1 server::ping,
    "echo" 2 server::echo,
    "hello" -1 server::hello,
    "quit" -1 server::quit,
    "select" 2 server::select,
    "command" -1 server::command,
    "info" -1 server::info,
    "dbsize" 1 server::dbsize,
    "flushdb" -1 server::flushdb,
    "flushall" -1 server::flushall,
    "type" 2 server::type_,
    "config" -2 server::config,
    "client" -2 server::client,
    "time" 1 server::time,
    "save" 1 server::save,
    "bgsave" -1 server::bgsave,
    "lastsave" 1 server::lastsave,
    "auth" -2 server::auth,
    "slowlog" -2 server::slowlog,
    "latency" -2 server::latency,
    "monitor" 1 server::monitor,
    "shutdown" -1 server::shutdown,
    "subscribe" -2 pubsub::subscribe,
    "unsubscribe" -1 pubsub::unsubscribe,
    "psubscribe" -2 pubsub::psubscribe,
    "punsubscribe" -1 pubsub::punsubscribe,
    "publish" 3 pubsub::publish,
    "pubsub" -2 pubsub::pubsub,
    "get" 2 string::get,
    "set" -3 string::set,
    "setnx" 3 string::setnx,
    "getset" 3 string::getset,
    "mget" -2 string::mget,
    "mset" -3 string::mset,
    "del" -2 keys::del,
    "unlink" -2 keys::del,
    "exists" -2 keys::exists,
    "incr" 2 string::incr,
    "incrby" 3 string::incrby,
    "decr" 2 string::decr,
    "decrby" 3 string::decrby,
    "append" 3 string::append,
    "strlen" 2 string::strlen,
    "getrange" 4 string::getrange,
    "keys" 2 keys::keys,
    "scan" -2 keys::scan,
    "expire" -3 keys::expire,
    "pexpire" -3 keys::pexpire,
    "ttl" 2 keys::ttl,
    "pttl" 2 keys::pttl,
    "persist" 2 keys::persist,
    "hset" -4 hash::hset,
    "hsetnx" 4 hash::hsetnx,
    "hget" 3 hash::hget,
    "hmget" -3 hash::hmget,
    "hmset" -4 hash::hmset,
    "hgetall" 2 hash::hgetall,
    "hdel" -3 hash::hdel,
    "hexists" 3 hash::hexists,
    "hlen" 2 hash::hlen,
    "hkeys" 2 hash::hkeys,
    "hvals" 2 hash::hvals,
    "hincrby" 4 hash::hincrby,
    "hscan" -3 hash::hscan,
    "weft.range" -3 keys::weft_range,
    "setex" 4 string::setex,
    "psetex" 4 string::psetex,
    "getex" -2 string::getex,
    "getdel" 2 string::getdel,
    "incrbyfloat" 3 string::incrbyfloat,
    "setrange" 4 string::setrange,
    "msetnx" -3 string::msetnx,
    "getbit" 3 string::getbit,
    "setbit" 4 string::setbit,
    "bitcount" -2 string::bitcount,
    "bitpos" -3 string::bitpos,
    "substr" 4 string::substr,
    "lcs" -3 string::lcs,
    "hrandfield" -2 hash::hrandfield,
    "hincrbyfloat" 4 hash::hincrbyfloat,
    "hstrlen" 3 hash::hstrlen,
    "rename" 3 keys::rename,
    "renamenx" 3 keys::renamenx,
    "copy" -3 keys::copy,
    "randomkey" 1 keys::randomkey,
    "touch" -2 keys::touch,
    "expireat" -3 keys::expireat,
    "pexpireat" -3 keys::pexpireat,
    "expiretime" 2 keys::expiretime,
    "pexpiretime" 2 keys::pexpiretime,
    "object" -2 keys::object,
    "wait" 3 repl::wait,
    "replicaof" 3 repl::replicaof,
    "slaveof" 3 repl::replicaof,
    "role" 1 repl::role,
    "replconf" -1 repl::replconf,
    "psync" -3 repl::psync,
    "sync" 1 repl::sync,
    "dump" 2 dump::dump,
    "restore" -4 dump::restore,
    "migrate" -6 dump::migrate,
    "lpush" -3 list::lpush,
    "rpush" -3 list::rpush,
    "lpushx" -3 list::lpushx,
    "rpushx" -3 list::rpushx,
    "lpop" -2 list::lpop,
    "rpop" -2 list::rpop,
    "llen" 2 list::llen,
    "lrange" 4 list::lrange,
    "lindex" 3 list::lindex,
    "lset" 4 list::lset,
    "linsert" 5 list::linsert,
    "lrem" 4 list::lrem,
    "ltrim" 4 list::ltrim,
    "lpos" -3 list::lpos,
    "lmove" 5 list::lmove,
    "rpoplpush" 3 list::rpoplpush,
    "lmpop" -4 list::lmpop,
    "blpop" -3 blocking::blpop,
    "brpop" -3 blocking::brpop,
    "blmove" 6 blocking::blmove,
    "brpoplpush" 4 blocking::brpoplpush,
    "blmpop" -5 blocking::blmpop,
    "sadd" -3 set::sadd,
    "srem" -3 set::srem,
    "smembers" 2 set::smembers,
    "sismember" 3 set::sismember,
    "smismember" -3 set::smismember,
    "scard" 2 set::scard,
    "spop" -2 set::spop,
    "srandmember" -2 set::srandmember,
    "smove" 4 set::smove,
    "sinter" -2 set::sinter,
    "sunion" -2 set::sunion,
    "sdiff" -2 set::sdiff,
    "sinterstore" -3 set::sinterstore,
    "sunionstore" -3 set::sunionstore,
    "sdiffstore" -3 set::sdiffstore,
    "sintercard" -3 set::sintercard,
    "sscan" -3 set::sscan,
    "zadd" -4 zset::zadd,
    "zincrby" 4 zset::zincrby,
    "zrem" -3 zset::zrem,
    "zscore" 3 zset::zscore,
    "zmscore" -3 zset::zmscore,
    "zcard" 2 zset::zcard,
    "zcount" 4 zset::zcount,
    "zlexcount" 4 zset::zlexcount,
    "zrange" -4 zset::zrange,
    "zrangestore" -5 zset::zrangestore,
    "zrangebyscore" -4 zset::zrangebyscore,
    "zrevrangebyscore" -4 zset::zrevrangebyscore,
    "zrangebylex" -4 zset::zrangebylex,
    "zrevrangebylex" -4 zset::zrevrangebylex,
    "zrevrange" -4 zset::zrevrange,
    "zrank" 3 zset::zrank,
    "zrevrank" 3 zset::zrevrank,
    "zpopmin" -2 zset::zpopmin,
    "zpopmax" -2 zset::zpopmax,
    "zmpop" -4 zset::zmpop,
    "bzpopmin" -3 blocking::bzpopmin,
    "bzpopmax" -3 blocking::bzpopmax,
    "bzmpop" -5 blocking::bzmpop,
    "zrandmember" -2 zset::zrandmember,
    "zremrangebyscore" 4 zset::zremrangebyscore,
    "zremrangebyrank" 4 zset::zremrangebyrank,
    "zremrangebylex" 4 zset::zremrangebylex,
    "zunion" -3 zset::zunion,
    "zinter" -3 zset::zinter,
    "zdiff" -3 zset::zdiff,
    "zunionstore" -4 zset::zunionstore,
    "zinterstore" -4 zset::zinterstore,
    "zdiffstore" -4 zset::zdiffstore,
    "zintercard" -3 zset::zintercard,
    "zscan" -3 zset::zscan,
    "multi" 1 multi::multi,
    "exec" 1 multi::exec,
    "discard" 1 multi::discard,
    "watch" -2 multi::watch,
    "unwatch" 1 multi::unwatch,
    "move" 3 multi::move_,
    "swapdb" 3 multi::swapdb,
];

fn table() -> &'static HashMap<&'static str, usize> {
    static T: OnceLock<HashMap<&'static str, usize>> = OnceLock::new();
    T.get_or_init(|| {
        COMMANDS
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name, i))
            .collect()
    })
}

/// Looks a command up by name, case-insensitively.
pub fn lookup(name: &[u8]) -> Option<&'static Command> {
    lookup_index(name).map(|i| &COMMANDS[i])
}

/// A command's index in [`COMMANDS`], by name, case-insensitively.
pub fn lookup_index(name: &[u8]) -> Option<usize> {
    if name.len() > 32 {
        return None;
    }
    let mut lower = [0u8; 32];
    let lower = &mut lower[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    let s = std::str::from_utf8(lower).ok()?;
    table().get(s).copied()
}

fn unknown_command(args: &[Vec<u8>]) -> String {
    let name = String::from_utf8_lossy(&args[0]);
    let name: String = name.chars().take(128).collect();
    let mut rest = String::new();
    for a in &args[1..] {
        let room = 128usize.saturating_sub(rest.len());
        if room == 0 {
            break;
        }
        let a = String::from_utf8_lossy(a);
        let a: String = a.chars().take(room).collect();
        rest.push_str(&format!("'{a}' "));
    }
    format!("ERR unknown command '{name}', with args beginning with: {rest}")
}

pub use coll::key_ready_now;
pub use server::count_plain;
pub use string::{answer_gets, commit_sets, is_plain_get, is_plain_set, reply_sets};

/// Runs one request, appending exactly one reply to `ctx.out` (pub/sub
/// commands append one per channel; `SHUTDOWN` none). Between `MULTI` and
/// `EXEC` a command is checked and queued (`+QUEUED`); one refused then
/// (unknown, wrong arity, not allowed) makes the `EXEC` fail.
pub fn dispatch(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) {
    let Some(name) = args.first() else {
        return;
    };
    let Some(ix) = lookup_index(name) else {
        server::refuse(ctx, None, &unknown_command(args));
        multi::flag(ctx.session);
        return;
    };
    let cmd = &COMMANDS[ix];
    let n = args.len() as i32;
    if (cmd.arity > 0 && n != cmd.arity) || (cmd.arity < 0 && n < -cmd.arity) {
        let msg = format!("ERR wrong number of arguments for '{}' command", cmd.name);
        server::refuse(ctx, Some(ix), &msg);
        multi::flag(ctx.session);
        return;
    }
    // NOAUTH, RESP2 subscribe mode.
    if let Err(msg) = server::admit(ctx, cmd) {
        server::refuse(ctx, Some(ix), &msg);
        multi::flag(ctx.session);
        return;
    }
    // A read-only replica, or one loading a full sync (one relaxed load
    // when neither); a write refused while queuing fails the EXEC, as in
    // Redis.
    if ctx.shared.repl.gated() {
        if let Err(msg) = replication_gate(ctx.shared, ix) {
            server::refuse(ctx, Some(ix), msg);
            multi::flag(ctx.session);
            return;
        }
    }
    if ctx.session.in_multi() && multi::queues(cmd) {
        if let Err(msg) = multi::queue(ctx.session, ix, args) {
            server::refuse(ctx, Some(ix), msg);
            return;
        }
        ctx.out.simple("QUEUED");
        return;
    }
    run(ctx, ix, args);
}

/// Runs command `ix` (admitted), accounting it.
fn run(ctx: &mut Ctx<'_>, ix: usize, args: &[Vec<u8>]) {
    let cmd = &COMMANDS[ix];
    let started = Instant::now();
    let mark = ctx.out.buf.len();
    let result = (cmd.handler)(ctx, args);
    if ctx.shared.store.notify.effective() != 0 {
        // What its batches raised (`expired`, `new`) and no own event
        // published yet.
        crate::notify::publish_pending(
            &ctx.shared.hub,
            &ctx.shared.store.notify,
            None,
            &mut ctx.session.posts,
        );
    }
    if let Err(CmdError(msg)) = &result {
        ctx.out.buf.truncate(mark);
        ctx.out.error(msg);
    }
    if ctx.session.repl_link.is_some() {
        // A replica's link: the sender thread owns what the replica reads.
        ctx.out.buf.truncate(mark);
    }
    server::account(ctx, ix, args, started, result.err());
}

/// What Redis's command flags say of each command in [`COMMANDS`]:
/// (`write`, `loading`).
fn flags() -> &'static [(bool, bool)] {
    static F: OnceLock<Vec<(bool, bool)>> = OnceLock::new();
    F.get_or_init(|| {
        COMMANDS
            .iter()
            .map(|c| {
                let f = meta::find(c.name).map_or(&[][..], |m| m.flags);
                // Promotion and shutdown are never refused while loading.
                let always = matches!(c.name, "replicaof" | "slaveof" | "shutdown");
                (f.contains(&"write"), always || f.contains(&"loading"))
            })
            .collect()
    })
}

/// Refuses command `ix` on a read-only replica if it writes
/// (`-READONLY`), and while a full sync loads if Redis would
/// (`-LOADING`).
fn replication_gate(shared: &Shared, ix: usize) -> Result<(), &'static str> {
    let (write, loading_ok) = flags()[ix];
    if shared.repl.loading() && !loading_ok {
        return Err("LOADING Weft is loading the dataset in memory");
    }
    if write && shared.repl.refuses_writes() {
        return Err("READONLY You can't write against a read only replica.");
    }
    Ok(())
}

/// Parses an integer as Redis's `string2ll` does: optional `-`, digits, no
/// leading zeros or `+`, no spaces, within `i64`.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits[0] == b'0' {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let d = i64::from(d - b'0');
        v = v.checked_mul(10)?;
        v = if neg {
            v.checked_sub(d)?
        } else {
            v.checked_add(d)?
        };
    }
    Some(v)
}

/// [`parse_i64`] with Redis's error.
pub fn int_arg(s: &[u8]) -> Result<i64, CmdError> {
    parse_i64(s).ok_or(CmdError(Cow::Borrowed(NOT_INT)))
}

/// An integer in `[min, max]`, as Redis's `getRangeLongFromObjectOrReply`:
/// `msg` (when given) is the error both for a non-integer and for one out
/// of range.
pub fn range_arg(s: &[u8], min: i64, max: i64, msg: Option<&'static str>) -> Result<i64, CmdError> {
    match (parse_i64(s), msg) {
        (Some(v), _) if (min..=max).contains(&v) => Ok(v),
        (_, Some(m)) => err(m),
        (None, None) => err(NOT_INT),
        (Some(_), None) => Err(CmdError(
            format!("ERR value is out of range, value must between {min} and {max}").into(),
        )),
    }
}

/// A count that must be zero or more, as Redis's
/// `getPositiveLongFromObjectOrReply` without a message.
pub fn positive_arg(s: &[u8]) -> Result<i64, CmdError> {
    range_arg(
        s,
        0,
        i64::MAX,
        Some("ERR value is out of range, must be positive"),
    )
}

/// Case-insensitive comparison of an argument with an option name.
pub fn is(arg: &[u8], name: &str) -> bool {
    arg.eq_ignore_ascii_case(name.as_bytes())
}

/// Options shared by `SCAN` and `HSCAN`.
pub struct ScanOpts {
    /// `MATCH`: a glob the keys (or fields) must match.
    pub pattern: Option<Vec<u8>>,
    /// `COUNT`: about how many entries one call examines.
    pub count: usize,
    /// `TYPE`: only keys of this type (`SCAN` only).
    pub kind: Option<Vec<u8>>,
    /// `NOVALUES`: fields without their values (`HSCAN` only).
    pub novalues: bool,
}

/// Parses `[MATCH p] [COUNT n] [TYPE t] [NOVALUES]` (TYPE for SCAN only,
/// NOVALUES for HSCAN only).
pub fn scan_opts(args: &[Vec<u8>], allow_type: bool) -> Result<ScanOpts, CmdError> {
    let mut o = ScanOpts {
        pattern: None,
        count: 10,
        kind: None,
        novalues: false,
    };
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let val = args.get(i + 1);
        if is(a, "match") && val.is_some() {
            o.pattern = val.cloned();
            i += 2;
        } else if is(a, "count") && val.is_some() {
            let n = int_arg(val.map_or(&[][..], |v| v))?;
            if n < 1 {
                return err(SYNTAX);
            }
            o.count = n.min(1 << 20) as usize;
            i += 2;
        } else if allow_type && is(a, "type") && val.is_some() {
            o.kind = val.map(|v| v.to_ascii_lowercase());
            i += 2;
        } else if !allow_type && is(a, "novalues") {
            o.novalues = true;
            i += 1;
        } else {
            return err(SYNTAX);
        }
    }
    Ok(o)
}

/// Parses a SCAN cursor as Redis does (C's `strtoul`, no leading space):
/// an optional sign and decimal digits, a negative number wrapping
/// around (`-1` is 2^64 − 1), the empty string 0; out of range or other
/// bytes: `ERR invalid cursor`.
pub fn cursor_arg(s: &[u8]) -> Result<u64, CmdError> {
    let bad = || CmdError(Cow::Borrowed("ERR invalid cursor"));
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() {
        // strtoul parses nothing: 0, accepted only if nothing follows.
        return if s.is_empty() { Ok(0) } else { Err(bad()) };
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err(bad());
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(d - b'0')))
            .ok_or_else(bad)?;
    }
    Ok(if neg { v.wrapping_neg() } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string2ll_rules() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"+1",
            b" 1",
            b"1 ",
            b"01",
            b"-0",
            b"9223372036854775808",
            b"1.5",
            b"abc",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", bad.escape_ascii().to_string());
        }
    }

    #[test]
    fn cursors_parse_as_strtoul_does() {
        assert_eq!(cursor_arg(b"0").ok(), Some(0));
        assert_eq!(cursor_arg(b"").ok(), Some(0));
        assert_eq!(cursor_arg(b"+7").ok(), Some(7));
        assert_eq!(cursor_arg(b"-1").ok(), Some(u64::MAX));
        assert_eq!(cursor_arg(b"-0").ok(), Some(0));
        assert_eq!(cursor_arg(b"18446744073709551615").ok(), Some(u64::MAX));
        for bad in [
            &b"18446744073709551616"[..],
            b" 1",
            b"1 ",
            b"x",
            b"-",
            b"+",
            b"1.5",
        ] {
            assert!(
                cursor_arg(bad).is_err(),
                "{:?}",
                bad.escape_ascii().to_string()
            );
        }
    }

    #[test]
    fn lookup_is_case_insensitive() {
        assert_eq!(lookup(b"GeT").map(|c| c.name), Some("get"));
        assert_eq!(lookup(b"WEFT.RANGE").map(|c| c.name), Some("weft.range"));
        assert!(lookup(b"nosuch").is_none());
        assert!(lookup(&[0xff; 40]).is_none());
    }

    #[test]
    fn unknown_command_wording() {
        let args: Vec<Vec<u8>> = vec![b"foo".to_vec(), b"a".to_vec(), b"b".to_vec()];
        assert_eq!(
            unknown_command(&args),
            "ERR unknown command 'foo', with args beginning with: 'a' 'b' "
        );
    }
}
