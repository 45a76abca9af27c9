//! A key's whole value in memory, for the commands that move or copy a
//! value as a unit: `RENAME`, `COPY`, `DUMP`, `RESTORE`, `MIGRATE`.
//!
//! Element keys carry their user key (`encoding.rs`), so a collection
//! cannot change its name in place: moving one reads every element
//! ([`load`], one ordered scan per namespace at one snapshot) and writes
//! them again under the new name and a fresh version ([`store`]), in the
//! caller's one atomic batch. `docs/DESIGN.md` §1.9 ("Renaming and
//! copying") says what that costs.

use weft::Snapshot;

use super::coll::elements;
use super::CmdError;
use crate::encoding::{self, Header, Kind, Meta};
use crate::keyspace::{new_version, Batch, Entry, Keyspace};

/// A value of one of the types Weft stores.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string's bytes.
    String(Vec<u8>),
    /// A list's elements, head first.
    List(Vec<Vec<u8>>),
    /// A set's members (distinct).
    Set(Vec<Vec<u8>>),
    /// A sorted set's members and scores (distinct members; scores never
    /// NaN, `-0` stored as `0`).
    ZSet(Vec<(Vec<u8>, f64)>),
    /// A hash's fields and values (distinct fields).
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
}

impl Value {
    /// The number of elements (1 for a string).
    pub fn len(&self) -> usize {
        match self {
            Value::String(_) => 1,
            Value::List(v) | Value::Set(v) => v.len(),
            Value::ZSet(v) => v.len(),
            Value::Hash(v) => v.len(),
        }
    }

    /// True for a collection without elements (which Redis never keeps).
    pub fn is_empty(&self) -> bool {
        !matches!(self, Value::String(_)) && self.len() == 0
    }

    fn kind(&self) -> Kind {
        match self {
            Value::String(_) => Kind::String,
            Value::List(_) => Kind::List,
            Value::Set(_) => Kind::Set,
            Value::ZSet(_) => Kind::ZSet,
            Value::Hash(_) => Kind::Hash,
        }
    }
}

fn malformed(key: &[u8]) -> CmdError {
    CmdError(
        format!(
            "ERR weft: malformed element record of key '{}'",
            key.escape_ascii()
        )
        .into(),
    )
}

/// The whole value of the live entry `e` of `key`, read at `snap` (the
/// snapshot `e` was read at, or none for a reader holding the key's lock).
pub fn load(
    ks: &Keyspace,
    key: &[u8],
    e: &Entry,
    snap: Option<&Snapshot>,
) -> Result<Value, CmdError> {
    let m = &e.meta;
    Ok(match m.kind {
        Kind::String => Value::String(e.payload().to_vec()),
        Kind::List => {
            let all = elements(ks, encoding::LIST, key, m, snap)?;
            if all.len() as u64 != m.count {
                return Err(malformed(key));
            }
            Value::List(all.into_iter().map(|(_, v)| v).collect())
        }
        Kind::Set => Value::Set(
            elements(ks, encoding::SET, key, m, snap)?
                .into_iter()
                .map(|(k, _)| k)
                .collect(),
        ),
        Kind::Hash => Value::Hash(elements(ks, encoding::HASH, key, m, snap)?),
        Kind::ZSet => Value::ZSet(
            elements(ks, encoding::ZSET, key, m, snap)?
                .into_iter()
                .map(|(k, v)| {
                    let b = v.first_chunk::<8>().ok_or_else(|| malformed(key))?;
                    Ok((k, f64::from_bits(u64::from_be_bytes(*b))))
                })
                .collect::<Result<_, CmdError>>()?,
        ),
    })
}

/// Writes `value` as `key` with deadline `expire_at` into `batch`: a
/// string as one record, a collection as a new version (elements, then
/// its metadata). The caller holds `key`'s lock and has deleted whatever
/// `key` held into the same batch (so the key is created: the key counts
/// see −1 and +1 when it replaced one). An empty collection writes
/// nothing.
pub fn store(ks: &Keyspace, batch: &mut Batch, key: &[u8], value: &Value, expire_at: Option<u64>) {
    if value.is_empty() {
        return;
    }
    let kind = value.kind();
    if let Value::String(v) = value {
        let h = Header::new(Kind::String, expire_at);
        ks.put_meta(batch, key, None, &[h.as_bytes(), v], expire_at);
        return;
    }
    let mut m = Meta::new_collection(kind, new_version());
    m.expire_at = expire_at;
    match value {
        Value::String(_) => {}
        Value::List(items) => {
            for (i, v) in items.iter().enumerate() {
                batch.put(encoding::list_key(key, m.version, m.head + i as u64), v);
            }
        }
        Value::Set(items) => {
            for v in items {
                batch.put(encoding::element_key(encoding::SET, key, m.version, v), b"");
            }
        }
        Value::Hash(items) => {
            for (f, v) in items {
                batch.put(encoding::element_key(encoding::HASH, key, m.version, f), v);
            }
        }
        Value::ZSet(items) => {
            for (member, score) in items {
                batch.put(
                    encoding::element_key(encoding::ZSET, key, m.version, member),
                    score.to_bits().to_be_bytes(),
                );
                batch.put(encoding::score_key(key, m.version, *score, member), b"");
            }
        }
    }
    m.count = value.len() as u64;
    ks.put_collection(batch, key, None, &m);
}
