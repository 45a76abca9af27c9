//! Tower heights for the skiplist-shaped memtables (`skiplist`,
//! `jellyfish`, `esl`): branching factor 4, at most [`MAX_HEIGHT`] levels.

use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

/// Tallest tower. With branching 4, 12 levels index 4^12 = 16 M nodes in
/// O(log n) (RocksDB's default); a memtable rotates long before that.
pub(crate) const MAX_HEIGHT: usize = 12;

/// A tower height: 1 + number of leading "1 in 4" successes, from a
/// per-thread xorshift64* generator (no shared state between writers).
pub(crate) fn random_height() -> usize {
    let mut bits = random_bits();
    let mut height = 1;
    while height < MAX_HEIGHT && bits & 3 == 0 {
        height += 1;
        bits >>= 2;
    }
    height
}

/// True with probability `1 / n` (`n` a power of two), from the same
/// per-thread generator as [`random_height`].
pub(crate) fn one_in(n: u32) -> bool {
    debug_assert!(n.is_power_of_two());
    random_bits() & u64::from(n - 1) == 0
}

/// 32 good random bits from a per-thread xorshift64* generator.
fn random_bits() -> u64 {
    thread_local! {
        static RNG: Cell<u64> = Cell::new({
            // RandomState is randomly keyed per thread: a cheap, distinct seed.
            let mut h = RandomState::new().build_hasher();
            h.write_usize(0);
            h.finish() | 1
        });
    }
    RNG.with(|rng| {
        let mut x = rng.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        rng.set(x);
        // The high bits of xorshift64* are the good ones.
        x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32
    })
}
