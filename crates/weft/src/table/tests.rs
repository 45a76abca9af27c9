//! Table tests against an in-memory model, plus corruption and truncation
//! sweeps.

use std::cmp::Ordering;
use std::path::Path;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::format::{BlockHandle, Footer, BLOCK_TRAILER_SIZE, FOOTER_SIZE};
use super::*;
use crate::compression::Compression;
use crate::error::Error;
use crate::iter::InternalIterator;
use crate::key::{compare_positions, internal_key, SequenceNumber, ValueKind, MAX_SEQUENCE};
use crate::table::BlockCache;

type Entry = (Vec<u8>, SequenceNumber, ValueKind, Vec<u8>);

fn random_value(rng: &mut StdRng) -> Vec<u8> {
    let len = match rng.gen_range(0..100) {
        0..=69 => rng.gen_range(0..20),
        70..=94 => rng.gen_range(20..300),
        _ => rng.gen_range(300..2000),
    };
    if rng.gen() {
        (0..len).map(|_| rng.gen()).collect()
    } else {
        // Compressible, so that compressed tables store some blocks so.
        let motif: [u8; 5] = rng.gen();
        (0..len).map(|i| motif[i % 5]).collect()
    }
}

/// Sorted random entries: short keys over a tiny alphabet (so empty keys and
/// keys that are prefixes of others are common), 1..n versions per key with
/// unique sequences, some deletes.
fn random_entries(rng: &mut StdRng, distinct: usize, max_versions: usize) -> Vec<Entry> {
    let alphabet = [b'a', b'b', 0u8, 0xff];
    let mut keys = std::collections::BTreeSet::new();
    keys.insert(Vec::new());
    while keys.len() < distinct {
        let len = rng.gen_range(0..8);
        keys.insert(
            (0..len)
                .map(|_| alphabet[rng.gen_range(0..4)])
                .collect::<Vec<u8>>(),
        );
    }
    let versions: Vec<usize> = keys
        .iter()
        .map(|_| {
            if rng.gen_ratio(1, 10) {
                rng.gen_range(1..=max_versions)
            } else {
                rng.gen_range(1..=3)
            }
        })
        .collect();
    let mut seqs: Vec<u64> = (1..=versions.iter().sum::<usize>() as u64 * 2).collect();
    seqs.shuffle(rng);
    let mut seqs = seqs.into_iter();
    let mut out = Vec::new();
    for (key, n) in keys.into_iter().zip(versions) {
        let mut mine: Vec<u64> = seqs.by_ref().take(n).collect();
        mine.sort_unstable_by(|a, b| b.cmp(a));
        for seq in mine {
            if rng.gen_ratio(1, 5) {
                out.push((key.clone(), seq, ValueKind::Delete, Vec::new()));
            } else {
                out.push((key.clone(), seq, ValueKind::Put, random_value(rng)));
            }
        }
    }
    out
}

/// Puts of `key000000`, `key000001`, ... (sequence `1 + i`), valued by `value`.
fn numbered_puts(n: u32, value: impl Fn(u32) -> Vec<u8>) -> Vec<Entry> {
    (0..n)
        .map(|i| {
            let key = format!("key{i:06}").into_bytes();
            (key, 1 + u64::from(i), ValueKind::Put, value(i))
        })
        .collect()
}

fn build(path: &Path, entries: &[Entry], options: TableOptions) -> TableSummary {
    let mut b = TableBuilder::create(&*crate::util::fs::real(), path, options).unwrap();
    for (k, s, kind, v) in entries {
        b.add(k, *s, *kind, v).unwrap();
    }
    assert_eq!(b.entries(), entries.len() as u64);
    b.finish().unwrap()
}

/// Every entry of `it` from the first on.
fn scan_forward(it: &mut TableIter) -> Vec<Entry> {
    let mut out = Vec::new();
    it.seek_to_first().unwrap();
    while it.valid() {
        out.push(current(it));
        it.next().unwrap();
    }
    out
}

fn current(it: &TableIter) -> Entry {
    (
        it.user_key().to_vec(),
        it.seq(),
        it.kind(),
        it.value().to_vec(),
    )
}

/// The model's answer to a get.
fn model_get(entries: &[Entry], key: &[u8], snapshot: u64) -> Option<Entry> {
    entries
        .iter()
        .find(|e| e.0 == key && e.1 <= snapshot)
        .cloned()
}

/// Index of the first entry at or after `(key, seq)`.
fn model_seek(entries: &[Entry], key: &[u8], seq: u64) -> usize {
    entries.partition_point(|e| compare_positions(&e.0, e.1, key, seq) == Ordering::Less)
}

fn check_against_model(table: &Arc<Table>, entries: &[Entry], rng: &mut StdRng, fill: bool) {
    let mut it = table.iter_for(crate::stats::ReadPurpose::Scan { fill_cache: fill });
    // Full forward and backward scans.
    it.seek_to_first().unwrap();
    for e in entries {
        assert!(it.valid());
        assert_eq!(&current(&it), e);
        it.next().unwrap();
    }
    assert!(!it.valid());
    it.seek_to_last().unwrap();
    for e in entries.iter().rev() {
        assert!(it.valid());
        assert_eq!(&current(&it), e);
        it.prev().unwrap();
    }
    assert!(!it.valid());

    // Random seeks followed by random walks.
    let max_seq = entries.iter().map(|e| e.1).max().unwrap_or(0);
    for _ in 0..300 {
        let key: Vec<u8> = if !entries.is_empty() && rng.gen_bool(0.7) {
            entries[rng.gen_range(0..entries.len())].0.clone()
        } else {
            (0..rng.gen_range(0..6))
                .map(|_| [b'a', b'b', 0, 0xff, b'c'][rng.gen_range(0..5)])
                .collect()
        };
        let seq = match rng.gen_range(0..4) {
            0 => MAX_SEQUENCE,
            1 => 0,
            _ => rng.gen_range(0..=max_seq + 1),
        };
        it.seek(&key, seq).unwrap();
        let mut pos = model_seek(entries, &key, seq);
        for _ in 0..20 {
            if pos >= entries.len() {
                assert!(!it.valid());
                break;
            }
            assert!(it.valid());
            assert_eq!(current(&it), entries[pos]);
            if rng.gen_bool(0.5) {
                it.next().unwrap();
                pos += 1;
            } else {
                it.prev().unwrap();
                if pos == 0 {
                    assert!(!it.valid());
                    break;
                }
                pos -= 1;
            }
        }
    }

    // Gets at random snapshots, for present and absent keys.
    for _ in 0..500 {
        let key: Vec<u8> = if !entries.is_empty() && rng.gen_bool(0.8) {
            entries[rng.gen_range(0..entries.len())].0.clone()
        } else {
            (0..rng.gen_range(0..9)).map(|_| rng.gen()).collect()
        };
        let snapshot = if rng.gen_ratio(1, 10) {
            MAX_SEQUENCE
        } else {
            rng.gen_range(0..=max_seq + 1)
        };
        let got = table.get(&key, snapshot).unwrap();
        let want = model_get(entries, &key, snapshot).map(|e| (e.1, e.2, e.3));
        assert_eq!(got, want, "get {key:?} at {snapshot}");
    }
}

#[test]
fn round_trip_matches_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(0x5eed);
    for round in 0..6u64 {
        let entries = random_entries(&mut rng, 40 + 80 * round as usize, 40);
        let options = TableOptions {
            block_size: [256, 64, 1, 4096, 512, 256][round as usize],
            restart_interval: [16, 1, 3, 16, 2, 7][round as usize],
            bloom_bits_per_key: [10, 0, 10, 3, 10, 10][round as usize],
            compression: [
                Compression::None,
                Compression::Lz4,
                Compression::Lz4,
                Compression::ZSTD,
                Compression::Zstd(-1),
                Compression::ZSTD,
            ][round as usize],
            ..TableOptions::default()
        };
        let path = dir.path().join(format!("{round}.sst"));
        let summary = build(&path, &entries, options);
        assert_eq!(summary.entries, entries.len() as u64);
        assert_eq!(summary.file_size, std::fs::metadata(&path).unwrap().len());
        let first = &entries[0];
        let last = &entries[entries.len() - 1];
        assert_eq!(summary.smallest, internal_key(&first.0, first.1, first.2));
        assert_eq!(summary.largest, internal_key(&last.0, last.1, last.2));

        let cache = Arc::new(BlockCache::new(64 << 10));
        let reads = [BlockReads::Mapped, BlockReads::Cached][round as usize % 2];
        let table = Table::open(
            &*crate::util::fs::real(),
            &path,
            round,
            summary.file_size,
            cache,
            reads,
        )
        .unwrap();
        assert_eq!(table.is_mapped(), reads == BlockReads::Mapped);
        assert_eq!(table.entries(), entries.len() as u64);
        assert_eq!(table.file_number(), round);
        assert_eq!(table.file_size(), summary.file_size);
        assert_eq!(table.path(), path);
        let blocks = table.verify_checksums().unwrap();
        assert!(blocks >= 2);
        check_against_model(&table, &entries, &mut rng, round % 2 == 0);
    }
}

/// A compressed table stores its compressible blocks compressed (and is
/// smaller), reads back the same through the mapping and through the
/// cache, and a flipped byte of a compressed block is corruption on every
/// path that reads it, never a panic or a wrong entry.
#[test]
fn compressed_blocks_read_back_and_damage_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let entries = numbered_puts(3000, |i| format!("value {i:08} ").repeat(10).into_bytes());
    let plain = build(&dir.path().join("0.sst"), &entries, TableOptions::default());
    for (n, compression) in [(1u64, Compression::Lz4), (2, Compression::ZSTD)] {
        let path = dir.path().join(format!("{n}.sst"));
        let options = TableOptions {
            compression,
            ..TableOptions::default()
        };
        let summary = build(&path, &entries, options);
        assert!(
            summary.file_size * 3 < plain.file_size,
            "{compression}: {} bytes, {} uncompressed",
            summary.file_size,
            plain.file_size
        );
        let open = |reads| {
            let cache = Arc::new(BlockCache::new(1 << 20));
            Table::open(
                &*crate::util::fs::real(),
                &path,
                n,
                summary.file_size,
                cache,
                reads,
            )
        };
        for reads in [BlockReads::Mapped, BlockReads::Cached] {
            let table = open(reads).unwrap();
            assert_eq!(
                scan_forward(&mut table.iter()),
                entries,
                "{compression} {reads:?}"
            );
            for e in entries.iter().step_by(13) {
                assert_eq!(table.get(&e.0, e.1).unwrap(), Some((e.1, e.2, e.3.clone())));
            }
            assert!(table.verify_checksums().unwrap() > 2);
        }
        // Flip one byte in the middle of the first data block (compressed:
        // its stored bytes are far fewer than the block's).
        let clean = std::fs::read(&path).unwrap();
        let mut bad = clean.clone();
        bad[40] ^= 0x20;
        std::fs::write(&path, &bad).unwrap();
        for reads in [BlockReads::Mapped, BlockReads::Cached] {
            let table = open(reads).unwrap();
            let first = &entries[0];
            assert!(table.get(&first.0, first.1).unwrap_err().is_corruption());
            let mut it = table.iter();
            assert!(it.seek_to_first().unwrap_err().is_corruption());
            assert!(table.verify_checksums().unwrap_err().is_corruption());
        }
        std::fs::write(&path, &clean).unwrap();
    }
}

/// A scan walking a mapped table in order asks the kernel to read ahead,
/// about once per readahead window; gets, short scans and background
/// reads (which use `pread`) never do.
#[test]
fn mapped_scans_read_ahead_and_nothing_else_does() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sst");
    let entries = numbered_puts(4000, |i| vec![i as u8; 300]);
    let summary = build(&path, &entries, TableOptions::default());
    let cache = Arc::new(BlockCache::new(1 << 20));
    let table = Table::open(
        &*crate::util::fs::real(),
        &path,
        1,
        summary.file_size,
        cache,
        BlockReads::Mapped,
    )
    .unwrap();
    assert!(table.is_mapped());
    for e in entries.iter().step_by(7) {
        assert_eq!(table.get(&e.0, e.1).unwrap(), Some((e.1, e.2, e.3.clone())));
    }
    let mut it = table.iter();
    it.seek(b"key002000", MAX_SEQUENCE).unwrap();
    for _ in 0..3 {
        it.next().unwrap();
    }
    let mut bg = table.iter_for(crate::stats::ReadPurpose::Background);
    bg.seek_to_first().unwrap();
    while bg.valid() {
        bg.next().unwrap();
    }
    assert_eq!(
        table.read_aheads(),
        0,
        "gets, a short scan and a background walk"
    );
    assert_eq!(scan_forward(&mut table.iter()), entries);
    let windows = summary.file_size / (256 << 10) + 1;
    let asked = table.read_aheads();
    assert!(
        (1..=windows + 1).contains(&asked),
        "{asked} readahead requests for a {}-byte table",
        summary.file_size
    );
}

#[test]
fn versions_spanning_many_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let mut entries: Vec<Entry> = Vec::new();
    for (k, versions) in [(&b"a"[..], 3u64), (b"hot", 300), (b"hot\0", 2), (b"z", 1)] {
        for s in (1..=versions).rev() {
            entries.push((
                k.to_vec(),
                s * 10,
                ValueKind::Put,
                format!("{k:?}@{s}").into(),
            ));
        }
    }
    let options = TableOptions {
        block_size: 64,
        restart_interval: 4,
        bloom_bits_per_key: 10,
        ..TableOptions::default()
    };
    let summary = build(&path, &entries, options);
    let table = Table::open(
        &*crate::util::fs::real(),
        &path,
        1,
        summary.file_size,
        Arc::new(BlockCache::new(0)),
        BlockReads::Mapped,
    )
    .unwrap();
    assert!(table.verify_checksums().unwrap() > 50);
    for snapshot in 0..3020 {
        for k in [&b"a"[..], b"hot", b"hot\0", b"z", b"ho", b"hot\0\0"] {
            let want = model_get(&entries, k, snapshot).map(|e| (e.1, e.2, e.3));
            assert_eq!(table.get(k, snapshot).unwrap(), want, "{k:?}@{snapshot}");
        }
    }
    let mut rng = StdRng::seed_from_u64(7);
    check_against_model(&table, &entries, &mut rng, true);
}

#[test]
fn empty_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.sst");
    let summary = build(&path, &[], TableOptions::default());
    assert_eq!(summary.entries, 0);
    assert!(summary.smallest.is_empty() && summary.largest.is_empty());
    let table = Table::open(
        &*crate::util::fs::real(),
        &path,
        1,
        summary.file_size,
        Arc::new(BlockCache::new(1 << 20)),
        BlockReads::Mapped,
    )
    .unwrap();
    let mut it = table.iter();
    it.seek_to_first().unwrap();
    assert!(!it.valid());
    it.seek_to_last().unwrap();
    assert!(!it.valid());
    it.seek(b"", MAX_SEQUENCE).unwrap();
    assert!(!it.valid());
    assert_eq!(table.get(b"", MAX_SEQUENCE).unwrap(), None);
    assert!(!table.may_contain(b"x"));
    assert_eq!(table.verify_checksums().unwrap(), 2);
}

#[test]
fn out_of_order_add_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    for (k2, s2) in [(&b"b"[..], 5u64), (b"b", 6), (b"a", 1)] {
        let mut b = TableBuilder::create(
            &*crate::util::fs::real(),
            &dir.path().join("x.sst"),
            TableOptions::default(),
        )
        .unwrap();
        b.add(b"b", 5, ValueKind::Put, b"v").unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            b.add(k2, s2, ValueKind::Put, b"w")
        }));
        match r {
            Err(_) if cfg!(debug_assertions) => {} // the debug_assert fired
            Err(_) => panic!("add panicked in a release build"),
            Ok(r) => assert!(matches!(r, Err(Error::InvalidArgument(_)))),
        }
    }
    let bad = TableOptions {
        restart_interval: 0,
        ..TableOptions::default()
    };
    assert!(matches!(
        TableBuilder::create(&*crate::util::fs::real(), &dir.path().join("y.sst"), bad),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn bloom_filter_in_table_has_no_false_negatives() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.sst");
    let entries = numbered_puts(10_000, |_| vec![1]);
    let summary = build(&path, &entries, TableOptions::default());
    let cache = Arc::new(BlockCache::new(1 << 20));
    let table = Table::open(
        &*crate::util::fs::real(),
        &path,
        1,
        summary.file_size,
        cache.clone(),
        BlockReads::Cached,
    )
    .unwrap();
    for e in &entries {
        assert!(table.may_contain(&e.0));
    }
    let fp = (0..10_000u32)
        .filter(|i| table.may_contain(format!("key{i:06}x").as_bytes()))
        .count();
    assert!(fp < 200, "false positives {fp} / 10000");
    // Absent keys rejected by the filter cost no block read.
    let before = cache.stats();
    for i in 0..1000u32 {
        let k = format!("nope{i}");
        if !table.may_contain(k.as_bytes()) {
            assert_eq!(table.get(k.as_bytes(), MAX_SEQUENCE).unwrap(), None);
        }
    }
    assert_eq!(
        cache.stats().misses + cache.stats().hits,
        before.misses + before.hits
    );
}

#[test]
fn cache_is_filled_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.sst");
    let mut rng = StdRng::seed_from_u64(3);
    let entries = random_entries(&mut rng, 300, 5);
    let options = TableOptions {
        block_size: 512,
        ..TableOptions::default()
    };
    let summary = build(&path, &entries, options);
    let cache = Arc::new(BlockCache::new(8 << 20));
    let table = Table::open(
        &*crate::util::fs::real(),
        &path,
        9,
        summary.file_size,
        cache.clone(),
        BlockReads::Cached,
    )
    .unwrap();
    let mut it = table.iter_for(crate::stats::ReadPurpose::Background);
    it.seek_to_first().unwrap();
    while it.valid() {
        it.next().unwrap();
    }
    assert_eq!(cache.stats().usage, 0);
    let mut it = table.iter();
    it.seek_to_first().unwrap();
    while it.valid() {
        it.next().unwrap();
    }
    let filled = cache.stats();
    assert!(filled.usage > 0);
    let (k, s, _, _) = &entries[entries.len() / 2];
    table.get(k, *s).unwrap().unwrap();
    assert_eq!(cache.stats().hits, filled.hits + 1);
    cache.evict_file(9);
    assert_eq!(cache.stats().usage, 0);
}

#[test]
fn table_and_iter_are_thread_safe() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Table>();
    send_sync::<BlockCache>();
    send::<TableIter>();
}

#[test]
fn concurrent_readers_share_a_small_cache() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.sst");
    let mut rng = StdRng::seed_from_u64(5);
    let entries = Arc::new(random_entries(&mut rng, 400, 10));
    let options = TableOptions {
        block_size: 256,
        ..TableOptions::default()
    };
    let summary = build(&path, &entries, options);
    // Far smaller than the table: blocks are evicted while others use them.
    let cache = Arc::new(BlockCache::new(4 << 10));
    let table = Table::open(
        &*crate::util::fs::real(),
        &path,
        3,
        summary.file_size,
        cache.clone(),
        BlockReads::Cached,
    )
    .unwrap();
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let table = table.clone();
            let entries = entries.clone();
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(t);
                for _ in 0..300 {
                    let e = &entries[rng.gen_range(0..entries.len())];
                    let got = table.get(&e.0, e.1).unwrap();
                    assert_eq!(got, Some((e.1, e.2, e.3.clone())));
                }
                assert_eq!(scan_forward(&mut table.iter()), *entries);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(cache.stats().usage <= 4 << 10);
}

/// Byte ranges of every block (with trailer) and of the footer, from the
/// table's own footer and index: `(start, end)`.
fn regions(bytes: &[u8]) -> Vec<(u64, u64)> {
    let footer_offset = (bytes.len() - FOOTER_SIZE) as u64;
    let raw: [u8; FOOTER_SIZE] = bytes[footer_offset as usize..].try_into().unwrap();
    let footer = Footer::decode(&raw, footer_offset).unwrap();
    let span = |h: BlockHandle| (h.offset, h.offset + h.size + BLOCK_TRAILER_SIZE as u64);
    let index = block::Block::new(
        bytes[footer.index.offset as usize..][..footer.index.size as usize].to_vec(),
        footer.index.offset,
    )
    .unwrap();
    let mut it = block::BlockIter::new(Arc::new(index));
    let mut out = Vec::new();
    it.seek_to_first().unwrap();
    while it.valid() {
        out.push(span(BlockHandle::decode(it.value()).unwrap()));
        it.next_entry().unwrap();
    }
    out.extend(footer.filter.map(span));
    out.push(span(footer.index));
    out.push((footer_offset, bytes.len() as u64));
    out
}

/// Opens a damaged table and reads everything, both through the cache and
/// through a mapping: each result must be either corruption or exactly the
/// original. Returns the first error (the same both ways).
fn read_everything(path: &Path, size: u64, entries: &[Entry]) -> Option<Error> {
    let cached = read_everything_by(path, size, entries, BlockReads::Cached);
    let mapped = read_everything_by(path, size, entries, BlockReads::Mapped);
    assert_eq!(
        cached.as_ref().map(ToString::to_string),
        mapped.as_ref().map(ToString::to_string),
        "the two ways of reading disagree"
    );
    mapped
}

fn read_everything_by(
    path: &Path,
    size: u64,
    entries: &[Entry],
    reads: BlockReads,
) -> Option<Error> {
    let cache = Arc::new(BlockCache::new(1 << 20));
    let table = match Table::open(&*crate::util::fs::real(), path, 1, size, cache, reads) {
        Ok(t) => t,
        Err(e) => return Some(e),
    };
    // Scans through the mapping when mapped; by `pread` otherwise.
    let purpose = match reads {
        BlockReads::Mapped => crate::stats::ReadPurpose::Scan { fill_cache: true },
        BlockReads::Cached => crate::stats::ReadPurpose::Background,
    };
    let mut first_error = None;
    let mut note = |e: Error| {
        assert!(e.is_corruption(), "{e}");
        first_error.get_or_insert(e);
    };
    let mut it = table.iter_for(purpose);
    let mut r = it.seek_to_first();
    let mut i = 0;
    while r.is_ok() && it.valid() {
        assert_eq!(current(&it), entries[i], "forward entry {i}");
        i += 1;
        r = it.next();
    }
    match r {
        Ok(()) => assert_eq!(i, entries.len()),
        Err(e) => {
            assert!(!it.valid());
            note(e);
        }
    }
    let mut r = it.seek_to_last();
    let mut i = entries.len();
    while r.is_ok() && it.valid() {
        i -= 1;
        assert_eq!(current(&it), entries[i], "backward entry {i}");
        r = it.prev();
    }
    match r {
        Ok(()) => assert_eq!(i, 0),
        Err(e) => {
            assert!(!it.valid());
            note(e);
        }
    }
    for e in entries {
        match table.get(&e.0, e.1) {
            Ok(got) => assert_eq!(got, Some((e.1, e.2, e.3.clone()))),
            Err(err) => note(err),
        }
    }
    if let Err(e) = table.verify_checksums() {
        note(e);
    }
    first_error
}

fn small_table(dir: &Path) -> (std::path::PathBuf, Vec<Entry>, Vec<u8>) {
    let mut rng = StdRng::seed_from_u64(11);
    let entries = random_entries(&mut rng, 25, 4)
        .into_iter()
        .map(|(k, s, kind, mut v)| {
            v.truncate(12);
            (k, s, kind, v)
        })
        .collect::<Vec<_>>();
    let path = dir.join("small.sst");
    let options = TableOptions {
        block_size: 128,
        restart_interval: 3,
        bloom_bits_per_key: 10,
        ..TableOptions::default()
    };
    build(&path, &entries, options);
    let bytes = std::fs::read(&path).unwrap();
    (path, entries, bytes)
}

#[test]
fn every_flipped_byte_is_detected_at_its_block() {
    let dir = tempfile::tempdir().unwrap();
    let (path, entries, bytes) = small_table(dir.path());
    let regions = regions(&bytes);
    assert!(regions.len() > 5, "several data blocks");
    assert_eq!(regions.last().unwrap().1, bytes.len() as u64);
    assert!(
        regions.windows(2).all(|w| w[0].1 == w[1].0),
        "regions tile the file"
    );
    let bad = dir.path().join("bad.sst");
    for i in 0..bytes.len() {
        for mask in [0x01u8 << (i % 8), 0xff] {
            let mut damaged = bytes.clone();
            damaged[i] ^= mask;
            std::fs::write(&bad, &damaged).unwrap();
            let err = read_everything(&bad, bytes.len() as u64, &entries)
                .unwrap_or_else(|| panic!("flip of byte {i} with {mask:#x} went unnoticed"));
            let region = regions
                .iter()
                .find(|r| r.0 <= i as u64 && (i as u64) < r.1)
                .unwrap();
            match err {
                Error::Corruption { offset, file, .. } => {
                    assert_eq!(offset, region.0, "byte {i}: {file:?}");
                    assert_eq!(file, bad);
                }
                e => panic!("byte {i}: not corruption: {e}"),
            }
        }
    }
    // verify_checksums alone names the flipped data block.
    for &(start, end) in &regions[..regions.len() - 3] {
        let mut damaged = bytes.clone();
        damaged[((start + end) / 2) as usize] ^= 0x40;
        std::fs::write(&bad, &damaged).unwrap();
        let t = Table::open(
            &*crate::util::fs::real(),
            &bad,
            2,
            bytes.len() as u64,
            Arc::new(BlockCache::new(0)),
            BlockReads::Mapped,
        )
        .unwrap();
        match t.verify_checksums() {
            Err(Error::Corruption { offset, .. }) => assert_eq!(offset, start),
            other => panic!("expected corruption at {start}, got {other:?}"),
        }
    }
    let _ = std::fs::remove_file(&path);
}

#[test]
fn random_garbage_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let (_path, entries, bytes) = small_table(dir.path());
    let bad = dir.path().join("bad.sst");
    let mut rng = StdRng::seed_from_u64(99);
    for _ in 0..300 {
        let mut damaged = bytes.clone();
        for _ in 0..rng.gen_range(1..20) {
            let i = rng.gen_range(0..damaged.len());
            damaged[i] = rng.gen();
        }
        std::fs::write(&bad, &damaged).unwrap();
        assert!(read_everything(&bad, bytes.len() as u64, &entries).is_some());
    }
}

#[test]
fn truncated_files_are_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let (path, entries, bytes) = small_table(dir.path());
    let bad = dir.path().join("short.sst");
    for len in 0..bytes.len() {
        std::fs::write(&bad, &bytes[..len]).unwrap();
        for claimed in [len as u64, bytes.len() as u64] {
            let err = read_everything(&bad, claimed, &entries)
                .unwrap_or_else(|| panic!("truncation to {len} (claimed {claimed}) unnoticed"));
            assert!(err.is_corruption(), "len {len}: {err}");
        }
    }
    // Trailing garbage after a valid table.
    let mut longer = bytes.clone();
    longer.extend_from_slice(b"garbage!");
    std::fs::write(&bad, &longer).unwrap();
    assert!(read_everything(&bad, longer.len() as u64, &entries).is_some());
    // The intact table reads back fully.
    assert!(read_everything(&path, bytes.len() as u64, &entries).is_none());
}
