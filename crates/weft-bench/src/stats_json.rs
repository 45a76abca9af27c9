//! [`weft::Stats`] as JSON, one rendering for `weft stats --json` and the
//! engine statistics `weft bench` prints and stores.
//!
//! JSON keys are the `Stats` field names, so a script's field means exactly
//! what the library's doc says; `lifetime` holds the counters over every
//! open (`weft::LifetimeStats`) under the same names as the since-open ones. Byte-string keys (partition bounds) are
//! rendered with `escape_ascii`, the same escaping `weft scan` uses, because
//! JSON strings cannot carry arbitrary bytes. Durations are seconds, as
//! JSON numbers; background jobs are keyed by [`job_key`].

use serde_json::{json, Value};
use weft::{BackgroundJobStats, JobKind, LifetimeStats, ReadStats, Stats};

/// A byte string as printable text (`escape_ascii`).
pub fn esc(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

/// The JSON key of a kind of background job: its name, `_` for spaces.
pub fn job_key(kind: JobKind) -> String {
    kind.key()
}

/// Background jobs as a JSON object keyed by [`job_key`].
fn jobs_json(jobs: &[(JobKind, BackgroundJobStats)]) -> Value {
    let map: serde_json::Map<String, Value> = jobs
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
    Value::Object(map)
}

/// Point reads by layer as a JSON object.
fn reads_json(r: &ReadStats) -> Value {
    json!({
        "memtable_hits": r.memtable_hits,
        "unsorted_hits": r.unsorted_hits,
        "sorted_hits": r.sorted_hits,
        "misses": r.misses,
        "unsorted_probes": r.unsorted_probes,
        "unsorted_false_probes": r.unsorted_false_probes,
        "sorted_probes": r.sorted_probes,
        "value_log_reads": r.value_log_reads,
    })
}

/// The lifetime counters ([`weft::LifetimeStats`]) as a JSON object, keyed
/// by their field names as the since-open ones are.
pub fn lifetime_json(l: &LifetimeStats) -> Value {
    json!({
        "opens": l.opens,
        "restarts": l.restarts,
        "restart_reason": l.restart_reason,
        "unclean_closes": l.unclean_closes,
        "save_error": l.save_error,
        "user_bytes_written": l.user_bytes_written,
        "wal_bytes_written": l.wal_bytes_written,
        "flush_bytes_written": l.flush_bytes_written,
        "merge_bytes_written": l.merge_bytes_written,
        "value_log_bytes_written": l.value_log_bytes_written,
        "values_kept_in_wal_bytes": l.values_kept_in_wal_bytes,
        "split_bytes_written": l.split_bytes_written,
        "consolidation_bytes_written": l.consolidation_bytes_written,
        "manifest_bytes_written": l.manifest_bytes_written,
        "index_checkpoint_bytes_written": l.index_checkpoint_bytes_written,
        "gc_bytes_written": l.gc_bytes_written,
        "write_amplification": l.write_amplification,
        "get_bytes_read": l.get_bytes_read,
        "scan_bytes_read": l.scan_bytes_read,
        "background_bytes_read": l.background_bytes_read,
        "flushes": l.flushes,
        "merges": l.merges,
        "gcs": l.gcs,
        "splits": l.splits,
        "consolidations": l.consolidations,
        "write_slowdowns": l.write_slowdowns,
        "write_stalls": l.write_stalls,
        "write_stall_micros": l.write_stall_micros,
        "wal_tail_truncated_bytes": l.wal_tail_truncated_bytes,
        "reads": reads_json(&l.reads),
        "background_jobs": jobs_json(&l.background_jobs),
    })
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
        "background_jobs": jobs_json(&s.background_jobs),
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
        "reads": reads_json(&s.reads),
        "lifetime": lifetime_json(&s.lifetime),
    })
}
