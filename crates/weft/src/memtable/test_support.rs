//! Tests shared by the key-node memtable kinds (`jellyfish`, `esl`): a
//! model check against `BTreeMap`, and a concurrent stress test with
//! snapshot assertions and forced out-of-order sequence arrival.

use std::cmp::{Ordering as CmpOrdering, Reverse};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::Memtable;
use crate::iter::visible::VisibleIter;
use crate::iter::InternalIterator;
use crate::key::{compare_positions, ValueKind, MAX_SEQUENCE};

pub(crate) type Model = BTreeMap<(Vec<u8>, Reverse<u64>), (ValueKind, Vec<u8>)>;
pub(crate) type Entry = (Vec<u8>, u64, ValueKind, Vec<u8>);

/// Keys over a tiny alphabet (including 0x00 and 0xff), lengths 0..=3: the
/// empty key and many keys that are prefixes of others.
pub(crate) fn random_key(rng: &mut StdRng) -> Vec<u8> {
    const ALPHABET: [u8; 4] = [0x00, 0x01, b'a', 0xff];
    let len = rng.gen_range(0..=3);
    (0..len).map(|_| ALPHABET[rng.gen_range(0..4)]).collect()
}

/// Puts `count` random 8-byte keys (seeded), one version each, and readies
/// the memtable for a scan (`teks` links its queue): the setup of the skip
/// hint tests.
pub(crate) fn put_random_keys(m: &dyn Memtable, count: u64, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    for seq in 1..=count {
        let key: [u8; 8] = rng.gen();
        m.insert(&key, seq, ValueKind::Put, b"v");
    }
    m.prepare_scan(MAX_SEQUENCE);
}

pub(crate) fn entry_at(it: &dyn InternalIterator) -> Option<Entry> {
    it.valid().then(|| {
        (
            it.user_key().to_vec(),
            it.seq(),
            it.kind(),
            it.value().to_vec(),
        )
    })
}

pub(crate) fn collect_forward(it: &mut dyn InternalIterator) -> Vec<Entry> {
    let mut out = Vec::new();
    it.seek_to_first().unwrap();
    while let Some(e) = entry_at(it) {
        out.push(e);
        it.next().unwrap();
    }
    out
}

pub(crate) fn collect_backward(it: &mut dyn InternalIterator) -> Vec<Entry> {
    let mut out = Vec::new();
    it.seek_to_last().unwrap();
    while let Some(e) = entry_at(it) {
        out.push(e);
        it.prev().unwrap();
    }
    out
}

/// `n` versions over random keys, unique seqs `1..=n` in random order, a
/// quarter of them deletes.
pub(crate) fn random_versions(rng: &mut StdRng, n: usize) -> Vec<Entry> {
    let mut versions: Vec<Entry> = (1..=n as u64)
        .map(|seq| {
            let key = random_key(rng);
            if rng.gen_ratio(1, 4) {
                (key, seq, ValueKind::Delete, Vec::new())
            } else {
                let vlen = rng.gen_range(0..20);
                (
                    key,
                    seq,
                    ValueKind::Put,
                    (0..vlen).map(|_| rng.gen()).collect(),
                )
            }
        })
        .collect();
    versions.shuffle(rng);
    versions
}

pub(crate) fn model_entries(model: &Model) -> Vec<Entry> {
    model
        .iter()
        .map(|((k, Reverse(s)), (kind, v))| (k.clone(), *s, *kind, v.clone()))
        .collect()
}

/// The model's view at `snap`: newest version `<= snap` per key.
pub(crate) fn model_view(model: &Model, snap: u64) -> Vec<(Vec<u8>, u64, ValueKind)> {
    let mut out: Vec<(Vec<u8>, u64, ValueKind)> = Vec::new();
    for ((k, Reverse(s)), (kind, _)) in model {
        if *s <= snap && !matches!(out.last(), Some(l) if l.0 == *k) {
            out.push((k.clone(), *s, *kind));
        }
    }
    out
}

/// Full model check of a memtable built by `make` (see skiplist's tests):
/// every version in both directions, random seek + next/prev walks, gets
/// and snapshot-filtered scans (both directions) at random snapshots.
pub(crate) fn check_against_model<M: Memtable>(make: &dyn Fn() -> Arc<M>) {
    for (seed, n) in [(1u64, 0usize), (2, 1), (3, 7), (4, 200), (5, 3000)] {
        let mut rng = StdRng::seed_from_u64(seed);
        let list = make();
        let mut model = Model::new();
        for (k, seq, kind, v) in random_versions(&mut rng, n) {
            list.insert(&k, seq, kind, &v);
            model.insert((k, Reverse(seq)), (kind, v));
        }
        let expected = model_entries(&model);
        assert_eq!(list.len(), n);
        assert_eq!(list.is_empty(), n == 0);

        let mut it = Arc::clone(&list).iter();
        assert!(!it.valid());
        assert_eq!(collect_forward(&mut *it), expected, "forward, seed {seed}");
        let mut rev = expected.clone();
        rev.reverse();
        assert_eq!(collect_backward(&mut *it), rev, "backward, seed {seed}");

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
                match rng.gen_range(0..3) {
                    0 => {
                        it.next().unwrap();
                        pos += 1;
                    }
                    1 => {
                        it.prev().unwrap();
                        pos = pos.checked_sub(1).unwrap_or(usize::MAX);
                    }
                    _ => {
                        let k = it.user_key().to_vec();
                        it.next_key(&k).unwrap();
                        while expected.get(pos).is_some_and(|e| e.0 == k) {
                            pos += 1;
                        }
                    }
                }
                assert_eq!(entry_at(&*it), expected.get(pos).cloned());
            }
        }

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

        for _ in 0..20 {
            let snap = rng.gen_range(0..=n as u64 + 1);
            let want = model_view(&model, snap);
            let mut vi = VisibleIter::new(Arc::clone(&list).iter(), snap);
            assert_eq!(visible_forward(&mut vi), want, "visible fwd @{snap}");
            assert_eq!(visible_backward(&mut vi), want, "visible bwd @{snap}");
        }
    }
}

pub(crate) fn visible_forward(vi: &mut VisibleIter) -> Vec<(Vec<u8>, u64, ValueKind)> {
    let mut out = Vec::new();
    vi.seek_to_first().unwrap();
    while vi.valid() {
        out.push((vi.key().to_vec(), vi.seq(), vi.kind()));
        vi.next().unwrap();
    }
    out
}

pub(crate) fn visible_backward(vi: &mut VisibleIter) -> Vec<(Vec<u8>, u64, ValueKind)> {
    let mut out = Vec::new();
    vi.seek_to_last().unwrap();
    while vi.valid() {
        out.push((vi.key().to_vec(), vi.seq(), vi.kind()));
        vi.prev().unwrap();
    }
    out.reverse();
    out
}

/// The deterministic content of sequence `seq` in the stress test: its key
/// (few keys, so many versions each; some keys prefixes of others), kind
/// and value.
pub(crate) fn stress_version(seq: u64, keys: u64) -> (Vec<u8>, ValueKind, Vec<u8>) {
    let h = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17);
    let k = h % keys;
    let key = match k % 5 {
        0 => format!("k{:05}", k / 5).into_bytes(),
        r => format!("k{:05}-{r}", k / 5).into_bytes(),
    };
    let kind = if h >> 60 == 0 {
        ValueKind::Delete
    } else {
        ValueKind::Put
    };
    let value = if kind == ValueKind::Put {
        let mut v = key.clone();
        v.extend_from_slice(&seq.to_le_bytes());
        v
    } else {
        Vec::new()
    };
    (key, kind, value)
}

/// Concurrent stress: `writers` threads insert batches of sequences in a
/// shuffled (so out-of-order) way, publishing a batch's last sequence once
/// the whole batch is in (as the write path does); `readers` threads check that a
/// scan or get at any published snapshot `s` sees exactly the versions
/// `<= s`. With `watermark`, a thread raises the read watermark to the
/// oldest snapshot in use, and the memtable may unlink older versions.
/// `KEYS` distinct keys are used (few: many versions per key; many: an
/// index that grows while readers search it).
#[allow(non_snake_case)]
pub(crate) fn stress<M: Memtable>(
    list: Arc<M>,
    writers: usize,
    readers: usize,
    batches: u64,
    watermark: bool,
    KEYS: u64,
) {
    const BATCH: u64 = 64;
    let visible = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    // Snapshots in use, guarded so the watermark never passes one.
    let in_use = Arc::new(Mutex::new(vec![u64::MAX; readers]));
    let barrier = Arc::new(Barrier::new(writers));

    let mut reader_threads = Vec::new();
    for r in 0..readers {
        let (list, visible, done, in_use) = (
            Arc::clone(&list),
            Arc::clone(&visible),
            Arc::clone(&done),
            Arc::clone(&in_use),
        );
        reader_threads.push(std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(1000 + r as u64);
            let mut checks = 0u64;
            while !done.load(Ordering::Acquire) || checks == 0 {
                let snap = {
                    let mut g = in_use.lock().unwrap();
                    let s = visible.load(Ordering::Acquire);
                    g[r] = s;
                    s
                };
                // Expected view at `snap`.
                let mut view: BTreeMap<Vec<u8>, (u64, ValueKind)> = BTreeMap::new();
                for seq in 1..=snap {
                    let (k, kind, _) = stress_version(seq, KEYS);
                    view.insert(k, (seq, kind));
                }
                let want: Vec<(Vec<u8>, u64, ValueKind)> = view
                    .iter()
                    .map(|(k, (s, kd))| (k.clone(), *s, *kd))
                    .collect();
                match rng.gen_range(0..4) {
                    0 => {
                        let mut vi = VisibleIter::new(Arc::clone(&list).iter(), snap);
                        assert_eq!(visible_forward(&mut vi), want, "scan @{snap}");
                    }
                    1 => {
                        let mut vi = VisibleIter::new(Arc::clone(&list).iter(), snap);
                        assert_eq!(visible_backward(&mut vi), want, "rscan @{snap}");
                    }
                    2 => {
                        // Seek + 10 next keys from a random start.
                        let start = stress_version(rng.gen_range(1..1000), KEYS).0;
                        let mut vi = VisibleIter::new(Arc::clone(&list).iter(), snap);
                        vi.seek(&start).unwrap();
                        let from = want.partition_point(|w| w.0 < start);
                        for w in want.iter().skip(from).take(10) {
                            assert!(vi.valid(), "seek {start:?} @{snap} ended early");
                            assert_eq!((vi.key(), vi.seq(), vi.kind()), (&w.0[..], w.1, w.2));
                            if w.2 == ValueKind::Put {
                                assert_eq!(vi.value(), stress_version(w.1, KEYS).2);
                            }
                            vi.next().unwrap();
                        }
                    }
                    _ => {
                        for _ in 0..50 {
                            let k = stress_version(rng.gen_range(1..10_000), KEYS).0;
                            let got = list
                                .get(&k, snap)
                                .map(|f| (f.seq, f.kind, f.value.to_vec()));
                            let exp = view
                                .get(&k)
                                .map(|&(s, kd)| (s, kd, stress_version(s, KEYS).2));
                            assert_eq!(got, exp, "get {k:?} @{snap}");
                        }
                    }
                }
                in_use.lock().unwrap()[r] = u64::MAX;
                checks += 1;
            }
            checks
        }));
    }

    let wm_thread = watermark.then(|| {
        let (list, visible, done, in_use) = (
            Arc::clone(&list),
            Arc::clone(&visible),
            Arc::clone(&done),
            Arc::clone(&in_use),
        );
        std::thread::spawn(move || {
            while !done.load(Ordering::Acquire) {
                {
                    let g = in_use.lock().unwrap();
                    let w = g
                        .iter()
                        .copied()
                        .min()
                        .unwrap_or(u64::MAX)
                        .min(visible.load(Ordering::Acquire));
                    list.set_read_watermark(w);
                }
                std::thread::yield_now();
            }
        })
    });

    let inserted = Arc::new(AtomicU64::new(0));
    let writer_threads: Vec<_> = (0..writers)
        .map(|t| {
            let (list, visible, barrier, inserted) = (
                Arc::clone(&list),
                Arc::clone(&visible),
                Arc::clone(&barrier),
                Arc::clone(&inserted),
            );
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(t as u64);
                for b in 0..batches {
                    // Every writer takes a share of batch `b`, reversed or
                    // shuffled, so sequences arrive out of order.
                    let base = b * BATCH;
                    let mut mine: Vec<u64> = (1..=BATCH)
                        .filter(|i| (*i as usize) % writers == t)
                        .map(|i| base + i)
                        .collect();
                    if rng.gen_bool(0.5) {
                        mine.reverse();
                    } else {
                        mine.shuffle(&mut rng);
                    }
                    for seq in mine {
                        let (k, kind, v) = stress_version(seq, KEYS);
                        list.insert(&k, seq, kind, &v);
                        inserted.fetch_add(1, Ordering::AcqRel);
                    }
                    if barrier.wait().is_leader() {
                        assert_eq!(inserted.load(Ordering::Acquire), base + BATCH);
                        visible.store(base + BATCH, Ordering::Release);
                    }
                    barrier.wait();
                }
            })
        })
        .collect();
    for w in writer_threads {
        w.join().unwrap();
    }
    done.store(true, Ordering::Release);
    let mut total = 0;
    for r in reader_threads {
        total += r.join().unwrap();
    }
    if let Some(w) = wm_thread {
        w.join().unwrap();
    }
    assert!(total >= readers as u64);
    assert_eq!(list.len() as u64, batches * BATCH);

    // Final: the view at the end is exact, and without a watermark every
    // version is present.
    let snap = batches * BATCH;
    let mut model = Model::new();
    for seq in 1..=snap {
        let (k, kind, v) = stress_version(seq, KEYS);
        model.insert((k, Reverse(seq)), (kind, v));
    }
    let mut vi = VisibleIter::new(Arc::clone(&list).iter(), MAX_SEQUENCE);
    assert_eq!(visible_forward(&mut vi), model_view(&model, snap));
    if !watermark {
        let got = collect_forward(&mut *Arc::clone(&list).iter());
        assert!(got == model_entries(&model), "final contents differ");
    }
}
