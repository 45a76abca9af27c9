//! [`SkipLevels`]: the horizontal skiplist over key nodes — a head node and
//! the current height — with the searches every key-node kind with a full
//! tower needs (`jellyfish` and `teks`).

use std::cmp::Ordering as CmpOrdering;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::node::{alloc_node, Node, MAX_HEIGHT};
use crate::memtable::arena::Arena;

/// Head and height of a skiplist of key nodes. Nodes are never unlinked.
pub(crate) struct SkipLevels {
    pub(crate) head: Node,
    /// Height of the tallest tower so far (Relaxed, as the `skiplist` kind:
    /// a stale value only makes a search start lower).
    max_height: AtomicUsize,
}

impl SkipLevels {
    /// Empty levels whose head is allocated in `arena`.
    pub(crate) fn new(arena: &Arena) -> Self {
        let (head, _) = alloc_node(arena, MAX_HEIGHT, b"", None);
        SkipLevels {
            head,
            max_height: AtomicUsize::new(1),
        }
    }

    #[inline]
    pub(crate) fn height(&self) -> usize {
        self.max_height.load(Ordering::Relaxed)
    }

    /// Raises the height to at least `height` (before linking such a node).
    #[inline]
    pub(crate) fn raise_height(&self, height: usize) {
        let mut cur = self.height();
        while height > cur {
            match self.max_height.compare_exchange_weak(
                cur,
                height,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => cur = height,
                Err(actual) => cur = actual,
            }
        }
    }

    /// The first node with key `>= key`, stopping at the first level where
    /// `key` itself is found (JellyFish Algorithm 2).
    #[inline]
    pub(crate) fn at_or_after(&self, key: &[u8]) -> Option<Node> {
        let mut x = self.head;
        let mut level = self.height() - 1;
        let mut last_bigger: Option<Node> = None;
        loop {
            let next = x.next(level);
            if let Some(n) = next.filter(|&n| Some(n) != last_bigger) {
                match n.key().cmp(key) {
                    CmpOrdering::Less => {
                        x = n;
                        continue;
                    }
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

    /// The node holding exactly `key`.
    #[inline]
    pub(crate) fn find(&self, key: &[u8]) -> Option<Node> {
        self.at_or_after(key).filter(|n| n.key() == key)
    }

    /// The last node with key `< key`.
    pub(crate) fn before(&self, key: &[u8]) -> Option<Node> {
        let mut x = self.head;
        let mut level = self.height() - 1;
        loop {
            match x.next(level) {
                Some(n) if n.key() < key => x = n,
                _ if level == 0 => return (x != self.head).then_some(x),
                _ => level -= 1,
            }
        }
    }

    /// The last node.
    pub(crate) fn last(&self) -> Option<Node> {
        let mut x = self.head;
        let mut level = self.height() - 1;
        loop {
            match x.next(level) {
                Some(n) => x = n,
                None if level == 0 => return (x != self.head).then_some(x),
                None => level -= 1,
            }
        }
    }

    /// Walks `level` from `before` (whose key is `< key`, or the head) to the
    /// pair `(prev, next)` with `prev.key < key <= next.key`.
    #[inline]
    pub(crate) fn splice(key: &[u8], before: Node, level: usize) -> (Node, Option<Node>) {
        let mut x = before;
        loop {
            match x.next(level) {
                Some(n) if n.key() < key => x = n,
                next => return (x, next),
            }
        }
    }

    /// Links `node` (unpublished, `height` links, a key no other node of
    /// these levels has or will ever have) at every level, bottom-up;
    /// `linked_at_0` runs once it is reachable at level 0.
    pub(crate) fn link_unique(&self, node: Node, height: usize, linked_at_0: impl FnOnce()) {
        debug_assert!((1..=MAX_HEIGHT).contains(&height));
        self.raise_height(height);
        let key = node.key();
        let top = self.height().max(height);
        let mut prev = [self.head; MAX_HEIGHT];
        let mut next: [Option<Node>; MAX_HEIGHT] = [None; MAX_HEIGHT];
        let mut x = self.head;
        for level in (0..top).rev() {
            let (p, n) = Self::splice(key, x, level);
            debug_assert!(n.is_none_or(|n| n.key() != key), "key linked twice");
            prev[level] = p;
            next[level] = n;
            x = p;
        }
        let mut linked_at_0 = Some(linked_at_0);
        for level in 0..height {
            loop {
                node.set_next_unpublished(level, next[level]);
                if prev[level].cas_next(level, next[level], node) {
                    break;
                }
                let (p, n) = Self::splice(key, prev[level], level);
                prev[level] = p;
                next[level] = n;
            }
            if let Some(f) = linked_at_0.take() {
                f();
            }
        }
    }
}
