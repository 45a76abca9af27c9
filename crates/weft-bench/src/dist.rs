//! Request distributions for YCSB and EvenDB workloads.
//!
//! The Zipfian generator is YCSB's `ZipfianGenerator` (Gray et al.,
//! "Quickly generating billion-record synthetic databases"), reproduced
//! constant for constant, so a figure measured here means what a YCSB figure
//! means:
//!
//! - [`Zipfian`]: rank 0 is the most popular item, drawn with probability
//!   `1 / zeta(n, θ)`; the item count may grow (YCSB's incremental zeta).
//! - `zipfian` requests are *scrambled* as YCSB's `ScrambledZipfianGenerator`
//!   does: a rank is drawn over YCSB's fixed 10¹⁰ items with its precomputed
//!   `ZETAN` (θ = 0.99), then key = `fnvhash64(rank) % n`, so hot keys are
//!   spread over the key space instead of clustering at its start. For
//!   θ ≠ 0.99 (YCSB hard-codes 0.99 there) the rank is drawn over `n` items.
//! - `latest`: YCSB's `SkewedLatestGenerator`: key = newest − zipf(newest).
//! - `zipf-composite`: EvenDB §5.3.1: the 14 most significant bits of the
//!   key (of the bits needed for `0..n`) are a Zipfian rank over 2¹⁴
//!   prefixes — prefix 0 hottest, unscrambled so hot keys share a range — and
//!   the remaining low bits are uniform.
//! - `uniform` and `sequential` as their names say.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// YCSB's default Zipfian constant θ.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// YCSB `ScrambledZipfianGenerator.ITEM_COUNT`.
pub const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;
/// YCSB `ScrambledZipfianGenerator.ZETAN`: zeta(10¹⁰, 0.99).
pub const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;
/// Bits of a zipf-composite key drawn Zipfian (EvenDB §5.3.1).
pub const COMPOSITE_PREFIX_BITS: u32 = 14;

/// YCSB's `Utils.fnvhash64`: FNV-1 over the 8 little-end-first bytes, then
/// `Math.abs`.
pub fn fnvhash64(mut val: u64) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for _ in 0..8 {
        let octet = val & 0xff;
        val >>= 8;
        h ^= octet;
        h = h.wrapping_mul(1_099_511_628_211);
    }
    (h as i64).unsigned_abs()
}

/// `sum_{i=st}^{n-1} 1/(i+1)^θ` added to `initial` (YCSB's `zetastatic`).
fn zeta_range(st: u64, n: u64, theta: f64, initial: f64) -> f64 {
    let mut sum = initial;
    for i in st..n {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

/// zeta(n, θ), memoised process-wide: computing it for 10⁶ items costs
/// 10⁶ `powf`, which every thread and every benchmark would otherwise redo.
pub fn zeta(n: u64, theta: f64) -> f64 {
    static CACHE: OnceLock<Mutex<HashMap<(u64, u64), f64>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let key = (n, theta.to_bits());
    if let Some(z) = cache.lock().ok().and_then(|c| c.get(&key).copied()) {
        return z;
    }
    let z = zeta_range(0, n, theta, 0.0);
    if let Ok(mut c) = cache.lock() {
        c.insert(key, z);
    }
    z
}

/// YCSB's `ZipfianGenerator` over ranks `0..items`.
#[derive(Debug, Clone)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    zeta2theta: f64,
    eta: f64,
}

impl Zipfian {
    /// Over `items` ranks with constant `theta` (0 < θ < 1).
    pub fn new(items: u64, theta: f64) -> Self {
        let items = items.max(1);
        Self::with_zetan(items, theta, zeta(items, theta))
    }

    /// With a precomputed zeta(items, θ).
    pub fn with_zetan(items: u64, theta: f64, zetan: f64) -> Self {
        let zeta2theta = zeta_range(0, 2, theta, 0.0);
        let mut z = Zipfian {
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            zeta2theta,
            eta: 0.0,
        };
        z.eta = z.compute_eta();
        z
    }

    fn compute_eta(&self) -> f64 {
        (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta))
            / (1.0 - self.zeta2theta / self.zetan)
    }

    /// Probability of rank 0: `1 / zeta(items, θ)`.
    pub fn head_probability(&self) -> f64 {
        1.0 / self.zetan
    }

    /// Item count.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// Changes the item count: growth extends zeta incrementally (YCSB), a
    /// shrink recomputes it.
    pub fn set_items(&mut self, items: u64) {
        let items = items.max(1);
        if items == self.items {
            return;
        }
        self.zetan = if items > self.items {
            zeta_range(self.items, items, self.theta, self.zetan)
        } else {
            zeta(items, self.theta)
        };
        self.items = items;
        self.eta = self.compute_eta();
    }

    /// A rank in `0..items`.
    pub fn sample(&self, rng: &mut impl Rng) -> u64 {
        let u: f64 = rng.gen();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        let r = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        r.min(self.items - 1)
    }
}

/// `--distribution` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DistributionKind {
    /// Every key equally likely.
    Uniform,
    /// YCSB's scrambled Zipfian.
    #[default]
    Zipfian,
    /// YCSB's skewed-latest: recent inserts are hot.
    Latest,
    /// EvenDB's composite keys: Zipfian high bits, uniform low bits.
    ZipfComposite,
    /// 0, 1, 2, … wrapping at the key count.
    Sequential,
}

impl DistributionKind {
    /// Every kind, in `--help` order.
    pub const ALL: [DistributionKind; 5] = [
        DistributionKind::Uniform,
        DistributionKind::Zipfian,
        DistributionKind::Latest,
        DistributionKind::ZipfComposite,
        DistributionKind::Sequential,
    ];

    /// The flag value.
    pub fn name(self) -> &'static str {
        match self {
            DistributionKind::Uniform => "uniform",
            DistributionKind::Zipfian => "zipfian",
            DistributionKind::Latest => "latest",
            DistributionKind::ZipfComposite => "zipf-composite",
            DistributionKind::Sequential => "sequential",
        }
    }
}

impl std::fmt::Display for DistributionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for DistributionKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        DistributionKind::ALL
            .into_iter()
            .find(|k| k.name() == s || (s == "zipf_composite" && k.name() == "zipf-composite"))
            .ok_or_else(|| {
                let names: Vec<_> = DistributionKind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown distribution {s:?} (known: {})", names.join(", "))
            })
    }
}

/// Bits needed to write every value of `0..n`.
fn bits_for(n: u64) -> u32 {
    if n <= 1 {
        0
    } else {
        64 - (n - 1).leading_zeros()
    }
}

/// Draws key indices for one thread.
#[derive(Debug, Clone)]
pub struct RequestGenerator {
    kind: DistributionKind,
    rng: StdRng,
    zipf: Zipfian,
    /// Scrambled zipfian: keys are `fnv(rank) % space`.
    space: u64,
    next_seq: u64,
}

impl RequestGenerator {
    /// A generator over a key space that starts at `space` keys; `theta` is
    /// the Zipfian constant. `space` is the upper bound the zipfian choice
    /// hashes into (YCSB: record count plus expected inserts); keys at or
    /// beyond the current count passed to [`Self::next_key`] are redrawn.
    pub fn new(kind: DistributionKind, space: u64, theta: f64, seed: u64) -> Self {
        let space = space.max(1);
        let zipf = match kind {
            DistributionKind::Zipfian if theta == ZIPFIAN_CONSTANT => {
                Zipfian::with_zetan(SCRAMBLED_ITEM_COUNT + 1, theta, SCRAMBLED_ZETAN)
            }
            DistributionKind::Zipfian | DistributionKind::Latest => Zipfian::new(space, theta),
            DistributionKind::ZipfComposite => {
                Zipfian::new(1 << bits_for(space).min(COMPOSITE_PREFIX_BITS), theta)
            }
            _ => Zipfian::with_zetan(2, theta, 2.0),
        };
        RequestGenerator {
            kind,
            rng: StdRng::seed_from_u64(seed),
            zipf,
            space,
            next_seq: seed % space,
        }
    }

    /// The thread's RNG, for the workload's other choices (operation mix,
    /// scan length), so one seed fixes a whole run.
    pub fn rng(&mut self) -> &mut StdRng {
        &mut self.rng
    }

    /// A key index in `0..count` (`count` = keys inserted so far).
    pub fn next_key(&mut self, count: u64) -> u64 {
        let count = count.max(1);
        match self.kind {
            DistributionKind::Uniform => self.rng.gen_range(0..count),
            DistributionKind::Sequential => {
                let k = self.next_seq % count;
                self.next_seq = k + 1;
                k
            }
            DistributionKind::Latest => {
                // YCSB: max = last acknowledged key; key = max - zipf(max).
                let max = count - 1;
                self.zipf.set_items(max.max(1));
                max - self.zipf.sample(&mut self.rng).min(max)
            }
            DistributionKind::Zipfian => {
                for _ in 0..64 {
                    let rank = self.zipf.sample(&mut self.rng);
                    let k = fnvhash64(rank) % self.space;
                    if k < count {
                        return k;
                    }
                }
                self.rng.gen_range(0..count)
            }
            DistributionKind::ZipfComposite => {
                let bits = bits_for(self.space);
                let low_bits = bits.saturating_sub(COMPOSITE_PREFIX_BITS);
                for _ in 0..64 {
                    let prefix = self.zipf.sample(&mut self.rng);
                    let low = if low_bits == 0 {
                        0
                    } else {
                        self.rng.gen_range(0..1u64 << low_bits)
                    };
                    let k = (prefix << low_bits) | low;
                    if k < count {
                        return k;
                    }
                }
                self.rng.gen_range(0..count)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn freq(samples: &[u64], n: usize) -> Vec<u64> {
        let mut f = vec![0u64; n];
        for &s in samples {
            f[s as usize] += 1;
        }
        f
    }

    #[test]
    fn fnv_matches_ycsb() {
        // FNV-1a over the 8 bytes, low byte first, then Java's Math.abs.
        let (off, p) = (0xCBF2_9CE4_8422_2325u64, 1_099_511_628_211u64);
        let p8 = (0..8).fold(1u64, |a, _| a.wrapping_mul(p));
        let abs = |h: u64| (h as i64).unsigned_abs();
        assert_eq!(fnvhash64(0), abs(off.wrapping_mul(p8)));
        assert_eq!(fnvhash64(1), abs((off ^ 1).wrapping_mul(p8)));
        let h = (off.wrapping_mul(p) ^ 2).wrapping_mul(p);
        let h = (0..6).fold(h, |a, _| a.wrapping_mul(p));
        assert_eq!(fnvhash64(0x200), abs(h));
    }

    #[test]
    fn zipfian_head_frequency_matches_ycsb() {
        // YCSB's generator draws rank 0 with probability 1/zeta(n, 0.99)
        // and rank 1 with 1/(2^0.99 zeta).
        let n = 1000;
        let z = Zipfian::new(n, 0.99);
        let mut rng = StdRng::seed_from_u64(1);
        let samples: Vec<u64> = (0..200_000).map(|_| z.sample(&mut rng)).collect();
        let f = freq(&samples, n as usize);
        let p0 = f[0] as f64 / samples.len() as f64;
        let want0 = 1.0 / zeta(n, 0.99);
        assert!((p0 - want0).abs() / want0 < 0.03, "{p0} vs {want0}");
        let p1 = f[1] as f64 / samples.len() as f64;
        let want1 = want0 / 2f64.powf(0.99);
        assert!((p1 - want1).abs() / want1 < 0.05, "{p1} vs {want1}");
        // Monotone-ish decay: the head 10 ranks outweigh the next 10.
        let head: u64 = f[..10].iter().sum();
        let next: u64 = f[10..20].iter().sum();
        assert!(head > 3 * next);
        // For n = 1000 the head is ~13 % (zeta ≈ 7.4).
        assert!((0.12..0.15).contains(&want0), "{want0}");
    }

    #[test]
    fn incremental_zeta_equals_direct() {
        let mut z = Zipfian::new(100, 0.99);
        z.set_items(5000);
        assert!((z.zetan - zeta(5000, 0.99)).abs() < 1e-9);
        z.set_items(10);
        assert!((z.zetan - zeta(10, 0.99)).abs() < 1e-12);
    }

    #[test]
    fn scrambled_zipfian_spreads_hot_keys() {
        let n = 10_000u64;
        let mut g = RequestGenerator::new(DistributionKind::Zipfian, n, 0.99, 7);
        let samples: Vec<u64> = (0..200_000).map(|_| g.next_key(n)).collect();
        let f = freq(&samples, n as usize);
        let mut hot: Vec<usize> = (0..n as usize).collect();
        hot.sort_by_key(|&i| std::cmp::Reverse(f[i]));
        // Skewed: the hottest key is fnv(0) % n, ~1/26.47 of all requests.
        assert_eq!(hot[0] as u64, fnvhash64(0) % n);
        let p0 = f[hot[0]] as f64 / samples.len() as f64;
        assert!((p0 - 1.0 / SCRAMBLED_ZETAN).abs() < 0.01, "{p0}");
        // Spread: the 10 hottest keys are not neighbours.
        let mut top: Vec<usize> = hot[..10].to_vec();
        top.sort();
        let span = top[9] - top[0];
        assert!(span > n as usize / 4, "hot keys clustered: {top:?}");
        // Plain zipfian would put them all at 0..10.
        assert!(top.iter().filter(|&&k| k < 10).count() <= 2, "{top:?}");
    }

    #[test]
    fn latest_favours_recent_inserts() {
        let n = 10_000u64;
        let mut g = RequestGenerator::new(DistributionKind::Latest, n, 0.99, 3);
        let samples: Vec<u64> = (0..50_000).map(|_| g.next_key(n)).collect();
        let newest = samples.iter().filter(|&&k| k == n - 1).count() as f64 / 50_000.0;
        assert!(newest > 0.08, "{newest}");
        let recent = samples.iter().filter(|&&k| k >= n - 100).count() as f64 / 50_000.0;
        assert!(recent > 0.5, "{recent}");
        // After more inserts, the hot spot moves with the newest key.
        let samples: Vec<u64> = (0..20_000).map(|_| g.next_key(n + 500)).collect();
        let newest = samples.iter().filter(|&&k| k == n + 499).count();
        let old_newest = samples.iter().filter(|&&k| k == n - 1).count();
        assert!(newest > 10 * old_newest.max(1), "{newest} vs {old_newest}");
        assert!(samples.iter().all(|&k| k < n + 500));
    }

    #[test]
    fn zipf_composite_keeps_the_high_bits_zipfian() {
        let n = 1u64 << 20; // 20 bits: 14 Zipfian + 6 uniform.
        let mut g = RequestGenerator::new(DistributionKind::ZipfComposite, n, 0.99, 5);
        let samples: Vec<u64> = (0..200_000).map(|_| g.next_key(n)).collect();
        let prefixes: Vec<u64> = samples.iter().map(|k| k >> 6).collect();
        let f = freq(&prefixes, 1 << 14);
        let want0 = 1.0 / zeta(1 << 14, 0.99);
        let p0 = f[0] as f64 / samples.len() as f64;
        assert!((p0 - want0).abs() / want0 < 0.05, "{p0} vs {want0}");
        assert!(f[0] > f[1] && f[1] > f[5] && f[5] > f[100]);
        // The low 6 bits of the hottest prefix are uniform: all 64 appear,
        // none dominates.
        let low = freq(
            &samples
                .iter()
                .filter(|k| *k >> 6 == 0)
                .map(|k| k & 63)
                .collect::<Vec<_>>(),
            64,
        );
        let (lo, hi) = (low.iter().min().unwrap(), low.iter().max().unwrap());
        assert!(*lo > 0 && (*hi as f64) < 2.0 * *lo as f64, "{lo}..{hi}");
        // Non-power-of-two key counts stay in range.
        let mut g = RequestGenerator::new(DistributionKind::ZipfComposite, 1000, 0.99, 5);
        assert!((0..10_000).all(|_| g.next_key(1000) < 1000));
    }

    #[test]
    fn uniform_and_sequential() {
        let mut g = RequestGenerator::new(DistributionKind::Sequential, 5, 0.99, 0);
        let v: Vec<u64> = (0..7).map(|_| g.next_key(5)).collect();
        assert_eq!(v, [0, 1, 2, 3, 4, 0, 1]);
        let mut g = RequestGenerator::new(DistributionKind::Uniform, 100, 0.99, 0);
        let f = freq(
            &(0..100_000).map(|_| g.next_key(100)).collect::<Vec<_>>(),
            100,
        );
        assert!(f.iter().all(|&c| (800..1200).contains(&c)));
        assert_eq!(
            "zipf-composite".parse::<DistributionKind>(),
            Ok(DistributionKind::ZipfComposite)
        );
        assert!("pareto".parse::<DistributionKind>().is_err());
    }
}
