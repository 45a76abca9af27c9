//! Munks (EvenDB §3.1): a hot partition's whole content held in memory as
//! one sorted array, so gets and scans of its range read no table and no
//! value log.
//!
//! # What a munk is here
//!
//! A [`MunkImage`] is every version a partition's tables hold (its
//! SortedStore and the oldest part of its UnsortedStore), in internal
//! order, with separated and logged values resolved: a get binary-searches
//! it, a scan walks it. A [`Munk`] is an image with its *coverage*: the
//! table numbers it was made from. It answers for a partition only while
//! that partition's SortedStore is exactly the covered one and its
//! UnsortedStore begins with the covered tables ([`Munk::covers`]); the
//! tables flushed since are read as usual, newest first, before the munk.
//! Everything a covered table holds is older than anything an uncovered
//! one holds (flushes land in memtable order), which is what makes the
//! image the bottom of the partition.
//!
//! EvenDB's munk is a sorted prefix plus updates appended in key order,
//! and EvenDB has no memtable. Weft keeps its memtables, and they are the
//! munk's tail: a write to a munk'd range is buffered once, in the
//! memtable, as every write is; its flush adds an UnsortedStore table; a
//! *rebalance* (a pool job, `background::munk`) folds the tables flushed
//! since the munk was made into a new image, in memory (EvenDB's munk
//! rebalance). Jobs that rewrite a partition's files without changing its
//! content (merge, GC) *relabel* its munk to their outputs as they commit,
//! so the image outlives them.
//!
//! A munk is memory only: nothing on disk changes, and a crash loses
//! nothing but the time to load it again.
//!
//! # Which partitions have one
//!
//! Each partition counts its reads in a [`MunkSlot`]'s heat: sampled (one
//! read in [`HEAT_SAMPLE`], by a per-thread random draw, so reads do not
//! write a shared line each) and halved every [`HEAT_HALF_LIFE`] (an
//! exponentially decayed access count). The pool loads the hottest
//! partitions' munks within `Options::munk_cache_size` and evicts the
//! coldest to make room (LRU by decayed counts, EvenDB's policy).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{compare_positions, SequenceNumber, ValueKind};

use super::compaction::{RetentionPolicy, Verdict, VersionFilter};
use super::Partition;

/// One read in this many bumps its partition's heat (by this much).
pub const HEAT_SAMPLE: u64 = 16;

/// The default heat (`Options::munk_min_heat`) from which a partition's
/// munk is worth loading: a few hundred reads within a couple of
/// half-lives.
pub const DEFAULT_MIN_HEAT: u64 = 16 * HEAT_SAMPLE;

/// A partition's heat halves every this long.
pub const HEAT_HALF_LIFE: Duration = Duration::from_secs(2);

/// Bytes an image charges per entry beyond its key and value (its slot).
const SLOT_BYTES: u64 = std::mem::size_of::<Slot>() as u64;

/// Where one entry lies in [`MunkImage::data`]: `key | seq << 8 | kind (8
/// bytes, little-endian) | value`; and its key's first eight bytes
/// ([`key_prefix`]), so that a search compares most entries without
/// touching `data` (each such touch a likely cache miss: a munk's bytes
/// run to hundreds of megabytes).
#[derive(Clone, Copy)]
struct Slot {
    prefix: u64,
    offset: u32,
    key_len: u32,
    value_len: u32,
}

/// Every this many slots, one fence: a search first finds its block of
/// slots in the small fence array, then searches only that block.
const FENCE_STEP: usize = 32;

/// The first eight bytes of `key`, zero-padded, big-endian: prefixes order
/// as the keys do, except that ties (a shared prefix, or zero padding
/// against zero bytes) need the whole keys.
fn key_prefix(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

/// The prefix of every [`FENCE_STEP`]-th slot.
fn fences_of(slots: &[Slot]) -> Vec<u64> {
    slots.iter().step_by(FENCE_STEP).map(|s| s.prefix).collect()
}

/// Every version of a partition's covered tables, in internal order, with
/// values inline (pointers resolved). Immutable once built.
pub struct MunkImage {
    data: Vec<u8>,
    slots: Vec<Slot>,
    /// [`fences_of`] the slots.
    fences: Vec<u64>,
    /// The engine's total of munk bytes, charged at build and given back
    /// when the last holder (a slot, a reader's pinned munk) drops it.
    charged: Arc<AtomicU64>,
}

impl MunkImage {
    /// Entries.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when it holds no entry.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Bytes of memory it holds (what `munk_cache_size` limits).
    pub fn bytes(&self) -> u64 {
        self.data.len() as u64 + self.slots.len() as u64 * SLOT_BYTES + self.fences.len() as u64 * 8
    }

    fn key(&self, i: usize) -> &[u8] {
        let s = self.slots[i];
        let at = s.offset as usize;
        &self.data[at..at + s.key_len as usize]
    }

    fn tag(&self, i: usize) -> (SequenceNumber, ValueKind) {
        let s = self.slots[i];
        let at = s.offset as usize + s.key_len as usize;
        let mut raw = [0u8; 8];
        raw.copy_from_slice(&self.data[at..at + 8]);
        let tag = u64::from_le_bytes(raw);
        // Only `Put` and `Delete` are ever stored (`MunkBuilder::add`).
        let kind = if tag & 0xff == ValueKind::Delete as u64 {
            ValueKind::Delete
        } else {
            ValueKind::Put
        };
        (tag >> 8, kind)
    }

    fn value(&self, i: usize) -> &[u8] {
        let s = self.slots[i];
        let at = s.offset as usize + s.key_len as usize + 8;
        &self.data[at..at + s.value_len as usize]
    }

    /// The first entry at or after `(key, seq)` in internal order.
    ///
    /// Entries of block `b` (slots `b * FENCE_STEP ..`) have prefixes
    /// between `fences[b]` and `fences[b + 1]`. So every entry before the
    /// last block whose fence is below the target's prefix comes before
    /// the target, and every entry from the first block whose fence is
    /// above it comes after: only the blocks between are searched.
    fn seek(&self, key: &[u8], seq: SequenceNumber) -> usize {
        let target = key_prefix(key);
        let below = self.fences.partition_point(|&p| p < target);
        let lo = below.saturating_sub(1) * FENCE_STEP;
        let hi = (self.fences.partition_point(|&p| p <= target) * FENCE_STEP).min(self.slots.len());
        let before = |i: usize| match self.slots[i].prefix.cmp(&target) {
            std::cmp::Ordering::Equal => {
                let (s, _) = self.tag(i);
                compare_positions(self.key(i), s, key, seq) == std::cmp::Ordering::Less
            }
            o => o == std::cmp::Ordering::Less,
        };
        let (mut lo, mut hi) = (lo, hi);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if before(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The newest version of `key` at `snapshot`: `(seq, kind, value)`.
    pub fn get(
        &self,
        key: &[u8],
        snapshot: SequenceNumber,
    ) -> Option<(SequenceNumber, ValueKind, Vec<u8>)> {
        let i = self.seek(key, snapshot);
        if i < self.slots.len() && self.key(i) == key {
            let (seq, kind) = self.tag(i);
            debug_assert!(seq <= snapshot);
            return Some((seq, kind, self.value(i).to_vec()));
        }
        None
    }

    /// The entries below `key` and those at or above it, as two images
    /// charged to the same total (a split of the munk's partition).
    pub fn split_at(&self, key: &[u8]) -> (MunkImage, MunkImage) {
        let at = self.seek(key, crate::key::MAX_SEQUENCE);
        let part = |slots: &[Slot]| {
            let start = slots.first().map_or(0, |s| s.offset as usize);
            let end = slots
                .last()
                .map_or(0, |s| (s.offset + s.key_len + 8 + s.value_len) as usize);
            let slots: Vec<Slot> = slots
                .iter()
                .map(|s| Slot {
                    offset: s.offset - start as u32,
                    ..*s
                })
                .collect();
            let image = MunkImage {
                data: self.data[start..end].to_vec(),
                fences: fences_of(&slots),
                slots,
                charged: Arc::clone(&self.charged),
            };
            self.charged.fetch_add(image.bytes(), Ordering::Relaxed);
            image
        };
        (part(&self.slots[..at]), part(&self.slots[at..]))
    }

    /// The first and last user keys, if any.
    fn bounds(&self) -> Option<(&[u8], &[u8])> {
        (!self.is_empty()).then(|| (self.key(0), self.key(self.len() - 1)))
    }
}

impl Drop for MunkImage {
    fn drop(&mut self) {
        self.charged.fetch_sub(self.bytes(), Ordering::Relaxed);
    }
}

impl std::fmt::Debug for MunkImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MunkImage")
            .field("entries", &self.len())
            .field("bytes", &self.bytes())
            .finish()
    }
}

/// Builds a [`MunkImage`] from a merged stream of a partition's versions,
/// keeping what a merge into the bottom of the partition would keep
/// ([`RetentionPolicy`] with `bottommost`): the image is the partition's
/// bottom, so a tombstone that shadows nothing in it is dropped.
pub struct MunkBuilder<'p> {
    data: Vec<u8>,
    slots: Vec<Slot>,
    filter: VersionFilter<'p>,
    key: Vec<u8>,
    have_key: bool,
    limit: u64,
}

impl<'p> MunkBuilder<'p> {
    /// A builder that fails once the image passes `limit` bytes.
    pub fn new(policy: &'p RetentionPolicy, limit: u64) -> Self {
        debug_assert!(policy.bottommost);
        MunkBuilder {
            data: Vec::new(),
            slots: Vec::new(),
            filter: VersionFilter::new(policy),
            key: Vec::new(),
            have_key: false,
            limit: limit.min(u32::MAX as u64),
        }
    }

    /// Offers the next version in internal order. `value` gives its value
    /// (resolved when it is a pointer) and is called only for versions
    /// kept. False when the image would pass the builder's limit: it is
    /// then unusable.
    pub fn offer(
        &mut self,
        key: &[u8],
        seq: SequenceNumber,
        kind: ValueKind,
        value: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<bool> {
        if !self.have_key || key != self.key.as_slice() {
            debug_assert!(
                !self.have_key || key > self.key.as_slice(),
                "munk input out of order"
            );
            self.key.clear();
            self.key.extend_from_slice(key);
            self.have_key = true;
            self.filter.start_key();
        }
        let filter_kind = match kind {
            ValueKind::Delete => ValueKind::Delete,
            _ => ValueKind::Put,
        };
        let mut fits = true;
        if let Verdict::Emit(tombstones) = self.filter.offer(seq, filter_kind) {
            for d in tombstones {
                fits &= self.add(key, d, ValueKind::Delete, &[]);
            }
            fits &= match kind {
                ValueKind::Delete => self.add(key, seq, ValueKind::Delete, &[]),
                _ => {
                    let v = value()?;
                    self.add(key, seq, ValueKind::Put, &v)
                }
            };
        }
        Ok(fits)
    }

    /// Appends one entry; false (and nothing appended) past the limit.
    fn add(&mut self, key: &[u8], seq: SequenceNumber, kind: ValueKind, value: &[u8]) -> bool {
        let grown = self.data.len() as u64
            + (self.slots.len() as u64 + 1) * SLOT_BYTES
            + key.len() as u64
            + 8
            + value.len() as u64;
        if grown > self.limit {
            return false;
        }
        let slot = Slot {
            prefix: key_prefix(key),
            offset: self.data.len() as u32,
            key_len: key.len() as u32,
            value_len: value.len() as u32,
        };
        self.data.extend_from_slice(key);
        self.data
            .extend_from_slice(&((seq << 8) | kind as u64).to_le_bytes());
        self.data.extend_from_slice(value);
        self.slots.push(slot);
        true
    }

    /// Reserves room for an image of about `bytes` (the size of the
    /// partition's last munk): growing by doubling would hold up to twice
    /// the image while it is built.
    pub fn reserve(&mut self, bytes: u64) {
        let per_entry = 64 + SLOT_BYTES;
        let bytes = bytes.min(self.limit) as usize;
        self.data.reserve(bytes);
        self.slots.reserve(bytes / per_entry as usize);
    }

    /// The image, charged to `charged`.
    pub fn finish(mut self, charged: &Arc<AtomicU64>) -> MunkImage {
        self.data.shrink_to_fit();
        self.slots.shrink_to_fit();
        let image = MunkImage {
            data: self.data,
            fences: fences_of(&self.slots),
            slots: self.slots,
            charged: Arc::clone(charged),
        };
        charged.fetch_add(image.bytes(), Ordering::Relaxed);
        image
    }
}

/// An image and the tables it stands for.
#[derive(Debug)]
pub struct Munk {
    /// The content.
    pub image: Arc<MunkImage>,
    /// SortedStore table numbers, in the partition's order.
    sorted: Vec<u64>,
    /// The oldest UnsortedStore tables folded in, oldest first.
    unsorted: Vec<u64>,
}

impl Munk {
    /// `image` standing for `p`'s SortedStore and its `folded` oldest
    /// UnsortedStore tables.
    pub fn new(image: Arc<MunkImage>, p: &Partition, folded: usize) -> Munk {
        debug_assert!(folded <= p.unsorted.len());
        Munk {
            image,
            sorted: p.sorted.iter().map(|t| t.meta.number).collect(),
            unsorted: p.unsorted[..folded].iter().map(|t| t.meta.number).collect(),
        }
    }

    /// How many of `p`'s oldest UnsortedStore tables this munk stands for,
    /// if it stands for `p`'s SortedStore and those tables; `None` when it
    /// does not (a reader pinned another version of the partition than the
    /// one the munk was made or relabeled for).
    pub fn covers(&self, p: &Partition) -> Option<usize> {
        let same = |tables: &[Arc<super::TableFile>], numbers: &[u64]| {
            tables.iter().zip(numbers).all(|(t, n)| t.meta.number == *n)
        };
        (p.sorted.len() == self.sorted.len()
            && p.unsorted.len() >= self.unsorted.len()
            && same(&p.sorted, &self.sorted)
            && same(&p.unsorted, &self.unsorted))
        .then_some(self.unsorted.len())
    }

    /// True when every table numbered in `inputs` is one this munk stands
    /// for: a job that rewrote only those tables (merge, GC) left content
    /// the image already holds.
    pub fn holds_all(&self, inputs: impl IntoIterator<Item = u64>) -> bool {
        inputs
            .into_iter()
            .all(|n| self.sorted.contains(&n) || self.unsorted.contains(&n))
    }

    /// The same image standing for `p`, a rewrite of the partition it
    /// stood for whose inputs it held ([`Self::holds_all`]): `p`'s
    /// SortedStore and the tables of its UnsortedStore this munk folded
    /// in and the rewrite did not consume. `None` if those are not the
    /// oldest of `p`'s UnsortedStore (never expected: a rewrite consumes
    /// the oldest).
    pub fn relabeled(&self, p: &Partition) -> Option<Munk> {
        let kept: Vec<u64> = p
            .unsorted
            .iter()
            .map(|t| t.meta.number)
            .filter(|n| self.unsorted.contains(n))
            .collect();
        let prefix = p
            .unsorted
            .iter()
            .take(kept.len())
            .zip(&kept)
            .all(|(t, n)| t.meta.number == *n);
        prefix.then(|| Munk::new(Arc::clone(&self.image), p, kept.len()))
    }
}

/// A partition's munk, if any, and its heat; shared by the copies of the
/// partition in successive versions (as [`Partition::index_changes`] is),
/// so a munk installed for one version is found from the next.
#[derive(Default)]
pub struct MunkSlot {
    munk: ArcSwapOption<Munk>,
    /// `epoch << 48 | count`: the decayed count of sampled reads, as of
    /// `epoch` (in [`HEAT_HALF_LIFE`]s, [`epoch`]).
    heat: AtomicU64,
    /// The estimated size at which a load found the munk too large for the
    /// budget (0: never).
    refused: AtomicU64,
    /// Bytes of the last image installed here: a better guess of the next
    /// one's size than the tables' (values kept in a WAL shared by many
    /// partitions count there only by share).
    last_bytes: AtomicU64,
}

impl std::fmt::Debug for MunkSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MunkSlot")
            .field("munk", &self.munk.load().as_ref().map(|m| m.image.bytes()))
            .finish()
    }
}

const COUNT_BITS: u32 = 48;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;

fn decayed(packed: u64, epoch: u64) -> u64 {
    let (then, count) = (packed >> COUNT_BITS, packed & COUNT_MASK);
    let halvings = epoch.saturating_sub(then);
    if halvings >= 48 {
        0
    } else {
        count >> halvings
    }
}

impl MunkSlot {
    /// The munk, if one is installed (it may not cover a given version of
    /// the partition: [`Munk::covers`]).
    pub fn load(&self) -> Option<Arc<Munk>> {
        self.munk.load_full()
    }

    /// Installs `munk` (or removes it with `None`).
    pub fn store(&self, munk: Option<Arc<Munk>>) {
        if let Some(m) = &munk {
            self.last_bytes.store(m.image.bytes(), Ordering::Relaxed);
        }
        self.munk.store(munk);
    }

    /// Bytes of the last image installed (0: none yet).
    pub fn last_bytes(&self) -> u64 {
        self.last_bytes.load(Ordering::Relaxed)
    }

    /// True when a munk is installed.
    pub fn is_loaded(&self) -> bool {
        self.munk.load().is_some()
    }

    /// Counts a read of the partition (one in [`HEAT_SAMPLE`], by
    /// [`HEAT_SAMPLE`]).
    pub fn touch(&self) {
        if !sampled() {
            return;
        }
        let epoch = epoch();
        let _ = self
            .heat
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |packed| {
                let count = (decayed(packed, epoch) + HEAT_SAMPLE).min(COUNT_MASK);
                Some(epoch << COUNT_BITS | count)
            });
    }

    /// The munk, as a guard that writes no reference count (a get's way:
    /// [`Self::load`] would bump the `Arc`'s count, one shared line per
    /// read).
    pub fn current(&self) -> arc_swap::Guard<Option<Arc<Munk>>> {
        self.munk.load()
    }

    /// Notes that a munk of the partition did not fit the budget when its
    /// tables held `estimate` bytes ([`Self::refused`]).
    pub fn refuse(&self, estimate: u64) {
        self.refused.store(estimate, Ordering::Relaxed);
    }

    /// True when a munk was refused at a size at most `estimate`: the
    /// partition is no smaller now, so it would not fit either.
    pub fn refused(&self, estimate: u64) -> bool {
        let at = self.refused.load(Ordering::Relaxed);
        at != 0 && estimate >= at
    }

    /// Takes over `other`'s heat (the halves of a split partition start as
    /// hot as it was).
    pub fn inherit_heat(&self, other: &MunkSlot) {
        self.heat
            .store(other.heat.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// The decayed read count now.
    pub fn heat(&self) -> u64 {
        decayed(self.heat.load(Ordering::Relaxed), epoch())
    }
}

/// One draw in [`HEAT_SAMPLE`]: a per-thread xorshift, so sampling writes
/// only the thread's own state.
fn sampled() -> bool {
    thread_local! {
        static STATE: Cell<u64> = const { Cell::new(0) };
    }
    STATE.with(|s| {
        let mut x = s.get();
        if x == 0 {
            // Seeded from the thread's stack address and the clock: distinct
            // per thread, never zero.
            let here = &x as *const u64 as u64;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos() as u64);
            x = crate::util::hash::fmix64(here ^ now.rotate_left(32)) | 1;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        x % HEAT_SAMPLE == 0
    })
}

/// Heat's time base: [`HEAT_HALF_LIFE`]s since the first read counted in
/// this process (one clock for every engine: only differences matter).
fn epoch() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let start = START.get_or_init(Instant::now);
    (start.elapsed().as_millis() / HEAT_HALF_LIFE.as_millis()) as u64
}

/// A cursor over the images of several munks of disjoint, ascending
/// ranges (the munk'd partitions of a version, in partition order): one
/// source of a scan for all of them, as one sorted run strings every
/// partition's SortedStore together.
pub struct MunkRunIter {
    images: Vec<Arc<MunkImage>>,
    /// `(image, entry)`; `image == images.len()` when not valid.
    at: (usize, usize),
}

impl MunkRunIter {
    /// A cursor over `images`, ascending and disjoint; empty ones are
    /// dropped.
    pub fn new(mut images: Vec<Arc<MunkImage>>) -> Self {
        images.retain(|m| !m.is_empty());
        debug_assert!(images
            .windows(2)
            .all(|w| match (w[0].bounds(), w[1].bounds()) {
                (Some((_, last)), Some((first, _))) => last < first,
                _ => true,
            }));
        let end = images.len();
        MunkRunIter {
            images,
            at: (end, 0),
        }
    }

    fn image(&self) -> &MunkImage {
        &self.images[self.at.0]
    }

    fn invalidate(&mut self) {
        self.at = (self.images.len(), 0);
    }
}

impl InternalIterator for MunkRunIter {
    fn valid(&self) -> bool {
        self.at.0 < self.images.len()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.at = (0, 0);
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        match self.images.last() {
            Some(m) => self.at = (self.images.len() - 1, m.len() - 1),
            None => self.invalidate(),
        }
        Ok(())
    }

    fn seek(&mut self, user_key: &[u8], seq: SequenceNumber) -> Result<()> {
        // The first image whose last key is at or after the target.
        let i = self.images.partition_point(|m| {
            m.bounds()
                .is_some_and(|(_, last)| crate::key::compare_user_keys(last, user_key).is_lt())
        });
        if i == self.images.len() {
            self.invalidate();
            return Ok(());
        }
        let e = self.images[i].seek(user_key, seq);
        self.at = if e < self.images[i].len() {
            (i, e)
        } else if i + 1 < self.images.len() {
            (i + 1, 0)
        } else {
            (self.images.len(), 0)
        };
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        let (i, e) = self.at;
        self.at = if e + 1 < self.images[i].len() {
            (i, e + 1)
        } else {
            (i + 1, 0)
        };
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        let (i, e) = self.at;
        if e > 0 {
            self.at = (i, e - 1);
        } else if i > 0 {
            self.at = (i - 1, self.images[i - 1].len() - 1);
        } else {
            self.invalidate();
        }
        Ok(())
    }

    fn user_key(&self) -> &[u8] {
        self.image().key(self.at.1)
    }

    fn seq(&self) -> SequenceNumber {
        self.image().tag(self.at.1).0
    }

    fn kind(&self) -> ValueKind {
        self.image().tag(self.at.1).1
    }

    fn value(&self) -> &[u8] {
        self.image().value(self.at.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(snapshots: Vec<SequenceNumber>) -> RetentionPolicy {
        RetentionPolicy {
            snapshots,
            bottommost: true,
        }
    }

    fn image(entries: &[(&str, u64, ValueKind, &str)], snapshots: Vec<u64>) -> MunkImage {
        let p = policy(snapshots);
        let mut b = MunkBuilder::new(&p, u64::MAX);
        for (k, s, kind, v) in entries {
            assert!(b
                .offer(k.as_bytes(), *s, *kind, || Ok(v.as_bytes().to_vec()))
                .unwrap());
        }
        b.finish(&Arc::default())
    }

    use ValueKind::{Delete, Put};

    #[test]
    fn a_get_finds_the_newest_version_at_its_snapshot() {
        let m = image(
            &[
                ("a", 9, Put, "a9"),
                ("a", 5, Put, "a5"),
                ("b", 7, Delete, ""),
                ("b", 3, Put, "b3"),
            ],
            vec![6],
        );
        assert_eq!(m.get(b"a", 10).unwrap().2, b"a9");
        assert_eq!(m.get(b"a", 6).unwrap().2, b"a5");
        assert_eq!(m.get(b"a", 4), None);
        assert_eq!(m.get(b"b", 8).unwrap().1, Delete);
        assert_eq!(m.get(b"b", 6).unwrap().2, b"b3");
        assert_eq!(m.get(b"c", 100), None);
    }

    /// Without snapshots, only each key's newest version stays, and a
    /// newest tombstone goes with what it shadowed (the image is the
    /// partition's bottom).
    #[test]
    fn the_builder_keeps_what_a_bottommost_merge_keeps() {
        let m = image(
            &[
                ("a", 9, Put, "a9"),
                ("a", 5, Put, "a5"),
                ("b", 7, Delete, ""),
                ("b", 3, Put, "b3"),
            ],
            vec![],
        );
        assert_eq!(m.len(), 1);
        assert_eq!(m.get(b"a", 100).unwrap().2, b"a9");
        assert_eq!(m.get(b"b", 100), None);
    }

    #[test]
    fn the_charge_is_given_back_when_the_image_drops() {
        let charged: Arc<AtomicU64> = Arc::default();
        let p = policy(vec![]);
        let mut b = MunkBuilder::new(&p, u64::MAX);
        assert!(b.offer(b"k", 1, Put, || Ok(vec![7; 100])).unwrap());
        let m = b.finish(&charged);
        assert_eq!(charged.load(Ordering::Relaxed), m.bytes());
        assert!(m.bytes() >= 101);
        drop(m);
        assert_eq!(charged.load(Ordering::Relaxed), 0);
    }

    /// Seeks land right across fence blocks, among keys sharing their
    /// first eight bytes, and between a key and its zero-extended twin.
    #[test]
    fn seeks_agree_with_a_sorted_list_across_fences() {
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for i in 0..300u32 {
            keys.push(format!("prefix00{i:04}").into_bytes());
            keys.push(format!("p{i:03}").into_bytes());
        }
        keys.push(b"ab".to_vec());
        keys.push(b"ab\0".to_vec());
        keys.push(b"ab\0\0\0\0\0\0\0".to_vec());
        keys.push(Vec::new());
        keys.sort();
        keys.dedup();
        let p = policy(vec![]);
        let mut b = MunkBuilder::new(&p, u64::MAX);
        for k in &keys {
            for seq in [9, 4] {
                assert!(b.offer(k, seq, Put, || Ok(k.clone())).unwrap());
            }
        }
        let m = b.finish(&Arc::default());
        // Only the newest version of each key stays (no snapshots).
        assert_eq!(m.len(), keys.len());
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(m.seek(k, 100), i, "{k:?}");
            assert_eq!(m.get(k, 100).unwrap().2, *k);
            let mut after = k.clone();
            after.push(0);
            assert_eq!(
                m.seek(&after, 100),
                keys.partition_point(|x| *x < after),
                "{after:?}"
            );
            // Below its only version: the next key.
            assert_eq!(m.seek(k, 5), i + 1, "{k:?} at 5");
        }
    }

    #[test]
    fn a_builder_past_its_limit_fails() {
        let p = policy(vec![]);
        let mut b = MunkBuilder::new(&p, 64);
        assert!(!b.offer(b"k", 1, Put, || Ok(vec![0; 100])).unwrap());
    }

    #[test]
    fn a_split_image_keeps_every_entry_on_its_side() {
        let charged: Arc<AtomicU64> = Arc::default();
        let p = policy(vec![5]);
        let mut b = MunkBuilder::new(&p, u64::MAX);
        for (k, s, v) in [
            ("a", 9, "a9"),
            ("a", 3, "a3"),
            ("c", 4, "c4"),
            ("d", 8, "d8"),
            ("d", 2, "d2"),
        ] {
            assert!(b
                .offer(k.as_bytes(), s, Put, || Ok(v.as_bytes().to_vec()))
                .unwrap());
        }
        let m = b.finish(&charged);
        let (lo, hi) = m.split_at(b"c");
        assert_eq!((lo.len(), hi.len()), (2, 3));
        assert_eq!(lo.get(b"a", 4).unwrap().2, b"a3");
        assert_eq!(hi.get(b"c", 9).unwrap().2, b"c4");
        assert_eq!(hi.get(b"d", 5).unwrap().2, b"d2");
        assert_eq!(lo.get(b"c", 9), None);
        drop(m);
        assert_eq!(charged.load(Ordering::Relaxed), lo.bytes() + hi.bytes());
        drop((lo, hi));
        assert_eq!(charged.load(Ordering::Relaxed), 0);
    }

    /// The run cursor walks several images as one, both ways, and seeks
    /// across their gaps.
    #[test]
    fn a_run_strings_images_together() {
        let a = Arc::new(image(&[("a", 1, Put, "1"), ("c", 2, Put, "2")], vec![]));
        let e = Arc::new(image(&[], vec![]));
        let b = Arc::new(image(&[("m", 3, Put, "3"), ("p", 4, Put, "4")], vec![]));
        let mut it = MunkRunIter::new(vec![a, e, b]);
        let mut keys = Vec::new();
        it.seek_to_first().unwrap();
        while it.valid() {
            keys.push(String::from_utf8(it.user_key().to_vec()).unwrap());
            it.next().unwrap();
        }
        assert_eq!(keys, ["a", "c", "m", "p"]);
        it.seek_to_last().unwrap();
        let mut back = Vec::new();
        while it.valid() {
            back.push(String::from_utf8(it.user_key().to_vec()).unwrap());
            it.prev().unwrap();
        }
        assert_eq!(back, ["p", "m", "c", "a"]);
        it.seek(b"d", u64::MAX >> 8).unwrap();
        assert_eq!(it.user_key(), b"m");
        it.seek(b"c", u64::MAX >> 8).unwrap();
        assert_eq!(it.user_key(), b"c");
        it.seek(b"q", u64::MAX >> 8).unwrap();
        assert!(!it.valid());
    }
}
