//! Power cuts in a simulated file system (RocksDB's `db_crashtest` with an
//! expected-state check, over `FaultFs`, the fault-injecting file-system
//! layer): random batches (range deletes among their writes), gets, range
//! scans and snapshots under random options; the power goes out at a
//! random file operation — in a write, a flush, a merge, GC, a split, an
//! index checkpoint, or recovery itself —;
//! the disk is turned into what it could hold after the cut (unsynced bytes
//! dropped or torn at a 512-byte sector, directory entries not fsynced
//! undone); the database is reopened and checked:
//!
//! - it opens (no panic, no `Corruption`: a power cut is not damage);
//! - its content is exactly the history's first `n` batches for some `n`
//!   (each batch writes a marker key holding its index, so `n` is read, not
//!   guessed), with every batch acknowledged as durable (a `sync` write,
//!   or one before a successful `sync_wal` or `flush`) among them;
//! - `verify_checksums` passes.
//!
//! Every cycle continues the same directory, writing on from batch `n`:
//! later cycles cut the power of a database that has recovered before,
//! maybe from a cut during its own recovery. The WAL is written through
//! its memory mapping (the default), whose stores the layer sees through
//! the appender's reports.
//!
//! Knobs: `WEFT_SEED` (one seed), `WEFT_POWER_CUT_CYCLES` (cycles per seed,
//! default 60 per seed over 4 seeds), `WEFT_POWER_CUT_SECS` (run seeds
//! until this many seconds have passed instead: the long run of
//! `bench/soak`).

// A test (or benchmark) fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use weft::internals::fs::{FaultFs, FileSystem, PowerLoss};
use weft::{Compression, Db, Options, ReadOptions, WriteBatch, WriteOptions};

/// The background jobs a cut is aimed at (their `PowerCut::activity`).
const JOBS: &[&str] = &["flush", "merge", "gc", "split", "consolidate", "checkpoint"];

/// Holds the index of the last batch applied; sorts after every user key.
const MARKER: &[u8] = b"\xff\xffmarker";

/// Applies batch `index` (`ops` and its marker) to `model`.
fn apply(model: &mut Model, index: usize, ops: &[Op]) {
    apply_ops(model, ops);
    model.insert(MARKER.to_vec(), format!("{index}").into_bytes());
}

/// The expected state after the first `n` batches of `history`, marker
/// included.
fn model_after(history: &[Vec<Op>], n: usize) -> Model {
    let mut m = BTreeMap::new();
    for (i, ops) in history[..n].iter().enumerate() {
        apply(&mut m, i, ops);
    }
    m
}

/// Batch `index` as written: `ops`, then the marker.
fn to_batch(index: usize, ops: &[Op]) -> WriteBatch {
    let mut batch = WriteBatch::new();
    add_ops(&mut batch, ops);
    batch.put(MARKER, format!("{index}"));
    batch
}

fn key(rng: &mut StdRng) -> Vec<u8> {
    format!("k{:04}", rng.gen_range(0..300)).into_bytes()
}

fn random_batch(rng: &mut StdRng, index: usize) -> Vec<Op> {
    (0..rng.gen_range(1..=6))
        .map(|j| {
            let k = key(rng);
            if rng.gen_ratio(1, 60) {
                // A range of up to a tenth of the key space.
                let end = format!("k{:04}", rng.gen_range(0..30)).into_bytes();
                let mut end_key = k.clone();
                end_key.extend_from_slice(&end);
                Op::DeleteRange(k, end_key)
            } else if rng.gen_ratio(1, 5) {
                Op::Delete(k)
            } else {
                // Sizes on both sides of the separation threshold, so value
                // logs, pointers and GC are in play.
                let len = [8, 40, 100, 700][rng.gen_range(0..4)];
                let mut v = format!("b{index}.{j}:").into_bytes();
                v.resize(len.max(v.len()), b'a' + (index % 26) as u8);
                Op::Put(k, v)
            }
        })
        .collect()
}

/// Options drawn per cycle: tiny buffers so flushes, merges, splits,
/// consolidations, GC and checkpoints all run within a few hundred
/// batches; the mapped WAL always (the default), block reads mapped or
/// cached.
fn random_options(rng: &mut StdRng, fs: &Arc<FaultFs>) -> (Options, String) {
    let kinds = kinds();
    let kind = kinds[rng.gen_range(0..kinds.len())];
    let mut o = tiny_options(kind)
        .write_buffer_size([4 << 10, 8 << 10, 32 << 10][rng.gen_range(0..3)])
        .mmap_reads(rng.gen_bool(0.5))
        .manual_wal_flush(rng.gen_ratio(1, 4))
        // A pool of one to four job threads: cuts land while jobs of
        // several partitions are in flight.
        .background_jobs(rng.gen_range(2..=5))
        .file_system(Arc::clone(fs) as Arc<dyn FileSystem>);
    if rng.gen_ratio(1, 4) {
        o = o.min_blob_size(usize::MAX);
    }
    if rng.gen_ratio(1, 4) {
        o = o.values_in_wal(false);
    }
    if rng.gen_ratio(1, 4) {
        o = o.partition_size(1 << 30);
    }
    // Munks, loaded eagerly: the checks after each reopen read through them.
    if rng.gen_ratio(1, 3) {
        o = o.munk_cache_size(256 << 10).munk_min_heat(0);
    }
    // Each layer compressed or not (the values compress well): cuts land
    // in compressed blocks, values and WAL records too.
    let mut codec =
        || [Compression::None, Compression::Lz4, Compression::ZSTD][rng.gen_range(0..3)];
    o = o
        .unsorted_compression(codec())
        .sorted_compression(codec())
        .value_log_compression(codec());
    let desc = format!(
        "{kind:?} wb={} mmap_reads={} manual_wal_flush={} blob={} values_in_wal={} partition={} \
         jobs={} munks={} compression={}/{}/{}",
        o.write_buffer_size,
        o.mmap_reads,
        o.manual_wal_flush,
        o.min_blob_size,
        o.values_in_wal,
        o.partition_size,
        o.background_jobs,
        o.munk_cache_size,
        o.unsorted_compression,
        o.sorted_compression,
        o.value_log_compression
    );
    (o, desc)
}

/// What the cycles saw, for the summary and the coverage check.
#[derive(Default)]
struct Tally {
    cycles: usize,
    batches_written: usize,
    batches_lost: usize,
    cuts_during_open: usize,
    by_activity: BTreeMap<&'static str, usize>,
    by_file: BTreeMap<String, usize>,
    files_torn: usize,
    names_undone: usize,
}

impl Tally {
    fn note(&mut self, loss: &PowerLoss) {
        if let Some(cut) = &loss.cut {
            *self.by_activity.entry(cut.activity).or_default() += 1;
            *self.by_file.entry(file_kind(&cut.path)).or_default() += 1;
        }
        self.files_torn += loss.files_torn;
        self.names_undone += loss.names_undone;
    }
}

/// The kind of file a cut struck, by its name.
fn file_kind(p: &Path) -> String {
    if p.is_dir() {
        return "(directory)".into();
    }
    let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
    let name = name.unwrap_or_default();
    match name.rsplit_once('.') {
        Some((_, ext)) => ext.to_string(),
        None if name.starts_with("MANIFEST") => "manifest".into(),
        None if name.is_empty() => "(none)".into(),
        None => name,
    }
}

/// Opens `dir`, maybe cutting the power during recovery first (then the
/// loss is applied and it opens again, fault-free).
fn reopen(
    dir: &Path,
    fs: &Arc<FaultFs>,
    rng: &mut StdRng,
    t: &mut Tally,
    ctx: &str,
    target: Option<&str>,
) -> Db {
    let (mut opts, mut desc) = random_options(rng, fs);
    if target == Some("checkpoint") {
        // A checkpoint is due every half `unsorted_limit` of flushed table
        // bytes; with values kept in the WAL the tables are keys and
        // pointers, and the tiny options' limit is rarely reached within a
        // cycle.
        opts = opts.unsorted_limit(4 << 10);
        desc.push_str(" unsorted_limit=4096");
    }
    if rng.gen_ratio(1, 5) {
        fs.cut_power_in("open", rng.gen_range(1..=16));
        let attempt = Db::open(dir, opts.clone());
        drop(attempt);
        let loss = fs.apply_power_loss().unwrap();
        if loss.cut.is_some() {
            t.cuts_during_open += 1;
        }
        if std::env::var_os("WEFT_POWER_CUT_VERBOSE").is_some() {
            eprintln!("{ctx}: cut during open: {loss:?}");
        }
        t.note(&loss);
    }
    if std::env::var_os("WEFT_POWER_CUT_VERBOSE").is_some() {
        eprintln!("{ctx}: open with {desc}");
    }
    Db::open(dir, opts).unwrap_or_else(|e| panic!("{ctx}: reopen ({desc}) failed: {e}"))
}

/// The batch count the database holds: its marker plus one.
fn recovered_batches(db: &Db) -> usize {
    match db.get(MARKER).unwrap() {
        Some(v) => std::str::from_utf8(&v).unwrap().parse::<usize>().unwrap() + 1,
        None => 0,
    }
}

/// A few reads checked against the model while the power is still on.
fn check_reads(db: &Db, model: &Model, rng: &mut StdRng, ctx: &str, scans: bool) {
    for _ in 0..3 {
        let k = key(rng);
        assert_eq!(
            db.get(&k).unwrap(),
            model.get(&k).cloned(),
            "{ctx}: get({})",
            show(&k)
        );
    }
    if !scans {
        return;
    }
    let a = key(rng);
    let b = key(rng);
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    let want: Vec<_> = model
        .range(lo.clone()..hi.clone())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let got: Vec<_> = db
        .range(lo.clone()..hi.clone())
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_pairs_eq(
        &got,
        &want,
        &format!("{ctx}: range {}..{}", show(&lo), show(&hi)),
    );
    let got_rev: Vec<_> = db
        .range(lo.clone()..hi.clone())
        .unwrap()
        .rev()
        .map(|r| r.unwrap())
        .collect();
    let want_rev: Vec<_> = want.into_iter().rev().collect();
    assert_pairs_eq(&got_rev, &want_rev, &format!("{ctx}: reverse range"));
}

/// One seed's cycles (or until `deadline`).
fn run_seed(seed: u64, cycles: usize, deadline: Option<Instant>, t: &mut Tally) {
    let _guard = SeedGuard::new(format!("WEFT_SEED={seed}"));
    let mut rng = rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new(seed);
    let mut history: Vec<Vec<Op>> = Vec::new();
    // Batches acknowledged durable before the last cut.
    let mut durable = 0;
    for cycle in 0..cycles {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let ctx = format!("seed {seed} cycle {cycle}");
        // The power goes out, later in the cycle, a few file operations
        // into the next run of a job picked at random, or a few operations
        // (any thread's) after a random batch, or after the last batch.
        let target = JOBS.get(rng.gen_range(0..=JOBS.len())).copied();
        let db = reopen(dir.path(), &fs, &mut rng, t, &ctx, target);

        // Recovery gave a prefix holding everything acknowledged durable.
        let n = recovered_batches(&db);
        assert!(
            n <= history.len(),
            "{ctx}: recovered {n} batches, only {} were written",
            history.len()
        );
        assert!(
            n >= durable,
            "{ctx}: batch {} was acknowledged durable, but only {n} batches survived",
            durable.saturating_sub(1)
        );
        let mut model = model_after(&history, n);
        assert_db_eq(&db, &model, &format!("{ctx}: after recovery to batch {n}"));
        db.verify_checksums()
            .unwrap_or_else(|e| panic!("{ctx}: verify_checksums after recovery: {e}"));
        t.batches_lost += history.len() - n;
        history.truncate(n);

        // Write on, toward the cut drawn above. A cycle aimed at a job that needs data to pile up (a merge, a
        // split, GC) writes the most batches and reads by gets only: a
        // scan asks for a consolidation (UniKV's scan-time merge of an
        // UnsortedStore), which keeps the tiny partitions' UnsortedStores
        // small and their partitions busy, and a CI run then saw no cut
        // strike a split in 240 cycles.
        let piles_up = matches!(target, Some("merge" | "split" | "gc" | "checkpoint"));
        let batches = if piles_up {
            300
        } else {
            rng.gen_range(20..300)
        };
        let cut_after = rng.gen_range(0..batches);
        // Half the cycles with no job targeted cut the power at the next
        // file operation, before a sync write: most often the writer's own
        // fdatasync (WAL records are stored through a mapping, so a
        // foreground write is otherwise rarely mid-file-operation).
        let foreground_cut = target.is_none() && rng.gen_bool(0.5);
        if let Some(job) = target {
            fs.cut_power_in(job, rng.gen_range(1..=12));
        }
        durable = n;
        let mut snapshots: Vec<(weft::Snapshot, Model)> = Vec::new();
        for b in 0..batches {
            if b == cut_after && target.is_none() {
                let within = if foreground_cut {
                    1
                } else {
                    rng.gen_range(1..=60)
                };
                fs.cut_power_at(fs.ops() + within);
            }
            let i = history.len();
            let ops = random_batch(&mut rng, i);
            let batch = to_batch(i, &ops);
            let sync = (b == cut_after && foreground_cut) || rng.gen_ratio(1, 4);
            // A failed write may still have reached the disk: it belongs
            // to the history all the same, unacknowledged.
            history.push(ops);
            if db.write(batch, &WriteOptions::new().sync(sync)).is_err() {
                break; // the power is out (or the database poisoned by it)
            }
            apply(&mut model, i, &history[i]);
            if sync {
                durable = history.len();
            }
            match rng.gen_range(0..40) {
                0 if db.sync_wal().is_ok() => durable = history.len(),
                1 if db.flush().is_ok() => durable = history.len(),
                2 => snapshots.push((db.snapshot(), model.clone())),
                3 if !snapshots.is_empty() && !piles_up => {
                    let (snap, frozen) = snapshots.swap_remove(rng.gen_range(0..snapshots.len()));
                    let got = scan_cursor(&db, &ReadOptions::new().snapshot(&snap));
                    assert_pairs_eq(&got, &model_vec(&frozen), &format!("{ctx}: snapshot scan"));
                }
                4..=9 => check_reads(&db, &model, &mut rng, &ctx, !piles_up),
                _ => {}
            }
        }
        t.batches_written += history.len() - n;
        drop(snapshots);
        // Give background jobs a moment to be mid-way when the power goes.
        if rng.gen_ratio(1, 3) {
            std::thread::sleep(Duration::from_millis(rng.gen_range(0..5)));
        }
        fs.cut_power_now();
        let _ = db.close();
        let loss = fs.apply_power_loss().unwrap();
        if std::env::var_os("WEFT_POWER_CUT_VERBOSE").is_some() {
            eprintln!(
                "{ctx}: wrote batches {n}..{}, durable {durable}, {loss:?}",
                history.len()
            );
        }
        t.note(&loss);
        t.cycles += 1;
    }
}

#[test]
fn power_cuts_lose_nothing_acknowledged_and_recover_a_prefix() {
    let secs = env_usize("WEFT_POWER_CUT_SECS", 0);
    let cycles = env_usize("WEFT_POWER_CUT_CYCLES", 60);
    let mut t = Tally::default();
    let started = Instant::now();
    if secs > 0 {
        let deadline = started + Duration::from_secs(secs as u64);
        let mut seed = 1u64;
        while Instant::now() < deadline {
            run_seed(seed, usize::MAX, Some(deadline), &mut t);
            seed += 1;
        }
    } else {
        for seed in seeds(&[11, 12, 13, 14]) {
            run_seed(seed, cycles, None, &mut t);
        }
    }
    eprintln!(
        "power cuts: {} cycles in {:.1} s ({} during recovery), {} batches written, {} lost \
         (none acknowledged durable), {} files torn, {} directory entries undone",
        t.cycles,
        started.elapsed().as_secs_f64(),
        t.cuts_during_open,
        t.batches_written,
        t.batches_lost,
        t.files_torn,
        t.names_undone
    );
    eprintln!("  cut during: {:?}", t.by_activity);
    eprintln!("  cut on file: {:?}", t.by_file);
    if t.cycles >= 100 {
        // The cuts land in every job and in recovery, not only in the
        // foreground writes.
        let struck: BTreeSet<&str> = t.by_activity.keys().copied().collect();
        for job in JOBS.iter().chain(&["open", "foreground"]) {
            assert!(
                struck.contains(job),
                "no cut struck {job}: {:?}",
                t.by_activity
            );
        }
        assert!(t.files_torn > 0, "no torn tail was ever simulated");
        assert!(t.names_undone > 0, "no directory entry was ever undone");
    }
}

/// Every kind of file operation failing with `EIO`, `ENOSPC` or a short
/// write, at several points: the failing call (or a later one) returns an
/// error that names what failed, the database stays readable with every
/// acknowledged write, and after the fault clears, a reopen — with or
/// without a power cut first — keeps every acknowledged write (all of
/// them without a cut: they reached the OS; the synced ones with one).
#[test]
fn injected_faults_fail_cleanly_and_lose_nothing_acknowledged() {
    use weft::internals::fs::{FaultKind, OpKind};
    let kinds = [
        OpKind::Create,
        OpKind::Write,
        OpKind::Sync,
        OpKind::Allocate,
        OpKind::SetLen,
        OpKind::Rename,
        OpKind::Remove,
        OpKind::SyncDir,
    ];
    let faults = [FaultKind::Eio, FaultKind::NoSpace, FaultKind::ShortWrite];
    let mut trials = 0;
    let mut errors_seen = 0;
    let mut rng = rng(7);
    for (k, &on) in kinds.iter().enumerate() {
        for (f, &fault) in faults.iter().enumerate() {
            for nth in [1, 3, 10, 40] {
                let seed = (k * 100 + f * 10) as u64 + nth;
                let ctx = format!("{on:?} #{nth} fails with {fault:?}");
                let dir = tempfile::tempdir().unwrap();
                let fs = FaultFs::new(seed);
                let (opts, desc) = random_options(&mut rng, &fs);
                let db = Db::open(dir.path(), opts.clone()).unwrap();
                fs.inject(on, nth, fault, rng.gen_bool(0.5));
                let mut model = Model::new();
                let mut acked = 0usize;
                let mut synced = 0usize;
                let mut history = Vec::new();
                let mut failed = None;
                for i in 0..150 {
                    let ops = random_batch(&mut rng, i);
                    let batch = to_batch(i, &ops);
                    history.push(ops);
                    let sync = i % 7 == 0;
                    if let Err(e) = db.write(batch, &WriteOptions::new().sync(sync)) {
                        failed = Some(e);
                        break;
                    }
                    acked = i + 1;
                    apply(&mut model, i, &history[i]);
                    if sync {
                        synced = acked;
                    }
                    if i % 50 == 49 {
                        if let Err(e) = db.flush() {
                            failed = Some(e);
                            break;
                        }
                        synced = acked;
                    }
                }
                trials += 1;
                if let Some(e) = &failed {
                    errors_seen += 1;
                    let text = e.to_string();
                    assert!(
                        !matches!(e, weft::Error::Corruption { .. }),
                        "{ctx}: a failed operation is not corruption: {text}"
                    );
                    assert!(
                        text.contains(dir.path().to_str().unwrap())
                            || text.contains(".log")
                            || text.contains("log")
                            || text.contains("poisoned"),
                        "{ctx}: the error should say what failed: {text}"
                    );
                    // Reads stay alive and right.
                    assert_db_eq(&db, &model, &format!("{ctx}: reads after the failure"));
                }
                let _ = db.close();
                fs.clear_faults();
                let cut = rng.gen_bool(0.5);
                if cut {
                    fs.apply_power_loss().unwrap();
                }
                let db = Db::open(dir.path(), opts.clone())
                    .unwrap_or_else(|e| panic!("{ctx} ({desc}): reopen failed: {e}"));
                let n = recovered_batches(&db);
                let floor = if cut { synced } else { acked };
                assert!(
                    n >= floor && n <= history.len(),
                    "{ctx} ({desc}, cut {cut}): recovered {n} batches; {acked} acknowledged, \
                     {synced} durable, {} attempted",
                    history.len()
                );
                let want = model_after(&history, n);
                assert_db_eq(&db, &want, &format!("{ctx}: after reopen"));
                db.verify_checksums().unwrap();
            }
        }
    }
    eprintln!("injected faults: {trials} trials, {errors_seen} surfaced as errors");
    assert!(
        errors_seen * 2 > trials,
        "most injected faults should surface"
    );
}
