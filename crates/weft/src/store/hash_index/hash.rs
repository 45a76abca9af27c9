//! Key hashing for the hash index.
//!
//! One pass over the key computes a 64-bit hash `h`
//! ([`crate::util::hash::wyhash64`] under this module's seed). Two *lanes* are derived from `h`:
//!
//! * lane A = `h`, reduced to the home bucket with a multiply-shift
//!   (`(h · N) >> 64`), which works for any bucket count `N`;
//! * lane B = `fmix64(h ^ K)` (the MurmurHash3 finaliser, a bijection with full
//!   avalanche), whose top 16 bits are the key tag. Keys that share a home
//!   bucket share only the top bits of lane A; their tags are independent.
//!
//! The alternative candidates are offsets derived from the *tag*
//! ([`candidate_offset`]), so that an entry's home bucket can be recomputed
//! from where it sits, its tag and its candidate number (see the module docs
//! of [`super`]).
//!
//! Everything here is part of the checkpoint format: reads are explicitly
//! little-endian, and any change to a constant or to the construction must
//! bump `checkpoint::FORMAT_VERSION`.

use crate::util::hash::{fmix64, wyhash64};

const P2: u64 = 0x8ebc_6af0_9c88_c6e3;
const P3: u64 = 0x5899_65cc_7537_4cc3;

/// The seed of the on-disk key hash ("WeftHIdx").
const KEY_HASH_SEED: u64 = 0x5765_6674_4849_6478;

/// The 64-bit key hash (lane A).
#[inline]
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    wyhash64(key, KEY_HASH_SEED)
}

/// The key tag (top 16 bits of lane B) for a key hash.
#[inline]
pub(super) fn tag_of(h: u64) -> u16 {
    (fmix64(h ^ P2) >> 48) as u16
}

/// The home bucket (candidate 0) in `0..buckets` for a key hash.
#[inline]
pub(super) fn home_of(h: u64, buckets: u32) -> u32 {
    ((u128::from(h) * u128::from(buckets)) >> 64) as u32
}

/// Offset of candidate `i` (0..4) from the home bucket, for an entry with
/// tag `tag`, in a table of `buckets ≥ 2` buckets: 0 for candidate 0, else in
/// `1..buckets`, so candidates 1–3 never coincide with the home bucket.
#[inline]
pub(super) fn candidate_offset(tag: u16, i: u32, buckets: u32) -> u32 {
    if i == 0 {
        return 0;
    }
    let x = fmix64((u64::from(tag) << 2 | u64::from(i)) ^ P3);
    1 + (((x >> 32) * u64::from(buckets - 1)) >> 32) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key hash, the tag, the home bucket and the candidate offsets are
    /// part of the checkpoint format: a change must fail here (and bump
    /// `checkpoint::FORMAT_VERSION`).
    #[test]
    fn pinned_vectors() {
        let vectors: [(&[u8], u64, u16, u32, u32); 5] = [
            (b"", 0xbee0_c80b_ec3f_f1bc, 0xe276, 745, 459),
            (b"a", 0x9869_a97e_8621_31d2, 0xd197, 595, 408),
            (b"abc", 0x47f2_7c09_0a44_c5c7, 0x1206, 281, 403),
            (b"user00000042", 0xdd88_ca50_f67a_09d4, 0x7421, 865, 503),
            (
                b"0123456789abcdef0123456789abcdef0",
                0x95e1_2c57_0425_7699,
                0x7bd6,
                585,
                256,
            ),
        ];
        for (key, h, tag, home, offset) in vectors {
            assert_eq!(key_hash(key), h, "key_hash({key:?})");
            assert_eq!(tag_of(h), tag, "tag of {key:?}");
            assert_eq!(home_of(h, 1000), home, "home of {key:?}");
            assert_eq!(candidate_offset(tag, 2, 1000), offset, "offset of {key:?}");
        }
    }
}
