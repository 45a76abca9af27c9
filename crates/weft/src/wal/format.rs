//! The record header: its size, its limits and its encoding (the framing
//! itself is `util::crc`'s, shared with value logs).

use crate::error::{Error, Result};
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
