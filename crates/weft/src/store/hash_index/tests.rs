use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::hash::{home_of, key_hash, tag_of};
use super::*;

fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// A pool of distinct keys: empty, short, binary of many lengths, long,
/// sequential big-endian integers and text with a common prefix.
fn key_pool(r: &mut StdRng, n: usize) -> Vec<Vec<u8>> {
    let mut set = BTreeSet::new();
    set.insert(Vec::new());
    set.insert(vec![0]);
    set.insert(vec![0, 0]);
    set.insert(vec![0xff; 3]);
    let mut i = 0u64;
    while set.len() < n {
        let k = match i % 5 {
            0 => i.to_be_bytes().to_vec(),
            1 => format!("user{:012}", r.gen::<u32>()).into_bytes(),
            2 => (0..r.gen_range(0..40)).map(|_| r.gen()).collect(),
            3 => (0..r.gen_range(100..1500)).map(|_| r.gen()).collect(),
            _ => (0..r.gen_range(1..17))
                .map(|_| r.gen_range(0..4u8))
                .collect(),
        };
        set.insert(k);
        i += 1;
    }
    let mut v: Vec<_> = set.into_iter().collect();
    v.shuffle(r);
    v
}

fn slices(keys: &[Vec<u8>]) -> impl Iterator<Item = &[u8]> {
    keys.iter().map(Vec::as_slice)
}

fn lookup(ix: &HashIndex, key: &[u8]) -> Vec<u64> {
    let mut out = Vec::new();
    ix.lookup(key, &mut out);
    out
}

/// Checks every invariant a lookup relies on, via the checkpoint validator.
fn assert_consistent(ix: &HashIndex) {
    let back = HashIndex::decode(&ix.encode()).expect("own checkpoint decodes");
    assert_eq!(&back, ix);
}

#[test]
fn entry_is_eight_bytes_and_index_is_send_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<HashIndex>();
    assert_eq!(std::mem::size_of::<Entry>(), 8);
    let ix = HashIndex::with_capacity(1000);
    assert_eq!(ix.bucket_count(), 1250);
    assert_eq!(HashIndex::with_capacity(0).bucket_count(), MIN_BUCKETS);
    assert_eq!(ix.entries(), 0);
    assert!(lookup(&ix, b"x").is_empty());
}

#[test]
fn hash_spreads_structured_keys() {
    // Sequential integers and near-identical strings must spread evenly over
    // buckets and tags, and tags must not depend on the home bucket.
    let n = 1000u32;
    let mut buckets = vec![0u32; n as usize];
    let mut tags = vec![0u32; 256];
    let mut tag_by_half = [[0u32; 16]; 2];
    let keys = 200_000u32;
    for i in 0..keys {
        let k = if i % 2 == 0 {
            u64::from(i).to_be_bytes().to_vec()
        } else {
            format!("key{i}").into_bytes()
        };
        let h = key_hash(&k);
        let home = home_of(h, n);
        let tag = tag_of(h);
        buckets[home as usize] += 1;
        tags[(tag >> 8) as usize] += 1;
        tag_by_half[usize::from(home >= n / 2)][(tag >> 12) as usize] += 1;
    }
    let chi2 = |counts: &[u32]| {
        let total: u32 = counts.iter().sum();
        let e = f64::from(total) / counts.len() as f64;
        counts
            .iter()
            .map(|&c| (f64::from(c) - e).powi(2) / e)
            .sum::<f64>()
    };
    // chi² with d degrees of freedom has mean d and sd √(2d); allow 5 sd.
    let limit = |d: f64| d + 5.0 * (2.0 * d).sqrt();
    assert!(
        chi2(&buckets) < limit(999.0),
        "buckets chi2 {}",
        chi2(&buckets)
    );
    assert!(chi2(&tags) < limit(255.0), "tags chi2 {}", chi2(&tags));
    for half in &tag_by_half {
        assert!(
            chi2(half) < limit(15.0),
            "tags given home chi2 {}",
            chi2(half)
        );
    }
}

/// The model test: random keys in many overlapping tables, merges removing
/// the oldest tables, against a `BTreeMap<key, tables oldest first>`.
#[test]
fn model_random_keys_tables_and_merges() {
    // Roomy (load < 0.5) and overloaded (load up to ~5: displacements,
    // long chains, removals re-placing chained entries).
    model_run(7, 30_000);
    model_run(9, 2_000);
}

fn model_run(seed: u64, capacity: usize) {
    let mut r = rng(seed);
    let pool = key_pool(&mut r, 6000);
    let absent = key_pool(&mut rng(8), 3000);
    let absent: Vec<_> = absent.into_iter().filter(|k| !pool.contains(k)).collect();
    let mut ix = HashIndex::with_capacity(capacity);
    let mut max_load = 0f64;
    let mut model: BTreeMap<Vec<u8>, Vec<u64>> = BTreeMap::new();
    let mut live: Vec<u64> = Vec::new();
    let mut next_table = 100u64;
    let (mut lookups, mut false_pos) = (0u64, 0u64);
    for round in 0..40 {
        // Flush a table: a random subset of the pool, with repeats.
        let size = r.gen_range(0..1500);
        let keys: Vec<Vec<u8>> = (0..size)
            .map(|_| pool[r.gen_range(0..pool.len())].clone())
            .collect();
        let t = next_table;
        next_table += r.gen_range(1..5);
        ix.add_table(t, slices(&keys)).unwrap();
        live.push(t);
        for k in &keys {
            let v = model.entry(k.clone()).or_default();
            if v.last() != Some(&t) {
                v.push(t);
            }
        }
        // Sometimes merge the oldest tables (or a random subset) away.
        if round % 7 == 6 {
            let gone: Vec<u64> = if round % 2 == 0 {
                live.drain(..live.len() / 2).collect()
            } else {
                let g: Vec<u64> = live.iter().copied().filter(|_| r.gen_bool(0.4)).collect();
                live.retain(|t| !g.contains(t));
                g
            };
            ix.remove_tables(&gone);
            for v in model.values_mut() {
                v.retain(|t| !gone.contains(t));
            }
        }
        assert_eq!(ix.tables(), live);
        max_load = max_load.max(ix.load_factor());
        if round % 5 == 0 {
            assert_consistent(&ix);
        }
        let distinct: usize = model.values().map(Vec::len).sum();
        assert!(ix.entries() <= distinct);
        assert!(
            ix.entries() + 2 >= distinct,
            "entries {} vs distinct pairs {distinct}",
            ix.entries()
        );
        for k in pool.iter().chain(&absent) {
            let got = lookup(&ix, k);
            let want: Vec<u64> = model
                .get(k)
                .map(|v| v.iter().rev().copied().collect())
                .unwrap_or_default();
            // Newest first, each once, only live tables.
            let rank = |t: &u64| live.iter().position(|l| l == t).expect("live table");
            assert!(
                got.windows(2).all(|w| rank(&w[0]) > rank(&w[1])),
                "not newest first: {got:?}"
            );
            // Never misses, in order: `want` is a subsequence of `got`.
            let mut it = got.iter();
            for w in &want {
                assert!(
                    it.any(|g| g == w),
                    "key {k:?}: missed table {w}, got {got:?} want {want:?}"
                );
            }
            lookups += 1;
            false_pos += (got.len() - want.len()) as u64;
        }
    }
    assert_consistent(&ix);
    let rate = false_pos as f64 / lookups as f64;
    println!(
        "model (capacity {capacity}, max load {max_load:.2}): {lookups} lookups, \
         {false_pos} false-positive tables ({rate:.2e} per lookup)"
    );
    // Two distinct keys share an identity with probability 1/(N·65536): the
    // pools here hold ~0.1 such pairs, so false positives are rare (the rate
    // is checked against theory in `false_positive_rate_matches_theory`).
    assert!(rate < 1e-3, "false positive rate {rate}");
    if capacity < 10_000 {
        assert!(
            max_load > 2.0 && ix.overflow_entries() > 0,
            "the overloaded run must overload"
        );
    }
}

/// An overloaded index makes false positives frequent enough to check the
/// rate against theory: a wrong table needs the same home *and* tag.
#[test]
fn false_positive_rate_matches_theory() {
    let mut ix = HashIndex::with_capacity(0); // 8 buckets
    let keys: Vec<Vec<u8>> = (0..20_000u32)
        .map(|i| format!("present{i}").into_bytes())
        .collect();
    for (t, chunk) in keys.chunks(2000).enumerate() {
        ix.add_table(t as u64, slices(chunk)).unwrap();
    }
    // With 8 buckets, identities (home, tag) of one table's keys collide now
    // and then (birthday bound: ~4 per 2000 keys): they share one entry.
    assert!(
        ix.entries() <= 20_000 && ix.entries() > 19_900,
        "{}",
        ix.entries()
    );
    let probes = 40_000u32;
    let mut fp = 0usize;
    for i in 0..probes {
        fp += lookup(&ix, format!("absent{i}").as_bytes()).len();
    }
    let rate = fp as f64 / f64::from(probes);
    let theory = ix.load_factor() / 65536.0; // 0.038
    println!("overloaded: {rate:.4} false tables per lookup, theory {theory:.4}");
    assert!(
        rate > theory / 1.5 && rate < theory * 1.5,
        "rate {rate} theory {theory}"
    );
    // Every present key is still found, in its own table.
    for (i, k) in keys.iter().enumerate() {
        assert!(lookup(&ix, k).contains(&((i / 2000) as u64)));
    }
}

/// Finds `count` keys (after `start`) with the same home bucket and tag as
/// `target` in an index of `n` buckets.
fn colliding_keys(target: &[u8], n: u32, count: usize) -> Vec<Vec<u8>> {
    let h = key_hash(target);
    let (home, tag) = (home_of(h, n), tag_of(h));
    let mut out = Vec::new();
    let mut i = 0u64;
    while out.len() < count {
        let k = format!("c{i}").into_bytes();
        let hk = key_hash(&k);
        if home_of(hk, n) == home && tag_of(hk) == tag && k != target {
            out.push(k);
        }
        i += 1;
    }
    out
}

#[test]
fn forced_collisions_return_every_table() {
    let ix0 = HashIndex::with_capacity(0);
    let n = ix0.bucket_count();
    // Seven distinct keys sharing home bucket and tag: same four candidates,
    // and the same identity, so neither the index nor its tags tell them apart.
    let mut keys = vec![b"target".to_vec()];
    keys.extend(colliding_keys(b"target", n, 6));
    let mut ix = ix0;
    for (t, k) in keys.iter().enumerate() {
        ix.add_table(10 + t as u64, [k.as_slice()]).unwrap();
    }
    // Four fill the candidates, the rest overflow from the last candidate.
    assert_eq!(ix.entries(), 7);
    assert!(
        ix.overflow_entries() >= 3,
        "overflow {}",
        ix.overflow_entries()
    );
    let all_newest_first: Vec<u64> = (10..17).rev().collect();
    for k in &keys {
        assert_eq!(lookup(&ix, k), all_newest_first, "key {k:?}");
    }
    // Removing some keeps the others, still newest first.
    ix.remove_tables(&[16, 13, 10]);
    assert_eq!(lookup(&ix, &keys[0]), vec![15, 14, 12, 11]);
    assert_consistent(&ix);

    // A key with the same tag but another home is not confused with "target"
    // although one of its candidates is the bucket holding "target".
    let mut ix = HashIndex::with_capacity(0);
    let h = key_hash(b"target");
    let (home, tag) = (home_of(h, n), tag_of(h));
    let other = (0u64..)
        .map(|i| format!("o{i}").into_bytes())
        .find(|k| {
            let hk = key_hash(k);
            let p = ix.probe(home_of(hk, n), tag_of(hk));
            tag_of(hk) == tag && p.cands[0] != home && p.cands[1..].contains(&home)
        })
        .unwrap();
    ix.add_table(1, [b"target".as_slice()]).unwrap();
    ix.add_table(2, [other.as_slice()]).unwrap();
    assert_eq!(lookup(&ix, b"target"), vec![1]);
    assert_eq!(lookup(&ix, &other), vec![2]);
}

#[test]
fn same_table_duplicates_are_indexed_once() {
    let mut ix = HashIndex::with_capacity(100);
    let dup = colliding_keys(b"a", ix.bucket_count(), 1).pop().unwrap();
    ix.add_table(5, [&b"a"[..], b"b", b"a", b"", b"", &dup, b"a"])
        .unwrap();
    // "a" and `dup` have the same identity: one entry serves both.
    assert_eq!(ix.entries(), 3);
    assert_eq!(lookup(&ix, b"a"), vec![5]);
    assert_eq!(lookup(&ix, &dup), vec![5]);
    assert_eq!(lookup(&ix, b""), vec![5]);
    ix.add_table(6, [&b"a"[..], b"a"]).unwrap();
    assert_eq!(ix.entries(), 4);
    assert_eq!(lookup(&ix, b"a"), vec![6, 5]);
    assert_eq!(lookup(&ix, b"b"), vec![5]);
    // Lookup appends.
    let mut out = vec![99];
    ix.lookup(b"b", &mut out);
    assert_eq!(out, vec![99, 5]);
}

/// Builds an index of the given tables (id, keys) in order.
fn build(cap: usize, tables: &[(u64, Vec<Vec<u8>>)]) -> HashIndex {
    let mut ix = HashIndex::with_capacity(cap);
    for (t, keys) in tables {
        ix.add_table(*t, slices(keys)).unwrap();
    }
    ix
}

fn random_tables(
    r: &mut StdRng,
    pool: &[Vec<u8>],
    count: usize,
    size: usize,
) -> Vec<(u64, Vec<Vec<u8>>)> {
    (0..count)
        .map(|t| {
            (
                1000 + t as u64 * 3,
                (0..r.gen_range(0..size))
                    .map(|_| pool[r.gen_range(0..pool.len())].clone())
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn remove_tables_equals_never_added() {
    let mut r = rng(11);
    let pool = key_pool(&mut r, 3000);
    for trial in 0..12 {
        // Small capacities overload the index so that removals must move
        // entries out of overflow chains and into freed buckets.
        let cap = [500, 2000, 8000][trial % 3];
        let tables = random_tables(&mut r, &pool, 12, 900);
        let mut ix = build(cap, &tables);
        let gone: Vec<u64> = tables
            .iter()
            .map(|t| t.0)
            .filter(|_| r.gen_bool(0.4))
            .collect();
        let kept: Vec<_> = tables
            .iter()
            .filter(|t| !gone.contains(&t.0))
            .cloned()
            .collect();
        let fresh = build(cap, &kept);
        if !gone.is_empty() && ix.entries() > 0 {
            assert_ne!(ix, fresh);
        }
        ix.remove_tables(&gone);
        assert_eq!(ix, fresh, "trial {trial}: removed {gone:?}");
        for k in &pool {
            assert_eq!(lookup(&ix, k), lookup(&fresh, k));
        }
        assert_consistent(&ix);
    }
    // Removing everything, or nothing known.
    let tables = random_tables(&mut r, &pool, 3, 300);
    let mut ix = build(100, &tables);
    let before = ix.clone();
    ix.remove_tables(&[1, 2, 3]);
    assert_eq!(ix, before);
    ix.remove_tables(&tables.iter().map(|t| t.0).collect::<Vec<_>>());
    assert_eq!(
        (ix.entries(), ix.overflow_entries(), ix.tables()),
        (0, 0, vec![])
    );
    assert_eq!(ix, HashIndex::with_capacity(100));
}

#[test]
fn slots_are_reused_and_age_follows_add_order() {
    let mut ix = HashIndex::with_capacity(10);
    ix.add_table(50, [&b"k"[..]]).unwrap();
    ix.add_table(7, [&b"k"[..]]).unwrap();
    ix.add_table(30, [&b"k"[..]]).unwrap();
    assert_eq!(lookup(&ix, b"k"), vec![30, 7, 50]);
    ix.remove_tables(&[50]);
    // Table 1 reuses table 50's slot but is the newest.
    ix.add_table(1, [&b"k"[..]]).unwrap();
    assert_eq!(ix.tables(), vec![7, 30, 1]);
    assert_eq!(lookup(&ix, b"k"), vec![1, 30, 7]);
    assert!(ix.contains_table(7) && !ix.contains_table(50));
}

#[test]
fn add_table_errors_leave_the_index_unchanged() {
    let mut ix = HashIndex::with_capacity(10);
    ix.add_table(1, [&b"a"[..]]).unwrap();
    let before = ix.clone();
    assert!(ix.add_table(1, [&b"b"[..]]).is_err());
    assert_eq!(ix, before);
    // Exhaust the slots.
    let mut ix = HashIndex::with_capacity(0);
    for t in 0..MAX_TABLES as u64 {
        ix.add_table(t, std::iter::empty()).unwrap();
    }
    let err = ix.add_table(u64::MAX, [&b"a"[..]]).unwrap_err();
    assert!(err.contains("65535"), "{err}");
    assert_eq!(ix.table_count(), MAX_TABLES);
    assert_eq!(ix.entries(), 0);
    ix.remove_tables(&[3]);
    ix.add_table(u64::MAX, [&b"a"[..]]).unwrap();
    assert_eq!(lookup(&ix, b"a"), vec![u64::MAX]);
}

#[test]
fn checkpoint_round_trip_and_rebuild_equal_the_original() {
    let mut r = rng(21);
    let pool = key_pool(&mut r, 4000);
    let tables = random_tables(&mut r, &pool, 10, 1500);
    let mut ix = build(6000, &tables[..6]);
    ix.remove_tables(&[tables[1].0]);
    // The checkpoint...
    let image = ix.encode();
    let decoded = HashIndex::decode(&image).unwrap();
    assert_eq!(decoded, ix);
    assert_eq!(
        decoded.encode(),
        image,
        "a decoded index re-encodes identically"
    );
    for k in &pool {
        assert_eq!(lookup(&decoded, k), lookup(&ix, k));
    }
    // ...plus the tables flushed after it equals the lost index...
    let mut recovered = decoded;
    for (t, keys) in &tables[6..] {
        ix.add_table(*t, slices(keys)).unwrap();
        recovered.add_table(*t, slices(keys)).unwrap();
    }
    assert_eq!(recovered, ix);
    // ...and so does a rebuild from scratch, with the keys in another order.
    let mut shuffled: Vec<_> = tables
        .iter()
        .filter(|t| t.0 != tables[1].0)
        .cloned()
        .collect();
    for (_, keys) in &mut shuffled {
        keys.shuffle(&mut r);
    }
    assert_eq!(build(6000, &shuffled), ix);
    // A different table order or a missing key is *not* equal.
    let mut swapped = shuffled.clone();
    swapped.swap(0, 1);
    assert_ne!(build(6000, &swapped), ix);
    let mut missing = shuffled.clone();
    let last = missing.iter_mut().rev().find(|t| !t.1.is_empty()).unwrap();
    let k = last.1[0].clone();
    last.1.retain(|x| *x != k);
    assert_ne!(build(6000, &missing), ix);
    // An empty index round-trips too.
    let empty = HashIndex::with_capacity(0);
    assert_eq!(HashIndex::decode(&empty.encode()).unwrap(), empty);
}

#[test]
fn checkpoint_corruption_is_an_error() {
    let mut r = rng(31);
    let pool = key_pool(&mut r, 200);
    // Small and overloaded, so the image has tables, buckets and chains.
    let ix = build(20, &random_tables(&mut r, &pool, 4, 60));
    assert!(ix.overflow_entries() > 0);
    let image = ix.encode();
    for at in 0..image.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut bad = image.clone();
            bad[at] ^= flip;
            assert!(
                HashIndex::decode(&bad).is_err(),
                "flip {flip:#x} at {at} accepted"
            );
        }
    }
    for len in 0..image.len() {
        assert!(
            HashIndex::decode(&image[..len]).is_err(),
            "truncation to {len} accepted"
        );
    }
    let mut longer = image.clone();
    longer.push(0);
    assert!(HashIndex::decode(&longer).is_err());
    assert!(HashIndex::decode(b"").is_err());
    assert!(HashIndex::decode(&[0u8; 4096]).is_err());
}

/// Rewrites an image's CRC so that only the structural checks stand.
fn reseal(image: &mut [u8]) {
    let body = image.len() - 4;
    let crc = crc32c::crc32c(&image[..body]);
    image[body..].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn checkpoint_structure_is_validated_behind_a_good_crc() {
    let mut r = rng(41);
    let pool = key_pool(&mut r, 200);
    let ix = build(20, &random_tables(&mut r, &pool, 4, 60));
    let image = ix.encode();
    let t = ix.table_count();
    let n = ix.bucket_count() as usize;
    let buckets_at = 24 + 10 * t;
    let overflow_at = buckets_at + 8 * n;
    let edit = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut bad = image.clone();
        f(&mut bad);
        reseal(&mut bad);
        HashIndex::decode(&bad)
    };
    let set_u32 =
        |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    // A header claiming 2³¹ buckets: rejected on length, no allocation.
    assert!(edit(&|b| set_u32(b, 12, 1 << 31))
        .unwrap_err()
        .contains("length"));
    assert!(edit(&|b| set_u32(b, 20, u32::MAX)).is_err());
    assert!(edit(&|b| set_u32(b, 8, 2)).unwrap_err().contains("version"));
    // The first overflow entry pointing at itself: a cycle.
    let head = (0..n)
        .find(|&b| image[buckets_at + 8 * b + 4..buckets_at + 8 * b + 8] != [0; 4])
        .unwrap();
    let link = u32::from_le_bytes(image[buckets_at + 8 * head + 4..][..4].try_into().unwrap());
    let first = (link & NEXT_MASK) as usize - 1;
    let cyclic = edit(&|b| {
        set_u32(
            b,
            overflow_at + 8 * first + 4,
            LAST << NEXT_BITS | (first as u32 + 1),
        )
    });
    assert!(cyclic.is_err());
    // Cutting a chain leaves orphans.
    assert!(
        edit(&|b| set_u32(b, buckets_at + 8 * head + 4, link & !NEXT_MASK))
            .unwrap_err()
            .contains("no chain")
    );
    // An entry naming an unknown slot; a non-blank empty bucket.
    let full = (0..n)
        .find(|&b| image[buckets_at + 8 * b + 2..][..2] != [0xff, 0xff])
        .unwrap();
    assert!(
        edit(&|b| b[buckets_at + 8 * full + 2..][..2].copy_from_slice(&999u16.to_le_bytes()))
            .is_err()
    );
    if let Some(empty) = (0..n).find(|&b| image[buckets_at + 8 * b + 2..][..2] == [0xff, 0xff]) {
        assert!(edit(&|b| b[buckets_at + 8 * empty] = 1)
            .unwrap_err()
            .contains("blank"));
    }
    // Two tables with the same id or slot.
    if t >= 2 {
        assert!(edit(&|b| b.copy_within(24..32, 34))
            .unwrap_err()
            .contains("twice"));
        assert!(edit(&|b| b.copy_within(32..34, 42))
            .unwrap_err()
            .contains("twice"));
    }

    // Random mutations behind a good CRC never panic; whatever decodes is
    // consistent enough to look up, add to, remove from and re-encode.
    for _ in 0..3000 {
        let mut bad = image.clone();
        for _ in 0..r.gen_range(1..4) {
            let at = r.gen_range(0..bad.len() - 4);
            bad[at] = r.gen();
        }
        reseal(&mut bad);
        if let Ok(mut d) = HashIndex::decode(&bad) {
            for k in &pool {
                lookup(&d, k);
            }
            let first = d.tables().first().copied();
            d.add_table(u64::MAX - 1, slices(&pool[..20])).unwrap();
            d.remove_tables(&first.into_iter().collect::<Vec<_>>());
            assert_consistent(&d);
        }
    }
}

/// Memory per key and speed at 1M keys (100k in debug builds). Run with
/// `cargo test --release -p weft --lib hash_index::tests::measure -- --nocapture`.
#[test]
fn measure() {
    let n: usize = if cfg!(debug_assertions) {
        100_000
    } else {
        1_000_000
    };
    let keys: Vec<[u8; 16]> = (0..n as u64)
        .map(|i| {
            let mut k = [0u8; 16];
            k[..8].copy_from_slice(&(i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_be_bytes());
            k[8..].copy_from_slice(&i.to_be_bytes());
            k
        })
        .collect();
    let per_table = 50_000;
    println!("keys {n}, 16-byte keys, {per_table} keys per table");
    println!("| keys/capacity | load | overflow % | bytes/key | insert ns | hit ns | miss ns | false tables/miss |");
    for over in [1.0, 1.25, 1.5, 1.875, 2.5] {
        let mut ix = HashIndex::with_capacity((n as f64 / over) as usize);
        let t0 = Instant::now();
        for (t, chunk) in keys.chunks(per_table).enumerate() {
            ix.add_table(t as u64, chunk.iter().map(|k| k.as_slice()))
                .unwrap();
        }
        let insert = t0.elapsed().as_nanos() as f64 / n as f64;
        let mut out = Vec::with_capacity(16);
        let t0 = Instant::now();
        let mut found = 0usize;
        for k in keys.iter().step_by(3) {
            out.clear();
            ix.lookup(k, &mut out);
            found += out.len();
        }
        let hits = n.div_ceil(3);
        let hit = t0.elapsed().as_nanos() as f64 / hits as f64;
        assert!(found >= hits);
        let misses = n / 3;
        let t0 = Instant::now();
        let mut false_tables = 0usize;
        for i in 0..misses as u64 {
            out.clear();
            ix.lookup(&(i ^ 0xdead_beef_0000_0000).to_le_bytes(), &mut out);
            false_tables += out.len();
        }
        let miss = t0.elapsed().as_nanos() as f64 / misses as f64;
        let bytes_per_key = ix.memory_usage() as f64 / ix.entries() as f64;
        println!(
            "| {over:.2} | {:.2} | {:.1} | {bytes_per_key:.2} | {insert:.0} | {hit:.0} | {miss:.0} | {:.1e} |",
            ix.load_factor(),
            100.0 * ix.overflow_entries() as f64 / ix.entries() as f64,
            false_tables as f64 / misses as f64,
        );
        // At high load a few keys of a table share an identity (birthday bound).
        assert!(
            ix.entries() <= n && ix.entries() + n / 10_000 >= n,
            "{}",
            ix.entries()
        );
        if over == 1.0 {
            // 8 B per entry / 0.8 utilisation, plus overflow and side tables.
            assert!(
                bytes_per_key < 11.0,
                "{bytes_per_key} bytes per key at the target load"
            );
        }
    }
}
