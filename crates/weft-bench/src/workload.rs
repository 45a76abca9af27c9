//! The benchmark registry and the db_bench workloads.
//!
//! A workload is a [`Workload`] value; [`REGISTRY`] maps `--benchmarks`
//! names to constructors. Adding YCSB or the papers' workloads later means
//! adding an entry, not touching the runner.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use crate::config::BenchConfig;
use crate::engine::Engine;
use crate::keygen::{generate_key_from_int, KeyGenerator, Sequential, Uniform, ValueGenerator};
use crate::report::{OpKind, ThreadStats};
use crate::Result;

/// State shared by every thread of a run, across benchmarks.
#[derive(Debug, Default)]
pub struct Shared {
    /// Operations finished by all threads of the current benchmark (in
    /// batches, for the progress bar).
    pub progress: AtomicU64,
    /// YCSB: keys `0..key_count` have been inserted (load, then D/E inserts).
    pub key_count: AtomicU64,
    /// Foreground threads of the current benchmark still running; the
    /// background writer of `readwhilewriting` stops when it reaches 0.
    pub readers_left: AtomicUsize,
    /// Analytics: the next timestamp of the event stream in this database
    /// (`analytics_ingest` leaves it at the events it wrote, the scan
    /// phase's puts advance it). 0 means unknown: the scan phase then
    /// recovers it from the data, as after `--use_existing_db`.
    pub analytics_clock: AtomicU64,
}

/// Everything one thread of one benchmark owns.
pub struct ThreadContext<'a> {
    /// Thread index within this benchmark, `0..threads` (the background
    /// writer of `readwhilewriting` is `threads`).
    pub tid: usize,
    /// This thread's seed; distinct per thread and per benchmark.
    pub seed: u64,
    /// The shared database.
    pub db: &'a dyn Engine,
    /// The run's flags.
    pub config: &'a BenchConfig,
    /// Counters the report is built from.
    pub stats: ThreadStats,
    /// Run-wide shared state.
    pub shared: &'a Shared,
    /// Set when another thread failed: stop early.
    stop: &'a AtomicBool,
    /// Time every operation (`--histogram`, or a YCSB benchmark).
    timing: bool,
    unreported: u64,
}

impl<'a> ThreadContext<'a> {
    /// A context; the clock starts now.
    pub fn new(
        tid: usize,
        seed: u64,
        db: &'a dyn Engine,
        config: &'a BenchConfig,
        shared: &'a Shared,
        stop: &'a AtomicBool,
        timing: bool,
    ) -> Self {
        ThreadContext {
            tid,
            seed,
            db,
            config,
            stats: ThreadStats::start(),
            shared,
            stop,
            timing,
            unreported: 0,
        }
    }

    /// True when the run is being aborted (another thread failed).
    pub fn should_stop(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Starts timing one operation (a no-op unless timing is on, so runs
    /// without `--histogram` pay no clock reads, as in db_bench).
    #[inline]
    pub fn op_start(&self) -> Option<Instant> {
        self.timing.then(Instant::now)
    }

    /// Records one operation's latency under `kind` (if timed), without
    /// counting it: for the parts of a compound operation (F's read and
    /// update).
    #[inline]
    pub fn op_time(&mut self, kind: OpKind, started: Option<Instant>) {
        if let Some(t) = started {
            self.stats
                .record_latency(kind, t.elapsed().as_nanos() as u64);
        }
    }

    /// Counts one finished operation of `kind`, timed from `started`.
    #[inline]
    pub fn op_done(&mut self, kind: OpKind, started: Option<Instant>) {
        self.op_time(kind, started);
        self.stats.finished_ops(1);
        self.stats.count_kind(kind, 1);
        self.unreported += 1;
        // Batched so the shared counter is not a contention point.
        if self.unreported >= 512 {
            self.flush_progress();
        }
    }

    /// Publishes this thread's unreported operation count.
    pub fn flush_progress(&mut self) {
        self.shared
            .progress
            .fetch_add(self.unreported, Ordering::Relaxed);
        self.unreported = 0;
    }
}

/// One benchmark. `run_thread` is called once per thread, concurrently, on a
/// shared database; it does that thread's whole share of the operations.
pub trait Workload: Send + Sync {
    /// Runs one thread's operations, counting them in `ctx.stats`.
    fn run_thread(&self, ctx: &mut ThreadContext<'_>) -> Result<()>;

    /// Operations all foreground threads will do, for the progress bar.
    fn total_ops(&self, c: &BenchConfig) -> u64 {
        c.writes() * c.threads as u64
    }

    /// True when the runner must add one background writer thread
    /// (`readwhilewriting`); its operations are not counted in the line.
    fn background_writer(&self) -> bool {
        false
    }

    /// True when the report should add one line per operation kind
    /// ([`crate::report::Summary::kind_lines`]): for mixes whose kinds are
    /// compared on their own (the analytics scan phase).
    fn split_by_kind(&self) -> bool {
        false
    }
}

fn reads_total(c: &BenchConfig) -> u64 {
    c.reads() * c.threads as u64
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
    /// Instead of a result line, print the engine's statistics (`stats`).
    pub prints_stats: bool,
    /// Time every operation whatever `--histogram` says (YCSB).
    pub always_timed: bool,
}

/// Every benchmark this build knows, in db_bench's naming.
pub static REGISTRY: &[BenchmarkInfo] = &[
    BenchmarkInfo {
        name: "fillseq",
        description: "write num values in sequential key order",
        fresh_db: true,
        prints_stats: false,
        always_timed: false,
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
        prints_stats: false,
        always_timed: false,
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
        prints_stats: false,
        always_timed: false,
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
        prints_stats: false,
        always_timed: false,
        make: |_| Box::new(ReadRandom),
    },
    BenchmarkInfo {
        name: "readseq",
        description: "scan forward over up to reads entries",
        fresh_db: false,
        prints_stats: false,
        always_timed: false,
        make: |_| Box::new(ReadSeq { reverse: false }),
    },
    BenchmarkInfo {
        name: "seekrandom",
        description: "reads seeks to random keys, each followed by seek_nexts nexts",
        fresh_db: false,
        prints_stats: false,
        always_timed: false,
        make: |_| Box::new(SeekRandom),
    },
    BenchmarkInfo {
        name: "readmissing",
        description: "read reads random keys that are never present",
        fresh_db: false,
        prints_stats: false,
        always_timed: false,
        make: |_| Box::new(ReadMissing),
    },
    BenchmarkInfo {
        name: "readreverse",
        description: "scan backward over up to reads entries",
        fresh_db: false,
        prints_stats: false,
        always_timed: false,
        make: |_| Box::new(ReadSeq { reverse: true }),
    },
    BenchmarkInfo {
        name: "readwhilewriting",
        description: "threads readrandom while one extra thread overwrites random keys",
        fresh_db: false,
        prints_stats: false,
        always_timed: false,
        make: |_| Box::new(ReadWhileWriting),
    },
    BenchmarkInfo {
        name: "readrandomwriterandom",
        description: "reads random keys of 0..num readwritepercent% of the time, else writes one \
                      (in optimistic transactions with --transactions)",
        fresh_db: false,
        prints_stats: false,
        always_timed: false,
        make: |_| Box::new(ReadRandomWriteRandom),
    },
    BenchmarkInfo {
        name: "deleterandom",
        description: "delete num random keys per thread",
        fresh_db: false,
        prints_stats: false,
        always_timed: false,
        make: |_| Box::new(DeleteRandom),
    },
    BenchmarkInfo {
        name: "deleterange",
        description:
            "delete every key of 0..num with one range delete (one operation, on one thread)",
        fresh_db: false,
        prints_stats: false,
        always_timed: false,
        make: |_| Box::new(DeleteRange),
    },
    BenchmarkInfo {
        name: "compact",
        description: "compact the whole key space (one operation, on one thread)",
        fresh_db: false,
        prints_stats: false,
        always_timed: false,
        make: |_| Box::new(Compact),
    },
    BenchmarkInfo {
        name: "stats",
        description: "print the engine's statistics",
        fresh_db: false,
        prints_stats: true,
        always_timed: false,
        make: |_| Box::new(Nothing),
    },
    crate::ycsb::info("ycsb_load"),
    crate::ycsb::info("ycsb_a"),
    crate::ycsb::info("ycsb_b"),
    crate::ycsb::info("ycsb_c"),
    crate::ycsb::info("ycsb_d"),
    crate::ycsb::info("ycsb_e"),
    crate::ycsb::info("ycsb_f"),
    crate::ycsb::info("ycsb_p"),
    crate::analytics::info("analytics_ingest"),
    crate::analytics::info("analytics_scan"),
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

/// fillseq, fillrandom, overwrite: `writes` puts per thread (keys of `0..num`).
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
        let mut values = ValueGenerator::new(cfg.value_size, ctx.seed, cfg.compression_ratio);
        let mut key = vec![0u8; cfg.key_size];
        let per_op = (cfg.key_size + cfg.value_size) as u64;
        for _ in 0..cfg.writes() {
            if ctx.should_stop() {
                break;
            }
            generate_key_from_int(keys.next_key(), &mut key);
            let t = ctx.op_start();
            ctx.db.put(&key, values.generate(cfg.value_size))?;
            ctx.stats.add_bytes(per_op);
            ctx.op_done(OpKind::Write, t);
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
            let t = ctx.op_start();
            if let Some(v) = ctx.db.get(&key)? {
                found += 1;
                ctx.stats.add_bytes((key.len() + v.len()) as u64);
            }
            ctx.op_done(OpKind::Read, t);
        }
        ctx.stats.set_found(found, read);
        Ok(())
    }

    fn total_ops(&self, c: &BenchConfig) -> u64 {
        reads_total(c)
    }
}

/// readrandomwriterandom (db_bench's): `reads` operations per thread, each
/// a read of a random key of `0..num` with probability `readwritepercent`
/// %, else a put of one. With `--transactions`, every
/// `ops_per_transaction` operations run in one optimistic transaction
/// (reads with `get_for_update`), committed and retried on conflict; the
/// line's operations are still the reads and writes, so the two runs
/// compare per operation.
struct ReadRandomWriteRandom;

impl Workload for ReadRandomWriteRandom {
    fn run_thread(&self, ctx: &mut ThreadContext<'_>) -> Result<()> {
        let cfg = ctx.config;
        let mut keys = Uniform::new(cfg.num, ctx.seed);
        let mut values = ValueGenerator::new(cfg.value_size, ctx.seed, cfg.compression_ratio);
        // Reads or writes, as db_bench draws them: a counter modulo 100
        // against the percentage would be periodic, so a seeded draw.
        let mut draw = Uniform::new(100, ctx.seed ^ 0x005E_ED0F_0001);
        let group = cfg.ops_per_transaction.max(1);
        let per_op = (cfg.key_size + cfg.value_size) as u64;
        let (mut read, mut found, mut conflicts) = (0u64, 0u64, 0u64);
        // One transaction's keys and values, reused between groups.
        let mut group_keys = vec![vec![0u8; cfg.key_size]; group];
        let mut group_values: Vec<Option<Vec<u8>>> = vec![None; group];
        let mut done = 0u64;
        let total = cfg.reads();
        while done < total {
            if ctx.should_stop() {
                break;
            }
            let n = (total - done).min(group as u64) as usize;
            if !cfg.transactions {
                // The plain run: one operation, nothing copied.
                generate_key_from_int(keys.next_key(), &mut group_keys[0]);
                let is_read = draw.next_key() < u64::from(cfg.readwritepercent);
                let t = ctx.op_start();
                if is_read {
                    read += 1;
                    found += u64::from(ctx.db.get(&group_keys[0])?.is_some());
                    ctx.op_done(OpKind::Read, t);
                } else {
                    ctx.db
                        .put(&group_keys[0], values.generate(cfg.value_size))?;
                    ctx.stats.add_bytes(per_op);
                    ctx.op_done(OpKind::Write, t);
                }
                done += 1;
                continue;
            }
            for i in 0..n {
                generate_key_from_int(keys.next_key(), &mut group_keys[i]);
                let is_read = draw.next_key() < u64::from(cfg.readwritepercent);
                match (is_read, &mut group_values[i]) {
                    (true, v) => *v = None,
                    (false, Some(v)) => {
                        v.clear();
                        v.extend_from_slice(values.generate(cfg.value_size));
                    }
                    (false, v) => *v = Some(values.generate(cfg.value_size).to_vec()),
                }
            }
            let t = ctx.op_start();
            {
                let ops: Vec<crate::engine::TxnOp<'_>> = (0..n)
                    .map(|i| match &group_values[i] {
                        None => crate::engine::TxnOp::Read(&group_keys[i]),
                        Some(v) => crate::engine::TxnOp::Write(&group_keys[i], v),
                    })
                    .collect();
                let (hits, retried) = ctx.db.transaction(&ops)?;
                found += hits;
                conflicts += retried;
            }
            for v in &group_values[..n] {
                let kind = match v {
                    None => {
                        read += 1;
                        OpKind::Read
                    }
                    Some(_) => {
                        ctx.stats.add_bytes(per_op);
                        OpKind::Write
                    }
                };
                // A group's operations share its time.
                ctx.op_done(kind, t);
            }
            done += n as u64;
        }
        ctx.stats.set_found(found, read);
        if conflicts > 0 {
            eprintln!(
                "readrandomwriterandom thread {}: {conflicts} conflicts retried",
                ctx.tid
            );
        }
        Ok(())
    }

    fn total_ops(&self, c: &BenchConfig) -> u64 {
        reads_total(c)
    }
}

/// readseq / readreverse: one scan from the first (last) key over up to
/// `reads` entries per thread, each entry one operation.
struct ReadSeq {
    reverse: bool,
}

impl Workload for ReadSeq {
    fn run_thread(&self, ctx: &mut ThreadContext<'_>) -> Result<()> {
        let reads = ctx.config.reads();
        let db = ctx.db;
        let mut bytes = 0u64;
        let t = ctx.op_start();
        let n = db.scan(None, self.reverse, reads, &mut |k, v| {
            bytes += (k.len() + v.len()) as u64;
        })?;
        ctx.stats.add_bytes(bytes);
        // One timed scan; its mean per entry is what the histogram shows.
        if let Some(t) = t {
            let per = t.elapsed().as_nanos() as u64 / n.max(1);
            for _ in 0..n {
                ctx.stats.record_latency(OpKind::Read, per);
            }
        }
        ctx.stats.finished_ops(n);
        ctx.stats.count_kind(OpKind::Read, n);
        ctx.shared.progress.fetch_add(n, Ordering::Relaxed);
        Ok(())
    }

    fn total_ops(&self, c: &BenchConfig) -> u64 {
        reads_total(c)
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
            // iterator: each seek sees the latest data. The entry sought is
            // visited, then `seek_nexts` more. Like db_bench, the first
            // `seek_nexts` entries are read: up to 256 bytes of each value
            // copied out (its `value_buffer`), so a value is never counted
            // without being touched.
            read += 1;
            let (mut i, mut bytes) = (0usize, 0u64);
            let mut value_buffer = [0u8; 256];
            let t = ctx.op_start();
            let db = ctx.db;
            db.scan(Some(&key), false, cfg.seek_nexts as u64 + 1, &mut |k, v| {
                if i == 0 && k == key.as_slice() {
                    found += 1;
                }
                if i < cfg.seek_nexts {
                    let n = v.len().min(value_buffer.len());
                    value_buffer[..n].copy_from_slice(&v[..n]);
                    std::hint::black_box(&value_buffer);
                    bytes += (k.len() + v.len()) as u64;
                }
                i += 1;
            })?;
            ctx.stats.add_bytes(bytes);
            ctx.op_done(OpKind::Seek, t);
        }
        ctx.stats.set_found(found, read);
        Ok(())
    }

    fn total_ops(&self, c: &BenchConfig) -> u64 {
        reads_total(c)
    }
}

/// readmissing: `reads` lookups of keys that cannot exist: the db_bench key
/// of a random index with one `'.'` appended (LevelDB's encoding for
/// misses), so every lookup goes through the filters and misses.
struct ReadMissing;

impl Workload for ReadMissing {
    fn run_thread(&self, ctx: &mut ThreadContext<'_>) -> Result<()> {
        let cfg = ctx.config;
        let mut keys = Uniform::new(cfg.num, ctx.seed);
        let mut key = vec![0u8; cfg.key_size + 1];
        key[cfg.key_size] = b'.';
        let (mut read, mut found) = (0u64, 0u64);
        for _ in 0..cfg.reads() {
            if ctx.should_stop() {
                break;
            }
            generate_key_from_int(keys.next_key(), &mut key[..cfg.key_size]);
            read += 1;
            let t = ctx.op_start();
            if ctx.db.get(&key)?.is_some() {
                found += 1;
            }
            ctx.op_done(OpKind::Read, t);
        }
        ctx.stats.set_found(found, read);
        Ok(())
    }

    fn total_ops(&self, c: &BenchConfig) -> u64 {
        reads_total(c)
    }
}

/// readwhilewriting: `threads` readers each do `readrandom`; one extra
/// thread (db_bench's `BGWriter`, unthrottled as with db_bench's default
/// `--benchmark_write_rate_limit=0`) overwrites random keys until the last
/// reader finishes. Only the readers' operations make the result line, as
/// db_bench reports the readers; the writer's count is in the JSON.
struct ReadWhileWriting;

impl Workload for ReadWhileWriting {
    fn run_thread(&self, ctx: &mut ThreadContext<'_>) -> Result<()> {
        if ctx.tid < ctx.config.threads {
            return ReadRandom.run_thread(ctx);
        }
        let cfg = ctx.config;
        let mut keys = Uniform::new(cfg.num, ctx.seed);
        let mut values = ValueGenerator::new(cfg.value_size, ctx.seed, cfg.compression_ratio);
        let mut key = vec![0u8; cfg.key_size];
        while ctx.shared.readers_left.load(Ordering::Acquire) > 0 && !ctx.should_stop() {
            generate_key_from_int(keys.next_key(), &mut key);
            ctx.db.put(&key, values.generate(cfg.value_size))?;
            ctx.stats.add_bytes((cfg.key_size + cfg.value_size) as u64);
            ctx.stats.finished_ops(1);
        }
        Ok(())
    }

    fn total_ops(&self, c: &BenchConfig) -> u64 {
        reads_total(c)
    }

    fn background_writer(&self) -> bool {
        true
    }
}

/// deleterandom: `writes` deletes of random keys of `0..num` per thread.
struct DeleteRandom;

impl Workload for DeleteRandom {
    fn run_thread(&self, ctx: &mut ThreadContext<'_>) -> Result<()> {
        let cfg = ctx.config;
        let mut keys = Uniform::new(cfg.num, ctx.seed);
        let mut key = vec![0u8; cfg.key_size];
        for _ in 0..cfg.writes() {
            if ctx.should_stop() {
                break;
            }
            generate_key_from_int(keys.next_key(), &mut key);
            let t = ctx.op_start();
            ctx.db.delete(&key)?;
            ctx.op_done(OpKind::Delete, t);
        }
        Ok(())
    }
}

/// `deleterange`: thread 0 deletes every key of `0..num` with one range
/// delete; other threads do nothing. Run with a smaller `--num` than the
/// fill's, it deletes the low part of the key space, and the readrandom
/// and seekrandom runs after it with the same `--num` read only the
/// deleted keys (before and after a `compact`), to set beside the same
/// reads before it, over live keys.
struct DeleteRange;

impl Workload for DeleteRange {
    fn run_thread(&self, ctx: &mut ThreadContext<'_>) -> Result<()> {
        if ctx.tid == 0 {
            let size = ctx.config.key_size;
            let (mut start, mut end) = (vec![0u8; size], vec![0u8; size]);
            generate_key_from_int(0, &mut start);
            generate_key_from_int(ctx.config.num, &mut end);
            let t = ctx.op_start();
            ctx.db.delete_range(&start, &end)?;
            ctx.op_done(OpKind::Delete, t);
        }
        Ok(())
    }

    fn total_ops(&self, _c: &BenchConfig) -> u64 {
        1
    }
}

/// `compact`: thread 0 compacts everything; other threads do nothing.
struct Compact;

impl Workload for Compact {
    fn run_thread(&self, ctx: &mut ThreadContext<'_>) -> Result<()> {
        if ctx.tid == 0 {
            let t = ctx.op_start();
            ctx.db.compact()?;
            ctx.op_done(OpKind::Write, t);
        }
        Ok(())
    }
    fn total_ops(&self, _: &BenchConfig) -> u64 {
        1
    }
}

/// `stats`: the runner prints statistics; no thread does anything.
struct Nothing;

impl Workload for Nothing {
    fn run_thread(&self, _: &mut ThreadContext<'_>) -> Result<()> {
        Ok(())
    }
    fn total_ops(&self, _: &BenchConfig) -> u64 {
        0
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
