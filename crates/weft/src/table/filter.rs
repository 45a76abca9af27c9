//! The per-table Bloom filter over user keys.
//!
//! One filter covers the whole table (not one per block as in LevelDB):
//! Weft keeps it in memory while the table is open and consults it before
//! touching the index, so a get for an absent key costs no I/O at all. It is
//! built over *user* keys because a get asks "any version of this key?".
//!
//! ```text
//! filter block := bits (ceil(n * bits_per_key / 8) bytes, at least 8) | k: u8
//! ```
//!
//! Probe `i` (0..k) sets bit `(h1 + i * h2) mod nbits` (Kirsch–Mitzenmacher
//! double hashing) where `h1` is [`hash64`] of the key and `h2` an odd remix
//! of it. With 64-bit hashes the two are independent enough that 10 bits/key
//! gives the textbook ~0.8% false positives. The hash is part of the format.

/// A 64-bit hash of a byte string (multiply-rotate over 8-byte words, then
/// the murmur3 finalizer). Fixed forever: filters on disk depend on it.
pub fn hash64(data: &[u8]) -> u64 {
    const M1: u64 = 0x87c3_7b91_1142_53d5;
    const M2: u64 = 0x4cf5_ad43_2745_937f;
    let mut h = 0x9e37_79b9_7f4a_7c15u64 ^ (data.len() as u64).wrapping_mul(M1);
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let k = u64::from_le_bytes(w).wrapping_mul(M1).rotate_left(31);
        h = (h ^ k.wrapping_mul(M2))
            .rotate_left(27)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        let k = u64::from_le_bytes(w).wrapping_mul(M2).rotate_left(33);
        h ^= k.wrapping_mul(M1);
    }
    fmix64(h)
}

fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// The second probe stride: an odd remix of the key's hash.
fn stride(h: u64) -> u64 {
    fmix64(h ^ 0x2545_f491_4f6c_dd1d) | 1
}

/// Most probes a filter may ask for (more is a corrupted `k`).
const MAX_PROBES: u8 = 30;

/// Builds filter block contents from key hashes ([`hash64`] of each user key).
pub fn build_filter(hashes: &[u64], bits_per_key: usize) -> Vec<u8> {
    let nbits = hashes.len().saturating_mul(bits_per_key).max(64);
    let nbytes = nbits.div_ceil(8);
    let nbits = (nbytes * 8) as u64;
    // k = bits_per_key * ln 2 minimises false positives.
    let k = ((bits_per_key as f64 * 0.69).round() as u8).clamp(1, MAX_PROBES);
    let mut out = vec![0u8; nbytes + 1];
    for &h in hashes {
        let delta = stride(h);
        let mut pos = h;
        for _ in 0..k {
            let bit = pos % nbits;
            out[(bit / 8) as usize] |= 1 << (bit % 8);
            pos = pos.wrapping_add(delta);
        }
    }
    out[nbytes] = k;
    out
}

/// A Bloom filter read from a table.
pub struct BloomFilter {
    bits: Vec<u8>,
    probes: u8,
}

impl BloomFilter {
    /// Parses filter block contents; fails on an empty bit array or bad `k`.
    pub fn new(mut contents: Vec<u8>) -> Result<BloomFilter, &'static str> {
        let probes = contents.pop().ok_or("empty filter block")?;
        if contents.is_empty() {
            return Err("filter block has no bits");
        }
        if probes == 0 || probes > MAX_PROBES {
            return Err("filter block has a bad probe count");
        }
        Ok(BloomFilter {
            bits: contents,
            probes,
        })
    }

    /// False only if `user_key` is certainly absent.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.may_contain_hash(hash64(user_key))
    }

    /// [`BloomFilter::may_contain`] for a precomputed [`hash64`].
    pub fn may_contain_hash(&self, h: u64) -> bool {
        let nbits = (self.bits.len() * 8) as u64;
        let delta = stride(h);
        let mut pos = h;
        for _ in 0..self.probes {
            let bit = pos % nbits;
            let byte = self.bits.get((bit / 8) as usize).copied().unwrap_or(0);
            if byte & (1 << (bit % 8)) == 0 {
                return false;
            }
            pos = pos.wrapping_add(delta);
        }
        true
    }

    /// Bytes held in memory.
    pub fn len(&self) -> usize {
        self.bits.len() + 1
    }

    /// Never true for a filter that parsed.
    pub fn is_empty(&self) -> bool {
        self.bits.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter_of(keys: &[Vec<u8>], bits: usize) -> BloomFilter {
        let hashes: Vec<u64> = keys.iter().map(|k| hash64(k)).collect();
        BloomFilter::new(build_filter(&hashes, bits)).unwrap()
    }

    #[test]
    fn no_false_negatives_and_low_false_positives() {
        let keys: Vec<Vec<u8>> = (0..10_000u32)
            .map(|i| format!("user{i:08}").into_bytes())
            .collect();
        let f = filter_of(&keys, 10);
        for k in &keys {
            assert!(f.may_contain(k), "false negative for {k:?}");
        }
        let probes = 100_000u32;
        let fp = (0..probes)
            .filter(|i| f.may_contain(format!("other{i:08}").as_bytes()))
            .count();
        let rate = fp as f64 / probes as f64;
        assert!(rate < 0.02, "false positive rate {rate}");
        // Binary keys that differ in one bit, too.
        let fp = (0..probes)
            .filter(|i| f.may_contain(&(u64::from(*i) << 32).to_le_bytes()))
            .count();
        assert!((fp as f64 / probes as f64) < 0.02, "fp {fp}");
    }

    #[test]
    fn small_and_empty_filters() {
        let f = filter_of(&[], 10);
        assert!(!f.may_contain(b"x"));
        let f = filter_of(&[b"".to_vec(), b"a".to_vec()], 10);
        assert!(f.may_contain(b""));
        assert!(f.may_contain(b"a"));
        assert!(BloomFilter::new(vec![]).is_err());
        assert!(BloomFilter::new(vec![7]).is_err());
        assert!(BloomFilter::new(vec![0, 0, 31]).is_err());
    }

    #[test]
    fn hash_spreads_similar_keys() {
        assert_ne!(hash64(b""), hash64(b"\0"));
        assert_ne!(hash64(b"a"), hash64(b"a\0"));
        assert_ne!(hash64(b"abcdefgh"), hash64(b"abcdefgh\0"));
    }
}
