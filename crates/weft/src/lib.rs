//! Weft: a persistent, ordered key-value store.
//!
//! Weft combines five research designs in one engine: versioned memtables,
//! and a UniKV persistent layout of range partitions, each with a
//! hash-indexed UnsortedStore and a SortedStore. The design of record —
//! the shape, every file format byte by byte, the crash-safety argument of
//! each background job, the lock order and where the code departs from the
//! papers — is `docs/DESIGN.md` in the repository.
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
//!
//! # The public surface
//!
//! [`Db`] and what it takes and returns: [`Options`], [`ReadOptions`],
//! [`WriteOptions`], [`CloseOptions`], [`WriteBatch`], [`Snapshot`], the cursors
//! ([`DbIterator`], [`Range`]), optimistic transactions ([`Transaction`],
//! [`TransactionOptions`], [`TransactionRange`]), the change feed ([`ChangeFeed`],
//! [`ChangeGroup`], [`ChangeOp`], [`FeedLimit`]), checkpoints
//! ([`CheckpointInfo`]) and backups ([`BackupEngine`], [`BackupInfo`],
//! [`BackupId`]), compression ([`Compression`]), the compaction filter
//! ([`CompactionFilter`], [`FilterEntry`], [`FilterDecision`]), [`Error`],
//! [`MemtableKind`] and [`Stats`] (with [`LifetimeStats`]).
//! Every other module is private to the crate: memtables, tables, logs and
//! the manifest are free to change without a semver promise. The memtable
//! benchmark, the crash tests and the server reach a few internals through
//! [`internals`], which is hidden from the documentation and not part of
//! the stable API.

mod background;
mod backup;
mod batch;
mod cache;
mod compaction_filter;
mod compression;
mod db;
mod error;
mod fault;
mod filename;
mod fuzzing;
mod iter;
mod key;
mod keyspace_options;
mod keyspace_prefix;
mod manifest;
mod memtable;
mod options;
mod range_delete;
mod snapshot;
mod stats;
mod stats_file;
mod store;
mod table;
mod util;
mod wal;

pub use backup::{BackupEngine, BackupId, BackupInfo};
pub use batch::{BatchAction, BatchIter, BatchOp, WriteBatch};
pub use compaction_filter::{CompactionFilter, FilterDecision, FilterEntry};
pub use compression::Compression;
pub use db::{
    ChangeFeed, ChangeGroup, ChangeOp, CheckReport, CheckpointInfo, Db, DbIterator, FeedLimit,
    Keyspace, KeyspaceOp, Range, Transaction, TransactionOptions, TransactionRange,
    DEFAULT_KEYSPACE, DEFAULT_TRANSACTION_ATTEMPTS,
};
pub use error::{Error, Result};
pub use key::{MAX_KEY_SIZE, MAX_VALUE_SIZE};
pub use keyspace_options::KeyspaceOptions;
pub use memtable::MemtableKind;
pub use options::{prefix_successor, CloseOptions, Options, ReadOptions, WriteOptions};
pub use snapshot::Snapshot;
pub use stats::{
    BackgroundJobStats, CacheStats, DiskUsage, FeedHoldStats, JobKind, LifetimeStats, MunkStats,
    PartitionStats, ReadStats, RowCacheStats, Stats,
};

/// What the memtable benchmark, the crash tests and tools reach inside the
/// engine: not part of the stable API, may change in any release.
#[doc(hidden)]
pub mod internals {
    /// The memtables, for the memtable benchmark.
    pub mod memtable {
        pub use crate::iter::visible::VisibleIter;
        pub use crate::iter::InternalIterator;
        pub use crate::key::compares;
        pub use crate::key::{ValueKind, MAX_SEQUENCE};
        pub use crate::memtable::esl::EslMemtable;
        pub use crate::memtable::teks::TeksMemtable;
        pub use crate::memtable::{new_memtable, Memtable, MemtableKind};
    }
    /// The file-system layer and its fault-injecting implementation, for
    /// the crash tests.
    pub mod fs {
        pub use crate::util::fs::{
            real, FaultFs, FaultKind, FileSystem, OpKind, PowerCut, PowerLoss, RealFs, WritableFile,
        };
    }
    pub use crate::fault::CRASH_POINTS;
    pub use crate::filename::{current_path, lock_path, parse_file_name, wal_path, FileKind};
    /// Entry points into the decoders, for the fuzz targets.
    pub mod fuzz {
        pub use crate::fuzzing::*;
    }
}

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
