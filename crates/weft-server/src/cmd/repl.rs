//! Replication commands: `REPLICAOF`/`SLAVEOF`, `ROLE`, `REPLCONF`,
//! `PSYNC`, `SYNC`, `WAIT` (the state and threads: [`crate::repl`]).

use std::time::{Duration, Instant};

use super::{err, int_arg, is, CmdError, CmdResult, Ctx};
use crate::repl::{self, Psync, Waiting};

/// `REPLICAOF host port` / `REPLICAOF NO ONE` (and `SLAVEOF`).
pub fn replicaof(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let r = &ctx.shared.repl;
    if is(&a[1], "no") && is(&a[2], "one") {
        if r.set_master(None) {
            if let Err(e) = repl::replica::forget_position(&ctx.shared.store.db) {
                return Err(e.into());
            }
        }
        ctx.out.simple("OK");
        return Ok(());
    }
    let host = String::from_utf8_lossy(&a[1]).into_owned();
    let port = match super::parse_i64(&a[2]) {
        Some(p) if (0..=65535).contains(&p) => p as u16,
        _ => return err("ERR Invalid master port"),
    };
    let me = ctx.shared.port;
    if port == me && matches!(host.as_str(), "127.0.0.1" | "localhost" | "::1") {
        return err("ERR Can't replicate myself");
    }
    if ctx.shared.repl.master().as_ref() == Some(&(host.clone(), port)) {
        ctx.out.simple("OK Already connected to specified master");
        return Ok(());
    }
    r.set_master(Some((host, port)));
    ctx.out.simple("OK");
    Ok(())
}

/// `ROLE`.
pub fn role(ctx: &mut Ctx<'_>, _a: &[Vec<u8>]) -> CmdResult {
    repl::role(ctx.shared, ctx.out);
    Ok(())
}

/// `REPLCONF listening-port p | ip-address a | capa c ... | ACK offset |
/// GETACK *`.
pub fn replconf(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    if a.len().is_multiple_of(2) {
        return err("ERR syntax error");
    }
    let mut i = 1;
    while i < a.len() {
        let (opt, val) = (&a[i], &a[i + 1]);
        if is(opt, "ack") {
            // From a replica's link: no reply, as Redis.
            if let (Some(link), Some(off)) = (&ctx.session.repl_link, super::parse_i64(val)) {
                link.ack(off.max(0) as u64);
            }
            return Ok(());
        } else if is(opt, "listening-port") {
            match super::parse_i64(val) {
                Some(p) if (0..=65535).contains(&p) => ctx.session.repl_port = p as u16,
                _ => return err("ERR value is not an integer or out of range"),
            }
        } else if is(opt, "getack") {
            // Weft replicas acknowledge every batch they apply.
            return Ok(());
        } else if !(is(opt, "ip-address") || is(opt, "capa") || is(opt, "rdb-only")) {
            return Err(CmdError(
                format!(
                    "ERR Unrecognized REPLCONF option: {}",
                    String::from_utf8_lossy(opt)
                )
                .into(),
            ));
        }
        i += 2;
    }
    ctx.out.simple("OK");
    Ok(())
}

/// `PSYNC replid offset`: the connection becomes a replica's link once
/// this returns (its socket goes to a sender thread, which answers
/// `+FULLRESYNC` or `+CONTINUE`: [`crate::repl::primary`]).
pub fn psync(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    if ctx.shared.repl.is_replica() {
        return err("ERR Weft replicas do not serve replicas (no chained replication)");
    }
    if ctx.session.repl_link.is_some() {
        return err("ERR PSYNC on a replica's link");
    }
    let offset = super::parse_i64(&a[2]).ok_or(CmdError(
        "ERR value is not an integer or out of range".into(),
    ))?;
    ctx.session.psync = Some(Psync {
        replid: String::from_utf8_lossy(&a[1]).into_owned(),
        offset,
        port: ctx.session.repl_port,
    });
    Ok(())
}

/// `SYNC`: Redis's pre-`PSYNC` full sync streams an RDB file; Weft's
/// full sync is a checkpoint, which only `PSYNC` announces.
pub fn sync(_ctx: &mut Ctx<'_>, _a: &[Vec<u8>]) -> CmdResult {
    err("ERR SYNC is not supported: Weft replicates with PSYNC (a checkpoint, not an RDB file)")
}

/// `WAIT numreplicas timeout`: the number of replicas that acknowledged
/// every write this server had made visible when `WAIT` ran, once
/// `numreplicas` did or the timeout (ms; 0: none) passed. The client is
/// held meanwhile (its loop's timer checks every millisecond), so no
/// event loop blocks.
pub fn wait(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let n = int_arg(&a[1])?;
    let t = super::parse_i64(&a[2]).ok_or(CmdError(
        "ERR timeout is not an integer or out of range".into(),
    ))?;
    if t < 0 {
        return err("ERR timeout is negative");
    }
    if ctx.shared.repl.is_replica() {
        return err("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.");
    }
    let target = ctx.shared.store.db.visible_sequence();
    let acked = ctx.shared.repl.acked(target);
    let wanted = n.max(0) as u64;
    if acked >= wanted {
        ctx.out.int(acked as i64);
        return Ok(());
    }
    let now = Instant::now();
    let w = Waiting {
        target,
        replicas: wanted,
        deadline: (t > 0).then(|| now + Duration::from_millis(t as u64)),
    };
    ctx.session.wait = Some(w);
    // Nothing is written now: the hold's end asks again
    // (`repl::wait_resume`).
    ctx.session.hold_until = Some(now);
    Ok(())
}
