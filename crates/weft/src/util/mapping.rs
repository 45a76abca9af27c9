//! Read-only mappings of immutable files (tables, value logs).
//!
//! Tables and value logs never change once written, so their bytes can be
//! read straight out of the page cache through a shared read-only mapping:
//! no system call, no copy into a fresh buffer, no allocation. What a
//! mapping cannot turn into an error is a device that fails under it or a
//! file truncated behind the database's back (the directory is the
//! database's, under its lock): either raises `SIGBUS`, as for the WAL's
//! mapping (`wal::mapped`). Callers keep a `pread` path for when the
//! kernel refuses the mapping.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;

/// A read-only shared mapping of the first `len` bytes of a file.
pub(crate) struct ReadMapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is read-only and owned by this value (unmapped only by
// its drop); reading it from any thread is as sound as reading a `&[u8]`.
unsafe impl Send for ReadMapping {}
// SAFETY: as for `Send`: only shared reads of immutable bytes.
unsafe impl Sync for ReadMapping {}

impl ReadMapping {
    /// Maps `len` (> 0) bytes of `file`, which holds at least that many and
    /// never changes while open, advised `MADV_RANDOM` (a fault reads its
    /// own page, not a readahead window: the readers of these mappings jump
    /// about); `None` if the kernel refuses.
    pub(crate) fn new(file: &File, len: u64) -> Option<ReadMapping> {
        let len = usize::try_from(len).ok().filter(|&l| l > 0)?;
        // SAFETY: a new read-only shared mapping of an open file; the kernel
        // picks the address, so no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        // SAFETY: `[p, p + len)` is the mapping just made; the advice
        // changes no content. Best effort.
        let _ = unsafe { libc::madvise(p, len, libc::MADV_RANDOM) };
        NonNull::new(p.cast::<u8>()).map(|ptr| ReadMapping { ptr, len })
    }

    /// The mapped bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` maps `len` readable bytes of the file for as long as
        // `self` lives; every byte lies below the file's length (the caller
        // checked it at open) and the file is immutable, so the bytes never
        // change under the slice.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// Asks the kernel to start reading `[offset, offset + len)` into the
    /// page cache (`MADV_WILLNEED`), so a reader walking the file in order
    /// does not fault each page in on its own. Best effort.
    pub(crate) fn will_need(&self, offset: usize, len: usize) {
        let page = page_size();
        let start = offset.min(self.len) / page * page;
        let end = offset.saturating_add(len).min(self.len);
        if end <= start {
            return;
        }
        // SAFETY: `[start, end)` lies inside the mapping (clamped to `len`,
        // `start` rounded down to a page boundary of the page-aligned
        // mapping); the advice changes no content.
        let _ = unsafe {
            libc::madvise(
                self.ptr.as_ptr().add(start).cast(),
                end - start,
                libc::MADV_WILLNEED,
            )
        };
    }
}

impl Drop for ReadMapping {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping made in `new`; no slice of it outlives
        // `self` (`bytes` borrows from it).
        let r = unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
        debug_assert_eq!(r, 0, "munmap of a read mapping failed");
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}
