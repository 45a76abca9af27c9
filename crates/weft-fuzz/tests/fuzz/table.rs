//! Tables (`table/`): whole files as the reader opens them, and the
//! pieces behind their checksums — blocks (data and index), the Bloom
//! filter and the footer.

use std::path::Path;

use bolero::generator::TypeGenerator;
use weft::internals::fuzz::{
    build_table, check_block_trailer, compare_internal_keys, decode_footer, encode_block,
    encode_filter, internal_key, is_internal_key, query_filter, read_block, read_table,
    reseal_footer, seal_block, seal_typed_block, BlockHandle, Footer, TableEntry, ValueKind,
    FOOTER_SIZE, MAX_SEQUENCE,
};

use weft::Compression;

use crate::harness::{ok_or_corruption, scratch, Mutation};
use crate::{fuzz_bytes, fuzz_typed};

const SST: &str = "000009.sst";

/// Generated entries, put into internal order by [`entries`].
#[derive(Debug, Clone, TypeGenerator)]
pub struct GenEntry {
    #[generator(bolero::produce::<Vec<u8>>().with().len(0usize..=6))]
    key: Vec<u8>,
    seq: u64,
    put: bool,
    #[generator(bolero::produce::<Vec<u8>>().with().len(0usize..=48))]
    value: Vec<u8>,
}

/// Table shape: small blocks so a few entries make several.
#[derive(Debug, Clone, TypeGenerator)]
pub struct Shape {
    block_size: u8,
    restart_interval: u8,
    bloom_bits: u8,
    compression: u8,
}

impl Shape {
    fn compression(&self) -> Compression {
        [Compression::None, Compression::Lz4, Compression::ZSTD][usize::from(self.compression % 3)]
    }
}

fn entries(gen: &[GenEntry]) -> Vec<TableEntry> {
    let mut v: Vec<TableEntry> = gen
        .iter()
        .map(|e| {
            let kind = if e.put {
                ValueKind::Put
            } else {
                ValueKind::Delete
            };
            let value = if e.put { e.value.clone() } else { Vec::new() };
            (e.key.clone(), e.seq & MAX_SEQUENCE, kind, value)
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    v.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    v
}

/// Keys to probe with: every user key of `entries`, and some around them.
fn probes(entries: &[TableEntry]) -> Vec<Vec<u8>> {
    let mut p: Vec<Vec<u8>> = entries.iter().map(|e| e.0.clone()).collect();
    p.dedup();
    p.extend([Vec::new(), vec![0], vec![0x80], vec![0xff; 7]]);
    p
}

/// Reads a table both ways (mapped, through the cache): each is a full
/// read or corruption, and they agree; and the scans agree with each
/// other where every checksum guarded the bytes (see [`check_table_by`]).
fn check_table(
    path: &Path,
    size: u64,
    probes: &[Vec<u8>],
) -> Option<weft::internals::fuzz::TableRead> {
    check_table_by(path, size, probes, true)
}

/// [`check_table`]; `scans_agree: false` for damage resealed behind a
/// checksum. The block reader does not check that a restart array starts
/// at 0 and increases (only that its points lie inside the block): a
/// block whose restart array is damaged behind a valid checksum (a
/// writer bug or a checksum collision, never a bit flip) reads without a
/// panic or an error, but its forward and backward scans can see
/// different entries (the fuzzing journal, 2026-11-27).
fn check_table_by(
    path: &Path,
    size: u64,
    probes: &[Vec<u8>],
    scans_agree: bool,
) -> Option<weft::internals::fuzz::TableRead> {
    let mapped = ok_or_corruption(read_table(path, size, true, probes, 4096));
    let cached = ok_or_corruption(read_table(path, size, false, probes, 4096));
    assert_eq!(mapped, cached, "mapped and cached reads disagree");
    if let Some(r) = &mapped {
        let mut back = r.backward.clone();
        back.reverse();
        if scans_agree && r.forward.len() < 4096 {
            assert_eq!(r.forward, back, "forward and backward scans disagree");
        }
    }
    mapped
}

#[test]
fn table_file() {
    let dir = scratch();
    let path = dir.path().join(SST);
    fuzz_bytes!("table_file", |input: &[u8]| {
        std::fs::write(&path, input).unwrap();
        check_table(&path, input.len() as u64, &[b"a".to_vec(), Vec::new()]);
    });
}

#[test]
fn table_round_trip() {
    let dir = scratch();
    let path = dir.path().join(SST);
    fuzz_typed!(
        "table_round_trip",
        (Vec<GenEntry>, Shape, Mutation),
        |(gen, shape, mutation): &(Vec<GenEntry>, Shape, Mutation)| {
            let want = entries(gen);
            if want.is_empty() {
                return;
            }
            let _ = std::fs::remove_file(&path);
            let size = build_table(
                &path,
                &want,
                usize::from(shape.block_size) * 4 + 1,
                usize::from(shape.restart_interval % 17) + 1,
                usize::from(shape.bloom_bits % 24),
                shape.compression(),
            )
            .unwrap();
            let probes = probes(&want);
            let clean = check_table(&path, size, &probes).expect("a fresh table reads back");
            assert_eq!(clean.forward, want);
            for (p, got) in probes.iter().zip(&clean.gets) {
                let newest = want.iter().find(|e| &e.0 == p);
                assert_eq!(
                    got.as_ref(),
                    newest.map(|e| (e.1, e.2, e.3.clone())).as_ref(),
                    "get {p:?}"
                );
            }
            // Damage: corruption, or exactly the original contents.
            let mut bytes = std::fs::read(&path).unwrap();
            if mutation.apply(&mut bytes) {
                std::fs::write(&path, &bytes).unwrap();
                if let Some(got) = check_table(&path, bytes.len() as u64, &probes) {
                    assert_eq!(got, clean, "{mutation:?} changed what the table reads");
                }
            }
        }
    );
}

/// The blocks of a valid table, found through its footer and index:
/// (handle, is the index).
fn blocks_of(path: &Path, bytes: &[u8]) -> Vec<(BlockHandle, bool)> {
    let footer_at = bytes.len() - FOOTER_SIZE;
    let raw: [u8; FOOTER_SIZE] = bytes[footer_at..].try_into().unwrap();
    let footer = decode_footer(path, &raw, footer_at as u64).unwrap();
    let index = footer.index;
    let contents = bytes[index.offset as usize..(index.offset + index.size) as usize].to_vec();
    let read = read_block(path, contents, &[]).unwrap();
    let mut out: Vec<(BlockHandle, bool)> = (read.forward.iter())
        .map(|(_, v)| (BlockHandle::decode(v).unwrap(), false))
        .collect();
    out.extend(footer.filter.map(|f| (f, false)));
    out.push((index, true));
    out
}

/// Damage *behind* the checksums: a block's contents (data, filter or
/// index) or the footer's fields are changed and the checksum recomputed,
/// so the table reader's parsers meet the damage.
#[test]
fn table_resealed() {
    let dir = scratch();
    let path = dir.path().join(SST);
    fuzz_typed!(
        "table_resealed",
        (Vec<GenEntry>, Shape, u8, Vec<Mutation>),
        |(gen, shape, pick, mutations): &(Vec<GenEntry>, Shape, u8, Vec<Mutation>)| {
            let want = entries(gen);
            if want.is_empty() {
                return;
            }
            let _ = std::fs::remove_file(&path);
            build_table(
                &path,
                &want,
                usize::from(shape.block_size) * 4 + 1,
                usize::from(shape.restart_interval % 17) + 1,
                usize::from(shape.bloom_bits % 24),
                shape.compression(),
            )
            .unwrap();
            let bytes = std::fs::read(&path).unwrap();
            let blocks = blocks_of(&path, &bytes);
            let choice = usize::from(*pick) % (blocks.len() + 1);
            let out = if choice == blocks.len() {
                // The footer.
                let at = bytes.len() - FOOTER_SIZE;
                let mut raw = bytes[at..].to_vec();
                for m in mutations
                    .iter()
                    .filter(|m| !matches!(m, Mutation::Truncate { .. } | Mutation::Append(_)))
                {
                    m.apply(&mut raw);
                }
                let mut raw: [u8; FOOTER_SIZE] = raw.try_into().unwrap();
                reseal_footer(&mut raw);
                let mut out = bytes[..at].to_vec();
                out.extend_from_slice(&raw);
                out
            } else {
                // A block: its contents change size freely, the blocks
                // after it move, and the handles pointing at them do not.
                let (h, _) = blocks[choice];
                let (start, end) = (h.offset as usize, (h.offset + h.size) as usize);
                let mut contents = bytes[start..end].to_vec();
                for m in mutations {
                    m.apply(&mut contents);
                }
                let mut out = bytes[..start].to_vec();
                // Resealed with its own type: a compressed block's damage
                // reaches the decompressor.
                out.extend(seal_typed_block(&contents, bytes[end]));
                out.extend_from_slice(&bytes[end + 5..]);
                out
            };
            std::fs::write(&path, &out).unwrap();
            check_table_by(&path, out.len() as u64, &probes(&want), false);
        }
    );
}

/// Probe keys for a block: internal keys around the ones it holds.
fn block_probes(keys: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut p: Vec<Vec<u8>> = keys.to_vec();
    p.push(internal_key(b"", MAX_SEQUENCE, ValueKind::Put));
    p.push(internal_key(b"\xff\xff", 0, ValueKind::Delete));
    p.push(internal_key(b"m", 5, ValueKind::Put));
    p
}

#[test]
fn table_block() {
    fuzz_bytes!("table_block", |input: &[u8]| {
        let path = Path::new(SST);
        ok_or_corruption(read_block(path, input.to_vec(), &block_probes(&[])));
        // The same bytes as a block with its trailer, and sealed.
        ok_or_corruption(check_block_trailer(path, input));
        let sealed = seal_block(input);
        assert_eq!(check_block_trailer(path, &sealed).unwrap(), input.len());
        // Index values: a handle, or nothing.
        if let Some(h) = BlockHandle::decode(input) {
            let mut again = Vec::new();
            h.encode_to(&mut again);
            assert_eq!(BlockHandle::decode(&again), Some(h));
        }
    });
}

#[test]
fn table_block_round_trip() {
    fuzz_typed!(
        "table_block_round_trip",
        (Vec<GenEntry>, u8, Vec<Mutation>),
        |(gen, restart, mutations): &(Vec<GenEntry>, u8, Vec<Mutation>)| {
            let path = Path::new(SST);
            let kv: Vec<(Vec<u8>, Vec<u8>)> = entries(gen)
                .into_iter()
                .map(|(k, s, kind, v)| (internal_key(&k, s, kind), v))
                .collect();
            let contents = encode_block(&kv, usize::from(restart % 20) + 1);
            let keys: Vec<Vec<u8>> = kv.iter().map(|e| e.0.clone()).collect();
            let probes = block_probes(&keys);
            let got = read_block(path, contents.clone(), &probes).unwrap();
            assert_eq!(got.forward, kv);
            let mut back = got.backward.clone();
            back.reverse();
            assert_eq!(back, kv);
            for (p, s) in probes.iter().zip(&got.seeks) {
                let want = keys
                    .iter()
                    .find(|k| compare_internal_keys(k, p).is_ge())
                    .cloned();
                assert_eq!(s, &want, "seek");
            }
            let mut bad = contents;
            for m in mutations {
                m.apply(&mut bad);
            }
            if let Some(r) = ok_or_corruption(read_block(path, bad, &probes)) {
                assert!(r.forward.iter().all(|(k, _)| is_internal_key(k)));
            }
        }
    );
}

#[test]
fn table_footer() {
    fuzz_bytes!("table_footer", |input: &[u8]| {
        let path = Path::new(SST);
        let mut raw = [0u8; FOOTER_SIZE];
        let n = input.len().min(FOOTER_SIZE);
        raw[..n].copy_from_slice(&input[..n]);
        let offset = input
            .get(FOOTER_SIZE..FOOTER_SIZE + 8)
            .map_or(u64::MAX, |b| u64::from_le_bytes(b.try_into().unwrap()));
        ok_or_corruption(decode_footer(path, &raw, offset));
        // Behind the checksum: any fields, a valid checksum. Set the
        // magic and version too when the input asks (its last byte), so
        // the handle checks are reached.
        if input.last().is_some_and(|b| b & 1 == 1) {
            raw[40..44].copy_from_slice(&1u32.to_le_bytes());
            raw[48..56].copy_from_slice(b"weft-sst");
        }
        reseal_footer(&mut raw);
        if let Some(f) = ok_or_corruption(decode_footer(path, &raw, offset)) {
            assert!(f.index.fits_before(offset));
            if let Some(filter) = f.filter {
                assert!(filter.fits_before(f.index.offset));
            }
            // (The filter's offset is not kept when its size is 0.)
            assert_eq!(decode_footer(path, &f.encode(), offset).unwrap(), f);
        }
    });
}

#[test]
fn table_footer_round_trip() {
    fuzz_typed!(
        "table_footer_round_trip",
        (u32, u32, Option<(u32, u32)>, u64, u32, Mutation),
        |&(io, is, filter, entries, gap, ref mutation): &(
            u32,
            u32,
            Option<(u32, u32)>,
            u64,
            u32,
            Mutation
        )| {
            let path = Path::new(SST);
            let filter = filter.map(|(o, s)| BlockHandle {
                offset: u64::from(o),
                size: u64::from(s) + 1,
            });
            let index_at = filter.map_or(0, |f| f.end_with_trailer().unwrap()) + u64::from(io);
            let f = Footer {
                index: BlockHandle {
                    offset: index_at,
                    size: u64::from(is),
                },
                filter,
                entries,
            };
            let offset = f.index.end_with_trailer().unwrap() + u64::from(gap);
            let enc = f.encode();
            assert_eq!(decode_footer(path, &enc, offset).unwrap(), f);
            let mut bad = enc.to_vec();
            if mutation.apply(&mut bad) && bad.len() == FOOTER_SIZE {
                let raw: [u8; FOOTER_SIZE] = bad.try_into().unwrap();
                // A single flipped byte is caught by the checksum.
                let r = decode_footer(path, &raw, offset);
                if mutation.is_single_byte() {
                    assert!(r.unwrap_err().is_corruption());
                } else {
                    ok_or_corruption(r);
                }
            }
        }
    );
}

#[test]
fn table_filter() {
    fuzz_bytes!("table_filter", |input: &[u8]| {
        let keys = [b"".to_vec(), b"a".to_vec(), input.to_vec()];
        ok_or_corruption(query_filter(Path::new(SST), input.to_vec(), &keys));
    });
}

#[test]
fn table_filter_round_trip() {
    fuzz_typed!(
        "table_filter_round_trip",
        (Vec<Vec<u8>>, u8, Mutation),
        |(keys, bits, mutation): &(Vec<Vec<u8>>, u8, Mutation)| {
            let path = Path::new(SST);
            let contents = encode_filter(keys, usize::from(bits % 30) + 1);
            // No false negatives.
            let got = query_filter(path, contents.clone(), keys).unwrap();
            assert!(got.iter().all(|&b| b), "a key added is not in the filter");
            let mut bad = contents;
            if mutation.apply(&mut bad) {
                ok_or_corruption(query_filter(path, bad, keys));
            }
        }
    );
}
