//! Tests of the `cuckoo` kind and of the concurrent hash it shares with
//! `teks`: model check, displacement under contention on a tiny table,
//! racing claims of the same new key, growth, snapshot stress.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Barrier};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::memtable::test_support::{self, collect_forward};

fn make() -> Arc<CuckooMemtable> {
    Arc::new(CuckooMemtable::new(64 << 20))
}

#[test]
fn matches_btreemap_model() {
    test_support::check_against_model(&make);
}

#[test]
fn concurrent_stress_out_of_order() {
    for writers in [2, 4, 8] {
        test_support::stress(make(), writers, 2, 60, false, 200);
    }
}

#[test]
fn concurrent_stress_growing_table() {
    test_support::stress(make(), 4, 2, 40, false, 100_000);
}

#[test]
fn concurrent_stress_with_watermark() {
    test_support::stress(make(), 4, 2, 60, true, 200);
}

/// The value a writer stores for `(key, seq)`: readers can tell whether a
/// value was ever written for that key.
fn value_of(key: u64, seq: u64) -> Vec<u8> {
    let mut v = key.to_le_bytes().to_vec();
    v.extend_from_slice(&seq.to_le_bytes());
    v
}

/// A tiny table run at 99 % load, so nearly every new key displaces
/// others, while many threads insert new keys, update old ones and read.
/// Afterwards every key has its newest value; no get ever returned a value
/// that was not written for that key; no key was ever missing once
/// acknowledged.
#[test]
fn displacement_under_contention_loses_nothing() {
    const WRITERS: u64 = 4;
    const KEYS_PER_WRITER: u64 = 20_000;
    const UPDATES: u64 = 3;
    let nodes = Arc::new(HashedNodes::with_map(KeyMap::with_load(1, (99, 100))));
    // Highest sequence acknowledged per key, published by the writers.
    let acked: Arc<Vec<AtomicU64>> = Arc::new(
        (0..WRITERS * KEYS_PER_WRITER)
            .map(|_| AtomicU64::new(0))
            .collect(),
    );
    let done = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(WRITERS as usize + 3));

    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (nodes, acked, done, start) = (
                Arc::clone(&nodes),
                Arc::clone(&acked),
                Arc::clone(&done),
                Arc::clone(&start),
            );
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(r);
                start.wait();
                let mut checked = 0u64;
                while !done.load(Ordering::Acquire) {
                    let k = rng.gen_range(0..WRITERS * KEYS_PER_WRITER);
                    // Read the acknowledgement first: the key must then be
                    // found with at least that version.
                    let ack = acked[k as usize].load(Ordering::Acquire);
                    let key = format!("key{k:08}");
                    match nodes.get(key.as_bytes(), u64::MAX) {
                        Some(f) => {
                            assert_eq!(f.value, value_of(k, f.seq), "foreign value for {key}");
                            assert!(f.seq >= ack, "{key}: saw {} after ack {ack}", f.seq);
                        }
                        None => assert_eq!(ack, 0, "{key} missing after ack {ack}"),
                    }
                    checked += 1;
                }
                checked
            })
        })
        .collect();

    let writers: Vec<_> = (0..WRITERS)
        .map(|t| {
            let (nodes, acked, start) =
                (Arc::clone(&nodes), Arc::clone(&acked), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                for round in 0..UPDATES {
                    for i in 0..KEYS_PER_WRITER {
                        // Writers share keys: each key gets versions from
                        // every writer (racing claims of new keys).
                        let k = (i * WRITERS + (t + round) % WRITERS) % (WRITERS * KEYS_PER_WRITER);
                        let seq = 1 + (round * KEYS_PER_WRITER + i) * WRITERS + t;
                        let key = format!("key{k:08}");
                        nodes.insert(|| 1, key.as_bytes(), seq, ValueKind::Put, &value_of(k, seq));
                        acked[k as usize].fetch_max(seq, Ordering::AcqRel);
                    }
                }
            })
        })
        .collect();
    start.wait();
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Release);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }

    let (displacements, growths) = nodes.map.activity();
    assert!(displacements > 100, "only {displacements} displacements");
    assert!(growths > 0);
    let mut newest: HashMap<u64, u64> = HashMap::new();
    for round in 0..UPDATES {
        for t in 0..WRITERS {
            for i in 0..KEYS_PER_WRITER {
                let k = (i * WRITERS + (t + round) % WRITERS) % (WRITERS * KEYS_PER_WRITER);
                let seq = 1 + (round * KEYS_PER_WRITER + i) * WRITERS + t;
                let e = newest.entry(k).or_default();
                *e = (*e).max(seq);
            }
        }
    }
    assert_eq!(nodes.map.len(), newest.len());
    for (&k, &seq) in &newest {
        let key = format!("key{k:08}");
        let f = nodes
            .get(key.as_bytes(), u64::MAX)
            .expect("acknowledged key lost");
        assert_eq!((f.seq, f.value), (seq, &value_of(k, seq)[..]), "{key}");
    }
    // One entry per key: the map's node list has no duplicates.
    let mut keys: Vec<Vec<u8>> = nodes.map.nodes().iter().map(|n| n.key().to_vec()).collect();
    let n = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), n, "a key has two entries");
    assert_eq!(n, newest.len());
}

/// Many writers racing to create the same new keys: exactly one node per
/// key, no version lost, iteration in internal order.
#[test]
fn racing_new_keys_keep_one_node() {
    const WRITERS: u64 = 8;
    const KEYS: u64 = 300;
    for round in 0..5u64 {
        let list = make();
        let start = Arc::new(Barrier::new(WRITERS as usize));
        let threads: Vec<_> = (0..WRITERS)
            .map(|t| {
                let (list, start) = (Arc::clone(&list), Arc::clone(&start));
                std::thread::spawn(move || {
                    start.wait();
                    for k in 0..KEYS {
                        let key = format!("key{:04}", (k * 7 + round) % KEYS);
                        let seq = 1 + k * WRITERS + t;
                        list.insert(key.as_bytes(), seq, ValueKind::Put, &seq.to_le_bytes());
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(list.key_count() as u64, KEYS);
        let all = collect_forward(&mut *Arc::clone(&list).iter());
        assert_eq!(all.len() as u64, KEYS * WRITERS);
        for w in all.windows(2) {
            assert!(
                w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 > w[1].1),
                "order"
            );
        }
    }
}

#[test]
fn reports_full_at_its_budget() {
    // 64 KiB of write buffer: a budget of 1024 slots.
    let m = CuckooMemtable::new(64 << 10);
    let full = full_keys(64 << 10);
    assert!(full > 0 && full <= 1024, "{full}");
    for i in 0..full as u64 {
        assert!(!m.is_full(), "full after {i} keys");
        m.insert(&i.to_be_bytes(), i + 1, ValueKind::Put, b"v");
    }
    assert!(m.is_full());
    // Overshoot (a write group larger than the rest of the budget) still
    // finds room.
    for i in full as u64..full as u64 * 3 {
        m.insert(&i.to_be_bytes(), i + 1, ValueKind::Put, b"v");
    }
    assert_eq!(m.key_count(), full * 3);
    for i in 0..full as u64 * 3 {
        assert_eq!(m.get(&i.to_be_bytes(), u64::MAX).unwrap().seq, i + 1);
    }
}

#[test]
fn memory_counts_the_hash() {
    let m = make();
    let before = m.approximate_memory();
    let before_slots = m.hash_slots();
    assert!(before >= before_slots * 8, "{before}");
    for i in 0..100_000u64 {
        m.insert(&i.to_be_bytes(), i + 1, ValueKind::Put, &[7; 100]);
    }
    let used = m.approximate_memory();
    // Data: 100k × (node 32 + key 8 + version 20 + value 100), plus the
    // table: sized for the whole 64 MiB buffer from the start (64-byte
    // buckets of 7 slots), so it never grew here.
    let data = 100_000 * (32 + 8 + 20 + 100);
    let table = m.hash_slots() / 7 * 64;
    assert_eq!(m.hash_slots(), before_slots, "the table grew");
    assert!(used >= data + table, "{used}");
    assert!(used <= data * 13 / 10 + table, "{used}");
}
