//! Checksums as every Weft file stores them, and the record framing the
//! logs share.
//!
//! Stored checksums are CRC32C (Castagnoli), *masked* as LevelDB masks
//! them: `((crc >> 15) | (crc << 17)).wrapping_add(0xa282ead8)`. The CRC of
//! bytes that themselves contain CRCs is weak (a record embedding a framed
//! record would carry a valid CRC of a CRC by accident); masking breaks
//! that. Table block trailers and footers, WAL and manifest records and
//! value-log records store masked CRCs (hash-index checkpoints store an
//! unmasked one: `store::hash_index::checkpoint`).
//!
//! A *framed record* (WAL, manifest, value log) is an 8-byte header and a
//! payload:
//!
//! ```text
//!  0               4               8                      8 + len
//!  | masked CRC32C | len (u32 LE)  | payload (len bytes)  |
//!    u32 LE         \______ covered by the CRC _________/
//! ```
//!
//! The length is covered by the checksum, so a flipped bit in it is
//! corruption rather than a silent re-framing of the rest of the file.

/// Added to a rotated CRC when it is masked (LevelDB's constant).
const MASK_DELTA: u32 = 0xa282_ead8;

/// Bytes of a framed record's header: masked CRC (4) + payload length (4).
pub(crate) const RECORD_HEADER_SIZE: usize = 8;

/// Masks a CRC before it is stored.
#[inline]
pub(crate) fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Inverse of [`mask`].
#[inline]
pub(crate) fn unmask(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

/// The masked CRC32C of `parts`, concatenated.
pub(crate) fn masked_crc32c(parts: &[&[u8]]) -> u32 {
    mask(parts.iter().fold(0, |crc, p| crc32c::crc32c_append(crc, p)))
}

/// The masked checksum a framed record of `payload` stores: over the four
/// length bytes, then the payload.
#[inline]
pub(crate) fn record_checksum(len: u32, payload: &[u8]) -> u32 {
    masked_crc32c(&[&len.to_le_bytes(), payload])
}

/// The header of a framed record of `payload`, whose length the caller has
/// checked fits a `u32`.
pub(crate) fn record_header(len: u32, payload: &[u8]) -> [u8; RECORD_HEADER_SIZE] {
    let mut header = [0u8; RECORD_HEADER_SIZE];
    header[..4].copy_from_slice(&record_checksum(len, payload).to_le_bytes());
    header[4..].copy_from_slice(&len.to_le_bytes());
    header
}

/// A framed record's header split into (stored masked CRC, payload length).
#[inline]
pub(crate) fn parse_record_header(header: &[u8; RECORD_HEADER_SIZE]) -> (u32, u32) {
    let crc = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    let len = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    (crc, len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_round_trips_and_changes_the_crc() {
        for crc in [0u32, 1, 0xdead_beef, u32::MAX, MASK_DELTA] {
            assert_eq!(unmask(mask(crc)), crc);
            assert_ne!(mask(crc), crc);
        }
    }

    /// Every file kind stores these bytes: a change to the masking or the
    /// framing is a format change, caught here.
    #[test]
    fn pinned_vectors() {
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(mask(0), MASK_DELTA);
        assert_eq!(mask(0xe306_9283), 0xc78a_b0e5);
        assert_eq!(
            record_header(3, b"abc"),
            [0x01, 0x95, 0x73, 0xaa, 0x03, 0x00, 0x00, 0x00]
        );
        assert_eq!(parse_record_header(&record_header(3, b"abc")).1, 3);
        assert_eq!(masked_crc32c(&[b"ab", b"c"]), mask(crc32c::crc32c(b"abc")));
    }

    #[test]
    fn no_valid_header_is_all_zeros() {
        assert_ne!(record_header(0, b""), [0u8; RECORD_HEADER_SIZE]);
    }
}
