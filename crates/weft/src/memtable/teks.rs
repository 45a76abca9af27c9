//! The `teks` memtable (TeksDB, POMACS 2019, §4): a concurrent cuckoo hash
//! woven with a sorted index over one shared pool of key nodes.
//!
//! # Why
//!
//! No single structure wins every operation (TeksDB §3): a hash does puts
//! and gets in O(1) but must sort to scan; a skiplist scans in order but
//! pays O(log n) comparisons on every put and get. Here both index the same
//! key nodes (the `jellyfish` node: key, tower, version list newest first),
//! so each operation uses the structure that suits it:
//!
//! * **put** on a known key: a hash probe and one CAS into the node's
//!   version list — O(1), no skiplist work at all;
//! * **put** of a new key: the node is allocated with its first version and
//!   claimed in the hash (one CAS, see `cuckoo::map`), then pushed on a
//!   lock-free queue (`LinkQueue`); a background worker takes the queue
//!   whole, sorts it and links it into the skiplist with a finger search
//!   (`SkipLevels::link_sorted`), off the writer's path (§4.5);
//! * **get**: a hash probe, then the version list at the snapshot — O(1);
//! * **ordered access** (iterators, flush): [`Memtable::prepare_scan`] first
//!   *helps*: it takes whatever is queued and links it itself, links
//!   chunks of the sorted batch another drainer published, then waits for
//!   the drainers to finish, so every key whose version is visible at the
//!   scan's snapshot is in the skiplist before the scan starts (§4.5:
//!   foreground threads help the worker);
//! * **seek** to a key that exists jumps through the hash straight to its
//!   node — the shortcut pointer of §4.4 — once that node is linked (flag
//!   `LINKED` in the node's flag word); otherwise it searches the
//!   skiplist.
//!
//! # Consistency
//!
//! Point-in-time consistency (§4.2) comes from the version lists: a reader
//! at snapshot `s` (the last published sequence) takes the newest version
//! `<= s` of a node, whichever index led it there; no fallback from hash to
//! skiplist is needed. Every version a live snapshot can see is kept; the
//! read watermark unlinks older ones (selective in-place update, §4.3, as
//! in `jellyfish`).
//!
//! Why no visible key is missed by a scan: a writer's key is claimed in the
//! hash and queued *before* its insert returns, and its sequence becomes
//! visible only after the insert returns (a write is published only once
//! its insert and every earlier write's are done, `db::publish`). So when `prepare_scan` starts, every key
//! with a version `<=` the snapshot is linked, queued, or held by a drainer
//! that counted itself in `LinkQueue::drainers` before taking it;
//! `prepare_scan` returns only once the queue is empty and no drainer is
//! busy (SeqCst on both, so a drainer cannot be missed).
//!
//! # Differences from the paper
//!
//! * The sorted index is the `jellyfish` skiplist (one node per key, a
//!   version list each) rather than RocksDB's skiplist with in-place
//!   updates guarded by reader counts: old versions are cut by the read
//!   watermark, never overwritten, so readers never wait for writers.
//! * The queue is a lock-free stack of nodes (intrusive, through the not
//!   yet used level-0 link), drained whole by one swap. The batch is sorted
//!   (by an 8-byte key prefix, full keys on ties) and linked in key order,
//!   each search starting from the previous node's predecessors: after a
//!   burst of new keys the backlog is dense among the linked nodes, so a
//!   link costs a few steps per level instead of a search from the head.
//!   Measured (memtable bench `teks` part, one writer): linking one node
//!   at a time from the head let the backlog grow to most of the puts, and
//!   the first seek after them waited for it — seek + 10 ran slower than
//!   the `skiplist` kind; sorted finger linking put it well ahead. The
//!   batch is then linked as eight runs whose searches advance in turn
//!   with prefetches (`SkipLevels::link_sorted`), so their cache misses
//!   overlap and a key costs a fraction of what it did.
//! * A sorted batch of more than [`LINK_CHUNK`] nodes is linked chunk by
//!   chunk and published, so that other drainers claim chunks instead of
//!   waiting for its drainer. Measured (memtable bench, two writers on two
//!   cores): the worker, at background priority, fell behind the puts, and
//!   the first scan after them spent a large part of the scan phase
//!   waiting for the worker to link the backlog while the scanning
//!   threads, at normal priority, spun. With the chunks they link it
//!   themselves (`teks256` seek + 10 at two threads ran faster; the
//!   uniform scan moved within the noise). The sort stays with the one
//!   drainer.
//! * The hash is sized for the memtable's budget up front and grows only
//!   past it (see the `cuckoo` kind), instead of being fixed; `is_full`
//!   keeps the `cuckoo` kind's budget.
//! * One worker per memtable, started with the first new key; it parks when
//!   the queue is empty and a writer pushing onto an empty queue wakes it.
//!   After a small drain it parks up to [`GATHER_PARK`] so that the next
//!   batch is bigger (cheaper per key), and the put that queues
//!   [`FULL_BATCH`] nodes wakes it early.
//! * The worker runs at background CPU priority
//!   ([`crate::util::thread_priority`]): the linking may lag, the request
//!   threads may not. Measured with `weft serve` (SET `-P 16`, 50 clients,
//!   two cores shared with the client): the linker at normal priority took
//!   its fair share from the event loop and the client; at background
//!   priority it did the same work in the gaps, and the server served clearly
//!   more SETs per second (that was nice 19, now nice 10, which starves the
//!   worker less while a flush waits on it; see `thread_priority`). A worker
//!   starved by busy writers cannot grow the backlog without bound: a put
//!   that finds [`HELP_BACKLOG`] more nodes queued and nobody linking links
//!   the backlog itself.
//!
//! # Lifetime
//!
//! The worker holds an `Arc` of `Shared` (arena, hash, skiplist, queue),
//! not of the memtable: dropping the [`TeksMemtable`] sets a stop flag,
//! wakes the worker and joins it; cursors hold `Shared`, so nothing a
//! reader may still use is freed before the last cursor goes.

pub(super) mod queue;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

use parking_lot::Mutex;

// The published batch's lock is part of the protocol loom checks.
use crate::util::sync::Mutex as ProtocolMutex;

use self::queue::LinkQueue;
use super::cuckoo::{full_keys, initial_keys, HashedNodes};
use super::jellyfish::levels::SkipLevels;
use super::jellyfish::node::{random_height, Node};
use super::jellyfish::{Cursor, KeyIndex};
use super::{Found, Memtable, MemtableKind};
use crate::iter::InternalIterator;
use crate::key::compares::{self, key_prefix};
use crate::key::{SequenceNumber, ValueKind, MAX_SEQUENCE};
use crate::util::stripe::CacheLine;

/// Node flag: linked into the skiplist at level 0 (above the height byte
/// of the flag word, see `Node::flags`).
const LINKED: u32 = 1 << 8;
/// How long an idle worker sleeps before looking again (a push onto an
/// empty queue wakes it sooner).
const IDLE_PARK: Duration = Duration::from_millis(20);
/// A drain of at least this many nodes is followed at once by the next,
/// and the put that queues this many wakes the worker from its gathering
/// park: while the worker gets the CPU and keeps up, the backlog a scan
/// may have to link itself stays near this (a few milliseconds of linking).
const FULL_BATCH: usize = 8192;
/// After a smaller drain the worker waits this long, or until
/// [`FULL_BATCH`] nodes are queued, for more to gather. A sorted batch is
/// linked with finger searches that start where the previous key's ended,
/// so the bigger the batch, the fewer levels each search descends
/// (measured, two writers on two cores: linking every node as it came held
/// `fillrandom` below RocksDB's; batches gathered for 10 ms or 8192 nodes
/// instead of 1 ms or 1024 raised `fillrandom` and cut `weft serve`'s CPU
/// per SET -P 16; see `bench/journal/2026-11-24-09-background-priority.md`).
const GATHER_PARK: Duration = Duration::from_millis(10);
/// A put that queues a multiple of this many nodes while nobody is linking
/// links the backlog itself: the worker, at background priority, is not
/// getting the CPU. Bounds what a scan may have to link before it starts.
/// A worker that is linking but slower than the writers is left to it
/// (measured, memtable bench `teks` part, one writer queueing new keys
/// faster than one linker links them: helping whenever the backlog passed
/// the bound made `teks` puts clearly slower; see
/// `bench/journal/2026-11-24-09-background-priority.md`).
const HELP_BACKLOG: usize = 4 * FULL_BATCH;
/// Nodes of a sorted batch linked per claim (see [`Shared::drain`]): big
/// enough that each `link_sorted` call's runs stay long (a run's first
/// search starts from the head), small enough that a helper arriving
/// while a large backlog is being linked finds most of it unclaimed.
#[cfg(not(loom))]
const LINK_CHUNK: usize = FULL_BATCH;
/// One node per chunk under loom, so that a two-node batch is shared.
#[cfg(loom)]
const LINK_CHUNK: usize = 1;

/// A sorted batch whose chunks drainers claim in order.
pub(super) struct SortedBatch {
    nodes: Vec<Node>,
    /// Start of the next unclaimed chunk (may pass `nodes.len()`).
    next: crate::util::sync::atomic::AtomicUsize,
}

impl SortedBatch {
    fn new(nodes: Vec<Node>) -> Self {
        SortedBatch {
            nodes,
            next: crate::util::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// True while some chunk is left to claim.
    fn has_unclaimed(&self) -> bool {
        self.next.load(Ordering::Relaxed) < self.nodes.len()
    }

    /// The next chunk nobody has claimed, now claimed by the caller.
    fn claim(&self) -> Option<&[Node]> {
        let start = self.next.fetch_add(LINK_CHUNK, Ordering::Relaxed);
        let end = start.saturating_add(LINK_CHUNK).min(self.nodes.len());
        (start < end).then(|| &self.nodes[start..end])
    }
}

/// Length of the longest common prefix of `a` and `b`.
#[inline]
fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// State shared by the memtable, its cursors and its worker.
pub(crate) struct Shared {
    pub(super) nodes: HashedNodes,
    pub(super) levels: SkipLevels,
    pub(super) queue: LinkQueue,
    /// The sorted batch a drainer is linking, for others to help with
    /// (see [`Shared::drain`]).
    pending: ProtocolMutex<Option<Arc<SortedBatch>>>,
    len: CacheLine<AtomicUsize>,
    /// Nodes linked into the skiplist.
    linked: AtomicUsize,
    stop: AtomicBool,
    /// Set while the worker is (about to be) parked.
    sleeping: AtomicBool,
    /// Test hook: the worker links nothing while set.
    frozen: AtomicBool,
}

impl Shared {
    pub(super) fn new(initial_keys: usize) -> Self {
        let nodes = HashedNodes::new(initial_keys);
        let levels = SkipLevels::new(&nodes.arena);
        Shared {
            nodes,
            levels,
            queue: LinkQueue::new(),
            pending: ProtocolMutex::new(None),
            len: CacheLine::default(),
            linked: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            sleeping: AtomicBool::new(false),
            frozen: AtomicBool::new(false),
        }
    }

    /// Links everything queued now, and helps with the sorted batch
    /// another drainer published; returns how many nodes it linked.
    ///
    /// A drainer that takes a batch sorts it and links it in chunks of
    /// [`LINK_CHUNK`] nodes. A batch of more than one chunk is published
    /// (`Shared::pending`), and a drainer that finds the queue empty claims
    /// chunks of it instead of waiting: a scan that meets a backlog the
    /// background worker is linking links part of it itself. Chunks are
    /// disjoint key ranges, linked with `link_sorted`'s CAS protocol, which
    /// allows concurrent linkers. Every participant counts as a drainer
    /// (its [`queue::Batch`], empty for a helper) until the chunks it
    /// claimed are linked, so `LinkQueue::is_idle` still means "everything
    /// queued before is linked".
    pub(super) fn drain(&self) -> usize {
        let batch = self.queue.take();
        let linked = if batch.len() == 0 {
            let helping = self.pending.lock().clone();
            helping.map_or(0, |sorted| self.link_chunks(&sorted))
        } else {
            let sorted = Arc::new(SortedBatch::new(self.sorted(&batch)));
            let published = sorted.nodes.len() > LINK_CHUNK;
            if published {
                *self.pending.lock() = Some(Arc::clone(&sorted));
            }
            let n = self.link_chunks(&sorted);
            if published {
                let mut pending = self.pending.lock();
                if pending.as_ref().is_some_and(|p| Arc::ptr_eq(p, &sorted)) {
                    *pending = None;
                }
            }
            n
        };
        // Only now, every chunk this thread claimed being linked, does it
        // stop counting as a drainer.
        drop(batch);
        self.linked.fetch_add(linked, Ordering::Relaxed);
        linked
    }

    /// The nodes of `batch` in key order.
    fn sorted(&self, batch: &queue::Batch<'_>) -> Vec<Node> {
        // Sort by 8 key bytes read once per node (one miss each), full keys
        // only on ties. The 8 bytes start after the prefix the whole batch
        // shares, so keys like `user:000123` sort by the bytes that differ.
        let first = batch.iter().next().map_or(&[][..], |n| n.key());
        let shared = batch
            .iter()
            .fold(first.len(), |l, n| l.min(common_prefix_len(first, n.key())));
        let mut sorted: Vec<(u64, Node)> = batch
            .iter()
            .map(|n| (key_prefix(&n.key()[shared..]), n))
            .collect();
        sorted.sort_unstable_by(|a, b| {
            a.0.cmp(&b.0)
                .then_with(|| compares::cmp(a.1.key(), b.1.key()))
        });
        sorted.into_iter().map(|(_, n)| n).collect()
    }

    /// Links chunks of `sorted` until none is left to claim; returns the
    /// nodes this thread linked.
    fn link_chunks(&self, sorted: &SortedBatch) -> usize {
        let mut linked = 0;
        while let Some(chunk) = sorted.claim() {
            self.levels.link_sorted(chunk, |node| {
                node.flags().fetch_or(LINKED, Ordering::Release);
            });
            linked += chunk.len();
        }
        linked
    }

    /// Returns once every node queued before the call is linked (helping).
    pub(super) fn link_all(&self) {
        // The common case for a scan: nothing pending, two loads and no
        // write to the queue's shared cache lines.
        if self.queue.is_idle() {
            return;
        }
        let mut round = 0u32;
        loop {
            // Drain only when there is work: nodes queued, or chunks of a
            // published batch to claim. A caller with nothing to do only
            // watches. Every call used to drain, and a drain counts its
            // thread as a drainer even when it takes nothing: with 16
            // threads scanning at once some thread was always inside one,
            // so none saw the queue idle and all of them went on looping
            // (`seekrandom` and the memtable benchmark's `teks` part did
            // not finish at 16 threads on 16 cores).
            if !self.queue.is_empty() || self.has_unclaimed_chunks() {
                self.drain();
            }
            if self.queue.is_idle() {
                return;
            }
            crate::util::sync::backoff(&mut round);
        }
    }

    /// A published sorted batch still has chunks nobody claimed.
    fn has_unclaimed_chunks(&self) -> bool {
        self.pending
            .lock()
            .as_ref()
            .is_some_and(|sorted| sorted.has_unclaimed())
    }

    fn run_worker(&self) {
        crate::util::thread_priority::lower_current();
        while !self.stop.load(Ordering::Acquire) {
            let linked = if self.frozen.load(Ordering::Acquire) {
                0
            } else {
                self.drain()
            };
            if linked >= FULL_BATCH {
                continue;
            }
            if linked > 0 {
                // A trickle of new keys: let a batch gather instead of
                // competing with the writers for the cores node by node
                // (scans that need the backlog link it themselves).
                std::thread::park_timeout(GATHER_PARK);
                continue;
            }
            // Store-then-load against a writer's push (SeqCst CAS on the
            // queue head) then load of `sleeping`: all SeqCst, so at least
            // one of the two sees the other and no push is left to wait for
            // `IDLE_PARK`. (Not modelled under loom: a missed wake-up would
            // cost one park, not correctness; scans link what they need.)
            self.sleeping.store(true, Ordering::SeqCst);
            if self.queue.is_empty() || self.frozen.load(Ordering::Acquire) {
                std::thread::park_timeout(IDLE_PARK);
            }
            self.sleeping.store(false, Ordering::Relaxed);
        }
    }
}

impl KeyIndex for Shared {
    fn first_node(&self) -> Option<Node> {
        self.levels.head.next(0)
    }

    fn node_at_or_after(&self, key: &[u8]) -> Option<Node> {
        // The shortcut pointer (§4.4): an existing, linked key is one hash
        // probe away.
        if let Some(n) = self.nodes.find(key) {
            if n.flags().load(Ordering::Acquire) & LINKED != 0 {
                return Some(n);
            }
        }
        self.levels.at_or_after(key)
    }

    fn node_before(&self, key: &[u8]) -> Option<Node> {
        self.levels.before(key)
    }

    fn last_node(&self) -> Option<Node> {
        self.levels.last()
    }
}

/// Progress of the sorted index, for tests and stats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeaveStats {
    /// Distinct keys in the hash.
    pub keys: usize,
    /// Nodes linked into the skiplist.
    pub linked: usize,
    /// Slots of the hash's current table.
    pub hash_slots: usize,
}

/// The `teks` memtable. See the module docs.
pub struct TeksMemtable {
    /// Range deletes written to it (`crate::range_delete`).
    range_tombstones: crate::range_delete::MemRangeTombstones,
    shared: Arc<Shared>,
    full_keys: usize,
    worker: Mutex<Option<JoinHandle<()>>>,
    /// The worker's handle for `unpark`, set once it runs.
    thread: OnceLock<Thread>,
    /// Set if the worker could not be spawned: the memtable stays correct
    /// (scans link what they need themselves), only slower to scan.
    spawn_failed: AtomicBool,
}

impl TeksMemtable {
    /// An empty memtable for a write buffer of `write_buffer_size` bytes.
    pub fn new(write_buffer_size: usize) -> Self {
        let full = full_keys(write_buffer_size);
        TeksMemtable {
            range_tombstones: Default::default(),
            shared: Arc::new(Shared::new(initial_keys(full))),
            full_keys: full,
            worker: Mutex::new(None),
            thread: OnceLock::new(),
            spawn_failed: AtomicBool::new(false),
        }
    }

    /// Progress of the sorted index.
    pub fn weave_stats(&self) -> WeaveStats {
        WeaveStats {
            keys: self.shared.nodes.map.len(),
            linked: self.shared.linked.load(Ordering::Relaxed),
            hash_slots: self.shared.nodes.map.slots(),
        }
    }

    /// Test hook: stops (`true`) or resumes the worker's linking.
    pub fn freeze_worker(&self, frozen: bool) {
        self.shared.frozen.store(frozen, Ordering::Release);
        self.wake();
    }

    fn wake(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    #[cold]
    fn spawn_worker(&self) {
        let mut w = self.worker.lock();
        if w.is_some() || self.spawn_failed.load(Ordering::Relaxed) {
            return;
        }
        let shared = Arc::clone(&self.shared);
        match std::thread::Builder::new()
            .name("weft-teks-link".into())
            .spawn(move || shared.run_worker())
        {
            Ok(h) => {
                let _ = self.thread.set(h.thread().clone());
                *w = Some(h);
            }
            Err(_) => self.spawn_failed.store(true, Ordering::Relaxed),
        }
    }
}

impl Drop for TeksMemtable {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(h) = self.worker.get_mut().take() {
            h.thread().unpark();
            // A panicking worker has nothing left to clean up; the shared
            // state is freed by whoever drops the last `Arc`.
            let _ = h.join();
        }
    }
}

impl Memtable for TeksMemtable {
    fn range_tombstones(&self) -> &crate::range_delete::MemRangeTombstones {
        &self.range_tombstones
    }

    fn kind(&self) -> MemtableKind {
        MemtableKind::Teks
    }

    fn insert(&self, user_key: &[u8], seq: SequenceNumber, kind: ValueKind, value: &[u8]) {
        let shared = &*self.shared;
        shared.len.fetch_add(1, Ordering::Relaxed);
        let Some(node) = shared
            .nodes
            .insert(random_height, user_key, seq, kind, value)
        else {
            return;
        };
        let pushed = shared.queue.push(node);
        if pushed.queued.is_multiple_of(HELP_BACKLOG) && !shared.queue.is_draining() {
            shared.drain();
        } else if self.thread.get().is_none() {
            self.spawn_worker();
        } else if pushed.queued == FULL_BATCH
            || (pushed.was_empty && shared.sleeping.load(Ordering::SeqCst))
        {
            self.wake();
        }
    }

    fn get(&self, user_key: &[u8], snapshot: SequenceNumber) -> Option<Found<'_>> {
        self.shared.nodes.get(user_key, snapshot)
    }

    fn prefetch(&self, user_key: &[u8]) {
        self.shared.nodes.prefetch(user_key);
    }

    fn iter(self: Arc<Self>) -> Box<dyn InternalIterator> {
        // A flush iterates without `prepare_scan`: link everything.
        self.prepare_scan(MAX_SEQUENCE);
        Box::new(Cursor::new(Arc::clone(&self.shared)))
    }

    fn prepare_scan(&self, _snapshot: SequenceNumber) {
        // Linking everything queued is simpler than picking the nodes with
        // a version `<= snapshot` and costs no more: the queue holds only
        // keys newer than the last scan.
        self.shared.link_all();
    }

    fn approximate_memory(&self) -> usize {
        self.shared.nodes.memory()
    }

    fn len(&self) -> usize {
        self.shared.len.load(Ordering::Relaxed)
    }

    fn set_read_watermark(&self, seq: SequenceNumber) {
        self.shared.nodes.set_read_watermark(seq);
    }

    fn is_full(&self) -> bool {
        self.shared.nodes.map.len() >= self.full_keys
    }
}

#[cfg(test)]
mod tests;
