//! Tests of the `teks` memtable: model check (with and without the
//! worker), scans that help link a burst of new keys, the shortcut seek on
//! a key not yet linked, snapshot stress, worker lifetime, memory.

use std::sync::{Arc, Barrier};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::iter::visible::VisibleIter;
use crate::memtable::test_support::{self, collect_forward};

fn make() -> Arc<TeksMemtable> {
    Arc::new(TeksMemtable::new(64 << 20))
}

#[test]
fn matches_btreemap_model() {
    test_support::check_against_model(&make);
}

#[test]
fn matches_btreemap_model_with_worker_frozen() {
    // Every node is linked by the scans' help alone.
    test_support::check_against_model(&|| {
        let m = make();
        m.freeze_worker(true);
        m
    });
}

#[test]
fn concurrent_stress_out_of_order() {
    for writers in [2, 4, 8] {
        test_support::stress(make(), writers, 2, 60, false, 200);
    }
}

#[test]
fn concurrent_stress_many_new_keys() {
    test_support::stress(make(), 4, 2, 40, false, 100_000);
}

#[test]
fn concurrent_stress_with_watermark() {
    test_support::stress(make(), 4, 2, 60, true, 200);
}

/// An iterator opened right after a burst of new-key puts sees all of
/// them, even with the worker stopped: the scan links the queue itself.
#[test]
fn iterator_after_burst_sees_every_new_key() {
    let m = make();
    m.freeze_worker(true);
    let mut rng = StdRng::seed_from_u64(7);
    let mut keys: Vec<Vec<u8>> = (0..20_000)
        .map(|_| rng.gen::<u64>().to_be_bytes().to_vec())
        .collect();
    for (i, k) in keys.iter().enumerate() {
        m.insert(k, i as u64 + 1, ValueKind::Put, k);
    }
    assert_eq!(m.weave_stats().linked, 0, "the frozen worker linked nodes");
    let mut vi = VisibleIter::new(Arc::clone(&m).iter(), u64::MAX);
    keys.sort();
    keys.dedup();
    let mut seen = Vec::new();
    vi.seek_to_first().unwrap();
    while vi.valid() {
        seen.push(vi.key().to_vec());
        vi.next().unwrap();
    }
    assert_eq!(seen, keys);
    assert_eq!(m.weave_stats().linked, keys.len());
}

/// A worker that gets no CPU (here: frozen) leaves at most
/// `HELP_BACKLOG` nodes for a scan to link: the put that queues that many
/// links them itself, and the rest stay queued for the scan.
#[test]
fn writers_link_a_backlog_the_worker_leaves() {
    let m = make();
    m.freeze_worker(true);
    let extra = 1000;
    for i in 0..(HELP_BACKLOG + extra) as u64 {
        m.insert(&i.to_be_bytes(), i + 1, ValueKind::Put, b"v");
        assert!(
            m.shared.queue.queued() < HELP_BACKLOG,
            "backlog passed the bound at {i}"
        );
    }
    assert_eq!(m.weave_stats().linked, HELP_BACKLOG);
    assert_eq!(m.shared.queue.queued(), extra);
    let mut vi = VisibleIter::new(Arc::clone(&m).iter(), u64::MAX);
    vi.seek_to_first().unwrap();
    let mut n = 0u64;
    while vi.valid() {
        assert_eq!(vi.key(), n.to_be_bytes());
        n += 1;
        vi.next().unwrap();
    }
    assert_eq!(n as usize, HELP_BACKLOG + extra);
}

/// A backlog one drainer sorted and published is linked by every thread
/// that comes to drain: the helpers' chunks and the drainer's together
/// link each node exactly once, and the levels come out complete.
#[test]
fn helpers_link_a_published_backlog_in_parallel() {
    let m = make();
    m.freeze_worker(true);
    let shared = &m.shared;
    let total = 4 * LINK_CHUNK + 123;
    let mut rng = StdRng::seed_from_u64(3);
    for seq in 1..=total as u64 {
        let key = rng.gen::<u64>().to_be_bytes();
        let node = shared
            .nodes
            .insert(random_height, &key, seq, ValueKind::Put, b"v")
            .expect("distinct keys");
        shared.queue.push(node);
    }
    // One thread takes and sorts the batch, then stops before linking, as
    // a worker preempted after publishing it.
    let batch = shared.queue.take();
    let sorted = Arc::new(SortedBatch::new(shared.sorted(&batch)));
    *shared.pending.lock() = Some(Arc::clone(&sorted));
    let helpers = 3;
    let start = Barrier::new(helpers);
    let by_helpers: usize = std::thread::scope(|s| {
        let joins: Vec<_> = (0..helpers)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    shared.drain()
                })
            })
            .collect();
        joins.into_iter().map(|j| j.join().unwrap()).sum()
    });
    assert_eq!(by_helpers, total, "the helpers left chunks unlinked");
    assert_eq!(shared.link_chunks(&sorted), 0, "a chunk was claimed twice");
    assert!(!shared.queue.is_idle(), "the drainer still holds its batch");
    drop(batch);
    assert!(shared.queue.is_idle());
    let mut vi = VisibleIter::new(Arc::clone(&m).iter(), u64::MAX);
    vi.seek_to_first().unwrap();
    let mut seen = Vec::new();
    while vi.valid() {
        seen.push(vi.key().to_vec());
        vi.next().unwrap();
    }
    let mut want: Vec<Vec<u8>> = sorted.nodes.iter().map(|n| n.key().to_vec()).collect();
    want.sort();
    assert_eq!(seen, want);
    assert_eq!(m.weave_stats().linked, total);
}

/// A scan waiting for another thread's batch to be linked only watches:
/// it never counts itself as a drainer while it has nothing to take or
/// claim. When every waiting scan drained (taking nothing) on each turn of
/// its loop, 16 scanners kept the drainer count above zero between them
/// and none saw the queue idle (16 cores: `seekrandom` and the memtable
/// benchmark did not finish).
#[test]
fn waiting_scans_do_not_count_as_drainers() {
    let m = make();
    m.freeze_worker(true);
    let shared = &m.shared;
    let node = shared
        .nodes
        .insert(random_height, b"k", 1, ValueKind::Put, b"v")
        .expect("a new key");
    shared.queue.push(node);
    // A drainer took the node and has not linked it yet.
    let batch = shared.queue.take();
    assert_eq!(shared.queue.drainers(), 1);
    let most = std::thread::scope(|s| {
        let scans: Vec<_> = (0..3)
            .map(|_| {
                s.spawn(|| {
                    shared.link_all();
                })
            })
            .collect();
        let mut most = 0;
        let until = std::time::Instant::now() + std::time::Duration::from_millis(200);
        while std::time::Instant::now() < until {
            most = most.max(shared.queue.drainers());
        }
        // Link what the drainer took, then let it go: the scans return.
        let sorted = SortedBatch::new(shared.sorted(&batch));
        shared.link_chunks(&sorted);
        drop(batch);
        for s in scans {
            s.join().unwrap();
        }
        most
    });
    assert_eq!(most, 1, "a waiting scan counted itself as a drainer");
    assert!(shared.queue.is_idle());
}

/// The worker links new keys by itself (no scan needed).
#[test]
fn worker_links_in_the_background() {
    let m = make();
    for i in 0..5000u64 {
        m.insert(&i.to_be_bytes(), i + 1, ValueKind::Put, b"v");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while m.weave_stats().linked < 5000 {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            m.weave_stats()
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// A seek to a key that is in the hash but not yet linked (inserted after
/// the cursor was made ready) must not jump to the unlinked node: it lands
/// on the next linked key and walks on in order.
#[test]
fn shortcut_seek_ignores_unlinked_nodes() {
    let m = make();
    for k in [b"a", b"c", b"e"] {
        m.insert(k, 1 + u64::from(k[0]), ValueKind::Put, k);
    }
    let mut it = Arc::clone(&m).iter();
    m.freeze_worker(true);
    m.insert(b"b", 200, ValueKind::Put, b"b");
    m.insert(b"d", 201, ValueKind::Put, b"d");
    // "b" is found by the hash but not linked: the seek goes through the
    // skiplist, landing on "c".
    it.seek(b"b", u64::MAX).unwrap();
    assert_eq!(it.user_key(), b"c");
    it.next().unwrap();
    assert_eq!(it.user_key(), b"e");
    // A linked key is reached through the shortcut.
    it.seek(b"c", u64::MAX).unwrap();
    assert_eq!(it.user_key(), b"c");
    // Once a scan is prepared, both are linked and reachable.
    m.prepare_scan(u64::MAX);
    let all: Vec<Vec<u8>> = collect_forward(&mut *Arc::clone(&m).iter())
        .into_iter()
        .map(|e| e.0)
        .collect();
    assert_eq!(all, [b"a", b"b", b"c", b"d", b"e"].map(|k| k.to_vec()));
}

/// Seek through the shortcut at a snapshot older than every version of the
/// key lands on the next key.
#[test]
fn shortcut_seek_respects_the_snapshot() {
    let m = make();
    m.insert(b"k1", 5, ValueKind::Put, b"x");
    m.insert(b"k2", 1, ValueKind::Put, b"y");
    m.insert(b"k1", 7, ValueKind::Put, b"z");
    let mut it = Arc::clone(&m).iter();
    it.seek(b"k1", 6).unwrap();
    assert_eq!((it.user_key(), it.seq()), (&b"k1"[..], 5));
    it.seek(b"k1", 3).unwrap();
    assert_eq!((it.user_key(), it.seq()), (&b"k2"[..], 1));
}

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
        assert_eq!(list.weave_stats().keys as u64, KEYS);
        let all = collect_forward(&mut *Arc::clone(&list).iter());
        assert_eq!(all.len() as u64, KEYS * WRITERS);
        for w in all.windows(2) {
            assert!(
                w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 > w[1].1),
                "order"
            );
        }
        assert_eq!(list.weave_stats().linked as u64, KEYS);
    }
}

#[test]
fn worker_stops_on_drop() {
    let m = make();
    m.insert(b"k", 1, ValueKind::Put, b"v");
    let weak = Arc::downgrade(&m.shared);
    let it = Arc::clone(&m).iter();
    drop(m);
    // The cursor still holds the shared state; the worker has exited.
    assert_eq!(weak.strong_count(), 1);
    drop(it);
    assert_eq!(weak.strong_count(), 0);
}

#[test]
fn memory_stays_within_the_papers_overhead() {
    // TeksDB §6.3.1: +12 % to +59 % over a skiplist; issue bound 1.6×.
    let teks = TeksMemtable::new(4 << 30);
    let skip = crate::memtable::skiplist::SkipListMemtable::new();
    let mut rng = StdRng::seed_from_u64(1);
    for i in 0..200_000u64 {
        let k: [u8; 16] = rng.gen();
        teks.insert(&k, i + 1, ValueKind::Put, &[1; 256]);
        skip.insert(&k, i + 1, ValueKind::Put, &[1; 256]);
    }
    let (t, s) = (teks.approximate_memory(), skip.approximate_memory());
    assert!(t * 10 <= s * 16, "teks {t} B vs skiplist {s} B");
    assert!(t >= teks.shared.nodes.map.memory() + 200_000 * (16 + 256));
}

/// The linker's sorted batches keep the skip hints (see the jellyfish
/// test of the same name): none behind, most exact (the assertion fails when
/// the predecessor's predecessor is not updated).
#[test]
fn skip_hints_name_the_node_two_ahead() {
    let m = make();
    test_support::put_random_keys(&*m, 5_000, 5);
    let exact = crate::memtable::jellyfish::node::check_skip_hints(m.shared.levels.head.next(0));
    assert!(exact > 0.8, "only {exact:.2} of the skip hints are exact");
}
