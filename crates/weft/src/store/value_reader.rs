//! Reading separated values for a cursor, with readahead (UniKV §III-F).
//!
//! A scan over a SortedStore whose values sit in value logs would cost one
//! `pread` per value. But a merge appends the values it separates in key
//! order, and GC copies live values in key order too, so a cursor walking
//! keys in order mostly walks each log in order as well — with gaps where
//! keys died or where other logs' values interleave. [`ValueReader`] keeps,
//! per log the cursor is reading, one window of the log's bytes, and serves
//! every record that falls inside it from memory.
//!
//! The window grows only while the cursor keeps going one way through a log
//! (the next record starts at most [`NEAR`] bytes past the last one, or ends
//! at most that far before it when scanning backwards). Reads of a log are
//! exact until [`STREAK`] of them in a row went one way; then a refill reads
//! [`RECORDS_AHEAD`] records' worth (at least [`FIRST_WINDOW`]), and each
//! later refill doubles, up to [`MAX_WINDOW`]. So a seek followed by a few
//! `next`s — the common short scan, whose values are spread over several
//! logs — reads no more than it needs (reading ahead from the second value
//! on made `seekrandom` slower in an A/B), and a long scan reads in large
//! sequential chunks the kernel can stream. Each record is still verified
//! against its checksum and pointer when it is served.
//!
//! Each merge writes a log of its own, so until GC folds them together a
//! SortedStore's values are spread over many logs, interleaved in key
//! order: a scan then walks all of them in order at once. The reader keeps
//! a window for up to [`MAX_LOGS`] logs (least recently used dropped) and
//! shares [`READAHEAD_BUDGET`] between them — each window is at most
//! `READAHEAD_BUDGET / windows` bytes (never under [`FIRST_WINDOW`]) — so a
//! scan over a dozen logs still reads each byte about once, and a reader
//! holds about one budget of memory.
//!
//! A log that is mapped (`crate::util::mapping`; the usual case) keeps no
//! window bytes: every record is copied straight out of the mapping, and
//! where the reader would have refilled a window it asks the kernel to read
//! that range ahead instead (`MADV_WILLNEED`), so a long scan over a cold
//! log still streams while a short one issues no system call at all. For
//! a mapped log "in order" is stricter ([`DENSE_GAP_RECORDS`]): a walk
//! whose records lie farther apart is served record by record. The
//! `pread` windows above serve logs the kernel would not map.
//!
//! UniKV also reads values with a thread pool; here a cursor is driven by
//! one caller thread and a large sequential read replaces many small ones
//! without the hand-off cost (the kernel's own readahead streams it).

use std::sync::Arc;

use super::value_log::{ValueLogFile, ValuePointer};
use super::Version;
use crate::error::Result;
use crate::stats::{DiskReads, ReadPurpose};

/// Smallest readahead window.
pub const FIRST_WINDOW: usize = 4 << 10;
/// The first readahead of a log covers about this many records.
pub const RECORDS_AHEAD: usize = 8;
/// In-order reads of a log before reading ahead in it.
pub const STREAK: u32 = 2;
/// Largest window.
pub const MAX_WINDOW: usize = 256 << 10;
/// Bytes of windows one reader aims to hold over all logs.
pub const READAHEAD_BUDGET: usize = 1 << 20;
/// Largest gap between consecutive records that still counts as reading a
/// log in order.
pub const NEAR: u64 = 64 << 10;
/// For a mapped log, the gaps between consecutive records, in record
/// sizes, up to which a walk in order is dense enough to read ahead. A
/// sparse walk — one key range's values
/// in a WAL kept as a value log, written in time order among every other
/// range's — gains nothing from a window, since most of it is other
/// records, and on cached data the `MADV_WILLNEED` of each window only
/// walks the page cache: it cost scans of one range's recent values
/// about 40 % (bench/journal/2026-11-27-12).
pub const DENSE_GAP_RECORDS: u64 = 1;
/// Logs with a window kept at once.
pub const MAX_LOGS: usize = 32;

/// What the reader knows of one log.
struct Window {
    log: u64,
    /// Log offset of `buf[0]`.
    start: u64,
    buf: Vec<u8>,
    /// Byte range of the last record served, to see whether the cursor
    /// goes on in order.
    last: (u64, u64),
    /// In-order reads in a row (see [`STREAK`]).
    streak: u32,
    /// Size of the next refill when the cursor stays sequential.
    next_size: usize,
    /// For a mapped log, the length of the range at `start` last asked for
    /// with `MADV_WILLNEED` (`buf` stays empty: records are served from the
    /// mapping).
    hinted: u64,
}

impl Window {
    fn holds(&self, offset: u64, end: u64) -> bool {
        let len = self.hinted.max(self.buf.len() as u64);
        offset >= self.start && end <= self.start + len
    }
}

/// Resolves value pointers for one cursor; see the module docs.
pub struct ValueReader {
    purpose: ReadPurpose,
    disk_reads: Arc<DiskReads>,
    /// Most recently used last.
    windows: Vec<Window>,
    /// `pread`s issued so far.
    reads_issued: u64,
}

impl ValueReader {
    /// A reader whose disk reads count for `purpose` in `disk_reads`.
    pub fn new(purpose: ReadPurpose, disk_reads: Arc<DiskReads>) -> Self {
        ValueReader {
            purpose,
            disk_reads,
            windows: Vec::new(),
            reads_issued: 0,
        }
    }

    /// Reads from disk issued so far (each serves one or many records):
    /// `pread`s, or for a mapped log, readahead requests.
    #[cfg(test)]
    pub fn reads_issued(&self) -> u64 {
        self.reads_issued
    }

    /// The value behind the encoded pointer `raw`, from a log of `version`.
    pub fn read(&mut self, version: &Version, raw: &[u8]) -> Result<Vec<u8>> {
        let ptr = ValuePointer::parse(raw)?;
        let log = version.value_log(&ptr)?;
        log.check_bounds(&ptr)?;
        let i = match self.windows.iter().position(|w| w.log == ptr.log) {
            Some(i) => i,
            None => {
                if self.windows.len() == MAX_LOGS {
                    self.windows.remove(0);
                }
                self.windows.push(Window {
                    log: ptr.log,
                    start: 0,
                    buf: Vec::new(),
                    last: (u64::MAX, u64::MAX),
                    streak: 0,
                    next_size: 0,
                    hinted: 0,
                });
                self.windows.len() - 1
            }
        };
        // Most recently used goes last.
        let mut w = self.windows.remove(i);
        let cap = (READAHEAD_BUDGET / (self.windows.len() + 1)).clamp(FIRST_WINDOW, MAX_WINDOW);
        let result = self.serve(&mut w, log, &ptr, cap);
        self.windows.push(w);
        result
    }

    fn serve(
        &mut self,
        w: &mut Window,
        log: &ValueLogFile,
        ptr: &ValuePointer,
        cap: usize,
    ) -> Result<Vec<u8>> {
        let (offset, end) = (ptr.offset, ptr.offset + ptr.record_size());
        let mapped = log.mapped_record(ptr);
        // A pread window holds the gaps too, but costs one read either way;
        // a mapped log is read ahead only for a dense walk.
        let near = match mapped {
            Some(_) => DENSE_GAP_RECORDS * ptr.record_size(),
            None => NEAR,
        };
        // At most one holds: the record starts after the last one ended, or
        // ends before it started.
        let forward = offset >= w.last.1 && offset - w.last.1 <= near;
        let backward = end <= w.last.0 && w.last.0 - end <= near;
        w.last = (offset, end);
        w.streak = if forward || backward { w.streak + 1 } else { 0 };
        if let Some(record) = mapped {
            // Served from the page cache; a cursor going one way through the
            // log asks the kernel to read the next window ahead of it.
            if w.streak >= STREAK && !w.holds(offset, end) {
                let record_size = ptr.record_size() as usize;
                w.next_size = match w.next_size {
                    0 => (RECORDS_AHEAD * record_size).clamp(FIRST_WINDOW, cap),
                    n => (n * 2).min(cap),
                };
                let want = record_size.max(w.next_size) as u64;
                let (start, stop) = if backward {
                    (end.saturating_sub(want), end)
                } else {
                    (offset, (offset + want).min(log.size()))
                };
                log.will_need(start, (stop - start) as usize);
                w.start = start;
                w.hinted = stop - start;
                self.reads_issued += 1;
            }
            self.disk_reads.add(self.purpose, ptr.record_size());
            return log.copy_checked(ptr, record);
        }
        if !w.holds(offset, end) {
            let record = ptr.record_size() as usize;
            w.next_size = match (w.streak >= STREAK, w.next_size) {
                (false, _) => 0,
                (true, 0) => (RECORDS_AHEAD * record).clamp(FIRST_WINDOW, cap),
                (true, n) => (n * 2).min(cap),
            };
            if w.next_size == 0 {
                // Not reading ahead: one exact read straight into the value
                // (as a get does), keeping no window.
                w.buf.clear();
                let value = log.read(ptr)?;
                self.disk_reads.add(self.purpose, ptr.record_size());
                self.reads_issued += 1;
                return Ok(value);
            }
            let want = record.max(w.next_size) as u64;
            let (start, stop) = if backward {
                (end.saturating_sub(want), end)
            } else {
                (offset, (offset + want).min(log.size()))
            };
            // Reuse the buffer (no zeroing of what it had); give back a
            // window that outgrew its share as more logs came in.
            let len = (stop - start) as usize;
            w.buf.shrink_to(cap.max(record));
            if w.buf.len() >= len {
                w.buf.truncate(len);
            } else {
                w.buf.resize(len, 0);
            }
            w.start = start;
            if let Err(e) = log.read_raw(start, &mut w.buf) {
                w.buf.clear();
                return Err(e);
            }
            self.disk_reads.add(self.purpose, stop - start);
            self.reads_issued += 1;
        }
        let at = (offset - w.start) as usize;
        let record = &w.buf[at..at + ptr.record_size() as usize];
        log.check_record(ptr, record)?;
        log.decode(ptr, record[super::value_log::HEADER..].to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::value_log::ValueLogWriter;
    use crate::store::LiveValueLog;

    fn version_with_log(
        dir: &std::path::Path,
        values: &[Vec<u8>],
        mapped: bool,
    ) -> (Version, Vec<ValuePointer>) {
        let mut w = ValueLogWriter::create(&crate::util::fs::real(), dir, 5).unwrap();
        let ptrs: Vec<_> = values.iter().map(|v| w.append(v).unwrap()).collect();
        let size = w.finish().unwrap();
        let file = if mapped {
            ValueLogFile::open(&crate::util::fs::real(), dir, 5, size).unwrap()
        } else {
            ValueLogFile::open_unmapped(&crate::util::fs::real(), dir, 5, size).unwrap()
        };
        assert_eq!(file.mapped_record(&ptrs[0]).is_some(), mapped);
        let mut v = Version::new_single();
        v.value_logs.insert(
            5,
            LiveValueLog {
                file,
                garbage: 0,
                refs: Default::default(),
                shares: Default::default(),
            },
        );
        (v, ptrs)
    }

    fn values(n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| vec![(i % 251) as u8; 300 + i % 700])
            .collect()
    }

    /// Forward, backward and random orders all return every value exactly;
    /// in order, the reader reads each byte of the log about once and in
    /// few large reads (or readahead requests, for a mapped log); at
    /// random, it reads no more than the records. Both ways of reading a
    /// log: through its mapping, and by `pread` windows (a log the kernel
    /// would not map).
    #[test]
    fn serves_values_in_any_order_and_reads_ahead_only_in_order() {
        for mapped in [true, false] {
            serves_in_any_order(mapped);
        }
    }

    fn serves_in_any_order(mapped: bool) {
        let dir = tempfile::tempdir().unwrap();
        let vals = values(2000);
        let (v, ptrs) = version_with_log(dir.path(), &vals, mapped);
        let log_size = v.value_logs[&5].file.size();
        let scan = ReadPurpose::Scan { fill_cache: true };

        for backward in [false, true] {
            let reads = Arc::new(DiskReads::default());
            let mut r = ValueReader::new(scan, reads.clone());
            let order: Vec<usize> = if backward {
                (0..vals.len()).rev().collect()
            } else {
                (0..vals.len()).collect()
            };
            for i in order {
                assert_eq!(r.read(&v, &ptrs[i].encode()).unwrap(), vals[i], "value {i}");
            }
            let (_, scanned, _) = reads.totals();
            assert!(
                scanned >= log_size && scanned < log_size + 2 * MAX_WINDOW as u64,
                "backward={backward}: read {scanned} bytes of a {log_size}-byte log"
            );
            // ~1.3 MB in windows growing to 256 KiB: a handful of reads,
            // not one per record.
            assert!(
                (1..=20).contains(&r.reads_issued()),
                "backward={backward}: {} reads for {} records",
                r.reads_issued(),
                vals.len()
            );
        }

        // Every other record skipped: still in order (gaps are NEAR).
        let reads = Arc::new(DiskReads::default());
        let mut r = ValueReader::new(scan, reads.clone());
        for i in (0..vals.len()).step_by(2) {
            assert_eq!(r.read(&v, &ptrs[i].encode()).unwrap(), vals[i]);
        }
        assert!(reads.totals().1 <= log_size + MAX_WINDOW as u64);

        // Sparse in order (every 40th record, ~25 KB apart, as one key
        // range's values among others' in a WAL): a mapped log is not read
        // ahead; a pread window still is (one read serves several).
        let reads = Arc::new(DiskReads::default());
        let mut r = ValueReader::new(scan, reads.clone());
        let sparse: Vec<usize> = (0..vals.len()).step_by(40).collect();
        for &i in &sparse {
            assert_eq!(r.read(&v, &ptrs[i].encode()).unwrap(), vals[i]);
        }
        if mapped {
            assert_eq!(r.reads_issued(), 0, "a sparse walk asked for readahead");
            let exact: u64 = sparse.iter().map(|&i| ptrs[i].record_size()).sum();
            assert_eq!(reads.totals().1, exact);
        }

        // Far jumps: each read is exact.
        let reads = Arc::new(DiskReads::default());
        let mut r = ValueReader::new(scan, reads.clone());
        let mut expect = 0;
        for k in 0..200usize {
            let i = (k * 997) % vals.len(); // ±~1000 records: far apart
            assert_eq!(r.read(&v, &ptrs[i].encode()).unwrap(), vals[i]);
            expect += ptrs[i].record_size();
        }
        let (_, scanned, _) = reads.totals();
        assert!(
            scanned <= expect + (MAX_WINDOW as u64) * 20,
            "{scanned} vs {expect}"
        );
    }

    /// A flipped byte inside a window is caught when the record it belongs
    /// to is served, and the records around it still read correctly.
    #[test]
    fn corruption_inside_a_window_is_reported_for_its_record_only() {
        for mapped in [true, false] {
            corruption_for_its_record_only(mapped);
        }
    }

    fn corruption_for_its_record_only(mapped: bool) {
        let dir = tempfile::tempdir().unwrap();
        let vals = values(200);
        let (v, ptrs) = version_with_log(dir.path(), &vals, mapped);
        drop(v);
        let path = crate::filename::value_log_path(dir.path(), 5);
        let mut bytes = std::fs::read(&path).unwrap();
        let victim = 100;
        bytes[(ptrs[victim].offset + 20) as usize] ^= 0x10;
        std::fs::write(&path, &bytes).unwrap();
        let mut v = Version::new_single();
        v.value_logs.insert(
            5,
            LiveValueLog {
                file: if mapped {
                    ValueLogFile::open(&crate::util::fs::real(), dir.path(), 5, bytes.len() as u64)
                        .unwrap()
                } else {
                    ValueLogFile::open_unmapped(
                        &crate::util::fs::real(),
                        dir.path(),
                        5,
                        bytes.len() as u64,
                    )
                    .unwrap()
                },
                garbage: 0,
                refs: Default::default(),
                shares: Default::default(),
            },
        );
        let mut r = ValueReader::new(
            ReadPurpose::Scan { fill_cache: true },
            Arc::new(DiskReads::default()),
        );
        for (i, p) in ptrs.iter().enumerate() {
            let got = r.read(&v, &p.encode());
            if i == victim {
                let e = got.unwrap_err();
                assert!(e.is_corruption(), "{e}");
            } else {
                assert_eq!(got.unwrap(), vals[i], "value {i}");
            }
        }
    }
}
