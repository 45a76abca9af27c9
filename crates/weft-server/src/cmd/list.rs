//! List commands. A list is a metadata record (version, head index,
//! count) and one engine record per element at `head .. head + count`
//! (`encoding::list_key`): pushes and pops at either end write or delete
//! one record and move `head` or the count, an index is one get, a range
//! one ordered scan, and popped elements' tombstones lie outside every
//! later read's bounds. Inserts and removals in the middle rewrite the
//! shorter side (Redis moves elements in memory; this moves records).
//! Every write is one batch under the key's stripe lock (both keys', in
//! stripe order, for LMOVE).

use weft::{ReadOptions, Snapshot};

use super::coll::{clamp, key_ready, load_meta, or_new, read_meta, snapshot};
use super::{
    err, int_arg, is, positive_arg, range_arg, CmdError, CmdResult, Ctx, SYNTAX, WRONGTYPE,
};
use crate::encoding::{self, Kind, Meta};
use crate::keyspace::{Batch, Keyspace, RANGE_DELETE_ELEMENTS};
use crate::notify::{GENERIC, LIST};

/// The engine key of the element at position `pos` (0 = head).
fn lkey(key: &[u8], m: &Meta, pos: u64) -> Vec<u8> {
    encoding::list_key(key, m.version, m.head + pos)
}

/// The elements at positions `[start, end)`, one ordered scan (at `snap`
/// if given).
fn read_range(
    ks: &Keyspace,
    key: &[u8],
    m: &Meta,
    start: u64,
    end: u64,
    snap: Option<&Snapshot>,
) -> Result<Vec<Vec<u8>>, CmdError> {
    if start >= end {
        return Ok(Vec::new());
    }
    let mut opts = ReadOptions::new()
        .lower_bound(lkey(key, m, start))
        .upper_bound(lkey(key, m, end));
    if let Some(s) = snap {
        opts = opts.snapshot(s);
    }
    let mut it = ks.db().iter(&opts)?;
    it.seek_to_first()?;
    let mut out = Vec::with_capacity((end - start).min(1 << 16) as usize);
    while it.valid() {
        out.push(it.value().to_vec());
        it.next()?;
    }
    if out.len() as u64 != end - start {
        return Err(CmdError(
            format!(
                "ERR weft: list '{}' is missing elements",
                key.escape_ascii()
            )
            .into(),
        ));
    }
    Ok(out)
}

/// Deletes positions `[start, end)`: one range delete when there are many.
fn delete_positions(batch: &mut Batch, key: &[u8], m: &Meta, start: u64, end: u64) {
    if end.saturating_sub(start) >= RANGE_DELETE_ELEMENTS {
        batch.delete_range(lkey(key, m, start), lkey(key, m, end));
    } else {
        for p in start..end {
            batch.delete(lkey(key, m, p));
        }
    }
}

const INDEX_SPACE: &str = "ERR weft: list index space exhausted";

/// Adds `e` at the head (`left`) or the tail of `m` into `batch`.
fn push_one(batch: &mut Batch, key: &[u8], m: &mut Meta, left: bool, e: &[u8]) -> CmdResult {
    if left {
        m.head = m.head.checked_sub(1).ok_or(CmdError(INDEX_SPACE.into()))?;
        batch.put(lkey(key, m, 0), e);
    } else {
        if m.head.checked_add(m.count + 1).is_none() {
            return err(INDEX_SPACE);
        }
        batch.put(lkey(key, m, m.count), e);
    }
    m.count += 1;
    Ok(())
}

/// Removes up to `n` elements from the head (`left`) or the tail of `m`
/// into `batch`, returning them in pop order.
pub(super) fn pop_n(
    ks: &Keyspace,
    batch: &mut Batch,
    key: &[u8],
    m: &mut Meta,
    left: bool,
    n: u64,
) -> Result<Vec<Vec<u8>>, CmdError> {
    let n = n.min(m.count);
    let (start, end) = if left { (0, n) } else { (m.count - n, m.count) };
    let mut got = read_range(ks, key, m, start, end, None)?;
    delete_positions(batch, key, m, start, end);
    if left {
        m.head += n;
    } else {
        got.reverse();
    }
    m.count -= n;
    Ok(got)
}

fn push(ctx: &mut Ctx<'_>, a: &[Vec<u8>], left: bool, only_existing: bool) -> CmdResult {
    let key = &a[1];
    let ks = &ctx.ks();
    let len = {
        let _g = ks.locks().lock(key);
        // Each element record holds the key; the metadata record follows.
        let room = 64
            + key.len()
            + a[2..]
                .iter()
                .map(|e| e.len() + 40 + key.len())
                .sum::<usize>();
        let mut batch = Batch::with_capacity(room);
        let old = load_meta(ks, key, Kind::List, &mut batch)?;
        if old.is_none() && only_existing {
            ks.write(batch)?;
            0
        } else {
            let mut m = or_new(old, Kind::List);
            for e in &a[2..] {
                push_one(&mut batch, key, &mut m, left, e)?;
            }
            ks.put_collection(&mut batch, key, old.as_ref(), &m);
            ks.write(batch)?;
            m.count
        }
    };
    if len > 0 {
        ctx.notify(LIST, if left { "lpush" } else { "rpush" }, key);
        key_ready(ctx, key);
    }
    ctx.out.int(len as i64);
    Ok(())
}

pub fn lpush(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    push(ctx, a, true, false)
}

pub fn rpush(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    push(ctx, a, false, false)
}

pub fn lpushx(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    push(ctx, a, true, true)
}

pub fn rpushx(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    push(ctx, a, false, true)
}

fn pop(ctx: &mut Ctx<'_>, a: &[Vec<u8>], left: bool) -> CmdResult {
    if a.len() > 3 {
        let name = if left { "lpop" } else { "rpop" };
        return Err(CmdError(
            format!("ERR wrong number of arguments for '{name}' command").into(),
        ));
    }
    let count = a.get(2).map(|c| positive_arg(c)).transpose()?;
    let key = &a[1];
    let ks = &ctx.ks();
    let _g = ks.locks().lock(key);
    let mut batch = Batch::new();
    let Some(old) = load_meta(ks, key, Kind::List, &mut batch)? else {
        ks.write(batch)?;
        match count {
            Some(_) => ctx.out.null_array(),
            None => ctx.out.null(),
        }
        return Ok(());
    };
    if count == Some(0) {
        ks.write(batch)?;
        ctx.out.array(0);
        return Ok(());
    }
    let mut m = old;
    let got = pop_n(ks, &mut batch, key, &mut m, left, count.unwrap_or(1) as u64)?;
    ks.put_collection(&mut batch, key, Some(&old), &m);
    ks.write(batch)?;
    notify_pop(ctx, key, left, m.count == 0);
    match count {
        None => ctx.out.opt_bulk(got.first().map(|v| v.as_slice())),
        Some(_) => {
            ctx.out.array(got.len());
            for v in &got {
                ctx.out.bulk(v);
            }
        }
    }
    Ok(())
}

pub fn lpop(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    pop(ctx, a, true)
}

pub fn rpop(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    pop(ctx, a, false)
}

pub fn llen(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let m = read_meta(&ctx.ks(), &a[1], Kind::List, &ReadOptions::new())?;
    ctx.out.int(m.map_or(0, |m| m.count as i64));
    Ok(())
}

pub fn lrange(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let start = int_arg(&a[2])?;
    let end = int_arg(&a[3])?;
    let ks = &ctx.ks();
    let (snap, opts) = snapshot(ks);
    let vals = match read_meta(ks, &a[1], Kind::List, &opts)? {
        Some(m) => match clamp(m.count, start, end) {
            Some((s, e)) => read_range(ks, &a[1], &m, s, e + 1, Some(&snap))?,
            None => Vec::new(),
        },
        None => Vec::new(),
    };
    ctx.out.array(vals.len());
    for v in &vals {
        ctx.out.bulk(v);
    }
    Ok(())
}

/// The position of index `i` (negative from the tail) in a list of
/// `len`, if inside it.
fn position(len: u64, i: i64) -> Option<u64> {
    let p = if i < 0 { len as i64 + i } else { i };
    (p >= 0 && (p as u64) < len).then_some(p as u64)
}

/// As Redis 7.0: the key and its type first, then the index (a missing
/// key answers nil whatever the index).
pub fn lindex(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let ks = &ctx.ks();
    let (_snap, opts) = snapshot(ks);
    let v = match read_meta(ks, &a[1], Kind::List, &opts)? {
        Some(m) => match position(m.count, int_arg(&a[2])?) {
            Some(p) => ks.db().get_opt(lkey(&a[1], &m, p), &opts)?,
            None => None,
        },
        None => None,
    };
    ctx.out.opt_bulk(v.as_deref());
    Ok(())
}

/// As Redis 7.0: the key (`no such key`) and its type first, then the
/// index.
pub fn lset(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let key = &a[1];
    let ks = &ctx.ks();
    let _g = ks.locks().lock(key);
    let mut batch = Batch::new();
    let Some(m) = load_meta(ks, key, Kind::List, &mut batch)? else {
        ks.write(batch)?;
        return err("ERR no such key");
    };
    let Some(p) = position(m.count, int_arg(&a[2])?) else {
        return err("ERR index out of range");
    };
    batch.put(lkey(key, &m, p), &a[3]);
    ks.write(batch)?;
    ctx.notify(LIST, "lset", key);
    ctx.out.ok();
    Ok(())
}

/// Writes the list `new` over `old` (its current elements, in order),
/// rewriting the fewest records: keeping the head and rewriting from the
/// first difference, or keeping the tail and rewriting up to the last.
fn rewrite(batch: &mut Batch, key: &[u8], m: &mut Meta, old: &[Vec<u8>], new: &[Vec<u8>]) {
    let common =
        |a: &mut dyn Iterator<Item = (&Vec<u8>, &Vec<u8>)>| a.take_while(|(x, y)| x == y).count();
    let prefix = common(&mut old.iter().zip(new));
    let suffix = common(&mut old.iter().rev().zip(new.iter().rev()));
    let (olen, nlen) = (old.len() as u64, new.len() as u64);
    let head_cost = nlen.saturating_sub(prefix as u64);
    let tail_cost = nlen.saturating_sub(suffix as u64);
    if head_cost <= tail_cost {
        for (p, v) in new.iter().enumerate().skip(prefix) {
            batch.put(lkey(key, m, p as u64), v);
        }
        delete_positions(batch, key, m, nlen, olen.max(nlen));
    } else {
        // Keep the tail: the new head is `olen - nlen` positions on
        // (or back, for a longer list).
        let tail = m.head + olen;
        let new_head = tail - nlen;
        if new_head > m.head {
            delete_positions(batch, key, m, 0, new_head - m.head);
        }
        let rewritten = new.len() - suffix.min(new.len());
        for (i, v) in new.iter().enumerate().take(rewritten) {
            batch.put(encoding::list_key(key, m.version, new_head + i as u64), v);
        }
        m.head = new_head;
    }
    m.count = nlen;
}

pub fn linsert(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let before = if is(&a[2], "before") {
        true
    } else if is(&a[2], "after") {
        false
    } else {
        return err(SYNTAX);
    };
    let key = &a[1];
    let ks = &ctx.ks();
    let n = {
        let _g = ks.locks().lock(key);
        let mut batch = Batch::new();
        let Some(old) = load_meta(ks, key, Kind::List, &mut batch)? else {
            ks.write(batch)?;
            ctx.out.int(0);
            return Ok(());
        };
        let elems = read_range(ks, key, &old, 0, old.count, None)?;
        let Some(at) = elems.iter().position(|e| e == &a[3]) else {
            ks.write(batch)?;
            ctx.out.int(-1);
            return Ok(());
        };
        if old.head == 0 || old.head.checked_add(old.count + 1).is_none() {
            return err(INDEX_SPACE);
        }
        let at = if before { at } else { at + 1 };
        let mut new = Vec::with_capacity(elems.len() + 1);
        new.extend_from_slice(&elems[..at]);
        new.push(a[4].clone());
        new.extend_from_slice(&elems[at..]);
        let mut m = old;
        rewrite(&mut batch, key, &mut m, &elems, &new);
        ks.put_collection(&mut batch, key, Some(&old), &m);
        ks.write(batch)?;
        m.count
    };
    ctx.notify(LIST, "linsert", key);
    key_ready(ctx, key);
    ctx.out.int(n as i64);
    Ok(())
}

pub fn lrem(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let count = int_arg(&a[2])?;
    let key = &a[1];
    let ks = &ctx.ks();
    let _g = ks.locks().lock(key);
    let mut batch = Batch::new();
    let Some(old) = load_meta(ks, key, Kind::List, &mut batch)? else {
        ks.write(batch)?;
        ctx.out.int(0);
        return Ok(());
    };
    let elems = read_range(ks, key, &old, 0, old.count, None)?;
    let limit = if count == 0 {
        usize::MAX
    } else {
        count.unsigned_abs().min(usize::MAX as u64) as usize
    };
    let mut keep = vec![true; elems.len()];
    let mut removed = 0;
    let mut visit = |i: usize| {
        if removed < limit && elems[i] == a[3] {
            keep[i] = false;
            removed += 1;
        }
    };
    if count < 0 {
        (0..elems.len()).rev().for_each(&mut visit);
    } else {
        (0..elems.len()).for_each(&mut visit);
    }
    if removed > 0 {
        let new: Vec<Vec<u8>> = elems
            .iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|(e, _)| e.clone())
            .collect();
        let mut m = old;
        rewrite(&mut batch, key, &mut m, &elems, &new);
        ks.put_collection(&mut batch, key, Some(&old), &m);
    }
    ks.write(batch)?;
    if removed > 0 {
        ctx.notify(LIST, "lrem", key);
        if removed == elems.len() {
            ctx.notify(GENERIC, "del", key);
        }
    }
    ctx.out.int(removed as i64);
    Ok(())
}

pub fn ltrim(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let start = int_arg(&a[2])?;
    let end = int_arg(&a[3])?;
    let key = &a[1];
    let ks = &ctx.ks();
    let _g = ks.locks().lock(key);
    let mut batch = Batch::new();
    let mut trimmed = None;
    if let Some(old) = load_meta(ks, key, Kind::List, &mut batch)? {
        trimmed = Some(clamp(old.count, start, end).is_none());
        match clamp(old.count, start, end) {
            None => ks.delete_into(&mut batch, key, &old)?,
            Some((s, e)) => {
                delete_positions(&mut batch, key, &old, 0, s);
                delete_positions(&mut batch, key, &old, e + 1, old.count);
                let m = Meta {
                    head: old.head + s,
                    count: e + 1 - s,
                    ..old
                };
                if m != old {
                    ks.put_collection(&mut batch, key, Some(&old), &m);
                }
            }
        }
    }
    ks.write(batch)?;
    if let Some(emptied) = trimmed {
        ctx.notify(LIST, "ltrim", key);
        if emptied {
            ctx.notify(GENERIC, "del", key);
        }
    }
    ctx.out.ok();
    Ok(())
}

pub fn lpos(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (mut rank, mut count, mut maxlen) = (1i64, None::<i64>, 0i64);
    let mut i = 3;
    while i < a.len() {
        let more = i + 1 < a.len();
        if is(&a[i], "rank") && more {
            rank = range_arg(&a[i + 1], -i64::MAX, i64::MAX, None)?;
            if rank == 0 {
                return err(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the \
                     second ... or use negative to start from the end of the list",
                );
            }
        } else if is(&a[i], "count") && more {
            count = Some(range_arg(
                &a[i + 1],
                0,
                i64::MAX,
                Some("ERR COUNT can't be negative"),
            )?);
        } else if is(&a[i], "maxlen") && more {
            maxlen = range_arg(&a[i + 1], 0, i64::MAX, Some("ERR MAXLEN can't be negative"))?;
        } else {
            return err(SYNTAX);
        }
        i += 2;
    }
    let key = &a[1];
    let ks = &ctx.ks();
    let (snap, opts) = snapshot(ks);
    let mut found = Vec::new();
    if let Some(m) = read_meta(ks, key, Kind::List, &opts)? {
        let want = match count {
            Some(0) => usize::MAX,
            Some(c) => c as usize,
            None => 1,
        };
        let mut skip = rank.unsigned_abs() - 1;
        let opts = ReadOptions::new()
            .snapshot(&snap)
            .lower_bound(lkey(key, &m, 0))
            .upper_bound(lkey(key, &m, m.count));
        let mut it = ks.db().iter(&opts)?;
        let forward = rank > 0;
        if forward {
            it.seek_to_first()?;
        } else {
            it.seek_to_last()?;
        }
        let mut compared = 0i64;
        let mut pos: u64 = if forward { 0 } else { m.count.wrapping_sub(1) };
        while it.valid() && (maxlen == 0 || compared < maxlen) && found.len() < want {
            compared += 1;
            if it.value() == a[2].as_slice() {
                if skip == 0 {
                    found.push(pos as i64);
                } else {
                    skip -= 1;
                }
            }
            if forward {
                it.next()?;
                pos += 1;
            } else {
                it.prev()?;
                pos = pos.wrapping_sub(1);
            }
        }
    }
    match count {
        None => match found.first() {
            Some(&p) => ctx.out.int(p),
            None => ctx.out.null(),
        },
        Some(_) => {
            ctx.out.array(found.len());
            for p in found {
                ctx.out.int(p);
            }
        }
    }
    Ok(())
}

/// `LEFT` (true) or `RIGHT` (false).
pub(super) fn side(arg: &[u8]) -> Result<bool, CmdError> {
    if is(arg, "left") {
        Ok(true)
    } else if is(arg, "right") {
        Ok(false)
    } else {
        err(SYNTAX)
    }
}

/// LMOVE's core: pops from `src`'s `from_left` end, pushes at `dst`'s
/// `to_left` end, one batch under both keys' locks.
fn lmove_generic(
    ctx: &mut Ctx<'_>,
    src: &[u8],
    dst: &[u8],
    from_left: bool,
    to_left: bool,
) -> CmdResult {
    let ks = &ctx.ks();
    let moved = {
        let _g = ks.locks().lock_many([src, dst]);
        let mut batch = Batch::new();
        let Some(sold) = load_meta(ks, src, Kind::List, &mut batch)? else {
            ks.write(batch)?;
            ctx.out.null();
            return Ok(());
        };
        lmove_from(ks, batch, src, sold, dst, from_left, to_left)?
    };
    notify_move(ctx, src, dst, from_left, to_left, moved.1);
    key_ready(ctx, dst);
    ctx.out.bulk(&moved.0);
    Ok(())
}

/// The keyspace events of a pop from the list `key` (`lpop`/`rpop`, then
/// `del` if it emptied it), as Redis raises them.
pub(super) fn notify_pop(ctx: &mut Ctx<'_>, key: &[u8], left: bool, emptied: bool) {
    ctx.notify(LIST, if left { "lpop" } else { "rpop" }, key);
    if emptied {
        ctx.notify(GENERIC, "del", key);
    }
}

/// The keyspace events of LMOVE: Redis raises the push on `dst` first,
/// then the pop from `src` and its `del` if emptied.
pub(super) fn notify_move(
    ctx: &mut Ctx<'_>,
    src: &[u8],
    dst: &[u8],
    from_left: bool,
    to_left: bool,
    emptied: bool,
) {
    ctx.notify(LIST, if to_left { "lpush" } else { "rpush" }, dst);
    notify_pop(ctx, src, from_left, emptied);
}

/// The move of LMOVE (and BLMOVE) once `src` is known to hold the list
/// `sold`, for a caller holding both keys' locks: writes `batch` with the
/// pop and the push and returns the element moved, and whether `src` is
/// now gone (emptied). The caller raises the keyspace events
/// ([`notify_move`]) and calls `key_ready(dst)` once the locks are
/// released.
pub(super) fn lmove_from(
    ks: &Keyspace,
    mut batch: Batch,
    src: &[u8],
    sold: Meta,
    dst: &[u8],
    from_left: bool,
    to_left: bool,
) -> Result<(Vec<u8>, bool), CmdError> {
    let mut sm = sold;
    if src == dst {
        let got = pop_n(ks, &mut batch, src, &mut sm, from_left, 1)?;
        let Some(v) = got.into_iter().next() else {
            return err("ERR weft: empty list");
        };
        push_one(&mut batch, src, &mut sm, to_left, &v)?;
        ks.put_collection(&mut batch, src, Some(&sold), &sm);
        ks.write(batch)?;
        Ok((v, false))
    } else {
        let dold = match ks.load_for_write(dst, &mut batch)? {
            Some(e) if e.meta.kind != Kind::List => return err(WRONGTYPE),
            e => e.map(|e| e.meta),
        };
        let got = pop_n(ks, &mut batch, src, &mut sm, from_left, 1)?;
        let Some(v) = got.into_iter().next() else {
            return err("ERR weft: empty list");
        };
        let mut dm = or_new(dold, Kind::List);
        push_one(&mut batch, dst, &mut dm, to_left, &v)?;
        ks.put_collection(&mut batch, src, Some(&sold), &sm);
        ks.put_collection(&mut batch, dst, dold.as_ref(), &dm);
        ks.write(batch)?;
        Ok((v, sm.count == 0))
    }
}

pub fn lmove(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let from = side(&a[3])?;
    let to = side(&a[4])?;
    lmove_generic(ctx, &a[1], &a[2], from, to)
}

pub fn rpoplpush(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    lmove_generic(ctx, &a[1], &a[2], false, true)
}

/// Parses `numkeys key... ` from `a[at..]`: the keys and the index after
/// them (Redis's `mpop` and `*INTERCARD` rules).
pub fn numkeys(a: &[Vec<u8>], at: usize) -> Result<(&[Vec<u8>], usize), CmdError> {
    let n = range_arg(
        &a[at],
        1,
        i64::MAX,
        Some("ERR numkeys should be greater than 0"),
    )? as usize;
    let first = at + 1;
    if n > a.len() - first {
        return err(SYNTAX);
    }
    Ok((&a[first..first + n], first + n))
}

/// Parses `numkeys key... where [COUNT n]` from `a[at..]`, as Redis's
/// `LMPOP`/`ZMPOP` and their blocking forms do: the keys, the end (as
/// `where_` reads it) and the count (1 by default).
pub(super) fn mpop_args(
    a: &[Vec<u8>],
    at: usize,
    where_: fn(&[u8]) -> Result<bool, CmdError>,
) -> Result<(&[Vec<u8>], bool, u64), CmdError> {
    let (keys, at) = numkeys(a, at)?;
    let Some(w) = a.get(at) else {
        return err(SYNTAX);
    };
    let end = where_(w)?;
    let mut count = None;
    let mut i = at + 1;
    while i < a.len() {
        if count.is_none() && is(&a[i], "count") && i + 1 < a.len() {
            count = Some(range_arg(
                &a[i + 1],
                1,
                i64::MAX,
                Some("ERR count should be greater than 0"),
            )?);
            i += 2;
        } else {
            return err(SYNTAX);
        }
    }
    Ok((keys, end, count.unwrap_or(1) as u64))
}

pub fn lmpop(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (keys, left, count) = mpop_args(a, 1, side)?;
    let ks = &ctx.ks();
    for key in keys {
        let _g = ks.locks().lock(key);
        let mut batch = Batch::new();
        let old = load_meta(ks, key, Kind::List, &mut batch)?;
        let Some(old) = old else {
            ks.write(batch)?;
            continue;
        };
        let mut m = old;
        let got = pop_n(ks, &mut batch, key, &mut m, left, count)?;
        ks.put_collection(&mut batch, key, Some(&old), &m);
        ks.write(batch)?;
        notify_pop(ctx, key, left, m.count == 0);
        ctx.out.array(2);
        ctx.out.bulk(key);
        ctx.out.array(got.len());
        for v in &got {
            ctx.out.bulk(v);
        }
        return Ok(());
    }
    ctx.out.null_array();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::clamp;

    #[test]
    fn clamp_like_redis() {
        assert_eq!(clamp(5, 0, -1), Some((0, 4)));
        assert_eq!(clamp(5, -2, -1), Some((3, 4)));
        assert_eq!(clamp(5, -100, 2), Some((0, 2)));
        assert_eq!(clamp(5, 3, 1), None);
        assert_eq!(clamp(5, 5, 10), None);
        assert_eq!(clamp(5, 1, 100), Some((1, 4)));
        assert_eq!(clamp(0, 0, -1), None);
    }
}
