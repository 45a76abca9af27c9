//! CPU priority of the engine's own deferrable threads.
//!
//! Work that may lag the writes it follows (linking `teks`'s new keys into
//! its sorted index, faulting in memtable memory ahead of use) runs at a
//! lower CPU priority than the threads serving requests, as RocksDB lowers
//! its compaction pool's: when the cores are all busy, the foreground keeps
//! them and the deferrable work takes the gaps, instead of preempting a
//! request loop mid-batch. Whoever depends on that work does it itself when
//! it falls behind (`memtable::teks` bounds its backlog; the arena faults
//! its own pages when no chunk is ready), so a starved background thread
//! costs latency, never correctness.

/// Nice value of a background thread (the weakest Linux share).
const BACKGROUND_NICE: i32 = 19;

/// Lowers the calling thread's CPU priority to [`BACKGROUND_NICE`]. Best
/// effort: where it fails or the platform has no per-thread nice, the
/// thread keeps its priority.
pub(crate) fn lower_current() {
    #[cfg(target_os = "linux")]
    // SAFETY: `gettid` and `setpriority` take no pointers; on Linux the
    // nice value is per thread, so this changes only the calling thread.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, BACKGROUND_NICE);
    }
}
