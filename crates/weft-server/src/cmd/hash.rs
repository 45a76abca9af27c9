//! Hash commands: a metadata record (type, deadline, version, field count)
//! plus one engine record per field under the version. Every write is one atomic batch under the key's
//! stripe lock; multi-field reads use one snapshot.

use std::collections::HashSet;

use weft::ReadOptions;

use super::coll::{load_meta, or_new, read_meta};
use super::long_double::LongDouble;
use super::{
    cursor_arg, err, int_arg, is, range_arg, scan_opts, CmdError, CmdResult, Ctx, OVERFLOW, SYNTAX,
};
use crate::encoding::{self, Kind, Meta};
use crate::keyspace::{Batch, Keyspace};
use crate::notify::{GENERIC, HASH};

/// Reads a hash's metadata at `opts`; `Ok(None)` when absent, WRONGTYPE
/// for another type.
fn hash_entry(ks: &Keyspace, key: &[u8], opts: &ReadOptions) -> Result<Option<Meta>, CmdError> {
    read_meta(ks, key, Kind::Hash, opts)
}

/// The engine key of `field` of the hash `meta` describes.
fn field_key(key: &[u8], meta: &Meta, field: &[u8]) -> Vec<u8> {
    encoding::element_key(encoding::HASH, key, meta.version, field)
}

/// Sets field/value pairs; returns how many fields were new.
fn set_fields(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    pairs: &[Vec<u8>],
    only_new: bool,
) -> Result<i64, CmdError> {
    let ks = &ctx.ks();
    let _g = ks.locks().lock(key);
    let mut batch = Batch::new();
    let old = load_meta(ks, key, Kind::Hash, &mut batch)?;
    let mut meta = or_new(old, Kind::Hash);
    // Fields set earlier in this command (a field may repeat); one field,
    // the common case, needs no set (and its allocation).
    let repeats = pairs.len() > 2;
    let mut seen: HashSet<&[u8]> = HashSet::new();
    let mut added = 0;
    let mut written = false;
    for p in pairs.chunks(2) {
        let (f, v) = (&p[0], &p[1]);
        let fk = field_key(key, &meta, f);
        let exists = (repeats && seen.contains(f.as_slice()))
            || (old.is_some() && ks.db().get(&fk)?.is_some());
        if exists && only_new {
            continue;
        }
        if !exists {
            meta.count += 1;
            added += 1;
        }
        if repeats {
            seen.insert(f);
        }
        batch.put(fk, v);
        written = true;
    }
    if added > 0 {
        ks.put_collection(&mut batch, key, old.as_ref(), &meta);
    }
    ks.write(batch)?;
    if written {
        ctx.notify(HASH, "hset", key);
    }
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
    let ks = &ctx.ks();
    let snap = ks.db().snapshot();
    let opts = ReadOptions::new().snapshot(&snap);
    let v = match hash_entry(ks, &a[1], &opts)? {
        Some(m) => ks.db().get_opt(field_key(&a[1], &m, &a[2]), &opts)?,
        None => None,
    };
    ctx.out.opt_bulk(v.as_deref());
    Ok(())
}

pub fn hmget(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let ks = &ctx.ks();
    let snap = ks.db().snapshot();
    let opts = ReadOptions::new().snapshot(&snap);
    let live = hash_entry(ks, &a[1], &opts)?;
    let mut vals = Vec::with_capacity(a.len() - 2);
    for f in &a[2..] {
        vals.push(match &live {
            Some(m) => ks.db().get_opt(field_key(&a[1], m, f), &opts)?,
            None => None,
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
    let snap = ks.db().snapshot();
    let opts = ReadOptions::new().snapshot(&snap);
    match hash_entry(ks, key, &opts)? {
        None => Ok(Vec::new()),
        Some(m) => super::coll::elements(ks, encoding::HASH, key, &m, Some(&snap)),
    }
}

pub fn hgetall(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let pairs = all_fields(&ctx.ks(), &a[1])?;
    ctx.out.map(pairs.len());
    for (f, v) in &pairs {
        ctx.out.bulk(f);
        ctx.out.bulk(v);
    }
    Ok(())
}

pub fn hkeys(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let pairs = all_fields(&ctx.ks(), &a[1])?;
    ctx.out.array(pairs.len());
    for (f, _) in &pairs {
        ctx.out.bulk(f);
    }
    Ok(())
}

pub fn hvals(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let pairs = all_fields(&ctx.ks(), &a[1])?;
    ctx.out.array(pairs.len());
    for (_, v) in &pairs {
        ctx.out.bulk(v);
    }
    Ok(())
}

pub fn hdel(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let key = &a[1];
    let ks = &ctx.ks();
    let _g = ks.locks().lock(key);
    let mut batch = Batch::new();
    let Some(old) = load_meta(ks, key, Kind::Hash, &mut batch)? else {
        ks.write(batch)?;
        ctx.out.int(0);
        return Ok(());
    };
    let mut fields: Vec<&[u8]> = a[2..].iter().map(|f| f.as_slice()).collect();
    fields.sort_unstable();
    fields.dedup();
    let mut removed = 0u64;
    for f in fields {
        let fk = field_key(key, &old, f);
        if ks.db().get(&fk)?.is_some() {
            batch.delete(fk);
            removed += 1;
        }
    }
    if removed > 0 {
        let new = Meta {
            count: old.count.saturating_sub(removed),
            ..old
        };
        ks.put_collection(&mut batch, key, Some(&old), &new);
    }
    ks.write(batch)?;
    if removed > 0 {
        ctx.notify(HASH, "hdel", key);
        if removed >= old.count {
            ctx.notify(GENERIC, "del", key);
        }
    }
    ctx.out.int(removed as i64);
    Ok(())
}

pub fn hexists(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let ks = &ctx.ks();
    let snap = ks.db().snapshot();
    let opts = ReadOptions::new().snapshot(&snap);
    let found = match hash_entry(ks, &a[1], &opts)? {
        Some(m) => ks
            .db()
            .get_opt(field_key(&a[1], &m, &a[2]), &opts)?
            .is_some(),
        None => false,
    };
    ctx.out.int(i64::from(found));
    Ok(())
}

pub fn hlen(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let e = hash_entry(&ctx.ks(), &a[1], &ReadOptions::new())?;
    ctx.out.int(e.map_or(0, |m| m.count as i64));
    Ok(())
}

pub fn hincrby(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (key, field) = (&a[1], &a[2]);
    let by = int_arg(&a[3])?;
    let ks = &ctx.ks();
    let _g = ks.locks().lock(key);
    let mut batch = Batch::new();
    let old = load_meta(ks, key, Kind::Hash, &mut batch)?;
    let mut meta = or_new(old, Kind::Hash);
    let fk = field_key(key, &meta, field);
    let cur = match &old {
        Some(_) => ks.db().get(&fk)?,
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
        meta.count += 1;
        ks.put_collection(&mut batch, key, old.as_ref(), &meta);
    }
    ks.write(batch)?;
    ctx.notify(HASH, "hincrby", key);
    ctx.out.int(n);
    Ok(())
}

pub fn hscan(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let cursor = cursor_arg(&a[2])?;
    let o = scan_opts(&a[3..], false)?;
    let (next_id, found) =
        super::coll::scan(&ctx.ks(), &a[1], Kind::Hash, encoding::HASH, cursor, &o)?;
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

pub fn hstrlen(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let ks = &ctx.ks();
    let (_snap, opts) = super::coll::snapshot(ks);
    let n = match hash_entry(ks, &a[1], &opts)? {
        Some(m) => ks
            .db()
            .get_opt(field_key(&a[1], &m, &a[2]), &opts)?
            .map_or(0, |v| v.len()),
        None => 0,
    };
    ctx.out.int(n as i64);
    Ok(())
}

pub fn hincrbyfloat(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (key, field) = (&a[1], &a[2]);
    let by = LongDouble::parse(&a[3]).ok_or(CmdError("ERR value is not a valid float".into()))?;
    if !by.is_finite() {
        return Err(CmdError("ERR value is NaN or Infinity".into()));
    }
    let ks = &ctx.ks();
    let _g = ks.locks().lock(key);
    let mut batch = Batch::new();
    let old = load_meta(ks, key, Kind::Hash, &mut batch)?;
    let mut meta = or_new(old, Kind::Hash);
    let fk = field_key(key, &meta, field);
    let cur = match &old {
        Some(_) => ks.db().get(&fk)?,
        None => None,
    };
    let base = LongDouble::parse(cur.as_deref().unwrap_or(b"0"))
        .ok_or(CmdError("ERR hash value is not a float".into()))?;
    let n = super::string::add_floats(base, by).ok_or(CmdError(
        "ERR increment would produce NaN or Infinity".into(),
    ))?;
    batch.put(fk, n.as_bytes());
    if cur.is_none() {
        meta.count += 1;
        ks.put_collection(&mut batch, key, old.as_ref(), &meta);
    }
    ks.write(batch)?;
    ctx.notify(HASH, "hincrbyfloat", key);
    ctx.out.bulk(n.as_bytes());
    Ok(())
}

pub fn hrandfield(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let count = match a.get(2) {
        Some(c) => Some(range_arg(c, -i64::MAX, i64::MAX, None)?),
        None => None,
    };
    let withvalues = match a.len() {
        2 | 3 => false,
        4 if is(&a[3], "withvalues") => true,
        _ => return err(SYNTAX),
    };
    if withvalues && count.is_some_and(|c| !(-i64::MAX / 2..=i64::MAX / 2).contains(&c)) {
        return err("ERR value is out of range");
    }
    let key = &a[1];
    let ks = &ctx.ks();
    let (snap, opts) = super::coll::snapshot(ks);
    let m = hash_entry(ks, key, &opts)?;
    let n = count.map_or(1, |c| c.unsigned_abs());
    let got = match m {
        Some(m) => super::set::sample(
            ks,
            encoding::HASH,
            key,
            &m,
            n,
            count.is_some_and(|c| c < 0),
            &snap,
        )?,
        None => Vec::new(),
    };
    let Some(_) = count else {
        ctx.out.opt_bulk(got.first().map(|(f, _)| f.as_slice()));
        return Ok(());
    };
    let pairs_nested = withvalues && ctx.out.resp3;
    ctx.out.array(if withvalues && !pairs_nested {
        got.len() * 2
    } else {
        got.len()
    });
    for (f, v) in &got {
        if pairs_nested {
            ctx.out.array(2);
        }
        ctx.out.bulk(f);
        if withvalues {
            ctx.out.bulk(v);
        }
    }
    Ok(())
}
