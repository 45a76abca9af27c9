//! Key nodes and version records, shared by the key-node kinds (`jellyfish`,
//! `esl`, and `teks` with its `cuckoo` baseline).
//!
//! # Layout
//!
//! A *key node* is one arena allocation, 8-byte aligned, addressed by a
//! pointer to its level-0 link; higher links sit before that address (as in
//! the `skiplist` kind), so a node of height `h` carries exactly `h` links:
//!
//! ```text
//!   [link h-1] .. [link 0] [versions] [key_len u32] [flags u32] [skip] [key]
//!                          ^ node pointer
//! ```
//!
//! `skip` is a hint, not a link: the node two places on at level 0 when
//! it was last set (see [`cas_link_0`]): when this node was linked, when a
//! node was linked right after it, or two places after it. Nodes linked
//! since may make it name a node further on, never a nearer one; nothing
//! but a cursor's prefetch reads it. It lets a scan request the node three
//! keys ahead from a line it requested two steps earlier, so two chains of
//! misses run side by side instead of one (see `cursor`).
//!
//! `versions` is the head of the key's *version list*: version records,
//! newest (highest sequence) first. A version record has no tower:
//!
//! ```text
//!   [next] [trailer u64] [value_len u32] [value]
//! ```
//!
//! so a version costs 20 bytes plus its value, against `16 + 8 * h` bytes
//! plus key *and* value for a `skiplist` node.
//!
//! # Version list protocol
//!
//! * **Insert** ([`insert_version`]): walk from the head to the first link
//!   whose target has a sequence below the new one, point the new record at
//!   that target, and CAS the link from the target to the new record. On
//!   failure another version was linked at that very link: continue the walk
//!   from the same link (its owner is still in place, see below). A version
//!   that arrives out of order therefore lands at its place; none is
//!   dropped (JellyFish's Algorithm 1 drops it, which loses a version a
//!   snapshot may need).
//! * **Truncation** ([`truncate_below`]) under a read watermark `w`: store
//!   null into the `next` of `v*`, the newest version with sequence `<= w`.
//!   Every version after `v*` is older than every reader's snapshot's
//!   choice (`v*` or newer), so nobody needs it. It is a single store: the
//!   unlinked records keep their own `next` pointers, so a cursor standing
//!   inside the cut tail walks on to its end and then to the next key, and
//!   their memory stays in the arena until the memtable drops.
//! * **Why inserts and truncation do not race**: the engine promises (see
//!   `Memtable::set_read_watermark`) that no version with sequence `<= w`
//!   is inserted after `w` is set. A new version `s > w` is linked at a link
//!   owned by the head or by a version with sequence `> s > w`, never at
//!   `v*.next` or inside the tail; and truncation writes only `v*.next`.
//!   A link owner with sequence `> w` is never unlinked, so an insert that
//!   retries from its link is always still in the list.
//!
//! Memory orderings: records are fully written before the CAS (AcqRel) that
//! publishes them; readers load links with Acquire.

use crate::util::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use std::mem;
use std::ptr::{self, NonNull};

use crate::key::{pack_trailer, SequenceNumber, ValueKind, MAX_KEY_SIZE, MAX_VALUE_SIZE};
use crate::memtable::arena::Arena;
use crate::util::prefetch::prefetch_line;

// Tower heights are shared with the `skiplist` kind (branching 4).
pub(crate) use crate::memtable::height::{random_height, MAX_HEIGHT};

const LINK_SIZE: usize = mem::size_of::<AtomicPtr<u8>>();
/// Offsets from the node pointer (the address of link 0).
const VERSIONS_OFFSET: usize = LINK_SIZE;
const KEY_LEN_OFFSET: usize = VERSIONS_OFFSET + LINK_SIZE;
/// The flag word: its low byte is the node's height (written at
/// allocation, never changed: a cursor's readahead reads it to know which
/// links exist); the kinds may use the bits above it (teks: "linked into
/// the sorted index"), zero at allocation. (Sizes from the types: loom's
/// atomics are wider than std's.)
const FLAGS_OFFSET: usize = (KEY_LEN_OFFSET + 4).next_multiple_of(mem::align_of::<AtomicU32>());
const SKIP_OFFSET: usize =
    (FLAGS_OFFSET + mem::size_of::<AtomicU32>()).next_multiple_of(mem::align_of::<AtomicPtr<u8>>());
const KEY_OFFSET: usize = SKIP_OFFSET + LINK_SIZE;
/// The flag word's bits that hold the node's height.
const HEIGHT_MASK: u32 = 0xff;
/// Offsets inside a version record.
const V_TRAILER_OFFSET: usize = LINK_SIZE;
const V_VALUE_LEN_OFFSET: usize = V_TRAILER_OFFSET + 8;
const V_VALUE_OFFSET: usize = V_VALUE_LEN_OFFSET + 4;
const ALIGN: usize = 8;
const CACHE_LINE: usize = 64;
/// Most bytes of a version record a cursor prefetches ahead.
const RECORD_PREFETCH_LIMIT: usize = 512;

/// A handle to a published key node (or a head node) of a live memtable.
///
/// Invariant (crate-private): a `Node` is created only by [`alloc_node`]
/// (head or a node about to be published) or from a link, shortcut or skip
/// hint read with Acquire; it is used only while the memtable that owns its
/// arena is alive (under `&memtable`, or in a cursor holding the
/// memtable's `Arc`).
/// Link `i` is accessed only below the node's height.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct Node(NonNull<u8>);

// SAFETY: after publication a node's key is immutable and its links and
// version head are atomics; its memory lives as long as the arena, and the
// handle is only used while the memtable is alive (invariant above).
unsafe impl Send for Node {}
// SAFETY: as for `Send`: shared access reads immutable bytes or atomics.
unsafe impl Sync for Node {}

impl Node {
    /// Wraps a pointer read from a link; `None` for null.
    #[inline]
    pub(crate) fn from_ptr(p: *mut u8) -> Option<Node> {
        NonNull::new(p).map(Node)
    }

    #[inline]
    pub(crate) fn as_ptr(self) -> *mut u8 {
        self.0.as_ptr()
    }

    #[inline]
    pub(crate) fn link(self, level: usize) -> &'static AtomicPtr<u8> {
        debug_assert!(level < MAX_HEIGHT);
        // SAFETY: links below the node's height sit at `node - 8 * level`,
        // inside the allocation, 8-aligned, initialised before publication.
        // The 'static lifetime stays inside the memtable modules, whose
        // callers keep the arena alive (see the `Node` invariant).
        unsafe {
            &*self
                .0
                .as_ptr()
                .sub(level * LINK_SIZE)
                .cast::<AtomicPtr<u8>>()
        }
    }

    /// The successor at `level` (Acquire: its contents are visible).
    #[inline]
    pub(crate) fn next(self, level: usize) -> Option<Node> {
        Node::from_ptr(self.link(level).load(Ordering::Acquire))
    }

    /// Hints the CPU to load the node's header (link 0, the version-list
    /// head, the key length, the flags and the skip hint) and the first 16
    /// bytes of its key, so a cursor or search that will compare it next
    /// overlaps those misses with its current work.
    ///
    /// Two lines, not one: nodes are 8-byte aligned, so the key (32 bytes
    /// past the node pointer) starts in the next line for half the nodes
    /// and ends there for five in eight of 16-byte keys; requesting only
    /// the header's line left the compare waiting on a second miss. When
    /// both addresses share a line the second request costs nothing.
    /// Measured on the memtable benchmark's `link` part (sorted batches of
    /// new keys linked into a `teks` memtable on one thread): the second
    /// line made linking clearly cheaper per key (see
    /// `bench/journal/2026-11-26-03-key-line-prefetch.md`).
    #[inline]
    pub(crate) fn prefetch(self) {
        prefetch_line(self.0.as_ptr());
        prefetch_line(self.0.as_ptr().wrapping_add(KEY_OFFSET + 15));
    }

    /// Hints the CPU to load the cache line of the link at `level` (a
    /// tall tower's upper links sit lines before the key).
    #[inline]
    pub(crate) fn prefetch_link(self, level: usize) {
        prefetch_line(self.0.as_ptr().wrapping_sub(level * LINK_SIZE));
    }

    /// Sets a link of a node not yet published at `level`.
    #[inline]
    pub(crate) fn set_next_unpublished(self, level: usize, next: Option<Node>) {
        self.link(level).store(opt_ptr(next), Ordering::Relaxed);
    }

    /// Links `new` after `self` at `level` if the successor is still
    /// `expected`. AcqRel: Release publishes `new`'s contents.
    #[inline]
    pub(crate) fn cas_next(self, level: usize, expected: Option<Node>, new: Node) -> bool {
        self.link(level)
            .compare_exchange(
                opt_ptr(expected),
                new.as_ptr(),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// The head of the version list.
    #[inline]
    pub(crate) fn versions(self) -> &'static AtomicPtr<u8> {
        // SAFETY: the version head is an 8-aligned word after link 0, inside
        // the allocation, initialised before publication (lifetime: as
        // `link`).
        unsafe { &*self.0.as_ptr().add(VERSIONS_OFFSET).cast::<AtomicPtr<u8>>() }
    }

    fn skip_hint(self) -> &'static AtomicPtr<u8> {
        // SAFETY: the hint is an 8-aligned word after the flag word, inside
        // the allocation, initialised before publication (lifetime: as
        // `link`).
        unsafe { &*self.0.as_ptr().add(SKIP_OFFSET).cast::<AtomicPtr<u8>>() }
    }

    /// The node two places on at level 0 when last noted (a hint: it may
    /// name a node further on, never a nearer one; see the module docs).
    /// Acquire: pairs with the Release of [`cas_link_0`], so the node it
    /// names is published.
    #[inline]
    pub(crate) fn skip(self) -> Option<Node> {
        Node::from_ptr(self.skip_hint().load(Ordering::Acquire))
    }

    /// The node's flag word (the height in the low byte, see
    /// [`HEIGHT_MASK`]; the bits above it zero at allocation, meaning per
    /// kind).
    #[inline]
    pub(crate) fn flags(self) -> &'static AtomicU32 {
        // SAFETY: the flag word is the 4-aligned u32 after the key length,
        // inside the allocation, initialised by `alloc_node` before the node
        // can be reached (lifetime: as `link`).
        unsafe { &*self.0.as_ptr().add(FLAGS_OFFSET).cast::<AtomicU32>() }
    }

    /// The tower height the node was allocated with: links `0..height`
    /// exist. A link above level 0 may still be null while the node is
    /// being linked.
    #[inline]
    pub(crate) fn height(self) -> usize {
        (self.flags().load(Ordering::Relaxed) & HEIGHT_MASK) as usize
    }

    /// The newest version (every published key node has at least one).
    #[inline]
    pub(crate) fn first_version(self) -> Option<Version> {
        Version::from_ptr(self.versions().load(Ordering::Acquire))
    }

    /// The user key. The caller bounds the lifetime by the memtable's.
    #[inline]
    pub(crate) fn key<'a>(self) -> &'a [u8] {
        // SAFETY: the length word and `len` key bytes follow the version
        // head inside the allocation, written before publication and never
        // modified; the arena outlives `'a` (`Node` invariant).
        unsafe {
            let p = self.0.as_ptr();
            let len = p.add(KEY_LEN_OFFSET).cast::<u32>().read() as usize;
            std::slice::from_raw_parts(p.add(KEY_OFFSET), len)
        }
    }

    /// The version visible at `snapshot`: the newest with sequence `<=` it.
    #[inline]
    pub(crate) fn version_at(self, snapshot: SequenceNumber) -> Option<Version> {
        let mut v = self.first_version();
        while let Some(x) = v {
            if x.seq() <= snapshot {
                return Some(x);
            }
            v = x.next();
        }
        None
    }

    /// The oldest version still linked.
    pub(crate) fn last_version(self) -> Option<Version> {
        let mut v = self.first_version()?;
        while let Some(n) = v.next() {
            v = n;
        }
        Some(v)
    }

    /// The oldest linked version with a sequence above `seq`: the entry
    /// just before `(key, seq)` within this key. Position-based (not by
    /// identity), so it works even if the version at `seq` was unlinked.
    pub(crate) fn version_before(self, seq: SequenceNumber) -> Option<Version> {
        let mut best = None;
        let mut v = self.first_version();
        while let Some(x) = v {
            if x.seq() <= seq {
                break;
            }
            best = Some(x);
            v = x.next();
        }
        best
    }
}

/// A handle to a published version record; same invariant as [`Node`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Version(NonNull<u8>);

// SAFETY: as for `Node`: immutable after publication except the atomic
// `next`; used only while the arena lives.
unsafe impl Send for Version {}
// SAFETY: as for `Send`.
unsafe impl Sync for Version {}

impl Version {
    #[inline]
    pub(crate) fn from_ptr(p: *mut u8) -> Option<Version> {
        NonNull::new(p).map(Version)
    }

    #[inline]
    fn as_ptr(self) -> *mut u8 {
        self.0.as_ptr()
    }

    #[inline]
    fn next_link(self) -> &'static AtomicPtr<u8> {
        // SAFETY: `next` is the record's first, 8-aligned word, initialised
        // before publication (lifetime: as `Node::link`).
        unsafe { &*self.0.as_ptr().cast::<AtomicPtr<u8>>() }
    }

    /// Hints the CPU to load the record's header (link, trailer, value
    /// length: two lines when it straddles one, as for
    /// [`Node::prefetch`]) and the value's start.
    #[inline]
    pub(crate) fn prefetch(self) {
        prefetch_line(self.0.as_ptr());
        prefetch_line(self.0.as_ptr().wrapping_add(V_VALUE_OFFSET - 1));
    }

    /// Hints the CPU to load the record's lines, assuming its value is
    /// `value_len` bytes long (at most [`RECORD_PREFETCH_LIMIT`] bytes of
    /// record).
    #[inline]
    pub(crate) fn prefetch_record(self, value_len: usize) {
        let end = (V_VALUE_OFFSET + value_len).min(RECORD_PREFETCH_LIMIT);
        let first = self.0.as_ptr() as usize;
        let mut line = first & !(CACHE_LINE - 1);
        while line < first + end {
            prefetch_line(line as *const u8);
            line += CACHE_LINE;
        }
    }

    /// The next older version still linked (Acquire).
    #[inline]
    pub(crate) fn next(self) -> Option<Version> {
        Version::from_ptr(self.next_link().load(Ordering::Acquire))
    }

    #[inline]
    fn trailer(self) -> u64 {
        // SAFETY: 8-aligned word inside the record, written before
        // publication, never modified.
        unsafe { self.0.as_ptr().add(V_TRAILER_OFFSET).cast::<u64>().read() }
    }

    #[inline]
    pub(crate) fn seq(self) -> SequenceNumber {
        self.trailer() >> 8
    }

    #[inline]
    pub(crate) fn kind(self) -> ValueKind {
        // Only `alloc_version` writes tags, from a `ValueKind`.
        match self.trailer() & 0xff {
            0 => ValueKind::Delete,
            _ => ValueKind::Put,
        }
    }

    /// The value. The caller bounds the lifetime by the memtable's.
    #[inline]
    pub(crate) fn value<'a>(self) -> &'a [u8] {
        // SAFETY: the length word and `len` value bytes follow the trailer
        // inside the record, written before publication, never modified;
        // the arena outlives `'a`.
        unsafe {
            let p = self.0.as_ptr();
            let len = p.add(V_VALUE_LEN_OFFSET).cast::<u32>().read() as usize;
            std::slice::from_raw_parts(p.add(V_VALUE_OFFSET), len)
        }
    }
}

#[inline]
fn opt_ptr(n: Option<Node>) -> *mut u8 {
    n.map_or(ptr::null_mut(), Node::as_ptr)
}

fn check_sizes(key: &[u8], value: &[u8]) {
    // The engine enforces these with `Error::InvalidArgument`; they also
    // make the lengths fit their u32 fields.
    assert!(
        key.len() <= MAX_KEY_SIZE && value.len() <= MAX_VALUE_SIZE,
        "memtable entry exceeds key/value size limits"
    );
}

/// Bytes of a version record holding `value_len` value bytes.
#[inline]
fn version_size(value_len: usize) -> usize {
    V_VALUE_OFFSET + value_len
}

/// Writes a version record at `p` (8-aligned, `version_size` bytes).
///
/// # Safety
///
/// `p` must be an exclusively owned, 8-aligned range of at least
/// `version_size(value.len())` bytes that outlives every use of the result.
unsafe fn write_version(p: *mut u8, seq: SequenceNumber, kind: ValueKind, value: &[u8]) -> Version {
    // SAFETY: the caller hands over an exclusively owned, 8-aligned range
    // of `version_size(value.len())` bytes: every offset written lies in it
    // (the layout constants end at `V_VALUE_OFFSET + value.len()`), each
    // field's offset is aligned for its type, `value` cannot overlap memory
    // no one else may see, and `p` is not null.
    unsafe {
        p.cast::<AtomicPtr<u8>>()
            .write(AtomicPtr::new(ptr::null_mut()));
        p.add(V_TRAILER_OFFSET)
            .cast::<u64>()
            .write(pack_trailer(seq, kind));
        p.add(V_VALUE_LEN_OFFSET)
            .cast::<u32>()
            .write(value.len() as u32);
        ptr::copy_nonoverlapping(value.as_ptr(), p.add(V_VALUE_OFFSET), value.len());
        Version(NonNull::new_unchecked(p))
    }
}

/// Allocates and writes an unpublished version record.
pub(crate) fn alloc_version(
    arena: &Arena,
    seq: SequenceNumber,
    kind: ValueKind,
    value: &[u8],
) -> Version {
    check_sizes(b"", value);
    let p = arena.allocate(version_size(value.len()), ALIGN);
    // SAFETY: a fresh, exclusively owned, 8-aligned arena range of the
    // right size; the arena outlives every handle (`Node` invariant).
    unsafe { write_version(p.as_ptr(), seq, kind, value) }
}

/// Allocates a key node of `height` (links null) and, in the same
/// allocation, its first version, already set as the node's version head.
/// With `first == None` (head nodes) the version head is null.
pub(crate) fn alloc_node(
    arena: &Arena,
    height: usize,
    key: &[u8],
    first: Option<(SequenceNumber, ValueKind, &[u8])>,
) -> (Node, Option<Version>) {
    debug_assert!((1..=MAX_HEIGHT).contains(&height));
    let value_len = first.map_or(0, |f| f.2.len());
    check_sizes(key, first.map_or(&[][..], |f| f.2));
    let tower = (height - 1) * LINK_SIZE;
    let node_size = (tower + KEY_OFFSET + key.len() + ALIGN - 1) & !(ALIGN - 1);
    let size = node_size + first.map_or(0, |_| version_size(value_len));
    let base = arena.allocate(size, ALIGN);
    // SAFETY: `base` is a fresh, exclusively owned, 8-aligned allocation of
    // `size` bytes: `height` links, the version head, the key length, the
    // flag word, the skip hint and the key fit in `node_size` (the offsets
    // above, each aligned for its type), the version record after it.
    // Nothing can observe the node before it is linked.
    unsafe {
        let base = base.as_ptr();
        for i in 0..height {
            base.add(i * LINK_SIZE)
                .cast::<AtomicPtr<u8>>()
                .write(AtomicPtr::new(ptr::null_mut()));
        }
        let node = base.add(tower);
        let version =
            first.map(|(seq, kind, value)| write_version(base.add(node_size), seq, kind, value));
        node.add(VERSIONS_OFFSET)
            .cast::<AtomicPtr<u8>>()
            .write(AtomicPtr::new(
                version.map_or(ptr::null_mut(), Version::as_ptr),
            ));
        node.add(KEY_LEN_OFFSET)
            .cast::<u32>()
            .write(key.len() as u32);
        node.add(FLAGS_OFFSET)
            .cast::<AtomicU32>()
            .write(AtomicU32::new(height as u32));
        node.add(SKIP_OFFSET)
            .cast::<AtomicPtr<u8>>()
            .write(AtomicPtr::new(ptr::null_mut()));
        ptr::copy_nonoverlapping(key.as_ptr(), node.add(KEY_OFFSET), key.len());
        (Node(NonNull::new_unchecked(node)), version)
    }
}

/// Links the unpublished `node` at level 0 between `prev` and `next` if
/// `next` is still `prev`'s successor (one CAS, AcqRel), and updates the
/// skip hints this changes: `node`'s (the node after `next`) before it is
/// published; after, `prev`'s (now `next`) and, when the caller knows a
/// node `before_prev` that precedes `prev` on level 0 (its predecessor
/// when the search passed it), that node's (now `node`). Any other node
/// whose hint named `next` keeps a hint one node further than two ahead.
#[inline]
pub(crate) fn cas_link_0(
    before_prev: Option<Node>,
    prev: Node,
    next: Option<Node>,
    node: Node,
) -> bool {
    node.set_next_unpublished(0, next);
    let after = next.and_then(|n| n.next(0));
    node.skip_hint().store(opt_ptr(after), Ordering::Relaxed);
    if !prev.cas_next(0, next, node) {
        return false;
    }
    // Release: whoever Acquire-loads a hint sees the node it names as
    // published as this thread does (it reached `next` through Acquire
    // links, and `node` is its own).
    prev.skip_hint().store(opt_ptr(next), Ordering::Release);
    if let Some(b) = before_prev {
        b.skip_hint().store(node.as_ptr(), Ordering::Release);
    }
    true
}

/// Nodes on level 0 from `first` to the end: a walk, O(n), for the key
/// counts of tests and diagnostics (so no insert pays for a shared
/// counter, and the count is of what a reader can reach).
pub(crate) fn level_0_len(first: Option<Node>) -> usize {
    std::iter::successors(first, |n| n.next(0)).count()
}

/// Links `v` (unpublished, or allocated with an abandoned node) into the
/// version list headed by `head`, at its place by sequence (newest first).
/// Lock-free: one CAS when uncontended. See the module docs.
pub(crate) fn insert_version(head: &AtomicPtr<u8>, v: Version) {
    let seq = v.seq();
    let mut link = head;
    let mut cur = link.load(Ordering::Acquire);
    loop {
        while let Some(c) = Version::from_ptr(cur) {
            if c.seq() <= seq {
                debug_assert_ne!(c.seq(), seq, "version inserted twice");
                break;
            }
            link = c.next_link();
            cur = link.load(Ordering::Acquire);
        }
        v.next_link().store(cur, Ordering::Relaxed);
        match link.compare_exchange(cur, v.as_ptr(), Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            // A version was linked here meanwhile; the link's owner is newer
            // than `v` and never unlinked: resume the walk from it.
            Err(actual) => cur = actual,
        }
    }
}

/// Unlinks every version older than the newest one with sequence
/// `<= watermark` (see the module docs for why this is safe). Returns true
/// when it cut something.
pub(crate) fn truncate_below(head: &AtomicPtr<u8>, watermark: SequenceNumber) -> bool {
    let mut v = Version::from_ptr(head.load(Ordering::Acquire));
    while let Some(x) = v {
        if x.seq() <= watermark {
            let link = x.next_link();
            if link.load(Ordering::Relaxed).is_null() {
                return false;
            }
            link.store(ptr::null_mut(), Ordering::Release);
            return true;
        }
        v = x.next();
    }
    false
}

/// Checks the skip hints of the level-0 list starting at `first` (tests):
/// every hint names a node at least two places on (never the successor or
/// a node behind), and returns the share of hints that are exact.
#[cfg(test)]
pub(crate) fn check_skip_hints(first: Option<Node>) -> f64 {
    let mut order = Vec::new();
    let mut n = first;
    while let Some(x) = n {
        order.push(x);
        n = x.next(0);
    }
    let place: std::collections::HashMap<Node, usize> =
        order.iter().enumerate().map(|(i, &n)| (n, i)).collect();
    let mut exact = 0;
    for (i, n) in order.iter().enumerate() {
        if let Some(h) = n.skip() {
            let j = *place.get(&h).expect("a skip hint names a node off level 0");
            assert!(j >= i + 2, "node {i}'s skip hint names node {j}");
            exact += usize::from(j == i + 2);
        }
    }
    exact as f64 / order.len().saturating_sub(2).max(1) as f64
}
