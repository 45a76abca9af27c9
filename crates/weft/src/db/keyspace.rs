//! Keyspaces (column families): named, separate ordered key spaces in one
//! database, sharing its WAL, memtables, snapshots and tables (DESIGN §4.14).
//!
//! Layout. Keyspace 0 is `"default"`: the plain [`Db`] API and everything a
//! format-6 store holds, stored as given. Every other keyspace `id` (1, 2,
//! …) stores its key `k` as `RESERVED | id (4 bytes BE) | k`, so its keys
//! form the one contiguous span `[RESERVED | id, RESERVED | id + 1)`. The
//! span `[RESERVED, RESERVED_END)` is cut out of the default keyspace:
//! its puts and deletes there are refused, its gets miss, its cursors step
//! over the span with one seek and its range deletes skip it.
//!
//! The registry is data too, in the span of id 0 (never a keyspace's id):
//! `RESERVED | 0 | name` → id and the keyspace's options
//! (`crate::keyspace_options`, none set: the id alone), and `RESERVED | 0`
//! (the empty name) → the next id to give out. Creating a keyspace is one batch (its row and the
//! next id), dropping one is one batch (its row's delete and a range delete
//! of its span): both atomic through the WAL like any write, recovered by
//! the WAL replay and read back by name at open. A drop costs O(1) whatever
//! the keyspace holds; merges reclaim the space as they drop what the range
//! delete covers (DESIGN §1.2.1). Ids are never reused, so a name dropped
//! and created again gets a new, empty span.

use std::collections::HashMap;
use std::ops::RangeBounds;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::{Db, DbIterator, Range};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::key::{ValueKind, MAX_KEY_SIZE};
use crate::keyspace_options::{KeyspaceOptions, KeyspaceSettings};
use crate::keyspace_prefix::{RESERVED, RESERVED_END};
use crate::options::{ReadOptions, WriteOptions};

pub use crate::keyspace_prefix::DEFAULT_KEYSPACE;
/// The registry's id: its rows live in this id's span.
pub(crate) const REGISTRY_ID: u32 = 0;

/// `RESERVED | id`: the first key of keyspace `id`'s span.
pub(crate) fn span_start(id: u32) -> Vec<u8> {
    let mut k = RESERVED.to_vec();
    k.extend_from_slice(&id.to_be_bytes());
    k
}

/// The first key past keyspace `id`'s span.
pub(crate) fn span_end(id: u32) -> Vec<u8> {
    match id.checked_add(1) {
        Some(next) => span_start(next),
        None => RESERVED_END.to_vec(),
    }
}

/// A stored key of the reserved span as `(id, key within keyspace id)`;
/// `None` for a key of the default keyspace, or one too short to hold an
/// id (no write makes such a key).
pub(crate) fn split_stored(stored: &[u8]) -> Option<(u32, &[u8])> {
    crate::keyspace_prefix::split(stored)
}

/// The registry row of `name`.
fn registry_key(name: &str) -> Vec<u8> {
    let mut k = span_start(REGISTRY_ID);
    k.extend_from_slice(name.as_bytes());
    k
}

/// One live keyspace in the registry.
struct Entry {
    id: u32,
    /// Its options, as created.
    options: KeyspaceOptions,
    /// Set when the keyspace is dropped: its handles then refuse every call.
    dropped: Arc<AtomicBool>,
}

/// The keyspaces of an open database, by name (the default one is not in
/// it). Guarded by one mutex: creates and drops are rare, and holding it
/// across their write orders them.
#[derive(Default)]
pub(crate) struct Registry {
    by_name: HashMap<String, Entry>,
    /// The id the next create gives out (ids are never reused).
    next_id: u32,
}

impl Registry {
    /// Reads the registry rows of `db` (at open).
    pub(crate) fn load(db: &Db) -> Result<Registry> {
        let mut reg = Registry {
            by_name: HashMap::new(),
            next_id: 1,
        };
        for (name, value) in db.read_span_uncounted(&span_start(REGISTRY_ID))? {
            let bad_row = |why: String| {
                Error::corruption(
                    db.path(),
                    0,
                    format!("keyspace registry row \"{}\": {why}", name.escape_ascii()),
                )
            };
            let (id, options) = value.split_at_checked(4).ok_or_else(|| {
                bad_row(format!("{} bytes, shorter than a 4-byte id", value.len()))
            })?;
            let id = u32::from_be_bytes([id[0], id[1], id[2], id[3]]);
            if name.is_empty() {
                if !options.is_empty() {
                    return Err(bad_row(format!("{} bytes, not a 4-byte id", value.len())));
                }
                reg.next_id = reg.next_id.max(id);
                continue;
            }
            let options = KeyspaceOptions::decode(options).map_err(bad_row)?;
            let name = String::from_utf8(name).map_err(|e| {
                Error::corruption(db.path(), 0, format!("keyspace name is not UTF-8: {e}"))
            })?;
            reg.next_id = reg.next_id.max(id.saturating_add(1));
            reg.by_name.insert(
                name,
                Entry {
                    id,
                    options,
                    dropped: Arc::new(AtomicBool::new(false)),
                },
            );
        }
        Ok(reg)
    }

    /// The options of every keyspace, for the write path and the jobs.
    pub(crate) fn settings(&self, options: &crate::Options) -> KeyspaceSettings {
        KeyspaceSettings::new(options, self.by_name.values().map(|e| (e.id, e.options)))
    }

    /// The names of the keyspaces, the default one first, the rest sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.by_name.keys().cloned().collect();
        names.sort();
        names.insert(0, DEFAULT_KEYSPACE.to_string());
        names
    }

    /// The name of the live keyspace `id` (`"default"` for 0).
    pub(crate) fn name_of(&self, id: u32) -> Option<String> {
        if id == 0 {
            return Some(DEFAULT_KEYSPACE.to_string());
        }
        self.by_name
            .iter()
            .find(|(_, e)| e.id == id)
            .map(|(name, _)| name.clone())
    }

    /// The handle of `name`, creating the keyspace (one write) if needed,
    /// with `options` (`None`: a keyspace that exists keeps its own, a new
    /// one gets none set). With `Some`, a keyspace that exists with other
    /// options is `InvalidArgument`.
    pub(crate) fn open(
        &mut self,
        db: &Db,
        name: &str,
        options: Option<&KeyspaceOptions>,
    ) -> Result<Keyspace> {
        if let Some(o) = options {
            o.validate()?;
        }
        if name == DEFAULT_KEYSPACE {
            if options.is_some_and(|o| !o.is_unset()) {
                return Err(Error::InvalidArgument(
                    "the default keyspace's options are the database's (Options): \
                     create_keyspace(\"default\") takes KeyspaceOptions::new() only"
                        .into(),
                ));
            }
            return Ok(Keyspace::new(
                db,
                name,
                0,
                KeyspaceOptions::default(),
                Arc::new(AtomicBool::new(false)),
            ));
        }
        if name.is_empty() {
            return Err(Error::InvalidArgument(
                "a keyspace name cannot be empty".into(),
            ));
        }
        if let Some(e) = self.by_name.get(name) {
            if let Some(o) = options.filter(|o| **o != e.options) {
                return Err(Error::InvalidArgument(format!(
                    "keyspace \"{name}\" exists with other options ({}) than asked for ({o})",
                    e.options
                )));
            }
            return Ok(Keyspace::new(
                db,
                name,
                e.id,
                e.options,
                Arc::clone(&e.dropped),
            ));
        }
        let options = options.copied().unwrap_or_default();
        let id = self.next_id;
        let next = id
            .checked_add(1)
            .ok_or_else(|| Error::InvalidArgument("every keyspace id has been given out".into()))?;
        let mut row = id.to_be_bytes().to_vec();
        options.encode_to(&mut row);
        let mut batch = WriteBatch::new();
        batch
            .put_unchecked(&registry_key(name), &row)
            .put_unchecked(&span_start(REGISTRY_ID), &next.to_be_bytes());
        db.write(batch, &WriteOptions::default())?;
        self.next_id = next;
        let dropped = Arc::new(AtomicBool::new(false));
        self.by_name.insert(
            name.to_string(),
            Entry {
                id,
                options,
                dropped: Arc::clone(&dropped),
            },
        );
        // Before the handle exists, so before any of its keys is written.
        db.core()
            .set_keyspace_settings(self.settings(&db.core().options));
        Ok(Keyspace::new(db, name, id, options, dropped))
    }

    /// Drops `name`: one batch of its registry row's delete and a range
    /// delete of its span.
    pub(crate) fn drop_keyspace(&mut self, db: &Db, name: &str) -> Result<()> {
        if name == DEFAULT_KEYSPACE {
            return Err(Error::InvalidArgument(
                "the default keyspace cannot be dropped".into(),
            ));
        }
        let Some(entry) = self.by_name.get(name) else {
            return Err(Error::InvalidArgument(format!(
                "no keyspace named \"{name}\""
            )));
        };
        let mut batch = WriteBatch::new();
        batch.delete_unchecked(&registry_key(name));
        batch.push_range_delete(&span_start(entry.id), &span_end(entry.id));
        // Marked before the write takes the WAL lock: a transaction's
        // commit checks the mark under that lock (`db::conflict`), so it
        // either fails or commits before the range delete, which then
        // covers its writes.
        entry.dropped.store(true, Ordering::Release);
        if let Err(e) = db.write(batch, &WriteOptions::default()) {
            entry.dropped.store(false, Ordering::Release);
            return Err(e);
        }
        self.by_name.remove(name);
        db.core()
            .set_keyspace_settings(self.settings(&db.core().options));
        Ok(())
    }
}

/// A handle on one keyspace of a [`Db`] ([`Db::keyspace`]): its own ordered
/// key space with the reads and writes of the database. Cheap to clone; it
/// keeps the database open like a [`Db`] clone. Once the keyspace is
/// dropped ([`Db::drop_keyspace`]) every call fails with
/// [`Error::InvalidArgument`]. Keys of a keyspace other than the default
/// one may be up to 8 bytes shorter than [`crate::MAX_KEY_SIZE`] (its
/// prefix is stored with them).
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
/// let users = db.keyspace("users").unwrap();
/// users.put("42", "alice").unwrap();
/// db.put("42", "the answer").unwrap();
/// assert_eq!(users.get("42").unwrap().as_deref(), Some(&b"alice"[..]));
/// assert_eq!(db.get("42").unwrap().as_deref(), Some(&b"the answer"[..]));
/// assert_eq!(db.keyspaces(), vec!["default".to_string(), "users".to_string()]);
/// ```
#[derive(Clone)]
pub struct Keyspace {
    db: Db,
    name: Arc<str>,
    /// `RESERVED | id`, empty for the default keyspace.
    prefix: Arc<[u8]>,
    options: KeyspaceOptions,
    dropped: Arc<AtomicBool>,
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyspace")
            .field("name", &self.name)
            .finish()
    }
}

impl Keyspace {
    fn new(
        db: &Db,
        name: &str,
        id: u32,
        options: KeyspaceOptions,
        dropped: Arc<AtomicBool>,
    ) -> Keyspace {
        let prefix: Arc<[u8]> = if id == 0 {
            Arc::from(&[][..])
        } else {
            Arc::from(span_start(id))
        };
        Keyspace {
            db: db.clone(),
            name: Arc::from(name),
            prefix,
            options,
            dropped,
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The options it was created with ([`Db::create_keyspace`]), as
    /// recovered from its registry row; a field left `None` follows the
    /// database's [`crate::Options`]. The default keyspace and those made
    /// by [`Db::keyspace`] have none set.
    ///
    /// ```
    /// use weft::{Compression, Db, KeyspaceOptions, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default()).unwrap();
    /// let opts = KeyspaceOptions::new().compression(Compression::Lz4);
    /// db.create_keyspace("logs", opts).unwrap();
    /// drop(db);
    /// let db = Db::open(dir.path(), Options::default()).unwrap();
    /// assert_eq!(db.keyspace("logs").unwrap().options(), opts);
    /// assert_eq!(db.keyspace("default").unwrap().options(), KeyspaceOptions::new());
    /// ```
    pub fn options(&self) -> KeyspaceOptions {
        self.options
    }

    /// Its id: 0 for the default keyspace, then 1, 2, ... in order of
    /// creation, never reused (a keyspace dropped and created again gets a
    /// new one). The change feed names keyspaces by id
    /// ([`crate::ChangeOp::keyspace_op`]).
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// assert_eq!(db.keyspace("default").unwrap().id(), 0);
    /// let a = db.keyspace("a").unwrap();
    /// db.drop_keyspace("a").unwrap();
    /// assert_ne!(db.keyspace("a").unwrap().id(), a.id());
    /// ```
    pub fn id(&self) -> u32 {
        split_stored(&self.prefix).map_or(0, |(id, _)| id)
    }

    /// True for the default keyspace (the plain [`Db`] API's keys).
    pub(crate) fn is_default(&self) -> bool {
        self.prefix.is_empty()
    }

    /// What its stored keys start with (empty for the default keyspace).
    pub(crate) fn key_prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// Fails once the keyspace is dropped, so a stale handle cannot write
    /// into a span nothing reads or reclaims any more.
    pub(crate) fn check_live(&self) -> Result<()> {
        if self.dropped.load(Ordering::Acquire) {
            return Err(Error::InvalidArgument(format!(
                "keyspace \"{}\" was dropped",
                self.name
            )));
        }
        Ok(())
    }

    /// `key` as stored: its keyspace's prefix and then `key`, or
    /// `InvalidArgument` when that is longer than a key may be.
    pub(crate) fn stored_key(&self, key: &[u8]) -> Result<Vec<u8>> {
        if key.len() + self.prefix.len() > MAX_KEY_SIZE {
            return Err(Error::InvalidArgument(format!(
                "key of {} bytes exceeds the limit of {} bytes in a keyspace",
                key.len(),
                MAX_KEY_SIZE - self.prefix.len()
            )));
        }
        let mut k = Vec::with_capacity(self.prefix.len() + key.len());
        k.extend_from_slice(&self.prefix);
        k.extend_from_slice(key);
        Ok(k)
    }

    /// Sets `key` to `value` in this keyspace.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let ks = db.keyspace("a").unwrap();
    /// ks.put("k", "v").unwrap();
    /// assert_eq!(ks.get("k").unwrap().as_deref(), Some(&b"v"[..]));
    /// ```
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_opt(key, value, &WriteOptions::default())
    }

    /// [`Keyspace::put`] with write options (e.g. `sync`), as
    /// [`Db::put_opt`].
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let ks = db.keyspace("a").unwrap();
    /// ks.put_opt("k", "v", &weft::WriteOptions::new().sync(true)).unwrap();
    /// ```
    pub fn put_opt(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        opts: &WriteOptions,
    ) -> Result<()> {
        self.check_live()?;
        if self.is_default() {
            return self.db.put_opt(key, value, opts);
        }
        let k = self.stored_key(key.as_ref())?;
        self.db.put_any(&k, value.as_ref(), opts)
    }

    /// The latest value of `key` in this keyspace.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// db.put("k", "default").unwrap();
    /// assert_eq!(db.keyspace("other").unwrap().get("k").unwrap(), None);
    /// ```
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_opt(key, &ReadOptions::new())
    }

    /// The value of `key` under `opts` (e.g. at a snapshot of the database:
    /// snapshots are shared by all keyspaces).
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let ks = db.keyspace("a").unwrap();
    /// ks.put("k", "1").unwrap();
    /// let snap = db.snapshot();
    /// ks.put("k", "2").unwrap();
    /// let old = ks.get_opt("k", &weft::ReadOptions::new().snapshot(&snap)).unwrap();
    /// assert_eq!(old.as_deref(), Some(&b"1"[..]));
    /// ```
    pub fn get_opt(&self, key: impl AsRef<[u8]>, opts: &ReadOptions) -> Result<Option<Vec<u8>>> {
        self.check_live()?;
        if self.is_default() {
            return self.db.get_opt(key, opts);
        }
        let k = self.stored_key(key.as_ref())?;
        self.db.get_any(&k, opts)
    }

    /// Deletes `key` from this keyspace (a no-op if absent).
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let ks = db.keyspace("a").unwrap();
    /// ks.put("k", "v").unwrap();
    /// ks.delete("k").unwrap();
    /// assert_eq!(ks.get("k").unwrap(), None);
    /// ```
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_opt(key, &WriteOptions::default())
    }

    /// [`Keyspace::delete`] with write options.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let ks = db.keyspace("a").unwrap();
    /// ks.delete_opt("k", &weft::WriteOptions::new().sync(true)).unwrap();
    /// ```
    pub fn delete_opt(&self, key: impl AsRef<[u8]>, opts: &WriteOptions) -> Result<()> {
        self.check_live()?;
        let mut batch = WriteBatch::new();
        batch.delete_in(self, key.as_ref());
        self.write_checked(batch, key.as_ref(), opts)
    }

    /// Deletes every key of this keyspace in `[start, end)` with one write
    /// (a range tombstone, as [`Db::delete_range`]).
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let ks = db.keyspace("a").unwrap();
    /// for k in ["a", "b", "c"] { ks.put(k, "v").unwrap(); }
    /// ks.delete_range("a", "c").unwrap();
    /// assert_eq!(ks.range::<&str, _>(..).unwrap().count(), 1);
    /// ```
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        self.delete_range_opt(start, end, &WriteOptions::default())
    }

    /// [`Keyspace::delete_range`] with write options.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let ks = db.keyspace("a").unwrap();
    /// ks.delete_range_opt("a", "z", &weft::WriteOptions::new().sync(true)).unwrap();
    /// ```
    pub fn delete_range_opt(
        &self,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
        opts: &WriteOptions,
    ) -> Result<()> {
        self.check_live()?;
        let mut batch = WriteBatch::new();
        batch.delete_range_in(self, start.as_ref(), end.as_ref());
        self.write_checked(batch, start.as_ref(), opts)
    }

    /// Writes a one-op batch after checking its key's length.
    fn write_checked(&self, batch: WriteBatch, key: &[u8], opts: &WriteOptions) -> Result<()> {
        self.stored_key(key)?;
        self.db.write(batch, opts)
    }

    /// A cursor over this keyspace at one snapshot, bounded by
    /// `opts.lower_bound` / `opts.upper_bound` (keys of this keyspace, as
    /// are the keys it returns and seeks to).
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let ks = db.keyspace("a").unwrap();
    /// ks.put("x", "1").unwrap();
    /// db.put("y", "2").unwrap();
    /// let mut it = ks.iter(&weft::ReadOptions::new()).unwrap();
    /// it.seek_to_first().unwrap();
    /// assert_eq!(it.key(), b"x");
    /// it.next().unwrap();
    /// assert!(!it.valid());
    /// ```
    pub fn iter(&self, opts: &ReadOptions) -> Result<DbIterator> {
        self.check_live()?;
        if self.is_default() {
            return self.db.iter(opts);
        }
        self.db.iter_in(&self.prefix, opts)
    }

    /// Pairs of this keyspace with keys in `range`, in key order; `.rev()`
    /// for reverse.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let ks = db.keyspace("a").unwrap();
    /// for k in ["a", "b", "c"] { ks.put(k, "v").unwrap(); }
    /// let keys: Vec<Vec<u8>> = ks.range("b"..).unwrap().rev().map(|r| r.unwrap().0).collect();
    /// assert_eq!(keys, vec![b"c".to_vec(), b"b".to_vec()]);
    /// ```
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<Range> {
        self.range_opt(range, &ReadOptions::new())
    }

    /// Pairs of this keyspace whose key starts with `prefix`, in key order.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let ks = db.keyspace("a").unwrap();
    /// for k in ["user:1", "user:2", "visit:1"] { ks.put(k, "v").unwrap(); }
    /// db.put("user:3", "default").unwrap();
    /// assert_eq!(ks.prefix("user:").unwrap().count(), 2);
    /// ```
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Result<Range> {
        let p = prefix.as_ref();
        let opts = ReadOptions {
            lower_bound: Some(p.to_vec()),
            upper_bound: crate::options::prefix_successor(p),
            ..ReadOptions::new()
        };
        self.check_live()?;
        if self.is_default() {
            return self.db.prefix(p);
        }
        self.db.range_in::<&[u8], _>(&self.prefix, .., &opts)
    }

    /// The latest values of `keys` in this keyspace, in order, all read at
    /// one sequence (as [`Db::multi_get`]).
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let ks = db.keyspace("a").unwrap();
    /// ks.put("x", "1").unwrap();
    /// db.put("y", "2").unwrap();
    /// let got = ks.multi_get(&["x", "y"]);
    /// assert_eq!(got[0].as_ref().unwrap().as_deref(), Some(&b"1"[..]));
    /// assert_eq!(got[1].as_ref().unwrap(), &None);
    /// ```
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Vec<Result<Option<Vec<u8>>>> {
        if let Err(e) = self.check_live() {
            let msg = e.to_string();
            return keys
                .iter()
                .map(|_| Err(Error::InvalidArgument(msg.clone())))
                .collect();
        }
        if self.is_default() {
            return self.db.multi_get(keys);
        }
        let stored: Vec<Result<Vec<u8>>> =
            keys.iter().map(|k| self.stored_key(k.as_ref())).collect();
        let valid: Vec<&[u8]> = stored
            .iter()
            .filter_map(|k| k.as_ref().ok().map(Vec::as_slice))
            .collect();
        let mut found = self.db.multi_get_any(&valid).into_iter();
        stored
            .into_iter()
            .map(|k| match k {
                Ok(_) => found.next().unwrap_or(Ok(None)),
                Err(e) => Err(e),
            })
            .collect()
    }

    /// [`Keyspace::range`] with read options (e.g. a snapshot).
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let ks = db.keyspace("a").unwrap();
    /// ks.put("a", "v").unwrap();
    /// let snap = db.snapshot();
    /// ks.put("b", "v").unwrap();
    /// let opts = weft::ReadOptions::new().snapshot(&snap);
    /// assert_eq!(ks.range_opt::<&str, _>(.., &opts).unwrap().count(), 1);
    /// ```
    pub fn range_opt<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        range: R,
        opts: &ReadOptions,
    ) -> Result<Range> {
        self.check_live()?;
        if self.is_default() {
            return self.db.range_opt(range, opts);
        }
        self.db.range_in(&self.prefix, range, opts)
    }
}

/// A batch's writes to a keyspace (beside `crate::batch`, which knows
/// nothing of keyspaces but the reserved prefix).
impl WriteBatch {
    /// Adds a put of `key` to `value` in keyspace `ks`: one batch may hold
    /// writes to several keyspaces and is applied atomically, all of it or
    /// none after any crash.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let users = db.keyspace("users").unwrap();
    /// let index = db.keyspace("index").unwrap();
    /// let mut batch = weft::WriteBatch::new();
    /// batch.put_in(&users, "42", "alice").put_in(&index, "alice", "42");
    /// db.write(batch, &weft::WriteOptions::default()).unwrap();
    /// assert_eq!(users.get("42").unwrap().as_deref(), Some(&b"alice"[..]));
    /// assert_eq!(index.get("alice").unwrap().as_deref(), Some(&b"42"[..]));
    /// assert_eq!(db.get("42").unwrap(), None); // not in the default keyspace
    /// ```
    pub fn put_in(
        &mut self,
        ks: &Keyspace,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> &mut Self {
        if ks.is_default() {
            return self.put(key, value);
        }
        self.push_parts(
            ValueKind::Put,
            &[ks.key_prefix(), key.as_ref()],
            Some(&[value.as_ref()]),
        );
        self
    }

    /// Adds a delete of `key` in keyspace `ks` (see [`WriteBatch::put_in`]).
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let ks = db.keyspace("sessions").unwrap();
    /// ks.put("s1", "x").unwrap();
    /// let mut batch = weft::WriteBatch::new();
    /// batch.delete_in(&ks, "s1").put("log", "s1 ended");
    /// db.write(batch, &weft::WriteOptions::default()).unwrap();
    /// assert_eq!(ks.get("s1").unwrap(), None);
    /// ```
    pub fn delete_in(&mut self, ks: &Keyspace, key: impl AsRef<[u8]>) -> &mut Self {
        if ks.is_default() {
            return self.delete(key);
        }
        self.push_parts(ValueKind::Delete, &[ks.key_prefix(), key.as_ref()], None);
        self
    }

    /// Adds a delete of every key in `[start, end)` of keyspace `ks` (see
    /// [`WriteBatch::delete_range`]).
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let ks = db.keyspace("t").unwrap();
    /// for k in ["a", "b", "c"] { ks.put(k, "v").unwrap(); }
    /// db.put("b", "default").unwrap();
    /// let mut batch = weft::WriteBatch::new();
    /// batch.delete_range_in(&ks, "a", "c");
    /// db.write(batch, &weft::WriteOptions::default()).unwrap();
    /// assert_eq!(ks.range::<&str, _>(..).unwrap().count(), 1);
    /// assert!(db.get("b").unwrap().is_some());
    /// ```
    pub fn delete_range_in(
        &mut self,
        ks: &Keyspace,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) -> &mut Self {
        if ks.is_default() {
            return self.delete_range(start, end);
        }
        let mut s = ks.key_prefix().to_vec();
        s.extend_from_slice(start.as_ref());
        let mut e = ks.key_prefix().to_vec();
        e.extend_from_slice(end.as_ref());
        self.push_range_delete(&s, &e);
        self
    }
}
