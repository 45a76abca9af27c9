//! The UnsortedStore's in-memory hash index (UniKV §III-B), one per partition.
//!
//! A [`HashIndex`] maps a key to the UnsortedStore tables that may hold it,
//! newest first. It stores no keys: each indexed ⟨key, table⟩ pair costs one
//! 8-byte entry holding a 16-bit key tag, so lookups can return tables that do
//! not hold the key (the caller reads the table and compares the full key),
//! but never miss one that does. Pure data structure: no I/O, no locking (the
//! engine wraps it in a `RwLock`); it is `Send + Sync`.
//!
//! # Layout
//!
//! ```text
//!  buckets: Vec<Entry>  (N entries, 8 B each; the bucket *is* its first entry)
//!  ┌────────┬────────┬────────┬────────┬────────┬─────
//!  │ tag    │ empty  │ tag    │ tag    │ empty  │ ...
//!  │ slot   │        │ slot   │ slot   │        │
//!  │ c|next─┼──┐     │ c|0    │ c|next─┼─┐      │
//!  └────────┴──┼─────┴────────┴────────┴─┼──────┴─────
//!              │                         │
//!  overflow:   ▼  Vec<Entry> (arena)     ▼
//!  ┌────────┬────────┬────────┬────────┬─────
//!  │ tag    │ tag    │ tag    │ tag    │ ...      chains hang off a bucket,
//!  │ slot   │ slot   │ slot   │ slot   │          newest entry first
//!  │ 3|next─┼─→ ...  │ 3|0    │ 3|next │
//!  └────────┴────────┴────────┴────────┴─────
//!
//!  Entry (8 bytes): tag u16 │ slot u16 │ link u32 = cand (2 bits) · next+1 (30 bits)
//!  slots: Vec<Option<{table: u64, age: u64}>>   slot → table file number
//!  order: Vec<u16>                              live slots, oldest first
//!  by_table: HashMap<u64, u16>, free: Vec<u16>  table → slot, unused slots
//! ```
//!
//! A key has four candidate buckets `c0..c3`. An insert takes the first
//! candidate whose bucket is empty (UniKV's "search the buckets until we find an
//! empty one"). If all four are full it tries up to 16 cuckoo displacements
//! (evict a candidate's entry, re-place it in one of *its* candidates; skipped
//! once fewer than 1/64 of the buckets are empty), and the entry still
//! homeless then goes to an overflow entry in the chain of its `c3`, which
//! is kept newest first. So an entry for a key sits either in the bucket of
//! some `ci` (with `cand = i` recorded in it) or in the chain of `c3`
//! (`cand = 3`). A lookup reads the four buckets and the chain of `c3`, and
//! keeps the entries whose tag *and* candidate number match the key's; the
//! matches are sorted newest first by the age of their table. Displacement
//! empties the chains at the target load, where first-empty placement alone
//! leaves entries in them (measured with `tests::measure`), so a lookup is
//! four bucket reads.
//!
//! Table ids are 64-bit file numbers; entries hold a 16-bit *slot* that the
//! side table maps to the file number and an age (add order). Slots are reused
//! after [`HashIndex::remove_tables`], so at most [`MAX_TABLES`] = 65,535
//! tables can be live at once; [`HashIndex::add_table`] returns `Err` beyond.
//!
//! # Hash choices
//!
//! One wyhash-style 64-bit hash `h` per key (see `hash.rs`), from which:
//!
//! * the **home bucket** `c0 = (h · N) >> 64` (any `N`, no power of two);
//! * the **tag**, the top 16 bits of `fmix64(h ^ K)` — a different hash from
//!   bucket selection, as UniKV prescribes, so keys sharing a bucket have
//!   independent tags;
//! * the **other candidates** `ci = (c0 + off(tag, i)) mod N`, with
//!   `off(tag, i) ∈ 1..N` a hash of ⟨tag, i⟩. This is *partial-key cuckoo
//!   hashing* (as in cuckoo filters) rather than UniKV's four independent hash
//!   functions, and it is what makes the index exact under removal (and
//!   displacement possible without keys): from a
//!   stored entry (bucket, tag, cand) the home bucket is recovered as
//!   `bucket − off(tag, cand)`, so every entry has a canonical identity
//!   ⟨home, tag, table⟩ that does not depend on where it was placed. Lookup
//!   results depend only on the set of identities (an entry matches a key iff
//!   home and tag are equal), so [`HashIndex::remove_tables`] can re-place the
//!   surviving entries without re-reading keys and leave the index exactly as
//!   if the removed tables had never been added, and [`PartialEq`] can compare
//!   identity sets. With independent hash functions this is impossible: an
//!   entry that overflowed because an older table filled its first candidate
//!   can't be moved back without its key, and it would keep producing
//!   different false positives.
//!
//! A false positive needs a matching home *and* tag, i.e. about
//! `log2(N) + 16` bits of agreement: the expected number of wrong tables per
//! lookup is `entries / (N · 65536)` = load factor / 65,536 (1.2·10⁻⁵ at the
//! target load). UniKV's scheme, matching tags across four buckets and their
//! chains, has about four times as many.
//!
//! A key that occurs several times in one [`HashIndex::add_table`] call is
//! indexed once; more generally two keys of the same table with the same
//! identity share one entry (the lookup result is the same).
//!
//! # Memory and speed (see `tests::measure`)
//!
//! `with_capacity(n)` makes `N = ⌈n / 0.8⌉` buckets, UniKV's 80 % utilisation.
//! `tests::measure` indexes 1M distinct 16-byte keys in tables of 50k at
//! loads from the target to 2 and prints, for each, the share of entries
//! in overflow chains, bytes/key ([`HashIndex::memory_usage`]: allocated
//! buckets, empty ones included, overflow arena capacity, side tables;
//! over entries), the time per insert and per lookup of present keys (hit)
//! and absent keys (miss), and the false tables per miss. A table it
//! printed, once quoted here, is in
//! `bench/journal/2026-11-27-03-figures-from-code-comments.md`.
//!
//! An entry is 8 B, so a key costs 10 B at the target load (as UniKV's 10 MB
//! per 1M entries). With 16-byte keys and 256-byte values that is ~3.6 % of
//! the UnsortedStore bytes (10 B / ~280 B per entry), ~1 % at 1 KiB values.
//! Overload costs little memory but each lookup then walks a chain (~0.5
//! entries at load 1.5), and each insert first tries displacements that
//! mostly fail — a chain of dependent cache misses, far dearer at the sizes
//! of a real UnsortedStore (millions of keys, an index beyond the cache)
//! than in `tests::measure`. So the engine rebuilds a bigger index, by
//! re-reading the tables' keys (the index cannot grow without them: it does
//! not store them), before an added table would take it past load 0.95
//! (`store::INDEX_GROW_LOAD`).
//!
//! # Checkpoint
//!
//! [`HashIndex::encode`] / [`HashIndex::decode`] (see `checkpoint.rs`) write and
//! validate a self-describing image of the exact layout (UniKV §III-G: saved
//! every half `unsorted_limit`, then the tables flushed since are replayed with
//! `add_table`). Rebuilding from the checkpoint plus replay, or from all tables
//! in the same order, gives an index `==` to the lost one. Equal indexes may
//! differ in placement (after a removal, or keys added in another order), so
//! their images may differ byte-wise; compare indexes with `==`, not images.

mod checkpoint;
mod hash;
#[cfg(test)]
mod tests;

use std::cmp::Reverse;
use std::collections::HashMap;
use std::fmt;

pub(crate) use hash::key_hash;
use hash::{candidate_offset, home_of, tag_of};

/// Candidate buckets per key (UniKV's `n`).
pub const CANDIDATES: usize = 4;

/// Most tables that can be indexed at once (16-bit slots, one value reserved
/// for "empty").
pub const MAX_TABLES: usize = u16::MAX as usize;

/// Fewest buckets an index has.
pub const MIN_BUCKETS: u32 = 8;

/// Most buckets an index has (2³¹ × 8 B = 16 GiB).
pub const MAX_BUCKETS: u32 = 1 << 31;

/// Slot value of an empty bucket.
const EMPTY_SLOT: u16 = u16::MAX;
/// Bits of `Entry::link` holding the next overflow entry (index + 1, 0 = none).
const NEXT_BITS: u32 = 30;
const NEXT_MASK: u32 = (1 << NEXT_BITS) - 1;
/// Most overflow entries (the link field holds index + 1 in 30 bits).
const MAX_OVERFLOW: usize = NEXT_MASK as usize;
/// Cuckoo displacements tried before an entry goes to an overflow chain.
const MAX_KICKS: usize = 16;
/// The candidate whose bucket carries the overflow chain.
const LAST: u32 = CANDIDATES as u32 - 1;

/// One index entry: 8 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Entry {
    tag: u16,
    /// Index into `HashIndex::slots`; `EMPTY_SLOT` for an empty bucket.
    slot: u16,
    /// Candidate number (top 2 bits) and next overflow entry + 1 (low 30 bits).
    link: u32,
}

const _: () = assert!(std::mem::size_of::<Entry>() == 8);

impl Entry {
    const EMPTY: Entry = Entry {
        tag: 0,
        slot: EMPTY_SLOT,
        link: 0,
    };

    fn new(tag: u16, slot: u16, cand: u32, next: u32) -> Entry {
        Entry {
            tag,
            slot,
            link: cand << NEXT_BITS | next,
        }
    }

    fn is_empty(self) -> bool {
        self.slot == EMPTY_SLOT
    }

    fn cand(self) -> u32 {
        self.link >> NEXT_BITS
    }

    /// The raw next field: overflow index + 1, or 0.
    fn next_raw(self) -> u32 {
        self.link & NEXT_MASK
    }

    fn next(self) -> Option<usize> {
        match self.next_raw() {
            0 => None,
            n => Some(n as usize - 1),
        }
    }

    fn with_next_raw(self, next: u32) -> Entry {
        Entry {
            link: (self.link & !NEXT_MASK) | next,
            ..self
        }
    }
}

/// A live table: its file number and its age (larger is newer).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct SlotInfo {
    table: u64,
    age: u64,
}

/// Keys whose candidate buckets [`HashIndex::add_table`] requests ahead of
/// inserting them.
const INSERT_AHEAD: usize = 8;

/// Where a key's entries may be: its tag and its four candidate buckets.
#[derive(Clone, Copy, Debug)]
struct Probe {
    tag: u16,
    cands: [u32; CANDIDATES],
}

/// The hash index of one partition's UnsortedStore. See the module docs.
#[derive(Clone)]
pub struct HashIndex {
    /// `N` buckets; each is an inline entry (possibly empty) and the head of
    /// its overflow chain. An empty bucket never has a chain.
    buckets: Vec<Entry>,
    /// Overflow entries, linked newest first from their bucket.
    overflow: Vec<Entry>,
    /// Slot → live table.
    slots: Vec<Option<SlotInfo>>,
    /// Live slots, oldest table first.
    order: Vec<u16>,
    /// Table → its slot.
    by_table: HashMap<u64, u16>,
    /// Unused slots below `slots.len()`.
    free: Vec<u16>,
    /// Age of the next table added.
    next_age: u64,
    /// Live entries (non-empty buckets + overflow entries).
    entries: usize,
}

impl HashIndex {
    /// An empty index sized for about `expected_entries` keys (buckets at ~80%
    /// utilisation as UniKV): `⌈expected_entries / 0.8⌉` buckets, at least
    /// [`MIN_BUCKETS`] and at most [`MAX_BUCKETS`].
    pub fn with_capacity(expected_entries: usize) -> HashIndex {
        let wanted = (expected_entries as u128 * 5).div_ceil(4);
        let n = wanted.clamp(u128::from(MIN_BUCKETS), u128::from(MAX_BUCKETS)) as u32;
        HashIndex::with_buckets(n)
    }

    /// An empty index with exactly `n` buckets (`MIN_BUCKETS..=MAX_BUCKETS`).
    fn with_buckets(n: u32) -> HashIndex {
        debug_assert!((MIN_BUCKETS..=MAX_BUCKETS).contains(&n));
        HashIndex {
            buckets: vec![Entry::EMPTY; n as usize],
            overflow: Vec::new(),
            slots: Vec::new(),
            order: Vec::new(),
            by_table: HashMap::new(),
            free: Vec::new(),
            next_age: 0,
            entries: 0,
        }
    }

    /// Indexes the keys of one UnsortedStore table `table` (a file number).
    /// Tables are added in flush order: a table added later is newer. A key may
    /// appear in many tables. Duplicate keys within one call are indexed once.
    ///
    /// *Signature deviation:* returns `Err` (and leaves the index unchanged) if
    /// `table` is already indexed, if [`MAX_TABLES`] tables are already live,
    /// or if the overflow arena is full (2³⁰ − 1 entries, far beyond any sane
    /// load factor).
    pub fn add_table<'a>(
        &mut self,
        table: u64,
        keys: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<(), String> {
        if self.slot_of(table).is_some() {
            return Err(format!("hash index: table {table} is already indexed"));
        }
        let slot = match self.free.pop() {
            Some(free) => free as usize,
            None if self.slots.len() < MAX_TABLES => {
                self.slots.push(None);
                self.slots.len() - 1
            }
            None => {
                return Err(format!(
                    "hash index: {MAX_TABLES} tables already indexed, cannot add table {table}"
                ))
            }
        };
        self.slots[slot] = Some(SlotInfo {
            table,
            age: self.next_age,
        });
        self.next_age += 1;
        let slot = slot as u16;
        self.order.push(slot);
        self.by_table.insert(table, slot);
        // Each insert reads all four candidate buckets, scattered over the
        // whole table: four cache misses. The buckets of the next
        // `INSERT_AHEAD` keys are requested before each insert, so their
        // misses overlap (a flush inserts a million keys; the order of the
        // inserts, hence the layout, is unchanged).
        let mut pending = std::collections::VecDeque::with_capacity(INSERT_AHEAD + 1);
        let mut keys = keys.into_iter();
        loop {
            if let Some(key) = keys.next() {
                let h = key_hash(key);
                let probe = self.probe(home_of(h, self.bucket_count()), tag_of(h));
                for &c in &probe.cands {
                    crate::util::prefetch::prefetch_line(&self.buckets[c as usize]);
                }
                pending.push_back(probe);
                if pending.len() <= INSERT_AHEAD {
                    continue;
                }
            }
            let Some(probe) = pending.pop_front() else {
                break;
            };
            if let Err(e) = self.insert(probe, slot) {
                self.remove_tables(&[table]);
                return Err(format!("hash index: adding table {table}: {e}"));
            }
        }
        Ok(())
    }

    /// Appends to `out` the tables that may hold `key`, newest first, each
    /// once. Never misses a table that holds `key`; may return tables that do
    /// not (16-bit tags collide), so the caller compares the full key.
    pub fn lookup(&self, key: &[u8], out: &mut Vec<u64>) {
        if self.entries == 0 {
            return;
        }
        let h = key_hash(key);
        let p = self.probe(home_of(h, self.bucket_count()), tag_of(h));
        let start = out.len();
        for (i, &c) in p.cands.iter().enumerate() {
            let e = self.buckets[c as usize];
            if !e.is_empty() && e.tag == p.tag && e.cand() == i as u32 {
                out.push(u64::from(e.slot));
            }
        }
        let mut next = self.buckets[p.cands[LAST as usize] as usize].next();
        while let Some(ix) = next {
            let e = self.overflow[ix];
            if e.tag == p.tag {
                out.push(u64::from(e.slot));
            }
            next = e.next();
        }
        let found = &mut out[start..];
        if found.len() > 1 {
            found.sort_unstable_by_key(|&s| Reverse(self.info(s as u16).age));
        }
        for s in found {
            *s = self.info(*s as u16).table;
        }
    }

    /// Forgets every entry of `tables` (they were merged into the
    /// SortedStore); unknown ids are ignored. O(entries + tables): the
    /// surviving entries are re-placed, oldest table first, from their
    /// canonical identities, so the index is equal (`==`) to one to which the
    /// removed tables were never added.
    pub fn remove_tables(&mut self, tables: &[u64]) {
        let mut removed = false;
        for t in tables {
            if let Some(s) = self.by_table.remove(t) {
                self.slots[s as usize] = None;
                self.free.push(s);
                removed = true;
            }
        }
        if !removed {
            return;
        }
        self.order.retain(|&s| self.slots[s as usize].is_some());
        // Group surviving identities (home, tag) by the rank of their table.
        let mut rank = vec![usize::MAX; self.slots.len()];
        for (r, &s) in self.order.iter().enumerate() {
            rank[s as usize] = r;
        }
        let mut groups: Vec<Vec<(u32, u16)>> = vec![Vec::new(); self.order.len()];
        let n = self.bucket_count();
        for (b, &e) in self.buckets.iter().enumerate() {
            if e.is_empty() {
                continue;
            }
            let mut keep = |x: Entry| {
                if self.slots.get(x.slot as usize).is_some_and(Option::is_some) {
                    groups[rank[x.slot as usize]]
                        .push((home_from(b as u32, x.tag, x.cand(), n), x.tag));
                }
            };
            keep(e);
            let mut next = e.next();
            while let Some(ix) = next {
                let o = self.overflow[ix];
                keep(o);
                next = o.next();
            }
        }
        let survivors: usize = groups.iter().map(Vec::len).sum();
        self.buckets.fill(Entry::EMPTY);
        self.overflow = Vec::new();
        self.entries = 0;
        for (r, group) in groups.iter().enumerate() {
            let slot = self.order[r];
            for &(home, tag) in group {
                let probe = self.probe(home, tag);
                // Cannot fail: at most as many overflow entries as before.
                let inserted = self.insert(probe, slot);
                debug_assert!(inserted.is_ok());
            }
        }
        debug_assert_eq!(self.entries, survivors);
        self.overflow.shrink_to_fit();
    }

    /// Tables currently indexed, oldest first.
    pub fn tables(&self) -> Vec<u64> {
        self.order.iter().map(|&s| self.info(s).table).collect()
    }

    /// Whether `table` is indexed.
    pub fn contains_table(&self, table: u64) -> bool {
        self.slot_of(table).is_some()
    }

    /// Number of tables currently indexed.
    #[cfg(test)]
    pub fn table_count(&self) -> usize {
        self.order.len()
    }

    /// Live index entries (one per distinct ⟨key identity, table⟩).
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// Entries that did not find an empty candidate bucket and sit in
    /// overflow chains.
    #[cfg(test)]
    pub fn overflow_entries(&self) -> usize {
        self.overflow.len()
    }

    /// Number of buckets `N`.
    pub fn bucket_count(&self) -> u32 {
        self.buckets.len() as u32
    }

    /// Bytes of buckets + overflow + side tables (allocated capacity,
    /// including empty buckets) plus the struct itself.
    pub fn memory_usage(&self) -> usize {
        std::mem::size_of::<Self>()
            + (self.buckets.capacity() + self.overflow.capacity()) * std::mem::size_of::<Entry>()
            + self.slots.capacity() * std::mem::size_of::<Option<SlotInfo>>()
            + (self.order.capacity() + self.free.capacity()) * std::mem::size_of::<u16>()
            + self.by_table.capacity() * (std::mem::size_of::<(u64, u16)>() + 1)
    }

    /// Entries / buckets.
    #[cfg(test)]
    pub fn load_factor(&self) -> f64 {
        self.entries as f64 / f64::from(self.bucket_count())
    }

    /// Checkpoint (UniKV §III-G): a self-describing byte image (magic, format
    /// version, exact layout) with a CRC32C over everything.
    pub fn encode(&self) -> Vec<u8> {
        checkpoint::encode(self)
    }

    /// Decodes a checkpoint made by [`Self::encode`]. Garbage, truncation, a
    /// bad CRC or an inconsistent structure is `Err(reason)`, never a panic;
    /// nothing is allocated before the image's length is checked against its
    /// header.
    pub fn decode(bytes: &[u8]) -> Result<HashIndex, String> {
        checkpoint::decode(bytes)
    }

    // ---- internals ----

    fn info(&self, slot: u16) -> SlotInfo {
        self.slots[slot as usize].expect("slot of a live entry is live")
    }

    fn slot_of(&self, table: u64) -> Option<u16> {
        self.by_table.get(&table).copied()
    }

    fn probe(&self, home: u32, tag: u16) -> Probe {
        let n = self.bucket_count();
        let mut cands = [home; CANDIDATES];
        for (i, c) in cands.iter_mut().enumerate().skip(1) {
            let b = home + candidate_offset(tag, i as u32, n);
            *c = if b >= n { b - n } else { b };
        }
        Probe { tag, cands }
    }

    /// Inserts the identity of `probe` for `slot`, the newest live table,
    /// unless it is already there.
    fn insert(&mut self, p: Probe, slot: u16) -> Result<(), String> {
        let mut free = None;
        for (i, &c) in p.cands.iter().enumerate() {
            let e = self.buckets[c as usize];
            if e.is_empty() {
                if free.is_none() {
                    free = Some((i as u32, c as usize));
                }
            } else if e.slot == slot && e.tag == p.tag && e.cand() == i as u32 {
                return Ok(());
            }
        }
        let last = p.cands[LAST as usize] as usize;
        // Chains are newest first and `slot` is the newest table, so its
        // entries lead the chain.
        let mut next = self.buckets[last].next();
        while let Some(ix) = next {
            let e = self.overflow[ix];
            if e.slot != slot {
                break;
            }
            if e.tag == p.tag {
                return Ok(());
            }
            next = e.next();
        }
        if let Some((cand, c)) = free {
            self.buckets[c] = Entry::new(p.tag, slot, cand, 0);
        } else {
            if self.overflow.len() >= MAX_OVERFLOW {
                return Err(format!("overflow arena full ({MAX_OVERFLOW} entries)"));
            }
            self.displace(p, slot);
        }
        self.entries += 1;
        Ok(())
    }

    /// Places an identity whose four candidate buckets are all full: up to
    /// [`MAX_KICKS`] cuckoo displacements (an evicted entry's candidates are
    /// recomputed from its identity), then an overflow entry for whichever
    /// entry is still homeless. The overflow arena must have room.
    fn displace(&mut self, mut p: Probe, mut slot: u16) {
        let n = self.bucket_count();
        let mut from = u32::MAX;
        let mut walk = u32::from(p.tag) ^ p.cands[0];
        // Kicks rarely succeed once almost every bucket is full: skip them.
        let empty_buckets = self.buckets.len() - (self.entries - self.overflow.len());
        let kicks = if empty_buckets * 64 < self.buckets.len() {
            0
        } else {
            MAX_KICKS
        };
        for _ in 0..kicks {
            // A pseudo-random victim among the candidates, not the bucket
            // the current entry was just evicted from.
            walk = walk.wrapping_mul(0x9e37_79b9).wrapping_add(0x7f4a_7c15);
            let mut i = (walk >> 30) as usize;
            if p.cands[i] == from {
                i = (i + 1) % CANDIDATES;
            }
            let c = p.cands[i];
            let victim = self.buckets[c as usize];
            // The chain stays with the bucket.
            self.buckets[c as usize] = Entry::new(p.tag, slot, i as u32, victim.next_raw());
            p = self.probe(home_from(c, victim.tag, victim.cand(), n), victim.tag);
            slot = victim.slot;
            from = c;
            for (j, &cj) in p.cands.iter().enumerate() {
                if self.buckets[cj as usize].is_empty() {
                    self.buckets[cj as usize] = Entry::new(p.tag, slot, j as u32, 0);
                    return;
                }
            }
        }
        // Overflow from the last candidate, keeping the chain newest first
        // (the homeless entry may belong to an older table).
        let last = p.cands[LAST as usize] as usize;
        let age = self.info(slot).age;
        let mut pred = None;
        let mut next = self.buckets[last].next_raw();
        while next != 0 {
            let e = self.overflow[next as usize - 1];
            if self.info(e.slot).age <= age {
                break;
            }
            pred = Some(next as usize - 1);
            next = e.next_raw();
        }
        self.overflow.push(Entry::new(p.tag, slot, LAST, next));
        let new = self.overflow.len() as u32;
        match pred {
            None => self.buckets[last] = self.buckets[last].with_next_raw(new),
            Some(q) => self.overflow[q] = self.overflow[q].with_next_raw(new),
        }
    }

    /// Every entry's canonical identity ⟨home, tag, table⟩, sorted.
    fn canonical(&self) -> Vec<(u32, u16, u64)> {
        let n = self.bucket_count();
        let mut out = Vec::with_capacity(self.entries);
        for (b, &e) in self.buckets.iter().enumerate() {
            if e.is_empty() {
                continue;
            }
            out.push((
                home_from(b as u32, e.tag, e.cand(), n),
                e.tag,
                self.info(e.slot).table,
            ));
            let mut next = e.next();
            while let Some(ix) = next {
                let o = self.overflow[ix];
                out.push((
                    home_from(b as u32, o.tag, o.cand(), n),
                    o.tag,
                    self.info(o.slot).table,
                ));
                next = o.next();
            }
        }
        out.sort_unstable();
        out
    }
}

/// The home bucket of an entry of tag `tag` and candidate `cand` sitting in (or
/// chained from) bucket `at`.
fn home_from(at: u32, tag: u16, cand: u32, n: u32) -> u32 {
    let off = candidate_offset(tag, cand, n);
    if at >= off {
        at - off
    } else {
        at + (n - off)
    }
}

/// Logical equality: the same tables in the same order and, for every key,
/// the same lookup results. Lookups depend only on the bucket count and the
/// set of entry identities ⟨home, tag, table⟩, so those are compared, not the
/// placement in memory. Indexes without entries are equal whatever their size.
impl PartialEq for HashIndex {
    fn eq(&self, other: &Self) -> bool {
        self.tables() == other.tables()
            && self.entries == other.entries
            && (self.entries == 0
                || (self.bucket_count() == other.bucket_count()
                    && self.canonical() == other.canonical()))
    }
}

impl Eq for HashIndex {}

impl fmt::Debug for HashIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HashIndex")
            .field("tables", &self.tables())
            .field("buckets", &self.bucket_count())
            .field("entries", &self.entries)
            .field("overflow", &self.overflow.len())
            .finish()
    }
}
