//! The database: public API over the write path, read path and background work.

use std::ops::RangeBounds;
use std::path::Path;

use crate::batch::WriteBatch;
use crate::error::Result;
use crate::iter::{DbIterator, Range};
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::snapshot::Snapshot;
use crate::stats::Stats;

/// An open database. Cheap to clone (an `Arc` inside), `Send + Sync`: share
/// it between threads freely. Dropping the last clone closes it.
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
    _private: (),
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

impl Db {
    /// Opens (or creates) the database in `path`, recovering from any crash.
    pub fn open(_path: impl AsRef<Path>, _options: Options) -> Result<Db> {
        unimplemented!()
    }
    /// Sets `key` to `value`.
    pub fn put(&self, _key: impl AsRef<[u8]>, _value: impl AsRef<[u8]>) -> Result<()> {
        unimplemented!()
    }
    /// Sets `key` to `value` with options.
    pub fn put_opt(
        &self,
        _key: impl AsRef<[u8]>,
        _value: impl AsRef<[u8]>,
        _opts: &WriteOptions,
    ) -> Result<()> {
        unimplemented!()
    }
    /// Deletes `key` (a no-op if absent).
    pub fn delete(&self, _key: impl AsRef<[u8]>) -> Result<()> {
        unimplemented!()
    }
    /// Deletes `key` with options.
    pub fn delete_opt(&self, _key: impl AsRef<[u8]>, _opts: &WriteOptions) -> Result<()> {
        unimplemented!()
    }
    /// Applies `batch` atomically.
    pub fn write(&self, _batch: WriteBatch, _opts: &WriteOptions) -> Result<()> {
        unimplemented!()
    }
    /// The latest value of `key`.
    pub fn get(&self, _key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        unimplemented!()
    }
    /// The value of `key` under `opts` (e.g. at a snapshot).
    pub fn get_opt(&self, _key: impl AsRef<[u8]>, _opts: &ReadOptions) -> Result<Option<Vec<u8>>> {
        unimplemented!()
    }
    /// Pins the current state for later reads.
    pub fn snapshot(&self) -> Snapshot {
        unimplemented!()
    }
    /// A cursor over the database (bounds and snapshot from `opts`).
    pub fn iter(&self, _opts: &ReadOptions) -> Result<DbIterator> {
        unimplemented!()
    }
    /// Pairs with keys in `range`, in key order (`.rev()` for reverse).
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, _range: R) -> Result<Range> {
        unimplemented!()
    }
    /// Like [`Db::range`] with read options (snapshot).
    pub fn range_opt<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        _range: R,
        _opts: &ReadOptions,
    ) -> Result<Range> {
        unimplemented!()
    }
    /// Pairs whose key starts with `prefix`, in key order.
    pub fn prefix(&self, _prefix: impl AsRef<[u8]>) -> Result<Range> {
        unimplemented!()
    }
    /// Writes the memtables to tables and waits for it.
    pub fn flush(&self) -> Result<()> {
        unimplemented!()
    }
    /// Merges every partition's UnsortedStore into its SortedStore and waits.
    pub fn compact(&self) -> Result<()> {
        unimplemented!()
    }
    /// Verifies every checksum of every live file.
    pub fn verify_checksums(&self) -> Result<CheckReport> {
        unimplemented!()
    }
    /// Engine statistics.
    pub fn stats(&self) -> Stats {
        unimplemented!()
    }
    /// The database directory.
    pub fn path(&self) -> &Path {
        unimplemented!()
    }
    /// Stops background work, syncs the WAL and releases the directory.
    pub fn close(self) -> Result<()> {
        unimplemented!()
    }
}
