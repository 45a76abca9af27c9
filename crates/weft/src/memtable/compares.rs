//! Counting the memtables' key comparisons, for the memtable benchmark's
//! comparisons-per-operation report (JellyFish Fig. 7): with the
//! `key-compare-count` feature every full user-key comparison a memtable
//! makes (searches, inserts, cursors, the background linkers and sorts,
//! and the generic `InternalIterator::next_key` stepping over a key's
//! versions) adds one to a process-wide counter; without it the helpers
//! are plain comparisons and [`take`] is always 0.
//!
//! Only comparisons of whole keys count: ESL's and `teks`'s compares of
//! 8-byte key prefixes, and the cuckoo hash's 16-bit tags, are the cheap
//! filters those designs put in front of them.
//!
//! ```text
//! cargo bench -p weft --bench memtable --features weft/key-compare-count
//! ```

use std::cmp::Ordering;

/// Whether this build counts comparisons.
pub const COUNTING: bool = cfg!(feature = "key-compare-count");

#[cfg(feature = "key-compare-count")]
static COMPARES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[inline(always)]
fn count() {
    #[cfg(feature = "key-compare-count")]
    COMPARES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// Key comparisons since the last call (all threads), and restarts the
/// count; 0 when the build does not count.
pub fn take() -> u64 {
    #[cfg(feature = "key-compare-count")]
    return COMPARES.swap(0, std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(feature = "key-compare-count"))]
    0
}

/// `a.cmp(b)`, counted.
#[inline(always)]
pub(crate) fn cmp(a: &[u8], b: &[u8]) -> Ordering {
    count();
    a.cmp(b)
}

/// `a < b`, counted.
#[inline(always)]
pub(crate) fn lt(a: &[u8], b: &[u8]) -> bool {
    count();
    a < b
}

/// `a == b`, counted.
#[inline(always)]
pub(crate) fn eq(a: &[u8], b: &[u8]) -> bool {
    count();
    a == b
}

#[cfg(all(test, feature = "key-compare-count"))]
mod tests {
    use crate::key::ValueKind;
    use crate::memtable::{new_memtable, MemtableKind};

    /// The counter sees the searches: a get in a memtable of 4 096 keys
    /// compares a handful of keys in a skiplist (about log n), one in a
    /// hash kind, and inserts count too. (Other tests of this binary may
    /// count at the same time, so only bounds that hold with them are
    /// asserted: run alone for exact figures.)
    #[test]
    fn searches_are_counted() {
        for kind in [
            MemtableKind::SkipList,
            MemtableKind::JellyFish,
            MemtableKind::Teks,
        ] {
            let m = new_memtable(kind, 64 << 20);
            super::take();
            for i in 0..4096u32 {
                m.insert(&i.to_be_bytes(), u64::from(i) + 1, ValueKind::Put, b"v");
            }
            let inserts = super::take();
            assert!(inserts > 0, "{kind:?}: 4096 inserts counted no comparison");
            for i in 0..4096u32 {
                assert!(m.get(&i.to_be_bytes(), u64::MAX >> 8).is_some());
            }
            let gets = super::take();
            assert!(gets >= 4096, "{kind:?}: 4096 hits made {gets} comparisons");
        }
    }
}
