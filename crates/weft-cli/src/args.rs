//! Command-line grammar (clap derive).
//!
//! `bench` flags are spelled as db_bench spells them (`--key_size`,
//! `--use_existing_db=true`, `--reads=-1`) so benchmark scripts can swap the
//! binary name and keep their arguments. Every bench flag is optional so we
//! can tell "no flags at all" (the quick built-in workload) from an explicit
//! db_bench-style run (db_bench's defaults).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use weft::MemtableKind;
use weft_bench::dist::DistributionKind;
use weft_bench::BenchConfig;

/// Default database directory of every command but `bench`.
pub const DEFAULT_DB: &str = "./weft-data";
/// Default directory of `weft bench` (kept apart from real data because a
/// bench run wipes its directory).
pub const DEFAULT_BENCH_DB: &str = "./weft-data/bench";

/// Weft: a persistent, ordered key-value store.
#[derive(Debug, Parser)]
#[command(name = "weft", version, about, propagate_version = true)]
pub struct Cli {
    /// Database directory [default: ./weft-data; for bench: ./weft-data/bench]
    #[arg(long, global = true, value_name = "DIR")]
    pub db: Option<PathBuf>,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Sets KEY to VALUE.
    Put {
        /// The key (raw bytes of the argument).
        #[arg(allow_hyphen_values = true)]
        key: OsString,
        /// The value (raw bytes of the argument).
        #[arg(allow_hyphen_values = true)]
        value: OsString,
    },
    /// Prints KEY's value and a newline; exits 1 if KEY is absent.
    Get {
        /// The key.
        #[arg(allow_hyphen_values = true)]
        key: OsString,
    },
    /// Deletes KEY (no error if absent).
    Delete {
        /// The key.
        #[arg(allow_hyphen_values = true)]
        key: OsString,
    },
    /// Deletes every key from START (inclusive) to END (exclusive) with
    /// one write (a range delete).
    DeleteRange {
        /// The first key deleted.
        #[arg(allow_hyphen_values = true)]
        start: OsString,
        /// The first key kept past the range.
        #[arg(allow_hyphen_values = true)]
        end: OsString,
    },
    /// Prints `key<TAB>value` lines in key order, bytes escaped as Rust's
    /// `escape_ascii` does.
    Scan(ScanArgs),
    /// Verifies every checksum of every live file; exits 2 on corruption.
    Check,
    /// Prints engine statistics.
    Stats {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Prints the change feed (committed batches, in sequence order) from
    /// SEQ: a `batch FIRST-LAST` line per batch, then one line per
    /// operation: `SEQ<TAB>put<TAB>KEYSPACE<TAB>key<TAB>value`,
    /// `SEQ<TAB>delete<TAB>KEYSPACE<TAB>key`,
    /// `SEQ<TAB>delete_range<TAB>KEYSPACE<TAB>start<TAB>end` (an empty end:
    /// to the keyspace's end), `SEQ<TAB>create_keyspace<TAB>NAME<TAB>ID<TAB>OPTIONS`,
    /// `SEQ<TAB>drop_keyspace<TAB>NAME` or `SEQ<TAB>registry` (the
    /// keyspace registry's bookkeeping); keys are a keyspace's own (no
    /// stored prefix), bytes escaped as `scan` escapes them, and a
    /// keyspace whose name the feed and the database no longer know is
    /// `#ID`. Batches are kept for the feed only while a hold needs them
    /// (`Db::hold_changes`); a SEQ no longer held is an error naming the
    /// oldest one held.
    Changes {
        /// First sequence to print.
        #[arg(long)]
        from: u64,
        /// Print at most this many batches.
        #[arg(long)]
        limit: Option<u64>,
    },
    /// Makes a consistent copy of the database (--db) in DEST, a new or
    /// empty directory: tables and logs hard-linked where DEST shares the
    /// file system, the latest writes copied up to one sequence. Prints
    /// the sequence and what was linked and copied. (A database a server
    /// holds open is copied with the server's SAVE.)
    Checkpoint {
        /// Destination directory (created; must not exist or be empty).
        dest: PathBuf,
    },
    /// Incremental backups: each backup a checkpoint, storing only the
    /// files no earlier backup in BACKUP_DIR stored.
    Backup {
        /// What to do.
        #[command(subcommand)]
        action: BackupAction,
    },
    /// Runs db_bench-compatible benchmarks (no flags: a quick built-in run).
    Bench(Box<BenchArgs>),
    /// Serves the database over the Redis protocol (RESP2/RESP3); prints
    /// `listening on ADDR:PORT` once bound; stops on SIGINT/SIGTERM.
    Serve(ServeArgs),
}

/// `weft backup` subcommands.
#[derive(Debug, Subcommand)]
pub enum BackupAction {
    /// Backs the database (--db) up into BACKUP_DIR (created if missing);
    /// prints the backup's id, sequence and what it copied.
    Create {
        /// The backup directory.
        backup_dir: PathBuf,
    },
    /// Lists the backups in BACKUP_DIR, oldest first: a header line, then
    /// `ID<TAB>CREATED<TAB>SEQUENCE<TAB>FILES<TAB>BYTES<TAB>NEW_BYTES` per
    /// backup (CREATED in seconds since the Unix epoch; NEW_BYTES what
    /// making it copied).
    List {
        /// The backup directory.
        backup_dir: PathBuf,
    },
    /// Restores backup ID into DEST (a new or empty directory), checking
    /// every file's checksum; exits 2 if a backup file is corrupt.
    Restore {
        /// The backup directory.
        backup_dir: PathBuf,
        /// The backup to restore (`list` shows them).
        id: u64,
        /// Destination directory.
        dest: PathBuf,
    },
    /// Deletes backup ID and the files no other backup needs.
    Delete {
        /// The backup directory.
        backup_dir: PathBuf,
        /// The backup to delete.
        id: u64,
    },
    /// Deletes the oldest backups, keeping the newest KEEP.
    Purge {
        /// The backup directory.
        backup_dir: PathBuf,
        /// How many of the newest backups to keep.
        #[arg(long)]
        keep: usize,
    },
}

/// `weft serve` options.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    /// TCP port; 0 picks a free one.
    #[arg(long, default_value_t = 6379)]
    pub port: u16,
    /// Data directory [default: --db, or ./weft-data]
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Where SAVE and BGSAVE write their checkpoint (the newest is kept)
    /// [default: DIR-checkpoints beside the data directory]
    #[arg(long = "save-dir", value_name = "DIR")]
    pub save_dir: Option<PathBuf>,
    /// When acknowledged writes reach the disk: always (fsync before each
    /// reply), everysec (background fsync every second), no.
    #[arg(long, default_value = "everysec", value_parser = parse_sync)]
    pub sync: weft_server::SyncMode,
    /// Most simultaneous clients.
    #[arg(long, default_value_t = 10_000)]
    pub maxclients: usize,
    /// Close clients idle for this many seconds (0 = never).
    #[arg(long, default_value_t = 0)]
    pub timeout: u64,
    /// Longest bulk string accepted, in bytes (Redis's proto-max-bulk-len).
    #[arg(long = "max-bulk-len", default_value_t = 512 << 20)]
    pub max_bulk_len: usize,
    /// Most bytes one incomplete request may hold (Redis's
    /// client-query-buffer-limit).
    #[arg(long = "max-query-buffer", default_value_t = 1 << 30)]
    pub max_query_buffer: usize,
    /// Memtable implementation [default: the engine's]
    #[arg(long, value_parser = parse_memtable)]
    pub memtable: Option<MemtableKind>,
    /// Event-loop threads serving the connections [default: half the
    /// cores, at least 1]
    #[arg(long)]
    pub threads: Option<usize>,
    /// Microseconds an event loop keeps polling after a wake-up that found
    /// work before it sleeps (0: sleep at once) [default: 50]
    #[arg(long = "busy-poll-us")]
    pub busy_poll_us: Option<u64>,
    /// Password clients must give (AUTH, HELLO ... AUTH) before any other
    /// command [default: none]. A server bound beyond loopback without one
    /// warns at start.
    #[arg(long, value_name = "PASSWORD")]
    pub requirepass: Option<String>,
    /// Start as a replica of the primary at HOST PORT (Redis's
    /// `replicaof`; `REPLICAOF` changes it at run time) [default: a
    /// primary]
    #[arg(long, num_args = 1..=2, value_names = ["HOST", "PORT"])]
    pub replicaof: Option<Vec<String>>,
    /// Password a replica gives its primary when the primary has
    /// --requirepass (Redis's `masterauth`; `CONFIG SET masterauth`
    /// changes it) [default: none]
    #[arg(long, value_name = "PASSWORD")]
    pub masterauth: Option<String>,
    /// Databases SELECT chooses among, as Redis's `databases`; database n
    /// (n >= 1) is the engine keyspace "db<n>", made on its first write
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub databases: u32,
    /// Keyspace notifications to publish, as Redis's
    /// `notify-keyspace-events`: class letters from `Ag$lshzxeKEtmdn`
    /// (e.g. `KEA`) [default: none]
    #[arg(long = "notify-keyspace-events", value_name = "CLASSES", value_parser = parse_notify)]
    pub notify_keyspace_events: Option<u32>,
}

fn parse_notify(s: &str) -> Result<u32, String> {
    weft_server::notify::parse(s.as_bytes()).ok_or_else(|| weft_server::notify::INVALID.to_string())
}

fn parse_sync(s: &str) -> Result<weft_server::SyncMode, String> {
    s.parse()
}

/// `weft scan` options.
#[derive(Debug, Args)]
pub struct ScanArgs {
    /// First key (inclusive).
    #[arg(long, allow_hyphen_values = true)]
    pub start: Option<OsString>,
    /// Key to stop before (exclusive).
    #[arg(long, allow_hyphen_values = true)]
    pub end: Option<OsString>,
    /// Only keys starting with this prefix.
    #[arg(long, allow_hyphen_values = true)]
    pub prefix: Option<OsString>,
    /// Print at most this many pairs.
    #[arg(long)]
    pub limit: Option<u64>,
    /// Scan from the last key backwards.
    #[arg(long)]
    pub reverse: bool,
}

/// `weft bench` flags, named as db_bench names them.
#[derive(Debug, Default, Clone, PartialEq, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    /// `weft bench plot`: charts from JSON results.
    #[command(subcommand)]
    pub action: Option<BenchAction>,
    /// Comma-separated benchmarks, run in order
    /// [default: fillseq,fillrandom,overwrite,readrandom,readseq,seekrandom]
    #[arg(long, value_delimiter = ',')]
    pub benchmarks: Option<Vec<String>>,
    /// Keys in the key space; writes per thread [default: 1000000, or 200000
    /// when no flag is given]
    #[arg(long)]
    pub num: Option<u64>,
    /// Reads per thread; negative = num [default: num]
    #[arg(long, allow_negative_numbers = true)]
    pub reads: Option<i64>,
    /// Writes per thread for fill, overwrite and delete benchmarks;
    /// negative = num [default: num]
    #[arg(long, allow_negative_numbers = true)]
    pub writes: Option<i64>,
    /// Key size in bytes [default: 16]
    #[arg(long = "key_size")]
    pub key_size: Option<usize>,
    /// Value size in bytes [default: 100]
    #[arg(long = "value_size")]
    pub value_size: Option<usize>,
    /// Compression of every layer (and of the peer engine): none, lz4,
    /// zstd or zstd:LEVEL [default: none]
    #[arg(long = "compression_type", value_parser = parse_compression)]
    pub compression_type: Option<weft::Compression>,
    /// Generated values compress to about this share of their size, as
    /// db_bench's do [default: 0.5]
    #[arg(long = "compression_ratio")]
    pub compression_ratio: Option<f64>,
    /// Weft: compression of UnsortedStore tables, over --compression_type
    #[arg(long = "unsorted_compression", value_parser = parse_compression)]
    pub unsorted_compression: Option<weft::Compression>,
    /// Weft: compression of SortedStore tables, over --compression_type
    #[arg(long = "sorted_compression", value_parser = parse_compression)]
    pub sorted_compression: Option<weft::Compression>,
    /// Weft: compression of values in value logs, over --compression_type
    #[arg(long = "value_log_compression", value_parser = parse_compression)]
    pub value_log_compression: Option<weft::Compression>,
    /// Threads, each doing the full operation count [default: 1]
    #[arg(long)]
    pub threads: Option<usize>,
    /// Memtable size in bytes [default: 67108864]
    #[arg(long = "write_buffer_size")]
    pub write_buffer_size: Option<usize>,
    /// Nexts after each seek in seekrandom [default: 0]
    #[arg(long = "seek_nexts")]
    pub seek_nexts: Option<usize>,
    /// fdatasync every write (`--sync`, `--sync=true|false|1|0`) [default: false]
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub sync: Option<bool>,
    /// readrandomwriterandom: percentage of operations that are reads [default: 90]
    #[arg(long = "readwritepercent")]
    pub readwritepercent: Option<u32>,
    /// readrandomwriterandom inside optimistic transactions (get_for_update,
    /// put, commit; retried on conflict) [default: false]
    #[arg(
        long = "transactions",
        alias = "optimistic_transaction_db",
        num_args = 0..=1,
        default_missing_value = "true",
        value_parser = parse_bool
    )]
    pub transactions: Option<bool>,
    /// With --transactions: operations per transaction [default: 1]
    #[arg(long = "ops_per_transaction")]
    pub ops_per_transaction: Option<usize>,
    /// Spread the keys over N keyspaces, each operation to the one its key
    /// hashes to (0: the plain API, the default keyspace) [default: 0]
    #[arg(long = "keyspaces")]
    pub keyspaces: Option<usize>,
    /// Keep the directory's data (fill benchmarks are skipped) [default: false]
    #[arg(
        long = "use_existing_db",
        num_args = 0..=1,
        default_missing_value = "true",
        value_parser = parse_bool
    )]
    pub use_existing_db: Option<bool>,
    /// Memtable implementation [default: teks]
    #[arg(long, value_parser = parse_memtable)]
    pub memtable: Option<MemtableKind>,
    /// Base random seed; 0 = from the clock [default: 0]
    #[arg(long)]
    pub seed: Option<u64>,
    /// Block cache bytes (every engine's read cache) [default: 8388608]
    #[arg(long = "cache_size")]
    pub cache_size: Option<usize>,
    /// Bloom filter bits per key; negative = the engine's default [default: -1]
    #[arg(long = "bloom_bits", allow_negative_numbers = true)]
    pub bloom_bits: Option<i64>,
    /// Accepted for db_bench compatibility; Weft keeps its WAL and warns
    #[arg(long = "disable_wal", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub disable_wal: Option<bool>,
    /// Print a latency histogram per benchmark [default: false]
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub histogram: Option<bool>,
    /// Engine under test: weft, or rocksdb/fjall/redb when built with that
    /// cargo feature [default: weft]
    #[arg(long)]
    pub engine: Option<String>,
    /// Weft: split a partition past this many bytes
    #[arg(long = "partition_size")]
    pub partition_size: Option<u64>,
    /// Weft: merge a partition's UnsortedStore past this many bytes
    #[arg(long = "unsorted_limit")]
    pub unsorted_limit: Option<u64>,
    /// Weft: values of at least this many bytes go to value logs
    #[arg(long = "min_blob_size")]
    pub min_blob_size: Option<usize>,
    /// Weft: consolidate a partition's UnsortedStore tables for scans past
    /// this many
    #[arg(long = "scan_merge_limit")]
    pub scan_merge_limit: Option<usize>,
    /// Weft: collect a value log once this share of it is dead
    #[arg(long = "gc_garbage_ratio")]
    pub gc_garbage_ratio: Option<f64>,
    /// Weft: ...and its partition holds this many dead bytes
    #[arg(long = "gc_min_garbage_bytes")]
    pub gc_min_garbage_bytes: Option<u64>,
    /// Weft: fold a partition's value logs into one past this many
    #[arg(long = "max_value_logs")]
    pub max_value_logs: Option<usize>,
    /// Background threads: one flush thread and a pool for merges, GC,
    /// splits [default: the cores, 2 to 8]
    #[arg(long = "max_background_jobs")]
    pub max_background_jobs: Option<usize>,
    /// Bytes per second the background job pool may write; 0: no limit
    /// [default: 0]
    #[arg(long = "rate_limiter_bytes_per_sec")]
    pub rate_limiter_bytes_per_sec: Option<u64>,
    /// Weft: bytes of the row cache (single values gets read from
    /// storage, by key); 0 = off [default: 0]
    #[arg(long = "row_cache_size")]
    pub row_cache_size: Option<usize>,
    /// Weft: bytes of munks, hot partitions held whole in memory; 0 = off
    /// [default: 0]
    #[arg(long = "munk_cache_size")]
    pub munk_cache_size: Option<usize>,
    /// Weft: read table blocks from a mapping of each table (page cache)
    /// instead of through the block cache [default: true]
    #[arg(long = "mmap_read", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub mmap_read: Option<bool>,
    /// Weft: keep values of at least min_blob_size bytes where the WAL
    /// wrote them, flushes pointing at them (values written once)
    /// [default: true]
    #[arg(long = "values_in_wal", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub values_in_wal: Option<bool>,
    /// YCSB records loaded by ycsb_load, in total [default: num]
    #[arg(long = "record_count")]
    pub record_count: Option<u64>,
    /// YCSB operations per workload, in total [default: reads]
    #[arg(long = "operation_count")]
    pub operation_count: Option<u64>,
    /// YCSB fields per record [default: 10]
    #[arg(long = "field_count")]
    pub field_count: Option<usize>,
    /// YCSB bytes per field [default: 100]
    #[arg(long = "field_length")]
    pub field_length: Option<usize>,
    /// YCSB request distribution: uniform, zipfian, latest, zipf-composite,
    /// sequential [default: each workload's own]
    #[arg(long, value_parser = parse_distribution)]
    pub distribution: Option<DistributionKind>,
    /// Zipfian constant θ [default: 0.99]
    #[arg(long = "zipf_theta")]
    pub zipf_theta: Option<f64>,
    /// YCSB E scans 1..=N entries [default: 100]
    #[arg(long = "max_scan_length")]
    pub max_scan_length: Option<u64>,
    /// Analytics: app ids events are spread over [default: 10000]
    #[arg(long = "analytics_apps")]
    pub analytics_apps: Option<u64>,
    /// Analytics: Zipf exponent of app popularity, any θ > 0 [default: 1.35]
    #[arg(long = "analytics_theta")]
    pub analytics_theta: Option<f64>,
    /// Analytics: percent of analytics_scan's operations that are scans,
    /// the rest puts [default: 95]
    #[arg(long = "analytics_scan_percent")]
    pub analytics_scan_percent: Option<f64>,
    /// Analytics: most events one scan reads [default: 100]
    #[arg(long = "analytics_scan_len")]
    pub analytics_scan_len: Option<u64>,
    /// Analytics: scans start this many events before now [default: 100000]
    #[arg(long = "analytics_window")]
    pub analytics_window: Option<u64>,
    /// Also write results as JSON (schema weft-bench/1) to FILE
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Run the list N times and report each benchmark's median [default: 1]
    #[arg(long)]
    pub runs: Option<usize>,
    /// Progress bar on stderr when it is a terminal [default: true]
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    pub progress: Option<bool>,
}

/// `weft bench` subcommands.
#[derive(Debug, Clone, PartialEq, Subcommand)]
pub enum BenchAction {
    /// Draws PNG charts (throughput, latency percentiles) from `--json` files.
    Plot {
        /// JSON result files (one series each).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Directory the PNGs are written to.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

fn parse_distribution(s: &str) -> Result<DistributionKind, String> {
    s.parse()
}

/// gflags-style booleans.
fn parse_bool(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "t" | "y" => Ok(true),
        "false" | "0" | "no" | "f" | "n" => Ok(false),
        _ => Err(format!("expected true or false, got {s:?}")),
    }
}

fn parse_compression(s: &str) -> Result<weft::Compression, String> {
    weft::Compression::parse(s)
        .ok_or_else(|| format!("unknown compression {s:?} (known: none, lz4, zstd, zstd:LEVEL)"))
}

fn parse_memtable(s: &str) -> Result<MemtableKind, String> {
    s.parse::<MemtableKind>().map_err(|e| {
        let known: Vec<_> = MemtableKind::ALL.iter().map(|k| k.name()).collect();
        format!("{e} (known: {})", known.join(", "))
    })
}

impl BenchArgs {
    /// True when no bench flag was given (`--db` aside): run the quick workload.
    pub fn is_empty(&self) -> bool {
        *self == BenchArgs::default()
    }

    /// The configuration these flags describe.
    pub fn to_config(&self, db: Option<PathBuf>) -> BenchConfig {
        let mut c = if self.is_empty() {
            BenchConfig::quick()
        } else {
            BenchConfig::default()
        };
        c.db = db.unwrap_or_else(|| PathBuf::from(DEFAULT_BENCH_DB));
        if let Some(b) = &self.benchmarks {
            c.benchmarks = b
                .iter()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
        }
        if let Some(n) = self.num {
            c.num = n;
        }
        if let Some(r) = self.reads {
            c.reads = u64::try_from(r).ok();
        }
        if let Some(w) = self.writes {
            c.writes = u64::try_from(w).ok();
        }
        if let Some(b) = self.bloom_bits {
            c.bloom_bits = usize::try_from(b).ok();
        }
        if let Some(e) = &self.engine {
            c.engine = e.clone();
        }
        macro_rules! take {
            ($($f:ident),*) => { $( if let Some(v) = self.$f { c.$f = v; } )* };
        }
        take!(
            key_size,
            value_size,
            compression_type,
            compression_ratio,
            threads,
            write_buffer_size,
            seek_nexts,
            sync,
            readwritepercent,
            transactions,
            ops_per_transaction,
            keyspaces,
            use_existing_db,
            memtable,
            seed,
            cache_size,
            disable_wal,
            histogram,
            field_count,
            field_length,
            zipf_theta,
            max_scan_length,
            runs,
            progress
        );
        macro_rules! opt {
            ($($f:ident),*) => { $( if self.$f.is_some() { c.$f = self.$f; } )* };
        }
        opt!(record_count, operation_count, distribution);
        macro_rules! store {
            ($($f:ident),*) => { $( if self.$f.is_some() { c.store.$f = self.$f; } )* };
        }
        store!(
            partition_size,
            unsorted_limit,
            min_blob_size,
            scan_merge_limit,
            gc_garbage_ratio,
            gc_min_garbage_bytes,
            max_value_logs,
            mmap_read,
            values_in_wal,
            max_background_jobs,
            rate_limiter_bytes_per_sec,
            row_cache_size,
            munk_cache_size,
            unsorted_compression,
            sorted_compression,
            value_log_compression
        );
        macro_rules! analytics {
            ($($f:ident => $g:ident),*) => {
                $( if let Some(v) = self.$f { c.analytics.$g = v; } )*
            };
        }
        analytics!(
            analytics_apps => apps,
            analytics_theta => theta,
            analytics_scan_percent => scan_percent,
            analytics_scan_len => scan_len,
            analytics_window => window
        );
        c.json = self.json.clone();
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn bench(args: &[&str]) -> (BenchArgs, Option<PathBuf>) {
        let mut v = vec!["weft"];
        v.extend_from_slice(args);
        let cli = Cli::try_parse_from(v).unwrap();
        match cli.command {
            Command::Bench(b) => (*b, cli.db),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn clap_definition_is_valid() {
        Cli::command().debug_assert();
    }

    #[test]
    fn no_flags_is_the_quick_workload() {
        let (b, db) = bench(&["bench"]);
        assert!(b.is_empty());
        let c = b.to_config(db);
        assert_eq!(c, BenchConfig::quick().clone_with_db(DEFAULT_BENCH_DB));
        assert_eq!(c.num, 200_000);
        // --db alone keeps the quick workload.
        let (b, db) = bench(&["--db", "/tmp/x", "bench"]);
        assert!(b.is_empty());
        assert_eq!(b.to_config(db).db, PathBuf::from("/tmp/x"));
        let (b, db) = bench(&["bench", "--db=/tmp/y"]);
        assert_eq!(b.to_config(db).num, 200_000);
    }

    #[test]
    fn transaction_flags_and_db_bench_spelling() {
        let (b, db) = bench(&["bench", "--transactions", "--readwritepercent=80"]);
        let c = b.to_config(db);
        assert!(c.transactions);
        assert_eq!((c.readwritepercent, c.ops_per_transaction), (80, 1));
        let (b, db) = bench(&[
            "bench",
            "--optimistic_transaction_db=true",
            "--ops_per_transaction=4",
        ]);
        let c = b.to_config(db);
        assert!(c.transactions);
        assert_eq!((c.readwritepercent, c.ops_per_transaction), (90, 4));
        let (b, db) = bench(&["bench", "--num=10"]);
        let c = b.to_config(db);
        assert!(!c.transactions);
        assert_eq!(c.keyspaces, 0);
        let (b, db) = bench(&["bench", "--keyspaces=8"]);
        assert_eq!(b.to_config(db).keyspaces, 8);
    }

    #[test]
    fn any_flag_switches_to_db_bench_defaults() {
        let (b, db) = bench(&["bench", "--value_size=100"]);
        let c = b.to_config(db);
        assert_eq!(c, BenchConfig::default().clone_with_db(DEFAULT_BENCH_DB));
        assert_eq!(c.num, 1_000_000);
    }

    #[test]
    fn both_flag_styles_and_underscores() {
        let (b, db) = bench(&[
            "bench",
            "--num=1000",
            "--reads",
            "50",
            "--key_size=10",
            "--value_size",
            "20",
            "--threads=2",
            "--write_buffer_size=1048576",
            "--seek_nexts=3",
            "--sync",
            "--use_existing_db=false",
            "--memtable=skiplist",
            "--seed=42",
            "--benchmarks=fillseq,readrandom",
            "--db",
            "/tmp/z",
        ]);
        let c = b.to_config(db);
        assert_eq!(c.num, 1000);
        assert_eq!(c.reads, Some(50));
        assert_eq!(c.key_size, 10);
        assert_eq!(c.value_size, 20);
        assert_eq!(c.threads, 2);
        assert_eq!(c.write_buffer_size, 1 << 20);
        assert_eq!(c.seek_nexts, 3);
        assert!(c.sync);
        assert!(!c.use_existing_db);
        assert_eq!(c.memtable, MemtableKind::SkipList);
        assert_eq!(c.seed, 42);
        assert_eq!(c.benchmarks, ["fillseq", "readrandom"]);
        assert_eq!(c.db, PathBuf::from("/tmp/z"));
    }

    #[test]
    fn new_db_bench_store_and_ycsb_flags() {
        let (b, db) = bench(&[
            "bench",
            "--cache_size=1048576",
            "--row_cache_size=2097152",
            "--munk_cache_size=4194304",
            "--compression_type=zstd:5",
            "--compression_ratio=0.25",
            "--sorted_compression=lz4",
            "--bloom_bits=12",
            "--disable_wal",
            "--histogram=1",
            "--engine=weft",
            "--partition_size=1000000",
            "--unsorted_limit=2000000",
            "--min_blob_size=512",
            "--gc_garbage_ratio=0.3",
            "--gc_min_garbage_bytes=77",
            "--mmap_read=0",
            "--values_in_wal=false",
            "--record_count=1000",
            "--operation_count=500",
            "--field_count=4",
            "--field_length=8",
            "--distribution=zipf-composite",
            "--zipf_theta=0.9",
            "--max_scan_length=5",
            "--json=/tmp/r.json",
            "--runs=3",
            "--progress=false",
            "--memtable=esl",
        ]);
        let c = b.to_config(db);
        assert_eq!(c.cache_size, 1 << 20);
        assert_eq!(c.store.row_cache_size, Some(2 << 20));
        assert_eq!(c.store.munk_cache_size, Some(4 << 20));
        assert_eq!(c.compression_type, weft::Compression::Zstd(5));
        assert_eq!(c.compression_ratio, 0.25);
        assert_eq!(c.store.sorted_compression, Some(weft::Compression::Lz4));
        assert_eq!(c.store.value_log_compression, None);
        assert_eq!(c.bloom_bits, Some(12));
        assert!(c.disable_wal && c.histogram && !c.progress);
        assert_eq!(c.engine, "weft");
        assert_eq!(c.store.partition_size, Some(1_000_000));
        assert_eq!(c.store.unsorted_limit, Some(2_000_000));
        assert_eq!(c.store.min_blob_size, Some(512));
        assert_eq!(c.store.gc_garbage_ratio, Some(0.3));
        assert_eq!(c.store.gc_min_garbage_bytes, Some(77));
        assert_eq!(c.store.mmap_read, Some(false));
        assert_eq!(c.store.values_in_wal, Some(false));
        assert_eq!(c.record_count(), 1000);
        assert_eq!(c.operation_count(), 500);
        assert_eq!(c.record_size(), 32);
        assert_eq!(c.distribution, Some(DistributionKind::ZipfComposite));
        assert_eq!(c.zipf_theta, 0.9);
        assert_eq!(c.max_scan_length, 5);
        assert_eq!(c.json, Some(PathBuf::from("/tmp/r.json")));
        assert_eq!(c.runs, 3);
        assert_eq!(c.memtable, MemtableKind::Esl);
        // db_bench's -1 keeps the engine default.
        let (b, db) = bench(&["bench", "--bloom_bits=-1"]);
        assert_eq!(b.to_config(db).analytics, Default::default());
        let (b, db) = bench(&[
            "bench",
            "--analytics_apps=500",
            "--analytics_theta=1.2",
            "--analytics_scan_percent=90",
            "--analytics_scan_len=50",
            "--analytics_window=1000",
        ]);
        let a = b.to_config(db).analytics;
        assert_eq!((a.apps, a.scan_len, a.window), (500, 50, 1000));
        assert_eq!((a.theta, a.scan_percent), (1.2, 90.0));
        let (b, db) = bench(&["bench", "--bloom_bits=-1"]);
        assert_eq!(b.to_config(db).bloom_bits, None);
        assert!(Cli::try_parse_from(["weft", "bench", "--distribution=pareto"]).is_err());
    }

    #[test]
    fn bench_plot_subcommand() {
        let (b, _) = bench(&["bench", "plot", "a.json", "b.json", "--out", "charts"]);
        assert_eq!(
            b.action,
            Some(BenchAction::Plot {
                files: vec!["a.json".into(), "b.json".into()],
                out: "charts".into()
            })
        );
        assert!(Cli::try_parse_from(["weft", "bench", "plot", "a.json"]).is_err());
        assert!(Cli::try_parse_from(["weft", "bench", "plot", "--out", "d"]).is_err());
    }

    #[test]
    fn db_bench_booleans_and_negative_reads() {
        let (b, db) = bench(&["bench", "--sync=0", "--use_existing_db=1", "--reads=-1"]);
        let c = b.to_config(db);
        assert!(!c.sync);
        assert!(c.use_existing_db);
        assert_eq!(c.reads, None);
        let (b, _) = bench(&["bench", "--reads", "-1"]);
        assert_eq!(b.reads, Some(-1));
        let (b, db) = bench(&["bench", "--writes=-1"]);
        assert_eq!(b.clone().to_config(db).writes, None);
        let (b, db) = bench(&["bench", "--writes", "250"]);
        assert_eq!(b.to_config(db).writes, Some(250));
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for args in [
            &["weft", "bench", "--num=abc"][..],
            &["weft", "bench", "--memtable=btree"],
            &["weft", "bench", "--sync=maybe"],
            &["weft", "bench", "--nosuchflag"],
            &["weft", "get"],
            &["weft", "frobnicate"],
            &["weft", "serve", "--sync=sometimes"],
            &["weft", "serve", "--port=70000"],
        ] {
            assert!(Cli::try_parse_from(args).is_err(), "{args:?}");
        }
    }

    #[test]
    fn keys_may_start_with_a_dash() {
        let cli = Cli::try_parse_from(["weft", "put", "-k", "-v"]).unwrap();
        match cli.command {
            Command::Put { key, value } => {
                assert_eq!(key, "-k");
                assert_eq!(value, "-v");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn global_db_after_subcommand() {
        let cli = Cli::try_parse_from(["weft", "get", "k", "--db", "/d"]).unwrap();
        assert_eq!(cli.db, Some(PathBuf::from("/d")));
        let cli = Cli::try_parse_from(["weft", "stats", "--json"]).unwrap();
        assert!(cli.db.is_none());
        assert!(matches!(cli.command, Command::Stats { json: true }));
    }

    #[test]
    fn serve_flags() {
        let cli = Cli::try_parse_from(["weft", "serve"]).unwrap();
        match cli.command {
            Command::Serve(s) => {
                assert_eq!(s.bind, "127.0.0.1");
                assert_eq!(s.port, 6379);
                assert_eq!(s.sync, weft_server::SyncMode::EverySec);
                assert!(s.dir.is_none());
                assert!(s.threads.is_none());
                assert!(s.busy_poll_us.is_none());
                assert!(s.requirepass.is_none());
                assert!(s.masterauth.is_none());
                assert_eq!(s.databases, 16);
                assert_eq!(s.notify_keyspace_events, None);
            }
            other => panic!("{other:?}"),
        }
        let cli = Cli::try_parse_from([
            "weft",
            "serve",
            "--port",
            "0",
            "--dir",
            "/d",
            "--sync",
            "always",
            "--maxclients=5",
            "--threads=3",
            "--busy-poll-us=0",
            "--requirepass=s3cret",
            "--masterauth=m4ster",
            "--databases=4",
            "--notify-keyspace-events=Ex",
        ])
        .unwrap();
        match cli.command {
            Command::Serve(s) => {
                assert_eq!(s.threads, Some(3));
                assert_eq!(s.busy_poll_us, Some(0));
                assert_eq!(s.requirepass.as_deref(), Some("s3cret"));
                assert_eq!(s.masterauth.as_deref(), Some("m4ster"));
                assert_eq!(s.port, 0);
                assert_eq!(s.dir, Some(PathBuf::from("/d")));
                assert_eq!(s.sync, weft_server::SyncMode::Always);
                assert_eq!(s.maxclients, 5);
                assert_eq!(s.databases, 4);
                assert_eq!(s.notify_keyspace_events, weft_server::notify::parse(b"Ex"));
            }
            other => panic!("{other:?}"),
        }
        assert!(
            Cli::try_parse_from(["weft", "serve", "--notify-keyspace-events=KEQ"]).is_err(),
            "a class letter Redis does not know is refused"
        );
    }

    trait WithDb {
        fn clone_with_db(&self, db: &str) -> BenchConfig;
    }
    impl WithDb for BenchConfig {
        fn clone_with_db(&self, db: &str) -> BenchConfig {
            BenchConfig {
                db: PathBuf::from(db),
                ..self.clone()
            }
        }
    }
}
