//! Model-based randomized test: thousands of random operations against a Db
//! and a `BTreeMap` model (with one frozen copy per live snapshot), checking
//! every read, scan and cursor move against the model.
//!
//! Knobs: `WEFT_SEED=<u64>` runs only that seed; `WEFT_MODEL_STEPS=<n>` sets
//! the steps per seed and memtable kind (default 12000).
//!
//! Tiny options (8 KiB write buffer, 16 KiB tables, 32 KiB unsorted limit,
//! 256 B blocks) make flushes, merges and multi-table partitions happen all
//! the time; the test asserts at the end that flushes and merges did happen.
//!
//! Some writes skip the WAL (`disable_wal`): a reopen by `close()` or by
//! dropping the handle flushes them, so the model keeps them; a reopen by
//! `close_with(flush(false))` is drawn only while every unlogged write has
//! been flushed by an explicit `flush`/`compact` (which unlogged writes a
//! background flush took is timing), and the logged writes since come back
//! from the WAL. Across reopens the lifetime counters (`Stats::lifetime`)
//! must never go back and must count every open.
//!
//! Range deletes (`Db::delete_range`, and inside batches) are drawn too,
//! over ranges of the same small alphabet, so they cover many keys and
//! meet every layer; the run asserts that merges dropped versions by them.

// A test (or benchmark) fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::ops::Bound;

use common::*;
use weft::{
    CloseOptions, Compression, Db, MemtableKind, ReadOptions, Snapshot, WriteBatch, WriteOptions,
};

/// Small alphabet, including the extreme bytes, so keys collide and sort
/// at the edges.
const ALPHABET: &[u8] = b"ab\x00\xff";

fn rand_key(rng: &mut StdRng) -> Vec<u8> {
    let len = if rng.gen_ratio(1, 30) {
        0
    } else {
        rng.gen_range(1..=4)
    };
    (0..len)
        .map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())])
        .collect()
}

/// Values carry the step number so that two versions of one key differ.
/// Every other step's value repeats its first 16 random bytes, so that
/// compressed layers store some blocks and values compressed (the same
/// draws either way: a seed's history does not depend on it).
fn rand_value(rng: &mut StdRng, step: usize) -> Vec<u8> {
    let bytes = |rng: &mut StdRng, n: usize| -> Vec<u8> {
        let drawn: Vec<u8> = (0..n).map(|_| rng.gen::<u8>()).collect();
        match step % 2 {
            0 => (0..n).map(|i| drawn[i % 16]).collect(),
            _ => drawn,
        }
    };
    match rng.gen_range(0..20) {
        0 => Vec::new(),
        1 => {
            let mut v = format!("{step}:").into_bytes();
            let n = rng.gen_range(200..1500);
            v.extend(bytes(rng, n));
            v
        }
        _ => {
            let mut v = format!("{step}:").into_bytes();
            let n = rng.gen_range(0..60);
            v.extend(bytes(rng, n));
            v
        }
    }
}

fn rand_bound(rng: &mut StdRng) -> Bound<Vec<u8>> {
    match rng.gen_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(rand_key(rng)),
        _ => Bound::Excluded(rand_key(rng)),
    }
}

fn rand_prefix(rng: &mut StdRng) -> Vec<u8> {
    let len = rng.gen_range(0..=2);
    (0..len)
        .map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())])
        .collect()
}

struct Harness {
    db: Option<Db>,
    dir: tempfile::TempDir,
    kind: MemtableKind,
    options: weft::Options,
    model: Model,
    snapshots: Vec<(Snapshot, Model)>,
    rng: StdRng,
    trace: Trace,
    flushes: u64,
    merges: u64,
    gcs: u64,
    consolidations: u64,
    max_value_logs: usize,
    max_partitions: usize,
    reopens: u64,
    max_sorted_tables: usize,
    /// An unlogged write was made since the last explicit flush.
    unlogged_pending: bool,
    /// Reopens by a close without flush.
    unflushed_closes: u64,
    /// The lifetime counters before the last reopen.
    lifetime: weft::LifetimeStats,
}

impl Harness {
    fn db(&self) -> &Db {
        self.db.as_ref().expect("db is open")
    }

    /// A model view: the live model, or a random live snapshot's frozen copy.
    fn pick_view(&mut self) -> Option<usize> {
        if !self.snapshots.is_empty() && self.rng.gen_bool(0.4) {
            Some(self.rng.gen_range(0..self.snapshots.len()))
        } else {
            None
        }
    }

    fn view_model(&self, snap: Option<usize>) -> &Model {
        match snap {
            Some(i) => &self.snapshots[i].1,
            None => &self.model,
        }
    }

    fn read_opts(&self, snap: Option<usize>) -> ReadOptions {
        match snap {
            Some(i) => ReadOptions::new().snapshot(&self.snapshots[i].0),
            None => ReadOptions::new(),
        }
    }

    fn step(&mut self, step: usize) {
        self.trace.step = step;
        let op = self.rng.gen_range(0..1000);
        match op {
            0..=239 => self.op_put(step),
            240..=249 => self.op_delete_range(),
            250..=349 => self.op_delete(),
            350..=429 => self.op_batch(step),
            430..=579 => self.op_get(),
            580..=609 => self.op_take_snapshot(),
            610..=629 => self.op_drop_snapshot(),
            630..=739 => self.op_cursor(),
            740..=869 => self.op_range(),
            870..=929 => self.op_prefix(),
            930..=959 => self.op_flush(),
            960..=974 => self.op_compact(),
            975..=984 => self.op_verify(),
            _ => self.op_reopen(),
        }
    }

    fn op_put(&mut self, step: usize) {
        let k = rand_key(&mut self.rng);
        let v = rand_value(&mut self.rng, step);
        self.trace
            .push(format!("put {} = {} bytes", show(&k), v.len()));
        if self.rng.gen_ratio(1, 4) {
            let sync = self.rng.gen_ratio(1, 20);
            let unlogged = !sync && self.rng.gen_ratio(1, 3);
            self.unlogged_pending |= unlogged;
            let opts = WriteOptions::new().sync(sync).disable_wal(unlogged);
            self.trace
                .push(format!("  sync={sync} unlogged={unlogged}"));
            self.db().put_opt(&k, &v, &opts).expect("put_opt");
        } else {
            self.db().put(&k, &v).expect("put");
        }
        self.model.insert(k, v);
    }

    fn op_delete(&mut self) {
        // Prefer existing keys so deletes usually remove something.
        let k = if !self.model.is_empty() && self.rng.gen_bool(0.7) {
            let i = self.rng.gen_range(0..self.model.len());
            self.model.keys().nth(i).unwrap().clone()
        } else {
            rand_key(&mut self.rng)
        };
        self.trace.push(format!("delete {}", show(&k)));
        if self.rng.gen_ratio(1, 4) {
            self.db()
                .delete_opt(&k, &WriteOptions::new())
                .expect("delete_opt");
        } else {
            self.db().delete(&k).expect("delete");
        }
        self.model.remove(&k);
    }

    /// Two random keys in order: a range to delete (empty when equal).
    fn rand_range(&mut self) -> (Vec<u8>, Vec<u8>) {
        let (a, b) = (rand_key(&mut self.rng), rand_key(&mut self.rng));
        if a <= b {
            (a, b)
        } else {
            (b, a)
        }
    }

    fn op_delete_range(&mut self) {
        let (start, end) = self.rand_range();
        let sync = self.rng.gen_ratio(1, 10);
        let unlogged = !sync && self.rng.gen_ratio(1, 5);
        self.unlogged_pending |= unlogged;
        self.trace.push(format!(
            "delete_range {}..{} sync={sync} unlogged={unlogged}",
            show(&start),
            show(&end)
        ));
        let opts = WriteOptions::new().sync(sync).disable_wal(unlogged);
        self.db()
            .delete_range_opt(&start, &end, &opts)
            .expect("delete_range");
        self.model
            .retain(|k, _| k.as_slice() < start.as_slice() || k.as_slice() >= end.as_slice());
    }

    fn op_batch(&mut self, step: usize) {
        let n = self.rng.gen_range(0..=10);
        let mut batch = WriteBatch::new();
        let mut desc = Vec::new();
        let mut after = self.model.clone();
        for _ in 0..n {
            if self.rng.gen_ratio(1, 15) {
                let (start, end) = self.rand_range();
                desc.push(format!("del_range {}..{}", show(&start), show(&end)));
                batch.delete_range(&start, &end);
                after.retain(|k, _| {
                    k.as_slice() < start.as_slice() || k.as_slice() >= end.as_slice()
                });
                continue;
            }
            let k = rand_key(&mut self.rng);
            if self.rng.gen_ratio(1, 3) {
                desc.push(format!("del {}", show(&k)));
                batch.delete(&k);
                after.remove(&k);
            } else {
                let v = rand_value(&mut self.rng, step);
                desc.push(format!("put {}={}B", show(&k), v.len()));
                batch.put(&k, &v);
                after.insert(k, v);
            }
        }
        let sync = self.rng.gen_ratio(1, 20);
        let unlogged = !sync && self.rng.gen_ratio(1, 10);
        self.unlogged_pending |= unlogged && n > 0;
        self.trace.push(format!(
            "batch sync={sync} unlogged={unlogged} [{}]",
            desc.join(", ")
        ));
        assert_eq!(batch.len(), n);
        let opts = WriteOptions::new().sync(sync).disable_wal(unlogged);
        self.db().write(batch, &opts).expect("write batch");
        self.model = after;
    }

    fn op_get(&mut self) {
        let snap = self.pick_view();
        // Mostly keys that exist (in that view), sometimes random ones.
        let len = self.view_model(snap).len();
        let k = if len > 0 && self.rng.gen_bool(0.5) {
            let i = self.rng.gen_range(0..len);
            self.view_model(snap).keys().nth(i).unwrap().clone()
        } else {
            rand_key(&mut self.rng)
        };
        self.trace.push(format!("get {} snap={snap:?}", show(&k)));
        let want = self.view_model(snap).get(&k).cloned();
        let got = match snap {
            None if self.rng.gen_bool(0.5) => self.db().get(&k).expect("get"),
            _ => self
                .db()
                .get_opt(&k, &self.read_opts(snap))
                .expect("get_opt"),
        };
        assert_eq!(
            got.as_deref().map(show),
            want.as_deref().map(show),
            "get({}) at snapshot {snap:?}",
            show(&k)
        );
    }

    fn op_take_snapshot(&mut self) {
        if self.snapshots.len() >= 8 {
            return self.op_drop_snapshot();
        }
        let s = self.db().snapshot();
        self.trace.push(format!(
            "snapshot #{} seq={}",
            self.snapshots.len(),
            s.sequence()
        ));
        // A clone must read the same view; keep one sometimes instead.
        let s = if self.rng.gen_bool(0.3) { s.clone() } else { s };
        self.snapshots.push((s, self.model.clone()));
        assert_eq!(
            self.db().stats().live_snapshots,
            self.snapshots.len(),
            "stats().live_snapshots after taking a snapshot"
        );
    }

    fn op_drop_snapshot(&mut self) {
        if self.snapshots.is_empty() {
            return;
        }
        let i = self.rng.gen_range(0..self.snapshots.len());
        self.trace.push(format!("drop snapshot #{i}"));
        self.snapshots.remove(i);
        assert_eq!(
            self.db().stats().live_snapshots,
            self.snapshots.len(),
            "stats().live_snapshots after dropping a snapshot"
        );
    }

    /// Cursor API: random bounds or prefix, random first positioning, then a
    /// random walk of next/prev with occasional re-seeks.
    fn op_cursor(&mut self) {
        let snap = self.pick_view();
        let mut ro = self.read_opts(snap);
        let (lo, hi): (Option<Vec<u8>>, Option<Vec<u8>>);
        let bounds_desc;
        match self.rng.gen_range(0..5) {
            0 => {
                lo = None;
                hi = None;
                bounds_desc = "none".to_string();
            }
            1 => {
                let l = rand_key(&mut self.rng);
                ro = ro.lower_bound(l.clone());
                bounds_desc = format!("lower={}", show(&l));
                lo = Some(l);
                hi = None;
            }
            2 => {
                let u = rand_key(&mut self.rng);
                ro = ro.upper_bound(u.clone());
                bounds_desc = format!("upper={}", show(&u));
                lo = None;
                hi = Some(u);
            }
            3 => {
                let l = rand_key(&mut self.rng);
                let u = rand_key(&mut self.rng);
                ro = ro.lower_bound(l.clone()).upper_bound(u.clone());
                bounds_desc = format!("lower={} upper={}", show(&l), show(&u));
                lo = Some(l);
                hi = Some(u);
            }
            _ => {
                let p = rand_prefix(&mut self.rng);
                ro = ro.prefix(&p);
                bounds_desc = format!("prefix={}", show(&p));
                lo = ro.lower_bound.clone();
                hi = ro.upper_bound.clone();
            }
        }
        let view: Vec<(Vec<u8>, Vec<u8>)> = self
            .view_model(snap)
            .iter()
            .filter(|(k, _)| {
                lo.as_ref().is_none_or(|l| *k >= l) && hi.as_ref().is_none_or(|h| *k < h)
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        self.trace.push(format!(
            "cursor snap={snap:?} {bounds_desc} ({} keys)",
            view.len()
        ));
        let mut it = self.db().iter(&ro).expect("iter");
        let mut pos: Option<usize> = None;
        let mut moves: Vec<String> = Vec::new();
        let n_moves = self.rng.gen_range(1..=30);
        for m in 0..n_moves {
            let reseek = pos.is_none() || m == 0 || self.rng.gen_ratio(1, 8);
            let desc;
            if reseek {
                match self.rng.gen_range(0..4) {
                    0 => {
                        desc = "seek_to_first".to_string();
                        it.seek_to_first().expect("seek_to_first");
                        pos = if view.is_empty() { None } else { Some(0) };
                    }
                    1 => {
                        desc = "seek_to_last".to_string();
                        it.seek_to_last().expect("seek_to_last");
                        pos = view.len().checked_sub(1);
                    }
                    2 => {
                        let t = rand_key(&mut self.rng);
                        desc = format!("seek({})", show(&t));
                        it.seek(&t).expect("seek");
                        let i = view.partition_point(|(k, _)| k < &t);
                        pos = (i < view.len()).then_some(i);
                    }
                    _ => {
                        let t = rand_key(&mut self.rng);
                        desc = format!("seek_for_prev({})", show(&t));
                        it.seek_for_prev(&t).expect("seek_for_prev");
                        let i = view.partition_point(|(k, _)| k <= &t);
                        pos = i.checked_sub(1);
                    }
                }
            } else if self.rng.gen_bool(0.5) {
                desc = "next".to_string();
                it.next().expect("next");
                let p = pos.unwrap() + 1;
                pos = (p < view.len()).then_some(p);
            } else {
                desc = "prev".to_string();
                it.prev().expect("prev");
                pos = pos.unwrap().checked_sub(1);
            }
            moves.push(desc);
            let ctx = || {
                format!(
                    "cursor snap={snap:?} {bounds_desc}, moves [{}]",
                    moves.join(", ")
                )
            };
            match pos {
                None => assert!(
                    !it.valid(),
                    "{}: cursor valid at {} but the model has no key there",
                    ctx(),
                    show(it.key())
                ),
                Some(i) => {
                    assert!(
                        it.valid(),
                        "{}: cursor invalid, model expects {}",
                        ctx(),
                        show(&view[i].0)
                    );
                    assert_eq!(show(it.key()), show(&view[i].0), "{}: key", ctx());
                    assert_eq!(show(it.value()), show(&view[i].1), "{}: value", ctx());
                }
            }
        }
        self.trace
            .push(format!("  cursor moves [{}] ok", moves.join(", ")));
    }

    /// `range`/`range_opt` with random bounds: forward, reverse, or a random
    /// mix of `next` and `next_back` meeting in the middle.
    fn op_range(&mut self) {
        let snap = self.pick_view();
        let lo = rand_bound(&mut self.rng);
        let hi = rand_bound(&mut self.rng);
        let want: Vec<(Vec<u8>, Vec<u8>)> = self
            .view_model(snap)
            .iter()
            .filter(|(k, _)| in_bounds(k, &lo, &hi))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mode = self.rng.gen_range(0..3);
        let ctx = format!(
            "range({}, {}) snap={snap:?} mode={mode}",
            show_bound(&lo),
            show_bound(&hi)
        );
        self.trace.push(ctx.clone());
        let r = match snap {
            None => self.db().range((lo.clone(), hi.clone())).expect("range"),
            Some(_) => self
                .db()
                .range_opt((lo.clone(), hi.clone()), &self.read_opts(snap))
                .expect("range_opt"),
        };
        match mode {
            0 => {
                let got: Vec<_> = r.map(|x| x.expect("range item")).collect();
                assert_pairs_eq(&got, &want, &ctx);
            }
            1 => {
                let got: Vec<_> = r.rev().map(|x| x.expect("range item")).collect();
                let mut w = want.clone();
                w.reverse();
                assert_pairs_eq(&got, &w, &ctx);
            }
            _ => {
                let mut r = r;
                let mut front = 0usize;
                let mut back = want.len();
                loop {
                    let from_back = self.rng.gen_bool(0.5);
                    let item = if from_back { r.next_back() } else { r.next() };
                    match item {
                        None => {
                            assert_eq!(
                                front,
                                back,
                                "{ctx}: range ended with {} model pairs not returned",
                                back - front
                            );
                            break;
                        }
                        Some(x) => {
                            let (k, v) = x.expect("range item");
                            assert!(
                                front < back,
                                "{ctx}: extra pair {} after front and back met",
                                show(&k)
                            );
                            let w = if from_back {
                                back -= 1;
                                &want[back]
                            } else {
                                front += 1;
                                &want[front - 1]
                            };
                            assert_eq!(
                                (show(&k), show(&v)),
                                (show(&w.0), show(&w.1)),
                                "{ctx}: next{} returned the wrong pair",
                                if from_back { "_back" } else { "" }
                            );
                        }
                    }
                }
                // A finished double-ended iterator stays finished.
                assert!(
                    r.next().is_none() && r.next_back().is_none(),
                    "{ctx}: fused"
                );
            }
        }
    }

    fn op_prefix(&mut self) {
        let p = rand_prefix(&mut self.rng);
        let snap = self.pick_view();
        let want: Vec<(Vec<u8>, Vec<u8>)> = self
            .view_model(snap)
            .iter()
            .filter(|(k, _)| k.starts_with(&p))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let ctx = format!("prefix({}) snap={snap:?}", show(&p));
        self.trace.push(ctx.clone());
        let got: Vec<_> = match snap {
            None if self.rng.gen_bool(0.5) => {
                let rev = self.rng.gen_bool(0.5);
                let r = self.db().prefix(&p).expect("prefix");
                if rev {
                    let mut g: Vec<_> = r.rev().map(|x| x.expect("prefix item")).collect();
                    g.reverse();
                    g
                } else {
                    r.map(|x| x.expect("prefix item")).collect()
                }
            }
            _ => scan_cursor(self.db(), &self.read_opts(snap).prefix(&p)),
        };
        assert_pairs_eq(&got, &want, &ctx);
    }

    fn op_flush(&mut self) {
        self.trace.push("flush");
        self.db().flush().expect("flush");
        self.unlogged_pending = false;
        self.note_stats();
    }

    fn op_compact(&mut self) {
        self.trace.push("compact");
        self.db().compact().expect("compact");
        self.unlogged_pending = false;
        self.note_stats();
    }

    fn op_verify(&mut self) {
        self.trace.push("verify_checksums");
        self.db().verify_checksums().expect("verify_checksums");
    }

    fn note_stats(&mut self) {
        let st = self.db().stats();
        for p in &st.partitions {
            self.max_sorted_tables = self.max_sorted_tables.max(p.sorted_tables);
            self.max_value_logs = self.max_value_logs.max(p.value_logs);
        }
        self.max_partitions = self.max_partitions.max(st.partitions.len());
    }

    fn op_reopen(&mut self) {
        // Without a flush only when no unlogged write may be in a memtable.
        let how = match self.rng.gen_range(0..3) {
            0 if !self.unlogged_pending => "close without flush",
            0 | 1 => "close",
            _ => "drop",
        };
        self.trace.push(format!(
            "reopen via {how} (dropping {} snapshots)",
            self.snapshots.len()
        ));
        self.note_stats();
        self.snapshots.clear();
        let db = self.db.take().unwrap();
        let st = db.stats();
        self.flushes += st.flushes;
        self.merges += st.merges;
        self.gcs += st.gcs;
        self.consolidations += st.consolidations;
        match how {
            "close" => db.close().expect("close"),
            "drop" => drop(db),
            _ => {
                db.close_with(&CloseOptions::new().flush(false))
                    .expect("close_with");
                self.unflushed_closes += 1;
            }
        }
        self.unlogged_pending = false;
        self.reopens += 1;
        self.db = Some(Db::open(self.dir.path(), self.options.clone()).expect("reopen"));
        assert_db_eq(self.db(), &self.model, "state after reopen");
        assert!(
            self.db().stats().sequence > 0 || self.model.is_empty(),
            "sequence restarted at 0 after reopen"
        );
        let lifetime = self.db().stats().lifetime;
        assert_eq!(lifetime.opens, self.reopens + 1, "lifetime opens");
        assert_eq!(
            (lifetime.restarts, lifetime.unclean_closes),
            (0, 0),
            "{lifetime:?}"
        );
        for (name, before, after) in [
            ("flushes", self.lifetime.flushes, lifetime.flushes),
            ("merges", self.lifetime.merges, lifetime.merges),
            ("gcs", self.lifetime.gcs, lifetime.gcs),
            ("splits", self.lifetime.splits, lifetime.splits),
            (
                "user bytes",
                self.lifetime.user_bytes_written,
                lifetime.user_bytes_written,
            ),
        ] {
            assert!(
                after >= before,
                "lifetime {name} went back: {before} -> {after}"
            );
        }
        assert!(lifetime.flushes >= self.flushes, "lifetime flushes");
        assert!(lifetime.merges >= self.merges, "lifetime merges");
        self.lifetime = lifetime;
    }
}

fn run_model(seed: u64, kind: MemtableKind, steps: usize) {
    install_panic_counter();
    let panics_before = panic_count();
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rng(seed);
    let mut options = tiny_options(kind);
    // Vary the parts of the configuration the semantics must not depend on.
    if rng.gen_bool(0.5) {
        options = options.bloom_bits_per_key(0);
    }
    if rng.gen_bool(0.5) {
        options = options.block_cache_size(16 << 10);
    }
    // Table blocks from mappings (the default) or through the block cache.
    if rng.gen_bool(0.5) {
        options = options.mmap_reads(false);
    }
    // Munks (loaded eagerly) or not, drawn apart from the history so the
    // operations of a seed stay what they were.
    if common::rng(seed ^ 0x6d75_6e6b).gen_bool(0.5) {
        options = options.munk_cache_size(256 << 10).munk_min_heat(0);
    }
    // Each layer compressed or not, drawn apart from the history too.
    let mut codecs = common::rng(seed ^ 0x636f_6d70);
    let mut codec =
        || [Compression::None, Compression::Lz4, Compression::ZSTD][codecs.gen_range(0..3)];
    options = options
        .unsorted_compression(codec())
        .sorted_compression(codec())
        .value_log_compression(codec());
    let db = Db::open(dir.path(), options.clone()).expect("open");
    let mut h = Harness {
        db: Some(db),
        dir,
        kind,
        options,
        model: Model::new(),
        snapshots: Vec::new(),
        rng,
        trace: Trace::new(format!("model[{kind}]"), seed),
        flushes: 0,
        merges: 0,
        gcs: 0,
        consolidations: 0,
        max_value_logs: 0,
        max_partitions: 0,
        reopens: 0,
        max_sorted_tables: 0,
        unlogged_pending: false,
        unflushed_closes: 0,
        lifetime: Default::default(),
    };
    for step in 0..steps {
        h.step(step);
    }
    h.trace.step = steps;
    h.trace.push("final check");
    assert_db_eq(h.db(), &h.model, "final state");
    // Every snapshot still reads its frozen view at the end.
    for (i, (s, m)) in h.snapshots.iter().enumerate() {
        let got = scan_cursor(h.db(), &ReadOptions::new().snapshot(s));
        assert_pairs_eq(&got, &model_vec(m), &format!("final scan of snapshot #{i}"));
    }
    h.note_stats();
    let st = h.db().stats();
    let flushes = h.flushes + st.flushes;
    let merges = h.merges + st.merges;
    let gcs = h.gcs + st.gcs;
    let consolidations = h.consolidations + st.consolidations;
    assert!(st.lifetime.flushes >= flushes && st.lifetime.merges >= merges);
    eprintln!(
        "model seed={seed} kind={} steps={steps}: flushes={flushes} merges={merges} gcs={gcs} consolidations={consolidations} \
         max value logs={} max partitions={} reopens={} (without flush {}) \
         max sorted tables/partition={} partitions={} keys={}",
        h.kind,
        h.max_value_logs,
        h.max_partitions,
        h.reopens,
        h.unflushed_closes,
        h.max_sorted_tables,
        st.partitions.len(),
        h.model.len()
    );
    assert!(flushes > 0, "the run never flushed: it did not test tables");
    assert!(
        merges > 0,
        "the run never merged: it did not test the SortedStore"
    );
    assert!(
        h.max_value_logs > 0,
        "no value log was ever live: the run did not test key-value separation"
    );
    assert!(gcs > 0, "value-log GC never ran: the run did not test it");
    assert!(
        consolidations > 0,
        "UnsortedStores were never consolidated for scans: the run did not test it"
    );
    assert!(
        h.unflushed_closes > 0,
        "no reopen closed without a flush: the run did not test it"
    );
    assert!(
        st.lifetime.range_deleted_versions > 0,
        "no merge dropped a version by a range delete: the run did not test it"
    );
    assert!(
        h.max_partitions > 1,
        "no partition ever split: the run did not test range partitioning"
    );
    h.snapshots.clear();
    h.db.take().unwrap().close().expect("close");
    assert_eq!(
        panic_count(),
        panics_before,
        "an engine (non-test) thread panicked during the run (see the message above)"
    );
}

fn run_seed(default_seed: u64) {
    let steps = env_usize("WEFT_MODEL_STEPS", 12000);
    for seed in seeds(&[default_seed]) {
        for kind in kinds() {
            run_model(seed, kind, steps);
        }
    }
}

#[test]
fn model_seed_1() {
    run_seed(1);
}

#[test]
fn model_seed_2() {
    run_seed(0x5eed_0002);
}

#[test]
fn model_seed_3() {
    run_seed(0xdead_beef);
}

#[test]
fn model_seed_4() {
    run_seed(42);
}
