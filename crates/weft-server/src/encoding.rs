//! How Redis keys, types and expiry live on Weft's ordered key space
//! (data format 1; `docs/DESIGN.md` §1.9 "The server's data layout").
//!
//! Every engine key starts with a one-byte namespace tag:
//!
//! ```text
//! 'm' ++ user_key                                   -> metadata (+ inline string value)
//! 'f' ++ u32be(len(key)) ++ key ++ u64be(version) ++ field   -> a hash field's value
//! 'l' ++ u32be(len(key)) ++ key ++ u64be(version) ++ u64be(index) -> a list element
//! 't' ++ u32be(len(key)) ++ key ++ u64be(version) ++ member  -> "" (a set member)
//! 'z' ++ u32be(len(key)) ++ key ++ u64be(version) ++ member  -> f64be score bits
//! 'y' ++ u32be(len(key)) ++ key ++ u64be(version) ++ score8 ++ member -> "" (score index)
//! 'e' ++ u64be(expire_at_ms) ++ user_key            -> ""   (expiry index)
//! 's' ++ name                                       -> server-internal records
//! 'h' ++ u32be(len(key)) ++ key ++ field            -> format 0's hash fields (upgrade only)
//! ```
//!
//! - The `m` namespace holds exactly one record per live user key, so a scan
//!   of `m..n` yields user keys in bytewise order: `KEYS`, `SCAN` and
//!   `WEFT.RANGE` read it and strip the tag; the other namespaces are never
//!   shown to clients.
//! - A collection's elements are contiguous and in element order under a
//!   prefix that carries the user key's length (so the elements of `ab`
//!   never interleave with those of `abc`) and the collection's *version*,
//!   as Kvrocks lays them out. The version is drawn when the collection is
//!   created, so a key deleted (or expired, or overwritten) and created
//!   again owns a fresh, disjoint range: the old elements are invisible at
//!   once, and their reclamation (a range delete or point deletes in the
//!   batch that drops the metadata, see `keyspace`) never touches the new
//!   ones.
//! - A list's elements sit at `head .. head + count` (metadata), starting
//!   at the middle of the `u64` space; pushes and pops at either end move
//!   `head` or the count, so no read ever steps over the tombstones of
//!   popped elements.
//! - A sorted set keeps member → score records for lookups and a score
//!   index whose keys sort by (score, member): [`encode_score`] maps an
//!   `f64` to 8 bytes whose byte order is the numeric order (negatives and
//!   ±inf included), so ranges by score and by rank are ordered reads.
//! - The expiry index is sorted by deadline: the background expirer reads
//!   `e..e++now` and nothing else. An index record whose key's metadata no
//!   longer carries the same deadline is stale and simply dropped.
//!
//! Metadata value:
//!
//! ```text
//! flags: u8         low 7 bits: type; bit 7: has expiry
//!                   (1 string, 2 format-0 hash, 3 hash, 4 list, 5 set, 6 zset)
//! [expire_at: u64be]  milliseconds since the Unix epoch, only if bit 7 is set
//! string:     the value's bytes
//! collection: version: u64be, count: u64be (elements)
//! list:       ... then head: u64be (index of the first element)
//! ```

/// Namespace of metadata records.
pub const META: u8 = b'm';
/// Namespace of hash fields.
pub const HASH: u8 = b'f';
/// Namespace of list elements.
pub const LIST: u8 = b'l';
/// Namespace of set members.
pub const SET: u8 = b't';
/// Namespace of sorted-set members (member → score).
pub const ZSET: u8 = b'z';
/// Namespace of the sorted sets' score index ((score, member) → "").
pub const SCORE_INDEX: u8 = b'y';
/// Namespace of the expiry index.
pub const EXPIRY: u8 = b'e';
/// Namespace of server-internal records.
pub const SYSTEM: u8 = b's';
/// Namespace of data format 0's hash fields (read by the upgrade only).
pub const LEGACY_HASH: u8 = b'h';

/// Every namespace of user data (`FLUSHDB` range-deletes each; `SYSTEM`
/// stays).
pub const DATA_NAMESPACES: [u8; 8] = [
    META,
    HASH,
    LIST,
    SET,
    ZSET,
    SCORE_INDEX,
    EXPIRY,
    LEGACY_HASH,
];

/// The data format this build writes (the server's records, not the
/// engine's store format: `docs/DESIGN.md` §3 and §1.9).
pub const FORMAT_VERSION: u32 = 1;

/// Name of the system record holding the data format version.
pub const FORMAT_RECORD: &[u8] = b"format";

/// Longest user key: the expiry index adds 9 bytes to the engine's 64 KiB.
pub const MAX_USER_KEY: usize = 64 * 1024 - 9;

/// Index of a new list's first element: the middle of the `u64` space, so
/// either end can grow by 2^63 elements.
pub const LIST_START: u64 = 1 << 63;

const HAS_EXPIRY: u8 = 0x80;
/// Type tag of data format 0's hashes (no version; fields under `h`).
pub const LEGACY_HASH_TAG: u8 = 2;

/// The Redis types Weft stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A string (the value is inline in the metadata record).
    String,
    /// A hash (fields are separate records).
    Hash,
    /// A list (elements are separate records at consecutive indexes).
    List,
    /// A set (members are separate records).
    Set,
    /// A sorted set (member records and a score index).
    ZSet,
}

impl Kind {
    /// The name `TYPE` replies with.
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Hash => "hash",
            Kind::List => "list",
            Kind::Set => "set",
            Kind::ZSet => "zset",
        }
    }

    fn tag(self) -> u8 {
        match self {
            Kind::String => 1,
            Kind::Hash => 3,
            Kind::List => 4,
            Kind::Set => 5,
            Kind::ZSet => 6,
        }
    }

    fn from_tag(t: u8) -> Option<Kind> {
        Some(match t {
            1 => Kind::String,
            3 => Kind::Hash,
            4 => Kind::List,
            5 => Kind::Set,
            6 => Kind::ZSet,
            _ => return None,
        })
    }

    /// The element namespaces of a collection (empty for strings).
    pub fn namespaces(self) -> &'static [u8] {
        match self {
            Kind::String => &[],
            Kind::Hash => &[HASH],
            Kind::List => &[LIST],
            Kind::Set => &[SET],
            Kind::ZSet => &[ZSET, SCORE_INDEX],
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
    /// A collection's version (in its element keys); 0 for strings.
    pub version: u64,
    /// A collection's element count (0 for strings).
    pub count: u64,
    /// A list's first index (0 for other types).
    pub head: u64,
}

impl Meta {
    /// True when the key has expired at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expire_at.is_some_and(|t| t <= now_ms)
    }

    /// A new, empty collection of `kind` with `version`.
    pub fn new_collection(kind: Kind, version: u64) -> Meta {
        Meta {
            kind,
            expire_at: None,
            version,
            count: 0,
            head: if kind == Kind::List { LIST_START } else { 0 },
        }
    }

    /// A collection's metadata record.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(33);
        header(&mut v, self.kind, self.expire_at);
        v.extend_from_slice(&self.version.to_be_bytes());
        v.extend_from_slice(&self.count.to_be_bytes());
        if self.kind == Kind::List {
            v.extend_from_slice(&self.head.to_be_bytes());
        }
        v
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

/// `ns ++ u32be(len) ++ user_key`: the prefix of every element of every
/// version of `user_key` in namespace `ns`.
pub fn key_prefix(ns: u8, user_key: &[u8]) -> Vec<u8> {
    prefix_with_room(ns, user_key, 16)
}

/// `key_prefix` in a vector with room for `more` bytes after it.
fn prefix_with_room(ns: u8, user_key: &[u8], more: usize) -> Vec<u8> {
    let mut k = Vec::with_capacity(5 + user_key.len() + more);
    k.push(ns);
    k.extend_from_slice(&(user_key.len() as u32).to_be_bytes());
    k.extend_from_slice(user_key);
    k
}

/// The user key a collection element's engine key (namespaces `f`, `l`,
/// `t`, `z`, `y`, `h`) belongs to; `None` for other namespaces and for a
/// key too short to hold its user key (a namespace-wide range's bound).
pub fn element_owner(k: &[u8]) -> Option<&[u8]> {
    if !matches!(
        k.first(),
        Some(&(HASH | LIST | SET | ZSET | SCORE_INDEX | LEGACY_HASH))
    ) {
        return None;
    }
    let len = u32::from_be_bytes(k.get(1..5)?.try_into().ok()?) as usize;
    k.get(5..5usize.checked_add(len)?)
}

/// The prefix of every element of version `version` of `user_key` in
/// namespace `ns`.
pub fn element_prefix(ns: u8, user_key: &[u8], version: u64) -> Vec<u8> {
    let mut k = prefix_with_room(ns, user_key, 8 + 16);
    k.extend_from_slice(&version.to_be_bytes());
    k
}

/// The engine key of element `sub` (field, member, ...) of version
/// `version` of `user_key` in namespace `ns`, allocated once at its size
/// (every element read and write builds one).
pub fn element_key(ns: u8, user_key: &[u8], version: u64, sub: &[u8]) -> Vec<u8> {
    let mut k = prefix_with_room(ns, user_key, 8 + sub.len());
    k.extend_from_slice(&version.to_be_bytes());
    k.extend_from_slice(sub);
    k
}

/// The engine key of the list element at `index`.
pub fn list_key(user_key: &[u8], version: u64, index: u64) -> Vec<u8> {
    element_key(LIST, user_key, version, &index.to_be_bytes())
}

/// The engine key of `member`'s score-index record.
pub fn score_key(user_key: &[u8], version: u64, score: f64, member: &[u8]) -> Vec<u8> {
    let mut k = prefix_with_room(SCORE_INDEX, user_key, 16 + member.len());
    k.extend_from_slice(&version.to_be_bytes());
    k.extend_from_slice(&encode_score(score));
    k.extend_from_slice(member);
    k
}

/// Maps a score to 8 bytes whose bytewise order is the numeric order:
/// positive numbers (sign bit clear) get the sign bit set, negative ones
/// are inverted whole, so `-inf < -1 < -0.5 < 0 < 0.5 < 1 < inf`. Callers
/// pass no NaN and no `-0.0` (scores are normalised as Redis stores them:
/// `-0` is `0`).
pub fn encode_score(score: f64) -> [u8; 8] {
    let bits = score.to_bits();
    let ordered = if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    };
    ordered.to_be_bytes()
}

/// The inverse of [`encode_score`].
pub fn decode_score(b: [u8; 8]) -> f64 {
    let ordered = u64::from_be_bytes(b);
    let bits = if ordered >> 63 == 1 {
        ordered & !(1 << 63)
    } else {
        !ordered
    };
    f64::from_bits(bits)
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
        Header::with_tag(kind.tag(), expire_at)
    }

    fn with_tag(tag: u8, expire_at: Option<u64>) -> Header {
        let mut bytes = [0u8; 9];
        let len = match expire_at {
            Some(t) => {
                bytes[0] = tag | HAS_EXPIRY;
                bytes[1..].copy_from_slice(&t.to_be_bytes());
                9
            }
            None => {
                bytes[0] = tag;
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

/// Splits flags and deadline off a record: `(type tag, deadline, rest)`.
fn split_header(raw: &[u8]) -> Option<(u8, Option<u64>, &[u8])> {
    let (&flags, rest) = raw.split_first()?;
    if flags & HAS_EXPIRY != 0 {
        let (t, rest) = rest.split_first_chunk::<8>()?;
        Some((flags & !HAS_EXPIRY, Some(u64::from_be_bytes(*t)), rest))
    } else {
        Some((flags, None, rest))
    }
}

fn take_u64(b: &[u8]) -> Option<(u64, &[u8])> {
    let (v, rest) = b.split_first_chunk::<8>()?;
    Some((u64::from_be_bytes(*v), rest))
}

/// Decodes a metadata record into its header and payload (a string's value;
/// whatever follows a collection's fields, empty as written). `None` if the
/// record is malformed or of data format 0 (a hash without a version:
/// [`decode_legacy_hash`]).
pub fn decode(raw: &[u8]) -> Option<(Meta, &[u8])> {
    let (tag, expire_at, rest) = split_header(raw)?;
    let kind = Kind::from_tag(tag)?;
    let mut meta = Meta {
        kind,
        expire_at,
        version: 0,
        count: 0,
        head: 0,
    };
    if kind == Kind::String {
        return Some((meta, rest));
    }
    let (version, rest) = take_u64(rest)?;
    let (count, rest) = take_u64(rest)?;
    meta.version = version;
    meta.count = count;
    if kind == Kind::List {
        let (head, rest) = take_u64(rest)?;
        // Elements live at head .. head + count within u64.
        head.checked_add(count)?;
        meta.head = head;
        return Some((meta, rest));
    }
    Some((meta, rest))
}

/// Decodes a data format 0 hash record: `(deadline, field count)`.
pub fn decode_legacy_hash(raw: &[u8]) -> Option<(Option<u64>, u64)> {
    let (tag, expire_at, rest) = split_header(raw)?;
    if tag != LEGACY_HASH_TAG {
        return None;
    }
    let (count, _) = take_u64(rest)?;
    Some((expire_at, count))
}

/// Encodes a data format 0 hash record (tests of the upgrade write the
/// old format with it).
pub fn encode_legacy_hash(count: u64, expire_at: Option<u64>) -> Vec<u8> {
    let mut v = Header::with_tag(LEGACY_HASH_TAG, expire_at)
        .as_bytes()
        .to_vec();
    v.extend_from_slice(&count.to_be_bytes());
    v
}

/// Data format 0's engine key of `field` of hash `user_key`.
pub fn legacy_field_key(user_key: &[u8], field: &[u8]) -> Vec<u8> {
    let mut k = key_prefix(LEGACY_HASH, user_key);
    k.extend_from_slice(field);
    k
}

/// Re-encodes `raw` (a metadata record) with a new deadline, keeping type and
/// payload.
pub fn with_expiry(raw: &[u8], expire_at: Option<u64>) -> Option<Vec<u8>> {
    let (meta, payload) = decode(raw)?;
    Some(match meta.kind {
        Kind::String => encode_string(payload, expire_at),
        _ => Meta { expire_at, ..meta }.encode(),
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
        for kind in [Kind::Hash, Kind::List, Kind::Set, Kind::ZSet] {
            let mut m = Meta::new_collection(kind, 77);
            m.count = 7;
            let v = m.encode();
            let (d, rest) = decode(&v).unwrap();
            assert_eq!((d, rest), (m, &b""[..]));
            let v2 = with_expiry(&v, Some(9)).unwrap();
            let (d, _) = decode(&v2).unwrap();
            assert_eq!(
                d,
                Meta {
                    expire_at: Some(9),
                    ..m
                }
            );
            assert!(d.expired(9) && !d.expired(8));
        }
    }

    #[test]
    fn malformed_is_none() {
        assert!(decode(b"").is_none());
        assert!(decode(&[9]).is_none());
        assert!(decode(&[1 | HAS_EXPIRY, 0, 0]).is_none());
        assert!(decode(&[3, 0]).is_none());
        // A list whose elements would run past the end of the index space.
        let mut m = Meta::new_collection(Kind::List, 1);
        m.head = u64::MAX;
        m.count = 2;
        assert!(decode(&m.encode()).is_none());
        // Format 0's hash is not a record of this format.
        let legacy = encode_legacy_hash(4, Some(5));
        assert!(decode(&legacy).is_none());
        assert_eq!(decode_legacy_hash(&legacy), Some((Some(5), 4)));
    }

    #[test]
    fn elements_of_prefix_keys_do_not_interleave() {
        let a = element_key(HASH, b"ab", 1, b"zzz");
        let b = element_key(HASH, b"abc", 1, b"");
        let a2 = element_key(HASH, b"ab", 1, b"a");
        // All fields of "ab" sort together, before those of "abc".
        assert!(a2 < a && a < b);
        assert!(a.starts_with(&element_prefix(HASH, b"ab", 1)));
        assert!(!b.starts_with(&key_prefix(HASH, b"ab")));
        // Versions are disjoint ranges.
        let v2 = element_key(HASH, b"ab", 2, b"");
        assert!(a < v2 && !v2.starts_with(&element_prefix(HASH, b"ab", 1)));
    }

    #[test]
    fn score_bytes_sort_like_numbers() {
        let scores = [
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -1.0,
            -f64::MIN_POSITIVE,
            0.0,
            f64::MIN_POSITIVE,
            0.5,
            1.0,
            3.0,
            1e300,
            f64::INFINITY,
        ];
        for w in scores.windows(2) {
            assert!(encode_score(w[0]) < encode_score(w[1]), "{w:?}");
        }
        for s in scores {
            assert_eq!(decode_score(encode_score(s)), s);
        }
        // Ties order by member.
        assert!(score_key(b"k", 1, 2.0, b"a") < score_key(b"k", 1, 2.0, b"b"));
        assert!(score_key(b"k", 1, 2.0, b"zz") < score_key(b"k", 1, 2.5, b"a"));
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
