//! Hash-index checkpoints (`store/hash_index/checkpoint.rs`): a decoded
//! index must uphold every invariant the code relies on, so the
//! operations recovery runs on it next (`db::open::restore_index`) work.

use bolero::generator::TypeGenerator;
use weft::internals::fuzz::{reseal_hash_index, HashIndex};

use crate::harness::Mutation;
use crate::{fuzz_bytes, fuzz_typed};

const KEYS: [&[u8]; 6] = [b"", b"a", b"b", b"key", b"\xff", b"longer key 17"];

/// What recovery does with a checkpoint that decodes: lookups, dropping
/// tables merged since, adding tables flushed since; and a checkpoint of
/// the result decodes to the same image.
fn exercise(mut ix: HashIndex) {
    let mut out = Vec::new();
    for k in KEYS {
        out.clear();
        ix.lookup(k, &mut out);
        for t in &out {
            assert!(ix.contains_table(*t));
        }
    }
    let tables = ix.tables();
    let image = ix.encode();
    let again = HashIndex::decode(&image).expect("a re-encoded index decodes");
    assert_eq!(again.encode(), image);
    if let Some(&t) = tables.first() {
        ix.remove_tables(&[t]);
        assert!(!ix.contains_table(t));
    }
    let fresh = tables.iter().max().map_or(1, |m| m.wrapping_add(1));
    let _ = ix.add_table(fresh, KEYS.iter().copied());
    out.clear();
    ix.lookup(b"key", &mut out);
    let image = ix.encode();
    assert_eq!(HashIndex::decode(&image).unwrap().encode(), image);
}

fn check_image(bytes: &[u8]) {
    if let Ok(ix) = HashIndex::decode(bytes) {
        exercise(ix);
    }
}

#[test]
fn hash_index_checkpoint() {
    fuzz_bytes!("hash_index_checkpoint", |input: &[u8]| {
        check_image(input);
        // Behind the checksum.
        let mut sealed = input.to_vec();
        reseal_hash_index(&mut sealed);
        check_image(&sealed);
    });
}

/// Generated tables of keys, added in order.
#[derive(Debug, Clone, TypeGenerator)]
pub struct GenIndex {
    capacity: u8,
    #[generator(bolero::produce::<Vec<_>>().with().len(0usize..=6))]
    tables: Vec<(u16, Vec<Vec<u8>>)>,
    #[generator(bolero::produce::<Vec<_>>().with().len(0usize..=2))]
    removed: Vec<u16>,
}

#[test]
fn hash_index_round_trip() {
    fuzz_typed!(
        "hash_index_round_trip",
        (GenIndex, Vec<Mutation>),
        |(g, mutations): &(GenIndex, Vec<Mutation>)| {
            let mut ix = HashIndex::with_capacity(usize::from(g.capacity));
            for (t, keys) in &g.tables {
                let _ = ix.add_table(u64::from(*t), keys.iter().map(Vec::as_slice));
            }
            let removed: Vec<u64> = g.removed.iter().map(|&t| u64::from(t)).collect();
            ix.remove_tables(&removed);
            let image = ix.encode();
            let back = HashIndex::decode(&image).unwrap();
            assert_eq!(back.encode(), image);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for (_, keys) in &g.tables {
                for k in keys {
                    a.clear();
                    b.clear();
                    ix.lookup(k, &mut a);
                    back.lookup(k, &mut b);
                    assert_eq!(a, b);
                }
            }
            // Damage behind the checksum: rejected, or a sound index.
            let mut bad = image;
            for m in mutations {
                m.apply(&mut bad);
            }
            reseal_hash_index(&mut bad);
            check_image(&bad);
        }
    );
}
