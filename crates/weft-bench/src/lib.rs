//! Benchmark workloads for Weft, driven by `weft bench`.
//!
//! This first version speaks RocksDB `db_bench`: the same flag names and
//! defaults ([`BenchConfig`]), the same key encoding ([`keygen`]), the same
//! benchmark semantics ([`workload`]) and the same result line ([`report`]),
//! so scripts written for db_bench can drive and parse Weft unchanged.
//!
//! The pieces are separate on purpose: YCSB A–F and the papers' workloads
//! will add [`workload::Workload`]s to the registry and key generators
//! (zipfian, latest) beside the uniform one, reusing the runner and reporter.
//!
//! As in db_bench, benchmarks marked `fresh_db` (fillseq, fillrandom) start
//! from an empty database: the runner closes, wipes and reopens it, so a
//! `fillrandom` after `fillseq` measures inserts, not overwrites. The others
//! run on whatever the previous benchmarks left.

#![deny(missing_docs)]

pub mod config;
pub mod keygen;
pub mod report;
pub mod workload;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use weft::{Db, Options};

pub use config::BenchConfig;
pub use report::Summary;

use report::ThreadStats;
use workload::{BenchmarkInfo, ThreadContext};

/// Errors of a benchmark run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The engine failed.
    #[error(transparent)]
    Db(#[from] weft::Error),
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
    /// Merged counters; `None` when the benchmark was skipped.
    pub summary: Option<Summary>,
}

/// Runs `config.benchmarks` in order, printing db_bench's header and one
/// result line per benchmark to `out` as each finishes.
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
    emit(out, &report::header(config, seed_note.as_deref()))?;

    if !config.use_existing_db {
        wipe_db_dir(&config.db)?;
    }
    let mut db = Some(open(config)?);
    let mut results = Vec::new();
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
                results.push(BenchResult {
                    name: bench.name.to_string(),
                    summary: None,
                });
                continue;
            }
            if let Some(old) = db.take() {
                old.close()?;
            }
            wipe_db_dir(&config.db)?;
            db = Some(open(config)?);
        }
        if db.is_none() {
            db = Some(open(config)?);
        }
        let first_seed = seed.wrapping_add(threads_started);
        threads_started += config.threads as u64;
        let summary = match &db {
            Some(handle) => run_one(bench, config, handle, first_seed)?,
            None => continue,
        };
        emit(out, &summary.report_line(bench.name))?;
        results.push(BenchResult {
            name: bench.name.to_string(),
            summary: Some(summary),
        });
    }
    if let Some(d) = db {
        d.close()?;
    }
    Ok(results)
}

fn open(config: &BenchConfig) -> Result<Db> {
    std::fs::create_dir_all(&config.db).map_err(io_err(format!(
        "creating benchmark directory {}",
        config.db.display()
    )))?;
    let opts = Options::default()
        .write_buffer_size(config.write_buffer_size)
        .memtable(config.memtable);
    Ok(Db::open(&config.db, opts)?)
}

/// Runs one benchmark on `config.threads` threads sharing `db`.
fn run_one(bench: &BenchmarkInfo, config: &BenchConfig, db: &Db, seed: u64) -> Result<Summary> {
    let workload = (bench.make)(config);
    let workload = workload.as_ref();
    // Threads start their clocks together, as db_bench's SharedState does,
    // so thread start-up cost is not measured.
    let barrier = Barrier::new(config.threads);
    let stop = AtomicBool::new(false);
    let first_error: Mutex<Option<Error>> = Mutex::new(None);
    let stats: Vec<ThreadStats> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..config.threads)
            .map(|tid| {
                let (barrier, stop, first_error) = (&barrier, &stop, &first_error);
                scope.spawn(move || {
                    barrier.wait();
                    let mut ctx =
                        ThreadContext::new(tid, seed.wrapping_add(tid as u64), db, config, stop);
                    let res = workload.run_thread(&mut ctx);
                    ctx.stats.stop();
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
        handles
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
            .collect::<Result<Vec<_>>>()
    })?;
    let err = match first_error.into_inner() {
        Ok(e) => e,
        Err(poisoned) => poisoned.into_inner(),
    };
    if let Some(e) = err {
        return Err(e);
    }
    Ok(Summary::merge(&stats))
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
    let is_db = names.iter().any(|(_, n)| n == "CURRENT" || n == "LOCK");
    let all_known = names
        .iter()
        .all(|(_, n)| weft::filename::parse_file_name(n).is_some());
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
mod tests {
    use super::*;

    #[test]
    fn unknown_benchmark_fails_before_touching_disk() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        let cfg = BenchConfig {
            benchmarks: vec!["fillseq".into(), "fillsqe".into()],
            db: db.clone(),
            ..BenchConfig::default()
        };
        let mut out = Vec::new();
        let err = run(&cfg, &mut out).unwrap_err();
        assert!(matches!(err, Error::UnknownBenchmark(ref n, _) if n == "fillsqe"));
        assert!(!db.exists());
        assert!(out.is_empty());
    }

    #[test]
    fn wipe_refuses_foreign_directories() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("thesis.tex"), b"precious").unwrap();
        assert!(matches!(wipe_db_dir(dir.path()), Err(Error::Config(_))));
        assert!(dir.path().join("thesis.tex").exists());
    }

    #[test]
    fn wipe_clears_a_database_directory() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["CURRENT", "MANIFEST-000001", "000002.log", "000003.sst"] {
            std::fs::write(dir.path().join(f), b"x").unwrap();
        }
        std::fs::create_dir(dir.path().join("vlog")).unwrap();
        wipe_db_dir(dir.path()).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // Missing and empty directories are fine.
        wipe_db_dir(dir.path()).unwrap();
        wipe_db_dir(&dir.path().join("missing")).unwrap();
    }
}
