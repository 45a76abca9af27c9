//! Internal keys: a user key tagged with a sequence number and a kind.
//!
//! Order is bytewise on the user key, then *descending* on the 64-bit trailer
//! `seq << 8 | kind`, so the newest version of a key sorts first. Encoded, an
//! internal key is the user key followed by the trailer as 8 little-endian
//! bytes (LevelDB's layout); [`compare_internal`] decodes the trailer.
//!
//! Seeking to `(user_key, snapshot)` with [`ValueKind::MAX`] lands on the
//! newest version whose sequence is at most `snapshot`.

pub mod compares;

use std::cmp::Ordering;

/// A write's position in the global history. Only the low 56 bits are used.
pub type SequenceNumber = u64;

/// The largest sequence number that fits in a trailer.
pub const MAX_SEQUENCE: SequenceNumber = (1 << 56) - 1;

/// Longest user key accepted (64 KiB).
pub const MAX_KEY_SIZE: usize = 64 * 1024;

/// Longest value accepted (512 MiB, Redis's bulk-string limit).
pub const MAX_VALUE_SIZE: usize = 512 * 1024 * 1024;

/// Bytes of the trailer appended to a user key.
pub const TRAILER_SIZE: usize = 8;

/// What a versioned entry says about its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ValueKind {
    /// The key was deleted at this sequence (a tombstone).
    Delete = 0,
    /// The key was set to the entry's value.
    Put = 1,
    /// The key was set to a value stored in a value log; the entry's value is
    /// an encoded value pointer (`store::value_log::ValuePointer`). Only SortedStore
    /// tables hold these (UniKV's partial key-value separation).
    Pointer = 2,
}

impl ValueKind {
    /// The kind with the largest tag; used to build seek targets.
    pub const MAX: ValueKind = ValueKind::Pointer;

    /// True for kinds that give the key a value (put or pointer).
    pub fn is_value(self) -> bool {
        self != ValueKind::Delete
    }

    /// Decodes a kind tag; `None` for unknown tags (corruption).
    pub fn from_u8(tag: u8) -> Option<ValueKind> {
        match tag {
            0 => Some(ValueKind::Delete),
            1 => Some(ValueKind::Put),
            2 => Some(ValueKind::Pointer),
            _ => None,
        }
    }
}

/// Packs a sequence and kind into a trailer.
#[inline]
pub fn pack_trailer(seq: SequenceNumber, kind: ValueKind) -> u64 {
    debug_assert!(seq <= MAX_SEQUENCE, "sequence {seq} exceeds 56 bits");
    (seq << 8) | kind as u64
}

/// Splits a trailer into its sequence and raw kind tag.
#[inline]
pub fn unpack_trailer(trailer: u64) -> (SequenceNumber, u8) {
    (trailer >> 8, (trailer & 0xff) as u8)
}

/// Appends the encoded internal key `(user_key, seq, kind)` to `dst`.
#[inline]
pub fn encode_internal_key(
    dst: &mut Vec<u8>,
    user_key: &[u8],
    seq: SequenceNumber,
    kind: ValueKind,
) {
    dst.extend_from_slice(user_key);
    dst.extend_from_slice(&pack_trailer(seq, kind).to_le_bytes());
}

/// Returns the encoded internal key `(user_key, seq, kind)`.
pub fn internal_key(user_key: &[u8], seq: SequenceNumber, kind: ValueKind) -> Vec<u8> {
    let mut v = Vec::with_capacity(user_key.len() + TRAILER_SIZE);
    encode_internal_key(&mut v, user_key, seq, kind);
    v
}

/// A decoded view of an encoded internal key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    /// The user's key.
    pub user_key: &'a [u8],
    /// The entry's sequence number.
    pub seq: SequenceNumber,
    /// The entry's kind.
    pub kind: ValueKind,
}

/// Parses an encoded internal key; `None` if it is too short or its kind tag
/// is unknown (the caller turns that into [`crate::Error::Corruption`]).
pub fn parse_internal_key(ikey: &[u8]) -> Option<ParsedKey<'_>> {
    if ikey.len() < TRAILER_SIZE {
        return None;
    }
    let (user_key, trailer) = ikey.split_at(ikey.len() - TRAILER_SIZE);
    let trailer = u64::from_le_bytes(trailer.try_into().ok()?);
    let (seq, tag) = unpack_trailer(trailer);
    Some(ParsedKey {
        user_key,
        seq,
        kind: ValueKind::from_u8(tag)?,
    })
}

/// The user-key part of an encoded internal key (which must be well formed).
#[inline]
pub fn user_key_of(ikey: &[u8]) -> &[u8] {
    debug_assert!(ikey.len() >= TRAILER_SIZE);
    &ikey[..ikey.len().saturating_sub(TRAILER_SIZE)]
}

#[inline]
fn trailer_of(ikey: &[u8]) -> u64 {
    let n = ikey.len();
    if n < TRAILER_SIZE {
        return 0;
    }
    let mut b = [0u8; 8];
    b.copy_from_slice(&ikey[n - TRAILER_SIZE..]);
    u64::from_le_bytes(b)
}

/// Compares two encoded internal keys: user key ascending, trailer descending.
#[inline]
pub fn compare_internal(a: &[u8], b: &[u8]) -> Ordering {
    match compare_user_keys(user_key_of(a), user_key_of(b)) {
        Ordering::Equal => trailer_of(b).cmp(&trailer_of(a)),
        o => o,
    }
}

/// Words compared inline before the rest goes to `memcmp`, which wins on
/// long keys.
const INLINE_WORDS: usize = 4;

/// Lexicographic byte order of user keys `a` and `b` (`<[u8] as Ord>::cmp`),
/// comparing big-endian 8-byte words inline: the slice `Ord` calls libc's
/// `memcmp`, and for the short keys a store mostly holds (16 bytes in
/// db_bench and redis-benchmark) the call costs more than the compare.
#[inline(always)]
pub fn compare_user_keys(a: &[u8], b: &[u8]) -> Ordering {
    let (mut a, mut b) = (a, b);
    for _ in 0..INLINE_WORDS {
        match (a.split_first_chunk::<8>(), b.split_first_chunk::<8>()) {
            (Some((x, rest_a)), Some((y, rest_b))) => {
                if x != y {
                    return u64::from_be_bytes(*x).cmp(&u64::from_be_bytes(*y));
                }
                (a, b) = (rest_a, rest_b);
            }
            _ => {
                // One side has fewer than 8 bytes left: its padded word
                // against the other's first bytes, then the lengths.
                let n = a.len().min(b.len());
                if n == 0 {
                    // Equal so far and one side ended (every key whose
                    // length is a multiple of 8 compared equal ends here).
                    return a.len().cmp(&b.len());
                }
                return key_prefix(&a[..n])
                    .cmp(&key_prefix(&b[..n]))
                    .then(a.len().cmp(&b.len()));
            }
        }
    }
    a.cmp(b)
}

/// The first 8 bytes of `key`, big-endian, zero-padded: for keys `a < b`,
/// `key_prefix(a) <= key_prefix(b)` (a monotone, lossy summary; equal
/// prefixes need a full comparison). ESL's index entries and `teks`'s
/// batch sort keep it per key.
#[inline(always)]
pub(crate) fn key_prefix(key: &[u8]) -> u64 {
    let mut p = [0u8; 8];
    let n = key.len().min(8);
    p[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(p)
}

/// `a == b` for user keys, with [`compare_user_keys`]'s inline words.
#[inline(always)]
pub fn same_user_key(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && compare_user_keys(a, b) == Ordering::Equal
}

/// Compares `(user_key, seq)` positions in internal order (kinds ignored:
/// sequences are unique, so two entries never share a sequence).
#[inline]
pub fn compare_positions(
    a_key: &[u8],
    a_seq: SequenceNumber,
    b_key: &[u8],
    b_seq: SequenceNumber,
) -> Ordering {
    match compare_user_keys(a_key, b_key) {
        Ordering::Equal => b_seq.cmp(&a_seq),
        o => o,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_versions_sort_first() {
        let a = internal_key(b"k", 10, ValueKind::Put);
        let b = internal_key(b"k", 9, ValueKind::Delete);
        let c = internal_key(b"k\0", 100, ValueKind::Put);
        assert_eq!(compare_internal(&a, &b), Ordering::Less);
        assert_eq!(compare_internal(&b, &c), Ordering::Less);
        assert_eq!(compare_internal(&a, &a), Ordering::Equal);
    }

    #[test]
    fn user_key_prefix_sorts_before_extension() {
        // "a" < "a\x00" even though the trailer bytes of "a" could be anything.
        let a = internal_key(b"a", MAX_SEQUENCE, ValueKind::Put);
        let b = internal_key(b"a\x00", 0, ValueKind::Delete);
        assert_eq!(compare_internal(&a, &b), Ordering::Less);
    }

    #[test]
    fn parse_round_trips_and_rejects_garbage() {
        let k = internal_key(b"hello", 42, ValueKind::Delete);
        let p = parse_internal_key(&k).unwrap();
        assert_eq!(
            (p.user_key, p.seq, p.kind),
            (&b"hello"[..], 42, ValueKind::Delete)
        );
        assert!(parse_internal_key(b"short").is_none());
        let mut bad = k.clone();
        let n = bad.len();
        bad[n - 8] = 7; // unknown kind tag
        assert!(parse_internal_key(&bad).is_none());
    }
}
