//! [`LinkQueue`]: the lock-free queue of key nodes waiting to be linked
//! into `teks`'s skiplist.
//!
//! A Treiber stack threaded through each queued node's level-0 link, which
//! is unused until the node is linked (the node is reachable only through
//! the hash meanwhile, and nobody follows its links: `teks` uses a node as
//! a shortcut only once it is flagged linked). Drainers take the whole
//! stack with one swap, so there is no ABA (a node is pushed once) and no
//! per-node pop. A drainer counts itself in `drainers` *before* the swap
//! and stops counting only after linking everything it took, so "stack
//! empty and no drainer" means every node pushed before was linked.

use crate::util::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::ptr;

use crate::memtable::jellyfish::node::Node;

pub(crate) struct LinkQueue {
    head: AtomicPtr<u8>,
    drainers: AtomicUsize,
    /// Nodes pushed and not yet taken: counted before a node is published,
    /// uncounted when taken, so it never underflows. It only paces the
    /// worker (see [`LinkQueue::push`]); no correctness rests on it.
    queued: AtomicUsize,
}

/// What [`LinkQueue::push`] saw.
pub(crate) struct Pushed {
    /// The stack was empty: the worker may be asleep.
    pub was_empty: bool,
    /// Nodes queued, this one included (approximate under contention).
    pub queued: usize,
}

impl LinkQueue {
    pub(crate) fn new() -> Self {
        LinkQueue {
            head: AtomicPtr::new(ptr::null_mut()),
            drainers: AtomicUsize::new(0),
            queued: AtomicUsize::new(0),
        }
    }

    /// Pushes `node` (claimed in the hash, not yet linked).
    pub(crate) fn push(&self, node: Node) -> Pushed {
        let queued = self.queued.fetch_add(1, Ordering::Relaxed) + 1;
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            node.link(0).store(head, Ordering::Relaxed);
            // SeqCst: pairs with the worker's "sleeping, then check empty".
            match self.head.compare_exchange_weak(
                head,
                node.as_ptr(),
                Ordering::SeqCst,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    return Pushed {
                        was_empty: head.is_null(),
                        queued,
                    }
                }
                Err(actual) => head = actual,
            }
        }
    }

    /// Takes every queued node. The batch counts as a drainer until dropped.
    pub(crate) fn take(&self) -> Batch<'_> {
        self.drainers.fetch_add(1, Ordering::SeqCst);
        let mut p = self.head.swap(ptr::null_mut(), Ordering::SeqCst);
        let mut nodes = Vec::new();
        while let Some(n) = Node::from_ptr(p) {
            // Read before the node is linked: linking overwrites link 0.
            p = n.link(0).load(Ordering::Relaxed);
            nodes.push(n);
        }
        self.queued.fetch_sub(nodes.len(), Ordering::Relaxed);
        Batch { queue: self, nodes }
    }

    /// Nodes pushed and not yet taken (approximate under contention).
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Threads counted as drainers now.
    #[cfg(test)]
    pub(crate) fn drainers(&self) -> usize {
        self.drainers.load(Ordering::SeqCst)
    }

    /// Someone holds a taken batch it has not finished linking.
    pub(crate) fn is_draining(&self) -> bool {
        self.drainers.load(Ordering::Relaxed) > 0
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.head.load(Ordering::SeqCst).is_null()
    }

    /// Nothing queued and nothing being linked.
    pub(crate) fn is_idle(&self) -> bool {
        // Order matters: a drainer counts itself before it empties the
        // stack, so an empty stack seen first means its drainer (if any)
        // is visible in the count read second.
        self.is_empty() && self.drainers.load(Ordering::SeqCst) == 0
    }
}

/// Nodes taken from a [`LinkQueue`]; the taker is a drainer until this
/// drops.
pub(crate) struct Batch<'q> {
    queue: &'q LinkQueue,
    nodes: Vec<Node>,
}

impl Batch<'_> {
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = Node> + '_ {
        self.nodes.iter().copied()
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        self.queue.drainers.fetch_sub(1, Ordering::SeqCst);
    }
}
