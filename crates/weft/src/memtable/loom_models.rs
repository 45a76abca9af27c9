//! Model checks of the lock-free memtable protocols with [loom]: each test
//! runs a few threads over the engine's own code (`crate::util::sync` swaps in
//! loom's atomics and mutex) and loom runs it once per interleaving it can
//! tell apart, within a preemption bound, including the stale values its
//! memory model lets a Relaxed or Acquire load return.
//!
//! What each model checks (the protocols are documented where they live):
//!
//! * version lists (`jellyfish::node`): racing inserts arriving out of
//!   sequence order all land, in order; truncation under a watermark never
//!   unlinks a version a snapshot above it can see, even while new versions
//!   are linked; a reader never sees a version newer than its snapshot and
//!   never loses one it saw;
//! * the `jellyfish` insert: two writers of one new key publish one node
//!   with both versions; with a third key, all towers of two racing for
//!   the head's level-1 link, both levels end complete and in order;
//! * `SkipLevels::link_sorted` (the `teks` linker): two linkers of
//!   interleaved batches leave every level sorted and complete;
//! * the `teks` link queue: once a writer's insert returns, a scan's
//!   `link_all` finds the key linked, even while the worker holds it in a
//!   taken batch; a batch one drainer sorted and published, linked chunk
//!   by chunk by it and a helping scan, is wholly linked when the scan's
//!   `link_all` returns;
//! * the cuckoo `KeyMap`: two claims of one new key commit one entry; a
//!   lookup never misses a key a displacement is moving; claims racing a
//!   growth lose nothing. (Two claims of one key in different slots,
//!   neither having read the other's, need a withdrawn claim of a third
//!   key between them — four threads: a claim that must displace re-probes
//!   before it claims again, so it sees the rival — and are not reached;
//!   the SeqCst store-then-load mark in `other_entry` is unchecked here.)
//!
//! Run with `scripts/test-loom` (`RUSTFLAGS="--cfg loom"`, a separate target
//! directory, release mode; `scripts/test` runs it too). The preemption
//! bound is 4 unless `LOOM_MAX_PREEMPTIONS` says otherwise: all nine
//! models take about 35 s at 4 on the 2-core VM. Each model was checked to
//! fail against a broken protocol: a version dropped on a lost CAS,
//! truncation one version too deep, the racing writer's version abandoned
//! with its node, an insert that gives up on a failed upper-level CAS, a
//! linker that ignores a failed CAS, a drainer that does not count itself,
//! a drainer that links one chunk of its sorted batch and drops the rest,
//! a helper that stops counting before it links its chunk, a claim that
//! commits without looking for another entry, a displacement that clears
//! the source before filling the destination outside the seqlock, a grower
//! that does not wait for claims in flight.
//!
//! Loom treats SeqCst loads and stores as AcqRel; the protocols that rely
//! on SeqCst's total order (claims against claims and against a growth)
//! mark the spot with `crate::util::sync::seqcst_store_load`, a SeqCst fence
//! under loom only. Without it the growth model reports a lost key that C11
//! rules out.
//!
//! Not modelled: the ESL index levels (their updater runs on a std thread
//! with std atomics; `esl::tests` freezes it to test lagging indexes) and
//! the arena's chunk allocation (std atomics, disjoint ranges by CAS).
//!
//! [loom]: https://docs.rs/loom

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use loom::thread;

use super::arena::Arena;
use super::cuckoo::map::{KeyHash, KeyMap};
use super::jellyfish::levels::SkipLevels;
use super::jellyfish::node::{
    alloc_node, alloc_version, check_skip_hints, insert_version, truncate_below, Node,
};
use super::jellyfish::JellyFishMemtable;
use super::teks::Shared;
use super::Memtable;
use crate::key::{SequenceNumber, ValueKind};

/// Runs `f` under loom with a preemption bound of 4 unless the
/// environment sets one, and reports how many executions it explored.
fn check(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(4);
    }
    // A displacement search loads up to hundreds of slots.
    builder.max_branches = builder.max_branches.max(1 << 20);
    let executions = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&executions);
    builder.check(move || {
        counted.fetch_add(1, Ordering::Relaxed);
        f();
    });
    let executions = executions.load(Ordering::Relaxed);
    assert!(executions > 1, "loom explored a single execution");
    eprintln!("loom: {executions} executions");
}

/// Sequences of a node's linked versions, head first.
fn sequences(node: Node) -> Vec<SequenceNumber> {
    let mut out = Vec::new();
    let mut v = node.first_version();
    while let Some(x) = v {
        out.push(x.seq());
        v = x.next();
    }
    out
}

/// The keys linked at `level`, in list order.
fn level_keys(levels: &SkipLevels, level: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut x = levels.head.next(level);
    while let Some(n) = x {
        out.push(n.key().to_vec());
        x = n.next(level);
    }
    out
}

fn value_of(seq: SequenceNumber) -> Vec<u8> {
    format!("v{seq}").into_bytes()
}

/// A node for `key` with one version (`seq`), in `arena`.
fn node_with(arena: &Arena, height: usize, key: &[u8], seq: SequenceNumber) -> Node {
    let value = value_of(seq);
    alloc_node(arena, height, key, Some((seq, ValueKind::Put, &value))).0
}

#[test]
fn out_of_order_version_inserts_all_land_in_order() {
    check(|| {
        let arena = Arc::new(Arena::new());
        let node = node_with(&arena, 1, b"k", 10);
        let writers: Vec<_> = [30, 20]
            .into_iter()
            .map(|seq| {
                let arena = Arc::clone(&arena);
                thread::spawn(move || {
                    let v = alloc_version(&arena, seq, ValueKind::Put, &value_of(seq));
                    insert_version(node.versions(), v);
                })
            })
            .collect();
        // A reader at snapshot 25 sees 20 once it is linked, never 30, and
        // never goes back to 10 after seeing 20.
        let first = node.version_at(25).map(|v| v.seq());
        let second = node.version_at(25).map(|v| v.seq());
        assert!(matches!(first, Some(10 | 20)), "snapshot 25 saw {first:?}");
        assert!(
            second == first || (first == Some(10) && second == Some(20)),
            "snapshot 25 saw {first:?} then {second:?}"
        );
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(sequences(node), [30, 20, 10]);
        assert_eq!(node.version_at(25).unwrap().value(), b"v20");
    });
}

#[test]
fn truncation_keeps_every_version_a_snapshot_above_the_watermark_needs() {
    check(|| {
        let arena = Arc::new(Arena::new());
        let node = node_with(&arena, 1, b"k", 5);
        insert_version(
            node.versions(),
            alloc_version(&arena, 10, ValueKind::Put, b"v10"),
        );
        // Watermark 10: no version <= 10 arrives any more (the engine's
        // promise); 20 and 15 race the cut of 5.
        let cutter = thread::spawn(move || {
            truncate_below(node.versions(), 10);
        });
        let writer = {
            let arena = Arc::clone(&arena);
            thread::spawn(move || {
                insert_version(
                    node.versions(),
                    alloc_version(&arena, 20, ValueKind::Put, b"v20"),
                );
            })
        };
        insert_version(
            node.versions(),
            alloc_version(&arena, 15, ValueKind::Put, b"v15"),
        );
        assert_eq!(node.version_at(12).map(|v| v.seq()), Some(10));
        cutter.join().unwrap();
        writer.join().unwrap();
        assert_eq!(sequences(node), [20, 15, 10]);
    });
}

#[test]
fn jellyfish_writers_of_one_new_key_publish_one_node_with_both_versions() {
    check(|| {
        let m = Arc::new(JellyFishMemtable::new());
        m.insert_at_height(b"b", 1, ValueKind::Put, b"v1", || 1);
        // `a` and both nodes of `c` are towers of two: they also race for
        // the head's level-1 link.
        let writers: Vec<_> = [(2, 2), (3, 2)]
            .into_iter()
            .map(|(seq, height)| {
                let m = Arc::clone(&m);
                thread::spawn(move || {
                    m.insert_at_height(b"c", seq, ValueKind::Put, &value_of(seq), || height);
                })
            })
            .collect();
        m.insert_at_height(b"a", 4, ValueKind::Put, b"v4", || 2);
        if let Some(found) = m.get(b"c", 3) {
            assert!(found.seq == 2 || found.seq == 3, "get(c) saw {}", found.seq);
            assert_eq!(found.value, value_of(found.seq));
        }
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(
            level_keys(&m.levels, 0),
            [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]
        );
        assert_eq!(
            level_keys(&m.levels, 1),
            [b"a".to_vec(), b"c".to_vec()],
            "level 1 holds the towers of height 2, one node per key"
        );
        let c = m.levels.find(b"c").unwrap();
        assert_eq!(sequences(c), [3, 2]);
        assert_eq!(m.get(b"c", 2).unwrap().value, b"v2");
        assert_eq!(m.key_count(), 3);
    });
}

#[test]
fn link_sorted_batches_racing_leave_every_level_sorted_and_complete() {
    check(|| {
        let arena = Arc::new(Arena::new());
        let levels = Arc::new(SkipLevels::new(&arena));
        let make = |key: &[u8], height: usize| node_with(&arena, height, key, 1);
        let even = vec![make(b"a", 2), make(b"c", 1)];
        let odd = vec![make(b"b", 1), make(b"d", 2)];
        let linker = {
            let levels = Arc::clone(&levels);
            thread::spawn(move || levels.link_sorted(&odd, |_| {}))
        };
        levels.link_sorted(&even, |_| {});
        // Our own batch is reachable once our call returns.
        assert!(levels.find(b"a").is_some() && levels.find(b"c").is_some());
        linker.join().unwrap();
        let all: Vec<Vec<u8>> = [b"a", b"b", b"c", b"d"].map(|k| k.to_vec()).to_vec();
        assert_eq!(level_keys(&levels, 0), all);
        // Racing batches may leave a skip hint further on than two ahead,
        // never nearer (the check panics on the successor or a node behind).
        check_skip_hints(levels.head.next(0));
        assert_eq!(
            level_keys(&levels, 1),
            [b"a".to_vec(), b"d".to_vec()],
            "level 1 holds the towers of height 2"
        );
        drop(arena);
    });
}

#[test]
fn teks_scan_finds_a_key_the_worker_is_still_linking() {
    check(|| {
        let shared = Arc::new(Shared::new(8));
        let worker = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
                shared.drain();
            })
        };
        // A writer's insert of a new key, as `TeksMemtable::insert` does it.
        let node = shared
            .nodes
            .insert(|| 2, b"k", 1, ValueKind::Put, b"v1")
            .expect("a new key");
        shared.queue.push(node);
        // A scan at any snapshot after the insert returned.
        shared.link_all();
        assert_eq!(shared.levels.find(b"k"), Some(node));
        assert_eq!(level_keys(&shared.levels, 1), [b"k".to_vec()]);
        worker.join().unwrap();
    });
}

#[test]
fn teks_scan_helps_link_a_batch_the_worker_has_published() {
    check(|| {
        let shared = Arc::new(Shared::new(8));
        // Two new keys queued: under loom a chunk is one node, so whoever
        // takes them publishes the sorted batch for the other to help.
        let nodes: Vec<Node> = [b"b", b"a"]
            .into_iter()
            .zip(1..)
            .map(|(key, seq)| {
                let node = shared
                    .nodes
                    .insert(|| 1, key, seq, ValueKind::Put, b"v")
                    .expect("a new key");
                shared.queue.push(node);
                node
            })
            .collect();
        let worker = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
                shared.drain();
            })
        };
        shared.link_all();
        assert_eq!(shared.levels.find(b"a"), Some(nodes[1]));
        assert_eq!(shared.levels.find(b"b"), Some(nodes[0]));
        worker.join().unwrap();
    });
}

/// The first `count` keys (8-byte big-endian counters) whose two candidate
/// buckets in `map` satisfy `want`.
fn keys_where<'a>(
    map: &'a KeyMap,
    count: usize,
    want: impl Fn([usize; 2]) -> bool + 'a,
) -> impl Iterator<Item = Vec<u8>> + 'a {
    (0u64..)
        .map(|i| i.to_be_bytes().to_vec())
        .filter(move |k| want(map.candidate_buckets(KeyHash::of(k))))
        .take(count)
}

/// Claims `key` in `map` with a fresh node; returns the node that holds it.
fn claim(map: &KeyMap, arena: &Arena, key: &[u8]) -> Result<Node, Node> {
    map.get_or_insert(KeyHash::of(key), key, &mut || node_with(arena, 1, key, 1))
}

#[test]
fn cuckoo_claims_of_one_new_key_commit_one_entry() {
    check(|| {
        let arena = Arc::new(Arena::new());
        let map = Arc::new(KeyMap::with_capacity(20));
        let other = {
            let (arena, map) = (Arc::clone(&arena), Arc::clone(&map));
            thread::spawn(move || claim(&map, &arena, b"k"))
        };
        let mine = claim(&map, &arena, b"k");
        let theirs = other.join().unwrap();
        let (a, b) = match (mine, theirs) {
            (Ok(a), Err(b)) | (Err(b), Ok(a)) => (a, b),
            other => panic!("exactly one claim must win: {other:?}"),
        };
        assert_eq!(a, b, "the loser must get the winner's node");
        assert_eq!(map.find(KeyHash::of(b"k"), b"k"), Some(a));
        assert_eq!(map.len(), 1);
    });
}

/// A map of four buckets whose buckets 0 and 1 are full of keys that may
/// also live in 2 or 3 (so a displacement can free a slot there), and the
/// keys it holds.
fn map_with_full_buckets(arena: &Arena) -> (KeyMap, Vec<Vec<u8>>) {
    // No growth before the table is full.
    let map = KeyMap::with_load(20, (1, 1));
    assert_eq!(map.slots(), 4 * super::cuckoo::map::SLOTS);
    let mut resident = Vec::new();
    for key in keys_where(&map, usize::MAX, |[a, b]| a < 2 && b >= 2) {
        if map.occupancy()[..2]
            .iter()
            .all(|&n| n == super::cuckoo::map::SLOTS)
        {
            break;
        }
        claim(&map, arena, &key).expect("a new key");
        resident.push(key);
    }
    (map, resident)
}

#[test]
fn cuckoo_lookup_never_misses_a_key_being_displaced() {
    check(|| {
        let arena = Arc::new(Arena::new());
        let (map, resident) = map_with_full_buckets(&arena);
        let map = Arc::new(map);
        let newcomer = keys_where(&map, 1, |[a, b]| a < 2 && b < 2).next().unwrap();
        // The displacement's breadth-first search starts at slot 0 of the
        // newcomer's first bucket, whose other bucket has room: that entry
        // moves. A lookup of it runs meanwhile (twice, so one of them can
        // fall inside the move's seqlock section).
        let first_bucket = map.candidate_buckets(KeyHash::of(&newcomer))[0];
        let moving = map.entry_at(first_bucket, 0).unwrap().key().to_vec();
        let reader = {
            let (map, moving) = (Arc::clone(&map), moving.clone());
            thread::spawn(move || {
                for _ in 0..2 {
                    assert!(
                        map.find(KeyHash::of(&moving), &moving).is_some(),
                        "lookup missed {moving:?} during its displacement"
                    );
                }
            })
        };
        claim(&map, &arena, &newcomer).expect("a new key");
        reader.join().unwrap();
        assert_eq!(map.activity().0, 1, "the newcomer needed a displacement");
        assert_ne!(
            map.entry_at(first_bucket, 0).map(|n| n.key().to_vec()),
            Some(moving),
            "the entry moved"
        );
        for key in resident.iter().chain([&newcomer]) {
            assert!(map.find(KeyHash::of(key), key).is_some());
        }
    });
}

#[test]
fn cuckoo_claims_racing_a_growth_lose_nothing() {
    check(|| {
        let arena = Arc::new(Arena::new());
        // Two buckets (14 slots) that grow once 13 entries are committed.
        let map = Arc::new(KeyMap::with_load(1, (13, 14)));
        let slots = map.slots();
        assert_eq!(slots, 14);
        let keys: Vec<Vec<u8>> = (0..15u64).map(|i| i.to_be_bytes().to_vec()).collect();
        for key in &keys[..12] {
            claim(&map, &arena, key).expect("a new key");
        }
        // The racer's claim may be in flight when our second one starts
        // the growth (the grower must wait for it), or may find the table
        // frozen (and must retry in the new one).
        let racer = {
            let (arena, map) = (Arc::clone(&arena), Arc::clone(&map));
            let key = keys[14].clone();
            thread::spawn(move || claim(&map, &arena, &key).expect("a new key"))
        };
        claim(&map, &arena, &keys[12]).expect("a new key");
        claim(&map, &arena, &keys[13]).expect("a new key");
        assert!(map.find(KeyHash::of(&keys[0]), &keys[0]).is_some());
        racer.join().unwrap();
        assert_eq!(map.activity().1, 1, "one growth");
        assert_eq!(map.len(), 15);
        for key in &keys {
            assert!(map.find(KeyHash::of(key), key).is_some(), "{key:?} lost");
        }
    });
}
