//! The log's tests: framing, torn tails and corruption, deferred and
//! mapped writers, lost pages.

use std::path::Path;

use super::format::{encode_header, page_end, payload_len, HEADER_SIZE, LOST_PAGE};
use super::writer::MAX_DEFERRED;
use super::*;
use crate::error::Error;

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
        let mut r = LogReader::open_prefix(&*crate::util::fs::real(), &path, limit).unwrap();
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
    let mut w = LogWriter::create(&*crate::util::fs::real(), path).unwrap();
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
    let mut r = LogReader::open(&*crate::util::fs::real(), path).unwrap();
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
    let mut w = LogWriter::create(&*crate::util::fs::real(), &path).unwrap();
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
fn header_layout() {
    let h = encode_header(b"abc").unwrap();
    assert_eq!(&h[4..], &3u32.to_le_bytes());
    let mut data = 3u32.to_le_bytes().to_vec();
    data.extend_from_slice(b"abc");
    let crc = crc32c::crc32c(&data);
    assert_eq!(&h[..4], &crate::util::crc::mask(crc).to_le_bytes());
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
    LogWriter::create(&*crate::util::fs::real(), &path).unwrap();
    let (recs, end) = read_all(&path);
    assert!(recs.is_empty());
    assert_eq!(end, LogRead::End);
}

#[test]
fn create_truncates() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.log");
    write_log(&path, &[b"old".to_vec()]);
    let w = LogWriter::create(&*crate::util::fs::real(), &path).unwrap();
    assert_eq!(w.size(), 0);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
}

#[test]
fn open_missing_is_io_error_naming_file() {
    let dir = tempfile::tempdir().unwrap();
    let err = LogReader::open(&*crate::util::fs::real(), &dir.path().join("nope.log"))
        .err()
        .unwrap();
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
    let mut w = LogWriter::create(&*crate::util::fs::real(), &path).unwrap();
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
    let mut r = LogReader::open(&*crate::util::fs::real(), &path).unwrap();
    assert_eq!(r.offset(), 0);
    r.read().unwrap();
    assert_eq!(r.offset(), 11);
    r.read().unwrap();
    assert_eq!(r.offset(), 19);
    assert_eq!(r.read().unwrap(), LogRead::End);
    assert_eq!(r.offset(), 19);
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
    let mut w = LogWriter::create_mapped(&*crate::util::fs::real(), &path).unwrap();
    assert!(w.is_mapped(), "this file system cannot reserve blocks");
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
    let mut w = LogWriter::create_mapped(&*crate::util::fs::real(), &path).unwrap();
    assert!(w.is_mapped(), "this file system cannot reserve blocks");
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
    let mut w = LogWriter::create_mapped(&*crate::util::fs::real(), &path).unwrap();
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
    let mut r = LogReader::open(&*crate::util::fs::real(), path)
        .unwrap()
        .with_lost_pages();
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
