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

/// Nice value of a background thread: a tenth of a normal thread's share
/// of a contended core (weight 110 against 1024).
///
/// Not the weakest (19, 1.5 %): a flush must link whatever `teks` keys its
/// worker has taken before it can iterate the memtable, so a worker
/// starved mid-batch held the flush, and the flush held the writers (an
/// inversion). Chosen by measurement (`weft bench
/// --benchmarks=fillrandom,overwrite --num=5000000 --value_size=256
/// --threads=1 --memtable=teks`, alternating runs): at nice 10 the writers
/// stalled for less of each run than at 19, and both fillrandom and
/// overwrite ran faster; `weft serve` SET `-P 16` was the same within the
/// noise (`bench/journal/2026-11-26-01-write-path-per-put.md`, "Background
/// threads at nice 10, not 19").
const BACKGROUND_NICE: i32 = 10;

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
