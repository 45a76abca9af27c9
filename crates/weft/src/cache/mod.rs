//! The block cache: byte-bounded, shared by all tables.
//!
//! A sharded LRU keyed by `(file number, block offset)`. Sharding spreads
//! lock traffic: a lookup locks only the shard its key hashes to. Each shard
//! gets an equal slice of the capacity, so a shard must be large enough to
//! hold several blocks; small caches therefore use fewer shards (at least
//! [`MIN_SHARD_CAPACITY`] each, at most 16 shards).
//!
//! Each shard is a hash map into a slab of nodes threaded on an intrusive
//! doubly linked list by index (no `unsafe`, no per-node allocation after
//! warm-up): the front is the most recently used, the back is evicted first.
//!
//! Bounds: a block whose charge exceeds its shard's capacity is not cached at
//! all, and an insert evicts from the back until the shard fits again, so
//! usage never exceeds capacity. Capacity 0 caches nothing.
//!
//! Hit and miss counters live inside each shard and are updated under the
//! lock the lookup already holds (no shared atomic bouncing between cores);
//! [`Cache::stats`] sums them.
//!
//! The cache also keeps [`DiskReads`]: the bytes that reads which missed it
//! (table blocks) or never go through it (separated values, blocks of
//! mapped tables) fetched from the files, by [`ReadPurpose`](crate::stats::ReadPurpose). A mapped
//! read's bytes may come from the page cache rather than the device; they
//! are counted each time a block or value is read. Every table holds the cache, so this is the one
//! place every read path already reaches; its counters are striped, so
//! counting adds to a line of the reading thread's own.

pub(crate) mod row_cache;

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::stats::{CacheStats, DiskReads};

/// Smallest per-shard capacity before the cache uses fewer shards.
pub const MIN_SHARD_CAPACITY: usize = 512 * 1024;

/// Most shards a cache uses.
const MAX_SHARDS: usize = 16;

type CacheKey = (u64, u64);

/// Index of the list's sentinel node in every shard's slab.
const SENTINEL: usize = 0;

struct Node<B> {
    key: CacheKey,
    block: Option<Arc<B>>,
    charge: usize,
    prev: usize,
    next: usize,
}

struct Shard<B> {
    capacity: usize,
    usage: usize,
    map: HashMap<CacheKey, usize>,
    nodes: Vec<Node<B>>,
    free: Vec<usize>,
    hits: u64,
    misses: u64,
}

impl<B> Shard<B> {
    fn new(capacity: usize) -> Self {
        Shard {
            capacity,
            usage: 0,
            map: HashMap::new(),
            nodes: vec![Node {
                key: (0, 0),
                block: None,
                charge: 0,
                prev: SENTINEL,
                next: SENTINEL,
            }],
            free: Vec::new(),
            hits: 0,
            misses: 0,
        }
    }

    fn unlink(&mut self, i: usize) {
        let (prev, next) = (self.nodes[i].prev, self.nodes[i].next);
        self.nodes[prev].next = next;
        self.nodes[next].prev = prev;
    }

    fn push_front(&mut self, i: usize) {
        let first = self.nodes[SENTINEL].next;
        self.nodes[i].prev = SENTINEL;
        self.nodes[i].next = first;
        self.nodes[first].prev = i;
        self.nodes[SENTINEL].next = i;
    }

    fn get(&mut self, key: CacheKey) -> Option<Arc<B>> {
        match self.map.get(&key).copied() {
            Some(i) => {
                self.hits += 1;
                self.unlink(i);
                self.push_front(i);
                self.nodes[i].block.clone()
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    fn insert(&mut self, key: CacheKey, block: Arc<B>, charge: usize) {
        self.remove(key);
        if self.capacity == 0 || charge > self.capacity {
            return;
        }
        let node = Node {
            key,
            block: Some(block),
            charge,
            prev: SENTINEL,
            next: SENTINEL,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i] = node;
                i
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        };
        self.push_front(i);
        self.map.insert(key, i);
        self.usage += charge;
        while self.usage > self.capacity {
            let last = self.nodes[SENTINEL].prev;
            if last == SENTINEL {
                break;
            }
            let victim = self.nodes[last].key;
            self.remove(victim);
        }
    }

    fn remove(&mut self, key: CacheKey) {
        if let Some(i) = self.map.remove(&key) {
            self.unlink(i);
            self.usage -= self.nodes[i].charge;
            self.nodes[i].block = None;
            self.nodes[i].charge = 0;
            self.free.push(i);
        }
    }

    fn evict_file(&mut self, file: u64) {
        let keys: Vec<CacheKey> = self.map.keys().filter(|k| k.0 == file).copied().collect();
        for key in keys {
            self.remove(key);
        }
    }

    /// Keys from most to least recently used (tests).
    #[cfg(test)]
    fn order(&self) -> Vec<CacheKey> {
        let mut out = Vec::new();
        let mut i = self.nodes[SENTINEL].next;
        while i != SENTINEL {
            out.push(self.nodes[i].key);
            i = self.nodes[i].next;
        }
        out
    }
}

/// A byte-bounded cache of decoded blocks `B` keyed by (file, offset).
/// Generic over what it stores so it depends on no file format (tables
/// name theirs `table::BlockCache`).
pub struct Cache<B> {
    capacity: usize,
    shards: Box<[Mutex<Shard<B>>]>,
    disk_reads: Arc<DiskReads>,
}

impl<B> Cache<B> {
    /// A cache holding at most `capacity` bytes of blocks.
    pub fn new(capacity: usize) -> Self {
        let mut n = MAX_SHARDS;
        while n > 1 && capacity / n < MIN_SHARD_CAPACITY {
            n /= 2;
        }
        // Shards split the capacity exactly: the first `capacity % n` get
        // one byte more, so the sum is never above `capacity`.
        let shards = (0..n)
            .map(|i| Mutex::new(Shard::new(capacity / n + usize::from(i < capacity % n))))
            .collect();
        Cache {
            capacity,
            shards,
            disk_reads: Arc::default(),
        }
    }

    /// What reads fetched from disk, by purpose.
    pub fn disk_reads(&self) -> &Arc<DiskReads> {
        &self.disk_reads
    }

    fn shard(&self, file: u64, offset: u64) -> &Mutex<Shard<B>> {
        // A multiplicative mix of both halves of the key: blocks of one file
        // spread over every shard.
        let h =
            (file.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ offset).wrapping_mul(0xff51_afd7_ed55_8ccd);
        let i = (h >> 32) as usize % self.shards.len();
        &self.shards[i]
    }

    /// Looks up a block.
    pub fn get(&self, file: u64, offset: u64) -> Option<Arc<B>> {
        self.shard(file, offset).lock().get((file, offset))
    }

    /// Inserts a block, charging `charge` bytes (replacing any block cached
    /// under the same key). A block larger than a shard is not cached.
    pub fn insert(&self, file: u64, offset: u64, block: Arc<B>, charge: usize) {
        self.shard(file, offset)
            .lock()
            .insert((file, offset), block, charge);
    }

    /// Drops every block of `file` (the table was deleted).
    pub fn evict_file(&self, file: u64) {
        for shard in self.shards.iter() {
            shard.lock().evict_file(file);
        }
    }

    /// Counters.
    pub fn stats(&self) -> CacheStats {
        let mut stats = CacheStats {
            capacity: self.capacity as u64,
            ..CacheStats::default()
        };
        for shard in self.shards.iter() {
            let s = shard.lock();
            stats.usage += s.usage as u64;
            stats.hits += s.hits;
            stats.misses += s.misses;
        }
        stats
    }
}

impl<B> std::fmt::Debug for Cache<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("shards", &self.shards.len())
            .field("stats", &self.stats())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::block::Block;

    type BlockCache = Cache<Block>;
    use crate::table::block::BlockBuilder;

    fn block() -> Arc<Block> {
        let mut b = BlockBuilder::new(1);
        Arc::new(Block::new(b.finish().to_vec(), 0).unwrap())
    }

    #[test]
    fn capacity_is_respected_under_many_inserts() {
        for capacity in [0usize, 1, 100, 4096, 100_000, 3 << 20, 64 << 20] {
            let cache = BlockCache::new(capacity);
            let b = block();
            for i in 0..20_000u64 {
                let charge = 1 + (i as usize * 7919) % 5000;
                cache.insert(i % 37, i * 4096, b.clone(), charge);
                let s = cache.stats();
                assert!(
                    s.usage <= capacity as u64,
                    "cap {capacity}: usage {}",
                    s.usage
                );
            }
            if capacity == 0 {
                assert!(cache.get(0, 0).is_none());
                assert_eq!(cache.stats().usage, 0);
            }
            if capacity >= 3 << 20 {
                assert!(cache.stats().usage > capacity as u64 / 2, "cache fills up");
            }
        }
    }

    #[test]
    fn evicts_least_recently_used_first() {
        // Below MIN_SHARD_CAPACITY: one shard, so the order is global.
        let cache = BlockCache::new(1000);
        assert_eq!(cache.shards.len(), 1);
        let b = block();
        for i in 0..10u64 {
            cache.insert(1, i, b.clone(), 100);
        }
        assert!(cache.get(1, 0).is_some()); // 0 becomes most recent
        cache.insert(1, 10, b.clone(), 100); // evicts 1, the oldest untouched
        assert!(cache.get(1, 1).is_none());
        assert!(cache.get(1, 0).is_some());
        cache.insert(1, 11, b.clone(), 250); // evicts 2, 3, 4
        for gone in [2, 3, 4] {
            assert!(cache.get(1, gone).is_none(), "{gone} should be evicted");
        }
        let order = cache.shards[0].lock().order();
        assert_eq!(
            order,
            vec![
                (1, 11),
                (1, 0),
                (1, 10),
                (1, 9),
                (1, 8),
                (1, 7),
                (1, 6),
                (1, 5)
            ]
        );
        assert_eq!(cache.stats().usage, 950);
        cache.insert(1, 12, b.clone(), 2000); // too large: not cached
        assert!(cache.get(1, 12).is_none());
        assert_eq!(cache.stats().usage, 950);
    }

    #[test]
    fn counts_hits_and_misses_and_replaces() {
        let cache = BlockCache::new(1 << 20);
        let b = block();
        assert!(cache.get(3, 0).is_none());
        cache.insert(3, 0, b.clone(), 10);
        cache.insert(3, 0, b.clone(), 30); // replace, recharge
        assert!(cache.get(3, 0).is_some());
        assert!(cache.get(3, 0).is_some());
        assert!(cache.get(3, 1).is_none());
        let s = cache.stats();
        assert_eq!((s.hits, s.misses, s.usage, s.capacity), (2, 2, 30, 1 << 20));
    }

    #[test]
    fn evict_file_drops_only_that_file() {
        let cache = BlockCache::new(16 << 20);
        assert_eq!(cache.shards.len(), 16);
        let b = block();
        for off in 0..200u64 {
            cache.insert(7, off * 4096, b.clone(), 100);
            cache.insert(8, off * 4096, b.clone(), 100);
        }
        let used: usize = cache.shards.iter().filter(|s| s.lock().usage > 0).count();
        assert!(used > 8, "blocks of one file spread over shards ({used})");
        cache.evict_file(7);
        assert_eq!(cache.stats().usage, 200 * 100);
        for off in 0..200u64 {
            assert!(cache.get(7, off * 4096).is_none());
            assert!(cache.get(8, off * 4096).is_some());
        }
        // Freed slots are reused (the same keys land in the same shards).
        let nodes = || -> usize { cache.shards.iter().map(|s| s.lock().nodes.len()).sum() };
        let before = nodes();
        for off in 0..200u64 {
            cache.insert(7, off * 4096, b.clone(), 100);
        }
        assert_eq!(nodes(), before);
        assert_eq!(cache.stats().usage, 400 * 100);
    }

    #[test]
    fn concurrent_use_keeps_accounting_consistent() {
        let cache = Arc::new(BlockCache::new(1 << 20));
        let b = block();
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let cache = cache.clone();
                let b = b.clone();
                std::thread::spawn(move || {
                    for i in 0..5000u64 {
                        cache.insert(t, i % 300, b.clone(), 1000);
                        let _ = cache.get(t, (i * 7) % 300);
                        if i % 1000 == 0 {
                            cache.evict_file(t);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = cache.stats();
        assert!(s.usage <= 1 << 20);
        assert_eq!(s.hits + s.misses, 4 * 5000);
        let counted: usize = cache
            .shards
            .iter()
            .map(|s| {
                let s = s.lock();
                s.map.values().map(|&i| s.nodes[i].charge).sum::<usize>()
            })
            .sum();
        assert_eq!(counted as u64, s.usage);
    }
}
