//! The model test over keyspaces and transactions (issue 39): random
//! writes over the default keyspace and a few named ones — plain writes
//! through handles, batches across keyspaces, transactions committed,
//! rolled back, and beaten by a conflicting transaction committed from
//! another thread — with drops and re-creates, checked against one
//! `BTreeMap` per live keyspace, across clean reopens and simulated power
//! cuts (`FaultFs`, as `tests/power_cut.rs`).
//!
//! Every write the history records is one batch (a plain write, a batch, a
//! commit, a create, a drop). After a power cut the database must equal
//! the model after some prefix of the history, at least as long as the
//! last write acknowledged durable. The prefix is found by walking the
//! history, not read from a marker: a commit applied in part (atomicity
//! broken across keyspaces) matches no prefix, and a rolled-back or
//! conflicting transaction that left anything matches none either.
//!
//! Keyspaces are created with random options (`Db::create_keyspace`: each
//! layer's codec, `min_blob_size`, `values_in_wal`, or none set through
//! `Db::keyspace`), which the recovered database must report as the model
//! has them; a create of a live name with other options must fail.
//!
//! A second test aims power cuts at the registry's own writes: a scripted
//! history of creates (with options) and drops between plain writes,
//! batches, a flush and WAL syncs, cut at every file-system operation in
//! turn, each recovery checked against a prefix of the history.
//!
//! Knobs: `WEFT_SEED` (one seed), `WEFT_KS_MODEL_CYCLES` (cycles per seed,
//! default 25), `WEFT_KS_MODEL_STEPS` (steps per cycle, default 150).

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::Arc;

use common::*;
use weft::internals::fs::{FaultFs, FileSystem};
use weft::{Compression, Db, Error, Keyspace, KeyspaceOptions, WriteBatch, WriteOptions};

/// The named keyspaces the test creates and drops (besides "default").
const NAMES: &[&str] = &["a", "b", "c"];
const DEFAULT: &str = "default";

/// Every live keyspace's content, by name ("default" always present).
type State = BTreeMap<String, Model>;

/// Every live keyspace's options, by name ("default": none set).
type Opts = BTreeMap<String, KeyspaceOptions>;

/// One write of the history, as the model applies it: each is one batch.
#[derive(Clone, Debug)]
enum Unit {
    /// Writes to keyspaces, in order (a batch, a commit, a plain write).
    Ops(Vec<(String, Op)>),
    Create(String, KeyspaceOptions),
    Drop(String),
}

fn apply(state: &mut State, unit: &Unit) {
    match unit {
        Unit::Ops(ops) => {
            for (ks, op) in ops {
                let m = state.get_mut(ks).expect("a write to a live keyspace");
                apply_ops(m, std::slice::from_ref(op));
            }
        }
        Unit::Create(name, _) => {
            state.entry(name.clone()).or_default();
        }
        Unit::Drop(name) => {
            state.remove(name);
        }
    }
}

/// `unit`'s effect on the keyspaces' options.
fn apply_opts(opts: &mut Opts, unit: &Unit) {
    match unit {
        Unit::Ops(_) => {}
        Unit::Create(name, o) => {
            opts.entry(name.clone()).or_insert(*o);
        }
        Unit::Drop(name) => {
            opts.remove(name);
        }
    }
}

/// Random options for a keyspace: each field unset or set, the codecs
/// among all three, thresholds below, inside and above the values' sizes.
fn random_keyspace_options(rng: &mut StdRng) -> KeyspaceOptions {
    let codecs = [
        None,
        Some(Compression::None),
        Some(Compression::Lz4),
        Some(Compression::ZSTD),
    ];
    let mut o = KeyspaceOptions::new();
    if let Some(c) = codecs[rng.gen_range(0..4)] {
        o = o.unsorted_compression(c);
    }
    if let Some(c) = codecs[rng.gen_range(0..4)] {
        o = o.sorted_compression(c);
    }
    if let Some(c) = codecs[rng.gen_range(0..4)] {
        o = o.value_log_compression(c);
    }
    if let Some(m) = [None, Some(16), Some(100), Some(usize::MAX)][rng.gen_range(0..4)] {
        o = o.min_blob_size(m);
    }
    if let Some(on) = [None, Some(true), Some(false)][rng.gen_range(0..3)] {
        o = o.values_in_wal(on);
    }
    o
}

/// `ops` for a trace or a failure message: keys shown, values by length.
fn show_ops(ops: &[(String, Op)]) -> String {
    let one = |(ks, op): &(String, Op)| match op {
        Op::Put(k, v) => format!("{ks}/{}={}B", show(k), v.len()),
        Op::Delete(k) => format!("{ks}/del {}", show(k)),
        Op::DeleteRange(s, e) => format!("{ks}/del {}..{}", show(s), show(e)),
    };
    format!("[{}]", ops.iter().map(one).collect::<Vec<_>>().join(", "))
}

fn show_unit(unit: &Unit) -> String {
    match unit {
        Unit::Ops(ops) => show_ops(ops),
        Unit::Create(n, o) => format!("create {n} ({o})"),
        Unit::Drop(n) => format!("drop {n}"),
    }
}

fn initial_state() -> State {
    State::from([(DEFAULT.to_string(), Model::new())])
}

fn initial_opts() -> Opts {
    Opts::from([(DEFAULT.to_string(), KeyspaceOptions::new())])
}

fn key(rng: &mut StdRng) -> Vec<u8> {
    format!("k{:02}", rng.gen_range(0..40)).into_bytes()
}

fn value(rng: &mut StdRng, step: usize) -> Vec<u8> {
    let len = [4, 20, 90, 400][rng.gen_range(0..4)];
    let mut v = format!("s{step}:").into_bytes();
    v.resize(len.max(v.len()), b'a' + (step % 26) as u8);
    v
}

fn random_op(rng: &mut StdRng, step: usize) -> Op {
    let k = key(rng);
    match rng.gen_range(0..20) {
        0 => {
            let mut end = k.clone();
            end.push(b'~');
            let end = if rng.gen_bool(0.5) { end } else { key(rng) };
            if k <= end {
                Op::DeleteRange(k, end)
            } else {
                Op::DeleteRange(end, k)
            }
        }
        1..=5 => Op::Delete(k),
        _ => Op::Put(k, value(rng, step)),
    }
}

/// The whole database, read through handles of every listed keyspace.
fn read_state(db: &Db, ctx: &str) -> State {
    let mut state = State::new();
    for name in db.keyspaces() {
        let ks = db.keyspace(&name).unwrap();
        let pairs: Model = ks
            .range::<&[u8], _>(..)
            .unwrap_or_else(|e| panic!("{ctx}: range of {name}: {e}"))
            .map(|r| r.unwrap_or_else(|e| panic!("{ctx}: scan of {name}: {e}")))
            .collect();
        state.insert(name, pairs);
    }
    state
}

/// Every listed keyspace's options.
fn read_opts(db: &Db) -> Opts {
    db.keyspaces()
        .into_iter()
        .map(|name| {
            let o = db.keyspace(&name).unwrap().options();
            (name, o)
        })
        .collect()
}

fn describe(state: &State) -> String {
    state
        .iter()
        .map(|(n, m)| format!("{n}:{}", m.len()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Asserts `got` equals `want`, naming the first keyspace that differs.
fn assert_state_eq(got: &State, want: &State, ctx: &str) {
    let names = |s: &State| s.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(got), names(want), "{ctx}: keyspaces");
    for (name, m) in want {
        assert_pairs_eq(
            &model_vec(&got[name]),
            &model_vec(m),
            &format!("{ctx}: {name}"),
        );
    }
}

struct Harness {
    dir: tempfile::TempDir,
    fs: Arc<FaultFs>,
    rng: StdRng,
    trace: Trace,
    /// The state all of `history` before `base_len` produced.
    base: State,
    /// The keyspaces' options there.
    base_opts: Opts,
    base_len: usize,
    /// The writes since the base.
    history: Vec<Unit>,
    /// The history is durable up to here (an index into all of it).
    durable: usize,
    /// The state after the whole history (what a live database shows).
    state: State,
    /// The keyspaces' options after the whole history.
    opts: Opts,
    /// Counts, for the coverage asserts.
    commits: usize,
    rollbacks: usize,
    conflicts: usize,
    cross_keyspace_commits: usize,
    drops: usize,
    cuts: usize,
    reopens: usize,
    /// Keyspaces created with some option set.
    created_with_options: usize,
}

impl Harness {
    fn new(seed: u64, test: &str) -> Harness {
        Harness {
            dir: tempfile::tempdir().unwrap(),
            fs: FaultFs::new(seed),
            rng: rng(seed),
            trace: Trace::new(test, seed),
            base: initial_state(),
            base_opts: initial_opts(),
            base_len: 0,
            history: Vec::new(),
            durable: 0,
            state: initial_state(),
            opts: initial_opts(),
            commits: 0,
            rollbacks: 0,
            conflicts: 0,
            cross_keyspace_commits: 0,
            drops: 0,
            cuts: 0,
            reopens: 0,
            created_with_options: 0,
        }
    }

    fn open(&mut self, ctx: &str) -> Db {
        let kinds = kinds();
        let kind = kinds[self.rng.gen_range(0..kinds.len())];
        let opts = tiny_options(kind)
            .write_buffer_size([4 << 10, 16 << 10][self.rng.gen_range(0..2)])
            .file_system(Arc::clone(&self.fs) as Arc<dyn FileSystem>);
        Db::open(self.dir.path(), opts).unwrap_or_else(|e| panic!("{ctx}: open: {e}"))
    }

    fn total_len(&self) -> usize {
        self.base_len + self.history.len()
    }

    /// Records `unit` as written (acknowledged or not) and, when `applied`
    /// (acknowledged), moves the live state on.
    fn record(&mut self, unit: Unit, sync: bool) {
        apply(&mut self.state, &unit);
        apply_opts(&mut self.opts, &unit);
        self.history.push(unit);
        if sync {
            self.durable = self.total_len();
        }
    }

    fn handle(&self, db: &Db, name: &str) -> Keyspace {
        assert!(self.state.contains_key(name), "{name} is not live");
        db.keyspace(name).unwrap()
    }

    fn live_names(&self) -> Vec<String> {
        self.state.keys().cloned().collect()
    }

    fn pick_live(&mut self) -> String {
        let names = self.live_names();
        names[self.rng.gen_range(0..names.len())].clone()
    }

    /// One step; `Err` when a write failed (the power is out).
    fn step(&mut self, db: &Db, step: usize) -> Result<(), Error> {
        self.trace.step = step;
        match self.rng.gen_range(0..100) {
            0..=24 => self.plain_write(db, step),
            25..=39 => self.batch(db, step),
            40..=64 => self.transaction(db, step),
            65..=71 => self.conflicting_transaction(db, step),
            72..=75 => self.create_or_drop(db),
            76..=90 => {
                self.check_reads(db);
                Ok(())
            }
            91..=94 => {
                self.trace.push("sync_wal");
                db.sync_wal()?;
                self.durable = self.total_len();
                Ok(())
            }
            _ => {
                self.trace.push("flush");
                db.flush()?;
                self.durable = self.total_len();
                Ok(())
            }
        }
    }

    fn plain_write(&mut self, db: &Db, step: usize) -> Result<(), Error> {
        let name = self.pick_live();
        let ks = self.handle(db, &name);
        let op = random_op(&mut self.rng, step);
        self.trace
            .push(format!("plain {}", show_ops(&[(name.clone(), op.clone())])));
        let unit = Unit::Ops(vec![(name, op.clone())]);
        let r = match &op {
            Op::Put(k, v) => ks.put(k, v),
            Op::Delete(k) => ks.delete(k),
            Op::DeleteRange(s, e) => ks.delete_range(s, e),
        };
        self.record(unit, false);
        r
    }

    fn batch(&mut self, db: &Db, step: usize) -> Result<(), Error> {
        let mut batch = WriteBatch::new();
        let mut ops = Vec::new();
        for _ in 0..self.rng.gen_range(1..=8) {
            let name = self.pick_live();
            let ks = self.handle(db, &name);
            let op = random_op(&mut self.rng, step);
            match &op {
                Op::Put(k, v) => batch.put_in(&ks, k, v),
                Op::Delete(k) => batch.delete_in(&ks, k),
                Op::DeleteRange(s, e) => batch.delete_range_in(&ks, s, e),
            };
            ops.push((name, op));
        }
        let sync = self.rng.gen_ratio(1, 5);
        self.trace
            .push(format!("batch sync={sync} {}", show_ops(&ops)));
        let r = db.write(batch, &WriteOptions::new().sync(sync));
        self.record(Unit::Ops(ops), sync && r.is_ok());
        r
    }

    /// A transaction of random reads (checked against the model with its
    /// own writes over it) and writes over several keyspaces, committed or
    /// rolled back.
    fn transaction(&mut self, db: &Db, step: usize) -> Result<(), Error> {
        let sync = self.rng.gen_ratio(1, 5);
        let opts = weft::TransactionOptions::new().write_options(WriteOptions::new().sync(sync));
        let mut txn = db.transaction_opt(&opts);
        // What the transaction sees: the state at its begin, its writes over it.
        let mut view = self.state.clone();
        let mut ops = Vec::new();
        for _ in 0..self.rng.gen_range(1..=10) {
            let name = self.pick_live();
            let ks = self.handle(db, &name);
            let ctx = format!("{}: txn on {name}", self.trace.step);
            match self.rng.gen_range(0..10) {
                0..=1 => {
                    let k = key(&mut self.rng);
                    let got = if self.rng.gen_bool(0.5) {
                        txn.get_for_update_in(&ks, &k).unwrap()
                    } else {
                        txn.get_in(&ks, &k).unwrap()
                    };
                    assert_eq!(got, view[&name].get(&k).cloned(), "{ctx}: get {}", show(&k));
                }
                2 => {
                    let (lo, hi) = (key(&mut self.rng), key(&mut self.rng));
                    let want: Vec<_> = view[&name]
                        .iter()
                        .filter(|(k, _)| {
                            in_bounds(
                                k,
                                &Bound::Included(lo.clone()),
                                &Bound::Excluded(hi.clone()),
                            )
                        })
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    let got: Vec<_> = txn
                        .range_in(&ks, lo.clone()..hi.clone())
                        .unwrap()
                        .map(|r| r.unwrap())
                        .collect();
                    assert_pairs_eq(&got, &want, &format!("{ctx}: range"));
                }
                _ => {
                    // Transactions write keys, not ranges.
                    let k = key(&mut self.rng);
                    let op = if self.rng.gen_ratio(1, 4) {
                        txn.delete_in(&ks, &k).unwrap();
                        Op::Delete(k)
                    } else {
                        let v = value(&mut self.rng, step);
                        txn.put_in(&ks, &k, &v).unwrap();
                        Op::Put(k, v)
                    };
                    apply_ops(view.get_mut(&name).unwrap(), std::slice::from_ref(&op));
                    ops.push((name, op));
                }
            }
        }
        if self.rng.gen_ratio(1, 4) {
            self.trace
                .push(format!("txn rolled back {}", show_ops(&ops)));
            if self.rng.gen_bool(0.5) {
                txn.rollback();
            } else {
                drop(txn);
            }
            self.rollbacks += 1;
            return Ok(());
        }
        // The pending writes, last write per key, as the commit orders them.
        let ops = dedup_last(ops);
        self.trace
            .push(format!("txn commit sync={sync} {}", show_ops(&ops)));
        let spans = ops
            .iter()
            .map(|(n, _)| n)
            .collect::<std::collections::BTreeSet<_>>();
        let r = txn.commit();
        if let Err(e) = &r {
            assert!(!e.is_conflict(), "a transaction alone conflicted: {e}");
        }
        if r.is_ok() {
            self.commits += 1;
            self.cross_keyspace_commits += usize::from(spans.len() > 1);
        }
        // A commit with no writes writes nothing, and syncs nothing either.
        let synced = sync && r.is_ok() && !ops.is_empty();
        self.record(Unit::Ops(ops), synced);
        r
    }

    /// A transaction reads a key for update in one keyspace and writes in
    /// others; another thread then commits a transaction writing the same
    /// user key — in the same keyspace (our commit must fail with a
    /// conflict naming it, and leave nothing) or in another (ours must
    /// commit).
    fn conflicting_transaction(&mut self, db: &Db, step: usize) -> Result<(), Error> {
        let name = self.pick_live();
        let ks = self.handle(db, &name);
        let k = key(&mut self.rng);
        let mut txn = db.transaction();
        let seen = txn.get_for_update_in(&ks, &k).unwrap();
        assert_eq!(seen, self.state[&name].get(&k).cloned(), "get_for_update");
        let mut ours = Vec::new();
        for _ in 0..self.rng.gen_range(1..=4) {
            let other = self.pick_live();
            let oks = self.handle(db, &other);
            let ok = key(&mut self.rng);
            let v = value(&mut self.rng, step);
            txn.put_in(&oks, &ok, &v).unwrap();
            ours.push((other, Op::Put(ok, v)));
        }
        let ours = dedup_last(ours);
        // The other thread's write: the same key, same keyspace or not.
        let target = self.pick_live();
        let theirs_value = value(&mut self.rng, step + 1_000_000);
        let tks = self.handle(db, &target);
        let their_key = k.clone();
        let theirs = std::thread::scope(|s| {
            s.spawn(|| {
                mark_test_thread();
                db.transact(|t| t.put_in(&tks, &their_key, &theirs_value))
            })
            .join()
            .unwrap()
        });
        self.trace.push(format!(
            "conflict: ours read {name}/{} wrote {}; theirs {target}/{}",
            show(&k),
            show_ops(&ours),
            show(&k)
        ));
        let theirs_unit = Unit::Ops(vec![(target.clone(), Op::Put(k.clone(), theirs_value))]);
        self.record(theirs_unit, false);
        theirs?;
        let r = txn.commit();
        // Our writes to the other thread's key decide too: its put is a
        // version newer than our snapshot wherever we track that key.
        let tracked_there =
            target == name || ours.iter().any(|(n, op)| n == &target && op_key(op) == k);
        match r {
            Err(Error::Conflict { key, keyspace }) => {
                assert!(
                    tracked_there,
                    "a conflict on {keyspace}/{} with nothing tracked there",
                    show(&key)
                );
                assert_eq!(
                    (keyspace.as_str(), key.as_slice()),
                    (target.as_str(), k.as_slice())
                );
                self.conflicts += 1;
                Ok(())
            }
            Ok(()) => {
                assert!(
                    !tracked_there,
                    "a commit over a key another transaction wrote since: lost update"
                );
                self.commits += 1;
                self.record(Unit::Ops(ours), false);
                Ok(())
            }
            Err(e) => {
                // The power went out: maybe written.
                self.record(Unit::Ops(ours), false);
                Err(e)
            }
        }
    }

    fn create_or_drop(&mut self, db: &Db) -> Result<(), Error> {
        let name = NAMES[self.rng.gen_range(0..NAMES.len())].to_string();
        if self.state.contains_key(&name) {
            let old = db.keyspace(&name).unwrap();
            self.trace.push(format!("drop {name}"));
            let r = db.drop_keyspace(&name);
            self.record(Unit::Drop(name.clone()), false);
            if r.is_ok() {
                self.drops += 1;
                assert!(matches!(old.get("k00"), Err(Error::InvalidArgument(_))));
                let mut txn = db.transaction();
                assert!(matches!(
                    txn.put_in(&old, "k", "v"),
                    Err(Error::InvalidArgument(_))
                ));
            }
            r
        } else {
            // A third through `keyspace` (no option set), the rest with
            // random options.
            let o = match self.rng.gen_ratio(1, 3) {
                true => KeyspaceOptions::new(),
                false => random_keyspace_options(&mut self.rng),
            };
            self.trace.push(format!("create {name} ({o})"));
            let r = match o == KeyspaceOptions::new() && self.rng.gen_bool(0.5) {
                true => db.keyspace(&name),
                false => db.create_keyspace(&name, o),
            };
            self.record(Unit::Create(name.clone(), o), false);
            let ks = r?;
            self.created_with_options += usize::from(o != KeyspaceOptions::new());
            assert_eq!(ks.options(), o, "{name}: options as created");
            // Asking again: the same options open it, others fail and
            // change nothing.
            let other = o.min_blob_size(o.min_blob_size.map_or(7, |m| m.saturating_sub(1).max(1)));
            if other != o {
                assert!(matches!(
                    db.create_keyspace(&name, other),
                    Err(Error::InvalidArgument(_))
                ));
            }
            assert_eq!(db.create_keyspace(&name, o)?.id(), ks.id());
            Ok(())
        }
    }

    fn check_reads(&mut self, db: &Db) {
        let name = self.pick_live();
        let ks = self.handle(db, &name);
        let ctx = format!("step {}: reads of {name}", self.trace.step);
        self.trace.push(format!("check {name}"));
        for _ in 0..3 {
            let k = key(&mut self.rng);
            assert_eq!(
                ks.get(&k).unwrap(),
                self.state[&name].get(&k).cloned(),
                "{ctx}: get {}",
                show(&k)
            );
        }
        let got: Vec<_> = ks
            .range::<&[u8], _>(..)
            .unwrap()
            .rev()
            .map(|r| r.unwrap())
            .collect();
        let want: Vec<_> = model_vec(&self.state[&name]).into_iter().rev().collect();
        assert_pairs_eq(&got, &want, &format!("{ctx}: reverse scan"));
    }

    /// After a recovery: the database equals the model after a prefix of
    /// the history no shorter than the durable one; the history is cut
    /// there and the base moves to it.
    fn check_recovered(&mut self, db: &Db, ctx: &str) {
        let got = read_state(db, ctx);
        let got_opts = read_opts(db);
        let mut at = self.base.clone();
        let mut at_opts = self.base_opts.clone();
        let mut matched = None;
        for n in self.base_len..=self.total_len() {
            if n > self.base_len {
                apply(&mut at, &self.history[n - self.base_len - 1]);
                apply_opts(&mut at_opts, &self.history[n - self.base_len - 1]);
            }
            if n >= self.durable && at == got && at_opts == got_opts {
                matched = Some(n);
            }
        }
        let Some(n) = matched else {
            // Say how it differs from the durable prefix, the shortest allowed.
            let mut want = self.base.clone();
            for u in &self.history[..self.durable - self.base_len] {
                apply(&mut want, u);
            }
            eprintln!(
                "{ctx}: recovered [{}] matches no prefix of {} writes from {} (durable {}); \
                 the last writes, newest first: {:?}",
                describe(&got),
                self.total_len(),
                self.base_len,
                self.durable,
                self.history
                    .iter()
                    .rev()
                    .take(4)
                    .map(show_unit)
                    .collect::<Vec<_>>()
            );
            eprintln!("{ctx}: recovered options {got_opts:?}");
            assert_state_eq(&got, &want, &format!("{ctx}: against the durable prefix"));
            panic!("{ctx}: recovered state matches no prefix of the history");
        };
        let mut base = self.base.clone();
        let mut base_opts = self.base_opts.clone();
        for u in &self.history[..n - self.base_len] {
            apply(&mut base, u);
            apply_opts(&mut base_opts, u);
        }
        self.history.clear();
        self.base = base.clone();
        self.base_opts = base_opts.clone();
        self.base_len = n;
        self.durable = n;
        self.state = base;
        self.opts = base_opts;
    }
}

fn op_key(op: &Op) -> Vec<u8> {
    match op {
        Op::Put(k, _) | Op::Delete(k) => k.clone(),
        Op::DeleteRange(s, _) => s.clone(),
    }
}

/// `ops` (puts and deletes) with only the last write of each key of each
/// keyspace, in (keyspace, key) order: a commit's batch (the order does
/// not matter to the state, one write per key).
fn dedup_last(ops: Vec<(String, Op)>) -> Vec<(String, Op)> {
    let mut last: BTreeMap<(String, Vec<u8>), Op> = BTreeMap::new();
    for (name, op) in ops {
        last.insert((name, op_key(&op)), op);
    }
    last.into_iter().map(|((n, _), op)| (n, op)).collect()
}

fn run_seed(seed: u64, cycles: usize, steps: usize) -> Harness {
    let _guard = SeedGuard::new(format!("keyspace model WEFT_SEED={seed}"));
    let mut h = Harness::new(
        seed,
        "keyspaces_and_transactions_match_the_model_across_power_cuts",
    );
    for cycle in 0..cycles {
        let ctx = format!("seed {seed} cycle {cycle}");
        let db = h.open(&ctx);
        h.check_recovered(&db, &format!("{ctx}: after recovery"));
        let cut = h.rng.gen_ratio(2, 3);
        let cut_at = h.rng.gen_range(0..steps);
        for step in 0..steps {
            if cut && step == cut_at {
                let within = h.rng.gen_range(1..=40);
                h.fs.cut_power_at(h.fs.ops() + within);
            }
            if h.step(&db, cycle * steps + step).is_err() {
                assert!(cut, "{ctx}: a write failed with no power cut");
                break;
            }
        }
        if cut {
            h.fs.cut_power_now();
            let _ = db.close();
            h.fs.apply_power_loss().unwrap();
            h.cuts += 1;
        } else {
            // A clean close: everything acknowledged survives.
            read_and_compare(&db, &h.state, &format!("{ctx}: before close"));
            assert_eq!(read_opts(&db), h.opts, "{ctx}: options before close");
            db.close().unwrap();
            h.durable = h.total_len();
            h.reopens += 1;
        }
    }
    let db = h.open("final");
    h.check_recovered(&db, "final recovery");
    db.close().unwrap();
    h
}

fn read_and_compare(db: &Db, want: &State, ctx: &str) {
    assert_state_eq(&read_state(db, ctx), want, ctx);
}

#[test]
fn keyspaces_and_transactions_match_the_model_across_power_cuts() {
    install_panic_counter();
    let cycles = env_usize("WEFT_KS_MODEL_CYCLES", 25);
    let steps = env_usize("WEFT_KS_MODEL_STEPS", 150);
    let (mut commits, mut cross, mut rollbacks, mut conflicts, mut drops, mut cuts) =
        (0, 0, 0, 0, 0, 0);
    let mut with_options = 0;
    for seed in seeds(&[1, 2, 3]) {
        let h = run_seed(seed, cycles, steps);
        commits += h.commits;
        cross += h.cross_keyspace_commits;
        rollbacks += h.rollbacks;
        conflicts += h.conflicts;
        drops += h.drops;
        cuts += h.cuts;
        with_options += h.created_with_options;
        eprintln!(
            "keyspace model seed={seed}: {} commits ({} across keyspaces), {} rollbacks, \
             {} conflicts, {} drops, {} power cuts, {} clean reopens",
            h.commits,
            h.cross_keyspace_commits,
            h.rollbacks,
            h.conflicts,
            h.drops,
            h.cuts,
            h.reopens
        );
    }
    assert!(commits > 0 && cross > 0, "no commit spanned keyspaces");
    assert!(
        rollbacks > 0 && conflicts > 0 && drops > 0,
        "rollbacks, conflicts and drops all ran"
    );
    assert!(cuts > 0, "no power cut");
    assert!(with_options > 0, "no keyspace was created with options");
    assert_eq!(panic_count(), 0, "an engine thread panicked");
}

/// One step of the scripted history of [`registry_writes_survive_a_power_cut_anywhere`]:
/// creates (with options) and drops of the registry between writes to
/// the keyspaces they make, a flush and WAL syncs. `false` past the end.
fn scripted_step(h: &mut Harness, db: &Db, i: usize) -> Option<Result<(), Error>> {
    let big = |tag: &str| format!("{tag}:").repeat(80).into_bytes();
    let zstd = KeyspaceOptions::new()
        .compression(Compression::ZSTD)
        .min_blob_size(16);
    let lz4 = KeyspaceOptions::new()
        .compression(Compression::Lz4)
        .values_in_wal(false);
    let inline = KeyspaceOptions::new().min_blob_size(usize::MAX);
    let create = |h: &mut Harness, name: &str, o: KeyspaceOptions| {
        let r = db.create_keyspace(name, o).map(drop);
        h.record(Unit::Create(name.to_string(), o), false);
        r
    };
    let drop_ks = |h: &mut Harness, name: &str| {
        let r = db.drop_keyspace(name);
        h.record(Unit::Drop(name.to_string()), false);
        r
    };
    let put = |h: &mut Harness, name: &str, k: &str, v: Vec<u8>| {
        let r = db.keyspace(name).and_then(|ks| ks.put(k, &v));
        h.record(
            Unit::Ops(vec![(name.to_string(), Op::Put(k.as_bytes().to_vec(), v))]),
            false,
        );
        r
    };
    let sync = |h: &mut Harness| {
        let r = db.sync_wal();
        if r.is_ok() {
            h.durable = h.total_len();
        }
        r
    };
    Some(match i {
        0 => create(h, "a", zstd),
        1 => put(h, "a", "k1", big("a1")),
        2 => {
            let r = db.keyspace("b").map(drop);
            h.record(Unit::Create("b".into(), KeyspaceOptions::new()), false);
            r
        }
        3 => {
            let (a, b) = match (db.keyspace("a"), db.keyspace("b")) {
                (Ok(a), Ok(b)) => (a, b),
                (Err(e), _) | (_, Err(e)) => return Some(Err(e)),
            };
            let mut batch = WriteBatch::new();
            batch
                .put_in(&a, "k2", big("a2"))
                .put_in(&b, "k1", "b1")
                .put("d1", big("d1"));
            let r = db.write(batch, &WriteOptions::default());
            h.record(
                Unit::Ops(vec![
                    ("a".into(), Op::Put(b"k2".to_vec(), big("a2"))),
                    ("b".into(), Op::Put(b"k1".to_vec(), b"b1".to_vec())),
                    (DEFAULT.into(), Op::Put(b"d1".to_vec(), big("d1"))),
                ]),
                false,
            );
            r
        }
        4 => sync(h),
        5 => drop_ks(h, "a"),
        6 => create(h, "a", lz4),
        7 => put(h, "a", "k3", big("a3")),
        8 => {
            let r = db.flush();
            if r.is_ok() {
                h.durable = h.total_len();
            }
            r
        }
        9 => create(h, "c", inline),
        10 => drop_ks(h, "b"),
        11 => put(h, "c", "k1", big("c1")),
        12 => create(h, "b", zstd),
        13 => put(h, "b", "k9", big("b9")),
        14 => sync(h),
        15 => drop_ks(h, "c"),
        16 => create(h, "d", lz4.min_blob_size(32)),
        17 => put(h, DEFAULT, "d2", big("d2")),
        _ => return None,
    })
}

/// Power cuts aimed at the registry's own writes (DESIGN §4.14): the
/// scripted history is run once whole to count its steps and file-system
/// operations, then again from a fresh directory for each operation with
/// the power cut there, and for each step with the power cut right after
/// it (the WAL is mapped: its appends are no operations of their own, and
/// the power loss keeps a random, maybe torn, part of what was not synced,
/// so each of those cuts runs under several seeds). Every recovery must
/// equal a prefix of the history
/// — keyspaces, their options and their contents — no shorter than what
/// was synced; a keyspace created after the recovery starts empty.
#[test]
fn registry_writes_survive_a_power_cut_anywhere() {
    install_panic_counter();
    let seed = seeds(&[11])[0];
    let _guard = SeedGuard::new(format!("registry power cuts WEFT_SEED={seed}"));
    let (steps, ops) = {
        let mut h = Harness::new(seed, "registry_writes_survive_a_power_cut_anywhere");
        let db = h.open("dry run");
        let start = h.fs.ops();
        let mut i = 0;
        while let Some(r) = scripted_step(&mut h, &db, i) {
            r.unwrap();
            i += 1;
        }
        let ops = h.fs.ops() - start;
        read_and_compare(&db, &h.state, "dry run");
        assert_eq!(read_opts(&db), h.opts, "dry run: options");
        db.close().unwrap();
        (i, ops)
    };
    assert!(ops > 5, "the script made only {ops} file-system operations");
    enum Cut {
        AtOperation(u64),
        AfterStep(usize),
    }
    let cuts = (1..=ops)
        .map(|n| (Cut::AtOperation(n), seed.wrapping_add(n)))
        .chain((0..steps).flat_map(|i| {
            (0..4u64).map(move |k| {
                (
                    Cut::AfterStep(i),
                    seed.wrapping_add(1000 + 10 * i as u64 + k),
                )
            })
        }));
    let mut recovered_writes = BTreeSet::new();
    for (cut, run_seed) in cuts {
        let mut h = Harness::new(run_seed, "registry_writes_survive_a_power_cut_anywhere");
        let ctx = match cut {
            Cut::AtOperation(n) => format!("cut at operation {n} of {ops} (seed {run_seed})"),
            Cut::AfterStep(i) => format!("cut after step {i} of {steps} (seed {run_seed})"),
        };
        let db = h.open(&ctx);
        if let Cut::AtOperation(n) = cut {
            h.fs.cut_power_at(h.fs.ops() + n);
        }
        let mut i = 0;
        while let Some(r) = scripted_step(&mut h, &db, i) {
            if r.is_err() || matches!(cut, Cut::AfterStep(last) if last == i) {
                break;
            }
            i += 1;
        }
        h.fs.cut_power_now();
        let _ = db.close();
        h.fs.apply_power_loss().unwrap();
        let db = h.open(&ctx);
        h.check_recovered(&db, &ctx);
        recovered_writes.insert(h.base_len);
        let fresh = db.keyspace("fresh").unwrap();
        assert_eq!(fresh.range::<&str, _>(..).unwrap().count(), 0, "{ctx}");
        for name in h.live_names() {
            if name != DEFAULT {
                let o = h.opts[&name];
                let other = o.min_blob_size(o.min_blob_size.map_or(3, |m| m / 2 + 1));
                assert!(
                    other == o || db.create_keyspace(&name, other).is_err(),
                    "{ctx}: {name} recovered, and took other options"
                );
            }
        }
        db.close().unwrap();
    }
    // The cuts landed all along the history, the registry's writes among
    // them: recoveries ended after many different prefixes.
    assert!(
        recovered_writes.len() >= 6,
        "recoveries matched only the prefixes {recovered_writes:?}"
    );
    assert_eq!(panic_count(), 0, "an engine thread panicked");
}
