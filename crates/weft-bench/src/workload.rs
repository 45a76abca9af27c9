//! The benchmark registry and the db_bench workloads.
//!
//! A workload is a [`Workload`] value; [`REGISTRY`] maps `--benchmarks`
//! names to constructors. Adding YCSB or the papers' workloads later means
//! adding an entry, not touching the runner.

use std::sync::atomic::{AtomicBool, Ordering};

use weft::{Db, ReadOptions, WriteOptions};

use crate::config::BenchConfig;
use crate::keygen::{generate_key_from_int, KeyGenerator, Sequential, Uniform, ValueGenerator};
use crate::report::ThreadStats;
use crate::Result;

/// Everything one thread of one benchmark owns.
pub struct ThreadContext<'a> {
    /// Thread index within this benchmark, `0..threads`.
    pub tid: usize,
    /// This thread's seed; distinct per thread and per benchmark.
    pub seed: u64,
    /// The shared database.
    pub db: &'a Db,
    /// The run's flags.
    pub config: &'a BenchConfig,
    /// Counters the report is built from.
    pub stats: ThreadStats,
    /// Set when another thread failed: stop early.
    stop: &'a AtomicBool,
}

impl<'a> ThreadContext<'a> {
    /// A context; the clock starts now.
    pub fn new(
        tid: usize,
        seed: u64,
        db: &'a Db,
        config: &'a BenchConfig,
        stop: &'a AtomicBool,
    ) -> Self {
        ThreadContext {
            tid,
            seed,
            db,
            config,
            stats: ThreadStats::start(),
            stop,
        }
    }

    /// True when the run is being aborted (another thread failed).
    pub fn should_stop(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// One benchmark. `run_thread` is called once per thread, concurrently, on a
/// shared database; it does that thread's whole share of the operations.
pub trait Workload: Send + Sync {
    /// Runs one thread's operations, counting them in `ctx.stats`.
    fn run_thread(&self, ctx: &mut ThreadContext<'_>) -> Result<()>;
}

/// A registry entry.
pub struct BenchmarkInfo {
    /// The `--benchmarks` name.
    pub name: &'static str,
    /// One line for `--help`-style listings.
    pub description: &'static str,
    /// db_bench's `fresh_db`: the benchmark starts from an empty database
    /// (the runner wipes and reopens it) and is skipped with
    /// `--use_existing_db`.
    pub fresh_db: bool,
    /// Builds the workload.
    pub make: fn(&BenchConfig) -> Box<dyn Workload>,
}

/// Every benchmark this build knows, in db_bench's naming.
pub static REGISTRY: &[BenchmarkInfo] = &[
    BenchmarkInfo {
        name: "fillseq",
        description: "write num values in sequential key order",
        fresh_db: true,
        make: |_| {
            Box::new(Fill {
                order: Order::Sequential,
            })
        },
    },
    BenchmarkInfo {
        name: "fillrandom",
        description: "write num values in random key order",
        fresh_db: true,
        make: |_| {
            Box::new(Fill {
                order: Order::Random,
            })
        },
    },
    BenchmarkInfo {
        name: "overwrite",
        description: "overwrite num values in random key order",
        fresh_db: false,
        make: |_| {
            Box::new(Fill {
                order: Order::Random,
            })
        },
    },
    BenchmarkInfo {
        name: "readrandom",
        description: "read reads random keys of 0..num, counting those found",
        fresh_db: false,
        make: |_| Box::new(ReadRandom),
    },
    BenchmarkInfo {
        name: "readseq",
        description: "scan forward over up to reads entries",
        fresh_db: false,
        make: |_| Box::new(ReadSeq),
    },
    BenchmarkInfo {
        name: "seekrandom",
        description: "reads seeks to random keys, each followed by seek_nexts nexts",
        fresh_db: false,
        make: |_| Box::new(SeekRandom),
    },
];

/// Looks a benchmark up by name.
pub fn find(name: &str) -> Option<&'static BenchmarkInfo> {
    REGISTRY.iter().find(|b| b.name == name)
}

#[derive(Debug, Clone, Copy)]
enum Order {
    Sequential,
    Random,
}

/// fillseq, fillrandom, overwrite: `num` puts per thread.
struct Fill {
    order: Order,
}

impl Workload for Fill {
    fn run_thread(&self, ctx: &mut ThreadContext<'_>) -> Result<()> {
        let cfg = ctx.config;
        let mut keys: Box<dyn KeyGenerator> = match self.order {
            Order::Sequential => Box::new(Sequential::new(cfg.num)),
            Order::Random => Box::new(Uniform::new(cfg.num, ctx.seed)),
        };
        let mut values = ValueGenerator::new(cfg.value_size, ctx.seed);
        let opts = WriteOptions::new().sync(cfg.sync);
        let mut key = vec![0u8; cfg.key_size];
        let per_op = (cfg.key_size + cfg.value_size) as u64;
        for _ in 0..cfg.num {
            if ctx.should_stop() {
                break;
            }
            generate_key_from_int(keys.next_key(), &mut key);
            ctx.db
                .put_opt(&key, values.generate(cfg.value_size), &opts)?;
            ctx.stats.add_bytes(per_op);
            ctx.stats.finished_ops(1);
        }
        Ok(())
    }
}

/// readrandom: `reads` point lookups of random keys in `0..num`.
struct ReadRandom;

impl Workload for ReadRandom {
    fn run_thread(&self, ctx: &mut ThreadContext<'_>) -> Result<()> {
        let cfg = ctx.config;
        let mut keys = Uniform::new(cfg.num, ctx.seed);
        let mut key = vec![0u8; cfg.key_size];
        let (mut read, mut found) = (0u64, 0u64);
        for _ in 0..cfg.reads() {
            if ctx.should_stop() {
                break;
            }
            generate_key_from_int(keys.next_key(), &mut key);
            read += 1;
            if let Some(v) = ctx.db.get(&key)? {
                found += 1;
                ctx.stats.add_bytes((key.len() + v.len()) as u64);
            }
            ctx.stats.finished_ops(1);
        }
        ctx.stats.set_found(found, read);
        Ok(())
    }
}

/// readseq: one forward scan from the first key over up to `reads` entries.
struct ReadSeq;

impl Workload for ReadSeq {
    fn run_thread(&self, ctx: &mut ThreadContext<'_>) -> Result<()> {
        let reads = ctx.config.reads();
        let mut it = ctx.db.iter(&ReadOptions::new())?;
        it.seek_to_first()?;
        let mut n = 0u64;
        while n < reads && it.valid() && !ctx.should_stop() {
            ctx.stats
                .add_bytes((it.key().len() + it.value().len()) as u64);
            ctx.stats.finished_ops(1);
            n += 1;
            it.next()?;
        }
        Ok(())
    }
}

/// seekrandom: `reads` seeks to random keys in `0..num`, each followed by
/// `seek_nexts` nexts. A seek is "found" when it lands on the exact key.
struct SeekRandom;

impl Workload for SeekRandom {
    fn run_thread(&self, ctx: &mut ThreadContext<'_>) -> Result<()> {
        let cfg = ctx.config;
        let mut keys = Uniform::new(cfg.num, ctx.seed);
        let mut key = vec![0u8; cfg.key_size];
        let (mut read, mut found) = (0u64, 0u64);
        for _ in 0..cfg.reads() {
            if ctx.should_stop() {
                break;
            }
            generate_key_from_int(keys.next_key(), &mut key);
            // A new iterator per seek, as db_bench does without a tailing
            // iterator: each seek sees the latest data.
            let mut it = ctx.db.iter(&ReadOptions::new())?;
            it.seek(&key)?;
            read += 1;
            if it.valid() && it.key() == key.as_slice() {
                found += 1;
            }
            let mut j = 0;
            while j < cfg.seek_nexts && it.valid() {
                ctx.stats
                    .add_bytes((it.key().len() + it.value().len()) as u64);
                it.next()?;
                j += 1;
            }
            ctx.stats.finished_ops(1);
        }
        ctx.stats.set_found(found, read);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_has_the_db_bench_set() {
        for name in crate::config::DEFAULT_BENCHMARKS {
            let b = find(name).unwrap_or_else(|| panic!("{name} missing"));
            let _ = (b.make)(&BenchConfig::default());
            assert!(!b.description.is_empty());
        }
        assert!(find("fillseq").unwrap().fresh_db);
        assert!(find("fillrandom").unwrap().fresh_db);
        assert!(!find("overwrite").unwrap().fresh_db);
        assert!(find("nosuch").is_none());
        let mut names: Vec<_> = REGISTRY.iter().map(|b| b.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), REGISTRY.len());
    }
}
