//! The snapshot filter: a cursor over *user keys* as of one snapshot.
//!
//! [`VisibleIter`] wraps any [`InternalIterator`] (memtable, table, sorted
//! run) and stands only on the newest version of each user key whose sequence
//! is `<=` the snapshot. Keys whose versions are all newer than the snapshot
//! are invisible and skipped. Tombstones are *not* skipped here: the merging
//! layer needs them to shadow older sources.
//!
//! The same filter is applied on every path (seek, next, prev, seek_to_last),
//! which is the property the papers' prototypes lost on some paths.
//!
//! Moving backward is the delicate part: internal order puts a key's newest
//! version first, so stepping back from key `K` lands on the *oldest* version
//! of the previous key. If that oldest version is visible, a seek to
//! `(key, snapshot)` finds the newest visible one; if it is not, no version of
//! that key is visible and we step back again.

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{SequenceNumber, ValueKind, MAX_SEQUENCE};

/// Forward steps tried before falling back to a seek when skipping versions.
const STEPS_BEFORE_SEEK: usize = 8;

/// A cursor over user keys at a snapshot. See the module docs.
pub struct VisibleIter {
    inner: Box<dyn InternalIterator>,
    snapshot: SequenceNumber,
    /// Scratch copy of the current user key while the inner cursor moves.
    scratch: Vec<u8>,
    /// `inner.next_key_ignores_key()`: `next` need not copy the key, and
    /// lets the source filter ([`InternalIterator::next_visible_key`]).
    next_key_ignores_key: bool,
}

// A positioned cursor (RocksDB style), not a `std::iter::Iterator`: `next`
// moves and reports errors; the current entry is read separately.
#[allow(clippy::should_implement_trait)]
impl VisibleIter {
    /// Filters `inner` at `snapshot`.
    pub fn new(inner: Box<dyn InternalIterator>, snapshot: SequenceNumber) -> Self {
        VisibleIter {
            next_key_ignores_key: inner.next_key_ignores_key(),
            inner,
            snapshot,
            scratch: Vec::new(),
        }
    }

    /// True when positioned on a visible version.
    #[inline]
    pub fn valid(&self) -> bool {
        self.inner.valid()
    }

    /// Current user key.
    #[inline]
    pub fn key(&self) -> &[u8] {
        self.inner.user_key()
    }

    /// Sequence of the current (newest visible) version.
    #[inline]
    pub fn seq(&self) -> SequenceNumber {
        self.inner.seq()
    }

    /// Kind of the current version.
    #[inline]
    pub fn kind(&self) -> ValueKind {
        self.inner.kind()
    }

    /// Value of the current version; see [`InternalIterator::prepare_value`].
    #[inline]
    pub fn value(&self) -> &[u8] {
        self.inner.value()
    }

    /// Makes the current version's value readable
    /// ([`InternalIterator::prepare_value`]).
    #[inline]
    pub fn prepare_value(&mut self) -> Result<()> {
        self.inner.prepare_value()
    }

    /// Positions on the first visible key.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.inner.seek_to_first()?;
        self.settle_forward()
    }

    /// Positions on the first visible key `>= key`.
    pub fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.inner.seek(key, self.snapshot)?;
        self.settle_forward()
    }

    /// Positions on the last visible key.
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.inner.seek_to_last()?;
        self.settle_backward()
    }

    /// Positions on the last visible key `< key`.
    pub fn seek_before(&mut self, key: &[u8]) -> Result<()> {
        self.inner.seek(key, MAX_SEQUENCE)?;
        if self.inner.valid() {
            self.inner.prev()?;
        } else {
            self.inner.seek_to_last()?;
        }
        self.settle_backward()
    }

    /// Moves to the next visible key. Requires `valid()`.
    #[inline]
    pub fn next(&mut self) -> Result<()> {
        debug_assert!(self.valid());
        if self.next_key_ignores_key {
            return self.inner.next_visible_key(&[], self.snapshot);
        }
        self.next_by_copy()
    }

    /// [`Self::next`] for a source that needs the current key to move past
    /// it: copies it, skips its versions, and filters here.
    fn next_by_copy(&mut self) -> Result<()> {
        self.scratch.clear();
        self.scratch.extend_from_slice(self.inner.user_key());
        // The source decides how (see [`InternalIterator::next_key`]).
        self.inner.next_key(&self.scratch)?;
        self.settle_forward()
    }

    /// Moves to the previous visible key. Requires `valid()`.
    pub fn prev(&mut self) -> Result<()> {
        debug_assert!(self.valid());
        self.scratch.clear();
        self.scratch.extend_from_slice(self.inner.user_key());
        // The first (newest) version of the current key, then one step back:
        // the oldest version of the previous key.
        self.inner.seek(&self.scratch, MAX_SEQUENCE)?;
        if self.inner.valid() {
            self.inner.prev()?;
        } else {
            self.inner.seek_to_last()?;
        }
        self.settle_backward()
    }

    /// From any entry, moves forward to the newest visible version of the
    /// first key (at or after the current entry's key) that has one.
    fn settle_forward(&mut self) -> Result<()> {
        let mut steps = 0;
        while self.inner.valid() && self.inner.seq() > self.snapshot {
            steps += 1;
            if steps <= STEPS_BEFORE_SEEK {
                self.inner.next()?;
            } else {
                // Jump over this key's invisible versions.
                self.scratch.clear();
                self.scratch.extend_from_slice(self.inner.user_key());
                self.inner.seek(&self.scratch, self.snapshot)?;
                steps = 0;
            }
        }
        Ok(())
    }

    /// From the *oldest* version of some key, moves to the newest visible
    /// version of the last key (at or before it) that has one.
    fn settle_backward(&mut self) -> Result<()> {
        while self.inner.valid() {
            if self.inner.seq() <= self.snapshot {
                // The key has a visible version; land on the newest one.
                self.scratch.clear();
                self.scratch.extend_from_slice(self.inner.user_key());
                self.inner.seek(&self.scratch, self.snapshot)?;
                debug_assert!(
                    self.inner.valid() && self.inner.user_key() == self.scratch.as_slice()
                );
                return Ok(());
            }
            // Even the oldest version is too new: the whole key is invisible.
            self.scratch.clear();
            self.scratch.extend_from_slice(self.inner.user_key());
            self.inner.seek(&self.scratch, MAX_SEQUENCE)?;
            if self.inner.valid() {
                self.inner.prev()?;
            } else {
                return Ok(());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::VecIter;

    fn entries() -> Vec<(Vec<u8>, u64, ValueKind, Vec<u8>)> {
        let e = |k: &str, s: u64, kind: ValueKind| {
            (
                k.as_bytes().to_vec(),
                s,
                kind,
                format!("{k}{s}").into_bytes(),
            )
        };
        vec![
            e("a", 9, ValueKind::Put),
            e("a", 3, ValueKind::Put),
            e("b", 12, ValueKind::Put), // invisible at 10
            e("c", 8, ValueKind::Delete),
            e("c", 2, ValueKind::Put),
            e("d", 15, ValueKind::Put),
            e("d", 11, ValueKind::Put), // d invisible at 10
            e("e", 1, ValueKind::Put),
        ]
    }

    fn collect_fwd(it: &mut VisibleIter) -> Vec<(String, u64)> {
        let mut out = vec![];
        it.seek_to_first().unwrap();
        while it.valid() {
            out.push((String::from_utf8(it.key().to_vec()).unwrap(), it.seq()));
            it.next().unwrap();
        }
        out
    }

    fn collect_bwd(it: &mut VisibleIter) -> Vec<(String, u64)> {
        let mut out = vec![];
        it.seek_to_last().unwrap();
        while it.valid() {
            out.push((String::from_utf8(it.key().to_vec()).unwrap(), it.seq()));
            it.prev().unwrap();
        }
        out.reverse();
        out
    }

    #[test]
    fn filters_by_snapshot_both_directions() {
        for (snap, want) in [
            (10, vec![("a", 9), ("c", 8), ("e", 1)]),
            (5, vec![("a", 3), ("c", 2), ("e", 1)]),
            (
                100,
                vec![("a", 9), ("b", 12), ("c", 8), ("d", 15), ("e", 1)],
            ),
            (0, vec![]),
        ] {
            let want: Vec<(String, u64)> =
                want.into_iter().map(|(k, s)| (k.to_string(), s)).collect();
            let mut it = VisibleIter::new(Box::new(VecIter::new(entries())), snap);
            assert_eq!(collect_fwd(&mut it), want, "forward at {snap}");
            assert_eq!(collect_bwd(&mut it), want, "backward at {snap}");
        }
    }

    #[test]
    fn seek_and_seek_before_respect_snapshot() {
        let mut it = VisibleIter::new(Box::new(VecIter::new(entries())), 10);
        it.seek(b"b").unwrap();
        assert_eq!((it.key(), it.seq()), (&b"c"[..], 8));
        it.seek_before(b"e").unwrap();
        assert_eq!((it.key(), it.seq()), (&b"c"[..], 8));
        it.seek_before(b"a").unwrap();
        assert!(!it.valid());
        it.seek_before(b"zzz").unwrap();
        assert_eq!(it.key(), b"e");
        it.prev().unwrap();
        assert_eq!(it.key(), b"c");
        it.next().unwrap();
        assert_eq!(it.key(), b"e");
    }

    #[test]
    fn many_versions_take_the_seek_path() {
        let mut v = vec![];
        for s in (1..=50u64).rev() {
            v.push((b"k".to_vec(), s, ValueKind::Put, vec![]));
        }
        v.push((b"m".to_vec(), 1, ValueKind::Put, vec![]));
        let mut it = VisibleIter::new(Box::new(VecIter::new(v)), 20);
        it.seek_to_first().unwrap();
        assert_eq!((it.key(), it.seq()), (&b"k"[..], 20));
        it.next().unwrap();
        assert_eq!(it.key(), b"m");
        it.prev().unwrap();
        assert_eq!((it.key(), it.seq()), (&b"k"[..], 20));
    }
}
