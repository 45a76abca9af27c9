//! The `jellyfish` memtable (JellyFish, Middleware '20, §3): a lock-free
//! skiplist with one node per distinct user key, each carrying a vertical
//! list of versions, newest first.
//!
//! # Why
//!
//! The `skiplist` kind stores every version as a full node: a key with `k`
//! versions is `k` towers, a get must descend to level 0 to find the version
//! visible at its snapshot, and a scan steps (and compares keys) over every
//! obsolete version between two keys. Here the horizontal list holds each
//! key once, so
//!
//! * a put on a known key is a search that stops at the first level where
//!   the key is found, then one CAS into the node's version list
//!   (`node::insert_version`); no tower, no level-0 descent;
//! * a get stops at the first node whose key matches (any level) and walks
//!   the version list to the newest version `<= snapshot`;
//! * a cursor moves key to key with one link load and never steps over old
//!   versions (`cursor::Cursor`, `next_key`).
//!
//! # Layout and concurrency
//!
//! Nodes and version records are described in `node`. A new key is
//! inserted as in the `skiplist` kind (splice top-down, CAS bottom-up),
//! with one difference: if the level-0 CAS fails and the recomputed splice
//! shows that another writer has just linked a node for the *same* key,
//! our node is abandoned (its memory stays in the arena, never published)
//! and our version — allocated in the same block but an independent record
//! — is inserted into the winner's version list. So exactly one node per
//! key is ever reachable, and no version is lost. Every published node has
//! at least one version (it is published with it and truncation never
//! removes a list's newest version `<=` the watermark), so a cursor can
//! always stand on a node's first version.
//!
//! The argument that every level stays sorted and that readers never see a
//! partial node is the `skiplist` kind's (see its module docs): nodes are
//! fully written before the AcqRel CAS that publishes them, links are read
//! with Acquire, and nodes are never unlinked from the horizontal list.
//!
//! # Differences from the paper
//!
//! * A version arriving out of sequence order is inserted at its place,
//!   never dropped (Algorithm 1 line 20 drops it: wrong for Weft, whose
//!   writers insert their batches concurrently and whose
//!   snapshots may need the older version).
//! * The search runs *before* allocation, so an update allocates only a
//!   20-byte version record (+ value), not a tower (the paper's §5.1 notes
//!   their RocksDB port could not do this).
//! * The first version is not embedded in the node: the node's version
//!   head points to it (it shares the node's allocation), so every version
//!   is handled alike and the out-of-order rule is uniform.
//! * Selective in-place update: [`Memtable::set_read_watermark`] lets an
//!   insert on a known key cut the versions no reader can see
//!   (`node::truncate_below`).

mod cursor;
pub(crate) mod levels;
pub(crate) mod node;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use self::levels::SkipLevels;
use self::node::{
    alloc_node, alloc_version, cas_link_0, insert_version, random_height, Node, MAX_HEIGHT,
};
use super::arena::Arena;
use super::{Found, Memtable, MemtableKind};
use crate::iter::InternalIterator;
use crate::key::{SequenceNumber, ValueKind};
use crate::util::stripe::CacheLine;

pub(crate) use self::cursor::{Cursor, KeyIndex};

/// The `jellyfish` memtable. See the module docs.
pub struct JellyFishMemtable {
    /// Range deletes written to it (`crate::range_delete`).
    range_tombstones: crate::range_delete::MemRangeTombstones,
    arena: Arena,
    pub(super) levels: SkipLevels,
    /// Versions inserted.
    len: CacheLine<AtomicUsize>,
    /// Read watermark (0: none). Versions older than the newest one `<=`
    /// it may be unlinked.
    watermark: AtomicU64,
}

impl Default for JellyFishMemtable {
    fn default() -> Self {
        Self::new()
    }
}

impl JellyFishMemtable {
    /// An empty memtable.
    pub fn new() -> Self {
        let arena = Arena::new();
        let levels = SkipLevels::new(&arena);
        JellyFishMemtable {
            range_tombstones: Default::default(),
            arena,
            levels,
            len: CacheLine::default(),
            watermark: AtomicU64::new(0),
        }
    }

    /// Number of distinct user keys (a walk of level 0, see
    /// `node::level_0_len`).
    #[cfg(test)]
    pub fn key_count(&self) -> usize {
        node::level_0_len(self.levels.head.next(0))
    }

    /// The node holding `key`, stopping at the first level where it is
    /// found (JellyFish Algorithm 2).
    fn find(&self, key: &[u8]) -> Option<Node> {
        self.levels.find(key)
    }

    /// After a version was added to `node`, cuts what the watermark allows.
    #[inline]
    fn maybe_truncate(&self, node: Node) {
        let w = self.watermark.load(Ordering::Relaxed);
        if w != 0 {
            node::truncate_below(node.versions(), w);
        }
    }
}

impl KeyIndex for JellyFishMemtable {
    fn first_node(&self) -> Option<Node> {
        self.levels.head.next(0)
    }

    fn node_at_or_after(&self, key: &[u8]) -> Option<Node> {
        self.levels.at_or_after(key)
    }

    fn node_before(&self, key: &[u8]) -> Option<Node> {
        self.levels.before(key)
    }

    fn last_node(&self) -> Option<Node> {
        self.levels.last()
    }
}

impl JellyFishMemtable {
    /// [`Memtable::insert`], with the new node's tower height (if the key
    /// is new) drawn from `height`; the loom models pass fixed heights so
    /// every execution of a model is the same program.
    pub(super) fn insert_at_height(
        &self,
        user_key: &[u8],
        seq: SequenceNumber,
        kind: ValueKind,
        value: &[u8],
        height: impl FnOnce() -> usize,
    ) {
        self.len.fetch_add(1, Ordering::Relaxed);
        let top = self.levels.height();
        let mut prev = [self.levels.head; MAX_HEIGHT];
        let mut next: [Option<Node>; MAX_HEIGHT] = [None; MAX_HEIGHT];
        let mut x = self.levels.head;
        // The successor found one level up: it sorts after the key, so
        // reaching it again ends a level's walk without a comparison.
        let mut bound: Option<Node> = None;
        // The node the level-0 walk passed before `prev[0]`, for the skip
        // hints.
        let mut before_prev = None;
        // The top levels stay cached (see `SkipLevels::at_or_after`).
        let cold_below = top.saturating_sub(levels::CACHED_TOP_LEVELS);
        for level in (0..top).rev() {
            let splice = if level < cold_below {
                SkipLevels::splice_descending(user_key, x, level, bound)
            } else {
                SkipLevels::splice(user_key, x, level, bound)
            };
            if let Some(n) = splice.next.filter(|_| splice.found) {
                // Known key: one CAS into its version list.
                insert_version(n.versions(), alloc_version(&self.arena, seq, kind, value));
                self.maybe_truncate(n);
                return;
            }
            prev[level] = splice.prev;
            next[level] = splice.next;
            before_prev = splice.before_prev;
            x = splice.prev;
            bound = splice.next;
        }

        // New key: a node with its first version in one allocation.
        let height = height();
        let (node, first) = alloc_node(&self.arena, height, user_key, Some((seq, kind, value)));
        self.levels.raise_height(height);
        // Levels at or above `top` keep (head, None); a failed CAS there
        // recomputes the splice like any other.
        loop {
            if cas_link_0(before_prev, prev[0], next[0], node) {
                break;
            }
            let splice = SkipLevels::splice(user_key, prev[0], 0, None);
            if let Some(winner) = splice.next.filter(|_| splice.found) {
                // Another writer published this key first: abandon our node,
                // keep our version.
                if let Some(v) = first {
                    insert_version(winner.versions(), v);
                }
                self.maybe_truncate(winner);
                return;
            }
            prev[0] = splice.prev;
            next[0] = splice.next;
            // A walk that took no step leaves `prev` and its predecessor.
            before_prev = splice.before_prev.or(before_prev);
        }
        for level in 1..height {
            loop {
                node.set_next_unpublished(level, next[level]);
                if prev[level].cas_next(level, next[level], node) {
                    break;
                }
                // Only one node per key is ever published, and ours is not
                // yet at this level: the recomputed `next` is a larger key.
                let splice = SkipLevels::splice(user_key, prev[level], level, None);
                prev[level] = splice.prev;
                next[level] = splice.next;
            }
        }
    }
}

impl Memtable for JellyFishMemtable {
    fn range_tombstones(&self) -> &crate::range_delete::MemRangeTombstones {
        &self.range_tombstones
    }

    fn kind(&self) -> MemtableKind {
        MemtableKind::JellyFish
    }

    fn insert(&self, user_key: &[u8], seq: SequenceNumber, kind: ValueKind, value: &[u8]) {
        self.insert_at_height(user_key, seq, kind, value, random_height);
    }

    fn get(&self, user_key: &[u8], snapshot: SequenceNumber) -> Option<Found<'_>> {
        let v = self.find(user_key)?.version_at(snapshot)?;
        Some(Found {
            seq: v.seq(),
            kind: v.kind(),
            value: v.value(),
        })
    }

    fn iter(self: Arc<Self>) -> Box<dyn InternalIterator> {
        Box::new(Cursor::new(self))
    }

    fn approximate_memory(&self) -> usize {
        self.arena.memory_usage()
    }

    fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    fn set_read_watermark(&self, seq: SequenceNumber) {
        self.watermark.fetch_max(seq, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests;
