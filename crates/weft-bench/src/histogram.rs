//! A log-bucketed latency histogram (HDR-style), written here so the default
//! build needs no extra crate.
//!
//! Values (nanoseconds) below 128 get one exact bucket each; above, every
//! power of two is cut into 64 equal sub-buckets, so a bucket's width is at
//! most 1/64 of its lower bound: any reported percentile is within 1.6 % of
//! the true sample (HdrHistogram with 2 significant digits gives the same
//! guarantee). Recording is an index computation and one increment, cheap
//! enough to time every operation. Histograms of threads merge by adding
//! counts, which is exact.

use serde::{Deserialize, Serialize};

const EXACT: u64 = 128;
const SUB: u64 = 64;
/// 128 exact buckets + 64 sub-buckets for each exponent 7..=63.
const BUCKETS: usize = (EXACT + (64 - 7) * SUB) as usize;

/// Counts of recorded values by bucket, plus exact min/max/sum.
#[derive(Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    count: u64,
    min: u64,
    max: u64,
    sum: f64,
    sum_sq: f64,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count)
            .field("min", &self.min)
            .field("max", &self.max)
            .finish()
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

fn bucket_of(v: u64) -> usize {
    if v < EXACT {
        return v as usize;
    }
    let e = 63 - v.leading_zeros() as u64; // >= 7
    let m = v >> (e - 6); // in [64, 128)
    (EXACT + (e - 7) * SUB + (m - SUB)) as usize
}

/// `[low, high]` of the values that land in bucket `i`.
fn bucket_range(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < EXACT {
        return (i, i);
    }
    let e = (i - EXACT) / SUB + 7;
    let m = (i - EXACT) % SUB + SUB;
    let low = m << (e - 6);
    let width = 1u64 << (e - 6);
    (low, low.saturating_add(width - 1))
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            count: 0,
            min: u64::MAX,
            max: 0,
            sum: 0.0,
            sum_sq: 0.0,
        }
    }

    /// Records one value.
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.counts[bucket_of(v)] += 1;
        self.count += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        let f = v as f64;
        self.sum += f;
        self.sum_sq += f * f;
    }

    /// Adds `other`'s samples to this one.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.count += other.count;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum += other.sum;
        self.sum_sq += other.sum_sq;
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Smallest sample (0 when empty).
    pub fn min(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            self.min
        }
    }

    /// Largest sample.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Arithmetic mean (exact).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum / self.count as f64
        }
    }

    /// Population standard deviation (exact).
    pub fn stddev(&self) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let n = self.count as f64;
        (self.sum_sq / n - (self.sum / n).powi(2)).max(0.0).sqrt()
    }

    /// The `p`-th percentile (0..=100): the smallest recorded value such that
    /// at least `p` % of the samples are ≤ it, up to the bucket resolution.
    /// The bucket's midpoint is returned, clamped to the observed min/max.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((p / 100.0) * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = bucket_range(i);
                let mid = lo + (hi - lo) / 2;
                return mid.clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// The summary written to JSON and printed: microseconds.
    pub fn summary(&self) -> LatencySummary {
        let us = |ns: u64| ns as f64 / 1000.0;
        LatencySummary {
            count: self.count,
            mean: self.mean() / 1000.0,
            min: us(self.min()),
            p50: us(self.percentile(50.0)),
            p95: us(self.percentile(95.0)),
            p99: us(self.percentile(99.0)),
            p999: us(self.percentile(99.9)),
            max: us(self.max),
        }
    }

    /// db_bench's `--histogram` block (its layout, fewer lines): count,
    /// average and deviation, min/median/max and the percentile line.
    pub fn db_bench_text(&self, what: &str) -> String {
        let us = |ns: u64| ns as f64 / 1000.0;
        format!(
            "Microseconds per {what}:\n\
             Count: {} Average: {:.4}  StdDev: {:.2}\n\
             Min: {:.0}  Median: {:.4}  Max: {:.0}\n\
             Percentiles: P50: {:.2} P75: {:.2} P99: {:.2} P99.9: {:.2} P99.99: {:.2}\n\
             ------------------------------------------------------",
            self.count,
            self.mean() / 1000.0,
            self.stddev() / 1000.0,
            us(self.min()),
            us(self.percentile(50.0)),
            us(self.max),
            us(self.percentile(50.0)),
            us(self.percentile(75.0)),
            us(self.percentile(99.0)),
            us(self.percentile(99.9)),
            us(self.percentile(99.99)),
        )
    }
}

/// Latency percentiles of one operation type, in microseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Operations timed.
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// Fastest.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Slowest.
    pub max: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_tight() {
        let mut prev_hi = None;
        for i in 0..BUCKETS {
            let (lo, hi) = bucket_range(i);
            if let Some(p) = prev_hi {
                assert_eq!(lo, p + 1, "gap before bucket {i}");
            }
            assert_eq!(bucket_of(lo), i);
            assert_eq!(bucket_of(hi), i);
            assert!((hi - lo) as f64 <= lo as f64 / 64.0 + 1.0);
            prev_hi = Some(hi);
        }
        assert_eq!(prev_hi, Some(u64::MAX));
    }

    #[test]
    fn exact_percentiles_below_128() {
        let mut h = Histogram::new();
        for v in 1..=100 {
            h.record(v);
        }
        assert_eq!(h.count(), 100);
        assert_eq!(h.percentile(50.0), 50);
        assert_eq!(h.percentile(95.0), 95);
        assert_eq!(h.percentile(99.0), 99);
        assert_eq!(h.percentile(99.9), 100);
        assert_eq!(h.percentile(100.0), 100);
        assert_eq!(h.min(), 1);
        assert_eq!(h.max(), 100);
        assert!((h.mean() - 50.5).abs() < 1e-9);
    }

    #[test]
    fn large_values_within_resolution() {
        // 1..=1_000_000 µs-ish values in ns: p-th percentile is p% of 1e9.
        let mut h = Histogram::new();
        for v in 1..=100_000u64 {
            h.record(v * 10_000);
        }
        for (p, want) in [(50.0, 5e8), (95.0, 9.5e8), (99.0, 9.9e8), (99.9, 9.99e8)] {
            let got = h.percentile(p) as f64;
            assert!((got - want).abs() / want < 0.016, "p{p}: {got} vs {want}");
        }
        let s = h.summary();
        assert!((s.p50 - 5e5).abs() / 5e5 < 0.016);
        assert_eq!(s.max, 1e6);
    }

    #[test]
    fn merge_equals_recording_everything() {
        let (mut a, mut b, mut all) = (Histogram::new(), Histogram::new(), Histogram::new());
        for v in 0..5000u64 {
            let x = v * v % 100_003;
            if v % 3 == 0 {
                a.record(x)
            } else {
                b.record(x)
            }
            all.record(x);
        }
        a.merge(&b);
        assert_eq!(a.counts, all.counts);
        assert_eq!(a.count(), all.count());
        assert_eq!(a.percentile(99.0), all.percentile(99.0));
        assert_eq!(a.min(), all.min());
        assert_eq!(a.max(), all.max());
    }

    #[test]
    fn empty_is_zero() {
        let h = Histogram::new();
        assert_eq!(h.percentile(99.0), 0);
        assert_eq!(h.summary().count, 0);
        assert!(h
            .db_bench_text("op")
            .starts_with("Microseconds per op:\nCount: 0"));
    }
}
