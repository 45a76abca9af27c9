//! [`LogWriter`]: appends framed records to a log (see the module docs of
//! [`super`] for when a record survives what).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::format::{encode_header, HEADER_SIZE};
use super::MappedAppender;
use crate::error::{Error, Result};
use crate::util::fs::{file_name, parent_dir, FileSystem, WritableFile};

/// Bytes of deferred records after which they are written without waiting
/// for [`LogWriter::flush_buffer`].
pub const MAX_DEFERRED: usize = 1 << 20;

/// Appends checksummed records to a log file.
///
/// Not internally synchronized: the engine's WAL lock (or the manifest's
/// lock) serializes writers, so `&mut self` is all that is needed.
pub struct LogWriter {
    path: PathBuf,
    name: String,
    file: Arc<dyn WritableFile>,
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
    pub fn create(fs: &dyn FileSystem, path: &Path) -> Result<LogWriter> {
        Self::open_new(fs, path, false)
    }

    /// Creates (truncating) the log at `path`; records are stored through a
    /// shared mapping of blocks reserved ahead (see [`MappedAppender`]), or
    /// written with `write` calls where the file system cannot reserve
    /// blocks. Same durability as [`LogWriter::create`]; the file carries
    /// zeros past its last record until the writer is dropped.
    pub fn create_mapped(fs: &dyn FileSystem, path: &Path) -> Result<LogWriter> {
        Self::open_new(fs, path, true)
    }

    fn open_new(fs: &dyn FileSystem, path: &Path, mapped: bool) -> Result<LogWriter> {
        let name = file_name(path);
        let file = fs
            .create(path, mapped)
            .map_err(|e| Error::io(format!("creating log {name}"), e))?;
        let mapped = match mapped {
            true => MappedAppender::new(&*file),
            false => None,
        };
        let parent = parent_dir(path);
        fs.sync_dir(parent)
            .map_err(|e| Error::io(format!("syncing directory {}", parent.display()), e))?;
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

    /// A writer for a read-only engine (`Db::open_read_only`), which must
    /// not create or change any file: it stands in the engine's WAL and
    /// manifest slots, and every write or sync through it fails with an
    /// I/O error saying the database is read-only. The engine refuses
    /// writes before they reach it ([`Error::ReadOnly`]); this is the
    /// second line, so that no path overlooked there can write. `dir`
    /// (opened for reading only, through `fs`) is the descriptor
    /// [`WritableFile::file`] must return; `path` the name it reports.
    pub fn refusing(fs: &dyn FileSystem, dir: &Path, path: PathBuf) -> Result<LogWriter> {
        let handle = fs
            .open(dir)
            .map_err(|e| Error::io(format!("opening {}", dir.display()), e))?;
        Ok(LogWriter {
            name: file_name(&path),
            path,
            file: Arc::new(RefusingFile { handle }),
            size: 0,
            deferred: Vec::new(),
            failed: false,
            mapped: None,
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
            Some(m) => m.write_at(&*self.file, self.size, &[&header, payload]),
            None => self.file.append(&[&header, payload]),
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
            Some(m) => store_records(m, &*self.file, self.size, &self.deferred),
            None => self.file.append(&[&self.deferred]),
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
    /// page across every core (in `perf` of a long `fillrandom`, the flush
    /// thread's fdatasync of a closed 64 MiB WAL spent a large part of its
    /// time there), and the window faulted in ahead would be written back
    /// as zeros only to be cut off afterwards. Records appended after this
    /// still land where they belong (the next store maps and reserves
    /// again).
    pub fn seal(&mut self) -> Result<()> {
        self.flush_buffer()?;
        self.check_usable()?;
        if let Some(m) = &mut self.mapped {
            if let Err(e) = m.finish(&*self.file, self.size) {
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
    pub fn sync_handle(&mut self) -> Result<Arc<dyn WritableFile>> {
        self.flush_buffer()?;
        self.check_usable()?;
        Ok(Arc::clone(&self.file))
    }

    /// Bytes of records appended (in the file or deferred).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Whether records are stored through a mapping
    /// ([`LogWriter::create_mapped`] on a file system that reserves blocks).
    #[cfg(test)]
    pub(crate) fn is_mapped(&self) -> bool {
        self.mapped.is_some()
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
            let _ = m.finish(&*self.file, self.size);
        }
    }
}

/// Stores the framed records of `buf`, which end at file offset `end`,
/// through the mapping one record at a time, each header before its payload.
/// A single copy of the whole buffer would not do: `memcpy` may store its
/// first bytes last, and a kill in between would leave a zeroed header with
/// records behind it, which the reader must treat as damage.
fn store_records(
    m: &mut MappedAppender,
    file: &dyn WritableFile,
    end: u64,
    buf: &[u8],
) -> std::io::Result<()> {
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

/// The file behind [`LogWriter::refusing`]: every write fails.
#[derive(Debug)]
struct RefusingFile {
    /// A read-only descriptor of the database directory, only so that
    /// [`WritableFile::file`] has a file to return; never written or mapped
    /// (nothing maps a log without a mapped appender, which this writer
    /// has not).
    handle: std::fs::File,
}

impl RefusingFile {
    fn refuse() -> std::io::Error {
        std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "the database is open read-only",
        )
    }
}

impl WritableFile for RefusingFile {
    fn append(&self, _parts: &[&[u8]]) -> std::io::Result<()> {
        Err(Self::refuse())
    }
    fn sync_data(&self) -> std::io::Result<()> {
        Err(Self::refuse())
    }
    fn sync_all(&self) -> std::io::Result<()> {
        Err(Self::refuse())
    }
    fn allocate(&self, _offset: u64, _len: u64) -> std::io::Result<()> {
        Err(Self::refuse())
    }
    fn set_len(&self, _len: u64) -> std::io::Result<()> {
        Err(Self::refuse())
    }
    fn note_mapped_stores(&self, _end: u64) {}
    fn file(&self) -> &std::fs::File {
        &self.handle
    }
}
