//! Value logs (`store/value_log.rs`) and the cursor's reader over them
//! (`store/value_reader.rs`): records found through encoded pointers.

use weft::internals::fuzz::{read_value_log, value_log_path, write_value_log, ValuePointer};
use weft::Compression;

use crate::harness::{must_be_corruption, ok_or_corruption, scratch, Mutation};
use crate::{fuzz_bytes, fuzz_typed};

const LOG: u64 = 11;

/// Resolves `raw` pointers in the log at `dir` both ways (mapped, `pread`)
/// and through both paths (a cursor's reader, point reads): each is a
/// value or corruption, and all four agree.
fn check_log(dir: &std::path::Path, size: u64, raw: &[Vec<u8>]) -> Vec<Option<Vec<u8>>> {
    let mapped = ok_or_corruption(read_value_log(dir, LOG, size, true, raw)).unwrap();
    let unmapped = ok_or_corruption(read_value_log(dir, LOG, size, false, raw)).unwrap();
    let plain = |rs: Vec<weft::Result<Vec<u8>>>| -> Vec<Option<Vec<u8>>> {
        rs.into_iter().map(ok_or_corruption).collect()
    };
    let got = plain(mapped.direct);
    assert_eq!(
        plain(mapped.through_reader),
        got,
        "reader and point reads disagree"
    );
    assert_eq!(
        plain(unmapped.direct),
        got,
        "mapped and pread reads disagree"
    );
    assert_eq!(plain(unmapped.through_reader), got);
    match (mapped.verified, unmapped.verified) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Err(a), Err(b)) => {
            must_be_corruption(&a);
            must_be_corruption(&b);
        }
        (a, b) => panic!("verification disagrees: {a:?} {b:?}"),
    }
    got
}

/// The pointers a scan of `bytes` would follow: one per record header,
/// front to back (stopping at the first that cannot be a record), plus
/// pointers the input spells out after a 0xff 0xff marker.
fn pointers_in(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at + 8 <= bytes.len() && out.len() < 96 {
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap());
        // The record read as stored, and as LZ4 or zstd (the codec lives
        // in the pointer): the decompressors meet the input's bytes.
        for codec in [0, 1, 2] {
            let ptr = ValuePointer {
                codec,
                ..ValuePointer::plain(LOG, at as u64, len)
            };
            out.push(ptr.encode());
        }
        at = at.saturating_add(8 + len as usize);
    }
    if let Some(i) = bytes.windows(2).position(|w| w == [0xff, 0xff]) {
        out.extend(bytes[i + 2..].chunks(9).take(16).map(<[u8]>::to_vec));
    }
    out
}

#[test]
fn value_log_file() {
    let dir = scratch();
    let path = value_log_path(dir.path(), LOG);
    fuzz_bytes!("value_log_file", |input: &[u8]| {
        std::fs::write(&path, input).unwrap();
        check_log(dir.path(), input.len() as u64, &pointers_in(input));
    });
}

#[test]
fn value_log_round_trip() {
    let dir = scratch();
    let path = value_log_path(dir.path(), LOG);
    fuzz_typed!(
        "value_log_round_trip",
        (Vec<Vec<u8>>, Vec<u8>, u8, Mutation),
        |(values, order, codec, mutation): &(Vec<Vec<u8>>, Vec<u8>, u8, Mutation)| {
            let _ = std::fs::remove_file(&path);
            let compression =
                [Compression::None, Compression::Lz4, Compression::ZSTD][usize::from(*codec) % 3];
            // Some values long and repetitive enough to be stored compressed.
            let values: Vec<Vec<u8>> = (values.iter())
                .map(|v| match v.first() {
                    Some(&n) if n % 2 == 0 => v.repeat(1 + usize::from(n % 16)),
                    _ => v.clone(),
                })
                .collect();
            let values = &values;
            let (ptrs, size) = write_value_log(dir.path(), LOG, values, compression).unwrap();
            // Read in an order the input picks (forward, backward, jumps),
            // so the reader's windows and readahead see every pattern.
            let pick: Vec<usize> = if values.is_empty() {
                Vec::new()
            } else {
                (0..values.len())
                    .chain(order.iter().map(|&i| usize::from(i) % values.len()))
                    .collect()
            };
            let raw: Vec<Vec<u8>> = pick.iter().map(|&i| ptrs[i].encode()).collect();
            let got = check_log(dir.path(), size, &raw);
            for (g, &i) in got.iter().zip(&pick) {
                assert_eq!(g.as_ref(), Some(&values[i]));
            }
            // Damage: each read is corruption or the value written, never
            // another.
            let mut bytes = std::fs::read(&path).unwrap();
            if mutation.apply(&mut bytes) {
                std::fs::write(&path, &bytes).unwrap();
                let size = bytes.len() as u64;
                let got = check_log(dir.path(), size, &raw);
                for (g, &i) in got.iter().zip(&pick) {
                    if let Some(v) = g {
                        assert_eq!(v, &values[i], "{mutation:?} changed a value");
                    }
                }
            }
        }
    );
}

#[test]
fn value_pointer() {
    fuzz_bytes!("value_pointer", |input: &[u8]| {
        if let Some(p) = ValuePointer::decode(input) {
            assert_eq!(ValuePointer::decode(&p.encode()), Some(p));
        }
    });
}
