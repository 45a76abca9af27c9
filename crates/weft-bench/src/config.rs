//! [`BenchConfig`]: the db_bench flags, parsed by the CLI and passed in.
//!
//! Defaults are db_bench's so that a command line copied from a RocksDB
//! benchmark script means the same thing here. The CLI's "quick" mode (no
//! flags at all) is [`BenchConfig::quick`].

use std::path::PathBuf;

use weft::MemtableKind;

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
    /// `--key_size`: bytes per key. Default 16.
    pub key_size: usize,
    /// `--value_size`: bytes per value. Default 100.
    pub value_size: usize,
    /// `--threads`: concurrent threads per benchmark, each doing the full
    /// operation count (as db_bench). Default 1.
    pub threads: usize,
    /// `--write_buffer_size`: memtable size in bytes. Default 64 MiB.
    pub write_buffer_size: usize,
    /// `--seek_nexts`: `next` calls after each seek in `seekrandom`. Default 0.
    pub seek_nexts: usize,
    /// `--sync`: fdatasync every write. Default false.
    pub sync: bool,
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
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            benchmarks: DEFAULT_BENCHMARKS.iter().map(|s| s.to_string()).collect(),
            num: 1_000_000,
            reads: None,
            key_size: 16,
            value_size: 100,
            threads: 1,
            write_buffer_size: 64 << 20,
            seek_nexts: 0,
            sync: false,
            db: PathBuf::from("./weft-data/bench"),
            use_existing_db: false,
            memtable: MemtableKind::default(),
            seed: 0,
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
        assert_eq!(c.memtable, MemtableKind::SkipList);
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
        ];
        for c in bad {
            assert!(c.validate().is_err(), "{c:?}");
        }
    }
}
