//! Tests of the jellyfish memtable: model check, one node per key, the
//! read watermark (selective in-place update), O(1) `next_key`, concurrent
//! stress with snapshot assertions and out-of-order arrival.

use std::sync::{Arc, Barrier};

use super::*;
use crate::key::MAX_SEQUENCE;
use crate::memtable::arena;
use crate::memtable::test_support::{self, collect_forward};

fn make() -> Arc<JellyFishMemtable> {
    Arc::new(JellyFishMemtable::new())
}

#[test]
fn matches_btreemap_model() {
    test_support::check_against_model(&make);
}

#[test]
fn one_node_per_key_versions_newest_first() {
    let list = JellyFishMemtable::new();
    for seq in [5u64, 1, 9, 3, 7, 2, 8] {
        list.insert(b"k", seq, ValueKind::Put, format!("v{seq}").as_bytes());
    }
    list.insert(b"", 4, ValueKind::Put, b"empty");
    list.insert(b"k\0", 6, ValueKind::Delete, b"");
    assert_eq!(list.key_count(), 3);
    assert_eq!(list.len(), 9);
    let n = list.find(b"k").unwrap();
    let mut seqs = vec![];
    let mut v = n.first_version();
    while let Some(x) = v {
        seqs.push(x.seq());
        v = x.next();
    }
    assert_eq!(seqs, [9, 8, 7, 5, 3, 2, 1]);
    assert_eq!(list.get(b"k", 6).unwrap().value, b"v5");
    assert_eq!(list.get(b"k", 0), None);
    assert_eq!(list.get(b"", 3), None);
    assert_eq!(list.get(b"", 4).unwrap().value, b"empty");
    assert_eq!(list.get(b"k\0", 6).unwrap().kind, ValueKind::Delete);
    assert_eq!(list.get(b"k\0\0", MAX_SEQUENCE), None);
}

/// Skip hints only feed a scan's prefetches, so a wrong one would not fail
/// a read, only quietly undo the overlap: none may point at or behind the
/// successor, and most must be exact after random inserts. The asserted
/// bound lies between the share exact here and the much smaller share
/// left when the predecessor's predecessor is not updated, so the test
/// catches that.
#[test]
fn skip_hints_name_the_node_two_ahead() {
    let list = JellyFishMemtable::new();
    test_support::put_random_keys(&list, 5_000, 5);
    let exact = node::check_skip_hints(list.levels.head.next(0));
    assert!(exact > 0.8, "only {exact:.2} of the skip hints are exact");
}

/// Racing inserts may leave hints naming nodes further on than two, never
/// nearer: the check panics on a hint that names the successor or a node
/// behind.
#[test]
fn skip_hints_stay_ahead_under_racing_inserts() {
    let list = make();
    let threads = 4u64;
    let barrier = Arc::new(Barrier::new(threads as usize));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let list = Arc::clone(&list);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                let mut x = 0x2545_f491_4f6c_dd1du64.wrapping_mul(t + 1);
                for i in 0..5_000u64 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // Narrow key space: neighbours race for the same gaps.
                    let key = (x % 20_000).to_be_bytes();
                    list.insert(&key, t * 10_000 + i + 1, ValueKind::Put, b"v");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    node::check_skip_hints(list.levels.head.next(0));
}

#[test]
fn next_key_skips_versions_in_one_step() {
    let list = make();
    for seq in 1..=1000u64 {
        list.insert(b"hot", seq, ValueKind::Put, b"x");
    }
    list.insert(b"hot2", 1001, ValueKind::Put, b"y");
    let mut it = Arc::clone(&list).iter();
    it.seek(b"hot", 500).unwrap();
    assert_eq!(it.seq(), 500);
    it.next_key(b"hot").unwrap();
    assert_eq!((it.user_key(), it.seq()), (&b"hot2"[..], 1001));
    it.prev().unwrap();
    assert_eq!((it.user_key(), it.seq()), (&b"hot"[..], 1));
    it.next_key(b"hot").unwrap();
    it.next_key(b"hot2").unwrap();
    assert!(!it.valid());
}

/// Versions older than the newest one `<=` the watermark are unlinked on
/// the next insert; what a reader at the watermark or later can see stays.
#[test]
fn watermark_unlinks_invisible_versions() {
    let list = make();
    for seq in 1..=10u64 {
        list.insert(b"a", seq, ValueKind::Put, format!("a{seq}").as_bytes());
        list.insert(b"b", seq + 100, ValueKind::Put, b"b");
    }
    // A cursor standing on an old version before the cut.
    let mut old = Arc::clone(&list).iter();
    old.seek(b"a", 2).unwrap();
    assert_eq!(old.seq(), 2);

    let mem = list.approximate_memory();
    list.set_read_watermark(6);
    list.set_read_watermark(3); // lower: ignored
    list.insert(b"a", 11, ValueKind::Put, b"a11");
    let seqs: Vec<u64> = collect_forward(&mut *Arc::clone(&list).iter())
        .into_iter()
        .filter(|e| e.0 == b"a")
        .map(|e| e.1)
        .collect();
    assert_eq!(seqs, [11, 10, 9, 8, 7, 6], "versions below 6 unlinked");
    // `b`'s versions are all newer than the watermark: untouched (it was
    // not inserted into since, either).
    assert_eq!(list.get(b"b", MAX_SEQUENCE).unwrap().seq, 110);
    for snap in 6..=11 {
        assert_eq!(list.get(b"a", snap).unwrap().seq, snap);
        assert_eq!(
            list.get(b"a", snap).unwrap().value,
            format!("a{snap}").as_bytes()
        );
    }
    // Memory stays in the arena; len counts inserts.
    assert!(list.approximate_memory() >= mem);
    assert_eq!(list.len(), 21);
    // The old cursor walks its cut tail to the end, then the next key.
    old.next().unwrap();
    assert_eq!((old.user_key(), old.seq()), (&b"a"[..], 1));
    old.next().unwrap();
    assert_eq!((old.user_key(), old.seq()), (&b"b"[..], 110));
    // prev from a cut version is positional: lands on the oldest kept.
    let mut it = Arc::clone(&list).iter();
    it.seek(b"b", MAX_SEQUENCE).unwrap();
    it.prev().unwrap();
    assert_eq!((it.user_key(), it.seq()), (&b"a"[..], 6));

    // A watermark between versions keeps the newest one below it.
    list.set_read_watermark(9);
    list.insert(b"b", 200, ValueKind::Put, b"b");
    list.insert(b"a", 12, ValueKind::Put, b"a12");
    assert_eq!(list.get(b"a", 9).unwrap().seq, 9);
    let n = list.find(b"a").unwrap();
    assert_eq!(n.last_version().unwrap().seq(), 9);
    // b: every version (101..=110) is > 9, so nothing is cut.
    assert_eq!(list.find(b"b").unwrap().last_version().unwrap().seq(), 101);
}

/// Without the watermark nothing is ever unlinked (the contract's default).
#[test]
fn no_watermark_keeps_everything() {
    let list = make();
    for seq in 1..=50u64 {
        list.insert(b"k", seq, ValueKind::Put, b"");
    }
    assert_eq!(collect_forward(&mut *Arc::clone(&list).iter()).len(), 50);
}

#[test]
fn memory_accounting_is_compact() {
    let list = JellyFishMemtable::new();
    let n = 100_000u64;
    for i in 0..n {
        list.insert(
            format!("{:016}", i % 10_000).as_bytes(),
            i + 1,
            ValueKind::Put,
            &[1; 16],
        );
    }
    let used = list.approximate_memory();
    // 10k nodes (16 B key + 24 B header + links) and 100k versions of
    // 20 B header + 16 B value (+4 B padding), plus one partial chunk.
    assert!(used >= n as usize * 36);
    assert!(
        used <= n as usize * 40 + 10_000 * 64 + arena::HUGE_PAGE,
        "{used}"
    );
}

#[test]
fn concurrent_stress_out_of_order() {
    for writers in [2, 4, 8] {
        test_support::stress(make(), writers, 2, 60, false, 200);
    }
}

#[test]
fn concurrent_stress_with_watermark() {
    test_support::stress(make(), 4, 2, 60, true, 200);
}

/// Many writers racing to create the same new keys: exactly one node per
/// key is published, no version is lost.
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
        for e in &all {
            assert_eq!(e.3, e.1.to_le_bytes());
        }
    }
}
