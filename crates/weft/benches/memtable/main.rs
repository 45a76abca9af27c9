//! Memtable-only benchmark (JellyFish §3 simulator setup, ESL §6 YCSB).
//!
//! ```text
//! CARGO_TARGET_DIR=... cargo bench -p weft --bench memtable
//! ```
//!
//! Environment knobs: `WEFT_BENCH_OPS` (default 1000000), `WEFT_BENCH_SCANS`
//! (default OPS / 10), `WEFT_BENCH_THREADS` (default `1,2`),
//! `WEFT_BENCH_PARTS` (default `micro,teks,ycsb`; also `link`),
//! `WEFT_BENCH_DISTS`
//! (the micro part's key distributions, default
//! `uniform,zipf1.2,zipf1.2-dbkeys`), `WEFT_BENCH_KINDS` (default every
//! kind and `crossbeam`), `WEFT_BENCH_ROUNDS` (default 1).
//!
//! Each kind runs in a process of its own (the benchmark starts copies of
//! itself), so no kind inherits memory another kind's run left mapped and
//! faulted in; with `WEFT_BENCH_ROUNDS=R` every kind runs R times, the
//! order rotated each round, and the table shows the median of each cell.
//!
//! *Micro* (JellyFish Figs. 3–5): OPS puts of 16 B keys and 100 B values
//! into an empty memtable, then OPS gets and SCANS scans (seek + 10 next
//! distinct keys through the engine's snapshot filter `VisibleIter`, as a
//! range query runs; each thread makes one iterator and seeks it again for
//! every scan, see [`Scanner`]), keys uniform (distinct: every put a new key) or
//! Zipfian (numpy `zipf(a = 1.2)`: a few keys take most puts, so many
//! versions per key). The Zipfian ids become keys two ways: `zipf1.2`
//! scatters them (a hash of the id, so hot keys lie far apart in key order
//! and a scan from a hot key soon reaches keys with one version), and
//! `zipf1.2-dbkeys` writes them as `db_bench` does (`GenerateKeyFromInt`:
//! the id big-endian, then `'0'` padding), so the hottest keys are
//! neighbours and a scan from one crosses many keys with many versions
//! (the key format of `db_bench`, whose benchmarks JellyFish's evaluation
//! runs; the paper does not say how its simulator forms keys). *YCSB*
//! (ESL §6): 1 M keys preloaded (not timed), then
//! 1 M operations each of A (50% read, 50% update), B (95/5), C (100%
//! read), D (95% read-latest, 5% insert), request keys YCSB-Zipfian
//! (θ = 0.99, scrambled) or latest for D, run one after the other on the
//! same memtable. *Teks* (TeksDB §6.1): OPS distinct 16 B keys with 256 B
//! values, then gets, seeks + 10 next, an overwrite pass, one full scan,
//! and memory after the load (the `MiB` rows). The `cuckoo` kind sorts its
//! keys for every iterator, so it runs only 64 scans per phase (enough
//! for a rate). Threads claim each phase's operations in blocks of 16
//! (sequence numbers unique, roughly in arrival order as under group
//! commit). *Link* (`teks` only, not in the default parts): the cost of
//! linking new keys into `teks`'s sorted index alone, on one thread with
//! the worker frozen: OPS puts of the *teks* part's keys, and after every
//! 8 192 a `prepare_scan` that links them (as a scan would); only the
//! linking is timed (row `link`, M keys linked/s). The other parts see
//! the linker only through the writers it slows down, on a machine whose
//! noise hides all but large changes. Peers: the five Weft kinds and
//! `crossbeam_skiplist::SkipMap` keyed by user key ‖ !seq (versions as
//! separate entries, like `skiplist`).
//!
//! Reported: Mops/s (wall clock over the whole phase, from when every
//! thread is ready) and the ratio to `skiplist`, both from the medians of
//! the rounds. Built with the `key-compare-count` feature
//! (`cargo bench -p weft --bench memtable --features weft/key-compare-count`)
//! it reports key comparisons per operation instead (JellyFish Fig. 7; see
//! `weft::internals::memtable::compares`), background linking included. Cache misses
//! per operation (JellyFish Table 2): `bench/cache-misses` runs the micro
//! part under valgrind's cache simulator, counting only inside the
//! per-operation calls (the 2-vCPU VM of `bench/RESULTS.md` exposes no
//! PMU; on a machine with one, `perf stat -e cache-misses` around a run of
//! one part and kind gives the hardware's figure).

// A test (or benchmark) fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use weft::internals::memtable::compares;
use weft::internals::memtable::EslMemtable;
use weft::internals::memtable::TeksMemtable;
use weft::internals::memtable::{new_memtable, Memtable, MemtableKind};
use weft::internals::memtable::{ValueKind, MAX_SEQUENCE};

const VALUE: [u8; 100] = [0x5a; 100];
const SCAN_LEN: usize = 10;

mod keys;
mod targets;

use keys::*;
use targets::*;

const KINDS: [&str; 6] = [
    "skiplist",
    "jellyfish",
    "esl",
    "cuckoo",
    "teks",
    "crossbeam",
];
/// The write buffer the hash kinds size their budget by: large enough that
/// no benchmark fills it.
const BENCH_WRITE_BUFFER: usize = 4 << 30;

/// The kinds to run: `WEFT_BENCH_KINDS` (comma list), default all;
/// without `crossbeam` when counting comparisons (its own are not seen).
fn kinds() -> Vec<&'static str> {
    let all = KINDS
        .into_iter()
        .filter(|k| !(compares::COUNTING && *k == "crossbeam"));
    match std::env::var("WEFT_BENCH_KINDS") {
        Ok(list) => all
            .filter(|k| list.split(',').any(|x| x.trim() == *k))
            .collect(),
        Err(_) => all.collect(),
    }
}

/// A target of `kind`, and for `esl` also its concrete handle (index hook).
fn make(kind: &str) -> (Box<dyn Target>, Option<Arc<EslMemtable>>) {
    match kind {
        "crossbeam" => (Box::new(Crossbeam(Default::default())), None),
        "esl" => {
            let m = Arc::new(EslMemtable::new());
            (
                Box::new(Weft {
                    table: Arc::clone(&m) as Arc<dyn Memtable>,
                    fresh_scans: false,
                }),
                Some(m),
            )
        }
        k => (
            Box::new(Weft {
                table: new_memtable(
                    k.parse::<MemtableKind>().unwrap_or_default(),
                    BENCH_WRITE_BUFFER,
                ),
                fresh_scans: k == "cuckoo",
            }),
            None,
        ),
    }
}

/// Runs `f(i)` for `i in 0..n` on `threads` threads; Mops/s. Threads
/// claim blocks of 16 consecutive operations from a shared counter, so
/// sequence numbers (`i + 1`) arrive roughly in order across threads, as
/// the engine's group commit makes them (a static split lets one thread run
/// far ahead and the other insert deep under hot keys' newer versions).
fn timed(threads: usize, n: usize, f: &(dyn Fn(usize) + Sync)) -> f64 {
    timed_each(threads, n, &|| (), &|_, i| f(i))
}

/// [`timed`], with a state each thread makes before the clock starts
/// (its scanner) and passes to every `f` it runs. The clock starts once
/// every thread is ready, so thread start-up is not timed.
fn timed_each<S>(
    threads: usize,
    n: usize,
    init: &(dyn Fn() -> S + Sync),
    f: &(dyn Fn(&mut S, usize) + Sync),
) -> f64 {
    const BLOCK: usize = 16;
    let next = AtomicUsize::new(0);
    let ready = std::sync::Barrier::new(threads + 1);
    let go = std::sync::Barrier::new(threads + 1);
    let mut start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut state = init();
                ready.wait();
                go.wait();
                loop {
                    let b = next.fetch_add(BLOCK, Ordering::Relaxed);
                    if b >= n {
                        break;
                    }
                    for i in b..(b + BLOCK).min(n) {
                        f(&mut state, i);
                    }
                }
            });
        }
        ready.wait();
        compares::take();
        start = Instant::now();
        go.wait();
    });
    per_op(n, start)
}

/// The figure reported for `n` operations since `start`: Mops/s, or key
/// comparisons per operation when the build counts them.
fn per_op(n: usize, start: Instant) -> f64 {
    if compares::COUNTING {
        compares::take() as f64 / n as f64
    } else {
        n as f64 / start.elapsed().as_secs_f64() / 1e6
    }
}

/// The unit of [`per_op`].
fn unit() -> &'static str {
    if compares::COUNTING {
        "key comparisons/op"
    } else {
        "Mops/s"
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

type Results = BTreeMap<(String, String, usize), BTreeMap<&'static str, f64>>;

fn micro(ops: usize, scans: usize, threads: &[usize], out: &mut Results) {
    for dist in ["uniform", "zipf1.2", "zipf1.2-dbkeys"] {
        if std::env::var("WEFT_BENCH_DISTS").is_ok_and(|l| !l.split(',').any(|d| d == dist)) {
            continue;
        }
        let mut rng = StdRng::seed_from_u64(42);
        let draw = |rng: &mut StdRng, i: usize, put: bool| -> [u8; 16] {
            if dist == "uniform" {
                // Puts: distinct keys; reads: keys that were put.
                key_of(if put {
                    i as u64
                } else {
                    rng.gen_range(0..ops as u64)
                })
            } else if dist == "zipf1.2" {
                key_of(numpy_zipf(rng, 1.2))
            } else {
                db_bench_key(numpy_zipf(rng, 1.2))
            }
        };
        let puts: Vec<[u8; 16]> = (0..ops).map(|i| draw(&mut rng, i, true)).collect();
        let gets: Vec<[u8; 16]> = (0..ops).map(|i| draw(&mut rng, i, false)).collect();
        let scan_keys: Vec<[u8; 16]> = (0..scans).map(|i| draw(&mut rng, i, false)).collect();
        let distinct = {
            let mut v = puts.clone();
            v.sort_unstable();
            v.dedup();
            v.len()
        };
        eprintln!("{dist}: {ops} puts over {distinct} distinct keys");
        for &th in threads {
            for kind in kinds() {
                let (t, _) = make(kind);
                let put = timed(th, ops, &|i| t.put(&puts[i], i as u64 + 1));
                let get = timed(th, ops, &|i| {
                    std::hint::black_box(t.get(&gets[i]));
                });
                let scan = timed_each(th, scans_for(kind, scans), &|| t.scanner(), &|sc, i| {
                    std::hint::black_box(sc.scan(&scan_keys[i]));
                });
                for (op, v) in [("put", put), ("get", get), ("scan", scan)] {
                    out.entry((dist.to_string(), op.to_string(), th))
                        .or_default()
                        .insert(kind, v);
                }
                eprintln!(
                    "  {kind:<10} t={th} put {put:.3} get {get:.3} scan {scan:.3} {}",
                    unit()
                );
            }
        }
    }
}

/// Scans to run on `kind`: `cuckoo` sorts its whole key set for every
/// iterator (the cost TeksDB's weave removes), so it gets a few only.
fn scans_for(kind: &str, scans: usize) -> usize {
    if kind == "cuckoo" {
        scans.min(CUCKOO_SCANS)
    } else {
        scans
    }
}

/// Scans the `cuckoo` kind runs per phase (each sorts a copy of the keys).
const CUCKOO_SCANS: usize = 64;

/// TeksDB §6.1's setup: `items` distinct 16 B keys with 256 B values put in
/// random order, then `items` gets, `scans` seeks + 10 next, an overwrite
/// pass (every key once more), and one full ordered scan of the newest
/// versions. Also reports memory after the load (MiB).
fn teks_setup(items: usize, scans: usize, threads: &[usize], out: &mut Results) {
    let value = [0xa5u8; 256];
    let mut rng = StdRng::seed_from_u64(11);
    let keys: Vec<[u8; 16]> = (0..items as u64).map(key_of).collect();
    let gets: Vec<[u8; 16]> = (0..items)
        .map(|_| key_of(rng.gen_range(0..items as u64)))
        .collect();
    let scan_keys: Vec<[u8; 16]> = (0..scans)
        .map(|_| key_of(rng.gen_range(0..items as u64)))
        .collect();
    for &th in threads {
        for kind in kinds() {
            let (t, _) = make(kind);
            let put = timed(th, items, &|i| t.put_value(&keys[i], i as u64 + 1, &value));
            let mem_mib = t.memory().map_or(f64::NAN, |b| b as f64 / (1 << 20) as f64);
            let get = timed(th, items, &|i| {
                std::hint::black_box(t.get(&gets[i]));
            });
            let scan = timed_each(th, scans_for(kind, scans), &|| t.scanner(), &|sc, i| {
                std::hint::black_box(sc.scan(&scan_keys[i]));
            });
            let base = items as u64 + 1;
            let overwrite = timed(th, items, &|i| {
                t.put_value(&keys[i], base + i as u64, &value)
            });
            compares::take();
            let start = Instant::now();
            let seen = t.full_scan();
            let full = per_op(seen, start);
            assert_eq!(seen, items, "{kind}: full scan saw {seen} of {items} keys");
            for (op, v) in [
                ("put", put),
                ("get", get),
                ("seek+10", scan),
                ("overwrite", overwrite),
                ("fullscan", full),
                ("MiB", mem_mib),
            ] {
                out.entry(("teks256".to_string(), op.to_string(), th))
                    .or_default()
                    .insert(kind, v);
            }
            eprintln!(
                "  teks256 {kind:<10} t={th} put {put:.3} get {get:.3} seek+10 {scan:.3} \
                 overwrite {overwrite:.3} fullscan {full:.3} {}, {mem_mib:.1} MiB",
                unit()
            );
        }
    }
}

/// The *link* part (module docs): linking alone, one thread.
fn link(items: usize, out: &mut Results) {
    const BATCH: usize = 8192;
    // Timed in wall clock only (no comparison counts).
    if compares::COUNTING || !kinds().contains(&"teks") {
        return;
    }
    let value = [0xa5u8; 256];
    // A write buffer large enough that the memtable never reports full.
    let m = TeksMemtable::new(4 << 30);
    m.freeze_worker(true);
    let mut linking = Duration::ZERO;
    for i in 0..items {
        m.insert(&key_of(i as u64), i as u64 + 1, ValueKind::Put, &value);
        if (i + 1) % BATCH == 0 || i + 1 == items {
            let start = Instant::now();
            m.prepare_scan(MAX_SEQUENCE);
            linking += start.elapsed();
        }
    }
    let weave = m.weave_stats();
    assert_eq!(weave.linked, weave.keys, "teks: every key linked");
    let rate = items as f64 / linking.as_secs_f64() / 1e6;
    out.entry(("teks256".to_string(), "link".to_string(), 1))
        .or_default()
        .insert("teks", rate);
    eprintln!(
        "  teks256 link: {items} keys in batches of {BATCH}, {:.1} ns per key",
        1e3 / rate
    );
}

fn ycsb(threads: &[usize], out: &mut Results) {
    const N: u64 = 1_000_000;
    const OPS: usize = 1_000_000;
    let zipf = YcsbZipf::new(N);
    for &th in threads {
        for kind in kinds() {
            let (t, esl) = make(kind);
            // Load (not timed).
            for id in 0..N {
                t.put(&key_of(splitmix(id)), id + 1);
            }
            if let Some(m) = esl {
                // Let the index settle after the load, as a loaded store's
                // would; the run phases then keep it updated as usual.
                m.sync_index(std::time::Duration::from_secs(60));
            }
            let seq = AtomicU64::new(N + 1);
            let inserted = AtomicU64::new(N);
            for (wl, read_pct, insert) in [
                ("A", 50, false),
                ("B", 95, false),
                ("C", 100, false),
                ("D", 95, true),
            ] {
                let mut rng = StdRng::seed_from_u64(7);
                // Pre-draw (op is read?, item) so the timed loop only runs ops.
                let plan: Vec<(bool, u64)> = (0..OPS)
                    .map(|_| {
                        let read = rng.gen_range(0..100) < read_pct;
                        let z = zipf.next(&mut rng);
                        (read, z)
                    })
                    .collect();
                let mops = timed(th, OPS, &|i| {
                    let (read, z) = plan[i];
                    let n = inserted.load(Ordering::Relaxed);
                    // Scrambled Zipfian for A–C; latest for D.
                    let id = if insert {
                        n - 1 - z.min(n - 1)
                    } else {
                        splitmix(z) % N
                    };
                    if read {
                        std::hint::black_box(t.get(&key_of(splitmix(id))));
                    } else {
                        let s = seq.fetch_add(1, Ordering::Relaxed);
                        let id = if insert {
                            inserted.fetch_add(1, Ordering::Relaxed)
                        } else {
                            id
                        };
                        t.put(&key_of(splitmix(id)), s);
                    }
                });
                out.entry(("ycsb".to_string(), wl.to_string(), th))
                    .or_default()
                    .insert(kind, mops);
                eprintln!("  ycsb {wl} {kind:<10} t={th} {mops:.3} {}", unit());
            }
        }
    }
}

/// Set in the child processes the benchmark runs each kind in.
const CHILD_ENV: &str = "WEFT_BENCH_CHILD";

fn main() {
    // `cargo bench` passes `--bench`; ignore arguments.
    if std::env::var_os(CHILD_ENV).is_some() {
        print_cells(&measure());
        return;
    }
    let rounds = env_usize("WEFT_BENCH_ROUNDS", 1).max(1);
    let kinds = kinds();
    let mut samples: BTreeMap<(String, String, usize), BTreeMap<&'static str, Vec<f64>>> =
        BTreeMap::new();
    for round in 0..rounds {
        // Each kind takes each place in the order over the rounds.
        let mut order = kinds.clone();
        order.rotate_left(round % kinds.len().max(1));
        for kind in order {
            eprintln!("round {}/{rounds}: {kind}", round + 1);
            for (cell, value) in run_child(kind) {
                samples
                    .entry(cell)
                    .or_default()
                    .entry(kind)
                    .or_default()
                    .push(value);
            }
        }
    }
    let medians: Results = samples
        .into_iter()
        .map(|(cell, by_kind)| {
            let row = by_kind.into_iter().map(|(k, v)| (k, median(v))).collect();
            (cell, row)
        })
        .collect();
    print_table(&medians, rounds);
}

/// Runs the parts selected by the environment for the kinds in
/// `WEFT_BENCH_KINDS` in this process.
fn measure() -> Results {
    let ops = env_usize("WEFT_BENCH_OPS", 1_000_000);
    let scans = env_usize("WEFT_BENCH_SCANS", ops / 10);
    let threads: Vec<usize> = std::env::var("WEFT_BENCH_THREADS")
        .unwrap_or_else(|_| "1,2".into())
        .split(',')
        .filter_map(|t| t.trim().parse().ok())
        .collect();
    let parts = std::env::var("WEFT_BENCH_PARTS").unwrap_or_else(|_| "micro,teks,ycsb".into());
    let mut out = Results::new();
    if parts.contains("micro") {
        micro(ops, scans, &threads, &mut out);
    }
    if parts.contains("teks") {
        teks_setup(ops, scans, &threads, &mut out);
    }
    if parts.contains("ycsb") {
        ycsb(&threads, &mut out);
    }
    if parts.contains("link") {
        link(ops, &mut out);
    }
    out
}

/// A child's results, one tab-separated line per cell, for [`run_child`].
fn print_cells(out: &Results) {
    for ((dist, op, th), row) in out {
        for (kind, v) in row {
            println!("cell\t{dist}\t{op}\t{th}\t{kind}\t{v}");
        }
    }
}

/// Measures `kind` alone in a new process of this benchmark, so that no
/// kind runs on memory another kind's run left mapped and faulted in (the
/// arena recycles dropped chunks; the first kind in a shared process paid
/// for page faults the later ones did not, which moved put rates by more
/// than the differences the benchmark is run to see; see
/// `bench/journal/2026-11-25-02-memtable-bench-per-process.md`).
fn run_child(kind: &str) -> Vec<((String, String, usize), f64)> {
    let exe = std::env::current_exe().expect("the benchmark knows its own path");
    let out = std::process::Command::new(exe)
        .env(CHILD_ENV, "1")
        .env("WEFT_BENCH_KINDS", kind)
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("the benchmark starts a copy of itself");
    assert!(
        out.status.success(),
        "the run of {kind} failed: {}",
        out.status
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            match f[..] {
                ["cell", dist, op, th, _kind, v] => Some((
                    (dist.to_string(), op.to_string(), th.parse().ok()?),
                    v.parse().ok()?,
                )),
                _ => None,
            }
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn print_table(out: &Results, rounds: usize) {
    // Only the kinds that ran (`WEFT_BENCH_KINDS` may pick a few).
    let ran: Vec<&str> = KINDS
        .iter()
        .copied()
        .filter(|k| out.values().any(|row| row.contains_key(k)))
        .collect();
    let peers: Vec<&str> = ran.iter().copied().filter(|&k| k != "skiplist").collect();
    let ratio_heads: Vec<String> = if ran.contains(&"skiplist") {
        peers.iter().map(|k| format!("{k}/sl")).collect()
    } else {
        Vec::new()
    };
    let mut heads: Vec<String> = ran.iter().map(|k| k.to_string()).collect();
    heads.extend(ratio_heads.iter().cloned());
    println!("\n| workload | op | thr | {} |", heads.join(" | "));
    println!("|{}", "---|".repeat(3 + heads.len()));
    for ((dist, op, th), row) in out {
        let mut cells: Vec<String> = ran
            .iter()
            .map(|k| match row.get(k).copied().unwrap_or(f64::NAN) {
                // The `cuckoo` kind's scans (a sort each) need more digits.
                v if v < 0.01 => format!("{v:.6}"),
                v => format!("{v:.3}"),
            })
            .collect();
        if !ratio_heads.is_empty() {
            let base = row.get("skiplist").copied().unwrap_or(f64::NAN);
            cells.extend(
                peers
                    .iter()
                    .map(|k| format!("{:.2}x", row.get(k).copied().unwrap_or(f64::NAN) / base)),
            );
        }
        println!("| {dist} | {op} | {th} | {} |", cells.join(" | "));
    }
    println!(
        "\n({}; median of {rounds} round(s), each kind in a process of its own, the\n\
         order rotated each round; ratios of the medians against skiplist)",
        unit()
    );
}
