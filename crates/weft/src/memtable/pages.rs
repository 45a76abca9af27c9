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
//! measured, `weft serve` loading 1 M keys of 100 B held 127 B/key of RSS
//! instead of 65. A private anonymous mapping is zero-filled by the kernel
//! page by page on first touch and returned whole by `munmap`. The
//! memtable arenas' large chunks come from [`map_zeroed`] for the same
//! reason (see `arena`).

use std::alloc::{handle_alloc_error, Layout};
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;

/// `len` values of `T` in an anonymous mapping, all bytes zero at first.
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
        let Some(p) = map_zeroed(mapped, page_size()) else {
            handle_alloc_error(layout);
        };
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn mappings_are_aligned_zeroed_and_writable() {
        for (bytes, align) in [
            (4096, 4096),
            (3 * 4096, 4096),
            (2 << 20, 2 << 20),
            (6 << 20, 2 << 20),
        ] {
            let p = map_zeroed(bytes, align).expect("mmap");
            assert_eq!(p.as_ptr() as usize % align, 0, "{bytes} at {align}");
            // SAFETY: `p` is a fresh mapping of `bytes` bytes.
            let s = unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), bytes) };
            assert!(s.iter().all(|&b| b == 0));
            s.fill(0xa5);
            // SAFETY: the mapping just made, used no more.
            unsafe { unmap(p, bytes) };
        }
    }

    #[test]
    fn starts_zeroed_and_holds_writes() {
        for len in [1usize, 7, 513, 1 << 17] {
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
}
