//! [`ZeroedPages`]: a fixed-length array in its own anonymous memory
//! mapping, for the memtables' large hash tables.
//!
//! # Why not `Box<[T]>`
//!
//! A hash table is allocated empty and sized for the whole write buffer
//! (8 MiB for 64 MiB), and it is freed when its memtable is flushed.
//! Through the allocator both ends cost: a 64-byte-aligned zeroed box is
//! `memset` at once (every page touched before the first key), and glibc
//! raises its mmap threshold after the first large free, so later tables
//! come from — and are freed back into — the heap, which keeps the pages:
//! measured, `weft serve` after loading keys held far more resident memory
//! per key than the keys need. A private anonymous mapping is zero-filled
//! by the kernel (page by page on first touch for small tables, at once in
//! huge pages for large ones, see [`ZeroedPages::new`]) and returned whole
//! by `munmap`. The memtable arenas' large chunks come from [`map_zeroed`]
//! for the same reason (see `arena`).

use std::alloc::{handle_alloc_error, Layout};
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::OnceLock;

use parking_lot::{Condvar, Mutex};

/// The x86-64 / aarch64 (4 KiB base) transparent huge page size. Chunks of
/// a multiple of it are allocated aligned to it and advised as huge-page
/// candidates: a large memtable is read at random (gets, seeks, the links
/// of a skiplist), and with 4 KiB pages nearly every such access also
/// misses the TLB; with 2 MiB pages a 64 MiB memtable needs 32 entries.
pub const HUGE_PAGE: usize = 2 << 20;

/// `len` values of `T` in an anonymous mapping, all bytes zero at first.
// Unused under loom, whose atomics are not zeroable words.
#[cfg_attr(loom, allow(dead_code))]
pub(crate) struct ZeroedPages<T> {
    ptr: NonNull<T>,
    len: usize,
    /// Mapped bytes (`len * size_of::<T>()` rounded up to pages; never 0).
    mapped: usize,
    _owns: PhantomData<T>,
}

// SAFETY: the mapping is owned exclusively by this value (like a `Box<[T]>`),
// so sending or sharing it is sound exactly when it is for `T`.
unsafe impl<T: Send> Send for ZeroedPages<T> {}
// SAFETY: as for `Send`: `&ZeroedPages<T>` only hands out `&[T]`.
unsafe impl<T: Sync> Sync for ZeroedPages<T> {}

#[cfg_attr(loom, allow(dead_code))]
impl<T> ZeroedPages<T> {
    /// Maps room for `len` values, every byte zero.
    ///
    /// # Safety
    ///
    /// All-zero bytes must be a valid `T`, and `T` must need no drop (the
    /// values are never dropped, only unmapped).
    pub(crate) unsafe fn new(len: usize) -> Self {
        assert!(len > 0, "an empty ZeroedPages");
        let layout = Layout::array::<T>(len)
            .unwrap_or_else(|_| panic!("a table of {len} entries exceeds the address space"));
        assert!(
            layout.align() <= page_size(),
            "alignment {} exceeds a page",
            layout.align()
        );
        let mapped = round_to_pages(layout.size());
        // A table of a huge page or more is faulted in whole, as huge pages,
        // before its first probe. Left to first touch, each 4 KiB page of a
        // hash table is first *read* (a probe maps the shared zero page)
        // and then written (a claim copies it), and the copy flushes the
        // other core's TLB by interrupt: measured, a noticeable share of a
        // lone writer's `fillrandom` went to that path under
        // `Table::claim_empty`. Every slot of such a table is used before
        // its memtable is full anyway; small tables stay lazy.
        let (mapped, align) = if mapped >= HUGE_PAGE {
            (mapped.next_multiple_of(HUGE_PAGE), HUGE_PAGE)
        } else {
            (mapped, page_size())
        };
        let Some(p) = map_zeroed(mapped, align) else {
            handle_alloc_error(layout);
        };
        if align == HUGE_PAGE {
            fault_in(p, mapped);
        }
        ZeroedPages {
            ptr: p.cast::<T>(),
            len,
            mapped,
            _owns: PhantomData,
        }
    }
}

impl<T> Deref for ZeroedPages<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        // SAFETY: the mapping holds `len` values of `T` (page-aligned, so
        // aligned for `T`, see `new`), zero-filled by the kernel, which the
        // caller of `new` promised is a valid `T`; it lives until `drop`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> Drop for ZeroedPages<T> {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`mapped` are exactly the mapping made in `new`, and
        // no reference into it outlives `self` (they borrow from `deref`).
        unsafe { unmap(self.ptr.cast::<u8>(), self.mapped) };
    }
}

/// The system's page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system and has no
    // preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

/// `bytes` rounded up to whole pages (at least one).
pub(crate) fn round_to_pages(bytes: usize) -> usize {
    let page = page_size();
    bytes
        .div_ceil(page)
        .max(1)
        .checked_mul(page)
        .unwrap_or_else(|| panic!("a mapping of {bytes} bytes exceeds the address space"))
}

/// Maps `bytes` (whole pages) of private anonymous memory, zero-filled by
/// the kernel on first touch, at an address aligned to `align` (a power of
/// two, at least a page). `None` if the kernel refuses.
pub(crate) fn map_zeroed(bytes: usize, align: usize) -> Option<NonNull<u8>> {
    let page = page_size();
    debug_assert!(bytes > 0 && bytes.is_multiple_of(page));
    debug_assert!(align.is_power_of_two() && align >= page);
    // Over-map by the alignment slack, then give back the unaligned head
    // and the tail.
    let len = bytes.checked_add(align - page)?;
    // SAFETY: a fresh private anonymous mapping: no address is given and no
    // file, so it cannot alias any memory of the program.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    let base = p as usize;
    let start = base.next_multiple_of(align);
    let (head, tail) = (start - base, base + len - (start + bytes));
    // SAFETY: `[base, start)` and `[start + bytes, base + len)` are page-
    // aligned parts of the mapping just made (base, start and bytes are
    // page multiples), outside the part we keep; nothing refers to them.
    unsafe {
        if head > 0 {
            libc::munmap(p, head);
        }
        if tail > 0 {
            libc::munmap((start + bytes) as *mut libc::c_void, tail);
        }
    }
    NonNull::new(start as *mut u8)
}

/// Returns a mapping made by [`map_zeroed`] to the OS.
///
/// # Safety
///
/// `p` and `bytes` must be exactly a mapping returned by `map_zeroed`, not
/// yet unmapped, and nothing may use its memory afterwards.
pub(crate) unsafe fn unmap(p: NonNull<u8>, bytes: usize) {
    // SAFETY: the caller's contract.
    let rc = unsafe { libc::munmap(p.as_ptr().cast(), bytes) };
    debug_assert_eq!(rc, 0, "munmap failed");
}

/// Size of the chunks [`take_prefaulted`] hands out: the arena's largest
/// shared chunk, one transparent huge page.
pub(crate) const PREFAULTED_CHUNK: usize = HUGE_PAGE;
/// Fresh chunks kept ready (8 MiB: four huge pages).
const PREFAULTED_READY: usize = 4;
/// Most chunks given back by dropped arenas kept for the next ones (64 MiB:
/// one default write buffer).
const RECYCLED_MAX: usize = 32;
/// Recycled chunks nobody took for this long go back to the OS.
const RECYCLED_IDLE: std::time::Duration = std::time::Duration::from_secs(1);

/// Chunks whose pages are present, and the refill thread's wake-up.
struct Prefaulted {
    ready: Mutex<Ready>,
    low: Condvar,
}

#[derive(Default)]
struct Ready {
    /// Mapped and faulted in by the refill thread: all bytes zero.
    fresh: Vec<usize>,
    /// Given back by dropped arenas ([`recycle`]): contents left over.
    recycled: Vec<usize>,
    /// A recycled chunk was taken since the refill thread last looked.
    reused: bool,
}

impl Ready {
    /// A chunk, recycled ones first (the most recently given back, whose
    /// lines may still be cached); whether a fresh one was taken.
    fn take(&mut self) -> (Option<usize>, bool) {
        match self.recycled.pop() {
            Some(p) => {
                self.reused = true;
                (Some(p), false)
            }
            None => (self.fresh.pop(), true),
        }
    }

    /// Keeps a chunk given back; false (the caller unmaps it) when
    /// [`RECYCLED_MAX`] are kept already.
    fn give(&mut self, p: usize) -> bool {
        if self.recycled.len() >= RECYCLED_MAX {
            return false;
        }
        self.recycled.push(p);
        true
    }

    /// Called every [`RECYCLED_IDLE`] without a fresh chunk wanted: the
    /// recycled chunks to unmap — all of them when none was taken since
    /// the last call.
    fn idle_tick(&mut self) -> Vec<usize> {
        if std::mem::take(&mut self.reused) {
            Vec::new()
        } else {
            std::mem::take(&mut self.recycled)
        }
    }
}

fn pool() -> Option<&'static Prefaulted> {
    static POOL: OnceLock<Option<&'static Prefaulted>> = OnceLock::new();
    *POOL.get_or_init(|| {
        let pool: &'static Prefaulted = Box::leak(Box::new(Prefaulted {
            ready: Mutex::new(Ready::default()),
            low: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("weft-prefault".into())
            .spawn(move || refill(pool))
            .ok()
            .map(|_| pool)
    })
}

/// A mapping of [`PREFAULTED_CHUNK`] bytes, aligned to its size, whose
/// pages are already present, if one is ready; the caller owns it as if
/// from [`map_zeroed`], except that its bytes are unspecified (a chunk a
/// dropped arena gave back, or zeros).
///
/// # Why
///
/// The first write to a fresh page makes the kernel zero it (a whole huge
/// page at once), inside the writer that touches it: measured, a large
/// share of a single writer's `fillrandom` + `overwrite` in a large
/// memtable went to `clear_page_erms` under the arena's new chunks. A
/// background thread (`weft-prefault`, started on first use, one per
/// process) keeps a few chunks faulted in, so that cost lands on an
/// otherwise idle core; an A/B of a memtable-only `weft bench` fill and
/// overwrite showed both faster with it. The ready chunks cost their
/// 8 MiB of memory for the life of the process.
/// The thread runs at background CPU priority ([`crate::util::thread_priority`]):
/// when no core is idle, a writer that finds no ready chunk faults its own
/// rather than being preempted by the thread meant to spare it that.
///
/// When no core is idle (a write-heavy load with flushes and merges) the
/// thread falls behind, and zeroing 64 MiB per memtable is work no one
/// needs: an arena's memory is uninitialised by contract. So chunks of
/// dropped arenas come back here ([`recycle`]) and are handed out first,
/// still present and without being zeroed again.
pub(crate) fn take_prefaulted() -> Option<NonNull<u8>> {
    let pool = pool()?;
    let (p, fresh) = pool.ready.lock().take();
    if fresh {
        pool.low.notify_one();
    }
    p.and_then(|a| NonNull::new(a as *mut u8))
}

/// Takes back a chunk of [`PREFAULTED_CHUNK`] bytes made by
/// [`take_prefaulted`] or [`map_zeroed`] (aligned to its size), for a later
/// [`take_prefaulted`]; unmaps it when [`RECYCLED_MAX`] are kept already.
/// Kept chunks that go unused for [`RECYCLED_IDLE`] are unmapped, so a
/// process that stops writing gives its memtable memory back.
///
/// # Safety
///
/// `p` must be such a mapping, owned by the caller, and nothing may use its
/// memory afterwards.
pub(crate) unsafe fn recycle(p: NonNull<u8>) {
    if let Some(pool) = pool() {
        if pool.ready.lock().give(p.as_ptr() as usize) {
            return;
        }
    }
    // SAFETY: the caller's contract.
    unsafe { unmap(p, PREFAULTED_CHUNK) };
}

/// The `weft-prefault` thread: keeps [`PREFAULTED_READY`] fresh chunks
/// ready, and unmaps recycled chunks left idle for [`RECYCLED_IDLE`].
fn refill(pool: &Prefaulted) {
    crate::util::thread_priority::lower_current();
    loop {
        let idle: Vec<usize> = {
            let mut ready = pool.ready.lock();
            let mut idle = Vec::new();
            while ready.fresh.len() >= PREFAULTED_READY && idle.is_empty() {
                if pool.low.wait_for(&mut ready, RECYCLED_IDLE).timed_out() {
                    idle = ready.idle_tick();
                }
            }
            idle
        };
        if !idle.is_empty() {
            for p in idle.into_iter().filter_map(|a| NonNull::new(a as *mut u8)) {
                // SAFETY: recycled chunks are whole mappings of
                // PREFAULTED_CHUNK bytes that `recycle` took ownership of;
                // taken out of the pool, nothing else can reach them.
                unsafe { unmap(p, PREFAULTED_CHUNK) };
            }
            continue;
        }
        let Some(p) = map_zeroed(PREFAULTED_CHUNK, PREFAULTED_CHUNK) else {
            std::thread::sleep(std::time::Duration::from_millis(100));
            continue;
        };
        fault_in(p, PREFAULTED_CHUNK);
        pool.ready.lock().fresh.push(p.as_ptr() as usize);
    }
}

/// Asks the kernel to back `[base, base + size)` with transparent huge
/// pages (when THP is in `madvise` mode, as on Debian; a no-op in `always`
/// mode). Advice only: a refusal changes speed, never behaviour.
#[cfg(target_os = "linux")]
pub(crate) fn advise_huge_pages(base: NonNull<u8>, size: usize) {
    // SAFETY: `[base, base + size)` is one live allocation or mapping of
    // ours, aligned to a huge page (a multiple of the page size) as madvise
    // requires; MADV_HUGEPAGE changes no content and no permissions.
    let _ = unsafe { libc::madvise(base.as_ptr().cast(), size, libc::MADV_HUGEPAGE) };
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn advise_huge_pages(_base: NonNull<u8>, _size: usize) {}

/// Makes every page of the fresh mapping `[p, p + bytes)` present, as huge
/// pages where the kernel allows.
fn fault_in(p: NonNull<u8>, bytes: usize) {
    advise_huge_pages(p, bytes);
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `[p, p + bytes)` is a whole private anonymous mapping of
        // ours that nothing else uses yet; MADV_POPULATE_WRITE changes no
        // content (its pages are zero either way) and no permissions.
        let populated =
            unsafe { libc::madvise(p.as_ptr().cast(), bytes, libc::MADV_POPULATE_WRITE) == 0 };
        if populated {
            return;
        }
    }
    // Older kernels: touch a byte of every page (it is zero already).
    for off in (0..bytes).step_by(page_size()) {
        // SAFETY: `off < bytes`, inside the mapping, which nothing else
        // uses yet; writing the zero it holds changes nothing.
        unsafe { p.as_ptr().add(off).write_volatile(0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Pages of `[p, p + bytes)` present in memory.
    #[cfg(target_os = "linux")]
    fn resident(p: *const u8, bytes: usize) -> usize {
        let pages = bytes.div_ceil(page_size());
        let mut vec = vec![0u8; pages];
        // SAFETY: `[p, p + bytes)` lies in one live mapping of ours
        // (page-aligned start); `vec` has one byte per page.
        let rc = unsafe { libc::mincore(p as *mut libc::c_void, bytes, vec.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore failed");
        vec.iter().filter(|b| *b & 1 == 1).count()
    }

    /// Asserts `[p, p + bytes)` is aligned to `align`, all zero and
    /// writable, then unmaps it.
    fn check_and_unmap(p: NonNull<u8>, bytes: usize, align: usize) {
        assert_eq!(p.as_ptr() as usize % align, 0, "{bytes} at {align}");
        // SAFETY: `p` is a fresh mapping of `bytes` bytes owned by the test.
        let s = unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), bytes) };
        assert!(s.iter().all(|&b| b == 0));
        s.fill(0xa5);
        // SAFETY: the same mapping, used no more.
        unsafe { unmap(p, bytes) };
    }

    #[test]
    fn mappings_are_aligned_zeroed_and_writable() {
        for (bytes, align) in [
            (4096, 4096),
            (3 * 4096, 4096),
            (2 << 20, 2 << 20),
            (6 << 20, 2 << 20),
        ] {
            check_and_unmap(map_zeroed(bytes, align).expect("mmap"), bytes, align);
        }
    }

    #[test]
    fn prefaulted_chunks_are_aligned_present_and_keep_coming() {
        for _ in 0..2 * PREFAULTED_READY {
            let mut p = None;
            for _ in 0..1000 {
                p = take_prefaulted();
                if p.is_some() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            let p = p.expect("the refill thread never delivered a chunk");
            // Present, aligned and writable; its bytes are unspecified (a
            // chunk recycled by another test's arena, or zeros).
            assert_eq!(p.as_ptr() as usize % PREFAULTED_CHUNK, 0);
            #[cfg(target_os = "linux")]
            assert_eq!(
                resident(p.as_ptr(), PREFAULTED_CHUNK),
                PREFAULTED_CHUNK / page_size()
            );
            // SAFETY: a chunk owned by the test, of PREFAULTED_CHUNK bytes.
            unsafe { p.as_ptr().write_bytes(0xa5, PREFAULTED_CHUNK) };
            // SAFETY: the same mapping, used no more.
            unsafe { unmap(p, PREFAULTED_CHUNK) };
        }
    }

    /// Recycled chunks go out first, newest first; at most `RECYCLED_MAX`
    /// are kept; they are all let go after an idle period without a take,
    /// and kept through one with a take.
    #[test]
    fn recycled_chunks_are_reused_first_and_let_go_when_idle() {
        let mut r = Ready {
            fresh: vec![1],
            ..Ready::default()
        };
        assert!(r.give(10) && r.give(11));
        assert_eq!(r.take(), (Some(11), false));
        assert!(r.idle_tick().is_empty(), "a take since the last tick");
        assert_eq!(r.idle_tick(), vec![10], "idle since the last tick");
        assert_eq!(r.take(), (Some(1), true), "then fresh chunks");
        assert_eq!(r.take(), (None, true));
        for i in 0..RECYCLED_MAX {
            assert!(r.give(100 + i));
        }
        assert!(!r.give(7), "the pool is full");
        assert_eq!(r.recycled.len(), RECYCLED_MAX);
    }

    #[test]
    fn starts_zeroed_and_holds_writes() {
        for len in [1usize, 7, 513, 1 << 17, (3 << 20) / 8 + 1] {
            // SAFETY: all-zero bytes are a valid AtomicU64, which needs no drop.
            let a = unsafe { ZeroedPages::<AtomicU64>::new(len) };
            assert_eq!(a.len(), len);
            assert!(a.iter().all(|x| x.load(Ordering::Relaxed) == 0));
            for (i, x) in a.iter().enumerate() {
                x.store(i as u64 + 1, Ordering::Relaxed);
            }
            assert!(a
                .iter()
                .enumerate()
                .all(|(i, x)| x.load(Ordering::Relaxed) == i as u64 + 1));
        }
    }

    /// A table of a huge page or more is present before its first touch,
    /// aligned for huge pages; a small one is left to first touch.
    #[test]
    #[cfg(target_os = "linux")]
    fn large_tables_are_faulted_in_at_once() {
        let len = (3 << 20) / 8;
        // SAFETY: all-zero bytes are a valid AtomicU64, which needs no drop.
        let big = unsafe { ZeroedPages::<AtomicU64>::new(len) };
        assert_eq!(big.as_ptr() as usize % HUGE_PAGE, 0);
        assert_eq!(
            resident(big.as_ptr().cast(), len * 8),
            (len * 8).div_ceil(page_size())
        );
        let len = 64 << 10;
        // SAFETY: as above.
        let small = unsafe { ZeroedPages::<AtomicU64>::new(len) };
        assert_eq!(resident(small.as_ptr().cast(), len * 8), 0);
    }
}
