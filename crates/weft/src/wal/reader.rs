//! [`LogReader`]: streams a log's records and tells a torn tail from
//! corruption (see the module docs of [`super`]).

use std::fs::File;
use std::io::{BufReader, ErrorKind, Read, Take};
use std::path::Path;

use super::format::{ends_in_lost_page, page_end, HEADER_SIZE};
use crate::error::{Error, Result};
use crate::util::crc;
use crate::util::fs::{file_name, FileSystem};

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
    pub fn open(fs: &dyn FileSystem, path: &Path) -> Result<LogReader> {
        Self::open_prefix(fs, path, u64::MAX)
    }

    /// Opens the first `limit` bytes of the log at `path`, as if the file
    /// ended there: for reading a log that is being appended to, up to a
    /// length its writer reported (a reader scanning on past it could find
    /// bytes the writer is storing now — a header still zero with its
    /// payload already behind it — and take them for damage).
    pub fn open_prefix(fs: &dyn FileSystem, path: &Path, limit: u64) -> Result<LogReader> {
        let name = file_name(path);
        let file = fs
            .open(path)
            .map_err(|e| Error::io(format!("opening log {name}"), e))?;
        let file_len = file
            .metadata()
            .map_err(|e| Error::io(format!("reading size of log {name}"), e))?
            .len()
            .min(limit);
        Ok(LogReader {
            name,
            reader: BufReader::with_capacity(64 << 10, file.take(limit)),
            limit,
            pos: 0,
            file_len,
            done: None,
            lost_pages: false,
        })
    }

    /// [`LogReader::open_prefix`] positioned at `start`, the offset of a
    /// record's header that an earlier reader of the same log reached
    /// ([`LogReader::offset`]): a tailing reader (the change feed) resumes
    /// there instead of reading the log again from its start.
    pub fn open_prefix_at(
        fs: &dyn FileSystem,
        path: &Path,
        limit: u64,
        start: u64,
    ) -> Result<LogReader> {
        use std::io::{Seek, SeekFrom};
        let name = file_name(path);
        let mut file = fs
            .open(path)
            .map_err(|e| Error::io(format!("opening log {name}"), e))?;
        let file_len = file
            .metadata()
            .map_err(|e| Error::io(format!("reading size of log {name}"), e))?
            .len()
            .min(limit);
        let start = start.min(limit);
        file.seek(SeekFrom::Start(start))
            .map_err(|e| Error::io(format!("seeking in log {name}"), e))?;
        Ok(LogReader {
            name,
            reader: BufReader::with_capacity(64 << 10, file.take(limit - start)),
            limit,
            pos: start,
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
        let (stored, len) = crc::parse_record_header(&header);
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
        let actual = crc::record_checksum(len, &payload);
        if actual != stored {
            let mut reason = format!(
                "checksum mismatch (stored {:#010x}, computed {:#010x})",
                crc::unmask(stored),
                crc::unmask(actual)
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
