//! [`MappedAppender`]: appends to a log file through a shared memory
//! mapping of blocks reserved ahead with `fallocate`.
//!
//! # Why
//!
//! A WAL record is handed to the kernel before the write is acknowledged,
//! so that it survives a process crash. With one `writev` per record, a
//! lone writer spent a large share of its time in ext4's buffered-write
//! path (`perf`, `fillrandom`): inode lock, page-cache lookup,
//! delayed-allocation bookkeeping and a timestamp update, per call. A store
//! into a `MAP_SHARED` mapping lands in the same page cache — it survives a
//! process crash just as well, and `fdatasync` on the file writes it back —
//! but the kernel is entered once per 4 KiB page (the first write fault)
//! instead of once per record.
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
//! the log is sealed, e.g. a WAL rotated out before its final sync, or
//! when the writer is dropped) cuts it back to the records. After a crash
//! the zeros stay; the reader treats a record boundary followed only by
//! zero bytes as the end of the log (`LogReader`), and an all-zero header
//! is never a valid record.
//!
//! Stores are made in log order, each record's header before its payload
//! (`LogWriter` hands records over one at a time), so a process killed in
//! the middle of a store leaves a record with a bad checksum followed only
//! by zeros: a torn tail. A zeroed header with data after it is damage.
//!
//! The mapping covers one [`WINDOW`]-aligned window of the file at a time;
//! moving to the next window unmaps the previous one, which loses nothing
//! (the stores are in the page cache, not in the mapping). Once the stores
//! pass the middle of a window, the next one is reserved, mapped, and
//! faulted in by a background thread (see [`prefault`]), so that the
//! writer's stores into it take no page faults.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::util::fs::WritableFile;

/// Bytes of the file mapped at once (a multiple of any page size).
pub const WINDOW: u64 = 4 << 20;

/// Bytes reserved with `fallocate` at a time.
pub const RESERVE: u64 = WINDOW;

/// One mapped window of the file: bytes `[base, base + WINDOW)`.
struct Window {
    base: u64,
    map: Arc<WindowMap>,
}

/// A shared, writable mapping of [`WINDOW`] bytes of the log file, unmapped
/// when its last holder drops it: the appender, or the prefault thread
/// while it faults the window in (see [`prefault`]).
struct WindowMap {
    ptr: NonNull<u8>,
}

// SAFETY: the mapping is owned by this value and unmapped only in its
// `Drop`; the appender stores through it from one thread at a time, and
// the prefault thread only passes its address to `madvise`, which reads
// no byte of it. Nothing about a mapping is tied to a thread.
unsafe impl Send for WindowMap {}
// SAFETY: as for `Send`: a shared `&WindowMap` hands out only the address.
unsafe impl Sync for WindowMap {}

impl WindowMap {
    /// Maps file bytes `[base, base + WINDOW)`, shared and writable.
    fn new(file: &File, base: u64) -> io::Result<WindowMap> {
        let offset =
            libc::off_t::try_from(base).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
        // SAFETY: a new shared mapping of an open file; the kernel picks the
        // address, so no existing memory is affected. Offset is a multiple of
        // WINDOW, hence of the page size. Bytes of the window past the end of
        // the file are never stored to (`write_at` stays below `reserved`).
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
        Ok(WindowMap { ptr })
    }
}

impl Drop for WindowMap {
    fn drop(&mut self) {
        // SAFETY: `ptr` is a live mapping of WINDOW bytes made by `new` and
        // owned only by this value, dropped once; every store through it
        // was made by an appender that held this value (an `Arc` of it).
        let r = unsafe { libc::munmap(self.ptr.as_ptr().cast(), WINDOW as usize) };
        debug_assert_eq!(r, 0, "munmap of a WAL window failed");
    }
}

/// Appends bytes to a file through shared mappings of reserved blocks.
pub struct MappedAppender {
    /// File length: every byte below it has a reserved block.
    reserved: u64,
    /// The window stores go to now.
    window: Option<Window>,
    /// The window after it, mapped and handed to the prefault thread once
    /// stores pass the middle of `window` (see [`prefault`]).
    ahead: Option<Window>,
}

impl MappedAppender {
    /// Starts appending to `file`, which must be empty, opened for reading
    /// and writing. `None` when the file system cannot reserve blocks (no
    /// `fallocate`): the caller then writes with plain `write` calls. Any
    /// other failure to reserve the first step (a full disk) is left to the
    /// first write, which also tries to reserve just what it needs.
    pub fn new(file: &dyn WritableFile) -> Option<MappedAppender> {
        let mut appender = MappedAppender {
            reserved: 0,
            window: None,
            ahead: None,
        };
        match appender.reserve(file, RESERVE) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOSYS)) => None,
            _ => Some(appender),
        }
    }

    /// Stores `parts`, one after the other, at file offset `at` (the log's
    /// current end). Room for all of them is reserved before any is stored,
    /// so a full disk stores nothing; otherwise nothing can fail halfway.
    pub fn write_at(
        &mut self,
        file: &dyn WritableFile,
        mut at: u64,
        parts: &[&[u8]],
    ) -> io::Result<()> {
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
        file.note_mapped_stores(at);
        if let Some(w) = &self.window {
            if self.ahead.is_none() && at >= w.base + WINDOW / 2 {
                let next = w.base + WINDOW;
                self.map_ahead(file, next);
            }
        }
        Ok(())
    }

    /// Unmaps the window and cuts the file back to `len` (the end of the
    /// last record). Called once the caller has synced what it needs.
    pub fn finish(&mut self, file: &dyn WritableFile, len: u64) -> io::Result<()> {
        self.unmap();
        if len < self.reserved {
            file.set_len(len)?;
            self.reserved = len;
        }
        Ok(())
    }

    /// Grows the file by `len` reserved bytes.
    fn reserve(&mut self, file: &dyn WritableFile, len: u64) -> io::Result<()> {
        file.allocate(self.reserved, len)?;
        self.reserved += len;
        Ok(())
    }

    /// The mapping of the window starting at `base`, mapping it if needed.
    fn map(&mut self, file: &dyn WritableFile, base: u64) -> io::Result<NonNull<u8>> {
        if let Some(w) = &self.window {
            if w.base == base {
                return Ok(w.map.ptr);
            }
        }
        let w = match self.ahead.take() {
            Some(ahead) if ahead.base == base => ahead,
            _ => Window {
                base,
                map: Arc::new(WindowMap::new(file.file(), base)?),
            },
        };
        let ptr = w.map.ptr;
        // The window left behind is unmapped here (or by the prefault
        // thread, if it still holds it).
        self.window = Some(w);
        Ok(ptr)
    }

    /// Maps the window at `base` ahead of the stores and asks the prefault
    /// thread to fault it in. Best effort: where its blocks cannot be
    /// reserved now (a full disk) or the kernel cannot prefault, the
    /// stores fault the pages themselves, as without it.
    fn map_ahead(&mut self, file: &dyn WritableFile, base: u64) {
        if !prefault::available() {
            return;
        }
        // Only reserved bytes may be faulted in (a page past the end of the
        // file cannot be). Reserving the window now takes its blocks a
        // little early; a failure is left to the store that needs them.
        let end = base + WINDOW;
        if end > self.reserved && self.reserve(file, end - self.reserved).is_err() {
            return;
        }
        let Ok(map) = WindowMap::new(file.file(), base) else {
            return;
        };
        let map = Arc::new(map);
        prefault::request(Arc::clone(&map));
        self.ahead = Some(Window { base, map });
    }

    fn unmap(&mut self) {
        self.window = None;
        self.ahead = None;
    }
}

/// The `weft-wal-prefault` thread: faults in the log windows mapped ahead
/// of the stores.
///
/// # Why
///
/// The first store into each 4 KiB page of the mapping faults: the kernel
/// finds or creates the page-cache page (zero-filled: the blocks are
/// reserved but unwritten), maps it, and marks it dirty. Measured with
/// `perf`, `weft bench --benchmarks=fillrandom --num=5000000
/// --value_size=256 --threads=1`: a large share of the lone writer's time
/// went to those faults, on the one thread every acknowledged write waits
/// for. `madvise(MADV_POPULATE_WRITE)` (Linux 5.14) takes the same faults,
/// all of a window in one call, on a background thread while the writer is
/// still storing into the window before it; it changes no byte, so it may
/// run beside the stores. Where the kernel lacks it (`EINVAL`), nothing is
/// prefaulted from then on.
///
/// Alternating runs, memtable-only (`--benchmarks=fillrandom,overwrite
/// --num=1000000 --value_size=256 --write_buffer_size=4294967296
/// --threads=1`): fillrandom and overwrite both faster with it.
/// `MADV_POPULATE_READ` instead (pages read in, left for the store to make
/// writable) gained nothing: the write-protect fault it leaves costs about
/// what the whole fault did. When no core is idle (a 5M-key fill with
/// flushes and merges) the faults are only moved, not saved, and the runs
/// were the same within the noise. The runs are in
/// `bench/journal/2026-11-26-04-wal-window-ahead.md`.
///
/// What it costs: the window ahead is dirty zeros until the stores reach
/// it, so an `fdatasync` in between writes those pages twice (a run of
/// synced puts wrote somewhat more to disk), and the log file holds one
/// reserved window more while it is open.
///
/// The thread runs at background priority ([`crate::util::thread_priority`]): if
/// it lags, the writer faults the pages it reaches first itself, which is
/// only what it did without it.
mod prefault {
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, OnceLock};

    use parking_lot::{Condvar, Mutex};

    use super::{WindowMap, WINDOW};

    /// Set once `madvise` refused `MADV_POPULATE_WRITE`.
    static UNSUPPORTED: AtomicBool = AtomicBool::new(false);

    struct Queue {
        jobs: Mutex<VecDeque<Arc<WindowMap>>>,
        wake: Condvar,
    }

    fn queue() -> Option<&'static Queue> {
        static QUEUE: OnceLock<Option<&'static Queue>> = OnceLock::new();
        *QUEUE.get_or_init(|| {
            let q: &'static Queue = Box::leak(Box::new(Queue {
                jobs: Mutex::new(VecDeque::new()),
                wake: Condvar::new(),
            }));
            std::thread::Builder::new()
                .name("weft-wal-prefault".into())
                .spawn(move || run(q))
                .ok()
                .map(|_| q)
        })
    }

    /// Whether windows mapped ahead get prefaulted.
    pub(super) fn available() -> bool {
        !UNSUPPORTED.load(Ordering::Relaxed) && queue().is_some()
    }

    /// Queues `map` to be faulted in.
    pub(super) fn request(map: Arc<WindowMap>) {
        if let Some(q) = queue() {
            q.jobs.lock().push_back(map);
            q.wake.notify_one();
        }
    }

    fn run(q: &Queue) {
        crate::util::thread_priority::lower_current();
        loop {
            let map = {
                let mut jobs = q.jobs.lock();
                loop {
                    if let Some(m) = jobs.pop_front() {
                        break m;
                    }
                    q.wake.wait(&mut jobs);
                }
            };
            // A window its appender has already let go of (the log was
            // closed) is not worth faulting in.
            if Arc::strong_count(&map) > 1 {
                populate(&map);
            }
        }
    }

    fn populate(map: &WindowMap) {
        // SAFETY: `map` is a live mapping of WINDOW bytes, held (so not
        // unmapped) for the whole call. MADV_POPULATE_WRITE only takes the
        // write faults a store would take; it reads and writes no byte, so
        // it is sound beside the appender's stores into the same pages.
        // Pages past the end of the file (the log cut back by `finish`
        // meanwhile) make it fail with EFAULT instead of raising SIGBUS.
        let r = unsafe {
            libc::madvise(
                map.ptr.as_ptr().cast(),
                WINDOW as usize,
                libc::MADV_POPULATE_WRITE,
            )
        };
        if r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
            UNSUPPORTED.store(true, Ordering::Relaxed);
        }
    }
}

impl Drop for MappedAppender {
    fn drop(&mut self) {
        self.unmap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Pages of a window.
    fn window_pages() -> usize {
        // SAFETY: sysconf reads a constant of the system.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        WINDOW as usize / usize::try_from(page).unwrap()
    }

    /// Pages of the window mapping `map` present in the page cache.
    fn resident_pages(map: &WindowMap) -> usize {
        let pages = window_pages();
        let mut vec = vec![0u8; pages];
        // SAFETY: `map` is a live, page-aligned mapping of WINDOW bytes;
        // `vec` has one byte per page.
        let rc =
            unsafe { libc::mincore(map.ptr.as_ptr().cast(), WINDOW as usize, vec.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore failed");
        vec.iter().filter(|b| *b & 1 == 1).count()
    }

    /// Stores past the middle of a window map the next one and get it
    /// faulted in by the prefault thread; stores into the prefaulted pages
    /// (and past them) read back exactly, and the file is cut back to them.
    #[test]
    fn the_window_ahead_is_faulted_in_and_holds_what_is_stored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.log");
        let file = crate::util::fs::real().create(&path, true).unwrap();
        let file = &*file;
        let mut m = MappedAppender::new(file).expect("this file system cannot reserve blocks");
        let mut expected = Vec::new();
        let store = |m: &mut MappedAppender, expected: &mut Vec<u8>, n: usize| {
            let part: Vec<u8> = (0..n)
                .map(|i| ((expected.len() + i) % 251) as u8 + 1)
                .collect();
            m.write_at(file, expected.len() as u64, &[&part[..7], &part[7..]])
                .unwrap();
            expected.extend_from_slice(&part);
        };
        store(&mut m, &mut expected, WINDOW as usize / 2 - 100);
        assert!(m.ahead.is_none(), "mapped ahead before the middle");
        store(&mut m, &mut expected, 200);
        if !prefault::available() {
            eprintln!("MADV_POPULATE_WRITE unavailable: nothing is prefaulted");
            return;
        }
        let ahead = m.ahead.as_ref().expect("the next window is mapped ahead");
        assert_eq!(ahead.base, WINDOW);
        assert!(m.reserved >= 2 * WINDOW, "the window ahead is reserved");
        let pages = window_pages();
        let deadline = Instant::now() + Duration::from_secs(10);
        while resident_pages(&ahead.map) < pages {
            assert!(
                Instant::now() < deadline,
                "the window ahead was never faulted in"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // Into the prefaulted window and on through two more.
        while expected.len() < 3 * WINDOW as usize + 12_345 {
            store(&mut m, &mut expected, 65_000);
        }
        let len = expected.len() as u64;
        m.finish(file, len).unwrap();
        drop(m);
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }
}
