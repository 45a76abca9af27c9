//! The database: the public API over the write path ([`mod@write`]), the read
//! path, recovery ([`open`]) and background work ([`crate::background`]).

mod checkpoint;
mod conflict;
pub(crate) mod core;
mod feed;
mod iter;
mod keyspace;
pub(crate) mod lifetime;
mod open;
mod publish;
mod read_only;
pub(crate) use open::check_wal_tail;
mod transaction;
pub(crate) mod watermark;
mod write;

use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::Mutex;

use self::core::{Core, SuperVersion};
use self::watermark::{OwnedReadGuard, ReadTracker};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::iter::visible::VisibleIter;
use crate::iter::MergingIter;
use crate::key::{SequenceNumber, ValueKind, MAX_KEY_SIZE};
use crate::keyspace_options::KeyspaceOptions;
use crate::options::{prefix_successor, CloseOptions, Options, ReadOptions, WriteOptions};
use crate::snapshot::Snapshot;
use crate::stats::ReadPurpose;
use crate::stats::{MunkStats, PartitionStats, Stats};
use crate::wal::{LogRead, LogReader};
pub use checkpoint::CheckpointInfo;
pub(crate) use checkpoint::{
    check_destination, publish_dir, remove_dir_and_files, staging_dir, CheckpointSource,
};
pub use feed::{ChangeFeed, ChangeGroup, ChangeOp, FeedLimit, KeyspaceOp};
pub use iter::{DbIterator, Range};
pub use keyspace::{Keyspace, DEFAULT_KEYSPACE};
pub(crate) use open::DirLock;
pub use transaction::{
    Transaction, TransactionOptions, TransactionRange, DEFAULT_TRANSACTION_ATTEMPTS,
};

/// An open database. Cheap to clone (an `Arc` inside), `Send + Sync`: share
/// it between threads freely. [`Db::close`] closes it for every clone;
/// dropping the last clone closes it too (see [`Db::close`] for both).
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
/// db.put(b"hello", b"world").unwrap();
/// assert_eq!(db.get(b"hello").unwrap().as_deref(), Some(&b"world"[..]));
/// db.delete(b"hello").unwrap();
/// assert_eq!(db.get(b"hello").unwrap(), None);
/// ```
#[derive(Clone)]
pub struct Db {
    inner: Arc<DbHandle>,
}

/// Owns the engine for all `Db` clones; closes it when the last goes.
struct DbHandle {
    core: Arc<Core>,
    /// The flush thread and the job pool, joined at shutdown.
    background: Mutex<Vec<JoinHandle<()>>>,
    /// The directory lock, `None` once closed. Held through the whole
    /// close, so a close racing another returns only once the first is
    /// done (and the directory can be opened again).
    lock: Mutex<Option<open::DirLock>>,
    /// The keyspaces by name (`db::keyspace`), read at open.
    keyspaces: Mutex<keyspace::Registry>,
}

impl Drop for DbHandle {
    /// The last clone is gone without [`Db::close`]: the same close, with
    /// its errors dropped (a destructor has no caller to tell). During a
    /// panic's unwinding it does not flush, so that nothing a flush might
    /// meet turns the panic into an abort; the WALs are still synced.
    fn drop(&mut self) {
        let flush = !std::thread::panicking();
        let _ = self.shutdown(flush);
    }
}

impl DbHandle {
    /// Closes the engine (see [`Db::close`]) unless it is closed already,
    /// then releases the directory lock.
    fn shutdown(&self, flush: bool) -> Result<()> {
        if self.core.read_only {
            // Nothing to flush, sync or save, no thread to stop, no lock.
            self.core.closed.store(true, Ordering::Release);
            return Ok(());
        }
        let mut lock = self.lock.lock();
        if lock.is_none() {
            return Ok(());
        }
        let r = shutdown(&self.core, &self.background, flush);
        drop(lock.take());
        r
    }
}

/// Closes the engine: refuses new operations, flushes the memtables if
/// `flush`, stops background work (after its current job), syncs the WALs
/// and saves the lifetime counters. Every step runs whatever an earlier
/// one returned; the first error is returned.
fn shutdown(core: &Core, background: &Mutex<Vec<JoinHandle<()>>>, flush: bool) -> Result<()> {
    // From here on, every read and write gets `Closed`: a writer checks it
    // under the WAL lock, so a racing writer either took its sequence
    // before (and the flush below covers it) or gets `Closed`.
    if core.closed.swap(true, Ordering::AcqRel) {
        return Ok(());
    }
    let flushed = match flush {
        true => crate::util::fs::activity("close", || core.flush_at_close()),
        false => Ok(()),
    };
    {
        let mut st = core.state.lock();
        st.shutting_down = true;
        core.state_cv.notify_all();
    }
    for h in std::mem::take(&mut *background.lock()) {
        let _ = h.join();
    }
    let synced = (|| {
        core.closed_wals.sync_all()?;
        let mut wal = core.wal.lock();
        // Cut to its records first: nothing this engine still holds (a
        // clone, an iterator) changes the file once the lock is released.
        wal.writer.seal()?;
        wal.writer.sync()
    })();
    // Releases not yet in the manifest: written now, so that a clean
    // close retains no more than needed (a crash would retain more).
    let holds = match core.is_poisoned() || synced.is_err() {
        false => core.persist_holds(),
        true => Ok(()),
    };
    // Last, so it counts everything above; a failure is only noted.
    core.save_stats(lifetime::SaveAt::Close);
    flushed.and(synced).and(holds)
}

/// [`Db::verify_checksums`] of a read-only `Db`: every table and value
/// log of its view, through the descriptors the view holds (the writer
/// may have deleted their names since). The WALs of the view were read
/// whole, every record's checksum verified, when it was built; the
/// manifest and the WALs on disk now belong to the writer, which may be
/// appending to them.
fn verify_view_checksums(core: &Core) -> Result<CheckReport> {
    let sv = core.super_version();
    let mut report = CheckReport::default();
    for t in sv.version.all_tables() {
        report.blocks += t.table.verify_checksums()?;
        report.files += 1;
        report.bytes += t.meta.size;
    }
    for log in sv.version.value_logs.values() {
        report.blocks += log.file.verify_checksums()?;
        report.files += 1;
        report.bytes += log.file.size();
    }
    Ok(report)
}

/// Result of [`Db::verify_checksums`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckReport {
    /// Files verified.
    pub files: u64,
    /// Checksummed blocks or records verified.
    pub blocks: u64,
    /// Bytes verified.
    pub bytes: u64,
}

/// `opts` with `range` narrowing its bounds (`Db::range_opt`).
fn narrowed<K: AsRef<[u8]>, R: RangeBounds<K>>(range: R, opts: &ReadOptions) -> ReadOptions {
    let mut o = opts.clone();
    // Turn the range into [lower, upper) bounds.

    let lower = match bound_to_vec(range.start_bound()) {
        Bound::Included(k) => Some(k),
        Bound::Excluded(mut k) => {
            k.push(0);
            Some(k)
        }
        Bound::Unbounded => None,
    };
    let upper = match bound_to_vec(range.end_bound()) {
        Bound::Included(mut k) => {
            k.push(0);
            Some(k)
        }
        Bound::Excluded(k) => Some(k),
        Bound::Unbounded => None,
    };
    if let Some(l) = lower {
        o.lower_bound = Some(match o.lower_bound.take() {
            Some(x) if x > l => x,
            _ => l,
        });
    }
    if let Some(u) = upper {
        o.upper_bound = Some(match o.upper_bound.take() {
            Some(x) if x < u => x,
            _ => u,
        });
    }
    o
}

/// `opts` with its bounds turned into stored keys of the span starting
/// with `prefix` (the span's own bounds where `opts` has none). An empty
/// prefix leaves them as they are.
fn prefixed_bounds(prefix: &[u8], opts: &ReadOptions) -> ReadOptions {
    let mut o = opts.clone();
    if prefix.is_empty() {
        return o;
    }
    let with = |k: &[u8]| {
        let mut v = prefix.to_vec();
        v.extend_from_slice(k);
        v
    };
    o.lower_bound = Some(match &opts.lower_bound {
        Some(l) => with(l),
        None => prefix.to_vec(),
    });
    o.upper_bound = match &opts.upper_bound {
        Some(u) => Some(with(u)),
        None => prefix_successor(prefix),
    };
    o
}

fn check_key(key: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY_SIZE {
        return Err(Error::InvalidArgument(format!(
            "key of {} bytes exceeds the limit of {MAX_KEY_SIZE} bytes",
            key.len()
        )));
    }
    Ok(())
}

/// Refuses a default-keyspace key in the span reserved for the other
/// keyspaces (`db::keyspace`).
fn check_default_key(key: &[u8]) -> Result<()> {
    if crate::keyspace_prefix::is_reserved(key) {
        return Err(reserved_key_error());
    }
    Ok(())
}

fn reserved_key_error() -> Error {
    Error::InvalidArgument(format!(
        "keys starting with \"{}\" are reserved for keyspaces (Db::keyspace)",
        crate::keyspace_prefix::RESERVED.escape_ascii()
    ))
}

/// The checks of a batch and its options before a write (`Db::write`, a
/// transaction's commit).
fn check_write(
    batch: &WriteBatch,
    opts: &WriteOptions,
    keyspace_name: &dyn Fn(u32) -> String,
) -> Result<()> {
    if batch.default_in_reserved() {
        return Err(reserved_key_error());
    }
    batch.validate_naming(keyspace_name)?;
    if batch.approximate_size() > u32::MAX as usize / 2 {
        return Err(Error::InvalidArgument(format!(
            "write batch of {} bytes exceeds the 2 GiB limit",
            batch.approximate_size()
        )));
    }
    if opts.sync && opts.disable_wal {
        return Err(Error::InvalidArgument(
            "a sync write needs the WAL: sync and disable_wal cannot both be set".into(),
        ));
    }
    Ok(())
}

fn bound_to_vec<K: AsRef<[u8]>>(b: Bound<&K>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl Db {
    /// Opens (or creates) the database in `path`, recovering from any crash.
    ///
    /// Fails with [`Error::Locked`] if another process has it open.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let opened = crate::util::fs::activity("open", || open::open(path.as_ref(), options))?;
        let core = opened.core;
        let db = Db {
            inner: Arc::new(DbHandle {
                core: Arc::clone(&core),
                background: Mutex::new(Vec::new()),
                lock: Mutex::new(Some(opened.lock)),
                keyspaces: Mutex::new(keyspace::Registry::default()),
            }),
        };
        // Before the background threads start: their first flush or merge
        // already writes each keyspace with its own options.
        db.load_keyspaces()?;
        let loops = crate::background::thread_loops(&core);
        for (name, run) in loops {
            let spawned = std::thread::Builder::new().name(name).spawn(run);
            match spawned {
                Ok(h) => db.inner.background.lock().push(h),
                Err(e) => {
                    // Dropping `db` stops the threads already started.
                    return Err(Error::io("starting a background thread", e));
                }
            }
        }
        Ok(db)
    }

    /// Opens the database in `path` read-only, beside a process that may
    /// be writing it (RocksDB's secondary instance): reads see the
    /// database as of this call, WAL contents included, until
    /// [`Db::refresh`] catches up. It takes no lock (another process's
    /// [`Db::open`] on the directory is fine, and so is this beside it),
    /// writes and deletes nothing, and runs no background thread. Every
    /// write ([`Db::put`], [`Db::flush`], [`Db::checkpoint`], ...) fails
    /// with [`Error::ReadOnly`]. Files the writer deletes after this call
    /// stay readable (the view holds them open); one deleted while the
    /// view is being built makes it start over from the newer manifest.
    ///
    /// `options` are the reading ones (block cache, memtable kind for the
    /// replayed WALs); the row and munk caches are off. Fails with
    /// `InvalidArgument` where `path` holds no database.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let writer = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// writer.put(b"k", b"v1").unwrap();
    ///
    /// let reader = weft::Db::open_read_only(dir.path(), weft::Options::default()).unwrap();
    /// assert_eq!(reader.get(b"k").unwrap().as_deref(), Some(&b"v1"[..]));
    /// assert!(matches!(reader.put(b"k", b"x"), Err(weft::Error::ReadOnly { .. })));
    ///
    /// writer.put(b"k", b"v2").unwrap();
    /// assert_eq!(reader.get(b"k").unwrap().as_deref(), Some(&b"v1"[..]));
    /// reader.refresh().unwrap();
    /// assert_eq!(reader.get(b"k").unwrap().as_deref(), Some(&b"v2"[..]));
    /// ```
    pub fn open_read_only(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let core = crate::util::fs::activity("open", || {
            read_only::open_read_only(path.as_ref(), options)
        })?;
        let db = Db {
            inner: Arc::new(DbHandle {
                core,
                background: Mutex::new(Vec::new()),
                lock: Mutex::new(None),
                keyspaces: Mutex::new(keyspace::Registry::default()),
            }),
        };
        db.load_keyspaces()?;
        Ok(db)
    }

    /// Reads the keyspace registry (at open, and a read-only `Db`'s
    /// refresh).
    fn load_keyspaces(&self) -> Result<()> {
        let registry = keyspace::Registry::load(self)?;
        let mut current = self.inner.keyspaces.lock();
        *current = registry;
        (self.core()).set_keyspace_settings(current.settings(&self.core().options));
        Ok(())
    }

    /// The handle of keyspace `name`, creating it (one write, atomic and
    /// durable like any) if it does not exist. `"default"` is keyspace 0:
    /// the keys of the plain `Db` API. See [`Keyspace`].
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// db.keyspace("logs").unwrap().put("1", "started").unwrap();
    /// drop(db);
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let logs = db.keyspace("logs").unwrap(); // recovered by name
    /// assert_eq!(logs.get("1").unwrap().as_deref(), Some(&b"started"[..]));
    /// ```
    pub fn keyspace(&self, name: &str) -> Result<Keyspace> {
        self.core().check_open()?;
        self.inner.keyspaces.lock().open(self, name, None)
    }

    /// The handle of keyspace `name`, created with `options` (one write,
    /// atomic and durable like any) if it does not exist: its own
    /// compression per layer and blob threshold, each unset field the
    /// database's [`Options`]. A keyspace that exists with the same
    /// options is returned as it is; with other options, or `"default"`
    /// with any option set, the call fails with
    /// [`Error::InvalidArgument`] and changes nothing. The options are
    /// kept in the keyspace's registry row: recovered at open, carried by
    /// checkpoints and backups. See [`KeyspaceOptions`].
    ///
    /// ```
    /// use weft::{Compression, Db, KeyspaceOptions, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default()).unwrap();
    /// let cold = KeyspaceOptions::new().compression(Compression::ZSTD);
    /// let events = db.create_keyspace("events", cold).unwrap();
    /// events.put("e1", "login ".repeat(100)).unwrap();
    /// // The same options again: the same keyspace.
    /// assert_eq!(db.create_keyspace("events", cold).unwrap().id(), events.id());
    /// // Other options: refused.
    /// let hot = KeyspaceOptions::new().compression(Compression::None);
    /// assert!(matches!(
    ///     db.create_keyspace("events", hot),
    ///     Err(weft::Error::InvalidArgument(_))
    /// ));
    /// // `keyspace` opens it with the options it has.
    /// assert_eq!(db.keyspace("events").unwrap().options(), cold);
    /// ```
    pub fn create_keyspace(&self, name: &str, options: KeyspaceOptions) -> Result<Keyspace> {
        self.core().check_open()?;
        self.inner.keyspaces.lock().open(self, name, Some(&options))
    }

    /// The names of the keyspaces: `"default"` first, the others sorted.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// db.keyspace("b").unwrap();
    /// db.keyspace("a").unwrap();
    /// assert_eq!(db.keyspaces(), vec!["default", "a", "b"]);
    /// ```
    pub fn keyspaces(&self) -> Vec<String> {
        self.inner.keyspaces.lock().names()
    }

    /// The name of the live keyspace with id `id` ([`Keyspace::id`]):
    /// `"default"` for 0, `None` for an id never given out or dropped.
    /// With [`crate::ChangeOp::keyspace_op`], names the keyspace of a
    /// change feed's operation.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let logs = db.keyspace("logs").unwrap();
    /// assert_eq!(db.keyspace_name(logs.id()).as_deref(), Some("logs"));
    /// assert_eq!(db.keyspace_name(0).as_deref(), Some("default"));
    /// db.drop_keyspace("logs").unwrap();
    /// assert_eq!(db.keyspace_name(logs.id()), None);
    /// ```
    pub fn keyspace_name(&self, id: u32) -> Option<String> {
        self.inner.keyspaces.lock().name_of(id)
    }

    /// The name of keyspace `id` for an error message: `#id` when it has
    /// none any more, or when the registry is held (a create or drop is
    /// writing: never wait for it on an error path).
    fn keyspace_label(&self, id: u32) -> String {
        self.inner
            .keyspaces
            .try_lock()
            .and_then(|r| r.name_of(id))
            .unwrap_or_else(|| format!("#{id}"))
    }

    /// Drops keyspace `name` with one write whatever it holds: its name
    /// leaves the registry and a range delete covers its keys, which the
    /// merges reclaim in the background. Its handles fail from then on; a
    /// keyspace created again under the name starts empty. The default
    /// keyspace cannot be dropped, and an unknown name is
    /// [`Error::InvalidArgument`].
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let tmp = db.keyspace("tmp").unwrap();
    /// tmp.put("k", "v").unwrap();
    /// db.drop_keyspace("tmp").unwrap();
    /// assert!(tmp.get("k").is_err());
    /// assert_eq!(db.keyspace("tmp").unwrap().get("k").unwrap(), None);
    /// ```
    pub fn drop_keyspace(&self, name: &str) -> Result<()> {
        self.core().check_open()?;
        self.inner.keyspaces.lock().drop_keyspace(self, name)
    }

    /// Catches a read-only `Db` up with the writer: reads the manifest and
    /// WALs again and installs the new view for the reads that start
    /// after it. Iterators made before keep reading the view they began
    /// with. A snapshot taken before reads the new view at its sequence,
    /// where the writer may have compacted away versions it needed: take
    /// snapshots again after a refresh. Fails with `InvalidArgument` on a
    /// `Db` opened for writing (which is always current).
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let writer = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let reader = weft::Db::open_read_only(dir.path(), weft::Options::default()).unwrap();
    /// writer.put(b"late", b"1").unwrap();
    /// assert_eq!(reader.get(b"late").unwrap(), None);
    /// reader.refresh().unwrap();
    /// assert_eq!(reader.get(b"late").unwrap().as_deref(), Some(&b"1"[..]));
    /// ```
    pub fn refresh(&self) -> Result<()> {
        let core = self.core();
        if !core.read_only {
            return Err(Error::InvalidArgument(
                "refresh is for a database opened with Db::open_read_only".into(),
            ));
        }
        crate::util::fs::activity("refresh", || read_only::refresh(core))?;
        // Keyspaces the writer created or dropped since.
        self.load_keyspaces()
    }

    /// True when opened with [`Db::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.core().read_only
    }

    fn core(&self) -> &Core {
        &self.inner.core
    }

    /// Sets `key` to `value`.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_opt(key, value, &WriteOptions::default())
    }

    /// Sets `key` to `value` with options (e.g. `sync`).
    pub fn put_opt(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        opts: &WriteOptions,
    ) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        check_default_key(key)?;
        self.put_any(key, value, opts)
    }

    /// [`Db::put_opt`] of any stored key, the reserved span's included (a
    /// keyspace's put).
    pub(crate) fn put_any(&self, key: &[u8], value: &[u8], opts: &WriteOptions) -> Result<()> {
        let core = self.core();
        let batch = match core.logged_put_for(key, !opts.disable_wal) {
            // Compressed or not, the write path encodes the WAL's copy of a
            // large value from the plain batch, which fills the memtable.
            Some((from, crate::Compression::None)) => {
                WriteBatch::of_put_logged_from(key, value, from)
            }
            _ => WriteBatch::of_put(key, value),
        };
        self.write(batch, opts)
    }

    /// Deletes `key` (a no-op if absent).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_opt(key, &WriteOptions::default())
    }

    /// Deletes `key` with options.
    pub fn delete_opt(&self, key: impl AsRef<[u8]>, opts: &WriteOptions) -> Result<()> {
        check_default_key(key.as_ref())?;
        self.write(WriteBatch::of_delete(key.as_ref()), opts)
    }

    /// Deletes every key in `[start, end)` with one write, however many
    /// keys the range holds: a range tombstone (DESIGN §1.2.1), honoured
    /// by gets, cursors and snapshots from its sequence on; merges drop
    /// the versions it covers, and it is dropped once none is left. Keys
    /// written after it are unaffected. An empty range (`start >= end`)
    /// deletes nothing; `start > end` is [`Error::InvalidArgument`], as in
    /// RocksDB.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// for i in 0..100u32 { db.put(format!("user:{i:03}"), "x").unwrap(); }
    /// db.put("visits", "7").unwrap();
    /// db.delete_range("user:", "user;").unwrap(); // ';' follows ':'
    /// assert_eq!(db.get("user:042").unwrap(), None);
    /// assert_eq!(db.range::<&str, _>(..).unwrap().count(), 1);
    /// ```
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        self.delete_range_opt(start, end, &WriteOptions::default())
    }

    /// [`Db::delete_range`] with options.
    pub fn delete_range_opt(
        &self,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
        opts: &WriteOptions,
    ) -> Result<()> {
        let batch = WriteBatch::of_delete_range(start.as_ref(), end.as_ref());
        self.write(batch, opts)
    }

    /// Applies `batch` atomically: after any crash, all of it or none.
    pub fn write(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<()> {
        check_write(&batch, opts, &|id| self.keyspace_label(id))?;
        let batch = batch.with_reserved_cut()?;
        self.core()
            .write(batch, opts.sync, !opts.disable_wal, false)
    }

    /// The latest value of `key`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_opt(key, &ReadOptions::new())
    }

    /// The value of `key` under `opts` (e.g. at a snapshot).
    pub fn get_opt(&self, key: impl AsRef<[u8]>, opts: &ReadOptions) -> Result<Option<Vec<u8>>> {
        let key = key.as_ref();
        if crate::keyspace_prefix::is_reserved(key) {
            // Other keyspaces' keys are not the default keyspace's.
            check_key(key)?;
            self.core().check_open()?;
            return Ok(None);
        }
        self.get_any(key, opts)
    }

    /// [`Db::get_opt`] of any stored key (a keyspace's get).
    pub(crate) fn get_any(&self, key: &[u8], opts: &ReadOptions) -> Result<Option<Vec<u8>>> {
        check_key(key)?;
        let core = self.core();
        core.check_open()?;
        // Enter as a reader, pin, then read the sequence: the read watermark
        // stays at or below it, and every write acknowledged before this
        // call is in the pinned memtables or tables. A write that lands in
        // a memtable rotated in after the pin is concurrent with this read;
        // missing it still leaves a prefix of the history (a rotation cuts
        // the sequence order), never a hole.
        let _reading = core.read_tracker.enter();
        let fill_bound = self.row_cache_fill_bound(opts);
        let sv = core.pin_super_version();
        if fill_bound.is_some() {
            // The unit tests' window between the pin and the sequence.
            crate::fault::pause_point("get.pinned", &core.dir);
        }
        let seq = self.read_sequence(opts);
        self.get_pinned(&sv, key, seq, fill_bound)
    }

    /// The latest values of `keys`, in order, all read at one sequence.
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Vec<Result<Option<Vec<u8>>>> {
        self.multi_get_opt(keys, &ReadOptions::new())
    }

    /// The values of `keys` under `opts`, in order, all read at one
    /// sequence (a consistent view, as at a snapshot). An invalid key fails
    /// only its own entry.
    ///
    /// Cheaper than one `get` each: the memtables and tables are pinned
    /// once, and the memtable lookups of all keys start loading their
    /// memory before the first one is answered (`Memtable::prefetch`), so
    /// their cache misses overlap instead of following one another.
    pub fn multi_get_opt<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        opts: &ReadOptions,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        self.multi_get_in(keys, opts, true)
    }

    /// [`Db::multi_get`] of stored keys of any keyspace (a keyspace's).
    pub(crate) fn multi_get_any(&self, keys: &[&[u8]]) -> Vec<Result<Option<Vec<u8>>>> {
        self.multi_get_in(keys, &ReadOptions::new(), false)
    }

    /// `multi_get_opt`; `default_only` makes keys of the reserved span miss.
    fn multi_get_in<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        opts: &ReadOptions,
        default_only: bool,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        let core = self.core();
        if core.check_open().is_err() {
            // Closed and poisoned are final: every key gets the same error.
            return keys
                .iter()
                .map(|_| core.check_open().map(|()| None))
                .collect();
        }
        let _reading = core.read_tracker.enter();
        let fill_bound = self.row_cache_fill_bound(opts);
        let sv = core.pin_super_version();
        let seq = self.read_sequence(opts);
        for key in keys {
            sv.mem.prefetch(key.as_ref());
        }
        keys.iter()
            .map(|key| {
                let key = key.as_ref();
                check_key(key)?;
                if default_only && crate::keyspace_prefix::is_reserved(key) {
                    return Ok(None);
                }
                self.get_pinned(&sv, key, seq, fill_bound)
            })
            .collect()
    }

    /// The sequence up to which a get's pinned state holds every write,
    /// taken *before* the pin: the row cache takes a value the get read
    /// only if no write to its key came after it (`cache::row_cache`).
    /// The read sequence itself, loaded after the pin, may be past a write
    /// that went to a memtable rotated in after the pin and is missing from
    /// the pinned state. A snapshot's sequence serves as it is: its writes
    /// were all published before the snapshot was taken. `None` when the
    /// row cache is off or the read asks not to fill caches.
    fn row_cache_fill_bound(&self, opts: &ReadOptions) -> Option<SequenceNumber> {
        if self.core().row_cache.is_none() || !opts.fill_cache {
            return None;
        }
        Some(self.read_sequence(opts))
    }

    /// The value of `key` at `seq` in the pinned `sv`: the memtables, then
    /// the row cache, then storage. A value read from storage is offered to
    /// the row cache when `fill_bound` is set (see
    /// [`Db::row_cache_fill_bound`]).
    fn get_pinned(
        &self,
        sv: &SuperVersion,
        key: &[u8],
        seq: SequenceNumber,
        fill_bound: Option<SequenceNumber>,
    ) -> Result<Option<Vec<u8>>> {
        let core = self.core();
        let found = |kind: ValueKind, v: &[u8]| kind.is_value().then(|| v.to_vec());
        let reads = &core.reads;
        // Acquire: a get whose sequence covers a range delete sees the
        // flag its writer set before publishing.
        let range_deletes = core.range_deletes_seen.load(Ordering::Acquire);
        let range_deleted = |found| range_deletes && sv.range_deleted(key, found, seq);
        for m in std::iter::once(&sv.mem).chain(&sv.imms) {
            if let Some(f) = m.get(key, seq) {
                reads.memtable_hits.add(1);
                if range_deleted(f.seq) {
                    return Ok(None);
                }
                return Ok(found(f.kind, f.value));
            }
        }
        // The row cache serves only partitions without a munk standing for
        // this version (EvenDB: munk-less chunks): a munk already holds
        // the value, and a copy in the row cache would be memory spent
        // twice. Skipping it is always safe: writes refresh entries
        // whether or not gets use them (a range delete drops every entry
        // in its range before it is visible, so no entry needs the check
        // below).
        let rows = core
            .row_cache
            .as_ref()
            .filter(|_| !(core.munks_on() && sv.version.munk_covers(key)));
        if let Some(v) = rows.and_then(|rows| rows.get(key, seq)) {
            return Ok(Some(v));
        }
        Ok(
            match sv
                .version
                .get(key, seq, reads, core.cache.disk_reads(), core.munks_on())?
            {
                Some((found_seq, ValueKind::Put, _)) if range_deleted(found_seq) => None,
                Some((found_seq, ValueKind::Put, v)) => {
                    if let (Some(rows), Some(bound)) = (rows, fill_bound) {
                        // The unit tests' window between the read and the
                        // fill (`cache::row_cache`'s race tests).
                        crate::fault::pause_point("get.fill", &core.dir);
                        // `found_seq <= seq`, but it may exceed the bound
                        // (a write after the bound, which its stripe
                        // would refuse anyway).
                        if found_seq <= bound {
                            rows.fill(key, &v, found_seq, bound);
                        }
                    }
                    Some(v)
                }
                _ => None,
            },
        )
    }

    fn read_sequence(&self, opts: &ReadOptions) -> SequenceNumber {
        match &opts.snapshot {
            Some(s) => s.sequence(),
            None => self.core().visible(),
        }
    }

    /// Pins the current state: reads with this snapshot see every write
    /// acknowledged before this call, none that started after it returned,
    /// and of the writes in flight meanwhile a prefix (sequences become
    /// visible in order).
    pub fn snapshot(&self) -> Snapshot {
        let core = self.core();
        core.snapshots.acquire_with(|| core.visible())
    }

    /// A cursor over the database at one snapshot (an atomic scan), bounded
    /// by `opts.lower_bound` / `opts.upper_bound`.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// for k in ["a", "b", "c"] { db.put(k, k.to_uppercase()).unwrap(); }
    /// let mut it = db.iter(&weft::ReadOptions::new().lower_bound("b")).unwrap();
    /// it.seek_to_last().unwrap();
    /// assert_eq!(it.key(), b"c");
    /// it.prev().unwrap();
    /// assert_eq!(it.value(), b"B");
    /// it.prev().unwrap();
    /// assert!(!it.valid());
    /// ```
    pub fn iter(&self, opts: &ReadOptions) -> Result<DbIterator> {
        self.core().check_open()?;
        self.core().note_scan();
        // Pin, enter as a reader, then read the sequence (the order that
        // matters: entered before the sequence is read, see `get_opt`).
        let reading = ReadTracker::enter_owned(self.core().super_version());
        let seq = self.read_sequence(opts);
        Ok(self.iter_at(opts, seq, reading))
    }

    fn iter_at(
        &self,
        opts: &ReadOptions,
        seq: SequenceNumber,
        reading: OwnedReadGuard<Arc<SuperVersion>>,
    ) -> DbIterator {
        let sv = reading.holder();
        let mut children = Vec::new();
        for m in std::iter::once(&sv.mem).chain(sv.imms.iter()) {
            m.prepare_scan(seq);
            children.push(VisibleIter::new(Arc::clone(m).iter(), seq));
        }
        let core = self.core();
        let munk_scans = core.munks_on().then_some(&core.reads.munk_scans);
        for it in sv.version.iters(opts.fill_cache, munk_scans) {
            children.push(VisibleIter::new(it, seq));
        }
        let merged = MergingIter::new(children);
        DbIterator::new(
            merged,
            seq,
            opts.lower_bound.clone(),
            opts.upper_bound.clone(),
            ReadPurpose::Scan {
                fill_cache: opts.fill_cache,
            },
            reading,
            self.core().munks_on(),
        )
    }

    fn range_from(&self, opts: &ReadOptions) -> Result<Range> {
        self.range_from_in(&[], opts)
    }

    /// [`Db::range_from`] over the keys starting with `prefix` (a
    /// keyspace's span; empty: the default keyspace), `opts`' bounds
    /// taken as keys after the prefix, keys returned without it.
    fn range_from_in(&self, prefix: &[u8], opts: &ReadOptions) -> Result<Range> {
        self.core().check_open()?;
        self.core().note_scan();
        let sv = self.core().super_version();
        let front_reading = ReadTracker::enter_owned(Arc::clone(&sv));
        let back_reading = ReadTracker::enter_owned(sv);
        let seq = self.read_sequence(opts);
        let stored = prefixed_bounds(prefix, opts);
        let front = self.iter_at(&stored, seq, front_reading).within(prefix);
        let back = self.iter_at(&stored, seq, back_reading).within(prefix);
        Ok(Range::new(front, back))
    }

    /// A cursor over the keys starting with `prefix` (see `range_from_in`).
    pub(crate) fn iter_in(&self, prefix: &[u8], opts: &ReadOptions) -> Result<DbIterator> {
        self.core().check_open()?;
        self.core().note_scan();
        let reading = ReadTracker::enter_owned(self.core().super_version());
        let seq = self.read_sequence(opts);
        let stored = prefixed_bounds(prefix, opts);
        Ok(self.iter_at(&stored, seq, reading).within(prefix))
    }

    /// Every pair under `prefix` (keys without it), read without counting
    /// as a scan: the keyspace registry read at open, which must not nudge
    /// the scan-driven consolidation (`Options::scan_merge_limit`).
    pub(crate) fn read_span_uncounted(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.core().check_open()?;
        let opts = ReadOptions::new();
        let reading = ReadTracker::enter_owned(self.core().super_version());
        let seq = self.read_sequence(&opts);
        let stored = prefixed_bounds(prefix, &opts);
        let mut it = self.iter_at(&stored, seq, reading).within(prefix);
        let mut rows = Vec::new();
        it.seek_to_first()?;
        while it.valid() {
            rows.push((it.key().to_vec(), it.value().to_vec()));
            it.next()?;
        }
        Ok(rows)
    }

    /// [`Db::range_opt`] over the keys starting with `prefix`.
    pub(crate) fn range_in<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        prefix: &[u8],
        range: R,
        opts: &ReadOptions,
    ) -> Result<Range> {
        let o = narrowed(range, opts);
        self.range_from_in(prefix, &o)
    }

    /// Pairs with keys in `range`, in key order; `.rev()` for reverse.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// for k in ["a", "b", "c", "d"] { db.put(k, "v").unwrap(); }
    /// let keys: Vec<Vec<u8>> = db.range("b".."d").unwrap().rev().map(|r| r.unwrap().0).collect();
    /// assert_eq!(keys, vec![b"c".to_vec(), b"b".to_vec()]);
    /// ```
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<Range> {
        self.range_opt(range, &ReadOptions::new())
    }

    /// Like [`Db::range`] with read options (e.g. a snapshot); the range
    /// narrows any bounds set in `opts`.
    pub fn range_opt<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        range: R,
        opts: &ReadOptions,
    ) -> Result<Range> {
        let o = narrowed(range, opts);
        self.range_from(&o)
    }

    /// Pairs whose key starts with `prefix`, in key order.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Result<Range> {
        let p = prefix.as_ref();
        let opts = ReadOptions {
            lower_bound: Some(p.to_vec()),
            upper_bound: prefix_successor(p),
            ..ReadOptions::new()
        };
        self.range_from(&opts)
    }

    /// Writes the memtables to tables and waits until they are durable there.
    pub fn flush(&self) -> Result<()> {
        self.core().check_not_read_only("flush")?;
        let core = self.core();
        core.write(WriteBatch::new(), false, true, true)?;
        let mut st = core.state.lock();
        let target = st.imm_created;
        while st.imm_flushed < target {
            core.check_writable()?;
            core.state_cv.wait(&mut st);
        }
        Ok(())
    }

    /// Makes every write acknowledged before this call durable (fdatasync of
    /// the WAL), as if each had been written with `sync = true`, without
    /// holding up writers: the sync runs on a second handle of the file while
    /// writers keep appending. Redis's `appendfsync everysec` maps
    /// onto calling this once a second. A failure poisons the database.
    pub fn sync_wal(&self) -> Result<()> {
        self.core().check_not_read_only("sync_wal")?;
        let core = self.core();
        core.check_writable()?;
        // Closed WALs first, deferred records written, a failure poisons:
        // the same sync sync writers share.
        core.sync_wal_all()
    }

    /// Hands the WAL records that [`Options::manual_wal_flush`] left in the
    /// buffer to the OS, in one `write`: the writes acknowledged so far
    /// survive a process crash once this returns (cheap when nothing waits).
    /// A failure poisons the database, as any failed WAL write does.
    pub fn flush_wal(&self) -> Result<()> {
        self.core().check_not_read_only("flush_wal")?;
        let core = self.core();
        let mut wal = core.wal.lock();
        if !wal.writer.has_deferred() {
            return Ok(());
        }
        core.check_writable()?;
        let r = wal.writer.flush_buffer();
        drop(wal); // before `poison`, which takes the state lock
        r.inspect_err(|e| core.poison(e))
    }

    /// Flushes, then merges every partition's UnsortedStore into its
    /// SortedStore, and waits.
    pub fn compact(&self) -> Result<()> {
        self.core().check_not_read_only("compact")?;
        self.flush()?;
        let core = self.core();
        let mut st = core.state.lock();
        let ids: Vec<u64> = st.version.partitions.iter().map(|p| p.id).collect();
        let requested_at = st.next_file_number;
        st.manual_merges
            .extend(ids.into_iter().map(|id| (id, requested_at)));
        core.state_cv.notify_all();
        while !st.manual_merges.is_empty() {
            core.check_writable()?;
            core.state_cv.wait(&mut st);
        }
        Ok(())
    }

    /// Verifies every checksum of every live file: tables, the manifest and
    /// the WALs. Returns what was checked; the first failure is an
    /// `Error::Corruption` naming file and offset.
    pub fn verify_checksums(&self) -> Result<CheckReport> {
        let core = self.core();
        core.check_open()?;
        if core.read_only {
            return verify_view_checksums(core);
        }
        // The manifest and the active WAL are appended to while this runs:
        // each is read only up to the bytes its writer had written when
        // listed (the manifest lock holds off manifest appends, the WAL
        // lock log appends; jobs and rotation take them in this order too).
        let (sv, manifest, wal_numbers, active_wal_size) = {
            let manifest = core.manifest.lock();
            let st = core.state.lock();
            let mut wals: Vec<u64> = st.imms.iter().map(|i| i.wal_number).collect();
            wals.push(st.mem_wal);
            let active_wal_size = core.wal.lock().writer.size_in_file();
            let manifest = (manifest.number(), manifest.size());
            // WALs kept only for the change feed (those that are value
            // logs too are checked as value logs).
            let retained: Vec<(u64, u64)> = (st.feed.retained.iter())
                .filter(|(n, _)| !st.version.value_logs.contains_key(n))
                .map(|(n, w)| (*n, w.size))
                .collect();
            let wals = (wals, retained);
            (core.super_version(), manifest, wals, active_wal_size)
        };
        let (wal_numbers, retained_wals) = wal_numbers;
        let (manifest_number, manifest_size) = manifest;
        let mut report = CheckReport::default();
        for t in sv.version.all_tables() {
            report.blocks += t.table.verify_checksums()?;
            report.files += 1;
            report.bytes += t.meta.size;
        }
        for log in sv.version.value_logs.values() {
            report.blocks += log.file.verify_checksums()?;
            report.files += 1;
            report.bytes += log.file.size();
        }
        let mut logs = vec![(
            crate::filename::manifest_path(&core.dir, manifest_number),
            manifest_size,
        )];
        // A retained WAL released since it was listed is gone: skipped
        // below as a flushed one is.
        for (n, size) in retained_wals {
            logs.push((crate::filename::wal_path(&core.dir, n), size));
        }
        let n = wal_numbers.len();
        for (i, w) in wal_numbers.into_iter().enumerate() {
            // WALs before the active one are closed, whole files.
            let limit = if i + 1 == n {
                active_wal_size
            } else {
                u64::MAX
            };
            logs.push((crate::filename::wal_path(&core.dir, w), limit));
        }
        // Every record inside a limit is whole: no torn tail is expected
        // (a recovered WAL's is cut off, and writing resumes in a new one).
        for (path, limit) in logs {
            let mut r = match LogReader::open_prefix(&*core.fs, &path, limit) {
                Ok(r) => r,
                // A WAL listed above whose memtable has been flushed since:
                // deleted, its writes now in a table newer than this check.
                Err(Error::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound
                        && !path.ends_with(crate::filename::manifest_name(manifest_number)) =>
                {
                    continue
                }
                Err(e) => return Err(e),
            };
            loop {
                match r.read()? {
                    LogRead::Record { payload, .. } => {
                        report.blocks += 1;
                        report.bytes += payload.len() as u64;
                    }
                    LogRead::End => break,
                    LogRead::Bad { offset, reason, .. } => {
                        return Err(Error::corruption(&path, offset, reason))
                    }
                }
            }
            report.files += 1;
        }
        Ok(report)
    }

    /// Engine statistics: the counters since this open, and in
    /// [`Stats::lifetime`] the same counters over every open of the
    /// database (kept in its `STATS` file).
    pub fn stats(&self) -> Stats {
        let core = self.core();
        let sv = core.super_version();
        let c = &core.counters;
        let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let session = core.session_counters();
        let lifetime = core.lifetime_stats(&session);
        let (feed_holds, feed_retained_bytes) = core.feed_stats();
        Stats {
            sequence: core.visible(),
            memtable_kind: core.options.memtable.name().to_string(),
            active_memtable_bytes: sv.mem.approximate_memory() as u64,
            immutable_memtables: sv.imms.len(),
            immutable_memtable_bytes: sv.imms.iter().map(|m| m.approximate_memory() as u64).sum(),
            live_snapshots: core.snapshots.len(),
            read_watermark: core.read_tracker.watermark(),
            partitions: sv
                .version
                .partitions
                .iter()
                .map(|p| {
                    let (index_entries, index_bytes) = {
                        let index = p.index.load();
                        (index.entries() as u64, index.memory_usage() as u64)
                    };
                    let (mut n, mut bytes, mut garbage) = (0, 0, 0);
                    for (_, l) in sv.version.logs_of(p.id) {
                        n += 1;
                        bytes += l.file.size();
                        garbage += l.garbage;
                    }
                    PartitionStats {
                        id: p.id,
                        lower: p.lower.clone(),
                        upper: p.upper.clone(),
                        unsorted_tables: p.unsorted.len(),
                        unsorted_bytes: p.unsorted_bytes(),
                        sorted_tables: p.sorted.len(),
                        sorted_bytes: p.sorted_bytes(),
                        value_logs: n,
                        value_log_bytes: bytes,
                        value_log_garbage_bytes: garbage,
                        size_bytes: sv.version.partition_bytes(p),
                        index_entries,
                        index_bytes,
                    }
                })
                .collect(),
            user_bytes_written: session.user_bytes_written,
            wal_bytes_written: session.wal_bytes_written,
            flush_bytes_written: session.flush_bytes_written,
            merge_bytes_written: session.merge_bytes_written,
            value_log_bytes_written: session.value_log_bytes_written,
            values_kept_in_wal_bytes: session.values_kept_in_wal_bytes,
            split_bytes_written: session.split_bytes_written,
            consolidation_bytes_written: session.consolidation_bytes_written,
            manifest_bytes_written: session.manifest_bytes_written,
            index_checkpoint_bytes_written: session.index_checkpoint_bytes_written,
            get_bytes_read: session.get_bytes_read,
            scan_bytes_read: session.scan_bytes_read,
            background_bytes_read: session.background_bytes_read,
            write_amplification: session.write_amplification,
            block_cache: core.cache.stats(),
            row_cache: core
                .row_cache
                .as_ref()
                .map(|rows| rows.stats())
                .unwrap_or_default(),
            munks: {
                let installed: Vec<u64> = sv
                    .version
                    .partitions
                    .iter()
                    .filter_map(|p| p.munk.load().map(|m| m.image.bytes()))
                    .collect();
                MunkStats {
                    capacity: core.options.munk_cache_size as u64,
                    munks: installed.len() as u64,
                    bytes: installed.iter().sum(),
                    resident_bytes: core.munk_bytes.load(std::sync::atomic::Ordering::Relaxed),
                    hits: core.reads.munk_hits.load(),
                    scans: core.reads.munk_scans.load(),
                    loads: load(&c.munk_loads),
                    rebalances: load(&c.munk_rebalances),
                    relabels: load(&c.munk_relabels),
                    evictions: load(&c.munk_evictions),
                    build_bytes: load(&c.munk_build_bytes),
                }
            },
            mapped_tables: sv
                .version
                .all_tables()
                .filter(|t| t.table.is_mapped())
                .count() as u64,
            tables: sv.version.all_tables().count() as u64,
            flushes: session.flushes,
            merges: session.merges,
            gc_bytes_written: session.gc_bytes_written,
            gcs: session.gcs,
            compaction_filter_removed: session.compaction_filter_removed,
            range_deleted_versions: session.range_deleted_versions,
            range_tombstones: sv.version.range_tombstones.len() as u64,
            splits: session.splits,
            consolidations: session.consolidations,
            write_slowdowns: session.write_slowdowns,
            write_stalls: session.write_stalls,
            write_stall_micros: session.write_stall_micros,
            wal_tail_truncated_bytes: session.wal_tail_truncated_bytes,
            partition_size: core.options.partition_size,
            disk: core.disk_usage(),
            live_bytes_estimate: live_bytes_estimate(&sv.version),
            feed_holds,
            feed_retained_bytes,
            reads: session.reads,
            background_jobs: session.background_jobs,
            lifetime,
        }
    }

    /// Keeps every write batch from sequence `from_seq` on readable in the
    /// change feed ([`Db::changes_from`]) until [`Db::release_changes`] or
    /// [`Db::drop_hold`]: the WALs that log them are retained, on disk,
    /// across restarts and crashes. The hold is durable when this returns
    /// (a manifest edit). Calling it again with the same `name` moves the
    /// hold, lower too, as long as the feed still holds `from_seq`.
    ///
    /// A consumer that never releases grows the disk by every batch
    /// written: [`Stats::feed_holds`] shows what each hold retains.
    ///
    /// Fails with [`Error::ChangesReleased`] when batches from `from_seq`
    /// on are no longer all held, with [`Error::InvalidArgument`] when
    /// `from_seq` is past the next sequence to be written or `name` is
    /// empty or longer than 255 bytes.
    ///
    /// ```
    /// use weft::{ChangeOp, Db, FeedLimit, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default()).unwrap();
    /// db.hold_changes("replica", 1).unwrap();
    /// db.put("k", "v1").unwrap();
    /// db.flush().unwrap(); // the WAL is retained, not deleted
    /// db.delete("k").unwrap();
    /// let groups: Vec<_> = db
    ///     .changes_from(1, FeedLimit::Visible)
    ///     .unwrap()
    ///     .collect::<Result<_, _>>()
    ///     .unwrap();
    /// assert_eq!(groups.len(), 2);
    /// assert_eq!(groups[0].first_seq(), 1);
    /// assert_eq!(
    ///     groups[1].ops(),
    ///     &[ChangeOp::Delete { key: b"k".to_vec() }]
    /// );
    /// db.release_changes("replica", groups[1].last_seq()).unwrap();
    /// ```
    pub fn hold_changes(&self, name: &str, from_seq: u64) -> Result<()> {
        self.core().check_not_read_only("hold_changes")?;
        self.core().hold_changes(name, from_seq)
    }

    /// Tells the change feed that the holder `name` has consumed every
    /// batch through `through_seq`: its hold moves to `through_seq + 1`
    /// (never back), and WALs that no hold needs any more are deleted.
    ///
    /// The move is made in memory at once and reaches the manifest with
    /// the next manifest edit, or at once if it lets a WAL go (before the
    /// WAL is deleted), or at close: after a crash the hold may be back
    /// where it was, so the feed then holds more than needed, never less.
    /// A consumer reading with [`FeedLimit::Visible`] should not release
    /// past the durable sequence if a machine crash matters to it: the
    /// writes it released may be lost, and their sequences handed out
    /// again (a hold past the recovered history is moved back to its end
    /// at open, so the new writes are not skipped).
    ///
    /// Fails with [`Error::InvalidArgument`] for an unknown hold or a
    /// sequence past the visible one.
    pub fn release_changes(&self, name: &str, through_seq: u64) -> Result<()> {
        self.core().check_not_read_only("release_changes")?;
        self.core().release_changes(name, through_seq)
    }

    /// Removes the hold `name` (durably), letting go of the WALs only it
    /// needed. Fails with [`Error::InvalidArgument`] for an unknown hold.
    pub fn drop_hold(&self, name: &str) -> Result<()> {
        self.core().check_not_read_only("drop_hold")?;
        self.core().drop_hold(name)
    }

    /// The committed write batches from sequence `seq` on, in sequence
    /// order, up to `limit` as it is now (see [`FeedLimit`]; a tailing
    /// reader asks again from one past the last sequence it read).
    ///
    /// Each [`ChangeGroup`] is one batch as it was committed, with its
    /// first sequence and its operations (a value logged in the WAL record
    /// under `Options::values_in_wal` is read back as the value). If `seq`
    /// falls inside a batch, the first group holds only that batch's
    /// operations from `seq` on. Batches written with
    /// `WriteOptions::disable_wal` are not in the feed: their sequences
    /// are gaps, which the groups' sequences show.
    ///
    /// Batches stay readable while a hold ([`Db::hold_changes`]) needs
    /// them; without one, only those whose WAL has not been deleted yet
    /// (flushed memtables' WALs go). A `seq` below the oldest batch the
    /// feed still holds is [`Error::ChangesReleased`], and so is a WAL
    /// deleted while the feed reads (no hold kept it). After a crash the
    /// feed serves exactly what recovery replayed.
    ///
    /// ```
    /// use weft::{ChangeOp, Db, FeedLimit, Options, WriteBatch, WriteOptions};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default()).unwrap();
    /// let mut batch = WriteBatch::new();
    /// batch.put("a", "1").delete("b");
    /// db.write(batch, &WriteOptions::new().sync(true)).unwrap();
    /// let mut feed = db.changes_from(1, FeedLimit::Durable).unwrap();
    /// let group = feed.next().unwrap().unwrap();
    /// assert_eq!((group.first_seq(), group.last_seq()), (1, 2));
    /// assert_eq!(group.ops()[0], ChangeOp::Put { key: b"a".to_vec(), value: b"1".to_vec() });
    /// assert!(feed.next().is_none());
    /// ```
    pub fn changes_from(&self, seq: u64, limit: FeedLimit) -> Result<ChangeFeed> {
        self.core().check_not_read_only("changes_from")?;
        self.inner.core.changes_from(seq, limit)
    }

    /// The last sequence visible to reads: what a change feed made now
    /// with [`FeedLimit::Visible`] reads up to (a replication offset). One
    /// atomic load.
    pub fn visible_sequence(&self) -> u64 {
        self.core().visible()
    }

    /// Bytes of flushed WALs kept for the change feed's holds
    /// ([`crate::Stats::feed_retained_bytes`], without gathering the rest
    /// of the statistics).
    pub fn feed_retained_bytes(&self) -> u64 {
        self.core().feed_stats().1
    }

    /// Makes a consistent copy of the database in the new directory `dest`,
    /// openable with [`Db::open`], without stopping writers: the database
    /// as it was at one sequence (every logged batch up to
    /// [`CheckpointInfo::sequence`], none after it). Tables, value logs and
    /// index checkpoints are hard-linked where `dest` is on the same file
    /// system (immutable files: the two databases then share their bytes,
    /// and each deletes only its own names), copied otherwise; the WAL
    /// holding the latest writes is copied up to that sequence, and a
    /// manifest is written fresh for the copy.
    ///
    /// The copy is durable when this returns (every file and directory
    /// entry fsynced), and it appears under `dest` whole or not at all: it
    /// is built in a hidden temporary directory beside `dest` and renamed.
    /// `dest` must not exist or be an empty directory
    /// ([`Error::InvalidArgument`] otherwise); missing parents are created.
    ///
    /// Writes made with `WriteOptions::disable_wal` and not yet flushed are
    /// not in the copy (as after a crash); change-feed holds are not copied.
    ///
    /// ```
    /// use weft::{Db, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path().join("db"), Options::default()).unwrap();
    /// db.put("k", "v1").unwrap();
    /// let info = db.checkpoint(dir.path().join("copy")).unwrap();
    /// db.put("k", "v2").unwrap(); // after the checkpoint: not in the copy
    ///
    /// let copy = Db::open(dir.path().join("copy"), Options::default()).unwrap();
    /// assert_eq!(copy.get("k").unwrap().as_deref(), Some(&b"v1"[..]));
    /// assert_eq!(copy.stats().sequence, info.sequence);
    /// ```
    pub fn checkpoint(&self, dest: impl AsRef<Path>) -> Result<CheckpointInfo> {
        self.core().check_not_read_only("checkpoint")?;
        let core = self.core();
        crate::util::fs::activity("checkpoint", || checkpoint::checkpoint(core, dest.as_ref()))
    }

    /// The database's files as of one sequence, pinned and held open: what
    /// a backup stores (`crate::backup`).
    pub(crate) fn checkpoint_source(&self) -> Result<CheckpointSource> {
        self.core().check_not_read_only("backup")?;
        CheckpointSource::capture(self.core())
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.core().dir
    }

    /// Closes the database for every clone: [`Db::close_with`] with
    /// [`CloseOptions::default()`], which flushes the memtables.
    ///
    /// What survives what, writes acknowledged before the close began:
    ///
    /// | write | clean close | process killed | machine crash |
    /// |---|---|---|---|
    /// | default (logged, no `sync`) | kept | kept | kept once a sync covered it: a `sync` write or [`Db::sync_wal`] after it, a flush, or a clean close |
    /// | `sync` | kept | kept | kept |
    /// | [`WriteOptions::disable_wal`] | kept (flushed); lost with `flush(false)` | lost unless flushed before | lost unless flushed before |
    /// | [`Options::manual_wal_flush`] | kept | kept once handed to the OS ([`Db::flush_wal`] etc.) | as default, once handed to the OS |
    ///
    /// A close runs to the end whatever a step returns, and returns the first
    /// error: a flush that fails (or a database already poisoned, which
    /// runs no background work, with writes in its memtable) leaves the
    /// logged writes to the WAL, synced, and loses the unlogged ones. Writes
    /// racing the close either complete before it (and are covered) or get
    /// [`Error::Closed`].
    ///
    /// Once it returns, the directory lock is released, and the directory
    /// may be opened again, here or in another process, even while other
    /// clones of this `Db` (or iterators, snapshots and change feeds made
    /// from it) are still alive: from the moment the close begins, their
    /// calls get [`Error::Closed`], and nothing they hold changes the
    /// files the reopened database uses. Iterators made before keep reading
    /// what they pinned.
    /// A second close (of any clone) waits for the first and returns
    /// `Ok(())`.
    ///
    /// Dropping the last clone without a close does the same close with the
    /// default options, and drops its errors (call `close` to see them); during
    /// a panic it syncs the WALs but does not flush.
    ///
    /// ```
    /// use weft::{Db, Error, Options, WriteOptions};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default()).unwrap();
    /// db.put_opt("k", "v", &WriteOptions::new().disable_wal(true)).unwrap();
    /// let clone = db.clone();
    /// db.close().unwrap(); // flushes "k" into a table
    /// assert!(matches!(clone.get("k"), Err(Error::Closed)));
    /// let db = Db::open(dir.path(), Options::default()).unwrap(); // clone still alive
    /// assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"v"[..]));
    /// ```
    pub fn close(self) -> Result<()> {
        self.close_with(&CloseOptions::default())
    }

    /// Closes the database for every clone as `opts` says (see
    /// [`Db::close`] and [`CloseOptions`]): refuses new reads and writes,
    /// flushes the memtables unless `opts.flush` is off, lets the
    /// background threads finish their current job, fdatasyncs the WALs,
    /// saves the lifetime counters ([`Stats::lifetime`]; a failed save is
    /// not an error of the close), and releases the directory lock.
    pub fn close_with(self, opts: &CloseOptions) -> Result<()> {
        self.inner.shutdown(opts.flush)
    }
}

/// [`Stats::live_bytes_estimate`] of `version`: each value log's bytes less
/// its garbage, once however many partitions share it, plus every table.
fn live_bytes_estimate(version: &crate::store::Version) -> u64 {
    let logs: u64 = version
        .value_logs
        .values()
        .map(|l| l.file.size().saturating_sub(l.garbage))
        .sum();
    let tables: u64 = version.all_tables().map(|t| t.meta.size).sum();
    logs + tables
}

#[cfg(test)]
mod tests;
