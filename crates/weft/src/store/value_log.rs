//! Value logs: where a merge puts the large values of the SortedStore
//! (UniKV §III-C, partial key-value separation).
//!
//! A merge writes every value of at least `min_blob_size` bytes to a fresh
//! value log and leaves a [`ValuePointer`] in the SortedStore table instead.
//! Values already behind a pointer are never rewritten by a later merge —
//! the pointer is copied — so merges move keys, not values. Only GC
//! ([`super::gc`]) rewrites values, to reclaim the space of dead ones.
//!
//! ```text
//! log    := record*
//! record := masked crc32c u32 LE (over len + stored) | len u32 LE | stored
//! stored := value, or the value compressed (`crate::compression`'s form)
//! ```
//!
//! A pointer names the log, the record's offset, the stored length and the
//! codec (`Options::value_log_compression`; each value is compressed on
//! its own, so a get decodes only what it reads); a read checks that the
//! record's length matches the pointer's and that the checksum holds, then
//! decodes, so a damaged log yields `Error::Corruption { file, offset }`
//! and never a wrong value.
//!
//! Logs are immutable once their merge finishes. A log removed from the live
//! version is deleted when the last reader holding it goes (as tables are).
//!
//! # Reads through a mapping
//!
//! An open log is also mapped read-only, and a single value is copied out
//! of the mapping instead of read with `pread`. A scan over separated
//! values reads each from a different log (a merge writes a log of its
//! own, keys are random), so `seekrandom --seek_nexts=10` paid ten
//! syscalls per seek; from the page cache a copy costs a fraction of one.
//! The mapping is advised `MADV_RANDOM`: a cold value faults in its own
//! pages, not a readahead window. A scan walking a log in order asks the
//! kernel to read ahead instead (`MADV_WILLNEED`, `value_reader`). What a
//! mapping cannot turn into an error is described in `crate::util::mapping`.
//! Where the mapping cannot be made, reads fall back to `pread`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::compression::{self, Compression, CODEC_LZ4, CODEC_NONE, CODEC_ZSTD};
use crate::error::{Error, IoContext, Result};
use crate::filename;
use crate::util::coding::{get_varint32, get_varint64, put_varint32, put_varint64};
use crate::util::crc;
use crate::util::fs::{FileWriter, Fs};
use crate::util::mapping::ReadMapping;

/// Bytes of a record before its value (checksum, length).
pub(crate) const HEADER: usize = crc::RECORD_HEADER_SIZE;
/// Where a separated value lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValuePointer {
    /// Value log file number.
    pub log: u64,
    /// Offset of the record header in the log.
    pub offset: u64,
    /// Length of the record's stored bytes: the value, or for a compressed
    /// one its compressed form.
    pub len: u32,
    /// How the stored bytes encode the value: `compression::CODEC_NONE`
    /// (they are the value), `CODEC_LZ4` or `CODEC_ZSTD`.
    pub codec: u8,
}

impl ValuePointer {
    /// A pointer to a value stored as is.
    pub fn plain(log: u64, offset: u64, len: u32) -> ValuePointer {
        ValuePointer {
            log,
            offset,
            len,
            codec: CODEC_NONE,
        }
    }

    /// Encodes the pointer as a table value: `log | offset | len`, and the
    /// codec byte after them only for a compressed value (so every pointer
    /// written before compression existed reads as it did).
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(17);
        put_varint64(&mut v, self.log);
        put_varint64(&mut v, self.offset);
        put_varint32(&mut v, self.len);
        if self.codec != CODEC_NONE {
            v.push(self.codec);
        }
        v
    }

    /// Decodes a table value; `None` if it is not a well-formed pointer.
    pub fn decode(src: &[u8]) -> Option<ValuePointer> {
        let (log, pos) = get_varint64(src, 0)?;
        let (offset, pos) = get_varint64(src, pos)?;
        let (len, pos) = get_varint32(src, pos)?;
        let codec = match &src[pos..] {
            [] => CODEC_NONE,
            [c @ (CODEC_LZ4 | CODEC_ZSTD)] => *c,
            _ => return None,
        };
        Some(ValuePointer {
            log,
            offset,
            len,
            codec,
        })
    }

    /// Decodes the value of a SortedStore entry of kind `Pointer`; a
    /// malformed one is corruption.
    pub fn parse(raw: &[u8]) -> Result<ValuePointer> {
        ValuePointer::decode(raw)
            .ok_or_else(|| Error::corruption("(SortedStore entry)", 0, "malformed value pointer"))
    }

    /// Bytes the record occupies in its log.
    pub fn record_size(&self) -> u64 {
        HEADER as u64 + self.len as u64
    }
}

/// Appends values to a new value log.
pub struct ValueLogWriter {
    out: BufWriter<FileWriter>,
    fs: Fs,
    path: PathBuf,
    number: u64,
    offset: u64,
    compression: Compression,
    /// A compressed value on its way to the log.
    scratch: Vec<u8>,
}

impl ValueLogWriter {
    /// Creates value log `number` in `dir`, its values stored uncompressed.
    #[cfg(test)]
    pub fn create(fs: &Fs, dir: &Path, number: u64) -> Result<ValueLogWriter> {
        Self::create_compressed(fs, dir, number, Compression::None)
    }

    /// Creates value log `number` in `dir`, compressing each value that
    /// `compression` shrinks enough (`crate::compression::compress`).
    pub fn create_compressed(
        fs: &Fs,
        dir: &Path,
        number: u64,
        compression: Compression,
    ) -> Result<ValueLogWriter> {
        let path = filename::value_log_path(dir, number);
        let f = fs
            .create(&path, false)
            .context(|| format!("creating value log {}", path.display()))?;
        Ok(ValueLogWriter {
            out: BufWriter::with_capacity(256 << 10, FileWriter(f)),
            fs: Arc::clone(fs),
            path,
            number,
            offset: 0,
            compression,
            scratch: Vec::new(),
        })
    }

    /// Appends `value`, returning where it went.
    pub fn append(&mut self, value: &[u8]) -> Result<ValuePointer> {
        self.append_compressed(value, self.compression)
    }

    /// Appends `value` compressed with `compression` where that saves
    /// enough (a keyspace's own codec: the pointer names the codec of its
    /// record, so records of several codecs mix in one log).
    pub fn append_compressed(
        &mut self,
        value: &[u8],
        compression: Compression,
    ) -> Result<ValuePointer> {
        if u32::try_from(value.len()).is_err() {
            return Err(Error::InvalidArgument(format!(
                "value of {} bytes is too large for a value log",
                value.len()
            )));
        }
        self.scratch.clear();
        let codec = compression::compress(compression, value, &mut self.scratch);
        let stored = if codec == CODEC_NONE {
            value
        } else {
            &self.scratch[..]
        };
        let ptr = ValuePointer {
            log: self.number,
            offset: self.offset,
            // The stored form is never longer than the value (`compress`).
            len: stored.len() as u32,
            codec,
        };
        let header = crc::record_header(ptr.len, stored);
        let path = &self.path;
        self.out
            .write_all(&header)
            .and_then(|_| self.out.write_all(stored))
            .context(|| format!("writing value log {}", path.display()))?;
        self.offset += ptr.record_size();
        Ok(ptr)
    }

    /// The log's file number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// Flushes and fsyncs the log; returns its size.
    pub fn finish(self) -> Result<u64> {
        let path = self.path.clone();
        let f = self.out.into_inner().map_err(|e| {
            Error::io(
                format!("writing value log {}", path.display()),
                e.into_error(),
            )
        })?;
        f.0.sync_all()
            .context(|| format!("syncing value log {}", path.display()))?;
        Ok(self.offset)
    }

    /// Removes the partly written log (its job failed).
    pub fn abandon(self) {
        let path = self.path.clone();
        drop(self.out);
        let _ = self.fs.remove_file(&path);
    }
}

/// An open, immutable value log.
pub struct ValueLogFile {
    number: u64,
    size: u64,
    path: PathBuf,
    file: File,
    /// Removes the file once obsolete.
    fs: Fs,
    /// The log's `size` bytes, mapped read-only (see the module docs).
    map: Option<ReadMapping>,
    obsolete: AtomicBool,
}

impl ValueLogFile {
    /// Opens value log `number` of `size` bytes: `NNNNNN.vlog`, written by
    /// a merge or GC, or else `NNNNNN.log`, a flushed WAL kept as a value
    /// log because tables point at the values logged in it
    /// (`Options::values_in_wal`).
    pub fn open(fs: &Fs, dir: &Path, number: u64, size: u64) -> Result<Arc<ValueLogFile>> {
        let path = filename::value_log_path(dir, number);
        if fs.exists(&path) {
            return Self::open_path(fs, path, number, size);
        }
        Self::open_path(fs, filename::wal_path(dir, number), number, size)
    }

    /// Opens the value log of `size` bytes at `path`.
    pub fn open_path(fs: &Fs, path: PathBuf, number: u64, size: u64) -> Result<Arc<ValueLogFile>> {
        let file = fs
            .open(&path)
            .context(|| format!("opening value log {}", path.display()))?;
        let actual = file
            .metadata()
            .context(|| format!("reading metadata of {}", path.display()))?
            .len();
        if actual < size {
            return Err(Error::corruption(
                &path,
                actual,
                format!("value log is {actual} bytes, the manifest says {size}"),
            ));
        }
        let map = ReadMapping::new(&file, size);
        Ok(Arc::new(ValueLogFile {
            number,
            size,
            path,
            file,
            fs: Arc::clone(fs),
            map,
            obsolete: AtomicBool::new(false),
        }))
    }

    /// [`ValueLogFile::open`] without the mapping: every read takes the
    /// `pread` path, as when the kernel refuses to map.
    pub(crate) fn open_unmapped(
        fs: &Fs,
        dir: &Path,
        number: u64,
        size: u64,
    ) -> Result<Arc<ValueLogFile>> {
        let mut log = Arc::into_inner(Self::open(fs, dir, number, size)?)
            .expect("a log just opened has no other holder");
        log.map = None;
        Ok(Arc::new(log))
    }

    /// The log's file number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The log's size.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Where the log lives: `NNNNNN.vlog`, or `NNNNNN.log` for a WAL kept
    /// as a value log.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file: a checkpoint copies the log from it when it cannot
    /// link the name (see `Table::file`).
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// Reads and verifies the value `ptr` points at.
    pub fn read(&self, ptr: &ValuePointer) -> Result<Vec<u8>> {
        self.check_bounds(ptr)?;
        if let Some(record) = self.mapped_record(ptr) {
            return self.copy_checked(ptr, record);
        }
        let mut buf =
            crate::util::pread::read_exact_at(&self.file, ptr.record_size() as usize, ptr.offset)
                .context(|| format!("reading value log {}", self.path.display()))?;
        self.check_record(ptr, &buf)?;
        buf.drain(..HEADER);
        self.decode(ptr, buf)
    }

    /// The value `stored` (a verified record's stored bytes) encodes: the
    /// bytes themselves, or for a compressed value its decompression.
    pub fn decode(&self, ptr: &ValuePointer, stored: Vec<u8>) -> Result<Vec<u8>> {
        if ptr.codec == CODEC_NONE {
            return Ok(stored);
        }
        compression::decompress(ptr.codec, &stored, crate::key::MAX_VALUE_SIZE)
            .map_err(|reason| Error::corruption(&self.path, ptr.offset, reason))
    }

    /// The bytes of the whole record `ptr` names (header and value), straight
    /// from the log's mapping, unverified (see [`ValueLogFile::check_record`]);
    /// `None` when the log is not mapped. `ptr` must be in bounds
    /// ([`ValueLogFile::check_bounds`]).
    pub fn mapped_record(&self, ptr: &ValuePointer) -> Option<&[u8]> {
        let map = self.map.as_ref()?;
        map.bytes()
            .get(ptr.offset as usize..(ptr.offset + ptr.record_size()) as usize)
    }

    /// Starts reading `len` bytes of the log at `offset` into the page cache
    /// (a no-op for a log that is not mapped).
    pub fn will_need(&self, offset: u64, len: usize) {
        if let Some(map) = &self.map {
            map.will_need(offset as usize, len);
        }
    }

    /// Checks that the record `ptr` names lies inside the log.
    pub fn check_bounds(&self, ptr: &ValuePointer) -> Result<()> {
        debug_assert_eq!(ptr.log, self.number);
        let end = ptr.offset.checked_add(ptr.record_size());
        if end.is_none_or(|e| e > self.size) {
            return Err(Error::corruption(
                &self.path,
                ptr.offset,
                format!("value pointer past the end of the {}-byte log", self.size),
            ));
        }
        Ok(())
    }

    /// Fills `buf` with the log's bytes at `offset` (unverified: records in
    /// it are checked by [`ValueLogFile::check_record`]).
    pub fn read_raw(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .context(|| format!("reading value log {}", self.path.display()))
    }

    /// The value of `record` (header and value, as [`Self::mapped_record`]
    /// gives it), copied out and verified. The copy comes first: it pulls
    /// the record's cache lines in one streaming pass, so the checksum then
    /// runs over cached bytes instead of stalling on each line itself (a
    /// scan's values are scattered over the log: every one is a miss).
    pub fn copy_checked(&self, ptr: &ValuePointer, record: &[u8]) -> Result<Vec<u8>> {
        let stored = record[HEADER..].to_vec();
        self.check_parts(ptr, &record[..HEADER], &stored)?;
        self.decode(ptr, stored)
    }

    /// Verifies `record`, the bytes of the whole record `ptr` names (header
    /// and value), against the pointer and the checksum.
    pub fn check_record(&self, ptr: &ValuePointer, record: &[u8]) -> Result<()> {
        debug_assert_eq!(record.len() as u64, ptr.record_size());
        let (header, value) = record.split_at(HEADER);
        self.check_parts(ptr, header, value)
    }

    /// [`Self::check_record`] for a record given as its header and value.
    fn check_parts(&self, ptr: &ValuePointer, header: &[u8], value: &[u8]) -> Result<()> {
        let bad = |why: String| Error::corruption(&self.path, ptr.offset, why);
        let header: &[u8; HEADER] = header
            .try_into()
            .map_err(|_| bad(format!("record header of {} bytes", header.len())))?;
        let (crc, len) = crc::parse_record_header(header);
        if len != ptr.len {
            return Err(bad(format!(
                "record holds {len} bytes, the pointer says {}",
                ptr.len
            )));
        }
        if crc != crc::record_checksum(len, value) {
            return Err(bad("value checksum mismatch".into()));
        }
        Ok(())
    }

    /// Reads every record front to back, verifying each; returns the count.
    pub fn verify_checksums(&self) -> Result<u64> {
        let mut offset = 0u64;
        let mut records = 0;
        let mut header = [0u8; HEADER];
        while offset < self.size {
            if offset + HEADER as u64 > self.size {
                return Err(Error::corruption(
                    &self.path,
                    offset,
                    "truncated record header",
                ));
            }
            self.file
                .read_exact_at(&mut header, offset)
                .context(|| format!("reading value log {}", self.path.display()))?;
            let len = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
            // The codec lives in the pointers, not the log: the walk
            // checks each record's stored bytes, not their decoding.
            let ptr = ValuePointer::plain(self.number, offset, len);
            self.read(&ptr)?;
            offset += ptr.record_size();
            records += 1;
        }
        Ok(records)
    }

    /// Marks the log as dropped from the live version: deleted when the last
    /// reader lets go.
    pub fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
    }
}

impl Drop for ValueLogFile {
    fn drop(&mut self) {
        if self.obsolete.load(Ordering::Acquire) {
            let _ = self.fs.remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointer_round_trips_and_rejects_garbage() {
        for codec in [CODEC_NONE, CODEC_LZ4, CODEC_ZSTD] {
            let p = ValuePointer {
                codec,
                ..ValuePointer::plain(7, 1 << 40, 12345)
            };
            assert_eq!(ValuePointer::decode(&p.encode()), Some(p));
            let enc = p.encode();
            for cut in 0..enc.len() {
                let got = ValuePointer::decode(&enc[..cut]);
                // Cutting a compressed pointer's codec byte leaves a plain
                // pointer: the table's checksum, not the encoding, tells.
                if got.is_some() {
                    assert!(codec != CODEC_NONE && cut == enc.len() - 1, "cut {cut}");
                }
            }
            let mut long = enc.clone();
            long.push(CODEC_LZ4);
            let want = (codec == CODEC_NONE).then_some(ValuePointer {
                codec: CODEC_LZ4,
                ..p
            });
            assert_eq!(ValuePointer::decode(&long), want, "a byte after the codec");
        }
        let mut bad_codec = ValuePointer::plain(1, 2, 3).encode();
        bad_codec.push(0);
        assert_eq!(ValuePointer::decode(&bad_codec), None);
        bad_codec.pop();
        bad_codec.push(3);
        assert_eq!(ValuePointer::decode(&bad_codec), None);
    }

    #[test]
    fn values_round_trip_and_every_flipped_byte_is_caught() {
        for compression in [Compression::None, Compression::Lz4, Compression::ZSTD] {
            round_trip_and_flips(compression);
        }
    }

    fn round_trip_and_flips(compression: Compression) {
        let dir = tempfile::tempdir().unwrap();
        let fs = crate::util::fs::real();
        let mut w = ValueLogWriter::create_compressed(&fs, dir.path(), 3, compression).unwrap();
        let values: Vec<Vec<u8>> = (0..20).map(|i| vec![i as u8; i * 37]).collect();
        let ptrs: Vec<_> = values.iter().map(|v| w.append(v).unwrap()).collect();
        let size = w.finish().unwrap();
        let stored = ptrs.iter().filter(|p| p.codec != CODEC_NONE).count();
        match compression {
            // The empty value and the shortest ones are not worth it.
            Compression::None => assert_eq!(stored, 0),
            _ => assert!(stored >= 17, "{compression}: {stored} of 20 compressed"),
        }
        let log = ValueLogFile::open(&crate::util::fs::real(), dir.path(), 3, size).unwrap();
        for (p, v) in ptrs.iter().zip(&values) {
            assert_eq!(&log.read(p).unwrap(), v);
        }
        assert_eq!(log.verify_checksums().unwrap(), 20);
        drop(log);
        let path = filename::value_log_path(dir.path(), 3);
        let clean = std::fs::read(&path).unwrap();
        for i in 0..clean.len() {
            let mut b = clean.clone();
            b[i] ^= 0x40;
            std::fs::write(&path, &b).unwrap();
            let log = ValueLogFile::open(&crate::util::fs::real(), dir.path(), 3, size).unwrap();
            let hit = ptrs
                .iter()
                .position(|p| (p.offset..p.offset + p.record_size()).contains(&(i as u64)))
                .unwrap();
            let e = log.read(&ptrs[hit]).unwrap_err();
            assert!(e.is_corruption(), "byte {i}: {e}");
            assert!(log.verify_checksums().is_err(), "byte {i}");
            for (j, p) in ptrs.iter().enumerate() {
                if j != hit {
                    assert_eq!(log.read(p).unwrap(), values[j]);
                }
            }
        }
    }

    #[test]
    fn pointer_past_the_end_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = ValueLogWriter::create(&crate::util::fs::real(), dir.path(), 1).unwrap();
        w.append(b"abc").unwrap();
        let size = w.finish().unwrap();
        let log = ValueLogFile::open(&crate::util::fs::real(), dir.path(), 1, size).unwrap();
        let bad = ValuePointer::plain(1, 5, 100);
        assert!(log.read(&bad).unwrap_err().is_corruption());
        let huge = ValuePointer::plain(1, u64::MAX - 2, 3);
        assert!(log.read(&huge).unwrap_err().is_corruption());
    }
}
