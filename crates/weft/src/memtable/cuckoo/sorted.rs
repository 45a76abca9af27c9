//! [`SortedCursor`]: the `cuckoo` kind's cursor over a sorted copy of its
//! key nodes (the O(n log n) ordered access TeksDB measures the hash by).

use std::sync::Arc;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::compares;
use crate::key::{SequenceNumber, ValueKind};
use crate::memtable::jellyfish::node::{Node, Version};

/// A cursor over every version of the nodes in `nodes` (sorted by key,
/// distinct keys), in internal order. `_owner` keeps their arena alive.
pub(crate) struct SortedCursor<O: Send + Sync + 'static> {
    _owner: Arc<O>,
    nodes: Vec<Node>,
    /// Index into `nodes` and the version there; `None` when not valid.
    pos: Option<(usize, Version)>,
}

impl<O: Send + Sync + 'static> SortedCursor<O> {
    pub(crate) fn new(owner: Arc<O>, nodes: Vec<Node>) -> Self {
        debug_assert!(nodes.windows(2).all(|w| w[0].key() < w[1].key()));
        SortedCursor {
            _owner: owner,
            nodes,
            pos: None,
        }
    }

    #[inline]
    fn current(&self) -> (usize, Version) {
        match self.pos {
            Some(p) => p,
            None => panic!("memtable cursor accessed while not valid"),
        }
    }

    #[inline]
    fn land_first(&mut self, i: usize) {
        self.pos = self
            .nodes
            .get(i)
            .and_then(|n| n.first_version())
            .map(|v| (i, v));
    }

    #[inline]
    fn land_last(&mut self, i: Option<usize>) {
        self.pos = i.and_then(|i| self.nodes[i].last_version().map(|v| (i, v)));
    }
}

impl<O: Send + Sync + 'static> InternalIterator for SortedCursor<O> {
    fn valid(&self) -> bool {
        self.pos.is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.land_first(0);
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.land_last(self.nodes.len().checked_sub(1));
        Ok(())
    }

    fn seek(&mut self, user_key: &[u8], seq: SequenceNumber) -> Result<()> {
        let i = self
            .nodes
            .partition_point(|n| compares::lt(n.key(), user_key));
        match self.nodes.get(i) {
            Some(n) if compares::eq(n.key(), user_key) => match n.version_at(seq) {
                Some(v) => self.pos = Some((i, v)),
                None => self.land_first(i + 1),
            },
            _ => self.land_first(i),
        }
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        let (i, v) = self.current();
        match v.next() {
            Some(older) => self.pos = Some((i, older)),
            None => self.land_first(i + 1),
        }
        Ok(())
    }

    fn next_key_ignores_key(&self) -> bool {
        true
    }

    fn next_key(&mut self, _current_key: &[u8]) -> Result<()> {
        let (i, _) = self.current();
        self.land_first(i + 1);
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        let (i, v) = self.current();
        match self.nodes[i].version_before(v.seq()) {
            Some(newer) => self.pos = Some((i, newer)),
            None => self.land_last(i.checked_sub(1)),
        }
        Ok(())
    }

    fn user_key(&self) -> &[u8] {
        self.nodes[self.current().0].key()
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
