//! Fuzz targets for the bytes the server takes from the network (the RESP
//! request parser) and from the engine (its metadata records), in the
//! engine's harness: bolero targets that run under plain `cargo test` for
//! a bounded time (`WEFT_FUZZ_SECS`, default 2 s each) and under libFuzzer
//! with `cargo bolero test` (see `crates/weft/tests/fuzz/README.md`).
//! Supersedes `fuzz/fuzz_targets/resp_parser.rs`'s property, which needs
//! nightly to build; that crate is kept for `cargo fuzz` users.

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use bolero::check;
use weft::internals::fuzz::{guarded, GuardedAlloc};
use weft_server::encoding;
use weft_server::resp::{Limits, Parser};

#[global_allocator]
static ALLOC: GuardedAlloc = GuardedAlloc;

fn test_time() -> Duration {
    let secs = std::env::var("WEFT_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .unwrap_or(2.0);
    Duration::from_secs_f64(secs)
}

/// Counts a target's inputs; prints them at the end (`--nocapture`).
struct Count(&'static str, std::sync::atomic::AtomicU64);

impl Drop for Count {
    fn drop(&mut self) {
        let n = self.1.load(std::sync::atomic::Ordering::Relaxed);
        eprintln!("fuzz target {}: {n} inputs", self.0);
    }
}

const LIMITS: Limits = Limits {
    max_bulk: 256,
    max_args: 64,
    max_inline: 512,
};

type Requests = Vec<Vec<Vec<u8>>>;

/// Feeds `chunks` one after the other as reads from a socket: the
/// requests parsed and the error that ended the stream, if any.
fn run(chunks: &[&[u8]], limits: Limits) -> (Requests, Option<String>) {
    let mut p = Parser::new(limits);
    let mut buf = Vec::new();
    let mut pos = 0;
    let mut got = Vec::new();
    for c in chunks {
        buf.extend_from_slice(c);
        loop {
            match p.next(&buf, &mut pos) {
                Ok(Some(args)) => {
                    assert!(!args.is_empty());
                    assert!(args.len() <= limits.max_args.max(limits.max_inline));
                    assert!(args
                        .iter()
                        .all(|a| a.len() <= limits.max_bulk.max(limits.max_inline)));
                    got.push(args.clone());
                    // Reused buffers must not leak into the next request.
                    p.recycle(args);
                }
                Ok(None) => break,
                Err(e) => return (got, Some(e.to_string())),
            }
        }
        assert!(pos <= buf.len());
        assert!(p.held() <= buf.len());
    }
    (got, None)
}

/// Any bytes, fed whole, split at a point the input picks, or byte by
/// byte, parse to the same requests and the same error.
fn check_stream(data: &[u8]) {
    let Some((&cut, input)) = data.split_first() else {
        return;
    };
    let cut = (cut as usize * input.len()) / 255;
    let whole = run(&[input], LIMITS);
    let split = run(&[&input[..cut], &input[cut..]], LIMITS);
    assert_eq!(whole, split);
    let bytewise: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(whole, run(&bytewise, LIMITS));
}

#[test]
fn resp_request() {
    let n = Count("resp_request", Default::default());
    check!(name = "resp_request")
        .with_test_time(test_time())
        .for_each(|input: &[u8]| {
            n.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            guarded(input, || check_stream(input));
        });
}

fn encode(requests: &Requests) -> Vec<u8> {
    let mut out = Vec::new();
    for args in requests {
        out.extend(format!("*{}\r\n", args.len()).bytes());
        for a in args {
            out.extend(format!("${}\r\n", a.len()).bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
    }
    out
}

/// Requests a client sends parse back exactly; any change to their bytes
/// still parses the same whole or split.
#[test]
fn resp_round_trip() {
    let n = Count("resp_round_trip", Default::default());
    check!(name = "resp_round_trip")
        .with_test_time(test_time())
        .with_type::<(Requests, u16, u8, u8)>()
        .for_each(|(requests, at, xor, cut): &(Requests, u16, u8, u8)| {
            n.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let requests: Requests = requests
                .iter()
                .filter(|r| !r.is_empty() && r.len() <= LIMITS.max_args)
                .map(|r| {
                    r.iter()
                        .map(|a| a[..a.len().min(LIMITS.max_bulk)].to_vec())
                        .collect()
                })
                .collect();
            let bytes = encode(&requests);
            assert_eq!(run(&[&bytes], LIMITS), (requests, None));
            let mut bad = bytes;
            if !bad.is_empty() {
                let i = usize::from(*at) % bad.len();
                bad[i] ^= (*xor).max(1);
            }
            let mut input = vec![*cut];
            input.extend_from_slice(&bad);
            guarded(&input, || check_stream(&input));
        });
}

/// The server's metadata records, as read back from the engine: a record
/// decodes or is refused; one that decodes re-encodes to itself (a hash's
/// payload aside: see the fuzzing journal).
#[test]
fn server_metadata() {
    let n = Count("server_metadata", Default::default());
    check!(name = "server_metadata")
        .with_test_time(test_time())
        .for_each(|input: &[u8]| {
            n.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if let Some((meta, payload)) = encoding::decode(input) {
                let again = match meta.kind {
                    encoding::Kind::String => encoding::encode_string(payload, meta.expire_at),
                    encoding::Kind::Hash => encoding::encode_hash(meta.count, meta.expire_at),
                };
                assert!(input.starts_with(&again));
                let _ = encoding::with_expiry(input, Some(1));
            }
        });
}

/// Writes the seed corpora of this file's byte targets (run by hand:
/// `cargo test -p weft-server --release --test fuzz -- --ignored`).
#[test]
#[ignore]
fn write_seed_corpus() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/__fuzz__");
    let write = |target: &str, name: &str, bytes: &[u8]| {
        let d = dir.join(target).join("corpus");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(name), bytes).unwrap();
    };
    let set = encode(&vec![vec![b"SET".to_vec(), b"k".to_vec(), b"v".to_vec()]]);
    let pipeline = encode(&vec![
        vec![
            b"HSET".to_vec(),
            b"h".to_vec(),
            b"f".to_vec(),
            b"v".to_vec(),
        ],
        vec![b"GET".to_vec(), b"k".to_vec()],
        vec![b"PING".to_vec()],
    ]);
    for (name, body) in [
        ("set", set),
        ("pipeline", pipeline),
        ("inline", b"SET \"a b\" 'c\\'d' \\x41\r\nPING\r\n".to_vec()),
        ("empty_array", b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n".to_vec()),
    ] {
        let mut input = vec![128u8];
        input.extend(body);
        write("resp_request", name, &input);
    }
    write(
        "server_metadata",
        "string",
        &encoding::encode_string(b"value", None),
    );
    write(
        "server_metadata",
        "string_ttl",
        &encoding::encode_string(b"v", Some(1 << 40)),
    );
    write(
        "server_metadata",
        "hash_ttl",
        &encoding::encode_hash(3, Some(99)),
    );
}
