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
//! next immediate record, sync or [`MAX_DEFERRED`] bytes) writes everything
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
//! [`LOST_PAGE`]-aligned page, [`HEADER_SIZE`] bytes at least:
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

use std::fs::{File, OpenOptions};
use std::io::{BufReader, ErrorKind, IoSlice, Read, Take, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

mod mapped;

pub use mapped::MappedAppender;

/// Bytes of a record header: masked CRC (4) + payload length (4).
pub const HEADER_SIZE: usize = 8;

/// Largest payload a record may carry.
pub const MAX_PAYLOAD: u64 = u32::MAX as u64 - 1;

/// The unit in which a crash may lose a log's unsynced bytes: the smallest
/// page the kernel writes back (larger pages are multiples of it).
pub const LOST_PAGE: u64 = 4096;

const MASK_DELTA: u32 = 0xa282_ead8;

/// Masks a CRC as LevelDB does before storing it.
pub fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Inverse of [`mask_crc`].
pub fn unmask_crc(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

/// CRC32C over the length bytes then the payload (unmasked).
fn record_crc(len_bytes: &[u8; 4], payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(len_bytes), payload)
}

/// Validates a payload length and returns it as the on-disk `u32`.
fn payload_len(len: usize) -> Result<u32> {
    if len as u64 > MAX_PAYLOAD {
        return Err(Error::InvalidArgument(format!(
            "log record payload of {len} bytes exceeds the maximum of {MAX_PAYLOAD}"
        )));
    }
    // Cannot fail after the check above, but stay panic-free regardless.
    u32::try_from(len).map_err(|_| Error::InvalidArgument(format!("payload of {len} bytes")))
}

/// Builds the 8-byte header for `payload`.
fn encode_header(payload: &[u8]) -> Result<[u8; HEADER_SIZE]> {
    let len_bytes = payload_len(payload.len())?.to_le_bytes();
    let crc = mask_crc(record_crc(&len_bytes, payload));
    let mut header = [0u8; HEADER_SIZE];
    header[..4].copy_from_slice(&crc.to_le_bytes());
    header[4..].copy_from_slice(&len_bytes);
    Ok(header)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// fsyncs the directory holding `path`, making a newly created name durable.
fn sync_parent_dir(path: &Path) -> Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = File::open(parent)
        .map_err(|e| Error::io(format!("opening directory {}", parent.display()), e))?;
    dir.sync_all()
        .map_err(|e| Error::io(format!("syncing directory {}", parent.display()), e))
}

/// Bytes of deferred records after which they are written without waiting
/// for [`LogWriter::flush_buffer`].
pub const MAX_DEFERRED: usize = 1 << 20;

/// Appends checksummed records to a log file.
///
/// Not internally synchronized: the WAL's group commit (or the manifest's
/// lock) serializes writers, so `&mut self` is all that is needed.
pub struct LogWriter {
    path: PathBuf,
    name: String,
    file: File,
    /// Bytes in the file plus bytes in `deferred`.
    size: u64,
    /// Whole records not yet handed to the kernel, oldest first.
    deferred: Vec<u8>,
    /// Set after a failed write or sync; see the module doc.
    failed: bool,
    /// Records are stored through a shared mapping instead of `write`
    /// calls ([`LogWriter::create_mapped`]).
    mapped: Option<MappedAppender>,
}

impl LogWriter {
    /// Creates (truncating) the log at `path`; records are written with
    /// `write` calls.
    pub fn create(path: &Path) -> Result<LogWriter> {
        Self::open_new(path, false)
    }

    /// Creates (truncating) the log at `path`; records are stored through a
    /// shared mapping of blocks reserved ahead (see [`MappedAppender`]), or
    /// written with `write` calls where the file system cannot reserve
    /// blocks. Same durability as [`LogWriter::create`]; the file carries
    /// zeros past its last record until the writer is dropped.
    pub fn create_mapped(path: &Path) -> Result<LogWriter> {
        Self::open_new(path, true)
    }

    fn open_new(path: &Path, mapped: bool) -> Result<LogWriter> {
        let name = file_name(path);
        let file = OpenOptions::new()
            .read(mapped)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io(format!("creating log {name}"), e))?;
        let mapped = match mapped {
            true => MappedAppender::new(&file),
            false => None,
        };
        sync_parent_dir(path)?;
        Ok(LogWriter {
            path: path.to_path_buf(),
            name,
            file,
            size: 0,
            deferred: Vec::new(),
            failed: false,
            mapped,
        })
    }

    fn check_usable(&self) -> Result<()> {
        if self.failed {
            return Err(Error::io(
                format!("appending to log {}", self.name),
                std::io::Error::other("an earlier write or sync on this log failed"),
            ));
        }
        Ok(())
    }

    /// Appends one record; it (and every deferred record before it) has
    /// reached the OS (survives a process crash) when this returns. Returns
    /// the bytes written (header included).
    pub fn add_record(&mut self, payload: &[u8]) -> Result<u64> {
        if !self.deferred.is_empty() {
            // Behind the buffered records, with them.
            let n = self.add_record_deferred(payload)?;
            self.flush_buffer()?;
            return Ok(n);
        }
        self.check_usable()?;
        let header = encode_header(payload)?;
        let stored = match &mut self.mapped {
            Some(m) => m.write_at(&self.file, self.size, &[&header, payload]),
            None => write_all_vectored(&mut self.file, &header, payload),
        };
        if let Err(e) = stored {
            // Part of the record may be in the file: a torn tail at worst,
            // and nothing more may follow it.
            self.failed = true;
            return Err(Error::io(format!("writing log {}", self.name), e));
        }
        let n = (HEADER_SIZE + payload.len()) as u64;
        self.size += n;
        Ok(n)
    }

    /// Appends one record to the user-space buffer: it reaches the OS with
    /// the next [`LogWriter::flush_buffer`], immediate record or sync, or
    /// once [`MAX_DEFERRED`] bytes wait. Returns the record's bytes.
    pub fn add_record_deferred(&mut self, payload: &[u8]) -> Result<u64> {
        self.check_usable()?;
        let header = encode_header(payload)?;
        self.deferred.extend_from_slice(&header);
        self.deferred.extend_from_slice(payload);
        let n = (HEADER_SIZE + payload.len()) as u64;
        self.size += n;
        if self.deferred.len() >= MAX_DEFERRED {
            self.flush_buffer()?;
        }
        Ok(n)
    }

    /// True when deferred records wait in the buffer.
    pub fn has_deferred(&self) -> bool {
        !self.deferred.is_empty()
    }

    /// Hands every deferred record to the OS (one `write`): they survive a
    /// process crash once this returns.
    pub fn flush_buffer(&mut self) -> Result<()> {
        if self.deferred.is_empty() {
            return Ok(());
        }
        self.check_usable()?;
        let stored = match &mut self.mapped {
            Some(m) => store_records(m, &self.file, self.size, &self.deferred),
            None => self.file.write_all(&self.deferred),
        };
        if let Err(e) = stored {
            // Part of the buffer may be in the file: a torn tail at worst,
            // and nothing more may follow it.
            self.failed = true;
            return Err(Error::io(format!("writing log {}", self.name), e));
        }
        self.deferred.clear();
        if self.deferred.capacity() > MAX_DEFERRED {
            self.deferred = Vec::new();
        }
        Ok(())
    }

    /// fdatasync: the records appended so far (deferred ones too) survive a
    /// machine crash.
    pub fn sync(&mut self) -> Result<()> {
        self.flush_buffer()?;
        self.check_usable()?;
        if let Err(e) = self.file.sync_data() {
            self.failed = true;
            return Err(Error::io(format!("syncing log {}", self.name), e));
        }
        Ok(())
    }

    /// Ends the log's appends: hands deferred records to the OS, then (when
    /// mapped) unmaps its windows and cuts the file back to its records.
    /// For a log rotated out, before its fdatasync: writeback must
    /// write-protect every dirty page still mapped, one TLB shootdown per
    /// page across every core (the flush thread's fdatasync of a closed
    /// 64 MiB WAL spent a third of its fdatasync time there, `perf`, 5M-key
    /// `fillrandom`), and the window faulted in ahead would be written back
    /// as zeros only to be cut off afterwards. Records appended after this
    /// still land where they belong (the next store maps and reserves
    /// again).
    pub fn seal(&mut self) -> Result<()> {
        self.flush_buffer()?;
        self.check_usable()?;
        if let Some(m) = &mut self.mapped {
            if let Err(e) = m.finish(&self.file, self.size) {
                self.failed = true;
                return Err(Error::io(
                    format!("cutting log {} to its records", self.name),
                    e,
                ));
            }
        }
        Ok(())
    }

    /// A second handle on the log file, to fdatasync it without holding the
    /// writer: a sync through any handle covers every byte written so far
    /// (deferred records are written first).
    pub fn sync_handle(&mut self) -> Result<File> {
        self.flush_buffer()?;
        self.check_usable()?;
        self.file
            .try_clone()
            .map_err(|e| Error::io(format!("duplicating the handle of log {}", self.name), e))
    }

    /// Bytes of records appended (in the file or deferred).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes of records handed to the OS (deferred ones not counted): every
    /// record before this offset is whole in the file.
    pub fn size_in_file(&self) -> u64 {
        self.size - self.deferred.len() as u64
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for LogWriter {
    /// Writes deferred records (best effort: an error here has no caller to
    /// reach; `Db::close` flushes and reports).
    fn drop(&mut self) {
        if !self.failed {
            let _ = self.flush_buffer();
        }
        if let Some(m) = &mut self.mapped {
            // Cut the reserved zeros (a crash that keeps them is handled by
            // the reader: zeros after the last record read as its end).
            let _ = m.finish(&self.file, self.size);
        }
    }
}

/// Stores the framed records of `buf`, which end at file offset `end`,
/// through the mapping one record at a time, each header before its payload.
/// A single copy of the whole buffer would not do: `memcpy` may store its
/// first bytes last, and a kill in between would leave a zeroed header with
/// records behind it, which the reader must treat as damage.
fn store_records(m: &mut MappedAppender, file: &File, end: u64, buf: &[u8]) -> std::io::Result<()> {
    let mut at = end - buf.len() as u64;
    let mut rest = buf;
    while !rest.is_empty() {
        let len = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]) as usize;
        let (record, tail) = rest.split_at(HEADER_SIZE + len);
        let (header, payload) = record.split_at(HEADER_SIZE);
        m.write_at(file, at, &[header, payload])?;
        at += record.len() as u64;
        rest = tail;
    }
    Ok(())
}

/// Writes `header` then `payload` fully, with as few syscalls as the kernel
/// allows (usually one `writev`), without copying the payload. Handles short
/// writes and `EINTR` the way `write_all` does.
fn write_all_vectored(file: &mut File, header: &[u8], payload: &[u8]) -> std::io::Result<()> {
    let total = header.len() + payload.len();
    let mut written = 0usize;
    while written < total {
        let res = if written < header.len() {
            file.write_vectored(&[IoSlice::new(&header[written..]), IoSlice::new(payload)])
        } else {
            file.write(&payload[written - header.len()..])
        };
        match res {
            Ok(0) => {
                return Err(std::io::Error::new(
                    ErrorKind::WriteZero,
                    "failed to write whole log record",
                ))
            }
            Ok(n) => written += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// What [`LogReader::read`] found at the current position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogRead {
    /// A record whose checksum verified; `offset` is where its header starts.
    Record {
        /// Offset of the record's header in the file.
        offset: u64,
        /// The payload.
        payload: Vec<u8>,
    },
    /// Clean end of file.
    End,
    /// A record that failed verification at `offset`. `at_tail` is true when
    /// the bad record reaches the end of the file, or only zero bytes follow
    /// it (a torn final write); otherwise other bytes follow it (corruption
    /// in the middle).
    Bad {
        /// Offset of the bad record's header.
        offset: u64,
        /// What failed.
        reason: String,
        /// The bad record extends to (or past) the end of the file.
        at_tail: bool,
    },
}

/// Reads records from a log file front to back.
pub struct LogReader {
    path: PathBuf,
    name: String,
    reader: BufReader<Take<File>>,
    /// Bytes of the file this reader sees (`u64::MAX`: all of it).
    limit: u64,
    /// Offset of the next record's header.
    pos: u64,
    /// File size as last observed; refreshed before declaring a length bogus,
    /// in case the file grew since it was opened.
    file_len: u64,
    /// Sticky terminal result (`End` or `Bad`).
    done: Option<LogRead>,
    /// Whether a lost page counts as a torn tail (module docs).
    lost_pages: bool,
}

impl LogReader {
    /// Opens the log at `path` for reading.
    pub fn open(path: &Path) -> Result<LogReader> {
        Self::open_prefix(path, u64::MAX)
    }

    /// Opens the first `limit` bytes of the log at `path`, as if the file
    /// ended there: for reading a log that is being appended to, up to a
    /// length its writer reported (a reader scanning on past it could find
    /// bytes the writer is storing now — a header still zero with its
    /// payload already behind it — and take them for damage).
    pub fn open_prefix(path: &Path, limit: u64) -> Result<LogReader> {
        let name = file_name(path);
        let file = File::open(path).map_err(|e| Error::io(format!("opening log {name}"), e))?;
        let file_len = file
            .metadata()
            .map_err(|e| Error::io(format!("reading size of log {name}"), e))?
            .len()
            .min(limit);
        Ok(LogReader {
            path: path.to_path_buf(),
            name,
            reader: BufReader::with_capacity(64 << 10, file.take(limit)),
            limit,
            pos: 0,
            file_len,
            done: None,
            lost_pages: false,
        })
    }

    /// Reports a lost page (module docs) as a torn tail (`at_tail`) instead
    /// of corruption: for a WAL being recovered after a crash.
    pub fn with_lost_pages(mut self) -> LogReader {
        self.lost_pages = true;
        self
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Offset just past the last record returned (where a writer resuming
    /// this log, or a truncation of its torn tail, would start).
    pub fn offset(&self) -> u64 {
        self.pos
    }

    /// Reads the next record. After `End` or `Bad`, keeps returning the same.
    pub fn read(&mut self) -> Result<LogRead> {
        if let Some(done) = &self.done {
            return Ok(done.clone());
        }
        let result = self.read_record()?;
        match &result {
            LogRead::Record { offset, payload } => {
                self.pos = offset + (HEADER_SIZE + payload.len()) as u64;
            }
            other => self.done = Some(other.clone()),
        }
        Ok(result)
    }

    fn read_record(&mut self) -> Result<LogRead> {
        let offset = self.pos;
        let mut header = [0u8; HEADER_SIZE];
        let got = self.read_full(&mut header)?;
        if got == 0 {
            return Ok(LogRead::End);
        }
        // No record's header is all zeros (the CRC of even an empty payload
        // is not zero, see `zero_header_is_never_a_record`): zeros from a
        // record boundary to the end of the file are space a mapped writer
        // reserved and never filled (`MappedAppender`), the end of the log.
        if header[..got].iter().all(|&b| b == 0) {
            let (zeros, to_eof) = self.zero_run()?;
            if to_eof {
                return Ok(LogRead::End);
            }
            // Decided here: the scan above moved the reader past the bytes
            // that follow. A writer stores a record's header before its
            // payload and records in order (`MappedAppender`), so a zeroed
            // header with data behind it is a lost page (module docs) or
            // damage, never a write cut short.
            let zero_end = offset + got as u64 + zeros;
            let page_end = page_end(offset);
            if self.lost_pages && page_end - offset >= HEADER_SIZE as u64 && zero_end >= page_end {
                return Ok(LogRead::Bad {
                    offset,
                    reason: format!(
                        "lost page: zeros from {offset} to {zero_end}, then records (a machine \
                         crash before they were synced)"
                    ),
                    at_tail: true,
                });
            }
            return Ok(LogRead::Bad {
                offset,
                reason: "zeroed record header followed by non-zero bytes".into(),
                at_tail: false,
            });
        }
        if got < HEADER_SIZE {
            return Ok(LogRead::Bad {
                offset,
                reason: format!("incomplete record header ({got} of {HEADER_SIZE} bytes)"),
                at_tail: true,
            });
        }
        let stored = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
        let len_bytes = [header[4], header[5], header[6], header[7]];
        let len = u32::from_le_bytes(len_bytes);
        let end = offset + HEADER_SIZE as u64 + u64::from(len);
        if end > self.file_len {
            self.refresh_len()?;
        }
        if end > self.file_len {
            return Ok(LogRead::Bad {
                offset,
                reason: format!(
                    "record length {len} runs past the end of the file ({} bytes)",
                    self.file_len
                ),
                at_tail: true,
            });
        }
        // `len` fits in the file, so this allocation is bounded by its size.
        let mut payload = vec![0u8; len as usize];
        let got = self.read_full(&mut payload)?;
        if got < payload.len() {
            // The file shrank under us: treat like a torn tail.
            return Ok(LogRead::Bad {
                offset,
                reason: format!("record payload truncated ({got} of {len} bytes)"),
                at_tail: true,
            });
        }
        let actual = record_crc(&len_bytes, &payload);
        if mask_crc(actual) != stored {
            let mut reason = format!(
                "checksum mismatch (stored {:#010x}, computed {:#010x})",
                unmask_crc(stored),
                actual
            );
            // Only zeros after it: the last record, torn while a mapped
            // writer stored it (or damaged), followed by reserved space.
            // Else a lost page inside it (module docs) is a torn tail too.
            let at_tail = end >= self.file_len || {
                let (zeros, to_eof) = self.zero_run()?;
                let lost = self.lost_pages && !to_eof && ends_in_lost_page(&payload, end, zeros);
                if lost {
                    reason.push_str(", in a lost page (a machine crash before it was synced)");
                }
                to_eof || lost
            };
            return Ok(LogRead::Bad {
                offset,
                reason,
                at_tail,
            });
        }
        Ok(LogRead::Record { offset, payload })
    }

    /// Reads on while the bytes are zero: how many zero bytes follow, and
    /// whether they run to the end of the file. Moves the reader past them
    /// (and some bytes after), so only a terminal result may follow.
    fn zero_run(&mut self) -> Result<(u64, bool)> {
        let mut buf = vec![0u8; 64 << 10];
        let mut zeros = 0u64;
        loop {
            let n = self.read_full(&mut buf)?;
            if let Some(i) = buf[..n].iter().position(|&b| b != 0) {
                return Ok((zeros + i as u64, false));
            }
            zeros += n as u64;
            if n < buf.len() {
                return Ok((zeros, true));
            }
        }
    }

    fn refresh_len(&mut self) -> Result<()> {
        let len = self
            .reader
            .get_ref()
            .get_ref()
            .metadata()
            .map_err(|e| Error::io(format!("reading size of log {}", self.name), e))?
            .len();
        self.file_len = self.file_len.max(len.min(self.limit));
        Ok(())
    }

    /// Reads until `buf` is full or EOF; returns the bytes read.
    fn read_full(&mut self, buf: &mut [u8]) -> Result<usize> {
        let mut got = 0;
        while got < buf.len() {
            match self.reader.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io(format!("reading log {}", self.name), e)),
            }
        }
        Ok(got)
    }
}

/// The end of the [`LOST_PAGE`] holding byte `offset`.
fn page_end(offset: u64) -> u64 {
    (offset / LOST_PAGE + 1) * LOST_PAGE
}

/// Whether a bad record ending at `end` with `payload` (its header is not
/// all zero), followed in the file by `zeros_after` zero bytes, ends in a
/// lost page (module docs): zeros from inside it, through its last byte,
/// to the end of that byte's page, at least a header's worth.
fn ends_in_lost_page(payload: &[u8], end: u64, zeros_after: u64) -> bool {
    let trailing = payload.iter().rev().take_while(|&&b| b == 0).count() as u64;
    let page_end = page_end(end - 1);
    trailing > 0
        && end + zeros_after >= page_end
        && trailing + (page_end - end) >= HEADER_SIZE as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payloads() -> Vec<Vec<u8>> {
        let mut v = vec![Vec::new(), b"a".to_vec(), b"hello world".to_vec()];
        v.push((0..1 << 20).map(|i| (i * 7 + 3) as u8).collect());
        for i in 0..200u32 {
            v.push(vec![(i % 251) as u8; (i as usize * 37) % 300]);
        }
        v.push(Vec::new());
        v
    }

    /// A prefix ends the log where it is cut: the records before the cut,
    /// then the end (cut at a boundary) or a torn tail (cut inside one).
    #[test]
    fn a_prefix_reads_as_the_whole_log_cut_there() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.log");
        let payloads = vec![b"one".to_vec(), vec![7u8; 5000], b"three".to_vec()];
        let offsets = write_log(&path, &payloads);
        let read_all = |limit: u64| {
            let mut r = LogReader::open_prefix(&path, limit).unwrap();
            let mut got = Vec::new();
            loop {
                match r.read().unwrap() {
                    LogRead::Record { payload, .. } => got.push(payload),
                    other => return (got, other),
                }
            }
        };
        let (got, end) = read_all(offsets[2]);
        assert_eq!(got, payloads[..2]);
        assert!(matches!(end, LogRead::End), "{end:?}");
        let (got, end) = read_all(offsets[2] - 10);
        assert_eq!(got, payloads[..1]);
        assert!(matches!(end, LogRead::Bad { at_tail: true, .. }), "{end:?}");
        let (got, _) = read_all(u64::MAX);
        assert_eq!(got, payloads);
    }

    fn write_log(path: &Path, payloads: &[Vec<u8>]) -> Vec<u64> {
        let mut w = LogWriter::create(path).unwrap();
        let mut offsets = Vec::new();
        for p in payloads {
            offsets.push(w.size());
            let n = w.add_record(p).unwrap();
            assert_eq!(n, (HEADER_SIZE + p.len()) as u64);
        }
        w.sync().unwrap();
        assert_eq!(w.size(), std::fs::metadata(path).unwrap().len());
        assert_eq!(w.path(), path);
        offsets
    }

    /// Reads to the first non-record; returns the records and the terminal.
    fn read_all(path: &Path) -> (Vec<(u64, Vec<u8>)>, LogRead) {
        let mut r = LogReader::open(path).unwrap();
        let mut out = Vec::new();
        loop {
            match r.read().unwrap() {
                LogRead::Record { offset, payload } => out.push((offset, payload)),
                other => {
                    // Sticky.
                    assert_eq!(r.read().unwrap(), other);
                    assert_eq!(r.read().unwrap(), other);
                    return (out, other);
                }
            }
        }
    }

    /// Writes `bytes` as the file at `path` and reads it to its terminal.
    fn rewrite_and_read(path: &Path, bytes: &[u8]) -> (Vec<(u64, Vec<u8>)>, LogRead) {
        std::fs::write(path, bytes).unwrap();
        read_all(path)
    }

    /// The offset and `at_tail` of a `Bad` terminal; panics on any other.
    fn bad_at(term: &LogRead) -> (u64, bool) {
        match term {
            LogRead::Bad {
                offset, at_tail, ..
            } => (*offset, *at_tail),
            other => panic!("expected a bad record, got {other:?}"),
        }
    }

    /// Deferred records stay out of the file until a flush (or an
    /// immediate record, or a sync) writes them, in order; past
    /// `MAX_DEFERRED` bytes they are written without being asked.
    #[test]
    fn deferred_records_reach_the_file_in_order_when_flushed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.log");
        let file_len = || std::fs::metadata(&path).unwrap().len();
        let mut w = LogWriter::create(&path).unwrap();
        w.add_record(b"first").unwrap();
        let after_first = file_len();
        w.add_record_deferred(b"second").unwrap();
        w.add_record_deferred(b"third").unwrap();
        assert!(w.has_deferred());
        assert_eq!(file_len(), after_first, "deferred records were written");
        assert_eq!(w.size(), after_first + 2 * HEADER_SIZE as u64 + 11);
        w.flush_buffer().unwrap();
        assert!(!w.has_deferred());
        assert_eq!(file_len(), w.size());

        // An immediate record goes behind the deferred ones.
        w.add_record_deferred(b"fourth").unwrap();
        w.add_record(b"fifth").unwrap();
        assert_eq!(file_len(), w.size());
        // A sync writes them too.
        w.add_record_deferred(b"sixth").unwrap();
        w.sync().unwrap();
        assert_eq!(file_len(), w.size());
        // So does the size bound.
        let big = vec![9u8; MAX_DEFERRED];
        w.add_record_deferred(&big).unwrap();
        assert!(!w.has_deferred());
        assert_eq!(file_len(), w.size());
        // And dropping the writer.
        w.add_record_deferred(b"last").unwrap();
        let size = w.size();
        drop(w);
        assert_eq!(file_len(), size);

        let (records, end) = read_all(&path);
        assert_eq!(end, LogRead::End);
        let got: Vec<&[u8]> = records.iter().map(|(_, p)| p.as_slice()).collect();
        let want: Vec<&[u8]> = vec![
            b"first", b"second", b"third", b"fourth", b"fifth", b"sixth", &big, b"last",
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn mask_round_trip() {
        for crc in [0u32, 1, 0xdead_beef, u32::MAX, 0xa282_ead8] {
            assert_eq!(unmask_crc(mask_crc(crc)), crc);
            assert_ne!(mask_crc(crc), crc);
        }
    }

    #[test]
    fn header_layout() {
        let h = encode_header(b"abc").unwrap();
        assert_eq!(&h[4..], &3u32.to_le_bytes());
        let mut data = 3u32.to_le_bytes().to_vec();
        data.extend_from_slice(b"abc");
        let crc = crc32c::crc32c(&data);
        assert_eq!(&h[..4], &mask_crc(crc).to_le_bytes());
    }

    #[test]
    fn payload_length_limit() {
        assert_eq!(payload_len(0).unwrap(), 0);
        assert_eq!(payload_len(u32::MAX as usize - 1).unwrap(), u32::MAX - 1);
        assert!(matches!(
            payload_len(u32::MAX as usize),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            payload_len(usize::MAX),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.log");
        let ps = payloads();
        let offsets = write_log(&path, &ps);
        let (recs, end) = read_all(&path);
        assert_eq!(end, LogRead::End);
        assert_eq!(recs.len(), ps.len());
        for ((off, p), (want_off, want)) in recs.iter().zip(offsets.iter().zip(&ps)) {
            assert_eq!(off, want_off);
            assert_eq!(p, want);
        }
    }

    #[test]
    fn empty_file_is_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.log");
        LogWriter::create(&path).unwrap();
        let (recs, end) = read_all(&path);
        assert!(recs.is_empty());
        assert_eq!(end, LogRead::End);
    }

    #[test]
    fn create_truncates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.log");
        write_log(&path, &[b"old".to_vec()]);
        let w = LogWriter::create(&path).unwrap();
        assert_eq!(w.size(), 0);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    }

    #[test]
    fn open_missing_is_io_error_naming_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = LogReader::open(&dir.path().join("nope.log")).err().unwrap();
        assert!(matches!(err, Error::Io { .. }));
        assert!(err.to_string().contains("nope.log"), "{err}");
    }

    #[test]
    fn truncation_at_every_length_of_last_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.log");
        let mut ps: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 10 + i as usize]).collect();
        ps.push((0..300).map(|i| i as u8).collect());
        let offsets = write_log(&path, &ps);
        let full = std::fs::read(&path).unwrap();
        let last = *offsets.last().unwrap() as usize;
        for cut in last..=full.len() {
            let p = dir.path().join(format!("cut{cut}.log"));
            std::fs::write(&p, &full[..cut]).unwrap();
            let (recs, term) = read_all(&p);
            if cut == last || full[last..cut].iter().all(|&b| b == 0) {
                // Nothing of the last record, or only zeros of it (which
                // could be reserved space): the end of the log.
                assert_eq!(recs.len(), ps.len() - 1);
                assert_eq!(term, LogRead::End, "cut {cut}");
            } else if cut == full.len() {
                assert_eq!(recs.len(), ps.len());
                assert_eq!(term, LogRead::End, "cut {cut}");
            } else {
                assert_eq!(recs.len(), ps.len() - 1, "cut {cut}");
                match term {
                    LogRead::Bad {
                        offset, at_tail, ..
                    } => {
                        assert_eq!(offset, last as u64, "cut {cut}");
                        assert!(at_tail, "cut {cut}");
                    }
                    other => panic!("cut {cut}: {other:?}"),
                }
            }
            for (i, (_, p)) in recs.iter().enumerate() {
                assert_eq!(p, &ps[i]);
            }
        }
    }

    #[test]
    fn truncation_at_every_length_of_whole_file() {
        // Every cut yields a prefix of the records, then End or a tail Bad.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("all.log");
        let ps: Vec<Vec<u8>> = vec![vec![], b"ab".to_vec(), vec![9; 20], vec![], b"z".to_vec()];
        let offsets = write_log(&path, &ps);
        let full = std::fs::read(&path).unwrap();
        for cut in 0..=full.len() {
            let p = dir.path().join("c.log");
            std::fs::write(&p, &full[..cut]).unwrap();
            let (recs, term) = read_all(&p);
            let complete = offsets
                .iter()
                .zip(&ps)
                .filter(|(o, pl)| **o as usize + HEADER_SIZE + pl.len() <= cut)
                .count();
            assert_eq!(recs.len(), complete, "cut {cut}");
            let boundary = cut == full.len() || offsets.contains(&(cut as u64));
            if boundary {
                assert_eq!(term, LogRead::End, "cut {cut}");
            } else {
                assert!(
                    matches!(term, LogRead::Bad { at_tail: true, .. }),
                    "cut {cut}: {term:?}"
                );
            }
        }
    }

    #[test]
    fn flipped_byte_in_middle_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.log");
        let ps: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; 50]).collect();
        let offsets = write_log(&path, &ps);
        let full = std::fs::read(&path).unwrap();
        let victim = 4;
        let start = offsets[victim] as usize;
        let end = offsets[victim + 1] as usize;
        // Every byte of the record: CRC, length and payload bytes.
        for at in start..end {
            let mut bytes = full.clone();
            bytes[at] ^= 0x40;
            let p = dir.path().join("flip.log");
            std::fs::write(&p, &bytes).unwrap();
            let (recs, term) = read_all(&p);
            assert_eq!(recs.len(), victim, "flip at {at}");
            match term {
                LogRead::Bad {
                    offset, at_tail, ..
                } => {
                    assert_eq!(offset, start as u64, "flip at {at}");
                    // A flipped length byte may make the record claim to run
                    // past EOF, which is indistinguishable from a torn tail.
                    if at < start + 4 || at >= start + HEADER_SIZE {
                        assert!(!at_tail, "flip at {at}");
                    }
                }
                other => panic!("flip at {at}: {other:?}"),
            }
        }
    }

    #[test]
    fn crc_mismatch_in_last_record_is_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.log");
        let offsets = write_log(&path, &[b"one".to_vec(), b"two".to_vec()]);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let (recs, term) = read_all(&path);
        assert_eq!(recs.len(), 1);
        assert!(matches!(
            term,
            LogRead::Bad { offset, at_tail: true, .. } if offset == offsets[1]
        ));
    }

    #[test]
    fn huge_garbage_length_does_not_allocate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.log");
        write_log(&path, &[b"ok".to_vec()]);
        let mut bytes = std::fs::read(&path).unwrap();
        let bad_at = bytes.len() as u64;
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&(u32::MAX - 1).to_le_bytes());
        bytes.extend_from_slice(&[0u8; 100]);
        std::fs::write(&path, &bytes).unwrap();
        let (recs, term) = read_all(&path);
        assert_eq!(recs.len(), 1);
        match term {
            LogRead::Bad {
                offset,
                at_tail,
                reason,
            } => {
                assert_eq!(offset, bad_at);
                assert!(at_tail);
                assert!(reason.contains("past the end"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.log");
        let mut state = 0x1234_5678_9abc_def0u64;
        for len in [0usize, 1, 7, 8, 9, 15, 16, 64, 1000, 5000] {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            std::fs::write(&path, &bytes).unwrap();
            let (_, term) = read_all(&path);
            assert!(matches!(term, LogRead::End | LogRead::Bad { .. }));
        }
    }

    #[test]
    fn records_are_visible_before_sync() {
        // add_record hands bytes to the OS: another reader sees them at once.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.log");
        let mut w = LogWriter::create(&path).unwrap();
        w.add_record(b"first").unwrap();
        w.add_record(b"second").unwrap();
        let (recs, term) = read_all(&path);
        assert_eq!(term, LogRead::End);
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[1].1, b"second");
        drop(w);
    }

    #[test]
    fn reader_offset_tracks_position() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o.log");
        write_log(&path, &[b"abc".to_vec(), b"".to_vec()]);
        let mut r = LogReader::open(&path).unwrap();
        assert_eq!(r.offset(), 0);
        r.read().unwrap();
        assert_eq!(r.offset(), 11);
        r.read().unwrap();
        assert_eq!(r.offset(), 19);
        assert_eq!(r.read().unwrap(), LogRead::End);
        assert_eq!(r.offset(), 19);
        assert_eq!(r.path(), path);
    }

    #[test]
    fn zero_header_is_never_a_record() {
        // The reader takes zeros at a record boundary for the end of the
        // log; that is sound only because no record starts with them.
        assert_ne!(encode_header(b"").unwrap(), [0u8; HEADER_SIZE]);
        assert_ne!(encode_header(&[0u8; 64]).unwrap()[..4], [0u8; 4]);
    }

    /// Payloads that cross mapping windows: one larger than a window, and
    /// small ones straddling every window boundary they reach.
    fn window_crossing_payloads() -> Vec<Vec<u8>> {
        let window = mapped::WINDOW as usize;
        let mut v = vec![b"first".to_vec()];
        v.push((0..window + 12_345).map(|i| (i % 253) as u8).collect());
        for i in 0..3000u32 {
            v.push(vec![(i % 251) as u8 + 1; 1000 + (i as usize * 7) % 2000]);
        }
        v
    }

    #[test]
    fn mapped_log_reads_back_while_open_and_is_cut_to_its_records_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.log");
        let payloads = window_crossing_payloads();
        let mut w = LogWriter::create_mapped(&path).unwrap();
        assert!(w.mapped.is_some(), "this file system cannot reserve blocks");
        // Deferred records go through the buffer, then the mapping.
        for (i, p) in payloads.iter().enumerate() {
            match i % 3 {
                _ if i + 1 == payloads.len() => w.add_record_deferred(p).unwrap(),
                2 => w.add_record_deferred(p).unwrap(),
                _ => w.add_record(p).unwrap(),
            };
        }
        assert!(w.has_deferred());
        // An immediate record writes the deferred ones ahead of itself.
        w.add_record(b"last").unwrap();
        assert!(!w.has_deferred());
        let payloads = [payloads, vec![b"last".to_vec()]].concat();
        // Every record is visible to a reader before any sync (a process
        // crash now loses nothing); the reserved rest reads as zeros and
        // ends the log.
        let file_len = std::fs::metadata(&path).unwrap().len();
        assert!(file_len > w.size(), "{file_len} <= {}", w.size());
        assert_eq!(file_len % mapped::RESERVE, 0);
        let (recs, term) = read_all(&path);
        assert_eq!(term, LogRead::End);
        assert_eq!(recs.len(), payloads.len());
        for ((_, got), want) in recs.iter().zip(&payloads) {
            assert_eq!(got, want);
        }
        w.sync().unwrap();
        let size = w.size();
        drop(w);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
        let (recs, term) = read_all(&path);
        assert_eq!((recs.len(), term), (payloads.len(), LogRead::End));
    }

    /// Whether any mapping of this process maps `path`.
    fn is_mapped(path: &Path) -> bool {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let name = path.to_str().unwrap();
        maps.lines().any(|l| l.ends_with(name))
    }

    /// Sealing hands deferred records over, unmaps the windows and cuts
    /// the reserved zeros; a record appended afterwards still lands behind
    /// the others.
    #[test]
    fn a_sealed_mapped_log_is_unmapped_and_cut_to_its_records_and_takes_more() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.log");
        let mut w = LogWriter::create_mapped(&path).unwrap();
        assert!(w.mapped.is_some(), "this file system cannot reserve blocks");
        // Past the middle of the second window: two windows mapped (the
        // one ahead maybe held by the prefault thread a little longer).
        let payloads = window_crossing_payloads();
        for p in &payloads[..payloads.len() - 1] {
            w.add_record(p).unwrap();
        }
        w.add_record_deferred(payloads.last().unwrap()).unwrap();
        assert!(is_mapped(&path), "an open mapped log is mapped");
        assert!(std::fs::metadata(&path).unwrap().len() > w.size());
        w.seal().unwrap();
        assert!(!w.has_deferred(), "sealing hands deferred records over");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), w.size());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while is_mapped(&path) {
            assert!(
                std::time::Instant::now() < deadline,
                "a sealed log stays mapped"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let (recs, term) = read_all(&path);
        assert_eq!((recs.len(), term), (payloads.len(), LogRead::End));
        // A record appended after the seal lands behind the others.
        w.add_record(b"after the seal").unwrap();
        w.sync().unwrap();
        drop(w);
        let (recs, term) = read_all(&path);
        assert_eq!((recs.len(), term), (payloads.len() + 1, LogRead::End));
        assert_eq!(recs.last().unwrap().1, b"after the seal");
    }

    #[test]
    fn mapped_log_abandoned_without_drop_recovers_every_record() {
        // A crash leaves the reserved zeros in the file.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.log");
        let mut w = LogWriter::create_mapped(&path).unwrap();
        for i in 0..100u32 {
            w.add_record(&i.to_le_bytes()).unwrap();
        }
        let size = w.size();
        std::mem::forget(w);
        assert!(std::fs::metadata(&path).unwrap().len() > size);
        let (recs, term) = read_all(&path);
        assert_eq!(term, LogRead::End);
        assert_eq!(recs.len(), 100);
        assert_eq!(recs[99].1, 99u32.to_le_bytes());
    }

    #[test]
    fn a_record_torn_before_reserved_zeros_is_a_torn_tail() {
        // A crash while a mapped writer stores a record leaves its header
        // and part of its payload, then zeros to the end of the file.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.log");
        let mut ps = payloads();
        ps.push(b"the last record's payload".to_vec());
        let offsets = write_log(&path, &ps);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = *offsets.last().unwrap() as usize;
        let len = bytes.len();
        bytes[len - 1] ^= 0x40;
        bytes.resize(len + 3 * 4096, 0);
        let (recs, term) = rewrite_and_read(&path, &bytes);
        assert_eq!(recs.len(), offsets.len() - 1);
        assert_eq!(bad_at(&term), (last as u64, true));
        // A non-zero byte far behind it makes the same damage corruption.
        bytes[len + 5000] = 1;
        let (_, term) = rewrite_and_read(&path, &bytes);
        assert_eq!(bad_at(&term), (last as u64, false));
    }

    #[test]
    fn a_zeroed_record_among_small_ones_before_reserved_zeros_is_corruption() {
        // Damage that zeroes one record near the end of a mapped WAL, with
        // valid records and then reserved zeros behind it, must not read as
        // a torn tail (which would drop the records after it silently).
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.log");
        let ps: Vec<Vec<u8>> = (0..20u8).map(|i| vec![i + 1; 50]).collect();
        let offsets = write_log(&path, &ps);
        let mut bytes = std::fs::read(&path).unwrap();
        let (at, next) = (offsets[5] as usize, offsets[6] as usize);
        bytes[at..at + HEADER_SIZE].fill(0);
        bytes.resize(bytes.len() + 8192, 0);
        let (recs, term) = rewrite_and_read(&path, &bytes);
        assert_eq!(recs.len(), 5);
        assert_eq!(bad_at(&term), (at as u64, false));
        // The whole record zeroed: the same.
        bytes[at..next].fill(0);
        let (_, term) = rewrite_and_read(&path, &bytes);
        assert_eq!(bad_at(&term), (at as u64, false));
    }

    /// Small records over several pages, and their offsets.
    fn paged_log(path: &Path) -> (Vec<u8>, Vec<u64>) {
        let ps: Vec<Vec<u8>> = (0..400u32).map(|i| vec![(i % 250) as u8 + 1; 50]).collect();
        let offsets = write_log(path, &ps);
        let bytes = std::fs::read(path).unwrap();
        assert!(bytes.len() as u64 > 5 * LOST_PAGE);
        (bytes, offsets)
    }

    /// The index of the record holding byte `at`.
    fn record_at(offsets: &[u64], at: u64) -> usize {
        offsets.partition_point(|&o| o <= at) - 1
    }

    /// `rewrite_and_read` for a WAL under recovery: lost pages accepted.
    /// The records before the terminal are the plain reader's.
    fn rewrite_and_recover(path: &Path, bytes: &[u8]) -> (Vec<(u64, Vec<u8>)>, LogRead) {
        let (plain_recs, _) = rewrite_and_read(path, bytes);
        let mut r = LogReader::open(path).unwrap().with_lost_pages();
        let mut recs = Vec::new();
        let term = loop {
            match r.read().unwrap() {
                LogRead::Record { offset, payload } => recs.push((offset, payload)),
                other => break other,
            }
        };
        assert_eq!(recs, plain_recs);
        (recs, term)
    }

    #[test]
    fn a_lost_page_is_a_torn_tail_in_recovery_even_with_records_after_it() {
        // After a machine crash a never-synced page may read as zeros while
        // later pages hold records: the log ends before the lost page.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.log");
        let (bytes, offsets) = paged_log(&path);
        for page in 1..4u64 {
            let (from, to) = (page * LOST_PAGE, (page + 1) * LOST_PAGE);
            let mut lost = bytes.clone();
            lost[from as usize..to as usize].fill(0);
            let first_bad = record_at(&offsets, from);
            let (recs, term) = rewrite_and_recover(&path, &lost);
            assert_eq!(recs.len(), first_bad, "page {page}");
            assert_eq!(bad_at(&term), (offsets[first_bad], true), "page {page}");
            // The manifest's reader: corruption.
            let (_, term) = rewrite_and_read(&path, &lost);
            assert_eq!(bad_at(&term), (offsets[first_bad], false), "page {page}");
            // One byte of the page left: damage, not a lost page.
            lost[to as usize - 1] = bytes[to as usize - 1] | 1;
            let (_, term) = rewrite_and_recover(&path, &lost);
            assert_eq!(bad_at(&term), (offsets[first_bad], false), "page {page}");
        }
    }

    #[test]
    fn a_page_written_back_before_its_last_records_is_a_torn_tail_in_recovery() {
        // A page synced (or written back) early holds its first records and
        // zeros after them; later pages may have been written back since.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.log");
        let (bytes, offsets) = paged_log(&path);
        let page_end = 3 * LOST_PAGE;
        // Cut at a record boundary, and inside a record (written back
        // between its header and the rest of its payload).
        let cut = record_at(&offsets, page_end - 1000);
        for from in [offsets[cut], offsets[cut] + 20] {
            let mut lost = bytes.clone();
            lost[from as usize..page_end as usize].fill(0);
            let (recs, term) = rewrite_and_recover(&path, &lost);
            assert_eq!(recs.len(), cut, "zeros from {from}");
            assert_eq!(bad_at(&term), (offsets[cut], true), "zeros from {from}");
            // Zeros that stop short of the page's end are damage.
            lost[page_end as usize - 1] = 7;
            let (_, term) = rewrite_and_recover(&path, &lost);
            assert_eq!(bad_at(&term), (offsets[cut], false), "zeros from {from}");
        }
        // A whole record with a flipped byte before such zeros: a crash
        // leaves no damaged record that ends in data, so corruption.
        let mut bad = bytes.clone();
        bad[offsets[cut + 1] as usize..page_end as usize].fill(0);
        bad[offsets[cut] as usize + 30] ^= 1;
        let (recs, term) = rewrite_and_recover(&path, &bad);
        assert_eq!(recs.len(), cut);
        assert_eq!(bad_at(&term), (offsets[cut], false));
    }

    #[test]
    fn a_long_record_ending_in_a_lost_page_is_a_torn_tail_but_not_one_with_a_hole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.log");
        let mut ps: Vec<Vec<u8>> = vec![vec![3; 100]; 3];
        ps.push((0..10_000u32).map(|i| (i % 253) as u8 + 1).collect());
        ps.extend(vec![vec![5; 100]; 40]);
        let offsets = write_log(&path, &ps);
        let bytes = std::fs::read(&path).unwrap();
        let end = offsets[4];
        assert!(
            end > 2 * LOST_PAGE && end < 3 * LOST_PAGE,
            "record 3 ends in page 2"
        );
        // Page 2 lost: the long record's tail and the records after it.
        let mut lost = bytes.clone();
        lost[2 * LOST_PAGE as usize..3 * LOST_PAGE as usize].fill(0);
        let (recs, term) = rewrite_and_recover(&path, &lost);
        assert_eq!(recs.len(), 3);
        assert_eq!(bad_at(&term), (offsets[3], true));
        // Page 1 lost, inside the record, which ends in a page written
        // back: no record boundary holds zeros, so it is corruption.
        let mut hole = bytes.clone();
        hole[LOST_PAGE as usize..2 * LOST_PAGE as usize].fill(0);
        let (_, term) = rewrite_and_recover(&path, &hole);
        assert_eq!(bad_at(&term), (offsets[3], false));
    }

    #[test]
    fn a_zero_filled_value_with_a_bad_checksum_is_corruption_in_recovery() {
        // Zeros inside a payload are data: damage to such a record, with
        // the next record right behind it, must not pass for a lost page.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.log");
        let mut ps: Vec<Vec<u8>> = vec![vec![1; 100]; 2];
        ps.push(vec![0; 16 << 10]);
        ps.extend(vec![vec![2; 100]; 3]);
        let offsets = write_log(&path, &ps);
        let bytes = std::fs::read(&path).unwrap();
        for at in [offsets[2], offsets[2] + 100] {
            let mut bad = bytes.clone();
            bad[at as usize] ^= 0x10;
            let (recs, term) = rewrite_and_recover(&path, &bad);
            assert_eq!(recs.len(), 2, "byte {at} flipped");
            assert_eq!(bad_at(&term), (offsets[2], false), "byte {at} flipped");
        }
    }

    #[test]
    fn a_boundary_zeroed_to_a_page_end_needs_a_whole_header_of_zeros() {
        // Fewer zero bytes than a header before the page boundary are too
        // little to tell a crash from damage: corruption (here the zeroed
        // header runs into the next page, whose other bytes are intact).
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.log");
        let (bytes, offsets) = paged_log(&path);
        let i = offsets
            .iter()
            .position(|&o| o % LOST_PAGE > LOST_PAGE - HEADER_SIZE as u64)
            .expect("a header that straddles a page boundary");
        let (at, page_end) = (offsets[i], page_end(offsets[i]));
        assert!(page_end - at < HEADER_SIZE as u64);
        let mut bad = bytes.clone();
        bad[at as usize..at as usize + HEADER_SIZE].fill(0);
        let (recs, term) = rewrite_and_recover(&path, &bad);
        assert_eq!(recs.len(), i);
        assert_eq!(bad_at(&term), (at, false));
    }

    #[test]
    fn bytes_after_a_zero_run_are_corruption_not_the_end() {
        // Zeros end the log only when nothing but zeros follows them: a
        // zeroed record in the middle of written records is corruption.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("z.log");
        let offsets = write_log(&path, &payloads());
        let mut bytes = std::fs::read(&path).unwrap();
        let (at, next) = (offsets[2] as usize, offsets[3] as usize);
        bytes[at..next].fill(0);
        let (recs, term) = rewrite_and_read(&path, &bytes);
        assert_eq!(recs.len(), 2);
        assert_eq!(bad_at(&term), (at as u64, false));
        // The same zeros reaching the end of the file are its end.
        let (recs, term) = rewrite_and_read(&path, &bytes[..next]);
        assert_eq!((recs.len(), term), (2, LogRead::End));
    }
}
