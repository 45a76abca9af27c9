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

/// Marks a pause point: in the crate's unit tests, a background job that
/// reaches a closed gate (`gates`) for its database directory waits
/// there until the test opens it, so a test can hold one job mid-way and
/// show what runs beside it. Outside tests it does nothing.
pub(crate) fn pause_point(name: &str, dir: &std::path::Path) {
    #[cfg(test)]
    gates::pass(name, dir);
    #[cfg(not(test))]
    let _ = (name, dir);
}

/// Gates for [`pause_point`], keyed by point and directory so tests running
/// side by side in one process never hold each other's jobs.
#[cfg(test)]
pub(crate) mod gates {
    use std::path::{Path, PathBuf};
    use std::time::{Duration, Instant};

    use parking_lot::{Condvar, Mutex};

    struct Gate {
        name: String,
        dir: PathBuf,
        closed: bool,
        /// Jobs that have reached the gate (waiting or let through).
        reached: u64,
    }

    static GATES: Mutex<Vec<Gate>> = Mutex::new(Vec::new());
    static CHANGED: Condvar = Condvar::new();

    fn set(name: &str, dir: &Path, closed: bool) {
        let mut gates = GATES.lock();
        match gates.iter_mut().find(|g| g.name == name && g.dir == dir) {
            Some(g) => g.closed = closed,
            None => gates.push(Gate {
                name: name.to_string(),
                dir: dir.to_path_buf(),
                closed,
                reached: 0,
            }),
        }
        CHANGED.notify_all();
    }

    /// Opens its gate when dropped, so a failing test never leaves a job
    /// held (and the database's shutdown waiting for it).
    pub struct Closed {
        name: String,
        dir: PathBuf,
    }

    impl Drop for Closed {
        fn drop(&mut self) {
            open(&self.name, &self.dir);
        }
    }

    /// Holds jobs of `dir` at pause point `name` until [`open`] or until
    /// the returned guard drops.
    #[must_use]
    pub fn close(name: &str, dir: &Path) -> Closed {
        set(name, dir, true);
        Closed {
            name: name.to_string(),
            dir: dir.to_path_buf(),
        }
    }

    /// Lets held and later jobs through.
    pub fn open(name: &str, dir: &Path) {
        set(name, dir, false);
    }

    /// Waits up to `limit` until some job has reached the gate; false if
    /// none did.
    pub fn wait_reached(name: &str, dir: &Path, limit: Duration) -> bool {
        wait_reached_by(name, dir, 1, limit)
    }

    /// Waits up to `limit` until `jobs` jobs have reached the gate (while
    /// it stays closed, they are all held there); false if fewer did.
    pub fn wait_reached_by(name: &str, dir: &Path, jobs: u64, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut gates = GATES.lock();
        loop {
            let reached = gates
                .iter()
                .any(|g| g.name == name && g.dir == dir && g.reached >= jobs);
            if reached {
                return true;
            }
            if CHANGED.wait_until(&mut gates, deadline).timed_out() {
                return false;
            }
        }
    }

    pub(super) fn pass(name: &str, dir: &Path) {
        let mut gates = GATES.lock();
        let Some(i) = gates.iter().position(|g| g.name == name && g.dir == dir) else {
            return;
        };
        gates[i].reached += 1;
        CHANGED.notify_all();
        while gates[i].closed {
            CHANGED.wait(&mut gates);
        }
    }
}
