//! Connection and server commands: PING, ECHO, HELLO, QUIT, SELECT,
//! COMMAND, INFO, DBSIZE, FLUSHDB, TYPE, CONFIG GET, CLIENT, TIME, SAVE,
//! BGSAVE, LASTSAVE.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use weft::ReadOptions;

use super::{err, is, CmdError, CmdResult, Ctx, COMMANDS, SYNTAX};
use crate::keyspace::now_ms;

/// The Redis version Weft reports (the command set it follows).
pub const REDIS_VERSION: &str = "7.0.0";

pub fn ping(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
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

pub fn select(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let n = super::parse_i64(&a[1]).ok_or(CmdError(
        "ERR value is not an integer or out of range".into(),
    ))?;
    if n != 0 {
        return err("ERR DB index is out of range");
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
    while i < a.len() {
        if is(&a[i], "auth") && i + 2 < a.len() {
            // No users or passwords are configured: like Redis's default
            // user with `nopass`, any credentials are accepted.
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
    if let Some(p) = proto {
        ctx.out.resp3 = p == 3;
    }
    if let Some(n) = name {
        ctx.session.name = n;
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
    out.bulk(b"master");
    out.bulk(b"modules");
    out.array(0);
    Ok(())
}

fn command_entry(ctx: &mut Ctx<'_>, c: &super::Command) {
    let (first, last, step) = match c.name {
        "ping" | "echo" | "hello" | "quit" | "select" | "command" | "info" | "dbsize"
        | "flushdb" | "flushall" | "config" | "client" | "time" | "scan" | "keys" | "save"
        | "bgsave" | "lastsave" => (0, 0, 0),
        "mset" => (1, -1, 2),
        "mget" | "del" | "unlink" | "exists" => (1, -1, 1),
        "weft.range" => (0, 0, 0),
        _ => (1, 1, 1),
    };
    let out = &mut *ctx.out;
    out.array(6);
    out.bulk(c.name.as_bytes());
    out.int(i64::from(c.arity));
    out.array(0);
    out.int(first);
    out.int(last);
    out.int(step);
}

pub fn command(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    if a.len() == 1 {
        ctx.out.array(COMMANDS.len());
        for c in COMMANDS {
            command_entry(ctx, c);
        }
    } else if is(&a[1], "count") {
        ctx.out.int(COMMANDS.len() as i64);
    } else if is(&a[1], "docs") {
        // Minimal: no documentation (clients fall back to no hints).
        ctx.out.map(0);
    } else if is(&a[1], "info") {
        ctx.out.array(a.len() - 2);
        for name in &a[2..] {
            match super::lookup(name) {
                Some(c) => command_entry(ctx, c),
                None => ctx.out.null_array(),
            }
        }
    } else {
        return Err(CmdError(
            format!(
                "ERR unknown subcommand '{}'. Try COMMAND HELP.",
                String::from_utf8_lossy(&a[1])
            )
            .into(),
        ));
    }
    Ok(())
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

pub fn info(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let sh = ctx.shared;
    let wanted: Vec<String> = a[1..]
        .iter()
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
        .collect();
    let all = wanted.is_empty()
        || wanted
            .iter()
            .any(|w| w == "all" || w == "default" || w == "everything");
    let want = |s: &str| all || wanted.iter().any(|w| w == s);
    let mut t = String::new();
    if want("server") {
        let _ = write!(
            t,
            "# Server\r\nredis_version:{REDIS_VERSION}\r\nweft_version:{}\r\nredis_mode:standalone\r\n\
             os:{}\r\narch_bits:64\r\nmultiplexing_api:threads\r\nprocess_id:{}\r\ntcp_port:{}\r\n\
             uptime_in_seconds:{}\r\nexecutable:weft\r\nsync:{}\r\ndir:{}\r\n\r\n",
            env!("CARGO_PKG_VERSION"),
            std::env::consts::OS,
            std::process::id(),
            sh.port,
            sh.started.elapsed().as_secs(),
            sh.config.sync.name(),
            sh.config.dir.display(),
        );
    }
    if want("clients") {
        let _ = write!(
            t,
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\n\r\n",
            sh.counters.connected.load(Ordering::Relaxed),
            sh.config.maxclients
        );
    }
    if want("memory") {
        let rss = rss_bytes();
        let _ = write!(
            t,
            "# Memory\r\nused_memory:{rss}\r\nused_memory_rss:{rss}\r\n\r\n"
        );
    }
    if want("persistence") {
        let saves = &sh.saves;
        // A snapshot's sequence is the visible one, without the directory
        // listing `stats` makes.
        let sequence = sh.ks.db.snapshot().sequence();
        let changes = sequence.saturating_sub(saves.last_sequence());
        let _ = write!(
            t,
            "# Persistence\r\nloading:0\r\naof_enabled:{}\r\nrdb_changes_since_last_save:{changes}\r\n\
             rdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\n\
             weft_save_dir:{}\r\n\r\n",
            u8::from(sh.config.sync != crate::SyncMode::No),
            u8::from(saves.in_progress()),
            saves.last_save(),
            if saves.last_ok() { "ok" } else { "err" },
            saves.dir().display(),
        );
    }
    if want("stats") {
        let c = &sh.counters;
        let _ = write!(
            t,
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\n\
             rejected_connections:{}\r\nexpired_keys:{}\r\n\r\n",
            c.connections.load(Ordering::Relaxed),
            c.commands.load(Ordering::Relaxed),
            c.rejected.load(Ordering::Relaxed),
            sh.ks.expired_keys.load(Ordering::Relaxed),
        );
    }
    if want("keyspace") {
        let (keys, expires) = sh.ks.key_counts();
        t.push_str("# Keyspace\r\n");
        if keys > 0 {
            let _ = write!(t, "db0:keys={keys},expires={expires},avg_ttl=0\r\n");
        }
        t.push_str("\r\n");
    }
    if want("weft") {
        let s = sh.ks.db.stats();
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
    // Drop the blank line after the last section, as Redis does.
    if t.ends_with("\r\n\r\n") {
        t.truncate(t.len() - 2);
    }
    ctx.out.verbatim(&t);
    Ok(())
}

pub fn dbsize(ctx: &mut Ctx<'_>, _a: &[Vec<u8>]) -> CmdResult {
    let (keys, _) = ctx.shared.ks.key_counts();
    ctx.out.int(keys as i64);
    Ok(())
}

pub fn flushdb(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    match a.get(1) {
        None => {}
        Some(m) if a.len() == 2 && (is(m, "sync") || is(m, "async")) => {}
        Some(_) => return err(SYNTAX),
    }
    ctx.shared.ks.flush_all()?;
    ctx.out.ok();
    Ok(())
}

pub fn type_(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let t = match ctx.shared.ks.get(&a[1], &ReadOptions::new())? {
        Some(e) => e.meta.kind.name(),
        None => "none",
    };
    ctx.out.simple(t);
    Ok(())
}

pub fn config(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    if !is(&a[1], "get") {
        if is(&a[1], "set") || is(&a[1], "resetstat") || is(&a[1], "rewrite") {
            return Err(CmdError(
                format!(
                    "ERR CONFIG {} is not supported by weft",
                    String::from_utf8_lossy(&a[1]).to_ascii_uppercase()
                )
                .into(),
            ));
        }
        return Err(CmdError(
            format!(
                "ERR unknown subcommand '{}'. Try CONFIG HELP.",
                String::from_utf8_lossy(&a[1])
            )
            .into(),
        ));
    }
    if a.len() < 3 {
        return err("ERR wrong number of arguments for 'config|get' command");
    }
    let c = &ctx.shared.config;
    let params: Vec<(&str, String)> = vec![
        ("save", String::new()),
        (
            "appendonly",
            if c.sync == crate::SyncMode::No {
                "no"
            } else {
                "yes"
            }
            .into(),
        ),
        ("appendfsync", c.sync.name().into()),
        ("maxclients", c.maxclients.to_string()),
        ("databases", "1".into()),
        ("timeout", c.timeout.map_or(0, |d| d.as_secs()).to_string()),
        ("proto-max-bulk-len", c.max_bulk.to_string()),
        ("port", ctx.shared.port.to_string()),
        ("bind", c.bind.clone()),
        ("dir", c.dir.display().to_string()),
    ];
    let mut hits = Vec::new();
    for (name, value) in &params {
        if a[2..]
            .iter()
            .any(|p| crate::glob::matches(&p.to_ascii_lowercase(), name.as_bytes()))
        {
            hits.push((*name, value.clone()));
        }
    }
    ctx.out.map(hits.len());
    for (n, v) in hits {
        ctx.out.bulk(n.as_bytes());
        ctx.out.bulk(v.as_bytes());
    }
    Ok(())
}

pub fn client(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let sub = &a[1];
    if is(sub, "id") && a.len() == 2 {
        ctx.out.int(ctx.session.id as i64);
    } else if is(sub, "setname") && a.len() == 3 {
        if a[2].iter().any(|&b| b <= b' ' || b > b'~') {
            return err("ERR Client names cannot contain spaces, newlines or special characters.");
        }
        ctx.session.name = a[2].clone();
        ctx.out.ok();
    } else if is(sub, "getname") && a.len() == 2 {
        if ctx.session.name.is_empty() {
            ctx.out.null();
        } else {
            let n = ctx.session.name.clone();
            ctx.out.bulk(&n);
        }
    } else if is(sub, "setinfo") && a.len() == 4 {
        ctx.out.ok();
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
    match ctx.shared.saves.save(&ctx.shared.ks.db) {
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
    match ctx.shared.saves.start_background(&ctx.shared.ks.db) {
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
