//! The records a stopped server left, checked with the engine directly:
//! shared by the model tests (`types_model.rs`) and the server-commands
//! fuzz target (`crates/weft-fuzz/tests/fuzz/server.rs` includes this file
//! by path), so both hold the layout to the same invariants.
// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used, dead_code)]

use std::collections::HashMap;
use std::path::Path;

use weft_server::encoding::{self, Kind, Meta};

/// The records under the server's layout, read with the engine after the
/// server stopped: every element belongs to the version its key's
/// metadata names (no orphan survives a delete, an expiry or an
/// overwrite), a collection has as many elements as its metadata counts
/// (a sorted set as many index records as members), a list's indexes are
/// `head .. head + count`, and no format-0 record is left.
pub fn check_records(dir: &Path) {
    let db = weft::Db::open(dir, weft::Options::default()).unwrap();
    let mut live: HashMap<Vec<u8>, Meta> = HashMap::new();
    for kv in db.prefix([encoding::META]).unwrap() {
        let (k, v) = kv.unwrap();
        let (m, _) = encoding::decode(&v).unwrap();
        live.insert(k[1..].to_vec(), m);
    }
    let mut counts: HashMap<(Vec<u8>, u8), u64> = HashMap::new();
    for ns in [
        encoding::HASH,
        encoding::LIST,
        encoding::SET,
        encoding::ZSET,
        encoding::SCORE_INDEX,
    ] {
        for kv in db.prefix([ns]).unwrap() {
            let (k, _) = kv.unwrap();
            let len = u32::from_be_bytes(k[1..5].try_into().unwrap()) as usize;
            let key = k[5..5 + len].to_vec();
            let version = u64::from_be_bytes(k[5 + len..13 + len].try_into().unwrap());
            let m = live
                .get(&key)
                .unwrap_or_else(|| panic!("orphan element of {:?} in {}", key, ns as char));
            assert_eq!(m.version, version, "element of an old version of {key:?}");
            assert!(
                m.kind.namespaces().contains(&ns),
                "{key:?}: {:?} in {}",
                m.kind,
                ns as char
            );
            if ns == encoding::LIST {
                let i = u64::from_be_bytes(k[13 + len..].try_into().unwrap());
                assert!(
                    i >= m.head && i < m.head + m.count,
                    "{key:?}: index {i} outside"
                );
            }
            *counts.entry((key, ns)).or_default() += 1;
        }
    }
    for (key, m) in &live {
        for &ns in m.kind.namespaces() {
            let n = counts.get(&(key.clone(), ns)).copied().unwrap_or(0);
            assert_eq!(n, m.count, "{key:?} in {}: records vs metadata", ns as char);
        }
        if m.kind != Kind::String {
            assert!(m.count > 0, "{key:?}: an empty collection is kept");
        }
    }
    assert_eq!(db.prefix([encoding::LEGACY_HASH]).unwrap().count(), 0);
    db.close().unwrap();
}
