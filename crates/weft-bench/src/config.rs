//! [`BenchConfig`]: the db_bench flags, parsed by the CLI and passed in.
//!
//! Defaults are db_bench's so that a command line copied from a RocksDB
//! benchmark script means the same thing here. The CLI's "quick" mode (no
//! flags at all) is [`BenchConfig::quick`].

use std::path::PathBuf;

use weft::MemtableKind;

use crate::dist::DistributionKind;

/// The benchmarks run when `--benchmarks` is not given, in order.
pub const DEFAULT_BENCHMARKS: &[&str] = &[
    "fillseq",
    "fillrandom",
    "overwrite",
    "readrandom",
    "readseq",
    "seekrandom",
];

/// Keys used by the quick built-in workload ([`BenchConfig::quick`]).
pub const QUICK_NUM: u64 = 200_000;

/// Everything one `weft bench` run needs. Field names follow db_bench's flags.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchConfig {
    /// `--benchmarks`: names run in order, against one database directory.
    pub benchmarks: Vec<String>,
    /// `--num`: keys in the key space; operations per thread for writes.
    /// Default 1 000 000.
    pub num: u64,
    /// `--reads`: operations per thread for read benchmarks; `None` = `num`
    /// (db_bench's `-1`).
    pub reads: Option<u64>,
    /// `--writes`: operations per thread for write benchmarks (fillseq,
    /// fillrandom, overwrite, deleterandom); `None` = `num` (db_bench's
    /// `-1`). With `--writes=num/threads` every thread count does the same
    /// total work, as `bench/scaling` needs.
    pub writes: Option<u64>,
    /// `--key_size`: bytes per key. Default 16.
    pub key_size: usize,
    /// `--value_size`: bytes per value. Default 100.
    pub value_size: usize,
    /// `--compression_type`: how every engine compresses (Weft: every
    /// layer, unless a per-layer flag says otherwise). Default none, where
    /// db_bench's is snappy: pass it to both (as `bench/compare` does).
    pub compression_type: weft::Compression,
    /// `--compression_ratio`: each generated value compresses to about this
    /// share of its size, as db_bench generates them (random runs of
    /// `ratio × 100` bytes, each repeated to fill 100). Default 0.5.
    pub compression_ratio: f64,
    /// `--threads`: concurrent threads per benchmark, each doing the full
    /// operation count (as db_bench). Default 1.
    pub threads: usize,
    /// `--write_buffer_size`: memtable size in bytes. Default 64 MiB.
    pub write_buffer_size: usize,
    /// `--seek_nexts`: `next` calls after each seek in `seekrandom`. Default 0.
    pub seek_nexts: usize,
    /// `--sync`: fdatasync every write. Default false.
    pub sync: bool,
    /// `--readwritepercent`: in `readrandomwriterandom`, the percentage of
    /// operations that are reads (the rest are writes). Default 90
    /// (db_bench's).
    pub readwritepercent: u32,
    /// `--transactions` (or db_bench's `--optimistic_transaction_db`):
    /// `readrandomwriterandom` runs its operations inside optimistic
    /// transactions (reads with `get_for_update`, writes with `put`, then
    /// commit, retried on conflict). Default false.
    pub transactions: bool,
    /// `--ops_per_transaction`: with `--transactions`, operations grouped
    /// in each transaction. Default 1.
    pub ops_per_transaction: usize,
    /// `--keyspaces`: with N ≥ 1, Weft's keys are spread over N keyspaces
    /// (`bench0`, `bench1`, …), each operation going to the keyspace its
    /// key hashes to, so every benchmark's data is the same in total and
    /// reads find what the fills wrote; a range delete covers its range in
    /// every keyspace (one batch). Scans walk one keyspace: their start
    /// key's (`seekrandom`, YCSB E), or the first one (`readseq`,
    /// `readreverse`), so they see about 1/N of the keys. 0 (the default)
    /// uses the plain `Db` API (the default keyspace). Other engines refuse
    /// N ≥ 1.
    pub keyspaces: usize,
    /// `--db`: the database directory.
    pub db: PathBuf,
    /// `--use_existing_db`: keep the directory's contents; fill benchmarks are
    /// then skipped (as db_bench does). Default false: the directory is wiped.
    pub use_existing_db: bool,
    /// `--memtable`: memtable implementation. Default skiplist.
    pub memtable: MemtableKind,
    /// `--seed`: base of the per-thread random seeds; 0 = derive one from the
    /// clock and print it (as db_bench does).
    pub seed: u64,
    /// `--cache_size`: block cache bytes (every engine's read cache).
    /// Default 8 MiB, RocksDB 7.8 db_bench's default.
    pub cache_size: usize,
    /// `--bloom_bits`: bloom filter bits per key; `None` (db_bench's `-1`)
    /// keeps each engine's default.
    pub bloom_bits: Option<usize>,
    /// `--disable_wal`: accepted for command-line compatibility; Weft always
    /// keeps its WAL, and the run prints a warning saying so.
    pub disable_wal: bool,
    /// `--histogram`: time every operation and print db_bench's latency
    /// block per benchmark (YCSB benchmarks always time operations).
    pub histogram: bool,
    /// Weft's store knobs (`--partition_size` …); `None` keeps the engine's
    /// default.
    pub store: StoreKnobs,
    /// `--engine`: the store under test. Default `weft`.
    pub engine: String,
    /// `--record_count`: YCSB records loaded by `ycsb_load` (in total, over
    /// all threads, as YCSB); `None` = `num`.
    pub record_count: Option<u64>,
    /// `--operation_count`: YCSB operations per workload (in total); `None`
    /// = `reads`.
    pub operation_count: Option<u64>,
    /// `--field_count`: YCSB fields per record. Default 10.
    pub field_count: usize,
    /// `--field_length`: bytes per YCSB field. Default 100.
    pub field_length: usize,
    /// `--distribution`: request distribution of every YCSB workload; `None`
    /// = each workload's YCSB default (latest for D, zipfian otherwise).
    pub distribution: Option<DistributionKind>,
    /// `--zipf_theta`: the Zipfian constant θ. Default 0.99 (YCSB's).
    pub zipf_theta: f64,
    /// `--max_scan_length`: YCSB E scans 1..=this many entries. Default 100.
    pub max_scan_length: u64,
    /// The analytics workload's flags (`--analytics_apps` …).
    pub analytics: AnalyticsKnobs,
    /// `--json`: also write the results to this file.
    pub json: Option<PathBuf>,
    /// `--runs`: repeat the benchmark list this many times and report each
    /// benchmark's median run. Default 1.
    pub runs: usize,
    /// `--progress`: a progress bar on stderr, shown only when stderr is a
    /// terminal. Default true.
    pub progress: bool,
    /// The command line, printed with the results and stored in the JSON.
    pub command: Vec<String>,
}

/// The analytics workload's flags ([`crate::analytics`]), by their names
/// without the `analytics_` prefix.
#[derive(Debug, Clone, PartialEq)]
pub struct AnalyticsKnobs {
    /// `--analytics_apps`: distinct app ids events are spread over.
    /// Default 10 000. At most [`AnalyticsKnobs::MAX_APPS`]: the popularity
    /// table holds one `f64` per app.
    pub apps: u64,
    /// `--analytics_theta`: the Zipf exponent of app popularity (any
    /// θ > 0; unlike YCSB's generator, θ ≥ 1 is allowed). Default 1.35: the
    /// top 1 % of 10 000 apps then carry about 86 % of the events, and of
    /// 60 000 apps (the paper's trace) about 93 %, against the 94 % EvenDB
    /// reports for its production feed.
    pub theta: f64,
    /// `--analytics_scan_percent`: share of the scan phase's operations
    /// that are scans, the rest being puts of new events. Default 95, as
    /// EvenDB's §5.2.
    pub scan_percent: f64,
    /// `--analytics_scan_len`: most events one scan reads. Default 100.
    pub scan_len: u64,
    /// `--analytics_window`: a scan starts this many timestamps before
    /// "now". Timestamps count events (one tick per event of the stream), so
    /// this is the last N events of the stream, of which a popular app's
    /// share is its own. Default 100 000 (at the paper's ~13M events a
    /// minute, about half a second of its feed).
    pub window: u64,
}

impl AnalyticsKnobs {
    /// Largest `--analytics_apps` (2²⁴: a 128 MiB popularity table).
    pub const MAX_APPS: u64 = 1 << 24;
}

impl Default for AnalyticsKnobs {
    fn default() -> Self {
        AnalyticsKnobs {
            apps: 10_000,
            theta: 1.35,
            scan_percent: 95.0,
            scan_len: 100,
            window: 100_000,
        }
    }
}

/// Weft's store knobs as bench flags of the same names (see
/// [`weft::Options`]); `None` keeps the engine default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoreKnobs {
    /// `--partition_size`.
    pub partition_size: Option<u64>,
    /// `--unsorted_limit`.
    pub unsorted_limit: Option<u64>,
    /// `--min_blob_size`.
    pub min_blob_size: Option<usize>,
    /// `--scan_merge_limit`.
    pub scan_merge_limit: Option<usize>,
    /// `--gc_garbage_ratio`.
    pub gc_garbage_ratio: Option<f64>,
    /// `--gc_min_garbage_bytes`.
    pub gc_min_garbage_bytes: Option<u64>,
    /// `--max_value_logs`.
    pub max_value_logs: Option<usize>,
    /// `--mmap_read` ([`weft::Options::mmap_reads`]).
    pub mmap_read: Option<bool>,
    /// `--values_in_wal` ([`weft::Options::values_in_wal`]).
    pub values_in_wal: Option<bool>,
    /// `--max_background_jobs` ([`weft::Options::background_jobs`]).
    pub max_background_jobs: Option<usize>,
    /// `--rate_limiter_bytes_per_sec` ([`weft::Options::background_write_rate`]).
    pub rate_limiter_bytes_per_sec: Option<u64>,
    /// `--row_cache_size` ([`weft::Options::row_cache_size`]): bytes of
    /// values cached by key; 0 = off.
    pub row_cache_size: Option<usize>,
    /// `--munk_cache_size` ([`weft::Options::munk_cache_size`]): bytes of
    /// hot partitions held in memory; 0 = off.
    pub munk_cache_size: Option<usize>,
    /// `--unsorted_compression` ([`weft::Options::unsorted_compression`]),
    /// over `--compression_type`.
    pub unsorted_compression: Option<weft::Compression>,
    /// `--sorted_compression` ([`weft::Options::sorted_compression`]), over
    /// `--compression_type`.
    pub sorted_compression: Option<weft::Compression>,
    /// `--value_log_compression` ([`weft::Options::value_log_compression`]),
    /// over `--compression_type`.
    pub value_log_compression: Option<weft::Compression>,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            benchmarks: DEFAULT_BENCHMARKS.iter().map(|s| s.to_string()).collect(),
            num: 1_000_000,
            reads: None,
            writes: None,
            key_size: 16,
            value_size: 100,
            compression_type: weft::Compression::None,
            compression_ratio: 0.5,
            threads: 1,
            write_buffer_size: 64 << 20,
            seek_nexts: 0,
            sync: false,
            readwritepercent: 90,
            transactions: false,
            ops_per_transaction: 1,
            keyspaces: 0,
            db: PathBuf::from("./weft-data/bench"),
            use_existing_db: false,
            memtable: MemtableKind::default(),
            seed: 0,
            cache_size: 8 << 20,
            bloom_bits: None,
            disable_wal: false,
            histogram: false,
            store: StoreKnobs::default(),
            engine: "weft".to_string(),
            record_count: None,
            operation_count: None,
            field_count: 10,
            field_length: 100,
            distribution: None,
            zipf_theta: crate::dist::ZIPFIAN_CONSTANT,
            max_scan_length: 100,
            analytics: AnalyticsKnobs::default(),
            json: None,
            runs: 1,
            progress: true,
            command: Vec::new(),
        }
    }
}

impl BenchConfig {
    /// The quick built-in workload: the default benchmark list on
    /// [`QUICK_NUM`] keys, small enough to finish in seconds.
    pub fn quick() -> Self {
        BenchConfig {
            num: QUICK_NUM,
            ..BenchConfig::default()
        }
    }

    /// Read operations per thread (`--reads`, or `--num` when unset).
    pub fn reads(&self) -> u64 {
        self.reads.unwrap_or(self.num)
    }

    /// Write operations per thread (`--writes`, or `--num` when unset).
    pub fn writes(&self) -> u64 {
        self.writes.unwrap_or(self.num)
    }

    /// YCSB records (`--record_count`, or `--num`).
    pub fn record_count(&self) -> u64 {
        self.record_count.unwrap_or(self.num)
    }

    /// YCSB operations per workload (`--operation_count`, or `--reads`).
    pub fn operation_count(&self) -> u64 {
        self.operation_count.unwrap_or_else(|| self.reads())
    }

    /// Bytes of one YCSB record.
    pub fn record_size(&self) -> usize {
        self.field_count * self.field_length
    }

    /// Checks values the engine would not catch itself.
    pub fn validate(&self) -> Result<(), String> {
        if self.key_size == 0 {
            return Err("--key_size must be at least 1".into());
        }
        if self.threads == 0 {
            return Err("--threads must be at least 1".into());
        }
        if self.benchmarks.is_empty() {
            return Err("--benchmarks is empty".into());
        }
        if self.keyspaces > 0 && self.engine != "weft" {
            return Err(format!(
                "--keyspaces is a Weft feature; the {} engine has none",
                self.engine
            ));
        }
        if self.readwritepercent > 100 {
            return Err("--readwritepercent must be in 0..=100".into());
        }
        if self.ops_per_transaction == 0 {
            return Err("--ops_per_transaction must be at least 1".into());
        }
        if self.sync && self.disable_wal {
            return Err("--sync needs the WAL: it cannot be combined with --disable_wal".into());
        }
        if self.runs == 0 {
            return Err("--runs must be at least 1".into());
        }
        if !(self.compression_ratio > 0.0 && self.compression_ratio <= 1.0) {
            return Err("--compression_ratio must be in (0, 1]".into());
        }
        if !(self.zipf_theta > 0.0 && self.zipf_theta < 1.0) {
            return Err("--zipf_theta must be in (0, 1)".into());
        }
        if self.max_scan_length == 0 {
            return Err("--max_scan_length must be at least 1".into());
        }
        let a = &self.analytics;
        if !(1..=AnalyticsKnobs::MAX_APPS).contains(&a.apps) {
            return Err(format!(
                "--analytics_apps must be in 1..={}",
                AnalyticsKnobs::MAX_APPS
            ));
        }
        if !(a.theta.is_finite() && a.theta > 0.0) {
            return Err("--analytics_theta must be a positive number".into());
        }
        if !(0.0..=100.0).contains(&a.scan_percent) {
            return Err("--analytics_scan_percent must be in 0..=100".into());
        }
        if a.scan_len == 0 {
            return Err("--analytics_scan_len must be at least 1".into());
        }
        if a.window == 0 {
            return Err("--analytics_window must be at least 1".into());
        }
        let analytics = self.benchmarks.iter().any(|b| b.starts_with("analytics"));
        if analytics && self.key_size < crate::analytics::KEY_BYTES {
            return Err(format!(
                "the analytics benchmarks need --key_size of at least {} (app id, \
                 timestamp, event id)",
                crate::analytics::KEY_BYTES
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_bench_defaults() {
        let c = BenchConfig::default();
        assert_eq!(c.num, 1_000_000);
        assert_eq!(c.reads, None);
        assert_eq!(c.reads(), 1_000_000);
        assert_eq!(c.key_size, 16);
        assert_eq!(c.value_size, 100);
        assert_eq!(c.threads, 1);
        assert_eq!(c.write_buffer_size, 64 << 20);
        assert_eq!(c.seek_nexts, 0);
        assert!(!c.sync);
        assert!(!c.use_existing_db);
        assert_eq!(c.memtable, MemtableKind::Teks);
        assert_eq!(
            c.benchmarks,
            [
                "fillseq",
                "fillrandom",
                "overwrite",
                "readrandom",
                "readseq",
                "seekrandom"
            ]
        );
        assert!(c.validate().is_ok());
    }

    #[test]
    fn quick_differs_only_in_num() {
        let q = BenchConfig::quick();
        assert_eq!(q.num, 200_000);
        assert_eq!(
            BenchConfig {
                num: 1_000_000,
                ..q
            },
            BenchConfig::default()
        );
    }

    #[test]
    fn reads_override() {
        let c = BenchConfig {
            reads: Some(7),
            ..BenchConfig::default()
        };
        assert_eq!(c.reads(), 7);
    }

    #[test]
    fn validate_rejects_nonsense() {
        let bad = [
            BenchConfig {
                key_size: 0,
                ..BenchConfig::default()
            },
            BenchConfig {
                threads: 0,
                ..BenchConfig::default()
            },
            BenchConfig {
                benchmarks: vec![],
                ..BenchConfig::default()
            },
            BenchConfig {
                benchmarks: vec!["analytics_ingest".into()],
                key_size: 12,
                ..BenchConfig::default()
            },
            BenchConfig {
                analytics: AnalyticsKnobs {
                    apps: 0,
                    ..AnalyticsKnobs::default()
                },
                ..BenchConfig::default()
            },
            BenchConfig {
                analytics: AnalyticsKnobs {
                    theta: 0.0,
                    ..AnalyticsKnobs::default()
                },
                ..BenchConfig::default()
            },
            BenchConfig {
                analytics: AnalyticsKnobs {
                    scan_percent: 101.0,
                    ..AnalyticsKnobs::default()
                },
                ..BenchConfig::default()
            },
            BenchConfig {
                analytics: AnalyticsKnobs {
                    scan_len: 0,
                    ..AnalyticsKnobs::default()
                },
                ..BenchConfig::default()
            },
        ];
        for c in bad {
            assert!(c.validate().is_err(), "{c:?}");
        }
    }
}
