//! Transactions and databases: `MULTI EXEC DISCARD WATCH UNWATCH`, and
//! `MOVE` and `SWAPDB` (`SELECT`, `FLUSHDB`, `FLUSHALL`, `DBSIZE` are in
//! the server commands).
//!
//! Between `MULTI` and `EXEC` a connection's commands are checked (name,
//! arity, admission, allowed in a transaction) and queued; one refused
//! makes the `EXEC` fail with `EXECABORT`. `EXEC` locks the stripes of
//! every key its queued commands name (their key specs, following the
//! `SELECT`s among them) and of every `WATCH`ed key — every stripe when a
//! command reads or writes a whole database (`KEYS`, `SCAN`, `FLUSHDB`,
//! ...) — checks the watched keys, runs the commands against one
//! [`Exec`] (their writes pending, each command reading those before it)
//! and writes them as one engine batch before it releases a lock. See
//! `docs/DESIGN.md` §1.9, "Transactions".

use weft::ReadOptions;

use super::{err, run, CmdError, CmdResult, Command, Ctx, COMMANDS, NOT_INT};
use crate::keyspace::{now_ms, Batch, Exec, Store};
use crate::resp::Out;

/// The commands queued since `MULTI`.
#[derive(Debug, Default)]
pub struct Queue {
    /// `(command index, request)` in order.
    cmds: Vec<(usize, Vec<Vec<u8>>)>,
    /// A command was refused while queuing: `EXEC` fails.
    failed: bool,
}

/// A `WATCH`ed key: what `EXEC` compares.
#[derive(Debug)]
pub struct Watched {
    db: usize,
    key: Vec<u8>,
    /// Its lock stripe, and the stripe's version when watched.
    stripe: usize,
    version: u64,
    /// Its deadline when watched, if it was live with one: `EXEC` fails
    /// once it has passed (the key expired meanwhile), as Redis 7's does.
    deadline: Option<u64>,
}

/// Marks the transaction being queued (if any) as failed.
pub(super) fn flag(session: &mut super::Session) {
    if let Some(q) = session.multi.as_mut() {
        q.failed = true;
    }
}

/// True for the commands `MULTI` queues; the others run at once.
pub(super) fn queues(cmd: &Command) -> bool {
    !matches!(
        cmd.name,
        "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
    )
}

/// Queues request `args` of command `ix`, or refuses (and flags) one not
/// allowed in a transaction: Redis's `no-multi` commands (`SAVE`,
/// `SHUTDOWN`), and the subscriptions, whose replies (one per channel)
/// do not fit one `EXEC` reply each.
pub(super) fn queue(
    session: &mut super::Session,
    ix: usize,
    args: &[Vec<u8>],
) -> Result<(), &'static str> {
    let Some(q) = session.multi.as_mut() else {
        return Ok(());
    };
    if matches!(
        COMMANDS[ix].name,
        "save" | "shutdown" | "subscribe" | "unsubscribe" | "psubscribe" | "punsubscribe"
    ) {
        q.failed = true;
        return Err("ERR Command not allowed inside a transaction");
    }
    q.cmds.push((ix, args.to_vec()));
    Ok(())
}

pub fn multi(ctx: &mut Ctx<'_>, _a: &[Vec<u8>]) -> CmdResult {
    if ctx.session.in_multi() {
        return err("ERR MULTI calls can not be nested");
    }
    ctx.session.multi = Some(Queue::default());
    ctx.out.ok();
    Ok(())
}

pub fn discard(ctx: &mut Ctx<'_>, _a: &[Vec<u8>]) -> CmdResult {
    if ctx.session.multi.take().is_none() {
        return err("ERR DISCARD without MULTI");
    }
    ctx.session.watched.clear();
    ctx.out.ok();
    Ok(())
}

pub fn unwatch(ctx: &mut Ctx<'_>, _a: &[Vec<u8>]) -> CmdResult {
    ctx.session.watched.clear();
    ctx.out.ok();
    Ok(())
}

pub fn watch(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    if ctx.session.in_multi() {
        return err("ERR WATCH inside MULTI is not allowed");
    }
    let ks = ctx.ks();
    let locks = &ctx.shared.store.locks;
    let db = ks.index();
    for key in &a[1..] {
        if ctx
            .session
            .watched
            .iter()
            .any(|w| w.db == db && w.key == *key)
        {
            continue;
        }
        let stripe = locks.index(db, key);
        // The version first: a write between the two reads changes it, so
        // the EXEC fails rather than miss the write.
        let version = locks.version(stripe);
        let deadline = ks
            .get(key, &ReadOptions::new())?
            .and_then(|e| e.meta.expire_at);
        ctx.session.watched.push(Watched {
            db,
            key: key.clone(),
            stripe,
            version,
            deadline,
        });
    }
    ctx.out.ok();
    Ok(())
}

/// The stripes an `EXEC` locks: `(every stripe, these)`. Walks the queue
/// as it will run, following its `SELECT`s.
fn lock_plan(
    store: &Store,
    mut db: usize,
    cmds: &[(usize, Vec<Vec<u8>>)],
    watched: &[Watched],
) -> (bool, Vec<usize>) {
    let locks = &store.locks;
    let mut stripes: Vec<usize> = watched.iter().map(|w| w.stripe).collect();
    for (ix, args) in cmds {
        let cmd = &COMMANDS[*ix];
        match cmd.name {
            "select" => {
                if let Some(n) = database_arg(store, &args[1]) {
                    db = n;
                }
                continue;
            }
            "move" => {
                stripes.push(locks.index(db, &args[1]));
                if let Some(to) = database_arg(store, &args[2]) {
                    stripes.push(locks.index(to, &args[1]));
                }
                continue;
            }
            "flushall" | "flushdb" | "swapdb" => return (true, Vec::new()),
            _ => {}
        }
        let keys = super::meta::key_positions(cmd, args);
        if keys.is_empty() {
            if super::meta::touches_data(cmd) {
                return (true, Vec::new());
            }
            continue;
        }
        stripes.extend(keys.into_iter().map(|i| locks.index(db, &args[i])));
    }
    (false, stripes)
}

/// A database number in range, if `arg` is one.
fn database_arg(store: &Store, arg: &[u8]) -> Option<usize> {
    let n = super::parse_i64(arg)?;
    usize::try_from(n).ok().filter(|&n| n < store.databases())
}

pub fn exec(ctx: &mut Ctx<'_>, _a: &[Vec<u8>]) -> CmdResult {
    let Some(queue) = ctx.session.multi.take() else {
        return err("ERR EXEC without MULTI");
    };
    let watched = std::mem::take(&mut ctx.session.watched);
    if queue.failed {
        return err("EXECABORT Transaction discarded because of previous errors.");
    }
    // Queued on a primary that has since become a read-only replica (or
    // begun loading): Redis refuses the EXEC whole.
    if ctx.shared.repl.gated() {
        for (ix, _) in &queue.cmds {
            if let Err(msg) = super::replication_gate(ctx.shared, *ix) {
                return Err(CmdError(
                    format!("EXECABORT Transaction discarded because of: {msg}").into(),
                ));
            }
        }
    }
    let store = &ctx.shared.store;
    let (all, stripes) = lock_plan(store, ctx.session.db, &queue.cmds, &watched);
    let (locks, exec) = store.begin_exec(all, stripes);
    // Every watched stripe is held now: no write to a watched key can come
    // between this check and the commit.
    let now = now_ms();
    let intact = watched.iter().all(|w| {
        exec.holds(w.stripe)
            && store.locks.version(w.stripe) == w.version
            && w.deadline.is_none_or(|t| t > now)
    });
    if !intact {
        store.finish_exec(exec, locks, false)?;
        ctx.out.null_array();
        return Ok(());
    }
    let mut out = Out {
        resp3: ctx.out.resp3,
        ..Out::default()
    };
    let posted = ctx.session.posts.len();
    run_queued(ctx, &exec, &queue.cmds, &mut out);
    let ready = match store.finish_exec(exec, locks, true) {
        Ok(ready) => ready,
        Err(e) => {
            // Nothing was applied: nothing its commands raised or posted
            // (keyspace events, messages) goes out.
            ctx.session.posts.truncate(posted);
            return Err(e.into());
        }
    };
    for (db, key) in ready {
        super::blocking::wake_next_after(ctx, db, &key);
    }
    ctx.out.array(queue.cmds.len());
    ctx.out.buf.extend_from_slice(&out.buf);
    ctx.out.resp3 = out.resp3;
    Ok(())
}

/// Runs the queued commands against `exec`, their replies into `out`.
fn run_queued(ctx: &mut Ctx<'_>, exec: &Exec, cmds: &[(usize, Vec<Vec<u8>>)], out: &mut Out) {
    let mut inner = Ctx {
        shared: ctx.shared,
        session: &mut *ctx.session,
        out,
        exec: Some(exec),
    };
    for (ix, args) in cmds {
        // A `REPLICAOF host port` earlier in this EXEC made this server a
        // read-only replica: the writes after it are refused, one by one.
        if inner.shared.repl.gated() {
            if let Err(msg) = super::replication_gate(inner.shared, *ix) {
                super::server::refuse(&mut inner, Some(*ix), msg);
                continue;
            }
        }
        run(&mut inner, *ix, args);
    }
}

/// `MOVE key db`: moves `key` (with its deadline and elements) to database
/// `db` unless it is there already, in one atomic batch; 1 if moved.
pub fn move_(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let key = &a[1];
    let to = super::parse_i64(&a[2]).ok_or(CmdError(NOT_INT.into()))?;
    let ks = ctx.ks();
    let to = usize::try_from(to)
        .ok()
        .filter(|&n| n < ks.store().databases())
        .ok_or(CmdError("ERR DB index is out of range".into()))?;
    if to == ks.index() {
        return err("ERR source and destination objects are the same");
    }
    let dst = ks.with_db(to);
    let _g = ks
        .locks()
        .lock_across(&[(ks.index(), key.as_slice()), (to, key.as_slice())]);
    let mut src_batch = Batch::new();
    let mut dst_batch = Batch::new();
    let moved = match ks.load_for_write(key, &mut src_batch)? {
        None => false,
        Some(e) => {
            if dst.load_for_write(key, &mut dst_batch)?.is_some() {
                false
            } else {
                ks.copy_into(&mut dst_batch, key, &e)?;
                ks.delete_into(&mut src_batch, key, &e.meta)?;
                true
            }
        }
    };
    ks.write_with(src_batch, &dst, dst_batch)?;
    drop(_g);
    if moved {
        // Redis creates the key in `to` (its `new`) before these.
        ctx.raise_pending();
        let from = ks.index();
        ctx.notify_in(from, crate::notify::GENERIC, "move_from", key);
        ctx.notify_in(to, crate::notify::GENERIC, "move_to", key);
        super::coll::key_ready_in(ctx, &dst, key);
    }
    ctx.out.int(i64::from(moved));
    Ok(())
}

/// `SWAPDB`: refused. A database is an engine keyspace named by its
/// number, and the engine cannot rename one atomically.
pub fn swapdb(_ctx: &mut Ctx<'_>, _a: &[Vec<u8>]) -> CmdResult {
    err("ERR SWAPDB is not supported by weft serve (a database is an engine keyspace)")
}
