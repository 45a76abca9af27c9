//! Merging cursors.
//!
//! * [`MergingIter`] merges snapshot-filtered sources ([`VisibleIter`]) by
//!   user key, in both directions: where several sources hold the same key,
//!   the version with the highest sequence wins. It is the read path's view of
//!   all layers at once: memtables, one run per UnsortedStore table of the
//!   fullest partition, one sorted run. Going forward (seeks, `next`: nearly
//!   every scan) the sources sit in a binary min-heap, so a step compares
//!   about log₂(sources) keys; a partitioned store gives a scan many
//!   sources, and the linear pick was the largest single cost of a
//!   `seek + 10` after the block reads. Going backward, a linear scan finds
//!   the maximum (rare, and it keeps direction changes simple).
//! * [`MergedEntries`] merges internal iterators into one forward stream of
//!   every version in internal order: the input of flush and merge.

use std::cmp::Ordering;

use super::visible::VisibleIter;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{compare_positions, compare_user_keys, same_user_key, SequenceNumber, ValueKind};

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
    /// Going forward: the valid children by (key, newest first), its top
    /// the current one. Empty going backward.
    heap: SourceHeap,
    scratch: Vec<u8>,
}

// A positioned cursor (RocksDB style), not a `std::iter::Iterator`: `next`
// moves and reports errors; the current entry is read separately.
#[allow(clippy::should_implement_trait)]
impl MergingIter {
    /// Merges `children` (all filtered at the same snapshot).
    pub fn new(children: Vec<VisibleIter>) -> Self {
        let heap = SourceHeap::with_capacity(children.len());
        MergingIter {
            children,
            current: None,
            direction: Direction::Forward,
            heap,
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
    /// Value of the winning version, once prepared ([`Self::prepare_value`]).
    pub fn value(&self) -> &[u8] {
        self.cur().value()
    }
    /// Makes the winning version's value readable
    /// ([`crate::iter::InternalIterator::prepare_value`]).
    pub fn prepare_value(&mut self) -> Result<()> {
        let i = self.current.expect("MergingIter not valid");
        self.children[i].prepare_value()
    }

    /// Positions on the first key.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.run(|c| c.seek_to_first())?;
        self.build_heap();
        Ok(())
    }

    /// Positions on the last key.
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.run(|c| c.seek_to_last())?;
        self.pick_last();
        Ok(())
    }

    /// Positions on the first key `>= key`.
    pub fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.run(|c| c.seek(key))?;
        self.build_heap();
        Ok(())
    }

    /// Positions on the last key `< key`.
    pub fn seek_before(&mut self, key: &[u8]) -> Result<()> {
        self.run(|c| c.seek_before(key))?;
        self.pick_last();
        Ok(())
    }

    /// Moves to the next key. Requires `valid()`.
    pub fn next(&mut self) -> Result<()> {
        if self.direction == Direction::Forward && self.children.len() == 1 {
            return self.advance_only_child();
        }
        let mut key = std::mem::take(&mut self.scratch);
        key.clear();
        key.extend_from_slice(self.key());
        let r = if self.direction == Direction::Forward {
            self.advance_heap_past(&key)
        } else {
            // Every child moves to the first key after the current one.
            self.run(|c| {
                c.seek(&key)?;
                if c.valid() && same_user_key(c.key(), &key) {
                    c.next()?;
                }
                Ok(())
            })
            .map(|()| self.build_heap())
        };
        self.scratch = key;
        r
    }

    /// Going forward, every child is at a key `>= key` and those on `key`
    /// lead the heap: advances each of them, restoring the heap after each.
    fn advance_heap_past(&mut self, key: &[u8]) -> Result<()> {
        while let Some(top) = self.heap.top() {
            let c = &mut self.children[top];
            if !same_user_key(c.key(), key) {
                break;
            }
            if let Err(e) = c.next() {
                self.heap.clear();
                self.current = None;
                return Err(e);
            }
            let children = &self.children;
            self.heap
                .repair_top(children[top].valid(), |a, b| visible_before(children, a, b));
        }
        self.current = self.heap.top();
        Ok(())
    }

    /// [`Self::next`] over a single source going forward: it holds each key
    /// once (a [`VisibleIter`]), so it just steps, with no copy of the key
    /// to carry past and no comparison (a memtable-only store scans so).
    fn advance_only_child(&mut self) -> Result<()> {
        debug_assert_eq!(self.heap.top(), Some(0));
        if let Err(e) = self.children[0].next() {
            self.heap.clear();
            self.current = None;
            return Err(e);
        }
        if !self.children[0].valid() {
            self.heap.clear();
        }
        self.current = self.heap.top();
        Ok(())
    }

    /// Going forward from freshly positioned children: heaps the valid ones.
    fn build_heap(&mut self) {
        self.direction = Direction::Forward;
        let children = &self.children;
        self.heap.rebuild(
            children.len(),
            |i| children[i].valid(),
            |a, b| visible_before(children, a, b),
        );
        self.current = self.heap.top();
    }

    /// Moves to the previous key. Requires `valid()`.
    pub fn prev(&mut self) -> Result<()> {
        let mut key = std::mem::take(&mut self.scratch);
        key.clear();
        key.extend_from_slice(self.key());
        let r = if self.direction == Direction::Backward {
            self.run(|c| {
                if c.valid() && same_user_key(c.key(), &key) {
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
        self.pick_last();
        Ok(())
    }

    fn run(&mut self, mut f: impl FnMut(&mut VisibleIter) -> Result<()>) -> Result<()> {
        for c in &mut self.children {
            if let Err(e) = f(c) {
                self.current = None;
                self.heap.clear();
                return Err(e);
            }
        }
        Ok(())
    }

    /// Going backward: chooses the largest key; among equal keys, the
    /// highest sequence.
    fn pick_last(&mut self) {
        self.direction = Direction::Backward;
        self.heap.clear();
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate() {
            if !c.valid() {
                continue;
            }
            best = match best {
                None => Some(i),
                Some(b) => {
                    let bc = &self.children[b];
                    let better = match compare_user_keys(c.key(), bc.key()) {
                        Ordering::Equal => c.seq() > bc.seq(),
                        o => o == Ordering::Greater,
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
///
/// The valid children sit in a binary min-heap ordered by position, so a
/// step compares about log₂(children) pairs instead of every child (a merge
/// of a full UnsortedStore reads eight or more tables: the linear pick
/// stood out in the profile of a long `fillrandom,overwrite`, background
/// thread included, in key compares and virtual calls).
pub struct MergedEntries {
    children: Vec<Box<dyn InternalIterator>>,
    /// The valid children by position, the smallest on top.
    heap: SourceHeap,
}

// A positioned cursor (RocksDB style), not a `std::iter::Iterator`: `next`
// moves and reports errors; the current entry is read separately.
#[allow(clippy::should_implement_trait)]
impl MergedEntries {
    /// Merges `children`; call [`MergedEntries::seek_to_first`] before use.
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        let heap = SourceHeap::with_capacity(children.len());
        MergedEntries { children, heap }
    }

    /// Positions every child on its first entry.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.heap.clear();
        for c in &mut self.children {
            c.seek_to_first()?;
        }
        self.build_heap();
        Ok(())
    }

    /// Positions on the first entry at or after `(key, seq)`.
    pub fn seek(&mut self, key: &[u8], seq: SequenceNumber) -> Result<()> {
        self.heap.clear();
        for c in &mut self.children {
            c.seek(key, seq)?;
        }
        self.build_heap();
        Ok(())
    }

    /// True when positioned on an entry.
    pub fn valid(&self) -> bool {
        !self.heap.is_empty()
    }

    /// Moves to the next entry. On error the merge is left invalid.
    pub fn next(&mut self) -> Result<()> {
        let Some(top) = self.heap.top() else {
            return Ok(());
        };
        if let Err(e) = self.children[top].next() {
            self.heap.clear();
            return Err(e);
        }
        let children = &self.children;
        self.heap
            .repair_top(children[top].valid(), |a, b| entry_before(children, a, b));
        Ok(())
    }

    /// The current entry's source.
    pub fn entry(&self) -> &dyn InternalIterator {
        self.children[self.heap.top().expect("MergedEntries not valid")].as_ref()
    }

    fn build_heap(&mut self) {
        let children = &self.children;
        self.heap.rebuild(
            children.len(),
            |i| children[i].valid(),
            |a, b| entry_before(children, a, b),
        );
    }
}

/// True if visible source `a` comes before `b` going forward: a smaller
/// key, or the same key with a newer version.
fn visible_before(children: &[VisibleIter], a: usize, b: usize) -> bool {
    let (a, b) = (&children[a], &children[b]);
    compare_positions(a.key(), a.seq(), b.key(), b.seq()) == Ordering::Less
}

/// True if entry source `a` is positioned before `b` (internal order).
fn entry_before(children: &[Box<dyn InternalIterator>], a: usize, b: usize) -> bool {
    let (a, b) = (&children[a], &children[b]);
    let ord = compare_positions(a.user_key(), a.seq(), b.user_key(), b.seq());
    debug_assert_ne!(ord, Ordering::Equal, "two sources hold the same version");
    ord == Ordering::Less
}

/// A binary min-heap of source indices, ordered by a `before(a, b)` the
/// caller passes to each call (the sources live beside the heap, not in
/// it). Both merges keep their valid sources here going forward.
struct SourceHeap(Vec<usize>);

impl SourceHeap {
    fn with_capacity(n: usize) -> SourceHeap {
        SourceHeap(Vec::with_capacity(n))
    }

    /// The smallest source.
    fn top(&self) -> Option<usize> {
        self.0.first().copied()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn clear(&mut self) {
        self.0.clear();
    }

    /// Heaps the sources among `0..n` that are `valid`.
    fn rebuild(
        &mut self,
        n: usize,
        valid: impl Fn(usize) -> bool,
        before: impl Fn(usize, usize) -> bool,
    ) {
        self.0.clear();
        self.0.extend((0..n).filter(|&i| valid(i)));
        for i in (0..self.0.len() / 2).rev() {
            self.sift_down(i, &before);
        }
    }

    /// The top source has moved on: drops it if it is now exhausted
    /// (`!top_valid`), then restores the order.
    fn repair_top(&mut self, top_valid: bool, before: impl Fn(usize, usize) -> bool) {
        if !top_valid {
            let last = self.0.pop().expect("repair_top on an empty heap");
            if self.0.is_empty() {
                return;
            }
            self.0[0] = last;
        }
        self.sift_down(0, &before);
    }

    /// Restores the order below `i`.
    fn sift_down(&mut self, mut i: usize, before: &impl Fn(usize, usize) -> bool) {
        let h = &mut self.0;
        let n = h.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut least = i;
            if l < n && before(h[l], h[least]) {
                least = l;
            }
            if r < n && before(h[r], h[least]) {
                least = r;
            }
            if least == i {
                return;
            }
            h.swap(i, least);
            i = least;
        }
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

    /// Many sources of random, disjoint versions (some empty): the merge
    /// yields exactly their union in internal order, from the start and
    /// from seeks anywhere.
    #[test]
    fn merged_entries_match_a_sorted_model() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        let mut rng = StdRng::seed_from_u64(0x6d65);
        for round in 0..50 {
            let n = rng.gen_range(1..12);
            let mut all: Vec<(Vec<u8>, u64)> = Vec::new();
            let mut sources: Vec<Vec<(Vec<u8>, u64, ValueKind)>> = vec![Vec::new(); n];
            let mut seq = 0u64;
            for _ in 0..rng.gen_range(0..300) {
                seq += 1;
                let key = format!("k{:03}", rng.gen_range(0..60)).into_bytes();
                sources[rng.gen_range(0..n)].push((key.clone(), seq, ValueKind::Put));
                all.push((key, seq));
            }
            let order =
                |a: &(Vec<u8>, u64), b: &(Vec<u8>, u64)| compare_positions(&a.0, a.1, &b.0, b.1);
            all.sort_by(order);
            let children: Vec<Box<dyn InternalIterator>> = sources
                .into_iter()
                .map(|mut v| {
                    v.sort_by(|a, b| compare_positions(&a.0, a.1, &b.0, b.1));
                    let entries = v
                        .into_iter()
                        .map(|(k, s, kind)| (k, s, kind, Vec::new()))
                        .collect();
                    Box::new(VecIter::new(entries)) as Box<dyn InternalIterator>
                })
                .collect();
            let mut m = MergedEntries::new(children);
            let collect = |m: &mut MergedEntries| {
                let mut got = Vec::new();
                while m.valid() {
                    got.push((m.entry().user_key().to_vec(), m.entry().seq()));
                    m.next().unwrap();
                }
                got
            };
            m.seek_to_first().unwrap();
            assert_eq!(collect(&mut m), all, "round {round}: whole merge");
            for _ in 0..5 {
                let key = format!("k{:03}", rng.gen_range(0..61)).into_bytes();
                let at = rng.gen_range(0..=seq + 1);
                m.seek(&key, at).unwrap();
                let want: Vec<_> = all
                    .iter()
                    .filter(|e| order(e, &(key.clone(), at)) != Ordering::Less)
                    .cloned()
                    .collect();
                assert_eq!(collect(&mut m), want, "round {round}: seek {key:?}@{at}");
            }
        }
    }
}
