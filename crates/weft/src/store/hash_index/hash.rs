//! Key hashing for the hash index.
//!
//! One pass over the key computes a 64-bit hash `h` (the final construction
//! of wyhash v4: 16-byte blocks folded through a 64×64→128-bit multiply, the
//! last 16 bytes and the length mixed in). Two *lanes* are derived from `h`:
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

const P0: u64 = 0xa076_1d64_78bd_642f;
const P1: u64 = 0xe703_7ed1_a0b4_28db;
const P2: u64 = 0x8ebc_6af0_9c88_c6e3;
const P3: u64 = 0x5899_65cc_7537_4cc3;

/// The 128-bit product folded to 64 bits.
#[inline]
fn mum(a: u64, b: u64) -> u64 {
    let r = u128::from(a) * u128::from(b);
    (r as u64) ^ ((r >> 64) as u64)
}

#[inline]
fn r8(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

#[inline]
fn r4(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u64::from(u32::from_le_bytes(w))
}

/// MurmurHash3's 64-bit finaliser: a bijection in which every input bit
/// affects every output bit with probability about ½.
#[inline]
pub(super) fn fmix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// The 64-bit key hash (lane A).
#[inline]
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    let len = key.len();
    let mut seed = mum(P0 ^ 0x5765_6674_4849_6478, P1); // "WeftHIdx"
    let (a, b) = if len <= 16 {
        if len >= 4 {
            let q = (len >> 3) << 2;
            (
                (r4(key, 0) << 32) | r4(key, q),
                (r4(key, len - 4) << 32) | r4(key, len - 4 - q),
            )
        } else if len > 0 {
            let a = (u64::from(key[0]) << 16)
                | (u64::from(key[len >> 1]) << 8)
                | u64::from(key[len - 1]);
            (a, 0)
        } else {
            (0, 0)
        }
    } else {
        let mut p = key;
        while p.len() > 16 {
            seed = mum(r8(p, 0) ^ P1, r8(p, 8) ^ seed);
            p = &p[16..];
        }
        // The last 16 bytes of the key (they may overlap the last block).
        (r8(key, len - 16), r8(key, len - 8))
    };
    let r = u128::from(a ^ P1) * u128::from(b ^ seed);
    mum((r as u64) ^ P0 ^ len as u64, ((r >> 64) as u64) ^ P1)
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
