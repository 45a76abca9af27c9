//! Bump-allocating arena for the nodes of one memtable.
//!
//! Memtable nodes are never freed one by one (DESIGN "Memtable"): the whole
//! arena goes when the memtable's last `Arc` drops. That makes allocation a
//! pointer bump, and lets readers hold plain references into the arena for
//! as long as they hold the memtable.
//!
//! Design:
//!
//! * Memory comes in *chunks*. Each chunk starts with a small header
//!   (`ChunkHeader`) holding its size, its atomic bump offset and a link to
//!   the previously allocated chunk, so the arena frees them all on drop
//!   without a side vector.
//! * Allocation is lock-free in the common case: load the current chunk
//!   (Acquire), then CAS its bump offset forward by the aligned request.
//!   Several threads allocating at once get disjoint ranges because every
//!   range is the result of one successful CAS on the same offset.
//! * A mutex is taken only to add a chunk. The thread that takes it re-checks
//!   whether another thread already installed a fresh chunk, so a burst of
//!   writers hitting the end of a chunk adds one chunk, not one each.
//! * Chunk sizes grow geometrically from [`FIRST_CHUNK_SIZE`] up to the
//!   arena's maximum (2 MiB by default: one huge page, see [`HUGE_PAGE`]). The engine rotates a memtable on
//!   [`Arena::memory_usage`], which counts *reserved* chunk bytes; starting
//!   small keeps that number honest for tiny write buffers (tests use 4 KiB)
//!   while large memtables still amortise the mutex over 2 MiB chunks.
//! * Threads allocate small requests from a *block* of their own
//!   ([`BLOCK_SIZE`] bytes taken from the current chunk with one CAS), kept
//!   in a thread-local slot tagged with the arena's id: two writers then
//!   neither CAS one `used` word per node nor write nodes that share a
//!   cache line (see `LocalBlock`).
//! * A request larger than a quarter of the maximum chunk gets a dedicated
//!   chunk of its own and leaves the current chunk in place, so one big
//!   value neither wastes the tail of the current chunk nor forces every
//!   later small allocation into a fresh one (RocksDB's arena does the same).
//!
//! * Chunks of 256 KiB and more are mapped from the OS and unmapped on
//!   drop, so a flushed memtable's memory leaves the process (see
//!   `MAPPED_CHUNK`) — except full-size (2 MiB) chunks, which go back to
//!   a small process-wide pool that the next arenas take from, still
//!   faulted in (`pages::take_prefaulted`; unused ones leave after a
//!   second).
//!
//! Memory returned by [`Arena::allocate`] is uninitialised and stays valid,
//! at a fixed address, until the arena is dropped.

use std::alloc::{self, Layout};
use std::cell::Cell;
use std::mem;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

use super::pages;

/// Size of the first chunk; later chunks double up to the maximum.
pub const FIRST_CHUNK_SIZE: usize = 1024;

/// Default maximum chunk size: one transparent huge page.
pub const DEFAULT_MAX_CHUNK_SIZE: usize = HUGE_PAGE;

pub use super::pages::HUGE_PAGE;

/// Alignment of every chunk's base address (and so of its header).
const CHUNK_ALIGN: usize = 16;

/// Header at the start of every chunk.
#[repr(C)]
struct ChunkHeader {
    /// The chunk allocated before this one (null for the first); immutable
    /// after the chunk is linked. Only `Drop` walks these links.
    prev: *mut ChunkHeader,
    /// Total bytes of the chunk, header included (its allocation size).
    size: usize,
    /// Offset from the chunk base of the first free byte. May only grow.
    used: AtomicUsize,
}

/// Bytes the header occupies at the start of a chunk (a multiple of
/// `CHUNK_ALIGN`, so the first allocation is as aligned as the chunk).
const HEADER_SIZE: usize = (mem::size_of::<ChunkHeader>() + CHUNK_ALIGN - 1) & !(CHUNK_ALIGN - 1);

/// State changed only under the mutex.
struct Chunks {
    /// The most recently allocated chunk (of any kind), head of the list
    /// threaded through `ChunkHeader::prev`.
    newest: *mut ChunkHeader,
    /// Size of the next shared chunk.
    next_size: usize,
}

/// Bytes a thread takes from the current chunk at a time for its small
/// requests (see [`LocalBlock`]).
const BLOCK_SIZE: usize = 4096;
/// Largest request served from a thread's block; larger ones bump the
/// chunk directly.
const MAX_BLOCK_REQUEST: usize = BLOCK_SIZE / 4;
/// Chunks below this size are bumped directly: a small arena (a tiny write
/// buffer, a memtable's first chunks) keeps its memory accounting exact
/// and does not hand out blocks larger than its allocations.
const MIN_BLOCKED_CHUNK: usize = 64 << 10;

/// The block a thread allocates its small requests from, for one arena.
///
/// A request that does not fit the block's rest grows the block in place
/// when nothing was bumped after it (always, with one writer), so a
/// single writer wastes nothing; otherwise the rest is left unused (in the
/// memtable benchmark's `teks` part, two writers used barely more memory
/// than one).
///
/// With one shared bump offset, two writers CAS the same word for every
/// node and interleave their nodes in the chunk, so the line where one
/// node ends and the other's begins is written by both cores. Measured
/// with uniform puts at two threads, alternating pairs: blocks of 4 KiB
/// per thread made both `jellyfish`'s and `skiplist`'s puts faster; at one
/// thread, no change (`bench/journal/2026-11-26-02-fair-skiplist-baseline.md`,
/// "A fair baseline, a cheaper new-key insert, writers apart in memory",
/// item 5). A thread holds one block at a time, of the arena it allocated
/// from last; switching arenas abandons the rest of the old block (at most
/// `BLOCK_SIZE` bytes, counted in `memory_usage` like any chunk tail).
#[derive(Clone, Copy)]
struct LocalBlock {
    /// The id of the arena the block belongs to (0: none). Ids are never
    /// reused, so a block of a dropped arena is never used again.
    arena: u64,
    /// The chunk the block lies in (its end may be grown in place while
    /// it is the chunk's last allocation).
    chunk: *mut ChunkHeader,
    /// Next free byte and end of the block.
    next: *mut u8,
    left: usize,
}

impl LocalBlock {
    const EMPTY: LocalBlock = LocalBlock {
        arena: 0,
        chunk: ptr::null_mut(),
        next: ptr::null_mut(),
        left: 0,
    };

    /// The padding before a `size`-byte request aligned to `align`, if it
    /// fits the rest of the block.
    #[inline]
    fn fit(&self, size: usize, align: usize) -> Option<usize> {
        let pad = self.next.align_offset(align);
        (pad.checked_add(size)? <= self.left).then_some(pad)
    }
}

thread_local! {
    static LOCAL_BLOCK: Cell<LocalBlock> = const { Cell::new(LocalBlock::EMPTY) };
}

/// The next arena id (ids start at 1; 0 marks an empty [`LocalBlock`]).
static NEXT_ARENA_ID: AtomicU64 = AtomicU64::new(1);

/// A concurrent bump allocator; memory is released only when it drops.
pub struct Arena {
    /// This arena's process-unique id, for the thread-local blocks.
    id: u64,
    /// The shared chunk small allocations bump into (null before the first).
    current: AtomicPtr<ChunkHeader>,
    /// Sum of the sizes of all chunks, for rotation decisions.
    reserved: AtomicUsize,
    /// Largest shared chunk; requests above a quarter of it get their own.
    max_chunk_size: usize,
    chunks: Mutex<Chunks>,
}

// SAFETY: the raw pointers in `Arena` (in `Chunks` and `current`) point to
// chunks the arena exclusively owns; chunk memory is freed only in `Drop`
// (which has `&mut self`). Concurrent access to a chunk goes only through its
// atomic `used` offset (which hands out disjoint ranges) and the immutable
// `prev`/`size` fields written before the chunk is published with Release.
// The chunk list is mutated only under `chunks`' mutex. Nothing is tied to
// the thread that created the arena.
unsafe impl Send for Arena {}
// SAFETY: see `Send`: every `&self` method synchronises through atomics or
// the mutex, and handed-out ranges never overlap.
unsafe impl Sync for Arena {}

impl Default for Arena {
    fn default() -> Self {
        Self::new()
    }
}

impl Arena {
    /// An empty arena with 2 MiB maximum chunks. Reserves nothing until the
    /// first allocation.
    pub fn new() -> Self {
        Self::with_max_chunk_size(DEFAULT_MAX_CHUNK_SIZE)
    }

    /// An empty arena whose shared chunks grow up to `max_chunk_size` bytes
    /// (at least [`FIRST_CHUNK_SIZE`]).
    pub fn with_max_chunk_size(max_chunk_size: usize) -> Self {
        let max_chunk_size = max_chunk_size.max(FIRST_CHUNK_SIZE);
        Arena {
            id: NEXT_ARENA_ID.fetch_add(1, Ordering::Relaxed),
            current: AtomicPtr::new(ptr::null_mut()),
            reserved: AtomicUsize::new(0),
            max_chunk_size,
            chunks: Mutex::new(Chunks {
                newest: ptr::null_mut(),
                next_size: FIRST_CHUNK_SIZE,
            }),
        }
    }

    /// Bytes of all chunks reserved so far (headers and unused tails
    /// included): what the arena costs the process.
    pub fn memory_usage(&self) -> usize {
        self.reserved.load(Ordering::Relaxed)
    }

    /// Allocates `size` bytes aligned to `align` (a power of two). The memory
    /// is uninitialised, never overlaps another allocation of this arena and
    /// stays valid until the arena drops. Safe to call from many threads.
    ///
    /// # Panics
    ///
    /// If `align` is not a power of two, or the request cannot be
    /// represented as a `Layout` (larger than `isize::MAX`): both are caller
    /// bugs, the memtable bounds keys and values long before that.
    pub fn allocate(&self, size: usize, align: usize) -> NonNull<u8> {
        assert!(
            align.is_power_of_two(),
            "arena alignment {align} is not a power of two"
        );
        if size <= MAX_BLOCK_REQUEST {
            if let Some(p) = self.allocate_local(size, align) {
                return p;
            }
        }
        let chunk = self.current.load(Ordering::Acquire);
        if let Some(p) = NonNull::new(chunk).and_then(|c| bump(c, size, align)) {
            return p;
        }
        self.allocate_slow(chunk, size, align)
    }

    /// Allocates from this thread's block, refilling it from the current
    /// chunk when it is another arena's or too full. `None` when the
    /// current chunk is small or has no room for a block: the caller bumps
    /// the chunk itself (and adds a chunk if needed).
    #[inline]
    fn allocate_local(&self, size: usize, align: usize) -> Option<NonNull<u8>> {
        // `try_with`: a thread-local destructor that writes to a memtable
        // finds the slot gone and bumps the chunk instead.
        let local = LOCAL_BLOCK.try_with(|slot| {
            let mut block = slot.get();
            if block.arena != self.id {
                block = LocalBlock::EMPTY;
            }
            let pad = match block.fit(size, align) {
                Some(pad) => pad,
                None => {
                    block = self.refill(block)?;
                    block.fit(size, align)?
                }
            };
            let p = block.next.wrapping_add(pad);
            let used = pad + size;
            block.next = block.next.wrapping_add(used);
            block.left -= used;
            slot.set(block);
            request_ahead(p, size, block.left);
            NonNull::new(p)
        });
        local.ok().flatten()
    }

    /// `block` (this arena's, or empty) with more room: grown in place
    /// while nothing was bumped after it in the current chunk (always, with
    /// one writer), else a fresh block. `None` when the current chunk is
    /// small or full.
    fn refill(&self, block: LocalBlock) -> Option<LocalBlock> {
        let chunk = NonNull::new(self.current.load(Ordering::Acquire))?;
        // SAFETY: a chunk published in `current` is live until the arena
        // drops (see `bump`).
        let header = unsafe { chunk.as_ref() };
        if header.size < MIN_BLOCKED_CHUNK {
            return None;
        }
        if block.chunk == chunk.as_ptr() {
            let end = block.next as usize + block.left - chunk.as_ptr() as usize;
            let grown = (end + BLOCK_SIZE).min(header.size);
            // The CAS succeeds only if `used` is still the block's end.
            if grown > end
                && header
                    .used
                    .compare_exchange(end, grown, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                return Some(LocalBlock {
                    left: block.left + (grown - end),
                    ..block
                });
            }
        }
        let start = bump(chunk, BLOCK_SIZE, CHUNK_ALIGN)?;
        Some(LocalBlock {
            arena: self.id,
            chunk: chunk.as_ptr(),
            next: start.as_ptr(),
            left: BLOCK_SIZE,
        })
    }

    /// Adds a chunk (or reuses one another thread just added) and allocates
    /// from it. `seen` is the current chunk the fast path failed on.
    #[cold]
    fn allocate_slow(&self, seen: *mut ChunkHeader, size: usize, align: usize) -> NonNull<u8> {
        let mut chunks = self.chunks.lock();
        // Worst case bytes a chunk needs for this request after its header.
        let need = size
            .checked_add(align.saturating_sub(CHUNK_ALIGN))
            .and_then(|n| n.checked_add(HEADER_SIZE))
            .unwrap_or_else(|| too_large(size));

        if size > self.max_chunk_size / 4 {
            // Dedicated chunk: link it for Drop, leave `current` alone.
            let chunk = self.new_chunk(&mut chunks, need);
            return match bump(chunk, size, align) {
                Some(p) => p,
                // `need` covers header, padding and size by construction.
                None => unreachable!("a dedicated chunk fits its request"),
            };
        }

        let current = self.current.load(Ordering::Acquire);
        if current != seen {
            // Another thread installed a fresh chunk while we waited.
            if let Some(p) = NonNull::new(current).and_then(|c| bump(c, size, align)) {
                return p;
            }
        }
        let chunk_size = chunks.next_size.max(need);
        chunks.next_size = (chunks.next_size * 2).min(self.max_chunk_size);
        let chunk = self.new_chunk(&mut chunks, chunk_size);
        // Take our bytes before publishing, so a burst of other threads
        // cannot starve this one of the chunk it paid for.
        let p = match bump(chunk, size, align) {
            Some(p) => p,
            None => unreachable!("a fresh chunk fits its request"),
        };
        // Release: the header written in `new_chunk` is visible to whoever
        // Acquire-loads the new `current`.
        self.current.store(chunk.as_ptr(), Ordering::Release);
        p
    }

    /// Allocates a chunk of `size` bytes (header included), links it into
    /// the list and counts it. Called with the mutex held.
    fn new_chunk(&self, chunks: &mut Chunks, size: usize) -> NonNull<ChunkHeader> {
        let layout = chunk_layout(size);
        // A full-size shared chunk comes faulted in ahead, by another thread
        // (and advised for huge pages there), when one is ready.
        let prefaulted = if size == pages::PREFAULTED_CHUNK {
            pages::take_prefaulted()
        } else {
            None
        };
        let base = prefaulted.or_else(|| {
            if is_mapped(size) {
                pages::map_zeroed(
                    pages::round_to_pages(size),
                    layout.align().max(pages::page_size()),
                )
            } else {
                // SAFETY: `layout` has a non-zero size (at least HEADER_SIZE).
                NonNull::new(unsafe { alloc::alloc(layout) })
            }
        });
        let Some(base) = base else {
            alloc::handle_alloc_error(layout)
        };
        if prefaulted.is_none() && layout.align() == HUGE_PAGE {
            pages::advise_huge_pages(base, size);
        }
        let header = base.cast::<ChunkHeader>();
        // SAFETY: `base` is a fresh allocation of at least HEADER_SIZE bytes
        // aligned to CHUNK_ALIGN >= align_of::<ChunkHeader>(), so writing a
        // header there is in bounds and aligned; nothing else refers to it yet.
        unsafe {
            header.as_ptr().write(ChunkHeader {
                prev: chunks.newest,
                size,
                used: AtomicUsize::new(HEADER_SIZE),
            });
        }
        chunks.newest = header.as_ptr();
        self.reserved.fetch_add(size, Ordering::Relaxed);
        header
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        let mut chunk = self.chunks.get_mut().newest;
        while let Some(c) = NonNull::new(chunk) {
            // SAFETY: every chunk in the list was made by `new_chunk`: a
            // mapping of `round_to_pages(size)` bytes when `is_mapped(size)`
            // (a pre-faulted chunk is one too), aligned to the huge page
            // when `size` is a multiple of it (`chunk_layout`) — so a chunk
            // of PREFAULTED_CHUNK bytes is exactly the mapping `recycle`
            // takes — else an allocation with `chunk_layout(size)`. Its
            // header is initialised and immutable apart from `used`, and
            // `&mut self` means no other thread can use the arena or memory
            // it handed out (borrowers of the arena's memory are tied to the
            // arena's lifetime). Full-size chunks go back to the pool for
            // the next arena; the rest to the OS or the allocator.
            unsafe {
                let (prev, size) = ((*c.as_ptr()).prev, (*c.as_ptr()).size);
                if size == pages::PREFAULTED_CHUNK {
                    pages::recycle(c.cast::<u8>());
                } else if is_mapped(size) {
                    pages::unmap(c.cast::<u8>(), pages::round_to_pages(size));
                } else {
                    alloc::dealloc(c.as_ptr().cast::<u8>(), chunk_layout(size));
                }
                chunk = prev;
            }
        }
    }
}

/// Carves `size` bytes aligned to `align` out of `chunk`, or `None` if they
/// do not fit.
#[inline]
fn bump(chunk: NonNull<ChunkHeader>, size: usize, align: usize) -> Option<NonNull<u8>> {
    // SAFETY: `chunk` points to a live, initialised header: chunks are freed
    // only when the arena drops, and callers reached it through the arena
    // (the `current` pointer, Acquire-loaded, or `new_chunk`).
    let header = unsafe { chunk.as_ref() };
    let base = chunk.as_ptr() as usize;
    let mut used = header.used.load(Ordering::Relaxed);
    loop {
        // Align the absolute address, so any power-of-two alignment works.
        let start = base.checked_add(used)?.checked_add(align - 1)? & !(align - 1);
        let start_off = start - base;
        let end = start_off.checked_add(size)?;
        if end > header.size {
            return None;
        }
        // Relaxed suffices: the CAS chain on `used` alone guarantees that
        // ranges are disjoint; publishing what is written into a range is the
        // caller's business (the skiplist links nodes with Release).
        match header
            .used
            .compare_exchange_weak(used, end, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => {
                // SAFETY: `start_off < end <= header.size`, so the pointer is
                // inside (or, for size 0, one past the end of) the chunk's
                // allocation, which is non-null.
                let p = unsafe { chunk.as_ptr().cast::<u8>().add(start_off) };
                return NonNull::new(p);
            }
            Err(actual) => used = actual,
        }
    }
}

/// How far past an allocation [`request_ahead`] requests the chunk's lines.
const WRITE_AHEAD: usize = 256;
const CACHE_LINE: usize = 64;

/// Requests the lines `WRITE_AHEAD` bytes past the `size` bytes just
/// handed out at `start` (but not past the `room` bytes after them in the
/// block), so the allocations that follow write into cached lines.
///
/// A memtable writes a node into fresh arena memory and then publishes it
/// with a locked CAS, which waits until every earlier store has its line:
/// without the request, a node's lines are fetched from memory right there,
/// one allocation at a time (in `perf`, a large share of a `jellyfish`
/// uniform put sat on that CAS; its search runs before it allocates, so
/// nothing else overlaps those fetches). Bumps are sequential within a
/// chunk, so requesting the lines `WRITE_AHEAD` past each range covers
/// every line once, a few allocations before it is written.
#[inline]
fn request_ahead(start: *mut u8, size: usize, room: usize) {
    let first = start as usize + WRITE_AHEAD;
    let mut offset = WRITE_AHEAD - (first & (CACHE_LINE - 1));
    let end = size + WRITE_AHEAD.min(room);
    while offset < end {
        crate::util::prefetch::prefetch_line(start.wrapping_add(offset));
        offset += CACHE_LINE;
    }
}

/// Chunks of at least this many bytes are mapped from the OS directly
/// (`pages::map_zeroed`) and unmapped when the arena drops, instead of
/// coming from the allocator: glibc raises its mmap threshold after the
/// first large free and then serves such sizes from its heap, which keeps
/// them after they are freed. Measured by the RSS a `weft bench` YCSB
/// load ended at, many memtables flushed one after the other: with
/// allocator chunks the flushed memtables' memory stayed in the process,
/// with the threshold pinned (and so with mapped chunks) it left. The
/// figures are in `bench/journal/2026-11-27-03-figures-from-code-comments.md`.
const MAPPED_CHUNK: usize = 256 << 10;

/// Whether a chunk of `size` bytes is a mapping (else an allocation).
fn is_mapped(size: usize) -> bool {
    size >= MAPPED_CHUNK
}

/// The layout of a chunk of `size` bytes.
fn chunk_layout(size: usize) -> Layout {
    let align = if size >= HUGE_PAGE && size.is_multiple_of(HUGE_PAGE) {
        HUGE_PAGE
    } else {
        CHUNK_ALIGN
    };
    match Layout::from_size_align(size, align) {
        Ok(l) => l,
        Err(_) => too_large(size),
    }
}

#[cold]
fn too_large(size: usize) -> ! {
    panic!("arena request of {size} bytes exceeds the address space")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn empty_arena_reserves_nothing() {
        let a = Arena::new();
        assert_eq!(a.memory_usage(), 0);
    }

    #[test]
    fn allocations_are_aligned_and_disjoint() {
        let a = Arena::new();
        let mut ranges = Vec::new();
        for i in 0..2000usize {
            let align = 1usize << (i % 13); // 1 ..= 4096
            let size = (i * 7) % 300;
            let p = a.allocate(size, align);
            assert_eq!(p.as_ptr() as usize % align, 0, "align {align}");
            // SAFETY: test writes into its own fresh allocation.
            unsafe { ptr::write_bytes(p.as_ptr(), (i % 251) as u8, size) };
            ranges.push((p.as_ptr() as usize, size, i));
        }
        for &(addr, size, i) in &ranges {
            // SAFETY: the range was allocated above and the arena is alive.
            let s = unsafe { std::slice::from_raw_parts(addr as *const u8, size) };
            assert!(
                s.iter().all(|&b| b == (i % 251) as u8),
                "allocation {i} overwritten"
            );
        }
        ranges.sort();
        for w in ranges.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "overlap {:?} {:?}", w[0], w[1]);
        }
    }

    #[test]
    fn memory_usage_grows_with_chunks() {
        let a = Arena::new();
        a.allocate(8, 8);
        let first = a.memory_usage();
        assert_eq!(first, FIRST_CHUNK_SIZE);
        let mut last = first;
        let mut total = 8;
        while total < 4 << 20 {
            a.allocate(100, 8);
            total += 100;
            let now = a.memory_usage();
            assert!(now >= last);
            last = now;
        }
        assert!(a.memory_usage() >= total, "{} < {total}", a.memory_usage());
        // Growth is bounded: the waste is at most one max chunk + headers.
        assert!(a.memory_usage() <= total * 2 + DEFAULT_MAX_CHUNK_SIZE);
    }

    #[test]
    fn large_allocations_get_their_own_chunk() {
        let a = Arena::new();
        let small = a.allocate(16, 8);
        let before = a.memory_usage();
        let big_size = 3 << 20;
        let big = a.allocate(big_size, 64);
        assert_eq!(big.as_ptr() as usize % 64, 0);
        assert!(a.memory_usage() >= before + big_size);
        assert!(a.memory_usage() < before + big_size + 4096);
        // SAFETY: test writes into its own fresh allocation.
        unsafe { ptr::write_bytes(big.as_ptr(), 0xAB, big_size) };
        // The shared chunk is still in use for small requests.
        let small2 = a.allocate(16, 8);
        assert_eq!(small2.as_ptr() as usize, small.as_ptr() as usize + 16);
        assert!(a.memory_usage() < before + big_size + 4096);
        // SAFETY: reading back the allocation written above.
        let s = unsafe { std::slice::from_raw_parts(big.as_ptr(), big_size) };
        assert!(s.iter().all(|&b| b == 0xAB));
    }

    #[test]
    fn zero_sized_and_medium_requests() {
        let a = Arena::with_max_chunk_size(64 * 1024);
        let z = a.allocate(0, 1);
        let _ = z;
        // Larger than the first chunk but below the dedicated threshold.
        let m = a.allocate(10_000, 8);
        // SAFETY: test writes into its own fresh allocation.
        unsafe { ptr::write_bytes(m.as_ptr(), 1, 10_000) };
        assert!(a.memory_usage() >= 10_000 + FIRST_CHUNK_SIZE);
    }

    /// One writer's blocks grow in place, so its allocations stay
    /// back to back within a chunk: without that, a block's tail would be
    /// skipped every 4 KiB (hundreds of gaps here).
    #[test]
    fn a_single_writers_allocations_leave_no_gaps_inside_a_chunk() {
        let a = Arena::new();
        let size = 296;
        let mut last = a.allocate(size, 8).as_ptr() as usize;
        let mut gaps = 0;
        for _ in 0..10_000 {
            let p = a.allocate(size, 8).as_ptr() as usize;
            gaps += usize::from(p != last + size);
            last = p;
        }
        // ~3 MiB fills 13 chunks; each change leaves at most two gaps (the
        // old chunk's tail, and the new chunk's first block aligned after
        // the request that opened the chunk).
        assert!(gaps <= 26, "{gaps} gaps between consecutive allocations");
    }

    /// A thread's block belongs to one arena: after that arena drops, the
    /// next arena's first allocation comes from a chunk of its own, not
    /// from the dead arena's block (ids are never reused).
    #[test]
    fn a_dropped_arenas_block_is_never_reused() {
        let old = Arena::new();
        // Past the small chunks, so the thread holds a block of `old`.
        for _ in 0..2_000 {
            old.allocate(100, 8);
        }
        drop(old);
        let new = Arena::new();
        new.allocate(100, 8);
        assert!(
            new.memory_usage() > 0,
            "allocated from another arena's block"
        );
    }

    /// A thread that alternates between two arenas never gets memory of one
    /// from the block it took in the other.
    #[test]
    fn alternating_arenas_keep_their_blocks_apart() {
        let arenas = [Arena::new(), Arena::new()];
        let mut ranges: [Vec<(usize, usize, u8)>; 2] = [Vec::new(), Vec::new()];
        for i in 0..20_000usize {
            let which = (i / 3) % 2;
            let size = 40 + i % 200;
            let p = arenas[which].allocate(size, 8);
            let pat = (i % 251) as u8;
            // SAFETY: test writes into its own fresh allocation.
            unsafe { ptr::write_bytes(p.as_ptr(), pat, size) };
            ranges[which].push((p.as_ptr() as usize, size, pat));
        }
        assert_intact_and_disjoint(ranges.concat());
    }

    #[test]
    fn concurrent_allocations_never_overlap() {
        let a = Arc::new(Arena::with_max_chunk_size(64 * 1024));
        let threads: Vec<_> = (0..8u8)
            .map(|t| {
                let a = Arc::clone(&a);
                std::thread::spawn(move || {
                    let mut mine = Vec::new();
                    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ u64::from(t);
                    for i in 0..5000usize {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let size = 1 + (x % 200) as usize;
                        let size = if i % 1000 == 999 { 20_000 } else { size };
                        let align = 1usize << ((x >> 60) % 7);
                        let p = a.allocate(size, align);
                        assert_eq!(p.as_ptr() as usize % align, 0);
                        let pat = t.wrapping_mul(31).wrapping_add(i as u8);
                        // SAFETY: test writes into its own fresh allocation.
                        unsafe { ptr::write_bytes(p.as_ptr(), pat, size) };
                        mine.push((p.as_ptr() as usize, size, pat));
                    }
                    mine
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in threads {
            all.extend(t.join().unwrap());
        }
        let total: usize = all.iter().map(|r| r.1).sum();
        assert!(a.memory_usage() >= total);
        assert_intact_and_disjoint(all);
    }

    /// Every `(address, size, pattern)` range still holds its pattern, and
    /// no two ranges overlap. The ranges' arenas must be alive.
    fn assert_intact_and_disjoint(mut all: Vec<(usize, usize, u8)>) {
        for &(addr, size, pat) in &all {
            // SAFETY: the caller's arenas, which handed out these ranges,
            // are alive.
            let s = unsafe { std::slice::from_raw_parts(addr as *const u8, size) };
            assert!(
                s.iter().all(|&b| b == pat),
                "allocation at {addr:#x} overwritten"
            );
        }
        all.sort();
        for w in all.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "overlap {:?} {:?}", w[0], w[1]);
        }
    }
}
