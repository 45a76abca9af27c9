//! How Redis keys, types and expiry live on Weft's ordered key space.
//!
//! Every engine key starts with a one-byte namespace tag:
//!
//! ```text
//! 'm' ++ user_key                              -> metadata (+ inline string value)
//! 'h' ++ u32be(len(user_key)) ++ user_key ++ field -> one hash field's value
//! 'e' ++ u64be(expire_at_ms) ++ user_key       -> ""   (expiry index)
//! 's' ++ name                                  -> server-internal records
//! ```
//!
//! - The `m` namespace holds exactly one record per live user key, so a scan
//!   of `m..n` yields user keys in bytewise order: `KEYS`, `SCAN` and
//!   `WEFT.RANGE` read it and strip the tag; the other namespaces are never
//!   shown to clients.
//! - A hash's fields are contiguous and in field order under a prefix that
//!   carries the user key's length, so the fields of `ab` never interleave
//!   with those of `abc` (as Kvrocks does, without its version: the server
//!   deletes a hash's fields in the same atomic batch that deletes or
//!   replaces its metadata, so no stale field can ever reappear).
//! - The expiry index is sorted by deadline: the background expirer reads
//!   `e..e++now` and nothing else. An index record whose key's metadata no
//!   longer carries the same deadline is stale and simply dropped.
//!
//! Metadata value:
//!
//! ```text
//! flags: u8         low 7 bits: type (1 = string, 2 = hash); bit 7: has expiry
//! [expire_at: u64be]  milliseconds since the Unix epoch, only if bit 7 is set
//! string: the value's bytes
//! hash:   count: u64be (number of fields)
//! ```

/// Namespace of metadata records.
pub const META: u8 = b'm';
/// Namespace of hash fields.
pub const HASH: u8 = b'h';
/// Namespace of the expiry index.
pub const EXPIRY: u8 = b'e';
/// Namespace of server-internal records.
pub const SYSTEM: u8 = b's';

/// Longest user key: the expiry index adds 9 bytes to the engine's 64 KiB.
pub const MAX_USER_KEY: usize = 64 * 1024 - 9;

const HAS_EXPIRY: u8 = 0x80;

/// The Redis types Weft stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A string (the value is inline in the metadata record).
    String,
    /// A hash (fields are separate records).
    Hash,
}

impl Kind {
    /// The name `TYPE` replies with.
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Hash => "hash",
        }
    }

    fn tag(self) -> u8 {
        match self {
            Kind::String => 1,
            Kind::Hash => 2,
        }
    }
}

/// A decoded metadata record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// The key's type.
    pub kind: Kind,
    /// Deadline in Unix milliseconds, if any.
    pub expire_at: Option<u64>,
    /// Hash: number of fields (0 for strings).
    pub count: u64,
}

impl Meta {
    /// True when the key has expired at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expire_at.is_some_and(|t| t <= now_ms)
    }
}

/// The engine key of `user_key`'s metadata.
pub fn meta_key(user_key: &[u8]) -> Vec<u8> {
    meta_key_parts(user_key).concat()
}

/// [`meta_key`] as parts, for writers that place it without building it
/// (`WriteBatch::put_parts`, a buffer of many keys).
pub fn meta_key_parts(user_key: &[u8]) -> [&[u8]; 2] {
    [&[META], user_key]
}

/// The prefix of every field of hash `user_key`.
pub fn hash_prefix(user_key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(5 + user_key.len());
    k.push(HASH);
    k.extend_from_slice(&(user_key.len() as u32).to_be_bytes());
    k.extend_from_slice(user_key);
    k
}

/// The engine key of `field` of hash `user_key`.
pub fn field_key(user_key: &[u8], field: &[u8]) -> Vec<u8> {
    let mut k = hash_prefix(user_key);
    k.extend_from_slice(field);
    k
}

/// The expiry-index key of `user_key` expiring at `at`.
pub fn expiry_key(at: u64, user_key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + user_key.len());
    k.push(EXPIRY);
    k.extend_from_slice(&at.to_be_bytes());
    k.extend_from_slice(user_key);
    k
}

/// Splits an expiry-index key into deadline and user key.
pub fn parse_expiry_key(k: &[u8]) -> Option<(u64, &[u8])> {
    if k.len() < 9 || k[0] != EXPIRY {
        return None;
    }
    let mut at = [0u8; 8];
    at.copy_from_slice(&k[1..9]);
    Some((u64::from_be_bytes(at), &k[9..]))
}

/// The engine key of a server-internal record.
pub fn system_key(name: &[u8]) -> Vec<u8> {
    let mut k = vec![SYSTEM];
    k.extend_from_slice(name);
    k
}

/// A metadata record's header (flags and deadline), built on the stack
/// so that a record can be written as parts: header, then payload.
#[derive(Debug, Clone, Copy)]
pub struct Header {
    bytes: [u8; 9],
    len: usize,
}

impl Header {
    /// The header of a `kind` record expiring at `expire_at`.
    pub fn new(kind: Kind, expire_at: Option<u64>) -> Header {
        let mut bytes = [0u8; 9];
        let len = match expire_at {
            Some(t) => {
                bytes[0] = kind.tag() | HAS_EXPIRY;
                bytes[1..].copy_from_slice(&t.to_be_bytes());
                9
            }
            None => {
                bytes[0] = kind.tag();
                1
            }
        };
        Header { bytes, len }
    }

    /// The encoded header.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

fn header(out: &mut Vec<u8>, kind: Kind, expire_at: Option<u64>) {
    out.extend_from_slice(Header::new(kind, expire_at).as_bytes());
}

/// Encodes a string's metadata record (header + value).
pub fn encode_string(value: &[u8], expire_at: Option<u64>) -> Vec<u8> {
    let mut v = Vec::with_capacity(9 + value.len());
    header(&mut v, Kind::String, expire_at);
    v.extend_from_slice(value);
    v
}

/// Encodes a hash's metadata record.
pub fn encode_hash(count: u64, expire_at: Option<u64>) -> Vec<u8> {
    let mut v = Vec::with_capacity(17);
    header(&mut v, Kind::Hash, expire_at);
    v.extend_from_slice(&count.to_be_bytes());
    v
}

/// Decodes a metadata record into its header and payload (a string's value;
/// empty for a hash). `None` if the record is malformed.
pub fn decode(raw: &[u8]) -> Option<(Meta, &[u8])> {
    let (&flags, rest) = raw.split_first()?;
    let kind = match flags & !HAS_EXPIRY {
        1 => Kind::String,
        2 => Kind::Hash,
        _ => return None,
    };
    let (expire_at, rest) = if flags & HAS_EXPIRY != 0 {
        let (t, rest) = rest.split_first_chunk::<8>()?;
        (Some(u64::from_be_bytes(*t)), rest)
    } else {
        (None, rest)
    };
    match kind {
        Kind::String => Some((
            Meta {
                kind,
                expire_at,
                count: 0,
            },
            rest,
        )),
        Kind::Hash => {
            let (c, rest) = rest.split_first_chunk::<8>()?;
            Some((
                Meta {
                    kind,
                    expire_at,
                    count: u64::from_be_bytes(*c),
                },
                rest,
            ))
        }
    }
}

/// Re-encodes `raw` (a metadata record) with a new deadline, keeping type and
/// payload.
pub fn with_expiry(raw: &[u8], expire_at: Option<u64>) -> Option<Vec<u8>> {
    let (meta, payload) = decode(raw)?;
    Some(match meta.kind {
        Kind::String => encode_string(payload, expire_at),
        Kind::Hash => encode_hash(meta.count, expire_at),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let v = encode_string(b"hello", Some(42));
        let (m, p) = decode(&v).unwrap();
        assert_eq!(m.kind, Kind::String);
        assert_eq!(m.expire_at, Some(42));
        assert_eq!(p, b"hello");
        let v = encode_string(b"", None);
        assert_eq!(v.len(), 1);
        let (m, p) = decode(&v).unwrap();
        assert_eq!((m.kind, m.expire_at, p), (Kind::String, None, &b""[..]));
        let v = encode_hash(7, None);
        let (m, _) = decode(&v).unwrap();
        assert_eq!((m.kind, m.count, m.expire_at), (Kind::Hash, 7, None));
        let v2 = with_expiry(&v, Some(9)).unwrap();
        let (m, _) = decode(&v2).unwrap();
        assert_eq!((m.kind, m.count, m.expire_at), (Kind::Hash, 7, Some(9)));
        assert!(m.expired(9) && !m.expired(8));
    }

    #[test]
    fn malformed_is_none() {
        assert!(decode(b"").is_none());
        assert!(decode(&[9]).is_none());
        assert!(decode(&[1 | HAS_EXPIRY, 0, 0]).is_none());
        assert!(decode(&[2, 0]).is_none());
    }

    #[test]
    fn hash_fields_of_prefix_keys_do_not_interleave() {
        let a = field_key(b"ab", b"zzz");
        let b = field_key(b"abc", b"");
        let a2 = field_key(b"ab", b"a");
        // All fields of "ab" sort together, before those of "abc".
        assert!(a2 < a && a < b);
        assert!(a.starts_with(&hash_prefix(b"ab")));
        assert!(!b.starts_with(&hash_prefix(b"ab")));
    }

    #[test]
    fn expiry_keys_sort_by_deadline() {
        let a = expiry_key(5, b"zzz");
        let b = expiry_key(6, b"a");
        assert!(a < b);
        assert_eq!(parse_expiry_key(&a), Some((5, &b"zzz"[..])));
        assert_eq!(parse_expiry_key(b"e"), None);
    }
}
