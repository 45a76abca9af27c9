//! The record header: its size, its limits and its encoding (the framing
//! itself is `util::crc`'s, shared with value logs).

use crate::error::{Error, Result};
use crate::util::coding::{get_varint64, put_varint64};
use crate::util::crc;

/// Bytes of a record header: masked CRC (4) + payload length (4).
pub const HEADER_SIZE: usize = crc::RECORD_HEADER_SIZE;

/// Largest payload a record may carry.
pub const MAX_PAYLOAD: u64 = u32::MAX as u64 - 1;

/// The unit in which a crash may lose a log's unsynced bytes: the smallest
/// page the kernel writes back (larger pages are multiples of it).
pub const LOST_PAGE: u64 = 4096;

/// Validates a payload length and returns it as the on-disk `u32`.
pub(super) fn payload_len(len: usize) -> Result<u32> {
    if len as u64 > MAX_PAYLOAD {
        return Err(Error::InvalidArgument(format!(
            "log record payload of {len} bytes exceeds the maximum of {MAX_PAYLOAD}"
        )));
    }
    // Cannot fail after the check above, but stay panic-free regardless.
    u32::try_from(len).map_err(|_| Error::InvalidArgument(format!("payload of {len} bytes")))
}

/// Builds the 8-byte header for `payload`.
pub(super) fn encode_header(payload: &[u8]) -> Result<[u8; HEADER_SIZE]> {
    Ok(crc::record_header(payload_len(payload.len())?, payload))
}

/// The end of the [`LOST_PAGE`] holding byte `offset`.
pub(super) fn page_end(offset: u64) -> u64 {
    (offset / LOST_PAGE + 1) * LOST_PAGE
}

/// Whether a bad record ending at `end` with `payload` (its header is not
/// all zero), followed in the file by `zeros_after` zero bytes, ends in a
/// lost page (module docs): zeros from inside it, through its last byte,
/// to the end of that byte's page, at least a header's worth.
pub(super) fn ends_in_lost_page(payload: &[u8], end: u64, zeros_after: u64) -> bool {
    let trailing = payload.iter().rev().take_while(|&&b| b == 0).count() as u64;
    let page_end = page_end(end - 1);
    trailing > 0
        && end + zeros_after >= page_end
        && trailing + (page_end - end) >= HEADER_SIZE as u64
}

/// First bytes of a [`LogLink`] record: a sequence number no write batch
/// can start with (a batch's first 8 bytes are its sequence, below 2^56).
const LINK_MAGIC: [u8; 8] = [0xff; 8];

/// The first record of a WAL started by a rotation (format 2): which WAL
/// was written before it and how many bytes of records that one holds.
///
/// # Why
///
/// A rotation does not wait for the old WAL's fdatasync (`ClosedWals`), so
/// after a machine crash the new WAL may hold records that reached the disk
/// while the old WAL's last unsynced records did not. When the old WAL's
/// loss ends at a record boundary, nothing in it looks torn, and replaying
/// the new WAL after it would skip the lost records: a history with a hole,
/// not a prefix. Recovery compares the bytes it replayed from the previous
/// WAL with the length its successor recorded, and stops at the hole. (None
/// of what it drops was acknowledged durable: a sync write syncs every
/// closed WAL before its own.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLink {
    /// The previous WAL's file number.
    pub previous: u64,
    /// Bytes of records (headers included) in the previous WAL.
    pub previous_size: u64,
}

impl LogLink {
    /// The record's payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = LINK_MAGIC.to_vec();
        put_varint64(&mut out, self.previous);
        put_varint64(&mut out, self.previous_size);
        out
    }

    /// The length of the link record encoded at the start of `bytes`, if one
    /// is there (for telling a damaged length field from a torn record).
    pub fn encoded_len(bytes: &[u8]) -> Option<usize> {
        let rest = bytes.strip_prefix(&LINK_MAGIC)?;
        let (_, at) = get_varint64(rest, 0)?;
        let (_, end) = get_varint64(rest, at)?;
        Some(LINK_MAGIC.len() + end)
    }

    /// `None` when `payload` is not a link (a write batch); an error when it
    /// is one but malformed.
    pub fn decode(payload: &[u8]) -> Option<std::result::Result<LogLink, String>> {
        let rest = payload.strip_prefix(&LINK_MAGIC)?;
        let parsed = get_varint64(rest, 0).and_then(|(previous, at)| {
            let (previous_size, end) = get_varint64(rest, at)?;
            (end == rest.len()).then_some(LogLink {
                previous,
                previous_size,
            })
        });
        Some(parsed.ok_or_else(|| "malformed log link record".to_string()))
    }
}

#[cfg(test)]
mod link_tests {
    use super::*;

    #[test]
    fn a_link_round_trips_and_no_batch_reads_as_one() {
        let link = LogLink {
            previous: 41,
            previous_size: 1 << 33,
        };
        assert_eq!(LogLink::decode(&link.encode()), Some(Ok(link)));
        let mut batch = crate::batch::WriteBatch::new();
        batch.put(b"k", b"v");
        batch.set_sequence(crate::key::MAX_SEQUENCE);
        assert_eq!(LogLink::decode(batch.encoded()), None);
        let enc = link.encode();
        for cut in LINK_MAGIC.len()..enc.len() {
            assert!(matches!(LogLink::decode(&enc[..cut]), Some(Err(_))));
        }
        let mut long = enc.clone();
        long.push(0);
        assert!(matches!(LogLink::decode(&long), Some(Err(_))));
    }
}
