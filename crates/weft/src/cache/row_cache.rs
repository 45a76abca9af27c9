//! The row cache: whole values of single keys read from storage (EvenDB
//! §4, "row cache").
//!
//! # Why
//!
//! The block cache (and, with `mmap_reads`, the page cache) keeps whole
//! blocks: a get that misses the memtables still searches the hash index,
//! one or more tables' index blocks and a data block, and may resolve a
//! value pointer through its value log. For a hot key without spatial
//! locality — a popular key whose neighbours are cold — that is the whole
//! read path every time, and a 4 KiB block kept for one 100-byte value.
//! The row cache answers such a get from one hash probe and copies out only
//! the value.
//!
//! # Shape: a coarse LRU of a few tables (EvenDB)
//!
//! Each shard holds a ring of [`TABLES`] tables, each charged at most a
//! [`TABLES`]th of the shard's bytes. A new entry goes into the *head*
//! table; when the head has no room for it, the oldest (*tail*) table is
//! dropped whole and an empty one becomes the head. Unpopular keys thus
//! leave in bulk, and a hit costs no list splicing: the order is kept only
//! at the granularity of tables. The tables are generations of one hash
//! map (each entry names its table), so that a lookup probes once rather
//! than once per table (see [`Shard`]).
//!
//! A hit in an older table **moves** the entry into the head (EvenDB
//! instead shares the value between the two tables, so that the older copy
//! ages out with its table). Moving keeps every key in exactly one table,
//! so the byte accounting is exact, a refresh finds the one copy to
//! update, and dropping the tail never drops a key that was just read.
//! The cost is one removal and one insertion per hit in an older table;
//! the next hit on that key is in the head.
//!
//! Sharded by key hash (up to [`MAX_SHARDS`]): a get locks only its key's
//! shard, and each shard's lock sits in a cache line of its own, so gets on
//! many cores write no shared line except the shard's (hit counters live
//! inside the shard, under the lock the get holds anyway).
//!
//! # What it holds, and the rule that it is never stale
//!
//! Only values read from *storage* (tables and value logs) are cached,
//! never values found in a memtable: a get looks at its pinned memtables
//! first, then here, then storage. A write **refreshes** a cached key (a
//! put stores its value, a delete removes the entry) but never **adds**
//! one: a write-heavy load would otherwise fill the cache with keys no one
//! reads (EvenDB).
//!
//! Every entry carries the sequence `s` of the version it holds. Its
//! meaning is: *the key's value is this one at every sequence from `s` up to
//! (not including) the next write to the key, and that next write, once it
//! is visible, has refreshed the entry*. So a get at read sequence `S`
//! (snapshot reads included) may use an entry only when `s <= S`: then no
//! write to the key lies in `(s, S]` that has not refreshed the entry, and
//! the value is the key's value at `S`. An entry with `s > S` is too new
//! for the read (a snapshot older than the last refresh) and the get reads
//! storage instead.
//!
//! Refreshes keep the invariant when they run before the write becomes
//! visible (the writer refreshes before its memtable insert, so before it
//! publishes) and when, of two racing writes to one key, the higher
//! sequence wins (a refresh never replaces an entry with a newer one).
//!
//! Fills are the hard part. A get misses its memtables, reads `v1` from
//! storage; meanwhile a put of `v2` refreshes the cache (the key is absent:
//! nothing to do), its memtable is flushed, and then the get inserts `v1`:
//! every later get misses the memtables and is served the stale `v1`. The
//! guard is an array of [`STRIPES`] counters, "the newest write sequence of
//! any key hashing here": a writer raises its key's stripe
//! (`fetch_max(seq)`) before it refreshes, and refreshes under the shard
//! lock; a get fills only when, under the same shard lock, the stripe is
//! still at or below its *fill bound* `B`, a sequence such that every write
//! up to `B` is in the state it read (the visible sequence read *before* it
//! pinned its super version, or its snapshot's sequence; see
//! `Db::get_pinned`). Either the fill's critical section comes first, and
//! the writer's refresh finds and replaces the entry, or the writer's
//! comes first and the fill sees the stripe above `B` and gives up. A write
//! at or below `B` is in the state the get read, so its value is what the
//! get found. Unrelated keys sharing a stripe only cost a skipped fill.
//!
//! The bound is not simply the read sequence: a write published between
//! the get's pin and its load of the read sequence may sit in a memtable
//! rotated in after the pin, absent from what the get read, while its
//! sequence is below the read sequence.
//!
//! Background jobs (flush, merge, GC, split, consolidation) move versions
//! between files without changing any key's value at any sequence, so
//! entries stay valid through them. Recovery starts with an empty cache (it
//! lives only in memory). A range delete changes many keys' values at
//! once: before it becomes visible it raises every stripe and drops every
//! cached key in its range ([`RowCache::invalidate_range`]).

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::batch::WriteBatch;
use crate::key::{SequenceNumber, ValueKind};
use crate::stats::RowCacheStats;
use crate::util::hash::wyhash64;
use crate::util::stripe::CacheLine;

/// Hash tables per shard: the LRU's granularity. EvenDB uses three. With
/// three, a dropped tail is a third of the shard: an entry survives at
/// least two table fills after its last hit.
pub const TABLES: usize = 3;

/// Most shards a cache uses: enough that 64 cores' gets rarely meet on one
/// lock.
pub const MAX_SHARDS: usize = 64;

/// Smallest per-shard capacity before a cache uses fewer shards: a table
/// must hold a useful number of entries.
pub const MIN_SHARD_CAPACITY: usize = 64 * 1024;

/// Counters of newest write sequences (see the module docs). 4096 × 8
/// bytes: adjacent stripes share a line, but keys spread over 512 lines,
/// so writers of different keys rarely write the same one.
pub const STRIPES: usize = 4096;

/// Bytes charged per entry besides its key and value: the map slot (a
/// hash, a boxed slice, a length, a sequence and a generation: 48 bytes,
/// at a load below 7/8), the allocation's header and rounding.
pub const ENTRY_OVERHEAD: usize = 80;

/// A cached key and value, the sequence of the version it is, and the
/// table (generation) it belongs to. Key and value share one allocation.
struct Entry {
    /// The key's bytes, then the value's.
    data: Box<[u8]>,
    key_len: usize,
    seq: SequenceNumber,
    gen: u64,
}

impl Entry {
    fn new(key: &[u8], value: &[u8], seq: SequenceNumber, gen: u64) -> Entry {
        let mut data = Vec::with_capacity(key.len() + value.len());
        data.extend_from_slice(key);
        data.extend_from_slice(value);
        Entry {
            data: data.into_boxed_slice(),
            key_len: key.len(),
            seq,
            gen,
        }
    }

    fn key(&self) -> &[u8] {
        &self.data[..self.key_len]
    }

    fn value(&self) -> &[u8] {
        &self.data[self.key_len..]
    }

    fn charge(&self) -> usize {
        self.data.len() + ENTRY_OVERHEAD
    }
}

/// Maps are keyed by the key's 64-bit hash (already computed to pick the
/// shard and stripe, and keyed by a per-cache random seed): this hasher
/// passes it through, so a map operation hashes nothing again.
#[derive(Clone, Copy, Default)]
struct HashIsKey;

impl BuildHasher for HashIsKey {
    type Hasher = PassThrough;

    fn build_hasher(&self) -> PassThrough {
        PassThrough(0)
    }
}

/// The [`HashIsKey`] hasher: the `u64` written is the hash.
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed; fold anything else anyway.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

fn charge(key: &[u8], value: &[u8]) -> usize {
    key.len() + value.len() + ENTRY_OVERHEAD
}

/// One shard: the ring of tables, kept as one map whose entries carry
/// their table's generation.
///
/// Separate maps made every miss probe all [`TABLES`] of them (each probe
/// a likely cache miss at this size), and a fill probe them all again;
/// with one map a lookup, a fill and a refresh each probe once. Dropping
/// the tail is a sweep of the map for the oldest generation, once per
/// table's worth of inserts: a few bucket visits per insert, amortized.
///
/// The map is keyed by the key's hash, the entry holding the key: two keys
/// of one hash (a 2^-64 chance per pair) share a slot, the later one
/// evicting the earlier. Evicting is always safe, and a refresh or lookup
/// of the other key compares the key and finds nothing.
struct Shard {
    map: HashMap<u64, Entry, HashIsKey>,
    /// The head table's generation; live generations are
    /// `head + 1 - TABLES ..= head`.
    head: u64,
    /// Bytes charged to each live generation, at `gen % TABLES`.
    bytes: [usize; TABLES],
    /// Bytes one table (generation) may be charged.
    table_capacity: usize,
    hits: u64,
    misses: u64,
    fills: u64,
    skipped_fills: u64,
    refreshes: u64,
}

impl Shard {
    fn new(capacity: usize) -> Self {
        Shard {
            map: HashMap::with_hasher(HashIsKey),
            head: (TABLES - 1) as u64,
            bytes: [0; TABLES],
            table_capacity: capacity / TABLES,
            hits: 0,
            misses: 0,
            fills: 0,
            skipped_fills: 0,
            refreshes: 0,
        }
    }

    fn slot(gen: u64) -> usize {
        (gen % TABLES as u64) as usize
    }

    /// The entry of `key` (hash `h`), if cached.
    fn entry(&mut self, h: u64, key: &[u8]) -> Option<&mut Entry> {
        self.map.get_mut(&h).filter(|e| e.key() == key)
    }

    /// Drops the entry under `h`, whatever its key.
    fn evict(&mut self, h: u64) {
        if let Some(e) = self.map.remove(&h) {
            self.bytes[Self::slot(e.gen)] -= e.charge();
        }
    }

    /// Starts a new head table and drops the tail's entries.
    fn rotate(&mut self) {
        self.head += 1;
        let head = self.head;
        // The new head reuses the dropped tail's slot.
        self.bytes[Self::slot(head)] = 0;
        self.map.retain(|_, e| e.gen + TABLES as u64 > head);
    }

    /// Inserts `key → value` into the head (replacing any entry of the
    /// same hash).
    fn insert_head(&mut self, h: u64, key: &[u8], value: &[u8], seq: SequenceNumber) {
        let c = charge(key, value);
        if c > self.table_capacity {
            return;
        }
        self.evict(h);
        if self.bytes[Self::slot(self.head)] + c > self.table_capacity {
            self.rotate();
        }
        self.bytes[Self::slot(self.head)] += c;
        self.map.insert(h, Entry::new(key, value, seq, self.head));
    }

    /// Replaces the value of the cached `key` (a newer version at `seq`),
    /// or drops the entry for `None` or when the new value does not fit
    /// its table.
    fn replace(&mut self, h: u64, key: &[u8], value: Option<&[u8]>, seq: SequenceNumber) {
        let cap = self.table_capacity;
        let Some(e) = self.map.get_mut(&h).filter(|e| e.key() == key) else {
            return;
        };
        let bytes = &mut self.bytes[Self::slot(e.gen)];
        match value {
            Some(v) if *bytes - e.charge() + charge(key, v) <= cap => {
                *bytes = *bytes - e.charge() + charge(key, v);
                *e = Entry::new(key, v, seq, e.gen);
            }
            // Dropping the entry is always safe: a later write finds
            // nothing to refresh, and a fill must pass the stripe check.
            _ => self.evict(h),
        }
    }

    fn get(&mut self, h: u64, key: &[u8], seq: SequenceNumber) -> Option<Vec<u8>> {
        let head = self.head;
        let cap = self.table_capacity;
        let Some(e) = self.map.get_mut(&h).filter(|e| e.key() == key) else {
            self.misses += 1;
            return None;
        };
        if e.seq > seq {
            // Refreshed after the read's sequence: storage answers.
            self.misses += 1;
            return None;
        }
        let value = e.value().to_vec();
        if e.gen != head {
            // A hit in an older table: the entry moves into the head. When
            // the head is full it joins a new head, so the rotation that
            // drops the tail keeps it.
            let c = e.charge();
            let old = Self::slot(e.gen);
            let full = self.bytes[Self::slot(head)] + c > cap;
            e.gen = if full { head + 1 } else { head };
            self.bytes[old] -= c;
            if full {
                self.rotate();
            }
            self.bytes[Self::slot(self.head)] += c;
        }
        self.hits += 1;
        Some(value)
    }
}

/// A byte-bounded cache of values read from storage, never stale (see the
/// module docs for the invariant and the race it closes).
pub(crate) struct RowCache {
    capacity: usize,
    /// Seeds the key hash: keys come from users, and an unkeyed hash would
    /// let them choose keys that crowd one shard and one map slot.
    seed: u64,
    /// Each in a cache line of its own: a get writes its shard's lock word
    /// and nothing a neighbouring shard's gets read.
    shards: Box<[CacheLine<Mutex<Shard>>]>,
    /// Newest write sequence of a key hashing to each stripe.
    stripes: Box<[AtomicU64]>,
}

impl RowCache {
    /// A cache of at most `capacity` bytes; `None` for 0 (the cache off:
    /// the engine then pays one branch per get and per write).
    pub fn new(capacity: usize) -> Option<RowCache> {
        if capacity == 0 {
            return None;
        }
        let mut n = MAX_SHARDS;
        while n > 1 && capacity / n < MIN_SHARD_CAPACITY {
            n /= 2;
        }
        let shards = (0..n)
            .map(|i| {
                let c = capacity / n + usize::from(i < capacity % n);
                CacheLine(Mutex::new(Shard::new(c)))
            })
            .collect();
        let stripes = (0..STRIPES).map(|_| AtomicU64::new(0)).collect();
        Some(RowCache {
            capacity,
            seed: RandomState::new().hash_one(0x726f_775f_6361_6368_u64),
            shards,
            stripes,
        })
    }

    fn hash_of(&self, key: &[u8]) -> u64 {
        wyhash64(key, self.seed)
    }

    fn shard(&self, h: u64) -> &Mutex<Shard> {
        // Bits the map's bucket index (low) and tag (top 7) do not use.
        &self.shards[(h >> 40) as usize % self.shards.len()]
    }

    fn stripe(&self, h: u64) -> &AtomicU64 {
        &self.stripes[(h >> 20) as usize % STRIPES]
    }

    /// The cached value of `key` for a read at `seq`: `None` when absent or
    /// when the entry is newer than `seq` (the caller reads storage).
    pub fn get(&self, key: &[u8], seq: SequenceNumber) -> Option<Vec<u8>> {
        let h = self.hash_of(key);
        self.shard(h).lock().get(h, key, seq)
    }

    /// Offers `value`, the version of `key` at `found_seq` that a get read
    /// from storage in a state holding every write up to `bound`. Cached
    /// only when no write to a key of its stripe has raised the stripe
    /// above `bound` (such a write may be missing from what the get read,
    /// and its refresh may have come before this fill).
    pub fn fill(&self, key: &[u8], value: &[u8], found_seq: SequenceNumber, bound: SequenceNumber) {
        debug_assert!(found_seq <= bound);
        let h = self.hash_of(key);
        let mut shard = self.shard(h).lock();
        // Relaxed: a writer's `fetch_max` comes before its refresh's lock,
        // so if that lock was held before this one, the unlock made the
        // raise visible here; if not, the refresh will find this entry.
        if self.stripe(h).load(Ordering::Relaxed) > bound {
            shard.skipped_fills += 1;
            return;
        }
        match shard.entry(h, key).map(|e| e.seq) {
            // Another get filled it first; keep the newer version.
            Some(seq) if seq >= found_seq => {}
            Some(_) => shard.replace(h, key, Some(value), found_seq),
            None => {
                shard.fills += 1;
                shard.insert_head(h, key, value, found_seq);
            }
        }
    }

    /// Brings a cached `key` up to the write at `seq` (`value` for a put,
    /// `None` for a delete); adds nothing when the key is not cached. The
    /// writer has not yet made the write visible.
    pub fn refresh(&self, key: &[u8], seq: SequenceNumber, value: Option<&[u8]>) {
        let h = self.hash_of(key);
        // Raised before the shard lock is taken: see `fill`.
        self.stripe(h).fetch_max(seq, Ordering::Relaxed);
        let mut shard = self.shard(h).lock();
        match shard.entry(h, key).map(|e| e.seq) {
            None => {}
            // A racing write with a higher sequence refreshed it first.
            Some(cached) if cached >= seq => {}
            Some(_) => {
                shard.replace(h, key, value, seq);
                shard.refreshes += 1;
            }
        }
    }

    /// Refreshes every key `batch` writes (sequences assigned), in the
    /// batch's order, so a later op on the same key wins. Called by the
    /// writer before its memtable insert.
    pub fn refresh_batch(&self, batch: &WriteBatch) {
        let first = batch.sequence();
        for (i, op) in batch.iter().enumerate() {
            // The batch was validated before it was given sequences.
            if let Ok(op) = op {
                if let Some(end) = op.range_end {
                    self.invalidate_range(op.key, end, first + i as u64);
                    continue;
                }
                let value = (op.kind != ValueKind::Delete).then_some(op.value);
                self.refresh(op.key, first + i as u64, value);
            }
        }
    }

    /// Brings every cached key in `[start, end)` up to a range delete at
    /// `seq`: drops the entries older than it. The keys it covers hash to
    /// any stripe, so every stripe is raised first (as `refresh` raises
    /// one): a get that read before the delete cannot fill afterwards.
    /// Costs a sweep of the whole cache, once per range delete (they are
    /// rare and wide; a point write costs one probe).
    pub fn invalidate_range(&self, start: &[u8], end: &[u8], seq: SequenceNumber) {
        for stripe in self.stripes.iter() {
            stripe.fetch_max(seq, Ordering::Relaxed);
        }
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            let Shard {
                map,
                bytes,
                refreshes,
                ..
            } = &mut *shard;
            map.retain(|_, e| {
                let covered = e.seq < seq && start <= e.key() && e.key() < end;
                if covered {
                    bytes[Shard::slot(e.gen)] -= e.charge();
                    *refreshes += 1;
                }
                !covered
            });
        }
    }

    /// Counters and occupancy.
    pub fn stats(&self) -> RowCacheStats {
        let mut s = RowCacheStats {
            capacity: self.capacity as u64,
            ..RowCacheStats::default()
        };
        for shard in self.shards.iter() {
            let shard = shard.lock();
            s.hits += shard.hits;
            s.misses += shard.misses;
            s.fills += shard.fills;
            s.skipped_fills += shard.skipped_fills;
            s.refreshes += shard.refreshes;
            s.entries += shard.map.len() as u64;
            s.usage += shard.bytes.iter().sum::<usize>() as u64;
        }
        s
    }
}

impl std::fmt::Debug for RowCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowCache")
            .field("shards", &self.shards.len())
            .field("stats", &self.stats())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-shard cache of `capacity` bytes (below two shards' minimum).
    fn small(capacity: usize) -> RowCache {
        let c = RowCache::new(capacity).unwrap();
        assert_eq!(c.shards.len(), 1);
        c
    }

    fn key(i: u32) -> Vec<u8> {
        format!("key{i:05}").into_bytes()
    }

    #[test]
    fn zero_capacity_is_off() {
        assert!(RowCache::new(0).is_none());
        let c = RowCache::new(64 << 20).unwrap();
        assert_eq!(c.shards.len(), MAX_SHARDS);
    }

    #[test]
    fn fill_then_get_and_the_sequence_rule() {
        let c = small(30_000);
        assert_eq!(c.get(b"a", 100), None);
        c.fill(b"a", b"v1", 5, 10);
        assert_eq!(c.get(b"a", 10).as_deref(), Some(&b"v1"[..]));
        assert_eq!(c.get(b"a", 5).as_deref(), Some(&b"v1"[..]));
        // A read below the entry's version (an old snapshot) reads storage.
        assert_eq!(c.get(b"a", 4), None);
        c.refresh(b"a", 20, Some(b"v2"));
        assert_eq!(c.get(b"a", 19), None, "entry newer than the read");
        assert_eq!(c.get(b"a", 20).as_deref(), Some(&b"v2"[..]));
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.fills, s.refreshes), (3, 3, 1, 1));
        assert_eq!(s.entries, 1);
        assert_eq!(s.usage, (1 + 2 + ENTRY_OVERHEAD) as u64);
    }

    #[test]
    fn refresh_never_adds_and_delete_removes() {
        let c = small(30_000);
        c.refresh(b"a", 3, Some(b"x"));
        assert_eq!(c.get(b"a", 100), None);
        assert_eq!(c.stats().entries, 0);
        c.fill(b"a", b"old", 1, 5);
        c.refresh(b"a", 6, None);
        assert_eq!(c.get(b"a", 100), None);
        assert_eq!(c.stats().usage, 0);
        // A put racing behind the delete (lower sequence) adds nothing.
        c.refresh(b"a", 5, Some(b"y"));
        assert_eq!(c.get(b"a", 100), None);
    }

    #[test]
    fn racing_refreshes_keep_the_higher_sequence() {
        let c = small(30_000);
        c.fill(b"k", b"v0", 1, 1);
        c.refresh(b"k", 11, Some(b"v11"));
        c.refresh(b"k", 10, Some(b"v10"));
        assert_eq!(c.get(b"k", 100).as_deref(), Some(&b"v11"[..]));
        c.refresh(b"k", 12, None);
        c.refresh(b"k", 13, Some(b"v13"));
        assert_eq!(c.get(b"k", 100), None, "refresh after removal adds nothing");
    }

    #[test]
    fn fill_is_skipped_after_a_newer_write_to_its_stripe() {
        let c = small(30_000);
        // The hard race: the get read at bound 10; a put at 11 refreshed
        // (nothing cached) before the get's fill.
        c.refresh(b"k", 11, Some(b"new"));
        c.fill(b"k", b"old", 4, 10);
        assert_eq!(c.get(b"k", 100), None);
        assert_eq!(c.stats().skipped_fills, 1);
        // A get that read at 11 or later may fill.
        c.fill(b"k", b"new", 11, 11);
        assert_eq!(c.get(b"k", 100).as_deref(), Some(&b"new"[..]));
        // An older fill never replaces a newer entry.
        c.fill(b"k", b"older", 3, 50);
        assert_eq!(c.get(b"k", 100).as_deref(), Some(&b"new"[..]));
    }

    #[test]
    fn the_tail_table_is_dropped_whole() {
        // Three tables of 1000 bytes; entries of 100 bytes, ten per table.
        let c = small(3000);
        let v = vec![7u8; 100 - 8 - ENTRY_OVERHEAD];
        assert_eq!(charge(&key(0), &v), 100);
        for i in 0..30 {
            c.fill(&key(i), &v, 1, 1);
        }
        assert_eq!(c.stats().entries, 30);
        assert_eq!(c.stats().usage, 3000);
        // The 31st starts a new head and drops the first ten.
        c.fill(&key(30), &v, 1, 1);
        let s = c.stats();
        assert_eq!((s.entries, s.usage), (21, 2100));
        for i in 0..10 {
            assert_eq!(c.get(&key(i), 1), None, "{i} went with the tail");
        }
        for i in 10..31 {
            assert!(c.get(&key(i), 1).is_some(), "{i} kept");
        }
    }

    #[test]
    fn a_hit_in_an_older_table_moves_to_the_head() {
        let c = small(3000);
        let v = vec![7u8; 100 - 8 - ENTRY_OVERHEAD];
        for i in 0..30 {
            c.fill(&key(i), &v, 1, 1);
        }
        // Key 0 is in the tail; a hit moves it to the head (which is full:
        // the tail, now without key 0, is dropped and key 0 heads a new
        // table).
        assert!(c.get(&key(0), 1).is_some());
        let s = c.stats();
        assert_eq!((s.entries, s.usage), (21, 2100));
        assert!(c.get(&key(0), 1).is_some());
        for i in 1..10 {
            assert_eq!(c.get(&key(i), 1), None);
        }
        // Fill up the new head and one more table: key 0 survives the next
        // drop only because of its hit... and is dropped with its table two
        // rotations later.
        for i in 100..118 {
            c.fill(&key(i), &v, 1, 1);
        }
        assert!(c.get(&key(0), 1).is_some());
        assert_eq!(c.get(&key(10), 1), None, "10..20 dropped with their table");
    }

    #[test]
    fn capacity_is_respected() {
        for capacity in [1usize, 100, 3000, 100_000, 1 << 20, 16 << 20] {
            let Some(c) = RowCache::new(capacity) else {
                unreachable!()
            };
            for i in 0..20_000u32 {
                let v = vec![1u8; (i as usize * 7919) % 700];
                c.fill(&key(i % 5000), &v, 1, 1);
                if i % 3 == 0 {
                    let w = vec![2u8; (i as usize * 31) % 1500];
                    c.refresh(&key(i % 4999), 2 + u64::from(i), Some(&w));
                }
                if i % 1000 == 0 {
                    let s = c.stats();
                    assert!(s.usage <= capacity as u64, "{capacity}: {}", s.usage);
                }
            }
            // The charges match the entries, table by table.
            let mut counted = 0;
            for shard in c.shards.iter() {
                let shard = shard.lock();
                for (slot, &bytes) in shard.bytes.iter().enumerate() {
                    let sum: usize = shard
                        .map
                        .iter()
                        .filter(|(_, e)| Shard::slot(e.gen) == slot)
                        .map(|(_, e)| e.charge())
                        .sum();
                    assert_eq!(sum, bytes);
                    counted += sum;
                }
                assert!(shard
                    .map
                    .values()
                    .all(|e| e.gen + TABLES as u64 > shard.head));
            }
            assert_eq!(counted as u64, c.stats().usage);
            if capacity == 1 << 20 {
                // About 2 MiB of distinct entries were offered.
                assert!(c.stats().usage > capacity as u64 / 3, "it fills up");
            }
        }
    }

    /// A database with the row cache on, `k` = `v1` in a table (not in
    /// any memtable) and read once, so the next get's fill is the one the
    /// test holds.
    fn db_with_key_on_disk() -> (tempfile::TempDir, crate::Db) {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::Db::open(
            dir.path(),
            crate::Options::default().row_cache_size(1 << 20),
        )
        .unwrap();
        db.put(b"k", b"v1").unwrap();
        db.flush().unwrap();
        (dir, db)
    }

    fn dir_of(db: &crate::Db) -> std::path::PathBuf {
        db.path().to_path_buf()
    }

    /// The race the stripes close: a get reads `v1` from a table; before
    /// it fills, a put of `v2` refreshes (nothing cached) and is flushed.
    /// The fill must be refused, or every later get (missing the
    /// memtables) is served `v1`.
    #[test]
    fn a_fill_racing_a_put_and_a_flush_is_refused() {
        use crate::fault::gates;
        use std::time::Duration;
        let (_dir, db) = db_with_key_on_disk();
        let path = dir_of(&db);
        let gate = gates::close("get.fill", &path);
        let reader = {
            let db = db.clone();
            std::thread::spawn(move || db.get(b"k").unwrap())
        };
        assert!(gates::wait_reached(
            "get.fill",
            &path,
            Duration::from_secs(10)
        ));
        db.put(b"k", b"v2").unwrap();
        db.flush().unwrap();
        drop(gate);
        // Concurrent with the put: either value is right for it.
        let _ = reader.join().unwrap();
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v2"[..]));
        let s = db.stats().row_cache;
        assert_eq!((s.fills, s.skipped_fills), (1, 1), "{s:?}");
    }

    /// The race the fill bound (taken before the pin) closes: a get pins
    /// its memtables; a rotation and a put of `v2` into the new memtable
    /// follow, published before the get loads its read sequence. The get
    /// reads `v1` from its pinned state at a sequence past `v2`'s; were
    /// that sequence its fill bound, `v1` would be cached, and served once
    /// `v2`'s memtable is flushed.
    #[test]
    fn a_fill_missing_a_write_after_its_pin_is_refused() {
        use crate::fault::gates;
        use std::time::Duration;
        let (_dir, db) = db_with_key_on_disk();
        let path = dir_of(&db);
        db.put(b"other", b"x").unwrap();
        let gate = gates::close("get.pinned", &path);
        let reader = {
            let db = db.clone();
            std::thread::spawn(move || db.get(b"k").unwrap())
        };
        assert!(gates::wait_reached(
            "get.pinned",
            &path,
            Duration::from_secs(10)
        ));
        db.flush().unwrap(); // rotates: the reader's memtable is the old one
        db.put(b"k", b"v2").unwrap();
        drop(gate);
        assert_eq!(reader.join().unwrap().as_deref(), Some(&b"v1"[..]));
        db.flush().unwrap();
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v2"[..]));
    }

    #[test]
    fn batch_refresh_follows_op_order() {
        let c = small(30_000);
        c.fill(b"a", b"0", 1, 1);
        c.fill(b"b", b"0", 1, 1);
        let mut batch = WriteBatch::new();
        batch.put(b"a", b"1");
        batch.delete(b"a");
        batch.put(b"b", b"2");
        batch.put(b"c", b"3");
        batch.set_sequence(10);
        c.refresh_batch(&batch);
        assert_eq!(c.get(b"a", 100), None);
        assert_eq!(c.get(b"b", 100).as_deref(), Some(&b"2"[..]));
        assert_eq!(c.get(b"b", 11), None, "b's entry is at 12");
        assert_eq!(c.get(b"c", 100), None, "never added");
    }
}
