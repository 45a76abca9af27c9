//! Tests of the layout's parts: tables, partitions, versions, the
//! UnsortedStore index.

use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::key::ValueKind;
use crate::table::{BlockCache, BlockReads};
use crate::table::{TableBuilder, TableOptions};

/// An index change is made to a copy while readers keep loading the
/// index, and shows only once it is swapped in.
#[test]
fn an_index_change_runs_beside_readers_and_then_shows() {
    let index: SharedIndex = shared_index(hash_index::HashIndex::with_capacity(1000));
    let keys: Vec<Vec<u8>> = (0..1000u32)
        .map(|i| format!("key{i:06}").into_bytes())
        .collect();
    let lookup = |key: &[u8]| {
        let mut out = Vec::new();
        index.load().lookup(key, &mut out);
        out
    };
    // A reader that loaded the index before the change keeps its view.
    let before = index.load_full();
    change_index(&index, |copy| {
        copy.add_table(7, keys.iter().map(Vec::as_slice)).unwrap();
        assert!(lookup(b"key000042").is_empty(), "the change shows early");
    });
    assert_eq!(lookup(b"key000042"), vec![7]);
    assert_eq!(
        before.entries(),
        0,
        "a loaded index changed under its reader"
    );
    change_index(&index, |copy| {
        copy.remove_tables(&[7]);
    });
    assert_eq!(index.load().entries(), 0);
    assert!(lookup(b"key000042").is_empty());
}

#[test]
fn key_list_keeps_distinct_consecutive_keys() {
    let mut k = KeyList::default();
    for key in [&b"a"[..], b"a", b"", b"b", b"b", b"ab"] {
        k.push_distinct(key);
    }
    let got: Vec<&[u8]> = k.iter().collect();
    assert_eq!(got, vec![&b"a"[..], b"", b"b", b"ab"]);
    assert_eq!(k.len(), 4);
}

fn write_table(
    dir: &Path,
    number: u64,
    keys: &[Vec<u8>],
    cache: &Arc<BlockCache>,
) -> Arc<TableFile> {
    let entries: Vec<_> = (keys.iter().enumerate())
        .map(|(i, k)| (k.clone(), i as u64 + 1, ValueKind::Put, b"v".to_vec()))
        .collect();
    write_entries(dir, number, &entries, cache)
}

/// A mapped table of `entries`, which must be in internal order.
pub(super) fn write_entries(
    dir: &Path,
    number: u64,
    entries: &[(Vec<u8>, u64, ValueKind, Vec<u8>)],
    cache: &Arc<BlockCache>,
) -> Arc<TableFile> {
    let path = crate::filename::table_path(dir, number);
    let mut b =
        TableBuilder::create(&*crate::util::fs::real(), &path, TableOptions::default()).unwrap();
    for (k, seq, kind, v) in entries {
        b.add(k, *seq, *kind, v).unwrap();
    }
    let s = b.finish().unwrap();
    let meta = FileMeta {
        number,
        size: s.file_size,
        entries: s.entries,
        smallest: s.smallest,
        largest: s.largest,
    };
    TableFile::open(
        &crate::util::fs::real(),
        dir,
        meta,
        cache,
        BlockReads::Mapped,
    )
    .unwrap()
}

/// A scan opens one UnsortedStore cursor per table of the fullest
/// partition (tables of different partitions share runs), plus one for
/// the SortedStores, and still sees every entry once; a table out of
/// key order with its run gets a run of its own.
#[test]
fn scans_string_partitions_unsorted_tables_into_runs() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Arc::new(BlockCache::new(1 << 20));
    let keys = |prefix: &str, n: usize| -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| format!("{prefix}{i:03}").into_bytes())
            .collect()
    };
    let mut number = 0;
    let mut table = |ks: &[Vec<u8>]| {
        number += 1;
        write_table(dir.path(), number, ks, &cache)
    };
    // Three partitions: 2, 3 and 1 UnsortedStore tables (oldest first),
    // and a SortedStore table in the middle one.
    let mut a = Partition::new(1, Vec::new(), Some(b"g".to_vec()));
    a.unsorted = vec![table(&keys("a", 50)), table(&keys("b", 50))];
    let mut b = Partition::new(2, b"g".to_vec(), Some(b"p".to_vec()));
    b.unsorted = vec![
        table(&keys("h", 50)),
        table(&keys("i", 50)),
        table(&keys("j", 50)),
    ];
    b.sorted = vec![table(&keys("k", 50))];
    let mut c = Partition::new(3, b"p".to_vec(), None);
    c.unsorted = vec![table(&keys("q", 50))];
    let mut v = Version::new_single();
    v.partitions = vec![Arc::new(a), Arc::new(b), Arc::new(c)];

    let drain = |v: &Version| -> (usize, Vec<Vec<u8>>) {
        let mut iters = v.iters(true, None);
        let mut all = Vec::new();
        for it in &mut iters {
            it.seek_to_first().unwrap();
            let mut last: Option<Vec<u8>> = None;
            while it.valid() {
                let k = it.user_key().to_vec();
                assert!(last.as_ref().is_none_or(|l| *l < k), "a run goes back");
                all.push(k.clone());
                last = Some(k);
                it.next().unwrap();
            }
        }
        all.sort();
        (iters.len(), all)
    };
    let mut want: Vec<Vec<u8>> = ["a", "b", "h", "i", "j", "k", "q"]
        .iter()
        .flat_map(|p| keys(p, 50))
        .collect();
    want.sort();
    let (cursors, got) = drain(&v);
    assert_eq!(
        cursors,
        3 + 1,
        "three runs of UnsortedStore tables, one sorted"
    );
    assert_eq!(got, want);

    // A third partition whose newest table reaches back before the
    // middle partition's: it cannot follow in that run.
    let mut c = Partition::new(3, b"p".to_vec(), None);
    c.unsorted = vec![table(&keys("q", 50)), table(&keys("c", 50))];
    v.partitions[2] = Arc::new(c);
    let (cursors, got) = drain(&v);
    assert_eq!(cursors, 3 + 1 + 1, "the stray gets a run of its own");
    want.extend(keys("c", 50));
    want.sort();
    assert_eq!(got, want);
}

/// A flush far larger than the index (small values: many keys per
/// table) must leave it below its growth load, not chain every lookup
/// through overflow entries: the rebuild comes before the insert and
/// is sized for the new table's keys too.
#[test]
fn index_grown_by_a_large_table_stays_at_its_target_load() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Arc::new(BlockCache::new(1 << 20));
    let mut index = hash_index::HashIndex::with_capacity(INITIAL_INDEX_CAPACITY);
    let mut older: Vec<Arc<TableFile>> = Vec::new();
    for (t, n) in [
        (20u64, 1000usize),
        (21, 40 * INITIAL_INDEX_CAPACITY),
        (22, 1000),
    ] {
        let keys: Vec<Vec<u8>> = (0..n)
            .map(|i| format!("t{t}k{i:08}").into_bytes())
            .collect();
        let table = write_table(dir.path(), t, &keys, &cache);
        let list = table_user_keys(&table).unwrap();
        index_add_table(&mut index, &older, &table.meta, &list, 0).unwrap();
        older.push(table);
        assert!(
            index.load_factor() <= INDEX_GROW_LOAD,
            "load {} after table {t} of {n} keys",
            index.load_factor()
        );
    }
    // Displacement keeps chains nearly empty at the target load.
    let total = 2000 + 40 * INITIAL_INDEX_CAPACITY;
    assert!(
        index.overflow_entries() * 1000 < total,
        "{}",
        index.overflow_entries()
    );
}

/// UniKV §III-G: the index rebuilt on open (from the tables) must equal
/// the one flushes maintained incrementally before the crash.
#[test]
fn index_rebuilt_from_tables_equals_the_incremental_one() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Arc::new(BlockCache::new(1 << 20));
    let mut incremental = hash_index::HashIndex::with_capacity(INITIAL_INDEX_CAPACITY);
    let mut tables = Vec::new();
    for t in 0..6u64 {
        let number = 10 + t;
        let path = crate::filename::table_path(dir.path(), number);
        let mut b = TableBuilder::create(&*crate::util::fs::real(), &path, TableOptions::default())
            .unwrap();
        let mut keys = KeyList::default();
        for i in 0..500u64 {
            let k = format!("key{:05}", (i * 31 + t * 7) % 900);
            keys.push_distinct(k.as_bytes());
            let _ = &k;
        }
        let mut sorted: Vec<&[u8]> = keys.iter().collect();
        sorted.sort();
        sorted.dedup();
        let mut written = KeyList::default();
        for (i, k) in sorted.iter().enumerate() {
            b.add(k, 1000 * t + i as u64 + 1, ValueKind::Put, b"v")
                .unwrap();
            written.push_distinct(k);
        }
        let s = b.finish().unwrap();
        incremental.add_table(number, written.iter()).unwrap();
        let meta = FileMeta {
            number,
            size: s.file_size,
            entries: s.entries,
            smallest: s.smallest,
            largest: s.largest,
        };
        tables.push(
            TableFile::open(
                &crate::util::fs::real(),
                dir.path(),
                meta,
                &cache,
                BlockReads::Mapped,
            )
            .unwrap(),
        );
    }
    let rebuilt = build_index(&tables).unwrap();
    // Same tables and, for every key, the same candidates.
    let mut a = Vec::new();
    let mut b = Vec::new();
    for i in 0..1000u64 {
        let k = format!("key{i:05}");
        a.clear();
        b.clear();
        incremental.lookup(k.as_bytes(), &mut a);
        rebuilt.lookup(k.as_bytes(), &mut b);
        assert_eq!(a, b, "{k}");
    }
    assert_eq!(incremental.tables(), rebuilt.tables());
}
