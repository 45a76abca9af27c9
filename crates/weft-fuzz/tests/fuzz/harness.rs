//! What every target shares: its time bound, the mutations the round-trip
//! targets apply to valid encodings, and the checks on a decoder's result.

use std::time::Duration;

use bolero::generator::TypeGenerator;
use weft::Error;

/// How long each target generates random inputs under `cargo test`, after
/// its corpus: `WEFT_FUZZ_SECS` (default 2; bolero's own
/// `BOLERO_RANDOM_TEST_TIME_MS` or `BOLERO_RANDOM_ITERATIONS` take
/// precedence). All targets together stay within CI's budget at the
/// default; a long run raises it.
pub fn test_time() -> Duration {
    let secs = std::env::var("WEFT_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .unwrap_or(2.0);
    Duration::from_secs_f64(secs)
}

/// Prints how many inputs a target ran (seen with `--nocapture`; the
/// fuzzing journal's counts come from here).
pub struct Count {
    name: &'static str,
    n: std::sync::atomic::AtomicU64,
    start: std::time::Instant,
}

impl Count {
    /// A counter for target `name`.
    pub fn new(name: &'static str) -> Count {
        Count {
            name,
            n: Default::default(),
            start: std::time::Instant::now(),
        }
    }

    /// One more input.
    pub fn tick(&self) {
        self.n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Drop for Count {
    fn drop(&mut self) {
        eprintln!(
            "fuzz target {}: {} inputs in {:.1?}",
            self.name,
            self.n.load(std::sync::atomic::Ordering::Relaxed),
            self.start.elapsed()
        );
    }
}

/// Runs a target: `check!(name = ..)` with the time bound, the input
/// counted and the allocation guard armed.
#[macro_export]
macro_rules! fuzz_bytes {
    ($name:literal, $prop:expr) => {{
        let count = $crate::harness::Count::new($name);
        let prop = $prop;
        bolero::check!(name = $name)
            .with_test_time($crate::harness::test_time())
            .for_each(|input: &[u8]| {
                count.tick();
                weft::internals::fuzz::guarded(input, || prop(input))
            });
    }};
}

/// Runs a target over generated values of type `$ty`.
#[macro_export]
macro_rules! fuzz_typed {
    ($name:literal, $ty:ty, $prop:expr) => {{
        let count = $crate::harness::Count::new($name);
        let prop = $prop;
        bolero::check!(name = $name)
            .with_test_time($crate::harness::test_time())
            .with_type::<$ty>()
            .for_each(|value: &$ty| {
                count.tick();
                weft::internals::fuzz::guarded(&[], || prop(value))
            });
    }};
}

/// One change to a valid encoding.
#[derive(Debug, Clone, TypeGenerator)]
pub enum Mutation {
    /// XOR the byte at `at` (modulo the length) with `xor` (never 0).
    Flip {
        /// Position, modulo the length.
        at: u32,
        /// Bits to flip (0 is taken as 1).
        xor: u8,
    },
    /// Cut the encoding to `at` bytes (modulo the length + 1).
    Truncate {
        /// New length, modulo the length + 1.
        at: u32,
    },
    /// Append bytes.
    Append(#[generator(bolero::produce::<Vec<u8>>().with().len(1usize..=16))] Vec<u8>),
    /// Set `len` bytes from `at` to zero (a lost page, a zeroed sector).
    Zero {
        /// Start, modulo the length.
        at: u32,
        /// Bytes zeroed (clamped to the end).
        len: u16,
    },
}

impl Mutation {
    /// `bytes`, changed; `false` if nothing changed.
    pub fn apply(&self, bytes: &mut Vec<u8>) -> bool {
        let n = bytes.len();
        match *self {
            Mutation::Flip { at, xor } => {
                if n == 0 {
                    return false;
                }
                bytes[at as usize % n] ^= xor.max(1);
                true
            }
            Mutation::Truncate { at } => {
                let at = at as usize % (n + 1);
                bytes.truncate(at);
                at < n
            }
            Mutation::Append(ref extra) => {
                bytes.extend_from_slice(extra);
                true
            }
            Mutation::Zero { at, len } => {
                if n == 0 {
                    return false;
                }
                let at = at as usize % n;
                let end = (at + usize::from(len)).min(n);
                let changed = bytes[at..end].iter().any(|&b| b != 0);
                bytes[at..end].fill(0);
                changed
            }
        }
    }

    /// True for a change a checksum must catch whatever the bytes (a
    /// CRC32C catches every error burst of up to 32 bits).
    pub fn is_single_byte(&self) -> bool {
        matches!(self, Mutation::Flip { .. })
    }
}

/// Asserts a decoder's error is corruption (what every decoder of bytes
/// from disk must report).
#[track_caller]
pub fn must_be_corruption(e: &Error) {
    assert!(
        e.is_corruption(),
        "a decoder returned a non-corruption error: {e}"
    );
}

/// `Ok` or corruption; the value if `Ok`.
#[track_caller]
pub fn ok_or_corruption<T>(r: weft::Result<T>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            must_be_corruption(&e);
            None
        }
    }
}

/// Splits `input` into chunks, each led by its length byte (a short last
/// one takes what is left): how the `*_records` targets turn one fuzz
/// input into several payloads, each framed with a valid checksum.
pub fn chunks(input: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = input;
    while let Some((&len, tail)) = rest.split_first() {
        let n = usize::from(len).min(tail.len());
        out.push(tail[..n].to_vec());
        rest = &tail[n..];
    }
    out
}

/// A scratch directory for targets that go through files (on tmpfs when
/// there is one: thousands of small files a second).
pub fn scratch() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::tempdir_in(shm) {
            return d;
        }
    }
    tempfile::tempdir().unwrap()
}
