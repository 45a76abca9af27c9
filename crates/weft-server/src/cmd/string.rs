//! String commands. A string's value lives inline in its metadata record,
//! so `GET` is one engine read and `SET` one batch.

use weft::ReadOptions;

use super::{err, int_arg, is, CmdError, CmdResult, Ctx, NOT_INT, OVERFLOW, SYNTAX, WRONGTYPE};
use crate::encoding::{Header, Kind};
use crate::keyspace::{now_ms, Batch, Entry, Keyspace};
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
    ctx.out.ok();
    Ok(())
}

/// Writes string values as one atomic batch under the keys' stripe locks,
/// as if one after the other: the last value of a repeated key wins, and
/// each key is named once in the batch (the key counts rely on it).
fn put_strings<'a>(ks: &Keyspace, pairs: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> CmdResult {
    let mut pairs: Vec<(&[u8], &[u8])> = pairs.collect();
    // Stable: among equal keys the original order stays, and the last wins
    // (`dedup_by` keeps the first of a run; it takes each later value).
    pairs.sort_by(|x, y| x.0.cmp(y.0));
    pairs.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 = later.1;
        }
        same
    });
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
    Ok(out)
}

fn incr_generic(ctx: &mut Ctx<'_>, key: &[u8], by: i64) -> CmdResult {
    let n = update(ctx, key, |old| {
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
    let len = update(ctx, &a[1], |old| {
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
