//! Atomic groups of writes.
//!
//! A [`WriteBatch`] is applied all-or-nothing: it becomes one WAL record and
//! its operations get consecutive sequence numbers. Its encoding *is* the WAL
//! payload (as in LevelDB), so a batch is never re-serialised on the write path:
//!
//! ```text
//! batch   := seq: u64 LE | count: u32 LE | op*
//! op      := 0 (delete) | varint32 key_len | key
//!          | 1 (put)    | varint32 key_len | key | varint32 value_len | value
//!          | 3 (logged put) | varint32 key_len | key | crc: u32 LE | len: u32 LE | value
//!          | 4 (compressed logged put) | varint32 key_len | key | codec: u8
//!                                    | crc: u32 LE | len: u32 LE | stored
//!          | 5 (range delete) | varint32 start_len | start | varint32 end_len | end
//! ```
//!
//! A *logged put* (store format 3) carries its value as a value-log record
//! (`crc` is the masked CRC32C over the four `len` bytes and the value, as
//! `store::value_log` frames every record), so once the WAL record holding
//! it is durable, a `ValuePointer` into the WAL file can name the value and
//! a read of it checks its own checksum. This is what lets a flush keep
//! large values where the WAL wrote them instead of copying them
//! (`Options::values_in_wal`, `docs/DESIGN.md` §1.2). A *compressed*
//! logged put (store format 5, `Options::value_log_compression`) is one
//! whose record holds the value in `crate::compression`'s stored form,
//! the codec byte (1 LZ4, 2 zstd) before it; the write path compresses on
//! the writer's own thread and fills the memtable from the batch it was
//! given, so only replay, the change feed and reads through a pointer
//! decode it. Kind 2 is the tables' pointer kind and never appears in a
//! batch. A *range delete* (store format 6) deletes every key in
//! `[start, end)` at its one sequence (`crate::range_delete`).

use std::borrow::Cow;

use crate::compression::{Compression, CODEC_LZ4, CODEC_NONE, CODEC_ZSTD};
use crate::error::{Error, Result};
use crate::key::{SequenceNumber, ValueKind, MAX_KEY_SIZE, MAX_VALUE_SIZE};
use crate::util::coding::{get_varint32, put_varint32};
use crate::util::crc::RECORD_HEADER_SIZE as RECORD_HEADER;

const HEADER: usize = 12;
/// The op tag of a logged put (module docs).
const LOGGED_PUT: u8 = 3;
/// The op tag of a compressed logged put (module docs).
const COMPRESSED_LOGGED_PUT: u8 = 4;
/// The op tag of a range delete (module docs).
const RANGE_DELETE: u8 = 5;
/// Most bytes an operation adds besides its key and value: the kind tag and
/// two varint32 lengths.
const OP_OVERHEAD: usize = 1 + 5 + 5;

/// An ordered list of puts and deletes applied atomically by [`crate::Db::write`].
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
/// let mut batch = weft::WriteBatch::new();
/// batch.put(b"apple", b"red");
/// batch.put(b"pear", b"green");
/// batch.delete(b"apple");
/// db.write(batch, &weft::WriteOptions::default()).unwrap();
/// assert_eq!(db.get(b"apple").unwrap(), None);
/// assert_eq!(db.get(b"pear").unwrap().as_deref(), Some(&b"green"[..]));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct WriteBatch {
    rep: Vec<u8>,
    /// A put or delete of the default keyspace named a key in the span
    /// reserved for the other keyspaces (`crate::keyspace_prefix::RESERVED`):
    /// the write is refused ([`Error::InvalidArgument`]) rather than let a
    /// default-keyspace key land among another keyspace's keys. Kept as a
    /// flag set while the batch is built, so the write path does not parse
    /// the batch again to find out.
    default_in_reserved: bool,
    /// A range delete of the default keyspace covers part of the reserved
    /// span: `Db::write` cuts the span out (`with_reserved_cut`).
    default_range_over_reserved: bool,
}

/// True when a default-keyspace range `[start, end)` covers part of the
/// span reserved for keyspaces.
fn overlaps_reserved(start: &[u8], end: &[u8]) -> bool {
    use crate::keyspace_prefix::{RESERVED, RESERVED_END};
    start < end && start < RESERVED_END && end > RESERVED
}

/// True when `[start, end)` is not empty and lies wholly inside the span
/// reserved for the keyspaces other than the default one (an empty or
/// reversed range is left as given: the write refuses a reversed one).
fn within_reserved(start: &[u8], end: &[u8]) -> bool {
    use crate::keyspace_prefix::{RESERVED, RESERVED_END};
    start < end && start >= RESERVED && end <= RESERVED_END
}

impl Default for WriteBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for WriteBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBatch")
            .field("count", &self.len())
            .field("bytes", &self.rep.len())
            .finish()
    }
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        WriteBatch {
            rep: vec![0; HEADER],
            default_in_reserved: false,
            default_range_over_reserved: false,
        }
    }

    /// An empty batch with room for `bytes` of encoded operations (about
    /// the sum of its keys' and values' lengths plus a few bytes each).
    pub fn with_capacity(bytes: usize) -> Self {
        let mut rep = Vec::with_capacity(HEADER + bytes);
        rep.resize(HEADER, 0);
        WriteBatch {
            rep,
            default_in_reserved: false,
            default_range_over_reserved: false,
        }
    }

    /// A batch of the one put `key` → `value`, allocated once at its final
    /// size (`Db::put`'s path: a batch grown from empty reallocated twice
    /// per put).
    pub(crate) fn of_put(key: &[u8], value: &[u8]) -> Self {
        Self::of_one(ValueKind::Put, key, Some(value))
    }

    /// [`WriteBatch::of_put`], with the value as a logged put when it is at
    /// least `logged_from` bytes.
    pub(crate) fn of_put_logged_from(key: &[u8], value: &[u8], logged_from: usize) -> Self {
        if value.len() < logged_from {
            return Self::of_put(key, value);
        }
        let mut b = Self::with_capacity(OP_OVERHEAD + key.len() + value.len());
        b.push_logged_put(key, value, Compression::None);
        b
    }

    /// This batch with every put of a value of at least `logged_from`
    /// bytes re-encoded as a logged put, compressed with `compression`
    /// where that saves enough; `None` when there is nothing to re-encode
    /// (the batch is written as it is). Puts already logged are compressed
    /// if they are not and `compression` is on, else copied.
    pub(crate) fn with_puts_logged_from(
        &self,
        logged_from: usize,
        compression: Compression,
    ) -> Option<WriteBatch> {
        self.with_puts_logged_by(|_| Some((logged_from, compression)))
    }

    /// [`WriteBatch::with_puts_logged_from`] with the threshold and codec
    /// of each put's key (its keyspace's, `crate::keyspace_options`):
    /// `logging(key)` is `None` for a key whose values are not logged (a
    /// put already logged is then copied as it is).
    pub(crate) fn with_puts_logged_by(
        &self,
        logging: impl Fn(&[u8]) -> Option<(usize, Compression)>,
    ) -> Option<WriteBatch> {
        let to_encode = |op: &BatchOp<'_>| {
            op.kind == ValueKind::Put
                && op.codec == CODEC_NONE
                && match (op.logged, logging(op.key)) {
                    (_, None) => false,
                    (None, Some((from, _))) => op.value.len() >= from,
                    (Some(_), Some((_, compression))) => compression != Compression::None,
                }
        };
        if !self.iter().flatten().any(|op| to_encode(&op)) {
            return None;
        }
        let mut out = Self::with_capacity(self.rep.len() + 8 * self.len());
        out.rep[..8].copy_from_slice(&self.rep[..8]);
        out.default_in_reserved = self.default_in_reserved;
        out.default_range_over_reserved = self.default_range_over_reserved;
        for op in self.iter().flatten() {
            if let Some(end) = op.range_end {
                // As it is: a keyspace's range delete lies inside the
                // reserved span and must not be taken for the default's.
                out.push_range_delete(op.key, end);
                continue;
            }
            if op.kind == ValueKind::Put && op.codec != CODEC_NONE {
                out.push_compressed_logged_put(op.key, op.codec, op.value);
                continue;
            }
            let logging = match op.kind {
                ValueKind::Put => logging(op.key),
                _ => None,
            };
            match (op.kind, logging) {
                (ValueKind::Put, Some((from, compression)))
                    if op.logged.is_some() || op.value.len() >= from =>
                {
                    out.push_logged_put(op.key, op.value, compression)
                }
                (ValueKind::Put, None) if op.logged.is_some() => {
                    out.push_logged_put(op.key, op.value, Compression::None)
                }
                (kind, _) => {
                    let value = (kind == ValueKind::Put).then_some(op.value);
                    out.push_parts(kind, &[op.key], value.as_ref().map(std::slice::from_ref))
                }
            }
        }
        Some(out)
    }

    /// Appends a logged put (module docs), compressed with `compression`
    /// where that saves enough (`crate::compression::compress`).
    fn push_logged_put(&mut self, key: &[u8], value: &[u8], compression: Compression) {
        let n = self.len() as u32 + 1;
        self.rep[8..12].copy_from_slice(&n.to_le_bytes());
        let tag_at = self.rep.len();
        self.rep.push(LOGGED_PUT);
        self.push_slice(&[key]);
        if compression != Compression::None {
            // Compressed in place, after room for the codec and header.
            let codec_at = self.rep.len();
            self.rep.extend_from_slice(&[0; 1 + RECORD_HEADER]);
            let stored_at = self.rep.len();
            let codec = crate::compression::compress(compression, value, &mut self.rep);
            if codec != CODEC_NONE {
                let stored = &self.rep[stored_at..];
                // The stored form is never longer than the value.
                let header = crate::util::crc::record_header(stored.len() as u32, stored);
                self.rep[tag_at] = COMPRESSED_LOGGED_PUT;
                self.rep[codec_at] = codec;
                self.rep[codec_at + 1..stored_at].copy_from_slice(&header);
                return;
            }
            self.rep.truncate(codec_at);
        }
        // Oversized values are rejected by `validate`; clamped only so the
        // encoding stays parseable.
        let len = value.len().min(u32::MAX as usize) as u32;
        self.rep
            .extend_from_slice(&crate::util::crc::record_header(len, value));
        self.rep.extend_from_slice(value);
    }

    /// Appends a compressed logged put whose stored form is `stored`.
    fn push_compressed_logged_put(&mut self, key: &[u8], codec: u8, stored: &[u8]) {
        let n = self.len() as u32 + 1;
        self.rep[8..12].copy_from_slice(&n.to_le_bytes());
        self.rep.push(COMPRESSED_LOGGED_PUT);
        self.push_slice(&[key]);
        self.rep.push(codec);
        let header = crate::util::crc::record_header(stored.len() as u32, stored);
        self.rep.extend_from_slice(&header);
        self.rep.extend_from_slice(stored);
    }

    /// A batch of the one delete of `key`, allocated once at its final size.
    pub(crate) fn of_delete(key: &[u8]) -> Self {
        Self::of_one(ValueKind::Delete, key, None)
    }

    fn of_one(kind: ValueKind, key: &[u8], value: Option<&[u8]>) -> Self {
        let value_len = value.map_or(0, <[u8]>::len);
        let mut b = Self::with_capacity(OP_OVERHEAD + key.len() + value_len);
        let capacity = b.rep.capacity();
        b.push_parts(kind, &[key], value.as_ref().map(std::slice::from_ref));
        debug_assert_eq!(b.rep.capacity(), capacity, "a one-operation batch regrew");
        b
    }

    /// Adds a put of `key` to `value`.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        self.note_default_key(&[key.as_ref()]);
        self.push_parts(ValueKind::Put, &[key.as_ref()], Some(&[value.as_ref()]));
        self
    }

    /// Flags the batch when a default-keyspace key given as `parts` lies
    /// in the reserved span (see `default_in_reserved`).
    fn note_default_key(&mut self, parts: &[&[u8]]) {
        // Compared part by part without assembling the key: this runs for
        // every put and delete of a batch.
        let reserved = crate::keyspace_prefix::RESERVED;
        let mut matched = 0;
        for p in parts {
            let take = (reserved.len() - matched).min(p.len());
            if p[..take] != reserved[matched..matched + take] {
                return;
            }
            matched += take;
            if matched == reserved.len() {
                self.default_in_reserved = true;
                return;
            }
        }
    }

    /// True when a default-keyspace put or delete named a reserved key.
    pub(crate) fn default_in_reserved(&self) -> bool {
        self.default_in_reserved
    }

    /// Adds a put without the default keyspace's reserved-span check: the
    /// keyspace registry's own rows (`db::keyspace`).
    pub(crate) fn put_unchecked(&mut self, key: &[u8], value: &[u8]) -> &mut Self {
        self.push_parts(ValueKind::Put, &[key], Some(&[value]));
        self
    }

    /// Adds a delete without the reserved-span check (the registry's rows).
    pub(crate) fn delete_unchecked(&mut self, key: &[u8]) -> &mut Self {
        self.push_parts(ValueKind::Delete, &[key], None);
        self
    }

    /// Adds a put of the concatenation of `key` to the concatenation of
    /// `value` (RocksDB's `SliceParts`): a caller that frames keys or values
    /// with a prefix writes them without assembling each in a buffer first.
    ///
    /// ```
    /// let mut batch = weft::WriteBatch::new();
    /// batch.put_parts(&[b"user:", b"42"], &[b"\x01", b"alice"]);
    /// let mut same = weft::WriteBatch::new();
    /// same.put(b"user:42", b"\x01alice");
    /// assert_eq!(batch, same);
    /// ```
    pub fn put_parts(&mut self, key: &[&[u8]], value: &[&[u8]]) -> &mut Self {
        self.note_default_key(key);
        self.push_parts(ValueKind::Put, key, Some(value));
        self
    }

    /// Adds a delete of `key`.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        self.note_default_key(&[key.as_ref()]);
        self.push_parts(ValueKind::Delete, &[key.as_ref()], None);
        self
    }

    /// Adds a delete of every key in `[start, end)`: one operation however
    /// many keys the range holds (a range tombstone, DESIGN §1.2.1). Reads
    /// at a sequence from this operation's on no longer see the keys it
    /// covers that were written before it; later writes to them are seen
    /// as usual. A range whose `start` is not below `end` deletes nothing;
    /// one whose `start` is above `end` is refused when the batch is
    /// written.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// for k in ["a", "b", "c", "d"] { db.put(k, "v").unwrap(); }
    /// let mut batch = weft::WriteBatch::new();
    /// batch.delete_range("b", "d").put("c", "again");
    /// db.write(batch, &weft::WriteOptions::default()).unwrap();
    /// let keys: Vec<Vec<u8>> = db.range::<&str, _>(..).unwrap().map(|r| r.unwrap().0).collect();
    /// assert_eq!(keys, vec![b"a".to_vec(), b"c".to_vec(), b"d".to_vec()]);
    /// ```
    ///
    /// The span reserved for the other keyspaces is cut out of the range
    /// when the batch is written (`Db::write`): a range delete of the
    /// default keyspace never reaches them. The batch keeps it as one
    /// operation until then, so [`WriteBatch::len`] counts what was added.
    pub fn delete_range(&mut self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> &mut Self {
        let (s, e) = (start.as_ref(), end.as_ref());
        if within_reserved(s, e) {
            // The default keyspace has no key there: an empty range, kept
            // so `len` counts it. Only a keyspace's own range delete
            // (`delete_range_in`) may lie inside the span.
            self.push_range_delete(s, s);
            return self;
        }
        if overlaps_reserved(s, e) {
            self.default_range_over_reserved = true;
        }
        self.push_range_delete(s, e);
        self
    }

    /// This batch with the reserved span cut out of every range delete
    /// that covers part of it (see [`WriteBatch::delete_range`]): a range
    /// delete becomes up to two, the other operations are copied as they
    /// are (values decoded). The batch itself when no range needs a cut,
    /// which is the batch of every write but such a range delete's.
    pub(crate) fn with_reserved_cut(self) -> Result<WriteBatch> {
        use crate::keyspace_prefix::{RESERVED, RESERVED_END};
        if !self.default_range_over_reserved {
            return Ok(self);
        }
        let mut out = WriteBatch::with_capacity(self.rep.len() + 2 * OP_OVERHEAD);
        out.default_in_reserved = self.default_in_reserved;
        for op in self.iter() {
            let op = op?;
            match op.range_end {
                // Partly over the span: the default keyspace's, cut. One
                // wholly inside is a keyspace's own (`delete_range` never
                // leaves one there), kept as it is.
                Some(end) if overlaps_reserved(op.key, end) && !within_reserved(op.key, end) => {
                    if op.key < RESERVED {
                        out.push_range_delete(op.key, RESERVED);
                    }
                    if end > RESERVED_END {
                        out.push_range_delete(RESERVED_END, end);
                    }
                }
                Some(end) => out.push_range_delete(op.key, end),
                None if op.kind == ValueKind::Put => {
                    let value = op.decoded_value().map_err(|e| {
                        Error::InvalidArgument(format!("a put in the batch is malformed: {e}"))
                    })?;
                    out.push_parts(ValueKind::Put, &[op.key], Some(&[&value]));
                }
                None => out.push_parts(op.kind, &[op.key], None),
            }
        }
        Ok(out)
    }

    /// Appends one range delete op of `[start, end)` as given.
    pub(crate) fn push_range_delete(&mut self, start: &[u8], end: &[u8]) {
        let n = self.len() as u32 + 1;
        self.rep[8..12].copy_from_slice(&n.to_le_bytes());
        self.rep.push(RANGE_DELETE);
        self.push_slice(&[start]);
        self.push_slice(&[end]);
    }

    /// A batch of the one range delete of `[start, end)`.
    pub(crate) fn of_delete_range(start: &[u8], end: &[u8]) -> Self {
        let mut b = Self::with_capacity(OP_OVERHEAD + start.len() + end.len());
        b.delete_range(start, end);
        b
    }

    pub(crate) fn push_parts(&mut self, kind: ValueKind, key: &[&[u8]], value: Option<&[&[u8]]>) {
        let n = self.len() as u32 + 1;
        self.rep[8..12].copy_from_slice(&n.to_le_bytes());
        self.rep.push(kind as u8);
        self.push_slice(key);
        if let Some(v) = value {
            self.push_slice(v);
        }
    }

    /// Appends one length-prefixed slice given as parts.
    fn push_slice(&mut self, parts: &[&[u8]]) {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        // Oversized keys/values are rejected by `validate` before the batch is
        // written; lengths are clamped here only so the encoding stays parseable.
        put_varint32(&mut self.rep, len.min(u32::MAX as usize) as u32);
        for p in parts {
            self.rep.extend_from_slice(p);
        }
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        u32::from_le_bytes(self.rep[8..12].try_into().expect("header is 12 bytes")) as usize
    }

    /// True when the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every operation.
    pub fn clear(&mut self) {
        self.default_in_reserved = false;
        self.default_range_over_reserved = false;
        self.rep.clear();
        self.rep.resize(HEADER, 0);
    }

    /// Bytes of the encoded batch (its WAL payload size).
    pub fn approximate_size(&self) -> usize {
        self.rep.len()
    }

    /// Iterates over the operations in order.
    pub fn iter(&self) -> BatchIter<'_> {
        BatchIter {
            data: &self.rep[HEADER..],
            pos: HEADER,
            remaining: self.len(),
        }
    }

    /// Checks the limits of DESIGN "Semantics" for every operation.
    #[cfg(test)]
    pub(crate) fn validate(&self) -> Result<()> {
        self.validate_naming(&|id| format!("#{id}"))
    }

    /// [`WriteBatch::validate`], its errors about a key of a keyspace
    /// other than the default one quoting the key as its keyspace knows it
    /// (without the stored prefix) and naming the keyspace
    /// (`keyspace_name(id)`, called only for an error).
    pub(crate) fn validate_naming(&self, keyspace_name: &dyn Fn(u32) -> String) -> Result<()> {
        // `(prefix length, " in keyspace \"name\"")` of a stored key.
        let shown = |key: &[u8]| match crate::keyspace_prefix::split(key) {
            Some((id, user)) if id != 0 => (
                key.len() - user.len(),
                format!(" in keyspace \"{}\"", keyspace_name(id)),
            ),
            _ => (0, String::new()),
        };
        for op in self.iter() {
            let op = op?;
            if op.key.len() > MAX_KEY_SIZE {
                let (p, within) = shown(op.key);
                return Err(Error::InvalidArgument(format!(
                    "key of {} bytes{within} exceeds the limit of {} bytes",
                    op.key.len() - p,
                    MAX_KEY_SIZE - p
                )));
            }
            if op.value.len() > MAX_VALUE_SIZE {
                return Err(Error::InvalidArgument(format!(
                    "value of {} bytes exceeds the limit of {MAX_VALUE_SIZE} bytes",
                    op.value.len()
                )));
            }
            if let Some(end) = op.range_end {
                if end.len() > MAX_KEY_SIZE {
                    let (p, within) = shown(end);
                    return Err(Error::InvalidArgument(format!(
                        "range delete end key of {} bytes{within} exceeds the limit of {} bytes",
                        end.len() - p,
                        MAX_KEY_SIZE - p
                    )));
                }
                if op.key > end {
                    let (p, within) = shown(op.key);
                    return Err(Error::InvalidArgument(format!(
                        "range delete start \"{}\" is past its end \"{}\"{within}",
                        op.key[p..].escape_ascii(),
                        end.get(p..).unwrap_or(end).escape_ascii()
                    )));
                }
            }
        }
        Ok(())
    }

    /// The sequence of the first operation, as stamped by the write path.
    pub(crate) fn sequence(&self) -> SequenceNumber {
        u64::from_le_bytes(self.rep[0..8].try_into().expect("header is 12 bytes"))
    }

    pub(crate) fn set_sequence(&mut self, seq: SequenceNumber) {
        self.rep[0..8].copy_from_slice(&seq.to_le_bytes());
    }

    /// The encoded batch (WAL payload).
    pub(crate) fn encoded(&self) -> &[u8] {
        &self.rep
    }

    /// Parses a WAL payload back into a batch, checking its structure.
    pub(crate) fn decode(rep: Vec<u8>) -> std::result::Result<WriteBatch, String> {
        if rep.len() < HEADER {
            return Err(format!(
                "batch of {} bytes is shorter than its header",
                rep.len()
            ));
        }
        let b = WriteBatch {
            rep,
            default_in_reserved: false,
            default_range_over_reserved: false,
        };
        let mut seen = 0;
        let mut ops = b.iter();
        for op in ops.by_ref() {
            let op = op.map_err(|e| e.to_string())?;
            if let Some(at) = op.logged {
                // The record's CRC holds, so a bad embedded one is a writer
                // bug or damage that recomputed the outer CRC: never trust it.
                let header = b.rep[at..at + RECORD_HEADER]
                    .try_into()
                    .map_err(|_| "short logged-put header".to_string())?;
                let (crc, _) = crate::util::crc::parse_record_header(header);
                if crc != crate::util::crc::record_checksum(op.value.len() as u32, op.value) {
                    return Err(format!(
                        "logged put at byte {at} of the batch fails its own checksum"
                    ));
                }
            }
            seen += 1;
        }
        if seen != b.len() {
            return Err(format!("batch header says {} ops, found {seen}", b.len()));
        }
        // Bytes past the last op are damage (a count too low, a record
        // that grew): accepting them would drop operations unseen.
        if !ops.data.is_empty() {
            return Err(format!(
                "{} bytes after the last of {seen} ops",
                ops.data.len()
            ));
        }
        Ok(b)
    }
}

/// The length of the write batch encoded at the start of `bytes`: its
/// header's op count, walked op by op; `None` unless that many whole ops
/// are there. Recovery uses it to tell a WAL record whose length field was
/// damaged from one torn by a crash (`db::open::check_wal_tail`).
pub(crate) fn encoded_len(bytes: &[u8]) -> Option<usize> {
    let count = bytes.get(8..HEADER)?;
    let count = u32::from_le_bytes(count.try_into().ok()?) as usize;
    let mut ops = BatchIter {
        data: &bytes[HEADER..],
        pos: HEADER,
        remaining: count,
    };
    for op in ops.by_ref() {
        op.ok()?;
    }
    Some(bytes.len() - ops.data.len())
}

/// A logged put as [`logged_puts`] finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LoggedPut {
    /// Its sequence.
    pub seq: SequenceNumber,
    /// Offset of its embedded value-log record in the payload.
    pub at: usize,
    /// Bytes the record stores.
    pub stored: u32,
    /// Bytes of the value (the stored ones, or what they decompress to).
    pub value_len: u32,
    /// How the stored bytes encode the value (`compression::CODEC_*`).
    pub codec: u8,
}

/// The logged puts of the encoded batch `payload` (a WAL record's payload
/// whose record checksum held). Structural damage is an error; the
/// embedded checksums are left to the reads that use them.
pub(crate) fn logged_puts(payload: &[u8]) -> std::result::Result<Vec<LoggedPut>, String> {
    let count = payload.get(8..HEADER).ok_or_else(|| {
        format!(
            "batch of {} bytes is shorter than its header",
            payload.len()
        )
    })?;
    let count = u32::from_le_bytes(count.try_into().map_err(|_| "short header")?) as usize;
    let first = u64::from_le_bytes(payload[..8].try_into().map_err(|_| "short header")?);
    let ops = BatchIter {
        data: &payload[HEADER..],
        pos: HEADER,
        remaining: count,
    };
    let mut out = Vec::new();
    for (i, op) in ops.enumerate() {
        let op = op.map_err(|e| e.to_string())?;
        if let Some(at) = op.logged {
            let value_len = match op.codec {
                CODEC_NONE => op.value.len() as u32,
                _ => {
                    get_varint32(op.value, 0)
                        .ok_or("compressed logged put without its length")?
                        .0
                }
            };
            out.push(LoggedPut {
                seq: first + i as u64,
                at,
                stored: op.value.len() as u32,
                value_len,
                codec: op.codec,
            });
        }
    }
    Ok(out)
}

/// One operation of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchOp<'a> {
    /// Put or delete.
    pub kind: ValueKind,
    /// The key.
    pub key: &'a [u8],
    /// The value (empty for a delete); for a compressed logged put, its
    /// stored form ([`BatchOp::decoded_value`] gives the value).
    pub value: &'a [u8],
    /// For a logged put: where its value-log record (header, then the
    /// stored bytes) starts in the encoded batch.
    pub logged: Option<usize>,
    /// How `value` encodes the value: `compression::CODEC_NONE` (it is the
    /// value), or the codec of a compressed logged put.
    pub codec: u8,
    /// For a range delete: the end of its range (exclusive); `key` is the
    /// start and `kind` is [`ValueKind::Delete`]. Every reader of a batch
    /// must look here before it takes a delete for a point delete.
    pub range_end: Option<&'a [u8]>,
}

/// What one operation of a batch does, as [`WriteBatch::put`],
/// [`WriteBatch::delete`] and [`WriteBatch::delete_range`] wrote it: the
/// public reading of a [`BatchOp`], for programs that read their own
/// batches back (a server applying a transaction, a replica a frame).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchAction<'a> {
    /// The key is set to this value (decompressed when it was logged
    /// compressed).
    Put(Cow<'a, [u8]>),
    /// The key is deleted.
    Delete,
    /// Every key from the operation's key up to `end` (exclusive) is
    /// deleted.
    DeleteRange {
        /// The first key past the range.
        end: &'a [u8],
    },
}

impl<'a> BatchOp<'a> {
    /// What the operation does. A compressed logged put whose stored form
    /// does not decode gives the reason (the caller knows where the batch
    /// came from).
    pub fn action(&self) -> std::result::Result<BatchAction<'a>, &'static str> {
        Ok(match (self.range_end, self.kind) {
            (Some(end), _) => BatchAction::DeleteRange { end },
            (None, ValueKind::Delete) => BatchAction::Delete,
            (None, _) => BatchAction::Put(self.decoded_value()?),
        })
    }

    /// The value, decompressed for a compressed logged put; a stored form
    /// that does not decode is the reason for `Error::Corruption` (the
    /// caller knows the file and offset).
    pub fn decoded_value(&self) -> std::result::Result<Cow<'a, [u8]>, &'static str> {
        match self.codec {
            CODEC_NONE => Ok(Cow::Borrowed(self.value)),
            codec => {
                crate::compression::decompress(codec, self.value, MAX_VALUE_SIZE).map(Cow::Owned)
            }
        }
    }
}

/// Iterator over the operations of a [`WriteBatch`].
pub struct BatchIter<'a> {
    data: &'a [u8],
    /// Offset of `data` in the encoded batch.
    pos: usize,
    remaining: usize,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<BatchOp<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let bad = |m: &str| {
            Some(Err(Error::InvalidArgument(format!(
                "malformed write batch: {m}"
            ))))
        };
        let Some((&tag, rest)) = self.data.split_first() else {
            self.remaining = 0;
            return bad("truncated op");
        };
        let logged_put = tag == LOGGED_PUT || tag == COMPRESSED_LOGGED_PUT;
        let kind = match ValueKind::from_u8(tag) {
            _ if logged_put => ValueKind::Put,
            _ if tag == RANGE_DELETE => ValueKind::Delete,
            Some(k) if k != ValueKind::Pointer => k,
            _ => {
                self.remaining = 0;
                return bad("unknown op kind");
            }
        };
        let take = |d: &mut &'a [u8]| -> Option<&'a [u8]> {
            let (len, n) = get_varint32(d, 0)?;
            let end = n.checked_add(len as usize)?;
            let s = d.get(n..end)?;
            *d = &d[end..];
            Some(s)
        };
        let mut d = rest;
        let Some(key) = take(&mut d) else {
            self.remaining = 0;
            return bad("truncated key");
        };
        let mut logged = None;
        let mut codec = CODEC_NONE;
        let mut range_end = None;
        if tag == RANGE_DELETE {
            match take(&mut d) {
                Some(end) => range_end = Some(end),
                None => {
                    self.remaining = 0;
                    return bad("truncated range end");
                }
            }
        }
        if tag == COMPRESSED_LOGGED_PUT {
            match d.split_first() {
                Some((&c @ (CODEC_LZ4 | CODEC_ZSTD), rest)) => {
                    codec = c;
                    d = rest;
                }
                _ => {
                    self.remaining = 0;
                    return bad("compressed logged put with an unknown codec");
                }
            }
        }
        let value = if logged_put {
            // A value-log record: crc, len, value.
            let record = d.get(4..RECORD_HEADER).and_then(|len| {
                let len = u32::from_le_bytes(len.try_into().ok()?) as usize;
                d.get(RECORD_HEADER..RECORD_HEADER.checked_add(len)?)
            });
            match record {
                Some(v) => {
                    logged = Some(self.pos + (self.data.len() - d.len()));
                    d = &d[RECORD_HEADER + v.len()..];
                    v
                }
                None => {
                    self.remaining = 0;
                    return bad("truncated logged value");
                }
            }
        } else if kind == ValueKind::Put {
            match take(&mut d) {
                Some(v) => v,
                None => {
                    self.remaining = 0;
                    return bad("truncated value");
                }
            }
        } else {
            &[][..]
        };
        self.pos += self.data.len() - d.len();
        self.data = d;
        Some(Ok(BatchOp {
            kind,
            key,
            value,
            logged,
            codec,
            range_end,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut a = WriteBatch::new();
        a.put(b"k1", b"v1").delete(b"k2").put(b"", vec![7u8; 300]);
        a.set_sequence(99);
        let d = WriteBatch::decode(a.encoded().to_vec()).unwrap();
        assert_eq!(d.sequence(), 99);
        let ops: Vec<_> = d.iter().map(|o| o.unwrap()).collect();
        assert_eq!(ops.len(), 3);
        assert_eq!(
            (ops[0].kind, ops[0].key, ops[0].value),
            (ValueKind::Put, &b"k1"[..], &b"v1"[..])
        );
        assert_eq!((ops[1].kind, ops[1].key), (ValueKind::Delete, &b"k2"[..]));
        assert_eq!(ops[2].value.len(), 300);
    }

    #[test]
    fn actions_read_back_what_was_written() {
        let mut a = WriteBatch::new();
        a.put(b"k1", b"v1").delete(b"k2").delete_range(b"a", b"c");
        let actions: Vec<_> = a.iter().map(|o| o.unwrap().action().unwrap()).collect();
        assert_eq!(
            actions,
            vec![
                BatchAction::Put(Cow::Borrowed(&b"v1"[..])),
                BatchAction::Delete,
                BatchAction::DeleteRange { end: &b"c"[..] },
            ]
        );
    }

    #[test]
    fn decode_rejects_truncation_anywhere() {
        let mut a = WriteBatch::new();
        a.put(b"key", b"value").delete(b"other");
        let enc = a.encoded().to_vec();
        for cut in 0..enc.len() {
            assert!(
                WriteBatch::decode(enc[..cut].to_vec()).is_err(),
                "cut at {cut}"
            );
        }
    }

    /// A logged put reads back as a put whose value sits behind a
    /// value-log record header at `logged`; re-encoding a plain batch
    /// logs exactly the values at or above the threshold.
    #[test]
    fn logged_puts_round_trip_and_carry_their_own_record() {
        let big = vec![9u8; 300];
        let mut plain = WriteBatch::new();
        plain.put(b"a", b"small").delete(b"b").put(b"c", &big);
        let none = Compression::None;
        assert!(plain.with_puts_logged_from(usize::MAX, none).is_none());
        let mut logged = plain.with_puts_logged_from(100, none).unwrap();
        assert!(
            logged.with_puts_logged_from(100, none).is_none(),
            "already logged"
        );
        logged.set_sequence(7);
        let d = WriteBatch::decode(logged.encoded().to_vec()).unwrap();
        let ops: Vec<_> = d.iter().map(|o| o.unwrap()).collect();
        let plain_ops: Vec<_> = plain.iter().map(|o| o.unwrap()).collect();
        for (a, b) in ops.iter().zip(&plain_ops) {
            assert_eq!((a.kind, a.key, a.value), (b.kind, b.key, b.value));
        }
        assert_eq!((ops[0].logged, ops[1].logged), (None, None));
        let at = ops[2].logged.unwrap();
        let rep = d.encoded();
        let header: &[u8; RECORD_HEADER] = rep[at..at + RECORD_HEADER].try_into().unwrap();
        let (crc, len) = crate::util::crc::parse_record_header(header);
        assert_eq!(len as usize, big.len());
        assert_eq!(crc, crate::util::crc::record_checksum(len, &big));
        assert_eq!(
            &rep[at + RECORD_HEADER..at + RECORD_HEADER + big.len()],
            &big[..]
        );
        let one = WriteBatch::of_put_logged_from(b"c", &big, 300);
        assert_eq!(
            one.iter().next().unwrap().unwrap().logged,
            Some(HEADER + 1 + 1 + 1)
        );
        assert!(WriteBatch::of_put_logged_from(b"c", &big, 301)
            .iter()
            .all(|o| o.unwrap().logged.is_none()));
    }

    /// A logged value whose own checksum fails is refused even when the
    /// rest of the batch parses (the WAL record's CRC would have held).
    #[test]
    fn a_logged_put_with_a_bad_embedded_checksum_does_not_decode() {
        let mut b = WriteBatch::new();
        b.put(b"k", vec![1u8; 64]);
        let b = b.with_puts_logged_from(1, Compression::None).unwrap();
        let at = b.iter().next().unwrap().unwrap().logged.unwrap();
        for flip in [at, at + RECORD_HEADER + 10] {
            let mut enc = b.encoded().to_vec();
            enc[flip] ^= 1;
            let e = WriteBatch::decode(enc).unwrap_err();
            assert!(e.contains("own checksum"), "{e}");
        }
        let enc = b.encoded().to_vec();
        for cut in 0..enc.len() {
            assert!(
                WriteBatch::decode(enc[..cut].to_vec()).is_err(),
                "cut {cut}"
            );
        }
    }

    /// Compressed logged puts: what compresses is stored compressed (a
    /// logged put already compressed is copied as it is), decodes back to
    /// the value, and names its stored length and codec to the flush; what
    /// does not compress stays a plain logged put; damage to the stored
    /// bytes fails the embedded checksum.
    #[test]
    fn compressed_logged_puts_round_trip() {
        let text = b"a value that compresses well, ".repeat(20);
        let noise: Vec<u8> = (0..400u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        for compression in [Compression::Lz4, Compression::ZSTD] {
            let mut plain = WriteBatch::new();
            plain
                .put(b"t", &text)
                .put(b"n", &noise)
                .put(b"s", b"small")
                .delete(b"d");
            let b = plain.with_puts_logged_from(100, compression).unwrap();
            // Logged already but uncompressed: compressed now; then settled.
            let logged = plain.with_puts_logged_from(100, Compression::None).unwrap();
            let again = logged.with_puts_logged_from(100, compression).unwrap();
            assert_eq!(again.encoded(), b.encoded());
            // Re-encoded again, the compressed put is copied as it is (the
            // incompressible one is tried again, and stays plain).
            let thrice = b.with_puts_logged_from(100, compression).unwrap();
            assert_eq!(thrice.encoded(), b.encoded());
            let mut b = b;
            b.set_sequence(40);
            let d = WriteBatch::decode(b.encoded().to_vec()).unwrap();
            let ops: Vec<_> = d.iter().map(|o| o.unwrap()).collect();
            assert_eq!(ops[0].codec, compression.codec());
            assert!(ops[0].value.len() < text.len() / 2);
            assert_eq!(ops[0].decoded_value().unwrap(), &text[..]);
            assert_eq!(ops[1].codec, CODEC_NONE, "noise stays plain");
            assert!(ops[1].logged.is_some());
            assert_eq!(ops[1].decoded_value().unwrap(), &noise[..]);
            assert_eq!((ops[2].logged, ops[3].kind), (None, ValueKind::Delete));
            let found = logged_puts(d.encoded()).unwrap();
            assert_eq!(found.len(), 2);
            assert_eq!((found[0].seq, found[0].codec), (40, compression.codec()));
            assert_eq!(found[0].value_len as usize, text.len());
            assert_eq!(found[0].stored as usize, ops[0].value.len());
            assert_eq!(
                (found[1].seq, found[1].value_len as usize),
                (41, noise.len())
            );
            let at = ops[0].logged.unwrap();
            let mut bad = b.encoded().to_vec();
            bad[at + RECORD_HEADER + 3] ^= 0x10;
            assert!(WriteBatch::decode(bad)
                .unwrap_err()
                .contains("own checksum"));
            let mut bad = b.encoded().to_vec();
            bad[at - 1] = 9;
            assert!(WriteBatch::decode(bad).is_err(), "unknown codec");
        }
    }

    #[test]
    fn oversized_key_is_invalid_argument() {
        let mut a = WriteBatch::new();
        a.put(vec![0u8; MAX_KEY_SIZE + 1], b"v");
        assert!(matches!(a.validate(), Err(Error::InvalidArgument(_))));
    }
}
