//! [`SkipLevels`]: the horizontal skiplist over key nodes — a head node and
//! the current height — with the searches every key-node kind with a full
//! tower needs (`jellyfish` and `teks`).

use crate::util::sync::atomic::{AtomicUsize, Ordering};
use std::cmp::Ordering as CmpOrdering;

use super::node::{alloc_node, cas_link_0, Node, MAX_HEIGHT};
use crate::key::compares;
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
    ///
    /// Below the few top levels every step is a cache miss, and the search
    /// either moves to the candidate or descends to the node one level
    /// down, not knowing which until the candidate's key arrives. So both
    /// are requested at once: the candidate's link at this level (its key's
    /// line is loaded by the compare) and the next lower successor, whose
    /// line is then in flight when the search descends. On levels 1 and 0
    /// the node two places on at level 0 (the current node's skip hint) is
    /// requested too, so a level-0 walk of two steps waits for one miss
    /// (faster gets in the memtable benchmark, uniform and Zipfian; see
    /// `bench/journal/2026-11-25-07-cache-misses-simulated.md`, change 1).
    /// The top [`CACHED_TOP_LEVELS`] levels request nothing: every search
    /// reads their few nodes, so they stay cached, and the requests would
    /// only cost instructions (change 4 of the same section).
    #[inline]
    pub(crate) fn at_or_after(&self, key: &[u8]) -> Option<Node> {
        let mut x = self.head;
        let height = self.height();
        let mut level = height - 1;
        // The top levels hold few nodes, which every search reads: they
        // stay cached, and requesting their lines only costs instructions.
        let cold_below = height.saturating_sub(CACHED_TOP_LEVELS);
        let mut last_bigger: Option<Node> = None;
        loop {
            let next = x.next(level);
            if level < cold_below {
                Self::request_ahead(x, next, level);
            }
            if let Some(n) = next.filter(|&n| Some(n) != last_bigger) {
                match compares::cmp(n.key(), key) {
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

    /// [`Self::at_or_after`]'s requests at `x` on `level`, whose successor
    /// there is `next`: the links and nodes the search may read next.
    #[inline]
    fn request_ahead(x: Node, next: Option<Node>, level: usize) {
        if level > 0 {
            if let Some(n) = next {
                n.prefetch_link(level);
            }
            if let Some(down) = x.next(level - 1) {
                down.prefetch();
            }
        }
        if level <= 1 {
            if let Some(two) = x.skip() {
                two.prefetch();
            }
        }
    }

    /// The node holding exactly `key`.
    #[inline]
    pub(crate) fn find(&self, key: &[u8]) -> Option<Node> {
        self.at_or_after(key).filter(|n| compares::eq(n.key(), key))
    }

    /// The last node with key `< key`.
    pub(crate) fn before(&self, key: &[u8]) -> Option<Node> {
        let mut x = self.head;
        let mut level = self.height() - 1;
        loop {
            match x.next(level) {
                Some(n) if compares::lt(n.key(), key) => x = n,
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
    /// pair `prev.key < key <= next.key`, and whether `next` holds `key`
    /// (one comparison per step). `bound` (`None`: the end) is a node known
    /// to sort after `key`, such as the successor a search found one level
    /// up: reaching it ends the walk without comparing it again.
    #[inline]
    pub(crate) fn splice(key: &[u8], before: Node, level: usize, bound: Option<Node>) -> Splice {
        Self::walk_level::<false>(key, before, level, bound)
    }

    /// [`Self::splice`] for a top-down descent below the cached top levels:
    /// every step also makes [`Self::at_or_after`]'s requests, so the
    /// candidate's link and the node one level down are in flight while
    /// the candidate's key is compared. An insert's descent is a get's
    /// search, and misses the same lines.
    #[inline]
    pub(crate) fn splice_descending(
        key: &[u8],
        before: Node,
        level: usize,
        bound: Option<Node>,
    ) -> Splice {
        Self::walk_level::<true>(key, before, level, bound)
    }

    /// The walk of [`Self::splice`], with or without the requests ahead.
    #[inline]
    fn walk_level<const REQUEST: bool>(
        key: &[u8],
        before: Node,
        level: usize,
        bound: Option<Node>,
    ) -> Splice {
        let mut splice = Splice {
            before_prev: None,
            prev: before,
            next: None,
            found: false,
        };
        loop {
            let next = splice.prev.next(level);
            splice.next = next;
            if REQUEST {
                Self::request_ahead(splice.prev, next, level);
            }
            match next {
                Some(n) if next != bound => match compares::cmp(n.key(), key) {
                    CmpOrdering::Less => {
                        if level == 0 && !REQUEST {
                            // The walk goes on: request the node after the
                            // next (its skip hint shares the key's line), so
                            // two of the walk's misses overlap.
                            if let Some(s) = n.skip() {
                                s.prefetch();
                            }
                        }
                        splice.before_prev = Some(splice.prev);
                        splice.prev = n;
                    }
                    CmpOrdering::Equal => {
                        splice.found = true;
                        return splice;
                    }
                    CmpOrdering::Greater => return splice,
                },
                _ => return splice,
            }
        }
    }

    /// Links `nodes` (unpublished, sorted by key, keys no other node of
    /// these levels has or will ever have) at every level up to each
    /// node's height, in key order, calling `linked_at_0` for each once it
    /// is reachable at level 0.
    ///
    /// A finger search: each node's search starts, at every level, from
    /// the predecessor the previous node of the batch found there (its key
    /// is smaller, and nodes are never unlinked, so walking forward from it
    /// is sound even while other linkers insert). When the batch is dense
    /// among the linked nodes — a backlog after a burst of new keys — the
    /// walk is a few steps per level instead of a search from the head, and
    /// the predecessors it visits are still in cache.
    ///
    /// The walk is bound by memory latency, not by compares: nearly all of
    /// its time is the load of the next node's key (a miss for every step
    /// below the levels the previous search left in cache). So the batch is
    /// cut into [`LINK_STREAMS`] runs of consecutive nodes, each with its
    /// own fingers, and their searches advance in turn, one step each: every
    /// step prefetches the node its run looks at next, and the misses of
    /// the runs overlap instead of following one another. The runs are
    /// disjoint key ranges linked by one thread with the same CAS protocol
    /// as concurrent linkers, so a run whose neighbour linked a node next to
    /// its predecessor just retries that level from its finger.
    pub(crate) fn link_sorted(&self, nodes: &[Node], linked_at_0: impl Fn(Node)) {
        debug_assert!(nodes.windows(2).all(|w| w[0].key() < w[1].key()));
        if nodes.is_empty() {
            return;
        }
        let per_run = nodes.len().div_ceil(LINK_STREAMS).max(MIN_RUN);
        let mut runs: Vec<LinkRun<'_>> = nodes
            .chunks(per_run)
            .map(|chunk| LinkRun::new(self, chunk))
            .collect();
        let mut active = runs.len();
        while active > 0 {
            active = 0;
            for run in runs.iter_mut().filter(|r| !r.done()) {
                run.step(self, &linked_at_0);
                active += usize::from(!run.done());
            }
        }
    }
}

/// Where a key goes on one level: [`SkipLevels::splice`]'s answer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Splice {
    /// The node the walk passed just before `prev`, if it took a step
    /// (for the skip hints, see `node::cas_link_0`).
    pub(crate) before_prev: Option<Node>,
    /// The last node whose key is `< key` (or the walk's start).
    pub(crate) prev: Node,
    /// `prev`'s successor: the first node with key `>= key`, or the end.
    pub(crate) next: Option<Node>,
    /// `next` holds the key itself.
    pub(crate) found: bool,
}

/// Levels at the top of the towers whose nodes a search takes as cached
/// (with branching 4, the top four levels hold about 85 nodes).
pub(crate) const CACHED_TOP_LEVELS: usize = 4;

/// Runs of a batch that [`SkipLevels::link_sorted`] searches at once.
/// Eight misses in flight is about what one core sustains (its fill
/// buffers); more runs only add cold starts from the head.
const LINK_STREAMS: usize = 8;
/// Fewest nodes in a run: a run's first search starts from the head, so
/// small batches are not cut finer than this.
const MIN_RUN: usize = 16;

/// One run of [`SkipLevels::link_sorted`]: consecutive nodes of the batch,
/// linked one after the other with their own fingers, and the state of the
/// search for the current one, suspended at the node it prefetched.
struct LinkRun<'a> {
    /// Nodes not linked yet; the first is being searched for.
    nodes: &'a [Node],
    /// Per level, the predecessor the last search found there.
    finger: [Node; MAX_HEIGHT],
    /// Per level, the successor found there by the current search.
    next: [Option<Node>; MAX_HEIGHT],
    /// The current node's height.
    height: usize,
    /// The level being searched, and the node there known to sort before
    /// the current key.
    level: usize,
    x: Node,
    /// `x.next(level)`, prefetched, its key not yet compared.
    candidate: Option<Node>,
    /// On level 0, the node known to precede `x`, if any (the walk passed
    /// it, or it preceded the finger when the finger was linked): its
    /// skip hint will name the node linked after `x`.
    before_x: Option<Node>,
    /// The level-0 predecessor `finger[0]` had when this run linked it.
    before_finger: Option<Node>,
    /// A search of this run has set `finger` and `next` (before the
    /// first, they hold the head and nothing, which say nothing about
    /// where a key lies).
    searched: bool,
}

impl<'a> LinkRun<'a> {
    fn new(levels: &SkipLevels, nodes: &'a [Node]) -> Self {
        let mut run = LinkRun {
            nodes,
            finger: [levels.head; MAX_HEIGHT],
            next: [None; MAX_HEIGHT],
            height: 0,
            level: 0,
            x: levels.head,
            candidate: None,
            before_x: None,
            before_finger: None,
            searched: false,
        };
        run.begin(levels);
        run
    }

    fn done(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Starts the search for the first remaining node at the top level.
    fn begin(&mut self, levels: &SkipLevels) {
        let Some(&node) = self.nodes.first() else {
            return;
        };
        // The node after this one is searched for next: request its first
        // line (flags, key) and the line of its link 1 now, so that reading
        // its height and writing its links (most towers are one or two
        // links) do not wait for a miss each.
        if let Some(&after) = self.nodes.get(1) {
            after.prefetch();
            after.prefetch_link(1);
        }
        let h = node.height();
        debug_assert!((1..=MAX_HEIGHT).contains(&h));
        levels.raise_height(h);
        self.height = h;
        self.x = levels.head;
        let top = levels.height().max(h) - 1;
        let start = match self.searched {
            true => self.climb(node.key(), h - 1, top),
            false => top,
        };
        self.searched = true;
        self.enter_level(levels, start);
    }

    /// The level to start the search for `key` at: the lowest from `from`
    /// (the node's top level, so that every level it is linked at is
    /// searched for it) to `top` at which the last search's successor
    /// sorts after `key`, so the finger's span there holds it. The levels
    /// above would each cost a step that only confirms the finger (measured
    /// by the candidates loaded per key in the `link` part of the memtable
    /// bench, starting from the top against starting here; see
    /// `bench/journal/2026-11-26-04-wal-window-ahead.md`, "`teks` linking:
    /// searches that start low"); the successors compared here were
    /// loaded by the last search and are still in cache. A successor gone
    /// stale (another linker put a node before it) only makes the search
    /// walk further from the finger: fingers sort before `key` whatever
    /// happened since, so any start level finds the right predecessors.
    fn climb(&self, key: &[u8], from: usize, top: usize) -> usize {
        let mut level = from;
        while level < top && self.next[level].is_some_and(|n| !compares::lt(key, n.key())) {
            level += 1;
        }
        level
    }

    /// Moves the search to `level`, from whichever of the node above and
    /// the finger sorts later (both sort before the key), and prefetches
    /// the node to compare next.
    fn enter_level(&mut self, levels: &SkipLevels, level: usize) {
        self.level = level;
        let f = self.finger[level];
        if f != levels.head && (self.x == levels.head || compares::lt(self.x.key(), f.key())) {
            self.x = f;
        }
        self.before_x = (level == 0 && self.x == self.finger[0])
            .then_some(self.before_finger)
            .flatten();
        self.load_candidate();
    }

    fn load_candidate(&mut self) {
        self.candidate = self.x.next(self.level);
        if let Some(c) = self.candidate {
            c.prefetch();
            c.prefetch_link(self.level);
        }
    }

    /// One step of the search: compares the prefetched candidate, then
    /// walks on, goes down a level, or — past level 0 — links the node
    /// and begins the next.
    fn step(&mut self, levels: &SkipLevels, linked_at_0: &impl Fn(Node)) {
        let node = self.nodes[0];
        let key = node.key();
        match self.candidate {
            Some(c) if compares::lt(c.key(), key) => {
                self.before_x = Some(self.x);
                self.x = c;
                self.load_candidate();
                return;
            }
            c => {
                debug_assert!(c.is_none_or(|c| c.key() != key), "key linked twice");
                self.finger[self.level] = self.x;
                self.next[self.level] = c;
            }
        }
        if self.level > 0 {
            self.enter_level(levels, self.level - 1);
            return;
        }
        for level in 0..self.height {
            loop {
                let linked = if level == 0 {
                    cas_link_0(self.before_x, self.finger[0], self.next[0], node)
                } else {
                    node.set_next_unpublished(level, self.next[level]);
                    self.finger[level].cas_next(level, self.next[level], node)
                };
                if linked {
                    break;
                }
                let splice = SkipLevels::splice(key, self.finger[level], level, None);
                self.finger[level] = splice.prev;
                self.next[level] = splice.next;
                if level == 0 {
                    // A walk that took no step leaves `prev` and its
                    // predecessor.
                    self.before_x = splice.before_prev.or(self.before_x);
                }
            }
            if level == 0 {
                self.before_finger = Some(self.finger[0]);
                linked_at_0(node);
            }
            // The next node of the run is larger: ours precedes it.
            self.finger[level] = node;
        }
        self.nodes = &self.nodes[1..];
        self.begin(levels);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memtable::jellyfish::node::random_height;

    /// Two linkers run finger-search batches over interleaved keys at
    /// once: every level ends sorted and holds every node as tall as it
    /// (each run's searches start low, from fingers the other linker
    /// keeps making stale).
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
                        levels.link_sorted(&nodes, |_| {});
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
            let tall = even.iter().chain(&odd).filter(|&&(_, h)| h > level).count();
            assert_eq!(count, tall, "level {level} misses nodes");
        }
        for i in [0u64, 1, 1_999, 3_999] {
            assert!(levels.find(&i.to_be_bytes()).is_some(), "{i} not found");
        }
    }
}
