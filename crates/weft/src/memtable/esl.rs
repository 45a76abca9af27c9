//! The `esl` memtable (ESL, Appl. Sci. 2023, §3–4) on the JellyFish data
//! level: a lock-free sorted list of key nodes (one per user key, each with
//! its version list), a lock-free *parent-of-data level* (PDL) above it,
//! and *cache-optimised index levels* (COIL, sorted arrays) above that.
//!
//! ```text
//!   COIL  [..][..][..]            arrays, built by the worker, swapped in
//!   COIL  [..][..][..][..][..]    (prefix, position below, data shortcut)
//!   PDL   o──────o───o──────o     lock-free list, linked by the worker
//!   data  o─o─o──o─o─o─o──o─o     lock-free list of key nodes (writers)
//!          └ versions, newest first (jellyfish::node)
//! ```
//!
//! # Operations
//!
//! * **Search** (get, put, seek): the COIL gives the last indexed PDL node
//!   before the key (or the key's data node itself, via a shortcut); the
//!   reader walks the PDL forward, jumps down to that node's data node and
//!   walks the data level forward. Every step only moves forward over nodes
//!   known to sort before the key, so an index that lags behind the data
//!   level, or a COIL older than the PDL, only makes the walk longer — the
//!   paper's "endurable transient inconsistency".
//! * **Put**: a known key gets one CAS into its version list (found through
//!   the COIL shortcut when indexed). A new key is linked into the data
//!   level with one CAS (the race for the same new key is resolved as in
//!   `jellyfish`: the loser adds its version to the winner's node); one
//!   new key in two ([`PDL_SAMPLE`]) then pushes a PDL node onto the
//!   lock-free operation log (one CAS). Writers never touch the PDL or the
//!   COIL.
//! * **Background worker**: one thread per memtable (spawned once the
//!   memtable holds a few hundred keys; tiny memtables never need it)
//!   drains the log, sorts the batch, links each node into the PDL, and
//!   rebuilds the COIL from the PDL when it has grown by half since the last
//!   build, publishing it by an atomic pointer swap.
//!
//! # Why the COIL is rebuilt, not shifted (differs from the paper)
//!
//! The paper inserts into each COIL array in place, shifting the tail by
//! one entry per insert under a version lock, with ordered 8-byte stores so
//! readers see at worst a duplicate. At memtable scale this is quadratic:
//! with 1 M keys the COIL's bottom array (one entry per PDL node, 1 in 2
//! keys) has 500 K entries of 24 B, so a shift moves ~6 MB on average, per
//! indexed insert — 500 K shifts move ~3 TB; the paper's own §7.1 names
//! this as the limit. Here the worker rebuilds the arrays off to the side
//! in one sequential pass over the PDL (O(n)) and publishes them with one
//! pointer store; a rebuild happens when the PDL has grown by half, so the
//! total build work is O(n) amortised and a reader walks on average at most
//! ~1 unindexed PDL node past its COIL entry. Readers never see a COIL
//! mid-update, so the version lock and ordered stores are unnecessary; the
//! walk-forward tolerance still covers the lag between COIL, PDL and data
//! level.
//!
//! Reclamation: a replaced COIL is *not* freed while the memtable lives
//! (a reader may still be searching it; Weft has no epoch library as a
//! dependency). Because rebuilds happen at 1.5× growth, the retired arrays
//! sum to at most twice the live one (a geometric series; a rebuild forced
//! by the `sync_index` test/bench hook can add one more); they are counted
//! in [`Memtable::approximate_memory`]. At 1 M keys the live COIL is ~12 MB
//! against ~150 MB of nodes with 100 B values, so the bound costs ~16% of
//! such a memtable (less with larger values); the arena and the arrays go
//! when the last `Arc` drops.
//!
//! # Other differences from the paper
//!
//! * Levels are built with a fixed fanout of 16 (a static tree) instead of
//!   per-key random levels: a batch build knows the whole key set, so it
//!   can balance exactly. The PDL keeps a random sample of the data level,
//!   one key in two as a skiplist's level 1 (Pugh's p = 1/2); see
//!   [`PDL_SAMPLE`] for the measured choice.
//! * COIL prefixes are the 8 bytes after the indexed keys' common prefix
//!   (not the first 8 bytes), with a full-key comparison on ties, so keys
//!   with long shared prefixes still search in O(log n).
//! * The paper's data level holds one value per key, updated in place by a
//!   CAS; here it is the JellyFish data level (a version list per key),
//!   which keeps every version snapshots need; truncation under the read
//!   watermark is the same as in `jellyfish`.
//! * The operation log is a lock-free stack, not a ring (see `pdl`).
//! * One worker thread per memtable, not a pool.
//!
//! # Lifetime
//!
//! The worker holds an `Arc` of the shared state (arena, levels, log), not
//! of the memtable: dropping the [`EslMemtable`] sets a stop flag, wakes
//! the worker and joins it; cursors hold the shared state, so nothing a
//! reader may still use is freed before the last cursor goes.

mod coil;
mod pdl;

use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

use parking_lot::Mutex;

use self::coil::{Coil, Hit};
use self::pdl::{OpLog, Pdl};
use super::arena::Arena;
use super::jellyfish::levels::{SkipLevels, Splice};
use super::jellyfish::node::{
    alloc_node, alloc_version, cas_link_0, insert_version, level_0_len, truncate_below, Node,
};
use super::jellyfish::{Cursor, KeyIndex};
use super::{Found, Memtable, MemtableKind};
use crate::iter::InternalIterator;
use crate::key::compares::{self, key_prefix};
use crate::key::{SequenceNumber, ValueKind};
use crate::memtable::height::one_in;
use crate::util::stripe::CacheLine;

/// One new key in this many gets a PDL node (and so a COIL entry).
///
/// The sample sets how far a search walks the data level from the COIL's
/// entry: about `PDL_SAMPLE / 2` nodes past it, each a cache miss. Chosen
/// by measurement: the memtable benchmark (`WEFT_BENCH_KINDS=esl`, uniform
/// keys, one thread, alternating runs) measured 1 in 4, 2 and 1 for gets,
/// YCSB C, puts and memory. Denser samples search and insert faster and
/// cost more memory; one in two takes most of the gain for a small part
/// of the memory one in one costs (`bench/journal/2026-11-25-04-esl-pdl.md`).
const PDL_SAMPLE: u32 = 2;
/// PDL nodes pending before the worker is started.
const SPAWN_AT: usize = 64;
/// A writer wakes the worker every this many pushes.
const WAKE_EVERY: usize = 256;
/// The worker sleeps this long when there is nothing to do.
const IDLE_PARK: Duration = Duration::from_millis(1);
/// The COIL is rebuilt when the PDL has this many entries beyond it...
const REBUILD_MIN: usize = 32;
/// ... and at least `1 / REBUILD_DIV` of the COIL's size.
const REBUILD_DIV: usize = 2;

/// State shared by the memtable, its cursors and its worker.
pub(crate) struct Shared {
    arena: Arena,
    /// Data-level head (height 1, empty key, no versions).
    head: Node,
    /// PDL head: indexes the data head.
    pdl_head: Pdl,
    /// The live COIL (null before the first build). Never freed before
    /// `Shared` drops: replaced ones go to `retired`.
    coil: AtomicPtr<Coil>,
    // Boxed: readers hold `&Coil` into these boxes; a `Vec<Coil>` would
    // move the structs when it grows.
    #[allow(clippy::vec_box)]
    retired: Mutex<Vec<Box<Coil>>>,
    /// Bytes of the live and retired COILs.
    coil_bytes: AtomicUsize,
    log: OpLog,
    /// PDL nodes pushed and not yet linked.
    pending: AtomicUsize,
    /// PDL nodes linked (excluding the head).
    pdl_len: AtomicUsize,
    /// Level-0 entries of the live COIL.
    coil_len: AtomicUsize,
    len: CacheLine<AtomicUsize>,
    watermark: AtomicU64,
    stop: AtomicBool,
    /// Test hook: the worker does nothing while set.
    frozen: AtomicBool,
    /// Test hook: rebuild the COIL even below the growth threshold.
    force_rebuild: AtomicBool,
}

// SAFETY: the raw pointer `coil` points to a `Coil` owned by `Shared`
// (published once, freed only in `Drop`); `Coil` itself holds only node
// handles, which are `Send + Sync`. Everything else is atomics, a mutex or
// the arena (`Send + Sync`).
unsafe impl Send for Shared {}
// SAFETY: see `Send`: a published `Coil` is immutable.
unsafe impl Sync for Shared {}

impl Drop for Shared {
    fn drop(&mut self) {
        let c = *self.coil.get_mut();
        if !c.is_null() {
            // SAFETY: `c` came from `Box::into_raw` in `rebuild` and, being
            // the live COIL, is not in `retired`; `&mut self` means no reader.
            drop(unsafe { Box::from_raw(c) });
        }
    }
}

/// Index progress, for tests and stats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexStats {
    /// PDL nodes waiting in the operation log.
    pub pending: usize,
    /// PDL nodes linked.
    pub pdl: usize,
    /// PDL nodes covered by the live COIL.
    pub coil: usize,
    /// COIL levels (0 before the first build).
    pub coil_levels: usize,
}

impl Shared {
    fn new() -> Self {
        let arena = Arena::new();
        let (head, _) = alloc_node(&arena, 1, b"", None);
        let pdl_head = Pdl::alloc(&arena, head);
        Shared {
            arena,
            head,
            pdl_head,
            coil: AtomicPtr::new(ptr::null_mut()),
            retired: Mutex::new(Vec::new()),
            coil_bytes: AtomicUsize::new(0),
            log: OpLog::new(),
            pending: AtomicUsize::new(0),
            pdl_len: AtomicUsize::new(0),
            coil_len: AtomicUsize::new(0),
            len: CacheLine::default(),
            watermark: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            frozen: AtomicBool::new(false),
            force_rebuild: AtomicBool::new(false),
        }
    }

    #[inline]
    fn coil(&self) -> Option<&Coil> {
        // SAFETY: a non-null `coil` was published with Release after being
        // fully built and is freed only when `Shared` drops (replaced ones
        // are kept in `retired`), so it outlives `&self`.
        unsafe { self.coil.load(Ordering::Acquire).as_ref() }
    }

    /// Where the index leaves a search for `key`: the key's data node, or
    /// the PDL node before it (walked forward over the PDL).
    #[inline]
    fn locate(&self, key: &[u8], stop_on_exact: bool) -> Result<Node, Node> {
        let start = match self
            .coil()
            .map_or(Hit::Start, |c| c.search(key, stop_on_exact))
        {
            Hit::Exact(n) => return Ok(n),
            Hit::Before(p) => p,
            Hit::Start => self.pdl_head,
        };
        let p = start.walk_before(key, key_prefix(key));
        Err(p.data())
    }

    /// The data-level pair `(prev, next)` with `prev.key < key <= next.key`,
    /// walking from `before` (before the key, or the head).
    #[inline]
    fn splice(key: &[u8], before: Node) -> (Node, Option<Node>) {
        let splice = Self::walk(key, before);
        (splice.prev, splice.next)
    }

    /// Walks the data level from `before` (before the key, or the head).
    /// Where the index left the walk a few nodes short, the node two on
    /// (`before`'s skip hint) is requested with the first step's.
    #[inline]
    fn walk(key: &[u8], before: Node) -> Splice {
        if let Some(s) = before.skip() {
            s.prefetch();
        }
        SkipLevels::splice(key, before, 0, None)
    }

    /// The key's node, if present.
    #[inline]
    fn find(&self, key: &[u8]) -> Option<Node> {
        match self.locate(key, true) {
            Ok(n) => Some(n),
            Err(before) => Self::splice(key, before)
                .1
                .filter(|n| compares::eq(n.key(), key)),
        }
    }

    fn maybe_truncate(&self, node: Node) {
        let w = self.watermark.load(Ordering::Relaxed);
        if w != 0 {
            truncate_below(node.versions(), w);
        }
    }

    /// Inserts a version; returns the log's pending count when a PDL node
    /// was logged.
    fn insert(
        &self,
        key: &[u8],
        seq: SequenceNumber,
        kind: ValueKind,
        value: &[u8],
    ) -> Option<usize> {
        self.len.fetch_add(1, Ordering::Relaxed);
        let before = match self.locate(key, true) {
            Ok(n) => {
                insert_version(n.versions(), alloc_version(&self.arena, seq, kind, value));
                self.maybe_truncate(n);
                return None;
            }
            Err(before) => before,
        };
        let splice = Self::walk(key, before);
        let (mut passed, mut prev, mut next) = (splice.before_prev, splice.prev, splice.next);
        if let Some(n) = next.filter(|_| splice.found) {
            insert_version(n.versions(), alloc_version(&self.arena, seq, kind, value));
            self.maybe_truncate(n);
            return None;
        }
        let (node, first) = alloc_node(&self.arena, 1, key, Some((seq, kind, value)));
        loop {
            if cas_link_0(passed, prev, next, node) {
                break;
            }
            let splice = SkipLevels::splice(key, prev, 0, None);
            // A walk that took no step leaves `prev` and its predecessor.
            passed = splice.before_prev.or(passed);
            (prev, next) = (splice.prev, splice.next);
            if let Some(winner) = next.filter(|_| splice.found) {
                if let Some(v) = first {
                    insert_version(winner.versions(), v);
                }
                self.maybe_truncate(winner);
                return None;
            }
        }
        if !one_in(PDL_SAMPLE) {
            return None;
        }
        // Count before pushing, so the worker's decrement never runs first.
        let pending = self.pending.fetch_add(1, Ordering::AcqRel) + 1;
        self.log.push(Pdl::alloc(&self.arena, node));
        Some(pending)
    }

    /// Worker: links every logged node into the PDL. Returns how many.
    fn drain_log(&self) -> usize {
        let mut batch = self.log.take_all();
        if batch.is_empty() {
            return 0;
        }
        batch.sort_unstable_by(|a, b| compares::cmp(a.data().key(), b.data().key()));
        let coil = self.coil();
        let mut last: Option<Pdl> = None;
        for p in &batch {
            let key = p.data().key();
            let from = match coil.map_or(Hit::Start, |c| c.search(key, false)) {
                Hit::Before(c) => c,
                _ => self.pdl_head,
            };
            // Start from whichever is later: the COIL's entry or the node
            // linked just before (the batch is sorted).
            let from = match last {
                Some(l)
                    if from == self.pdl_head || compares::lt(from.data().key(), l.data().key()) =>
                {
                    l
                }
                _ => from,
            };
            p.link_after(from);
            last = Some(*p);
        }
        self.pdl_len.fetch_add(batch.len(), Ordering::Relaxed);
        self.pending.fetch_sub(batch.len(), Ordering::Release);
        batch.len()
    }

    /// Worker: rebuilds the COIL if the PDL outgrew it. Returns true if so.
    fn maybe_rebuild(&self) -> bool {
        let pdl = self.pdl_len.load(Ordering::Relaxed);
        let coil = self.coil_len.load(Ordering::Relaxed);
        // A forced rebuild (the `sync_index` hook) waits until the log is
        // drained: forcing one after each partial drain would retire a
        // near-live-sized COIL per drain and break the 2x memory bound.
        let forced = self.pending.load(Ordering::Acquire) == 0
            && self.force_rebuild.swap(false, Ordering::AcqRel);
        let grown = pdl.saturating_sub(coil);
        if !(forced && grown > 0 || grown >= REBUILD_MIN.max(coil / REBUILD_DIV)) {
            return false;
        }
        let mut entries = Vec::with_capacity(pdl);
        let mut p = self.pdl_head.next();
        while let Some(x) = p {
            entries.push(x);
            p = x.next();
        }
        let Some(new) = Coil::build(entries) else {
            return false;
        };
        let len = new.len();
        self.coil_bytes.fetch_add(new.bytes(), Ordering::Relaxed);
        let old = self
            .coil
            .swap(Box::into_raw(Box::new(new)), Ordering::AcqRel);
        if !old.is_null() {
            // SAFETY: `old` came from `Box::into_raw` here; it stays alive
            // in `retired` until `Shared` drops (readers may hold it).
            self.retired.lock().push(unsafe { Box::from_raw(old) });
        }
        self.coil_len.store(len, Ordering::Relaxed);
        true
    }

    fn run_worker(&self) {
        while !self.stop.load(Ordering::Acquire) {
            if self.frozen.load(Ordering::Acquire) {
                std::thread::park_timeout(IDLE_PARK);
                continue;
            }
            let drained = self.drain_log();
            let rebuilt = self.maybe_rebuild();
            if drained == 0 && !rebuilt {
                std::thread::park_timeout(IDLE_PARK);
            }
        }
    }

    fn stats(&self) -> IndexStats {
        IndexStats {
            pending: self.pending.load(Ordering::Acquire),
            pdl: self.pdl_len.load(Ordering::Relaxed),
            coil: self.coil_len.load(Ordering::Relaxed),
            coil_levels: self.coil().map_or(0, Coil::levels),
        }
    }
}

impl KeyIndex for Shared {
    fn first_node(&self) -> Option<Node> {
        self.head.next(0)
    }

    fn node_at_or_after(&self, key: &[u8]) -> Option<Node> {
        match self.locate(key, true) {
            Ok(n) => Some(n),
            Err(before) => Self::splice(key, before).1,
        }
    }

    fn node_before(&self, key: &[u8]) -> Option<Node> {
        let before = match self.locate(key, false) {
            // Not produced without `stop_on_exact`; the head is a safe start.
            Ok(_) => self.head,
            Err(before) => before,
        };
        let (prev, _) = Self::splice(key, before);
        (prev != self.head).then_some(prev)
    }

    fn last_node(&self) -> Option<Node> {
        let p = self
            .coil()
            .and_then(Coil::last_pdl)
            .unwrap_or(self.pdl_head)
            .walk_to_end();
        let mut x = p.data();
        while let Some(n) = x.next(0) {
            x = n;
        }
        (x != self.head).then_some(x)
    }
}

/// The `esl` memtable. See the module docs.
pub struct EslMemtable {
    /// Range deletes written to it (`crate::range_delete`).
    range_tombstones: crate::range_delete::MemRangeTombstones,
    shared: Arc<Shared>,
    worker: Mutex<Option<JoinHandle<()>>>,
    /// The worker's handle for `unpark`, set once it runs.
    thread: OnceLock<Thread>,
    /// Set if the worker could not be spawned: the memtable stays correct
    /// (searches walk the data level) but unindexed.
    spawn_failed: AtomicBool,
}

impl Default for EslMemtable {
    fn default() -> Self {
        Self::new()
    }
}

impl EslMemtable {
    /// An empty memtable; its worker starts when the memtable grows.
    pub fn new() -> Self {
        EslMemtable {
            range_tombstones: Default::default(),
            shared: Arc::new(Shared::new()),
            worker: Mutex::new(None),
            thread: OnceLock::new(),
            spawn_failed: AtomicBool::new(false),
        }
    }

    /// Number of distinct user keys (a walk of the data level, see
    /// `jellyfish::node::level_0_len`).
    pub fn key_count(&self) -> usize {
        level_0_len(self.shared.head.next(0))
    }

    /// Index progress (test and stats hook).
    pub fn index_stats(&self) -> IndexStats {
        self.shared.stats()
    }

    /// Test hook: stops (`true`) or resumes the worker's index updates.
    pub fn freeze_index(&self, frozen: bool) {
        self.shared.frozen.store(frozen, Ordering::Release);
        self.wake();
    }

    /// Test and benchmark hook: waits until the log is drained and the
    /// COIL covers the whole PDL. Returns false on timeout or if no worker
    /// could run.
    pub fn sync_index(&self, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        self.spawn_worker();
        loop {
            let s = self.shared.stats();
            if s.pending == 0 && s.coil == s.pdl {
                return true;
            }
            if self.spawn_failed.load(Ordering::Relaxed) || std::time::Instant::now() > deadline {
                return false;
            }
            self.shared.force_rebuild.store(true, Ordering::Release);
            self.wake();
            std::thread::sleep(Duration::from_micros(200));
        }
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
            .name("weft-esl-index".into())
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

impl Drop for EslMemtable {
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

impl Memtable for EslMemtable {
    fn range_tombstones(&self) -> &crate::range_delete::MemRangeTombstones {
        &self.range_tombstones
    }

    fn kind(&self) -> MemtableKind {
        MemtableKind::Esl
    }

    fn insert(&self, user_key: &[u8], seq: SequenceNumber, kind: ValueKind, value: &[u8]) {
        if let Some(pending) = self.shared.insert(user_key, seq, kind, value) {
            if self.thread.get().is_none() {
                if pending >= SPAWN_AT {
                    self.spawn_worker();
                }
            } else if pending % WAKE_EVERY == 0 {
                self.wake();
            }
        }
    }

    fn get(&self, user_key: &[u8], snapshot: SequenceNumber) -> Option<Found<'_>> {
        let v = self.shared.find(user_key)?.version_at(snapshot)?;
        Some(Found {
            seq: v.seq(),
            kind: v.kind(),
            value: v.value(),
        })
    }

    fn iter(self: Arc<Self>) -> Box<dyn InternalIterator> {
        Box::new(Cursor::new(Arc::clone(&self.shared)))
    }

    fn approximate_memory(&self) -> usize {
        self.shared.arena.memory_usage() + self.shared.coil_bytes.load(Ordering::Relaxed)
    }

    fn len(&self) -> usize {
        self.shared.len.load(Ordering::Relaxed)
    }

    fn set_read_watermark(&self, seq: SequenceNumber) {
        self.shared.watermark.fetch_max(seq, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests;
