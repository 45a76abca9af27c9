//! The concurrency primitives of the lock-free memtable protocols: std's
//! and `parking_lot`'s in every build, [loom]'s when the crate is compiled
//! with `--cfg loom`.
//!
//! The modules whose protocols `memtable::loom_models` checks (key nodes and
//! version lists, the skiplist levels, `teks`'s link queue, the cuckoo
//! `KeyMap`) take their atomics, mutex, spin hint and yield from here, so
//! loom explores every interleaving (and every weak-memory outcome it
//! models) of the very code the engine runs. Everything else keeps std's.
//!
//! Run the models with `scripts/test-loom` (it sets the cfg and a separate
//! target directory).
//!
//! [loom]: https://docs.rs/loom

#[cfg(not(loom))]
pub(crate) use std::sync::atomic;

#[cfg(loom)]
pub(crate) use loom::sync::atomic;

/// Marks the middle of a store-then-load on SeqCst atomics whose
/// correctness rests on SeqCst's single total order (each of two threads
/// stores its flag, then loads the other's: at least one sees the other).
///
/// Nothing in a normal build: C11 (and x86) already give SeqCst accesses
/// that order. Loom treats SeqCst accesses as AcqRel (its README,
/// "Unsupported features") and would report the other outcome as a bug;
/// it does model `fence(SeqCst)`, so under loom this is one.
#[inline]
pub(crate) fn seqcst_store_load() {
    #[cfg(loom)]
    atomic::fence(atomic::Ordering::SeqCst);
}

/// A busy-wait hint (loom: a scheduling point, so a spin loop lets the
/// thread it waits for run).
#[inline]
pub(crate) fn spin_loop() {
    #[cfg(not(loom))]
    std::hint::spin_loop();
    #[cfg(loom)]
    loom::hint::spin_loop();
}

/// Waits a little for another thread (a claim in flight, a growth, a
/// drainer), round `round` of the wait: spins first, then gives the core
/// away, so a waiter does not burn the core the other thread may need.
#[inline]
pub(crate) fn backoff(round: &mut u32) {
    if *round < 64 {
        spin_loop();
    } else {
        #[cfg(not(loom))]
        std::thread::yield_now();
        #[cfg(loom)]
        loom::thread::yield_now();
    }
    *round = round.saturating_add(1);
}

#[cfg(not(loom))]
pub(crate) use parking_lot::Mutex;

#[cfg(loom)]
pub(crate) use self::loom_mutex::Mutex;

/// `parking_lot`'s `Mutex` API (no poisoning) over loom's mutex.
#[cfg(loom)]
mod loom_mutex {
    use loom::sync::MutexGuard;

    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Mutex(loom::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock().unwrap_or_else(|e| e.into_inner())
        }

        pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            self.0.try_lock().ok()
        }
    }
}
