//! Weft: a persistent, ordered key-value store.
//!
//! Weft combines five research designs in one engine (see `DESIGN.md` at the
//! workspace root): versioned memtables, and a UniKV persistent layout of range
//! partitions, each with a hash-indexed UnsortedStore and a SortedStore.
//!
//! ```
//! use weft::{Db, Options};
//! let dir = tempfile::tempdir().unwrap();
//! let db = Db::open(dir.path(), Options::default()).unwrap();
//! db.put(b"a", b"1").unwrap();
//! db.put(b"b", b"2").unwrap();
//! let pairs: Vec<_> = db.range(&b"a"[..]..).unwrap().map(|r| r.unwrap()).collect();
//! assert_eq!(pairs, vec![(b"a".to_vec(), b"1".to_vec()), (b"b".to_vec(), b"2".to_vec())]);
//! ```

#![deny(missing_docs)]

mod background;
pub mod batch;
pub mod cache;
mod db;
pub mod error;
pub mod fault;
pub mod filename;
pub mod iter;
pub mod key;
pub mod manifest;
pub mod memtable;
pub mod options;
pub mod snapshot;
pub mod stats;
pub mod store;
pub mod table;
pub mod wal;

pub use batch::WriteBatch;
pub use db::{CheckReport, Db};
pub use error::{Error, Result};
pub use iter::{DbIterator, Range};
pub use memtable::MemtableKind;
pub use options::{Options, ReadOptions, WriteOptions};
pub use snapshot::Snapshot;
pub use stats::{CacheStats, PartitionStats, ReadStats, Stats};
