//! What `INFO commandstats`/`errorstats`, `SLOWLOG` and `LATENCY` read,
//! and the settings `CONFIG SET` changes at run time.
//!
//! # Counting without shared writes
//!
//! Each event loop has its own [`LoopStats`]: per command `calls`, `usec`,
//! `rejected_calls` and `failed_calls`, written only by that loop's thread
//! (a load and a store, no atomic read-modify-write), on allocations of
//! their own. `INFO` sums the loops. So counting a command writes only
//! cache lines its own core already holds. Error replies are counted per
//! code in a per-loop map behind a lock only that loop and `INFO` take
//! (errors are the rare path). `CONFIG RESETSTAT` does not write the
//! loops' counters: it records a baseline that `INFO` subtracts.
//!
//! The slow log and the latency monitor are shared (one lock each) but are
//! touched only by commands slower than their thresholds, read per command
//! as one relaxed load each.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

/// One command's counters on one loop.
#[derive(Debug, Default)]
pub struct CmdCounters {
    /// Calls that ran (failed ones included).
    pub calls: AtomicU64,
    /// Microseconds spent in them.
    pub usec: AtomicU64,
    /// Calls refused before running (arity, `NOAUTH`, subscribe mode).
    pub rejected: AtomicU64,
    /// Calls that ran and replied with an error.
    pub failed: AtomicU64,
}

/// Adds `n` to a counter only one thread writes.
fn bump(a: &AtomicU64, n: u64) {
    a.store(a.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// One loop's counters.
pub struct LoopStats {
    cmds: Box<[CmdCounters]>,
    errors: Mutex<HashMap<Box<str>, u64>>,
    /// Connections this loop read from (bytes read).
    pub net_input: AtomicU64,
}

/// A command's totals summed over the loops.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CmdTotals {
    /// Calls.
    pub calls: u64,
    /// Microseconds.
    pub usec: u64,
    /// Rejected calls.
    pub rejected: u64,
    /// Failed calls.
    pub failed: u64,
}

impl LoopStats {
    fn new(commands: usize) -> LoopStats {
        LoopStats {
            cmds: (0..commands).map(|_| CmdCounters::default()).collect(),
            errors: Mutex::new(HashMap::new()),
            net_input: AtomicU64::new(0),
        }
    }

    /// Counts `calls` runs of command `ix` taking `usec` in all. Only the
    /// owning loop calls it.
    pub fn ran(&self, ix: usize, calls: u64, usec: u64, failed: bool) {
        if let Some(c) = self.cmds.get(ix) {
            bump(&c.calls, calls);
            bump(&c.usec, usec);
            if failed {
                bump(&c.failed, 1);
            }
        }
    }

    /// Counts a refused call of command `ix`.
    pub fn rejected(&self, ix: usize) {
        if let Some(c) = self.cmds.get(ix) {
            bump(&c.rejected, 1);
        }
    }

    /// Counts an error reply; `msg` starts with its code.
    pub fn error(&self, msg: &str) {
        let code = msg.split(' ').next().unwrap_or("ERR");
        let mut m = self.errors.lock();
        match m.get_mut(code) {
            Some(n) => *n += 1,
            None => {
                // Bounded, as Redis bounds its error table: odd codes
                // beyond it count as ERR.
                let code = if m.len() < 128 { code } else { "ERR" };
                *m.entry(code.into()).or_insert(0) += 1;
            }
        }
    }
}

#[repr(align(128))]
struct Padded<T>(T);

/// A slow-log entry.
#[derive(Debug, Clone)]
pub struct SlowEntry {
    /// Increasing id.
    pub id: u64,
    /// Unix time, seconds.
    pub time: u64,
    /// Duration, microseconds.
    pub usec: u64,
    /// The arguments, shortened as Redis does.
    pub args: Vec<Vec<u8>>,
    /// `ip:port` of the client.
    pub addr: String,
    /// The client's name.
    pub name: Vec<u8>,
}

/// Most arguments a slow-log entry keeps (Redis's SLOWLOG_ENTRY_MAX_ARGC).
const SLOW_MAX_ARGS: usize = 32;
/// Most bytes of one argument it keeps (SLOWLOG_ENTRY_MAX_STRING).
const SLOW_MAX_ARG_LEN: usize = 128;

/// Latency samples kept per event (Redis's LATENCY_TS_LEN).
const LATENCY_HISTORY: usize = 160;

/// One latency event's samples: (unix seconds, milliseconds), and the
/// largest seen.
#[derive(Debug, Default, Clone)]
pub struct LatencyEvent {
    /// Samples, oldest first.
    pub samples: VecDeque<(u64, u64)>,
    /// The largest sample.
    pub max: u64,
}

/// Every loop's counters, the slow log, the latency monitor, the run-time
/// settings.
pub struct Stats {
    loops: Box<[Padded<LoopStats>]>,
    baseline: Mutex<Option<Baseline>>,
    slowlog: Mutex<(u64, VecDeque<SlowEntry>)>,
    latency: Mutex<HashMap<&'static str, LatencyEvent>>,
    /// `slowlog-log-slower-than`, µs; negative: off.
    pub slowlog_slower_than: AtomicI64,
    /// `slowlog-max-len`.
    pub slowlog_max_len: AtomicUsize,
    /// `latency-monitor-threshold`, ms; 0: off.
    pub latency_threshold_ms: AtomicU64,
}

/// Totals at the last `CONFIG RESETSTAT`.
struct Baseline {
    cmds: Vec<CmdTotals>,
    errors: HashMap<Box<str>, u64>,
    net_input: u64,
}

impl Stats {
    /// Counters for `loops` loops and `commands` commands.
    pub fn new(loops: usize, commands: usize) -> Stats {
        Stats {
            loops: (0..loops.max(1))
                .map(|_| Padded(LoopStats::new(commands)))
                .collect(),
            baseline: Mutex::new(None),
            slowlog: Mutex::new((0, VecDeque::new())),
            latency: Mutex::new(HashMap::new()),
            slowlog_slower_than: AtomicI64::new(10_000),
            slowlog_max_len: AtomicUsize::new(128),
            latency_threshold_ms: AtomicU64::new(0),
        }
    }

    /// Loop `ix`'s counters (loop 0's for an index out of range).
    pub fn for_loop(&self, ix: usize) -> &LoopStats {
        &self.loops.get(ix).unwrap_or(&self.loops[0]).0
    }

    fn raw_commands(&self) -> Vec<CmdTotals> {
        let n = self.loops[0].0.cmds.len();
        let mut v = vec![CmdTotals::default(); n];
        for l in self.loops.iter() {
            for (t, c) in v.iter_mut().zip(l.0.cmds.iter()) {
                t.calls += c.calls.load(Ordering::Relaxed);
                t.usec += c.usec.load(Ordering::Relaxed);
                t.rejected += c.rejected.load(Ordering::Relaxed);
                t.failed += c.failed.load(Ordering::Relaxed);
            }
        }
        v
    }

    fn raw_errors(&self) -> HashMap<Box<str>, u64> {
        let mut m: HashMap<Box<str>, u64> = HashMap::new();
        for l in self.loops.iter() {
            for (k, v) in l.0.errors.lock().iter() {
                *m.entry(k.clone()).or_insert(0) += v;
            }
        }
        m
    }

    fn raw_net_input(&self) -> u64 {
        self.loops
            .iter()
            .map(|l| l.0.net_input.load(Ordering::Relaxed))
            .sum()
    }

    /// Per command totals since start or the last `CONFIG RESETSTAT`, by
    /// command index.
    pub fn commands(&self) -> Vec<CmdTotals> {
        let mut v = self.raw_commands();
        if let Some(b) = &*self.baseline.lock() {
            for (t, b) in v.iter_mut().zip(&b.cmds) {
                t.calls -= b.calls.min(t.calls);
                t.usec -= b.usec.min(t.usec);
                t.rejected -= b.rejected.min(t.rejected);
                t.failed -= b.failed.min(t.failed);
            }
        }
        v
    }

    /// Error replies by code, sorted by code.
    pub fn errors(&self) -> Vec<(Box<str>, u64)> {
        let mut m = self.raw_errors();
        if let Some(b) = &*self.baseline.lock() {
            for (k, n) in m.iter_mut() {
                *n -= b.errors.get(k).copied().unwrap_or(0).min(*n);
            }
        }
        let mut v: Vec<(Box<str>, u64)> = m.into_iter().filter(|(_, n)| *n > 0).collect();
        v.sort();
        v
    }

    /// Bytes read from clients.
    pub fn net_input(&self) -> u64 {
        let base = self.baseline.lock().as_ref().map_or(0, |b| b.net_input);
        self.raw_net_input().saturating_sub(base)
    }

    /// `CONFIG RESETSTAT`: later totals count from now.
    pub fn reset(&self) {
        let b = Baseline {
            cmds: self.raw_commands(),
            errors: self.raw_errors(),
            net_input: self.raw_net_input(),
        };
        *self.baseline.lock() = Some(b);
    }

    /// Logs a command that took `usec` if the slow log wants it.
    pub fn maybe_slow(&self, usec: u64, args: &[Vec<u8>], addr: &str, name: &[u8]) {
        let t = self.slowlog_slower_than.load(Ordering::Relaxed);
        if t < 0 || usec < t as u64 {
            return;
        }
        let max = self.slowlog_max_len.load(Ordering::Relaxed);
        let mut kept: Vec<Vec<u8>> = Vec::with_capacity(args.len().min(SLOW_MAX_ARGS));
        for (i, a) in args.iter().enumerate() {
            if i == SLOW_MAX_ARGS - 1 && args.len() > SLOW_MAX_ARGS {
                kept.push(format!("... ({} more arguments)", args.len() - i).into_bytes());
                break;
            }
            if a.len() > SLOW_MAX_ARG_LEN {
                let mut s = a[..SLOW_MAX_ARG_LEN].to_vec();
                s.extend_from_slice(
                    format!("... ({} more bytes)", a.len() - SLOW_MAX_ARG_LEN).as_bytes(),
                );
                kept.push(s);
            } else {
                kept.push(a.clone());
            }
        }
        let mut g = self.slowlog.lock();
        let id = g.0;
        g.0 += 1;
        g.1.push_front(SlowEntry {
            id,
            time: crate::keyspace::now_ms() / 1000,
            usec,
            args: kept,
            addr: addr.to_string(),
            name: name.to_vec(),
        });
        g.1.truncate(max);
    }

    /// The newest `n` slow-log entries (all if `None`), newest first.
    pub fn slowlog(&self, n: Option<usize>) -> Vec<SlowEntry> {
        let g = self.slowlog.lock();
        g.1.iter().take(n.unwrap_or(usize::MAX)).cloned().collect()
    }

    /// Entries in the slow log.
    pub fn slowlog_len(&self) -> usize {
        self.slowlog.lock().1.len()
    }

    /// Empties the slow log.
    pub fn slowlog_reset(&self) {
        self.slowlog.lock().1.clear();
    }

    /// Records a `command` latency sample if the monitor is on and `took`
    /// reaches its threshold.
    pub fn maybe_latency(&self, event: &'static str, took: Duration) {
        let t = self.latency_threshold_ms.load(Ordering::Relaxed);
        let ms = took.as_millis() as u64;
        if t == 0 || ms < t {
            return;
        }
        let now = crate::keyspace::now_ms() / 1000;
        let mut g = self.latency.lock();
        let e = g.entry(event).or_default();
        match e.samples.back_mut() {
            // One sample per second, the largest, as Redis keeps them.
            Some(last) if last.0 == now => last.1 = last.1.max(ms),
            _ => e.samples.push_back((now, ms)),
        }
        if e.samples.len() > LATENCY_HISTORY {
            e.samples.pop_front();
        }
        e.max = e.max.max(ms);
    }

    /// Every latency event with samples, by name.
    pub fn latency(&self) -> Vec<(&'static str, LatencyEvent)> {
        let g = self.latency.lock();
        let mut v: Vec<(&'static str, LatencyEvent)> =
            g.iter().map(|(k, e)| (*k, e.clone())).collect();
        v.sort_by_key(|(k, _)| *k);
        v
    }

    /// Drops the samples of `events` (all when empty); returns how many
    /// events had samples.
    pub fn latency_reset(&self, events: &[Vec<u8>]) -> usize {
        let mut g = self.latency.lock();
        if events.is_empty() {
            let n = g.len();
            g.clear();
            return n;
        }
        let mut n = 0;
        for e in events {
            let name = String::from_utf8_lossy(e).to_ascii_lowercase();
            let key = g.keys().find(|k| **k == name).copied();
            if let Some(k) = key {
                g.remove(k);
                n += 1;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loops_are_summed_and_resetstat_subtracts() {
        let s = Stats::new(2, 3);
        s.for_loop(0).ran(1, 1, 10, false);
        s.for_loop(1).ran(1, 2, 5, true);
        s.for_loop(1).rejected(2);
        s.for_loop(0).error("ERR bad");
        s.for_loop(1).error("WRONGTYPE x");
        let c = s.commands();
        assert_eq!(
            c[1],
            CmdTotals {
                calls: 3,
                usec: 15,
                rejected: 0,
                failed: 1
            }
        );
        assert_eq!(c[2].rejected, 1);
        assert_eq!(s.errors(), vec![("ERR".into(), 1), ("WRONGTYPE".into(), 1)]);
        s.reset();
        assert_eq!(s.commands()[1], CmdTotals::default());
        assert!(s.errors().is_empty());
        s.for_loop(0).ran(1, 1, 1, false);
        assert_eq!(s.commands()[1].calls, 1);
    }

    #[test]
    fn the_slow_log_keeps_the_newest_and_shortens_arguments() {
        let s = Stats::new(1, 1);
        s.slowlog_slower_than.store(100, Ordering::Relaxed);
        s.slowlog_max_len.store(2, Ordering::Relaxed);
        s.maybe_slow(99, &[b"get".to_vec()], "a", b"");
        assert_eq!(s.slowlog_len(), 0);
        let long = vec![b'x'; 200];
        for _ in 0..3 {
            s.maybe_slow(100, &[b"set".to_vec(), long.clone()], "a", b"n");
        }
        let e = s.slowlog(None);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].id, 2);
        assert_eq!(e[0].args[1].len(), 128 + "... (72 more bytes)".len());
        s.slowlog_reset();
        assert_eq!(s.slowlog_len(), 0);
    }
}
