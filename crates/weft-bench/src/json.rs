//! The `--json=FILE` result format, schema `weft-bench/1`.
//!
//! One object per `weft bench` invocation:
//!
//! ```text
//! {
//!   "schema": "weft-bench/1",          // bumped on any incompatible change
//!   "engine": "weft",                   // --engine
//!   "memtable": "skiplist",             // weft only; null for peers
//!   "command": ["weft", "bench", ...],  // argv as given
//!   "machine": { hostname, kernel, cpu_model, cpus, memory_bytes, build },
//!   "config": { num, reads, key_size, value_size, threads, ... },  // flags
//!   "runs": 3,                          // --runs
//!   "benchmarks": [ {
//!       "name": "readrandom", "skipped": false,
//!       "ops": 1000000, "seconds": 1.23,           // of the median run
//!       "micros_per_op": 1.2, "ops_per_sec": 812345.0, "mb_per_sec": 90.1,
//!       "found": 632000, "attempted": 1000000,     // null unless a read benchmark
//!       "background_ops": 0,                       // readwhilewriting's writer
//!       "runs_ops_per_sec": [801000.0, 812345.0, 820000.0],  // every run
//!       "latency_us": { "read": { count, mean, min, p50, p95, p99, p999, max } },
//!       "ops_by_kind": { "scan": { ops, ops_per_sec }, "insert": { ... } }
//!   } ],
//!   "end": { write_amplification, read_amplification, space_amplification,
//!            disk_bytes, live_bytes, engine_memory_bytes, rss_bytes,
//!            peak_rss_bytes, io: { rchar, wchar, read_bytes, write_bytes,
//!                                  cancelled_write_bytes },
//!            engine: { ...engine-specific... } }   // null if not collected
//! }
//! ```
//!
//! Every field above is always written (nullable ones as `null`), and a
//! reader rejects a file missing any non-nullable one. Unknown fields are
//! ignored, so new fields can be added without a version bump; removing or
//! changing the meaning of one bumps the version.
//! `weft bench plot` reads this format and refuses other schema versions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::histogram::LatencySummary;
use crate::sys::{Machine, ProcIo};

/// The schema identifier written to and required in every file.
pub const SCHEMA: &str = "weft-bench/1";

/// One `weft bench` invocation's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The engine measured.
    pub engine: String,
    /// Weft's memtable kind; `None` for other engines.
    pub memtable: Option<String>,
    /// The command line.
    pub command: Vec<String>,
    /// Where it ran.
    pub machine: Machine,
    /// The effective flags.
    pub config: Value,
    /// Runs per benchmark; figures are of the median run.
    pub runs: usize,
    /// One entry per benchmark, in run order.
    pub benchmarks: Vec<BenchEntry>,
    /// End-of-run engine and process statistics.
    pub end: Option<EndStats>,
}

/// One benchmark's (median) result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchEntry {
    /// Benchmark name.
    pub name: String,
    /// True when not run (`--use_existing_db` and a fill benchmark).
    pub skipped: bool,
    /// Operations counted.
    pub ops: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// db_bench's micros/op (per thread).
    pub micros_per_op: f64,
    /// Aggregate throughput.
    pub ops_per_sec: f64,
    /// Aggregate MB/s (2²⁰ bytes).
    pub mb_per_sec: f64,
    /// Reads that found a value.
    pub found: Option<u64>,
    /// Reads attempted.
    pub attempted: Option<u64>,
    /// Uncounted background operations (readwhilewriting's writer).
    pub background_ops: u64,
    /// ops/sec of every run, in run order.
    pub runs_ops_per_sec: Vec<f64>,
    /// Latency percentiles by operation kind (microseconds).
    pub latency_us: BTreeMap<String, LatencySummary>,
    /// Operations and throughput by operation kind (a mixed workload's
    /// scans and puts apart). Added after the first files of this schema
    /// were written, so a file without it reads as empty.
    #[serde(default)]
    pub ops_by_kind: BTreeMap<String, KindEntry>,
}

/// One operation kind's share of a benchmark.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KindEntry {
    /// Operations of this kind.
    pub ops: u64,
    /// Their rate over the benchmark's wall-clock span.
    pub ops_per_sec: f64,
}

/// Statistics collected after the last benchmark.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndStats {
    /// Bytes the engine wrote / user bytes, as the engine counts them.
    pub write_amplification: Option<f64>,
    /// Storage reads per point read, as the engine counts them.
    pub read_amplification: Option<f64>,
    /// `disk_bytes / live_bytes`.
    pub space_amplification: Option<f64>,
    /// Bytes of the database directory.
    pub disk_bytes: u64,
    /// Key and value bytes a full scan returns.
    pub live_bytes: Option<u64>,
    /// Memory the engine reports holding.
    pub engine_memory_bytes: Option<u64>,
    /// Resident memory of the process at the end.
    pub rss_bytes: u64,
    /// Peak resident memory of the process.
    pub peak_rss_bytes: u64,
    /// `/proc/self/io` over the whole run (all runs).
    pub io: ProcIo,
    /// Engine-specific statistics.
    pub engine: Value,
}

/// Parses and checks a report: right schema version, every required field.
pub fn parse(text: &str) -> Result<Report, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    match v.get("schema").and_then(Value::as_str) {
        Some(SCHEMA) => {}
        Some(other) => return Err(format!("schema {other:?}, expected {SCHEMA:?}")),
        None => return Err(format!("no \"schema\" field (expected {SCHEMA:?})")),
    }
    serde_json::from_value(v).map_err(|e| format!("invalid {SCHEMA} report: {e}"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample() -> Report {
        let mut latency_us = BTreeMap::new();
        latency_us.insert(
            "read".to_string(),
            LatencySummary {
                count: 10,
                mean: 1.5,
                min: 1.0,
                p50: 1.4,
                p95: 2.0,
                p99: 3.0,
                p999: 3.0,
                max: 3.0,
            },
        );
        Report {
            schema: SCHEMA.into(),
            engine: "weft".into(),
            memtable: Some("skiplist".into()),
            command: vec!["weft".into(), "bench".into()],
            machine: Machine::detect(),
            config: serde_json::json!({"num": 10}),
            runs: 1,
            benchmarks: vec![BenchEntry {
                name: "readrandom".into(),
                skipped: false,
                ops: 10,
                seconds: 0.5,
                micros_per_op: 50_000.0,
                ops_per_sec: 20.0,
                mb_per_sec: 0.001,
                found: Some(7),
                attempted: Some(10),
                background_ops: 0,
                runs_ops_per_sec: vec![20.0],
                latency_us,
                ops_by_kind: BTreeMap::from([(
                    "read".to_string(),
                    KindEntry {
                        ops: 10,
                        ops_per_sec: 20.0,
                    },
                )]),
            }],
            end: Some(EndStats {
                write_amplification: Some(2.0),
                read_amplification: None,
                space_amplification: Some(1.1),
                disk_bytes: 100,
                live_bytes: Some(90),
                engine_memory_bytes: Some(5),
                rss_bytes: 1,
                peak_rss_bytes: 2,
                io: ProcIo::default(),
                engine: serde_json::json!({}),
            }),
        }
    }

    #[test]
    fn round_trip() {
        let r = sample();
        let text = serde_json::to_string_pretty(&r).unwrap();
        assert_eq!(parse(&text).unwrap(), r);
    }

    #[test]
    fn required_fields_and_version() {
        let r = sample();
        let v = serde_json::to_value(&r).unwrap();
        for field in [
            "schema",
            "engine",
            "memtable",
            "command",
            "machine",
            "config",
            "runs",
            "benchmarks",
            "end",
        ] {
            let mut w = v.clone();
            w.as_object_mut().unwrap().remove(field);
            let err = parse(&w.to_string());
            // Nullable fields may be absent (read as null).
            if !matches!(field, "memtable" | "end") {
                assert!(err.is_err(), "missing {field} accepted");
            }
        }
        for field in [
            "name",
            "ops",
            "ops_per_sec",
            "latency_us",
            "runs_ops_per_sec",
        ] {
            let mut w = v.clone();
            w["benchmarks"][0].as_object_mut().unwrap().remove(field);
            assert!(parse(&w.to_string()).is_err(), "missing {field} accepted");
        }
        let mut w = v.clone();
        w["schema"] = "weft-bench/0".into();
        assert!(parse(&w.to_string()).unwrap_err().contains("schema"));
        assert!(parse("{}").is_err());
        // Files written before `ops_by_kind` existed still read.
        let mut w = v.clone();
        w["benchmarks"][0]
            .as_object_mut()
            .unwrap()
            .remove("ops_by_kind");
        assert!(parse(&w.to_string()).unwrap().benchmarks[0]
            .ops_by_kind
            .is_empty());
        // Fields added by a later minor revision are ignored.
        let mut w = v.clone();
        w["added_later"] = 1.into();
        assert_eq!(parse(&w.to_string()).unwrap(), r);
        assert!(parse("nope").is_err());
        let mut names: Vec<_> = v["benchmarks"][0]["latency_us"]["read"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["count", "max", "mean", "min", "p50", "p95", "p99", "p999"]
        );
    }
}
