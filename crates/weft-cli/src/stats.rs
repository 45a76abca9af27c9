//! Rendering of [`weft::Stats`] for `weft stats`: a table for people, JSON
//! for scripts (the JSON is [`weft_bench::stats_json`], shared with
//! `weft bench`).

use weft::Stats;
use weft_bench::stats_json::esc;
pub use weft_bench::stats_json::to_json;

/// Stats as an aligned, human-readable table.
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
    row("user bytes written", s.user_bytes_written.to_string());
    row("wal bytes written", s.wal_bytes_written.to_string());
    row("flush bytes written", s.flush_bytes_written.to_string());
    row("merge bytes written", s.merge_bytes_written.to_string());
    row(
        "value-log bytes written",
        s.value_log_bytes_written.to_string(),
    );
    row("split bytes written", s.split_bytes_written.to_string());
    row(
        "consolidation bytes written",
        s.consolidation_bytes_written.to_string(),
    );
    row(
        "manifest bytes written",
        s.manifest_bytes_written.to_string(),
    );
    row(
        "write amplification",
        format!("{:.3}", s.write_amplification),
    );
    row(
        "bytes read from disk",
        format!(
            "{} by gets, {} by scans, {} by background jobs",
            s.get_bytes_read, s.scan_bytes_read, s.background_bytes_read
        ),
    );
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
    row(
        "tables",
        format!(
            "{} live, {} read from mappings (their blocks skip the block cache)",
            s.tables, s.mapped_tables
        ),
    );
    row("flushes", s.flushes.to_string());
    row("merges", s.merges.to_string());
    row(
        "value-log GCs",
        format!("{} ({} bytes written)", s.gcs, s.gc_bytes_written),
    );
    row("partition splits", s.splits.to_string());
    let r = &s.reads;
    row(
        "gets answered by",
        format!(
            "memtable {}, UnsortedStore {}, SortedStore {}, none {}",
            r.memtable_hits, r.unsorted_hits, r.sorted_hits, r.misses
        ),
    );
    row(
        "table reads by gets",
        format!(
            "UnsortedStore {} ({} found nothing), SortedStore {}, value log {}",
            r.unsorted_probes, r.unsorted_false_probes, r.sorted_probes, r.value_log_reads
        ),
    );
    row("write slowdowns", s.write_slowdowns.to_string());
    row("write stalls", s.write_stalls.to_string());
    row(
        "write stall time",
        format!("{:.3} s", s.write_stall_micros as f64 / 1e6),
    );
    row(
        "wal tail truncated bytes",
        s.wal_tail_truncated_bytes.to_string(),
    );
    out.push_str(&format!("partitions: {}\n", s.partitions.len()));
    if !s.partitions.is_empty() {
        out.push_str(&format!(
            "  {:>6}  {:<32} {:>8} {:>14} {:>8} {:>14} {:>5} {:>14} {:>14} {:>12}\n",
            "id",
            "range",
            "unsorted",
            "unsorted bytes",
            "sorted",
            "sorted bytes",
            "vlogs",
            "vlog bytes",
            "garbage bytes",
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
                "  {:>6}  {:<32} {:>8} {:>14} {:>8} {:>14} {:>5} {:>14} {:>14} {:>12}\n",
                p.id,
                range,
                p.unsorted_tables,
                p.unsorted_bytes,
                p.sorted_tables,
                p.sorted_bytes,
                p.value_logs,
                p.value_log_bytes,
                p.value_log_garbage_bytes,
                per_key
            ));
        }
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
        let text = serde_json::to_string(&j).unwrap();
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, j);
        let t = to_table(&s);
        assert!(t.contains("sequence"));
        assert!(t.contains("partitions: 0"));
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
