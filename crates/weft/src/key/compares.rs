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
//!
//! The comparisons themselves are inline word compares
//! (`key::compare_user_keys`): the slice `Ord` calls libc's
//! `memcmp`, and for the short keys memtables hold (16 bytes in db_bench
//! and redis-benchmark) the call costs more than the compare. In
//! `weft serve`'s SET profile `memcmp` was a visible share of the server's
//! samples, most of it in the `teks` linker.

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
    order(a, b)
}

/// `a < b`, counted.
#[inline(always)]
pub(crate) fn lt(a: &[u8], b: &[u8]) -> bool {
    count();
    order(a, b) == Ordering::Less
}

/// `a == b`, counted.
#[inline(always)]
pub(crate) fn eq(a: &[u8], b: &[u8]) -> bool {
    count();
    crate::key::same_user_key(a, b)
}

/// The inline word compare and the key prefix live with the key format
/// (`crate::key`), which every comparison of user keys in the engine uses.
pub(crate) use crate::key::{compare_user_keys as order, key_prefix};

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
            // `teks` compares keys when it links them into its sorted
            // index, in the background: wait until every key is linked
            // (without this the count raced the linker and read 0 on a
            // busy machine).
            m.prepare_scan(u64::MAX >> 8);
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

#[cfg(test)]
mod order_tests {
    use super::{cmp, eq, lt, order};
    use rand::{Rng, SeedableRng};

    /// The word compare orders exactly as the slice `Ord` does: keys of
    /// 0 to 48 bytes (short tails, whole words, past the inline words)
    /// over a two-letter alphabet, so long shared prefixes, prefixes of
    /// each other and 0x00/0xff bytes (sign and padding mistakes) are common.
    #[test]
    fn order_matches_slice_ord() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let key = |rng: &mut rand::rngs::StdRng| -> Vec<u8> {
            let len = rng.gen_range(0..=48);
            (0..len)
                .map(|_| if rng.gen_bool(0.5) { 0x00 } else { 0xff })
                .collect()
        };
        for _ in 0..200_000 {
            let a = key(&mut rng);
            let b = if rng.gen_bool(0.3) {
                let mut b = a.clone();
                match rng.gen_range(0..3) {
                    0 => b.truncate(rng.gen_range(0..=b.len())),
                    1 => b.push(rng.gen()),
                    _ => {
                        if let Some(i) = (!b.is_empty()).then(|| rng.gen_range(0..b.len())) {
                            b[i] ^= 1 << rng.gen_range(0..8);
                        }
                    }
                }
                b
            } else {
                key(&mut rng)
            };
            let want = a.cmp(&b);
            assert_eq!(order(&a, &b), want, "{a:02x?} vs {b:02x?}");
            assert_eq!(cmp(&a, &b), want);
            assert_eq!(lt(&a, &b), want.is_lt());
            assert_eq!(eq(&a, &b), want.is_eq());
        }
    }
}
