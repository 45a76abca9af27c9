//! The `skiplist` memtable: a lock-free skiplist with one node per version,
//! modelled on RocksDB's `InlineSkipList` (the baseline of DESIGN "Memtable").
//!
//! # Node layout
//!
//! A node is one arena allocation, 8-byte aligned, addressed by a pointer to
//! its level-0 link. Higher links sit *before* that address, so a node of
//! height `h` carries exactly `h` links and no height field (as RocksDB):
//!
//! ```text
//!   [link h-1] .. [link 1] [link 0] [trailer u64] [key_len u32] [value_len u32] [key] [value]
//!                          ^ node pointer
//! ```
//!
//! Fixed cost is `8 * h + 16` bytes (`h` averages 4/3), plus padding to the
//! next 8-byte boundary. The trailer is `seq << 8 | kind` as in
//! [`crate::key`]; key and value bytes are stored inline so a search touches
//! one cache line per step for short keys. The head node has the maximum
//! height and an empty key and is never compared.
//!
//! Ordering is internal order (user key ascending, sequence descending),
//! compared directly on the key bytes and the sequence: there is no
//! comparator indirection on the hot path.
//!
//! Searches prefetch as RocksDB's do: every step requests the node after
//! the candidate (`PREFETCH(next->Next(level))`), and an insert's descent
//! also the candidate's successor one level down
//! (`FindSpliceForLevel<true>`). This list is the baseline every other
//! kind is measured against, so it keeps the optimisations of the list it
//! models (uniform puts are faster with them:
//! `bench/journal/2026-11-26-02-fair-skiplist-baseline.md`, "A fair
//! baseline, a cheaper new-key insert, writers apart in memory", item 2).
//!
//! # Concurrency
//!
//! Writers insert without locks, as RocksDB's `InlineSkipList::Insert<true>`:
//!
//! 1. The node is allocated and fully written (key, value, trailer, all
//!    links null) by its writer alone; nobody else can reach it yet.
//! 2. A *splice* (`prev[i] < node < next[i]` for every level) is computed
//!    from the top of the list down.
//! 3. Level by level, bottom-up, the writer stores `next[i]` in the node's
//!    link `i` and CASes `prev[i].link[i]` from `next[i]` to the node. If the
//!    CAS fails, another node was linked between `prev[i]` and `next[i]`;
//!    the splice of that level is recomputed starting from `prev[i]` (still
//!    a valid lower bound, since nodes are never removed) and the CAS
//!    retried.
//!
//! A successful CAS at level `i` proves `prev[i].link[i] == next[i]` at that
//! instant, so every level is a sorted list at all times. The insert takes
//! effect (linearizes) at its level-0 CAS: from then on every search finds
//! the node, before it none does. Because levels are linked bottom-up, a
//! node reachable at level `i + 1` is already in level `i`, so a search that
//! descends from a node it found at a higher level stays correct.
//!
//! Readers never see a partial node: the CAS that links a node (AcqRel) is
//! ordered after every plain write into it, and readers load links with
//! Acquire. A node reached through a link written by a *different* inserter
//! (its neighbour's link, stored Relaxed before that neighbour's CAS) is
//! covered too: that inserter itself Acquire-loaded the node pointer before
//! storing it, so the original writes happen-before its Release CAS, which
//! the reader synchronises with. A reader only ever follows link `i` of a
//! node it reached at a level `>= i`, and those links were written before
//! the node was published at that level.
//!
//! Memory is never reclaimed while the list lives (the arena goes with the
//! last `Arc`), so there is no ABA problem and no epoch scheme is needed.

use std::cmp::Ordering as CmpOrdering;

use std::mem;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Arc;

use super::arena::Arena;
use super::height::{random_height, MAX_HEIGHT};
use super::{Found, Memtable, MemtableKind};
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::compares;
use crate::key::{pack_trailer, SequenceNumber, ValueKind, MAX_KEY_SIZE, MAX_VALUE_SIZE};
use crate::util::prefetch::prefetch_line;
use crate::util::stripe::CacheLine;

/// Bytes of one link.
const LINK_SIZE: usize = mem::size_of::<AtomicPtr<u8>>();
/// Offsets from the node pointer (the address of link 0).
const TRAILER_OFFSET: usize = LINK_SIZE;
const KEY_LEN_OFFSET: usize = TRAILER_OFFSET + 8;
const VALUE_LEN_OFFSET: usize = KEY_LEN_OFFSET + 4;
const KEY_OFFSET: usize = VALUE_LEN_OFFSET + 4;
/// Alignment of a node allocation (links and the trailer are 8-byte words).
const NODE_ALIGN: usize = 8;

/// A handle to a published (fully initialised) node of some list.
///
/// Invariant (module-private): a `Node` is created only for the head or for a
/// pointer read from a link, i.e. for a node fully written before it was
/// published; it is used only while the list that owns its arena is alive
/// (under `&SkipListMemtable`, or in an iterator that holds the `Arc`).
/// Link `i` is accessed only for `i` below the node's height.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Node(NonNull<u8>);

// SAFETY: a node is immutable after publication except for its links, which
// are atomics; its memory lives as long as the list's arena, and the handle
// is only used while the list is alive (see the invariant above).
unsafe impl Send for Node {}
// SAFETY: as for `Send`: shared access only reads immutable bytes or atomics.
unsafe impl Sync for Node {}

impl Node {
    #[inline]
    fn link(self, level: usize) -> &'static AtomicPtr<u8> {
        debug_assert!(level < MAX_HEIGHT);
        // SAFETY: links of levels below the node's height are at
        // `node - level * 8`, inside the node's allocation, 8-aligned and
        // initialised (to null or a node) before publication. The 'static
        // lifetime is confined to this module: callers keep the arena alive
        // (see the `Node` invariant).
        unsafe {
            &*self
                .0
                .as_ptr()
                .sub(level * LINK_SIZE)
                .cast::<AtomicPtr<u8>>()
        }
    }

    /// The successor at `level`; Acquire so the successor's contents are
    /// visible.
    #[inline]
    fn next(self, level: usize) -> Option<Node> {
        NonNull::new(self.link(level).load(Ordering::Acquire)).map(Node)
    }

    /// Hints the CPU to load the node after this one at `level`, as
    /// RocksDB's `InlineSkipList` does on every step of its searches
    /// (`PREFETCH(next->Next(level))`): the baseline keeps the prefetches
    /// of the list it models, so the other kinds are measured against it
    /// and not against a slower list.
    #[inline]
    fn prefetch_next(self, level: usize) {
        // Relaxed: the pointer only feeds a prefetch hint, never a read.
        prefetch_line(self.link(level).load(Ordering::Relaxed));
    }

    /// Sets a link of a node not yet published at `level` (only its writer
    /// can see the link; the CAS that publishes it orders this store).
    #[inline]
    fn set_next_unpublished(self, level: usize, next: Option<Node>) {
        self.link(level).store(as_ptr(next), Ordering::Relaxed);
    }

    /// Links `new` after `self` at `level` if `self`'s successor is still
    /// `expected`. AcqRel: Release publishes `new`'s contents.
    #[inline]
    fn cas_next(self, level: usize, expected: Option<Node>, new: Node) -> bool {
        self.link(level)
            .compare_exchange(
                as_ptr(expected),
                new.0.as_ptr(),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    #[inline]
    fn trailer(self) -> u64 {
        // SAFETY: the trailer is 8-aligned (node pointer is 8-aligned), inside
        // the allocation and written before publication; never modified.
        unsafe { self.0.as_ptr().add(TRAILER_OFFSET).cast::<u64>().read() }
    }

    #[inline]
    fn seq(self) -> SequenceNumber {
        self.trailer() >> 8
    }

    #[inline]
    fn kind(self) -> ValueKind {
        // Only `insert` writes tags, from a `ValueKind`, so anything but a
        // delete is a put.
        match self.trailer() & 0xff {
            0 => ValueKind::Delete,
            _ => ValueKind::Put,
        }
    }

    #[inline]
    fn lens(self) -> (usize, usize) {
        // SAFETY: both lengths are 4-aligned u32s inside the allocation,
        // written before publication and never modified.
        unsafe {
            let p = self.0.as_ptr();
            (
                p.add(KEY_LEN_OFFSET).cast::<u32>().read() as usize,
                p.add(VALUE_LEN_OFFSET).cast::<u32>().read() as usize,
            )
        }
    }

    /// The user key. The caller bounds the lifetime by the list's.
    #[inline]
    fn user_key<'a>(self) -> &'a [u8] {
        let (klen, _) = self.lens();
        // SAFETY: `klen` key bytes follow the header inside the allocation,
        // written before publication and never modified; the arena outlives
        // `'a` (see the `Node` invariant).
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().add(KEY_OFFSET), klen) }
    }

    /// The value. The caller bounds the lifetime by the list's.
    #[inline]
    fn value<'a>(self) -> &'a [u8] {
        let (klen, vlen) = self.lens();
        // SAFETY: as `user_key`: `vlen` value bytes follow the key.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().add(KEY_OFFSET + klen), vlen) }
    }

    /// Internal order of this node against `(key, seq)`.
    #[inline]
    fn cmp_to(self, key: &[u8], seq: SequenceNumber) -> CmpOrdering {
        match compares::cmp(self.user_key(), key) {
            CmpOrdering::Equal => seq.cmp(&self.seq()),
            o => o,
        }
    }

    /// True when this node sorts strictly before `(key, seq)`.
    #[inline]
    fn is_before(self, key: &[u8], seq: SequenceNumber) -> bool {
        self.cmp_to(key, seq) == CmpOrdering::Less
    }
}

#[inline]
fn as_ptr(n: Option<Node>) -> *mut u8 {
    n.map_or(ptr::null_mut(), |n| n.0.as_ptr())
}

/// Append-only concurrent skiplist memtable, one node per version.
pub struct SkipListMemtable {
    /// Range deletes written to it (`crate::range_delete`).
    range_tombstones: crate::range_delete::MemRangeTombstones,
    arena: Arena,
    head: Node,
    /// Height of the tallest tower so far; searches start there. Relaxed: a
    /// stale value only makes a search start lower (still correct, as every
    /// node is in level 0), and links are read with Acquire anyway.
    max_height: AtomicUsize,
    len: CacheLine<AtomicUsize>,
}

impl Default for SkipListMemtable {
    fn default() -> Self {
        Self::new()
    }
}

impl SkipListMemtable {
    /// An empty skiplist.
    pub fn new() -> Self {
        Self::with_arena(Arena::new())
    }

    /// An empty skiplist allocating from `arena` (to size its chunks).
    pub fn with_arena(arena: Arena) -> Self {
        let head = alloc_node(&arena, MAX_HEIGHT, b"", 0, ValueKind::Delete, b"");
        SkipListMemtable {
            range_tombstones: Default::default(),
            arena,
            head,
            max_height: AtomicUsize::new(1),
            len: CacheLine::default(),
        }
    }

    /// The first node at or after `(key, seq)` in internal order.
    fn find_greater_or_equal(&self, key: &[u8], seq: SequenceNumber) -> Option<Node> {
        let mut x = self.head;
        let mut level = self.max_height.load(Ordering::Relaxed) - 1;
        // The node that stopped us one level up: known to be >= the target,
        // so it need not be compared again (RocksDB's trick).
        let mut last_bigger: Option<Node> = None;
        loop {
            let next = x.next(level);
            if let Some(n) = next {
                n.prefetch_next(level);
            }
            if let Some(n) = next.filter(|&n| Some(n) != last_bigger) {
                match n.cmp_to(key, seq) {
                    CmpOrdering::Less => {
                        x = n;
                        continue;
                    }
                    // Nothing sorts between the target and its equal.
                    CmpOrdering::Equal => return next,
                    CmpOrdering::Greater => {}
                }
            }
            if level == 0 {
                return next;
            }
            last_bigger = next;
            level -= 1;
        }
    }

    /// The last node strictly before `(key, seq)`; `None` if there is none.
    fn find_less_than(&self, key: &[u8], seq: SequenceNumber) -> Option<Node> {
        let mut x = self.head;
        let mut level = self.max_height.load(Ordering::Relaxed) - 1;
        loop {
            match x.next(level) {
                Some(n) if n.is_before(key, seq) => x = n,
                _ if level == 0 => return (x != self.head).then_some(x),
                _ => level -= 1,
            }
        }
    }

    /// The last node; `None` when the list is empty.
    fn find_last(&self) -> Option<Node> {
        let mut x = self.head;
        let mut level = self.max_height.load(Ordering::Relaxed) - 1;
        loop {
            match x.next(level) {
                Some(n) => x = n,
                None if level == 0 => return (x != self.head).then_some(x),
                None => level -= 1,
            }
        }
    }

    /// Walks level `level` from `before` (which sorts before `(key, seq)`)
    /// to the pair `(prev, next)` that brackets `(key, seq)`. Each step
    /// requests the node after the candidate and, in a top-down descent
    /// (`DESCENDING`), the candidate's successor one level down, as
    /// RocksDB's `FindSpliceForLevel<prefetch_before>`.
    #[inline]
    fn find_splice_for_level<const DESCENDING: bool>(
        key: &[u8],
        seq: SequenceNumber,
        before: Node,
        level: usize,
    ) -> (Node, Option<Node>) {
        let mut x = before;
        loop {
            let next = x.next(level);
            if let Some(n) = next {
                n.prefetch_next(level);
                if DESCENDING && level > 0 {
                    n.prefetch_next(level - 1);
                }
            }
            match next {
                Some(n) if n.is_before(key, seq) => x = n,
                next => {
                    debug_assert!(
                        !matches!(next, Some(n) if n.cmp_to(key, seq) == CmpOrdering::Equal),
                        "version (key, {seq}) inserted twice"
                    );
                    return (x, next);
                }
            }
        }
    }
}

/// Allocates and fully writes a node of `height` links (all null).
fn alloc_node(
    arena: &Arena,
    height: usize,
    key: &[u8],
    seq: SequenceNumber,
    kind: ValueKind,
    value: &[u8],
) -> Node {
    // The engine enforces these limits with `Error::InvalidArgument`; they
    // also guarantee the lengths fit their u32 fields.
    assert!(
        key.len() <= MAX_KEY_SIZE && value.len() <= MAX_VALUE_SIZE,
        "memtable entry exceeds key/value size limits"
    );
    let tower = (height - 1) * LINK_SIZE;
    let size = tower + KEY_OFFSET + key.len() + value.len();
    let base = arena.allocate(size, NODE_ALIGN);
    // SAFETY: `base` is a fresh, exclusively owned, 8-aligned allocation of
    // `size` bytes; every write below stays inside it: `height` links from
    // `base`, then trailer, lengths, key and value after link 0. Nothing can
    // observe the node until it is linked.
    unsafe {
        let base = base.as_ptr();
        for i in 0..height {
            base.add(i * LINK_SIZE)
                .cast::<AtomicPtr<u8>>()
                .write(AtomicPtr::new(ptr::null_mut()));
        }
        let node = base.add(tower);
        node.add(TRAILER_OFFSET)
            .cast::<u64>()
            .write(pack_trailer(seq, kind));
        node.add(KEY_LEN_OFFSET)
            .cast::<u32>()
            .write(key.len() as u32);
        node.add(VALUE_LEN_OFFSET)
            .cast::<u32>()
            .write(value.len() as u32);
        ptr::copy_nonoverlapping(key.as_ptr(), node.add(KEY_OFFSET), key.len());
        ptr::copy_nonoverlapping(
            value.as_ptr(),
            node.add(KEY_OFFSET + key.len()),
            value.len(),
        );
        Node(NonNull::new_unchecked(node))
    }
}

impl Memtable for SkipListMemtable {
    fn range_tombstones(&self) -> &crate::range_delete::MemRangeTombstones {
        &self.range_tombstones
    }

    fn kind(&self) -> MemtableKind {
        MemtableKind::SkipList
    }

    fn insert(&self, user_key: &[u8], seq: SequenceNumber, kind: ValueKind, value: &[u8]) {
        let height = random_height();
        let node = alloc_node(&self.arena, height, user_key, seq, kind, value);

        let mut top = self.max_height.load(Ordering::Relaxed);
        while height > top {
            match self.max_height.compare_exchange_weak(
                top,
                height,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => top = height,
                Err(actual) => top = actual,
            }
        }

        let mut prev = [self.head; MAX_HEIGHT];
        let mut next: [Option<Node>; MAX_HEIGHT] = [None; MAX_HEIGHT];
        let mut x = self.head;
        for level in (0..top).rev() {
            let (p, n) = Self::find_splice_for_level::<true>(user_key, seq, x, level);
            prev[level] = p;
            next[level] = n;
            x = p;
        }

        for level in 0..height {
            loop {
                node.set_next_unpublished(level, next[level]);
                if prev[level].cas_next(level, next[level], node) {
                    break;
                }
                // Someone linked a node between prev and next: `prev` is
                // still before us (nodes are never removed), resume there.
                let (p, n) =
                    Self::find_splice_for_level::<false>(user_key, seq, prev[level], level);
                prev[level] = p;
                next[level] = n;
            }
        }
        self.len.fetch_add(1, Ordering::Relaxed);
    }

    fn get(&self, user_key: &[u8], snapshot: SequenceNumber) -> Option<Found<'_>> {
        let n = self.find_greater_or_equal(user_key, snapshot)?;
        compares::eq(n.user_key(), user_key).then(|| Found {
            seq: n.seq(),
            kind: n.kind(),
            value: n.value(),
        })
    }

    fn iter(self: Arc<Self>) -> Box<dyn InternalIterator> {
        Box::new(SkipListIter {
            list: self,
            node: None,
        })
    }

    fn approximate_memory(&self) -> usize {
        self.arena.memory_usage()
    }

    fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }
}

/// A cursor over a skiplist. Holds the list's `Arc`, so the nodes it points
/// into outlive it. `next` is one link load; `prev` searches from the head
/// for the last node before the current one (O(log n), as RocksDB: links
/// are singly linked so concurrent inserts stay one CAS per level).
pub struct SkipListIter {
    list: Arc<SkipListMemtable>,
    node: Option<Node>,
}

impl SkipListIter {
    #[inline]
    fn current(&self) -> Node {
        match self.node {
            Some(n) => n,
            None => panic!("SkipListIter accessed while not valid"),
        }
    }
}

impl InternalIterator for SkipListIter {
    fn valid(&self) -> bool {
        self.node.is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.node = self.list.head.next(0);
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.node = self.list.find_last();
        Ok(())
    }

    fn seek(&mut self, user_key: &[u8], seq: SequenceNumber) -> Result<()> {
        self.node = self.list.find_greater_or_equal(user_key, seq);
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        self.node = self.current().next(0);
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        let n = self.current();
        self.node = self.list.find_less_than(n.user_key(), n.seq());
        Ok(())
    }

    fn user_key(&self) -> &[u8] {
        self.current().user_key()
    }

    fn seq(&self) -> SequenceNumber {
        self.current().seq()
    }

    fn kind(&self) -> ValueKind {
        self.current().kind()
    }

    fn value(&self) -> &[u8] {
        self.current().value()
    }
}

#[cfg(test)]
mod tests;
