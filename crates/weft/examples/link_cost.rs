//! What linking a `teks` memtable's new keys into its sorted index costs,
//! per key, on one thread with nothing else running.
//!
//! ```text
//! cargo run --release -p weft --example link_cost            # 1 M keys
//! N=200000 BATCH=1024 cargo run --release -p weft --example link_cost
//! ```
//!
//! The background worker is frozen; the program puts `N` new keys (16 B,
//! values of 256 B, in hash order as the memtable benchmark's `teks256`
//! part does) and after every `BATCH` puts links the queue itself through
//! `prepare_scan`, as a scan would. Only the linking is timed. Five rounds,
//! one line each. The memtable benchmark measures the worker only through
//! the writers it slows down, on a machine where its noise (±20 %) hides
//! changes of this size; this isolates it.

use std::time::{Duration, Instant};

use weft::key::{ValueKind, MAX_SEQUENCE};
use weft::memtable::teks::TeksMemtable;
use weft::memtable::Memtable;

/// SplitMix64: the memtable benchmark's key scrambler.
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let n = env_u64("N", 1_000_000);
    let batch = env_u64("BATCH", 8192).max(1);
    let value = [0xa5u8; 256];
    for _round in 0..5 {
        // A write buffer large enough that the memtable never reports full.
        let m = TeksMemtable::new(4 << 30);
        m.freeze_worker(true);
        let mut linking = Duration::ZERO;
        for i in 0..n {
            let mut key = [0u8; 16];
            key[..8].copy_from_slice(&splitmix(i).to_be_bytes());
            key[8..].copy_from_slice(&splitmix(i ^ 0x5555_5555).to_be_bytes());
            m.insert(&key, i + 1, ValueKind::Put, &value);
            if (i + 1) % batch == 0 || i + 1 == n {
                let start = Instant::now();
                m.prepare_scan(MAX_SEQUENCE);
                linking += start.elapsed();
            }
        }
        let stats = m.weave_stats();
        assert_eq!(stats.linked, stats.keys, "every key linked");
        println!(
            "linked {} keys in batches of {batch}: {:.1} ns per key",
            stats.linked,
            linking.as_nanos() as f64 / n as f64
        );
    }
}
