//! Tests of the job pool: jobs of several partitions in flight at once, and
//! a power cut while they are.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::test_support::{copy_dir, key, value, wait_until};
use crate::fault::gates;
use crate::util::fs::FaultFs;
use crate::{Db, Options, WriteBatch, WriteOptions};

/// Where every merge stops while its gate is closed (a split's own merge
/// too: a split merges its partition first).
const GATE: &str = "merge.inputs_open";

const KEYS: u32 = 3000;

/// Small partitions with separated values; merges only by bytes (no
/// table-count slowdown while jobs are held), four threads: a flush thread
/// and three for jobs.
fn options(partition_size: u64, unsorted_limit: u64) -> Options {
    Options::default()
        .write_buffer_size(256 << 10)
        .table_size(32 << 10)
        .min_blob_size(64)
        // Logs written by merges: each partition's own, so partition sizes
        // differ as the test needs (WALs kept as logs are shared by all).
        .values_in_wal(false)
        .unsorted_limit(unsorted_limit)
        .unsorted_slowdown_tables(40)
        .unsorted_stop_tables(80)
        .partition_size(partition_size)
        .gc_min_garbage_bytes(8 << 10)
        .background_jobs(4)
}

/// Writes a store of several partitions into `dir` and closes it cleanly,
/// with one round of overwrites of every key left in UnsortedStores. Returns
/// what every key holds and the partitions' sizes (as a split judges them).
fn several_partitions(dir: &Path) -> (BTreeMap<Vec<u8>, Vec<u8>>, Vec<u64>) {
    let db = Db::open(dir, options(48 << 10, 64 << 10)).unwrap();
    let mut model = BTreeMap::new();
    for round in 0..3 {
        for i in 0..KEYS {
            db.put(key(i), value(round, i, 120)).unwrap();
            model.insert(key(i), value(round, i, 120));
        }
        db.compact().unwrap();
    }
    wait_until("splits settle", || {
        let before = db.stats();
        std::thread::sleep(Duration::from_millis(300));
        let after = db.stats();
        (before.splits, before.merges, before.gcs) == (after.splits, after.merges, after.gcs)
    });
    // Left in the UnsortedStores, so that every partition has a merge due
    // when the store is reopened with a smaller `unsorted_limit`.
    for i in 0..KEYS {
        db.put(key(i), value(3, i, 120)).unwrap();
        model.insert(key(i), value(3, i, 120));
    }
    db.flush().unwrap();
    let s = db.stats();
    db.close().unwrap();
    assert!(s.partitions.len() >= 3, "too few partitions: {s:?}");
    (model, s.partitions.iter().map(|p| p.size_bytes).collect())
}

/// Three jobs held at once (two merges, and a split that is merging its
/// partition first), then the power cut at the `cut_after`-th file
/// operation once they go on: every write acknowledged with `sync` is
/// there after recovery, every key deleted stays deleted, and the store's
/// checksums verify. Run for cuts throughout the three jobs' work.
#[test]
fn a_power_cut_while_two_partitions_merge_and_a_third_splits_loses_nothing() {
    let template = tempfile::tempdir().unwrap();
    let (model, sizes) = several_partitions(template.path());
    // Only the largest partition passes the new `partition_size`: the
    // first pick is its split (splits go before merges no writer waits
    // for), the next two are merges of other partitions. (Should two
    // partitions tie for the largest, both split, and a merge runs beside
    // them: still three jobs of three partitions in flight.)
    let mut sorted = sizes.clone();
    sorted.sort_unstable();
    let (largest, second) = (sorted[sorted.len() - 1], sorted[sorted.len() - 2]);
    let partition_size = if largest > second {
        second + (largest - second) / 2
    } else {
        largest - 1
    };

    let mut reached_the_end = false;
    for cut_after in [1, 2, 4, 8, 16, 32, 64, 128, 256, 100_000] {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(template.path(), dir.path());
        let fs = FaultFs::new(u64::from(cut_after as u32));
        let opts = options(partition_size, 16 << 10).file_system(fs.clone());
        let gate = gates::close(GATE, dir.path());
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        assert!(
            gates::wait_reached_by(GATE, dir.path(), 3, Duration::from_secs(60)),
            "three jobs never ran at once: {:?}",
            db.stats()
        );
        let held = db.stats();
        assert_eq!(
            held.partitions.len(),
            sizes.len(),
            "a job finished while held"
        );
        // Acknowledged while the three jobs are held: overwrites and
        // deletes in every partition, each synced.
        let mut want = model.clone();
        for i in (0..KEYS).step_by(97) {
            let mut b = WriteBatch::new();
            if i % 2 == 0 {
                b.delete(key(i));
                want.remove(&key(i));
            } else {
                b.put(key(i), value(9, i, 120));
                want.insert(key(i), value(9, i, 120));
            }
            db.write(b, &WriteOptions::new().sync(true)).unwrap();
        }
        fs.cut_power_at(fs.ops() + cut_after);
        drop(gate);
        // The jobs run on until the power goes (and poisons the store), or
        // to their end.
        wait_until("the jobs end", || {
            let s = db.stats();
            s.splits > held.splits && s.merges >= held.merges + 2 || db.put(b"~", b"").is_err()
        });
        if fs.power_cut().is_none() {
            reached_the_end = true;
        }
        drop(db);
        fs.apply_power_loss().unwrap();

        let db = Db::open(dir.path(), opts).unwrap();
        let got: BTreeMap<Vec<u8>, Vec<u8>> = db
            .range::<&[u8], _>(..)
            .unwrap()
            .map(Result::unwrap)
            .filter(|(k, _)| k.as_slice() != b"~")
            .collect();
        let ctx = format!("power cut {cut_after} operations after the jobs went on");
        assert_eq!(got.len(), want.len(), "{ctx}: key count");
        for (k, v) in &want {
            assert_eq!(
                got.get(k),
                Some(v),
                "{ctx}: key {}",
                String::from_utf8_lossy(k)
            );
            assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "{ctx}: get");
        }
        db.verify_checksums().unwrap();
        db.close().unwrap();
    }
    assert!(
        reached_the_end,
        "every trial's cut came before the jobs ended"
    );
}
