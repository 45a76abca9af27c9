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
use crate::key::compares;
use crate::key::{SequenceNumber, ValueKind};

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
    readahead: Readahead,
    /// Value length of the version the cursor last stepped from: the
    /// guess [`Cursor::prefetch_ahead`] sizes the next record's request by.
    value_len_hint: usize,
}

/// Nodes the readahead may request ahead of the cursor at first, and at
/// most (measured: 4 and 24 scan as fast as 12 and 48 and waste less on a
/// seek + 10).
const FIRST_WINDOW: u32 = 4;
const MAX_WINDOW: u32 = 24;
/// Steps a scan takes before the readahead starts: the skip hints alone
/// serve a short scan better (see `Readahead`).
const QUIET_STEPS: u32 = 12;
/// Keys a level-1 link skips on average (towers have branching 4).
const KEYS_PER_TOWER: u32 = 4;

/// Readahead for forward scans over level 0.
///
/// Walking level 0 is a chain of dependent misses: a node's address is in
/// its predecessor, so a cursor that prefetches only along level 0 waits
/// about one memory latency per key, however deep it looks ahead. The
/// towers break the chain: the level-1 links (one node in four has one)
/// reach about four keys ahead per miss. So the readahead keeps a *front*
/// on level 1, one hop per cursor step, and requests at each tower node it
/// reaches the node, its newest version and its level-0 successor, and,
/// a step later when that successor's line has arrived, the successor's
/// version and the node after it: three keys of every four are in flight
/// before the cursor needs them, in chains that overlap instead of one.
///
/// Like a file readahead it waits until a scan proves long, and its window
/// starts small and grows with the scan, so a seek + 10 does not pay for
/// lines it never reads. It only prefetches: every link it follows is read
/// with Acquire like any other and leads to a published node of the same
/// arena, so a stale guess (a node linked meanwhile, a tower not yet
/// linked above level 0) costs bandwidth, never a wrong answer.
///
/// Measured (`cargo bench -p weft --bench memtable`, `teks256`, one thread,
/// alternating runs): before the skip hints it sped up both full scans and
/// seeks + 10. With the skip hints the front still pays on long scans (the
/// memtable's full scan and the whole store's `readseq`) but slowed a
/// seek + 10 while it ran from the first step, so it starts only after
/// [`QUIET_STEPS`]. Also tried and dropped: level-0 runs from every tower
/// node (each hop waits for a line requested one step earlier: no gain), a
/// third key per tower (no gain), starting the front at the seek (no gain).
#[derive(Default)]
struct Readahead {
    /// The furthest tower node requested through a level-1 link; its line
    /// was requested at least a step ago.
    front: Option<Node>,
    /// The level-0 successor of the previous front, requested a step ago.
    after_front: Option<Node>,
    /// Keys requested ahead of the cursor and not yet reached (estimate).
    lead: u32,
    /// How far `lead` may grow now.
    window: u32,
    /// Steps since the last seek (counted up to [`QUIET_STEPS`]).
    steps: u32,
}

impl Readahead {
    /// Starts over at a seek: a small window, nothing in flight.
    fn restart(&mut self) {
        *self = Readahead {
            window: FIRST_WINDOW,
            ..Readahead::default()
        };
    }

    /// One forward step of the cursor, which has just landed on `at`.
    #[inline]
    fn step(&mut self, at: Node) {
        if self.steps < QUIET_STEPS {
            self.steps += 1;
            return;
        }
        self.lead = self.lead.saturating_sub(1);
        self.window = (self.window + 1).min(MAX_WINDOW);
        if self.front == Some(at) {
            // The cursor caught up: whatever was counted ahead is behind.
            self.front = None;
            self.after_front = None;
            self.lead = 0;
        }
        if self.lead >= self.window {
            return;
        }
        let Some(front) = self.front else {
            if at.height() >= 2 {
                self.after_front = None;
                self.front = at.next(1);
                if let Some(f) = self.front {
                    f.prefetch();
                    self.lead += KEYS_PER_TOWER;
                }
            }
            return;
        };
        // A tower node ends the run: the front reaches it on level 1.
        if let Some(a) = self.after_front.take().filter(|a| a.height() == 1) {
            request_key_and_successor(a);
        }
        self.after_front = request_key_and_successor(front);
        self.front = front.next(1);
        if let Some(f) = self.front {
            f.prefetch();
            self.lead += KEYS_PER_TOWER;
        }
    }
}

/// Requests `node`'s newest version and its level-0 successor, whose
/// node (line already requested) it returns.
#[inline]
fn request_key_and_successor(node: Node) -> Option<Node> {
    if let Some(v) = node.first_version() {
        v.prefetch();
    }
    let next = node.next(0);
    if let Some(n) = next {
        n.prefetch();
    }
    next
}

impl<I: KeyIndex> Cursor<I> {
    pub(crate) fn new(index: Arc<I>) -> Self {
        let mut readahead = Readahead::default();
        readahead.restart();
        Cursor {
            index,
            pos: None,
            readahead,
            value_len_hint: 0,
        }
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

    /// Moves forward from version `from` onto the newest version of `node`
    /// (or the end).
    #[inline]
    fn step_to(&mut self, from: Version, node: Option<Node>) {
        self.value_len_hint = from.value().len();
        self.land_first(node);
        if let Some((n, _)) = self.pos {
            self.readahead.step(n);
        }
    }

    /// Scans move forward, and each step is two dependent misses: the next
    /// key's node, then its newest version record (a separate allocation
    /// once the key was overwritten). Level 0 alone allows one node miss in
    /// flight per step; the skip hints (`node` module docs) allow two. At
    /// each step the next key's node, requested two steps ago in a steady
    /// scan, gives three requests: its version record, its successor, and
    /// through its hint the node after that. So the node a step reads was
    /// requested two steps before, and the misses of odd and even keys
    /// overlap. Where a hint lags behind a node linked since, level 0 still
    /// brings the next node a step ahead.
    ///
    /// The version record is requested whole (up to 512 bytes): a reader
    /// that copies each value (db_bench's `seekrandom`) otherwise waits on
    /// the value's later lines at every key. Its value length is guessed
    /// from the record the cursor last stepped from, already loaded
    /// (guessing from the current one waited for a record still in flight
    /// before any request of the step could go out, a large share of the
    /// step's time in a profile). One that only looks at keys pays for the
    /// bandwidth (measured: whole-store `seekrandom` faster, `readseq`,
    /// which never touches the value bytes, slower; both in
    /// `bench/journal/2026-11-24-11-two-misses-in-flight.md`, "Scans that
    /// keep two misses in flight").
    #[inline]
    fn prefetch_ahead(&self) {
        let Some((n, _)) = self.pos else {
            return;
        };
        if let Some(next) = n.next(0) {
            if let Some(v) = next.first_version() {
                v.prefetch_record(self.value_len_hint);
            }
            if let Some(after) = next.next(0) {
                after.prefetch();
            }
            if let Some(third) = next.skip() {
                third.prefetch();
            }
        }
    }

    /// Positions on the oldest version of `node` (or the start's end).
    /// Moving backwards leaves whatever the readahead had ahead behind or
    /// far off: it starts over.
    #[inline]
    fn land_last(&mut self, node: Option<Node>) {
        self.readahead.restart();
        self.pos = node.and_then(|n| n.last_version().map(|v| (n, v)));
    }
}

impl<I: KeyIndex> InternalIterator for Cursor<I> {
    fn valid(&self) -> bool {
        self.pos.is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.readahead.restart();
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
        self.readahead.restart();
        let node = self.index.node_at_or_after(user_key);
        match node {
            Some(n) if compares::eq(n.key(), user_key) => match n.version_at(seq) {
                Some(v) => {
                    self.pos = Some((n, v));
                    if let Some(next) = n.next(0) {
                        next.prefetch();
                    }
                    if let Some(two) = n.skip() {
                        two.prefetch();
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
            None => self.step_to(v, n.next(0)),
        }
        Ok(())
    }

    fn next_key_ignores_key(&self) -> bool {
        true
    }

    fn next_key(&mut self, _current_key: &[u8]) -> Result<()> {
        let (n, v) = self.current();
        self.step_to(v, n.next(0));
        Ok(())
    }

    fn next_visible_key(&mut self, current_key: &[u8], snapshot: SequenceNumber) -> Result<()> {
        self.next_key(current_key)?;
        // Keys whose every version is newer than the snapshot are skipped
        // here, on the links, without a step through the trait object each.
        while let Some((n, newest)) = self.pos {
            if newest.seq() <= snapshot {
                break;
            }
            match n.version_at(snapshot) {
                Some(visible) => self.pos = Some((n, visible)),
                None => self.step_to(newest, n.next(0)),
            }
        }
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
