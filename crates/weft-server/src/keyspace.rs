//! Typed keys over the engine: metadata lookup with lazy expiry, deletion of
//! a key and everything it owns, the background expirer, the durability
//! mapping, the key counts and the table of `SCAN` cursors. See
//! [`crate::encoding`] for the layout of the records.
//!
//! # Key counts
//!
//! `DBSIZE` and `INFO keyspace` read two counters, O(1) as in Redis: the
//! metadata records (user keys) and those with a deadline. They count what
//! Redis counts: a key past its deadline that no read or expiry cycle has
//! deleted yet is still counted. Opening counts the records once (one scan
//! of the metadata namespace); afterwards every write that creates or
//! deletes a metadata record goes through [`Keyspace::put_meta`] or
//! [`Keyspace::delete_into`] on a [`Batch`], which tallies the change, and
//! [`Keyspace::write`] applies the tally once the engine has the batch. The
//! tally is exact because every such write holds its keys' stripe locks
//! from the read of the old record to the write, and names each key at most
//! once per batch — or, replacing a key with a new collection (`*STORE`),
//! deletes it and creates it again in that order in one batch, which
//! tallies −1 and +1 and leaves the new record, as the batch's order does.
//!
//! Only metadata records are counted, and only these batches create or
//! delete them: a collection's elements are reclaimed in the same batch
//! that drops its metadata (point deletes, or one range delete for a big
//! collection: [`Keyspace::delete_into`]), never by a compaction filter,
//! so no record disappears behind the counters' back (`docs/DESIGN.md`
//! §1.9, "Reclamation").
//!
//! # Opening
//!
//! [`Keyspace::new`] first checks the data format recorded in the system
//! namespace, upgrading a format-0 directory in place or refusing a newer
//! one (the `upgrade` module), and only then counts.

mod upgrade;

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use weft::prefix_successor;
use weft::{Db, ReadOptions, WriteBatch, WriteOptions};

use crate::encoding::{self, Kind, Meta};
use crate::locks::Locks;
use crate::SyncMode;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A live key's metadata record, decoded.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The decoded header.
    pub meta: Meta,
    raw: Vec<u8>,
    payload_at: usize,
}

impl Entry {
    /// A string's value (empty for a hash).
    pub fn payload(&self) -> &[u8] {
        &self.raw[self.payload_at..]
    }

    /// The raw record.
    pub fn raw(&self) -> &[u8] {
        &self.raw
    }

    /// Takes a string's value out of the record.
    pub fn into_payload(mut self) -> Vec<u8> {
        self.raw.drain(..self.payload_at);
        self.raw
    }
}

/// A fresh collection version: microseconds since the Unix epoch, raised
/// past the last version this thread drew so one thread never repeats one.
/// Two threads may draw the same version in the same microsecond; that is
/// harmless: a key's old elements are deleted in the batch that drops its
/// metadata, before any new element can be written, so versions only keep
/// a recreated collection's elements out of the old ones' range (reads
/// then never step over elements still awaiting the merges), they are not
/// what hides them. Thread-local, so no cache line is shared between
/// writers.
pub fn new_version() -> u64 {
    thread_local! {
        static LAST: Cell<u64> = const { Cell::new(0) };
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0);
    LAST.with(|last| {
        let v = now.max(last.get().wrapping_add(1));
        last.set(v);
        v
    })
}

/// Engine error, or a metadata record that does not decode.
#[derive(Debug)]
pub enum StoreError {
    /// The engine failed.
    Engine(weft::Error),
    /// A metadata record is malformed (the key's bytes).
    BadMeta(Vec<u8>),
    /// The directory holds data in a format this build does not read.
    Unsupported(String),
}

impl From<weft::Error> for StoreError {
    fn from(e: weft::Error) -> Self {
        StoreError::Engine(e)
    }
}

/// Result of keyspace operations.
pub type StoreResult<T> = Result<T, StoreError>;

/// Decodes a raw metadata record of `key`.
pub fn decode_entry(key: &[u8], raw: Vec<u8>) -> StoreResult<Entry> {
    let (meta, payload) =
        encoding::decode(&raw).ok_or_else(|| StoreError::BadMeta(key.to_vec()))?;
    let payload_at = raw.len() - payload.len();
    Ok(Entry {
        meta,
        raw,
        payload_at,
    })
}

/// The entry of `key` decoded from its metadata record `raw`, if live at
/// `now` (expired keys are absent to readers).
fn live_at(key: &[u8], raw: Vec<u8>, now: u64) -> StoreResult<Option<Entry>> {
    let e = decode_entry(key, raw)?;
    Ok((!e.meta.expired(now)).then_some(e))
}

/// The engine keys of the metadata records of `keys`.
/// Runs `f` on the metadata keys of `keys`, built in one buffer (two
/// allocations, not one per key).
fn with_meta_keys<R>(keys: &[&[u8]], f: impl FnOnce(&[&[u8]]) -> R) -> R {
    let len = |k: &[u8]| {
        encoding::meta_key_parts(k)
            .iter()
            .map(|p| p.len())
            .sum::<usize>()
    };
    let mut buf = Vec::with_capacity(keys.iter().map(|k| len(k)).sum());
    for k in keys {
        for part in encoding::meta_key_parts(k) {
            buf.extend_from_slice(part);
        }
    }
    let mut rest = &buf[..];
    let meta_keys: Vec<&[u8]> = keys
        .iter()
        .map(|k| {
            let (m, r) = rest.split_at(len(k));
            rest = r;
            m
        })
        .collect();
    f(&meta_keys)
}

/// A write batch that tallies the user keys (and deadlines) it creates and
/// deletes, for the key counts (see the module doc).
#[derive(Default)]
pub struct Batch {
    batch: WriteBatch,
    keys: i64,
    expires: i64,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty batch with room for `bytes` of operations.
    pub fn with_capacity(bytes: usize) -> Self {
        Batch {
            batch: WriteBatch::with_capacity(bytes),
            keys: 0,
            expires: 0,
        }
    }
}

impl Batch {
    /// A batch made elsewhere with its tally: a replica applying its
    /// primary's batch counts the metadata records it creates and deletes
    /// itself (`repl::replica`).
    pub(crate) fn with_tally(batch: WriteBatch, keys: i64, expires: i64) -> Batch {
        Batch {
            batch,
            keys,
            expires,
        }
    }

    /// The engine batch, its tally dropped.
    pub(crate) fn into_inner(self) -> WriteBatch {
        self.batch
    }
}

impl Deref for Batch {
    type Target = WriteBatch;
    fn deref(&self) -> &WriteBatch {
        &self.batch
    }
}

impl DerefMut for Batch {
    fn deref_mut(&mut self) -> &mut WriteBatch {
        &mut self.batch
    }
}

const MAX_CURSORS: usize = 16 * 1024;

/// Elements from which dropping a collection writes one range delete over
/// its elements instead of a delete per element: a range delete costs
/// every read of its range a check until the merges of its partition drop
/// it, so small collections keep their per-element deletes.
pub const RANGE_DELETE_ELEMENTS: u64 = 256;

/// Server-side `SCAN`/`HSCAN` cursors: numeric ids mapped to the engine key
/// to resume from (the ordered engine resumes by key, Redis clients expect a
/// number). The oldest cursors are forgotten first; the commands scan an
/// unknown (or forgotten) cursor from the start, as Redis takes any
/// number as a cursor (`cmd/keys.rs`).
#[derive(Default)]
struct Cursors {
    next: u64,
    map: HashMap<u64, Vec<u8>>,
    order: VecDeque<u64>,
}

/// The typed key space shared by all connections.
pub struct Keyspace {
    /// The engine.
    pub db: Db,
    /// Stripe locks for read-modify-write commands.
    pub locks: Locks,
    sync: SyncMode,
    dirty: AtomicBool,
    syncs: AtomicU64,
    cursors: Mutex<Cursors>,
    /// Keys deleted by the expirer.
    pub expired_keys: AtomicU64,
    /// Metadata records (see the module doc's *Key counts*).
    keys: AtomicI64,
    /// Metadata records with a deadline.
    expires: AtomicI64,
}

impl Keyspace {
    /// Wraps an open database: checks (and, from format 0, upgrades) its
    /// data format, then counts its keys (one scan).
    pub fn new(db: Db, sync: SyncMode) -> StoreResult<Self> {
        upgrade::check_and_upgrade(&db)?;
        let (keys, expires) = count_records(&db)?;
        Ok(Keyspace {
            db,
            locks: Locks::new(4096),
            sync,
            dirty: AtomicBool::new(false),
            syncs: AtomicU64::new(0),
            cursors: Mutex::new(Cursors {
                next: 1,
                ..Cursors::default()
            }),
            expired_keys: AtomicU64::new(0),
            keys: AtomicI64::new(keys as i64),
            expires: AtomicI64::new(expires as i64),
        })
    }

    /// Applies a batch with the durability of the `--sync` mode, then its
    /// tally of created and deleted keys. Callers hold the stripe locks of
    /// the keys it names.
    pub fn write(&self, batch: Batch) -> StoreResult<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let Batch {
            batch,
            keys,
            expires,
        } = batch;
        let always = self.sync == SyncMode::Always;
        self.db.write(batch, &WriteOptions::new().sync(always))?;
        if !always {
            self.dirty.store(true, Ordering::Release);
        }
        if keys != 0 {
            self.keys.fetch_add(keys, Ordering::Relaxed);
        }
        if expires != 0 {
            self.expires.fetch_add(expires, Ordering::Relaxed);
        }
        Ok(())
    }

    /// `(keys, keys with a deadline)`, as Redis counts them: keys past
    /// their deadline that are not deleted yet included. O(1).
    pub fn key_counts(&self) -> (u64, u64) {
        let keys = self.keys.load(Ordering::Relaxed);
        let expires = self.expires.load(Ordering::Relaxed);
        debug_assert!(keys >= 0 && expires >= 0, "key counts went negative");
        (keys.max(0) as u64, expires.max(0) as u64)
    }

    /// `everysec`: if anything was written since the last call, makes it
    /// durable with [`weft::Db::sync_wal`], which fsyncs the WAL on a second
    /// handle without holding up writers. Returns whether it synced.
    pub fn sync_if_dirty(&self) -> StoreResult<bool> {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(false);
        }
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.db.sync_wal()?;
        Ok(true)
    }

    /// The live entry of `key` (expired keys are absent).
    pub fn get(&self, key: &[u8], opts: &ReadOptions) -> StoreResult<Option<Entry>> {
        match self.db.get_opt(encoding::meta_key(key), opts)? {
            Some(raw) => live_at(key, raw, now_ms()),
            None => Ok(None),
        }
    }

    /// The live entries of `keys`, in order, read at one sequence (see
    /// [`weft::Db::multi_get_opt`]: their memtable lookups overlap).
    pub fn get_many(&self, keys: &[&[u8]], opts: &ReadOptions) -> Vec<StoreResult<Option<Entry>>> {
        let now = now_ms();
        with_meta_keys(keys, |m| self.db.multi_get_opt(m, opts))
            .into_iter()
            .zip(keys)
            .map(|(raw, key)| match raw? {
                Some(raw) => live_at(key, raw, now),
                None => Ok(None),
            })
            .collect()
    }

    /// [`Keyspace::load_for_write`] of several keys, whose locks the caller
    /// holds, in one engine read.
    pub fn load_many_for_write(
        &self,
        keys: &[&[u8]],
        batch: &mut Batch,
    ) -> StoreResult<Vec<Option<Entry>>> {
        let now = now_ms();
        let mut out = Vec::with_capacity(keys.len());
        let raws = with_meta_keys(keys, |m| self.db.multi_get(m));
        for (raw, key) in raws.into_iter().zip(keys) {
            out.push(match raw? {
                None => None,
                Some(raw) => self.live_or_delete(key, decode_entry(key, raw)?, now, batch)?,
            });
        }
        Ok(out)
    }

    /// For writers holding `key`'s lock: the live entry of `key`; an expired
    /// one is deleted into `batch` (with everything it owns) and reported
    /// absent.
    pub fn load_for_write(&self, key: &[u8], batch: &mut Batch) -> StoreResult<Option<Entry>> {
        let Some(raw) = self.db.get(encoding::meta_key(key))? else {
            return Ok(None);
        };
        self.live_or_delete(key, decode_entry(key, raw)?, now_ms(), batch)
    }

    /// `e` if live at `now`; else its deletion goes into `batch`.
    fn live_or_delete(
        &self,
        key: &[u8],
        e: Entry,
        now: u64,
        batch: &mut Batch,
    ) -> StoreResult<Option<Entry>> {
        if e.meta.expired(now) {
            self.delete_into(batch, key, &e.meta)?;
            return Ok(None);
        }
        Ok(Some(e))
    }

    /// Adds the deletion of `key` (metadata, expiry-index record, a
    /// collection's elements) to `batch`.
    pub fn delete_into(&self, batch: &mut Batch, key: &[u8], meta: &Meta) -> StoreResult<()> {
        self.drop_meta_into(batch, key, meta);
        self.delete_elements_into(batch, key, meta)
    }

    /// Adds the deletion of `key`'s metadata and expiry-index record to
    /// `batch`, for a writer that deletes the elements itself (a pop that
    /// empties a list).
    pub fn drop_meta_into(&self, batch: &mut Batch, key: &[u8], meta: &Meta) {
        batch.delete(encoding::meta_key(key));
        batch.keys -= 1;
        if let Some(t) = meta.expire_at {
            batch.delete(encoding::expiry_key(t, key));
            batch.expires -= 1;
        }
    }

    /// Adds the deletion of every element of the collection `meta`
    /// describes to `batch`: one range delete per namespace for a big one
    /// (O(1); the engine's merges drop the records later), a delete per
    /// element otherwise (a list's are at known indexes; the others are
    /// read).
    pub fn delete_elements_into(
        &self,
        batch: &mut Batch,
        key: &[u8],
        meta: &Meta,
    ) -> StoreResult<()> {
        if meta.kind == Kind::String {
            return Ok(());
        }
        if meta.count >= RANGE_DELETE_ELEMENTS {
            for &ns in meta.kind.namespaces() {
                let prefix = encoding::element_prefix(ns, key, meta.version);
                let end = prefix_successor(&prefix).unwrap_or_else(|| vec![ns + 1]);
                batch.delete_range(prefix, end);
            }
            return Ok(());
        }
        match meta.kind {
            Kind::List => {
                for i in 0..meta.count {
                    batch.delete(encoding::list_key(key, meta.version, meta.head + i));
                }
            }
            Kind::ZSet => {
                let prefix = encoding::element_prefix(encoding::ZSET, key, meta.version);
                for kv in self.db.prefix(&prefix)? {
                    let (k, v) = kv?;
                    let member = &k[prefix.len()..];
                    if let Some(score) = v.first_chunk::<8>() {
                        let score = f64::from_bits(u64::from_be_bytes(*score));
                        batch.delete(encoding::score_key(key, meta.version, score, member));
                    }
                    batch.delete(k);
                }
            }
            _ => {
                for &ns in meta.kind.namespaces() {
                    for kv in self
                        .db
                        .prefix(encoding::element_prefix(ns, key, meta.version))?
                    {
                        let (k, _) = kv?;
                        batch.delete(k);
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes `key`'s metadata record `raw` with deadline `expire_at` into
    /// `batch`, replacing `old` (whose expiry-index record is dropped if the
    /// deadline changes).
    pub fn put_meta(
        &self,
        batch: &mut Batch,
        key: &[u8],
        old: Option<&Meta>,
        record: &[&[u8]],
        expire_at: Option<u64>,
    ) {
        let had_deadline = old.is_some_and(|m| m.expire_at.is_some());
        batch.keys += i64::from(old.is_none());
        batch.expires += i64::from(expire_at.is_some()) - i64::from(had_deadline);
        if let Some(t) = old.and_then(|m| m.expire_at) {
            if Some(t) != expire_at {
                batch.delete(encoding::expiry_key(t, key));
            }
        }
        batch.put_parts(&encoding::meta_key_parts(key), record);
        if let Some(t) = expire_at {
            if old.and_then(|m| m.expire_at) != Some(t) {
                batch.put(encoding::expiry_key(t, key), b"");
            }
        }
    }

    /// Writes a collection's metadata `new` into `batch`, replacing `old`
    /// (none when the collection is new); an emptied collection (count 0)
    /// is deleted instead, as Redis deletes empty collections (its
    /// elements are the caller's to delete).
    pub fn put_collection(&self, batch: &mut Batch, key: &[u8], old: Option<&Meta>, new: &Meta) {
        if new.count == 0 {
            if let Some(old) = old {
                self.drop_meta_into(batch, key, old);
            }
            return;
        }
        self.put_meta(batch, key, old, &[&new.encode()], new.expire_at);
    }

    /// Writes `key`'s string record `raw` with deadline `expire_at` into
    /// `batch`, replacing `old` whatever its type: a collection is deleted
    /// with its elements first (a string replaces it, as Redis's SET does).
    pub fn put_replacing(
        &self,
        batch: &mut Batch,
        key: &[u8],
        old: Option<&Meta>,
        record: &[&[u8]],
        expire_at: Option<u64>,
    ) -> StoreResult<()> {
        let old = match old {
            Some(o) if o.kind != Kind::String => {
                self.delete_into(batch, key, o)?;
                None
            }
            o => o,
        };
        self.put_meta(batch, key, old, record, expire_at);
        Ok(())
    }

    /// Deletes up to `limit` keys whose deadline has passed (the background
    /// half of expiry; reads already hide them). Returns how many it deleted.
    ///
    /// Without a key that has a deadline it reads nothing: a range read
    /// makes the memtable link every key queued for its sorted index first
    /// (`teks`), which under a stream of new keys costs the writers' CPU ten
    /// times a second for an empty answer. Index records left behind by a
    /// key that lost its deadline are collected once some key has one again.
    pub fn expire_cycle(&self, limit: usize) -> StoreResult<usize> {
        if self.expires.load(Ordering::Relaxed) <= 0 {
            return Ok(0);
        }
        let now = now_ms();
        let lower = vec![encoding::EXPIRY];
        let upper = encoding::expiry_key(now.saturating_add(1), b"");
        let mut due = Vec::new();
        for kv in self.db.range(lower..upper)? {
            let (k, _) = kv?;
            due.push(k);
            if due.len() >= limit {
                break;
            }
        }
        let mut deleted = 0;
        for ik in due {
            let Some((at, key)) = encoding::parse_expiry_key(&ik) else {
                continue;
            };
            let _g = self.locks.lock(key);
            let mut batch = Batch::new();
            match self.db.get(encoding::meta_key(key))? {
                Some(raw) => {
                    let e = decode_entry(key, raw)?;
                    if e.meta.expire_at == Some(at) && e.meta.expired(now) {
                        self.delete_into(&mut batch, key, &e.meta)?;
                        deleted += 1;
                    } else if e.meta.expire_at != Some(at) {
                        batch.delete(&ik); // stale index record
                    }
                }
                None => {
                    batch.delete(&ik);
                }
            }
            self.write(batch)?;
        }
        self.expired_keys
            .fetch_add(deleted as u64, Ordering::Relaxed);
        Ok(deleted)
    }

    /// Deletes every user key (all stripes locked: no command interleaves,
    /// so once the range deletes are written no key is left to count).
    pub fn flush_all(&self) -> StoreResult<()> {
        let _all = self.locks.lock_all();
        match self.delete_namespaces() {
            Ok(()) => {
                self.keys.store(0, Ordering::Relaxed);
                self.expires.store(0, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                // The write failed as a whole (a batch is atomic): count
                // again what is left all the same.
                let (keys, expires) = count_records(&self.db)?;
                self.keys.store(keys as i64, Ordering::Relaxed);
                self.expires.store(expires as i64, Ordering::Relaxed);
                Err(e)
            }
        }
    }

    /// One batch of range deletes, one per namespace of user data: O(1)
    /// however many keys there are (the engine's merges drop the records
    /// later). The system namespace (the data format record) stays.
    fn delete_namespaces(&self) -> StoreResult<()> {
        let mut batch = Batch::new();
        for ns in encoding::DATA_NAMESPACES {
            batch.delete_range([ns], [ns + 1]);
        }
        self.write(batch)
    }

    /// Counts the keys again (one scan): after a replica replaced its data
    /// with a full sync, or applied a range delete over the metadata.
    pub(crate) fn recount(&self) -> StoreResult<()> {
        let (keys, expires) = count_records(&self.db)?;
        self.keys.store(keys as i64, Ordering::Relaxed);
        self.expires.store(expires as i64, Ordering::Relaxed);
        Ok(())
    }

    /// Registers a cursor resuming at engine key `at`; returns its id.
    pub fn new_cursor(&self, at: Vec<u8>) -> u64 {
        let mut c = self.cursors.lock();
        let id = c.next;
        c.next = c.next.wrapping_add(1).max(1);
        c.map.insert(id, at);
        c.order.push_back(id);
        while c.order.len() > MAX_CURSORS {
            if let Some(old) = c.order.pop_front() {
                c.map.remove(&old);
            }
        }
        id
    }

    /// The engine key cursor `id` resumes at.
    pub fn cursor(&self, id: u64) -> Option<Vec<u8>> {
        self.cursors.lock().map.get(&id).cloned()
    }
}

/// `(metadata records, records with a deadline)` in `db`, from one
/// snapshot: the key counts as Redis keeps them (expired keys not yet
/// deleted included).
fn count_records(db: &Db) -> StoreResult<(u64, u64)> {
    let (mut keys, mut expires) = (0, 0);
    for kv in db.prefix([encoding::META])? {
        let (k, v) = kv?;
        let (m, _) = encoding::decode(&v).ok_or_else(|| StoreError::BadMeta(k[1..].to_vec()))?;
        keys += 1;
        expires += u64::from(m.expire_at.is_some());
    }
    Ok((keys, expires))
}

/// The `[lower, upper)` engine range of metadata keys whose user key starts
/// with `prefix`.
pub fn meta_range(prefix: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let lower = encoding::meta_key(prefix);
    let upper = prefix_successor(&lower).unwrap_or_else(|| vec![encoding::META + 1]);
    (lower, upper)
}
