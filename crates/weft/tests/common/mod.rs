//! Shared helpers for Weft's integration tests: seeds, RNG, the reference
//! model, option presets, file surgery and failure reporting.
#![allow(dead_code)]

use std::collections::{BTreeMap, VecDeque};
use std::fs;
use std::io::{BufRead, BufReader};
use std::io::{Read, Seek, SeekFrom, Write};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Once;
use std::time::{Duration, Instant};

pub use rand::rngs::StdRng;
#[allow(unused_imports)]
pub use rand::{Rng, SeedableRng};

use weft::{Db, Error, MemtableKind, Options, ReadOptions, WriteBatch};

/// The reference model: the state a correct database must show.
pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// One write of a generated history (the crash and power-cut tests), as
/// the model applies it and as it goes into a batch.
#[derive(Clone, Debug)]
pub enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    /// Deletes every key from the first (inclusive) to the second.
    DeleteRange(Vec<u8>, Vec<u8>),
}

/// Applies `ops`, in order, to `model`.
pub fn apply_ops(model: &mut Model, ops: &[Op]) {
    for op in ops {
        match op {
            Op::Put(k, v) => {
                model.insert(k.clone(), v.clone());
            }
            Op::Delete(k) => {
                model.remove(k);
            }
            Op::DeleteRange(start, end) => model.retain(|k, _| k < start || k >= end),
        }
    }
}

/// Adds `ops`, in order, to `batch`.
pub fn add_ops(batch: &mut WriteBatch, ops: &[Op]) {
    for op in ops {
        match op {
            Op::Put(k, v) => batch.put(k, v),
            Op::Delete(k) => batch.delete(k),
            Op::DeleteRange(start, end) => batch.delete_range(start, end),
        };
    }
}

/// Seeds to run: `WEFT_SEED=<u64>` replaces the defaults with that one seed.
pub fn seeds(defaults: &[u64]) -> Vec<u64> {
    match std::env::var("WEFT_SEED") {
        Ok(s) => vec![s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("WEFT_SEED={s:?} is not a u64"))],
        Err(_) => defaults.to_vec(),
    }
}

/// An integer knob from the environment, or `default`.
pub fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={s:?} is not an integer")),
        Err(_) => default,
    }
}

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// Every memtable kind the build supports (new kinds are picked up
/// automatically).
pub fn kinds() -> Vec<MemtableKind> {
    MemtableKind::ALL.to_vec()
}

/// Options so small that flushes, merges and multi-table partitions happen
/// constantly.
pub fn tiny_options(kind: MemtableKind) -> Options {
    Options::default()
        .memtable(kind)
        .write_buffer_size(8 << 10)
        .table_size(16 << 10)
        .unsorted_limit(32 << 10)
        .block_size(256)
        .block_cache_size(256 << 10)
        // Separate most values and collect garbage early, so every suite
        // that uses these options also exercises value logs and GC.
        .min_blob_size(48)
        .gc_min_garbage_bytes(4 << 10)
        .gc_garbage_ratio(0.3)
        // Split partitions early and often (UniKV's dynamic range partitioning).
        .partition_size(8 << 10)
        // Consolidate UnsortedStores for scans early (UniKV's scanMergeLimit).
        .scan_merge_limit(2)
}

/// Renders a byte string readably (ASCII kept, the rest as `\xNN`).
pub fn show(b: &[u8]) -> String {
    let mut s = String::from("\"");
    for &c in b {
        if c.is_ascii_graphic() && c != b'"' && c != b'\\' {
            s.push(c as char);
        } else {
            s.push_str(&format!("\\x{c:02x}"));
        }
    }
    s.push('"');
    s
}

/// Records the last operations of a randomized test and, if the test panics,
/// prints them with the seed needed to replay it.
pub struct Trace {
    pub name: String,
    pub seed: u64,
    pub ops: VecDeque<String>,
    pub cap: usize,
    pub step: usize,
}

impl Trace {
    pub fn new(name: impl Into<String>, seed: u64) -> Trace {
        Trace {
            name: name.into(),
            seed,
            ops: VecDeque::new(),
            cap: 60,
            step: 0,
        }
    }
    pub fn push(&mut self, op: impl Into<String>) {
        if self.ops.len() == self.cap {
            self.ops.pop_front();
        }
        let op = op.into();
        self.ops.push_back(format!("#{} {}", self.step, op));
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "\n=== {} FAILED with seed {} at step {} ===\nreplay: WEFT_SEED={} cargo test -p weft --test <file> {}\nlast operations (oldest first):",
                self.name, self.seed, self.step, self.seed, self.name
            );
            for op in &self.ops {
                eprintln!("  {op}");
            }
        }
    }
}

/// Prints `what` (which should name the seed and the `WEFT_SEED=` needed to
/// replay) if the current thread panics while the guard lives.
pub struct SeedGuard {
    pub what: String,
}

impl SeedGuard {
    pub fn new(what: impl Into<String>) -> SeedGuard {
        SeedGuard { what: what.into() }
    }
}

impl Drop for SeedGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("\n=== FAILED: {} ===", self.what);
        }
    }
}

static PANICS: AtomicUsize = AtomicUsize::new(0);
static HOOK: Once = Once::new();

thread_local! {
    static TEST_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the current thread as a test thread: its panics fail its own test
/// the usual way and are not counted by the hook.
pub fn mark_test_thread() {
    TEST_THREAD.with(|t| t.set(true));
}

/// Installs (once per process) a panic hook that counts panics on threads
/// the tests did not create (the engine's background threads), whose panics
/// would not otherwise fail a test. Also marks the calling thread as a test
/// thread. Threads spawned by tests must call [`mark_test_thread`].
pub fn install_panic_counter() {
    mark_test_thread();
    HOOK.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !TEST_THREAD.with(|t| t.get()) {
                PANICS.fetch_add(1, Ordering::SeqCst);
            }
            prev(info);
        }));
    });
}

/// Panics seen so far on non-test threads (see [`install_panic_counter`]).
pub fn panic_count() -> usize {
    PANICS.load(Ordering::SeqCst)
}

/// Full forward scan through `range(..)` (unwraps errors).
pub fn scan_all(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.range::<&[u8], _>(..)
        .expect("range(..)")
        .map(|r| r.expect("scan item"))
        .collect()
}

/// Full forward scan at `opts` through the cursor API.
pub fn scan_cursor(db: &Db, opts: &ReadOptions) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter(opts).expect("iter");
    it.seek_to_first().expect("seek_to_first");
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().expect("next");
    }
    out
}

pub fn model_vec(m: &Model) -> Vec<(Vec<u8>, Vec<u8>)> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Asserts the database's whole content equals `model`, with a readable diff.
pub fn assert_db_eq(db: &Db, model: &Model, ctx: &str) {
    let got = scan_all(db);
    assert_pairs_eq(&got, &model_vec(model), ctx);
    for (k, v) in model {
        assert_eq!(
            db.get(k).expect("get").as_deref(),
            Some(&v[..]),
            "{ctx}: get({})",
            show(k)
        );
    }
}

pub fn assert_pairs_eq(got: &[(Vec<u8>, Vec<u8>)], want: &[(Vec<u8>, Vec<u8>)], ctx: &str) {
    if got == want {
        return;
    }
    let mut i = 0;
    while i < got.len() && i < want.len() && got[i] == want[i] {
        i += 1;
    }
    let g = got
        .get(i)
        .map(|(k, v)| format!("{} = {}", show(k), show(v)));
    let w = want
        .get(i)
        .map(|(k, v)| format!("{} = {}", show(k), show(v)));
    panic!(
        "{ctx}: scan differs at index {i} (got {} pairs, want {}): got {:?}, want {:?}",
        got.len(),
        want.len(),
        g,
        w
    );
}

/// True when `k` lies within `(lo, hi)`.
pub fn in_bounds(k: &[u8], lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    let lo_ok = match lo {
        Bound::Unbounded => true,
        Bound::Included(b) => k >= &b[..],
        Bound::Excluded(b) => k > &b[..],
    };
    let hi_ok = match hi {
        Bound::Unbounded => true,
        Bound::Included(b) => k <= &b[..],
        Bound::Excluded(b) => k < &b[..],
    };
    lo_ok && hi_ok
}

pub fn show_bound(b: &Bound<Vec<u8>>) -> String {
    match b {
        Bound::Unbounded => "..".into(),
        Bound::Included(k) => format!("Incl({})", show(k)),
        Bound::Excluded(k) => format!("Excl({})", show(k)),
    }
}

// ---------------------------------------------------------------- files ----

/// Files of the directory whose name satisfies `pred`, sorted by name.
pub fn files_where(dir: &Path, pred: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(&pred))
        .collect();
    v.sort();
    v
}

pub fn wal_files(dir: &Path) -> Vec<PathBuf> {
    files_where(dir, |n| n.ends_with(".log"))
}

pub fn sst_files(dir: &Path) -> Vec<PathBuf> {
    files_where(dir, |n| n.ends_with(".sst"))
}

/// The live manifest, as named by CURRENT.
pub fn current_manifest(dir: &Path) -> PathBuf {
    let name = fs::read_to_string(weft::internals::current_path(dir)).expect("read CURRENT");
    dir.join(name.trim())
}

pub fn file_len(p: &Path) -> u64 {
    fs::metadata(p).expect("metadata").len()
}

/// Copies every file of `src` except LOCK into `dst` (created if needed):
/// a crash image of a live database whose writes have reached the OS.
pub fn copy_dir(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).expect("create image dir");
    for e in fs::read_dir(src).expect("read_dir") {
        let e = e.expect("dir entry");
        let name = e.file_name();
        if name == "LOCK" || !e.file_type().expect("file type").is_file() {
            continue;
        }
        match fs::copy(e.path(), dst.join(&name)) {
            Ok(_) => {}
            // Deleted by the engine between listing and copying: obsolete.
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => panic!("copy {}: {err}", e.path().display()),
        }
    }
}

/// Inverts every bit of the byte at `offset`.
pub fn flip_byte(path: &Path, offset: u64) {
    let mut f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open for flip");
    let mut b = [0u8; 1];
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.read_exact(&mut b).expect("read byte to flip");
    b[0] ^= 0xff;
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.write_all(&b).unwrap();
    f.sync_all().unwrap();
}

pub fn truncate_file(path: &Path, len: u64) {
    let f = fs::OpenOptions::new().write(true).open(path).expect("open");
    f.set_len(len).expect("set_len");
}

/// Asserts `e` is `Error::Corruption` naming the file `expected`.
pub fn assert_corruption_in(e: &Error, expected: &Path, ctx: &str) {
    match e {
        Error::Corruption { file, offset, .. } => {
            assert_eq!(
                file.file_name(),
                expected.file_name(),
                "{ctx}: Corruption names {} but the damaged file is {} (error: {e})",
                file.display(),
                expected.display()
            );
            if let Ok(len) = fs::metadata(expected).map(|m| m.len()) {
                assert!(
                    *offset <= len,
                    "{ctx}: Corruption offset {offset} is beyond the file's {len} bytes ({e})"
                );
            }
        }
        other => panic!(
            "{ctx}: expected Error::Corruption in {}, got {other:?}",
            expected.display()
        ),
    }
}

// ------------------------------------------------- child processes ----

/// Spawns this test binary (the crash tests' re-executed children) running only test `name` with `envs`; stdout is
/// piped (each line is sent on the returned channel), stderr goes to a file.
pub fn spawn_child(
    name: &str,
    envs: &[(&str, String)],
    stderr_file: &Path,
) -> (Child, mpsc::Receiver<String>, std::thread::JoinHandle<()>) {
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", name, "--nocapture", "--test-threads=1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(
            std::fs::File::create(stderr_file).expect("stderr file"),
        ));
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn child");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx, reader)
}

pub fn child_stderr(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// Waits up to `timeout` for a line equal to `want`; returns the other lines
/// seen meanwhile. `None` if the child closed stdout first or time ran out.
pub fn wait_for_line(
    rx: &mpsc::Receiver<String>,
    want: &str,
    timeout: Duration,
    seen: &mut Vec<String>,
) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) if l.trim().ends_with(want) => return true,
            Ok(l) => seen.push(l),
            Err(_) => return false,
        }
    }
}
