//! Benchmark workloads for Weft, driven by `weft bench`.
//!
//! `weft bench` speaks RocksDB `db_bench`: the same flag names and defaults
//! ([`BenchConfig`]), the same key encoding ([`keygen`]), the same benchmark
//! semantics ([`workload`]) and the same result line ([`report`]), so scripts
//! written for db_bench can drive and parse Weft unchanged. YCSB A–F and
//! EvenDB's P ([`ycsb`]) are benchmarks of the same list, with YCSB's
//! request distributions ([`dist`]) and per-operation latency histograms
//! ([`histogram`]). EvenDB's production analytics stream (its §5.2: app
//! events ingested in time order under app-major keys, then scans of one
//! app's recent events) is [`analytics`]. Every workload runs against an
//! [`engine::Engine`], so peers (RocksDB, fjall, redb, behind cargo
//! features) run the identical workload. Results can be written as JSON
//! ([`json`]) and drawn as PNG charts ([`plot`]).
//!
//! As in db_bench, benchmarks marked `fresh_db` (fillseq, fillrandom,
//! ycsb_load) start from an empty database: the runner closes, wipes and
//! reopens it, so a `fillrandom` after `fillseq` measures inserts, not
//! overwrites. The others run on whatever the previous benchmarks left.
//!
//! `--runs N` repeats the whole list N times (each from an empty database
//! unless `--use_existing_db`) and then prints, per benchmark, the run with
//! the median throughput: one slow or lucky run does not make the figure.

// The engine stats object (`stats_json`) is one `json!` literal, deeper
// than the macro's default recursion allows.
#![recursion_limit = "256"]

pub mod analytics;
pub mod config;
pub mod dist;
pub mod engine;
pub mod histogram;
pub mod json;
pub mod keygen;
pub mod plot;
pub mod report;
pub mod stats_json;
pub mod sys;
pub mod workload;
pub mod ycsb;

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use config::BenchConfig;
pub use report::Summary;

use engine::Engine;
use report::ThreadStats;
use workload::{BenchmarkInfo, Shared, ThreadContext};

/// Errors of a benchmark run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The engine failed.
    #[error(transparent)]
    Db(#[from] weft::Error),
    /// A peer engine failed.
    #[error("engine: {0}")]
    Engine(String),
    /// A `--benchmarks` name this build does not know.
    #[error("unknown benchmark {0:?} (known: {1})")]
    UnknownBenchmark(String, String),
    /// A flag value out of range.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Preparing the database directory or writing the report failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A worker thread panicked (an engine bug); reported, not propagated.
    #[error("benchmark thread panicked: {0}")]
    ThreadPanic(String),
    /// Drawing charts failed.
    #[error("plot: {0}")]
    Plot(String),
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let context = context.into();
    move |source| Error::Io { context, source }
}

/// One benchmark's outcome.
#[derive(Debug, Clone)]
pub struct BenchResult {
    /// Benchmark name.
    pub name: String,
    /// Merged counters of the median run; `None` when skipped.
    pub summary: Option<Summary>,
    /// ops/sec of every run.
    pub runs_ops_per_sec: Vec<f64>,
}

/// The marker file the harness writes into every directory it creates, so
/// it may later wipe a peer engine's files (whose names Weft cannot parse).
pub const MARKER: &str = "WEFT_BENCH_DIR";

/// Runs `config.benchmarks` `config.runs` times, printing db_bench's header
/// and one result line per benchmark to `out` as each finishes, then the
/// medians, the end-of-run statistics, and the JSON file if asked.
pub fn run(config: &BenchConfig, out: &mut dyn Write) -> Result<Vec<BenchResult>> {
    config.validate().map_err(Error::Config)?;
    // Resolve every name before touching the disk: a typo must not wipe
    // anything or waste a long fill.
    let benches: Vec<&'static BenchmarkInfo> = config
        .benchmarks
        .iter()
        .map(|name| {
            workload::find(name).ok_or_else(|| {
                let known: Vec<_> = workload::REGISTRY.iter().map(|b| b.name).collect();
                Error::UnknownBenchmark(name.clone(), known.join(","))
            })
        })
        .collect::<Result<_>>()?;
    if !engine::available().contains(&config.engine.as_str()) {
        return Err(Error::Config(format!(
            "engine {:?} is not in this build (available: {}; rebuild with --features {})",
            config.engine,
            engine::available().join(", "),
            config.engine
        )));
    }

    let (seed, seed_note) = if config.seed == 0 {
        let s = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(1)
            .max(1);
        (s, Some(format!("Set seed to {s} because --seed was 0")))
    } else {
        (config.seed, None)
    };

    let emit = |out: &mut dyn Write, line: &str| -> Result<()> {
        writeln!(out, "{line}")
            .and_then(|_| out.flush())
            .map_err(io_err("writing the report"))
    };
    if config.disable_wal && !matches!(config.engine.as_str(), "weft" | "rocksdb") {
        let warning = format!(
            "warning: --disable_wal ignored: engine {} has no WAL-off mode and \
             runs with its normal durability; results include its journal's cost",
            config.engine
        );
        emit(out, &warning)?;
    }
    let machine = sys::Machine::detect();
    emit(
        out,
        &format!("Weft:       version {}", env!("CARGO_PKG_VERSION")),
    )?;
    emit(out, &format!("Machine:    {}", machine.line()))?;
    if !config.command.is_empty() {
        emit(out, &format!("Command:    {}", config.command.join(" ")))?;
    }
    emit(out, &report::header(config, seed_note.as_deref()))?;

    let io_start = sys::ProcIo::now();
    let mut per_bench: Vec<Vec<Option<Summary>>> = vec![Vec::new(); benches.len()];
    let mut end = None;
    for run_no in 0..config.runs {
        if config.runs > 1 {
            emit(out, &format!("-- run {} of {} --", run_no + 1, config.runs))?;
        }
        let last = run_no + 1 == config.runs;
        let (sums, end_stats) = run_list(
            config,
            &benches,
            seed.wrapping_add(run_no as u64 * 7919),
            last,
            out,
        )?;
        for (slot, s) in per_bench.iter_mut().zip(sums) {
            slot.push(s);
        }
        if last {
            end = end_stats;
        }
    }

    let mut results = Vec::new();
    for (bench, runs) in benches.iter().zip(per_bench) {
        let runs_ops: Vec<f64> = runs.iter().flatten().map(|s| s.ops_per_sec()).collect();
        let summary = median_run(runs);
        results.push(BenchResult {
            name: bench.name.to_string(),
            summary,
            runs_ops_per_sec: runs_ops,
        });
    }
    if config.runs > 1 {
        emit(
            out,
            &format!("-- medians of {} runs (by ops/sec) --", config.runs),
        )?;
        for (bench, r) in benches.iter().zip(&results) {
            if let Some(s) = &r.summary {
                if !bench.prints_stats {
                    emit(out, &s.report_line(bench.name))?;
                    for l in s.kind_lines(bench.name) {
                        emit(out, &l)?;
                    }
                }
            }
        }
    }
    if let Some(e) = end.as_mut() {
        let e: &mut json::EndStats = e;
        e.io = sys::ProcIo::now().since(&io_start);
        emit(out, &end_stats_text(e))?;
    }
    if let Some(path) = &config.json {
        let report = json_report(config, machine, &results, end);
        let text = serde_json::to_string_pretty(&report).map_err(|e| Error::Io {
            context: "encoding JSON".into(),
            source: std::io::Error::other(e),
        })?;
        std::fs::write(path, text + "\n").map_err(io_err(format!("writing {}", path.display())))?;
    }
    Ok(results)
}

/// The run whose throughput is the median (the lower one for an even count).
fn median_run(runs: Vec<Option<Summary>>) -> Option<Summary> {
    let mut done: Vec<Summary> = runs.into_iter().flatten().collect();
    if done.is_empty() {
        return None;
    }
    done.sort_by(|a, b| a.ops_per_sec().total_cmp(&b.ops_per_sec()));
    let mid = (done.len() - 1) / 2;
    Some(done.swap_remove(mid))
}

/// One pass over the benchmark list. Returns a summary per benchmark
/// (`None` when skipped) and, when `collect_end`, the end statistics.
fn run_list(
    config: &BenchConfig,
    benches: &[&'static BenchmarkInfo],
    seed: u64,
    collect_end: bool,
    out: &mut dyn Write,
) -> Result<(Vec<Option<Summary>>, Option<json::EndStats>)> {
    let emit = |out: &mut dyn Write, line: &str| -> Result<()> {
        writeln!(out, "{line}")
            .and_then(|_| out.flush())
            .map_err(io_err("writing the report"))
    };
    if !config.use_existing_db {
        wipe_db_dir(&config.db)?;
    }
    let mut db = Some(open(config)?);
    let mut sums = Vec::new();
    let shared = Shared::default();
    shared
        .key_count
        .store(config.record_count(), Ordering::Relaxed);
    // Seeds differ per thread *and* per benchmark (db_bench's running thread
    // count), so fillrandom and readrandom do not replay the same keys.
    let mut threads_started: u64 = 0;

    for bench in benches {
        if bench.fresh_db {
            if config.use_existing_db {
                emit(
                    out,
                    &report::skipped_line(bench.name, "--use_existing_db is true"),
                )?;
                sums.push(None);
                continue;
            }
            if let Some(old) = db.take() {
                old.close()?;
            }
            wipe_db_dir(&config.db)?;
            // The analytics stream's clock belonged to the wiped data.
            shared.analytics_clock.store(0, Ordering::Relaxed);
            db = Some(open(config)?);
        }
        let handle: &dyn Engine = match &db {
            Some(h) => h.as_ref(),
            None => continue,
        };
        if bench.prints_stats {
            let stats = serde_json::to_string_pretty(&handle.stats()).unwrap_or_default();
            emit(
                out,
                &format!("{:<12} : {} engine statistics", bench.name, config.engine),
            )?;
            emit(out, &stats)?;
            sums.push(None);
            continue;
        }
        let first_seed = seed.wrapping_add(threads_started);
        threads_started += config.threads as u64 + 1;
        let summary = run_one(bench, config, handle, &shared, first_seed)?;
        emit(out, &summary.report_line(bench.name))?;
        for l in summary.kind_lines(bench.name) {
            emit(out, &l)?;
        }
        if bench.always_timed {
            for l in summary.latency_lines() {
                emit(out, &l)?;
            }
        } else if config.histogram {
            for (k, h) in &summary.latency {
                emit(out, &h.db_bench_text(k.name()))?;
            }
        }
        if summary.background_ops > 0 {
            emit(
                out,
                &format!("  (background writer: {} puts)", summary.background_ops),
            )?;
        }
        sums.push(Some(summary));
    }
    let mut end = None;
    if let Some(d) = db {
        if collect_end {
            end = Some(end_stats(config, d.as_ref())?);
        }
        d.close()?;
    }
    Ok((sums, end))
}

fn end_stats(config: &BenchConfig, db: &dyn Engine) -> Result<json::EndStats> {
    // Live bytes by a full scan: engine-independent, so space amplification
    // means the same for every engine.
    let mut live = 0u64;
    db.scan(None, false, u64::MAX, &mut |k, v| {
        live += (k.len() + v.len()) as u64;
    })?;
    let disk = sys::dir_size(&config.db);
    let (rss, peak) = sys::rss();
    Ok(json::EndStats {
        write_amplification: db.write_amplification(),
        read_amplification: db.read_amplification(),
        space_amplification: (live > 0).then(|| disk as f64 / live as f64),
        disk_bytes: disk,
        live_bytes: Some(live),
        engine_memory_bytes: db.memory_bytes(),
        rss_bytes: rss,
        peak_rss_bytes: peak,
        io: sys::ProcIo::default(),
        engine: db.stats(),
    })
}

/// Weft's write stalls, as a line of the end report (empty for engines
/// that do not report them).
fn stall_line(engine: &serde_json::Value) -> String {
    let field = |name: &str| engine.get(name).and_then(serde_json::Value::as_u64);
    match (
        field("write_stalls"),
        field("write_slowdowns"),
        field("write_stall_micros"),
    ) {
        (Some(stalls), Some(slowdowns), Some(micros)) => format!(
            "Write stalls: {stalls} stalls, {slowdowns} slowdowns, writers waited {:.2} s\n",
            micros as f64 / 1e6
        ),
        _ => String::new(),
    }
}

/// Weft's background jobs, one line per kind (empty for engines that do
/// not report them): how many ran, what they wrote, and how long they
/// waited and ran, beside which the stall line says whether they kept pace.
fn background_lines(engine: &serde_json::Value) -> String {
    let Some(jobs) = engine
        .get("background_jobs")
        .and_then(serde_json::Value::as_object)
    else {
        return String::new();
    };
    let mut out = String::new();
    for (i, kind) in weft::JobKind::ALL.into_iter().enumerate() {
        let Some(job) = jobs.get(&stats_json::job_key(kind)) else {
            continue;
        };
        let number = |name: &str| job.get(name).and_then(serde_json::Value::as_f64);
        out.push_str(&format!(
            "{:<14}{:<18}{:>8} jobs {:>10.1} MiB written, queued {:>9.3} s, ran {:>9.3} s\n",
            if i == 0 { "Background:" } else { "" },
            kind.name(),
            number("count").unwrap_or(0.0),
            number("bytes_written").unwrap_or(0.0) / 1_048_576.0,
            number("queued").unwrap_or(0.0),
            number("running").unwrap_or(0.0),
        ));
    }
    out
}

/// Weft's own view of its space (empty for engines that do not report
/// it): bytes on disk against its estimate of the live data, next to the
/// live bytes the harness's full scan found, and the largest partition
/// against `partition_size`.
fn space_lines(engine: &serde_json::Value, scanned_live: Option<u64>) -> String {
    let field = |name: &str| engine.get(name).and_then(serde_json::Value::as_u64);
    let (Some(disk), Some(live)) = (
        engine.get("disk").and_then(serde_json::Value::as_object),
        field("live_bytes_estimate"),
    ) else {
        return String::new();
    };
    let disk: u64 = disk.values().filter_map(serde_json::Value::as_u64).sum();
    let mib = |b: u64| b as f64 / 1_048_576.0;
    let ratio = |live: u64| {
        if live == 0 {
            "n/a".to_string()
        } else {
            format!("{:.2}", disk as f64 / live as f64)
        }
    };
    let mut out = format!(
        "Weft space:   on disk {:.1} MiB, live ≈ {:.1} MiB (an upper bound), ratio {}",
        mib(disk),
        mib(live),
        ratio(live)
    );
    if let Some(scanned) = scanned_live {
        out.push_str(&format!(
            "; by full scan live {:.1} MiB, ratio {}",
            mib(scanned),
            ratio(scanned)
        ));
    }
    out.push('\n');
    let largest = engine
        .get("partitions")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("size_bytes").and_then(serde_json::Value::as_u64))
        .max();
    if let (Some(largest), Some(limit)) = (largest, field("partition_size")) {
        let partitions = engine
            .get("partitions")
            .and_then(serde_json::Value::as_array)
            .map_or(0, Vec::len);
        out.push_str(&format!(
            "Partitions:   {partitions}, the largest {:.1} MiB of partition_size {:.1} MiB ({:.1}%)\n",
            mib(largest),
            mib(limit),
            if limit == 0 { 0.0 } else { largest as f64 * 100.0 / limit as f64 }
        ));
    }
    out
}

fn end_stats_text(e: &json::EndStats) -> String {
    let f = |v: Option<f64>| v.map_or("n/a".to_string(), |x| format!("{x:.2}"));
    let mib = |b: u64| b as f64 / 1_048_576.0;
    format!(
        "Engine stats: write-amp {} read-amp {} space-amp {} (disk {:.1} MiB, live {:.1} MiB)\n\
         {}{}{}Memory:       engine {} MiB, process RSS {:.1} MiB (peak {:.1} MiB)\n\
         Process I/O:  read {:.1} MiB written {:.1} MiB from/to disk ({:.1} / {:.1} MiB via syscalls)",
        f(e.write_amplification),
        f(e.read_amplification),
        f(e.space_amplification),
        mib(e.disk_bytes),
        mib(e.live_bytes.unwrap_or(0)),
        stall_line(&e.engine),
        background_lines(&e.engine),
        space_lines(&e.engine, e.live_bytes),
        e.engine_memory_bytes
            .map_or("n/a".to_string(), |b| format!("{:.1}", mib(b))),
        mib(e.rss_bytes),
        mib(e.peak_rss_bytes),
        mib(e.io.read_bytes),
        mib(e.io.disk_write_bytes()),
        mib(e.io.rchar),
        mib(e.io.wchar),
    )
}

fn json_report(
    c: &BenchConfig,
    machine: sys::Machine,
    results: &[BenchResult],
    end: Option<json::EndStats>,
) -> json::Report {
    let benchmarks = results
        .iter()
        .map(|r| {
            let s = r.summary.as_ref();
            let latency_us: BTreeMap<String, histogram::LatencySummary> = s
                .map(|s| {
                    s.latency
                        .iter()
                        .map(|(k, h)| (k.name().to_string(), h.summary()))
                        .collect()
                })
                .unwrap_or_default();
            json::BenchEntry {
                name: r.name.clone(),
                skipped: s.is_none(),
                ops: s.map_or(0, |s| s.done),
                seconds: s.map_or(0.0, |s| s.wall.as_secs_f64()),
                micros_per_op: s.map_or(0.0, |s| s.micros_per_op()),
                ops_per_sec: s.map_or(0.0, |s| s.ops_per_sec()),
                mb_per_sec: s.map_or(0.0, |s| s.mb_per_sec()),
                found: s.and_then(|s| s.found.map(|f| f.0)),
                attempted: s.and_then(|s| s.found.map(|f| f.1)),
                background_ops: s.map_or(0, |s| s.background_ops),
                runs_ops_per_sec: r.runs_ops_per_sec.clone(),
                latency_us,
                ops_by_kind: s
                    .map(|s| {
                        s.ops_by_kind
                            .iter()
                            .map(|&(k, ops)| {
                                let rate = s.kind_ops_per_sec(k);
                                (
                                    k.name().to_string(),
                                    json::KindEntry {
                                        ops,
                                        ops_per_sec: rate,
                                    },
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            }
        })
        .collect();
    json::Report {
        schema: json::SCHEMA.into(),
        engine: c.engine.clone(),
        memtable: (c.engine == "weft").then(|| c.memtable.to_string()),
        command: c.command.clone(),
        machine,
        config: config_json(c),
        runs: c.runs,
        benchmarks,
        end,
    }
}

/// The effective flags, by their command-line names.
pub fn config_json(c: &BenchConfig) -> serde_json::Value {
    serde_json::json!({
        "benchmarks": c.benchmarks,
        "num": c.num,
        "reads": c.reads(),
        "writes": c.writes(),
        "key_size": c.key_size,
        "value_size": c.value_size,
        "threads": c.threads,
        "keyspaces": c.keyspaces,
        "write_buffer_size": c.write_buffer_size,
        "cache_size": c.cache_size,
        "bloom_bits": c.bloom_bits,
        "seek_nexts": c.seek_nexts,
        "sync": c.sync,
        "disable_wal": c.disable_wal,
        "use_existing_db": c.use_existing_db,
        "db": c.db,
        "seed": c.seed,
        "engine": c.engine,
        "memtable": c.memtable.to_string(),
        "partition_size": c.store.partition_size,
        "unsorted_limit": c.store.unsorted_limit,
        "min_blob_size": c.store.min_blob_size,
        "scan_merge_limit": c.store.scan_merge_limit,
        "gc_garbage_ratio": c.store.gc_garbage_ratio,
        "gc_min_garbage_bytes": c.store.gc_min_garbage_bytes,
        "max_value_logs": c.store.max_value_logs,
        "max_background_jobs": c.store.max_background_jobs,
        "rate_limiter_bytes_per_sec": c.store.rate_limiter_bytes_per_sec,
        "row_cache_size": c.store.row_cache_size,
        "munk_cache_size": c.store.munk_cache_size,
        "compression_type": c.compression_type.to_string(),
        "compression_ratio": c.compression_ratio,
        "unsorted_compression": c.store.unsorted_compression.map(|v| v.to_string()),
        "sorted_compression": c.store.sorted_compression.map(|v| v.to_string()),
        "value_log_compression": c.store.value_log_compression.map(|v| v.to_string()),
        "mmap_read": c.store.mmap_read,
        "values_in_wal": c.store.values_in_wal,
        "record_count": c.record_count(),
        "operation_count": c.operation_count(),
        "field_count": c.field_count,
        "field_length": c.field_length,
        "distribution": c.distribution.map(|d| d.to_string()),
        "zipf_theta": c.zipf_theta,
        "max_scan_length": c.max_scan_length,
        "analytics_apps": c.analytics.apps,
        "analytics_theta": c.analytics.theta,
        "analytics_scan_percent": c.analytics.scan_percent,
        "analytics_scan_len": c.analytics.scan_len,
        "analytics_window": c.analytics.window,
        "runs": c.runs,
    })
}

fn open(config: &BenchConfig) -> Result<Box<dyn Engine>> {
    std::fs::create_dir_all(&config.db).map_err(io_err(format!(
        "creating benchmark directory {}",
        config.db.display()
    )))?;
    let marker = config.db.join(MARKER);
    if !marker.exists() {
        std::fs::write(&marker, config.engine.as_bytes())
            .map_err(io_err(format!("writing {}", marker.display())))?;
    }
    engine::open(config)
}

/// Runs one benchmark on `config.threads` threads sharing `db` (plus the
/// background writer when the workload asks for one).
fn run_one(
    bench: &BenchmarkInfo,
    config: &BenchConfig,
    db: &dyn Engine,
    shared: &Shared,
    seed: u64,
) -> Result<Summary> {
    let workload = (bench.make)(config);
    let workload = workload.as_ref();
    let timing = bench.always_timed || config.histogram;
    let extra = usize::from(workload.background_writer());
    let total = config.threads + extra;
    shared.progress.store(0, Ordering::Relaxed);
    shared.readers_left.store(config.threads, Ordering::Release);
    // Threads start their clocks together, as db_bench's SharedState does,
    // so thread start-up cost is not measured.
    let barrier = Barrier::new(total);
    let stop = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    let first_error: Mutex<Option<Error>> = Mutex::new(None);
    let show_progress = config.progress && std::io::stderr().is_terminal();
    let expected = workload.total_ops(config).max(1);
    let stats: Vec<ThreadStats> = std::thread::scope(|scope| {
        if show_progress {
            let (done, shared) = (&done, shared);
            scope.spawn(move || progress_bar(bench.name, expected, shared, done));
        }
        let handles: Vec<_> = (0..total)
            .map(|tid| {
                let (barrier, stop, first_error) = (&barrier, &stop, &first_error);
                scope.spawn(move || {
                    barrier.wait();
                    let mut ctx = ThreadContext::new(
                        tid,
                        seed.wrapping_add(tid as u64),
                        db,
                        config,
                        shared,
                        stop,
                        timing,
                    );
                    let res = workload.run_thread(&mut ctx);
                    ctx.stats.stop();
                    ctx.flush_progress();
                    if tid < config.threads {
                        shared.readers_left.fetch_sub(1, Ordering::AcqRel);
                    }
                    if let Err(e) = res {
                        stop.store(true, Ordering::Relaxed);
                        if let Ok(mut slot) = first_error.lock() {
                            slot.get_or_insert(e);
                        }
                    }
                    ctx.stats
                })
            })
            .collect();
        let joined = handles
            .into_iter()
            .map(|h| {
                h.join().map_err(|p| {
                    let msg = p
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown panic".to_string());
                    Error::ThreadPanic(msg)
                })
            })
            .collect::<Result<Vec<_>>>();
        done.store(true, Ordering::Release);
        joined
    })?;
    let err = match first_error.into_inner() {
        Ok(e) => e,
        Err(poisoned) => poisoned.into_inner(),
    };
    if let Some(e) = err {
        return Err(e);
    }
    let (fg, bg) = stats.split_at(config.threads);
    let mut summary = Summary::merge(fg);
    summary.background_ops = bg.iter().map(|t| t.done).sum();
    summary.split_by_kind = workload.split_by_kind();
    Ok(summary)
}

/// Redraws `name [####    ] 42%` on stderr every 200 ms until `done`, then
/// erases itself so the terminal keeps only the result lines.
fn progress_bar(name: &str, expected: u64, shared: &Shared, done: &AtomicBool) {
    let width = 30usize;
    let start = std::time::Instant::now();
    while !done.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(200));
        let n = shared.progress.load(Ordering::Relaxed);
        let frac = (n as f64 / expected as f64).min(1.0);
        let filled = (frac * width as f64) as usize;
        let rate = n as f64 / start.elapsed().as_secs_f64().max(1e-9);
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r{name:<12} [{}{}] {:3.0}% {:.0} ops/s ",
            "#".repeat(filled),
            " ".repeat(width - filled),
            frac * 100.0,
            rate
        );
        let _ = err.flush();
    }
    let _ = write!(std::io::stderr(), "\r\x1b[K");
}

/// Empties `dir` for a fresh run (db_bench's DestroyDB), refusing to delete
/// anything that does not look like a Weft database: a mistyped `--db` must
/// not erase someone's files.
pub fn wipe_db_dir(dir: &Path) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(format!("reading {}", dir.display()))(e)),
    };
    let mut names: Vec<(PathBuf, String)> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_err(format!("reading {}", dir.display())))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        names.push((entry.path(), name));
    }
    if names.is_empty() {
        return Ok(());
    }
    let is_db = names
        .iter()
        .any(|(_, n)| n == "CURRENT" || n == "LOCK" || n == MARKER);
    let all_known = names
        .iter()
        .all(|(_, n)| weft::internals::parse_file_name(n).is_some());
    if !is_db && !all_known {
        return Err(Error::Config(format!(
            "{} is not empty and does not look like a Weft database; refusing to \
             wipe it (pick another --db, or pass --use_existing_db=true)",
            dir.display()
        )));
    }
    for (path, _) in names {
        let res = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        res.map_err(io_err(format!("removing {}", path.display())))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
