//! Sorted-set commands. A sorted set is a metadata record (version,
//! count), a member → score record per member (`z`, in member order) and
//! a score-index record per member (`y`, keyed by the order-preserving
//! score bytes then the member), so:
//!
//! - a score lookup is one get of the member record;
//! - a range by score is one ordered scan of the index between the two
//!   scores' bytes; a range by rank is one ordered scan of the index from
//!   the nearer end, stepping over the ranks before the range (O(rank):
//!   the engine keeps no per-key order statistics, Redis's skiplist spans
//!   make that O(log n));
//! - a range by lex is one ordered scan of the member records (Redis
//!   defines lex ranges for sets whose scores are all equal, where the
//!   index order is the member order).
//!
//! Every write is one batch under its keys' stripe locks and keeps both
//! records of a member in step. Scores are stored as Redis stores them:
//! never NaN, and `-0` as `0`.

use std::collections::{BTreeMap, HashMap};

use weft::{prefix_successor, ReadOptions, Snapshot};

use super::coll::{clamp, key_ready, load_meta, or_new, read_meta, snapshot};
use super::list::mpop_args;
use super::strtod;
use super::{
    cursor_arg, err, int_arg, is, positive_arg, range_arg, scan_opts, CmdError, CmdResult, Ctx,
    SYNTAX, WRONGTYPE,
};
use crate::encoding::{self, Kind, Meta};
use crate::keyspace::{new_version, Batch, Keyspace};
use crate::notify::{GENERIC, ZSET};
use crate::resp::format_double;

const NOT_FLOAT: &str = "ERR value is not a valid float";
const NAN_SCORE: &str = "ERR resulting score is not a number (NaN)";
const RANGE_NOT_FLOAT: &str = "ERR min or max is not a float";
const LEX_RANGE: &str = "ERR min or max not valid string range item";

/// A member and its score.
pub(super) type Scored = (Vec<u8>, f64);

/// `ZMPOP`'s and `BZMPOP`'s reply: the key, then its popped members as
/// `[member, score]` pairs.
pub(super) fn reply_key_and_pairs(out: &mut crate::resp::Out, key: &[u8], got: &[Scored]) {
    out.array(2);
    out.bulk(key);
    out.array(got.len());
    for (member, score) in got {
        out.array(2);
        out.bulk(member);
        out.double(*score);
    }
}

/// Parses a score as Redis's `string2d` does (`strtod`: decimal and
/// hexadecimal forms, no leading space, no NaN, no overflow, no non-zero
/// value rounding to zero); `-0` is `0`.
pub(super) fn parse_float(s: &[u8]) -> Option<f64> {
    strtod::string2d(s).map(|v| v + 0.0)
}

fn score_arg(s: &[u8]) -> Result<f64, CmdError> {
    parse_float(s).ok_or(CmdError(NOT_FLOAT.into()))
}

/// The engine key of `member`'s score record.
fn mkey(key: &[u8], m: &Meta, member: &[u8]) -> Vec<u8> {
    encoding::element_key(encoding::ZSET, key, m.version, member)
}

/// The engine key of `member`'s score-index record.
fn ikey(key: &[u8], m: &Meta, score: f64, member: &[u8]) -> Vec<u8> {
    encoding::score_key(key, m.version, score, member)
}

fn score_value(v: &[u8]) -> Option<f64> {
    v.first_chunk::<8>()
        .map(|b| f64::from_bits(u64::from_be_bytes(*b)))
}

fn bad_record(key: &[u8]) -> CmdError {
    CmdError(
        format!(
            "ERR weft: malformed sorted-set record of key '{}'",
            key.escape_ascii()
        )
        .into(),
    )
}

/// The smallest key after every key starting with `p` (`p` starts with a
/// namespace letter, so it has one).
fn succ(p: &[u8]) -> Vec<u8> {
    prefix_successor(p).unwrap_or_else(|| vec![0xff; p.len() + 1])
}

/// `member`'s score, read at `opts`.
fn get_score(
    ks: &Keyspace,
    key: &[u8],
    m: &Meta,
    member: &[u8],
    opts: &ReadOptions,
) -> Result<Option<f64>, CmdError> {
    match ks.db().get_opt(mkey(key, m, member), opts)? {
        Some(v) => Ok(Some(score_value(&v).ok_or_else(|| bad_record(key))?)),
        None => Ok(None),
    }
}

/// Sets `member`'s score (replacing `old`, its current one) into `batch`.
fn put_member(
    batch: &mut Batch,
    key: &[u8],
    m: &Meta,
    member: &[u8],
    old: Option<f64>,
    score: f64,
) {
    if let Some(o) = old {
        if o.to_bits() == score.to_bits() {
            return;
        }
        batch.delete(ikey(key, m, o, member));
    }
    batch.put(mkey(key, m, member), score.to_bits().to_be_bytes());
    batch.put(ikey(key, m, score, member), b"");
}

/// Removes `member` (whose score is `score`) into `batch`.
fn del_member(batch: &mut Batch, key: &[u8], m: &Meta, member: &[u8], score: f64) {
    batch.delete(mkey(key, m, member));
    batch.delete(ikey(key, m, score, member));
}

/// A score interval as `ZRANGEBYSCORE` spells it (`(` exclusive).
#[derive(Debug, Clone, Copy)]
struct ScoreRange {
    min: f64,
    min_ex: bool,
    max: f64,
    max_ex: bool,
}

impl ScoreRange {
    fn parse(min: &[u8], max: &[u8]) -> Result<ScoreRange, CmdError> {
        // `-0` is `0`, as the scores are.
        let one = |s: &[u8]| -> Option<(f64, bool)> {
            match s.strip_prefix(b"(") {
                Some(rest) => Some((strtod::range_bound(rest)? + 0.0, true)),
                None => Some((strtod::range_bound(s)? + 0.0, false)),
            }
        };
        match (one(min), one(max)) {
            (Some((min, min_ex)), Some((max, max_ex))) => Ok(ScoreRange {
                min,
                min_ex,
                max,
                max_ex,
            }),
            _ => err(RANGE_NOT_FLOAT),
        }
    }

    fn contains(&self, s: f64) -> bool {
        (if self.min_ex {
            s > self.min
        } else {
            s >= self.min
        }) && (if self.max_ex {
            s < self.max
        } else {
            s <= self.max
        })
    }

    fn is_empty(&self) -> bool {
        self.min > self.max || (self.min == self.max && (self.min_ex || self.max_ex))
    }
}

/// One end of a lex interval.
#[derive(Debug, Clone)]
enum Lex {
    /// `-`
    Min,
    /// `+`
    Max,
    /// `[x`
    Incl(Vec<u8>),
    /// `(x`
    Excl(Vec<u8>),
}

impl Lex {
    fn parse(s: &[u8]) -> Option<Lex> {
        match s.split_first() {
            Some((b'-', [])) => Some(Lex::Min),
            Some((b'+', [])) => Some(Lex::Max),
            Some((b'[', rest)) => Some(Lex::Incl(rest.to_vec())),
            Some((b'(', rest)) => Some(Lex::Excl(rest.to_vec())),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
struct LexRange {
    min: Lex,
    max: Lex,
}

impl LexRange {
    fn parse(min: &[u8], max: &[u8]) -> Result<LexRange, CmdError> {
        match (Lex::parse(min), Lex::parse(max)) {
            (Some(min), Some(max)) => Ok(LexRange { min, max }),
            _ => err(LEX_RANGE),
        }
    }

    fn contains(&self, m: &[u8]) -> bool {
        let above = match &self.min {
            Lex::Min => true,
            Lex::Max => false,
            Lex::Incl(x) => m >= x.as_slice(),
            Lex::Excl(x) => m > x.as_slice(),
        };
        let below = match &self.max {
            Lex::Min => false,
            Lex::Max => true,
            Lex::Incl(x) => m <= x.as_slice(),
            Lex::Excl(x) => m < x.as_slice(),
        };
        above && below
    }
}

/// What a range command selects.
#[derive(Debug, Clone)]
enum Select {
    /// Ranks `start..=stop` (negative from the end), in the direction.
    Rank(i64, i64),
    /// Scores in the interval.
    Score(ScoreRange),
    /// Members in the interval.
    Lex(LexRange),
}

#[derive(Debug, Clone)]
struct Query {
    select: Select,
    rev: bool,
    /// `LIMIT offset count` (count < 0: all).
    offset: i64,
    limit: i64,
}

/// Walks the keys of `[lower, upper)` at `snap` forwards or backwards,
/// calling `f` with each key and value until it returns false.
fn walk(
    ks: &Keyspace,
    lower: Vec<u8>,
    upper: Vec<u8>,
    rev: bool,
    snap: Option<&Snapshot>,
    mut f: impl FnMut(&[u8], &[u8]) -> Result<bool, CmdError>,
) -> Result<(), CmdError> {
    if lower >= upper {
        return Ok(());
    }
    let mut opts = ReadOptions::new().lower_bound(lower).upper_bound(upper);
    if let Some(s) = snap {
        opts = opts.snapshot(s);
    }
    let mut it = ks.db().iter(&opts)?;
    if rev {
        it.seek_to_last()?;
    } else {
        it.seek_to_first()?;
    }
    while it.valid() {
        if !f(it.key(), it.value())? {
            break;
        }
        if rev {
            it.prev()?;
        } else {
            it.next()?;
        }
    }
    Ok(())
}

/// Splits a score-index key (after its prefix) into member and score.
fn index_entry(key: &[u8], rest: &[u8]) -> Result<Scored, CmdError> {
    let (s, member) = rest
        .split_first_chunk::<8>()
        .ok_or_else(|| bad_record(key))?;
    Ok((member.to_vec(), encoding::decode_score(*s)))
}

/// Runs `q` on the sorted set `m` describes, at `snap`: the members and
/// scores in reply order.
fn query(
    ks: &Keyspace,
    key: &[u8],
    m: &Meta,
    q: &Query,
    snap: Option<&Snapshot>,
) -> Result<Vec<Scored>, CmdError> {
    let mut out = Vec::new();
    let iprefix = encoding::element_prefix(encoding::SCORE_INDEX, key, m.version);
    match &q.select {
        Select::Rank(start, stop) => {
            let Some((s, e)) = clamp(m.count, *start, *stop) else {
                return Ok(out);
            };
            // The same members as forward ranks [fs, fe].
            let (fs, fe) = if q.rev {
                (m.count - 1 - e, m.count - 1 - s)
            } else {
                (s, e)
            };
            let want = (fe - fs + 1) as usize;
            let from_start = fs <= m.count - 1 - fe;
            let mut skip = if from_start { fs } else { m.count - 1 - fe };
            walk(
                ks,
                iprefix.clone(),
                succ(&iprefix),
                !from_start,
                snap,
                |k, _| {
                    if skip > 0 {
                        skip -= 1;
                        return Ok(true);
                    }
                    out.push(index_entry(key, &k[iprefix.len()..])?);
                    Ok(out.len() < want)
                },
            )?;
            // `out` is in forward order if read from the start; the reply
            // wants reverse order for REV.
            if from_start == q.rev {
                out.reverse();
            }
        }
        Select::Score(r) => {
            if r.is_empty() || q.offset < 0 {
                return Ok(out);
            }
            let mut lower = iprefix.clone();
            lower.extend_from_slice(&encoding::encode_score(r.min));
            let mut upper = iprefix.clone();
            upper.extend_from_slice(&encoding::encode_score(r.max));
            let upper = succ(&upper);
            let mut skip = q.offset;
            walk(ks, lower, upper, q.rev, snap, |k, _| {
                let (member, score) = index_entry(key, &k[iprefix.len()..])?;
                if !r.contains(score) {
                    return Ok(true);
                }
                if skip > 0 {
                    skip -= 1;
                    return Ok(true);
                }
                if q.limit >= 0 && out.len() as i64 >= q.limit {
                    return Ok(false);
                }
                out.push((member, score));
                Ok(true)
            })?;
        }
        Select::Lex(r) => {
            if q.offset < 0 {
                return Ok(out);
            }
            let mprefix = encoding::element_prefix(encoding::ZSET, key, m.version);
            let with = |x: &[u8]| [mprefix.as_slice(), x].concat();
            let lower = match &r.min {
                Lex::Min => mprefix.clone(),
                Lex::Max => succ(&mprefix),
                Lex::Incl(x) | Lex::Excl(x) => with(x),
            };
            let upper = match &r.max {
                Lex::Min => mprefix.clone(),
                Lex::Max => succ(&mprefix),
                Lex::Incl(x) => [mprefix.as_slice(), x, &[0]].concat(),
                Lex::Excl(x) => with(x),
            };
            let mut skip = q.offset;
            walk(ks, lower, upper, q.rev, snap, |k, v| {
                let member = &k[mprefix.len()..];
                if !r.contains(member) {
                    return Ok(true);
                }
                if skip > 0 {
                    skip -= 1;
                    return Ok(true);
                }
                if q.limit >= 0 && out.len() as i64 >= q.limit {
                    return Ok(false);
                }
                let score = score_value(v).ok_or_else(|| bad_record(key))?;
                out.push((member.to_vec(), score));
                Ok(true)
            })?;
        }
    }
    Ok(out)
}

/// Every member and score in score order (one ordered scan at `snap`).
fn all_scored(
    ks: &Keyspace,
    key: &[u8],
    m: &Meta,
    snap: Option<&Snapshot>,
) -> Result<Vec<Scored>, CmdError> {
    query(
        ks,
        key,
        m,
        &Query {
            select: Select::Rank(0, -1),
            rev: false,
            offset: 0,
            limit: -1,
        },
        snap,
    )
}

/// Replies members, with their scores when asked: RESP2 a flat array,
/// RESP3 an array of `[member, score]` pairs.
fn reply_scored(ctx: &mut Ctx<'_>, items: &[Scored], withscores: bool) {
    if withscores && ctx.out.resp3 {
        ctx.out.array(items.len());
        for (m, s) in items {
            ctx.out.array(2);
            ctx.out.bulk(m);
            ctx.out.double(*s);
        }
    } else if withscores {
        ctx.out.array(items.len() * 2);
        for (m, s) in items {
            ctx.out.bulk(m);
            ctx.out.double(*s);
        }
    } else {
        ctx.out.array(items.len());
        for (m, _) in items {
            ctx.out.bulk(m);
        }
    }
}

#[derive(Default, Clone, Copy)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// ZADD and ZINCRBY: returns `(added, updated, last score if processed)`.
fn zadd_generic(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    f: AddFlags,
    pairs: &[(f64, &[u8])],
) -> Result<(u64, u64, Option<f64>), CmdError> {
    let ks = &ctx.ks();
    let result = {
        let _g = ks.locks().lock(key);
        let mut batch = Batch::new();
        let old = load_meta(ks, key, Kind::ZSet, &mut batch)?;
        if old.is_none() && f.xx {
            ks.write(batch)?;
            return Ok((0, 0, None));
        }
        let mut m = or_new(old, Kind::ZSet);
        // Scores as this command has set them so far (a member may repeat;
        // one member, the common case, needs no map).
        let repeats = pairs.len() > 1;
        let mut current: HashMap<&[u8], Option<f64>> = HashMap::new();
        let (mut added, mut updated) = (0, 0);
        let mut last = None;
        for &(score, member) in pairs {
            let cur = match current.get(member) {
                Some(c) => *c,
                None if old.is_some() => get_score(ks, key, &m, member, &ReadOptions::new())?,
                None => None,
            };
            let new = match cur {
                Some(c) => {
                    if f.nx {
                        continue;
                    }
                    let new = if f.incr { c + score } else { score };
                    if new.is_nan() {
                        return err(NAN_SCORE);
                    }
                    let new = new + 0.0;
                    if (f.lt && new >= c) || (f.gt && new <= c) {
                        continue;
                    }
                    if new != c {
                        updated += 1;
                    }
                    new
                }
                None => {
                    if f.xx {
                        continue;
                    }
                    added += 1;
                    m.count += 1;
                    score
                }
            };
            put_member(&mut batch, key, &m, member, cur, new);
            if repeats {
                current.insert(member, Some(new));
            }
            last = Some(new);
        }
        if added > 0 {
            ks.put_collection(&mut batch, key, old.as_ref(), &m);
        }
        ks.write(batch)?;
        (added, updated, last)
    };
    if result.0 > 0 || result.1 > 0 {
        ctx.notify(ZSET, if f.incr { "zincr" } else { "zadd" }, key);
    }
    if result.0 > 0 {
        key_ready(ctx, key);
    }
    Ok(result)
}

pub fn zadd(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let mut f = AddFlags::default();
    let mut i = 2;
    while i < a.len() {
        let o = &a[i];
        if is(o, "nx") {
            f.nx = true;
        } else if is(o, "xx") {
            f.xx = true;
        } else if is(o, "gt") {
            f.gt = true;
        } else if is(o, "lt") {
            f.lt = true;
        } else if is(o, "ch") {
            f.ch = true;
        } else if is(o, "incr") {
            f.incr = true;
        } else {
            break;
        }
        i += 1;
    }
    let rest = &a[i..];
    if rest.is_empty() || !rest.len().is_multiple_of(2) {
        return err(SYNTAX);
    }
    if f.nx && f.xx {
        return err("ERR XX and NX options at the same time are not compatible");
    }
    // Redis's test, `(gt && nx) || (lt && nx) || (gt && lt)`.
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return err("ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if f.incr && rest.len() > 2 {
        return err("ERR INCR option supports a single increment-element pair");
    }
    let pairs = rest
        .chunks(2)
        .map(|p| Ok((score_arg(&p[0])?, p[1].as_slice())))
        .collect::<Result<Vec<_>, CmdError>>()?;
    let (added, updated, last) = zadd_generic(ctx, &a[1], f, &pairs)?;
    if f.incr {
        match last {
            Some(s) => ctx.out.double(s),
            None => ctx.out.null(),
        }
    } else {
        ctx.out
            .int((if f.ch { added + updated } else { added }) as i64);
    }
    Ok(())
}

pub fn zincrby(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let by = score_arg(&a[2])?;
    let f = AddFlags {
        incr: true,
        ..AddFlags::default()
    };
    let (_, _, last) = zadd_generic(ctx, &a[1], f, &[(by, &a[3])])?;
    match last {
        Some(s) => ctx.out.double(s),
        None => ctx.out.null(),
    }
    Ok(())
}

pub fn zrem(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let key = &a[1];
    let ks = &ctx.ks();
    let _g = ks.locks().lock(key);
    let mut batch = Batch::new();
    let Some(old) = load_meta(ks, key, Kind::ZSet, &mut batch)? else {
        ks.write(batch)?;
        ctx.out.int(0);
        return Ok(());
    };
    let mut members: Vec<&[u8]> = a[2..].iter().map(|v| v.as_slice()).collect();
    members.sort_unstable();
    members.dedup();
    let mut removed = 0;
    for member in members {
        if let Some(s) = get_score(ks, key, &old, member, &ReadOptions::new())? {
            del_member(&mut batch, key, &old, member, s);
            removed += 1;
        }
    }
    if removed > 0 {
        let m = Meta {
            count: old.count - removed,
            ..old
        };
        ks.put_collection(&mut batch, key, Some(&old), &m);
    }
    ks.write(batch)?;
    if removed > 0 {
        ctx.notify(ZSET, "zrem", key);
        if removed == old.count {
            ctx.notify(GENERIC, "del", key);
        }
    }
    ctx.out.int(removed as i64);
    Ok(())
}

pub fn zscore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let ks = &ctx.ks();
    let (_snap, opts) = snapshot(ks);
    let s = match read_meta(ks, &a[1], Kind::ZSet, &opts)? {
        Some(m) => get_score(ks, &a[1], &m, &a[2], &opts)?,
        None => None,
    };
    match s {
        Some(s) => ctx.out.double(s),
        None => ctx.out.null(),
    }
    Ok(())
}

pub fn zmscore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let ks = &ctx.ks();
    let (_snap, opts) = snapshot(ks);
    let m = read_meta(ks, &a[1], Kind::ZSet, &opts)?;
    let mut scores = Vec::with_capacity(a.len() - 2);
    for member in &a[2..] {
        scores.push(match &m {
            Some(m) => get_score(ks, &a[1], m, member, &opts)?,
            None => None,
        });
    }
    ctx.out.array(scores.len());
    for s in scores {
        match s {
            Some(s) => ctx.out.double(s),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

pub fn zcard(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let m = read_meta(&ctx.ks(), &a[1], Kind::ZSet, &ReadOptions::new())?;
    ctx.out.int(m.map_or(0, |m| m.count as i64));
    Ok(())
}

/// Counts the members `select` picks (one ordered scan).
fn count_of(ctx: &mut Ctx<'_>, key: &[u8], select: Select) -> CmdResult {
    let ks = &ctx.ks();
    let (snap, opts) = snapshot(ks);
    let n = match read_meta(ks, key, Kind::ZSet, &opts)? {
        Some(m) => query(
            ks,
            key,
            &m,
            &Query {
                select,
                rev: false,
                offset: 0,
                limit: -1,
            },
            Some(&snap),
        )?
        .len(),
        None => 0,
    };
    ctx.out.int(n as i64);
    Ok(())
}

pub fn zcount(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let r = ScoreRange::parse(&a[2], &a[3])?;
    count_of(ctx, &a[1], Select::Score(r))
}

pub fn zlexcount(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let r = LexRange::parse(&a[2], &a[3])?;
    count_of(ctx, &a[1], Select::Lex(r))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    Auto,
    Rank,
    Score,
    Lex,
}

/// The range commands' shared parser (Redis's `zrangeGenericCommand`):
/// `a[at]` and `a[at + 1]` are the range, options follow. `by` and `rev`
/// preset the legacy forms (ZRANGEBYSCORE, ZREVRANGE, ...), which then
/// refuse BYSCORE/BYLEX/REV. Returns the query and WITHSCORES.
fn parse_range(
    a: &[Vec<u8>],
    at: usize,
    mut by: By,
    rev: Option<bool>,
    store: bool,
) -> Result<(Query, bool), CmdError> {
    let mut withscores = false;
    let mut dir = rev;
    let (mut offset, mut limit) = (0i64, -1i64);
    let mut limited = false;
    let mut j = at + 2;
    while j < a.len() {
        let left = a.len() - j - 1;
        if !store && is(&a[j], "withscores") {
            withscores = true;
        } else if is(&a[j], "limit") && left >= 2 {
            offset = int_arg(&a[j + 1])?;
            limit = int_arg(&a[j + 2])?;
            limited = true;
            j += 2;
        } else if dir.is_none() && is(&a[j], "rev") {
            dir = Some(true);
        } else if by == By::Auto && is(&a[j], "bylex") {
            by = By::Lex;
        } else if by == By::Auto && is(&a[j], "byscore") {
            by = By::Score;
        } else {
            return err(SYNTAX);
        }
        j += 1;
    }
    let rev = dir.unwrap_or(false);
    if by == By::Auto {
        by = By::Rank;
    }
    if limited && by == By::Rank {
        return err(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
    }
    if withscores && by == By::Lex {
        return err("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
    }
    let (mut lo, mut hi) = (&a[at], &a[at + 1]);
    if rev && by != By::Rank {
        std::mem::swap(&mut lo, &mut hi);
    }
    let select = match by {
        By::Score => Select::Score(ScoreRange::parse(lo, hi)?),
        By::Lex => Select::Lex(LexRange::parse(lo, hi)?),
        _ => Select::Rank(int_arg(lo)?, int_arg(hi)?),
    };
    Ok((
        Query {
            select,
            rev,
            offset,
            limit,
        },
        withscores,
    ))
}

fn range_generic(ctx: &mut Ctx<'_>, a: &[Vec<u8>], by: By, rev: Option<bool>) -> CmdResult {
    let (q, withscores) = parse_range(a, 2, by, rev, false)?;
    let ks = &ctx.ks();
    let (snap, opts) = snapshot(ks);
    let items = match read_meta(ks, &a[1], Kind::ZSet, &opts)? {
        Some(m) => query(ks, &a[1], &m, &q, Some(&snap))?,
        None => Vec::new(),
    };
    reply_scored(ctx, &items, withscores);
    Ok(())
}

pub fn zrange(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    range_generic(ctx, a, By::Auto, None)
}

pub fn zrangebyscore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    range_generic(ctx, a, By::Score, Some(false))
}

pub fn zrevrangebyscore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    range_generic(ctx, a, By::Score, Some(true))
}

pub fn zrangebylex(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    range_generic(ctx, a, By::Lex, Some(false))
}

pub fn zrevrangebylex(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    range_generic(ctx, a, By::Lex, Some(true))
}

pub fn zrevrange(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    range_generic(ctx, a, By::Rank, Some(true))
}

/// Replaces whatever `dst` holds with the sorted set `items` (deleting
/// it when empty), into `batch`; the caller holds `dst`'s lock. Returns
/// whether `dst` held a key (for the keyspace events:
/// [`super::coll::notify_store`]).
fn store_zset(
    ks: &Keyspace,
    batch: &mut Batch,
    dst: &[u8],
    items: &[Scored],
) -> Result<bool, CmdError> {
    let existed = match ks.load_for_write(dst, batch)? {
        Some(e) => {
            ks.delete_into(batch, dst, &e.meta)?;
            true
        }
        None => false,
    };
    let mut m = Meta::new_collection(Kind::ZSet, new_version());
    for (member, score) in items {
        // `-0` is stored as `0`, as every score is.
        put_member(batch, dst, &m, member, None, *score + 0.0);
    }
    m.count = items.len() as u64;
    ks.put_collection(batch, dst, None, &m);
    if existed {
        batch.overwritten(dst);
    }
    Ok(existed)
}

pub fn zrangestore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (q, _) = parse_range(a, 3, By::Auto, None, true)?;
    let (dst, src) = (&a[1], &a[2]);
    let ks = &ctx.ks();
    let n = {
        let _g = ks.locks().lock_many([dst.as_slice(), src.as_slice()]);
        let items = match read_meta(ks, src, Kind::ZSet, &ReadOptions::new())? {
            Some(m) => query(ks, src, &m, &q, None)?,
            None => Vec::new(),
        };
        let mut batch = Batch::new();
        let existed = store_zset(ks, &mut batch, dst, &items)?;
        ks.write(batch)?;
        (items.len(), existed)
    };
    let (n, existed) = n;
    super::coll::notify_store(ctx, ZSET, "zrangestore", dst, n > 0, existed);
    if n > 0 {
        key_ready(ctx, dst);
    }
    ctx.out.int(n as i64);
    Ok(())
}

fn rank_generic(ctx: &mut Ctx<'_>, a: &[Vec<u8>], rev: bool) -> CmdResult {
    let (key, member) = (&a[1], &a[2]);
    let ks = &ctx.ks();
    let (snap, opts) = snapshot(ks);
    let mut rank = None;
    if let Some(m) = read_meta(ks, key, Kind::ZSet, &opts)? {
        if let Some(score) = get_score(ks, key, &m, member, &opts)? {
            // Count the index entries before (or after) the member's.
            let iprefix = encoding::element_prefix(encoding::SCORE_INDEX, key, m.version);
            let at = ikey(key, &m, score, member);
            let (lower, upper) = if rev {
                (at.iter().copied().chain([0]).collect(), succ(&iprefix))
            } else {
                (iprefix.clone(), at)
            };
            let mut n = 0i64;
            walk(ks, lower, upper, false, Some(&snap), |_, _| {
                n += 1;
                Ok(true)
            })?;
            rank = Some(n);
        }
    }
    match rank {
        Some(r) => ctx.out.int(r),
        None => ctx.out.null(),
    }
    Ok(())
}

pub fn zrank(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    rank_generic(ctx, a, false)
}

pub fn zrevrank(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    rank_generic(ctx, a, true)
}

/// Pops up to `n` members from the low (`max` false) or high end into
/// `batch`, in pop order.
pub(super) fn pop_n(
    ks: &Keyspace,
    batch: &mut Batch,
    key: &[u8],
    m: &mut Meta,
    max: bool,
    n: u64,
) -> Result<Vec<Scored>, CmdError> {
    let q = Query {
        select: Select::Rank(0, (n.min(m.count) as i64) - 1),
        rev: max,
        offset: 0,
        limit: -1,
    };
    let got = if n == 0 {
        Vec::new()
    } else {
        query(ks, key, m, &q, None)?
    };
    for (member, score) in &got {
        del_member(batch, key, m, member, *score);
    }
    m.count -= got.len() as u64;
    Ok(got)
}

/// The keyspace events of a pop from the sorted set `key` (`zpopmin` or
/// `zpopmax`, then `del` if it emptied it).
pub(super) fn notify_pop(ctx: &mut Ctx<'_>, key: &[u8], max: bool, emptied: bool) {
    ctx.notify(ZSET, if max { "zpopmax" } else { "zpopmin" }, key);
    if emptied {
        ctx.notify(GENERIC, "del", key);
    }
}

fn zpop(ctx: &mut Ctx<'_>, a: &[Vec<u8>], max: bool) -> CmdResult {
    if a.len() > 3 {
        return err(SYNTAX);
    }
    let count = a.get(2).map(|c| positive_arg(c)).transpose()?;
    let key = &a[1];
    let ks = &ctx.ks();
    let got = {
        let _g = ks.locks().lock(key);
        let mut batch = Batch::new();
        let old = load_meta(ks, key, Kind::ZSet, &mut batch)?;
        let got = match old {
            Some(old) if count != Some(0) => {
                let mut m = old;
                let got = pop_n(ks, &mut batch, key, &mut m, max, count.unwrap_or(1) as u64)?;
                ks.put_collection(&mut batch, key, Some(&old), &m);
                Some((got, m.count == 0))
            }
            _ => None,
        };
        ks.write(batch)?;
        got
    };
    let got = match got {
        Some((got, emptied)) => {
            notify_pop(ctx, key, max, emptied);
            got
        }
        None => Vec::new(),
    };
    if count.is_none() || !ctx.out.resp3 {
        // RESP2, and RESP3 without a count: a flat member, score array.
        ctx.out.array(got.len() * 2);
        for (m, s) in &got {
            ctx.out.bulk(m);
            ctx.out.double(*s);
        }
    } else {
        reply_scored(ctx, &got, true);
    }
    Ok(())
}

pub fn zpopmin(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    zpop(ctx, a, false)
}

pub fn zpopmax(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    zpop(ctx, a, true)
}

/// `MIN` (false) or `MAX` (true), as `ZMPOP` reads its `where`.
pub(super) fn min_max(w: &[u8]) -> Result<bool, CmdError> {
    if is(w, "min") {
        Ok(false)
    } else if is(w, "max") {
        Ok(true)
    } else {
        err(SYNTAX)
    }
}

pub fn zmpop(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (keys, max, count) = mpop_args(a, 1, min_max)?;
    let ks = &ctx.ks();
    for key in keys {
        let _g = ks.locks().lock(key);
        let mut batch = Batch::new();
        let Some(old) = load_meta(ks, key, Kind::ZSet, &mut batch)? else {
            ks.write(batch)?;
            continue;
        };
        let mut m = old;
        let got = pop_n(ks, &mut batch, key, &mut m, max, count)?;
        ks.put_collection(&mut batch, key, Some(&old), &m);
        ks.write(batch)?;
        notify_pop(ctx, key, max, m.count == 0);
        reply_key_and_pairs(ctx.out, key, &got);
        return Ok(());
    }
    ctx.out.null_array();
    Ok(())
}

pub fn zrandmember(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let withscores = match a.len() {
        2 | 3 => false,
        4 if is(&a[3], "withscores") => true,
        _ => return err(SYNTAX),
    };
    let count = a
        .get(2)
        .map(|c| range_arg(c, -i64::MAX, i64::MAX, None))
        .transpose()?;
    let key = &a[1];
    let ks = &ctx.ks();
    let (snap, opts) = snapshot(ks);
    let m = read_meta(ks, key, Kind::ZSet, &opts)?;
    let n = count.map_or(1, |c| c.unsigned_abs());
    let got: Vec<Scored> = match m {
        Some(m) => super::set::sample(
            ks,
            encoding::ZSET,
            key,
            &m,
            n,
            count.is_some_and(|c| c < 0),
            &snap,
        )?
        .into_iter()
        .map(|(k, v)| Ok((k, score_value(&v).ok_or_else(|| bad_record(key))?)))
        .collect::<Result<_, CmdError>>()?,
        None => Vec::new(),
    };
    match count {
        None => ctx.out.opt_bulk(got.first().map(|(k, _)| k.as_slice())),
        Some(_) => reply_scored(ctx, &got, withscores),
    }
    Ok(())
}

/// Removes the members `select` picks; replies how many. `event` names
/// the command for the keyspace events.
fn remove_range(ctx: &mut Ctx<'_>, key: &[u8], select: Select, event: &'static str) -> CmdResult {
    let ks = &ctx.ks();
    let _g = ks.locks().lock(key);
    let mut batch = Batch::new();
    let Some(old) = load_meta(ks, key, Kind::ZSet, &mut batch)? else {
        ks.write(batch)?;
        ctx.out.int(0);
        return Ok(());
    };
    let q = Query {
        select,
        rev: false,
        offset: 0,
        limit: -1,
    };
    let got = query(ks, key, &old, &q, None)?;
    if got.len() as u64 == old.count {
        ks.delete_into(&mut batch, key, &old)?;
    } else if !got.is_empty() {
        for (member, score) in &got {
            del_member(&mut batch, key, &old, member, *score);
        }
        let m = Meta {
            count: old.count - got.len() as u64,
            ..old
        };
        ks.put_collection(&mut batch, key, Some(&old), &m);
    }
    ks.write(batch)?;
    if !got.is_empty() {
        ctx.notify(ZSET, event, key);
        if got.len() as u64 == old.count {
            ctx.notify(GENERIC, "del", key);
        }
    }
    ctx.out.int(got.len() as i64);
    Ok(())
}

pub fn zremrangebyscore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let r = ScoreRange::parse(&a[2], &a[3])?;
    remove_range(ctx, &a[1], Select::Score(r), "zremrangebyscore")
}

pub fn zremrangebyrank(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (s, e) = (int_arg(&a[2])?, int_arg(&a[3])?);
    remove_range(ctx, &a[1], Select::Rank(s, e), "zremrangebyrank")
}

pub fn zremrangebylex(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let r = LexRange::parse(&a[2], &a[3])?;
    remove_range(ctx, &a[1], Select::Lex(r), "zremrangebylex")
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// The parsed arguments of ZUNION/ZINTER/ZDIFF and their STORE and CARD
/// forms.
struct SetArgs<'a> {
    keys: &'a [Vec<u8>],
    weights: Vec<f64>,
    aggregate: Aggregate,
    withscores: bool,
    limit: usize,
}

/// Parses from `numkeys` at `a[at]` on (Redis's
/// `zunionInterDiffGenericCommand`); the type of every key is checked by
/// the caller's load before the options, as Redis does, so an option
/// error is reported only for keys of the right types.
fn parse_set_args<'a>(
    a: &'a [Vec<u8>],
    at: usize,
    name: &str,
) -> Result<(SetArgs<'a>, usize), CmdError> {
    let n = int_arg(&a[at])?;
    if n < 1 {
        return Err(CmdError(
            format!("ERR at least 1 input key is needed for '{name}' command").into(),
        ));
    }
    let n = n as usize;
    if n > a.len() - at - 1 {
        return err(SYNTAX);
    }
    let keys = &a[at + 1..at + 1 + n];
    Ok((
        SetArgs {
            keys,
            weights: vec![1.0; n],
            aggregate: Aggregate::Sum,
            withscores: false,
            limit: usize::MAX,
        },
        at + 1 + n,
    ))
}

/// Parses the options after the keys (see [`parse_set_args`]).
fn parse_set_options(
    a: &[Vec<u8>],
    mut j: usize,
    s: &mut SetArgs<'_>,
    op: SetOp,
    store: bool,
    card: bool,
) -> CmdResult {
    let n = s.keys.len();
    while j < a.len() {
        let remaining = a.len() - j;
        if op != SetOp::Diff && !card && remaining > n && is(&a[j], "weights") {
            j += 1;
            for w in s.weights.iter_mut() {
                *w = strtod::string2d(&a[j])
                    .ok_or(CmdError("ERR weight value is not a float".into()))?;
                j += 1;
            }
        } else if op != SetOp::Diff && !card && remaining >= 2 && is(&a[j], "aggregate") {
            s.aggregate = if is(&a[j + 1], "sum") {
                Aggregate::Sum
            } else if is(&a[j + 1], "min") {
                Aggregate::Min
            } else if is(&a[j + 1], "max") {
                Aggregate::Max
            } else {
                return err(SYNTAX);
            };
            j += 2;
        } else if !store && !card && is(&a[j], "withscores") {
            s.withscores = true;
            j += 1;
        } else if card && remaining >= 2 && is(&a[j], "limit") {
            let l = range_arg(&a[j + 1], 0, i64::MAX, Some("ERR LIMIT can't be negative"))?;
            s.limit = if l == 0 { usize::MAX } else { l as usize };
            j += 2;
        } else {
            return err(SYNTAX);
        }
    }
    Ok(())
}

/// The members and scores of each input at `snap` (a set's members score
/// 1, as Redis's); WRONGTYPE for any other type.
fn load_inputs(
    ks: &Keyspace,
    keys: &[Vec<u8>],
    snap: &Snapshot,
) -> Result<Vec<Vec<Scored>>, CmdError> {
    let opts = ReadOptions::new().snapshot(snap);
    let mut metas = Vec::with_capacity(keys.len());
    for k in keys {
        let m = ks.get(k, &opts)?.map(|e| e.meta);
        if m.is_some_and(|m| m.kind != Kind::ZSet && m.kind != Kind::Set) {
            return err(WRONGTYPE);
        }
        metas.push(m);
    }
    let mut out = Vec::with_capacity(keys.len());
    for (k, m) in keys.iter().zip(metas) {
        out.push(match m {
            None => Vec::new(),
            Some(m) if m.kind == Kind::Set => super::set::members(ks, k, &m, Some(snap))?
                .into_iter()
                .map(|v| (v, 1.0))
                .collect(),
            Some(m) => all_scored(ks, k, &m, Some(snap))?,
        });
    }
    Ok(out)
}

fn weighted(score: f64, w: f64) -> f64 {
    let v = score * w;
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

fn aggregate(agg: Aggregate, acc: f64, v: f64) -> f64 {
    match agg {
        Aggregate::Sum => {
            let s = acc + v;
            if s.is_nan() {
                0.0
            } else {
                s
            }
        }
        Aggregate::Min => acc.min(v),
        Aggregate::Max => acc.max(v),
    }
}

/// Computes the operation; the result in score (then member) order.
fn compute(op: SetOp, s: &SetArgs<'_>, inputs: Vec<Vec<Scored>>) -> Vec<Scored> {
    let mut acc: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
    let mut it = inputs.into_iter().enumerate();
    if let Some((_, first)) = it.next() {
        for (m, sc) in first {
            let v = if op == SetOp::Diff {
                sc
            } else {
                weighted(sc, s.weights[0])
            };
            acc.insert(m, v);
        }
    }
    for (i, input) in it {
        match op {
            SetOp::Union => {
                for (m, sc) in input {
                    let v = weighted(sc, s.weights[i]);
                    acc.entry(m)
                        .and_modify(|a| *a = aggregate(s.aggregate, *a, v))
                        .or_insert(v);
                }
            }
            SetOp::Inter => {
                let other: HashMap<Vec<u8>, f64> = input.into_iter().collect();
                acc.retain(|m, a| match other.get(m) {
                    Some(&sc) => {
                        *a = aggregate(s.aggregate, *a, weighted(sc, s.weights[i]));
                        true
                    }
                    None => false,
                });
            }
            SetOp::Diff => {
                for (m, _) in input {
                    acc.remove(&m);
                }
            }
        }
    }
    // A `-0` stays one in the reply, as Redis prints it ("-0"), but sorts
    // as 0; `store_zset` stores it as 0.
    let mut out: Vec<Scored> = acc.into_iter().collect();
    out.sort_by(|x, y| {
        (x.1 + 0.0)
            .total_cmp(&(y.1 + 0.0))
            .then_with(|| x.0.cmp(&y.0))
    });
    out
}

fn setop(ctx: &mut Ctx<'_>, a: &[Vec<u8>], op: SetOp, name: &str) -> CmdResult {
    let (mut s, j) = parse_set_args(a, 1, name)?;
    let ks = &ctx.ks();
    let snap = ks.db().snapshot();
    let inputs = load_inputs(ks, s.keys, &snap)?;
    parse_set_options(a, j, &mut s, op, false, false)?;
    let out = compute(op, &s, inputs);
    reply_scored(ctx, &out, s.withscores);
    Ok(())
}

fn setop_store(ctx: &mut Ctx<'_>, a: &[Vec<u8>], op: SetOp, name: &'static str) -> CmdResult {
    let dst = &a[1];
    let (mut s, j) = parse_set_args(a, 2, name)?;
    let ks = &ctx.ks();
    let n = {
        let _g = ks
            .locks()
            .lock_many(std::iter::once(dst.as_slice()).chain(s.keys.iter().map(|k| k.as_slice())));
        let snap = ks.db().snapshot();
        let inputs = load_inputs(ks, s.keys, &snap)?;
        parse_set_options(a, j, &mut s, op, true, false)?;
        let out = compute(op, &s, inputs);
        let mut batch = Batch::new();
        let existed = store_zset(ks, &mut batch, dst, &out)?;
        ks.write(batch)?;
        (out.len(), existed)
    };
    let (n, existed) = n;
    super::coll::notify_store(ctx, ZSET, name, dst, n > 0, existed);
    if n > 0 {
        key_ready(ctx, dst);
    }
    ctx.out.int(n as i64);
    Ok(())
}

pub fn zunion(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    setop(ctx, a, SetOp::Union, "zunion")
}

pub fn zinter(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    setop(ctx, a, SetOp::Inter, "zinter")
}

pub fn zdiff(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    setop(ctx, a, SetOp::Diff, "zdiff")
}

pub fn zunionstore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    setop_store(ctx, a, SetOp::Union, "zunionstore")
}

pub fn zinterstore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    setop_store(ctx, a, SetOp::Inter, "zinterstore")
}

pub fn zdiffstore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    setop_store(ctx, a, SetOp::Diff, "zdiffstore")
}

pub fn zintercard(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (mut s, j) = parse_set_args(a, 1, "zintercard")?;
    let ks = &ctx.ks();
    let snap = ks.db().snapshot();
    let inputs = load_inputs(ks, s.keys, &snap)?;
    parse_set_options(a, j, &mut s, SetOp::Inter, false, true)?;
    let n = compute(SetOp::Inter, &s, inputs).len().min(s.limit);
    ctx.out.int(n as i64);
    Ok(())
}

pub fn zscan(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let cursor = cursor_arg(&a[2])?;
    let o = scan_opts(&a[3..], false)?;
    if o.novalues {
        return err(SYNTAX);
    }
    let key = &a[1];
    let (next_id, found) =
        super::coll::scan(&ctx.ks(), key, Kind::ZSet, encoding::ZSET, cursor, &o)?;
    ctx.out.array(2);
    ctx.out.bulk(next_id.to_string().as_bytes());
    ctx.out.array(found.len() * 2);
    for (m, v) in &found {
        ctx.out.bulk(m);
        let s = score_value(v).ok_or_else(|| bad_record(key))?;
        ctx.out.bulk(format_double(s).as_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_parse_as_redis_does() {
        assert_eq!(parse_float(b"1.5"), Some(1.5));
        assert_eq!(parse_float(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_float(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_float(b"-0").map(f64::to_bits), Some(0));
        assert_eq!(parse_float(b"nan"), None);
        assert_eq!(parse_float(b" 1"), None);
        assert_eq!(parse_float(b""), None);
        assert_eq!(parse_float(b"abc"), None);
        assert_eq!(parse_float(b"0x10"), Some(16.0));
        assert_eq!(parse_float(b"1e400"), None);
        assert_eq!(parse_float(b"1e-400"), None);
    }

    #[test]
    fn ranges_parse() {
        let r = ScoreRange::parse(b"(1", b"+inf").unwrap();
        assert!(!r.contains(1.0) && r.contains(1.5) && r.contains(f64::INFINITY));
        assert!(ScoreRange::parse(b"(1", b"1").unwrap().is_empty());
        assert!(ScoreRange::parse(b"x", b"1").is_err());
        // strtod as zslParseRange calls it: spaces, "", hex, overflow.
        let r = ScoreRange::parse(b" 1", b"(").unwrap();
        assert!(r.min == 1.0 && r.max == 0.0 && r.max_ex);
        let r = ScoreRange::parse(b"0x10", b"1e400").unwrap();
        assert!(r.min == 16.0 && r.max == f64::INFINITY);
        assert!(ScoreRange::parse(b"1", b"nan").is_err());
        let l = LexRange::parse(b"[b", b"(d").unwrap();
        assert!(l.contains(b"b") && l.contains(b"c") && !l.contains(b"d") && !l.contains(b"a"));
        assert!(LexRange::parse(b"b", b"+").is_err());
    }
}
