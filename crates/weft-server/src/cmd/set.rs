//! Set commands. A set is a metadata record (version, count) and one empty
//! engine record per member under the version, in member order, so
//! SMEMBERS is one ordered scan and the set algebra merges sorted runs.
//! Every write is one batch under its keys' stripe locks (in stripe order
//! for SMOVE and the STORE forms).

use std::collections::BTreeSet;

use rand::seq::SliceRandom;
use rand::Rng;
use weft::{ReadOptions, Snapshot};

use super::coll::{load_meta, or_new, read_meta, snapshot, Pair};
use super::{
    cursor_arg, err, is, positive_arg, range_arg, scan_opts, CmdError, CmdResult, Ctx, SYNTAX,
    WRONGTYPE,
};
use crate::encoding::{self, Kind, Meta};
use crate::keyspace::{Batch, Keyspace};
use crate::notify::{GENERIC, SET};

/// The engine key of `member` of the set `m` describes.
fn mkey(key: &[u8], m: &Meta, member: &[u8]) -> Vec<u8> {
    encoding::element_key(encoding::SET, key, m.version, member)
}

/// Every member, in order (one ordered scan at `snap`).
pub(crate) fn members(
    ks: &Keyspace,
    key: &[u8],
    m: &Meta,
    snap: Option<&Snapshot>,
) -> Result<Vec<Vec<u8>>, CmdError> {
    Ok(super::coll::elements(ks, encoding::SET, key, m, snap)?
        .into_iter()
        .map(|(k, _)| k)
        .collect())
}

fn reply_members<'a>(ctx: &mut Ctx<'_>, n: usize, it: impl Iterator<Item = &'a Vec<u8>>) {
    ctx.out.set(n);
    for v in it {
        ctx.out.bulk(v);
    }
}

pub fn sadd(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let key = &a[1];
    let ks = &ctx.ks();
    let _g = ks.locks().lock(key);
    let mut batch = Batch::new();
    let old = load_meta(ks, key, Kind::Set, &mut batch)?;
    let mut m = or_new(old, Kind::Set);
    let mut new: Vec<&[u8]> = a[2..].iter().map(|v| v.as_slice()).collect();
    new.sort_unstable();
    new.dedup();
    let keys: Vec<Vec<u8>> = new.iter().map(|v| mkey(key, &m, v)).collect();
    let present: Vec<bool> = match (&old, keys.as_slice()) {
        (None, _) => vec![false; keys.len()],
        // One member (the common case): a plain get, without multi_get's
        // vectors.
        (Some(_), [k]) => vec![ks.db().get(k)?.is_some()],
        (Some(_), _) => ks
            .db()
            .multi_get(&keys)
            .into_iter()
            .map(|r| r.map(|v| v.is_some()))
            .collect::<Result<_, _>>()?,
    };
    let mut added = 0;
    for (k, p) in keys.iter().zip(present) {
        if !p {
            batch.put(k, b"");
            added += 1;
        }
    }
    if added > 0 {
        m.count += added;
        ks.put_collection(&mut batch, key, old.as_ref(), &m);
    }
    ks.write(batch)?;
    if added > 0 {
        ctx.notify(SET, "sadd", key);
    }
    ctx.out.int(added as i64);
    Ok(())
}

pub fn srem(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let key = &a[1];
    let ks = &ctx.ks();
    let _g = ks.locks().lock(key);
    let mut batch = Batch::new();
    let Some(old) = load_meta(ks, key, Kind::Set, &mut batch)? else {
        ks.write(batch)?;
        ctx.out.int(0);
        return Ok(());
    };
    let mut gone: Vec<&[u8]> = a[2..].iter().map(|v| v.as_slice()).collect();
    gone.sort_unstable();
    gone.dedup();
    let keys: Vec<Vec<u8>> = gone.iter().map(|v| mkey(key, &old, v)).collect();
    let mut removed = 0;
    for (k, r) in keys.iter().zip(ks.db().multi_get(&keys)) {
        if r?.is_some() {
            batch.delete(k);
            removed += 1;
        }
    }
    if removed > 0 {
        let m = Meta {
            count: old.count.saturating_sub(removed),
            ..old
        };
        ks.put_collection(&mut batch, key, Some(&old), &m);
    }
    ks.write(batch)?;
    if removed > 0 {
        ctx.notify(SET, "srem", key);
        if removed >= old.count {
            ctx.notify(GENERIC, "del", key);
        }
    }
    ctx.out.int(removed as i64);
    Ok(())
}

pub fn smembers(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let ks = &ctx.ks();
    let (snap, opts) = snapshot(ks);
    let all = match read_meta(ks, &a[1], Kind::Set, &opts)? {
        Some(m) => members(ks, &a[1], &m, Some(&snap))?,
        None => Vec::new(),
    };
    reply_members(ctx, all.len(), all.iter());
    Ok(())
}

/// Whether each of `ms` is a member of the set at `key`, at one snapshot.
fn are_members(ks: &Keyspace, key: &[u8], ms: &[Vec<u8>]) -> Result<Vec<bool>, CmdError> {
    let (_snap, opts) = snapshot(ks);
    let Some(m) = read_meta(ks, key, Kind::Set, &opts)? else {
        return Ok(vec![false; ms.len()]);
    };
    let keys: Vec<Vec<u8>> = ms.iter().map(|v| mkey(key, &m, v)).collect();
    ks.db()
        .multi_get_opt(&keys, &opts)
        .into_iter()
        .map(|r| Ok(r?.is_some()))
        .collect()
}

pub fn sismember(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let r = are_members(&ctx.ks(), &a[1], &a[2..3])?;
    ctx.out.int(i64::from(r[0]));
    Ok(())
}

pub fn smismember(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let r = are_members(&ctx.ks(), &a[1], &a[2..])?;
    ctx.out.array(r.len());
    for b in r {
        ctx.out.int(i64::from(b));
    }
    Ok(())
}

pub fn scard(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let m = read_meta(&ctx.ks(), &a[1], Kind::Set, &ReadOptions::new())?;
    ctx.out.int(m.map_or(0, |m| m.count as i64));
    Ok(())
}

/// Sets up to this size are sampled uniformly from a full read; larger
/// ones by random seeks (see [`sample`]).
const SAMPLE_ALL: u64 = 1024;

/// A random point of the key space between `first` and `last` (members):
/// their common prefix, then 8 bytes drawn between theirs.
pub(crate) fn random_point(first: &[u8], last: &[u8], rng: &mut impl Rng) -> Vec<u8> {
    let common = first.iter().zip(last).take_while(|(a, b)| a == b).count();
    let word = |s: &[u8]| {
        let mut b = [0u8; 8];
        let tail = &s[common.min(s.len())..];
        let n = tail.len().min(8);
        b[..n].copy_from_slice(&tail[..n]);
        u64::from_be_bytes(b)
    };
    let (lo, hi) = (word(first), word(last));
    let pick = if lo < hi { rng.gen_range(lo..=hi) } else { lo };
    let mut p = first[..common].to_vec();
    p.extend_from_slice(&pick.to_be_bytes());
    p
}

/// `n` random members of the set `m` describes (at `snap`): distinct
/// (`n` at most its size) or, with `repeat`, drawn independently. A set
/// of up to [`SAMPLE_ALL`] members (or a sample of at least half of it)
/// is read whole and sampled uniformly; a larger one is sampled by seeks
/// to random points between its first and last member (see
/// [`random_point`]) — a member's chance grows with the gap before it, a
/// departure from Redis's uniform pick — and a distinct sample is the
/// run of members from one such point (wrapping), one ordered scan.
pub(crate) fn sample(
    ks: &Keyspace,
    ns: u8,
    key: &[u8],
    m: &Meta,
    n: u64,
    repeat: bool,
    snap: &Snapshot,
) -> Result<Vec<Pair>, CmdError> {
    let mut rng = rand::thread_rng();
    if n == 0 || m.count == 0 {
        return Ok(Vec::new());
    }
    if m.count <= SAMPLE_ALL || (!repeat && n >= m.count / 2) {
        let all = super::coll::elements(ks, ns, key, m, Some(snap))?;
        if repeat {
            return Ok((0..n)
                .filter_map(|_| all.choose(&mut rng).cloned())
                .collect());
        }
        return Ok(all
            .choose_multiple(&mut rng, n.min(all.len() as u64) as usize)
            .cloned()
            .collect());
    }
    let prefix = encoding::element_prefix(ns, key, m.version);
    let opts = ReadOptions::new().snapshot(snap).prefix(&prefix);
    let mut it = ks.db().iter(&opts)?;
    it.seek_to_first()?;
    if !it.valid() {
        return Ok(Vec::new());
    }
    let first = it.key()[prefix.len()..].to_vec();
    it.seek_to_last()?;
    let last = it.key()[prefix.len()..].to_vec();
    let mut out = Vec::new();
    let seek_random = |it: &mut crate::keyspace::Iter, rng: &mut rand::rngs::ThreadRng| {
        let mut at = prefix.clone();
        at.extend_from_slice(&random_point(&first, &last, rng));
        it.seek(&at)?;
        if !it.valid() {
            it.seek_to_first()?;
        }
        Ok::<(), weft::Error>(())
    };
    if repeat {
        for _ in 0..n {
            seek_random(&mut it, &mut rng)?;
            if it.valid() {
                out.push((it.key()[prefix.len()..].to_vec(), it.value().to_vec()));
            }
        }
    } else {
        seek_random(&mut it, &mut rng)?;
        while (out.len() as u64) < n.min(m.count) && it.valid() {
            out.push((it.key()[prefix.len()..].to_vec(), it.value().to_vec()));
            it.next()?;
            if !it.valid() {
                it.seek_to_first()?;
            }
        }
    }
    Ok(out)
}

pub fn spop(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    if a.len() > 3 {
        return err(SYNTAX);
    }
    let count = a.get(2).map(|c| positive_arg(c)).transpose()?;
    let key = &a[1];
    let ks = &ctx.ks();
    let _g = ks.locks().lock(key);
    let mut batch = Batch::new();
    let old = load_meta(ks, key, Kind::Set, &mut batch)?;
    let mut emptied = false;
    let popped = match old {
        None => Vec::new(),
        Some(_) if count == Some(0) => Vec::new(),
        Some(old) => {
            let n = count.unwrap_or(1) as u64;
            let got = if n >= old.count {
                let all = members(ks, key, &old, None)?;
                ks.delete_into(&mut batch, key, &old)?;
                emptied = true;
                all
            } else {
                let snap = ks.db().snapshot();
                let got: Vec<Vec<u8>> = sample(ks, encoding::SET, key, &old, n, false, &snap)?
                    .into_iter()
                    .map(|(k, _)| k)
                    .collect();
                for v in &got {
                    batch.delete(mkey(key, &old, v));
                }
                let m = Meta {
                    count: old.count - got.len() as u64,
                    ..old
                };
                ks.put_collection(&mut batch, key, Some(&old), &m);
                got
            };
            got
        }
    };
    ks.write(batch)?;
    if !popped.is_empty() {
        ctx.notify(SET, "spop", key);
        if emptied {
            ctx.notify(GENERIC, "del", key);
        }
    }
    match count {
        None => ctx.out.opt_bulk(popped.first().map(|v| v.as_slice())),
        Some(_) => reply_members(ctx, popped.len(), popped.iter()),
    }
    Ok(())
}

pub fn srandmember(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    if a.len() > 3 {
        return err(SYNTAX);
    }
    let count = a
        .get(2)
        .map(|c| range_arg(c, -i64::MAX, i64::MAX, None))
        .transpose()?;
    let ks = &ctx.ks();
    let (snap, opts) = snapshot(ks);
    let m = read_meta(ks, &a[1], Kind::Set, &opts)?;
    let Some(count) = count else {
        let got = match m {
            Some(m) => sample(ks, encoding::SET, &a[1], &m, 1, false, &snap)?,
            None => Vec::new(),
        };
        ctx.out.opt_bulk(got.first().map(|(k, _)| k.as_slice()));
        return Ok(());
    };
    let got = match m {
        Some(m) => sample(
            ks,
            encoding::SET,
            &a[1],
            &m,
            count.unsigned_abs(),
            count < 0,
            &snap,
        )?,
        None => Vec::new(),
    };
    ctx.out.array(got.len());
    for (k, _) in &got {
        ctx.out.bulk(k);
    }
    Ok(())
}

pub fn smove(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (src, dst, member) = (&a[1], &a[2], &a[3]);
    let ks = &ctx.ks();
    let _g = ks.locks().lock_many([src.as_slice(), dst.as_slice()]);
    let mut batch = Batch::new();
    let keys: [&[u8]; 2] = [src, dst];
    let same = src == dst;
    let loaded = ks.load_many_for_write(if same { &keys[..1] } else { &keys }, &mut batch)?;
    let Some(sold) = loaded[0].as_ref().map(|e| e.meta) else {
        ks.write(batch)?;
        ctx.out.int(0);
        return Ok(());
    };
    let dold = if same {
        Some(sold)
    } else {
        loaded[1].as_ref().map(|e| e.meta)
    };
    if sold.kind != Kind::Set || dold.is_some_and(|d| d.kind != Kind::Set) {
        return err(WRONGTYPE);
    }
    let sk = mkey(src, &sold, member);
    if ks.db().get(&sk)?.is_none() {
        ks.write(batch)?;
        ctx.out.int(0);
        return Ok(());
    }
    let mut added = false;
    if !same {
        batch.delete(&sk);
        let sm = Meta {
            count: sold.count - 1,
            ..sold
        };
        ks.put_collection(&mut batch, src, Some(&sold), &sm);
        let mut dm = or_new(dold, Kind::Set);
        let dk = mkey(dst, &dm, member);
        if dold.is_none() || ks.db().get(&dk)?.is_none() {
            batch.put(dk, b"");
            dm.count += 1;
            ks.put_collection(&mut batch, dst, dold.as_ref(), &dm);
            added = true;
        }
    }
    ks.write(batch)?;
    if !same {
        ctx.notify(SET, "srem", src);
        if sold.count == 1 {
            ctx.notify(GENERIC, "del", src);
        }
        if added {
            ctx.notify(SET, "sadd", dst);
        }
    }
    ctx.out.int(1);
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// The members of each set at `keys` (absent keys empty), at `snap`;
/// WRONGTYPE if any is not a set.
fn load_sets(
    ks: &Keyspace,
    keys: &[Vec<u8>],
    snap: &Snapshot,
) -> Result<Vec<Vec<Vec<u8>>>, CmdError> {
    let opts = ReadOptions::new().snapshot(snap);
    let metas = keys
        .iter()
        .map(|k| read_meta(ks, k, Kind::Set, &opts))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = Vec::with_capacity(keys.len());
    for (k, m) in keys.iter().zip(metas) {
        out.push(match m {
            Some(m) => members(ks, k, &m, Some(snap))?,
            None => Vec::new(),
        });
    }
    Ok(out)
}

fn combine(op: Op, sets: Vec<Vec<Vec<u8>>>) -> BTreeSet<Vec<u8>> {
    let mut it = sets.into_iter();
    let mut acc: BTreeSet<Vec<u8>> = it.next().unwrap_or_default().into_iter().collect();
    for s in it {
        match op {
            Op::Union => acc.extend(s),
            Op::Inter => {
                let s: BTreeSet<Vec<u8>> = s.into_iter().collect();
                acc.retain(|v| s.contains(v));
            }
            Op::Diff => {
                for v in s {
                    acc.remove(&v);
                }
            }
        }
    }
    acc
}

fn algebra(ctx: &mut Ctx<'_>, keys: &[Vec<u8>], op: Op) -> CmdResult {
    let ks = &ctx.ks();
    let snap = ks.db().snapshot();
    let r = combine(op, load_sets(ks, keys, &snap)?);
    reply_members(ctx, r.len(), r.iter());
    Ok(())
}

/// Replaces whatever `dst` holds with the set `members` (deleting it when
/// empty), into `batch`; the caller holds `dst`'s lock. Returns whether
/// `dst` held a key (for the keyspace events:
/// [`super::coll::notify_store`]).
fn store_set(
    ks: &Keyspace,
    batch: &mut Batch,
    dst: &[u8],
    members: &BTreeSet<Vec<u8>>,
) -> Result<bool, CmdError> {
    let old = ks.load_for_write(dst, batch)?;
    if let Some(e) = &old {
        ks.delete_into(batch, dst, &e.meta)?;
    }
    let mut m = Meta::new_collection(Kind::Set, crate::keyspace::new_version());
    for v in members {
        batch.put(mkey(dst, &m, v), b"");
    }
    m.count = members.len() as u64;
    // The old key (if any) is deleted above: the new one is created,
    // overwriting it where it stands as far as the events go.
    ks.put_collection(batch, dst, None, &m);
    if old.is_some() {
        batch.overwritten(dst);
    }
    Ok(old.is_some())
}

fn algebra_store(ctx: &mut Ctx<'_>, a: &[Vec<u8>], op: Op) -> CmdResult {
    let dst = &a[1];
    let keys = &a[2..];
    let ks = &ctx.ks();
    let _g = ks.locks().lock_many(a[1..].iter().map(|k| k.as_slice()));
    let snap = ks.db().snapshot();
    let r = combine(op, load_sets(ks, keys, &snap)?);
    let mut batch = Batch::new();
    let existed = store_set(ks, &mut batch, dst, &r)?;
    ks.write(batch)?;
    let event = match op {
        Op::Inter => "sinterstore",
        Op::Union => "sunionstore",
        Op::Diff => "sdiffstore",
    };
    super::coll::notify_store(ctx, SET, event, dst, !r.is_empty(), existed);
    ctx.out.int(r.len() as i64);
    Ok(())
}

pub fn sinter(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    algebra(ctx, &a[1..], Op::Inter)
}

pub fn sunion(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    algebra(ctx, &a[1..], Op::Union)
}

pub fn sdiff(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    algebra(ctx, &a[1..], Op::Diff)
}

pub fn sinterstore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    algebra_store(ctx, a, Op::Inter)
}

pub fn sunionstore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    algebra_store(ctx, a, Op::Union)
}

pub fn sdiffstore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    algebra_store(ctx, a, Op::Diff)
}

/// Parses `[LIMIT n]` after the keys of `*INTERCARD`.
pub(crate) fn intercard_limit(a: &[Vec<u8>], mut i: usize) -> Result<usize, CmdError> {
    let mut limit = 0i64;
    while i < a.len() {
        if is(&a[i], "limit") && i + 1 < a.len() {
            limit = range_arg(&a[i + 1], 0, i64::MAX, Some("ERR LIMIT can't be negative"))?;
            i += 2;
        } else {
            return err(SYNTAX);
        }
    }
    Ok(if limit == 0 {
        usize::MAX
    } else {
        limit as usize
    })
}

/// `numkeys key...` of the `*INTERCARD` commands, with their error for
/// more keys than arguments.
pub(crate) fn intercard_keys(a: &[Vec<u8>]) -> Result<(&[Vec<u8>], usize), CmdError> {
    let n = range_arg(
        &a[1],
        1,
        i64::MAX,
        Some("ERR numkeys should be greater than 0"),
    )? as usize;
    if n > a.len() - 2 {
        return err("ERR Number of keys can't be greater than number of args");
    }
    Ok((&a[2..2 + n], 2 + n))
}

pub fn sintercard(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (keys, at) = intercard_keys(a)?;
    let limit = intercard_limit(a, at)?;
    let ks = &ctx.ks();
    let snap = ks.db().snapshot();
    let r = combine(Op::Inter, load_sets(ks, keys, &snap)?);
    ctx.out.int(r.len().min(limit) as i64);
    Ok(())
}

pub fn sscan(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let cursor = cursor_arg(&a[2])?;
    let o = scan_opts(&a[3..], false)?;
    if o.novalues {
        return err(SYNTAX);
    }
    let (next_id, found) =
        super::coll::scan(&ctx.ks(), &a[1], Kind::Set, encoding::SET, cursor, &o)?;
    ctx.out.array(2);
    ctx.out.bulk(next_id.to_string().as_bytes());
    ctx.out.array(found.len());
    for (m, _) in &found {
        ctx.out.bulk(m);
    }
    Ok(())
}
