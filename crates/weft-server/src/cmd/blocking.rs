//! The blocking pops: `BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP BZPOPMIN
//! BZPOPMAX BZMPOP`, as Redis 7.0 runs them.
//!
//! Each tries its keys in argument order under their stripe locks; the
//! first that holds a list (or sorted set) is served as the non-blocking
//! form would be. If none does, the client *parks* while still holding the
//! locks: it registers in each key's FIFO ([`crate::blocking::Waiters`])
//! and records what it waits for in its session; the connection then reads
//! nothing more of its requests until it is woken or its deadline passes.
//!
//! A write that adds to a list or sorted set calls [`wake_next`] (through
//! `coll::key_ready`): it takes the first waiter of that type off the key's
//! FIFO and posts it a [`Delivery::Wake`]. The woken client re-runs its
//! command on its own loop ([`retry`]), trying the keys that woke it first.
//! Served, it leaves every FIFO and passes the wake-up on (the key may
//! hold more: the next waiter gets its turn, in order). Finding the key
//! emptied by someone else, it parks again at the *front* of that key's
//! FIFO. A client that leaves without taking what woke it (its timeout
//! passed, it was killed, it hung up) passes the wake-up on too, so an
//! element is never left with waiters asleep.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use weft::ReadOptions;

use super::long_double::LongDouble;
use super::zset::{self, Scored};
use super::{err, list, CmdError, CmdResult, Ctx, Session, COMMANDS, WRONGTYPE};
use crate::blocking::{db_of, Parked, Waiter};
use crate::deliver::{ClientRef, Delivery, Wake};
use crate::encoding::{Kind, Meta};
use crate::keyspace::Batch;
use crate::Shared;

const NOT_FLOAT: &str = "ERR timeout is not a float or out of range";
const NEGATIVE: &str = "ERR timeout is negative";

/// Parses a timeout in seconds as Redis 7.0's `getTimeoutFromObjectOrReply`
/// does: a `long double` (`strtold`, `long_double.rs`), turned into
/// milliseconds rounding up (`ceill(t * 1000)`); `None` is 0, wait
/// forever. C's conversion of an out-of-range value to `long long` gives
/// `LLONG_MIN` on x86-64, so infinities and huge values are "negative", as
/// in Redis.
pub(crate) fn timeout_arg(s: &[u8]) -> Result<Option<Duration>, CmdError> {
    let secs = LongDouble::parse(s).ok_or(CmdError(NOT_FLOAT.into()))?;
    let ms = secs.ceil_millis();
    if ms < 0 {
        return err(NEGATIVE);
    }
    Ok((ms > 0).then(|| Duration::from_millis(ms as u64)))
}

/// What a blocking command that cannot block (inside `EXEC`) answers for
/// empty keys.
#[derive(Clone, Copy)]
enum Deny {
    /// The null array (the pops).
    NullArray,
    /// The null bulk string (`BLMOVE`, `BRPOPLPUSH`).
    Null,
}

/// What a blocking command waits on.
struct Wait<'a> {
    /// Its keys, in argument order.
    keys: &'a [Vec<u8>],
    /// Another key it writes (`BLMOVE`'s destination), locked with them.
    also_lock: Option<&'a [u8]>,
    /// The type it pops.
    kind: Kind,
    /// How long it may wait (`None`: forever).
    timeout: Option<Duration>,
    deny: Deny,
}

/// Serves the first of `w.keys` that holds a `w.kind`, with `serve` (which
/// pops, writes its batch and replies), or parks the client on all of them.
/// Returns whether it served. A parked client re-run after a wake-up
/// (`session.blocking.parked` set) tries the keys that woke it first,
/// skips keys of another type (Redis leaves such a client blocked), parks
/// again at the front when it finds nothing, and when served leaves its
/// FIFOs and passes the wake-ups on.
fn serve_or_park(
    ctx: &mut Ctx<'_>,
    w: Wait<'_>,
    mut serve: impl FnMut(&mut Ctx<'_>, &[u8], Meta, Batch) -> CmdResult,
) -> Result<bool, CmdError> {
    let shared = ctx.shared;
    let ks = &ctx.ks();
    let retry = ctx.session.blocking.parked.is_some();
    let woken = std::mem::take(&mut ctx.session.blocking.woken_by);
    let mut seen: HashSet<&[u8]> = HashSet::with_capacity(w.keys.len());
    let order: Vec<&[u8]> = woken
        .iter()
        .chain(w.keys)
        .map(Vec::as_slice)
        .filter(|k| seen.insert(k))
        .collect();
    {
        let _g = ks
            .locks()
            .lock_many(w.keys.iter().map(Vec::as_slice).chain(w.also_lock));
        let mut served = false;
        for key in order {
            let mut batch = Batch::new();
            match ks.load_for_write(key, &mut batch)? {
                Some(e) if e.meta.kind == w.kind => {
                    serve(ctx, key, e.meta, batch)?;
                    served = true;
                    break;
                }
                Some(_) if !retry => return err(WRONGTYPE),
                // Absent, expired (its deletion is in the batch), or of
                // another type for a client already blocked.
                _ => ks.write(batch)?,
            }
        }
        if !served {
            if retry {
                park_again(ctx, &woken);
            } else if ctx.session.deny_blocking || ctx.in_exec() {
                match w.deny {
                    Deny::NullArray => ctx.out.null_array(),
                    Deny::Null => ctx.out.null(),
                }
            } else {
                park(ctx, w.keys, w.kind, w.timeout);
            }
            return Ok(false);
        }
    }
    if retry {
        if let Some(p) = leave(shared, ctx.session) {
            // The wake-ups it answered go on to the next in line (the key
            // may hold more). A key it was not woken for has its own
            // wake-up in flight (to another client, or to this one, which
            // passes it on when it arrives): waking more would let later
            // waiters overtake.
            for k in &woken {
                wake_next_after(ctx, p.db, k);
            }
        }
    }
    Ok(true)
}

/// Registers the client on `keys` (whose stripe locks the caller holds)
/// and marks its session parked.
fn park(ctx: &mut Ctx<'_>, keys: &[Vec<u8>], kind: Kind, timeout: Option<Duration>) {
    let s = &mut *ctx.session;
    let db = db_of(s);
    s.blocking.parkings += 1;
    let ticket = s.blocking.parkings;
    let mut seen = HashSet::with_capacity(keys.len());
    let keys: Vec<Vec<u8>> = keys
        .iter()
        .filter(|k| seen.insert(k.as_slice()))
        .cloned()
        .collect();
    let me = Waiter {
        at: s.me,
        kind,
        ticket,
    };
    for k in &keys {
        ctx.shared.waiters.add(db, k, me, false);
    }
    let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
    ctx.shared
        .waiters
        .count_parked(s.me.loop_ix as usize, 1, deadline.is_some());
    if let Some(info) = &s.info {
        info.parking
            .store(ticket, std::sync::atomic::Ordering::Relaxed);
    }
    s.blocking.parked = Some(Parked {
        db,
        keys,
        kind,
        deadline,
        ticket,
    });
}

/// A woken client found nothing: back to the front of the FIFOs of the
/// keys that woke it (its other registrations kept their places).
fn park_again(ctx: &mut Ctx<'_>, woken: &[Vec<u8>]) {
    let s = &*ctx.session;
    let Some(p) = &s.blocking.parked else {
        return;
    };
    let me = Waiter {
        at: s.me,
        kind: p.kind,
        ticket: p.ticket,
    };
    for k in woken {
        ctx.shared.waiters.add(p.db, k, me, true);
    }
}

/// Unparks the session: leaves every FIFO; returns what it was parked in.
fn leave(shared: &Shared, s: &mut Session) -> Option<Parked> {
    let p = s.blocking.parked.take()?;
    for k in &p.keys {
        shared.waiters.remove(p.db, k, s.me.id);
    }
    shared
        .waiters
        .count_parked(s.me.loop_ix as usize, -1, p.deadline.is_some());
    if let Some(info) = &s.info {
        info.parking.store(0, std::sync::atomic::Ordering::Relaxed);
    }
    Some(p)
}

/// Wakes the first client waiting on `key` (database `db`) for the type the
/// key holds now, if it holds one with elements: a push's `key_ready`, and
/// a wake-up passed on. Costs one relaxed load when nobody waits on a key
/// of the same hint slot; else a look under the shard's lock, and with
/// waiters on the key, one metadata read.
pub(crate) fn wake_next(shared: &Shared, db: usize, key: &[u8]) {
    if let Some((to, wake)) = next_waiter(shared, db, key) {
        shared.postal.post(to, wake);
    }
}

/// [`wake_next`] from a command that may have raised keyspace events
/// (`crate::notify`): while events are published, the wake-up joins the
/// command's deliveries instead, which the connection posts after every
/// other delivery of its requests (`conn.rs`), so the woken client's
/// events (its `lpop`) reach a subscriber after this command's (the
/// `rpush`), as in Redis. The connection posts them before its replies,
/// as every delivery.
pub(crate) fn wake_next_after(ctx: &mut Ctx<'_>, db: usize, key: &[u8]) {
    if ctx.shared.store.notify.effective() == 0 {
        return wake_next(ctx.shared, db, key);
    }
    if let Some(post) = next_waiter(ctx.shared, db, key) {
        ctx.session.posts.push(post);
    }
}

/// Takes the first client waiting on `key` for the type it holds now, if
/// it holds one with elements, and returns its wake-up.
fn next_waiter(shared: &Shared, db: usize, key: &[u8]) -> Option<(ClientRef, Delivery)> {
    if !shared.waiters.any_waiting(db, key) {
        return None;
    }
    let kind = match shared.store.view(db).get(key, &ReadOptions::new()) {
        Ok(Some(e)) if matches!(e.meta.kind, Kind::List | Kind::ZSet) && e.meta.count > 0 => {
            e.meta.kind
        }
        // Absent, emptied again, of a type nobody pops, or unreadable (a
        // failing engine: the waiters keep waiting).
        _ => return None,
    };
    let w = shared.waiters.take_first(db, key, kind)?;
    Some((
        w.at,
        Delivery::Wake(Wake {
            db,
            key: key.to_vec(),
            ticket: w.ticket,
        }),
    ))
}

/// Passes on wake-ups their client will not act on.
pub(crate) fn pass_on(shared: &Shared, wakes: &[Wake]) {
    for w in wakes {
        wake_next(shared, w.db, &w.key);
    }
}

/// Re-runs the command `args` of the parked connection `ctx` for the
/// wake-ups `wakes`. Wake-ups for an earlier parking (or a key it does not
/// wait on) are passed on. Served, or failed (a `BLMOVE` destination of
/// the wrong type), the connection is unparked with its reply; else it
/// stays parked.
pub(crate) fn retry(ctx: &mut Ctx<'_>, args: &[Vec<u8>], wakes: &[Wake]) {
    let Some(p) = &ctx.session.blocking.parked else {
        pass_on(ctx.shared, wakes);
        return;
    };
    let mut mine: Vec<Vec<u8>> = Vec::new();
    for w in wakes {
        if w.db == p.db && w.ticket == p.ticket && p.keys.contains(&w.key) {
            if !mine.contains(&w.key) {
                mine.push(w.key.clone());
            }
        } else {
            wake_next(ctx.shared, w.db, &w.key);
        }
    }
    if mine.is_empty() {
        return;
    }
    let Some(cmd) = args.first().and_then(|n| super::lookup_index(n)) else {
        return;
    };
    ctx.session.blocking.woken_by = mine.clone();
    let mark = ctx.out.buf.len();
    let r = (COMMANDS[cmd].handler)(ctx, args);
    // What its batches left pending (keyspace events), as `cmd::run` does.
    ctx.raise_pending();
    ctx.session.blocking.woken_by.clear();
    if let Err(CmdError(msg)) = r {
        ctx.out.buf.truncate(mark);
        ctx.out.error(&msg);
        let ix = ctx.session.me.loop_ix as usize;
        ctx.shared.stats.for_loop(ix).error(&msg);
        if let Some(p) = leave(ctx.shared, ctx.session) {
            for k in &mine {
                wake_next(ctx.shared, p.db, k);
            }
        }
    }
}

/// The deadline of the parked connection `ctx` passed: unparks it with
/// the null reply Redis gives a timed-out blocking command.
pub(crate) fn time_out(ctx: &mut Ctx<'_>) {
    if leave(ctx.shared, ctx.session).is_some() {
        ctx.out.null_array();
    }
}

/// `CLIENT UNBLOCK` reached the connection `ctx`: if it is still parked
/// in the parking `u` names (not served, timed out or parked again since),
/// unparks it with the timeout reply, or with `-UNBLOCKED` for `ERROR`, as
/// Redis does. Returns whether it did.
pub(crate) fn unblock(ctx: &mut Ctx<'_>, u: &crate::deliver::Unblock) -> bool {
    if ctx
        .session
        .blocking
        .parked
        .as_ref()
        .is_none_or(|p| p.ticket != u.ticket)
    {
        return false;
    }
    leave(ctx.shared, ctx.session);
    if u.error {
        const MSG: &str = "UNBLOCKED client unblocked via CLIENT UNBLOCK";
        ctx.out.error(MSG);
        let ix = ctx.session.me.loop_ix as usize;
        ctx.shared.stats.for_loop(ix).error(MSG);
    } else {
        ctx.out.null_array();
    }
    true
}

/// The connection of `s` closes: it leaves its FIFOs and passes on the
/// wake-ups delivered to it and not acted on. One still on its way is
/// passed on by the loop that finds its connection gone.
pub(crate) fn depart(shared: &Shared, s: &mut Session, pending: &[Wake]) {
    leave(shared, s);
    pass_on(shared, pending);
}

/// Pops one element of the list `old` at `key`: `[key, element]`.
fn serve_pop(ctx: &mut Ctx<'_>, key: &[u8], old: Meta, mut batch: Batch, left: bool) -> CmdResult {
    let ks = &ctx.ks();
    let mut m = old;
    let got = list::pop_n(ks, &mut batch, key, &mut m, left, 1)?;
    ks.put_collection(&mut batch, key, Some(&old), &m);
    ks.write(batch)?;
    list::notify_pop(ctx, key, left, m.count == 0);
    let Some(v) = got.first() else {
        return err("ERR weft: empty list");
    };
    ctx.out.array(2);
    ctx.out.bulk(key);
    ctx.out.bulk(v);
    Ok(())
}

fn bpop(ctx: &mut Ctx<'_>, a: &[Vec<u8>], left: bool) -> CmdResult {
    let timeout = timeout_arg(&a[a.len() - 1])?;
    let w = Wait {
        keys: &a[1..a.len() - 1],
        also_lock: None,
        kind: Kind::List,
        timeout,
        deny: Deny::NullArray,
    };
    serve_or_park(ctx, w, |ctx, key, old, batch| {
        serve_pop(ctx, key, old, batch, left)
    })?;
    Ok(())
}

/// `BLPOP key [key ...] timeout`.
pub fn blpop(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    bpop(ctx, a, true)
}

/// `BRPOP key [key ...] timeout`.
pub fn brpop(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    bpop(ctx, a, false)
}

fn blmove_generic(
    ctx: &mut Ctx<'_>,
    a: &[Vec<u8>],
    from_left: bool,
    to_left: bool,
    timeout: Option<Duration>,
) -> CmdResult {
    let (src, dst) = (&a[1], a[2].as_slice());
    let w = Wait {
        keys: std::slice::from_ref(src),
        also_lock: Some(dst),
        kind: Kind::List,
        timeout,
        deny: Deny::Null,
    };
    let served = serve_or_park(ctx, w, |ctx, src, sold, batch| {
        let (v, emptied) = list::lmove_from(&ctx.ks(), batch, src, sold, dst, from_left, to_left)?;
        list::notify_move(ctx, src, dst, from_left, to_left, emptied);
        ctx.out.bulk(&v);
        Ok(())
    })?;
    if served {
        super::coll::key_ready(ctx, dst);
    }
    Ok(())
}

/// `BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout`.
pub fn blmove(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let from = list::side(&a[3])?;
    let to = list::side(&a[4])?;
    let timeout = timeout_arg(&a[5])?;
    blmove_generic(ctx, a, from, to, timeout)
}

/// `BRPOPLPUSH source destination timeout`.
pub fn brpoplpush(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let timeout = timeout_arg(&a[3])?;
    blmove_generic(ctx, a, false, true, timeout)
}

/// `BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]`.
pub fn blmpop(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (keys, left, count) = list::mpop_args(a, 2, list::side)?;
    let timeout = timeout_arg(&a[1])?;
    let w = Wait {
        keys,
        also_lock: None,
        kind: Kind::List,
        timeout,
        deny: Deny::NullArray,
    };
    serve_or_park(ctx, w, |ctx, key, old, mut batch| {
        let ks = &ctx.ks();
        let mut m = old;
        let got = list::pop_n(ks, &mut batch, key, &mut m, left, count)?;
        ks.put_collection(&mut batch, key, Some(&old), &m);
        ks.write(batch)?;
        list::notify_pop(ctx, key, left, m.count == 0);
        ctx.out.array(2);
        ctx.out.bulk(key);
        ctx.out.array(got.len());
        for v in &got {
            ctx.out.bulk(v);
        }
        Ok(())
    })?;
    Ok(())
}

/// Pops up to `count` members of the sorted set `old` at `key`.
fn zpop_n(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    old: Meta,
    mut batch: Batch,
    max: bool,
    count: u64,
) -> Result<Vec<Scored>, CmdError> {
    let ks = &ctx.ks();
    let mut m = old;
    let got = zset::pop_n(ks, &mut batch, key, &mut m, max, count)?;
    ks.put_collection(&mut batch, key, Some(&old), &m);
    ks.write(batch)?;
    zset::notify_pop(ctx, key, max, m.count == 0);
    Ok(got)
}

fn bzpop(ctx: &mut Ctx<'_>, a: &[Vec<u8>], max: bool) -> CmdResult {
    let timeout = timeout_arg(&a[a.len() - 1])?;
    let w = Wait {
        keys: &a[1..a.len() - 1],
        also_lock: None,
        kind: Kind::ZSet,
        timeout,
        deny: Deny::NullArray,
    };
    serve_or_park(ctx, w, |ctx, key, old, batch| {
        let got = zpop_n(ctx, key, old, batch, max, 1)?;
        // `[key, member, score]`, the score a double (RESP3 `,`).
        ctx.out.array(1 + 2 * got.len());
        ctx.out.bulk(key);
        for (member, score) in &got {
            ctx.out.bulk(member);
            ctx.out.double(*score);
        }
        Ok(())
    })?;
    Ok(())
}

/// `BZPOPMIN key [key ...] timeout`.
pub fn bzpopmin(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    bzpop(ctx, a, false)
}

/// `BZPOPMAX key [key ...] timeout`.
pub fn bzpopmax(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    bzpop(ctx, a, true)
}

/// `BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]`.
pub fn bzmpop(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (keys, max, count) = list::mpop_args(a, 2, zset::min_max)?;
    let timeout = timeout_arg(&a[1])?;
    let w = Wait {
        keys,
        also_lock: None,
        kind: Kind::ZSet,
        timeout,
        deny: Deny::NullArray,
    };
    serve_or_park(ctx, w, |ctx, key, old, batch| {
        let got = zpop_n(ctx, key, old, batch, max, count)?;
        super::zset::reply_key_and_pairs(ctx.out, key, &got);
        Ok(())
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::keyspace::Store;
    use crate::resp::Out;
    use crate::{Config, SyncMode};

    fn shared(dir: &std::path::Path) -> Shared {
        let db = weft::Db::open(dir, weft::Options::default()).unwrap();
        let config = Config {
            save_dir: Some(dir.join("saves")),
            ..Config::default()
        };
        Shared::new(
            Store::new(db, SyncMode::No, 16).unwrap(),
            config,
            0,
            Arc::new(crate::server::Stop::default()),
        )
        .unwrap()
    }

    fn run(sh: &Shared, s: &mut Session, args: &[&str]) -> Vec<u8> {
        let mut out = Out::default();
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        let mut ctx = Ctx {
            shared: sh,
            session: s,
            out: &mut out,
            exec: None,
        };
        super::super::dispatch(&mut ctx, &args);
        out.buf
    }

    /// The hook `EXEC` uses: with `deny_blocking` a blocking command on
    /// empty keys answers at once, as Redis's non-blocking forms inside
    /// `MULTI` (a null array; a null bulk string for the moves), and
    /// parks nothing. On keys with elements it is served as usual.
    #[test]
    fn denied_blocking_answers_at_once_and_parks_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let sh = shared(dir.path());
        let mut s = Session {
            authenticated: true,
            deny_blocking: true,
            ..Session::default()
        };
        for (cmd, want) in [
            (&["BLPOP", "a", "b", "0"][..], &b"*-1\r\n"[..]),
            (&["BRPOP", "a", "1"], b"*-1\r\n"),
            (&["BLMPOP", "0", "1", "a", "LEFT"], b"*-1\r\n"),
            (&["BZPOPMIN", "a", "0"], b"*-1\r\n"),
            (&["BZPOPMAX", "a", "0"], b"*-1\r\n"),
            (&["BZMPOP", "0", "1", "a", "MIN"], b"*-1\r\n"),
            (&["BLMOVE", "a", "b", "LEFT", "LEFT", "0"], b"$-1\r\n"),
            (&["BRPOPLPUSH", "a", "b", "0"], b"$-1\r\n"),
        ] {
            assert_eq!(run(&sh, &mut s, cmd), want, "{cmd:?}");
            assert!(s.blocking.parked.is_none(), "{cmd:?}");
        }
        assert_eq!(sh.waiters.registrations(), 0);
        assert_eq!(sh.waiters.parked_clients(), (0, 0));
        // Errors still come first.
        assert_eq!(
            run(&sh, &mut s, &["BLPOP", "a", "-1"]),
            b"-ERR timeout is negative\r\n"
        );
        run(&sh, &mut s, &["RPUSH", "a", "x"]);
        assert_eq!(
            run(&sh, &mut s, &["BLPOP", "a", "0"]),
            b"*2\r\n$1\r\na\r\n$1\r\nx\r\n"
        );
        // Without the flag, the same command parks.
        s.deny_blocking = false;
        assert_eq!(run(&sh, &mut s, &["BLPOP", "a", "0"]), b"");
        assert!(s.blocking.parked.is_some());
        assert_eq!(sh.waiters.registrations(), 1);
    }

    fn t(s: &str) -> Result<Option<u128>, String> {
        timeout_arg(s.as_bytes())
            .map(|d| d.map(|d| d.as_millis()))
            .map_err(|e| e.0.into_owned())
    }

    /// Each case checked against redis-server 7.0.15.
    #[test]
    fn timeouts_parse_as_redis_7_0_does() {
        assert_eq!(t("0"), Ok(None));
        assert_eq!(t("1"), Ok(Some(1000)));
        assert_eq!(t("0.1"), Ok(Some(100)));
        assert_eq!(t(".01"), Ok(Some(10)));
        assert_eq!(t("+0.01"), Ok(Some(10)));
        assert_eq!(t("0.0001"), Ok(Some(1)), "rounds up to a millisecond");
        assert_eq!(t("1e-400"), Ok(Some(1)), "too small for an f64");
        assert_eq!(t("-0.0001"), Ok(None), "ceil(-0.1) is 0: forever");
        assert_eq!(t("-1e-400"), Ok(None));
        assert_eq!(t("1.5e15"), Ok(Some(1_500_000_000_000_000_000)));
        assert_eq!(t("0x1p-3"), Ok(Some(125)), "strtold reads hexadecimal");
        // In long double, -0.001 · 1000 is -0.999…, which ceil makes 0.
        assert_eq!(t("-0.001"), Ok(None), "waits for ever, as in Redis");
        for neg in [
            "-1",
            "-0.002",
            "inf",
            "-inf",
            "1e30",
            "1e16",
            "9223372036854775807",
        ] {
            assert_eq!(t(neg), Err(NEGATIVE.into()), "{neg}");
        }
        for bad in ["abc", "nan", " 1", "1 ", "", "1s"] {
            assert_eq!(t(bad), Err(NOT_FLOAT.into()), "{bad:?}");
        }
        assert_eq!(t(&"1".repeat(5120)), Err(NOT_FLOAT.into()));
    }
}
