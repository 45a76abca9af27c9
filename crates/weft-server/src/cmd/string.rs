//! String commands. A string's value lives inline in its metadata record,
//! so `GET` is one engine read and `SET` one batch.

use std::collections::hash_map::Entry as Slot;
use std::collections::HashMap;

use weft::ReadOptions;

use super::long_double::LongDouble;
use super::{err, int_arg, is, CmdError, CmdResult, Ctx, NOT_INT, OVERFLOW, SYNTAX, WRONGTYPE};
use crate::encoding::{Header, Kind};
use crate::keyspace::{now_ms, Batch, Entry, Keyspace};
use crate::notify::{GENERIC, STRING};
use crate::resp::Out;

fn check_len(ctx: &Ctx<'_>, len: usize) -> CmdResult {
    if len > ctx.shared.config.max_bulk.min(weft::MAX_VALUE_SIZE - 9) {
        return err("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
    }
    Ok(())
}

fn string_value(e: Option<Entry>) -> Result<Option<Vec<u8>>, CmdError> {
    match e {
        None => Ok(None),
        Some(e) if e.meta.kind == Kind::String => Ok(Some(e.into_payload())),
        Some(_) => err(WRONGTYPE),
    }
}

pub fn get(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let e = ctx.ks().get(&a[1], &ReadOptions::new())?;
    match &e {
        None => ctx.out.null(),
        Some(e) if e.meta.kind == Kind::String => ctx.out.bulk(e.payload()),
        Some(_) => return err(WRONGTYPE),
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cond {
    Always,
    Nx,
    Xx,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ttl {
    Clear,
    Keep,
    At(u64),
}

/// The core of SET/SETNX/GETSET: returns `(applied, old value)`.
fn set_generic(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    value: &[u8],
    cond: Cond,
    ttl: Ttl,
    want_old: bool,
) -> Result<(bool, Option<Vec<u8>>), CmdError> {
    check_len(ctx, value.len())?;
    let ks = &ctx.ks();
    let _g = ks.locks().lock(key);
    let mut batch = Batch::new();
    let old = ks.load_for_write(key, &mut batch)?;
    if want_old && old.as_ref().is_some_and(|e| e.meta.kind != Kind::String) {
        return err(WRONGTYPE);
    }
    let applied = match cond {
        Cond::Always => true,
        Cond::Nx => old.is_none(),
        Cond::Xx => old.is_some(),
    };
    if applied {
        let expire_at = match ttl {
            Ttl::Clear => None,
            Ttl::Keep => old.as_ref().and_then(|e| e.meta.expire_at),
            Ttl::At(t) => Some(t),
        };
        ks.put_replacing(
            &mut batch,
            key,
            old.as_ref().map(|e| &e.meta),
            &[Header::new(Kind::String, expire_at).as_bytes(), value],
            expire_at,
        )?;
    }
    // An expired key's cleanup is written even when NX/XX refuse the set.
    ks.write(batch)?;
    if applied {
        ctx.notify(STRING, "set", key);
        if matches!(ttl, Ttl::At(_)) {
            ctx.notify(GENERIC, "expire", key);
        }
    }
    let old = if want_old { string_value(old)? } else { None };
    Ok((applied, old))
}

/// Converts a relative or absolute expire argument to a deadline.
pub fn deadline(arg: &[u8], unit_ms: u64, absolute: bool, cmd: &str) -> Result<u64, CmdError> {
    let n = int_arg(arg)?;
    let bad = || CmdError(format!("ERR invalid expire time in '{cmd}' command").into());
    if n <= 0 {
        return Err(bad());
    }
    let ms = (n as u64).checked_mul(unit_ms).ok_or_else(bad)?;
    let at = if absolute {
        ms
    } else {
        now_ms().checked_add(ms).ok_or_else(bad)?
    };
    if at > i64::MAX as u64 {
        return Err(bad());
    }
    Ok(at)
}

pub fn set(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let mut cond = Cond::Always;
    let mut ttl = Ttl::Clear;
    let mut ttl_set = false;
    let mut want_old = false;
    let mut i = 3;
    while i < a.len() {
        let o = &a[i];
        let next = a.get(i + 1);
        if is(o, "nx") && cond == Cond::Always {
            cond = Cond::Nx;
        } else if is(o, "xx") && cond == Cond::Always {
            cond = Cond::Xx;
        } else if is(o, "get") {
            want_old = true;
        } else if is(o, "keepttl") && !ttl_set {
            ttl = Ttl::Keep;
            ttl_set = true;
        } else if !ttl_set
            && next.is_some()
            && (is(o, "ex") || is(o, "px") || is(o, "exat") || is(o, "pxat"))
        {
            let unit = if is(o, "ex") || is(o, "exat") {
                1000
            } else {
                1
            };
            let abs = is(o, "exat") || is(o, "pxat");
            ttl = Ttl::At(deadline(next.map_or(&[][..], |v| v), unit, abs, "set")?);
            ttl_set = true;
            i += 1;
        } else {
            return err(SYNTAX);
        }
        i += 1;
    }
    let (applied, old) = set_generic(ctx, &a[1], &a[2], cond, ttl, want_old)?;
    if want_old {
        ctx.out.opt_bulk(old.as_deref());
    } else if applied {
        ctx.out.ok();
    } else {
        ctx.out.null();
    }
    Ok(())
}

pub fn setnx(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (applied, _) = set_generic(ctx, &a[1], &a[2], Cond::Nx, Ttl::Clear, false)?;
    ctx.out.int(i64::from(applied));
    Ok(())
}

pub fn getset(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (_, old) = set_generic(ctx, &a[1], &a[2], Cond::Always, Ttl::Clear, true)?;
    ctx.out.opt_bulk(old.as_deref());
    Ok(())
}

pub fn mget(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let keys: Vec<&[u8]> = a[1..].iter().map(|k| &k[..]).collect();
    let entries = ctx.ks().get_many(&keys, &ReadOptions::new());
    ctx.out.array(keys.len());
    for e in entries {
        match e? {
            Some(e) if e.meta.kind == Kind::String => ctx.out.bulk(e.payload()),
            _ => ctx.out.null(),
        }
    }
    Ok(())
}

pub fn mset(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    if a.len().is_multiple_of(2) {
        return Err(CmdError(
            "ERR wrong number of arguments for 'mset' command".into(),
        ));
    }
    for pair in a[1..].chunks(2) {
        check_len(ctx, pair[1].len())?;
    }
    put_strings(&ctx.ks(), a[1..].chunks(2).map(|p| (&p[0][..], &p[1][..])))?;
    for pair in a[1..].chunks(2) {
        ctx.notify(STRING, "set", &pair[0]);
    }
    ctx.out.ok();
    Ok(())
}

/// Writes string values as one atomic batch under the keys' stripe locks,
/// as if one after the other: the last value of a repeated key wins, and
/// each key is named once in the batch (the key counts rely on it).
/// `pairs` with each key once, holding its last value (as `MSET k 1 k 2`
/// leaves 2), in the order of first appearance. A hash map finds repeats:
/// sorting, as this did first, was a seventh of an `MSET` group commit's
/// instructions (thousands of keys compared byte by byte), and nothing
/// needs the order (locks are taken in stripe order, reads and the batch
/// take keys in any order).
fn last_values<'a>(pairs: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> Vec<(&'a [u8], &'a [u8])> {
    let mut out: Vec<(&[u8], &[u8])> = pairs.collect();
    if out.len() < 2 {
        return out;
    }
    let mut slot: HashMap<&[u8], usize> = HashMap::with_capacity(out.len());
    let mut kept = 0;
    for i in 0..out.len() {
        let (k, v) = out[i];
        match slot.entry(k) {
            Slot::Occupied(e) => out[*e.get()].1 = v,
            Slot::Vacant(e) => {
                e.insert(kept);
                out[kept] = (k, v);
                kept += 1;
            }
        }
    }
    out.truncate(kept);
    out
}

fn put_strings<'a>(ks: &Keyspace, pairs: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> CmdResult {
    let pairs = last_values(pairs);
    let _g = ks.locks().lock_many(pairs.iter().map(|p| p.0));
    let bytes = pairs.iter().map(|(k, v)| k.len() + v.len() + 12).sum();
    let mut batch = Batch::with_capacity(bytes);
    let keys: Vec<&[u8]> = pairs.iter().map(|p| p.0).collect();
    let olds = ks.load_many_for_write(&keys, &mut batch)?;
    let header = Header::new(Kind::String, None);
    for ((k, v), old) in pairs.into_iter().zip(olds) {
        ks.put_replacing(
            &mut batch,
            k,
            old.as_ref().map(|e| &e.meta),
            &[header.as_bytes(), v],
            None,
        )?;
    }
    ks.write(batch)?;
    Ok(())
}

/// True for `SET key value` without options and for a well-formed `MSET`
/// whose values are within bounds: blind string writes that a connection
/// may coalesce with its neighbours in a pipeline ([`commit_sets`]).
pub fn is_plain_set(max_bulk: usize, a: &[Vec<u8>]) -> bool {
    let name = &a[0];
    let shape = if name.len() == 3 && name.eq_ignore_ascii_case(b"set") {
        a.len() == 3
    } else if name.len() == 4 && name.eq_ignore_ascii_case(b"mset") {
        a.len() >= 3 && a.len() % 2 == 1
    } else {
        false
    };
    let max = max_bulk.min(weft::MAX_VALUE_SIZE - 9);
    shape && a[1..].chunks(2).all(|p| p[1].len() <= max)
}

/// Commits plain SET/MSET requests (see [`is_plain_set`]) as one atomic
/// batch: all their keys' stripes locked in order, one engine write. The
/// caller sends one `+OK` per request on success, or the error for each
/// (nothing was applied). Equivalent to running them one after the other
/// in the given order, since nothing observes them in between; requests of
/// different clients in one batch are concurrent, so any order is theirs.
/// `ks` is the database they write (the group of a loop's connections is
/// database 0's; a connection on another database commits its own runs).
pub fn commit_sets(ks: &Keyspace, group: &[Vec<Vec<u8>>]) -> CmdResult {
    put_strings(
        ks,
        group
            .iter()
            .flat_map(|a| a[1..].chunks(2))
            .map(|p| (&p[0][..], &p[1][..])),
    )
}

/// True for `GET key`: a read a connection may answer together with the
/// `GET`s next to it in its pipeline ([`answer_gets`]).
pub fn is_plain_get(a: &[Vec<u8>]) -> bool {
    a.len() == 2 && a[0].len() == 3 && a[0].eq_ignore_ascii_case(b"get")
}

/// Answers consecutive plain `GET`s of one connection (see
/// [`is_plain_get`]) with one engine read: all at one sequence, as if run
/// back to back with nothing in between, and with the memtable lookups of
/// all the keys overlapping (`Db::multi_get`). Appends one reply each.
pub fn answer_gets(ks: &Keyspace, gets: &[Vec<Vec<u8>>], out: &mut Out) {
    let keys: Vec<&[u8]> = gets.iter().map(|a| &a[1][..]).collect();
    for e in ks.get_many(&keys, &ReadOptions::new()) {
        match e {
            Ok(None) => out.null(),
            Ok(Some(e)) if e.meta.kind == Kind::String => out.bulk(e.payload()),
            Ok(Some(_)) => out.error(WRONGTYPE),
            Err(e) => out.error(&CmdError::from(e).0),
        }
    }
}

/// Appends the replies of `n` requests committed by [`commit_sets`].
pub fn reply_sets(out: &mut Out, n: usize, r: &CmdResult) {
    for _ in 0..n {
        match r {
            Ok(()) => out.ok(),
            Err(CmdError(m)) => out.error(m),
        }
    }
}

/// Read-modify-write of a string under its key's lock, keeping its TTL.
fn update<T>(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    event: Option<&'static str>,
    f: impl FnOnce(Option<&[u8]>) -> Result<(Vec<u8>, T), CmdError>,
) -> Result<T, CmdError> {
    let ks = &ctx.ks();
    let _g = ks.locks().lock(key);
    let mut batch = Batch::new();
    let old = ks.load_for_write(key, &mut batch)?;
    if old.as_ref().is_some_and(|e| e.meta.kind != Kind::String) {
        return err(WRONGTYPE);
    }
    let (new, out) = f(old.as_ref().map(|e| e.payload()))?;
    let expire_at = old.as_ref().and_then(|e| e.meta.expire_at);
    ks.put_meta(
        &mut batch,
        key,
        old.as_ref().map(|e| &e.meta),
        &[Header::new(Kind::String, expire_at).as_bytes(), &new],
        expire_at,
    );
    ks.write(batch)?;
    if let Some(event) = event {
        ctx.notify(STRING, event, key);
    }
    Ok(out)
}

fn incr_generic(ctx: &mut Ctx<'_>, key: &[u8], by: i64) -> CmdResult {
    let n = update(ctx, key, Some("incrby"), |old| {
        let cur = match old {
            Some(v) => super::parse_i64(v).ok_or(CmdError(NOT_INT.into()))?,
            None => 0,
        };
        let n = cur.checked_add(by).ok_or(CmdError(OVERFLOW.into()))?;
        Ok((n.to_string().into_bytes(), n))
    })?;
    ctx.out.int(n);
    Ok(())
}

pub fn incr(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    incr_generic(ctx, &a[1], 1)
}

pub fn decr(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    incr_generic(ctx, &a[1], -1)
}

pub fn incrby(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let by = int_arg(&a[2])?;
    incr_generic(ctx, &a[1], by)
}

pub fn decrby(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let by = int_arg(&a[2])?;
    let by = by
        .checked_neg()
        .ok_or(CmdError("ERR decrement would overflow".into()))?;
    incr_generic(ctx, &a[1], by)
}

pub fn append(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let max = ctx.shared.config.max_bulk.min(weft::MAX_VALUE_SIZE - 9);
    let len = update(ctx, &a[1], Some("append"), |old| {
        let old = old.unwrap_or_default();
        if old.len() + a[2].len() > max {
            return err("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
        }
        let mut v = Vec::with_capacity(old.len() + a[2].len());
        v.extend_from_slice(old);
        v.extend_from_slice(&a[2]);
        let n = v.len();
        Ok((v, n))
    })?;
    ctx.out.int(len as i64);
    Ok(())
}

pub fn strlen(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let v = string_value(ctx.ks().get(&a[1], &ReadOptions::new())?)?;
    ctx.out.int(v.map_or(0, |v| v.len() as i64));
    Ok(())
}

/// Redis's GETRANGE index rules; `None` for the empty result.
pub fn clamp_range(len: usize, start: i64, end: i64) -> Option<(usize, usize)> {
    let len = len as i64;
    if (start < 0 && end < 0 && start > end) || len == 0 {
        return None;
    }
    let mut s = if start < 0 { len + start } else { start };
    let mut e = if end < 0 { len + end } else { end };
    s = s.max(0);
    e = e.max(0);
    if e >= len {
        e = len - 1;
    }
    if s > e {
        return None;
    }
    Some((s as usize, e as usize))
}

pub fn getrange(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let start = int_arg(&a[2])?;
    let end = int_arg(&a[3])?;
    let v = string_value(ctx.ks().get(&a[1], &ReadOptions::new())?)?.unwrap_or_default();
    match clamp_range(v.len(), start, end) {
        Some((s, e)) => ctx.out.bulk(&v[s..=e]),
        None => ctx.out.bulk(b""),
    }
    Ok(())
}

pub fn substr(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    getrange(ctx, a)
}

pub fn setex(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let at = deadline(&a[2], 1000, false, "setex")?;
    set_generic(ctx, &a[1], &a[3], Cond::Always, Ttl::At(at), false)?;
    ctx.out.ok();
    Ok(())
}

pub fn psetex(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let at = deadline(&a[2], 1, false, "psetex")?;
    set_generic(ctx, &a[1], &a[3], Cond::Always, Ttl::At(at), false)?;
    ctx.out.ok();
    Ok(())
}

/// What `GETEX` does to the deadline.
enum GetexTtl {
    Keep,
    Persist,
    /// `(argument, unit in ms, absolute)`.
    Set(usize, u64, bool),
}

pub fn getex(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    // Redis's parser: one of PERSIST, EX, PX, EXAT, PXAT, each with its
    // argument; anything else (or a second one) is a syntax error.
    let mut ttl = GetexTtl::Keep;
    let mut i = 2;
    while i < a.len() {
        let o = &a[i];
        let has_next = i + 1 < a.len();
        let unset = matches!(ttl, GetexTtl::Keep);
        if is(o, "persist") && (unset || matches!(ttl, GetexTtl::Persist)) {
            ttl = GetexTtl::Persist;
        } else if (is(o, "ex") || is(o, "px") || is(o, "exat") || is(o, "pxat"))
            && has_next
            && (unset || matches!(&ttl, GetexTtl::Set(j, ..) if a[*j - 1].eq_ignore_ascii_case(o)))
        {
            let unit = if is(o, "ex") || is(o, "exat") {
                1000
            } else {
                1
            };
            ttl = GetexTtl::Set(i + 1, unit, is(o, "exat") || is(o, "pxat"));
            i += 1;
        } else {
            return err(SYNTAX);
        }
        i += 1;
    }
    let key = &a[1];
    let ks = &ctx.ks();
    let _g = ks.locks().lock(key);
    let mut batch = Batch::new();
    let Some(e) = ks.load_for_write(key, &mut batch)? else {
        ks.write(batch)?;
        ctx.out.null();
        return Ok(());
    };
    if e.meta.kind != Kind::String {
        ks.write(batch)?;
        return err(WRONGTYPE);
    }
    let event = match ttl {
        GetexTtl::Keep => None,
        GetexTtl::Persist => {
            let had = e.meta.expire_at.is_some();
            if had {
                let h = Header::new(Kind::String, None);
                ks.put_meta(
                    &mut batch,
                    key,
                    Some(&e.meta),
                    &[h.as_bytes(), e.payload()],
                    None,
                );
            }
            had.then_some("persist")
        }
        GetexTtl::Set(j, unit, abs) => {
            let at = deadline(&a[j], unit, abs, "getex")?;
            if at <= now_ms() {
                ks.delete_into(&mut batch, key, &e.meta)?;
                Some("del")
            } else {
                let h = Header::new(Kind::String, Some(at));
                let rec = [h.as_bytes(), e.payload()];
                ks.put_meta(&mut batch, key, Some(&e.meta), &rec, Some(at));
                Some("expire")
            }
        }
    };
    ks.write(batch)?;
    if let Some(event) = event {
        ctx.notify(GENERIC, event, key);
    }
    ctx.out.bulk(e.payload());
    Ok(())
}

pub fn getdel(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let key = &a[1];
    let ks = &ctx.ks();
    let _g = ks.locks().lock(key);
    let mut batch = Batch::new();
    let e = ks.load_for_write(key, &mut batch)?;
    if let Some(e) = &e {
        if e.meta.kind != Kind::String {
            ks.write(batch)?;
            return err(WRONGTYPE);
        }
        ks.delete_into(&mut batch, key, &e.meta)?;
    }
    ks.write(batch)?;
    if e.is_some() {
        ctx.notify(GENERIC, "del", key);
    }
    ctx.out.opt_bulk(e.as_ref().map(|e| e.payload()));
    Ok(())
}

pub fn msetnx(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    if a.len().is_multiple_of(2) {
        return Err(CmdError(
            "ERR wrong number of arguments for 'msetnx' command".into(),
        ));
    }
    for pair in a[1..].chunks(2) {
        check_len(ctx, pair[1].len())?;
    }
    // The last value of a repeated key wins, as in MSET.
    let pairs = last_values(a[1..].chunks(2).map(|p| (&p[0][..], &p[1][..])));
    let ks = &ctx.ks();
    let _g = ks.locks().lock_many(pairs.iter().map(|p| p.0));
    let mut batch = Batch::new();
    let keys: Vec<&[u8]> = pairs.iter().map(|p| p.0).collect();
    let olds = ks.load_many_for_write(&keys, &mut batch)?;
    let any = olds.iter().any(|o| o.is_some());
    if !any {
        let header = Header::new(Kind::String, None);
        for (k, v) in &pairs {
            ks.put_meta(&mut batch, k, None, &[header.as_bytes(), v], None);
        }
    }
    // Expired keys found on the way are deleted either way.
    ks.write(batch)?;
    if !any {
        for pair in a[1..].chunks(2) {
            ctx.notify(STRING, "set", &pair[0]);
        }
    }
    ctx.out.int(i64::from(!any));
    Ok(())
}

pub fn setrange(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let offset = int_arg(&a[2])?;
    if offset < 0 {
        return err("ERR offset is out of range");
    }
    let value = &a[3];
    let max = ctx.shared.config.max_bulk.min(weft::MAX_VALUE_SIZE - 9) as u64;
    let too_long = (offset as u64).saturating_add(value.len() as u64) > max;
    let key = &a[1];
    let ks = &ctx.ks();
    let _g = ks.locks().lock(key);
    let mut batch = Batch::new();
    let old = ks.load_for_write(key, &mut batch)?;
    let result = match &old {
        Some(e) if e.meta.kind != Kind::String => Err(CmdError(WRONGTYPE.into())),
        Some(e) if value.is_empty() => Ok(e.payload().len()),
        None if value.is_empty() => Ok(0),
        _ if too_long => err("ERR string exceeds maximum allowed size (proto-max-bulk-len)"),
        _ => {
            let mut v = old
                .as_ref()
                .map(|e| e.payload().to_vec())
                .unwrap_or_default();
            let (at, end) = (offset as usize, offset as usize + value.len());
            if v.len() < end {
                v.resize(end, 0);
            }
            v[at..end].copy_from_slice(value);
            let expire_at = old.as_ref().and_then(|e| e.meta.expire_at);
            ks.put_meta(
                &mut batch,
                key,
                old.as_ref().map(|e| &e.meta),
                &[Header::new(Kind::String, expire_at).as_bytes(), &v],
                expire_at,
            );
            Ok(v.len())
        }
    };
    ks.write(batch)?;
    let written = result.is_ok() && !value.is_empty();
    if written {
        ctx.notify(STRING, "setrange", key);
    }
    ctx.out.int(result? as i64);
    Ok(())
}

/// `old + by` as `INCRBYFLOAT`/`HINCRBYFLOAT` print it: `long double`
/// arithmetic as Redis does it on x86-64 (`long_double.rs`). `None` when
/// the sum is NaN or infinite.
pub(crate) fn add_floats(old: LongDouble, by: LongDouble) -> Option<String> {
    old.add(by).filter(|v| v.is_finite()).map(LongDouble::human)
}

pub fn incrbyfloat(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let by = &a[2];
    let new = update(ctx, &a[1], Some("incrbyfloat"), |old| {
        let old = old.unwrap_or(b"0");
        let (Some(old), Some(by)) = (LongDouble::parse(old), LongDouble::parse(by)) else {
            return err("ERR value is not a valid float");
        };
        let v = add_floats(old, by).ok_or(CmdError(
            "ERR increment would produce NaN or Infinity".into(),
        ))?;
        Ok((v.clone().into_bytes(), v))
    })?;
    ctx.out.bulk(new.as_bytes());
    Ok(())
}

/// A bit offset as Redis's `getBitOffsetFromArgument` takes it.
fn bit_offset(ctx: &Ctx<'_>, s: &[u8]) -> Result<u64, CmdError> {
    const MSG: &str = "ERR bit offset is not an integer or out of range";
    let n = super::parse_i64(s).ok_or(CmdError(MSG.into()))?;
    if n < 0 || (n >> 3) as u64 >= ctx.shared.config.max_bulk as u64 {
        return err(MSG);
    }
    Ok(n as u64)
}

pub fn getbit(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let off = bit_offset(ctx, &a[2])?;
    let v = string_value(ctx.ks().get(&a[1], &ReadOptions::new())?)?.unwrap_or_default();
    ctx.out.int(i64::from(super::bits::get_bit(&v, off)));
    Ok(())
}

pub fn setbit(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    const MSG: &str = "ERR bit is not an integer or out of range";
    let off = bit_offset(ctx, &a[2])?;
    let on = match super::parse_i64(&a[3]) {
        Some(0) => false,
        Some(1) => true,
        _ => return err(MSG),
    };
    if (off >> 3) as usize + 1 > weft::MAX_VALUE_SIZE - 9 {
        return err("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
    }
    let (old, changed) = update(ctx, &a[1], None, |old| {
        let mut v = old.map(<[u8]>::to_vec).unwrap_or_default();
        let bit = super::bits::set_bit(&mut v, off, on);
        // Redis raises `setbit` only for a key created or grown, or a
        // bit changed.
        let changed = old.is_none_or(|o| o.len() != v.len()) || (bit == 1) != on;
        Ok((v, (bit, changed)))
    })?;
    if changed {
        ctx.notify(STRING, "setbit", &a[1]);
    }
    ctx.out.int(i64::from(old));
    Ok(())
}

/// `BIT` or `BYTE` (the unit of a range), else a syntax error.
fn unit_arg(s: &[u8]) -> Result<bool, CmdError> {
    if is(s, "bit") {
        Ok(true)
    } else if is(s, "byte") {
        Ok(false)
    } else {
        err(SYNTAX)
    }
}

pub fn bitcount(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let v = string_value(ctx.ks().get(&a[1], &ReadOptions::new())?)?;
    let Some(v) = v else {
        ctx.out.int(0);
        return Ok(());
    };
    let (range, bits) = match a.len() {
        2 => (None, false),
        4 | 5 => {
            let (s, e) = (int_arg(&a[2])?, int_arg(&a[3])?);
            if s < 0 && e < 0 && s > e {
                ctx.out.int(0);
                return Ok(());
            }
            let bits = match a.get(4) {
                Some(u) => unit_arg(u)?,
                None => false,
            };
            (Some((s, e)), bits)
        }
        _ => return err(SYNTAX),
    };
    ctx.out.int(super::bits::count(&v, range, bits) as i64);
    Ok(())
}

pub fn bitpos(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let bit = match int_arg(&a[2])? {
        0 => 0,
        1 => 1,
        _ => return err("ERR The bit argument must be 1 or 0."),
    };
    let v = string_value(ctx.ks().get(&a[1], &ReadOptions::new())?)?;
    let Some(v) = v else {
        ctx.out.int(if bit == 1 { -1 } else { 0 });
        return Ok(());
    };
    if a.len() > 6 {
        return err(SYNTAX);
    }
    let start = a.get(3).map(|s| int_arg(s)).transpose()?;
    let bits = match a.get(5) {
        Some(u) => unit_arg(u)?,
        None => false,
    };
    let end = a.get(4).map(|s| int_arg(s)).transpose()?;
    ctx.out.int(super::bits::pos(&v, bit, start, end, bits));
    Ok(())
}

pub fn lcs(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let ks = &ctx.ks();
    let (_snap, opts) = super::coll::snapshot(ks);
    let mut vals = Vec::with_capacity(2);
    for k in &a[1..3] {
        vals.push(match ks.get(k, &opts)? {
            None => Vec::new(),
            Some(e) if e.meta.kind == Kind::String => e.into_payload(),
            Some(_) => return err("ERR The specified keys must contain string values"),
        });
    }
    let (mut getlen, mut getidx, mut withmatchlen) = (false, false, false);
    let mut minmatchlen: i64 = 0;
    let mut i = 3;
    while i < a.len() {
        let o = &a[i];
        if is(o, "idx") {
            getidx = true;
        } else if is(o, "len") {
            getlen = true;
        } else if is(o, "withmatchlen") {
            withmatchlen = true;
        } else if is(o, "minmatchlen") && i + 1 < a.len() {
            minmatchlen = int_arg(&a[i + 1])?.max(0);
            i += 1;
        } else {
            return err(SYNTAX);
        }
        i += 1;
    }
    if getlen && getidx {
        return err("ERR If you want both the length and indexes, please just use IDX.");
    }
    let (x, y) = (&vals[0], &vals[1]);
    let cells = (x.len() as u64 + 1) * (y.len() as u64 + 1);
    if cells.saturating_mul(4) > ctx.shared.config.max_bulk as u64 {
        return err("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
    }
    let r = lcs_table(x, y, minmatchlen as u64);
    if getidx {
        ctx.out.map(2);
        ctx.out.bulk(b"matches");
        ctx.out.array(r.ranges.len());
        for (xr, yr, len) in &r.ranges {
            ctx.out.array(2 + usize::from(withmatchlen));
            for (s, e) in [xr, yr] {
                ctx.out.array(2);
                ctx.out.int(*s as i64);
                ctx.out.int(*e as i64);
            }
            if withmatchlen {
                ctx.out.int(*len as i64);
            }
        }
        ctx.out.bulk(b"len");
        ctx.out.int(r.len as i64);
    } else if getlen {
        ctx.out.int(r.len as i64);
    } else {
        ctx.out.bulk(&r.common);
    }
    Ok(())
}

/// A match of `LCS ... IDX`: `(x start, x end)`, `(y start, y end)`,
/// length.
type LcsMatch = ((u64, u64), (u64, u64), u64);

/// The result of [`lcs_table`].
struct Lcs {
    len: u64,
    common: Vec<u8>,
    /// Matching ranges `((x start, x end), (y start, y end), length)`,
    /// from the end of the strings backwards, as Redis lists them.
    ranges: Vec<LcsMatch>,
}

/// The longest common subsequence of `x` and `y` by Redis's dynamic
/// programme and walk back (`lcsCommand`), so that ties resolve as in
/// Redis and the ranges come out in its order.
fn lcs_table(x: &[u8], y: &[u8], minmatchlen: u64) -> Lcs {
    let w = y.len() + 1;
    let mut t = vec![0u32; (x.len() + 1) * w];
    for i in 1..=x.len() {
        for j in 1..=y.len() {
            t[i * w + j] = if x[i - 1] == y[j - 1] {
                t[(i - 1) * w + j - 1] + 1
            } else {
                t[(i - 1) * w + j].max(t[i * w + j - 1])
            };
        }
    }
    let len = t[x.len() * w + y.len()];
    let mut common = vec![0u8; len as usize];
    let mut idx = len as usize;
    let mut ranges = Vec::new();
    let (mut i, mut j) = (x.len(), y.len());
    // `None`: no range open.
    let mut open: Option<(usize, usize, usize, usize)> = None;
    while i > 0 && j > 0 {
        let mut emit = false;
        if x[i - 1] == y[j - 1] {
            common[idx - 1] = x[i - 1];
            match &mut open {
                None => open = Some((i - 1, i - 1, j - 1, j - 1)),
                Some((xs, _, ys, _)) if *xs == i && *ys == j => {
                    *xs -= 1;
                    *ys -= 1;
                }
                Some(_) => emit = true,
            }
            if open.is_some_and(|(xs, _, ys, _)| xs == 0 || ys == 0) {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if t[(i - 1) * w + j] > t[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if open.is_some() {
                emit = true;
            }
        }
        if emit {
            if let Some((xs, xe, ys, ye)) = open.take() {
                let mlen = (xe - xs + 1) as u64;
                if minmatchlen == 0 || mlen >= minmatchlen {
                    ranges.push(((xs as u64, xe as u64), (ys as u64, ye as u64), mlen));
                }
            }
        }
    }
    Lcs {
        len: u64::from(len),
        common,
        ranges,
    }
}

#[cfg(test)]
mod tests {
    use super::clamp_range;

    #[test]
    fn getrange_like_redis() {
        // "This is a string"
        let n = 16;
        assert_eq!(clamp_range(n, 0, 3), Some((0, 3)));
        assert_eq!(clamp_range(n, -3, -1), Some((13, 15)));
        assert_eq!(clamp_range(n, 0, -1), Some((0, 15)));
        assert_eq!(clamp_range(n, 10, 100), Some((10, 15)));
        assert_eq!(clamp_range(n, 5, 3), None);
        assert_eq!(clamp_range(n, -1, -5), None);
        assert_eq!(clamp_range(0, 0, -1), None);
        assert_eq!(clamp_range(n, -100, 2), Some((0, 2)));
    }
}
