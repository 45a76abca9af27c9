//! Tests of the skiplist memtable: a model check against `BTreeMap`, and
//! concurrent writers with concurrent checking readers.

use std::cmp::{Ordering as CmpOrdering, Reverse};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::*;
use crate::key::compare_positions;

type Model = BTreeMap<(Vec<u8>, Reverse<u64>), (ValueKind, Vec<u8>)>;
type Entry = (Vec<u8>, u64, ValueKind, Vec<u8>);

/// Keys over a tiny alphabet (including 0x00 and 0xff), lengths 0..=3: the
/// empty key and many keys that are prefixes of others.
fn random_key(rng: &mut StdRng) -> Vec<u8> {
    const ALPHABET: [u8; 4] = [0x00, 0x01, b'a', 0xff];
    let len = rng.gen_range(0..=3);
    (0..len).map(|_| ALPHABET[rng.gen_range(0..4)]).collect()
}

fn collect_forward(it: &mut dyn InternalIterator) -> Vec<Entry> {
    let mut out = Vec::new();
    it.seek_to_first().unwrap();
    while it.valid() {
        out.push((
            it.user_key().to_vec(),
            it.seq(),
            it.kind(),
            it.value().to_vec(),
        ));
        it.next().unwrap();
    }
    out
}

fn collect_backward(it: &mut dyn InternalIterator) -> Vec<Entry> {
    let mut out = Vec::new();
    it.seek_to_last().unwrap();
    while it.valid() {
        out.push((
            it.user_key().to_vec(),
            it.seq(),
            it.kind(),
            it.value().to_vec(),
        ));
        it.prev().unwrap();
    }
    out
}

fn entry_at(it: &dyn InternalIterator) -> Option<Entry> {
    it.valid().then(|| {
        (
            it.user_key().to_vec(),
            it.seq(),
            it.kind(),
            it.value().to_vec(),
        )
    })
}

/// Builds a list and its model: `n` versions over random keys, unique seqs
/// `1..=n`, inserted in random order, about a quarter of them deletes.
fn build(rng: &mut StdRng, n: usize) -> (Arc<SkipListMemtable>, Model) {
    let mut versions: Vec<Entry> = (1..=n as u64)
        .map(|seq| {
            let key = random_key(rng);
            if rng.gen_ratio(1, 4) {
                (key, seq, ValueKind::Delete, Vec::new())
            } else {
                let vlen = rng.gen_range(0..20);
                let value = (0..vlen).map(|_| rng.gen()).collect();
                (key, seq, ValueKind::Put, value)
            }
        })
        .collect();
    versions.shuffle(rng);
    let list = Arc::new(SkipListMemtable::new());
    let mut model = Model::new();
    for (k, seq, kind, v) in versions {
        list.insert(&k, seq, kind, &v);
        model.insert((k, Reverse(seq)), (kind, v));
    }
    (list, model)
}

fn model_entries(model: &Model) -> Vec<Entry> {
    model
        .iter()
        .map(|((k, Reverse(s)), (kind, v))| (k.clone(), *s, *kind, v.clone()))
        .collect()
}

#[test]
fn matches_btreemap_model() {
    for (seed, n) in [(1u64, 0usize), (2, 1), (3, 7), (4, 200), (5, 3000)] {
        let mut rng = StdRng::seed_from_u64(seed);
        let (list, model) = build(&mut rng, n);
        let expected = model_entries(&model);
        assert_eq!(list.len(), n);
        assert_eq!(list.is_empty(), n == 0);

        let mut it = Arc::clone(&list).iter();
        assert!(!it.valid());
        assert_eq!(collect_forward(&mut *it), expected, "forward, seed {seed}");
        let mut rev = expected.clone();
        rev.reverse();
        assert_eq!(collect_backward(&mut *it), rev, "backward, seed {seed}");

        // Random seeks followed by random next/prev walks.
        for _ in 0..300 {
            let key = random_key(&mut rng);
            let seq = rng.gen_range(0..=n as u64 + 1);
            it.seek(&key, seq).unwrap();
            let mut pos = expected
                .partition_point(|e| compare_positions(&e.0, e.1, &key, seq) == CmpOrdering::Less);
            assert_eq!(
                entry_at(&*it),
                expected.get(pos).cloned(),
                "seek {key:?}@{seq}"
            );
            for _ in 0..rng.gen_range(0..8) {
                if !it.valid() {
                    break;
                }
                if rng.gen_bool(0.5) {
                    it.next().unwrap();
                    pos += 1;
                } else {
                    it.prev().unwrap();
                    pos = pos.checked_sub(1).unwrap_or(usize::MAX);
                }
                assert_eq!(entry_at(&*it), expected.get(pos).cloned());
            }
        }

        // Point reads at random snapshots.
        for _ in 0..500 {
            let key = random_key(&mut rng);
            let snap = rng.gen_range(0..=n as u64 + 1);
            let want = model
                .range((key.clone(), Reverse(snap))..)
                .next()
                .filter(|((k, _), _)| *k == key)
                .map(|((_, Reverse(s)), (kind, v))| (*s, *kind, v.clone()));
            let got = list
                .get(&key, snap)
                .map(|f| (f.seq, f.kind, f.value.to_vec()));
            assert_eq!(got, want, "get {key:?}@{snap}, seed {seed}");
        }
    }
}

#[test]
fn get_sees_newest_version_at_snapshot() {
    let list = SkipListMemtable::new();
    list.insert(b"k", 10, ValueKind::Put, b"ten");
    list.insert(b"k", 30, ValueKind::Delete, b"");
    list.insert(b"k", 20, ValueKind::Put, b"twenty");
    list.insert(b"", 5, ValueKind::Put, b"empty");
    list.insert(b"k\0", 1, ValueKind::Put, b"ext");
    assert_eq!(list.get(b"k", 9), None);
    let f = list.get(b"k", 10).unwrap();
    assert_eq!((f.seq, f.kind, f.value), (10, ValueKind::Put, &b"ten"[..]));
    let f = list.get(b"k", 29).unwrap();
    assert_eq!((f.seq, f.value), (20, &b"twenty"[..]));
    let f = list.get(b"k", u64::MAX).unwrap();
    assert_eq!((f.seq, f.kind, f.value), (30, ValueKind::Delete, &b""[..]));
    assert_eq!(list.get(b"", 4), None);
    assert_eq!(list.get(b"", 5).unwrap().value, b"empty");
    assert_eq!(list.get(b"k\0", 100).unwrap().value, b"ext");
    assert_eq!(list.get(b"j", 100), None);
    assert_eq!(list.get(b"k\0\0", 100), None);
}

#[test]
fn iterator_keeps_memtable_alive() {
    let list = Arc::new(SkipListMemtable::new());
    for i in 0..1000u64 {
        list.insert(
            format!("key{i:04}").as_bytes(),
            i + 1,
            ValueKind::Put,
            &[7; 100],
        );
    }
    let mut it = list.iter(); // consumes the only Arc
    it.seek(b"key0500", u64::MAX).unwrap();
    assert_eq!(it.user_key(), b"key0500");
    assert_eq!(it.value(), &[7; 100][..]);
    it.prev().unwrap();
    assert_eq!(it.user_key(), b"key0499");
    it.seek_to_last().unwrap();
    assert_eq!(it.user_key(), b"key0999");
    it.next().unwrap();
    assert!(!it.valid());
}

#[test]
fn memory_accounting_is_compact() {
    let list = SkipListMemtable::new();
    let empty = list.approximate_memory();
    assert!(empty > 0 && empty <= 4096, "head chunk: {empty}");
    let n = 100_000u64;
    for i in 0..n {
        list.insert(
            format!("{i:016}").as_bytes(),
            i + 1,
            ValueKind::Put,
            &[1; 16],
        );
    }
    let used = list.approximate_memory();
    let payload = n as usize * 32;
    // Per node: 16 B header + 8 B per link (4/3 on average) + padding, plus
    // at most one partly used 1 MiB chunk.
    assert!(used >= payload);
    assert!(
        used <= n as usize * (32 + 16 + 16) + (1 << 20),
        "{used} bytes for {n} nodes"
    );
}

#[test]
fn heights_follow_branching_factor() {
    let mut counts = [0usize; MAX_HEIGHT + 1];
    let n = 200_000;
    for _ in 0..n {
        counts[random_height()] += 1;
    }
    assert_eq!(counts[0], 0);
    // P(height = 1) = 3/4, P(height >= 2) = 1/4, P(height >= 3) = 1/16.
    let h1 = counts[1] as f64 / n as f64;
    let ge3 = counts[3..].iter().sum::<usize>() as f64 / n as f64;
    assert!((h1 - 0.75).abs() < 0.01, "{h1}");
    assert!((ge3 - 0.0625).abs() < 0.005, "{ge3}");
}

/// The value written for `(key, seq)`; readers check values against it.
fn value_for(key: &[u8], seq: u64) -> Vec<u8> {
    let mut v = key.to_vec();
    v.push(b'@');
    v.extend_from_slice(&seq.to_le_bytes());
    v
}

/// Walks the list forward from `from` (the start if `None`) for at most
/// `limit` entries, checking strict internal order, that each value is the
/// one written for its `(key, seq)`, and that `prev` lands strictly before;
/// returns how many entries it saw.
fn check_scan(
    list: &Arc<SkipListMemtable>,
    rng: &mut StdRng,
    from: Option<&[u8]>,
    limit: usize,
) -> usize {
    let mut it = Arc::clone(list).iter();
    match from {
        Some(k) => it.seek(k, u64::MAX).unwrap(),
        None => it.seek_to_first().unwrap(),
    }
    let mut last: Option<(Vec<u8>, u64)> = None;
    let mut seen = 0;
    while it.valid() && seen < limit {
        let (k, s) = (it.user_key().to_vec(), it.seq());
        assert_eq!(it.value(), value_for(&k, s), "value of {k:?}@{s}");
        if let Some((lk, ls)) = &last {
            assert_eq!(
                compare_positions(lk, *ls, &k, s),
                CmpOrdering::Less,
                "order: {lk:?}@{ls} then {k:?}@{s}"
            );
        }
        // Occasionally step back and forth: prev must land strictly before
        // (a version inserted meanwhile may appear in between).
        if rng.gen_ratio(1, 20) {
            it.prev().unwrap();
            if it.valid() {
                assert_eq!(
                    compare_positions(it.user_key(), it.seq(), &k, s),
                    CmpOrdering::Less
                );
                if let Some((lk, ls)) = &last {
                    assert_ne!(
                        compare_positions(it.user_key(), it.seq(), lk, *ls),
                        CmpOrdering::Less,
                        "prev skipped back past the previous entry"
                    );
                }
            }
            it.seek(&k, s).unwrap();
            assert_eq!((it.user_key(), it.seq()), (&k[..], s));
        }
        last = Some((k, s));
        seen += 1;
        it.next().unwrap();
    }
    seen
}

/// Walks backward from the last entry at or before `from`, checking strictly
/// decreasing internal order for at most `limit` steps.
fn check_backward(list: &Arc<SkipListMemtable>, from: &[u8], limit: usize) {
    let mut it = Arc::clone(list).iter();
    it.seek(from, u64::MAX).unwrap();
    if !it.valid() {
        it.seek_to_last().unwrap();
    }
    let mut last: Option<(Vec<u8>, u64)> = None;
    for _ in 0..limit {
        if !it.valid() {
            break;
        }
        let (k, s) = (it.user_key().to_vec(), it.seq());
        assert_eq!(it.value(), value_for(&k, s));
        if let Some((lk, ls)) = &last {
            assert_eq!(compare_positions(&k, s, lk, *ls), CmpOrdering::Less);
        }
        last = Some((k, s));
        it.prev().unwrap();
    }
}

/// Writers insert disjoint and shared keys with unique, interleaved seqs (so
/// versions of a shared key arrive out of order) while readers scan and get.
#[test]
fn concurrent_writers_and_readers() {
    const WRITERS: u64 = 6;
    const PER_WRITER: u64 = 10_000;
    const SHARED_KEYS: u64 = 50;
    let list = Arc::new(SkipListMemtable::new());
    let done = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(WRITERS as usize + 2));

    let readers: Vec<_> = (0..2u64)
        .map(|r| {
            let (list, done, start) = (Arc::clone(&list), Arc::clone(&done), Arc::clone(&start));
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(100 + r);
                start.wait();
                // (scans, scans that saw a partly filled list)
                let mut scans = (0, 0);
                loop {
                    let finished = done.load(Ordering::Acquire);
                    let from = if rng.gen_bool(0.5) {
                        format!("shared{:03}", rng.gen_range(0..SHARED_KEYS))
                    } else {
                        format!(
                            "own{}-{:05}",
                            rng.gen_range(0..WRITERS),
                            rng.gen_range(0..PER_WRITER)
                        )
                    };
                    let seen = check_scan(&list, &mut rng, Some(from.as_bytes()), 300);
                    check_backward(&list, from.as_bytes(), 100);
                    for _ in 0..50 {
                        let key = format!("shared{:03}", rng.gen_range(0..SHARED_KEYS));
                        let snap = rng.gen_range(0..=WRITERS * PER_WRITER + 1);
                        if let Some(f) = list.get(key.as_bytes(), snap) {
                            assert!(f.seq <= snap);
                            assert_eq!(f.kind, ValueKind::Put);
                            assert_eq!(f.value, value_for(key.as_bytes(), f.seq));
                        }
                    }
                    scans.0 += 1;
                    if !finished && seen > 0 {
                        scans.1 += 1;
                    }
                    if finished {
                        break;
                    }
                }
                scans
            })
        })
        .collect();

    let writers: Vec<_> = (0..WRITERS)
        .map(|t| {
            let (list, start) = (Arc::clone(&list), Arc::clone(&start));
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(t);
                let mut items: Vec<(Vec<u8>, u64)> = (0..PER_WRITER)
                    .map(|i| {
                        let seq = i * WRITERS + t + 1;
                        let key = if i % 2 == 0 {
                            format!("shared{:03}", rng.gen_range(0..SHARED_KEYS))
                        } else {
                            format!("own{t}-{:05}", rng.gen_range(0..PER_WRITER))
                        };
                        (key.into_bytes(), seq)
                    })
                    .collect();
                // Each writer's own order is shuffled too.
                items.shuffle(&mut rng);
                start.wait();
                for (k, seq) in &items {
                    list.insert(k, *seq, ValueKind::Put, &value_for(k, *seq));
                }
                items
            })
        })
        .collect();

    let mut expected: Vec<(Vec<u8>, u64)> = Vec::new();
    for w in writers {
        expected.extend(w.join().unwrap());
    }
    done.store(true, Ordering::Release);
    for r in readers {
        let scans = r.join().unwrap();
        eprintln!("reader scans: {scans:?}");
        assert!(scans.0 >= 1);
    }

    expected.sort_by(|a, b| compare_positions(&a.0, a.1, &b.0, b.1));
    assert_eq!(list.len(), expected.len());
    let got: Vec<(Vec<u8>, u64)> = collect_forward(&mut *Arc::clone(&list).iter())
        .into_iter()
        .map(|(k, s, _, _)| (k, s))
        .collect();
    assert_eq!(got.len(), expected.len());
    assert!(got == expected, "final contents differ from inserted set");
    let mut rng = StdRng::seed_from_u64(9);
    assert_eq!(
        check_scan(&list, &mut rng, None, usize::MAX),
        expected.len()
    );
    let mut back = collect_backward(&mut *Arc::clone(&list).iter());
    back.reverse();
    assert!(back.into_iter().map(|(k, s, _, _)| (k, s)).eq(expected));
}

/// Maximum contention on one splice: every writer inserts versions of the
/// same few keys, so CASes on the same links fail and splices are redone.
#[test]
fn concurrent_versions_of_one_key() {
    const WRITERS: u64 = 8;
    const PER_WRITER: u64 = 2000;
    let list = Arc::new(SkipListMemtable::new());
    let start = Arc::new(Barrier::new(WRITERS as usize));
    let writers: Vec<_> = (0..WRITERS)
        .map(|t| {
            let (list, start) = (Arc::clone(&list), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                for i in 0..PER_WRITER {
                    let seq = i * WRITERS + t + 1;
                    let key: &[u8] = if seq & 3 == 0 { b"hot" } else { b"ho" };
                    list.insert(key, seq, ValueKind::Put, &value_for(key, seq));
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let got = collect_forward(&mut *Arc::clone(&list).iter());
    assert_eq!(got.len() as u64, WRITERS * PER_WRITER);
    let split = got.iter().position(|e| e.0 == b"hot").unwrap();
    assert!(got[..split].iter().all(|e| e.0 == b"ho"));
    assert!(got[split..].iter().all(|e| e.0 == b"hot"));
    for part in [&got[..split], &got[split..]] {
        assert!(
            part.windows(2).all(|w| w[0].1 > w[1].1),
            "seqs not descending"
        );
    }
    let total = WRITERS * PER_WRITER;
    let hot = (1..=total).filter(|s| s & 3 == 0).count();
    assert_eq!(got.len() - split, hot);
    assert_eq!(list.get(b"hot", total).unwrap().seq, total & !3);
}

/// A quick single-thread cost figure, not a benchmark suite:
/// `cargo test --release -p weft --lib skiplist::tests::timing -- --ignored --nocapture`.
#[test]
#[ignore = "timing, run by hand in release"]
fn timing_single_thread() {
    use std::time::Instant;
    const N: u64 = 1_000_000;
    let mut rng = StdRng::seed_from_u64(42);
    let mut keys: Vec<[u8; 16]> = (0..N)
        .map(|i| {
            let mut k = [0u8; 16];
            k[..8].copy_from_slice(&rng.gen::<u64>().to_be_bytes());
            k[8..].copy_from_slice(&i.to_be_bytes());
            k
        })
        .collect();
    let value = [0x5a; 100];
    let list = SkipListMemtable::new();
    let t = Instant::now();
    for (i, k) in keys.iter().enumerate() {
        list.insert(k, i as u64 + 1, ValueKind::Put, &value);
    }
    let insert_ns = t.elapsed().as_nanos() as f64 / N as f64;
    keys.shuffle(&mut rng);
    let t = Instant::now();
    let mut found = 0;
    for k in &keys {
        found += usize::from(list.get(k, u64::MAX).is_some());
    }
    let get_ns = t.elapsed().as_nanos() as f64 / N as f64;
    assert_eq!(found, N as usize);
    let list = Arc::new(list);
    let t = Instant::now();
    let mut it = Arc::clone(&list).iter();
    it.seek_to_first().unwrap();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next().unwrap();
    }
    let scan_ns = t.elapsed().as_nanos() as f64 / n as f64;
    eprintln!(
        "{N} x (16 B key, 100 B value): insert {insert_ns:.0} ns/op, get {get_ns:.0} ns/op, \
         scan {scan_ns:.1} ns/entry, memory {} MiB ({:.1} B/entry)",
        list.approximate_memory() >> 20,
        list.approximate_memory() as f64 / N as f64
    );
}
