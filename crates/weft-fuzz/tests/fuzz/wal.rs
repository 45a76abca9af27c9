//! The write-ahead log: record framing (`wal::reader`) and the write
//! batches it carries (`batch.rs`).

use std::path::Path;

use bolero::generator::TypeGenerator;
use weft::internals::fuzz::{
    decode_write_batch, encode_logged_write_batch, encode_write_batch, frame_record, read_log,
    recover_wal, write_log, BatchOp, LogRead, OpKind,
};

use weft::Compression;

use crate::harness::{chunks, ok_or_corruption, scratch, Mutation};
use crate::{fuzz_bytes, fuzz_typed};

const WAL: &str = "000007.log";

/// A generated batch operation.
#[derive(Debug, Clone, TypeGenerator)]
pub struct Op {
    put: bool,
    /// A delete of the range from the key to the value.
    range: bool,
    #[generator(bolero::produce::<Vec<u8>>().with().len(0usize..=12))]
    key: Vec<u8>,
    #[generator(bolero::produce::<Vec<u8>>().with().len(0usize..=40))]
    value: Vec<u8>,
}

/// A generated batch.
#[derive(Debug, Clone, TypeGenerator)]
pub struct Batch {
    seq: u64,
    #[generator(bolero::produce::<Vec<Op>>().with().len(0usize..=8))]
    ops: Vec<Op>,
    /// How puts are encoded: plain; logged; logged and compressed (LZ4,
    /// zstd) where that pays, as the write path re-encodes a batch.
    encoding: u8,
    /// Values repeated eight times, so that compression pays.
    stretch: bool,
}

impl Batch {
    pub fn ops(&self) -> Vec<BatchOp> {
        self.ops
            .iter()
            .map(|o| {
                if o.put {
                    let value = if self.stretch {
                        o.value.repeat(8)
                    } else {
                        o.value.clone()
                    };
                    (OpKind::Put, o.key.clone(), value)
                } else if o.range {
                    (OpKind::DeleteRange, o.key.clone(), o.value.clone())
                } else {
                    (OpKind::Delete, o.key.clone(), Vec::new())
                }
            })
            .collect()
    }

    pub fn encode(&self) -> Vec<u8> {
        match self.encoding % 4 {
            0 => encode_write_batch(self.seq, &self.ops()),
            n => {
                let compression =
                    [Compression::None, Compression::Lz4, Compression::ZSTD][usize::from(n - 1)];
                encode_logged_write_batch(self.seq, &self.ops(), 0, compression)
            }
        }
    }
}

/// Any payload decodes to a batch or is corruption; a batch that decodes
/// re-encodes to one that decodes the same.
fn check_batch_payload(payload: &[u8]) {
    let path = Path::new(WAL);
    if let Some((seq, ops)) = ok_or_corruption(decode_write_batch(path, 0, payload.to_vec())) {
        let again = encode_write_batch(seq, &ops);
        assert_eq!(
            decode_write_batch(path, 0, again).unwrap(),
            (seq, ops),
            "a decoded batch does not survive re-encoding"
        );
    }
}

#[test]
fn write_batch() {
    fuzz_bytes!("write_batch", |input: &[u8]| check_batch_payload(input));
}

#[test]
fn write_batch_round_trip() {
    fuzz_typed!("write_batch_round_trip", (Batch, Mutation), |(
        batch,
        mutation,
    ): &(
        Batch,
        Mutation
    )| {
        let path = Path::new(WAL);
        let want = (batch.seq, batch.ops());
        let enc = batch.encode();
        assert_eq!(decode_write_batch(path, 0, enc.clone()).unwrap(), want);
        let mut bad = enc.clone();
        if !mutation.apply(&mut bad) {
            return;
        }
        // The encoding is injective: a changed encoding never decodes
        // to the original batch (bytes the decoder skips would).
        if let Some(got) = ok_or_corruption(decode_write_batch(path, 0, bad)) {
            assert_ne!(got, want, "{mutation:?} went unnoticed");
        }
    });
}

/// Reads a WAL file both ways: as recovery does (every record a batch, a
/// torn tail ends it) and as the manifest's reader does; the records that
/// verify tile the file from its start, each exactly as framed.
fn check_log_file(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
    ok_or_corruption(recover_wal(path));
    for lost_pages in [false, true] {
        let (records, end) = read_log(path, lost_pages).unwrap();
        let mut at = 0u64;
        for (offset, payload) in &records {
            assert_eq!(*offset, at, "records do not tile the log");
            let framed = frame_record(payload).unwrap();
            let i = at as usize;
            assert_eq!(&bytes[i..i + framed.len()], &framed[..]);
            at += framed.len() as u64;
        }
        match end {
            LogRead::End => assert!(bytes[at as usize..].iter().all(|&b| b == 0)),
            LogRead::Bad { offset, .. } => assert_eq!(offset, at),
            LogRead::Record { .. } => unreachable!(),
        }
    }
}

#[test]
fn wal_file() {
    let dir = scratch();
    let path = dir.path().join(WAL);
    fuzz_bytes!("wal_file", |input: &[u8]| check_log_file(&path, input));
}

/// Payloads behind valid checksums: the batch decoder as recovery meets it.
#[test]
fn wal_records() {
    let dir = scratch();
    let path = dir.path().join(WAL);
    fuzz_bytes!("wal_records", |input: &[u8]| {
        let mut bytes = Vec::new();
        for c in chunks(input) {
            bytes.extend(frame_record(&c).unwrap());
        }
        check_log_file(&path, &bytes);
        for c in chunks(input) {
            check_batch_payload(&c);
        }
    });
}

#[test]
fn wal_round_trip() {
    let dir = scratch();
    let path = dir.path().join(WAL);
    fuzz_typed!("wal_round_trip", (Vec<Batch>, Mutation), |(
        batches,
        mutation,
    ): &(
        Vec<Batch>,
        Mutation
    )| {
        let payloads: Vec<Vec<u8>> = batches.iter().map(Batch::encode).collect();
        let _ = std::fs::remove_file(&path);
        write_log(&path, &payloads).unwrap();
        let want: Vec<_> = batches.iter().map(|b| (b.seq, b.ops())).collect();
        assert_eq!(recover_wal(&path).unwrap(), want);
        let mut bytes = std::fs::read(&path).unwrap();
        if !mutation.apply(&mut bytes) {
            return;
        }
        check_log_file(&path, &bytes);
        // Whatever recovery keeps is a prefix of what was written.
        if let Some(got) = ok_or_corruption(recover_wal(&path)) {
            assert!(got.len() <= want.len() && got[..] == want[..got.len()]);
            // A flipped byte in a record with records behind it is
            // corruption — a flipped *length* too, whose record then ends
            // past the end of the file or where only zeros follow
            // (`regressions::wal_length_flip_into_trailing_zeros_is_not_corruption`):
            // recovery finds the batch whole under its checksum.
            if let Mutation::Flip { .. } = *mutation {
                if got.len() + 1 < want.len() {
                    let (_, end) = read_log(&path, true).unwrap();
                    assert!(
                        matches!(end, LogRead::End),
                        "{mutation:?} dropped synced records as a torn tail: {end:?}"
                    );
                }
            }
        }
    });
}
