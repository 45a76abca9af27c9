//! Where the logged puts of one WAL lie in its file, so that a flush can
//! point at them instead of copying them (`Options::values_in_wal`).
//!
//! A logged put carries its value as a value-log record inside its WAL
//! record (`crate::batch`). Once that WAL is sealed and synced, the file
//! is a value log like any other: a [`ValuePointer`] names the embedded
//! record by the WAL's number and the record's offset in the file, and a
//! read checks the embedded record's own checksum and length. The flush
//! learns the offsets by reading the sealed WAL once, front to back (it
//! was just written: the read comes from the page cache), rather than by
//! having every writer record its offset: that would be one more shared
//! structure written per write, and writers append concurrently.

use std::path::Path;

use super::value_log::ValuePointer;
use crate::error::{Error, Result};
use crate::key::SequenceNumber;
use crate::util::fs::FileSystem;
use crate::wal::{LogLink, LogRead, LogReader};

/// Bytes of a WAL record's frame before its payload.
const WAL_RECORD_HEADER: u64 = crate::util::crc::RECORD_HEADER_SIZE as u64;

/// The logged puts of one sealed WAL, by sequence.
#[derive(Debug, Default)]
pub struct LoggedValues {
    /// The WAL's file number.
    log: u64,
    /// `(sequence, offset of the embedded record, value length)`, in
    /// sequence order (writers append their records in sequence order).
    by_seq: Vec<(SequenceNumber, u64, u32)>,
}

impl LoggedValues {
    /// Reads WAL `number` at `path` up to `size` bytes of records (all of
    /// them: the WAL is sealed) and notes every logged put. A record that
    /// does not verify is `Error::Corruption`: the WAL was synced whole.
    pub fn read(fs: &dyn FileSystem, path: &Path, number: u64, size: u64) -> Result<LoggedValues> {
        let mut reader = LogReader::open_prefix(fs, path, size)?;
        let mut by_seq = Vec::new();
        loop {
            match reader.read()? {
                LogRead::Record { offset, payload } => {
                    if LogLink::decode(&payload).is_some() {
                        continue;
                    }
                    let logged = crate::batch::logged_puts(&payload)
                        .map_err(|r| Error::corruption(path, offset, r))?;
                    for (seq, at, len) in logged {
                        by_seq.push((seq, offset + WAL_RECORD_HEADER + at as u64, len));
                    }
                }
                LogRead::End => break,
                LogRead::Bad { offset, reason, .. } => {
                    return Err(Error::corruption(path, offset, reason));
                }
            }
        }
        debug_assert!(by_seq.windows(2).all(|w| w[0].0 < w[1].0));
        Ok(LoggedValues {
            log: number,
            by_seq,
        })
    }

    /// True when the WAL holds no logged put.
    pub fn is_empty(&self) -> bool {
        self.by_seq.is_empty()
    }

    /// The pointer to the value the put at `seq` logged, if it logged one
    /// of `len` bytes (any other length would be a different write: it is
    /// then written inline, never pointed at wrongly).
    pub fn pointer(&self, seq: SequenceNumber, len: usize) -> Option<ValuePointer> {
        let i = self.by_seq.binary_search_by_key(&seq, |e| e.0).ok()?;
        let (_, offset, logged_len) = self.by_seq[i];
        (logged_len as usize == len).then_some(ValuePointer {
            log: self.log,
            offset,
            len: logged_len,
        })
    }
}
