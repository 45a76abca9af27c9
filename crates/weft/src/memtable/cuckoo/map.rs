//! [`KeyMap`]: the optimistically concurrent cuckoo hash of TeksDB §4.1,
//! mapping a user key to its key node. Shared by the `cuckoo` kind (where
//! it is the whole index) and the `teks` kind (where it is the point-lookup
//! side of the weave and holds the shortcut pointers into the sorted index).
//!
//! # Layout
//!
//! A table is a power-of-two array of 64-byte buckets, each a seqlock
//! version word and [`SLOTS`] slots. A key hashes (`key_hash`) to two
//! distinct candidate buckets; its entry lives in one of their 14 slots. A
//! slot is one `u64`: a 16-bit tag from the hash (so most non-matching
//! slots are rejected without touching the node), the 48-bit node address
//! (8-aligned, so bit 0 is free) and bit 0, [`PENDING`]. Zero is empty.
//!
//! # Protocols
//!
//! * **Lookup** reads both buckets' versions, scans their slots, and
//!   returns the first *committed* entry whose node holds the key. Entries
//!   are never removed (a memtable only grows), only moved by displacement,
//!   so a hit needs no validation; a miss is trusted only if neither
//!   bucket's version changed meanwhile (a displacement moving the entry
//!   between the two buckets bumps both).
//! * **Claim** (a new key): CAS an empty candidate slot from zero to a
//!   *pending* entry for our node — one CAS, no lock — then scan the other
//!   candidate slots for the same key. No other entry: commit (clear the
//!   bit). A committed one: another writer won; clear our slot and use its
//!   node. Another pending one: the claim with the higher node address
//!   backs off, the lower one waits until the other is resolved. Both
//!   claims are SeqCst, so of two racing claimers at least one sees the
//!   other (store-then-load on both sides), hence at most one commits.
//!   Lookups ignore pending entries: a claimer is still inside its insert,
//!   so its sequence is not yet visible to any snapshot.
//! * **Displacement** (no empty candidate): under [`KeyMap`]'s displacement
//!   mutex, a bounded breadth-first search over cuckoo paths finds a chain
//!   of committed entries ending at an empty slot; the chain moves from its
//!   end backward, each move a CAS of the destination from empty to the
//!   entry (check-before-update: a concurrent claim of that slot aborts the
//!   path, losing nothing) and then clearing the source, inside both
//!   buckets' seqlock write sections. An entry is copied before it is
//!   cleared, so a reader never misses it; pending entries are never moved.
//! * **Growth**: when a table reaches [`GROW_LOAD`] or displacement finds no
//!   path, it is frozen — new claims wait, lookups and updates of existing
//!   keys go on — until the claims in flight (counted in striped counters)
//!   end; then every entry is rehashed into a table twice the size, which
//!   is published. The old table stays readable (a reader may hold it) and
//!   is freed with the map. Claims are SeqCst on the counter and the frozen
//!   flag, so the grower never copies a table with a claim still running.

use crate::util::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
use crate::util::sync::{backoff, Mutex};
use std::ptr;

use crate::key::compares;
use crate::memtable::hash::key_hash;
use crate::memtable::jellyfish::node::Node;
#[cfg(not(loom))]
use crate::memtable::pages::ZeroedPages;
use crate::util::prefetch::prefetch_line;
use crate::util::stripe::{thread_stripe, CacheLine};

/// Slots per bucket: 7 slots and the version fill one cache line.
pub(crate) const SLOTS: usize = 7;
/// Slot bit: the entry is claimed but not yet known to be the only one.
const PENDING: u64 = 1;
/// The node address bits of a slot (user-space addresses fit 48 bits).
const ADDR_MASK: u64 = (1 << 48) - 2;
const TAG_SHIFT: u32 = 48;
/// A table grows once its committed entries reach this share of its slots
/// (numerator, denominator).
pub(crate) const GROW_LOAD: (usize, usize) = (9, 10);
/// Displacement search bound: slots examined per search.
const MAX_SEARCH: usize = 512;
/// Displacement search bound: moves per path.
const MAX_PATH: usize = 5;
/// Striped counters of claims in flight (per thread, to avoid sharing one
/// contended cache line between writers).
const CLAIM_STRIPES: usize = 8;

/// A key's hash, computed once per operation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyHash(u64);

impl KeyHash {
    #[inline]
    pub(crate) fn of(key: &[u8]) -> KeyHash {
        KeyHash(key_hash(key))
    }

    /// 16 bits independent of the bucket bits (a multiply mixes every bit
    /// into the top ones).
    #[inline]
    fn tag(self) -> u64 {
        self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> TAG_SHIFT
    }

    /// The two distinct candidate buckets under `mask` (`>= 1`).
    #[inline]
    fn buckets(self, mask: usize) -> [usize; 2] {
        let b1 = self.0 as usize & mask;
        let mut b2 = (self.0 >> 32) as usize & mask;
        if b2 == b1 {
            b2 = b1 ^ 1;
        }
        [b1, b2]
    }
}

#[inline]
fn encode(tag: u64, node: Node, pending: bool) -> u64 {
    let addr = node.as_ptr() as u64;
    assert!(
        addr & !ADDR_MASK == 0,
        "memtable node address {addr:#x} does not fit a cuckoo slot"
    );
    (tag << TAG_SHIFT) | addr | u64::from(pending)
}

#[inline]
fn node_of(word: u64) -> Node {
    debug_assert_ne!(word, 0);
    match Node::from_ptr((word & ADDR_MASK) as *mut u8) {
        Some(n) => n,
        None => unreachable!("a non-empty slot holds a node address"),
    }
}

#[inline]
fn word_tag(word: u64) -> u64 {
    word >> TAG_SHIFT
}

#[repr(C, align(64))]
#[derive(Default)]
struct Bucket {
    /// Seqlock: odd while a displacement moves an entry into or out of
    /// this bucket.
    version: AtomicU32,
    slots: [AtomicU64; SLOTS],
}

impl Bucket {
    #[inline]
    fn read_begin(&self) -> u32 {
        loop {
            let v = self.version.load(Ordering::Acquire);
            if v & 1 == 0 {
                return v;
            }
            crate::util::sync::spin_loop();
        }
    }

    #[inline]
    fn read_valid(&self, v: u32) -> bool {
        fence(Ordering::Acquire);
        self.version.load(Ordering::Relaxed) == v
    }

    /// Only the displacement-mutex holder writes versions.
    #[inline]
    fn write_begin(&self) {
        let v = self.version.load(Ordering::Relaxed);
        debug_assert_eq!(v & 1, 0);
        self.version.store(v.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
    }

    #[inline]
    fn write_end(&self) {
        let v = self.version.load(Ordering::Relaxed);
        debug_assert_eq!(v & 1, 1);
        self.version.store(v.wrapping_add(1), Ordering::Release);
    }
}

/// A table's buckets: in their own mapping, so untouched pages cost nothing
/// and a dropped table goes back to the OS (see `pages`). Under loom, built
/// one by one: its atomics are handles into the model, not zeroable words.
#[cfg(not(loom))]
type Buckets = ZeroedPages<Bucket>;
#[cfg(loom)]
type Buckets = Box<[Bucket]>;

struct Table {
    buckets: Buckets,
    mask: usize,
    /// Set by the grower: no new claim may start.
    frozen: AtomicBool,
    claimers: [CacheLine<AtomicUsize>; CLAIM_STRIPES],
}

impl Table {
    fn new(buckets: usize) -> Box<Table> {
        debug_assert!(buckets.is_power_of_two() && buckets >= 2);
        #[cfg(not(loom))]
        // SAFETY: a bucket is a u32 and u64 atomics (and padding): all-zero
        // bytes are the empty bucket `Bucket::default` builds, and none
        // needs a drop.
        let table = unsafe { ZeroedPages::<Bucket>::new(buckets) };
        #[cfg(loom)]
        let table: Buckets = (0..buckets).map(|_| Bucket::default()).collect();
        Box::new(Table {
            buckets: table,
            mask: buckets - 1,
            frozen: AtomicBool::new(false),
            claimers: Default::default(),
        })
    }

    fn slots(&self) -> usize {
        self.buckets.len() * SLOTS
    }

    fn bytes(&self) -> usize {
        std::mem::size_of::<Table>() + self.buckets.len() * std::mem::size_of::<Bucket>()
    }

    #[inline]
    fn bucket(&self, i: usize) -> &Bucket {
        &self.buckets[i]
    }

    /// Registers a claim; `None` if the table is frozen for growth.
    #[inline]
    fn enter(&self) -> Option<&AtomicUsize> {
        let c = &self.claimers[thread_stripe(CLAIM_STRIPES)].0;
        c.fetch_add(1, Ordering::SeqCst);
        crate::util::sync::seqcst_store_load();
        if self.frozen.load(Ordering::SeqCst) {
            c.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(c)
    }

    fn claims_in_flight(&self) -> usize {
        self.claimers
            .iter()
            .map(|s| s.0.load(Ordering::SeqCst))
            .sum()
    }

    /// The committed entry for `key`, or whether a pending one exists.
    #[inline]
    fn probe(&self, kh: KeyHash, key: &[u8], order: Ordering) -> Probe {
        self.scan_candidates(kh, key, order, None)
    }

    /// Scans `key`'s candidates for an entry other than `mine` (SeqCst: the
    /// load half of the claim's store-then-load).
    fn other_entry(&self, kh: KeyHash, key: &[u8], mine: &AtomicU64) -> Probe {
        crate::util::sync::seqcst_store_load();
        self.scan_candidates(kh, key, Ordering::SeqCst, Some(mine))
    }

    /// Both candidate buckets' entries for `key` (skipping the slot `skip`),
    /// read inside their seqlocks: a committed entry, else a pending one.
    #[inline]
    fn scan_candidates(
        &self,
        kh: KeyHash,
        key: &[u8],
        order: Ordering,
        skip: Option<&AtomicU64>,
    ) -> Probe {
        let tag = kh.tag();
        let [i1, i2] = kh.buckets(self.mask);
        let (b1, b2) = (self.bucket(i1), self.bucket(i2));
        loop {
            let (v1, v2) = (b1.read_begin(), b2.read_begin());
            let mut pending = None;
            for b in [b1, b2] {
                for s in &b.slots {
                    if skip.is_some_and(|m| ptr::eq(s, m)) {
                        continue;
                    }
                    let w = s.load(order);
                    if w != 0 && word_tag(w) == tag {
                        let n = node_of(w);
                        if compares::eq(n.key(), key) {
                            if w & PENDING == 0 {
                                return Probe::Found(n);
                            }
                            pending = Some(w);
                        }
                    }
                }
            }
            if b1.read_valid(v1) && b2.read_valid(v2) {
                return match pending {
                    Some(w) => Probe::Pending(w),
                    None => Probe::Absent,
                };
            }
        }
    }

    /// CASes `word` into the first empty candidate slot of `kh`.
    #[inline]
    fn claim_empty(&self, kh: KeyHash, word: u64) -> Option<&AtomicU64> {
        for i in kh.buckets(self.mask) {
            for s in &self.bucket(i).slots {
                if s.load(Ordering::Relaxed) == 0
                    && s.compare_exchange(0, word, Ordering::SeqCst, Ordering::Relaxed)
                        .is_ok()
                {
                    return Some(s);
                }
            }
        }
        None
    }

    /// Frees a slot in one of `kh`'s buckets by moving a chain of committed
    /// entries (see the module docs). The caller holds the displacement
    /// mutex (or owns the table exclusively). False if no path was found
    /// within the search bounds or a concurrent claim broke the path.
    fn displace(&self, kh: KeyHash) -> bool {
        struct Step {
            bucket: usize,
            slot: usize,
            word: u64,
            parent: usize,
            depth: usize,
        }
        let mut steps: Vec<Step> = Vec::with_capacity(64);
        for b in kh.buckets(self.mask) {
            for s in 0..SLOTS {
                steps.push(Step {
                    bucket: b,
                    slot: s,
                    word: 0,
                    parent: usize::MAX,
                    depth: 1,
                });
            }
        }
        let mut at = 0;
        while at < steps.len() && at < MAX_SEARCH {
            let (b, s, depth) = (steps[at].bucket, steps[at].slot, steps[at].depth);
            let w = self.bucket(b).slots[s].load(Ordering::Acquire);
            steps[at].word = w;
            if w == 0 {
                // Freed meanwhile: the caller retries its claim.
                return true;
            }
            if w & PENDING != 0 {
                at += 1;
                continue;
            }
            let [a1, a2] = KeyHash::of(node_of(w).key()).buckets(self.mask);
            let alt = if a1 == b { a2 } else { a1 };
            debug_assert!(a1 == b || a2 == b, "entry outside its candidate buckets");
            let alt_bucket = self.bucket(alt);
            if let Some(free) =
                (0..SLOTS).find(|&j| alt_bucket.slots[j].load(Ordering::Acquire) == 0)
            {
                return self.move_chain(&steps, at, alt, free, |st| {
                    (st.bucket, st.slot, st.word, st.parent)
                });
            }
            if depth < MAX_PATH {
                for j in 0..SLOTS {
                    // A path through the same slot twice would move an
                    // entry over itself.
                    let mut a = at;
                    let mut on_path = false;
                    while a != usize::MAX {
                        on_path |= steps[a].bucket == alt && steps[a].slot == j;
                        a = steps[a].parent;
                    }
                    if on_path {
                        continue;
                    }
                    steps.push(Step {
                        bucket: alt,
                        slot: j,
                        word: 0,
                        parent: at,
                        depth: depth + 1,
                    });
                }
            }
            at += 1;
        }
        false
    }

    /// Executes the path ending at step `last`, whose entry moves to the
    /// free slot `(to_bucket, to_slot)`; then each parent moves into the
    /// slot its child vacated.
    fn move_chain<S>(
        &self,
        steps: &[S],
        last: usize,
        mut to_bucket: usize,
        mut to_slot: usize,
        get: impl Fn(&S) -> (usize, usize, u64, usize),
    ) -> bool {
        let mut at = last;
        loop {
            let (b, s, word, parent) = get(&steps[at]);
            let (from, to) = (self.bucket(b), self.bucket(to_bucket));
            // Check-before-update: the source must still hold the entry we
            // planned to move (it cannot change: only a displacement moves
            // committed entries) and the destination must still be empty.
            if from.slots[s].load(Ordering::Acquire) != word {
                return false;
            }
            to.write_begin();
            from.write_begin();
            let moved = to.slots[to_slot]
                .compare_exchange(0, word, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok();
            if moved {
                let cleared = from.slots[s]
                    .compare_exchange(word, 0, Ordering::SeqCst, Ordering::Relaxed)
                    .is_ok();
                debug_assert!(cleared, "a committed entry changed under displacement");
            }
            from.write_end();
            to.write_end();
            if !moved {
                return false;
            }
            if parent == usize::MAX {
                return true;
            }
            to_bucket = b;
            to_slot = s;
            at = parent;
        }
    }
}

enum Probe {
    Found(Node),
    Pending(u64),
    Absent,
}

/// The concurrent cuckoo hash. See the module docs.
pub(crate) struct KeyMap {
    current: AtomicPtr<Table>,
    /// Tables replaced by growth; readers may still hold them. Boxed so
    /// their addresses stay put when the vector reallocates.
    #[allow(clippy::vec_box)]
    retired: Mutex<Vec<Box<Table>>>,
    /// One displacement at a time (TeksDB §4.1's collision mutex).
    displacement: Mutex<()>,
    /// One growth at a time.
    growth: Mutex<()>,
    /// Committed entries.
    len: AtomicUsize,
    /// Bytes of the current and retired tables.
    bytes: AtomicUsize,
    /// Growth threshold (numerator, denominator); [`GROW_LOAD`] but in
    /// tests, which run tables fuller to force displacement.
    grow_load: (usize, usize),
    /// Displacements that moved at least one entry, and growths.
    displacements: AtomicUsize,
    growths: AtomicUsize,
}

// SAFETY: `current` points to a `Table` owned by the map (published with
// Release after being fully built, freed only in `Drop`; replaced tables
// move to `retired`). A table holds only atomics and node addresses.
unsafe impl Send for KeyMap {}
// SAFETY: see `Send`; all shared mutation goes through atomics or mutexes.
unsafe impl Sync for KeyMap {}

impl Drop for KeyMap {
    fn drop(&mut self) {
        let t = self.current.load(Ordering::Relaxed);
        // SAFETY: `t` came from `Box::into_raw` and is not in `retired`;
        // `&mut self` means no reader is left.
        drop(unsafe { Box::from_raw(t) });
    }
}

impl KeyMap {
    /// An empty map with room for about `expected` keys before it grows.
    pub(crate) fn with_capacity(expected: usize) -> KeyMap {
        let buckets = (expected * GROW_LOAD.1)
            .div_ceil(GROW_LOAD.0 * SLOTS)
            .next_power_of_two()
            .max(2);
        let t = Table::new(buckets);
        let bytes = t.bytes();
        KeyMap {
            current: AtomicPtr::new(Box::into_raw(t)),
            retired: Mutex::new(Vec::new()),
            displacement: Mutex::new(()),
            growth: Mutex::new(()),
            len: AtomicUsize::new(0),
            bytes: AtomicUsize::new(bytes),
            grow_load: GROW_LOAD,
            displacements: AtomicUsize::new(0),
            growths: AtomicUsize::new(0),
        }
    }

    #[inline]
    fn table(&self) -> &Table {
        // SAFETY: `current` is never null, and every table it ever pointed
        // to lives until the map drops (see `Send`), which outlives `&self`.
        unsafe { &*self.current.load(Ordering::Acquire) }
    }

    /// Distinct keys committed.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Bytes of the map's tables (current and retired).
    pub(crate) fn memory(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Slots of the current table.
    pub(crate) fn slots(&self) -> usize {
        self.table().slots()
    }

    /// Starts loading `kh`'s two candidate buckets (see
    /// `Memtable::prefetch`).
    #[inline]
    pub(crate) fn prefetch(&self, kh: KeyHash) {
        let t = self.table();
        for i in kh.buckets(t.mask) {
            prefetch_line(t.bucket(i));
        }
    }

    /// The node of `key`, if a committed entry exists.
    #[inline]
    pub(crate) fn find(&self, kh: KeyHash, key: &[u8]) -> Option<Node> {
        match self.table().probe(kh, key, Ordering::Acquire) {
            Probe::Found(n) => Some(n),
            Probe::Pending(_) | Probe::Absent => None,
        }
    }

    /// The node of `key`: the existing one (`Err`), or — if none — the node
    /// `make` returns, now the key's only entry (`Ok`). `make` is called at
    /// most once; its node is abandoned if another writer wins the key.
    pub(crate) fn get_or_insert(
        &self,
        kh: KeyHash,
        key: &[u8],
        make: &mut dyn FnMut() -> Node,
    ) -> Result<Node, Node> {
        let mut ours: Option<Node> = None;
        let mut round = 0u32;
        'retry: loop {
            let t = self.table();
            match t.probe(kh, key, Ordering::Acquire) {
                Probe::Found(n) => return Err(n),
                Probe::Pending(_) => {
                    backoff(&mut round);
                    continue;
                }
                Probe::Absent => {}
            }
            if self.len() * self.grow_load.1 >= t.slots() * self.grow_load.0 {
                self.grow(t);
                continue;
            }
            let Some(claims) = t.enter() else {
                self.wait_for_growth(t);
                continue;
            };
            let node = *ours.get_or_insert_with(&mut *make);
            debug_assert_eq!(node.key(), key);
            let word = encode(kh.tag(), node, true);
            let slot = match t.claim_empty(kh, word) {
                Some(s) => s,
                None => {
                    let moved = {
                        let _g = self.displacement.lock();
                        t.displace(kh)
                    };
                    if moved {
                        self.displacements.fetch_add(1, Ordering::Relaxed);
                    }
                    claims.fetch_sub(1, Ordering::SeqCst);
                    if !moved {
                        self.grow(t);
                    }
                    continue;
                }
            };
            loop {
                match t.other_entry(kh, key, slot) {
                    Probe::Absent => {
                        let committed = slot
                            .compare_exchange(
                                word,
                                word & !PENDING,
                                Ordering::SeqCst,
                                Ordering::Relaxed,
                            )
                            .is_ok();
                        debug_assert!(committed, "a pending entry changed under its claimer");
                        self.len.fetch_add(1, Ordering::Relaxed);
                        claims.fetch_sub(1, Ordering::SeqCst);
                        return Ok(node);
                    }
                    Probe::Found(n) => {
                        slot.store(0, Ordering::SeqCst);
                        claims.fetch_sub(1, Ordering::SeqCst);
                        return Err(n);
                    }
                    Probe::Pending(w) if (w & ADDR_MASK) > (word & ADDR_MASK) => {
                        // The other claim backs off (or has seen nothing and
                        // will commit, and we then find it).
                        backoff(&mut round);
                    }
                    Probe::Pending(_) => {
                        slot.store(0, Ordering::SeqCst);
                        claims.fetch_sub(1, Ordering::SeqCst);
                        backoff(&mut round);
                        continue 'retry;
                    }
                }
            }
        }
    }

    /// Every committed node (unordered). Entries committed during the call
    /// may or may not be included.
    pub(crate) fn nodes(&self) -> Vec<Node> {
        // No displacement runs meanwhile, so no entry is seen twice or
        // skipped while it moves.
        let _g = self.displacement.lock();
        let t = self.table();
        let mut out = Vec::with_capacity(self.len());
        for b in t.buckets.iter() {
            for s in &b.slots {
                let w = s.load(Ordering::Acquire);
                if w != 0 && w & PENDING == 0 {
                    out.push(node_of(w));
                }
            }
        }
        out
    }

    fn wait_for_growth(&self, t: &Table) {
        let mut round = 0;
        while ptr::eq(self.table(), t) {
            backoff(&mut round);
        }
    }

    /// Replaces `t` by a table twice its size (if `t` is still current and
    /// nobody else is growing it).
    #[cold]
    fn grow(&self, t: &Table) {
        let Some(_g) = self.growth.try_lock() else {
            self.wait_for_growth(t);
            return;
        };
        if !ptr::eq(self.table(), t) {
            return;
        }
        t.frozen.store(true, Ordering::SeqCst);
        crate::util::sync::seqcst_store_load();
        let mut round = 0;
        while t.claims_in_flight() != 0 {
            backoff(&mut round);
        }
        // No claim runs and none can start: every entry is committed, and
        // (claims being done) no displacement runs either.
        let mut buckets = t.buckets.len() * 2;
        let new = loop {
            if let Some(n) = Self::rehash(t, buckets) {
                break n;
            }
            buckets *= 2;
        };
        self.bytes.fetch_add(new.bytes(), Ordering::Relaxed);
        self.growths.fetch_add(1, Ordering::Relaxed);
        let old = self.current.swap(Box::into_raw(new), Ordering::AcqRel);
        debug_assert!(ptr::eq(old, t));
        // SAFETY: `old` came from `Box::into_raw` (here or in
        // `with_capacity`) and is no longer current; it is kept, not freed.
        self.retired.lock().push(unsafe { Box::from_raw(old) });
    }

    /// A table of `buckets` holding every entry of `from`, or `None` if
    /// some entry found no place.
    fn rehash(from: &Table, buckets: usize) -> Option<Box<Table>> {
        let to = Table::new(buckets);
        for b in from.buckets.iter() {
            for s in &b.slots {
                let w = s.load(Ordering::Acquire);
                if w == 0 {
                    continue;
                }
                assert_eq!(w & PENDING, 0, "pending entry in a frozen table");
                let kh = KeyHash::of(node_of(w).key());
                while to.claim_empty(kh, w).is_none() {
                    if !to.displace(kh) {
                        return None;
                    }
                }
            }
        }
        Some(to)
    }
}

#[cfg(test)]
impl KeyMap {
    /// Test hook: a map that grows only at `load` (numerator, denominator).
    pub(crate) fn with_load(expected: usize, load: (usize, usize)) -> KeyMap {
        let mut m = KeyMap::with_capacity(expected);
        m.grow_load = load;
        m
    }

    /// Test hook: (displacements, growths) so far.
    pub(crate) fn activity(&self) -> (usize, usize) {
        (
            self.displacements.load(Ordering::Relaxed),
            self.growths.load(Ordering::Relaxed),
        )
    }
}

#[cfg(all(test, loom))]
impl KeyMap {
    /// Test hook: the two candidate buckets of `kh` in the current table.
    pub(crate) fn candidate_buckets(&self, kh: KeyHash) -> [usize; 2] {
        kh.buckets(self.table().mask)
    }

    /// Test hook: occupied slots per bucket of the current table.
    pub(crate) fn occupancy(&self) -> Vec<usize> {
        let t = self.table();
        t.buckets
            .iter()
            .map(|b| {
                b.slots
                    .iter()
                    .filter(|s| s.load(Ordering::Relaxed) != 0)
                    .count()
            })
            .collect()
    }

    /// Test hook: the node in slot `slot` of bucket `bucket`, if any.
    pub(crate) fn entry_at(&self, bucket: usize, slot: usize) -> Option<Node> {
        let w = self.table().bucket(bucket).slots[slot].load(Ordering::Relaxed);
        (w != 0).then(|| node_of(w))
    }
}
