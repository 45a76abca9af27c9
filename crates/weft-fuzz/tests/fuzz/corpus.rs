//! Writes the seed corpora of the byte targets from the engine's own
//! encoders, so every target starts from valid encodings and reaches the
//! code past the first checksum. Run by hand after a format change:
//! `cargo test -p weft-fuzz --release -- --ignored seed_corpus`.

use std::path::Path;

use weft::internals::fuzz::{
    build_table, encode_block, encode_filter, encode_stats_file, encode_version_edit,
    encode_write_batch, internal_key, write_log, write_value_log, FileMeta, HashIndex, LogLink,
    OpKind, Placement, ValueKind, VersionEdit, STORE_FORMAT_VERSION,
};

fn corpus(target: &str) -> std::path::PathBuf {
    let d = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/__fuzz__")
        .join(target)
        .join("corpus");
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(target: &str, name: &str, bytes: &[u8]) {
    std::fs::write(corpus(target).join(name), bytes).unwrap();
}

/// Length-prefixed chunks, as the `*_records` targets read their input.
fn chunked(payloads: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in payloads {
        out.push(p.len().min(255) as u8);
        out.extend_from_slice(&p[..p.len().min(255)]);
    }
    out
}

fn batches() -> Vec<Vec<u8>> {
    vec![
        encode_write_batch(1, &[(OpKind::Put, b"key".to_vec(), b"value".to_vec())]),
        encode_write_batch(
            2,
            &[
                (OpKind::Put, b"a".to_vec(), vec![7; 130]),
                (OpKind::Delete, b"b".to_vec(), Vec::new()),
                (OpKind::Put, Vec::new(), Vec::new()),
            ],
        ),
        encode_write_batch(5, &[]),
    ]
}

fn edits() -> Vec<VersionEdit> {
    let meta = |n: u64| FileMeta {
        number: n,
        size: 4096,
        entries: 10,
        smallest: internal_key(b"a", 5, ValueKind::Put),
        largest: internal_key(b"m", 1, ValueKind::Delete),
    };
    vec![
        VersionEdit {
            format_version: Some(STORE_FORMAT_VERSION),
            log_number: Some(4),
            next_file_number: Some(20),
            last_sequence: Some(100),
            new_partitions: vec![
                (0, Vec::new(), Some(b"m".to_vec())),
                (1, b"m".to_vec(), None),
            ],
            added_files: vec![
                (0, Placement::Unsorted, meta(7)),
                (1, Placement::Sorted, meta(8)),
            ],
            added_value_logs: vec![(1, 9, 5000)],
            index_checkpoints: vec![(0, 10)],
            ..Default::default()
        },
        VersionEdit {
            removed_files: vec![(0, 7)],
            value_log_garbage: vec![(9, 100)],
            added_files: vec![(0, Placement::Unsorted, meta(11))],
            ..Default::default()
        },
        VersionEdit {
            dropped_value_logs: vec![(1, 9)],
            removed_partitions: vec![1],
            ..Default::default()
        },
    ]
}

#[test]
#[ignore]
fn write_seed_corpus() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();

    // WAL.
    let batches = batches();
    for (i, b) in batches.iter().enumerate() {
        write("write_batch", &format!("batch{i}"), b);
    }
    // A WAL started by a rotation begins with a link to the previous one.
    let mut records = vec![LogLink {
        previous: 6,
        previous_size: 4096,
    }
    .encode()];
    records.extend(batches.iter().cloned());
    write_log(&dir.join("w.log"), &records).unwrap();
    write(
        "wal_file",
        "log",
        &std::fs::read(dir.join("w.log")).unwrap(),
    );
    write("wal_records", "batches", &chunked(&records));

    // Manifest.
    let edits: Vec<Vec<u8>> = edits().iter().map(encode_version_edit).collect();
    for (i, e) in edits.iter().enumerate() {
        write("manifest_edit", &format!("edit{i}"), e);
    }
    write_log(&dir.join("m"), &edits).unwrap();
    write(
        "manifest_file",
        "manifest",
        &std::fs::read(dir.join("m")).unwrap(),
    );
    write("manifest_records", "edits", &chunked(&edits));

    // Tables: a few entries over several small blocks, with a filter.
    let entries: Vec<_> = (0..12u64)
        .map(|i| {
            let kind = if i % 5 == 4 {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            let value = if kind == ValueKind::Put {
                format!("value{i}").into_bytes()
            } else {
                Vec::new()
            };
            (format!("k{:02}", i / 2).into_bytes(), 100 - i, kind, value)
        })
        .collect();
    for (name, bloom) in [("with_filter", 10), ("no_filter", 0)] {
        let path = dir.join(format!("{name}.sst"));
        build_table(&path, &entries, 64, 2, bloom, weft::Compression::None).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        write("table_file", name, &bytes);
        let mut footer = bytes[bytes.len() - 56..].to_vec();
        footer.extend_from_slice(&((bytes.len() - 56) as u64).to_le_bytes());
        footer.push(1);
        write("table_footer", name, &footer);
    }
    let kv: Vec<(Vec<u8>, Vec<u8>)> = entries
        .iter()
        .map(|(k, s, kind, v)| (internal_key(k, *s, *kind), v.clone()))
        .collect();
    write("table_block", "restart1", &encode_block(&kv[..6], 1));
    write("table_block", "restart4", &encode_block(&kv, 4));
    let keys: Vec<Vec<u8>> = entries.iter().map(|e| e.0.clone()).collect();
    write("table_filter", "bits10", &encode_filter(&keys, 10));
    write("table_filter", "bits3", &encode_filter(&keys[..3], 3));

    // Value logs.
    let values = vec![b"v1".to_vec(), vec![9; 100], Vec::new(), b"last".to_vec()];
    let (ptrs, _) = write_value_log(dir, 11, &values, weft::Compression::None).unwrap();
    let mut log = std::fs::read(weft::internals::fuzz::value_log_path(dir, 11)).unwrap();
    write("value_log_file", "log", &log);
    log.extend_from_slice(&[0xff, 0xff]);
    log.extend(ptrs[1].encode());
    write("value_log_file", "log_and_pointer", &log);
    write("value_pointer", "pointer", &ptrs[1].encode());

    // Hash-index checkpoints.
    let mut ix = HashIndex::with_capacity(16);
    for t in 0..4u64 {
        let keys: Vec<Vec<u8>> = (0..8)
            .map(|k| format!("key{}", k * t).into_bytes())
            .collect();
        ix.add_table(t + 3, keys.iter().map(Vec::as_slice)).unwrap();
    }
    write("hash_index_checkpoint", "four_tables", &ix.encode());
    ix.remove_tables(&[4]);
    write("hash_index_checkpoint", "removed", &ix.encode());

    // Lifetime counters.
    let counts: std::collections::BTreeMap<String, u64> = [
        ("opens", 3),
        ("flushes", 17),
        ("jobs.merge.running_nanos", 123_456_789),
        ("reads.misses", u64::MAX),
        ("a counter of a later build", 1),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    write("stats_file", "clean", &encode_stats_file(true, &counts));
    write(
        "stats_file",
        "empty",
        &encode_stats_file(false, &Default::default()),
    );
}
