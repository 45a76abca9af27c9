//! Record logs: the framing shared by the write-ahead log and the manifest.
//!
//! # Format
//!
//! A log is a plain sequence of records, with no file header, no blocks and no
//! padding. Each record is an 8-byte header followed by its payload:
//!
//! ```text
//!  offset 0        4               8                       8 + len
//!  +---------------+---------------+-----------------------+
//!  | masked CRC32C | len (u32 LE)  | payload (len bytes)   |  next record ...
//!  +---------------+---------------+-----------------------+
//!    u32 LE          \_________ covered by the CRC ________/
//! ```
//!
//! - `crc` is CRC32C (Castagnoli) over the four length bytes followed by the
//!   payload, *masked* as LevelDB masks stored CRCs:
//!   `((crc >> 15) | (crc << 17)).wrapping_add(0xa282ead8)`. Masking keeps a
//!   log that contains an embedded log (e.g. a payload that is itself framed)
//!   from producing a valid CRC of a CRC by accident.
//! - The length is covered by the checksum so that a flipped bit in it is
//!   detected as corruption instead of silently re-framing the rest of the file.
//! - `len` is at most `u32::MAX - 1`; the payload may be empty.
//!
//! Unlike LevelDB's 32 KiB block format, records are not fragmented: Weft's
//! values go up to 512 MiB and one record = one write call keeps a record
//! either fully handed to the OS or not at all from the writer's point of view.
//!
//! # Durability
//!
//! [`LogWriter::add_record`] hands the whole record to the kernel before it
//! returns (no user-space buffer outlives the call), so an acknowledged record
//! survives a process kill. [`LogWriter::add_record_deferred`] instead keeps
//! the record in a user-space buffer until [`LogWriter::flush_buffer`] (or the
//! next immediate record, sync or [`writer::MAX_DEFERRED`] bytes) writes everything
//! buffered in one call, in order — the WAL side of
//! `Options::manual_wal_flush`, for callers that acknowledge many writes at
//! once. Dropping a writer flushes its buffer (best effort).
//! [`LogWriter::create_mapped`] (the WAL's way) hands records to the kernel
//! by storing them into a shared mapping of the file instead of with `write`
//! calls, with the same guarantees at a fraction of the cost per record (see
//! [`MappedAppender`]). [`LogWriter::sync`] (fdatasync) makes it survive a
//! machine crash. [`LogWriter::create`] fsyncs the parent directory so the
//! file's *name* is durable too.
//!
//! After any failed write or sync the writer refuses further records: a
//! partial record may sit at the end of the file, and appending after it would
//! turn a torn tail (recoverable) into mid-file corruption (not recoverable),
//! and after a failed fsync the kernel may have dropped the dirty pages.
//!
//! # Reading
//!
//! [`LogReader`] streams the file through a `BufReader`; each payload is
//! allocated once, at its exact length, and only after the length has been
//! checked against the file size, so garbage lengths never allocate.
//! A record that fails verification is reported as [`LogRead::Bad`] with
//! `at_tail` telling a torn final write (the record reaches the end of the
//! file, its header is incomplete, or only zeros follow it) from corruption
//! in the middle of the log.
//!
//! Zeros from a record boundary to the end of the file are the end of the
//! log: a WAL written through a mapping ([`LogWriter::create_mapped`])
//! reserves space ahead of its records, and a crash leaves that space in the
//! file. No valid record header is all zeros.
//!
//! A *lost page* is a torn tail too, when the reader is told so
//! ([`LogReader::with_lost_pages`]: WAL recovery; the manifest, synced
//! edit by edit, never has one). After a machine crash, the pages of a log
//! that were never synced may each be on disk or not, in any order
//! (writeback is per page): a page never written back reads as zeros, one
//! written back before its last records were stored holds zeros after
//! them, and later pages may hold records. Stopping at such a page is sound
//! for recovery: every record from it on was unsynced (a completed
//! `fdatasync` writes back all of the file's dirty pages, and records are
//! appended in order), so what is kept is a prefix of the writes and
//! nothing synced is lost. The reader recognises a lost page where it
//! holds a record boundary, by zeros that run to the end of a
//! [`format::LOST_PAGE`]-aligned page, [`format::HEADER_SIZE`] bytes at least:
//!
//! * from a record boundary (the record's header is zero), or
//! * from inside a record whose checksum fails, through its last byte,
//!   to the page's end.
//!
//! Anything else with data behind it — a flipped bit, a few zeroed bytes,
//! a zero-filled value (its record is followed by the next record's
//! header, not zeros), a lost page strictly inside one long record — is
//! corruption. The price: damage to a synced record that leaves it ending
//! in zeros up to a page boundary, or zeroes a record boundary up to one,
//! is taken for a crash and the records after it are dropped with it.

//!
//! # Layout of this module
//!
//! [`mod@format`] holds the record header and its limits, `writer` the
//! [`LogWriter`], `reader` the [`LogReader`], `mapped` the mapped appender
//! the WAL writes through.

mod format;
mod mapped;
mod reader;
mod writer;

#[cfg(test)]
mod tests;

pub use format::LogLink;

/// The bytes a [`LogWriter`] writes for one record of `payload` (header,
/// then payload): a log image built in memory, as a backup stores a
/// manifest it never writes to disk as a file of its own.
pub fn framed_record(payload: &[u8]) -> crate::error::Result<Vec<u8>> {
    let header = format::encode_header(payload)?;
    let mut bytes = Vec::with_capacity(header.len() + payload.len());
    bytes.extend_from_slice(&header);
    bytes.extend_from_slice(payload);
    Ok(bytes)
}
pub use mapped::MappedAppender;
pub use reader::{LogRead, LogReader};
pub use writer::LogWriter;
