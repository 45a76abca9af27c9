//! In-memory write buffers: one trait, five kinds (see DESIGN "Memtable").
//!
//! The engine talks to a memtable only through [`Memtable`]. The trait is
//! shaped for all five kinds of DESIGN:
//!
//! * versioned inserts from concurrent writers (`insert`), where a version may
//!   arrive out of sequence order (writers insert concurrently);
//! * point reads at a snapshot (`get`), which the hash kinds answer in O(1);
//! * an ordered cursor over every version (`iter`), used by flush and scans;
//! * `prepare_scan`, the hook a hash-woven kind (teks) uses to drain its queue
//!   of not-yet-indexed keys up to a snapshot before any ordered access;
//! * `approximate_memory` and `is_full`, which drive rotation (a fixed-size
//!   hash reports full at its load threshold instead of degrading).
//!
//! A memtable never frees memory while it lives: its arena goes with the last
//! `Arc`, which readers and iterators hold.

pub mod arena;

pub mod cuckoo;
pub mod esl;
mod hash;
mod height;
pub mod jellyfish;
#[cfg(all(test, loom))]
mod loom_models;
mod pages;
pub mod skiplist;
pub mod teks;
#[cfg(test)]
mod test_support;

use std::sync::Arc;

use crate::iter::InternalIterator;
use crate::key::{SequenceNumber, ValueKind};

/// Which memtable implementation a database uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum MemtableKind {
    /// Append-only concurrent skiplist, one node per version (RocksDB baseline).
    SkipList,
    /// One skiplist node per user key with a vertical version list
    /// (JellyFish).
    JellyFish,
    /// The jellyfish data level under a lock-free parent level and array
    /// index levels updated by a background thread (ESL).
    Esl,
    /// A concurrent cuckoo hash over key nodes with version lists; ordered
    /// access sorts a copy (TeksDB's hash baseline).
    Cuckoo,
    /// The cuckoo hash woven with a jellyfish skiplist over one pool of key
    /// nodes, new keys linked by a background worker (TeksDB). The default:
    /// the best kind overall when it was chosen (point reads far ahead of
    /// `esl`, writes and scans at least level with it:
    /// `bench/journal/2026-11-22-02-release-db-bench-memtable-only.md`,
    /// "Which kind wins what"; the current figures are in `bench/RESULTS.md`).
    #[default]
    Teks,
}

impl MemtableKind {
    /// Every kind this build supports.
    pub const ALL: &'static [MemtableKind] = &[
        MemtableKind::SkipList,
        MemtableKind::JellyFish,
        MemtableKind::Esl,
        MemtableKind::Cuckoo,
        MemtableKind::Teks,
    ];

    /// The kind's name as used by `weft bench --memtable` and `Options`.
    pub fn name(self) -> &'static str {
        match self {
            MemtableKind::SkipList => "skiplist",
            MemtableKind::JellyFish => "jellyfish",
            MemtableKind::Esl => "esl",
            MemtableKind::Cuckoo => "cuckoo",
            MemtableKind::Teks => "teks",
        }
    }
}

impl std::str::FromStr for MemtableKind {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        MemtableKind::ALL
            .iter()
            .copied()
            .find(|k| k.name() == s)
            .ok_or_else(|| crate::Error::InvalidArgument(format!("unknown memtable kind {s:?}")))
    }
}

impl std::fmt::Display for MemtableKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The newest version of a key visible at some snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found<'a> {
    /// Sequence of the version found.
    pub seq: SequenceNumber,
    /// Put or delete.
    pub kind: ValueKind,
    /// The value (empty for a delete).
    pub value: &'a [u8],
}

/// A concurrent, versioned, in-memory write buffer.
pub trait Memtable: Send + Sync + 'static {
    /// The implementation's kind.
    fn kind(&self) -> MemtableKind;

    /// Inserts one version. Called concurrently by many writers; each
    /// `(user_key, seq)` pair is inserted at most once, but sequences may
    /// arrive in any order. Never fails: the engine rotates the memtable
    /// before it grows past its budget.
    fn insert(&self, user_key: &[u8], seq: SequenceNumber, kind: ValueKind, value: &[u8]);

    /// The newest version of `user_key` with sequence `<= snapshot`, if any.
    fn get(&self, user_key: &[u8], snapshot: SequenceNumber) -> Option<Found<'_>>;

    /// A hint that `get(user_key, ..)` or `insert(user_key, ..)` follows
    /// soon: a kind whose lookup starts with a computable memory address (a
    /// hash bucket) starts loading it, so that its misses overlap with other
    /// work (the lookups of `Db::multi_get`, a write's WAL append).
    /// Others do nothing.
    fn prefetch(&self, _user_key: &[u8]) {}

    /// A cursor over every version in internal order. The cursor keeps the
    /// memtable alive. Entries inserted after its creation may or may not be
    /// seen; callers filter by snapshot.
    fn iter(self: Arc<Self>) -> Box<dyn InternalIterator>;

    /// Called before ordered access at `snapshot` (iterators, seeks): a kind
    /// that indexes new keys lazily must make every key with a version
    /// `<= snapshot` reachable by `iter` before returning.
    fn prepare_scan(&self, _snapshot: SequenceNumber) {}

    /// Bytes of memory held (arena and index), for rotation and stats.
    fn approximate_memory(&self) -> usize;

    /// Number of versions inserted.
    fn len(&self) -> usize;

    /// True when no version was inserted.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The range deletes written to this memtable. They live beside its
    /// versions, the same for every kind (`crate::range_delete`): a
    /// reader that pins the memtable sees them as it sees its versions.
    fn range_tombstones(&self) -> &crate::range_delete::MemRangeTombstones;

    /// True when a write went to it: a version or a range delete (a
    /// memtable holding only range deletes must still be flushed).
    fn holds_writes(&self) -> bool {
        !self.is_empty() || !self.range_tombstones().is_empty()
    }

    /// Declares a read watermark: no present or future reader (get,
    /// cursor, flush) reads this memtable at a snapshot below `seq`, and no
    /// version with a sequence `<= seq` will be inserted from now on. For
    /// each key the memtable may then unlink every version older than the
    /// newest one `<= seq` (Weft's selective in-place update; memory stays
    /// in the arena). Watermarks only rise; a lower one is ignored. Kinds
    /// that keep every version ignore it (the default).
    fn set_read_watermark(&self, _seq: SequenceNumber) {}

    /// True when the memtable cannot take more entries without degrading
    /// (a fixed-capacity hash at its load threshold). The engine rotates.
    fn is_full(&self) -> bool {
        false
    }
}

/// Creates an empty memtable of `kind` for a write buffer of
/// `write_buffer_size` bytes (the hash kinds size their table budget by it).
pub fn new_memtable(kind: MemtableKind, write_buffer_size: usize) -> Arc<dyn Memtable> {
    match kind {
        MemtableKind::SkipList => Arc::new(skiplist::SkipListMemtable::new()),
        MemtableKind::JellyFish => Arc::new(jellyfish::JellyFishMemtable::new()),
        MemtableKind::Esl => Arc::new(esl::EslMemtable::new()),
        MemtableKind::Cuckoo => Arc::new(cuckoo::CuckooMemtable::new(write_buffer_size)),
        MemtableKind::Teks => Arc::new(teks::TeksMemtable::new(write_buffer_size)),
    }
}
