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
    /// `(sequence, where its record is)`, in sequence order (writers
    /// append their records in sequence order).
    by_seq: Vec<(SequenceNumber, Logged)>,
    /// The same, indexed by `sequence - first`, offset 0 where no put was
    /// logged (no embedded record starts at offset 0: a batch header comes
    /// first) — when the logged puts are most of the WAL's operations.
    /// A flush looks a pointer up for every put in key order, so in
    /// random sequence order: a binary search over a memtable's worth of
    /// entries missed the cache at every step, and took a sixth of the
    /// flush thread's time.
    dense: Vec<Logged>,
    /// The sequence `dense[0]` stands for.
    first: SequenceNumber,
}

/// Where one logged put's value-log record lies in the WAL file.
#[derive(Debug, Default, Clone, Copy)]
struct Logged {
    /// Offset of the embedded record in the file.
    offset: u64,
    /// Bytes the record stores.
    stored: u32,
    /// Bytes of the value.
    value_len: u32,
    /// How the stored bytes encode it (`compression::CODEC_*`).
    codec: u8,
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
                    for put in logged {
                        let at = Logged {
                            offset: offset + WAL_RECORD_HEADER + put.at as u64,
                            stored: put.stored,
                            value_len: put.value_len,
                            codec: put.codec,
                        };
                        by_seq.push((put.seq, at));
                    }
                }
                LogRead::End => break,
                LogRead::Bad { offset, reason, .. } => {
                    return Err(Error::corruption(path, offset, reason));
                }
            }
        }
        debug_assert!(by_seq.windows(2).all(|w| w[0].0 < w[1].0));
        let mut values = LoggedValues {
            log: number,
            ..Default::default()
        };
        if let (Some(first), Some(last)) = (by_seq.first(), by_seq.last()) {
            let span = last.0 - first.0 + 1;
            // Dense when it costs at most about four times the sparse form.
            if span <= 4 * by_seq.len() as u64 + 1024 {
                values.first = first.0;
                values.dense = vec![Logged::default(); span as usize];
                for (seq, at) in &by_seq {
                    values.dense[(seq - first.0) as usize] = *at;
                }
                return Ok(values);
            }
        }
        values.by_seq = by_seq;
        Ok(values)
    }

    /// True when the WAL holds no logged put.
    pub fn is_empty(&self) -> bool {
        self.by_seq.is_empty() && self.dense.is_empty()
    }

    /// The pointer to the value the put at `seq` logged, if it logged one
    /// of `len` bytes (any other length would be a different write: it is
    /// then written inline, never pointed at wrongly).
    pub fn pointer(&self, seq: SequenceNumber, len: usize) -> Option<ValuePointer> {
        let at = if self.dense.is_empty() {
            let i = self.by_seq.binary_search_by_key(&seq, |e| e.0).ok()?;
            self.by_seq[i].1
        } else {
            let i = usize::try_from(seq.checked_sub(self.first)?).ok()?;
            *self.dense.get(i).filter(|at| at.offset != 0)?
        };
        (at.value_len as usize == len).then_some(ValuePointer {
            codec: at.codec,
            ..ValuePointer::plain(self.log, at.offset, at.stored)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::WriteBatch;
    use crate::store::value_log::ValueLogFile;
    use crate::wal::LogWriter;

    /// Writes batches of `ops` (value length per op; 0 is a delete) to a
    /// WAL, values of at least `from` bytes logged; reads the WAL back and
    /// checks that every logged value, and only those, is found and reads
    /// through its pointer.
    fn round_trip(ops_per_batch: &[usize], batches: u64, from: usize) -> LoggedValues {
        let dir = tempfile::tempdir().unwrap();
        let fs = crate::util::fs::real();
        let path = crate::filename::wal_path(dir.path(), 7);
        let mut w = LogWriter::create(&*fs, &path).unwrap();
        let mut expected = Vec::new();
        let mut seq = 1;
        for b in 0..batches {
            let mut batch = WriteBatch::new();
            for (i, &len) in ops_per_batch.iter().enumerate() {
                let key = format!("k{b}.{i}");
                match len {
                    0 => batch.delete(&key),
                    n => batch.put(&key, vec![(b + i as u64) as u8; n]),
                };
                expected.push((seq, len));
                seq += 1;
            }
            let mut batch =
                (batch.with_puts_logged_from(from, crate::Compression::None)).unwrap_or(batch);
            batch.set_sequence(seq - ops_per_batch.len() as u64);
            w.add_record(batch.encoded()).unwrap();
        }
        w.sync().unwrap();
        let size = w.size();
        drop(w);
        let logged = LoggedValues::read(&*fs, &path, 7, size).unwrap();
        let log = ValueLogFile::open_path(&fs, path, 7, size).unwrap();
        for (seq, len) in expected {
            let found = logged.pointer(seq, len);
            assert_eq!(found.is_some(), len >= from, "seq {seq} len {len}");
            if let Some(p) = found {
                assert_eq!(log.read(&p).unwrap().len(), len);
                assert!(logged.pointer(seq, len + 1).is_none(), "length checked");
            }
        }
        assert!(logged.pointer(0, 100).is_none());
        assert!(logged.pointer(seq + 5, 100).is_none());
        logged
    }

    #[test]
    fn mostly_logged_puts_are_indexed_densely() {
        let l = round_trip(&[300, 300, 0, 10, 300], 50, 256);
        assert!(!l.dense.is_empty() && l.by_seq.is_empty());
    }

    #[test]
    fn rare_logged_puts_are_indexed_sparsely() {
        let mut ops = vec![10; 200];
        ops[100] = 400;
        let l = round_trip(&ops, 20, 256);
        assert!(l.dense.is_empty() && !l.by_seq.is_empty());
    }

    #[test]
    fn a_wal_without_logged_puts_is_empty() {
        assert!(round_trip(&[10, 0, 20], 5, 256).is_empty());
    }
}
