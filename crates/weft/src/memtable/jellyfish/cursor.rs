//! The cursor of the key-node kinds (`jellyfish`, `esl`): node → versions →
//! next node.
//!
//! Both kinds share the data level (one node per user key, each with its
//! version list, newest first) and differ only in how a key is found. The
//! cursor is generic over that search ([`KeyIndex`]). Walking forward is a
//! version-link load, or at a key's last version one level-0 link load:
//! unlike the `skiplist` cursor it never compares keys to find the next
//! key, and [`InternalIterator::next_key`] jumps past a key's remaining
//! versions in O(1) (the scan speed-up of JellyFish §3.3).

use std::sync::Arc;

use super::node::{Node, Version};
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{SequenceNumber, ValueKind};
use crate::memtable::compares;

/// How a key-node kind finds nodes. Implementors own the nodes' arena;
/// every returned node is a published key node (never a head).
pub(crate) trait KeyIndex: Send + Sync + 'static {
    /// The first key node.
    fn first_node(&self) -> Option<Node>;
    /// The first key node with key `>= key`.
    fn node_at_or_after(&self, key: &[u8]) -> Option<Node>;
    /// The last key node with key `< key`.
    fn node_before(&self, key: &[u8]) -> Option<Node>;
    /// The last key node.
    fn last_node(&self) -> Option<Node>;
}

/// A cursor over every version of a key-node memtable, in internal order.
/// Holds the index's `Arc`, so the nodes it points into outlive it.
pub(crate) struct Cursor<I: KeyIndex> {
    index: Arc<I>,
    /// Current key node and version; both `Some` or both `None`.
    pos: Option<(Node, Version)>,
}

impl<I: KeyIndex> Cursor<I> {
    pub(crate) fn new(index: Arc<I>) -> Self {
        Cursor { index, pos: None }
    }

    #[inline]
    fn current(&self) -> (Node, Version) {
        match self.pos {
            Some(p) => p,
            None => panic!("memtable cursor accessed while not valid"),
        }
    }

    /// Positions on the newest version of `node` (or the end).
    #[inline]
    fn land_first(&mut self, node: Option<Node>) {
        self.pos = node.and_then(|n| n.first_version().map(|v| (n, v)));
        self.prefetch_ahead();
    }

    /// Scans move forward, and each step is two dependent misses: the next
    /// key's node, then its newest version record (a separate allocation
    /// once the key was overwritten). So the loads run a step apart: the
    /// node two keys ahead is requested, and the version of the next key,
    /// whose node was requested one step ago and has had the caller's work
    /// on this key to arrive.
    #[inline]
    fn prefetch_ahead(&self) {
        if let Some(next) = self.pos.and_then(|(n, _)| n.next(0)) {
            if let Some(after) = next.next(0) {
                after.prefetch();
            }
            if let Some(v) = next.first_version() {
                v.prefetch();
            }
        }
    }

    /// Positions on the oldest version of `node` (or the start's end).
    #[inline]
    fn land_last(&mut self, node: Option<Node>) {
        self.pos = node.and_then(|n| n.last_version().map(|v| (n, v)));
    }
}

impl<I: KeyIndex> InternalIterator for Cursor<I> {
    fn valid(&self) -> bool {
        self.pos.is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        let n = self.index.first_node();
        self.land_first(n);
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let n = self.index.last_node();
        self.land_last(n);
        Ok(())
    }

    fn seek(&mut self, user_key: &[u8], seq: SequenceNumber) -> Result<()> {
        let node = self.index.node_at_or_after(user_key);
        match node {
            Some(n) if compares::eq(n.key(), user_key) => match n.version_at(seq) {
                Some(v) => {
                    self.pos = Some((n, v));
                    if let Some(next) = n.next(0) {
                        next.prefetch();
                    }
                }
                // Every version is newer than `seq`: the next key's first.
                None => self.land_first(n.next(0)),
            },
            other => self.land_first(other),
        }
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        let (n, v) = self.current();
        match v.next() {
            Some(older) => self.pos = Some((n, older)),
            None => self.land_first(n.next(0)),
        }
        Ok(())
    }

    fn next_key(&mut self, _current_key: &[u8]) -> Result<()> {
        let (n, _) = self.current();
        self.land_first(n.next(0));
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        let (n, v) = self.current();
        match n.version_before(v.seq()) {
            Some(newer) => self.pos = Some((n, newer)),
            None => {
                let before = self.index.node_before(n.key());
                self.land_last(before);
            }
        }
        Ok(())
    }

    fn user_key(&self) -> &[u8] {
        self.current().0.key()
    }

    fn seq(&self) -> SequenceNumber {
        self.current().1.seq()
    }

    fn kind(&self) -> ValueKind {
        self.current().1.kind()
    }

    fn value(&self) -> &[u8] {
        self.current().1.value()
    }
}
