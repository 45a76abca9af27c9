//! Crash points: named steps of multi-step jobs where a test can make the
//! process die, to prove each step's crash safety (DESIGN "Store": every
//! step is ordered through the manifest so a crash at any point loses
//! nothing).
//!
//! `WEFT_CRASH_AT=<point>[:<n>]` in the environment makes the `n`-th pass
//! (default 1) through `<point>` abort the process — no destructors, no
//! buffered writes flushed, like a kill -9 at exactly that step. Unset (the
//! normal case), a crash point is one relaxed load of a cached `None`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

fn armed() -> Option<&'static (String, u64)> {
    static ARMED: OnceLock<Option<(String, u64)>> = OnceLock::new();
    ARMED
        .get_or_init(|| {
            let spec = std::env::var("WEFT_CRASH_AT").ok()?;
            let (name, n) = match spec.split_once(':') {
                Some((name, n)) => (name.to_string(), n.parse().ok()?),
                None => (spec, 1),
            };
            Some((name, n))
        })
        .as_ref()
}

/// Marks a crash point; see the module docs.
pub(crate) fn crash_point(name: &str) {
    static PASSES: AtomicU64 = AtomicU64::new(0);
    if let Some((point, n)) = armed() {
        if point == name && PASSES.fetch_add(1, Ordering::SeqCst) + 1 == *n {
            eprintln!("weft: crash point {name} reached, aborting");
            std::process::abort();
        }
    }
}

/// Every crash point, for tests that visit them all.
pub const CRASH_POINTS: &[&str] = &[
    "rotate.new_wal_created",
    "flush.tables_written",
    "flush.manifest_written",
    "merge.tables_written",
    "merge.manifest_written",
    "gc.tables_written",
    "gc.manifest_written",
    "split.manifest_written",
    "consolidate.tables_written",
    "consolidate.manifest_written",
    "checkpoint.file_written",
    "open.recovered_tables_written",
    "open.manifest_written",
];
