//! YCSB core workloads A–F and EvenDB's P, as benchmarks of the same list.
//!
//! Semantics follow YCSB's `CoreWorkload` where they matter for the figures:
//!
//! - `--record_count` and `--operation_count` are totals shared by the
//!   threads (YCSB's semantics), not per thread as db_bench's `--num`.
//! - A record is `field_count × field_length` bytes (10 × 100 by default),
//!   stored as one value: a key-value binding serialises the fields anyway.
//!   An update rewrites the whole record (YCSB's `writeallfields=true`),
//!   which keeps an update one put on every engine.
//! - Keys are db_bench's encoding of the key number (`--key_size` bytes,
//!   big-endian), so key order is numeric order and zipf-composite's "high
//!   bits" are the key's leading bytes. `ycsb_load` inserts `0..record_count`
//!   in a pseudo-random order (an affine permutation), as YCSB's default
//!   `insertorder=hashed` does not insert in key order either.
//! - Zipfian choices hash into `record_count + expected inserts` and redraw
//!   keys not inserted yet (YCSB's `CoreWorkload` does the same).
//! - Inserts (D, E) take the next key number from a shared counter. Unlike
//!   YCSB's acknowledged counter, a reader may pick a key whose insert is
//!   still in flight and miss it; the `found` count shows how rarely.
//!
//! | workload | mix                                   | default distribution |
//! |----------|---------------------------------------|----------------------|
//! | load     | 100 % insert                          | —                    |
//! | A        | 50 % read, 50 % update                | zipfian              |
//! | B        | 95 % read, 5 % update                 | zipfian              |
//! | C        | 100 % read                            | zipfian              |
//! | D        | 95 % read, 5 % insert                 | latest               |
//! | E        | 95 % scan (1..=max_scan_length), 5 % insert | zipfian        |
//! | F        | 50 % read, 50 % read-modify-write     | zipfian              |
//! | P        | 100 % update (EvenDB's ingestion)     | zipfian              |
//!
//! `--distribution` overrides the default of every workload.

use std::sync::atomic::Ordering;

use rand::Rng;

use crate::config::BenchConfig;
use crate::dist::{DistributionKind, RequestGenerator};
use crate::keygen::{generate_key_from_int, ValueGenerator};
use crate::report::OpKind;
use crate::workload::{BenchmarkInfo, ThreadContext, Workload};
use crate::Result;

/// Operation proportions of one workload (they sum to 1).
#[derive(Debug, Clone, Copy, Default)]
pub struct Mix {
    /// Point reads.
    pub read: f64,
    /// Whole-record updates.
    pub update: f64,
    /// Inserts of new records.
    pub insert: f64,
    /// Short scans.
    pub scan: f64,
    /// Read-modify-writes.
    pub rmw: f64,
}

/// A workload's mix and default distribution by benchmark name.
pub fn spec(name: &str) -> Option<(Mix, DistributionKind)> {
    let m = |read, update, insert, scan, rmw| Mix {
        read,
        update,
        insert,
        scan,
        rmw,
    };
    use DistributionKind::*;
    Some(match name {
        "ycsb_a" => (m(0.5, 0.5, 0.0, 0.0, 0.0), Zipfian),
        "ycsb_b" => (m(0.95, 0.05, 0.0, 0.0, 0.0), Zipfian),
        "ycsb_c" => (m(1.0, 0.0, 0.0, 0.0, 0.0), Zipfian),
        "ycsb_d" => (m(0.95, 0.0, 0.05, 0.0, 0.0), Latest),
        "ycsb_e" => (m(0.0, 0.0, 0.05, 0.95, 0.0), Zipfian),
        "ycsb_f" => (m(0.5, 0.0, 0.0, 0.0, 0.5), Zipfian),
        "ycsb_p" => (m(0.0, 1.0, 0.0, 0.0, 0.0), Zipfian),
        _ => return None,
    })
}

type MakeFn = fn(&BenchConfig) -> Box<dyn Workload>;

/// The registry entry of a YCSB benchmark.
pub const fn info(name: &'static str) -> BenchmarkInfo {
    let (description, load, make): (&str, bool, MakeFn) = match name.as_bytes() {
        b"ycsb_load" => (
            "YCSB load: insert record_count records (fresh database)",
            true,
            |_| Box::new(Load),
        ),
        b"ycsb_a" => ("YCSB A: 50% read, 50% update", false, make_run::<0>),
        b"ycsb_b" => ("YCSB B: 95% read, 5% update", false, make_run::<1>),
        b"ycsb_c" => ("YCSB C: 100% read", false, make_run::<2>),
        b"ycsb_d" => ("YCSB D: 95% read latest, 5% insert", false, make_run::<3>),
        b"ycsb_e" => ("YCSB E: 95% scan, 5% insert", false, make_run::<4>),
        b"ycsb_f" => (
            "YCSB F: 50% read, 50% read-modify-write",
            false,
            make_run::<5>,
        ),
        _ => ("EvenDB P: 100% put", false, make_run::<6>),
    };
    BenchmarkInfo {
        name,
        description,
        fresh_db: load,
        make,
        prints_stats: false,
        always_timed: true,
    }
}

const NAMES: [&str; 7] = [
    "ycsb_a", "ycsb_b", "ycsb_c", "ycsb_d", "ycsb_e", "ycsb_f", "ycsb_p",
];

fn make_run<const I: usize>(c: &BenchConfig) -> Box<dyn Workload> {
    let (mix, default_dist) = spec(NAMES[I]).unwrap_or_default();
    Box::new(Run {
        mix,
        dist: c.distribution.unwrap_or(default_dist),
    })
}

/// Operations thread `tid` of `threads` does out of `total`.
pub(crate) fn share(total: u64, tid: usize, threads: usize) -> u64 {
    let t = threads as u64;
    total / t + u64::from((tid as u64) < total % t)
}

/// A multiplier coprime with `n` near `n · 0.618`, for the load permutation.
pub(crate) fn coprime_step(n: u64) -> u64 {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let mut a = ((n as f64 * 0.618_033_988_7) as u64).max(1);
    while gcd(a, n) != 1 {
        a += 1;
    }
    a
}

/// `ycsb_load`: every key of `0..record_count` once, threads sharing the
/// range, in permuted order.
struct Load;

impl Workload for Load {
    fn run_thread(&self, ctx: &mut ThreadContext<'_>) -> Result<()> {
        let cfg = ctx.config;
        let n = cfg.record_count();
        let step = coprime_step(n.max(1));
        let threads = cfg.threads;
        let first: u64 = (0..ctx.tid).map(|t| share(n, t, threads)).sum();
        let mine = share(n, ctx.tid, threads);
        let mut values = ValueGenerator::new(cfg.record_size(), ctx.seed, cfg.compression_ratio);
        let mut key = vec![0u8; cfg.key_size];
        for i in first..first + mine {
            if ctx.should_stop() {
                break;
            }
            let k = ((i as u128 * step as u128) % n as u128) as u64;
            generate_key_from_int(k, &mut key);
            let t = ctx.op_start();
            ctx.db.put(&key, values.generate(cfg.record_size()))?;
            ctx.stats
                .add_bytes((cfg.key_size + cfg.record_size()) as u64);
            ctx.op_done(OpKind::Insert, t);
        }
        // Every thread stores the same final count.
        ctx.shared.key_count.store(n, Ordering::Release);
        Ok(())
    }

    fn total_ops(&self, c: &BenchConfig) -> u64 {
        c.record_count()
    }
}

/// A run phase (A–F, P).
struct Run {
    mix: Mix,
    dist: DistributionKind,
}

impl Workload for Run {
    fn run_thread(&self, ctx: &mut ThreadContext<'_>) -> Result<()> {
        let cfg = ctx.config;
        let ops = share(cfg.operation_count(), ctx.tid, cfg.threads);
        let records = cfg.record_count();
        let expected_inserts = (cfg.operation_count() as f64 * self.mix.insert * 2.0) as u64;
        let mut gen = RequestGenerator::new(
            self.dist,
            records + expected_inserts,
            cfg.zipf_theta,
            ctx.seed,
        );
        let mut values = ValueGenerator::new(cfg.record_size(), ctx.seed, cfg.compression_ratio);
        let mut key = vec![0u8; cfg.key_size];
        let rec = cfg.record_size();
        let kv = (cfg.key_size + rec) as u64;
        let (mut read, mut found) = (0u64, 0u64);
        let m = self.mix;
        for _ in 0..ops {
            if ctx.should_stop() {
                break;
            }
            let count = ctx.shared.key_count.load(Ordering::Acquire).max(1);
            let r: f64 = gen.rng().gen();
            if r < m.read {
                generate_key_from_int(gen.next_key(count), &mut key);
                let t = ctx.op_start();
                read += 1;
                if let Some(v) = ctx.db.get(&key)? {
                    found += 1;
                    ctx.stats.add_bytes((key.len() + v.len()) as u64);
                }
                ctx.op_done(OpKind::Read, t);
            } else if r < m.read + m.update {
                generate_key_from_int(gen.next_key(count), &mut key);
                let t = ctx.op_start();
                ctx.db.put(&key, values.generate(rec))?;
                ctx.stats.add_bytes(kv);
                ctx.op_done(OpKind::Update, t);
            } else if r < m.read + m.update + m.insert {
                let k = ctx.shared.key_count.fetch_add(1, Ordering::AcqRel);
                generate_key_from_int(k, &mut key);
                let t = ctx.op_start();
                ctx.db.put(&key, values.generate(rec))?;
                ctx.stats.add_bytes(kv);
                ctx.op_done(OpKind::Insert, t);
            } else if r < m.read + m.update + m.insert + m.scan {
                generate_key_from_int(gen.next_key(count), &mut key);
                let len = gen.rng().gen_range(1..=cfg.max_scan_length);
                let mut bytes = 0u64;
                let t = ctx.op_start();
                let db = ctx.db;
                db.scan(Some(&key), false, len, &mut |k, v| {
                    bytes += (k.len() + v.len()) as u64;
                })?;
                ctx.stats.add_bytes(bytes);
                ctx.op_done(OpKind::Scan, t);
            } else {
                // F: read the record, change it, write it back (no atomicity,
                // as YCSB's binding-level RMW).
                generate_key_from_int(gen.next_key(count), &mut key);
                let t = ctx.op_start();
                read += 1;
                let old = ctx.db.get(&key)?;
                ctx.op_time(OpKind::Read, t);
                let mut new = values.generate(rec).to_vec();
                if let Some(v) = old {
                    found += 1;
                    // Modify one field of what was read.
                    let f = cfg.field_length.min(v.len()).min(new.len());
                    new[..f].copy_from_slice(&v[..f]);
                    ctx.stats.add_bytes((key.len() + v.len()) as u64);
                }
                let tu = ctx.op_start();
                ctx.db.put(&key, &new)?;
                ctx.op_time(OpKind::Update, tu);
                ctx.stats.add_bytes(kv);
                ctx.op_done(OpKind::ReadModifyWrite, t);
            }
        }
        if read > 0 {
            ctx.stats.set_found(found, read);
        }
        Ok(())
    }

    fn total_ops(&self, c: &BenchConfig) -> u64 {
        c.operation_count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_sum_to_one() {
        for n in NAMES {
            let (m, _) = spec(n).unwrap();
            let sum = m.read + m.update + m.insert + m.scan + m.rmw;
            assert!((sum - 1.0).abs() < 1e-12, "{n}");
        }
        assert_eq!(spec("ycsb_d").unwrap().1, DistributionKind::Latest);
        assert!(spec("ycsb_z").is_none());
    }

    #[test]
    fn shares_cover_the_total() {
        for (total, threads) in [(10, 3), (0, 2), (7, 7), (1_000_003, 4)] {
            let s: u64 = (0..threads).map(|t| share(total, t, threads)).sum();
            assert_eq!(s, total);
        }
    }

    #[test]
    fn load_order_is_a_permutation() {
        for n in [1u64, 2, 10, 1000, 1024, 999_983] {
            let step = coprime_step(n);
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let k = ((i as u128 * step as u128) % n as u128) as usize;
                assert!(!seen[k]);
                seen[k] = true;
            }
            if n > 100 {
                // Not sequential.
                assert_ne!(step, 1);
            }
        }
    }
}
