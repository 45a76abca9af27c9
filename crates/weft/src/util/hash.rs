//! Hash functions. Two of them are part of file formats and are pinned by
//! test vectors where they are used: the hash index's key hash
//! (`store::hash_index::hash`, checkpoints) and the Bloom filter's
//! (`table::filter`). The memtable's hash is in memory only and free to
//! change (`memtable::hash`).

/// MurmurHash3's 64-bit finaliser: a bijection in which every input bit
/// affects every output bit with probability about ½.
#[inline]
pub(crate) fn fmix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

const P0: u64 = 0xa076_1d64_78bd_642f;
const P1: u64 = 0xe703_7ed1_a0b4_28db;

/// The 128-bit product folded to 64 bits.
#[inline]
pub(crate) fn mum(a: u64, b: u64) -> u64 {
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

/// A 64-bit hash of `key` under `seed`: the final construction of wyhash
/// v4 (16-byte blocks folded through a 64×64→128-bit multiply, the last 16
/// bytes and the length mixed in). Reads are explicitly little-endian, so
/// the value is the same on every machine.
#[inline]
pub(crate) fn wyhash64(key: &[u8], seed: u64) -> u64 {
    let len = key.len();
    let mut seed = mum(P0 ^ seed, P1);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fmix64_is_murmur3s_finaliser() {
        assert_eq!(fmix64(0), 0);
        assert_eq!(fmix64(1), 0xb456_bcfc_34c2_cb2c);
    }

    #[test]
    fn wyhash_reads_every_length_class() {
        let key: Vec<u8> = (0..40u8).collect();
        let mut seen = std::collections::HashSet::new();
        for n in 0..=40 {
            assert!(seen.insert(wyhash64(&key[..n], 7)), "length {n} collides");
        }
        assert_ne!(wyhash64(b"abc", 1), wyhash64(b"abc", 2));
    }
}
