//! Per-thread counters and db_bench's report format.
//!
//! The result line is byte-for-byte db_bench's (RocksDB `Stats::Report`):
//!
//! ```text
//! %-12s : %11.3f micros/op %ld ops/sec %.3f seconds %ld operations;%s
//! ```
//!
//! where the tail is empty, or a space then ` %6.1f MB/s` when bytes moved,
//! then a space and the message (`(F of T found)`) for reads. As in db_bench,
//! micros/op is the *sum* of the threads' busy time divided by all operations
//! (per-thread latency), while ops/sec and MB/s use the wall-clock span from
//! the first thread's start to the last one's finish (aggregate throughput).

use std::time::{Duration, Instant};

use crate::config::BenchConfig;
use crate::histogram::Histogram;

/// Operation types latencies are kept apart by (YCSB's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum OpKind {
    /// Point read.
    Read,
    /// YCSB update of an existing record.
    Update,
    /// YCSB insert of a new record.
    Insert,
    /// YCSB scan.
    Scan,
    /// YCSB F's read-modify-write (the whole pair).
    ReadModifyWrite,
    /// db_bench put.
    Write,
    /// Delete.
    Delete,
    /// db_bench seek (plus its nexts).
    Seek,
}

impl OpKind {
    /// Every kind, in report order.
    pub const ALL: [OpKind; 8] = [
        OpKind::Read,
        OpKind::Update,
        OpKind::Insert,
        OpKind::Scan,
        OpKind::ReadModifyWrite,
        OpKind::Write,
        OpKind::Delete,
        OpKind::Seek,
    ];

    /// This kind's position in [`OpKind::ALL`] (an index into per-kind
    /// counters).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The lower-case name used in JSON and reports.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Update => "update",
            OpKind::Insert => "insert",
            OpKind::Scan => "scan",
            OpKind::ReadModifyWrite => "read_modify_write",
            OpKind::Write => "write",
            OpKind::Delete => "delete",
            OpKind::Seek => "seek",
        }
    }
}

/// Counters of one thread running one benchmark.
#[derive(Debug, Clone)]
pub struct ThreadStats {
    start: Instant,
    finish: Instant,
    /// Operations completed.
    pub done: u64,
    /// Key and value bytes moved.
    pub bytes: u64,
    /// Read benchmarks: `(found, attempted)`.
    pub found: Option<(u64, u64)>,
    /// Latency histograms by operation kind (only when timing is on).
    pub latency: Vec<(OpKind, Histogram)>,
    /// Operations completed by kind, indexed by [`OpKind::index`]: counted
    /// whether or not timing is on, so a mixed workload can report each
    /// kind's throughput without paying for clock reads.
    pub kinds: [u64; OpKind::ALL.len()],
}

impl ThreadStats {
    /// Starts the clock now.
    pub fn start() -> Self {
        let now = Instant::now();
        ThreadStats {
            start: now,
            finish: now,
            done: 0,
            bytes: 0,
            found: None,
            latency: Vec::new(),
            kinds: [0; OpKind::ALL.len()],
        }
    }

    /// Records one latency sample, in nanoseconds.
    #[inline]
    pub fn record_latency(&mut self, kind: OpKind, nanos: u64) {
        if let Some((_, h)) = self.latency.iter_mut().find(|(k, _)| *k == kind) {
            h.record(nanos);
        } else {
            let mut h = Histogram::new();
            h.record(nanos);
            self.latency.push((kind, h));
        }
    }

    /// Counts `n` finished operations.
    pub fn finished_ops(&mut self, n: u64) {
        self.done += n;
    }

    /// Counts `n` finished operations of `kind` in the per-kind counters
    /// (the total is [`Self::finished_ops`]'s).
    #[inline]
    pub fn count_kind(&mut self, kind: OpKind, n: u64) {
        self.kinds[kind.index()] += n;
    }

    /// Counts `n` bytes moved.
    pub fn add_bytes(&mut self, n: u64) {
        self.bytes += n;
    }

    /// Records a read benchmark's hit count.
    pub fn set_found(&mut self, found: u64, attempted: u64) {
        self.found = Some((found, attempted));
    }

    /// Stops the clock now.
    pub fn stop(&mut self) {
        self.finish = Instant::now();
    }
}

/// The merged result of one benchmark over all its threads.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Operations over all threads.
    pub done: u64,
    /// Bytes over all threads.
    pub bytes: u64,
    /// Wall-clock span: earliest start to latest finish.
    pub wall: Duration,
    /// Sum of every thread's own start-to-finish time.
    pub thread_time: Duration,
    /// Summed `(found, attempted)` for read benchmarks. db_bench prints only
    /// the first thread's message; summing is what a reader of a
    /// multi-threaded run actually wants, and the format is the same.
    pub found: Option<(u64, u64)>,
    /// Merged latency histograms by operation kind, in [`OpKind::ALL`] order.
    pub latency: Vec<(OpKind, Histogram)>,
    /// Operations of a background thread not counted above
    /// (`readwhilewriting`'s writer).
    pub background_ops: u64,
    /// Operations by kind, in [`OpKind::ALL`] order, kinds with none left
    /// out.
    pub ops_by_kind: Vec<(OpKind, u64)>,
    /// Print one result line per operation kind under the benchmark's
    /// line ([`Self::kind_lines`]): set for workloads whose kinds are
    /// compared separately (the analytics scan phase's scans and puts).
    pub split_by_kind: bool,
}

impl Summary {
    /// Merges the threads' counters.
    pub fn merge(threads: &[ThreadStats]) -> Summary {
        let start = threads.iter().map(|t| t.start).min();
        let finish = threads.iter().map(|t| t.finish).max();
        let wall = match (start, finish) {
            (Some(s), Some(f)) => f.saturating_duration_since(s),
            _ => Duration::ZERO,
        };
        let found = threads
            .iter()
            .filter_map(|t| t.found)
            .fold(None, |acc, (f, a)| {
                let (f0, a0) = acc.unwrap_or((0, 0));
                Some((f0 + f, a0 + a))
            });
        Summary {
            done: threads.iter().map(|t| t.done).sum(),
            bytes: threads.iter().map(|t| t.bytes).sum(),
            wall,
            thread_time: threads
                .iter()
                .map(|t| t.finish.saturating_duration_since(t.start))
                .sum(),
            found,
            latency: merge_latency(threads),
            background_ops: 0,
            ops_by_kind: OpKind::ALL
                .into_iter()
                .map(|k| (k, threads.iter().map(|t| t.kinds[k.index()]).sum()))
                .filter(|&(_, n)| n > 0)
                .collect(),
            split_by_kind: false,
        }
    }

    /// Operations of `kind` per second over the wall-clock span.
    pub fn kind_ops_per_sec(&self, kind: OpKind) -> f64 {
        let n = self
            .ops_by_kind
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(0, |&(_, n)| n);
        n as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    /// With [`Self::split_by_kind`], one db_bench-style line per operation
    /// kind, named `benchmark.kind` (`analytics_scan.scan : ...`), so the
    /// scripts that parse result lines pick each kind up as a benchmark of
    /// its own. ops/sec is the kind's operations over the benchmark's
    /// wall-clock span; micros/op is the kind's mean latency when timed,
    /// else the benchmark's micros/op. Empty without the flag.
    pub fn kind_lines(&self, name: &str) -> Vec<String> {
        if !self.split_by_kind {
            return Vec::new();
        }
        let elapsed = self.wall.as_secs_f64().max(1e-9);
        self.ops_by_kind
            .iter()
            .map(|&(kind, n)| {
                let micros = self
                    .latency
                    .iter()
                    .find(|(k, _)| *k == kind)
                    .map_or_else(|| self.micros_per_op(), |(_, h)| h.summary().mean);
                format!(
                    "{:<12} : {:11.3} micros/op {} ops/sec {:.3} seconds {} operations;",
                    format!("{name}.{}", kind.name()),
                    micros,
                    (n as f64 / elapsed) as i64,
                    self.wall.as_secs_f64(),
                    n
                )
            })
            .collect()
    }

    /// Operations per second over the wall-clock span.
    pub fn ops_per_sec(&self) -> f64 {
        self.done.max(1) as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    /// Per-thread microseconds per operation (db_bench's first figure).
    pub fn micros_per_op(&self) -> f64 {
        self.thread_time.as_secs_f64() * 1e6 / self.done.max(1) as f64
    }

    /// MB/s (2²⁰ bytes) over the wall-clock span.
    pub fn mb_per_sec(&self) -> f64 {
        (self.bytes as f64 / 1_048_576.0) / self.wall.as_secs_f64().max(1e-9)
    }

    /// One line per timed operation kind: count and p50/p95/p99/p99.9/max
    /// in microseconds, indented under the result line.
    pub fn latency_lines(&self) -> Vec<String> {
        self.latency
            .iter()
            .map(|(k, h)| {
                let s = h.summary();
                format!(
                    "  {:<18} count={} avg={:.2} p50={:.2} p95={:.2} p99={:.2} p99.9={:.2} max={:.2} (us)",
                    k.name().to_uppercase(),
                    s.count,
                    s.mean,
                    s.p50,
                    s.p95,
                    s.p99,
                    s.p999,
                    s.max
                )
            })
            .collect()
    }

    /// The db_bench result line, without the trailing newline.
    pub fn report_line(&self, name: &str) -> String {
        // db_bench pretends one op was done so the divisions stay finite.
        let done = self.done.max(1);
        // A zero-length run (coarse clocks, empty scans) must not print inf.
        let elapsed = self.wall.as_secs_f64().max(1e-9);
        let micros_per_op = self.thread_time.as_secs_f64() * 1e6 / done as f64;
        let ops_per_sec = (done as f64 / elapsed) as i64;
        let mut extra = String::new();
        if self.bytes > 0 {
            extra.push_str(&format!(
                "{:6.1} MB/s",
                (self.bytes as f64 / 1_048_576.0) / elapsed
            ));
        }
        if let Some((found, attempted)) = self.found {
            if !extra.is_empty() {
                extra.push(' ');
            }
            extra.push_str(&format!("({found} of {attempted} found)"));
        }
        format!(
            "{:<12} : {:11.3} micros/op {} ops/sec {:.3} seconds {} operations;{}{}",
            name,
            micros_per_op,
            ops_per_sec,
            self.wall.as_secs_f64(),
            done,
            if extra.is_empty() { "" } else { " " },
            extra
        )
    }
}

fn merge_latency(threads: &[ThreadStats]) -> Vec<(OpKind, Histogram)> {
    let mut out: Vec<(OpKind, Histogram)> = Vec::new();
    for t in threads {
        for (k, h) in &t.latency {
            match out.iter_mut().find(|(o, _)| o == k) {
                Some((_, m)) => m.merge(h),
                None => out.push((*k, h.clone())),
            }
        }
    }
    out.sort_by_key(|(k, _)| *k);
    out
}

/// db_bench's line for a benchmark it declines to run.
pub fn skipped_line(name: &str, why: &str) -> String {
    format!("{name:<12} : skipped ({why})")
}

/// The header printed once before the results, in db_bench's layout.
pub fn header(config: &BenchConfig, seed_note: Option<&str>) -> String {
    let raw_mb =
        (config.key_size as f64 + config.value_size as f64) * config.num as f64 / 1_048_576.0;
    let mut s = String::new();
    if let Some(note) = seed_note {
        s.push_str(note);
        s.push('\n');
    }
    s.push_str(&format!("Keys:       {} bytes each\n", config.key_size));
    s.push_str(&format!("Values:     {} bytes each\n", config.value_size));
    s.push_str(&format!("Entries:    {}\n", config.num));
    s.push_str(&format!("RawSize:    {raw_mb:.1} MB (estimated)\n"));
    s.push_str(&format!("Threads:    {}\n", config.threads));
    s.push_str(&format!("Memtablerep: {}\n", config.memtable));
    s.push_str(&format!(
        "Write buffer: {} bytes, sync: {}\n",
        config.write_buffer_size, config.sync
    ));
    s.push_str(&format!("Engine:     {}\n", config.engine));
    s.push_str(&format!(
        "Cache:      {} bytes, bloom bits: {}\n",
        config.cache_size,
        config
            .bloom_bits
            .map_or("engine default".to_string(), |b| b.to_string())
    ));
    s.push_str("------------------------------------------------\n");
    s.push_str(&format!("DB path: [{}]", config.db.display()));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(done: u64, bytes: u64, wall_ms: u64, thread_ms: u64) -> Summary {
        Summary {
            done,
            bytes,
            wall: Duration::from_millis(wall_ms),
            thread_time: Duration::from_millis(thread_ms),
            found: None,
            latency: Vec::new(),
            background_ops: 0,
            ops_by_kind: Vec::new(),
            split_by_kind: false,
        }
    }

    #[test]
    fn write_line_matches_db_bench_format() {
        // 1_000_000 ops, 116 bytes each, 2.5 s.
        let s = summary(1_000_000, 116_000_000, 2500, 2500);
        assert_eq!(
            s.report_line("fillseq"),
            "fillseq      :       2.500 micros/op 400000 ops/sec 2.500 seconds \
             1000000 operations;   44.3 MB/s"
        );
    }

    #[test]
    fn read_line_has_found_message() {
        let mut s = summary(1000, 116 * 632, 1000, 1000);
        s.found = Some((632, 1000));
        assert_eq!(
            s.report_line("readrandom"),
            "readrandom   :    1000.000 micros/op 1000 ops/sec 1.000 seconds \
             1000 operations;    0.1 MB/s (632 of 1000 found)"
        );
        // Nothing found: no bytes, only the message.
        s.bytes = 0;
        s.found = Some((0, 1000));
        assert!(s
            .report_line("readrandom")
            .ends_with("1000 operations; (0 of 1000 found)"));
    }

    #[test]
    fn no_bytes_no_tail() {
        let s = summary(10, 0, 1000, 1000);
        assert_eq!(
            s.report_line("x"),
            "x            :  100000.000 micros/op 10 ops/sec 1.000 seconds 10 operations;"
        );
    }

    #[test]
    fn long_names_are_not_truncated_and_zero_ops_count_as_one() {
        let s = summary(0, 0, 0, 0);
        let line = s.report_line("averyverylongbenchmark");
        assert!(line.starts_with("averyverylongbenchmark : "), "{line}");
        assert!(line.contains(" 1 operations;"), "{line}");
        assert!(!line.contains("inf") && !line.contains("NaN"), "{line}");
    }

    #[test]
    fn micros_per_op_uses_summed_thread_time() {
        // Two threads, each 1 s for 1000 ops, overlapping fully: 1000 µs/op
        // per thread, 2000 ops/s aggregate.
        let s = summary(2000, 0, 1000, 2000);
        let line = s.report_line("fillrandom");
        assert!(
            line.contains("    1000.000 micros/op 2000 ops/sec 1.000 seconds"),
            "{line}"
        );
    }

    #[test]
    fn merge_sums_and_spans() {
        let mut a = ThreadStats::start();
        a.finished_ops(5);
        a.add_bytes(50);
        a.set_found(3, 5);
        std::thread::sleep(Duration::from_millis(5));
        a.stop();
        let mut b = ThreadStats::start();
        b.finished_ops(7);
        b.set_found(1, 7);
        b.stop();
        let s = Summary::merge(&[a.clone(), b]);
        assert_eq!(s.done, 12);
        assert_eq!(s.bytes, 50);
        assert_eq!(s.found, Some((4, 12)));
        assert!(s.wall >= Duration::from_millis(5));
        assert!(s.thread_time >= a.finish - a.start);
        assert_eq!(Summary::merge(&[]).done, 0);
    }

    #[test]
    fn kind_lines_split_a_mix() {
        let mut a = ThreadStats::start();
        for _ in 0..3 {
            a.finished_ops(1);
            a.count_kind(OpKind::Scan, 1);
        }
        a.finished_ops(1);
        a.count_kind(OpKind::Insert, 1);
        a.record_latency(OpKind::Scan, 4000);
        a.stop();
        let mut s = Summary::merge(&[a]);
        assert_eq!(s.ops_by_kind, [(OpKind::Insert, 1), (OpKind::Scan, 3)]);
        // Only workloads that ask for it get the extra lines.
        assert!(s.kind_lines("analytics_scan").is_empty());
        s.split_by_kind = true;
        s.wall = Duration::from_secs(1);
        s.thread_time = Duration::from_secs(1);
        assert_eq!(s.kind_ops_per_sec(OpKind::Scan), 3.0);
        assert_eq!(s.kind_ops_per_sec(OpKind::Read), 0.0);
        // Timed kinds show their mean latency; untimed ones the
        // benchmark's micros/op.
        assert_eq!(
            s.kind_lines("analytics_scan"),
            [
                "analytics_scan.insert :  250000.000 micros/op 1 ops/sec 1.000 seconds 1 operations;",
                "analytics_scan.scan :       4.000 micros/op 3 ops/sec 1.000 seconds 3 operations;",
            ]
        );
    }

    #[test]
    fn header_lists_sizes() {
        let h = header(&BenchConfig::default(), None);
        assert!(h.contains("Keys:       16 bytes each\n"));
        assert!(h.contains("Values:     100 bytes each\n"));
        assert!(h.contains("Entries:    1000000\n"));
        assert!(h.contains("RawSize:    110.6 MB (estimated)\n"));
        assert!(h.contains("Memtablerep: teks\n"));
        assert_eq!(
            skipped_line("fillseq", "--use_existing_db is true"),
            "fillseq      : skipped (--use_existing_db is true)"
        );
    }
}
