//! Optimistic transactions: [`Transaction`], begun by [`Db::transaction`].
//!
//! A transaction reads at a snapshot taken at its begin, buffers its writes
//! in an ordered map (an indexed write batch: its own reads see them, merged
//! over the snapshot), and writes nothing until [`Transaction::commit`].
//! The commit checks that no key it tracked — every key it wrote and every
//! key read with [`Transaction::get_for_update`] — got a version newer than
//! the snapshot, and appends the writes as one batch, the check and the
//! append atomic with respect to every other write (`db::conflict`, and
//! `docs/DESIGN.md` §4.12). No lock is held while the transaction runs:
//! conflicting transactions are found at commit, and the loser retries
//! ([`Db::transact`]).
//!
//! Keyspaces: the `_in` methods ([`Transaction::put_in`],
//! [`Transaction::get_in`], ...) take a [`Keyspace`] handle. The pending
//! writes and the tracked keys are held as stored keys (a keyspace's
//! prefix, then the key; `db::keyspace`), so the same user key in two
//! keyspaces is two keys, for reads of the transaction's own writes and for
//! conflicts alike, and one commit is one batch whatever keyspaces it
//! spans.

use std::collections::BTreeMap;
use std::iter::Peekable;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use super::conflict::CommitCheck;
use super::{bound_to_vec, check_default_key, check_key, check_write, Db, Keyspace, Range};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::key::MAX_VALUE_SIZE;
use crate::keyspace_prefix::is_reserved;
use crate::options::prefix_successor;
use crate::options::{ReadOptions, WriteOptions};
use crate::snapshot::Snapshot;
use crate::store::Version;

/// Attempts [`Db::transact`] makes by default before it returns the last
/// [`Error::Conflict`].
pub const DEFAULT_TRANSACTION_ATTEMPTS: usize = 16;

/// Options of a transaction ([`Db::transaction_opt`]) and of the retry
/// helper ([`Db::transact_opt`]).
///
/// ```
/// use weft::{Db, Options, TransactionOptions, WriteOptions};
/// let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options::default()).unwrap();
/// let opts = TransactionOptions::new()
///     .write_options(WriteOptions::new().sync(true))
///     .max_attempts(100);
/// let n = db
///     .transact_opt(&opts, |txn| {
///         let n = txn.get_for_update("n")?.map_or(0, |v| v.len());
///         txn.put("n", vec![b'x'; n + 1])?;
///         Ok(n + 1)
///     })
///     .unwrap();
/// assert_eq!(n, 1);
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TransactionOptions {
    /// How the commit writes (`sync`, `disable_wal`), as for
    /// [`Db::write`]. Default: [`WriteOptions::default`].
    pub write_options: WriteOptions,
    /// Runs of the closure [`Db::transact_opt`] makes, the first included,
    /// before it gives up on conflicts and returns the last one. Default
    /// [`DEFAULT_TRANSACTION_ATTEMPTS`]; at least 1.
    pub max_attempts: usize,
}

impl Default for TransactionOptions {
    fn default() -> Self {
        TransactionOptions {
            write_options: WriteOptions::default(),
            max_attempts: DEFAULT_TRANSACTION_ATTEMPTS,
        }
    }
}

impl TransactionOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`TransactionOptions::write_options`].
    pub fn write_options(mut self, write_options: WriteOptions) -> Self {
        self.write_options = write_options;
        self
    }

    /// Sets [`TransactionOptions::max_attempts`] (0 counts as 1).
    pub fn max_attempts(mut self, attempts: usize) -> Self {
        self.max_attempts = attempts;
        self
    }
}

/// An optimistic transaction over a [`Db`]: reads at a snapshot taken at
/// its begin, with its own writes merged in; writes buffered until
/// [`Transaction::commit`], which applies them atomically or fails with
/// [`Error::Conflict`] and writes nothing. Dropping it (or
/// [`Transaction::rollback`]) discards the writes.
///
/// **Isolation.** A commit fails if any *tracked* key has a version (put or
/// delete) newer than the snapshot: every key the transaction wrote, and
/// every key it read with [`Transaction::get_for_update`]. A plain
/// [`Transaction::get`] and [`Transaction::range`] are not tracked (as in
/// RocksDB, where `Get` is not and `GetForUpdate` is): they read the
/// snapshot, which is consistent, but a commit does not check that what
/// they read is still current. So a transaction is **serializable** when it
/// reads every key its writes depend on with `get_for_update` (its commit
/// is then as if it had run whole at the commit's instant), and has
/// **snapshot isolation** for what it reads with `get` or `range` (write
/// skew and phantoms are possible there). A transaction that writes
/// nothing commits without any check: all its reads come from one
/// snapshot, so it is serializable at that snapshot.
///
/// ```
/// use weft::{Db, Error, Options};
/// let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options::default()).unwrap();
/// db.put("balance", "10").unwrap();
///
/// let mut txn = db.transaction();
/// let balance = txn.get_for_update("balance").unwrap().unwrap();
/// assert_eq!(balance, b"10");
/// txn.put("balance", "7").unwrap();
/// assert_eq!(txn.get("balance").unwrap().as_deref(), Some(&b"7"[..])); // its own write
/// assert_eq!(db.get("balance").unwrap().as_deref(), Some(&b"10"[..])); // not yet committed
///
/// db.put("balance", "11").unwrap(); // another writer gets there first
/// let err = txn.commit().unwrap_err();
/// assert!(matches!(err, Error::Conflict { ref key, .. } if key == b"balance"));
/// assert_eq!(db.get("balance").unwrap().as_deref(), Some(&b"11"[..])); // nothing written
/// ```
pub struct Transaction<'db> {
    db: &'db Db,
    snapshot: Snapshot,
    /// Reads at `snapshot`.
    read: ReadOptions,
    /// The store version pinned before the snapshot was taken: every table
    /// in it holds only writes visible at the snapshot, so while a commit
    /// finds this version, the store needs no conflict lookups
    /// (`db::conflict`). Holding it keeps its files until the transaction
    /// ends, as an iterator does.
    begin_store: Arc<Version>,
    /// The pending writes: stored key (a keyspace's prefix, then the
    /// key) → `Some(value)` for a put, `None` for a delete. A later write
    /// of a key replaces an earlier one.
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// Stored keys read with `get_for_update`, in reading order, maybe
    /// repeated.
    read_for_update: Vec<Vec<u8>>,
    /// The keyspaces other than the default one that a tracked key lies
    /// in, once each: the commit fails if one was dropped, and names a
    /// conflicting key's keyspace from them.
    keyspaces: Vec<Keyspace>,
    write_options: WriteOptions,
}

impl std::fmt::Debug for Transaction<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("snapshot", &self.snapshot.sequence())
            .field("writes", &self.writes.len())
            .field("read_for_update", &self.read_for_update.len())
            .finish()
    }
}

impl Db {
    /// Begins an optimistic [`Transaction`] with the default options: its
    /// snapshot is taken now.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let mut txn = db.transaction();
    /// txn.put("a", "1").unwrap();
    /// txn.delete("b").unwrap();
    /// txn.commit().unwrap();
    /// assert_eq!(db.get("a").unwrap().as_deref(), Some(&b"1"[..]));
    /// ```
    pub fn transaction(&self) -> Transaction<'_> {
        self.transaction_opt(&TransactionOptions::default())
    }

    /// Begins an optimistic [`Transaction`] whose commit writes with
    /// `opts.write_options` (`max_attempts` is for [`Db::transact_opt`]).
    ///
    /// ```
    /// use weft::{TransactionOptions, WriteOptions};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let opts = TransactionOptions::new().write_options(WriteOptions::new().sync(true));
    /// let mut txn = db.transaction_opt(&opts);
    /// txn.put("k", "durable once committed").unwrap();
    /// txn.commit().unwrap();
    /// ```
    pub fn transaction_opt(&self, opts: &TransactionOptions) -> Transaction<'_> {
        let core = self.core();
        // The store version first, then the snapshot: see `begin_store`.
        let begin_store = Arc::clone(&core.pin_super_version().version);
        let snapshot = self.snapshot();
        Transaction {
            db: self,
            read: ReadOptions::new().snapshot(&snapshot),
            snapshot,
            begin_store,
            writes: BTreeMap::new(),
            read_for_update: Vec::new(),
            keyspaces: Vec::new(),
            write_options: opts.write_options,
        }
    }

    /// Runs `body` in a new transaction and commits it, running both again
    /// (in a fresh transaction, at a new snapshot) when either fails with
    /// [`Error::Conflict`], up to [`DEFAULT_TRANSACTION_ATTEMPTS`] runs in
    /// all; returns `body`'s value once a commit succeeds. Any other error,
    /// from `body` or the commit, is returned at once (the transaction is
    /// rolled back). `body` may run several times: keep side effects out.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// // An increment that loses no update whatever other writers do.
    /// let next = db
    ///     .transact(|txn| {
    ///         let n: u64 = match txn.get_for_update("counter")? {
    ///             Some(v) => String::from_utf8_lossy(&v).parse().unwrap_or(0),
    ///             None => 0,
    ///         };
    ///         txn.put("counter", (n + 1).to_string())?;
    ///         Ok(n + 1)
    ///     })
    ///     .unwrap();
    /// assert_eq!(next, 1);
    /// ```
    pub fn transact<T>(&self, body: impl FnMut(&mut Transaction<'_>) -> Result<T>) -> Result<T> {
        self.transact_opt(&TransactionOptions::default(), body)
    }

    /// [`Db::transact`] with options: the commit's write options, and the
    /// bound on runs (`max_attempts`).
    ///
    /// ```
    /// use weft::TransactionOptions;
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// // A body that always loses its race gives up after two runs.
    /// let mut runs = 0;
    /// let r = db.transact_opt(&TransactionOptions::new().max_attempts(2), |txn| {
    ///     runs += 1;
    ///     txn.put("k", "mine")?;
    ///     db.put("k", "someone else's")?; // written after the snapshot
    ///     Ok(())
    /// });
    /// assert!(r.unwrap_err().is_conflict());
    /// assert_eq!(runs, 2);
    /// ```
    pub fn transact_opt<T>(
        &self,
        opts: &TransactionOptions,
        mut body: impl FnMut(&mut Transaction<'_>) -> Result<T>,
    ) -> Result<T> {
        let mut attempt = 1;
        loop {
            let mut txn = self.transaction_opt(opts);
            let result = body(&mut txn).and_then(|value| txn.commit().map(|()| value));
            match result {
                Err(e) if e.is_conflict() && attempt < opts.max_attempts => {
                    attempt += 1;
                    // Let the writer that won run on: retrying at once on a
                    // busy core mostly meets the same conflict.
                    std::thread::yield_now();
                }
                other => return other,
            }
        }
    }
}

impl<'db> Transaction<'db> {
    /// The snapshot the transaction reads at (taken at its begin).
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// db.put("k", "v").unwrap();
    /// let txn = db.transaction();
    /// assert_eq!(txn.snapshot().sequence(), db.snapshot().sequence());
    /// ```
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// `key`'s value as this transaction sees it: its own pending write of
    /// `key` if any, else the value at its snapshot. Not tracked for
    /// conflicts (see [`Transaction`]): use
    /// [`Transaction::get_for_update`] for a read that a write depends on.
    /// The default keyspace's key, as [`Db::get`]: a key of the span
    /// reserved for keyspaces misses.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// db.put("k", "v1").unwrap();
    /// let mut txn = db.transaction();
    /// db.put("k", "v2").unwrap(); // after the snapshot: not seen
    /// assert_eq!(txn.get("k").unwrap().as_deref(), Some(&b"v1"[..]));
    /// txn.delete("k").unwrap();
    /// assert_eq!(txn.get("k").unwrap(), None);
    /// ```
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let key = key.as_ref();
        check_key(key)?;
        if is_reserved(key) {
            // Other keyspaces' keys are not the default keyspace's: a miss,
            // whatever this transaction wrote under that prefix.
            return Ok(None);
        }
        self.get_stored(key)
    }

    /// [`Transaction::get`] of `key` in keyspace `ks`: its own pending
    /// write there, else the snapshot's value. Fails with
    /// [`Error::InvalidArgument`] once `ks` is dropped.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let users = db.keyspace("users").unwrap();
    /// users.put("42", "alice").unwrap();
    /// let mut txn = db.transaction();
    /// assert_eq!(txn.get_in(&users, "42").unwrap().as_deref(), Some(&b"alice"[..]));
    /// txn.put_in(&users, "42", "bob").unwrap();
    /// assert_eq!(txn.get_in(&users, "42").unwrap().as_deref(), Some(&b"bob"[..]));
    /// assert_eq!(txn.get("42").unwrap(), None); // the default keyspace's "42"
    /// ```
    pub fn get_in(&self, ks: &Keyspace, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        ks.check_live()?;
        if ks.is_default() {
            return self.get(key);
        }
        self.get_stored(&ks.stored_key(key.as_ref())?)
    }

    /// The value of stored key `stored` (a keyspace's prefix, then the
    /// key) as this transaction sees it.
    fn get_stored(&self, stored: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(pending) = self.writes.get(stored) {
            return Ok(pending.clone());
        }
        self.db.get_any(stored, &self.read)
    }

    /// As [`Transaction::get`], and tracks `key`: the commit fails with
    /// [`Error::Conflict`] if `key` gets a version (a put or a delete)
    /// after this transaction's snapshot, whoever writes it — a plain
    /// write or another transaction.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let mut txn = db.transaction();
    /// assert_eq!(txn.get_for_update("k").unwrap(), None);
    /// txn.put("other", "depends on k being absent").unwrap();
    /// db.delete("k").unwrap(); // a delete is a version too
    /// assert!(txn.commit().unwrap_err().is_conflict());
    /// ```
    pub fn get_for_update(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let key = key.as_ref();
        check_key(key)?;
        if is_reserved(key) {
            // Never a key of the default keyspace: nothing can write it
            // there, so there is nothing to track.
            return Ok(None);
        }
        let value = self.get_stored(key)?;
        self.read_for_update.push(key.to_vec());
        Ok(value)
    }

    /// [`Transaction::get_for_update`] of `key` in keyspace `ks`: tracked
    /// there only, so a write of the same key in another keyspace is no
    /// conflict.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let (a, b) = (db.keyspace("a").unwrap(), db.keyspace("b").unwrap());
    /// let mut txn = db.transaction();
    /// txn.get_for_update_in(&a, "k").unwrap();
    /// txn.put_in(&a, "out", "x").unwrap();
    /// b.put("k", "another keyspace's k").unwrap(); // no conflict
    /// txn.commit().unwrap();
    ///
    /// let mut txn = db.transaction();
    /// txn.get_for_update_in(&a, "k").unwrap();
    /// txn.put_in(&a, "out", "y").unwrap();
    /// a.put("k", "changed").unwrap();
    /// let err = txn.commit().unwrap_err();
    /// assert!(matches!(err, weft::Error::Conflict { ref key, ref keyspace }
    ///     if key == b"k" && keyspace == "a"));
    /// ```
    pub fn get_for_update_in(
        &mut self,
        ks: &Keyspace,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<Vec<u8>>> {
        ks.check_live()?;
        if ks.is_default() {
            return self.get_for_update(key);
        }
        let stored = ks.stored_key(key.as_ref())?;
        let value = self.get_stored(&stored)?;
        self.read_for_update.push(stored);
        self.note_keyspace(ks);
        Ok(value)
    }

    /// Remembers `ks` (not the default keyspace) as holding a tracked key.
    fn note_keyspace(&mut self, ks: &Keyspace) {
        if !self
            .keyspaces
            .iter()
            .any(|k| k.key_prefix() == ks.key_prefix())
        {
            self.keyspaces.push(ks.clone());
        }
    }

    /// Sets `key` to `value` when the transaction commits; its own reads
    /// see it at once. Tracked for conflicts. Fails with
    /// [`Error::InvalidArgument`] for a key or value over the limits, or a
    /// key in the span reserved for keyspaces (as [`Db::put`]).
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let mut txn = db.transaction();
    /// txn.put("k", "v").unwrap();
    /// assert_eq!(txn.get("k").unwrap().as_deref(), Some(&b"v"[..]));
    /// assert_eq!(db.get("k").unwrap(), None); // until the commit
    /// txn.commit().unwrap();
    /// assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"v"[..]));
    /// ```
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        check_key(key)?;
        check_default_key(key)?;
        check_value(value)?;
        self.writes.insert(key.to_vec(), Some(value.to_vec()));
        Ok(())
    }

    /// Sets `key` to `value` in keyspace `ks` when the transaction commits:
    /// one commit is atomic across every keyspace it writes, as one
    /// [`crate::WriteBatch`] is. Fails with [`Error::InvalidArgument`] once
    /// `ks` is dropped (and the commit fails so if it is dropped before
    /// the commit).
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let users = db.keyspace("users").unwrap();
    /// let by_name = db.keyspace("by_name").unwrap();
    /// db.transact(|txn| {
    ///     if txn.get_for_update_in(&by_name, "alice")?.is_none() {
    ///         txn.put_in(&users, "42", "alice")?;
    ///         txn.put_in(&by_name, "alice", "42")?;
    ///     }
    ///     Ok(())
    /// })
    /// .unwrap();
    /// assert_eq!(users.get("42").unwrap().as_deref(), Some(&b"alice"[..]));
    /// assert_eq!(by_name.get("alice").unwrap().as_deref(), Some(&b"42"[..]));
    /// ```
    pub fn put_in(
        &mut self,
        ks: &Keyspace,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        ks.check_live()?;
        if ks.is_default() {
            return self.put(key, value);
        }
        let stored = ks.stored_key(key.as_ref())?;
        check_value(value.as_ref())?;
        self.writes.insert(stored, Some(value.as_ref().to_vec()));
        self.note_keyspace(ks);
        Ok(())
    }

    /// Deletes `key` when the transaction commits; its own reads see it
    /// gone at once. Tracked for conflicts.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// db.put("k", "v").unwrap();
    /// let mut txn = db.transaction();
    /// txn.delete("k").unwrap();
    /// assert_eq!(txn.get("k").unwrap(), None);
    /// txn.commit().unwrap();
    /// assert_eq!(db.get("k").unwrap(), None);
    /// ```
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        let key = key.as_ref();
        check_key(key)?;
        check_default_key(key)?;
        self.writes.insert(key.to_vec(), None);
        Ok(())
    }

    /// Deletes `key` from keyspace `ks` when the transaction commits (see
    /// [`Transaction::put_in`]).
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let sessions = db.keyspace("sessions").unwrap();
    /// sessions.put("s1", "open").unwrap();
    /// let mut txn = db.transaction();
    /// txn.delete_in(&sessions, "s1").unwrap();
    /// txn.put("log", "s1 closed").unwrap();
    /// assert_eq!(txn.get_in(&sessions, "s1").unwrap(), None);
    /// txn.commit().unwrap();
    /// assert_eq!(sessions.get("s1").unwrap(), None);
    /// ```
    pub fn delete_in(&mut self, ks: &Keyspace, key: impl AsRef<[u8]>) -> Result<()> {
        ks.check_live()?;
        if ks.is_default() {
            return self.delete(key);
        }
        let stored = ks.stored_key(key.as_ref())?;
        self.writes.insert(stored, None);
        self.note_keyspace(ks);
        Ok(())
    }

    /// Pairs with keys in `range` as this transaction sees them, in key
    /// order: the snapshot with the transaction's pending writes merged
    /// over it (its puts added or replacing, its deletes removing). Not
    /// tracked for conflicts: a range read has snapshot isolation (a key
    /// another writer adds to the range after the snapshot is not a
    /// conflict; see [`Transaction`]). Forward only.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// for k in ["a", "b", "c"] { db.put(k, "old").unwrap(); }
    /// let mut txn = db.transaction();
    /// txn.delete("b").unwrap();
    /// txn.put("bb", "new").unwrap();
    /// txn.put("c", "new").unwrap();
    /// let seen: Vec<(Vec<u8>, Vec<u8>)> =
    ///     txn.range("a".."z").unwrap().collect::<Result<_, _>>().unwrap();
    /// assert_eq!(seen, vec![
    ///     (b"a".to_vec(), b"old".to_vec()),
    ///     (b"bb".to_vec(), b"new".to_vec()),
    ///     (b"c".to_vec(), b"new".to_vec()),
    /// ]);
    /// ```
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        range: R,
    ) -> Result<TransactionRange<'_>> {
        let start = bound_to_vec(range.start_bound());
        let end = bound_to_vec(range.end_bound());
        let stored = self
            .db
            .range_opt((start.clone(), end.clone()), &self.read)?;
        Ok(self.merged(stored, &[], start, end))
    }

    /// [`Transaction::range`] over keyspace `ks`: its pairs at the
    /// snapshot with this transaction's pending writes in `ks` merged over
    /// them, keys without any prefix.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let ks = db.keyspace("ks").unwrap();
    /// ks.put("a", "old").unwrap();
    /// db.put("b", "the default keyspace's").unwrap();
    /// let mut txn = db.transaction();
    /// txn.put_in(&ks, "c", "new").unwrap();
    /// txn.put("d", "default").unwrap();
    /// let keys: Vec<Vec<u8>> =
    ///     txn.range_in::<&str, _>(&ks, ..).unwrap().map(|r| r.unwrap().0).collect();
    /// assert_eq!(keys, vec![b"a".to_vec(), b"c".to_vec()]);
    /// ```
    pub fn range_in<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        ks: &Keyspace,
        range: R,
    ) -> Result<TransactionRange<'_>> {
        ks.check_live()?;
        if ks.is_default() {
            return self.range(range);
        }
        let start = bound_to_vec(range.start_bound());
        let end = bound_to_vec(range.end_bound());
        let stored = self
            .db
            .range_in(ks.key_prefix(), (start.clone(), end.clone()), &self.read)?;
        Ok(self.merged(stored, ks.key_prefix(), start, end))
    }

    /// The snapshot's pairs `stored` (keys without `prefix`) with the
    /// pending writes of the keyspace of `prefix` (empty: the default
    /// one) within `(start, end)` merged over them.
    fn merged(
        &self,
        stored: Range,
        prefix: &[u8],
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
    ) -> TransactionRange<'_> {
        let empty = match (&start, &end) {
            (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) => {
                s > e
                    || (s == e
                        && !matches!((&start, &end), (Bound::Included(_), Bound::Included(_))))
            }
            _ => false,
        };
        // `BTreeMap::range` panics on an inverted range; such a range is
        // empty, and the stored side finds it empty too.
        let pending = (!empty).then(|| {
            let with_prefix = |b: Bound<Vec<u8>>, unbounded: Bound<Vec<u8>>| match b {
                Bound::Included(k) => Bound::Included([prefix, &k].concat()),
                Bound::Excluded(k) => Bound::Excluded([prefix, &k].concat()),
                Bound::Unbounded => unbounded,
            };
            let (lo, hi) = if prefix.is_empty() {
                (start, end)
            } else {
                let span_end = prefix_successor(prefix).map_or(Bound::Unbounded, Bound::Excluded);
                (
                    with_prefix(start, Bound::Included(prefix.to_vec())),
                    with_prefix(end, span_end),
                )
            };
            let strip = prefix.len();
            let default = prefix.is_empty();
            let writes = self
                .writes
                .range::<[u8], _>((as_slice(&lo), as_slice(&hi)))
                // The default keyspace's range skips the other keyspaces'
                // pending writes, as its stored side skips their span.
                .filter(move |(k, _)| !(default && is_reserved(k)))
                .map(move |(k, v)| (&k[strip..], v));
            (Box::new(writes) as PendingRange<'_>).peekable()
        });
        TransactionRange {
            stored: stored.peekable(),
            pending,
        }
    }

    /// Applies the pending writes atomically, unless a tracked key (one
    /// written, or read with [`Transaction::get_for_update`]) has a version
    /// newer than the snapshot: then fails with [`Error::Conflict`] naming
    /// it and its keyspace, and writes nothing. A transaction with no
    /// writes commits at once, checking nothing (it is serializable at its
    /// snapshot). Fails with [`Error::InvalidArgument`], writing nothing,
    /// when a keyspace holding one of its tracked keys was dropped.
    ///
    /// The check and the append happen under the WAL lock, after every
    /// write that took a sequence before is visible, so no write can come
    /// between them (`docs/DESIGN.md` §4.12). Other errors are those of
    /// [`Db::write`].
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let mut first = db.transaction();
    /// let mut second = db.transaction();
    /// first.put("k", "first").unwrap();
    /// second.put("k", "second").unwrap();
    /// first.commit().unwrap();
    /// assert!(second.commit().unwrap_err().is_conflict()); // written after its snapshot
    /// assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"first"[..]));
    ///
    /// let tmp = db.keyspace("tmp").unwrap();
    /// let mut txn = db.transaction();
    /// txn.put_in(&tmp, "k", "v").unwrap();
    /// db.drop_keyspace("tmp").unwrap();
    /// assert!(matches!(txn.commit(), Err(weft::Error::InvalidArgument(_))));
    /// ```
    pub fn commit(self) -> Result<()> {
        let core = self.db.core();
        if self.writes.is_empty() {
            return core.check_open();
        }
        let keyspaces = self.keyspaces;
        for ks in &keyspaces {
            ks.check_live()?;
        }
        let mut keys = self.read_for_update;
        keys.reserve(self.writes.len());
        let mut batch = WriteBatch::new();
        for (key, value) in self.writes {
            // Stored keys, checked as they were added: a default key never
            // lies in the reserved span.
            match &value {
                Some(v) => batch.put_unchecked(&key, v),
                None => batch.delete_unchecked(&key),
            };
            keys.push(key);
        }
        keys.sort_unstable();
        keys.dedup();
        let name_of = |id: u32| {
            (keyspaces.iter())
                .find(|ks| ks.id() == id)
                .map_or_else(|| format!("#{id}"), |ks| ks.name().to_string())
        };
        check_write(&batch, &self.write_options, &name_of)?;
        let snapshot = self.snapshot.sequence();
        let clean_store = core
            .check_commit_unlocked(&keys, snapshot, &self.begin_store)
            .map_err(|e| named_conflict(e, &keyspaces))?;
        // The unit tests' window between the two checks (`db::conflict`).
        crate::fault::pause_point("commit.checked_unlocked", &core.dir);
        let check = CommitCheck {
            keys,
            snapshot,
            clean_store,
            keyspaces,
        };
        let opts = &self.write_options;
        core.write_checked(batch, opts.sync, !opts.disable_wal, false, Some(&check))
            .map_err(|e| named_conflict(e, &check.keyspaces))
    }

    /// Discards the pending writes (as dropping the transaction does).
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let mut txn = db.transaction();
    /// txn.put("k", "v").unwrap();
    /// txn.rollback();
    /// assert_eq!(db.get("k").unwrap(), None);
    /// ```
    pub fn rollback(self) {}
}

/// `b` borrowed as a bound on `[u8]` (what `BTreeMap::range` takes for
/// `Vec<u8>` keys).
fn as_slice(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// A range of a transaction's pending writes, keys without their
/// keyspace's prefix (`None` values are deletes).
type PendingRange<'txn> = Box<dyn Iterator<Item = (&'txn [u8], &'txn Option<Vec<u8>>)> + 'txn>;

/// `e`, a conflict on a stored key, as the key within its keyspace and
/// that keyspace's name (`keyspaces` holds those of the tracked keys).
fn named_conflict(e: Error, keyspaces: &[Keyspace]) -> Error {
    match e {
        Error::Conflict { key, keyspace } => {
            match keyspaces.iter().find(|ks| key.starts_with(ks.key_prefix())) {
                Some(ks) => Error::Conflict {
                    key: key[ks.key_prefix().len()..].to_vec(),
                    keyspace: ks.name().to_string(),
                },
                None => Error::Conflict { key, keyspace },
            }
        }
        other => other,
    }
}

/// Fails for a value over [`MAX_VALUE_SIZE`].
fn check_value(value: &[u8]) -> Result<()> {
    if value.len() > MAX_VALUE_SIZE {
        return Err(Error::InvalidArgument(format!(
            "value of {} bytes exceeds the limit of {MAX_VALUE_SIZE} bytes",
            value.len()
        )));
    }
    Ok(())
}

/// The cursor of [`Transaction::range`] and [`Transaction::range_in`]: the snapshot's pairs with the
/// transaction's pending writes merged over them, in key order.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
/// db.put("a", "1").unwrap();
/// let mut txn = db.transaction();
/// txn.put("b", "2").unwrap();
/// let mut range: weft::TransactionRange<'_> = txn.range::<&str, _>(..).unwrap();
/// assert_eq!(range.next().unwrap().unwrap().0, b"a");
/// assert_eq!(range.next().unwrap().unwrap().0, b"b");
/// assert!(range.next().is_none());
/// ```
pub struct TransactionRange<'txn> {
    stored: Peekable<Range>,
    /// `None` for an inverted (empty) range.
    pending: Option<Peekable<PendingRange<'txn>>>,
}

impl Iterator for TransactionRange<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        use std::cmp::Ordering;
        loop {
            let pending_key = self
                .pending
                .as_mut()
                .and_then(|p| p.peek())
                .map(|(k, _)| *k);
            let order = match (self.stored.peek(), pending_key) {
                (None, None) => return None,
                // An error, or no pending write left: the stored side as is.
                (Some(Err(_)), _) | (Some(Ok(_)), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some(Ok((stored, _))), Some(pending)) => stored.as_slice().cmp(pending),
            };
            if order == Ordering::Less {
                return self.stored.next();
            }
            if order == Ordering::Equal {
                // The pending write replaces (or deletes) the stored pair.
                self.stored.next();
            }
            let (key, value) = self.pending.as_mut()?.next()?;
            if let Some(value) = value {
                return Some(Ok((key.to_vec(), value.clone())));
            }
        }
    }
}
