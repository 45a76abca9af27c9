//! Tests of the esl memtable: model check (with and without an index),
//! COIL search against a sorted model, index lag (frozen worker), worker
//! shutdown, concurrent stress with snapshot assertions.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::iter::visible::VisibleIter;
use crate::key::MAX_SEQUENCE;
use crate::memtable::test_support::{self, collect_forward, visible_forward};

fn make() -> Arc<EslMemtable> {
    Arc::new(EslMemtable::new())
}

const SYNC: Duration = Duration::from_secs(20);

#[test]
fn matches_btreemap_model() {
    test_support::check_against_model(&make);
}

/// The model check again, on a memtable whose index is complete: every
/// search goes through COIL levels, with the tiny-alphabet keys (empty,
/// prefixes, 0x00/0xff) exercising prefix ties and the `lcp` cut.
#[test]
fn matches_model_through_a_full_index() {
    // Index then query: build a model, sync the index, check every path.
    let mut rng = StdRng::seed_from_u64(77);
    let m = make();
    let mut model: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
    for seq in 1..=20_000u64 {
        let len = rng.gen_range(0..=6);
        let key: Vec<u8> = (0..len)
            .map(|_| [0u8, 1, b'a', b'b', 0xff][rng.gen_range(0..5)])
            .collect();
        m.insert(&key, seq, ValueKind::Put, &seq.to_le_bytes());
        model.insert(key, seq);
    }
    assert!(m.sync_index(SYNC));
    let s = m.index_stats();
    assert!(s.coil > 0 && s.coil_levels >= 2, "{s:?}");
    check_view(&m, &model, &mut rng);
}

/// Gets, seeks and a full scan of `m` against `model` (key → newest seq).
fn check_view(m: &Arc<EslMemtable>, model: &BTreeMap<Vec<u8>, u64>, rng: &mut StdRng) {
    for (k, s) in model {
        assert_eq!(m.get(k, MAX_SEQUENCE).map(|f| f.seq), Some(*s), "get {k:?}");
    }
    let mut it = Arc::clone(m).iter();
    for _ in 0..2000 {
        let len = rng.gen_range(0..=7);
        let key: Vec<u8> = (0..len)
            .map(|_| [0u8, 1, b'a', b'b', 0xff, 0x80][rng.gen_range(0..6)])
            .collect();
        let want = model.range(key.clone()..).next();
        assert_eq!(
            m.get(&key, MAX_SEQUENCE).map(|f| f.seq),
            model.get(&key).copied()
        );
        it.seek(&key, MAX_SEQUENCE).unwrap();
        assert_eq!(
            it.valid().then(|| (it.user_key().to_vec(), it.seq())),
            want.map(|(k, s)| (k.clone(), *s)),
            "seek {key:?}"
        );
        if it.valid() {
            it.prev().unwrap();
            let before = model.range(..key.clone()).next_back();
            assert_eq!(
                it.valid().then(|| it.user_key().to_vec()),
                before.map(|(k, _)| k.clone()),
                "prev of seek {key:?}"
            );
        }
    }
    let mut vi = VisibleIter::new(Arc::clone(m).iter(), MAX_SEQUENCE);
    let got: Vec<(Vec<u8>, u64)> = visible_forward(&mut vi)
        .into_iter()
        .map(|(k, s, _)| (k, s))
        .collect();
    let want: Vec<(Vec<u8>, u64)> = model.iter().map(|(k, s)| (k.clone(), *s)).collect();
    assert!(got == want, "full scan differs");
}

/// Keys sharing a long prefix (db_bench style): the COIL cuts the common
/// prefix, so it still has many distinct 8-byte prefixes.
#[test]
fn long_common_prefixes_search_correctly() {
    let m = make();
    let mut model = BTreeMap::new();
    for i in 0..30_000u64 {
        let k = format!("user{:016}", (i * 7919) % 30_000).into_bytes();
        m.insert(&k, i + 1, ValueKind::Put, b"v");
        model.insert(k, i + 1);
    }
    assert!(m.sync_index(SYNC));
    let mut rng = StdRng::seed_from_u64(3);
    for _ in 0..3000 {
        let k = format!("user{:016}", rng.gen_range(0..40_000)).into_bytes();
        assert_eq!(
            m.get(&k, MAX_SEQUENCE).map(|f| f.seq),
            model.get(&k).copied()
        );
    }
    for k in ["", "user", "user0", "usez", "t", "user0000000000029999\0"] {
        let mut it = Arc::clone(&m).iter();
        it.seek(k.as_bytes(), MAX_SEQUENCE).unwrap();
        let want = model
            .range(k.as_bytes().to_vec()..)
            .next()
            .map(|(k, _)| k.clone());
        assert_eq!(
            it.valid().then(|| it.user_key().to_vec()),
            want,
            "seek {k:?}"
        );
    }
}

/// Index lag: with the worker frozen, new keys reach only the data level
/// (and the log), yet every get, seek and scan is exact; after unfreezing,
/// the index catches up.
#[test]
fn frozen_index_stays_correct_then_catches_up() {
    let m = make();
    let mut model = BTreeMap::new();
    let mut seq = 0u64;
    let mut put = |m: &EslMemtable, model: &mut BTreeMap<Vec<u8>, u64>, k: Vec<u8>| {
        seq += 1;
        m.insert(&k, seq, ValueKind::Put, &seq.to_le_bytes());
        model.insert(k, seq);
    };
    for i in 0..8000u64 {
        put(&m, &mut model, format!("k{:08}", i * 2).into_bytes());
    }
    assert!(m.sync_index(SYNC));
    let indexed = m.index_stats();
    assert_eq!(indexed.pending, 0);
    assert!(indexed.coil > 1000, "{indexed:?}");

    m.freeze_index(true);
    // Odd keys between the indexed ones, new keys after them, and updates.
    for i in 0..8000u64 {
        put(&m, &mut model, format!("k{:08}", i * 2 + 1).into_bytes());
        put(&m, &mut model, format!("z{:08}", i).into_bytes());
        if i % 4 == 0 {
            put(&m, &mut model, format!("k{:08}", i * 2).into_bytes());
        }
    }
    std::thread::sleep(Duration::from_millis(20));
    let frozen = m.index_stats();
    assert_eq!(frozen.pdl, indexed.pdl, "frozen worker linked nothing");
    assert_eq!(frozen.coil, indexed.coil);
    assert!(frozen.pending > 2000, "{frozen:?}");
    let mut rng = StdRng::seed_from_u64(5);
    check_view(&m, &model, &mut rng);
    // Snapshot reads across the lag too.
    let snap = seq / 2;
    let mut vi = VisibleIter::new(Arc::clone(&m).iter(), snap);
    let visible = visible_forward(&mut vi);
    assert!(visible.iter().all(|(_, s, _)| *s <= snap));

    m.freeze_index(false);
    assert!(m.sync_index(SYNC));
    let caught = m.index_stats();
    assert_eq!(caught.pending, 0);
    assert_eq!(caught.pdl, indexed.pdl + frozen.pending);
    assert_eq!(caught.coil, caught.pdl);
    check_view(&m, &model, &mut rng);
}

/// Dropping the memtable stops and joins its worker, which releases the
/// shared state; a cursor keeps the shared state (not the worker) alive.
#[test]
fn worker_stops_on_drop() {
    let m = EslMemtable::new();
    for i in 0..5000u64 {
        m.insert(format!("{i:08}").as_bytes(), i + 1, ValueKind::Put, b"v");
    }
    assert!(m.sync_index(SYNC));
    assert!(m.worker.lock().is_some(), "worker started");
    let weak = Arc::downgrade(&m.shared);
    let m = Arc::new(m);
    let mut it = Arc::clone(&m).iter();
    drop(m);
    // The worker is gone; the cursor still works.
    assert_eq!(weak.strong_count(), 1);
    it.seek(b"00004999", MAX_SEQUENCE).unwrap();
    assert_eq!(it.user_key(), b"00004999");
    drop(it);
    assert!(weak.upgrade().is_none(), "shared state freed");
}

#[test]
fn tiny_memtables_never_start_a_worker() {
    let m = EslMemtable::new();
    for i in 0..100u64 {
        m.insert(format!("{i:04}").as_bytes(), i + 1, ValueKind::Put, b"v");
    }
    assert!(m.worker.lock().is_none());
    assert_eq!(m.get(b"0042", MAX_SEQUENCE).unwrap().seq, 43);
}

#[test]
fn memory_counts_index_arrays() {
    let m = make();
    for i in 0..50_000u64 {
        m.insert(
            format!("{i:016}").as_bytes(),
            i + 1,
            ValueKind::Put,
            &[0; 16],
        );
    }
    let arena = m.shared.arena.memory_usage();
    assert!(m.sync_index(SYNC));
    let coil = m.shared.coil_bytes.load(Ordering::Relaxed);
    assert!(coil > 0);
    assert_eq!(m.approximate_memory(), arena + coil);
    // Live COIL ~25 B per PDL node (1 in PDL_SAMPLE keys); retired ones
    // sum to at most 2x the live one under growth-triggered rebuilds, plus
    // one more live-sized array for the rebuild `sync_index` forces.
    let live = m.shared.coil().map_or(0, Coil::bytes);
    assert!(live <= 50_000 / PDL_SAMPLE as usize * 30, "{live}");
    assert!(
        coil <= 4 * live + 4096,
        "{coil} retired+live vs {live} live"
    );
}

#[test]
fn watermark_unlinks_invisible_versions() {
    let m = make();
    for seq in 1..=10u64 {
        m.insert(b"a", seq, ValueKind::Put, b"");
    }
    m.set_read_watermark(7);
    m.insert(b"a", 11, ValueKind::Put, b"");
    let seqs: Vec<u64> = collect_forward(&mut *Arc::clone(&m).iter())
        .into_iter()
        .map(|e| e.1)
        .collect();
    assert_eq!(seqs, [11, 10, 9, 8, 7]);
}

#[test]
fn concurrent_stress_out_of_order() {
    for writers in [2, 4, 8] {
        test_support::stress(make(), writers, 2, 60, false, 200);
    }
}

/// Mostly distinct keys: the worker starts and rebuilds the COIL while
/// readers check snapshots.
#[test]
fn concurrent_stress_growing_index() {
    test_support::stress(make(), 4, 2, 150, false, 20_000);
}

#[test]
fn concurrent_stress_with_watermark() {
    test_support::stress(make(), 4, 2, 60, true, 200);
}

/// Many keys from racing writers while readers search through a changing
/// index (the worker runs): every key ends up present exactly once, in
/// order, and indexed.
#[test]
fn concurrent_inserts_with_live_index() {
    const WRITERS: u64 = 4;
    const PER: u64 = 20_000;
    let m = make();
    let threads: Vec<_> = (0..WRITERS)
        .map(|t| {
            let m = Arc::clone(&m);
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(t);
                for i in 0..PER {
                    let k = rng.gen_range(0..PER * 2);
                    let seq = 1 + i * WRITERS + t;
                    m.insert(format!("{k:08}").as_bytes(), seq, ValueKind::Put, b"");
                    if i % 16 == 0 {
                        let probe = format!("{:08}", rng.gen_range(0..PER * 2));
                        if let Some(f) = m.get(probe.as_bytes(), MAX_SEQUENCE) {
                            assert!(f.seq <= WRITERS * PER);
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(m.sync_index(SYNC));
    let all = collect_forward(&mut *Arc::clone(&m).iter());
    assert_eq!(all.len() as u64, WRITERS * PER);
    let mut keys: Vec<&Vec<u8>> = all.iter().map(|e| &e.0).collect();
    keys.dedup();
    assert_eq!(keys.len(), m.key_count());
    assert!(keys.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(m.index_stats().pdl, m.index_stats().coil);
}

/// The data level keeps the skip hints (see the jellyfish test of the same
/// name): none behind, most exact (the assertion fails when the predecessor's
/// predecessor is not updated).
#[test]
fn skip_hints_name_the_node_two_ahead() {
    let m = make();
    test_support::put_random_keys(&*m, 5_000, 5);
    let exact = crate::memtable::jellyfish::node::check_skip_hints(m.shared.head.next(0));
    assert!(exact > 0.8, "only {exact:.2} of the skip hints are exact");
}
