//! Pub/sub commands: SUBSCRIBE UNSUBSCRIBE PSUBSCRIBE PUNSUBSCRIBE PUBLISH
//! PUBSUB (the registry and delivery: [`crate::pubsub`]).
//!
//! Subscription replies are pushes (`>` under RESP3, arrays under RESP2),
//! one per channel, each with the connection's subscription count after
//! it. Under RESP2 a subscribed connection may only (un)subscribe, `PING`
//! and `QUIT` (the dispatch check in `server::admit`).

use std::sync::atomic::Ordering;

use super::{is, CmdError, CmdResult, Ctx};

fn count(ctx: &Ctx<'_>) -> i64 {
    (ctx.session.channels.len() + ctx.session.patterns.len()) as i64
}

fn note_counts(ctx: &Ctx<'_>) {
    if let Some(info) = &ctx.session.info {
        info.subs
            .store(ctx.session.channels.len() as u32, Ordering::Relaxed);
        info.psubs
            .store(ctx.session.patterns.len() as u32, Ordering::Relaxed);
    }
}

fn reply(ctx: &mut Ctx<'_>, kind: &[u8], name: Option<&[u8]>) {
    let n = count(ctx);
    ctx.out.push(3);
    ctx.out.bulk(kind);
    ctx.out.opt_bulk(name);
    ctx.out.int(n);
}

pub fn subscribe(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    for ch in &a[1..] {
        if ctx.session.channels.insert(ch.clone()) {
            ctx.shared.hub.subscribe(ch, ctx.session.me);
        }
        reply(ctx, b"subscribe", Some(ch));
    }
    note_counts(ctx);
    Ok(())
}

pub fn psubscribe(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    for p in &a[1..] {
        if ctx.session.patterns.insert(p.clone()) {
            ctx.shared.hub.psubscribe(p, ctx.session.me);
        }
        reply(ctx, b"psubscribe", Some(p));
    }
    note_counts(ctx);
    Ok(())
}

pub fn unsubscribe(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let names: Vec<Vec<u8>> = if a.len() > 1 {
        a[1..].to_vec()
    } else {
        ctx.session.channels.iter().cloned().collect()
    };
    if names.is_empty() {
        reply(ctx, b"unsubscribe", None);
    }
    for ch in &names {
        if ctx.session.channels.remove(ch) {
            ctx.shared.hub.unsubscribe(ch, ctx.session.id);
        }
        reply(ctx, b"unsubscribe", Some(ch));
    }
    note_counts(ctx);
    Ok(())
}

pub fn punsubscribe(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let names: Vec<Vec<u8>> = if a.len() > 1 {
        a[1..].to_vec()
    } else {
        ctx.session.patterns.iter().cloned().collect()
    };
    if names.is_empty() {
        reply(ctx, b"punsubscribe", None);
    }
    for p in &names {
        if ctx.session.patterns.remove(p) {
            ctx.shared.hub.punsubscribe(p, ctx.session.id);
        }
        reply(ctx, b"punsubscribe", Some(p));
    }
    note_counts(ctx);
    Ok(())
}

pub fn publish(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let n = ctx.shared.hub.publish(&a[1], &a[2], &mut ctx.session.posts);
    ctx.out.int(n as i64);
    Ok(())
}

pub fn pubsub(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let sub = &a[1];
    let hub = &ctx.shared.hub;
    if is(sub, "channels") && a.len() <= 3 {
        let chans = hub.channels(a.get(2).map(|p| &p[..]));
        ctx.out.array(chans.len());
        for c in chans {
            ctx.out.bulk(&c);
        }
    } else if is(sub, "numsub") {
        ctx.out.array(2 * (a.len() - 2));
        for ch in &a[2..] {
            ctx.out.bulk(ch);
            ctx.out.int(hub.numsub(ch) as i64);
        }
    } else if is(sub, "numpat") && a.len() == 2 {
        ctx.out.int(hub.numpat() as i64);
    } else if is(sub, "help") && a.len() == 2 {
        let lines = [
            "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "HELP",
            "    Print this help.",
        ];
        ctx.out.array(lines.len());
        for l in lines {
            ctx.out.simple(l);
        }
    } else {
        return Err(CmdError(
            format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
                String::from_utf8_lossy(sub)
            )
            .into(),
        ));
    }
    Ok(())
}
