//! Background work keeps pace with a sustained overwrite load (issue 36):
//! with tiny knobs, so that merges are due most of the time, splits and
//! value-log GC still run, and when the writes stop every partition is near
//! `partition_size` and the files on disk near the live data. It checks the
//! outcome the job policy (`background::policy`) is for; the policy's
//! decisions themselves are unit-tested there.

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::Rng;
use weft::{Db, Options};

const PARTITION_SIZE: u64 = 256 << 10;
const KEYS: u32 = 6_000;
/// Values of 100 to 300 bytes, all separated (`min_blob_size` 64).
const VALUE_SIZES: std::ops::RangeInclusive<usize> = 100..=300;

/// A partition may pass `partition_size` by what lands in it while its
/// split waits its turn (a few jobs, see `background::policy`), not more.
const PARTITION_BOUND: f64 = 2.0;
/// Tables and value logs on disk against the live keys and values: a log
/// may stay until it is `gc_garbage_ratio` dead (half, by default), a
/// partition's victims until they hold `gc_min_garbage_bytes` (by default
/// an eighth of `partition_size`), and the UnsortedStores hold overwritten
/// versions until their merge. With a minimum fixed at 64 MiB instead, no
/// log is ever collected here and the logs grow to several times the live
/// data.
const SPACE_BOUND: f64 = 2.0;

/// Tiny knobs, value separation on, GC's thresholds (`gc_garbage_ratio`,
/// `gc_min_garbage_bytes`) left at their defaults: those must scale with
/// `partition_size` (a fixed 64 MiB minimum never lets GC run here).
fn options() -> Options {
    Options::default()
        .write_buffer_size(64 << 10)
        .table_size(64 << 10)
        .unsorted_limit(256 << 10)
        .partition_size(PARTITION_SIZE)
        .min_blob_size(64)
}

fn key(i: u32) -> Vec<u8> {
    // A bijection of u32, so distinct keys in a scattered order.
    format!("key{:010}", i.wrapping_mul(2_654_435_761)).into_bytes()
}

/// Bytes of the files in `dir` whose name satisfies `pred`. The space on
/// disk counted against the live data is tables (`.sst`) and value logs
/// (`.vlog`): what merges, splits and GC are responsible for. WALs are
/// left out (each reserves a mapped window of several MiB whatever it
/// holds, more than this test's live data), and so is the manifest.
fn bytes_where(dir: &Path, pred: impl Fn(&str) -> bool) -> u64 {
    common::files_where(dir, pred)
        .iter()
        // A file deleted since the listing (an input of a finished job) no
        // longer counts.
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum()
}

#[test]
fn splits_and_gc_keep_pace_with_sustained_overwrites() {
    let passes = common::env_usize("WEFT_PACE_PASSES", 10) as u32;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    let mut rng = common::rng(7);
    let mut sizes = vec![0usize; KEYS as usize];
    for pass in 0..=passes {
        for n in 0..KEYS {
            let i = if pass == 0 { n } else { rng.gen_range(0..KEYS) };
            let len = rng.gen_range(VALUE_SIZES);
            sizes[i as usize] = len;
            db.put(key(i), vec![b'a' + (pass % 26) as u8; len]).unwrap();
        }
    }
    // Right after the last write: what the background work kept up with,
    // not what it catches up on once the load is over.
    let s = db.stats();
    let disk = bytes_where(dir.path(), |n| n.ends_with(".sst") || n.ends_with(".vlog"));
    let logs = bytes_where(dir.path(), |n| n.ends_with(".vlog"));
    let live: u64 = sizes.iter().map(|v| (key(0).len() + v) as u64).sum();
    let psizes: Vec<u64> = s.partitions.iter().map(|p| p.size_bytes).collect();
    let summary = format!(
        "{} merges, {} splits, {} GCs, {} partitions of {psizes:?} bytes \
         (partition_size {}), {disk} bytes of tables and logs ({logs} of logs) \
         for {live} live ({:.2}x), {} GC bytes written, {} write stalls",
        s.merges,
        s.splits,
        s.gcs,
        s.partitions.len(),
        PARTITION_SIZE,
        disk as f64 / live as f64,
        s.gc_bytes_written,
        s.write_stalls,
    );
    eprintln!("{summary}");
    assert!(s.gcs >= 1, "no GC ran: {summary}");
    assert!(s.splits >= 1, "no split ran: {summary}");
    for p in &s.partitions {
        assert!(
            p.size_bytes as f64 <= PARTITION_BOUND * PARTITION_SIZE as f64,
            "partition {} holds {} bytes: {summary}",
            p.id,
            p.size_bytes
        );
    }
    assert!(
        disk as f64 <= SPACE_BOUND * live as f64,
        "space on disk: {summary}"
    );
}
