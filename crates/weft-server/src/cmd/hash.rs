//! Hash commands: a metadata record (type, deadline, field count) plus one
//! engine record per field. Every write is one atomic batch under the key's
//! stripe lock; multi-field reads use one snapshot.

use std::collections::HashSet;

use weft::ReadOptions;

use super::{cursor_arg, err, int_arg, scan_opts, CmdError, CmdResult, Ctx, OVERFLOW, WRONGTYPE};
use crate::encoding::{self, Kind};
use crate::glob;
use crate::keyspace::{Batch, Entry, Keyspace};

/// Reads a hash's entry at `opts`; `Ok(None)` when absent, WRONGTYPE for a string.
fn hash_entry(ks: &Keyspace, key: &[u8], opts: &ReadOptions) -> Result<Option<Entry>, CmdError> {
    match ks.get(key, opts)? {
        Some(e) if e.meta.kind != Kind::Hash => err(WRONGTYPE),
        e => Ok(e),
    }
}

/// Sets field/value pairs; returns how many fields were new.
fn set_fields(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    pairs: &[Vec<u8>],
    only_new: bool,
) -> Result<i64, CmdError> {
    let ks = &ctx.shared.ks;
    let _g = ks.locks.lock(key);
    let mut batch = Batch::new();
    let old = ks.load_for_write(key, &mut batch)?;
    if old.as_ref().is_some_and(|e| e.meta.kind != Kind::Hash) {
        return err(WRONGTYPE);
    }
    let mut count = old.as_ref().map_or(0, |e| e.meta.count);
    let mut seen: HashSet<&[u8]> = HashSet::new();
    let mut added = 0;
    for p in pairs.chunks(2) {
        let (f, v) = (&p[0], &p[1]);
        let fk = encoding::field_key(key, f);
        let exists = seen.contains(f.as_slice()) || (old.is_some() && ks.db.get(&fk)?.is_some());
        if exists && only_new {
            continue;
        }
        if !exists {
            count += 1;
            added += 1;
        }
        seen.insert(f);
        batch.put(fk, v);
    }
    if added > 0 {
        let expire_at = old.as_ref().and_then(|e| e.meta.expire_at);
        let raw = encoding::encode_hash(count, expire_at);
        ks.put_meta(
            &mut batch,
            key,
            old.as_ref().map(|e| &e.meta),
            &[&raw],
            expire_at,
        );
    }
    ks.write(batch)?;
    Ok(added)
}

fn check_pairs(a: &[Vec<u8>], name: &str) -> CmdResult {
    if !(a.len() - 2).is_multiple_of(2) {
        return Err(CmdError(
            format!("ERR wrong number of arguments for '{name}' command").into(),
        ));
    }
    Ok(())
}

pub fn hset(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    check_pairs(a, "hset")?;
    let n = set_fields(ctx, &a[1], &a[2..], false)?;
    ctx.out.int(n);
    Ok(())
}

pub fn hmset(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    check_pairs(a, "hmset")?;
    set_fields(ctx, &a[1], &a[2..], false)?;
    ctx.out.ok();
    Ok(())
}

pub fn hsetnx(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let n = set_fields(ctx, &a[1], &a[2..], true)?;
    ctx.out.int(n);
    Ok(())
}

pub fn hget(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let ks = &ctx.shared.ks;
    let snap = ks.db.snapshot();
    let opts = ReadOptions::new().snapshot(&snap);
    let v = match hash_entry(ks, &a[1], &opts)? {
        Some(_) => ks.db.get_opt(encoding::field_key(&a[1], &a[2]), &opts)?,
        None => None,
    };
    ctx.out.opt_bulk(v.as_deref());
    Ok(())
}

pub fn hmget(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let ks = &ctx.shared.ks;
    let snap = ks.db.snapshot();
    let opts = ReadOptions::new().snapshot(&snap);
    let live = hash_entry(ks, &a[1], &opts)?.is_some();
    let mut vals = Vec::with_capacity(a.len() - 2);
    for f in &a[2..] {
        vals.push(if live {
            ks.db.get_opt(encoding::field_key(&a[1], f), &opts)?
        } else {
            None
        });
    }
    ctx.out.array(vals.len());
    for v in &vals {
        ctx.out.opt_bulk(v.as_deref());
    }
    Ok(())
}

/// A field (or key) and its value.
type Pair = (Vec<u8>, Vec<u8>);

/// All `(field, value)` pairs of a hash, in field order, from one snapshot.
fn all_fields(ks: &Keyspace, key: &[u8]) -> Result<Vec<Pair>, CmdError> {
    let snap = ks.db.snapshot();
    let opts = ReadOptions::new().snapshot(&snap);
    if hash_entry(ks, key, &opts)?.is_none() {
        return Ok(Vec::new());
    }
    let prefix = encoding::hash_prefix(key);
    let mut out = Vec::new();
    let ropts = ReadOptions::new().snapshot(&snap).prefix(&prefix);
    let mut it = ks.db.iter(&ropts)?;
    it.seek_to_first()?;
    while it.valid() {
        out.push((it.key()[prefix.len()..].to_vec(), it.value().to_vec()));
        it.next()?;
    }
    Ok(out)
}

pub fn hgetall(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let pairs = all_fields(&ctx.shared.ks, &a[1])?;
    ctx.out.map(pairs.len());
    for (f, v) in &pairs {
        ctx.out.bulk(f);
        ctx.out.bulk(v);
    }
    Ok(())
}

pub fn hkeys(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let pairs = all_fields(&ctx.shared.ks, &a[1])?;
    ctx.out.array(pairs.len());
    for (f, _) in &pairs {
        ctx.out.bulk(f);
    }
    Ok(())
}

pub fn hvals(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let pairs = all_fields(&ctx.shared.ks, &a[1])?;
    ctx.out.array(pairs.len());
    for (_, v) in &pairs {
        ctx.out.bulk(v);
    }
    Ok(())
}

pub fn hdel(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let key = &a[1];
    let ks = &ctx.shared.ks;
    let _g = ks.locks.lock(key);
    let mut batch = Batch::new();
    let Some(e) = ks.load_for_write(key, &mut batch)? else {
        ks.write(batch)?;
        ctx.out.int(0);
        return Ok(());
    };
    if e.meta.kind != Kind::Hash {
        return err(WRONGTYPE);
    }
    let mut fields: Vec<&[u8]> = a[2..].iter().map(|f| f.as_slice()).collect();
    fields.sort_unstable();
    fields.dedup();
    let mut removed = 0u64;
    for f in fields {
        let fk = encoding::field_key(key, f);
        if ks.db.get(&fk)?.is_some() {
            batch.delete(fk);
            removed += 1;
        }
    }
    if removed > 0 {
        let count = e.meta.count.saturating_sub(removed);
        if count == 0 {
            ks.delete_into(&mut batch, key, &e.meta)?;
        } else {
            let raw = encoding::encode_hash(count, e.meta.expire_at);
            ks.put_meta(&mut batch, key, Some(&e.meta), &[&raw], e.meta.expire_at);
        }
    }
    ks.write(batch)?;
    ctx.out.int(removed as i64);
    Ok(())
}

pub fn hexists(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let ks = &ctx.shared.ks;
    let snap = ks.db.snapshot();
    let opts = ReadOptions::new().snapshot(&snap);
    let found = match hash_entry(ks, &a[1], &opts)? {
        Some(_) => ks
            .db
            .get_opt(encoding::field_key(&a[1], &a[2]), &opts)?
            .is_some(),
        None => false,
    };
    ctx.out.int(i64::from(found));
    Ok(())
}

pub fn hlen(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let e = hash_entry(&ctx.shared.ks, &a[1], &ReadOptions::new())?;
    ctx.out.int(e.map_or(0, |e| e.meta.count as i64));
    Ok(())
}

pub fn hincrby(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (key, field) = (&a[1], &a[2]);
    let by = int_arg(&a[3])?;
    let ks = &ctx.shared.ks;
    let _g = ks.locks.lock(key);
    let mut batch = Batch::new();
    let old = ks.load_for_write(key, &mut batch)?;
    if old.as_ref().is_some_and(|e| e.meta.kind != Kind::Hash) {
        return err(WRONGTYPE);
    }
    let fk = encoding::field_key(key, field);
    let cur = match &old {
        Some(_) => ks.db.get(&fk)?,
        None => None,
    };
    let base = match &cur {
        Some(v) => {
            super::parse_i64(v).ok_or(CmdError("ERR hash value is not an integer".into()))?
        }
        None => 0,
    };
    let n = base.checked_add(by).ok_or(CmdError(OVERFLOW.into()))?;
    batch.put(fk, n.to_string());
    if cur.is_none() {
        let expire_at = old.as_ref().and_then(|e| e.meta.expire_at);
        let count = old.as_ref().map_or(0, |e| e.meta.count) + 1;
        let raw = encoding::encode_hash(count, expire_at);
        ks.put_meta(
            &mut batch,
            key,
            old.as_ref().map(|e| &e.meta),
            &[&raw],
            expire_at,
        );
    }
    ks.write(batch)?;
    ctx.out.int(n);
    Ok(())
}

pub fn hscan(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let key = &a[1];
    let cursor = cursor_arg(&a[2])?;
    let o = scan_opts(&a[3..], false)?;
    let ks = &ctx.shared.ks;
    let snap = ks.db.snapshot();
    let opts = ReadOptions::new().snapshot(&snap);
    let mut found: Vec<Pair> = Vec::new();
    let mut next = None;
    if hash_entry(ks, key, &opts)?.is_some() {
        let prefix = encoding::hash_prefix(key);
        let mut lower = prefix.clone();
        lower.extend_from_slice(
            &o.pattern
                .as_deref()
                .map(glob::literal_prefix)
                .unwrap_or_default(),
        );
        let upper = weft::prefix_successor(&lower);
        if cursor != 0 {
            let at = ks
                .cursor(cursor)
                .ok_or(CmdError("ERR invalid cursor".into()))?;
            if at > lower {
                lower = at;
            }
        }
        let mut ropts = ReadOptions::new().snapshot(&snap).lower_bound(lower);
        if let Some(u) = upper {
            ropts = ropts.upper_bound(u);
        }
        let mut it = ks.db.iter(&ropts)?;
        it.seek_to_first()?;
        let mut visited = 0;
        while it.valid() {
            if visited == o.count {
                next = Some(it.key().to_vec());
                break;
            }
            visited += 1;
            let f = &it.key()[prefix.len()..];
            if o.pattern.as_ref().is_none_or(|p| glob::matches(p, f)) {
                found.push((f.to_vec(), it.value().to_vec()));
            }
            it.next()?;
        }
    } else if cursor != 0 && ks.cursor(cursor).is_none() {
        return err("ERR invalid cursor");
    }
    let next_id = next.map_or(0, |k| ks.new_cursor(k));
    ctx.out.array(2);
    ctx.out.bulk(next_id.to_string().as_bytes());
    ctx.out.array(if o.novalues {
        found.len()
    } else {
        found.len() * 2
    });
    for (f, v) in &found {
        ctx.out.bulk(f);
        if !o.novalues {
            ctx.out.bulk(v);
        }
    }
    Ok(())
}
