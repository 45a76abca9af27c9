//! Entry points into every decoder of bytes that come from disk, for the
//! fuzz targets (`crates/weft-fuzz/tests/fuzz`, README there).
//!
//! The decoders are private to the crate; a fuzz target is an integration
//! test and sees only the public surface. Each function here wraps one
//! decoder *the way the engine calls it* (the same checks, the same
//! mapping of a reason string to [`Error::Corruption`]), so a target that
//! finds a panic or an error of the wrong kind here has found it on the
//! engine's own path. Encoders are wrapped too, so the targets can start
//! from valid encodings and check round trips, and `reseal_*` helpers
//! recompute a checksum over mutated bytes so a target reaches the parser
//! behind it.
//!
//! [`GuardedAlloc`] is the targets' global allocator: it turns an
//! allocation larger than any input could justify (a length field of 2^60
//! believed) into an immediate, explained abort instead of an
//! out-of-memory kill or a swap storm.
//!
//! Not part of the stable API (`internals::fuzz`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{compare_internal, encode_internal_key, parse_internal_key};
use crate::stats::{DiskReads, ReadPurpose};
use crate::store::value_log::{ValueLogFile, ValueLogWriter};
use crate::store::value_reader::ValueReader;
use crate::store::{LiveValueLog, Version};
use crate::table::block::{Block, BlockBuilder, BlockIter};
use crate::table::filter::{build_filter, hash64, BloomFilter};
use crate::table::format::{block_trailer, check_block, BLOCK_TYPE_UNCOMPRESSED};
use crate::table::{BlockCache, BlockReads, Table, TableBuilder, TableOptions};
use crate::util::crc;
use crate::util::fs::{real, Fs};
use crate::wal::{LogReader, LogWriter};

pub use crate::key::{SequenceNumber, ValueKind, MAX_SEQUENCE};
pub use crate::manifest::{
    ManifestState, RetainedWal, VersionEdit, FORMAT_VERSION as STORE_FORMAT_VERSION,
};
pub use crate::range_delete::{RangeTombstone, StoredRangeTombstone};
pub use crate::store::hash_index::HashIndex;
pub use crate::store::value_log::ValuePointer;
pub use crate::store::{FileMeta, Placement};
pub use crate::table::format::{BlockHandle, Footer, FOOTER_SIZE};
pub use crate::wal::{LogLink, LogRead};

/// What an operation of a write batch does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Sets the key to the value.
    Put,
    /// Deletes the key.
    Delete,
    /// Deletes every key from the key (inclusive) to the value (exclusive).
    DeleteRange,
}

/// One operation of a write batch: kind, key, value (empty for a delete;
/// the end of the range for a range delete).
pub type BatchOp = (OpKind, Vec<u8>, Vec<u8>);

/// A log's records that verified (offset, payload), and how it ended.
pub type LogContents = (Vec<(u64, Vec<u8>)>, LogRead);

/// One table entry: user key, sequence, kind, value.
pub type TableEntry = (Vec<u8>, SequenceNumber, ValueKind, Vec<u8>);

// ---- write batches (WAL payloads) ----

/// The WAL payload of a batch of `ops` stamped with sequence `seq`, as the
/// write path encodes it.
pub fn encode_write_batch(seq: SequenceNumber, ops: &[BatchOp]) -> Vec<u8> {
    let mut b = WriteBatch::new();
    for (kind, key, value) in ops {
        match kind {
            OpKind::Put => b.put(key, value),
            OpKind::Delete => b.delete(key),
            OpKind::DeleteRange => b.delete_range(key, value),
        };
    }
    b.set_sequence(seq);
    b.encoded().to_vec()
}

/// [`encode_write_batch`], re-encoded as the write path does for the WAL
/// (`Options::values_in_wal`): every put of at least `logged_from` bytes a
/// logged put, compressed with `compression` where that pays.
pub fn encode_logged_write_batch(
    seq: SequenceNumber,
    ops: &[BatchOp],
    logged_from: usize,
    compression: crate::Compression,
) -> Vec<u8> {
    let plain = encode_write_batch(seq, ops);
    let Ok(b) = WriteBatch::decode(plain.clone()) else {
        return plain;
    };
    match b.with_puts_logged_from(logged_from, compression) {
        Some(mut logged) => {
            logged.set_sequence(seq);
            logged.encoded().to_vec()
        }
        None => plain,
    }
}

/// Decodes a WAL payload as WAL recovery does (`db::open::replay_wals`):
/// the batch's structure, then each operation; anything malformed is
/// [`Error::Corruption`] naming `file` at record `offset`.
pub fn decode_write_batch(
    file: &Path,
    offset: u64,
    payload: Vec<u8>,
) -> Result<(SequenceNumber, Vec<BatchOp>)> {
    let batch = WriteBatch::decode(payload)
        .map_err(|r| Error::corruption(file, offset, format!("bad write batch: {r}")))?;
    let mut ops = Vec::with_capacity(batch.len().min(1024));
    for op in batch.iter() {
        let op = op.map_err(|e| Error::corruption(file, offset, e.to_string()))?;
        ops.push(match (op.range_end, op.kind) {
            (Some(end), _) => (OpKind::DeleteRange, op.key.to_vec(), end.to_vec()),
            (None, ValueKind::Delete) => (OpKind::Delete, op.key.to_vec(), Vec::new()),
            _ => {
                let value = (op.decoded_value()).map_err(|r| Error::corruption(file, offset, r))?;
                (OpKind::Put, op.key.to_vec(), value.into_owned())
            }
        });
    }
    Ok((batch.sequence(), ops))
}

// ---- record logs (WAL, manifest) ----

/// `payload` framed as one log record (header, then payload), as
/// [`LogWriter`] writes it; `None` if it is too long for a record.
pub fn frame_record(payload: &[u8]) -> Option<Vec<u8>> {
    let len = u32::try_from(payload.len()).ok()?;
    let mut out = crc::record_header(len, payload).to_vec();
    out.extend_from_slice(payload);
    Some(out)
}

/// Writes `payloads` to a new log at `path` through the engine's own
/// [`LogWriter`].
pub fn write_log(path: &Path, payloads: &[Vec<u8>]) -> Result<()> {
    let mut w = LogWriter::create(&*real(), path)?;
    for p in payloads {
        w.add_record(p)?;
    }
    w.sync()
}

/// Reads the log at `path` to its end: the records that verified (offset,
/// payload) and how it ended (`End` or `Bad`). `lost_pages`: read as WAL
/// recovery does ([`LogReader::with_lost_pages`]) rather than as the
/// manifest does.
pub fn read_log(path: &Path, lost_pages: bool) -> Result<LogContents> {
    let mut reader = LogReader::open(&*real(), path)?;
    if lost_pages {
        reader = reader.with_lost_pages();
    }
    let mut records = Vec::new();
    loop {
        match reader.read()? {
            LogRead::Record { offset, payload } => records.push((offset, payload)),
            end => {
                // Sticky: a second read gives the same answer.
                if reader.read()? != end {
                    return Err(Error::InvalidArgument(
                        "log reader end is not sticky".into(),
                    ));
                }
                return Ok((records, end));
            }
        }
    }
}

/// WAL recovery's reading of one log (`db::open::replay_wals` without the
/// memtable and the check of a link against the previous WAL): every
/// record decoded as a link ([`LogLink`], skipped) or a write batch; a torn
/// tail ends the log, a bad record with data behind it is
/// [`Error::Corruption`].
pub fn recover_wal(path: &Path) -> Result<Vec<(SequenceNumber, Vec<BatchOp>)>> {
    let (records, end) = read_log(path, true)?;
    let mut batches = Vec::with_capacity(records.len());
    for (offset, payload) in records {
        if let Some(link) = LogLink::decode(&payload) {
            link.map_err(|r| Error::corruption(path, offset, r))?;
            continue;
        }
        batches.push(decode_write_batch(path, offset, payload)?);
    }
    match end {
        LogRead::Bad {
            offset,
            reason,
            at_tail: false,
        } => Err(Error::corruption(path, offset, reason)),
        LogRead::Bad {
            offset,
            at_tail: true,
            ..
        } => {
            crate::db::check_wal_tail(&*crate::util::fs::real(), path, offset)?;
            Ok(batches)
        }
        _ => Ok(batches),
    }
}

// ---- manifest ----

/// The manifest record payload of `edit`.
pub fn encode_version_edit(edit: &VersionEdit) -> Vec<u8> {
    edit.encode()
}

/// Decodes a manifest record payload as manifest recovery does.
pub fn decode_version_edit(file: &Path, offset: u64, payload: &[u8]) -> Result<VersionEdit> {
    VersionEdit::decode(payload).map_err(|r| Error::corruption(file, offset, r))
}

/// Replays decoded edits onto an empty state as manifest recovery does;
/// an inconsistent edit is [`Error::Corruption`] at its index.
pub fn apply_edits(file: &Path, edits: &[VersionEdit]) -> Result<ManifestState> {
    let mut state = ManifestState::default();
    for (i, e) in edits.iter().enumerate() {
        state
            .apply(e)
            .map_err(|r| Error::corruption(file, i as u64, r))?;
    }
    Ok(state)
}

/// The manifest `number` of `dir` and the `CURRENT` contents naming it
/// (the target writes them: file operations stay outside the engine's
/// sources but for its file-system layer).
pub fn manifest_files(dir: &Path, number: u64) -> (PathBuf, String) {
    let path = crate::filename::manifest_path(dir, number);
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_owned();
    (path, format!("{name}\n"))
}

/// Manifest recovery (`CURRENT`, then every record of the manifest it
/// names): the state, and whether a bad last record was dropped.
pub fn recover_manifest(dir: &Path) -> Result<(ManifestState, bool)> {
    crate::manifest::recover_noting_tail(&*real(), dir)
        .map(|(_, state, tail)| (state, tail.is_some()))
}

// ---- tables ----

/// Builds a table of `entries` (which must be in internal order: user key
/// ascending, sequence descending) at `path` with the engine's builder;
/// returns its size.
pub fn build_table(
    path: &Path,
    entries: &[TableEntry],
    block_size: usize,
    restart_interval: usize,
    bloom_bits_per_key: usize,
    compression: crate::Compression,
) -> Result<u64> {
    let options = TableOptions {
        block_size,
        restart_interval,
        bloom_bits_per_key,
        compression,
        ..TableOptions::default()
    };
    let mut b = TableBuilder::create(&*real(), path, options)?;
    for (key, seq, kind, value) in entries {
        b.add(key, *seq, *kind, value)?;
    }
    Ok(b.finish()?.file_size)
}

/// Everything a table gives back to its readers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRead {
    /// Entries from a forward scan.
    pub forward: Vec<TableEntry>,
    /// Entries from a backward scan, in the order visited.
    pub backward: Vec<TableEntry>,
    /// For each probe key: the first entry at or after (probe, newest).
    pub seeks: Vec<Option<TableEntry>>,
    /// For each probe key: the newest version ([`Table::get`]).
    pub gets: Vec<Option<(SequenceNumber, ValueKind, Vec<u8>)>>,
    /// Blocks verified by [`Table::verify_checksums`].
    pub blocks: u64,
}

fn entry_of(it: &impl InternalIterator) -> TableEntry {
    (
        it.user_key().to_vec(),
        it.seq(),
        it.kind(),
        it.value().to_vec(),
    )
}

/// Opens the table at `path` (of `size` bytes) as the engine does, mapped
/// or through the block cache, and reads all of it: both scans, a seek and
/// a get per probe key, and a checksum pass. A bounded number of entries
/// is collected (`max_entries`) so a target's memory stays bounded.
pub fn read_table(
    path: &Path,
    size: u64,
    mapped: bool,
    probes: &[Vec<u8>],
    max_entries: usize,
) -> Result<TableRead> {
    let reads = if mapped {
        BlockReads::Mapped
    } else {
        BlockReads::Cached
    };
    let cache = Arc::new(BlockCache::new(1 << 20));
    let table = Table::open(&*real(), path, 1, size, cache, reads)?;
    let purpose = ReadPurpose::Scan { fill_cache: true };
    let mut out = TableRead {
        forward: Vec::new(),
        backward: Vec::new(),
        seeks: Vec::new(),
        gets: Vec::new(),
        blocks: 0,
    };
    let mut it = table.iter_for(purpose);
    it.seek_to_first()?;
    while it.valid() && out.forward.len() < max_entries {
        out.forward.push(entry_of(&it));
        it.next()?;
    }
    it.seek_to_last()?;
    while it.valid() && out.backward.len() < max_entries {
        out.backward.push(entry_of(&it));
        it.prev()?;
    }
    for p in probes {
        it.seek(p, MAX_SEQUENCE)?;
        out.seeks.push(it.valid().then(|| entry_of(&it)));
        out.gets.push(table.get(p, MAX_SEQUENCE)?);
    }
    out.blocks = table.verify_checksums()?;
    Ok(out)
}

/// The data blocks of the table at `path` (of `size` bytes), in order:
/// each block's type byte (0 uncompressed, else its codec: 1 LZ4, 2 zstd)
/// and the distinct user keys of its entries. The keyspace tests read it
/// to see which codec each keyspace's blocks were stored with.
pub fn table_data_blocks(path: &Path, size: u64) -> Result<Vec<(u8, Vec<Vec<u8>>)>> {
    let cache = Arc::new(BlockCache::new(1 << 20));
    let table = Table::open(&*real(), path, 1, size, cache, BlockReads::Cached)?;
    let mut out = Vec::new();
    for (block_type, block) in table.data_blocks_with_types()? {
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let mut it = BlockIter::new(Arc::new(block));
        it.seek_to_first()
            .map_err(|r| crate::Error::corruption(path, 0, r.to_string()))?;
        while it.valid() {
            let user = crate::key::user_key_of(it.key());
            if keys.last().map(Vec::as_slice) != Some(user) {
                keys.push(user.to_vec());
            }
            it.next_entry()
                .map_err(|r| crate::Error::corruption(path, 0, r.to_string()))?;
        }
        out.push((block_type, keys));
    }
    Ok(out)
}

/// A block's contents (trailer stripped) built by the engine's
/// [`BlockBuilder`] from `entries` (encoded internal keys in internal
/// order, values).
pub fn encode_block(entries: &[(Vec<u8>, Vec<u8>)], restart_interval: usize) -> Vec<u8> {
    let mut b = BlockBuilder::new(restart_interval);
    for (k, v) in entries {
        b.add(k, v);
    }
    b.finish().to_vec()
}

/// The encoded internal key of (`user_key`, `seq`, `kind`).
pub fn internal_key(user_key: &[u8], seq: SequenceNumber, kind: ValueKind) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + 8);
    encode_internal_key(&mut k, user_key, seq, kind);
    k
}

/// Internal order of two encoded internal keys.
pub fn compare_internal_keys(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    compare_internal(a, b)
}

/// Whether `key` is a well-formed internal key.
pub fn is_internal_key(key: &[u8]) -> bool {
    parse_internal_key(key).is_some()
}

/// What a block gives back.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BlockRead {
    /// (key, value) of a forward scan.
    pub forward: Vec<(Vec<u8>, Vec<u8>)>,
    /// (key, value) of a backward scan, in the order visited.
    pub backward: Vec<(Vec<u8>, Vec<u8>)>,
    /// For each probe (an internal key): the key of the first entry at or
    /// after it.
    pub seeks: Vec<Option<Vec<u8>>>,
}

/// Parses block `contents` (trailer stripped) as the table reader does and
/// walks it: both directions, and a seek per probe (internal keys). A
/// malformed block is [`Error::Corruption`] at `file`, offset 0.
pub fn read_block(file: &Path, contents: Vec<u8>, probes: &[Vec<u8>]) -> Result<BlockRead> {
    let bad = |r: &str| Error::corruption(file, 0, r);
    let block = Arc::new(Block::new(contents, 0).map_err(bad)?);
    let mut it = BlockIter::new(Arc::clone(&block));
    let mut out = BlockRead::default();
    // A block holds at most one entry per 3 bytes (three one-byte varints).
    let max = block.len() / 3 + 1;
    it.seek_to_first().map_err(bad)?;
    while it.valid() && out.forward.len() <= max {
        out.forward.push((it.key().to_vec(), it.value().to_vec()));
        it.next_entry().map_err(bad)?;
    }
    it.seek_to_last().map_err(bad)?;
    while it.valid() && out.backward.len() <= max {
        out.backward.push((it.key().to_vec(), it.value().to_vec()));
        it.prev_entry().map_err(bad)?;
    }
    for p in probes {
        it.seek(p).map_err(bad)?;
        out.seeks.push(it.valid().then(|| it.key().to_vec()));
    }
    Ok(out)
}

/// `contents` followed by its block trailer (type, masked CRC), as the
/// table builder writes a block.
pub fn seal_block(contents: &[u8]) -> Vec<u8> {
    seal_typed_block(contents, BLOCK_TYPE_UNCOMPRESSED)
}

/// [`seal_block`] with the trailer's type byte `block_type` (a compressed
/// block's codec), so damage behind the checksum reaches the decompressor.
pub fn seal_typed_block(contents: &[u8], block_type: u8) -> Vec<u8> {
    let mut raw = contents.to_vec();
    raw.extend_from_slice(&block_trailer(contents, block_type));
    raw
}

// ---- compression ----

/// Compresses `raw` as a table block or value-log record would be: the
/// codec byte (0 when it was stored as is) and the stored form.
pub fn compress_unit(compression: crate::Compression, raw: &[u8]) -> (u8, Vec<u8>) {
    let mut out = Vec::new();
    let codec = crate::compression::compress(compression, raw, &mut out);
    (codec, out)
}

/// Decodes a stored compressed unit as the table and value-log readers do
/// (at most `limit` bytes); an error is the reason they would give for
/// `Error::Corruption`.
pub fn decompress_unit(codec: u8, stored: &[u8], limit: usize) -> Result<Vec<u8>> {
    crate::compression::decompress(codec, stored, limit)
        .map_err(|r| Error::corruption("(compressed unit)", 0, r))
}

/// Checks a block's trailer as the table reader does; the contents'
/// length on success.
pub fn check_block_trailer(file: &Path, raw: &[u8]) -> Result<usize> {
    check_block(raw).map_err(|r| Error::corruption(file, 0, r))
}

/// Decodes a table footer found at `footer_offset`, as [`Table::open`]
/// does.
pub fn decode_footer(file: &Path, raw: &[u8; FOOTER_SIZE], footer_offset: u64) -> Result<Footer> {
    Footer::decode(raw, footer_offset).map_err(|r| Error::corruption(file, footer_offset, r))
}

/// Recomputes a footer's checksum over its (mutated) fields.
pub fn reseal_footer(raw: &mut [u8; FOOTER_SIZE]) {
    let crc = crc::masked_crc32c(&[&raw[0..44]]);
    raw[44..48].copy_from_slice(&crc.to_le_bytes());
}

/// A filter block's contents for `keys`, as the table builder makes it.
pub fn encode_filter(keys: &[Vec<u8>], bits_per_key: usize) -> Vec<u8> {
    let hashes: Vec<u64> = keys.iter().map(|k| hash64(k)).collect();
    build_filter(&hashes, bits_per_key)
}

/// Parses filter block contents as the table reader does and asks it
/// about each of `keys`.
pub fn query_filter(file: &Path, contents: Vec<u8>, keys: &[Vec<u8>]) -> Result<Vec<bool>> {
    let f = BloomFilter::new(contents).map_err(|r| Error::corruption(file, 0, r))?;
    Ok(keys.iter().map(|k| f.may_contain(k)).collect())
}

// ---- value logs ----

/// Writes value log `number` in `dir` holding `values` with the engine's
/// writer, compressing each value that `compression` shrinks; returns the
/// pointers and the log's size.
pub fn write_value_log(
    dir: &Path,
    number: u64,
    values: &[Vec<u8>],
    compression: crate::Compression,
) -> Result<(Vec<ValuePointer>, u64)> {
    let fs: Fs = real();
    let mut w = ValueLogWriter::create_compressed(&fs, dir, number, compression)?;
    let mut ptrs = Vec::with_capacity(values.len());
    for v in values {
        ptrs.push(w.append(v)?);
    }
    Ok((ptrs, w.finish()?))
}

/// The path of value log `number` in `dir`.
pub fn value_log_path(dir: &Path, number: u64) -> PathBuf {
    crate::filename::value_log_path(dir, number)
}

/// What reading a value log gives back.
#[derive(Debug)]
pub struct ValueLogRead {
    /// Per raw pointer, the value a cursor's [`ValueReader`] resolves it
    /// to (readahead windows and all).
    pub through_reader: Vec<Result<Vec<u8>>>,
    /// Per raw pointer, the value a point read resolves it to.
    pub direct: Vec<Result<Vec<u8>>>,
    /// [`ValueLogFile::verify_checksums`]: records, or the first error.
    pub verified: Result<u64>,
}

/// Opens value log `number` of `size` bytes in `dir` (mapped, or read with
/// `pread` as when the kernel refuses to map) and resolves each of `raw`
/// (encoded value pointers, as SortedStore entries hold them) twice: in
/// order through one cursor's [`ValueReader`] and as point reads; then
/// verifies the whole log.
pub fn read_value_log(
    dir: &Path,
    number: u64,
    size: u64,
    mapped: bool,
    raw: &[Vec<u8>],
) -> Result<ValueLogRead> {
    let fs: Fs = real();
    let file = if mapped {
        ValueLogFile::open(&fs, dir, number, size)?
    } else {
        ValueLogFile::open_unmapped(&fs, dir, number, size)?
    };
    let mut value_logs = BTreeMap::new();
    value_logs.insert(
        number,
        LiveValueLog {
            file: Arc::clone(&file),
            garbage: 0,
            refs: Default::default(),
            shares: Default::default(),
        },
    );
    let version = Version {
        partitions: Vec::new(),
        value_logs,
        range_tombstones: Default::default(),
    };
    let mut reader = ValueReader::new(
        ReadPurpose::Scan { fill_cache: false },
        Arc::new(DiskReads::default()),
    );
    let through_reader = raw.iter().map(|r| reader.read(&version, r)).collect();
    let direct = raw
        .iter()
        .map(|r| {
            let ptr = ValuePointer::parse(r)?;
            version.value_log(&ptr)?.read(&ptr)
        })
        .collect();
    Ok(ValueLogRead {
        through_reader,
        direct,
        verified: file.verify_checksums(),
    })
}

// ---- hash-index checkpoints ----

/// Recomputes a hash-index checkpoint's trailing CRC32C over its (mutated)
/// bytes; a no-op on an image too short to hold one.
pub fn reseal_hash_index(image: &mut [u8]) {
    if let Some(body) = image.len().checked_sub(4) {
        let crc = crc32c::crc32c(&image[..body]);
        image[body..].copy_from_slice(&crc.to_le_bytes());
    }
}

// ---- the lifetime counters (STATS) ----

/// Decodes a `STATS` file as an open does (`stats_file::load`): whether a
/// clean close wrote it and its counters by name, or why it is unusable;
/// then builds the lifetime view an open would show from the counters.
pub fn decode_stats_file(
    bytes: &[u8],
) -> std::result::Result<(bool, BTreeMap<String, u64>), String> {
    let file = crate::stats_file::StatsFile::decode(bytes)?;
    let _ = crate::stats::LifetimeStats::from_counts(&file.counts);
    Ok((file.clean, file.counts))
}

/// The bytes of a `STATS` file, as a save writes them.
pub fn encode_stats_file(clean: bool, counts: &BTreeMap<String, u64>) -> Vec<u8> {
    crate::stats_file::StatsFile {
        clean,
        counts: counts.clone(),
    }
    .encode()
}

/// Recomputes a `STATS` file's trailing masked CRC32C over its (mutated)
/// bytes; a no-op on one too short to hold it.
pub fn reseal_stats_file(bytes: &mut [u8]) {
    if let Some(body) = bytes.len().checked_sub(4) {
        let crc = crc::masked_crc32c(&[&bytes[..body]]);
        bytes[body..].copy_from_slice(&crc.to_le_bytes());
    }
}

// ---- the allocation guard ----

/// Largest single allocation the guard allows while it is armed: far above
/// what any fuzz input (kilobytes) may make a decoder allocate, far below
/// what a believed length field would ask for.
pub const ALLOCATION_LIMIT: usize = 256 << 20;

thread_local! {
    /// Whether the guard is armed on this thread, and the input to report.
    static ARMED: Cell<Option<(*const u8, usize)>> = const { Cell::new(None) };
}

/// A global allocator for fuzz targets: [`System`], except that while
/// [`guarded`] runs a decoder, an allocation over [`ALLOCATION_LIMIT`]
/// prints the input being decoded (hex) and aborts. A panic is not an
/// option inside an allocator (it must not unwind), and without the guard
/// a believed 2^60-byte length is an allocation failure with no input to
/// reproduce it, or worse, a huge allocation that succeeds lazily.
pub struct GuardedAlloc;

impl GuardedAlloc {
    fn check(size: usize) {
        if size <= ALLOCATION_LIMIT {
            return;
        }
        let armed = ARMED.try_with(Cell::get).ok().flatten();
        if let Some((ptr, len)) = armed {
            // SAFETY: `guarded` armed the guard with a slice it borrows for
            // as long as the guard stays armed, and we are inside that call.
            let input = unsafe { std::slice::from_raw_parts(ptr, len) };
            report_and_abort(size, input);
        }
    }
}

/// Writes the report without allocating (we are inside the allocator).
fn report_and_abort(size: usize, input: &[u8]) -> ! {
    let write = |b: &[u8]| {
        // SAFETY: writes `b.len()` bytes from a live slice to stderr.
        let _ = unsafe { libc::write(2, b.as_ptr().cast(), b.len()) };
    };
    let mut num = [0u8; 20];
    let mut i = num.len();
    let mut n = size;
    loop {
        i -= 1;
        num[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    write(b"\nfuzz: a decoder asked for an allocation of ");
    write(&num[i..]);
    write(b" bytes while decoding this input (hex):\n");
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for chunk in input.chunks(32) {
        let mut line = [0u8; 65];
        for (j, b) in chunk.iter().enumerate() {
            line[2 * j] = HEX[usize::from(b >> 4)];
            line[2 * j + 1] = HEX[usize::from(b & 15)];
        }
        line[2 * chunk.len()] = b'\n';
        write(&line[..2 * chunk.len() + 1]);
    }
    std::process::abort()
}

// SAFETY: every call is forwarded to `System` unchanged; `check` only
// reads a thread-local (const-initialised, no destructor, so reading it
// never allocates) and may abort the process.
unsafe impl GlobalAlloc for GuardedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::check(layout.size());
        // SAFETY: the caller's contract is `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::check(layout.size());
        // SAFETY: the caller's contract is `System.alloc_zeroed`'s.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is `System.dealloc`'s.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::check(new_size);
        // SAFETY: the caller's contract is `System.realloc`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Runs `f` (a decoder fed `input`) with the allocation guard armed on
/// this thread; see [`GuardedAlloc`].
pub fn guarded<R>(input: &[u8], f: impl FnOnce() -> R) -> R {
    struct Disarm(Option<(*const u8, usize)>);
    impl Drop for Disarm {
        fn drop(&mut self) {
            let _ = ARMED.try_with(|a| a.set(self.0));
        }
    }
    let previous = ARMED.with(|a| a.replace(Some((input.as_ptr(), input.len()))));
    let _disarm = Disarm(previous);
    f()
}
