//! The bytes the server takes from the network (the RESP request parser,
//! `weft-server/src/resp.rs`) and from the engine (its metadata records,
//! `weft-server/src/encoding.rs`). `resp_request` replaces the server's
//! former `cargo fuzz` crate: the same property, run by CI and, through
//! `cargo bolero`, under libFuzzer.

use bolero::generator::TypeGenerator;
use weft::internals::fuzz::guarded;
use weft_server::encoding;
use weft_server::resp::{Limits, Parser};

use crate::fuzz_bytes;

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
    fuzz_bytes!("resp_request", check_stream);
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

/// A request of a few short arguments (byte-by-byte parsing of large
/// ones would spend the time budget on memcpy).
#[derive(Debug, Clone, TypeGenerator)]
struct GenRequest(
    #[generator(bolero::produce::<Vec<Vec<u8>>>().with().len(0usize..=6).values(bolero::produce::<Vec<u8>>().with().len(0usize..=24)))]
     Vec<Vec<u8>>,
);

/// A pipeline of requests.
#[derive(Debug, Clone, TypeGenerator)]
struct GenRequests(
    #[generator(bolero::produce::<Vec<GenRequest>>().with().len(0usize..=5))] Vec<GenRequest>,
);

/// Requests a client sends parse back exactly; any change to their bytes
/// still parses the same whole or split.
#[test]
fn resp_round_trip() {
    crate::fuzz_typed!("resp_round_trip", (GenRequests, u16, u8, u8), |(
        requests,
        at,
        xor,
        cut,
    ): &(
        GenRequests,
        u16,
        u8,
        u8
    )| {
        let requests: Requests = (requests.0.iter())
            .map(|r| r.0.clone())
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
/// decodes or is refused; one that decodes re-encodes to itself (a
/// collection's trailing bytes aside: see the fuzzing journal); a list's
/// elements never run past the end of the index space. Format 0's hash
/// records (read by the upgrade) decode or are refused too.
#[test]
fn server_metadata() {
    fuzz_bytes!("server_metadata", |input: &[u8]| {
        if let Some((meta, payload)) = encoding::decode(input) {
            let again = match meta.kind {
                encoding::Kind::String => encoding::encode_string(payload, meta.expire_at),
                _ => meta.encode(),
            };
            assert!(input.starts_with(&again));
            assert!(meta.head.checked_add(meta.count).is_some());
            let _ = encoding::with_expiry(input, Some(1));
        }
        if let Some((expire_at, count)) = encoding::decode_legacy_hash(input) {
            assert!(input.starts_with(&encoding::encode_legacy_hash(count, expire_at)));
        }
    });
}

/// Writes the seed corpora of this file's byte targets (run by hand:
/// `cargo test -p weft-fuzz --release -- --ignored seed_corpus`).
#[test]
#[ignore]
fn write_server_seed_corpus() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/__fuzz__");
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
    let mut hash = encoding::Meta::new_collection(encoding::Kind::Hash, 7);
    hash.count = 3;
    hash.expire_at = Some(99);
    write("server_metadata", "hash_ttl", &hash.encode());
    let mut list = encoding::Meta::new_collection(encoding::Kind::List, 8);
    list.count = 2;
    write("server_metadata", "list", &list.encode());
    write(
        "server_metadata",
        "legacy_hash",
        &encoding::encode_legacy_hash(3, Some(99)),
    );
}
