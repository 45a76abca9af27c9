//! Cache-line prefetch: a hint that overlaps a memory miss with other work.

/// Hints the CPU to load the cache line holding `p` into every level of
/// its caches, so a read of it a little later does not wait for memory.
#[inline]
pub(crate) fn prefetch_line<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it never faults and reads nothing into
    // the program, whatever the address, so any pointer is sound here.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
