//! Key ids and their distributions: the benchmark's key formats (its own
//! and db_bench's) and the Zipfian generators (numpy's and YCSB's).

use rand::rngs::StdRng;
use rand::Rng;

pub(crate) fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The 16-byte key of item `id`: random-looking, distinct per id.
pub(crate) fn key_of(id: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&splitmix(id).to_be_bytes());
    k[8..].copy_from_slice(&splitmix(id ^ 0x5555_5555).to_be_bytes());
    k
}

/// db_bench's key for integer `id` (`GenerateKeyFromInt`): the id
/// big-endian, padded with `'0'` to 16 bytes, so ids adjacent in value are
/// adjacent in key order.
pub(crate) fn db_bench_key(id: u64) -> [u8; 16] {
    let mut k = [b'0'; 16];
    k[..8].copy_from_slice(&id.to_be_bytes());
    k
}

/// numpy's `zipf(a)` (legacy `random_zipf`): rejection sampling.
pub(crate) fn numpy_zipf(rng: &mut StdRng, a: f64) -> u64 {
    let am1 = a - 1.0;
    let b = 2f64.powf(am1);
    loop {
        let u = 1.0 - rng.gen::<f64>();
        let v = rng.gen::<f64>();
        let x = u.powf(-1.0 / am1).floor();
        if !(1.0..=(i64::MAX as f64)).contains(&x) {
            continue;
        }
        let t = (1.0 + 1.0 / x).powf(am1);
        if v * x * (t - 1.0) / (b - 1.0) <= t / b {
            return x as u64;
        }
    }
}

/// YCSB's Zipfian generator over `0..n` (Gray et al.), θ = 0.99.
pub(crate) struct YcsbZipf {
    n: f64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

impl YcsbZipf {
    pub(crate) fn new(n: u64) -> Self {
        let theta = 0.99;
        let zetan: f64 = (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum();
        let zeta2 = 1.0 + 0.5f64.powf(theta);
        let nf = n as f64;
        YcsbZipf {
            n: nf,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: (1.0 - (2.0 / nf).powf(1.0 - theta)) / (1.0 - zeta2 / zetan),
        }
    }

    pub(crate) fn next(&self, rng: &mut StdRng) -> u64 {
        let u: f64 = rng.gen();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        ((self.n * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64).min(self.n as u64 - 1)
    }
}
