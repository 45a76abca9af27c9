//! Helpers for the job modules' tests: keys and values that say where they
//! came from, the files of one kind in a database directory, and a bounded
//! wait for work the background threads do on their own.

use std::path::Path;

use crate::Db;
use std::time::{Duration, Instant};

/// Key `i`, in key order.
pub fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// A `len`-byte value naming the round that wrote key `i`, so a read shows
/// which write survived.
pub fn value(round: u32, i: u32, len: usize) -> Vec<u8> {
    let mut v = format!("r{round}-{i}-").into_bytes();
    v.resize(len, b'a' + (i % 26) as u8);
    v
}

/// Names of the files in `dir` ending in `.{ext}`, sorted.
pub fn files_named(dir: &Path, ext: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(&format!(".{ext}")))
        .collect();
    names.sort();
    names
}

/// Waits (up to a minute) until `done`; panics naming `what` if it never is.
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Asserts that keys `0..n` read `expected(i)` in `db`, naming the first
/// key that does not.
pub fn assert_every_key_reads(db: &Db, n: u32, expected: impl Fn(u32) -> Vec<u8>) {
    for i in 0..n {
        assert_eq!(db.get(key(i)).unwrap(), Some(expected(i)), "key {i}");
    }
}

/// Copies the files of database directory `from` into `to` (a copy of a
/// live store's files, as a crash would leave them).
pub fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}
