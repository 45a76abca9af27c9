//! [`weft::Stats`] as JSON, one rendering for `weft stats --json` and the
//! engine statistics `weft bench` prints and stores.
//!
//! JSON keys are the `Stats` field names, so a script's field means exactly
//! what the library's doc says. Byte-string keys (partition bounds) are
//! rendered with `escape_ascii`, the same escaping `weft scan` uses, because
//! JSON strings cannot carry arbitrary bytes. Durations are seconds, as
//! JSON numbers; background jobs are keyed by [`job_key`].

use serde_json::{json, Value};
use weft::{JobKind, Stats};

/// A byte string as printable text (`escape_ascii`).
pub fn esc(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

/// The JSON key of a kind of background job: its name, `_` for spaces.
pub fn job_key(kind: JobKind) -> String {
    kind.name().replace(' ', "_")
}

/// Stats as a JSON object.
pub fn to_json(s: &Stats) -> Value {
    let partitions: Vec<Value> = s
        .partitions
        .iter()
        .map(|p| {
            json!({
                "id": p.id,
                "lower": esc(&p.lower),
                "upper": p.upper.as_deref().map(esc),
                "unsorted_tables": p.unsorted_tables,
                "unsorted_bytes": p.unsorted_bytes,
                "sorted_tables": p.sorted_tables,
                "sorted_bytes": p.sorted_bytes,
                "value_logs": p.value_logs,
                "value_log_bytes": p.value_log_bytes,
                "value_log_garbage_bytes": p.value_log_garbage_bytes,
                "size_bytes": p.size_bytes,
                "index_entries": p.index_entries,
                "index_bytes": p.index_bytes,
            })
        })
        .collect();
    let background_jobs: serde_json::Map<String, Value> = s
        .background_jobs
        .iter()
        .map(|(kind, j)| {
            let job = json!({
                "count": j.count,
                "bytes_written": j.bytes_written,
                "queued": j.queued.as_secs_f64(),
                "running": j.running.as_secs_f64(),
            });
            (job_key(*kind), job)
        })
        .collect();
    json!({
        "sequence": s.sequence,
        "memtable_kind": s.memtable_kind,
        "active_memtable_bytes": s.active_memtable_bytes,
        "immutable_memtables": s.immutable_memtables,
        "immutable_memtable_bytes": s.immutable_memtable_bytes,
        "live_snapshots": s.live_snapshots,
        "read_watermark": s.read_watermark,
        "partitions": partitions,
        "user_bytes_written": s.user_bytes_written,
        "wal_bytes_written": s.wal_bytes_written,
        "flush_bytes_written": s.flush_bytes_written,
        "merge_bytes_written": s.merge_bytes_written,
        "value_log_bytes_written": s.value_log_bytes_written,
        "values_kept_in_wal_bytes": s.values_kept_in_wal_bytes,
        "split_bytes_written": s.split_bytes_written,
        "consolidation_bytes_written": s.consolidation_bytes_written,
        "manifest_bytes_written": s.manifest_bytes_written,
        "index_checkpoint_bytes_written": s.index_checkpoint_bytes_written,
        "get_bytes_read": s.get_bytes_read,
        "scan_bytes_read": s.scan_bytes_read,
        "background_bytes_read": s.background_bytes_read,
        // NaN/inf have no JSON form; serde_json turns them into null.
        "write_amplification": s.write_amplification,
        "tables": s.tables,
        "mapped_tables": s.mapped_tables,
        "block_cache": {
            "capacity": s.block_cache.capacity,
            "usage": s.block_cache.usage,
            "hits": s.block_cache.hits,
            "misses": s.block_cache.misses,
        },
        "row_cache": {
            "capacity": s.row_cache.capacity,
            "usage": s.row_cache.usage,
            "entries": s.row_cache.entries,
            "hits": s.row_cache.hits,
            "misses": s.row_cache.misses,
            "fills": s.row_cache.fills,
            "skipped_fills": s.row_cache.skipped_fills,
            "refreshes": s.row_cache.refreshes,
        },
        "munks": {
            "capacity": s.munks.capacity,
            "munks": s.munks.munks,
            "bytes": s.munks.bytes,
            "resident_bytes": s.munks.resident_bytes,
            "hits": s.munks.hits,
            "scans": s.munks.scans,
            "loads": s.munks.loads,
            "rebalances": s.munks.rebalances,
            "relabels": s.munks.relabels,
            "evictions": s.munks.evictions,
            "build_bytes": s.munks.build_bytes,
        },
        "flushes": s.flushes,
        "merges": s.merges,
        "gcs": s.gcs,
        "gc_bytes_written": s.gc_bytes_written,
        "write_slowdowns": s.write_slowdowns,
        "write_stalls": s.write_stalls,
        "write_stall_micros": s.write_stall_micros,
        "wal_tail_truncated_bytes": s.wal_tail_truncated_bytes,
        "splits": s.splits,
        "consolidations": s.consolidations,
        "background_jobs": background_jobs,
        "partition_size": s.partition_size,
        "disk": {
            "tables": s.disk.tables,
            "value_logs": s.disk.value_logs,
            "wals": s.disk.wals,
            "manifest": s.disk.manifest,
            "index_checkpoints": s.disk.index_checkpoints,
            "other": s.disk.other,
        },
        "live_bytes_estimate": s.live_bytes_estimate,
        "feed_holds": s.feed_holds.iter().map(|h| json!({
            "name": h.name,
            "sequence": h.sequence,
            "retained_bytes": h.retained_bytes,
        })).collect::<Vec<_>>(),
        "feed_retained_bytes": s.feed_retained_bytes,
        "reads": {
            "memtable_hits": s.reads.memtable_hits,
            "unsorted_hits": s.reads.unsorted_hits,
            "sorted_hits": s.reads.sorted_hits,
            "misses": s.reads.misses,
            "unsorted_probes": s.reads.unsorted_probes,
            "unsorted_false_probes": s.reads.unsorted_false_probes,
            "sorted_probes": s.reads.sorted_probes,
            "value_log_reads": s.reads.value_log_reads,
        },
    })
}
