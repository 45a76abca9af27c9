//! The per-table Bloom filter over user keys.
//!
//! One filter covers the whole table (not one per block as in LevelDB):
//! Weft keeps it in memory while the table is open and consults it before
//! touching the index, so a get for an absent key costs no I/O at all. It is
//! built over *user* keys because a get asks "any version of this key?".
//!
//! ```text
//! filter block := lines (64 bytes each, at least one) | 0x80 + k  (blocked)
//!               | bits (ceil(n * bits_per_key / 8) bytes) | k       (legacy)
//! ```
//!
//! *Blocked* (what tables are built with): a key's `k` bits all lie in one
//! 64-byte line, chosen by the high half of [`hash64`]; the bit positions
//! are 9-bit fields of an odd remix of the hash (RocksDB's "fast local
//! Bloom" idea). A probe therefore costs one cache miss and no division,
//! where the legacy layout spread a key's bits over the whole array: `k`
//! misses (seven at 10 bits/key) and `k` 64-bit divisions per probe, a
//! visible share of a large store's `readrandom` in `perf`. Confining the
//! bits to a line costs a little accuracy: at 10 bits/key about 1 % false
//! positives instead of 0.8 %.
//!
//! *Legacy* (tables written before the blocked layout; read, never
//! written): probe `i` (0..k) sets bit `(h1 + i * h2) mod nbits`
//! (Kirsch–Mitzenmacher double hashing) where `h1` is [`hash64`] of the key
//! and `h2` an odd remix of it. A legacy `k` never exceeds [`MAX_PROBES`],
//! so the last byte's high bit tells the layouts apart. The hash is part
//! of both formats.

use crate::util::hash::fmix64;

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

/// The second probe stride: an odd remix of the key's hash.
fn stride(h: u64) -> u64 {
    fmix64(h ^ 0x2545_f491_4f6c_dd1d) | 1
}

/// Most probes a filter may ask for (more is a corrupted `k`).
const MAX_PROBES: u8 = 30;
/// Marks a blocked filter in the last byte, beside its `k`.
const BLOCKED: u8 = 0x80;
/// Bytes (and bits) of one line of a blocked filter: one cache line.
const LINE_BYTES: usize = 64;
const LINE_BITS: u64 = LINE_BYTES as u64 * 8;
/// Bit positions one remix of the hash yields (9 bits each, 7 in 64).
const POSITIONS_PER_WORD: u8 = 7;

/// One line of a blocked filter, aligned so a probe touches one cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; LINE_BYTES]);

/// The line of `lines` a key with hash `h` sets its bits in: the high 32
/// bits of the hash scaled onto the lines (a multiply, not a division).
fn line_of(h: u64, lines: usize) -> usize {
    (((h >> 32) * lines as u64) >> 32) as usize
}

/// Calls `f` with each of the `k` bit positions (0..512) of hash `h` in its
/// line.
#[inline]
fn line_positions(h: u64, k: u8, mut f: impl FnMut(usize) -> bool) -> bool {
    let mut word = stride(h);
    for i in 0..k {
        let field = i % POSITIONS_PER_WORD;
        if i > 0 && field == 0 {
            word = fmix64(word);
        }
        if !f(((word >> (9 * field)) % LINE_BITS) as usize) {
            return false;
        }
    }
    true
}

/// Builds filter block contents (blocked layout) from key hashes
/// ([`hash64`] of each user key).
pub fn build_filter(hashes: &[u64], bits_per_key: usize) -> Vec<u8> {
    let nbits = hashes.len().saturating_mul(bits_per_key);
    let lines = nbits.div_ceil(LINE_BITS as usize).max(1);
    // k = bits_per_key * ln 2 minimises false positives in a classic
    // filter; confined to a line, one probe fewer does as well at 10
    // bits/key (RocksDB's choice too).
    let k = ((bits_per_key as f64 * 0.6).round() as u8).clamp(1, MAX_PROBES);
    let mut out = vec![0u8; lines * LINE_BYTES + 1];
    for &h in hashes {
        let base = line_of(h, lines) * LINE_BYTES;
        line_positions(h, k, |bit| {
            out[base + bit / 8] |= 1 << (bit % 8);
            true
        });
    }
    out[lines * LINE_BYTES] = BLOCKED | k;
    out
}

/// The bits of a filter, in the layout it was built with.
enum Bits {
    Blocked(Vec<Line>),
    Legacy(Vec<u8>),
}

/// A Bloom filter read from a table.
pub struct BloomFilter {
    bits: Bits,
    probes: u8,
}

impl BloomFilter {
    /// Parses filter block contents; fails on an empty bit array, a blocked
    /// filter not made of whole lines, or a bad `k`.
    pub fn new(mut contents: Vec<u8>) -> Result<BloomFilter, &'static str> {
        let last = contents.pop().ok_or("empty filter block")?;
        let probes = last & !BLOCKED;
        if probes == 0 || probes > MAX_PROBES {
            return Err("filter block has a bad probe count");
        }
        let bits = if last & BLOCKED != 0 {
            if contents.is_empty() || !contents.len().is_multiple_of(LINE_BYTES) {
                return Err("blocked filter is not a whole number of lines");
            }
            let lines = contents
                .chunks_exact(LINE_BYTES)
                .map(|c| {
                    let mut line = Line([0; LINE_BYTES]);
                    line.0.copy_from_slice(c);
                    line
                })
                .collect();
            Bits::Blocked(lines)
        } else {
            if contents.is_empty() {
                return Err("filter block has no bits");
            }
            Bits::Legacy(contents)
        };
        Ok(BloomFilter { bits, probes })
    }

    /// False only if `user_key` is certainly absent.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.may_contain_hash(hash64(user_key))
    }

    /// [`BloomFilter::may_contain`] for a precomputed [`hash64`].
    pub fn may_contain_hash(&self, h: u64) -> bool {
        match &self.bits {
            Bits::Blocked(lines) => {
                let line = &lines[line_of(h, lines.len())];
                line_positions(h, self.probes, |bit| {
                    line.0[bit / 8] & (1 << (bit % 8)) != 0
                })
            }
            Bits::Legacy(bits) => {
                let nbits = (bits.len() * 8) as u64;
                let delta = stride(h);
                let mut pos = h;
                for _ in 0..self.probes {
                    let bit = pos % nbits;
                    let byte = bits.get((bit / 8) as usize).copied().unwrap_or(0);
                    if byte & (1 << (bit % 8)) == 0 {
                        return false;
                    }
                    pos = pos.wrapping_add(delta);
                }
                true
            }
        }
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

    /// The legacy layout, as tables written before the blocked one carry it.
    fn build_legacy_filter(hashes: &[u64], bits_per_key: usize) -> Vec<u8> {
        let nbytes = hashes
            .len()
            .saturating_mul(bits_per_key)
            .max(64)
            .div_ceil(8);
        let nbits = (nbytes * 8) as u64;
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

    #[test]
    fn legacy_filters_still_answer() {
        let keys: Vec<Vec<u8>> = (0..5_000u32)
            .map(|i| format!("user{i:08}").into_bytes())
            .collect();
        let hashes: Vec<u64> = keys.iter().map(|k| hash64(k)).collect();
        let f = BloomFilter::new(build_legacy_filter(&hashes, 10)).unwrap();
        assert!(matches!(f.bits, Bits::Legacy(_)));
        assert!(keys.iter().all(|k| f.may_contain(k)), "a false negative");
        let fp = (0..50_000u32)
            .filter(|i| f.may_contain(format!("other{i:08}").as_bytes()))
            .count();
        assert!(fp < 1_000, "{fp} false positives in 50 000");
    }

    #[test]
    fn a_key_sets_bits_in_one_line_only() {
        let h = hash64(b"the key");
        let contents = build_filter(&[h], 64 * 8 * 4);
        let lines = (contents.len() - 1) / LINE_BYTES;
        assert!(lines >= 4, "{lines}");
        let touched: Vec<usize> = contents[..lines * LINE_BYTES]
            .chunks_exact(LINE_BYTES)
            .enumerate()
            .filter(|(_, c)| c.iter().any(|&b| b != 0))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(touched, vec![line_of(h, lines)]);
        let set: u32 = contents
            .iter()
            .take(lines * LINE_BYTES)
            .map(|b| b.count_ones())
            .sum();
        let k = contents[contents.len() - 1] & !BLOCKED;
        assert!((1..=u32::from(k)).contains(&set), "{set} bits for k = {k}");
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
        // Blocked: whole lines only.
        assert!(BloomFilter::new(vec![BLOCKED | 6]).is_err());
        assert!(BloomFilter::new([vec![0; 63], vec![BLOCKED | 6]].concat()).is_err());
        assert!(BloomFilter::new([vec![0; 64], vec![BLOCKED | 6]].concat()).is_ok());
        assert!(BloomFilter::new([vec![0; 64], vec![BLOCKED]].concat()).is_err());
        // A legacy filter whose last bit byte looks like a marker is legacy.
        let legacy = BloomFilter::new(vec![0x80, 0x80, 7]).unwrap();
        assert!(matches!(legacy.bits, Bits::Legacy(_)));
    }

    #[test]
    fn hash_spreads_similar_keys() {
        assert_ne!(hash64(b""), hash64(b"\0"));
        assert_ne!(hash64(b"a"), hash64(b"a\0"));
        assert_ne!(hash64(b"abcdefgh"), hash64(b"abcdefgh\0"));
    }

    /// The hash and the bit layout are part of every table on disk: a
    /// change to either must fail here (and bump the table format).
    #[test]
    fn pinned_vectors() {
        let vectors: [(&[u8], u64); 5] = [
            (b"", 0x9ca0_66f1_a4ab_2eea),
            (b"a", 0xb6d2_f5d0_3814_a18b),
            (b"abc", 0x485e_f38d_13c1_4ae9),
            (b"user00000042", 0x2859_dd82_e7ff_0816),
            (b"0123456789abcdef0123456789abcdef0", 0xf6ae_14ab_fa0a_70c7),
        ];
        for (key, h) in vectors {
            assert_eq!(hash64(key), h, "hash64({key:?})");
        }
        let mut want = vec![0u8; 65];
        for (at, bits) in [
            (2, 16),
            (14, 4),
            (16, 16),
            (48, 32),
            (53, 1),
            (62, 8),
            (64, 134),
        ] {
            want[at] = bits;
        }
        assert_eq!(build_filter(&[hash64(b"abc")], 10), want);
    }
}
