//! Manifest edits (`manifest.rs`): the edit decoder, the replay that
//! applies edits, and the manifest file as recovery reads it.

use std::path::Path;

use bolero::generator::TypeGenerator;
use weft::internals::fuzz::{
    apply_edits, decode_version_edit, encode_version_edit, frame_record, internal_key,
    manifest_files, recover_manifest, FileMeta, Placement, RangeTombstone, RetainedWal,
    StoredRangeTombstone, ValueKind, VersionEdit,
};
use weft::Error;

use crate::harness::{chunks, ok_or_corruption, scratch, Mutation};
use crate::{fuzz_bytes, fuzz_typed};

const MANIFEST: &str = "MANIFEST-000003";

/// A generated table of an edit (small numbers, so edits refer to each
/// other's partitions and tables).
#[derive(Debug, Clone, TypeGenerator)]
pub struct GenFile {
    partition: u8,
    sorted: bool,
    number: u16,
    size: u64,
    entries: u64,
    #[generator(bolero::produce::<Vec<u8>>().with().len(0usize..=6))]
    smallest: Vec<u8>,
    #[generator(bolero::produce::<Vec<u8>>().with().len(0usize..=6))]
    largest: Vec<u8>,
    seq: u64,
}

/// A generated edit; see [`GenEdit::edit`].
#[derive(Debug, Clone, TypeGenerator)]
pub struct GenEdit {
    format_version: Option<u8>,
    log_number: Option<u64>,
    next_file_number: Option<u64>,
    last_sequence: Option<u64>,
    #[generator(bolero::produce::<Vec<_>>().with().len(0usize..=3))]
    new_partitions: Vec<(u8, Vec<u8>, Option<Vec<u8>>)>,
    #[generator(bolero::produce::<Vec<_>>().with().len(0usize..=2))]
    removed_partitions: Vec<u8>,
    #[generator(bolero::produce::<Vec<_>>().with().len(0usize..=3))]
    added_files: Vec<GenFile>,
    #[generator(bolero::produce::<Vec<_>>().with().len(0usize..=2))]
    removed_files: Vec<(u8, u16)>,
    #[generator(bolero::produce::<Vec<_>>().with().len(0usize..=2))]
    added_value_logs: Vec<(u8, u16, u64)>,
    #[generator(bolero::produce::<Vec<_>>().with().len(0usize..=2))]
    dropped_value_logs: Vec<(u8, u16)>,
    #[generator(bolero::produce::<Vec<_>>().with().len(0usize..=2))]
    value_log_garbage: Vec<(u16, u64)>,
    #[generator(bolero::produce::<Vec<_>>().with().len(0usize..=2))]
    index_checkpoints: Vec<(u8, u16)>,
    /// Retained WALs: number, size, first and last sequence.
    #[generator(bolero::produce::<Vec<_>>().with().len(0usize..=2))]
    retained_wals: Vec<(u16, u64, u64, u64)>,
    /// Holds set, named by a small index.
    #[generator(bolero::produce::<Vec<_>>().with().len(0usize..=2))]
    holds: Vec<(u8, u64)>,
    #[generator(bolero::produce::<Vec<_>>().with().len(0usize..=2))]
    dropped_holds: Vec<u8>,
    /// Range tombstones: sequence, start, what the end adds to the start
    /// (so the range is never empty), pending partitions.
    #[generator(bolero::produce::<Vec<_>>().with().len(0usize..=2))]
    range_tombstones: Vec<(u8, Vec<u8>, u8, Vec<u8>)>,
}

impl GenEdit {
    pub fn edit(&self) -> VersionEdit {
        let p = |x: u8| u64::from(x % 4);
        let n = |x: u16| u64::from(x % 64);
        let hold = |x: u8| format!("hold-{}", x % 3);
        VersionEdit {
            format_version: self.format_version.map(|v| u64::from(v % 3)),
            log_number: self.log_number,
            next_file_number: self.next_file_number,
            last_sequence: self.last_sequence,
            new_partitions: (self.new_partitions.iter())
                .map(|(id, l, u)| (p(*id), l.clone(), u.clone()))
                .collect(),
            removed_partitions: self.removed_partitions.iter().map(|x| p(*x)).collect(),
            added_files: (self.added_files.iter())
                .map(|f| {
                    let placement = if f.sorted {
                        Placement::Sorted
                    } else {
                        Placement::Unsorted
                    };
                    let seq = f.seq & ((1 << 56) - 1);
                    let meta = FileMeta {
                        number: n(f.number),
                        size: f.size,
                        entries: f.entries,
                        smallest: internal_key(&f.smallest, seq, ValueKind::Put),
                        largest: internal_key(&f.largest, seq, ValueKind::Delete),
                    };
                    (p(f.partition), placement, meta)
                })
                .collect(),
            removed_files: (self.removed_files.iter())
                .map(|(a, b)| (p(*a), n(*b)))
                .collect(),
            added_value_logs: (self.added_value_logs.iter())
                .map(|(a, b, s)| (p(*a), n(*b), *s))
                .collect(),
            dropped_value_logs: (self.dropped_value_logs.iter())
                .map(|(a, b)| (p(*a), n(*b)))
                .collect(),
            value_log_garbage: (self.value_log_garbage.iter())
                .map(|(a, s)| (n(*a), *s))
                .collect(),
            index_checkpoints: (self.index_checkpoints.iter())
                .map(|(a, b)| (p(*a), n(*b)))
                .collect(),
            retained_wals: (self.retained_wals.iter())
                .map(|(a, size, first_seq, last_seq)| {
                    let w = RetainedWal {
                        size: *size,
                        first_seq: *first_seq,
                        last_seq: *last_seq,
                    };
                    (n(*a), w)
                })
                .collect(),
            holds: (self.holds.iter())
                .map(|(h, seq)| (hold(*h), *seq))
                .collect(),
            dropped_holds: self.dropped_holds.iter().map(|h| hold(*h)).collect(),
            range_tombstones: (self.range_tombstones.iter())
                .map(|(seq, start, more, pending)| {
                    let mut end = start.clone();
                    end.push(*more);
                    StoredRangeTombstone {
                        tombstone: RangeTombstone {
                            start: start.clone(),
                            end,
                            seq: u64::from(*seq),
                        },
                        pending: pending.iter().map(|x| p(*x)).collect(),
                    }
                })
                .collect(),
        }
    }
}

/// Any payload decodes to an edit or is corruption; an edit that decodes
/// round-trips, and replaying it is a state or corruption.
fn check_edit_payload(payload: &[u8]) -> Option<VersionEdit> {
    let path = Path::new(MANIFEST);
    let e = ok_or_corruption(decode_version_edit(path, 0, payload))?;
    assert_eq!(
        decode_version_edit(path, 0, &encode_version_edit(&e)).unwrap(),
        e
    );
    ok_or_corruption(apply_edits(path, std::slice::from_ref(&e)));
    Some(e)
}

/// Recovery from a manifest of these bytes: a state, corruption, or (a
/// format version past this build's) `Unsupported`.
fn check_manifest_file(dir: &Path, bytes: &[u8]) {
    let (path, current) = manifest_files(dir, 3);
    std::fs::write(path, bytes).unwrap();
    std::fs::write(weft::internals::current_path(dir), current).unwrap();
    match recover_manifest(dir) {
        Ok(_) => {}
        Err(Error::Unsupported { .. }) => {}
        Err(e) => crate::harness::must_be_corruption(&e),
    }
}

#[test]
fn manifest_edit() {
    fuzz_bytes!("manifest_edit", |input: &[u8]| {
        check_edit_payload(input);
    });
}

#[test]
fn manifest_edit_round_trip() {
    fuzz_typed!(
        "manifest_edit_round_trip",
        (Vec<GenEdit>, Mutation),
        |(edits, mutation): &(Vec<GenEdit>, Mutation)| {
            let path = Path::new(MANIFEST);
            let edits: Vec<VersionEdit> = edits.iter().map(GenEdit::edit).collect();
            for e in &edits {
                let enc = encode_version_edit(e);
                assert_eq!(&decode_version_edit(path, 0, &enc).unwrap(), e);
                let mut bad = enc;
                if mutation.apply(&mut bad) {
                    check_edit_payload(&bad);
                }
            }
            // Generated edits refer to each other's partitions, tables and
            // logs: replay reaches every consistency check.
            ok_or_corruption(apply_edits(path, &edits));
        }
    );
}

#[test]
fn manifest_file() {
    let dir = scratch();
    fuzz_bytes!("manifest_file", |input: &[u8]| check_manifest_file(
        dir.path(),
        input
    ));
}

/// Payloads behind valid checksums: edits as recovery decodes and replays
/// them.
#[test]
fn manifest_records() {
    let dir = scratch();
    fuzz_bytes!("manifest_records", |input: &[u8]| {
        let mut bytes = Vec::new();
        for c in chunks(input) {
            bytes.extend(frame_record(&c).unwrap());
        }
        check_manifest_file(dir.path(), &bytes);
    });
}
