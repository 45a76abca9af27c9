//! The merge-time filter hook (`Options::compaction_filter`): an
//! application's say over which entries a merge or GC rewrites, to drop
//! expired or stale data as the store rewrites it anyway instead of with a
//! delete per key.
//!
//! # What the hook sees, and what it may drop
//!
//! A merge and a GC rewrite a partition's whole on-disk history of every
//! key they touch (all of its UnsortedStore tables and the SortedStore
//! tables they overlap), so for each user key they see every version the
//! disk holds. The filter is asked about one version per key at most: the
//! newest one, when it is a put (inline or separated) *newer than every
//! live snapshot*. A version some snapshot can see is never offered, so no
//! snapshot ever sees a filtered read change.
//!
//! A removed version turns into a tombstone at its sequence, which goes
//! through the same retention rules as a delete the user wrote: it is kept
//! while an older version of the key survives (for a snapshot), so that the
//! older value does not come back for readers after the snapshot, and it
//! is dropped in the same job when nothing older survives. A version newer
//! than the one offered (in a memtable, or an UnsortedStore table flushed
//! while the job ran) still shadows whatever the filter decided.
//!
//! # Values
//!
//! The hook gets the key, the sequence, and the value on demand
//! ([`FilterEntry::value`]): a separated value is read from its value log
//! only if the hook asks, so a filter that decides by key (a stale
//! collection element named by its key) costs a merge no value reads. A
//! value that cannot be read fails the job (it is retried later) rather
//! than letting the filter decide without it.
//!
//! Filters run on background threads, concurrently with each other: they
//! must be `Send + Sync`, and should be quick and free of side effects
//! the store could observe (they must not write to the `Db`).

use std::borrow::Cow;
use std::cell::RefCell;

use crate::error::{Error, Result};
use crate::key::SequenceNumber;

/// What a [`CompactionFilter`] decides for an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterDecision {
    /// Keep the entry as it is.
    Keep,
    /// Remove the entry: from the next read after the job, the key reads
    /// as deleted (unless a newer version was written meanwhile).
    Remove,
}

/// An application's filter over the entries merges and GC rewrite (module
/// docs of `compaction_filter`; `docs/DESIGN.md` §1.5).
///
/// ```
/// use std::sync::Arc;
/// use weft::{CompactionFilter, Db, FilterDecision, FilterEntry, Options};
///
/// /// Drops every key under `tmp/`.
/// struct DropTemporary;
///
/// impl CompactionFilter for DropTemporary {
///     fn name(&self) -> &str {
///         "drop-temporary"
///     }
///     fn filter(&self, entry: &FilterEntry<'_>) -> FilterDecision {
///         if entry.key().starts_with(b"tmp/") {
///             FilterDecision::Remove
///         } else {
///             FilterDecision::Keep
///         }
///     }
/// }
///
/// let dir = tempfile::tempdir().unwrap();
/// let options = Options::default().compaction_filter(Some(Arc::new(DropTemporary)));
/// let db = Db::open(dir.path(), options).unwrap();
/// db.put("tmp/a", "scratch").unwrap();
/// db.put("keep", "data").unwrap();
/// db.compact().unwrap(); // flushes, then merges: the filter runs
/// assert_eq!(db.get("tmp/a").unwrap(), None);
/// assert_eq!(db.get("keep").unwrap(), Some(b"data".to_vec()));
/// ```
pub trait CompactionFilter: Send + Sync {
    /// A name for logs and `Debug` output.
    fn name(&self) -> &str;

    /// Decides about the newest version of a key, a put no live snapshot
    /// can see.
    fn filter(&self, entry: &FilterEntry<'_>) -> FilterDecision;
}

impl std::fmt::Debug for dyn CompactionFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CompactionFilter({})", self.name())
    }
}

/// Reads a separated value (the raw pointer a table holds) for a filter.
pub(crate) type ResolveValue<'a> = dyn Fn(&[u8]) -> Result<Vec<u8>> + 'a;

/// The entry a [`CompactionFilter`] is asked about.
pub struct FilterEntry<'a> {
    key: &'a [u8],
    seq: SequenceNumber,
    /// The inline value, or the encoded pointer to a separated one.
    raw: &'a [u8],
    separated: bool,
    resolve: &'a ResolveValue<'a>,
    /// The first error a value read met, for the job to fail with.
    error: RefCell<Option<Error>>,
}

impl<'a> FilterEntry<'a> {
    pub(crate) fn new(
        key: &'a [u8],
        seq: SequenceNumber,
        raw: &'a [u8],
        separated: bool,
        resolve: &'a ResolveValue<'a>,
    ) -> Self {
        FilterEntry {
            key,
            seq,
            raw,
            separated,
            resolve,
            error: RefCell::new(None),
        }
    }

    /// The user key.
    pub fn key(&self) -> &[u8] {
        self.key
    }

    /// The sequence number the version was written at.
    pub fn sequence(&self) -> u64 {
        self.seq
    }

    /// The value: inline ones at no cost, a separated one read from its
    /// value log. `None` if it could not be read (the job then fails and is
    /// retried, whatever the filter decides).
    pub fn value(&self) -> Option<Cow<'a, [u8]>> {
        if !self.separated {
            return Some(Cow::Borrowed(self.raw));
        }
        match (self.resolve)(self.raw) {
            Ok(v) => Some(Cow::Owned(v)),
            Err(e) => {
                self.error.borrow_mut().get_or_insert(e);
                None
            }
        }
    }

    /// The error a value read met, if any.
    pub(crate) fn take_error(&self) -> Option<Error> {
        self.error.borrow_mut().take()
    }
}
