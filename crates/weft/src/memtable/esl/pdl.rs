//! The parent-of-data level (PDL) and the operation log that feeds it.
//!
//! A PDL node is an arena record `{ next, log_next, data, prefix }`: a link
//! in the sorted lock-free PDL list, a link in the operation log, the data
//! node it indexes, and the first 8 key bytes (big-endian, zero-padded) so
//! a walk compares most nodes without touching the data node.
//!
//! The *operation log* is a Treiber stack threaded through `log_next`:
//! a writer that has just linked a data node chosen for the PDL pushes a
//! fresh PDL node with one CAS; the background worker takes the whole stack
//! with one swap. (The paper's log is a ring with CAS'd head and tail; a
//! stack needs no capacity and no slot recycling, and the worker sorts each
//! batch anyway.) Only the worker links PDL nodes into the list; readers
//! walk it concurrently. A PDL node is fully written before the CAS that
//! publishes it (AcqRel) and links are loaded with Acquire.

use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, Ordering};

use crate::key::compares::{self, key_prefix};
use crate::memtable::arena::Arena;
use crate::memtable::jellyfish::node::Node;

#[repr(C)]
pub(super) struct PdlNode {
    next: AtomicPtr<PdlNode>,
    log_next: AtomicPtr<PdlNode>,
    data: Node,
    prefix: u64,
}

/// A handle to a PDL node (or the PDL head) of a live ESL memtable.
/// Same invariant as [`Node`]: used only while the arena lives.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Pdl(NonNull<PdlNode>);

// SAFETY: PDL nodes are immutable after publication except their atomic
// links, and live as long as the arena; handles are used only while the
// memtable is alive.
unsafe impl Send for Pdl {}
// SAFETY: as for `Send`.
unsafe impl Sync for Pdl {}

impl Pdl {
    /// Allocates an unpublished PDL node for `data`.
    pub(super) fn alloc(arena: &Arena, data: Node) -> Pdl {
        let p = arena
            .allocate(
                std::mem::size_of::<PdlNode>(),
                std::mem::align_of::<PdlNode>(),
            )
            .cast::<PdlNode>();
        // SAFETY: a fresh, exclusively owned arena range of the size and
        // alignment of `PdlNode`; nothing else can see it yet.
        unsafe {
            p.as_ptr().write(PdlNode {
                next: AtomicPtr::new(ptr::null_mut()),
                log_next: AtomicPtr::new(ptr::null_mut()),
                data,
                prefix: key_prefix(data.key()),
            });
        }
        Pdl(p)
    }

    #[inline]
    fn get(&self) -> &PdlNode {
        // SAFETY: written in `alloc` before any handle escaped; lives as
        // long as the arena (type invariant).
        unsafe { self.0.as_ref() }
    }

    /// The data node this PDL node indexes (the data head for the PDL head).
    #[inline]
    pub(super) fn data(self) -> Node {
        self.get().data
    }

    /// The successor in the PDL (Acquire).
    #[inline]
    pub(super) fn next(self) -> Option<Pdl> {
        NonNull::new(self.get().next.load(Ordering::Acquire)).map(Pdl)
    }

    /// True when this node's key is `< key`; `tp` is `key_prefix(key)`.
    #[inline]
    pub(super) fn is_before(self, key: &[u8], tp: u64) -> bool {
        let n = self.get();
        match n.prefix.cmp(&tp) {
            std::cmp::Ordering::Equal => compares::lt(n.data.key(), key),
            o => o == std::cmp::Ordering::Less,
        }
    }

    /// Walks the PDL from `self` (before `key`) to the last node before it.
    #[inline]
    pub(super) fn walk_before(self, key: &[u8], tp: u64) -> Pdl {
        let mut p = self;
        while let Some(n) = p.next() {
            if !n.is_before(key, tp) {
                break;
            }
            p = n;
        }
        p
    }

    /// Walks to the last node of the PDL.
    pub(super) fn walk_to_end(self) -> Pdl {
        let mut p = self;
        while let Some(n) = p.next() {
            p = n;
        }
        p
    }

    /// Links `self` (unpublished) after the last node before its key,
    /// starting the walk at `from` (before the key). Called by the worker.
    pub(super) fn link_after(self, from: Pdl) {
        let key = self.data().key();
        let tp = self.get().prefix;
        let mut p = from.walk_before(key, tp);
        loop {
            let next = p.get().next.load(Ordering::Acquire);
            self.get().next.store(next, Ordering::Relaxed);
            match p.get().next.compare_exchange(
                next,
                self.0.as_ptr(),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(_) => p = p.walk_before(key, tp),
            }
        }
    }
}

/// The lock-free operation log: a stack of PDL nodes waiting to be linked.
pub(super) struct OpLog {
    top: AtomicPtr<PdlNode>,
}

impl OpLog {
    pub(super) fn new() -> Self {
        OpLog {
            top: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Pushes an unpublished PDL node (one CAS when uncontended).
    pub(super) fn push(&self, p: Pdl) {
        let mut top = self.top.load(Ordering::Relaxed);
        loop {
            p.get().log_next.store(top, Ordering::Relaxed);
            // Release: the node (and the data node it points to, which this
            // thread published or Acquire-loaded) is visible to the worker.
            match self.top.compare_exchange_weak(
                top,
                p.0.as_ptr(),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(actual) => top = actual,
            }
        }
    }

    /// Takes every pending node (in no particular order).
    pub(super) fn take_all(&self) -> Vec<Pdl> {
        let mut p = self.top.swap(ptr::null_mut(), Ordering::Acquire);
        let mut out = Vec::new();
        while let Some(n) = NonNull::new(p) {
            let n = Pdl(n);
            out.push(n);
            p = n.get().log_next.load(Ordering::Relaxed);
        }
        out
    }
}
