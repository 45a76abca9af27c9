//! Merging cursors.
//!
//! * [`MergingIter`] merges snapshot-filtered sources ([`VisibleIter`]) by
//!   user key, in both directions: where several sources hold the same key,
//!   the version with the highest sequence wins. It is the read path's view of
//!   all layers at once; sources are few (memtables + UnsortedStore tables +
//!   one sorted run), so a linear scan for the minimum beats a heap and makes
//!   direction changes trivial.
//! * [`MergedEntries`] merges internal iterators into one forward stream of
//!   every version in internal order: the input of flush and merge.

use std::cmp::Ordering;

use super::visible::VisibleIter;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{compare_positions, SequenceNumber, ValueKind};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Direction {
    Forward,
    Backward,
}

/// Key-level merge of snapshot-filtered sources. See the module docs.
pub struct MergingIter {
    children: Vec<VisibleIter>,
    current: Option<usize>,
    direction: Direction,
    scratch: Vec<u8>,
}

// A positioned cursor (RocksDB style), not a `std::iter::Iterator`: `next`
// moves and reports errors; the current entry is read separately.
#[allow(clippy::should_implement_trait)]
impl MergingIter {
    /// Merges `children` (all filtered at the same snapshot).
    pub fn new(children: Vec<VisibleIter>) -> Self {
        MergingIter {
            children,
            current: None,
            direction: Direction::Forward,
            scratch: Vec::new(),
        }
    }

    /// True when positioned on a key.
    pub fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn cur(&self) -> &VisibleIter {
        &self.children[self.current.expect("MergingIter not valid")]
    }

    /// Current key.
    pub fn key(&self) -> &[u8] {
        self.cur().key()
    }
    /// Sequence of the winning version.
    pub fn seq(&self) -> SequenceNumber {
        self.cur().seq()
    }
    /// Kind of the winning version (tombstones are reported, not skipped).
    pub fn kind(&self) -> ValueKind {
        self.cur().kind()
    }
    /// Value of the winning version.
    pub fn value(&self) -> &[u8] {
        self.cur().value()
    }

    /// Positions on the first key.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.run(|c| c.seek_to_first())?;
        self.direction = Direction::Forward;
        self.pick(Direction::Forward);
        Ok(())
    }

    /// Positions on the last key.
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.run(|c| c.seek_to_last())?;
        self.direction = Direction::Backward;
        self.pick(Direction::Backward);
        Ok(())
    }

    /// Positions on the first key `>= key`.
    pub fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.run(|c| c.seek(key))?;
        self.direction = Direction::Forward;
        self.pick(Direction::Forward);
        Ok(())
    }

    /// Positions on the last key `< key`.
    pub fn seek_before(&mut self, key: &[u8]) -> Result<()> {
        self.run(|c| c.seek_before(key))?;
        self.direction = Direction::Backward;
        self.pick(Direction::Backward);
        Ok(())
    }

    /// Moves to the next key. Requires `valid()`.
    pub fn next(&mut self) -> Result<()> {
        let mut key = std::mem::take(&mut self.scratch);
        key.clear();
        key.extend_from_slice(self.key());
        let r = if self.direction == Direction::Forward {
            // Every child is at a key >= current; advance those on it.
            self.run(|c| {
                if c.valid() && c.key() == key.as_slice() {
                    c.next()
                } else {
                    Ok(())
                }
            })
        } else {
            self.run(|c| {
                c.seek(&key)?;
                if c.valid() && c.key() == key.as_slice() {
                    c.next()?;
                }
                Ok(())
            })
        };
        self.scratch = key;
        r?;
        self.direction = Direction::Forward;
        self.pick(Direction::Forward);
        Ok(())
    }

    /// Moves to the previous key. Requires `valid()`.
    pub fn prev(&mut self) -> Result<()> {
        let mut key = std::mem::take(&mut self.scratch);
        key.clear();
        key.extend_from_slice(self.key());
        let r = if self.direction == Direction::Backward {
            self.run(|c| {
                if c.valid() && c.key() == key.as_slice() {
                    c.prev()
                } else {
                    Ok(())
                }
            })
        } else {
            self.run(|c| c.seek_before(&key))
        };
        self.scratch = key;
        r?;
        self.direction = Direction::Backward;
        self.pick(Direction::Backward);
        Ok(())
    }

    fn run(&mut self, mut f: impl FnMut(&mut VisibleIter) -> Result<()>) -> Result<()> {
        for c in &mut self.children {
            if let Err(e) = f(c) {
                self.current = None;
                return Err(e);
            }
        }
        Ok(())
    }

    /// Chooses the smallest (forward) or largest (backward) key; among equal
    /// keys, the highest sequence.
    fn pick(&mut self, dir: Direction) {
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate() {
            if !c.valid() {
                continue;
            }
            best = match best {
                None => Some(i),
                Some(b) => {
                    let bc = &self.children[b];
                    let ord = c.key().cmp(bc.key());
                    let better = match (dir, ord) {
                        (_, Ordering::Equal) => c.seq() > bc.seq(),
                        (Direction::Forward, o) => o == Ordering::Less,
                        (Direction::Backward, o) => o == Ordering::Greater,
                    };
                    Some(if better { i } else { b })
                }
            };
        }
        self.current = best;
    }
}

/// Forward-only merge of internal iterators into one stream of every version,
/// in internal order. Sources must not share a `(user_key, seq)` position.
pub struct MergedEntries {
    children: Vec<Box<dyn InternalIterator>>,
    current: Option<usize>,
}

// A positioned cursor (RocksDB style), not a `std::iter::Iterator`: `next`
// moves and reports errors; the current entry is read separately.
#[allow(clippy::should_implement_trait)]
impl MergedEntries {
    /// Merges `children`; call [`MergedEntries::seek_to_first`] before use.
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergedEntries {
            children,
            current: None,
        }
    }

    /// Positions every child on its first entry.
    pub fn seek_to_first(&mut self) -> Result<()> {
        for c in &mut self.children {
            c.seek_to_first()?;
        }
        self.pick();
        Ok(())
    }

    /// Positions on the first entry at or after `(key, seq)`.
    pub fn seek(&mut self, key: &[u8], seq: SequenceNumber) -> Result<()> {
        for c in &mut self.children {
            c.seek(key, seq)?;
        }
        self.pick();
        Ok(())
    }

    /// True when positioned on an entry.
    pub fn valid(&self) -> bool {
        self.current.is_some()
    }

    /// Moves to the next entry.
    pub fn next(&mut self) -> Result<()> {
        if let Some(i) = self.current {
            self.children[i].next()?;
        }
        self.pick();
        Ok(())
    }

    /// The current entry's source.
    pub fn entry(&self) -> &dyn InternalIterator {
        self.children[self.current.expect("MergedEntries not valid")].as_ref()
    }

    fn pick(&mut self) {
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate() {
            if !c.valid() {
                continue;
            }
            best = match best {
                None => Some(i),
                Some(b) => {
                    let bc = &self.children[b];
                    let ord = compare_positions(c.user_key(), c.seq(), bc.user_key(), bc.seq());
                    debug_assert_ne!(ord, Ordering::Equal, "two sources hold the same version");
                    Some(if ord == Ordering::Less { i } else { b })
                }
            };
        }
        self.current = best;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::VecIter;

    fn src(v: &[(&str, u64, ValueKind)]) -> VecIter {
        VecIter::new(
            v.iter()
                .map(|(k, s, kind)| {
                    (
                        k.as_bytes().to_vec(),
                        *s,
                        *kind,
                        format!("{k}@{s}").into_bytes(),
                    )
                })
                .collect(),
        )
    }

    #[test]
    fn newest_version_wins_in_both_directions() {
        use ValueKind::*;
        let make = |snap| {
            MergingIter::new(vec![
                VisibleIter::new(Box::new(src(&[("a", 10, Put), ("c", 11, Delete)])), snap),
                VisibleIter::new(
                    Box::new(src(&[("a", 5, Put), ("b", 6, Put), ("c", 4, Put)])),
                    snap,
                ),
                VisibleIter::new(Box::new(src(&[("b", 1, Put), ("d", 2, Put)])), snap),
            ])
        };
        let mut m = make(100);
        m.seek_to_first().unwrap();
        let mut fwd = vec![];
        while m.valid() {
            fwd.push((m.key().to_vec(), m.seq(), m.kind()));
            m.next().unwrap();
        }
        let want = vec![
            (b"a".to_vec(), 10, Put),
            (b"b".to_vec(), 6, Put),
            (b"c".to_vec(), 11, Delete),
            (b"d".to_vec(), 2, Put),
        ];
        assert_eq!(fwd, want);
        m.seek_to_last().unwrap();
        let mut bwd = vec![];
        while m.valid() {
            bwd.push((m.key().to_vec(), m.seq(), m.kind()));
            m.prev().unwrap();
        }
        bwd.reverse();
        assert_eq!(bwd, want);
        // Direction changes in the middle.
        m.seek(b"b").unwrap();
        assert_eq!(m.key(), b"b");
        m.prev().unwrap();
        assert_eq!(m.key(), b"a");
        m.next().unwrap();
        assert_eq!(m.key(), b"b");
        m.next().unwrap();
        assert_eq!((m.key(), m.seq()), (&b"c"[..], 11));
        m.prev().unwrap();
        m.prev().unwrap();
        assert_eq!(m.key(), b"a");
        // At snapshot 7, c's newest visible is the put at 4.
        let mut m = make(7);
        m.seek(b"c").unwrap();
        assert_eq!((m.key(), m.seq(), m.kind()), (&b"c"[..], 4, Put));
    }

    #[test]
    fn merged_entries_interleave_versions() {
        use ValueKind::*;
        let mut m = MergedEntries::new(vec![
            Box::new(src(&[("a", 10, Put), ("b", 3, Put)])),
            Box::new(src(&[("a", 7, Put), ("b", 9, Delete)])),
        ]);
        m.seek_to_first().unwrap();
        let mut got = vec![];
        while m.valid() {
            got.push((m.entry().user_key().to_vec(), m.entry().seq()));
            m.next().unwrap();
        }
        assert_eq!(
            got,
            vec![
                (b"a".to_vec(), 10),
                (b"a".to_vec(), 7),
                (b"b".to_vec(), 9),
                (b"b".to_vec(), 3)
            ]
        );
    }
}
