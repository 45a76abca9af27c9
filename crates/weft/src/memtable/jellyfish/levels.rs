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

    /// Links `nodes` (unpublished, sorted by key, keys no other node of
    /// these levels has or will ever have; each node's height given by
    /// `height`) at every level, in key order, calling `linked_at_0` for
    /// each once it is reachable at level 0.
    ///
    /// A finger search: each node's search starts, at every level, from
    /// the predecessor the previous node of the batch found there (its key
    /// is smaller, and nodes are never unlinked, so walking forward from it
    /// is sound even while other linkers insert). When the batch is dense
    /// among the linked nodes — a backlog after a burst of new keys — the
    /// walk is a few steps per level instead of a search from the head, and
    /// the predecessors it visits are still in cache.
    pub(crate) fn link_sorted(
        &self,
        nodes: &[Node],
        height: impl Fn(Node) -> usize,
        linked_at_0: impl Fn(Node),
    ) {
        debug_assert!(nodes.windows(2).all(|w| w[0].key() < w[1].key()));
        let mut finger = [self.head; MAX_HEIGHT];
        for &node in nodes {
            let h = height(node);
            debug_assert!((1..=MAX_HEIGHT).contains(&h));
            self.raise_height(h);
            let key = node.key();
            let top = self.height().max(h);
            let mut next: [Option<Node>; MAX_HEIGHT] = [None; MAX_HEIGHT];
            let mut x = self.head;
            for level in (0..top).rev() {
                // Both `x` (from the level above) and the finger sort
                // before `key`: start from whichever is further right.
                let f = finger[level];
                if f != self.head && (x == self.head || f.key() > x.key()) {
                    x = f;
                }
                let (p, n) = Self::splice(key, x, level);
                debug_assert!(n.is_none_or(|n| n.key() != key), "key linked twice");
                finger[level] = p;
                next[level] = n;
                x = p;
            }
            for level in 0..h {
                loop {
                    node.set_next_unpublished(level, next[level]);
                    if finger[level].cas_next(level, next[level], node) {
                        break;
                    }
                    let (p, n) = Self::splice(key, finger[level], level);
                    finger[level] = p;
                    next[level] = n;
                }
                if level == 0 {
                    linked_at_0(node);
                }
                // The next node of the batch is larger: ours precedes it.
                finger[level] = node;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memtable::jellyfish::node::random_height;

    /// Two linkers run finger-search batches over interleaved keys at
    /// once: every level ends sorted, and level 0 holds every node.
    #[test]
    fn concurrent_sorted_batches_link_every_node_in_order() {
        let arena = Arena::new();
        let levels = SkipLevels::new(&arena);
        let batch = |parity: u64| -> Vec<(Node, usize)> {
            (0..4_000u64)
                .filter(|i| i % 2 == parity)
                .map(|i| {
                    let h = random_height();
                    let (n, _) = alloc_node(&arena, h, &i.to_be_bytes(), None);
                    (n, h)
                })
                .collect()
        };
        let (even, odd) = (batch(0), batch(1));
        std::thread::scope(|s| {
            for b in [&even, &odd] {
                let levels = &levels;
                s.spawn(move || {
                    // Two sorted chunks per thread, so fingers restart.
                    for chunk in b.chunks(b.len() / 2 + 1) {
                        let nodes: Vec<Node> = chunk.iter().map(|&(n, _)| n).collect();
                        let height =
                            |n: Node| chunk.iter().find(|&&(m, _)| m == n).map_or(1, |&(_, h)| h);
                        levels.link_sorted(&nodes, height, |_| {});
                    }
                });
            }
        });
        for level in 0..MAX_HEIGHT {
            let mut count = 0;
            let mut prev: Option<Node> = None;
            let mut x = levels.head.next(level);
            while let Some(n) = x {
                if let Some(p) = prev {
                    assert!(p.key() < n.key(), "level {level} out of order");
                }
                prev = Some(n);
                count += 1;
                x = n.next(level);
            }
            if level == 0 {
                assert_eq!(count, 4_000);
            }
        }
        for i in [0u64, 1, 1_999, 3_999] {
            assert!(levels.find(&i.to_be_bytes()).is_some(), "{i} not found");
        }
    }
}
