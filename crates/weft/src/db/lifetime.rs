//! The lifetime counters ([`crate::LifetimeStats`]): the counts of every
//! earlier session, read from the `STATS` file at open
//! ([`crate::stats_file`]), plus this session's own counters.
//!
//! This session's counters only ever grow, and the earlier sessions' part
//! is fixed at open, so every save writes at least what the save before it
//! wrote: across opens the counters never go backwards, and a crash loses
//! only what was counted after the last save. Saves happen at open (which
//! also records the open), every [`crate::Options::stats_save_interval`]
//! on the flush thread, and at a clean close (the only save that also
//! fsyncs the directory and marks the file clean). A save that fails is
//! noted ([`crate::LifetimeStats::save_error`]) and never poisons: the
//! counters are statistics, not data.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::core::Core;
use crate::stats::{LifetimeStats, ReadStats};
use crate::stats_file::{self, StatsFile};

/// Which save it is: what it marks and how durable its name is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SaveAt {
    /// At open, once recovery is done: records the open, marked unclean
    /// until a clean close replaces it.
    Open,
    /// Every `stats_save_interval`; skipped when nothing changed.
    Interval,
    /// At a clean close: marked clean, its rename made durable.
    Close,
}

impl Core {
    /// This session's counters (since open), in the lifetime view's shape:
    /// [`crate::Db::stats`] reads its flat since-open fields from here too,
    /// so the two views count the same things.
    pub fn session_counters(&self) -> LifetimeStats {
        let c = &self.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (get_bytes_read, scan_bytes_read, background_bytes_read) =
            self.cache.disk_reads().totals();
        let r = &self.reads;
        let mut s = LifetimeStats {
            user_bytes_written: c.user_bytes.load(),
            wal_bytes_written: c.wal_bytes.load(),
            flush_bytes_written: load(&c.flush_bytes),
            merge_bytes_written: load(&c.merge_bytes),
            value_log_bytes_written: load(&c.value_log_bytes),
            values_kept_in_wal_bytes: load(&c.wal_kept_bytes),
            split_bytes_written: load(&c.split_bytes),
            consolidation_bytes_written: load(&c.consolidation_bytes),
            manifest_bytes_written: load(&c.manifest_bytes),
            index_checkpoint_bytes_written: load(&c.checkpoint_bytes),
            gc_bytes_written: load(&c.gc_bytes),
            get_bytes_read,
            scan_bytes_read,
            background_bytes_read,
            flushes: load(&c.flushes),
            merges: load(&c.merges),
            gcs: load(&c.gcs),
            compaction_filter_removed: load(&c.filtered),
            range_deleted_versions: load(&c.range_deleted),
            splits: load(&c.splits),
            consolidations: load(&c.consolidations),
            write_slowdowns: load(&c.slowdowns),
            write_stalls: load(&c.stalls),
            write_stall_micros: load(&c.stall_micros),
            wal_tail_truncated_bytes: load(&c.wal_truncated),
            reads: ReadStats {
                memtable_hits: r.memtable_hits.load(),
                unsorted_hits: r.unsorted_hits.load(),
                sorted_hits: r.sorted_hits.load(),
                misses: r.misses.load(),
                unsorted_probes: r.unsorted_probes.load(),
                unsorted_false_probes: r.unsorted_false_probes.load(),
                sorted_probes: r.sorted_probes.load(),
                value_log_reads: r.value_log_reads.load(),
            },
            background_jobs: c.background_jobs(),
            ..LifetimeStats::default()
        };
        s.write_amplification = s.amplification();
        s
    }

    /// The lifetime view: the earlier sessions' counts plus `session`
    /// (this session's, from [`Core::session_counters`]).
    pub fn lifetime_stats(&self, session: &LifetimeStats) -> LifetimeStats {
        let mut s = LifetimeStats::from_counts(&self.lifetime.counts_with(session));
        s.restart_reason = self.lifetime.restart_reason.clone();
        s.save_error = self.lifetime.save_error.lock().clone();
        s
    }

    /// Saves the lifetime counters to `STATS` (see the module docs). A
    /// failure is noted for [`crate::LifetimeStats::save_error`], not
    /// returned: nothing depends on the save but the statistics.
    pub fn save_stats(&self, at: SaveAt) {
        let lifetime = &self.lifetime;
        let mut written = lifetime.written.lock();
        let counts = lifetime.counts_with(&self.session_counters());
        *lifetime.last_save.lock() = Some(Instant::now());
        if at == SaveAt::Interval && written.as_ref() == Some(&counts) {
            return;
        }
        let file = StatsFile {
            clean: at == SaveAt::Close,
            counts,
        };
        let saved = crate::util::fs::activity("stats", || {
            stats_file::save(&*self.fs, &self.dir, &file, at == SaveAt::Close)
        });
        match saved {
            Ok(()) => {
                *written = Some(file.counts);
                *lifetime.save_error.lock() = None;
            }
            Err(e) => *lifetime.save_error.lock() = Some(e.to_string()),
        }
    }

    /// How long until the next interval save is due (zero: now); `None`
    /// when interval saves are off (`stats_save_interval` of zero).
    pub fn stats_save_due_in(&self) -> Option<Duration> {
        let interval = self.options.stats_save_interval;
        if interval.is_zero() {
            return None;
        }
        let last = *self.lifetime.last_save.lock();
        Some(last.map_or(Duration::ZERO, |t| interval.saturating_sub(t.elapsed())))
    }
}
