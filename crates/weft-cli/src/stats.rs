//! Rendering of [`weft::Stats`] for `weft stats`: a table for people, JSON
//! for scripts (the JSON is [`weft_bench::stats_json`], shared with
//! `weft bench`).

use weft::{LifetimeStats, Stats};
use weft_bench::stats_json::esc;
pub use weft_bench::stats_json::to_json;

/// Stats as an aligned, human-readable table: the state, then every
/// counter twice, since this open and over the database's life
/// ([`weft::LifetimeStats`]).
pub fn to_table(s: &Stats) -> String {
    let mut out = String::new();
    let mut row = |label: &str, value: String| {
        out.push_str(&format!("{label:<28} {value}\n"));
    };
    row("sequence", s.sequence.to_string());
    row("memtable kind", s.memtable_kind.clone());
    row("active memtable bytes", s.active_memtable_bytes.to_string());
    row(
        "immutable memtables",
        format!(
            "{} ({} bytes)",
            s.immutable_memtables, s.immutable_memtable_bytes
        ),
    );
    row("live snapshots", s.live_snapshots.to_string());
    row("read watermark", s.read_watermark.to_string());
    let c = &s.block_cache;
    let lookups = c.hits + c.misses;
    let ratio = if lookups == 0 {
        "-".to_string()
    } else {
        format!("{:.1}%", c.hits as f64 * 100.0 / lookups as f64)
    };
    row(
        "block cache",
        format!(
            "{} hits, {} misses ({ratio} hit), {} of {} bytes used",
            c.hits, c.misses, c.usage, c.capacity
        ),
    );
    let m = &s.munks;
    if m.capacity == 0 {
        row("munks", "off".to_string());
    } else {
        row(
            "munks",
            format!(
                "{} held, {} of {} bytes ({} resident), {} get hits, {} scans, {} loads, \
                 {} rebalances ({} bytes built), {} relabels, {} evictions",
                m.munks,
                m.bytes,
                m.capacity,
                m.resident_bytes,
                m.hits,
                m.scans,
                m.loads,
                m.rebalances,
                m.build_bytes,
                m.relabels,
                m.evictions
            ),
        );
    }
    let r = &s.row_cache;
    if r.capacity == 0 {
        row("row cache", "off".to_string());
    } else {
        let lookups = r.hits + r.misses;
        let ratio = if lookups == 0 {
            "-".to_string()
        } else {
            format!("{:.1}%", r.hits as f64 * 100.0 / lookups as f64)
        };
        row(
            "row cache",
            format!(
                "{} hits, {} misses ({ratio} hit), {} fills ({} skipped), {} refreshes, \
                 {} entries, {} of {} bytes used",
                r.hits,
                r.misses,
                r.fills,
                r.skipped_fills,
                r.refreshes,
                r.entries,
                r.usage,
                r.capacity
            ),
        );
    }
    row(
        "tables",
        format!(
            "{} live, {} read from mappings (their blocks skip the block cache)",
            s.tables, s.mapped_tables
        ),
    );
    row("space on disk", space_line(s));
    let d = &s.disk;
    row(
        "disk bytes by file kind",
        format!(
            "tables {}, value logs {}, WALs {}, manifest {}, index checkpoints {}, other {}",
            d.tables, d.value_logs, d.wals, d.manifest, d.index_checkpoints, d.other
        ),
    );
    out.push_str(&lifetime_lines(&s.lifetime));
    out.push_str(&counters_table(s));
    out.push_str(&background_jobs_table("since open", &s.background_jobs));
    out.push_str(&background_jobs_table(
        "lifetime",
        &s.lifetime.background_jobs,
    ));
    out.push_str(&feed_holds(s));
    out.push_str(&format!("partitions: {}\n", s.partitions.len()));
    if let Some(line) = partition_size_line(s) {
        out.push_str(&format!("  {line}\n"));
    }
    if !s.partitions.is_empty() {
        out.push_str(&format!(
            "  {:>6}  {:<32} {:>8} {:>14} {:>8} {:>14} {:>5} {:>14} {:>14} {:>8} {:>14} {:>8} {:>12}\n",
            "id",
            "range",
            "unsorted",
            "unsorted bytes",
            "sorted",
            "sorted bytes",
            "vlogs",
            "vlog bytes",
            "garbage bytes",
            "garbage",
            "size bytes",
            "of limit",
            "index B/key"
        ));
        for p in &s.partitions {
            let upper = match &p.upper {
                Some(u) => format!("\"{}\"", esc(u)),
                None => "+inf".to_string(),
            };
            let range = format!("[\"{}\", {upper})", esc(&p.lower));
            let per_key = if p.index_entries == 0 {
                "-".to_string()
            } else {
                format!("{:.1}", p.index_bytes as f64 / p.index_entries as f64)
            };
            out.push_str(&format!(
                "  {:>6}  {:<32} {:>8} {:>14} {:>8} {:>14} {:>5} {:>14} {:>14} {:>8} {:>14} {:>8} {:>12}\n",
                p.id,
                range,
                p.unsorted_tables,
                p.unsorted_bytes,
                p.sorted_tables,
                p.sorted_bytes,
                p.value_logs,
                p.value_log_bytes,
                p.value_log_garbage_bytes,
                percent(p.value_log_garbage_bytes, p.value_log_bytes),
                p.size_bytes,
                percent(p.size_bytes, s.partition_size),
                per_key
            ));
        }
    }
    out
}

/// How far the lifetime counters reach: opens, restarts, crashes, and
/// why they restarted or could not be saved, if so.
fn lifetime_lines(l: &LifetimeStats) -> String {
    let mut out = format!(
        "{:<28} {} opens (this one included), {} restarts of the counters, {} unclean closes\n",
        "lifetime", l.opens, l.restarts, l.unclean_closes
    );
    if let Some(why) = &l.restart_reason {
        out.push_str(&format!("  counters restarted at this open: {why}\n"));
    }
    if let Some(e) = &l.save_error {
        out.push_str(&format!("  last save of the counters failed: {e}\n"));
    }
    out
}

/// Every counter since this open and over the database's life, side by
/// side.
fn counters_table(s: &Stats) -> String {
    let l = &s.lifetime;
    let mut out = format!(
        "{:<38} {:>20} {:>20}\n",
        "counters", "since open", "lifetime"
    );
    let mut row = |label: &str, now: String, life: String| {
        out.push_str(&format!("  {label:<36} {now:>20} {life:>20}\n"));
    };
    let mut n = |label: &str, now: u64, life: u64| row(label, now.to_string(), life.to_string());
    n(
        "user bytes written",
        s.user_bytes_written,
        l.user_bytes_written,
    );
    n(
        "wal bytes written",
        s.wal_bytes_written,
        l.wal_bytes_written,
    );
    n(
        "flush bytes written",
        s.flush_bytes_written,
        l.flush_bytes_written,
    );
    n(
        "merge bytes written",
        s.merge_bytes_written,
        l.merge_bytes_written,
    );
    n(
        "value-log bytes written",
        s.value_log_bytes_written,
        l.value_log_bytes_written,
    );
    n(
        "values kept in WAL (bytes not copied)",
        s.values_kept_in_wal_bytes,
        l.values_kept_in_wal_bytes,
    );
    n("gc bytes written", s.gc_bytes_written, l.gc_bytes_written);
    n(
        "split bytes written",
        s.split_bytes_written,
        l.split_bytes_written,
    );
    n(
        "consolidation bytes written",
        s.consolidation_bytes_written,
        l.consolidation_bytes_written,
    );
    n(
        "manifest bytes written",
        s.manifest_bytes_written,
        l.manifest_bytes_written,
    );
    n(
        "index checkpoint bytes written",
        s.index_checkpoint_bytes_written,
        l.index_checkpoint_bytes_written,
    );
    n("bytes read by gets", s.get_bytes_read, l.get_bytes_read);
    n("bytes read by scans", s.scan_bytes_read, l.scan_bytes_read);
    n(
        "bytes read by background jobs",
        s.background_bytes_read,
        l.background_bytes_read,
    );
    n("flushes", s.flushes, l.flushes);
    n("merges", s.merges, l.merges);
    n("value-log GCs", s.gcs, l.gcs);
    n("partition splits", s.splits, l.splits);
    n("consolidations", s.consolidations, l.consolidations);
    n("write slowdowns", s.write_slowdowns, l.write_slowdowns);
    n("write stalls", s.write_stalls, l.write_stalls);
    n(
        "wal tail truncated bytes",
        s.wal_tail_truncated_bytes,
        l.wal_tail_truncated_bytes,
    );
    let (r, lr) = (&s.reads, &l.reads);
    n(
        "gets answered by memtable",
        r.memtable_hits,
        lr.memtable_hits,
    );
    n(
        "gets answered by UnsortedStore",
        r.unsorted_hits,
        lr.unsorted_hits,
    );
    n(
        "gets answered by SortedStore",
        r.sorted_hits,
        lr.sorted_hits,
    );
    n("gets that found nothing", r.misses, lr.misses);
    n(
        "UnsortedStore tables read by gets",
        r.unsorted_probes,
        lr.unsorted_probes,
    );
    n(
        "  of which held no version",
        r.unsorted_false_probes,
        lr.unsorted_false_probes,
    );
    n(
        "SortedStore tables read by gets",
        r.sorted_probes,
        lr.sorted_probes,
    );
    n(
        "value-log reads by gets",
        r.value_log_reads,
        lr.value_log_reads,
    );
    row(
        "write stall time",
        format!("{:.3} s", s.write_stall_micros as f64 / 1e6),
        format!("{:.3} s", l.write_stall_micros as f64 / 1e6),
    );
    row(
        "write amplification",
        format!("{:.3}", s.write_amplification),
        format!("{:.3}", l.write_amplification),
    );
    out
}

/// The change feed's holds, each with the WAL bytes kept for it.
fn feed_holds(s: &Stats) -> String {
    let mut out = format!(
        "change feed holds: {} ({} of WALs retained)\n",
        s.feed_holds.len(),
        human_bytes(s.feed_retained_bytes)
    );
    for h in &s.feed_holds {
        out.push_str(&format!(
            "  {:<32} from sequence {:>12}, retains {}\n",
            format!("\"{}\"", h.name.escape_debug()),
            h.sequence,
            human_bytes(h.retained_bytes)
        ));
    }
    out
}

/// `part` as a percentage of `whole` ("-" when `whole` is 0).
fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".to_string()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

/// Bytes as a short figure with a binary unit.
fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Space on disk against the live data it holds: `X, live ≈ Y, ratio Z`.
fn space_line(s: &Stats) -> String {
    let ratio = if s.live_bytes_estimate == 0 {
        "-".to_string()
    } else {
        format!("{:.2}", s.space_amplification())
    };
    format!(
        "{}, live ≈ {} (an upper bound), ratio {ratio}",
        human_bytes(s.disk.total()),
        human_bytes(s.live_bytes_estimate)
    )
}

/// The largest partition against `partition_size`, past which it splits
/// (`None` without partitions).
fn partition_size_line(s: &Stats) -> Option<String> {
    let largest = s.partitions.iter().max_by_key(|p| p.size_bytes)?;
    Some(format!(
        "largest: partition {} holds {} of partition_size {} ({})",
        largest.id,
        human_bytes(largest.size_bytes),
        human_bytes(s.partition_size),
        percent(largest.size_bytes, s.partition_size)
    ))
}

/// One row per kind of background job: runs, bytes written, and the time
/// jobs waited and ran, next to which the write stall time says whether
/// background work kept pace; `span` says over what (since open, lifetime).
fn background_jobs_table(span: &str, jobs: &[(weft::JobKind, weft::BackgroundJobStats)]) -> String {
    let mut out = format!(
        "background jobs ({span}):\n  {:<18} {:>8} {:>16} {:>12} {:>12} {:>12}\n",
        "kind", "count", "bytes written", "queued s", "running s", "mean ms"
    );
    for (kind, j) in jobs {
        let mean = if j.count == 0 {
            "-".to_string()
        } else {
            format!("{:.2}", j.running.as_secs_f64() * 1e3 / j.count as f64)
        };
        out.push_str(&format!(
            "  {:<18} {:>8} {:>16} {:>12.3} {:>12.3} {:>12}\n",
            kind.name(),
            j.count,
            j.bytes_written,
            j.queued.as_secs_f64(),
            j.running.as_secs_f64(),
            mean
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn default_stats_render() {
        let s = Stats::default();
        let j = to_json(&s);
        assert_eq!(j["sequence"], 0);
        assert!(j["partitions"].as_array().unwrap().is_empty());
        assert_eq!(j["block_cache"]["hits"], 0);
        assert_eq!(j["row_cache"]["capacity"], 0);
        assert_eq!(j["munks"]["capacity"], 0);
        let text = serde_json::to_string(&j).unwrap();
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, j);
        let t = to_table(&s);
        assert!(t.contains("sequence"));
        assert!(t.contains("partitions: 0"));
        assert!(t.contains("ratio -"), "{t}");
        assert!(t.contains("row cache"), "{t}");
    }

    #[test]
    fn job_rows_space_and_partition_sizes_render() {
        let mut s = Stats::default();
        let mut flush = weft::BackgroundJobStats::default();
        flush.count = 4;
        flush.bytes_written = 4096;
        flush.queued = std::time::Duration::from_millis(1500);
        flush.running = std::time::Duration::from_millis(200);
        s.background_jobs = weft::JobKind::ALL
            .iter()
            .map(|&k| {
                (
                    k,
                    if k == weft::JobKind::Flush {
                        flush
                    } else {
                        Default::default()
                    },
                )
            })
            .collect();
        s.partition_size = 1 << 30;
        s.disk.tables = 3 << 20;
        s.disk.wals = 1 << 20;
        s.live_bytes_estimate = 2 << 20;
        let mut p = weft::PartitionStats::default();
        p.id = 7;
        p.size_bytes = 256 << 20;
        p.value_log_bytes = 1000;
        p.value_log_garbage_bytes = 250;
        s.partitions.push(p);
        let t = to_table(&s);
        let jobs = t.split("background jobs (since open):").nth(1).unwrap();
        let row = jobs.lines().find(|l| l.starts_with("  flush ")).unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cells,
            ["flush", "4", "4096", "1.500", "0.200", "50.00"],
            "{t}"
        );
        assert!(
            t.contains("4.0 MiB, live ≈ 2.0 MiB (an upper bound), ratio 2.00"),
            "{t}"
        );
        assert!(
            t.contains("largest: partition 7 holds 256.0 MiB of partition_size 1.0 GiB (25.0%)"),
            "{t}"
        );
        assert!(t.contains("25.0%"), "{t}");

        let j = to_json(&s);
        assert_eq!(j["background_jobs"]["flush"]["count"], 4);
        assert_eq!(j["background_jobs"]["flush"]["queued"], 1.5);
        assert_eq!(j["background_jobs"]["index_checkpoint"]["count"], 0);
        assert_eq!(j["disk"]["wals"], 1 << 20);
        assert_eq!(j["live_bytes_estimate"], 2 << 20);
    }

    /// Each counter's row shows both views, the lifetime notes appear
    /// when set, and the JSON has the lifetime object under the same keys.
    #[test]
    fn lifetime_counters_render_beside_the_since_open_ones() {
        let mut s = Stats::default();
        s.flushes = 2;
        s.user_bytes_written = 100;
        s.lifetime.flushes = 7;
        s.lifetime.user_bytes_written = 12345;
        s.lifetime.opens = 4;
        s.lifetime.restarts = 1;
        s.lifetime.unclean_closes = 2;
        s.lifetime.background_jobs = weft::JobKind::ALL
            .iter()
            .map(|&k| (k, Default::default()))
            .collect();
        let t = to_table(&s);
        let cells = |label: &str| -> Vec<String> {
            let line = t
                .lines()
                .find(|l| l.trim_start().starts_with(label))
                .unwrap_or_else(|| panic!("no {label} row in\n{t}"));
            line[label.len() + 2..]
                .split_whitespace()
                .map(str::to_string)
                .collect()
        };
        assert_eq!(cells("flushes"), ["2", "7"], "{t}");
        assert_eq!(cells("user bytes written"), ["100", "12345"], "{t}");
        assert!(
            t.contains("4 opens (this one included), 1 restarts of the counters, 2 unclean closes"),
            "{t}"
        );
        assert!(t.contains("background jobs (lifetime):"), "{t}");
        assert!(!t.contains("counters restarted at this open"), "{t}");
        s.lifetime.restart_reason = Some("STATS: checksum mismatch".into());
        s.lifetime.save_error = Some("disk full".into());
        let t = to_table(&s);
        assert!(
            t.contains("counters restarted at this open: STATS: checksum mismatch"),
            "{t}"
        );
        assert!(
            t.contains("last save of the counters failed: disk full"),
            "{t}"
        );

        let j = to_json(&s);
        assert_eq!(j["flushes"], 2);
        assert_eq!(j["lifetime"]["flushes"], 7);
        assert_eq!(j["lifetime"]["opens"], 4);
        assert_eq!(j["lifetime"]["restart_reason"], "STATS: checksum mismatch");
        assert!(j["lifetime"]["background_jobs"]["flush"]["count"].is_u64());
        assert!(j["lifetime"]["reads"]["misses"].is_u64());
    }

    #[test]
    fn partition_bounds_are_escaped() {
        let mut s = Stats::default();
        let mut p = weft::PartitionStats::default();
        p.id = 3;
        p.lower = b"a\t\xff".to_vec();
        p.upper = None;
        p.sorted_tables = 2;
        s.partitions.push(p.clone());
        p.lower = Vec::new();
        p.upper = Some(b"m\"".to_vec());
        s.partitions.push(p);
        let j = to_json(&s);
        assert_eq!(j["partitions"][0]["lower"], "a\\t\\xff");
        assert!(j["partitions"][0]["upper"].is_null());
        assert_eq!(j["partitions"][1]["upper"], "m\\\"");
        assert_eq!(j["partitions"][0]["sorted_tables"], 2);
        let t = to_table(&s);
        assert!(t.contains("[\"a\\t\\xff\", +inf)"), "{t}");
    }
}
