//! What the collection commands (hashes, lists, sets, sorted sets) share:
//! typed metadata reads, the scan of a collection's elements, and the hook
//! that wakes clients blocked on a key.

use weft::{ReadOptions, Snapshot};

use super::{err, CmdError, ScanOpts, WRONGTYPE};
use crate::encoding::{self, Kind, Meta};
use crate::glob;
use crate::keyspace::{new_version, Batch, Keyspace};
use crate::Shared;

/// The live metadata of `key` read at `opts`, if it is a `kind`;
/// WRONGTYPE for another type.
pub fn read_meta(
    ks: &Keyspace,
    key: &[u8],
    kind: Kind,
    opts: &ReadOptions,
) -> Result<Option<Meta>, CmdError> {
    match ks.get(key, opts)? {
        Some(e) if e.meta.kind != kind => err(WRONGTYPE),
        e => Ok(e.map(|e| e.meta)),
    }
}

/// For writers holding `key`'s lock: the live metadata of `key` if it is
/// a `kind` (an expired key is deleted into `batch` and absent);
/// WRONGTYPE for another type.
pub fn load_meta(
    ks: &Keyspace,
    key: &[u8],
    kind: Kind,
    batch: &mut Batch,
) -> Result<Option<Meta>, CmdError> {
    match ks.load_for_write(key, batch)? {
        Some(e) if e.meta.kind != kind => err(WRONGTYPE),
        e => Ok(e.map(|e| e.meta)),
    }
}

/// The keyspace events of a `*STORE` into `dst` as Redis raises them:
/// `event` (class `class`) when it stored a non-empty result, else `del`
/// if it deleted what `dst` held.
pub fn notify_store(
    ctx: &mut super::Ctx<'_>,
    class: u32,
    event: &'static str,
    dst: &[u8],
    stored: bool,
    existed: bool,
) {
    if stored {
        ctx.notify(class, event, dst);
    } else if existed {
        ctx.notify(crate::notify::GENERIC, "del", dst);
    }
}

/// `old`, or the metadata of a new, empty `kind` under a fresh version.
pub fn or_new(old: Option<Meta>, kind: Kind) -> Meta {
    old.unwrap_or_else(|| Meta::new_collection(kind, new_version()))
}

/// A snapshot and read options at it, for commands reading several
/// records.
pub fn snapshot(ks: &Keyspace) -> (Snapshot, ReadOptions) {
    let snap = ks.db().snapshot();
    let opts = ReadOptions::new().snapshot(&snap);
    (snap, opts)
}

/// Every `(sub key, value)` of `meta`'s elements in namespace `ns`, in
/// order, read at `snap` (one ordered scan).
pub fn elements(
    ks: &Keyspace,
    ns: u8,
    key: &[u8],
    meta: &Meta,
    snap: Option<&Snapshot>,
) -> Result<Vec<Pair>, CmdError> {
    let prefix = encoding::element_prefix(ns, key, meta.version);
    let mut opts = ReadOptions::new().prefix(&prefix);
    if let Some(s) = snap {
        opts = opts.snapshot(s);
    }
    let mut it = ks.db().iter(&opts)?;
    it.seek_to_first()?;
    let mut out = Vec::with_capacity(meta.count.min(1 << 16) as usize);
    while it.valid() {
        out.push((it.key()[prefix.len()..].to_vec(), it.value().to_vec()));
        it.next()?;
    }
    Ok(out)
}

/// Called after a write added elements to the list or sorted set `key` of
/// `ks`'s database (pushes, LINSERT, LMOVE's destination, ZADD, MOVE,
/// RENAME, COPY, RESTORE, ...), once the batch is written and the key's
/// lock released: reports it to [`key_ready_now`] at once, or, inside an
/// `EXEC`, once the `EXEC`'s batch is in the engine.
pub fn key_ready(ctx: &mut super::Ctx<'_>, key: &[u8]) {
    let ks = ctx.ks();
    key_ready_in(ctx, &ks, key);
}

/// [`key_ready`] for a key of `ks`'s database (`COPY ... DB`, `MOVE`).
pub fn key_ready_in(ctx: &mut super::Ctx<'_>, ks: &Keyspace, key: &[u8]) {
    if !ks.defer_ready(key) {
        super::blocking::wake_next_after(ctx, ks.index(), key);
    }
}

/// Wakes the first client blocked on `key` of database `db` (BLPOP,
/// BZPOPMIN, ...), whose new elements are in the engine, if any. With
/// nobody waiting it costs one relaxed load of a counter nobody writes
/// (`crate::blocking`).
pub fn key_ready_now(shared: &Shared, db: usize, key: &[u8]) {
    super::blocking::wake_next(shared, db, key);
}

/// A field or member and its record's value.
pub type Pair = (Vec<u8>, Vec<u8>);

/// One step of `HSCAN`/`SSCAN`/`ZSCAN` over namespace `ns` of the `kind`
/// at `key`, at one snapshot: the next cursor (0 at the end) and the
/// `(sub key, value)` pairs matching the pattern among the `count`
/// visited. Cursors name the engine key to resume at (as `SCAN`'s do).
pub fn scan(
    ks: &Keyspace,
    key: &[u8],
    kind: Kind,
    ns: u8,
    cursor: u64,
    o: &ScanOpts,
) -> Result<(u64, Vec<Pair>), CmdError> {
    let (snap, opts) = snapshot(ks);
    let mut found: Vec<Pair> = Vec::new();
    let mut next = None;
    if let Some(m) = read_meta(ks, key, kind, &opts)? {
        let prefix = encoding::element_prefix(ns, key, m.version);
        let mut lower = prefix.clone();
        lower.extend_from_slice(
            &o.pattern
                .as_deref()
                .map(glob::literal_prefix)
                .unwrap_or_default(),
        );
        let upper = weft::prefix_successor(&lower);
        // A cursor this server did not hand out (or has forgotten) scans
        // from the start, as `SCAN`'s do (keys.rs).
        if let Some(at) = ks.cursor(cursor) {
            if at > lower {
                lower = at;
            }
        }
        let mut ropts = ReadOptions::new().snapshot(&snap).lower_bound(lower);
        if let Some(u) = upper {
            ropts = ropts.upper_bound(u);
        }
        let mut it = ks.db().iter(&ropts)?;
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
    }
    Ok((next.map_or(0, |k| ks.new_cursor(k)), found))
}

/// Redis's LRANGE/LTRIM index rules: the positions `[start, end]` of a
/// list of `len`, or `None` when the range is empty.
pub(super) fn clamp(len: u64, start: i64, end: i64) -> Option<(u64, u64)> {
    let len = len as i64;
    let mut s = if start < 0 { len + start } else { start };
    let mut e = if end < 0 { len + end } else { end };
    if s < 0 {
        s = 0;
    }
    if s > e || s >= len {
        return None;
    }
    if e >= len {
        e = len - 1;
    }
    Some((s as u64, e as u64))
}
