//! Connection and server commands: PING, ECHO, HELLO, AUTH, QUIT, SELECT,
//! COMMAND, INFO, DBSIZE, FLUSHDB, TYPE, CONFIG, CLIENT, TIME, SAVE,
//! BGSAVE, LASTSAVE, SLOWLOG, LATENCY, MONITOR, SHUTDOWN; and what
//! dispatch asks of every command: admission (`NOAUTH`, RESP2 subscribe
//! mode) and accounting (`INFO commandstats`, slow log, `MONITOR`).

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use weft::ReadOptions;

use super::{err, is, CmdError, CmdResult, Command, Ctx, COMMANDS, SYNTAX};
use crate::clients::ClientInfo;
use crate::deliver::Delivery;
use crate::keyspace::now_ms;
use crate::{auth, OutputLimit, Shared};

/// The Redis version Weft reports (the command set it follows).
pub const REDIS_VERSION: &str = "7.0.0";

pub fn ping(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    if !ctx.out.resp3 && ctx.session.in_pubsub() && a.len() <= 2 {
        // Subscribe mode under RESP2: a pong message.
        ctx.out.array(2);
        ctx.out.bulk(b"pong");
        ctx.out.bulk(a.get(1).map_or(&b""[..], |m| &m[..]));
        return Ok(());
    }
    match a.len() {
        1 => ctx.out.simple("PONG"),
        2 => ctx.out.bulk(&a[1]),
        _ => return err("ERR wrong number of arguments for 'ping' command"),
    }
    Ok(())
}

pub fn echo(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    ctx.out.bulk(&a[1]);
    Ok(())
}

pub fn quit(ctx: &mut Ctx<'_>, _a: &[Vec<u8>]) -> CmdResult {
    ctx.session.quit = true;
    ctx.out.ok();
    Ok(())
}

/// `SELECT n`: the connection's commands use database `n` from now on
/// (`--databases`, 16 by default, as Redis's `databases`).
pub fn select(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let n = super::parse_i64(&a[1]).ok_or(CmdError(
        "ERR value is not an integer or out of range".into(),
    ))?;
    let n = usize::try_from(n)
        .ok()
        .filter(|&n| n < ctx.shared.store.databases())
        .ok_or(CmdError("ERR DB index is out of range".into()))?;
    ctx.session.db = n;
    if let Some(info) = &ctx.session.info {
        info.db.store(n, Ordering::Relaxed);
    }
    ctx.out.ok();
    Ok(())
}

/// Admits command `cmd` for this connection or says why not: `NOAUTH`
/// before authentication (but `AUTH`, `HELLO`, `QUIT`), and, under RESP2
/// while subscribed, anything but the pub/sub commands, `PING` and
/// `QUIT`. Two field reads per command.
pub(crate) fn admit(ctx: &Ctx<'_>, cmd: &Command) -> Result<(), String> {
    if !ctx.session.authenticated && !matches!(cmd.name, "auth" | "hello" | "quit") {
        return Err(auth::NOAUTH.into());
    }
    if !ctx.out.resp3
        && ctx.session.in_pubsub()
        && !matches!(
            cmd.name,
            "subscribe" | "unsubscribe" | "psubscribe" | "punsubscribe" | "ping" | "quit"
        )
    {
        return Err(format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET \
             are allowed in this context",
            cmd.name
        ));
    }
    Ok(())
}

/// Replies `msg` to a command refused before it ran, and counts it
/// (`rejected_calls` of command `ix`, `errorstats`).
pub(crate) fn refuse(ctx: &mut Ctx<'_>, ix: Option<usize>, msg: &str) {
    ctx.out.error(msg);
    let st = ctx.shared.stats.for_loop(ctx.session.me.loop_ix as usize);
    if let Some(ix) = ix {
        st.rejected(ix);
    }
    st.error(msg);
}

/// Accounts one command that ran: per-loop counters, the error it replied,
/// the client's last command, the slow log, the latency monitor and the
/// `MONITOR` feed. Without monitors and slow commands this is a clock
/// read, three stores to this loop's own counters and two relaxed loads.
pub(crate) fn account(
    ctx: &mut Ctx<'_>,
    ix: usize,
    args: &[Vec<u8>],
    started: Instant,
    error: Option<CmdError>,
) {
    let took = started.elapsed();
    let usec = took.as_micros() as u64;
    let sh = ctx.shared;
    let st = sh.stats.for_loop(ctx.session.me.loop_ix as usize);
    st.ran(ix, 1, usec, error.is_some());
    if let Some(CmdError(msg)) = &error {
        st.error(msg);
    }
    let addr = match &ctx.session.info {
        Some(info) => {
            info.last_cmd.store(ix + 1, Ordering::Relaxed);
            info.addr.as_str()
        }
        None => "",
    };
    sh.stats.maybe_slow(usec, args, addr, &ctx.session.name);
    sh.stats.maybe_latency("command", took);
    if sh.clients.monitoring() && !matches!(COMMANDS[ix].name, "auth" | "hello" | "monitor") {
        let line: std::sync::Arc<[u8]> = monitor_line(addr, args).into();
        for m in sh.clients.monitors().iter() {
            ctx.session
                .posts
                .push((*m, Delivery::Monitor(std::sync::Arc::clone(&line))));
        }
    }
}

/// A `MONITOR` line: `+<unix s>.<µs> [0 <addr>] "arg" ...`, arguments
/// quoted as Redis's `sdscatrepr` does.
fn monitor_line(addr: &str, args: &[Vec<u8>]) -> Vec<u8> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut s = format!("+{}.{:06} [0 {addr}]", now.as_secs(), now.subsec_micros());
    for a in args {
        s.push_str(" \"");
        for &b in a {
            match b {
                b'\\' => s.push_str("\\\\"),
                b'"' => s.push_str("\\\""),
                b'\n' => s.push_str("\\n"),
                b'\r' => s.push_str("\\r"),
                b'\t' => s.push_str("\\t"),
                0x07 => s.push_str("\\a"),
                0x08 => s.push_str("\\b"),
                b' '..=b'~' => s.push(b as char),
                _ => {
                    let _ = write!(s, "\\x{b:02x}");
                }
            }
        }
        s.push('"');
    }
    s.push_str("\r\n");
    s.into_bytes()
}

/// Counts the plain `GET`/`SET`/`MSET` requests the connections answer
/// outside [`super::dispatch`] (batched engine reads and writes), each
/// taking `each` (its share of the batch), for the client at `addr` named
/// `name`; logs them if the slow log wants them.
pub fn count_plain(
    shared: &Shared,
    loop_ix: usize,
    reqs: &[Vec<Vec<u8>>],
    each: Duration,
    failed: bool,
    (addr, name): (&str, &[u8]),
) {
    static IX: OnceLock<[usize; 3]> = OnceLock::new();
    let ix = IX.get_or_init(|| {
        let i = |n: &[u8]| super::lookup_index(n).unwrap_or(usize::MAX);
        [i(b"get"), i(b"set"), i(b"mset")]
    });
    let st = shared.stats.for_loop(loop_ix);
    let usec = each.as_micros() as u64;
    for r in reqs {
        let cmd = r.first().map_or(&[][..], |n| &n[..]);
        let i = if is(cmd, "get") {
            ix[0]
        } else if is(cmd, "set") {
            ix[1]
        } else {
            ix[2]
        };
        st.ran(i, 1, usec, failed);
        shared.stats.maybe_slow(usec, r, addr, name);
    }
}

/// Whether an authentication attempt passes, slowing failures
/// ([`crate::auth`]): a delayed reply holds the connection.
fn auth_attempt(ctx: &mut Ctx<'_>, user: Option<&[u8]>, pass: &[u8]) -> bool {
    let auth = &ctx.shared.auth;
    let ok = auth.check(user, pass);
    if !ok {
        ctx.session.auth_failures = ctx.session.auth_failures.saturating_add(1);
    }
    if auth.required() {
        let d = auth.delay(!ok, ctx.session.auth_failures);
        if !d.is_zero() {
            ctx.session.hold_until = Some(Instant::now() + d);
        }
    } else if !ok {
        auth.failures.fetch_add(1, Ordering::Relaxed);
    }
    if ok {
        ctx.session.authenticated = true;
    }
    ok
}

/// `AUTH [username] password`.
pub fn auth(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (user, pass) = match a.len() {
        2 => (None, &a[1]),
        3 => (Some(&a[1][..]), &a[2]),
        _ => return err(SYNTAX),
    };
    if user.is_none() && !ctx.shared.auth.required() {
        return err(
            "ERR AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?",
        );
    }
    if !auth_attempt(ctx, user, pass) {
        return err(auth::WRONGPASS);
    }
    ctx.out.ok();
    Ok(())
}

pub fn hello(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let mut proto = None;
    let mut i = 1;
    if a.len() > 1 {
        let v = super::parse_i64(&a[1]).ok_or(CmdError(
            "ERR Protocol version is not an integer or out of range".into(),
        ))?;
        if v != 2 && v != 3 {
            return err("NOPROTO unsupported protocol version");
        }
        proto = Some(v);
        i = 2;
    }
    let mut name = None;
    let mut creds = None;
    while i < a.len() {
        if is(&a[i], "auth") && i + 2 < a.len() {
            creds = Some((a[i + 1].clone(), a[i + 2].clone()));
            i += 3;
        } else if is(&a[i], "setname") && i + 1 < a.len() {
            name = Some(a[i + 1].clone());
            i += 2;
        } else {
            return Err(CmdError(
                format!(
                    "ERR Syntax error in HELLO option '{}'",
                    String::from_utf8_lossy(&a[i])
                )
                .into(),
            ));
        }
    }
    if let Some((user, pass)) = creds {
        if !auth_attempt(ctx, Some(&user), &pass) {
            return err(auth::WRONGPASS);
        }
    } else if !ctx.session.authenticated {
        return err(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and \
             select the RESP protocol version at the same time",
        );
    }
    if let Some(p) = proto {
        ctx.out.resp3 = p == 3;
        if let Some(info) = &ctx.session.info {
            info.resp.store(p as u8, Ordering::Relaxed);
        }
    }
    if let Some(n) = name {
        set_name(ctx, n);
    }
    let out = &mut *ctx.out;
    out.map(7);
    out.bulk(b"server");
    out.bulk(b"redis");
    out.bulk(b"version");
    out.bulk(REDIS_VERSION.as_bytes());
    out.bulk(b"proto");
    out.int(if out.resp3 { 3 } else { 2 });
    out.bulk(b"id");
    out.int(ctx.session.id as i64);
    out.bulk(b"mode");
    out.bulk(b"standalone");
    out.bulk(b"role");
    out.bulk(if ctx.shared.repl.is_replica() {
        b"replica".as_slice()
    } else {
        b"master"
    });
    out.bulk(b"modules");
    out.array(0);
    Ok(())
}

fn set_name(ctx: &mut Ctx<'_>, n: Vec<u8>) {
    if let Some(info) = &ctx.session.info {
        info.name.lock().clone_from(&n);
    }
    ctx.session.name = n;
}

pub fn command(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    super::meta::command(ctx, a)
}

/// Resident set size of this process, in bytes (0 if unknown).
pub fn rss_bytes() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions; it returns -1 on error.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).unwrap_or(4096)
}

/// The sections `INFO` (no argument, `default`) returns, in Redis's order;
/// `all` adds `commandstats`; `everything` is `all` (Weft has no modules).
const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
    "weft",
];

fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.2}G", b / (1u64 << 30) as f64)
    } else if b >= (1u64 << 20) as f64 {
        format!("{:.2}M", b / (1u64 << 20) as f64)
    } else if b >= 1024.0 {
        format!("{:.2}K", b / 1024.0)
    } else {
        format!("{bytes}B")
    }
}

/// User and system CPU seconds of `who` (`RUSAGE_SELF`, `_CHILDREN`).
fn cpu_seconds(who: libc::c_int) -> (f64, f64) {
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a live rusage the call fills; `who` is a valid
    // RUSAGE_* constant.
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(ru.ru_utime), secs(ru.ru_stime))
}

/// Peak resident set size of this process, bytes.
fn peak_rss_bytes() -> u64 {
    // SAFETY: as in `cpu_seconds`.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as in `cpu_seconds`.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0;
    }
    (ru.ru_maxrss as u64) * 1024
}

fn section(t: &mut String, sh: &Shared, name: &str) {
    match name {
        "server" => {
            let up = sh.started.elapsed().as_secs();
            let now_us = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros());
            let exe = std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            let _ = write!(
                t,
                "# Server\r\nredis_version:{REDIS_VERSION}\r\nredis_git_sha1:00000000\r\n\
                 redis_git_dirty:0\r\nredis_build_id:0\r\nredis_mode:standalone\r\n\
                 weft_version:{}\r\nos:{} {}\r\narch_bits:64\r\nmonotonic_clock:POSIX clock_gettime\r\n\
                 multiplexing_api:epoll\r\natomicvar_api:c11-builtin\r\ngcc_version:0.0.0\r\n\
                 process_id:{}\r\nprocess_supervised:no\r\nrun_id:{}\r\ntcp_port:{}\r\n\
                 server_time_usec:{now_us}\r\nuptime_in_seconds:{up}\r\nuptime_in_days:{}\r\n\
                 hz:10\r\nconfigured_hz:10\r\nlru_clock:{}\r\nexecutable:{exe}\r\nconfig_file:\r\n\
                 io_threads_active:0\r\nevent_loops:{}\r\nsync:{}\r\ndir:{}\r\n\r\n",
                env!("CARGO_PKG_VERSION"),
                std::env::consts::OS,
                std::env::consts::ARCH,
                std::process::id(),
                sh.run_id,
                sh.port,
                up / 86400,
                (now_us / 1_000_000) as u64 & ((1 << 24) - 1),
                sh.postal.loops(),
                sh.config.sync.name(),
                sh.config.dir.display(),
            );
        }
        "clients" => {
            let clients = sh.clients.all();
            let pubsub = clients.iter().filter(|c| c.is_pubsub()).count();
            let (blocked, timed) = sh.waiters.parked_clients();
            let blocking_keys = sh.waiters.keys_waited_on();
            let _ = write!(
                t,
                "# Clients\r\nconnected_clients:{}\r\ncluster_connections:0\r\nmaxclients:{}\r\n\
                 client_recent_max_input_buffer:0\r\nclient_recent_max_output_buffer:{}\r\n\
                 blocked_clients:{blocked}\r\ntracking_clients:0\r\n\
                 clients_in_timeout_table:{timed}\r\ntotal_blocking_keys:{blocking_keys}\r\n\
                 pubsub_clients:{pubsub}\r\n\r\n",
                // Replicas' links are not counted, as in Redis.
                (sh.counters.connected.load(Ordering::Relaxed))
                    .saturating_sub(clients.iter().filter(|c| c.kind() == "replica").count() as u64),
                sh.runtime.maxclients.load(Ordering::Relaxed),
                clients
                    .iter()
                    .map(|c| c.omem.load(Ordering::Relaxed))
                    .max()
                    .unwrap_or(0),
            );
        }
        "memory" => {
            let rss = rss_bytes();
            let peak = peak_rss_bytes().max(rss);
            let _ = write!(
                t,
                "# Memory\r\nused_memory:{rss}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\n\
                 used_memory_rss_human:{}\r\nused_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\n\
                 maxmemory:0\r\nmaxmemory_human:0B\r\nmaxmemory_policy:noeviction\r\n\
                 mem_fragmentation_ratio:1.00\r\nmem_allocator:libc\r\n\r\n",
                human(rss),
                human(rss),
                human(peak),
            );
        }
        "persistence" => {
            let saves = &sh.saves;
            // A snapshot's sequence is the visible one, without the
            // directory listing `stats` makes.
            let sequence = sh.store.db.snapshot().sequence();
            let changes = sequence.saturating_sub(saves.last_sequence());
            let _ = write!(
                t,
                "# Persistence\r\nloading:0\r\nasync_loading:0\r\naof_enabled:{}\r\n\
                 aof_rewrite_in_progress:0\r\nrdb_changes_since_last_save:{changes}\r\n\
                 rdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\n\
                 weft_save_dir:{}\r\n\r\n",
                u8::from(sh.config.sync != crate::SyncMode::No),
                u8::from(saves.in_progress()),
                saves.last_save(),
                if saves.last_ok() { "ok" } else { "err" },
                saves.dir().display(),
            );
        }
        "stats" => {
            let c = &sh.counters;
            let errors: u64 = sh.stats.errors().iter().map(|(_, n)| n).sum();
            let _ = write!(
                t,
                "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\n\
                 instantaneous_ops_per_sec:0\r\ntotal_net_input_bytes:{}\r\n\
                 rejected_connections:{}\r\nexpired_keys:{}\r\nevicted_keys:0\r\n\
                 pubsub_channels:{}\r\npubsub_patterns:{}\r\ntotal_error_replies:{errors}\r\n\
                 acl_access_denied_auth:{}\r\nsync_full:{}\r\nsync_partial_ok:{}\r\n\
                 sync_partial_err:{}\r\n\r\n",
                c.connections.load(Ordering::Relaxed),
                sh.commands_processed(),
                sh.stats.net_input(),
                c.rejected.load(Ordering::Relaxed),
                sh.store.expired_keys.load(Ordering::Relaxed),
                sh.hub.numchannels(),
                sh.hub.numpat(),
                sh.auth.failures.load(Ordering::Relaxed),
                sh.repl.sync_full.load(Ordering::Relaxed),
                sh.repl.sync_partial_ok.load(Ordering::Relaxed),
                sh.repl.sync_partial_err.load(Ordering::Relaxed),
            );
        }
        "replication" => crate::repl::info(sh, t),
        "cpu" => {
            let (user, sys) = cpu_seconds(libc::RUSAGE_SELF);
            let (cuser, csys) = cpu_seconds(libc::RUSAGE_CHILDREN);
            let _ = write!(
                t,
                "# CPU\r\nused_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\n\
                 used_cpu_sys_children:{csys:.6}\r\nused_cpu_user_children:{cuser:.6}\r\n\r\n"
            );
        }
        "modules" => t.push_str("# Modules\r\n\r\n"),
        "errorstats" => {
            t.push_str("# Errorstats\r\n");
            for (code, n) in sh.stats.errors() {
                let _ = write!(t, "errorstat_{code}:count={n}\r\n");
            }
            t.push_str("\r\n");
        }
        "commandstats" => {
            t.push_str("# Commandstats\r\n");
            for (c, s) in COMMANDS.iter().zip(sh.stats.commands()) {
                if s.calls == 0 && s.rejected == 0 {
                    continue;
                }
                let per = if s.calls == 0 {
                    0.0
                } else {
                    s.usec as f64 / s.calls as f64
                };
                let _ = write!(
                    t,
                    "cmdstat_{}:calls={},usec={},usec_per_call={per:.2},rejected_calls={},\
                     failed_calls={}\r\n",
                    c.name, s.calls, s.usec, s.rejected, s.failed
                );
            }
            t.push_str("\r\n");
        }
        "cluster" => t.push_str("# Cluster\r\ncluster_enabled:0\r\n\r\n"),
        "keyspace" => {
            t.push_str("# Keyspace\r\n");
            for db in 0..sh.store.databases() {
                let (keys, expires) = sh.store.key_counts(db);
                if keys > 0 {
                    let _ = write!(t, "db{db}:keys={keys},expires={expires},avg_ttl=0\r\n");
                }
            }
            t.push_str("\r\n");
        }
        "weft" => weft_section(t, sh),
        _ => {}
    }
}

/// `INFO [section ...]`: Redis's sections (`default`, `all`,
/// `everything` as Redis groups them) and Weft's engine section `weft`.
pub fn info(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let sh = ctx.shared;
    let mut names: Vec<&'static str> = Vec::new();
    let mut add = |n: &'static str| {
        if !names.contains(&n) {
            names.push(n);
        }
    };
    let all_sections = || {
        DEFAULT_SECTIONS
            .iter()
            .copied()
            .chain(std::iter::once("commandstats"))
    };
    if a.len() == 1 {
        DEFAULT_SECTIONS.iter().for_each(|s| add(s));
    }
    for w in &a[1..] {
        let w = String::from_utf8_lossy(w).to_ascii_lowercase();
        match w.as_str() {
            "default" => DEFAULT_SECTIONS.iter().for_each(|s| add(s)),
            "all" | "everything" => all_sections().for_each(&mut add),
            other => {
                if let Some(s) = all_sections().find(|s| *s == other) {
                    add(s);
                }
            }
        }
    }
    // Redis's order whatever the order asked.
    let mut t = String::new();
    for s in all_sections() {
        if names.contains(&s) {
            section(&mut t, sh, s);
        }
    }
    // Drop the blank line after the last section, as Redis does.
    if t.ends_with("\r\n\r\n") {
        t.truncate(t.len() - 2);
    }
    ctx.out.verbatim(&t);
    Ok(())
}

fn weft_section(t: &mut String, sh: &Shared) {
    let s = sh.store.db.stats();
    let _ = write!(
        t,
        "# Weft\r\nsequence:{}\r\nmemtable_kind:{}\r\nactive_memtable_bytes:{}\r\n\
         immutable_memtables:{}\r\nimmutable_memtable_bytes:{}\r\nlive_snapshots:{}\r\n\
         partitions:{}\r\nunsorted_tables:{}\r\nsorted_tables:{}\r\nuser_bytes_written:{}\r\n\
         wal_bytes_written:{}\r\nflush_bytes_written:{}\r\nmerge_bytes_written:{}\r\n\
         value_log_bytes_written:{}\r\ngc_bytes_written:{}\r\nsplit_bytes_written:{}\r\n\
         get_bytes_read:{}\r\nscan_bytes_read:{}\r\n\
         write_amplification:{:.3}\r\nblock_cache_capacity:{}\r\nblock_cache_usage:{}\r\n\
         block_cache_hits:{}\r\nblock_cache_misses:{}\r\nflushes:{}\r\nmerges:{}\r\n\
         write_slowdowns:{}\r\nwrite_stalls:{}\r\nwrite_stall_micros:{}\r\n\r\n",
        s.sequence,
        s.memtable_kind,
        s.active_memtable_bytes,
        s.immutable_memtables,
        s.immutable_memtable_bytes,
        s.live_snapshots,
        s.partitions.len(),
        s.partitions
            .iter()
            .map(|p| p.unsorted_tables)
            .sum::<usize>(),
        s.partitions.iter().map(|p| p.sorted_tables).sum::<usize>(),
        s.user_bytes_written,
        s.wal_bytes_written,
        s.flush_bytes_written,
        s.merge_bytes_written,
        s.value_log_bytes_written,
        s.gc_bytes_written,
        s.split_bytes_written,
        s.get_bytes_read,
        s.scan_bytes_read,
        s.write_amplification,
        s.block_cache.capacity,
        s.block_cache.usage,
        s.block_cache.hits,
        s.block_cache.misses,
        s.flushes,
        s.merges,
        s.write_slowdowns,
        s.write_stalls,
        s.write_stall_micros,
    );
}

pub fn dbsize(ctx: &mut Ctx<'_>, _a: &[Vec<u8>]) -> CmdResult {
    let (keys, _) = ctx.ks().key_counts();
    ctx.out.int(keys as i64);
    Ok(())
}

/// `FLUSHDB [SYNC|ASYNC]`: empties the selected database.
pub fn flushdb(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    flush(ctx, a, false)
}

/// `FLUSHALL [SYNC|ASYNC]`: empties every database, in one atomic batch.
pub fn flushall(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    flush(ctx, a, true)
}

fn flush(ctx: &mut Ctx<'_>, a: &[Vec<u8>], all: bool) -> CmdResult {
    match a.get(1) {
        None => {}
        Some(m) if a.len() == 2 && (is(m, "sync") || is(m, "async")) => {}
        Some(_) => return err(SYNTAX),
    }
    ctx.ks().flush(all)?;
    ctx.out.ok();
    Ok(())
}

pub fn type_(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let t = match ctx.ks().get(&a[1], &ReadOptions::new())? {
        Some(e) => e.meta.kind.name(),
        None => "none",
    };
    ctx.out.simple(t);
    Ok(())
}

/// A setting `CONFIG SET` can change, parsed.
enum NewValue {
    Password(Vec<u8>),
    MaxClients(usize),
    TimeoutSecs(u64),
    SlowerThan(i64),
    SlowMaxLen(usize),
    LatencyMs(u64),
    PubsubLimit(OutputLimit),
    ReplicaReadOnly(bool),
    ReplicaPriority(u64),
    BacklogSize(u64),
    Notify(u32),
    MasterAuth(Option<String>),
}

/// The parameters `CONFIG GET` knows, with their values now.
fn config_params(sh: &Shared) -> Vec<(&'static str, String)> {
    let c = &sh.config;
    let pw = sh
        .auth
        .password()
        .map(|p| String::from_utf8_lossy(&p).into_owned())
        .unwrap_or_default();
    let l = sh.runtime.pubsub_limit();
    vec![
        ("appendfsync", c.sync.name().into()),
        (
            "appendonly",
            if c.sync == crate::SyncMode::No {
                "no"
            } else {
                "yes"
            }
            .into(),
        ),
        ("bind", c.bind.clone()),
        (
            "client-output-buffer-limit",
            format!(
                "normal 0 0 0 slave 268435456 67108864 60 pubsub {} {} {}",
                l.hard, l.soft, l.soft_seconds
            ),
        ),
        ("client-query-buffer-limit", c.max_query_buffer.to_string()),
        ("cluster-enabled", "no".into()),
        ("databases", sh.store.databases().to_string()),
        ("dir", c.dir.display().to_string()),
        ("io-threads", sh.postal.loops().to_string()),
        (
            "latency-monitor-threshold",
            sh.stats
                .latency_threshold_ms
                .load(Ordering::Relaxed)
                .to_string(),
        ),
        (
            "maxclients",
            sh.runtime.maxclients.load(Ordering::Relaxed).to_string(),
        ),
        (
            "masterauth",
            sh.repl.masterauth.lock().clone().unwrap_or_default(),
        ),
        ("maxmemory", "0".into()),
        ("maxmemory-policy", "noeviction".into()),
        (
            "notify-keyspace-events",
            crate::notify::format(sh.store.notify.get()),
        ),
        ("port", sh.port.to_string()),
        ("protected-mode", "no".into()),
        ("proto-max-bulk-len", c.max_bulk.to_string()),
        ("requirepass", pw),
        (
            "replica-priority",
            sh.repl.priority.load(Ordering::Relaxed).to_string(),
        ),
        (
            "replica-read-only",
            yes_no(sh.repl.read_only.load(Ordering::Relaxed)).into(),
        ),
        (
            "repl-backlog-size",
            sh.repl.backlog_size.load(Ordering::Relaxed).to_string(),
        ),
        ("repl-timeout", "60".into()),
        ("save", String::new()),
        (
            "slave-priority",
            sh.repl.priority.load(Ordering::Relaxed).to_string(),
        ),
        (
            "slave-read-only",
            yes_no(sh.repl.read_only.load(Ordering::Relaxed)).into(),
        ),
        (
            "slowlog-log-slower-than",
            sh.stats
                .slowlog_slower_than
                .load(Ordering::Relaxed)
                .to_string(),
        ),
        (
            "slowlog-max-len",
            sh.stats.slowlog_max_len.load(Ordering::Relaxed).to_string(),
        ),
        (
            "timeout",
            sh.runtime.timeout().map_or(0, |d| d.as_secs()).to_string(),
        ),
    ]
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// A memory size as Redis's config reads it: `123`, `1k` (1000), `1kb`
/// (1024), `m`/`mb`, `g`/`gb`.
fn parse_memory(s: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(s).ok()?.to_ascii_lowercase();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(mul)
}

fn config_value(sh: &Shared, name: &str, v: &[u8]) -> Result<NewValue, CmdError> {
    let bad = |why: &str| {
        CmdError(
            format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}").into(),
        )
    };
    let int = || {
        std::str::from_utf8(v)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .ok_or_else(|| bad("argument couldn't be parsed into an integer"))
    };
    let non_neg = || {
        let n = int()?;
        u64::try_from(n)
            .map_err(|_| bad("argument must be between 0 and 9223372036854775807 inclusive"))
    };
    Ok(match name {
        "requirepass" => NewValue::Password(v.to_vec()),
        // Empty: none, as Redis's `masterauth ""`.
        "masterauth" => NewValue::MasterAuth(
            (!v.is_empty())
                .then(|| String::from_utf8(v.to_vec()))
                .transpose()
                .map_err(|_| bad("argument must be UTF-8"))?,
        ),
        "maxclients" => {
            let n = non_neg()?;
            if n == 0 {
                return Err(bad("argument must be between 1 and 4294967295 inclusive"));
            }
            NewValue::MaxClients(n as usize)
        }
        "timeout" => NewValue::TimeoutSecs(non_neg()?),
        "slowlog-log-slower-than" => NewValue::SlowerThan(int()?),
        "slowlog-max-len" => NewValue::SlowMaxLen(non_neg()? as usize),
        "latency-monitor-threshold" => NewValue::LatencyMs(non_neg()?),
        "notify-keyspace-events" => {
            NewValue::Notify(crate::notify::parse(v).ok_or_else(|| bad(crate::notify::INVALID))?)
        }
        "client-output-buffer-limit" => {
            let words: Vec<&[u8]> = v.split(|&b| b == b' ').filter(|w| !w.is_empty()).collect();
            if words.is_empty() || !words.len().is_multiple_of(4) {
                return Err(bad(
                    "Wrong number of arguments in buffer limit configuration.",
                ));
            }
            let mut limit = sh.runtime.pubsub_limit();
            for w in words.chunks(4) {
                let class = String::from_utf8_lossy(w[0]).to_ascii_lowercase();
                if !matches!(class.as_str(), "normal" | "slave" | "replica" | "pubsub") {
                    return Err(bad(
                        "Invalid client class specified in buffer limit configuration.",
                    ));
                }
                let hard = parse_memory(w[1]);
                let soft = parse_memory(w[2]);
                let secs = std::str::from_utf8(w[3])
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok());
                let (Some(hard), Some(soft), Some(secs)) = (hard, soft, secs) else {
                    return Err(bad("Error in hard, soft or soft_seconds setting in buffer limit configuration."));
                };
                // Only the pub/sub class is enforced; the others have no
                // limits here (departure: DESIGN).
                if class == "pubsub" {
                    limit = OutputLimit {
                        hard,
                        soft,
                        soft_seconds: secs,
                    };
                }
            }
            NewValue::PubsubLimit(limit)
        }
        "replica-read-only" | "slave-read-only" => {
            if v.eq_ignore_ascii_case(b"yes") {
                NewValue::ReplicaReadOnly(true)
            } else if v.eq_ignore_ascii_case(b"no") {
                NewValue::ReplicaReadOnly(false)
            } else {
                return Err(bad("argument must be 'yes' or 'no'"));
            }
        }
        "replica-priority" | "slave-priority" => NewValue::ReplicaPriority(non_neg()?),
        "repl-backlog-size" => NewValue::BacklogSize(
            parse_memory(v).ok_or_else(|| bad("argument must be a memory value"))?,
        ),
        _ => return Err(bad("can't set immutable config")),
    })
}

fn apply(sh: &Shared, v: NewValue) {
    match v {
        NewValue::Password(p) => sh.auth.set_password(Some(&p)),
        NewValue::MaxClients(n) => sh.runtime.maxclients.store(n, Ordering::Relaxed),
        NewValue::TimeoutSecs(s) => sh
            .runtime
            .timeout_ms
            .store(s.saturating_mul(1000), Ordering::Relaxed),
        NewValue::SlowerThan(n) => sh.stats.slowlog_slower_than.store(n, Ordering::Relaxed),
        NewValue::SlowMaxLen(n) => sh.stats.slowlog_max_len.store(n, Ordering::Relaxed),
        NewValue::LatencyMs(n) => sh.stats.latency_threshold_ms.store(n, Ordering::Relaxed),
        NewValue::Notify(f) => sh.store.notify.store(f),
        NewValue::PubsubLimit(l) => sh.runtime.set_pubsub_limit(l),
        NewValue::ReplicaReadOnly(on) => {
            sh.repl.read_only.store(on, Ordering::Relaxed);
            sh.repl.update_gate();
        }
        NewValue::ReplicaPriority(n) => sh.repl.priority.store(n, Ordering::Relaxed),
        NewValue::BacklogSize(n) => sh.repl.backlog_size.store(n, Ordering::Relaxed),
        NewValue::MasterAuth(pw) => *sh.repl.masterauth.lock() = pw,
    }
}

/// `CONFIG GET pattern...`, `CONFIG SET name value [name value ...]`
/// (all or nothing), `CONFIG RESETSTAT`, `CONFIG HELP`.
pub fn config(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let sh = ctx.shared;
    let sub = &a[1];
    if is(sub, "get") {
        if a.len() < 3 {
            return err("ERR wrong number of arguments for 'config|get' command");
        }
        let params = config_params(sh);
        let hits: Vec<&(&str, String)> = params
            .iter()
            .filter(|(name, _)| {
                a[2..]
                    .iter()
                    .any(|p| crate::glob::matches(&p.to_ascii_lowercase(), name.as_bytes()))
            })
            .collect();
        ctx.out.map(hits.len());
        for (n, v) in hits {
            ctx.out.bulk(n.as_bytes());
            ctx.out.bulk(v.as_bytes());
        }
    } else if is(sub, "set") {
        if a.len() < 4 || !a.len().is_multiple_of(2) {
            return err("ERR wrong number of arguments for 'config|set' command");
        }
        let known = config_params(sh);
        let mut values = Vec::new();
        for pair in a[2..].chunks(2) {
            let name = String::from_utf8_lossy(&pair[0]).to_ascii_lowercase();
            let Some((name, _)) = known.iter().find(|(n, _)| *n == name) else {
                return Err(CmdError(
                    format!(
                        "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
                        String::from_utf8_lossy(&pair[0])
                    )
                    .into(),
                ));
            };
            values.push(config_value(sh, name, &pair[1])?);
        }
        for v in values {
            apply(sh, v);
        }
        ctx.out.ok();
    } else if is(sub, "resetstat") && a.len() == 2 {
        sh.stats.reset();
        ctx.out.ok();
    } else if is(sub, "rewrite") && a.len() == 2 {
        return err("ERR The server is running without a config file");
    } else if is(sub, "help") && a.len() == 2 {
        help(
            ctx.out,
            &[
                "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "GET <pattern>",
                "    Return parameters matching the glob-like <pattern> and their values.",
                "SET <directive> <value>",
                "    Set the configuration <directive> to <value>.",
                "RESETSTAT",
                "    Reset statistics reported by the INFO command.",
                "HELP",
                "    Print this help.",
            ],
        );
    } else {
        return Err(unknown_sub(sub, "CONFIG"));
    }
    Ok(())
}

fn help(out: &mut crate::resp::Out, lines: &[&str]) {
    out.array(lines.len());
    for l in lines {
        out.simple(l);
    }
}

fn unknown_sub(sub: &[u8], cmd: &str) -> CmdError {
    CmdError(
        format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try {cmd} HELP.",
            String::from_utf8_lossy(sub)
        )
        .into(),
    )
}

/// Which clients a `CLIENT KILL` (new form) or `CLIENT LIST` filter keeps.
#[derive(Default)]
struct ClientFilter {
    ids: Vec<u64>,
    addr: Option<String>,
    laddr: Option<String>,
    /// A [`ClientInfo::kind`], or `master`.
    kind: Option<&'static str>,
    max_age: Option<u64>,
    skip_me: bool,
}

impl ClientFilter {
    fn keeps(&self, c: &ClientInfo, me: u64) -> bool {
        if self.skip_me && c.at.id == me {
            return false;
        }
        if !self.ids.is_empty() && !self.ids.contains(&c.at.id) {
            return false;
        }
        if self.addr.as_ref().is_some_and(|a| *a != c.addr) {
            return false;
        }
        if self.laddr.as_ref().is_some_and(|a| *a != c.laddr) {
            return false;
        }
        if self.kind.is_some_and(|k| k != c.kind()) {
            return false;
        }
        if self
            .max_age
            .is_some_and(|m| c.created.elapsed().as_secs() < m)
        {
            return false;
        }
        true
    }
}

fn parse_filter(args: &[Vec<u8>], for_kill: bool) -> Result<ClientFilter, CmdError> {
    let mut f = ClientFilter {
        skip_me: for_kill,
        ..ClientFilter::default()
    };
    let mut i = 0;
    while i < args.len() {
        let opt = &args[i];
        let Some(v) = args.get(i + 1) else {
            return err(SYNTAX);
        };
        let text = String::from_utf8_lossy(v).into_owned();
        if is(opt, "id") {
            // LIST takes several ids; KILL one per ID.
            let mut j = i + 1;
            while let Some(id) = args.get(j).and_then(|a| super::parse_i64(a)) {
                if id <= 0 {
                    return err("ERR client-id should be greater than 0");
                }
                f.ids.push(id as u64);
                j += 1;
                if for_kill {
                    break;
                }
            }
            if j == i + 1 {
                return err("ERR client-id should be greater than 0");
            }
            i = j;
            continue;
        } else if is(opt, "addr") && for_kill {
            f.addr = Some(text);
        } else if is(opt, "laddr") && for_kill {
            f.laddr = Some(text);
        } else if is(opt, "type") {
            f.kind = Some(match text.to_ascii_lowercase().as_str() {
                "normal" => "normal",
                "pubsub" => "pubsub",
                "replica" | "slave" => "replica",
                "master" => "master",
                _ => return Err(CmdError(format!("ERR Unknown client type '{text}'").into())),
            });
        } else if is(opt, "user") && for_kill {
            if text != "default" {
                return Err(CmdError(format!("ERR No such user '{text}'").into()));
            }
        } else if is(opt, "skipme") && for_kill {
            f.skip_me = match text.to_ascii_lowercase().as_str() {
                "yes" => true,
                "no" => false,
                _ => return err(SYNTAX),
            };
        } else if is(opt, "maxage") && for_kill {
            f.max_age = Some(
                super::parse_i64(v)
                    .and_then(|n| u64::try_from(n).ok())
                    .ok_or(CmdError(super::NOT_INT.into()))?,
            );
        } else {
            return err(SYNTAX);
        }
        i += 2;
    }
    Ok(f)
}

/// Kills the clients `targets`: marks them (no longer listed) and posts
/// each a [`Delivery::Kill`]; this connection, if among them, closes
/// after its reply.
fn kill(ctx: &mut Ctx<'_>, targets: &[std::sync::Arc<ClientInfo>]) {
    for c in targets {
        if c.at.id == ctx.session.id {
            ctx.session.quit = true;
            continue;
        }
        c.killed.store(true, Ordering::Relaxed);
        ctx.session.posts.push((c.at, Delivery::Kill));
    }
}

/// `CLIENT UNBLOCK id [TIMEOUT|ERROR]`: 1 if client `id` is parked in a
/// blocking command (`BLPOP`, `BZPOPMIN`, ...), which is then answered
/// as if timed out (or with `-UNBLOCKED`), else 0. The target's loop does
/// the unparking ([`Delivery::Unblock`]); a client served before the
/// delivery arrives keeps what it got.
fn unblock(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    // Redis checks the reason before the id.
    let error = match a.get(3) {
        None => false,
        Some(r) if is(r, "timeout") => false,
        Some(r) if is(r, "error") => true,
        Some(_) => return err("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
    };
    let id = super::int_arg(&a[2])?;
    let target = u64::try_from(id)
        .ok()
        .and_then(|id| ctx.shared.clients.get(id));
    let ticket = target
        .as_ref()
        .map_or(0, |c| c.parking.load(Ordering::Relaxed));
    match target {
        Some(c) if ticket != 0 => {
            let u = crate::deliver::Unblock { ticket, error };
            if c.at.id == ctx.session.id {
                // Itself: a client parked runs nothing, so never here.
                ctx.out.int(0);
                return Ok(());
            }
            ctx.session.posts.push((c.at, Delivery::Unblock(u)));
            ctx.out.int(1);
        }
        _ => ctx.out.int(0),
    }
    Ok(())
}

/// `CLIENT ID | SETNAME | GETNAME | SETINFO | INFO | LIST [TYPE t] [ID
/// id...] | KILL addr | KILL <filter> ... | UNBLOCK id [TIMEOUT|ERROR] |
/// NO-EVICT | HELP`.
pub fn client(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let sub = &a[1];
    if is(sub, "id") && a.len() == 2 {
        ctx.out.int(ctx.session.id as i64);
    } else if is(sub, "setname") && a.len() == 3 {
        if a[2].iter().any(|&b| b <= b' ' || b > b'~') {
            return err("ERR Client names cannot contain spaces, newlines or special characters.");
        }
        set_name(ctx, a[2].clone());
        ctx.out.ok();
    } else if is(sub, "getname") && a.len() == 2 {
        if ctx.session.name.is_empty() {
            ctx.out.null();
        } else {
            let n = ctx.session.name.clone();
            ctx.out.bulk(&n);
        }
    } else if (is(sub, "setinfo") && a.len() == 4) || (is(sub, "no-evict") && a.len() == 3) {
        ctx.out.ok();
    } else if is(sub, "info") && a.len() == 2 {
        let line = ctx
            .session
            .info
            .as_ref()
            .map(|i| i.line())
            .unwrap_or_default();
        ctx.out.verbatim(&format!("{line}\n"));
    } else if is(sub, "list") {
        let f = parse_filter(&a[2..], false)?;
        let mut text = String::new();
        for c in ctx.shared.clients.all() {
            if f.keeps(&c, ctx.session.id) {
                text.push_str(&c.line());
                text.push('\n');
            }
        }
        ctx.out.verbatim(&text);
    } else if is(sub, "kill") && a.len() == 3 {
        // The old form: CLIENT KILL addr:port.
        let addr = String::from_utf8_lossy(&a[2]).into_owned();
        let hit: Vec<_> = ctx
            .shared
            .clients
            .all()
            .into_iter()
            .filter(|c| c.addr == addr)
            .collect();
        if hit.is_empty() {
            return err("ERR No such client");
        }
        kill(ctx, &hit);
        ctx.out.ok();
    } else if is(sub, "kill") && a.len() >= 4 {
        let f = parse_filter(&a[2..], true)?;
        let hit: Vec<_> = ctx
            .shared
            .clients
            .all()
            .into_iter()
            .filter(|c| f.keeps(c, ctx.session.id))
            .collect();
        kill(ctx, &hit);
        // `TYPE master` on a replica: its link to the primary, which is
        // no connection of the registry, is cut (it reconnects and
        // continues, as Redis's does).
        let master = f.kind == Some("master")
            && f.ids.is_empty()
            && f.addr.is_none()
            && f.laddr.is_none()
            && ctx.shared.repl.cut_master_link();
        ctx.out.int(hit.len() as i64 + i64::from(master));
    } else if is(sub, "unblock") && (a.len() == 3 || a.len() == 4) {
        unblock(ctx, a)?;
    } else if is(sub, "unblock") && a.len() < 3 {
        // Below the subcommand's arity (Redis 7's wording).
        return err("ERR wrong number of arguments for 'client|unblock' command");
    } else if is(sub, "help") && a.len() == 2 {
        help(
            ctx.out,
            &[
                "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "GETNAME",
                "    Return the name of the current connection.",
                "ID",
                "    Return the ID of the current connection.",
                "INFO",
                "    Return information about the current client connection.",
                "KILL <ip:port>",
                "    Kill connection made from <ip:port>.",
                "KILL <option> <value> [<option> <value> [...]]",
                "    Kill connections. Options are: ID, ADDR, LADDR, TYPE, USER, SKIPME, MAXAGE.",
                "LIST [options ...]",
                "    Return information about client connections. Options: TYPE, ID.",
                "SETNAME <name>",
                "    Assign the name <name> to the current connection.",
                "UNBLOCK <clientid> [TIMEOUT|ERROR]",
                "    Unblock the specified blocked client.",
                "HELP",
                "    Print this help.",
            ],
        );
    } else {
        return Err(CmdError(
            format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
                String::from_utf8_lossy(sub)
            )
            .into(),
        ));
    }
    Ok(())
}

/// `SLOWLOG GET [n] | LEN | RESET | HELP`.
pub fn slowlog(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let sub = &a[1];
    let stats = &ctx.shared.stats;
    if is(sub, "get") && a.len() <= 3 {
        let n = match a.get(2) {
            None => Some(10),
            Some(v) => match super::parse_i64(v) {
                Some(-1) => None,
                Some(n) if n >= 0 => Some(n as usize),
                _ => return err("ERR count should be greater than or equal to -1"),
            },
        };
        let entries = stats.slowlog(n);
        let out = &mut *ctx.out;
        out.array(entries.len());
        for e in entries {
            out.array(6);
            out.int(e.id as i64);
            out.int(e.time as i64);
            out.int(e.usec as i64);
            out.array(e.args.len());
            for arg in &e.args {
                out.bulk(arg);
            }
            out.bulk(e.addr.as_bytes());
            out.bulk(&e.name);
        }
    } else if is(sub, "len") && a.len() == 2 {
        ctx.out.int(stats.slowlog_len() as i64);
    } else if is(sub, "reset") && a.len() == 2 {
        stats.slowlog_reset();
        ctx.out.ok();
    } else if is(sub, "help") && a.len() == 2 {
        help(
            ctx.out,
            &[
                "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "GET [<count>]",
                "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
                "LEN",
                "    Return the length of the slowlog.",
                "RESET",
                "    Reset the slowlog.",
                "HELP",
                "    Print this help.",
            ],
        );
    } else {
        return Err(unknown_sub(sub, "SLOWLOG"));
    }
    Ok(())
}

/// `LATENCY LATEST | HISTORY event | RESET [event...] | DOCTOR | HELP`.
/// The one event recorded is `command` (a command at least
/// `latency-monitor-threshold` ms long; 0, the default, records nothing).
pub fn latency(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let sub = &a[1];
    let stats = &ctx.shared.stats;
    if is(sub, "latest") && a.len() == 2 {
        let ev = stats.latency();
        let out = &mut *ctx.out;
        out.array(ev.len());
        for (name, e) in ev {
            let (time, latest) = e.samples.back().copied().unwrap_or((0, 0));
            out.array(4);
            out.bulk(name.as_bytes());
            out.int(time as i64);
            out.int(latest as i64);
            out.int(e.max as i64);
        }
    } else if is(sub, "history") && a.len() == 3 {
        let want = String::from_utf8_lossy(&a[2]).to_ascii_lowercase();
        let ev = stats.latency();
        let samples = ev
            .iter()
            .find(|(n, _)| *n == want)
            .map(|(_, e)| e.samples.iter().copied().collect::<Vec<_>>())
            .unwrap_or_default();
        let out = &mut *ctx.out;
        out.array(samples.len());
        for (t, ms) in samples {
            out.array(2);
            out.int(t as i64);
            out.int(ms as i64);
        }
    } else if is(sub, "reset") {
        let n = stats.latency_reset(&a[2..]);
        ctx.out.int(n as i64);
    } else if is(sub, "doctor") && a.len() == 2 {
        let t = stats.latency_threshold_ms.load(Ordering::Relaxed);
        let text = if t == 0 {
            "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Weft \
             instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in \
             order to enable it.\n"
                .to_string()
        } else {
            let ev = stats.latency();
            let mut s = String::new();
            for (name, e) in &ev {
                let _ = writeln!(
                    s,
                    "{name}: {} latency spikes (max {} ms) at or above {t} ms.",
                    e.samples.len(),
                    e.max
                );
            }
            if ev.is_empty() {
                s.push_str("No latency spikes were observed.\n");
            }
            s
        };
        ctx.out.verbatim(&text);
    } else if is(sub, "help") && a.len() == 2 {
        help(
            ctx.out,
            &[
                "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "DOCTOR",
                "    Return a human readable latency analysis report.",
                "HISTORY <event>",
                "    Return time-latency samples for the <event> class.",
                "LATEST",
                "    Return the latest latency samples for all events.",
                "RESET [<event> ...]",
                "    Reset latency data of one or more <event> classes.",
                "    (default: reset all data for all event classes)",
                "HELP",
                "    Print this help.",
            ],
        );
    } else {
        return Err(unknown_sub(sub, "LATENCY"));
    }
    Ok(())
}

/// `MONITOR`: from now on this connection receives every command the
/// server runs (but `AUTH` and `HELLO`, whose arguments hold passwords).
pub fn monitor(ctx: &mut Ctx<'_>, _a: &[Vec<u8>]) -> CmdResult {
    if ctx.in_exec() {
        // Redis's words: a client in a transaction wants one reply per
        // command.
        return err("ERR MONITOR isn't allowed for DENY BLOCKING client");
    }
    if !ctx.session.monitor {
        ctx.session.monitor = true;
        if let Some(info) = &ctx.session.info {
            info.monitor.store(true, Ordering::Relaxed);
        }
        ctx.shared.clients.monitor(ctx.session.me);
    }
    ctx.out.ok();
    Ok(())
}

/// `SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE]`: with `SAVE`, a save first (a
/// failed one cancels the shutdown, as in Redis); then the server stops
/// as on SIGTERM ([`crate::ShutdownHandle`]): every connection's read
/// requests are answered, the database is flushed and closed, and
/// [`crate::Server::run`] returns. The client gets no reply: its
/// connection closes.
pub fn shutdown(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let mut save = false;
    for opt in &a[1..] {
        if is(opt, "save") {
            save = true;
        } else if is(opt, "nosave") {
            save = false;
        } else if is(opt, "now") || is(opt, "force") {
        } else if is(opt, "abort") {
            return err("ERR No shutdown in progress.");
        } else {
            return err(SYNTAX);
        }
    }
    if save {
        let failed = match ctx.shared.saves.save(&ctx.shared.store.db) {
            None => true,
            Some(r) => r.is_err(),
        };
        if failed && !a[1..].iter().any(|o| is(o, "force")) {
            return err("ERR Errors trying to SHUTDOWN. Check logs.");
        }
    }
    eprintln!(
        "weft serve: SHUTDOWN by client {}, shutting down",
        ctx.session.id
    );
    ctx.shared.stop.stop();
    // Wake every loop now rather than at its next tick.
    let postal = &ctx.shared.postal;
    for i in 0..postal.loops() {
        postal.mailbox(i).waker.wake();
    }
    ctx.session.quit = true;
    Ok(())
}

pub fn time(ctx: &mut Ctx<'_>, _a: &[Vec<u8>]) -> CmdResult {
    let ms = now_ms();
    let us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_micros())
        .unwrap_or(0);
    ctx.out.array(2);
    ctx.out.bulk((ms / 1000).to_string().as_bytes());
    ctx.out.bulk(us.to_string().as_bytes());
    Ok(())
}

/// `SAVE`: a checkpoint of the database in the save directory, made on
/// this event loop; `+OK` once it is durable (`crate::save`).
pub fn save(ctx: &mut Ctx<'_>, _a: &[Vec<u8>]) -> CmdResult {
    match ctx.shared.saves.save(&ctx.shared.store.db) {
        None => return err(crate::save::IN_PROGRESS),
        Some(result) => {
            result?;
        }
    }
    ctx.out.ok();
    Ok(())
}

/// `BGSAVE [SCHEDULE]`: the same checkpoint on a thread of its own,
/// replying at once. (`SCHEDULE` is accepted; a save asked while one runs
/// is refused rather than scheduled.)
pub fn bgsave(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    match a.get(1) {
        None => {}
        Some(s) if a.len() == 2 && is(s, "schedule") => {}
        Some(_) => return err(SYNTAX),
    }
    match ctx.shared.saves.start_background(&ctx.shared.store.db) {
        Ok(true) => ctx.out.simple("Background saving started"),
        Ok(false) => return err(crate::save::IN_PROGRESS),
        Err(e) => {
            return Err(CmdError(
                format!("ERR starting the background save: {e}").into(),
            ))
        }
    }
    Ok(())
}

/// `LASTSAVE`: the Unix time of the last successful save (the server's
/// start before one).
pub fn lastsave(ctx: &mut Ctx<'_>, _a: &[Vec<u8>]) -> CmdResult {
    ctx.out.int(ctx.shared.saves.last_save() as i64);
    Ok(())
}
