//! Metamorphic test (after Pebble's `metamorphic` package): one random
//! history per seed — puts, deletes, mixed write batches, point and multi
//! gets, bounded range scans forward, reverse and from both ends, prefix
//! scans, cursor walks (seeks, next, prev, with writes while the cursor is
//! open), snapshots taken, read at and released, `flush`, `compact`,
//! `verify_checksums`, close-and-reopen and drop-and-reopen — is run
//! against a `BTreeMap` model and then against the database under many
//! option sets: every memtable kind with default and with tiny buffers,
//! value separation on, off and for every value, small partitions (splits),
//! eager value-log GC, block reads through mappings or `pread`, bloom
//! filters on and off, write stalls, `manual_wal_flush`. Each run writes a
//! transcript of every visible result (each get's value or absence, each
//! scan's pairs, each cursor position); the first option set's transcript
//! must equal the model's, and every other one must be byte-identical to
//! the first. A mismatch names the seed, both option sets and the first
//! differing operation (index and text) and how to replay it.
//!
//! Knobs:
//! * `WEFT_SEED=<u64>`: run only this seed (in each test);
//! * `WEFT_METAMORPHIC_SEEDS=<n>`: seeds per test (default 1), derived from
//!   the test's own seed;
//! * `WEFT_METAMORPHIC_STEPS=<n>`: operations per history (default 1500);
//!   a history of n steps is the first n of any longer one of its seed;
//! * `WEFT_METAMORPHIC_CONFIGS=a,b,...`: run only the option sets with
//!   these names, in this order (the first is the baseline), to replay a
//!   mismatch quickly.

// A test (or benchmark) fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::fmt::Write as _;
use std::ops::Bound;
use std::time::Instant;

use common::*;
use weft::{Db, MemtableKind, Options, ReadOptions, Snapshot, WriteBatch, WriteOptions};

/// Snapshot slots: a history takes snapshots into these and reads at them.
const SLOTS: usize = 4;

/// Distinct numbered keys (`k0000`..); a few more come from [`ALPHABET`].
const KEY_SPACE: u32 = 600;

/// Short keys over the extreme bytes, the empty key among them.
const ALPHABET: &[u8] = b"ab\x00\xff";

// ---------------------------------------------------------------- history --

/// One cursor move.
#[derive(Debug, Clone)]
enum Move {
    First,
    Last,
    Seek(Vec<u8>),
    SeekForPrev(Vec<u8>),
    /// `next`, or `seek_to_first` when the cursor is not valid.
    Next,
    /// `prev`, or `seek_to_last` when the cursor is not valid.
    Prev,
    /// A put while the cursor is open: the cursor must not see it.
    Put(Vec<u8>, Vec<u8>),
}

/// How a range is consumed.
#[derive(Debug, Clone)]
enum ScanMode {
    Forward,
    Reverse,
    /// `next` (false) or `next_back` (true), in this order, until the ends
    /// meet or the list ends.
    Mixed(Vec<bool>),
}

#[derive(Debug, Clone)]
enum Op {
    Put {
        key: Vec<u8>,
        value: Vec<u8>,
        sync: bool,
    },
    Delete {
        key: Vec<u8>,
    },
    /// `Some(value)` puts, `None` deletes; applied in order.
    Batch {
        ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    },
    Get {
        key: Vec<u8>,
        snap: Option<usize>,
    },
    MultiGet {
        keys: Vec<Vec<u8>>,
        snap: Option<usize>,
    },
    Scan {
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        snap: Option<usize>,
        mode: ScanMode,
        limit: usize,
    },
    Prefix {
        prefix: Vec<u8>,
        reverse: bool,
    },
    Cursor {
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
        snap: Option<usize>,
        moves: Vec<Move>,
    },
    TakeSnapshot {
        slot: usize,
    },
    ReleaseSnapshot {
        slot: usize,
    },
    Flush,
    Compact,
    Verify,
    /// Close (or drop) and open again; every snapshot is released first.
    Reopen {
        close: bool,
    },
}

/// FNV-1a, to name a long value in a transcript by its content.
fn fnv(b: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &c in b {
        h ^= u64::from(c);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A value as a transcript shows it: whole when short, else its first
/// bytes, length and hash.
fn val(v: &[u8]) -> String {
    if v.len() <= 24 {
        show(v)
    } else {
        format!("{}..[{}B #{:016x}]", show(&v[..12]), v.len(), fnv(v))
    }
}

fn opt_key(k: &Option<Vec<u8>>) -> String {
    k.as_deref().map_or_else(|| "-".into(), show)
}

fn snap_text(s: Option<usize>) -> String {
    s.map_or_else(|| "latest".into(), |i| format!("snap{i}"))
}

impl std::fmt::Display for Move {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Move::First => f.write_str("first"),
            Move::Last => f.write_str("last"),
            Move::Seek(k) => write!(f, "seek({})", show(k)),
            Move::SeekForPrev(k) => write!(f, "seek_for_prev({})", show(k)),
            Move::Next => f.write_str("next"),
            Move::Prev => f.write_str("prev"),
            Move::Put(k, v) => write!(f, "put({}={})", show(k), val(v)),
        }
    }
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Put { key, value, sync } => {
                write!(f, "put {} = {} sync={sync}", show(key), val(value))
            }
            Op::Delete { key } => write!(f, "delete {}", show(key)),
            Op::Batch { ops } => {
                f.write_str("batch [")?;
                for (i, (k, v)) in ops.iter().enumerate() {
                    let sep = if i == 0 { "" } else { ", " };
                    match v {
                        Some(v) => write!(f, "{sep}put {}={}", show(k), val(v))?,
                        None => write!(f, "{sep}del {}", show(k))?,
                    }
                }
                f.write_str("]")
            }
            Op::Get { key, snap } => write!(f, "get {} @{}", show(key), snap_text(*snap)),
            Op::MultiGet { keys, snap } => {
                let ks: Vec<String> = keys.iter().map(|k| show(k)).collect();
                write!(f, "multi_get [{}] @{}", ks.join(", "), snap_text(*snap))
            }
            Op::Scan {
                lo,
                hi,
                snap,
                mode,
                limit,
            } => {
                let mode = match mode {
                    ScanMode::Forward => "fwd".to_string(),
                    ScanMode::Reverse => "rev".to_string(),
                    ScanMode::Mixed(d) => format!(
                        "mixed:{}",
                        d.iter()
                            .map(|&b| if b { 'B' } else { 'F' })
                            .collect::<String>()
                    ),
                };
                write!(
                    f,
                    "range({}, {}) @{} {mode} limit={limit}",
                    show_bound(lo),
                    show_bound(hi),
                    snap_text(*snap)
                )
            }
            Op::Prefix { prefix, reverse } => {
                write!(f, "prefix({}) reverse={reverse}", show(prefix))
            }
            Op::Cursor {
                lower,
                upper,
                snap,
                moves,
            } => {
                let ms: Vec<String> = moves.iter().map(|m| m.to_string()).collect();
                write!(
                    f,
                    "cursor lower={} upper={} @{} [{}]",
                    opt_key(lower),
                    opt_key(upper),
                    snap_text(*snap),
                    ms.join(", ")
                )
            }
            Op::TakeSnapshot { slot } => write!(f, "take snap{slot}"),
            Op::ReleaseSnapshot { slot } => write!(f, "release snap{slot}"),
            Op::Flush => f.write_str("flush"),
            Op::Compact => f.write_str("compact"),
            Op::Verify => f.write_str("verify_checksums"),
            Op::Reopen { close } => {
                write!(f, "reopen via {}", if *close { "close" } else { "drop" })
            }
        }
    }
}

/// Draws a history. Only the RNG steers it, never the database, so a
/// seed's history of n steps is the first n of any longer one.
struct Generator {
    rng: StdRng,
    /// Snapshot slots holding a snapshot at this point of the history.
    live: [bool; SLOTS],
    /// Keys written so far (deletes and gets pick among them often).
    written: Vec<Vec<u8>>,
    seen: std::collections::HashSet<Vec<u8>>,
}

impl Generator {
    fn key(&mut self) -> Vec<u8> {
        if self.rng.gen_ratio(1, 12) {
            let len = self.rng.gen_range(0..=3);
            (0..len)
                .map(|_| ALPHABET[self.rng.gen_range(0..ALPHABET.len())])
                .collect()
        } else {
            format!("k{:04}", self.rng.gen_range(0..KEY_SPACE)).into_bytes()
        }
    }

    /// A key that was written before, half the time.
    fn old_key(&mut self) -> Vec<u8> {
        if !self.written.is_empty() && self.rng.gen_bool(0.5) {
            self.written[self.rng.gen_range(0..self.written.len())].clone()
        } else {
            self.key()
        }
    }

    fn note(&mut self, k: &[u8]) {
        if self.seen.insert(k.to_vec()) {
            self.written.push(k.to_vec());
        }
    }

    /// A bound key: a numbered key, sometimes a prefix of one or a key
    /// between two (`k012`, `k0120x`).
    fn bound_key(&mut self) -> Vec<u8> {
        let mut k = self.key();
        match self.rng.gen_range(0..6) {
            0 if !k.is_empty() => {
                k.pop();
            }
            1 => k.push(b'x'),
            _ => {}
        }
        k
    }

    fn bound(&mut self) -> Bound<Vec<u8>> {
        match self.rng.gen_range(0..4) {
            0 => Bound::Unbounded,
            1 | 2 => Bound::Included(self.bound_key()),
            _ => Bound::Excluded(self.bound_key()),
        }
    }

    /// Values carry their step so every version differs; one in eight is
    /// large (separated by most option sets), a few are empty.
    fn value(&mut self, step: usize) -> Vec<u8> {
        let n = match self.rng.gen_range(0..40) {
            0 => return Vec::new(),
            1..=5 => self.rng.gen_range(200..1200),
            _ => self.rng.gen_range(0..60),
        };
        let mut v = format!("{step}:").into_bytes();
        v.extend((0..n).map(|_| self.rng.gen::<u8>()));
        v
    }

    fn snap(&mut self) -> Option<usize> {
        let live: Vec<usize> = (0..SLOTS).filter(|&i| self.live[i]).collect();
        if !live.is_empty() && self.rng.gen_bool(0.4) {
            Some(live[self.rng.gen_range(0..live.len())])
        } else {
            None
        }
    }

    fn op(&mut self, step: usize) -> Op {
        match self.rng.gen_range(0..1000) {
            0..=279 => {
                let key = self.key();
                self.note(&key);
                Op::Put {
                    value: self.value(step),
                    key,
                    sync: self.rng.gen_ratio(1, 100),
                }
            }
            280..=359 => Op::Delete {
                key: self.old_key(),
            },
            360..=439 => {
                let n = self.rng.gen_range(0..=12);
                let mut ops = Vec::new();
                for _ in 0..n {
                    if self.rng.gen_ratio(1, 3) {
                        ops.push((self.old_key(), None));
                    } else {
                        let k = self.key();
                        self.note(&k);
                        ops.push((k, Some(self.value(step))));
                    }
                }
                Op::Batch { ops }
            }
            440..=559 => Op::Get {
                key: self.old_key(),
                snap: self.snap(),
            },
            560..=589 => {
                let n = self.rng.gen_range(1..=6);
                Op::MultiGet {
                    keys: (0..n).map(|_| self.old_key()).collect(),
                    snap: self.snap(),
                }
            }
            590..=699 => {
                let lo = self.bound();
                let hi = self.bound();
                let snap = self.snap();
                let limit = [3, 10, 40, usize::MAX][self.rng.gen_range(0..4)];
                let mode = match self.rng.gen_range(0..3) {
                    0 => ScanMode::Forward,
                    1 => ScanMode::Reverse,
                    _ => {
                        let n = self.rng.gen_range(1..=40);
                        ScanMode::Mixed((0..n).map(|_| self.rng.gen_bool(0.5)).collect())
                    }
                };
                Op::Scan {
                    lo,
                    hi,
                    snap,
                    mode,
                    limit,
                }
            }
            700..=729 => {
                let mut prefix = self.key();
                prefix.truncate(self.rng.gen_range(0..=4));
                Op::Prefix {
                    prefix,
                    reverse: self.rng.gen_bool(0.5),
                }
            }
            730..=849 => {
                let lower = self.rng.gen_bool(0.4).then(|| self.bound_key());
                let upper = self.rng.gen_bool(0.4).then(|| self.bound_key());
                let snap = self.snap();
                let n = self.rng.gen_range(1..=24);
                let mut moves = Vec::new();
                for _ in 0..n {
                    moves.push(match self.rng.gen_range(0..20) {
                        0 => Move::First,
                        1 => Move::Last,
                        2 | 3 => Move::Seek(self.bound_key()),
                        4 => Move::SeekForPrev(self.bound_key()),
                        5 => {
                            let k = self.key();
                            self.note(&k);
                            Move::Put(k, self.value(step))
                        }
                        6..=13 => Move::Next,
                        _ => Move::Prev,
                    });
                }
                Op::Cursor {
                    lower,
                    upper,
                    snap,
                    moves,
                }
            }
            850..=899 => {
                let slot = self.rng.gen_range(0..SLOTS);
                if self.live[slot] && self.rng.gen_bool(0.5) {
                    self.live[slot] = false;
                    Op::ReleaseSnapshot { slot }
                } else {
                    self.live[slot] = true;
                    Op::TakeSnapshot { slot }
                }
            }
            900..=939 => Op::Flush,
            940..=959 => Op::Compact,
            960..=969 => Op::Verify,
            970..=993 => {
                // Release a live snapshot: long-lived ones pin old versions.
                match (0..SLOTS).find(|&i| self.live[i]) {
                    Some(slot) => {
                        self.live[slot] = false;
                        Op::ReleaseSnapshot { slot }
                    }
                    None => Op::Flush,
                }
            }
            _ => {
                self.live = [false; SLOTS];
                Op::Reopen {
                    close: self.rng.gen_bool(0.5),
                }
            }
        }
    }
}

fn generate(seed: u64, steps: usize) -> Vec<Op> {
    let mut g = Generator {
        rng: rng(seed),
        live: [false; SLOTS],
        written: Vec::new(),
        seen: Default::default(),
    };
    (0..steps).map(|i| g.op(i)).collect()
}

// ------------------------------------------------------------- rendering --

fn pairs_text(pairs: &[(Vec<u8>, Vec<u8>)]) -> String {
    // The count goes last, so the first differing byte of two lines is in
    // the first differing pair.
    let mut s = String::from("[");
    for (i, (k, v)) in pairs.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        write!(s, "{sep}{}={}", show(k), val(v)).unwrap();
    }
    write!(s, "] ({} pairs)", pairs.len()).unwrap();
    s
}

fn got_text(v: Option<&[u8]>) -> String {
    v.map_or_else(|| "absent".into(), val)
}

fn cursor_text(pos: Option<(&[u8], &[u8])>) -> String {
    match pos {
        None => "invalid".into(),
        Some((k, v)) => format!("{}={}", show(k), val(v)),
    }
}

// --------------------------------------------------------------- targets --

/// What runs a history: the model or a database. `apply` returns the
/// operation's visible result as transcript text.
trait Target {
    fn apply(&mut self, op: &Op) -> String;
    /// Every pair, then every live snapshot's pairs, at the end.
    fn finish(&mut self) -> String;
}

/// The reference: a `BTreeMap` and a frozen copy per live snapshot.
struct ModelTarget {
    state: Model,
    snaps: [Option<Model>; SLOTS],
}

fn within(k: &[u8], lower: &Option<Vec<u8>>, upper: &Option<Vec<u8>>) -> bool {
    lower.as_deref().is_none_or(|l| k >= l) && upper.as_deref().is_none_or(|u| k < u)
}

impl ModelTarget {
    fn view(&self, snap: Option<usize>) -> &Model {
        match snap {
            Some(i) => self.snaps[i].as_ref().expect("history reads a live slot"),
            None => &self.state,
        }
    }
}

impl Target for ModelTarget {
    fn apply(&mut self, op: &Op) -> String {
        match op {
            Op::Put { key, value, .. } => {
                self.state.insert(key.clone(), value.clone());
                "ok".into()
            }
            Op::Delete { key } => {
                self.state.remove(key);
                "ok".into()
            }
            Op::Batch { ops } => {
                for (k, v) in ops {
                    match v {
                        Some(v) => self.state.insert(k.clone(), v.clone()),
                        None => self.state.remove(k),
                    };
                }
                "ok".into()
            }
            Op::Get { key, snap } => got_text(self.view(*snap).get(key).map(|v| &v[..])),
            Op::MultiGet { keys, snap } => {
                let m = self.view(*snap);
                let got: Vec<String> = keys
                    .iter()
                    .map(|k| got_text(m.get(k).map(|v| &v[..])))
                    .collect();
                got.join(" | ")
            }
            Op::Scan {
                lo,
                hi,
                snap,
                mode,
                limit,
            } => {
                let all: Vec<(Vec<u8>, Vec<u8>)> = self
                    .view(*snap)
                    .iter()
                    .filter(|(k, _)| in_bounds(k, lo, hi))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let got: Vec<_> = match mode {
                    ScanMode::Forward => all.into_iter().take(*limit).collect(),
                    ScanMode::Reverse => all.into_iter().rev().take(*limit).collect(),
                    ScanMode::Mixed(dirs) => {
                        let (mut front, mut back) = (0, all.len());
                        let mut got = Vec::new();
                        for &from_back in dirs {
                            if front == back {
                                break;
                            }
                            if from_back {
                                back -= 1;
                                got.push(all[back].clone());
                            } else {
                                front += 1;
                                got.push(all[front - 1].clone());
                            }
                        }
                        got
                    }
                };
                pairs_text(&got)
            }
            Op::Prefix { prefix, reverse } => {
                let mut got: Vec<(Vec<u8>, Vec<u8>)> = self
                    .state
                    .iter()
                    .filter(|(k, _)| k.starts_with(prefix))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if *reverse {
                    got.reverse();
                }
                pairs_text(&got)
            }
            Op::Cursor {
                lower,
                upper,
                snap,
                moves,
            } => {
                let view: Vec<(Vec<u8>, Vec<u8>)> = self
                    .view(*snap)
                    .iter()
                    .filter(|(k, _)| within(k, lower, upper))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let mut pos: Option<usize> = None;
                let mut out = Vec::new();
                for m in moves {
                    pos = match m {
                        Move::First => (!view.is_empty()).then_some(0),
                        Move::Last => view.len().checked_sub(1),
                        Move::Seek(t) => {
                            let i = view.partition_point(|(k, _)| k < t);
                            (i < view.len()).then_some(i)
                        }
                        Move::SeekForPrev(t) => {
                            view.partition_point(|(k, _)| k <= t).checked_sub(1)
                        }
                        Move::Next => match pos {
                            Some(p) => (p + 1 < view.len()).then_some(p + 1),
                            None => (!view.is_empty()).then_some(0),
                        },
                        Move::Prev => match pos {
                            Some(p) => p.checked_sub(1),
                            None => view.len().checked_sub(1),
                        },
                        Move::Put(k, v) => {
                            self.state.insert(k.clone(), v.clone());
                            pos
                        }
                    };
                    out.push(cursor_text(pos.map(|p| (&view[p].0[..], &view[p].1[..]))));
                }
                out.join(" ; ")
            }
            Op::TakeSnapshot { slot } => {
                self.snaps[*slot] = Some(self.state.clone());
                "ok".into()
            }
            Op::ReleaseSnapshot { slot } => {
                self.snaps[*slot] = None;
                "ok".into()
            }
            Op::Flush | Op::Compact | Op::Verify => "ok".into(),
            Op::Reopen { .. } => {
                self.snaps = Default::default();
                "ok".into()
            }
        }
    }

    fn finish(&mut self) -> String {
        let mut s = format!("final {}", pairs_text(&model_vec(&self.state)));
        for (i, m) in self.snaps.iter().enumerate() {
            if let Some(m) = m {
                write!(s, "\nfinal snap{i} {}", pairs_text(&model_vec(m))).unwrap();
            }
        }
        s
    }
}

/// What background work a run saw, summed over its reopens.
#[derive(Debug, Default, Clone, Copy)]
struct Work {
    flushes: u64,
    merges: u64,
    gcs: u64,
    splits: u64,
    consolidations: u64,
    max_partitions: usize,
    max_value_logs: usize,
}

struct DbTarget {
    db: Option<Db>,
    dir: tempfile::TempDir,
    options: Options,
    snaps: [Option<Snapshot>; SLOTS],
    work: Work,
}

impl DbTarget {
    fn open(options: Options) -> DbTarget {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), options.clone()).expect("open");
        DbTarget {
            db: Some(db),
            dir,
            options,
            snaps: Default::default(),
            work: Work::default(),
        }
    }

    fn db(&self) -> &Db {
        self.db.as_ref().expect("db is open")
    }

    fn ro(&self, snap: Option<usize>) -> ReadOptions {
        match snap {
            Some(i) => {
                ReadOptions::new().snapshot(self.snaps[i].as_ref().expect("live snapshot slot"))
            }
            None => ReadOptions::new(),
        }
    }

    fn note_layout(&mut self) {
        let st = self.db().stats();
        self.work.max_partitions = self.work.max_partitions.max(st.partitions.len());
        for p in &st.partitions {
            self.work.max_value_logs = self.work.max_value_logs.max(p.value_logs);
        }
    }

    /// Adds the open database's counters to the totals (before it closes).
    fn note_counters(&mut self) {
        self.note_layout();
        let st = self.db().stats();
        self.work.flushes += st.flushes;
        self.work.merges += st.merges;
        self.work.gcs += st.gcs;
        self.work.splits += st.splits;
        self.work.consolidations += st.consolidations;
    }
}

impl Target for DbTarget {
    fn apply(&mut self, op: &Op) -> String {
        match op {
            Op::Put { key, value, sync } => {
                if *sync {
                    self.db()
                        .put_opt(key, value, &WriteOptions::new().sync(true))
                        .expect("put_opt");
                } else {
                    self.db().put(key, value).expect("put");
                }
                "ok".into()
            }
            Op::Delete { key } => {
                self.db().delete(key).expect("delete");
                "ok".into()
            }
            Op::Batch { ops } => {
                let mut b = WriteBatch::new();
                for (k, v) in ops {
                    match v {
                        Some(v) => b.put(k, v),
                        None => b.delete(k),
                    };
                }
                self.db().write(b, &WriteOptions::new()).expect("write");
                "ok".into()
            }
            Op::Get { key, snap } => {
                let got = match snap {
                    None => self.db().get(key),
                    Some(_) => self.db().get_opt(key, &self.ro(*snap)),
                };
                got_text(got.expect("get").as_deref())
            }
            Op::MultiGet { keys, snap } => {
                let got: Vec<String> = self
                    .db()
                    .multi_get_opt(keys, &self.ro(*snap))
                    .into_iter()
                    .map(|r| got_text(r.expect("multi_get").as_deref()))
                    .collect();
                got.join(" | ")
            }
            Op::Scan {
                lo,
                hi,
                snap,
                mode,
                limit,
            } => {
                let range = self
                    .db()
                    .range_opt((lo.clone(), hi.clone()), &self.ro(*snap))
                    .expect("range_opt");
                let got: Vec<_> = match mode {
                    ScanMode::Forward => range.take(*limit).map(|r| r.expect("scan")).collect(),
                    ScanMode::Reverse => {
                        range.rev().take(*limit).map(|r| r.expect("scan")).collect()
                    }
                    ScanMode::Mixed(dirs) => {
                        let mut range = range;
                        let mut got = Vec::new();
                        for &from_back in dirs {
                            let item = if from_back {
                                range.next_back()
                            } else {
                                range.next()
                            };
                            match item {
                                Some(r) => got.push(r.expect("scan")),
                                None => break,
                            }
                        }
                        got
                    }
                };
                pairs_text(&got)
            }
            Op::Prefix { prefix, reverse } => {
                let r = self.db().prefix(prefix).expect("prefix");
                let got: Vec<_> = if *reverse {
                    r.rev().map(|r| r.expect("prefix scan")).collect()
                } else {
                    r.map(|r| r.expect("prefix scan")).collect()
                };
                pairs_text(&got)
            }
            Op::Cursor {
                lower,
                upper,
                snap,
                moves,
            } => {
                let mut ro = self.ro(*snap);
                ro.lower_bound = lower.clone();
                ro.upper_bound = upper.clone();
                let mut it = self.db().iter(&ro).expect("iter");
                let mut out = Vec::new();
                for m in moves {
                    match m {
                        Move::First => it.seek_to_first(),
                        Move::Last => it.seek_to_last(),
                        Move::Seek(t) => it.seek(t),
                        Move::SeekForPrev(t) => it.seek_for_prev(t),
                        Move::Next if it.valid() => it.next(),
                        Move::Next => it.seek_to_first(),
                        Move::Prev if it.valid() => it.prev(),
                        Move::Prev => it.seek_to_last(),
                        Move::Put(k, v) => self.db().put(k, v),
                    }
                    .expect("cursor move");
                    out.push(cursor_text(it.valid().then(|| (it.key(), it.value()))));
                }
                out.join(" ; ")
            }
            Op::TakeSnapshot { slot } => {
                self.snaps[*slot] = Some(self.db().snapshot());
                "ok".into()
            }
            Op::ReleaseSnapshot { slot } => {
                self.snaps[*slot] = None;
                "ok".into()
            }
            Op::Flush => {
                self.db().flush().expect("flush");
                self.note_layout();
                "ok".into()
            }
            Op::Compact => {
                self.db().compact().expect("compact");
                self.note_layout();
                "ok".into()
            }
            Op::Verify => {
                self.db().verify_checksums().expect("verify_checksums");
                "ok".into()
            }
            Op::Reopen { close } => {
                self.snaps = Default::default();
                self.note_counters();
                let db = self.db.take().unwrap();
                if *close {
                    db.close().expect("close");
                } else {
                    drop(db);
                }
                self.db = Some(Db::open(self.dir.path(), self.options.clone()).expect("reopen"));
                "ok".into()
            }
        }
    }

    fn finish(&mut self) -> String {
        let mut s = format!("final {}", pairs_text(&scan_all(self.db())));
        for (i, snap) in self.snaps.iter().enumerate() {
            if let Some(snap) = snap {
                let got = scan_cursor(self.db(), &ReadOptions::new().snapshot(snap));
                write!(s, "\nfinal snap{i} {}", pairs_text(&got)).unwrap();
            }
        }
        s
    }
}

/// Runs `history` on `target`: one transcript line per operation, then the
/// final state.
fn transcript(history: &[Op], target: &mut dyn Target) -> Vec<String> {
    let mut lines: Vec<String> = history
        .iter()
        .enumerate()
        .map(|(i, op)| format!("#{i} {op} -> {}", target.apply(op)))
        .collect();
    lines.push(format!("#{} {}", history.len(), target.finish()));
    lines
}

// --------------------------------------------------------------- configs --

/// A named option set.
struct Config {
    name: String,
    options: Options,
}

fn config(name: impl Into<String>, options: Options) -> Config {
    Config {
        name: name.into(),
        options,
    }
}

/// Every option set a history runs under. None of them may change what a
/// read returns; all of them change the physical layout or the timing.
fn configs() -> Vec<Config> {
    let tiny = || tiny_options(MemtableKind::default());
    let mut v = Vec::new();
    // Tiny buffers first: the baseline flushes, merges, separates, splits.
    for kind in kinds() {
        v.push(config(format!("tiny-{kind}"), tiny_options(kind)));
    }
    // Default buffers: everything in the memtable until flush() or compact().
    for kind in kinds() {
        v.push(config(
            format!("default-{kind}"),
            Options::default().memtable(kind),
        ));
    }
    v.push(config(
        "tiny-no-separation",
        tiny().min_blob_size(usize::MAX),
    ));
    v.push(config(
        "tiny-separate-at-merge",
        tiny().values_in_wal(false),
    ));
    // Munks loaded eagerly: reads of a partition with one go to it.
    v.push(config(
        "tiny-munks",
        tiny()
            .partition_size(64 << 10)
            .munk_cache_size(1 << 20)
            .munk_min_heat(0),
    ));
    // A budget for about one munk: loads and evictions all the time.
    v.push(config(
        "tiny-munks-small-budget",
        tiny()
            .memtable(MemtableKind::SkipList)
            .munk_cache_size(12 << 10)
            .munk_min_heat(0),
    ));
    v.push(config(
        "tiny-separate-all-one-log",
        tiny().min_blob_size(1).max_value_logs(1),
    ));
    v.push(config(
        "tiny-eager-gc",
        tiny()
            .memtable(MemtableKind::SkipList)
            .gc_garbage_ratio(0.01)
            .gc_min_garbage_bytes(1)
            .max_value_logs(2),
    ));
    v.push(config(
        "minimum-sizes-splits",
        tiny()
            .memtable(MemtableKind::JellyFish)
            .write_buffer_size(4096)
            .table_size(4096)
            .unsorted_limit(4096)
            .partition_size(4 << 10),
    ));
    v.push(config(
        "tiny-pread-no-bloom",
        tiny()
            .memtable(MemtableKind::Esl)
            .mmap_reads(false)
            .bloom_bits_per_key(0)
            .block_cache_size(4 << 10),
    ));
    v.push(config(
        "tiny-pread-no-cache",
        tiny()
            .memtable(MemtableKind::JellyFish)
            .mmap_reads(false)
            .block_cache_size(0)
            .block_size(1 << 10),
    ));
    v.push(config(
        "tiny-pread-big-cache",
        tiny()
            .memtable(MemtableKind::Cuckoo)
            .mmap_reads(false)
            .bloom_bits_per_key(1)
            .block_cache_size(8 << 20),
    ));
    v.push(config(
        "tiny-stalls",
        tiny()
            .max_immutable_memtables(1)
            .unsorted_slowdown_tables(1)
            .unsorted_stop_tables(2)
            .scan_merge_limit(1),
    ));
    v.push(config(
        "tiny-no-consolidation-manual-wal",
        tiny()
            .scan_merge_limit(usize::MAX)
            .manual_wal_flush(true)
            .max_immutable_memtables(4),
    ));
    v.push(config(
        "small-big-blocks",
        Options::default()
            .memtable(MemtableKind::SkipList)
            .write_buffer_size(64 << 10)
            .block_size(64 << 10)
            .table_size(256 << 10)
            .unsorted_limit(128 << 10)
            .partition_size(128 << 10)
            .min_blob_size(600)
            .mmap_reads(false),
    ));
    if let Ok(names) = std::env::var("WEFT_METAMORPHIC_CONFIGS") {
        let mut picked = Vec::new();
        for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let i = v.iter().position(|c| c.name == name).unwrap_or_else(|| {
                let all: Vec<&str> = v.iter().map(|c| c.name.as_str()).collect();
                panic!("WEFT_METAMORPHIC_CONFIGS: no option set {name:?} (have {all:?})")
            });
            picked.push(v.remove(i));
        }
        v = picked;
    }
    v
}

// ------------------------------------------------------------ comparison --

/// Panics with the first line where `got` departs from `want`.
fn assert_same(
    (seed, steps, history): (u64, usize, &[Op]),
    want: &[String],
    want_name: &str,
    got: &[String],
    got_cfg: &Config,
    baseline: Option<&Config>,
) {
    if want == got {
        return;
    }
    let i = want
        .iter()
        .zip(got)
        .position(|(a, b)| a != b)
        .unwrap_or(want.len().min(got.len()));
    let op = history
        .get(i)
        .map_or_else(|| "(final state)".to_string(), |o| o.to_string());
    let w = want.get(i).map_or("(nothing)", |s| s.as_str());
    let g = got.get(i).map_or("(nothing)", |s| s.as_str());
    let at = w
        .bytes()
        .zip(g.bytes())
        .position(|(a, b)| a != b)
        .unwrap_or(w.len().min(g.len()));
    let from = i.saturating_sub(5);
    let before: Vec<String> = want[from..i].iter().map(|s| excerpt(s, 0)).collect();
    let configs = match baseline {
        Some(b) => format!("{},{}", b.name, got_cfg.name),
        None => got_cfg.name.clone(),
    };
    panic!(
        "metamorphic mismatch: seed {seed}, {steps} steps, operation #{i}: {}\n\
         the results first differ at byte {at} of the line ({} and {} bytes):\n\
         {want_name} says:\n  {}\n{} says:\n  {}\n\
         operations before it:\n  {}\n\
         {want_name} options: {}\n{} options: {:?}\n\
         replay: WEFT_SEED={seed} WEFT_METAMORPHIC_STEPS={} WEFT_METAMORPHIC_CONFIGS={configs} \
         cargo test -p weft --release --test metamorphic",
        excerpt(&op, 0),
        w.len(),
        g.len(),
        excerpt(w, at),
        got_cfg.name,
        excerpt(g, at),
        before.join("\n  "),
        baseline.map_or_else(|| "-".into(), |b| format!("{:?}", b.options)),
        got_cfg.name,
        got_cfg.options,
        (i + 1).min(steps),
    );
}

/// At most 400 bytes of `line` around byte `at`.
fn excerpt(line: &str, at: usize) -> String {
    const SIDE: usize = 200;
    let mut lo = at.saturating_sub(SIDE);
    let mut hi = (at + SIDE).min(line.len());
    while !line.is_char_boundary(lo) {
        lo -= 1;
    }
    while !line.is_char_boundary(hi) {
        hi += 1;
    }
    let head = if lo > 0 { "..." } else { "" };
    let tail = if hi < line.len() { "..." } else { "" };
    format!("{head}{}{tail}", &line[lo..hi])
}

fn run_seed(seed: u64, steps: usize) {
    install_panic_counter();
    let panics_before = panic_count();
    let started = Instant::now();
    let history = generate(seed, steps);
    let model = transcript(
        &history,
        &mut ModelTarget {
            state: Model::new(),
            snaps: Default::default(),
        },
    );
    let configs = configs();
    let mut baseline: Option<Vec<String>> = None;
    let mut total = Work::default();
    for cfg in &configs {
        let _guard = SeedGuard::new(format!(
            "metamorphic seed {seed}, {steps} steps, option set {}: replay with WEFT_SEED={seed} \
             WEFT_METAMORPHIC_STEPS={steps} WEFT_METAMORPHIC_CONFIGS={}",
            cfg.name, cfg.name
        ));
        let t = Instant::now();
        let mut target = DbTarget::open(cfg.options.clone());
        let lines = transcript(&history, &mut target);
        target.note_counters();
        let w = target.work;
        target.snaps = Default::default();
        target.db.take().unwrap().close().expect("close");
        eprintln!(
            "metamorphic seed={seed} steps={steps} {:<34} {:>6.2}s flushes={} merges={} gcs={} \
             splits={} consolidations={} max partitions={} max value logs={}",
            cfg.name,
            t.elapsed().as_secs_f64(),
            w.flushes,
            w.merges,
            w.gcs,
            w.splits,
            w.consolidations,
            w.max_partitions,
            w.max_value_logs
        );
        total.flushes += w.flushes;
        total.merges += w.merges;
        total.gcs += w.gcs;
        total.splits += w.splits;
        total.consolidations += w.consolidations;
        total.max_partitions = total.max_partitions.max(w.max_partitions);
        total.max_value_logs = total.max_value_logs.max(w.max_value_logs);
        match &baseline {
            None => {
                assert_same(
                    (seed, steps, &history),
                    &model,
                    "the model",
                    &lines,
                    cfg,
                    None,
                );
                baseline = Some(lines);
            }
            Some(first) => assert_same(
                (seed, steps, &history),
                first,
                &configs[0].name,
                &lines,
                cfg,
                Some(&configs[0]),
            ),
        }
    }
    eprintln!(
        "metamorphic seed={seed}: {steps} steps x {} option sets identical in {:.1}s ({} transcript lines)",
        configs.len(),
        started.elapsed().as_secs_f64(),
        model.len()
    );
    assert_eq!(
        panic_count(),
        panics_before,
        "an engine (non-test) thread panicked during the run (see the message above)"
    );
    // The full set must have exercised the layout machinery, or the
    // comparison proved little.
    if std::env::var("WEFT_METAMORPHIC_CONFIGS").is_err() && steps >= 1000 {
        assert!(total.flushes > 0 && total.merges > 0, "{total:?}");
        assert!(total.max_partitions > 1, "no partition split: {total:?}");
        assert!(total.max_value_logs > 0, "no value log: {total:?}");
        assert!(total.gcs > 0, "value-log GC never ran: {total:?}");
    }
}

fn run(default_seed: u64) {
    let steps = env_usize("WEFT_METAMORPHIC_STEPS", 1500);
    let n = env_usize("WEFT_METAMORPHIC_SEEDS", 1);
    let defaults: Vec<u64> = (0..n as u64)
        .map(|i| default_seed.wrapping_add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15)))
        .collect();
    for seed in seeds(&defaults) {
        run_seed(seed, steps);
    }
}

#[test]
fn metamorphic_seed_1() {
    run(1);
}

#[test]
fn metamorphic_seed_2() {
    run(0x4d45_5441);
}
