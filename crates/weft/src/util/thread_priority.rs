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
/// inversion). Measured, `weft bench --benchmarks=fillrandom,overwrite
/// --num=5000000 --value_size=256 --threads=1 --memtable=teks`, three
/// alternating runs: at nice 19 the writers stalled 0.8–2.0 s per run,
/// at 10 0.5–0.9 s, and fillrandom went 708 k → 757 k, overwrite 600 k →
/// 644 k ops/s (medians); `weft serve` SET `-P 16` (50 clients, six
/// alternating runs) 476 k and 462 k/s, the same within the noise.
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
