//! Key and value generators.
//!
//! Keys are encoded exactly as db_bench's `GenerateKeyFromInt` (without
//! prefixes), so a Weft database and a RocksDB one filled with the same flags
//! hold byte-identical keys:
//!
//! ```text
//! key_size >= 8:  [ v as 8 bytes big-endian ][ '0' (0x30) padding ... ]
//! key_size <  8:  [ low key_size bytes of v, big-endian ]
//! ```
//!
//! Big-endian makes byte order equal numeric order, so `fillseq` really
//! appends in key order. Key generators are a trait so later workloads
//! (zipfian, latest, YCSB) plug in beside the uniform and sequential ones.

use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

/// Writes the db_bench encoding of `v` into `key` (whose length is the key
/// size).
pub fn generate_key_from_int(v: u64, key: &mut [u8]) {
    let fill = key.len().min(8);
    for (i, b) in key[..fill].iter_mut().enumerate() {
        // Byte i holds bits ((fill - i - 1) * 8)..: the low `fill` bytes of v,
        // most significant first, exactly as db_bench shifts them.
        *b = (v >> ((fill - i - 1) * 8)) as u8;
    }
    for b in &mut key[fill..] {
        *b = b'0';
    }
}

/// Allocates and encodes a key of `key_size` bytes.
pub fn key_from_int(v: u64, key_size: usize) -> Vec<u8> {
    let mut key = vec![0u8; key_size];
    generate_key_from_int(v, &mut key);
    key
}

/// A source of key indices in `0..num`.
pub trait KeyGenerator: Send {
    /// The next key index.
    fn next_key(&mut self) -> u64;
}

/// `0, 1, 2, ...` (wrapping at `num`, which a db_bench run never reaches).
#[derive(Debug, Clone)]
pub struct Sequential {
    next: u64,
    num: u64,
}

impl Sequential {
    /// Starts at 0.
    pub fn new(num: u64) -> Self {
        Sequential {
            next: 0,
            num: num.max(1),
        }
    }
}

impl KeyGenerator for Sequential {
    fn next_key(&mut self) -> u64 {
        let k = self.next;
        self.next = (self.next + 1) % self.num;
        k
    }
}

/// Uniformly random in `0..num` (db_bench's `rand.Next() % num`).
#[derive(Debug, Clone)]
pub struct Uniform {
    rng: StdRng,
    num: u64,
}

impl Uniform {
    /// A generator seeded with `seed`.
    pub fn new(num: u64, seed: u64) -> Self {
        Uniform {
            rng: StdRng::seed_from_u64(seed),
            num: num.max(1),
        }
    }
}

impl KeyGenerator for Uniform {
    fn next_key(&mut self) -> u64 {
        self.rng.gen_range(0..self.num)
    }
}

/// Pseudo-random values, cut from one pre-generated buffer as db_bench's
/// `RandomGenerator` does, so producing a value costs no RNG work in the
/// timed loop. The buffer is made as db_bench makes it
/// (`test::CompressibleString`): 100-byte pieces, each `ratio × 100`
/// random bytes repeated to fill the piece, so a value compresses to about
/// `ratio` of its size (`--compression_ratio`; 1 gives incompressible
/// values).
#[derive(Debug, Clone)]
pub struct ValueGenerator {
    data: Vec<u8>,
    pos: usize,
}

impl ValueGenerator {
    /// A buffer of at least 1 MiB (and at least one value) whose values
    /// compress to about `compression_ratio` of their size.
    pub fn new(value_size: usize, seed: u64, compression_ratio: f64) -> Self {
        const PIECE: usize = 100;
        let len = value_size.max(1 << 20);
        let raw = ((PIECE as f64 * compression_ratio) as usize).clamp(1, PIECE);
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed_f7a1_0000);
        let mut data = Vec::with_capacity(len + PIECE);
        let mut random = [0u8; PIECE];
        while data.len() < len {
            rng.fill_bytes(&mut random[..raw]);
            data.extend((0..PIECE).map(|i| random[i % raw]));
        }
        data.truncate(len);
        ValueGenerator { data, pos: 0 }
    }

    /// The next `len` bytes (`len` ≤ the `value_size` given to `new`).
    pub fn generate(&mut self, len: usize) -> &[u8] {
        let len = len.min(self.data.len());
        if self.pos + len > self.data.len() {
            self.pos = 0;
        }
        self.pos += len;
        &self.data[self.pos - len..self.pos]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_size_16_matches_db_bench() {
        assert_eq!(key_from_int(0, 16), [&[0u8; 8][..], b"00000000"].concat());
        assert_eq!(
            key_from_int(1, 16),
            b"\x00\x00\x00\x00\x00\x00\x00\x0100000000".to_vec()
        );
        assert_eq!(
            key_from_int(0x0102_0304_0506_0708, 16),
            b"\x01\x02\x03\x04\x05\x06\x07\x0800000000".to_vec()
        );
        assert_eq!(
            key_from_int(999_999, 16),
            b"\x00\x00\x00\x00\x00\x0f\x42\x3f00000000".to_vec()
        );
    }

    #[test]
    fn key_size_8_is_plain_big_endian() {
        for v in [0u64, 1, 255, 256, 1 << 40, u64::MAX] {
            assert_eq!(key_from_int(v, 8), v.to_be_bytes().to_vec());
        }
    }

    #[test]
    fn key_size_10_pads_two_ascii_zeros() {
        assert_eq!(
            key_from_int(0xabcd, 10),
            b"\x00\x00\x00\x00\x00\x00\xab\xcd00".to_vec()
        );
    }

    #[test]
    fn key_size_4_keeps_low_bytes() {
        // db_bench shifts by (bytes_to_fill - i - 1) * 8: the low 4 bytes.
        assert_eq!(key_from_int(0x0102_0304_0506, 4), vec![3, 4, 5, 6]);
        assert_eq!(key_from_int(7, 4), vec![0, 0, 0, 7]);
        assert_eq!(key_from_int(7, 1), vec![7]);
    }

    #[test]
    fn encoding_preserves_order() {
        let keys: Vec<_> = (0..1000u64).map(|v| key_from_int(v * 7919, 16)).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn generators() {
        let mut s = Sequential::new(3);
        assert_eq!(
            (0..5).map(|_| s.next_key()).collect::<Vec<_>>(),
            [0, 1, 2, 0, 1]
        );
        let mut u = Uniform::new(10, 42);
        let mut u2 = Uniform::new(10, 42);
        for _ in 0..1000 {
            let k = u.next_key();
            assert!(k < 10);
            assert_eq!(k, u2.next_key());
        }
    }

    #[test]
    fn values_have_requested_size() {
        let mut g = ValueGenerator::new(100, 1, 0.5);
        let a = g.generate(100).to_vec();
        let b = g.generate(100).to_vec();
        assert_eq!(a.len(), 100);
        assert_ne!(a, b);
        for _ in 0..20_000 {
            assert_eq!(g.generate(100).len(), 100);
        }
        let mut big = ValueGenerator::new(3 << 20, 1, 1.0);
        assert_eq!(big.generate(3 << 20).len(), 3 << 20);
        assert_eq!(big.generate(0).len(), 0);
    }

    /// Values compress to about the ratio asked for, as db_bench's do
    /// (measured with zstd through a 4 KiB table block's worth of values).
    #[test]
    fn values_compress_to_about_the_ratio() {
        for ratio in [0.25, 0.5, 1.0] {
            let mut g = ValueGenerator::new(1000, 7, ratio);
            let values: Vec<u8> = (0..4).flat_map(|_| g.generate(1000).to_vec()).collect();
            let packed = zstd::bulk::compress(&values, 3).unwrap();
            let got = packed.len() as f64 / values.len() as f64;
            assert!(
                (got - ratio).abs() < 0.1 || (ratio == 1.0 && got > 0.95),
                "ratio {ratio}: compressed to {got:.3}"
            );
        }
    }
}
