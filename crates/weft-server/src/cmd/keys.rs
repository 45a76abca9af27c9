//! Key-space commands: DEL, EXISTS, KEYS, SCAN, expiry, and WEFT.RANGE.
//!
//! Listing commands read the `m` namespace of the engine (one record per
//! user key, in key order), so keys come back sorted and a `MATCH` pattern
//! with a literal prefix turns into a bounded range read.

use weft::ReadOptions;

use super::{cursor_arg, err, int_arg, is, scan_opts, CmdError, CmdResult, Ctx, SYNTAX};
use crate::encoding::{self, Kind};
use crate::glob;
use crate::keyspace::{decode_entry, meta_range, now_ms, Batch};

pub fn del(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let ks = &ctx.ks();
    let mut keys: Vec<&[u8]> = a[1..].iter().map(|k| k.as_slice()).collect();
    keys.sort_unstable();
    keys.dedup();
    let _g = ks.locks().lock_many(keys.iter().copied());
    let mut batch = Batch::new();
    let mut n = 0;
    for k in keys {
        if let Some(e) = ks.load_for_write(k, &mut batch)? {
            ks.delete_into(&mut batch, k, &e.meta)?;
            n += 1;
        }
    }
    ks.write(batch)?;
    ctx.out.int(n);
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
    if cursor != 0 {
        let at = ks
            .cursor(cursor)
            .ok_or(CmdError("ERR invalid cursor".into()))?;
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
    let at = n
        .checked_mul(unit as i64)
        .and_then(|ms| ms.checked_add(now))
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
    if at <= now {
        ks.delete_into(&mut batch, key, &e.meta)?;
    } else {
        let at = at as u64;
        let raw = encoding::with_expiry(e.raw(), Some(at))
            .ok_or_else(|| CmdError("ERR weft: malformed metadata".into()))?;
        ks.put_meta(&mut batch, key, Some(&e.meta), &[&raw], Some(at));
    }
    ks.write(batch)?;
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
