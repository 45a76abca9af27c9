//! Record logs: the framing shared by the write-ahead log and the manifest.
//!
//! STUB: signatures fixed; implementation to come.

use std::path::{Path, PathBuf};

use crate::error::Result;

/// Appends checksummed records to a log file.
pub struct LogWriter {
    _path: PathBuf,
}

impl LogWriter {
    /// Creates (truncating) the log at `path`.
    pub fn create(_path: &Path) -> Result<LogWriter> {
        unimplemented!()
    }
    /// Appends one record; it has reached the OS (survives a process crash)
    /// when this returns. Returns the bytes written (header included).
    pub fn add_record(&mut self, _payload: &[u8]) -> Result<u64> {
        unimplemented!()
    }
    /// fdatasync: the records appended so far survive a machine crash.
    pub fn sync(&mut self) -> Result<()> {
        unimplemented!()
    }
    /// Bytes in the file.
    pub fn size(&self) -> u64 {
        unimplemented!()
    }
    /// The file's path.
    pub fn path(&self) -> &Path {
        unimplemented!()
    }
}

/// What [`LogReader::read`] found at the current position.
#[derive(Debug, PartialEq, Eq)]
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
    /// the bad record reaches the end of the file (a torn final write);
    /// otherwise valid-looking bytes follow it (corruption in the middle).
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
    _path: PathBuf,
}

impl LogReader {
    /// Opens the log at `path` for reading.
    pub fn open(_path: &Path) -> Result<LogReader> {
        unimplemented!()
    }
    /// Reads the next record. After `End` or `Bad`, keeps returning the same.
    pub fn read(&mut self) -> Result<LogRead> {
        unimplemented!()
    }
}
