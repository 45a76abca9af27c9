//! Typed keys over the engine: the databases (`SELECT`), metadata lookup
//! with lazy expiry, deletion of a key and everything it owns, the
//! background expirer, the durability mapping, the key counts, the table
//! of `SCAN` cursors, and the state of a running `EXEC`. See
//! [`crate::encoding`] for the layout of the records.
//!
//! # Databases
//!
//! [`Store`] is the server's state over the engine; a command reaches it
//! through a [`Keyspace`]: a view of one database (the connection's
//! `SELECT`), inside or outside an `EXEC`. Database 0 is the engine's
//! default keyspace, so a directory written before databases existed
//! opens unchanged; database `n ≥ 1` is the engine keyspace `"db<n>"`
//! ([`weft::Keyspace`]), created by the first write to it. A read of a
//! database never written finds nothing and creates nothing. The records
//! of every database are laid out alike (the same namespaces, the same
//! user keys): commands write plain keys into a [`Batch`], and the view
//! puts them in its database's keyspace when it writes.
//!
//! # Key counts
//!
//! `DBSIZE` and `INFO keyspace` read two counters per database, O(1) as in
//! Redis: the metadata records (user keys) and those with a deadline. They
//! count what Redis counts: a key past its deadline that no read or expiry
//! cycle has deleted yet is still counted. Opening counts the records once
//! (one scan of each database's metadata namespace); afterwards every write
//! that creates or deletes a metadata record goes through
//! [`Keyspace::put_meta`] or [`Keyspace::delete_into`] on a [`Batch`],
//! which tallies the change, and [`Keyspace::write`] applies the tally to
//! the view's database once the engine has the batch. The tally is exact
//! because every such write holds its keys' stripe locks from the read of
//! the old record to the write, and names each key at most once per
//! batch — or, replacing a key with a new collection (`*STORE`), deletes
//! it and creates it again in that order in one batch, which tallies −1
//! and +1 and leaves the new record, as the batch's order does. Inside an
//! `EXEC` each command's tally is computed against the `EXEC`'s own
//! pending writes (the reads see them) and the sum is applied once the
//! `EXEC`'s one batch is in the engine; an `EXEC` that fails applies none.
//!
//! Only metadata records are counted, and only these batches create or
//! delete them: a collection's elements are reclaimed in the same batch
//! that drops its metadata (point deletes, or one range delete for a big
//! collection: [`Keyspace::delete_into`]), never by a compaction filter,
//! so no record disappears behind the counters' back (`docs/DESIGN.md`
//! §1.9, "Reclamation").
//!
//! # Transactions
//!
//! An `EXEC` runs its queued commands against an [`Exec`]: its stripes are
//! locked for its whole run, its commands' batches are concatenated into
//! one engine batch written at the end, and meanwhile indexed (the
//! `overlay` module) so that each command reads the writes of those before
//! it. See `docs/DESIGN.md` §1.9, "Transactions".
//!
//! # Opening
//!
//! [`Store::new`] first checks the data format recorded in the system
//! namespace, upgrading a format-0 directory in place or refusing a newer
//! one (the `upgrade` module), then finds the databases' keyspaces and
//! counts their keys.

mod overlay;
mod upgrade;

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::ops::{Bound, Deref, DerefMut, RangeBounds};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::{Mutex, MutexGuard};
use weft::prefix_successor;
use weft::{BatchAction, Db, DbIterator, ReadOptions, Snapshot, WriteBatch, WriteOptions};

use crate::encoding::{self, Kind, Meta};
use crate::locks::Locks;
use crate::SyncMode;

pub use overlay::Merged;
use overlay::{Lookup, Overlay};

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
/// deletes, for the key counts (see the module doc). It holds plain keys:
/// [`Keyspace::write`] puts them in its database.
pub struct Batch {
    batch: WriteBatch,
    keys: i64,
    expires: i64,
    /// The `expired` and `new` keyspace events this batch raises once
    /// written (only while those classes are on: [`crate::notify`]).
    notes: Vec<(u32, &'static str, Vec<u8>)>,
}

/// The room a command's batch starts with: a few element and metadata
/// records. Grown from the engine's 12-byte empty batch, a batch of two or
/// three records was reallocated three or four times on every write.
const BATCH_START_BYTES: usize = 256;

impl Default for Batch {
    fn default() -> Self {
        Self::with_capacity(BATCH_START_BYTES)
    }
}

impl Batch {
    /// An empty batch, with room for a few records.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty batch with room for `bytes` of operations.
    pub fn with_capacity(bytes: usize) -> Self {
        Batch {
            batch: WriteBatch::with_capacity(bytes),
            keys: 0,
            expires: 0,
            notes: Vec::new(),
        }
    }

    /// For a write that replaces `key` where it stands, as Redis's
    /// `setKey` overwrites (a `SET` over a hash, a `*STORE` over an
    /// existing key): its deletion and re-creation in this batch raise no
    /// `new` event.
    pub fn overwritten(&mut self, key: &[u8]) {
        if let Some(i) = self
            .notes
            .iter()
            .rposition(|(c, _, k)| *c == crate::notify::NEW && k == key)
        {
            self.notes.remove(i);
        }
    }

    /// Takes the events this batch raises, with their database.
    fn take_notes(&mut self, db: usize) -> Vec<crate::notify::Event> {
        std::mem::take(&mut self.notes)
            .into_iter()
            .map(|(class, name, key)| crate::notify::Event {
                db,
                class,
                name,
                key,
            })
            .collect()
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

/// Calls `f` with the key and the action of each of `batch`'s operations,
/// in order. The batches read back are the server's own.
pub(crate) fn for_each_op(
    batch: &WriteBatch,
    mut f: impl FnMut(&[u8], BatchAction<'_>) -> weft::Result<()>,
) -> weft::Result<()> {
    for op in batch.iter() {
        let op = op?;
        let action = op
            .action()
            .map_err(|m| weft::Error::InvalidArgument(format!("malformed batch value: {m}")))?;
        f(op.key, action)?;
    }
    Ok(())
}

/// Appends the operations of `batch` (plain keys) to `out`, in keyspace
/// `ks`.
fn append_in(out: &mut WriteBatch, ks: &weft::Keyspace, batch: &WriteBatch) -> weft::Result<()> {
    for_each_op(batch, |key, op| {
        match op {
            BatchAction::Put(v) => out.put_in(ks, key, v),
            BatchAction::Delete => out.delete_in(ks, key),
            BatchAction::DeleteRange { end } => out.delete_range_in(ks, key, end),
        };
        Ok(())
    })
}
const MAX_CURSORS: usize = 16 * 1024;

/// Elements from which dropping a collection writes one range delete over
/// its elements instead of a delete per element: a range delete costs
/// every read of its range a check until the merges of its partition drop
/// it, so small collections keep their per-element deletes.
pub const RANGE_DELETE_ELEMENTS: u64 = 256;

/// Stripes of the key locks, shared by every database. `WATCH` compares
/// their versions, so more stripes mean fewer false conflicts between
/// unrelated keys.
const STRIPES: usize = 16 * 1024;

/// The most databases `--databases` may ask for.
pub const MAX_DATABASES: usize = 1 << 16;

/// How long an `EXEC` waits for the lock of a key its commands' key specs
/// did not name (a command locking more than it declares) before it gives
/// up and fails as a whole.
const UNDECLARED_LOCK_WAIT: Duration = Duration::from_secs(2);

/// Server-side `SCAN`/`HSCAN` cursors: numeric ids mapped to the engine key
/// to resume from (the ordered engine resumes by key, Redis clients expect a
/// number). The oldest cursors are forgotten first; the commands scan an
/// unknown (or forgotten) cursor from the start, as Redis takes any
/// number as a cursor (`cmd/keys.rs`). Shared by the databases: a cursor
/// names a position, which a `SCAN` in any database may resume from, as
/// Redis's cursors do.
#[derive(Default)]
struct Cursors {
    next: u64,
    map: HashMap<u64, Vec<u8>>,
    order: VecDeque<u64>,
}

/// One database: its engine keyspace once created, and its key counts.
/// Aligned so that two databases' counters never share a cache line.
#[repr(align(128))]
struct DbSlot {
    /// The engine keyspace (set at open for database 0 and every database
    /// the directory holds, else by the first write).
    handle: OnceLock<weft::Keyspace>,
    /// Metadata records (see the module doc's *Key counts*).
    keys: AtomicI64,
    /// Metadata records with a deadline.
    expires: AtomicI64,
}

thread_local! {
    /// Batches this thread has written (or added to an `EXEC`): a key guard
    /// compares it at release to learn whether its holder wrote.
    static WRITES: Cell<u64> = const { Cell::new(0) };
}

fn writes_now() -> u64 {
    WRITES.with(Cell::get)
}

fn note_write() {
    WRITES.with(|w| w.set(w.get().wrapping_add(1)));
}

/// The engine keyspace name of database `n` (`n ≥ 1`).
pub fn keyspace_name(n: usize) -> String {
    format!("db{n}")
}

/// The database number of engine keyspace `name`, if it is one's.
pub(crate) fn database_of(name: &str) -> Option<usize> {
    let digits = name.strip_prefix("db")?;
    if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The typed key space shared by all connections: the engine, its
/// databases, the key locks.
pub struct Store {
    /// The engine (what concerns every database: `flush_wal`, statistics,
    /// checkpoints). Commands read and write through a [`Keyspace`].
    pub db: Db,
    /// Stripe locks for read-modify-write commands, and `WATCH`'s
    /// versions.
    pub locks: Locks,
    sync: SyncMode,
    dirty: AtomicBool,
    syncs: AtomicU64,
    cursors: Mutex<Cursors>,
    /// Keys deleted by the expirer.
    pub expired_keys: AtomicU64,
    /// `notify-keyspace-events`: which writes raise keyspace events
    /// ([`crate::notify`]).
    pub notify: crate::notify::Flags,
    dbs: Box<[DbSlot]>,
    /// Serializes the creation of databases' keyspaces.
    creating: Mutex<()>,
}

impl Store {
    /// Wraps an open database with `databases` databases: checks (and, from
    /// format 0, upgrades) its data format, then finds the databases'
    /// keyspaces and counts their keys (one scan each). Refuses a directory
    /// holding a database numbered `databases` or more, as Redis refuses
    /// such a data file.
    pub fn new(db: Db, sync: SyncMode, databases: usize) -> StoreResult<Self> {
        let databases = databases.clamp(1, MAX_DATABASES);
        let dbs: Box<[DbSlot]> = (0..databases)
            .map(|_| DbSlot {
                handle: OnceLock::new(),
                keys: AtomicI64::new(0),
                expires: AtomicI64::new(0),
            })
            .collect();
        let _ = dbs[0].handle.set(db.keyspace(weft::DEFAULT_KEYSPACE)?);
        for name in db.keyspaces() {
            let Some(n) = database_of(&name) else {
                continue;
            };
            if n >= databases {
                return Err(StoreError::Unsupported(format!(
                    "this directory holds database {n}; start with --databases {} or more",
                    n + 1
                )));
            }
            let _ = dbs[n].handle.set(db.keyspace(&name)?);
        }
        let handles: Vec<weft::Keyspace> =
            dbs.iter().filter_map(|s| s.handle.get()).cloned().collect();
        upgrade::check_and_upgrade(&db, &handles)?;
        for slot in dbs.iter() {
            if let Some(h) = slot.handle.get() {
                let (keys, expires) = count_records(h)?;
                slot.keys.store(keys as i64, Ordering::Relaxed);
                slot.expires.store(expires as i64, Ordering::Relaxed);
            }
        }
        Ok(Store {
            db,
            locks: Locks::new(STRIPES),
            sync,
            dirty: AtomicBool::new(false),
            syncs: AtomicU64::new(0),
            cursors: Mutex::new(Cursors {
                next: 1,
                ..Cursors::default()
            }),
            expired_keys: AtomicU64::new(0),
            notify: crate::notify::Flags::default(),
            dbs,
            creating: Mutex::new(()),
        })
    }

    /// How many databases there are (`--databases`).
    pub fn databases(&self) -> usize {
        self.dbs.len()
    }

    /// The view of database `db` for a command outside `EXEC`. `db` must be
    /// below [`Store::databases`] (`SELECT` checks it).
    pub fn view(&self, db: usize) -> Keyspace<'_> {
        Keyspace {
            store: self,
            db: db.min(self.dbs.len() - 1),
            exec: None,
        }
    }

    /// The view of database `db` for a command queued in `exec`.
    pub fn exec_view<'a>(&'a self, db: usize, exec: &'a Exec) -> Keyspace<'a> {
        Keyspace {
            exec: Some(exec),
            ..self.view(db)
        }
    }

    /// Database `db`'s engine keyspace, if it exists.
    fn handle(&self, db: usize) -> Option<&weft::Keyspace> {
        self.dbs[db].handle.get()
    }

    /// Database `db`'s engine keyspace, created if needed (one engine
    /// write, durable like any).
    fn handle_for_write(&self, db: usize) -> weft::Result<&weft::Keyspace> {
        if let Some(h) = self.handle(db) {
            return Ok(h);
        }
        let _one = self.creating.lock();
        if let Some(h) = self.handle(db) {
            return Ok(h);
        }
        let h = self.db.keyspace(&keyspace_name(db))?;
        let _ = self.dbs[db].handle.set(h);
        self.handle(db)
            .ok_or_else(|| weft::Error::InvalidArgument(format!("database {db} has no keyspace")))
    }

    /// Writes engine batch `batch` with the durability of the `--sync`
    /// mode.
    fn write_engine(&self, batch: WriteBatch) -> StoreResult<()> {
        let always = self.sync == SyncMode::Always;
        self.db.write(batch, &WriteOptions::new().sync(always))?;
        if !always {
            self.dirty.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// Applies a key-count tally to database `db`.
    fn tally(&self, db: usize, keys: i64, expires: i64) {
        let slot = &self.dbs[db];
        if keys != 0 {
            slot.keys.fetch_add(keys, Ordering::Relaxed);
        }
        if expires != 0 {
            slot.expires.fetch_add(expires, Ordering::Relaxed);
        }
    }

    /// [`Store::write_batches`] of one non-empty batch: database 0's is
    /// the engine batch as it is, written without the two vectors the
    /// general case builds (this runs for every write command).
    fn write_one(&self, db: usize, mut batch: Batch) -> StoreResult<()> {
        if db != 0 {
            return self.write_batches(vec![(db, batch)]);
        }
        note_write();
        let notes = (!batch.notes.is_empty()).then(|| batch.take_notes(db));
        let (keys, expires) = (batch.keys, batch.expires);
        self.write_engine(batch.batch)?;
        self.tally(db, keys, expires);
        if let Some(notes) = notes {
            crate::notify::defer(notes);
        }
        Ok(())
    }

    /// Writes `batches` (each of plain keys, for its database) as one
    /// atomic engine batch, then their tallies. Callers hold the stripe
    /// locks of the keys they name.
    fn write_batches(&self, batches: Vec<(usize, Batch)>) -> StoreResult<()> {
        let mut batches: Vec<(usize, Batch)> =
            batches.into_iter().filter(|(_, b)| !b.is_empty()).collect();
        if batches.is_empty() {
            return Ok(());
        }
        note_write();
        let mut notes = Vec::new();
        for (db, b) in &mut batches {
            if !b.notes.is_empty() {
                notes.extend(b.take_notes(*db));
            }
        }
        let engine = match batches.as_slice() {
            [(0, _)] => None,
            _ => {
                let bytes = batches
                    .iter()
                    .map(|(_, b)| b.approximate_size() + 8 * b.len())
                    .sum();
                let mut out = WriteBatch::with_capacity(bytes);
                for (db, b) in &batches {
                    append_in(&mut out, self.handle_for_write(*db)?, b)?;
                }
                Some(out)
            }
        };
        let tallies: Vec<(usize, i64, i64)> = batches
            .iter()
            .map(|(db, b)| (*db, b.keys, b.expires))
            .collect();
        match engine {
            Some(out) => self.write_engine(out)?,
            None => {
                let Some((_, b)) = batches.into_iter().next() else {
                    return Ok(());
                };
                self.write_engine(b.batch)?;
            }
        }
        for (db, keys, expires) in tallies {
            self.tally(db, keys, expires);
        }
        if !notes.is_empty() {
            crate::notify::defer(notes);
        }
        Ok(())
    }

    /// The database whose engine keyspace is named `name` (`"default"`
    /// is database 0), if it is one's and in range.
    pub(crate) fn database_named(&self, name: &str) -> Option<usize> {
        if name == weft::DEFAULT_KEYSPACE {
            return Some(0);
        }
        database_of(name).filter(|&n| n < self.dbs.len())
    }

    /// Database `db`'s engine keyspace, created if needed: a replica
    /// applying its primary's stream or loading a full sync
    /// (`repl::replica`), whose reads must then find it.
    pub(crate) fn database_keyspace(&self, db: usize) -> weft::Result<&weft::Keyspace> {
        self.handle_for_write(db)
    }

    /// Writes an engine batch made elsewhere (a replica applying its
    /// primary's batch, `repl::replica`, which tallies the metadata records
    /// it creates and deletes itself), then applies `tallies`: `(database,
    /// keys, keys with a deadline)`.
    pub(crate) fn write_tallied(
        &self,
        batch: WriteBatch,
        tallies: &[(usize, i64, i64)],
    ) -> StoreResult<()> {
        note_write();
        self.write_engine(batch)?;
        for &(db, keys, expires) in tallies {
            self.tally(db, keys, expires);
        }
        Ok(())
    }

    /// Counts every database's keys again (one scan each): after a replica
    /// replaced its data with a full sync, or applied a range delete over
    /// the metadata.
    pub(crate) fn recount(&self) -> StoreResult<()> {
        for slot in self.dbs.iter() {
            let (keys, expires) = match slot.handle.get() {
                Some(h) => count_records(h)?,
                None => (0, 0),
            };
            slot.keys.store(keys as i64, Ordering::Relaxed);
            slot.expires.store(expires as i64, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Database `db`'s `(keys, keys with a deadline)`, as Redis counts
    /// them: keys past their deadline that are not deleted yet included.
    /// O(1).
    pub fn key_counts(&self, db: usize) -> (u64, u64) {
        let slot = &self.dbs[db];
        let keys = slot.keys.load(Ordering::Relaxed);
        let expires = slot.expires.load(Ordering::Relaxed);
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

    /// One expiry cycle over every database (see
    /// [`Keyspace::expire_cycle`]): up to `limit` keys each. Returns how
    /// many it deleted. `written` runs after each key's batch, while the
    /// key's stripe lock is still held (the expirer publishes the
    /// `expired` events there: [`crate::notify`]).
    pub fn expire_cycle(&self, limit: usize, written: &mut dyn FnMut()) -> StoreResult<usize> {
        let mut deleted = 0;
        for db in 0..self.dbs.len() {
            if self.handle(db).is_some() {
                deleted += self.view(db).expire_cycle(limit, written)?;
            }
        }
        Ok(deleted)
    }

    /// `FLUSHALL` outside `EXEC`: every database emptied by one atomic
    /// batch.
    pub fn flush_all(&self) -> StoreResult<()> {
        self.view(0).flush(true)
    }

    /// Locks what an `EXEC` needs (`plan`: every stripe, or these) in
    /// ascending order, and returns its state. The locks stay held until
    /// [`Store::finish_exec`].
    pub fn begin_exec(&self, all: bool, mut stripes: Vec<usize>) -> (ExecLocks<'_>, Exec) {
        if all {
            stripes = (0..self.locks.len()).collect();
        } else {
            stripes.sort_unstable();
            stripes.dedup();
        }
        let guards = stripes.iter().map(|&i| self.locks.acquire(i)).collect();
        let exec = Exec {
            all,
            held: stripes,
            extra: RefCell::new(Vec::new()),
            dirty: RefCell::new(Vec::new()),
            broken: Cell::new(false),
            writes: RefCell::new(ExecWrites::default()),
            ready: RefCell::new(Vec::new()),
        };
        (ExecLocks { guards }, exec)
    }

    /// Ends an `EXEC`: when `commit`, writes its one batch (the
    /// `--sync` mode's durability), applies its tallies and bumps the
    /// versions of the stripes it wrote under, all before any of its locks
    /// is released; then releases them. Returns the `(database, key)`s its
    /// commands made ready for blocked clients. An `EXEC` that could not
    /// lock a key in time writes nothing and fails.
    pub fn finish_exec(
        &self,
        exec: Exec,
        locks: ExecLocks<'_>,
        commit: bool,
    ) -> StoreResult<Vec<(usize, Vec<u8>)>> {
        let result = if !commit {
            Ok(())
        } else if exec.broken.get() {
            Err(StoreError::Unsupported(
                "EXEC could not lock a key its commands did not declare in time; nothing was \
                 applied"
                    .into(),
            ))
        } else {
            let writes = exec.writes.take();
            let written = !writes.batch.is_empty();
            let r = if written {
                self.write_engine(writes.batch)
            } else {
                Ok(())
            };
            if r.is_ok() {
                for (db, o) in &writes.dbs {
                    self.tally(*db, o.keys, o.expires);
                }
                let mut dirty = exec.dirty.take();
                dirty.sort_unstable();
                dirty.dedup();
                for i in dirty {
                    self.locks.bump(i);
                }
            }
            r
        };
        for i in exec.extra.take() {
            // SAFETY: `Exec::hold` locked stripe `i` on this thread (an EXEC
            // runs on one thread) and leaked its guard; `extra` names each
            // such stripe once, and is emptied here.
            unsafe { self.locks.release_leaked(i) };
        }
        drop(locks);
        result.map(|()| exec.ready.take())
    }
}

/// The locks an `EXEC` holds, released by [`Store::finish_exec`].
pub struct ExecLocks<'a> {
    #[allow(dead_code)] // held for their drop
    guards: Vec<MutexGuard<'a, ()>>,
}

/// The pending writes of one database in an `EXEC`.
#[derive(Default)]
struct DbWrites {
    overlay: Overlay,
    keys: i64,
    expires: i64,
}

/// An `EXEC`'s writes: the engine batch so far, and per database the
/// overlay its reads merge and the tally.
#[derive(Default)]
struct ExecWrites {
    batch: WriteBatch,
    dbs: Vec<(usize, DbWrites)>,
}

impl ExecWrites {
    fn db(&mut self, db: usize) -> &mut DbWrites {
        let i = match self.dbs.iter().position(|(d, _)| *d == db) {
            Some(i) => i,
            None => {
                self.dbs.push((db, DbWrites::default()));
                self.dbs.len() - 1
            }
        };
        &mut self.dbs[i].1
    }
}

/// A running `EXEC` ([`Store::begin_exec`]): the stripes it holds, and
/// what its commands wrote so far. Lives on the stack of the connection's
/// thread while the `EXEC` runs; the views of its commands borrow it.
pub struct Exec {
    all: bool,
    /// Stripes locked at the start (sorted).
    held: Vec<usize>,
    /// Stripes locked on the way (their guards leaked, released by
    /// `finish_exec`).
    extra: RefCell<Vec<usize>>,
    /// Stripes under which a command wrote.
    dirty: RefCell<Vec<usize>>,
    /// A lock could not be taken: the `EXEC` must not commit.
    broken: Cell<bool>,
    writes: RefCell<ExecWrites>,
    ready: RefCell<Vec<(usize, Vec<u8>)>>,
}

impl Exec {
    /// Makes sure stripe `i` is held: those the `EXEC` did not lock at its
    /// start (a command locking a key its key specs do not name) are
    /// locked now, waiting a bounded time since the ascending order is
    /// lost; a lock not had in time makes the `EXEC` fail.
    fn hold(&self, locks: &Locks, i: usize) {
        if self.all || self.held.binary_search(&i).is_ok() || self.extra.borrow().contains(&i) {
            return;
        }
        match locks.try_acquire_for(i, UNDECLARED_LOCK_WAIT) {
            Some(g) => {
                MutexGuard::leak(g);
                self.extra.borrow_mut().push(i);
            }
            None => self.broken.set(true),
        }
    }

    fn mark_dirty(&self, i: usize) {
        self.dirty.borrow_mut().push(i);
    }

    /// Whether stripe `i` is locked for this `EXEC` (for `WATCH`'s check).
    pub fn holds(&self, i: usize) -> bool {
        self.all || self.held.binary_search(&i).is_ok() || self.extra.borrow().contains(&i)
    }
}

/// Holds the stripe locks of some keys ([`LockView`]); when its holder
/// wrote while holding them, bumps their versions (`WATCH`) before the
/// locks are released. Inside an `EXEC` the stripes are the `EXEC`'s and
/// stay locked; the bump waits for its commit.
pub struct KeyGuard<'a> {
    locks: &'a Locks,
    exec: Option<&'a Exec>,
    held: Held<'a>,
    writes_at: u64,
}

/// The stripes a [`KeyGuard`] holds, and their guards (none inside an
/// `EXEC`, which holds them). One stripe needs no allocation. The guards
/// are only held, for their drop, which comes after [`KeyGuard`]'s own
/// (the bump happens under the locks).
#[allow(dead_code)]
enum Held<'a> {
    One(usize, Option<MutexGuard<'a, ()>>),
    Many(Vec<usize>, Vec<MutexGuard<'a, ()>>),
}

impl Held<'_> {
    fn stripes(&self) -> &[usize] {
        match self {
            Held::One(i, _) => std::slice::from_ref(i),
            Held::Many(v, _) => v,
        }
    }
}

impl Drop for KeyGuard<'_> {
    fn drop(&mut self) {
        if writes_now() == self.writes_at {
            return;
        }
        for &i in self.held.stripes() {
            match self.exec {
                Some(e) => e.mark_dirty(i),
                None => self.locks.bump(i),
            }
        }
    }
}

/// The key locks as a command sees them: of its database, and no-ops
/// inside an `EXEC` (which holds them already).
#[derive(Clone, Copy)]
pub struct LockView<'a> {
    store: &'a Store,
    db: usize,
    exec: Option<&'a Exec>,
}

impl<'a> LockView<'a> {
    fn guard(&self, stripes: Vec<usize>) -> KeyGuard<'a> {
        let locks = &self.store.locks;
        let guards = match self.exec {
            Some(e) => {
                for &i in &stripes {
                    e.hold(locks, i);
                }
                Vec::new()
            }
            None => stripes.iter().map(|&i| locks.acquire(i)).collect(),
        };
        KeyGuard {
            locks,
            exec: self.exec,
            held: Held::Many(stripes, guards),
            writes_at: writes_now(),
        }
    }

    /// Locks the stripe of one key.
    pub fn lock(&self, key: &[u8]) -> KeyGuard<'a> {
        let locks = &self.store.locks;
        let i = locks.index(self.db, key);
        let guard = match self.exec {
            Some(e) => {
                e.hold(locks, i);
                None
            }
            None => Some(locks.acquire(i)),
        };
        KeyGuard {
            locks,
            exec: self.exec,
            held: Held::One(i, guard),
            writes_at: writes_now(),
        }
    }

    /// Locks the stripes of all `keys`, in ascending stripe order.
    pub fn lock_many<'k, I>(&self, keys: I) -> KeyGuard<'a>
    where
        I: IntoIterator<Item = &'k [u8]>,
    {
        let mut idx: Vec<usize> = keys
            .into_iter()
            .map(|k| self.store.locks.index(self.db, k))
            .collect();
        idx.sort_unstable();
        idx.dedup();
        self.guard(idx)
    }

    /// Locks the stripes of `(database, key)` pairs, in ascending stripe
    /// order (`MOVE`).
    pub fn lock_across(&self, keys: &[(usize, &[u8])]) -> KeyGuard<'a> {
        let mut idx: Vec<usize> = keys
            .iter()
            .map(|(db, k)| self.store.locks.index(*db, k))
            .collect();
        idx.sort_unstable();
        idx.dedup();
        self.guard(idx)
    }

    /// Locks every stripe (`FLUSHDB`, `FLUSHALL`).
    pub fn lock_all(&self) -> KeyGuard<'a> {
        self.guard((0..self.store.locks.len()).collect())
    }
}

/// A command's view of the server's data: one database (its connection's
/// `SELECT`), read and written directly, or through the running `EXEC`'s
/// pending writes. Cheap to copy.
#[derive(Clone, Copy)]
pub struct Keyspace<'a> {
    store: &'a Store,
    db: usize,
    exec: Option<&'a Exec>,
}

impl<'a> Keyspace<'a> {
    /// The store.
    pub fn store(&self) -> &'a Store {
        self.store
    }

    /// The database's number.
    pub fn index(&self) -> usize {
        self.db
    }

    /// True inside an `EXEC`: blocking commands must not block.
    pub fn in_exec(&self) -> bool {
        self.exec.is_some()
    }

    /// The same view on database `db` (`MOVE`'s destination).
    pub fn with_db(&self, db: usize) -> Keyspace<'a> {
        Keyspace {
            db: db.min(self.store.dbs.len() - 1),
            ..*self
        }
    }

    /// The database's records: the engine's reads, routed to the
    /// database's keyspace and merged with the `EXEC`'s pending writes.
    pub fn db(&self) -> Engine<'a> {
        Engine {
            store: self.store,
            db: self.db,
            exec: self.exec,
        }
    }

    /// The key locks of this database.
    pub fn locks(&self) -> LockView<'a> {
        LockView {
            store: self.store,
            db: self.db,
            exec: self.exec,
        }
    }

    /// Applies a batch (plain keys) to this database, with the durability
    /// of the `--sync` mode, then its tally of created and deleted keys;
    /// inside an `EXEC`, adds it to the `EXEC`'s batch instead. Callers
    /// hold the stripe locks of the keys it names.
    pub fn write(&self, mut batch: Batch) -> StoreResult<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let Some(exec) = self.exec else {
            return self.store.write_one(self.db, batch);
        };
        let handle = self.store.handle_for_write(self.db)?;
        let mut w = exec.writes.borrow_mut();
        append_in(&mut w.batch, handle, &batch)?;
        let d = w.db(self.db);
        d.overlay.apply(&batch)?;
        d.keys += batch.keys;
        d.expires += batch.expires;
        note_write();
        // Raised as the command runs, as Redis does inside EXEC; an EXEC
        // whose batch then fails drops its deliveries (`cmd/multi.rs`).
        if !batch.notes.is_empty() {
            crate::notify::defer(batch.take_notes(self.db));
        }
        Ok(())
    }

    /// Writes `batch` to this database and `other` to `to`'s, atomically
    /// (`MOVE`).
    pub fn write_with(&self, batch: Batch, to: &Keyspace<'_>, other: Batch) -> StoreResult<()> {
        if self.exec.is_some() {
            self.write(batch)?;
            return to.write(other);
        }
        self.store
            .write_batches(vec![(self.db, batch), (to.db, other)])
    }

    /// Inside an `EXEC`, keeps `key` to be reported ready for blocked
    /// clients once the `EXEC` commits, and returns true; outside, false
    /// (the caller reports it now). See [`crate::cmd::key_ready_now`].
    pub fn defer_ready(&self, key: &[u8]) -> bool {
        match self.exec {
            Some(e) => {
                e.ready.borrow_mut().push((self.db, key.to_vec()));
                true
            }
            None => false,
        }
    }

    /// `(keys, keys with a deadline)` of this database, as Redis counts
    /// them (see [`Store::key_counts`]), with the `EXEC`'s pending tally.
    pub fn key_counts(&self) -> (u64, u64) {
        let (keys, expires) = self.store.key_counts(self.db);
        let Some(e) = self.exec else {
            return (keys, expires);
        };
        let w = e.writes.borrow();
        let (dk, de) = w
            .dbs
            .iter()
            .find(|(d, _)| *d == self.db)
            .map_or((0, 0), |(_, d)| (d.keys, d.expires));
        (
            (keys as i64 + dk).max(0) as u64,
            (expires as i64 + de).max(0) as u64,
        )
    }

    /// The live entry of `key` (expired keys are absent).
    pub fn get(&self, key: &[u8], opts: &ReadOptions) -> StoreResult<Option<Entry>> {
        match self.db().get_opt(encoding::meta_key(key), opts)? {
            Some(raw) => live_at(key, raw, now_ms()),
            None => Ok(None),
        }
    }

    /// The live entries of `keys`, in order, read at one sequence (see
    /// [`weft::Db::multi_get_opt`]: their memtable lookups overlap).
    pub fn get_many(&self, keys: &[&[u8]], opts: &ReadOptions) -> Vec<StoreResult<Option<Entry>>> {
        let now = now_ms();
        with_meta_keys(keys, |m| self.db().multi_get_opt(m, opts))
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
        let raws = with_meta_keys(keys, |m| self.db().multi_get(m));
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
        let Some(raw) = self.db().get(encoding::meta_key(key))? else {
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
            if self.store.notify.wants(crate::notify::EXPIRED) {
                batch
                    .notes
                    .push((crate::notify::EXPIRED, "expired", key.to_vec()));
            }
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
                for kv in self.db().prefix(&prefix)? {
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
                        .db()
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
        if old.is_none() && self.store.notify.wants(crate::notify::NEW) {
            batch.notes.push((crate::notify::NEW, "new", key.to_vec()));
        }
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
        let (old, replaced) = match old {
            Some(o) if o.kind != Kind::String => {
                self.delete_into(batch, key, o)?;
                (None, true)
            }
            o => (o, false),
        };
        self.put_meta(batch, key, old, record, expire_at);
        if replaced {
            batch.overwritten(key);
        }
        Ok(())
    }

    /// Adds to `batch` the puts that recreate `key` (its metadata record
    /// `e`, its expiry-index record, its elements) as read from this
    /// database: `MOVE` writes them into another database.
    pub fn copy_into(&self, batch: &mut Batch, key: &[u8], e: &Entry) -> StoreResult<()> {
        let meta = &e.meta;
        self.put_meta(batch, key, None, &[e.raw()], meta.expire_at);
        if meta.kind == Kind::String {
            return Ok(());
        }
        for &ns in meta.kind.namespaces() {
            for kv in self
                .db()
                .prefix(encoding::element_prefix(ns, key, meta.version))?
            {
                let (k, v) = kv?;
                batch.put(k, v);
            }
        }
        Ok(())
    }

    /// Deletes up to `limit` keys of this database whose deadline has
    /// passed (the background half of expiry; reads already hide them).
    /// Returns how many it deleted.
    ///
    /// Without a key that has a deadline it reads nothing: a range read
    /// makes the memtable link every key queued for its sorted index first
    /// (`teks`), which under a stream of new keys costs the writers' CPU ten
    /// times a second for an empty answer. Index records left behind by a
    /// key that lost its deadline are collected once some key has one again.
    /// `written` runs after each key's batch, under the key's lock.
    pub fn expire_cycle(&self, limit: usize, written: &mut dyn FnMut()) -> StoreResult<usize> {
        if self.store.dbs[self.db].expires.load(Ordering::Relaxed) <= 0 {
            return Ok(0);
        }
        let now = now_ms();
        let lower = vec![encoding::EXPIRY];
        let upper = encoding::expiry_key(now.saturating_add(1), b"");
        let mut due = Vec::new();
        for kv in self.db().range(lower..upper)? {
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
            let _g = self.locks().lock(key);
            let mut batch = Batch::new();
            match self.db().get(encoding::meta_key(key))? {
                Some(raw) => {
                    let e = decode_entry(key, raw)?;
                    if e.meta.expire_at == Some(at) && e.meta.expired(now) {
                        self.delete_into(&mut batch, key, &e.meta)?;
                        if self.store.notify.wants(crate::notify::EXPIRED) {
                            batch
                                .notes
                                .push((crate::notify::EXPIRED, "expired", key.to_vec()));
                        }
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
            written();
        }
        self.store
            .expired_keys
            .fetch_add(deleted as u64, Ordering::Relaxed);
        Ok(deleted)
    }

    /// `FLUSHDB` (or, with `all_databases`, `FLUSHALL`): deletes every user
    /// key of this database (or of all) with one batch of range deletes,
    /// one per namespace of user data: O(1) however many keys there are
    /// (the engine's merges drop the records later). The system namespace
    /// (the data format record) stays. All stripes are locked, so no
    /// command interleaves and the tally (minus the counts) is exact.
    pub fn flush(&self, all_databases: bool) -> StoreResult<()> {
        let _all = self.locks().lock_all();
        let dbs: Vec<usize> = if all_databases {
            (0..self.store.dbs.len()).collect()
        } else {
            vec![self.db]
        };
        let mut batches = Vec::new();
        for db in dbs {
            let view = self.with_db(db);
            let pending = self.exec.is_some_and(|e| {
                e.writes
                    .borrow()
                    .dbs
                    .iter()
                    .any(|(d, w)| *d == db && !w.overlay.is_empty())
            });
            if self.store.handle(db).is_none() && !pending {
                continue; // never written: nothing to delete
            }
            let (keys, expires) = view.key_counts();
            let mut batch = Batch::new();
            for ns in encoding::DATA_NAMESPACES {
                batch.delete_range([ns], [ns + 1]);
            }
            batch.keys = -(keys as i64);
            batch.expires = -(expires as i64);
            batches.push((db, batch));
        }
        match self.exec {
            None => self.store.write_batches(batches),
            Some(_) => {
                for (db, batch) in batches {
                    self.with_db(db).write(batch)?;
                }
                Ok(())
            }
        }
    }

    /// Registers a cursor resuming at engine key `at`; returns its id.
    pub fn new_cursor(&self, at: Vec<u8>) -> u64 {
        let mut c = self.store.cursors.lock();
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
        self.store.cursors.lock().map.get(&id).cloned()
    }
}

/// The engine reads of one database (`Keyspace::db`): [`weft::Db`]'s
/// calls, answered from the database's keyspace, with a running `EXEC`'s
/// pending writes merged over them.
#[derive(Clone, Copy)]
pub struct Engine<'a> {
    store: &'a Store,
    db: usize,
    exec: Option<&'a Exec>,
}

/// What the `EXEC`'s overlay says of `key` in database `db`: `Some` when
/// it decides.
fn pending(exec: Option<&Exec>, db: usize, key: &[u8]) -> Option<Option<Vec<u8>>> {
    let w = exec?.writes.borrow();
    let (_, d) = w.dbs.iter().find(|(d, _)| *d == db)?;
    match d.overlay.lookup(key) {
        Lookup::Pending(v) => Some(v.map(<[u8]>::to_vec)),
        Lookup::Base => None,
    }
}

impl<'a> Engine<'a> {
    /// The latest value of `key`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> weft::Result<Option<Vec<u8>>> {
        self.get_opt(key, &ReadOptions::new())
    }

    /// The value of `key` under `opts`.
    pub fn get_opt(
        &self,
        key: impl AsRef<[u8]>,
        opts: &ReadOptions,
    ) -> weft::Result<Option<Vec<u8>>> {
        let key = key.as_ref();
        if let Some(v) = pending(self.exec, self.db, key) {
            return Ok(v);
        }
        if self.db == 0 {
            return self.store.db.get_opt(key, opts);
        }
        match self.store.handle(self.db) {
            Some(h) => h.get_opt(key, opts),
            None => Ok(None),
        }
    }

    /// The latest values of `keys`, in order, read at one sequence.
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Vec<weft::Result<Option<Vec<u8>>>> {
        self.multi_get_opt(keys, &ReadOptions::new())
    }

    /// The values of `keys` under `opts`, in order, read at one sequence.
    pub fn multi_get_opt<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        opts: &ReadOptions,
    ) -> Vec<weft::Result<Option<Vec<u8>>>> {
        if self.exec.is_none() && self.db == 0 {
            return self.store.db.multi_get_opt(keys, opts);
        }
        let mut out: Vec<Option<weft::Result<Option<Vec<u8>>>>> = keys
            .iter()
            .map(|k| pending(self.exec, self.db, k.as_ref()).map(Ok))
            .collect();
        let rest: Vec<&[u8]> = keys
            .iter()
            .zip(&out)
            .filter(|(_, o)| o.is_none())
            .map(|(k, _)| k.as_ref())
            .collect();
        let mut found = if rest.is_empty() {
            Vec::new()
        } else if self.db == 0 {
            self.store.db.multi_get_opt(&rest, opts)
        } else {
            match self.store.handle(self.db) {
                None => rest.iter().map(|_| Ok(None)).collect(),
                Some(h) if opts.snapshot.is_some() => {
                    rest.iter().map(|k| h.get_opt(k, opts)).collect()
                }
                Some(h) => h.multi_get(&rest),
            }
        }
        .into_iter();
        for o in &mut out {
            if o.is_none() {
                *o = Some(found.next().unwrap_or(Ok(None)));
            }
        }
        out.into_iter().map(|o| o.unwrap_or(Ok(None))).collect()
    }

    /// A snapshot of the engine (shared by every database).
    pub fn snapshot(&self) -> Snapshot {
        self.store.db.snapshot()
    }

    /// The engine cursor of this database under `opts`, `None` for a
    /// database never written.
    fn base_iter(&self, opts: &ReadOptions) -> weft::Result<Option<DbIterator>> {
        if self.db == 0 {
            return self.store.db.iter(opts).map(Some);
        }
        self.store.handle(self.db).map(|h| h.iter(opts)).transpose()
    }

    /// A cursor over this database, bounded by `opts`: the engine's,
    /// with the `EXEC`'s writes to this database merged in if it made any.
    pub fn iter(&self, opts: &ReadOptions) -> weft::Result<Iter> {
        let base = self.base_iter(opts)?;
        if let Some(e) = self.exec {
            let w = e.writes.borrow();
            if let Some((_, d)) = w.dbs.iter().find(|(d, _)| *d == self.db) {
                return Ok(Iter::Merged(Box::new(d.overlay.merge(base, opts))));
            }
        }
        Ok(base.map_or(Iter::Empty, Iter::Engine))
    }

    /// Pairs with keys in `range`, in key order; `.rev()` for reverse.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> weft::Result<Pairs<'a>> {
        let lower = match range.start_bound() {
            Bound::Included(k) => Some(k.as_ref().to_vec()),
            Bound::Excluded(k) => Some([k.as_ref(), &[0]].concat()),
            Bound::Unbounded => None,
        };
        let upper = match range.end_bound() {
            Bound::Included(k) => Some([k.as_ref(), &[0]].concat()),
            Bound::Excluded(k) => Some(k.as_ref().to_vec()),
            Bound::Unbounded => None,
        };
        let mut opts = ReadOptions::new();
        opts.lower_bound = lower;
        opts.upper_bound = upper;
        self.pairs(opts)
    }

    /// Pairs whose key starts with `prefix`, in key order.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> weft::Result<Pairs<'a>> {
        self.pairs(ReadOptions::new().prefix(prefix.as_ref()))
    }

    fn pairs(&self, opts: ReadOptions) -> weft::Result<Pairs<'a>> {
        let has_overlay = self
            .exec
            .is_some_and(|e| e.writes.borrow().dbs.iter().any(|(d, _)| *d == self.db));
        if has_overlay {
            return Ok(Pairs::Merged(MergedPairs {
                engine: *self,
                opts,
                front: None,
                back: None,
                front_last: None,
                back_last: None,
            }));
        }
        let range = (
            opts.lower_bound
                .clone()
                .map_or(Bound::Unbounded, Bound::Included),
            opts.upper_bound
                .clone()
                .map_or(Bound::Unbounded, Bound::Excluded),
        );
        if self.db == 0 {
            return self.store.db.range_opt(range, &opts).map(Pairs::Engine);
        }
        match self.store.handle(self.db) {
            Some(h) => h.range_opt(range, &opts).map(Pairs::Engine),
            None => Ok(Pairs::Empty),
        }
    }
}

/// A cursor of [`Engine::iter`]: [`DbIterator`]'s calls.
// The engine's cursor is the common case (every command outside EXEC):
// kept inline rather than boxed per cursor.
#[allow(clippy::large_enum_variant)]
pub enum Iter {
    /// The engine's own, outside `EXEC`.
    Engine(DbIterator),
    /// The engine's with an `EXEC`'s writes merged in.
    Merged(Box<Merged>),
    /// A database never written.
    Empty,
}

impl Iter {
    /// True when positioned on a key.
    pub fn valid(&self) -> bool {
        match self {
            Iter::Engine(i) => i.valid(),
            Iter::Merged(m) => m.valid(),
            Iter::Empty => false,
        }
    }

    /// Positions on the first key.
    pub fn seek_to_first(&mut self) -> weft::Result<()> {
        match self {
            Iter::Engine(i) => i.seek_to_first(),
            Iter::Merged(m) => m.seek_to_first(),
            Iter::Empty => Ok(()),
        }
    }

    /// Positions on the last key.
    pub fn seek_to_last(&mut self) -> weft::Result<()> {
        match self {
            Iter::Engine(i) => i.seek_to_last(),
            Iter::Merged(m) => m.seek_to_last(),
            Iter::Empty => Ok(()),
        }
    }

    /// Positions on the first key `>= key`.
    pub fn seek(&mut self, key: &[u8]) -> weft::Result<()> {
        match self {
            Iter::Engine(i) => i.seek(key),
            Iter::Merged(m) => m.seek(key),
            Iter::Empty => Ok(()),
        }
    }

    /// Positions on the last key `<= key`.
    pub fn seek_for_prev(&mut self, key: &[u8]) -> weft::Result<()> {
        match self {
            Iter::Engine(i) => i.seek_for_prev(key),
            Iter::Merged(m) => m.seek_for_prev(key),
            Iter::Empty => Ok(()),
        }
    }

    /// Moves to the next key. Requires `valid()`.
    #[allow(clippy::should_implement_trait)] // `DbIterator`'s name
    pub fn next(&mut self) -> weft::Result<()> {
        match self {
            Iter::Engine(i) => i.next(),
            Iter::Merged(m) => m.next(),
            Iter::Empty => Ok(()),
        }
    }

    /// Moves to the previous key. Requires `valid()`.
    pub fn prev(&mut self) -> weft::Result<()> {
        match self {
            Iter::Engine(i) => i.prev(),
            Iter::Merged(m) => m.prev(),
            Iter::Empty => Ok(()),
        }
    }

    /// The current key. Requires `valid()`.
    pub fn key(&self) -> &[u8] {
        match self {
            Iter::Engine(i) => i.key(),
            Iter::Merged(m) => m.key(),
            Iter::Empty => &[],
        }
    }

    /// The current value. Requires `valid()`.
    pub fn value(&self) -> &[u8] {
        match self {
            Iter::Engine(i) => i.value(),
            Iter::Merged(m) => m.value(),
            Iter::Empty => &[],
        }
    }
}

/// Pairs of [`Engine::range`] and [`Engine::prefix`], as [`weft::Range`]:
/// forward, or backward with `.rev()`.
pub enum Pairs<'a> {
    /// The engine's own.
    Engine(weft::Range),
    /// Merged with an `EXEC`'s writes.
    Merged(MergedPairs<'a>),
    /// A database never written.
    Empty,
}

/// [`Pairs`] over a merged cursor: one cursor per end, made when that end
/// is first read; the ends stop where they meet.
pub struct MergedPairs<'a> {
    engine: Engine<'a>,
    opts: ReadOptions,
    front: Option<Iter>,
    back: Option<Iter>,
    front_last: Option<Vec<u8>>,
    back_last: Option<Vec<u8>>,
}

impl MergedPairs<'_> {
    fn step(&mut self, forward: bool) -> Option<weft::Result<(Vec<u8>, Vec<u8>)>> {
        let slot = if forward {
            &mut self.front
        } else {
            &mut self.back
        };
        if slot.is_none() {
            let mut it = match self.engine.iter(&self.opts) {
                Ok(it) => it,
                Err(e) => return Some(Err(e)),
            };
            let r = if forward {
                it.seek_to_first()
            } else {
                it.seek_to_last()
            };
            if let Err(e) = r {
                return Some(Err(e));
            }
            *slot = Some(it);
        } else if let Some(it) = slot.as_mut() {
            if it.valid() {
                let r = if forward { it.next() } else { it.prev() };
                if let Err(e) = r {
                    return Some(Err(e));
                }
            }
        }
        let it = slot.as_ref()?;
        if !it.valid() {
            return None;
        }
        let k = it.key();
        let crossed = if forward {
            self.back_last.as_deref().is_some_and(|b| k >= b)
        } else {
            self.front_last.as_deref().is_some_and(|f| k <= f)
        };
        if crossed {
            return None;
        }
        let pair = (k.to_vec(), it.value().to_vec());
        if forward {
            self.front_last = Some(pair.0.clone());
        } else {
            self.back_last = Some(pair.0.clone());
        }
        Some(Ok(pair))
    }
}

impl Iterator for Pairs<'_> {
    type Item = weft::Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Pairs::Engine(r) => r.next(),
            Pairs::Merged(m) => m.step(true),
            Pairs::Empty => None,
        }
    }
}

impl DoubleEndedIterator for Pairs<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            Pairs::Engine(r) => r.next_back(),
            Pairs::Merged(m) => m.step(false),
            Pairs::Empty => None,
        }
    }
}

/// `(metadata records, records with a deadline)` in keyspace `ks`, from
/// one snapshot: the key counts as Redis keeps them (expired keys not yet
/// deleted included).
fn count_records(ks: &weft::Keyspace) -> StoreResult<(u64, u64)> {
    let (mut keys, mut expires) = (0, 0);
    for kv in ks.prefix([encoding::META])? {
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
