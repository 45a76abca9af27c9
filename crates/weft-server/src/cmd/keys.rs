//! Key-space commands: DEL, EXISTS, KEYS, SCAN, expiry, and WEFT.RANGE.
//!
//! Listing commands read the `m` namespace of the engine (one record per
//! user key, in key order), so keys come back sorted and a `MATCH` pattern
//! with a literal prefix turns into a bounded range read.

use weft::ReadOptions;

use rand::seq::SliceRandom;

use super::value;
use super::{cursor_arg, err, int_arg, is, scan_opts, CmdError, CmdResult, Ctx, SYNTAX};
use crate::encoding::{self, Kind};
use crate::glob;
use crate::keyspace::{decode_entry, meta_range, now_ms, Batch, Entry, Keyspace};
use crate::notify::GENERIC;

pub fn del(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let ks = &ctx.ks();
    let mut keys: Vec<&[u8]> = a[1..].iter().map(|k| k.as_slice()).collect();
    keys.sort_unstable();
    keys.dedup();
    let _g = ks.locks().lock_many(keys.iter().copied());
    let mut batch = Batch::new();
    let mut deleted = Vec::new();
    for k in keys {
        if let Some(e) = ks.load_for_write(k, &mut batch)? {
            ks.delete_into(&mut batch, k, &e.meta)?;
            deleted.push(k);
        }
    }
    ks.write(batch)?;
    // Redis raises `del` in argument order, once per key deleted.
    if ctx.shared.store.notify.wants(GENERIC) {
        let mut raised = std::collections::HashSet::new();
        for k in &a[1..] {
            if deleted.contains(&k.as_slice()) && raised.insert(k.as_slice()) {
                ctx.notify(GENERIC, "del", k);
            }
        }
    }
    ctx.out.int(deleted.len() as i64);
    Ok(())
}

pub fn exists(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let ks = &ctx.ks();
    let snap = ks.db().snapshot();
    let opts = ReadOptions::new().snapshot(&snap);
    let mut n = 0;
    for k in &a[1..] {
        n += i64::from(ks.get(k, &opts)?.is_some());
    }
    ctx.out.int(n);
    Ok(())
}

pub fn keys(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let pattern = &a[1];
    let (lower, upper) = meta_range(&glob::literal_prefix(pattern));
    let now = now_ms();
    let all = pattern.as_slice() == b"*";
    let mut found = Vec::new();
    for kv in ctx.ks().db().range(lower..upper)? {
        let (k, v) = kv?;
        let user = &k[1..];
        let e = decode_entry(user, v)?;
        if !e.meta.expired(now) && (all || glob::matches(pattern, user)) {
            found.push(k);
        }
    }
    ctx.out.array(found.len());
    for k in &found {
        ctx.out.bulk(&k[1..]);
    }
    Ok(())
}

pub fn scan(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let cursor = cursor_arg(&a[1])?;
    let o = scan_opts(&a[2..], true)?;
    let ks = &ctx.ks();
    let prefix = o
        .pattern
        .as_deref()
        .map(glob::literal_prefix)
        .unwrap_or_default();
    let (mut lower, upper) = meta_range(&prefix);
    // A cursor this server did not hand out (or has forgotten) scans from
    // the start: Redis takes any number as a cursor and still returns
    // every key present throughout before its cursor 0.
    if let Some(at) = ks.cursor(cursor) {
        if at > lower {
            lower = at;
        }
    }
    let now = now_ms();
    let mut found = Vec::new();
    let mut next = None;
    let mut visited = 0;
    if lower < upper {
        for kv in ks.db().range(lower..upper)? {
            let (k, v) = kv?;
            if visited == o.count {
                next = Some(k);
                break;
            }
            visited += 1;
            let user = &k[1..];
            let e = decode_entry(user, v)?;
            if e.meta.expired(now) {
                continue;
            }
            if o.pattern.as_ref().is_some_and(|p| !glob::matches(p, user)) {
                continue;
            }
            if o.kind
                .as_ref()
                .is_some_and(|t| t.as_slice() != e.meta.kind.name().as_bytes())
            {
                continue;
            }
            found.push(k);
        }
    }
    let next_id = next.map_or(0, |k| ks.new_cursor(k));
    ctx.out.array(2);
    ctx.out.bulk(next_id.to_string().as_bytes());
    ctx.out.array(found.len());
    for k in &found {
        ctx.out.bulk(&k[1..]);
    }
    Ok(())
}

fn expire_generic(ctx: &mut Ctx<'_>, a: &[Vec<u8>], unit: u64, cmd: &str) -> CmdResult {
    expire_core(ctx, a, unit, false, cmd)
}

fn expire_at_generic(ctx: &mut Ctx<'_>, a: &[Vec<u8>], unit: u64, cmd: &str) -> CmdResult {
    expire_core(ctx, a, unit, true, cmd)
}

/// `EXPIRE`/`PEXPIRE` (relative to now) and `EXPIREAT`/`PEXPIREAT`
/// (`absolute`) with their NX/XX/GT/LT conditions.
fn expire_core(
    ctx: &mut Ctx<'_>,
    a: &[Vec<u8>],
    unit: u64,
    absolute: bool,
    cmd: &str,
) -> CmdResult {
    let key = &a[1];
    let n = int_arg(&a[2])?;
    let bad = || CmdError(format!("ERR invalid expire time in '{cmd}' command").into());
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for o in &a[3..] {
        if is(o, "nx") {
            nx = true;
        } else if is(o, "xx") {
            xx = true;
        } else if is(o, "gt") {
            gt = true;
        } else if is(o, "lt") {
            lt = true;
        } else {
            return Err(CmdError(
                format!("ERR Unsupported option {}", String::from_utf8_lossy(o)).into(),
            ));
        }
    }
    if nx && (xx || gt || lt) {
        return err("ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if gt && lt {
        return err("ERR GT and LT options at the same time are not compatible");
    }
    let now = now_ms() as i64;
    let base = if absolute { 0 } else { now };
    let at = n
        .checked_mul(unit as i64)
        .and_then(|ms| ms.checked_add(base))
        .ok_or_else(bad)?;
    let ks = &ctx.ks();
    let _g = ks.locks().lock(key);
    let mut batch = Batch::new();
    let Some(e) = ks.load_for_write(key, &mut batch)? else {
        ks.write(batch)?;
        ctx.out.int(0);
        return Ok(());
    };
    let cur = e.meta.expire_at;
    let ok = if nx {
        cur.is_none()
    } else if xx {
        cur.is_some()
    } else if gt {
        cur.is_some_and(|c| at > c as i64)
    } else if lt {
        cur.is_none_or(|c| at < c as i64)
    } else {
        true
    };
    if !ok {
        ctx.out.int(0);
        return Ok(());
    }
    let event = if at <= now {
        ks.delete_into(&mut batch, key, &e.meta)?;
        "del"
    } else {
        let at = at as u64;
        let raw = encoding::with_expiry(e.raw(), Some(at))
            .ok_or_else(|| CmdError("ERR weft: malformed metadata".into()))?;
        ks.put_meta(&mut batch, key, Some(&e.meta), &[&raw], Some(at));
        "expire"
    };
    ks.write(batch)?;
    ctx.notify(GENERIC, event, key);
    ctx.out.int(1);
    Ok(())
}

pub fn expire(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    expire_generic(ctx, a, 1000, "expire")
}

pub fn pexpire(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    expire_generic(ctx, a, 1, "pexpire")
}

fn ttl_generic(ctx: &mut Ctx<'_>, key: &[u8], seconds: bool) -> CmdResult {
    let n = match ctx.ks().get(key, &ReadOptions::new())? {
        None => -2,
        Some(e) => match e.meta.expire_at {
            None => -1,
            Some(t) => {
                let ms = t.saturating_sub(now_ms()) as i64;
                if seconds {
                    (ms + 500) / 1000
                } else {
                    ms
                }
            }
        },
    };
    ctx.out.int(n);
    Ok(())
}

pub fn ttl(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    ttl_generic(ctx, &a[1], true)
}

pub fn pttl(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    ttl_generic(ctx, &a[1], false)
}

pub fn persist(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let key = &a[1];
    let ks = &ctx.ks();
    let _g = ks.locks().lock(key);
    let mut batch = Batch::new();
    let e = ks.load_for_write(key, &mut batch)?;
    let done = match e {
        Some(e) if e.meta.expire_at.is_some() => {
            let raw = encoding::with_expiry(e.raw(), None)
                .ok_or_else(|| CmdError("ERR weft: malformed metadata".into()))?;
            ks.put_meta(&mut batch, key, Some(&e.meta), &[&raw], None);
            true
        }
        _ => false,
    };
    ks.write(batch)?;
    if done {
        ctx.notify(GENERIC, "persist", key);
    }
    ctx.out.int(i64::from(done));
    Ok(())
}

/// `WEFT.RANGE start end [LIMIT n] [REV]`: string keys in `[start, end)`
/// (an empty `end` is unbounded) with their values, in key order (or
/// reversed), from one snapshot. Hashes in the range are skipped.
pub fn weft_range(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let mut limit = usize::MAX;
    let mut rev = false;
    let mut i = 3;
    while i < a.len() {
        if is(&a[i], "limit") && i + 1 < a.len() {
            let n = int_arg(&a[i + 1])?;
            if n < 0 {
                return err("ERR LIMIT must not be negative");
            }
            limit = n as usize;
            i += 2;
        } else if is(&a[i], "rev") {
            rev = true;
            i += 1;
        } else {
            return err(SYNTAX);
        }
    }
    let lower = encoding::meta_key(&a[1]);
    let upper = if a[2].is_empty() {
        vec![encoding::META + 1]
    } else {
        encoding::meta_key(&a[2])
    };
    let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    if lower < upper && limit > 0 {
        let now = now_ms();
        let range = ctx.ks().db().range(lower..upper)?;
        let mut take = |kv: weft::Result<(Vec<u8>, Vec<u8>)>| -> Result<bool, CmdError> {
            let (k, v) = kv?;
            let e = decode_entry(&k[1..], v)?;
            if e.meta.kind == Kind::String && !e.meta.expired(now) {
                let mut k = k;
                k.remove(0);
                pairs.push((k, e.into_payload()));
            }
            Ok(pairs.len() < limit)
        };
        if rev {
            for kv in range.rev() {
                if !take(kv)? {
                    break;
                }
            }
        } else {
            for kv in range {
                if !take(kv)? {
                    break;
                }
            }
        }
    }
    ctx.out.map(pairs.len());
    for (k, v) in &pairs {
        ctx.out.bulk(k);
        ctx.out.bulk(v);
    }
    Ok(())
}

pub fn expireat(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    expire_at_generic(ctx, a, 1000, "expireat")
}

pub fn pexpireat(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    expire_at_generic(ctx, a, 1, "pexpireat")
}

fn expiretime_generic(ctx: &mut Ctx<'_>, key: &[u8], ms: bool) -> CmdResult {
    let n = match ctx.ks().get(key, &ReadOptions::new())? {
        None => -2,
        Some(e) => match e.meta.expire_at {
            None => -1,
            Some(t) if ms => t as i64,
            Some(t) => (t / 1000) as i64,
        },
    };
    ctx.out.int(n);
    Ok(())
}

pub fn expiretime(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    expiretime_generic(ctx, &a[1], false)
}

pub fn pexpiretime(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    expiretime_generic(ctx, &a[1], true)
}

pub fn touch(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    // Weft keeps no access clock (OBJECT IDLETIME): TOUCH counts the keys
    // that exist, as Redis replies.
    exists(ctx, a)
}

/// `RENAME` and `RENAMENX`: the value (and deadline) of `src` moves to
/// `dst`, replacing what `dst` held, in one batch under both keys' locks.
/// A collection's elements are read and written again under `dst` (their
/// keys carry the user key): O(elements), see `value.rs`.
fn rename_generic(ctx: &mut Ctx<'_>, a: &[Vec<u8>], nx: bool) -> CmdResult {
    let (src, dst) = (&a[1][..], &a[2][..]);
    let ks = &ctx.ks();
    let g = ks.locks().lock_many([src, dst]);
    let mut batch = Batch::new();
    let Some(e) = ks.load_for_write(src, &mut batch)? else {
        ks.write(batch)?;
        return err("ERR no such key");
    };
    if src == dst {
        ks.write(batch)?;
        reply_rename(ctx, nx, !nx);
        return Ok(());
    }
    let old_dst = ks.load_for_write(dst, &mut batch)?;
    if nx && old_dst.is_some() {
        ks.write(batch)?;
        ctx.out.int(0);
        return Ok(());
    }
    let v = value::load(ks, src, &e, None)?;
    ks.delete_into(&mut batch, src, &e.meta)?;
    if let Some(d) = &old_dst {
        ks.delete_into(&mut batch, dst, &d.meta)?;
    }
    value::store(ks, &mut batch, dst, &v, e.meta.expire_at);
    ks.write(batch)?;
    drop(g);
    // Redis creates `dst` (its `new`) before it raises these.
    ctx.raise_pending();
    ctx.notify(GENERIC, "rename_from", src);
    ctx.notify(GENERIC, "rename_to", dst);
    // A list or sorted set arriving at `dst` serves its blocked clients.
    super::coll::key_ready(ctx, dst);
    reply_rename(ctx, nx, true);
    Ok(())
}

fn reply_rename(ctx: &mut Ctx<'_>, nx: bool, done: bool) {
    if nx {
        ctx.out.int(i64::from(done));
    } else {
        ctx.out.ok();
    }
}

pub fn rename(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    rename_generic(ctx, a, false)
}

pub fn renamenx(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    rename_generic(ctx, a, true)
}

/// `COPY src dst [DB n] [REPLACE]`: the value (and deadline) of `src`
/// copied to `dst` of database `n` (the connection's by default), in one
/// batch under both keys' locks (one atomic write across the two
/// databases' keyspaces when they differ, as `MOVE`).
pub fn copy(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let ks = ctx.ks();
    let mut replace = false;
    let mut to = ks.index();
    let mut i = 3;
    while i < a.len() {
        if is(&a[i], "replace") {
            replace = true;
        } else if is(&a[i], "db") && i + 1 < a.len() {
            let n = int_arg(&a[i + 1])?;
            if i32::try_from(n).is_err() {
                return err(super::NOT_INT);
            }
            to = usize::try_from(n)
                .ok()
                .filter(|&n| n < ks.store().databases())
                .ok_or(CmdError("ERR DB index is out of range".into()))?;
            i += 1;
        } else {
            return err(SYNTAX);
        }
        i += 1;
    }
    let (src, dst) = (&a[1][..], &a[2][..]);
    if src == dst && to == ks.index() {
        return err("ERR source and destination objects are the same");
    }
    let dks = ks.with_db(to);
    let same_db = to == ks.index();
    let g = ks.locks().lock_across(&[(ks.index(), src), (to, dst)]);
    let mut batch = Batch::new();
    let mut dst_batch = Batch::new();
    let Some(e) = ks.load_for_write(src, &mut batch)? else {
        ks.write(batch)?;
        ctx.out.int(0);
        return Ok(());
    };
    let old_dst = dks.load_for_write(dst, if same_db { &mut batch } else { &mut dst_batch })?;
    let copied = old_dst.is_none() || replace;
    if copied {
        let v = value::load(&ks, src, &e, None)?;
        let out = if same_db { &mut batch } else { &mut dst_batch };
        if let Some(d) = &old_dst {
            dks.delete_into(out, dst, &d.meta)?;
        }
        value::store(&dks, out, dst, &v, e.meta.expire_at);
    }
    if same_db {
        ks.write(batch)?;
    } else {
        ks.write_with(batch, &dks, dst_batch)?;
    }
    drop(g);
    if copied {
        ctx.notify_in(to, GENERIC, "copy_to", dst);
        super::coll::key_ready_in(ctx, &dks, dst);
    }
    ctx.out.int(i64::from(copied));
    Ok(())
}

/// Keys below this count are picked uniformly from a full read of the
/// metadata namespace; above, by a seek to a random point between the
/// first and the last key (a key's chance grows with the gap before it,
/// as `SRANDMEMBER`'s sampling: DESIGN §1.9).
const RANDOMKEY_READ_ALL: u64 = 1024;

pub fn randomkey(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let _ = a;
    let ks = &ctx.ks();
    let (_snap, opts) = super::coll::snapshot(ks);
    let now = now_ms();
    let (lower, upper) = meta_range(b"");
    let mut rng = rand::thread_rng();
    let (keys, _) = ks.key_counts();
    let live = |k: &[u8], v: Vec<u8>| -> Result<bool, CmdError> {
        Ok(!decode_entry(&k[1..], v)?.meta.expired(now))
    };
    if keys <= RANDOMKEY_READ_ALL {
        let mut all = Vec::new();
        let mut it = ks
            .db()
            .iter(&opts.clone().lower_bound(lower).upper_bound(upper))?;
        it.seek_to_first()?;
        while it.valid() {
            if live(it.key(), it.value().to_vec())? {
                all.push(it.key()[1..].to_vec());
            }
            it.next()?;
        }
        ctx.out.opt_bulk(all.choose(&mut rng).map(|k| k.as_slice()));
        return Ok(());
    }
    let mut it = ks
        .db()
        .iter(&opts.clone().lower_bound(lower).upper_bound(upper))?;
    it.seek_to_first()?;
    if !it.valid() {
        ctx.out.null();
        return Ok(());
    }
    let first = it.key().to_vec();
    it.seek_to_last()?;
    let last = it.key().to_vec();
    let at = super::set::random_point(&first, &last, &mut rng);
    it.seek(&at)?;
    if !it.valid() {
        it.seek_to_first()?;
    }
    // The first live key from there, wrapping once.
    let mut wrapped = false;
    loop {
        if !it.valid() {
            if wrapped {
                ctx.out.null();
                return Ok(());
            }
            wrapped = true;
            it.seek_to_first()?;
            continue;
        }
        if live(it.key(), it.value().to_vec())? {
            ctx.out.bulk(&it.key()[1..]);
            return Ok(());
        }
        it.next()?;
    }
}

/// The encoding Redis 7.0 (default settings) would report for a value of
/// `key`: a string by its bytes (`int`, `embstr` up to 44 bytes, `raw`),
/// a list `quicklist`, a set `intset` (at most 512 integers) or
/// `hashtable`, a sorted set `listpack` (at most 128 members of at most
/// 64 bytes) or `skiplist`, a hash `listpack` (at most 512 fields, fields
/// and values of at most 64 bytes) or `hashtable`. Redis's answer also
/// depends on the key's history (a string grown by APPEND is `raw`, a set
/// that outgrew its small encoding keeps the big one); this one depends
/// only on the value.
fn encoding_name(ks: &Keyspace, key: &[u8], e: &Entry) -> Result<&'static str, CmdError> {
    let m = &e.meta;
    let small = |ns: u8, max: u64, f: &dyn Fn(&[u8], &[u8]) -> bool| {
        if m.count > max {
            return Ok::<bool, CmdError>(false);
        }
        let all = super::coll::elements(ks, ns, key, m, None)?;
        Ok(all.iter().all(|(k, v)| f(k, v)))
    };
    Ok(match m.kind {
        Kind::String => {
            let v = e.payload();
            if v.len() <= 20 && super::parse_i64(v).is_some() {
                "int"
            } else if v.len() <= 44 {
                "embstr"
            } else {
                "raw"
            }
        }
        Kind::List => "quicklist",
        Kind::Set => {
            if small(encoding::SET, 512, &|k, _| super::parse_i64(k).is_some())? {
                "intset"
            } else {
                "hashtable"
            }
        }
        Kind::ZSet => {
            if small(encoding::ZSET, 128, &|k, _| k.len() <= 64)? {
                "listpack"
            } else {
                "skiplist"
            }
        }
        Kind::Hash => {
            if small(encoding::HASH, 512, &|k, v| k.len() <= 64 && v.len() <= 64)? {
                "listpack"
            } else {
                "hashtable"
            }
        }
    })
}

/// `OBJECT ENCODING|FREQ|IDLETIME|REFCOUNT|HELP`. `ENCODING` answers
/// Redis's name for the value ([`encoding_name`]). `IDLETIME` answers 0:
/// Weft keeps no access clock per key (one would turn every read into a
/// write), so every key reads as just used. `FREQ` answers Redis's own
/// error for a server whose `maxmemory-policy` is not LFU, which Weft's
/// (`noeviction`) is not. `REFCOUNT` answers as Redis 7.0 does for an
/// unshared value: 1, and 2147483647 for the integers 0..9999 that Redis
/// shares.
pub fn object(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let sub = &a[1];
    if a.len() == 2 && is(sub, "help") {
        let lines = [
            "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
            "HELP",
            "    Prints this help.",
        ];
        ctx.out.array(lines.len());
        for l in lines {
            ctx.out.simple(l);
        }
        return Ok(());
    }
    // Redis 7 checks subcommands as commands of their own: a name, then
    // an arity (`object|help` takes none, the others a key).
    let Some(name) = ["help", "encoding", "freq", "idletime", "refcount"]
        .into_iter()
        .find(|n| is(sub, n))
    else {
        return Err(CmdError(
            format!(
                "ERR unknown subcommand '{}'. Try OBJECT HELP.",
                String::from_utf8_lossy(sub)
            )
            .into(),
        ));
    };
    if a.len() != 3 || name == "help" {
        return Err(CmdError(
            format!("ERR wrong number of arguments for 'object|{name}' command").into(),
        ));
    }
    let ks = &ctx.ks();
    let Some(e) = ks.get(&a[2], &ReadOptions::new())? else {
        ctx.out.null();
        return Ok(());
    };
    if is(sub, "encoding") {
        let name = encoding_name(ks, &a[2], &e)?;
        ctx.out.bulk(name.as_bytes());
    } else if is(sub, "idletime") {
        ctx.out.int(0);
    } else if is(sub, "refcount") {
        let shared = e.meta.kind == Kind::String
            && super::parse_i64(e.payload()).is_some_and(|n| (0..10_000).contains(&n));
        ctx.out.int(if shared { i64::from(i32::MAX) } else { 1 });
    } else {
        return err("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.");
    }
    Ok(())
}
