//! The persistent layout (UniKV): disjoint range partitions, each with an
//! UnsortedStore and a SortedStore, and value logs shared between them.
//!
//! * The **UnsortedStore** of a partition holds the tables flushed from
//!   memtables, in flush order, with overlapping key ranges. A lookup asks
//!   the partition's in-memory [`hash_index`] (2-byte key tags, ~10 B per
//!   key) which tables may hold the key and reads only those, newest first —
//!   one block read for a recent key. The index is checkpointed to a
//!   `.hix` file every half `unsorted_limit` of flushed bytes (UniKV
//!   §III-G); open restores it from the checkpoint plus the tables flushed
//!   after it, or rebuilds it from the tables if the checkpoint is unusable.
//! * The **SortedStore** is one sorted run of non-overlapping tables; no
//!   user key straddles two tables, so a lookup binary-searches the fence
//!   keys and reads one table. When a partition's UnsortedStore passes
//!   `unsorted_limit` bytes (or `unsorted_slowdown_tables` tables) it is
//!   merged into the SortedStore ([`compaction`]); values of at least
//!   `min_blob_size` bytes go to a new [`value_log`] and the SortedStore keeps
//!   a pointer (partial key-value separation), and pointers already there are
//!   copied, never their values.
//! * **GC** ([`gc`], driven from `background`) rewrites a partition's
//!   SortedStore when its value logs hold enough dead bytes, copying the live
//!   values of the victim logs to a new log.
//! * A partition past `partition_size` **splits** at its median key; both
//!   halves keep pointing into the logs they shared (lazy value split, with
//!   per-partition references in the manifest).
//!
//! A [`Version`] is an immutable picture of all partitions, tables and logs;
//! edits make new versions. Readers pin a version through an `Arc` and never
//! see it change. Layers are ordered by age — memtables, then UnsortedStore
//! tables newest first, then the SortedStore — so the first layer holding a
//! visible version of a key has its newest one.
//!
//! A table or log removed by an edit is marked obsolete; its file is deleted
//! when the last reader drops it.

pub mod compaction;
pub mod gc;
pub mod hash_index;
pub mod logged_values;
pub mod munk;
mod partition;
pub mod sorted_run;
mod table_file;
mod unsorted_index;
pub mod value_log;
pub mod value_reader;
mod version;

#[cfg(test)]
mod tests;

pub use partition::{Partition, ReadCounters};
pub use table_file::{FileMeta, Placement, TableFile};
pub use unsorted_index::*;
pub use version::{LiveValueLog, Version};
