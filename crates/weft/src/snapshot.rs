//! Snapshots: a pinned sequence number that reads can use, and that keeps
//! merges from dropping the versions it can see.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::key::SequenceNumber;

/// A point-in-time view of the database. Reads with
/// [`crate::ReadOptions::snapshot`] see every write acknowledged before
/// [`crate::Db::snapshot`] was called, none that started after it returned,
/// and of the writes in flight meanwhile a prefix. Cheap to clone; the view
/// is released when the last clone is dropped.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
/// db.put(b"k", b"old").unwrap();
/// let snap = db.snapshot();
/// db.put(b"k", b"new").unwrap();
/// let at = weft::ReadOptions::new().snapshot(&snap);
/// assert_eq!(db.get_opt(b"k", &at).unwrap().as_deref(), Some(&b"old"[..]));
/// assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"new"[..]));
/// ```
#[derive(Clone)]
pub struct Snapshot {
    inner: Arc<SnapshotHandle>,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("sequence", &self.sequence())
            .finish()
    }
}

impl Snapshot {
    /// The sequence number this snapshot reads at.
    pub fn sequence(&self) -> SequenceNumber {
        self.inner.seq
    }
}

struct SnapshotHandle {
    seq: SequenceNumber,
    list: Arc<SnapshotList>,
}

impl Drop for SnapshotHandle {
    fn drop(&mut self) {
        self.list.release(self.seq);
    }
}

/// The set of live snapshots, as a multiset of sequences.
#[derive(Default)]
pub(crate) struct SnapshotList {
    live: Mutex<BTreeMap<SequenceNumber, usize>>,
    /// Held by every snapshot's creation, and by a merge or GC whose
    /// compaction filter removed versions from its check of the live
    /// snapshots until readers see its outputs
    /// ([`SnapshotList::hold_creation`]). Only creation waits on it:
    /// releases and the writers' reads of the oldest snapshot take `live`
    /// alone.
    creation: Mutex<()>,
}

impl SnapshotList {
    /// Registers a snapshot at the sequence `current()` returns, atomically
    /// with respect to [`SnapshotList::sequences`].
    pub(crate) fn acquire_with(
        self: &Arc<Self>,
        current: impl FnOnce() -> SequenceNumber,
    ) -> Snapshot {
        let creation = self.creation.lock();
        let mut live = self.live.lock();
        let seq = current();
        *live.entry(seq).or_insert(0) += 1;
        drop(live);
        drop(creation);
        Snapshot {
            inner: Arc::new(SnapshotHandle {
                seq,
                list: Arc::clone(self),
            }),
        }
    }

    fn release(&self, seq: SequenceNumber) {
        let mut live = self.live.lock();
        match live.get_mut(&seq) {
            Some(n) if *n > 1 => *n -= 1,
            Some(_) => {
                live.remove(&seq);
            }
            None => debug_assert!(false, "released snapshot {seq} was not registered"),
        }
    }

    /// Holds off the creation of snapshots while the guard lives. A job whose
    /// compaction filter removed versions newer than every snapshot it
    /// knew of takes it before it checks the live snapshots and keeps it
    /// until its outputs are what readers see: a snapshot made while the
    /// job ran may have read a removed version (the job then gives up its
    /// outputs), and one made after the check reads only the outputs.
    pub(crate) fn hold_creation(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.creation.lock()
    }

    /// Sequences of all live snapshots, ascending, each once.
    pub(crate) fn sequences(&self) -> Vec<SequenceNumber> {
        self.live.lock().keys().copied().collect()
    }

    /// The oldest live snapshot's sequence.
    pub(crate) fn oldest(&self) -> Option<SequenceNumber> {
        self.live.lock().keys().next().copied()
    }

    /// Number of live snapshots (counting clones of one registration once).
    pub(crate) fn len(&self) -> usize {
        self.live.lock().values().sum()
    }
}
