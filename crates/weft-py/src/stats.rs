//! `db.stats()`, `db.check()` and `db.checkpoint()` results as dicts: the
//! engine's structs field by field, under the same names (docs of each in
//! `weft::Stats` and friends).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

/// Sets `dict[name] = value.name` for each listed field.
macro_rules! fields {
    ($dict:expr, $value:expr, [$($name:ident),* $(,)?]) => {
        $( $dict.set_item(stringify!($name), $value.$name)?; )*
    };
}

fn read_stats<'py>(py: Python<'py>, r: &weft::ReadStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    fields!(
        d,
        r,
        [
            memtable_hits,
            unsorted_hits,
            sorted_hits,
            misses,
            unsorted_probes,
            unsorted_false_probes,
            sorted_probes,
            value_log_reads,
        ]
    );
    Ok(d)
}

fn background_jobs<'py>(
    py: Python<'py>,
    jobs: &[(weft::JobKind, weft::BackgroundJobStats)],
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (kind, s) in jobs {
        let j = PyDict::new(py);
        fields!(j, s, [count, bytes_written]);
        j.set_item("queued_seconds", s.queued.as_secs_f64())?;
        j.set_item("running_seconds", s.running.as_secs_f64())?;
        d.set_item(kind.key(), j)?;
    }
    Ok(d)
}

/// `weft::Stats` as a dict (nested structs as nested dicts, partitions as
/// a list of dicts, background jobs keyed by kind).
pub fn stats<'py>(py: Python<'py>, s: &weft::Stats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    fields!(
        d,
        s,
        [
            sequence,
            active_memtable_bytes,
            immutable_memtables,
            immutable_memtable_bytes,
            live_snapshots,
            read_watermark,
            user_bytes_written,
            wal_bytes_written,
            flush_bytes_written,
            merge_bytes_written,
            value_log_bytes_written,
            values_kept_in_wal_bytes,
            split_bytes_written,
            consolidation_bytes_written,
            manifest_bytes_written,
            index_checkpoint_bytes_written,
            write_amplification,
            get_bytes_read,
            scan_bytes_read,
            background_bytes_read,
            mapped_tables,
            tables,
            flushes,
            merges,
            gc_bytes_written,
            gcs,
            compaction_filter_removed,
            range_deleted_versions,
            range_tombstones,
            splits,
            consolidations,
            write_slowdowns,
            write_stalls,
            write_stall_micros,
            wal_tail_truncated_bytes,
            partition_size,
            live_bytes_estimate,
            feed_retained_bytes,
        ]
    );
    d.set_item("memtable_kind", &s.memtable_kind)?;
    d.set_item("space_amplification", s.space_amplification())?;

    let partitions = PyList::empty(py);
    for p in &s.partitions {
        let pd = PyDict::new(py);
        fields!(
            pd,
            p,
            [
                id,
                unsorted_tables,
                unsorted_bytes,
                sorted_tables,
                sorted_bytes,
                value_logs,
                value_log_bytes,
                value_log_garbage_bytes,
                size_bytes,
                index_entries,
                index_bytes,
            ]
        );
        pd.set_item("lower", PyBytes::new(py, &p.lower))?;
        pd.set_item("upper", p.upper.as_deref().map(|u| PyBytes::new(py, u)))?;
        partitions.append(pd)?;
    }
    d.set_item("partitions", partitions)?;

    let c = PyDict::new(py);
    fields!(c, s.block_cache, [capacity, usage, hits, misses]);
    d.set_item("block_cache", c)?;
    let c = PyDict::new(py);
    fields!(
        c,
        s.row_cache,
        [
            capacity,
            usage,
            entries,
            hits,
            misses,
            fills,
            skipped_fills,
            refreshes,
        ]
    );
    d.set_item("row_cache", c)?;
    let c = PyDict::new(py);
    fields!(
        c,
        s.munks,
        [
            capacity,
            munks,
            bytes,
            resident_bytes,
            hits,
            scans,
            loads,
            rebalances,
            relabels,
            evictions,
        ]
    );
    d.set_item("munks", c)?;
    let c = PyDict::new(py);
    fields!(
        c,
        s.disk,
        [tables, value_logs, wals, manifest, index_checkpoints, other]
    );
    c.set_item("total", s.disk.total())?;
    d.set_item("disk", c)?;
    d.set_item("reads", read_stats(py, &s.reads)?)?;
    d.set_item("background_jobs", background_jobs(py, &s.background_jobs)?)?;

    let holds = PyList::empty(py);
    for h in &s.feed_holds {
        let hd = PyDict::new(py);
        hd.set_item("name", &h.name)?;
        fields!(hd, h, [sequence, retained_bytes]);
        holds.append(hd)?;
    }
    d.set_item("feed_holds", holds)?;

    let l = &s.lifetime;
    let ld = PyDict::new(py);
    fields!(
        ld,
        l,
        [
            opens,
            restarts,
            unclean_closes,
            user_bytes_written,
            wal_bytes_written,
            flush_bytes_written,
            merge_bytes_written,
            value_log_bytes_written,
            values_kept_in_wal_bytes,
            split_bytes_written,
            consolidation_bytes_written,
            manifest_bytes_written,
            index_checkpoint_bytes_written,
            gc_bytes_written,
            write_amplification,
            get_bytes_read,
            scan_bytes_read,
            background_bytes_read,
            flushes,
            merges,
            gcs,
            compaction_filter_removed,
            range_deleted_versions,
            splits,
            consolidations,
            write_slowdowns,
            write_stalls,
            write_stall_micros,
            wal_tail_truncated_bytes,
        ]
    );
    ld.set_item("restart_reason", &l.restart_reason)?;
    ld.set_item("save_error", &l.save_error)?;
    ld.set_item("reads", read_stats(py, &l.reads)?)?;
    ld.set_item("background_jobs", background_jobs(py, &l.background_jobs)?)?;
    d.set_item("lifetime", ld)?;
    Ok(d)
}

/// `weft::CheckReport` as a dict.
pub fn check_report<'py>(py: Python<'py>, r: &weft::CheckReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    fields!(d, r, [files, blocks, bytes]);
    Ok(d)
}

/// `weft::CheckpointInfo` as a dict.
pub fn checkpoint_info<'py>(
    py: Python<'py>,
    c: &weft::CheckpointInfo,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    fields!(
        d,
        c,
        [
            sequence,
            files_linked,
            bytes_linked,
            files_copied,
            bytes_copied
        ]
    );
    Ok(d)
}
