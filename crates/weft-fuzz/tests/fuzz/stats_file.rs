//! The lifetime counters' `STATS` file (`stats_file.rs`): whatever the
//! bytes, an open gets the counters or a reason to restart them — never a
//! panic, never an allocation a count asked for — and the lifetime view
//! it builds from any counters (sums, write amplification) holds.

use std::collections::BTreeMap;

use bolero::generator::TypeGenerator;
use weft::internals::fuzz::{decode_stats_file, encode_stats_file, reseal_stats_file};

use crate::harness::Mutation;
use crate::{fuzz_bytes, fuzz_typed};

/// A decoded file re-encodes to bytes that decode to the same.
fn check(bytes: &[u8]) {
    if let Ok((clean, counts)) = decode_stats_file(bytes) {
        let again = encode_stats_file(clean, &counts);
        assert_eq!(decode_stats_file(&again), Ok((clean, counts)));
    }
}

#[test]
fn stats_file() {
    fuzz_bytes!("stats_file", |input: &[u8]| {
        check(input);
        // Behind the checksum.
        let mut sealed = input.to_vec();
        reseal_stats_file(&mut sealed);
        check(&sealed);
    });
}

/// Generated counters: names drawn from the engine's own and arbitrary
/// ones, values anything.
#[derive(Debug, Clone, TypeGenerator)]
pub struct GenCounters {
    clean: bool,
    #[generator(bolero::produce::<Vec<_>>().with().len(0usize..=12))]
    counts: Vec<(u8, u64)>,
    mutation: Option<Mutation>,
    reseal: bool,
}

const NAMES: [&str; 6] = [
    "opens",
    "flushes",
    "user_bytes_written",
    "reads.misses",
    "jobs.flush.queued_nanos",
    "jobs.merge.count",
];

#[test]
fn stats_file_round_trip() {
    fuzz_typed!("stats_file_round_trip", GenCounters, |g: &GenCounters| {
        let counts: BTreeMap<String, u64> = g
            .counts
            .iter()
            .map(|&(n, v)| {
                let name = match NAMES.get(usize::from(n)) {
                    Some(known) => (*known).to_string(),
                    None => format!("later build counter {n}"),
                };
                (name, v)
            })
            .collect();
        let mut bytes = encode_stats_file(g.clean, &counts);
        assert_eq!(decode_stats_file(&bytes), Ok((g.clean, counts.clone())));
        if let Some(m) = &g.mutation {
            let changed = m.apply(&mut bytes);
            if g.reseal {
                reseal_stats_file(&mut bytes);
                check(&bytes);
            } else if changed {
                // Any change under the checksum is caught (CRC32C finds
                // every burst of up to 32 bits; appended bytes move it).
                let decoded = decode_stats_file(&bytes);
                assert!(
                    decoded.is_err() || decoded == Ok((g.clean, counts)),
                    "a changed STATS decoded to other counters: {decoded:?}"
                );
            }
        }
    });
}
