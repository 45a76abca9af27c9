//! [`MappedAppender`]: appends to a log file through a shared memory
//! mapping of blocks reserved ahead with `fallocate`.
//!
//! # Why
//!
//! A WAL record is handed to the kernel before the write is acknowledged,
//! so that it survives a process crash. With one `writev` per record, a
//! lone writer spent 1.4 µs per 300-byte record in ext4's buffered-write
//! path (`perf`, `fillrandom` 3M × 256 B: 27 % of all CPU samples): inode
//! lock, page-cache lookup, delayed-allocation bookkeeping and a timestamp
//! update, per call. A store into a `MAP_SHARED` mapping lands in the same
//! page cache — it survives a process crash just as well, and `fdatasync`
//! on the file writes it back — but the kernel is entered once per 4 KiB
//! page (the first write fault) instead of once per record.
//!
//! # Why blocks are reserved first
//!
//! A write fault on a hole would have to allocate a block, and when the
//! disk is full the only way to report that is `SIGBUS`, which kills the
//! process. So the file is grown with `fallocate` (real blocks, reading as
//! zeros) in [`RESERVE`] steps before any byte of a step is stored: on ext4
//! and XFS a full disk fails that call with `ENOSPC`, a clean error for the
//! write that needed the room (`RLIMIT_FSIZE` behaves as for `write`:
//! `SIGXFSZ`, or `EFBIG` where it is ignored). When a whole step does not
//! fit, exactly the bytes the record needs are tried before giving up.
//!
//! What a mapping cannot turn into an error: a copy-on-write file system
//! (btrfs) that must allocate at the first store into a page even after
//! `fallocate`, an I/O error while faulting back in a partly written page
//! the kernel evicted, or a file system shut down under the database. Each
//! raises `SIGBUS` where `write` would have returned an error. Where
//! `fallocate` is not available at all, the WAL is written with `write`.
//!
//! # What the file looks like
//!
//! While the log is open, the file is longer than its records: the rest of
//! the last reserved step is zeros. [`MappedAppender::finish`] (called when
//! the writer is dropped, e.g. at memtable rotation after the final sync)
//! cuts it back to the records. After a crash the zeros stay; the reader
//! treats a record boundary followed only by zero bytes as the end of the
//! log (`LogReader`), and an all-zero header is never a valid record.
//!
//! Stores are made in log order, each record's header before its payload
//! (`LogWriter` hands records over one at a time), so a process killed in
//! the middle of a store leaves a record with a bad checksum followed only
//! by zeros: a torn tail. A zeroed header with data after it is damage.
//!
//! The mapping covers one [`WINDOW`]-aligned window of the file at a time;
//! moving to the next window unmaps the previous one, which loses nothing
//! (the stores are in the page cache, not in the mapping).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;

/// Bytes of the file mapped at once (a multiple of any page size).
pub const WINDOW: u64 = 4 << 20;

/// Bytes reserved with `fallocate` at a time.
pub const RESERVE: u64 = WINDOW;

/// One mapped window of the file: bytes `[base, base + WINDOW)`.
struct Window {
    base: u64,
    ptr: NonNull<u8>,
}

/// Appends bytes to a file through shared mappings of reserved blocks.
pub struct MappedAppender {
    /// File length: every byte below it has a reserved block.
    reserved: u64,
    window: Option<Window>,
}

// SAFETY: the window's pointer refers to a shared mapping owned exclusively
// by this value (unmapped only by it); nothing about it is tied to a thread.
unsafe impl Send for MappedAppender {}

impl MappedAppender {
    /// Starts appending to `file`, which must be empty, opened for reading
    /// and writing. `None` when the file system cannot reserve blocks (no
    /// `fallocate`): the caller then writes with plain `write` calls. Any
    /// other failure to reserve the first step (a full disk) is left to the
    /// first write, which also tries to reserve just what it needs.
    pub fn new(file: &File) -> Option<MappedAppender> {
        let mut appender = MappedAppender {
            reserved: 0,
            window: None,
        };
        match appender.reserve(file, RESERVE) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOSYS)) => None,
            _ => Some(appender),
        }
    }

    /// Stores `parts`, one after the other, at file offset `at` (the log's
    /// current end). Room for all of them is reserved before any is stored,
    /// so a full disk stores nothing; otherwise nothing can fail halfway.
    pub fn write_at(&mut self, file: &File, mut at: u64, parts: &[&[u8]]) -> io::Result<()> {
        let total: u64 = parts.iter().map(|p| p.len() as u64).sum();
        let end = at + total;
        if end > self.reserved {
            let needed = end - self.reserved;
            let step = needed.div_ceil(RESERVE) * RESERVE;
            self.reserve(file, step)
                .or_else(|_| self.reserve(file, needed))?;
        }
        for part in parts {
            let mut bytes = *part;
            while !bytes.is_empty() {
                let base = at - at % WINDOW;
                let ptr = self.map(file, base)?;
                let offset = (at - base) as usize;
                let n = bytes.len().min(WINDOW as usize - offset);
                // SAFETY: `ptr` maps file bytes `[base, base + WINDOW)` shared
                // and writable (`map`), `offset + n <= WINDOW`, and every byte
                // written lies below `end <= self.reserved`, the file length,
                // all of it backed by reserved blocks: no store faults past
                // the end of the file. The open database owns the file (lock
                // file), so nobody truncates it under the mapping. `bytes` is
                // ordinary memory and cannot overlap the mapping, which
                // nothing else references.
                unsafe {
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.as_ptr().add(offset), n);
                }
                at += n as u64;
                bytes = &bytes[n..];
            }
        }
        Ok(())
    }

    /// Unmaps the window and cuts the file back to `len` (the end of the
    /// last record). Called once the caller has synced what it needs.
    pub fn finish(&mut self, file: &File, len: u64) -> io::Result<()> {
        self.unmap();
        if len < self.reserved {
            file.set_len(len)?;
            self.reserved = len;
        }
        Ok(())
    }

    /// Grows the file by `len` reserved bytes.
    fn reserve(&mut self, file: &File, len: u64) -> io::Result<()> {
        let from = self.reserved;
        let (Ok(offset), Ok(n)) = (libc::off_t::try_from(from), libc::off_t::try_from(len)) else {
            return Err(io::Error::from_raw_os_error(libc::EFBIG));
        };
        loop {
            // SAFETY: plain syscall on an open descriptor; mode 0 allocates
            // blocks and extends the file size, touching no user memory.
            let r = unsafe { libc::fallocate(file.as_raw_fd(), 0, offset, n) };
            if r == 0 {
                self.reserved = from + len;
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// The mapping of the window starting at `base`, mapping it if needed.
    fn map(&mut self, file: &File, base: u64) -> io::Result<NonNull<u8>> {
        if let Some(w) = &self.window {
            if w.base == base {
                return Ok(w.ptr);
            }
        }
        self.unmap();
        let offset =
            libc::off_t::try_from(base).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
        // SAFETY: a new shared mapping of an open file; the kernel picks the
        // address, so no existing memory is affected. Offset is a multiple of
        // WINDOW, hence of the page size. Bytes of the window past the end of
        // the file are never touched (`write_at` stays below `reserved`).
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                WINDOW as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                offset,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr =
            NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        self.window = Some(Window { base, ptr });
        Ok(ptr)
    }

    fn unmap(&mut self) {
        if let Some(w) = self.window.take() {
            // SAFETY: `w.ptr` is a live mapping of WINDOW bytes made by `map`
            // and owned only by this value; taking it out of `self.window`
            // means it is unmapped exactly once and never used again.
            let r = unsafe { libc::munmap(w.ptr.as_ptr().cast(), WINDOW as usize) };
            debug_assert_eq!(r, 0, "munmap of a WAL window failed");
        }
    }
}

impl Drop for MappedAppender {
    fn drop(&mut self) {
        self.unmap();
    }
}
