//! Internal iterators: the cursor trait every layer implements
//! ([`InternalIterator`]: memtables, tables, sorted runs), the snapshot
//! filter ([`visible`]) and the merging iterators. A low module: it knows
//! keys and errors, nothing of the database above (the public
//! `DbIterator` and `Range` live in `db::iter`).

pub mod internal;
pub mod merge;
pub mod visible;

pub use internal::InternalIterator;
#[cfg(test)]
pub use internal::VecIter;
pub use merge::{MergedEntries, MergingIter};
