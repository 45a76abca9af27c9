//! Opening a database: lock, manifest replay, WAL replay, a fresh manifest,
//! removal of obsolete files, and the start of background work.
//!
//! Recovery never needs a flag. WALs at or above the manifest's log number
//! are replayed in order, and replay stops at the first torn record: a bad
//! record followed only by zeros or the end of its file (a write cut by
//! the crash, or pages the machine lost). It and everything after it —
//! the rest of that WAL and every newer WAL — is dropped, so the result is
//! a prefix of the history. An older WAL can be the torn one: a rotation
//! does not wait for the old WAL's fdatasync (`ClosedWals`), so after a
//! machine crash a newer WAL may hold records written after pages of the
//! older one were lost; keeping them would break the prefix. A process
//! crash never tears an older WAL (its records reached the page cache
//! before the newer one took any). A bad record followed by further
//! records is damage, not a crash artefact, and open fails with
//! `Error::Corruption` rather than silently dropping acknowledged writes.
//!
//! The replayed writes are flushed into tables before the new manifest is
//! written, so the old WALs can be deleted and the new WAL starts clean.

use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::Arc;

use super::core::{ActiveWal, Core, Counters, EngineState, FeedState};
use super::lifetime::SaveAt;
use crate::background::write_memtable;
use crate::batch::WriteBatch;
use crate::error::{Error, IoContext, Result};
use crate::filename::{self, FileKind};
use crate::manifest::{
    self, DroppedTail, ManifestState, ManifestWriter, PartitionMeta, RetainedWal, VersionEdit,
};
use crate::memtable::{new_memtable, Memtable};
use crate::options::Options;
use crate::range_delete::RangeTombstone;
use crate::stats_file::Lifetime;
use crate::store::compaction::JobStats;
use crate::store::hash_index::HashIndex;
use crate::store::value_log::ValueLogFile;
use crate::store::{
    build_index, index_add_table, table_user_keys, LiveValueLog, Partition, Placement, TableFile,
    Version,
};
use crate::table::BlockCache;
use crate::util::fs::FileSystem;
use crate::wal::{LogLink, LogRead, LogReader, LogWriter};

/// The LOCK file, held with `flock` for as long as the database (or a
/// backup directory, `crate::backup`) is open.
#[derive(Debug)]
pub(crate) struct DirLock {
    file: File,
}

impl Drop for DirLock {
    /// Unlocks explicitly before the descriptor closes. Closing alone is not
    /// enough: a process this one forks holds a copy of the descriptor until
    /// it execs (the descriptor is close-on-exec), and an flock lives as
    /// long as any copy, so a `Db::open` right after the last handle drops
    /// could find the directory still locked. `LOCK_UN` releases the lock
    /// for every copy at once.
    fn drop(&mut self) {
        // SAFETY: `self.file` is an open descriptor owned by this value;
        // flock only reads the descriptor number.
        unsafe {
            libc::flock(self.file.as_raw_fd(), libc::LOCK_UN);
        }
    }
}

impl DirLock {
    pub(crate) fn acquire(fs: &dyn FileSystem, dir: &Path) -> Result<DirLock> {
        let path = filename::lock_path(dir);
        let file = fs
            .open_lock_file(&path)
            .context(|| format!("opening {}", path.display()))?;
        // SAFETY: `file` is an open descriptor owned by this function; flock
        // only reads the descriptor number and has no memory effects.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(Error::Locked { path });
            }
            return Err(Error::io(format!("locking {}", path.display()), err));
        }
        // The lock is released at drop, or when the process dies (kill -9
        // included) and the kernel closes the descriptor.
        Ok(DirLock { file })
    }
}

/// What `open` hands to `Db`.
pub(crate) struct Opened {
    pub core: Arc<Core>,
    pub lock: DirLock,
}

pub(crate) fn open(dir: &Path, options: Options) -> Result<Opened> {
    options.validate()?;
    let fs = Arc::clone(&options.file_system);
    if !fs.exists(dir) {
        if !options.create_if_missing {
            return Err(Error::InvalidArgument(format!(
                "database directory {} does not exist (create_if_missing is false)",
                dir.display()
            )));
        }
        fs.create_dir_all(dir)
            .context(|| format!("creating {}", dir.display()))?;
    }
    let dir = dir
        .canonicalize()
        .context(|| format!("resolving {}", dir.display()))?;
    let lock = DirLock::acquire(&*fs, &dir)?;
    let cache = Arc::new(BlockCache::new(options.block_cache_size));

    let mut recovered_manifest = None;
    let mut state = if fs.exists(&filename::current_path(&dir)) {
        if options.error_if_exists {
            return Err(Error::InvalidArgument(format!(
                "database {} already exists",
                dir.display()
            )));
        }
        let (number, state, dropped) = manifest::recover_noting_tail(&*fs, &dir)?;
        if let Some(tail) = dropped {
            check_dropped_tail_was_torn(&*fs, &dir, &state, &tail)?;
        }
        recovered_manifest = Some(number);
        state
    } else {
        if !options.create_if_missing {
            return Err(Error::InvalidArgument(format!(
                "no database in {}",
                dir.display()
            )));
        }
        let mut s = ManifestState {
            next_file_number: 1,
            ..Default::default()
        };
        s.partitions.insert(0, PartitionMeta::default());
        s
    };

    // Find the WALs to replay. Only they and the files the manifest names
    // steer file numbering: every other file of Weft's kinds is an orphan
    // of a job that never committed, or not Weft's at all, and goes before
    // a number is handed out, so a stray name (`18446744073709551614.tmp`)
    // can neither wrap the numbering nor make a new file take the number of
    // a live one.
    let wals = list_live_wals(&*fs, &dir, state.log_number)?;
    if let Some(&last) = wals.last() {
        state.next_file_number = state.next_file_number.max(last + 1);
    }
    remove_obsolete_files(&*fs, &dir, &state, recovered_manifest, state.log_number);

    let counters = Counters::default();
    // Each memtable recovery fills is flushed into tables the new
    // manifest names, so the replayed WALs can go.
    let mut flush = |state: &mut ManifestState, mem: Arc<dyn Memtable>| {
        flush_recovered(&dir, &options, state, &mem)
    };
    let (last_seq, replayed) =
        replay_wals(&dir, &options, &mut state, &wals, &counters, &mut flush)?;
    state.last_sequence = last_seq;
    retain_replayed_wals(&*fs, &dir, &mut state, &replayed)?;
    crate::fault::crash_point("open.recovered_tables_written");

    // A fresh WAL and a fresh manifest naming it.
    let wal_number = state.next_file_number;
    state.next_file_number += 1;
    let wal_writer = LogWriter::create_mapped(&*fs, &filename::wal_path(&dir, wal_number))?;
    state.log_number = wal_number;
    let manifest_number = state.next_file_number;
    state.next_file_number += 1;
    let (manifest, manifest_bytes) = ManifestWriter::create(&*fs, &dir, manifest_number, &state)?;
    Counters::add(&counters.manifest_bytes, manifest_bytes);

    crate::fault::crash_point("open.manifest_written");
    remove_obsolete_files(&*fs, &dir, &state, Some(manifest_number), wal_number);

    let version = open_version(&fs, &dir, &options, &cache, &state, manifest_number)?;

    let engine = EngineState {
        mem: new_memtable(options.memtable, options.write_buffer_size),
        mem_wal: wal_number,
        imms: Default::default(),
        version: Arc::new(version),
        next_file_number: state.next_file_number,
        log_number: wal_number,
        imm_created: 0,
        imm_flushed: 0,
        manual_merges: Default::default(),
        next_partition_id: state.partitions.keys().max().map_or(0, |m| m + 1),
        index_checkpoints: state.index_checkpoints.clone(),
        flushed_since_checkpoint: Default::default(),
        flushing: false,
        restructuring: 0,
        busy_partitions: Default::default(),
        shutting_down: false,
        feed: FeedState {
            holds: state.holds.clone(),
            persisted: state.holds.clone(),
            retained: state.retained_wals.clone(),
            active_first_seq: last_seq + 1,
        },
    };
    let wal = ActiveWal {
        has_logged_puts: false,
        writer: wal_writer,
        number: engine.mem_wal,
    };
    // The lifetime counters: never a reason to fail the open.
    let lifetime = Lifetime::at_open(
        crate::stats_file::load(&*fs, &dir),
        recovered_manifest.is_some(),
    );
    let core = Arc::new(Core::new(
        dir, options, cache, engine, manifest, wal, last_seq, counters, lifetime,
    ));
    // Records the open (and what recovery counted); marked unclean until a
    // clean close replaces it.
    core.save_stats(SaveAt::Open);
    Ok(Opened { core, lock })
}

/// The WALs recovery replays: those numbered at or above `log_number`
/// (the manifest's oldest live one), in order. Shared by the writer's open
/// and the read-only view ([`super::read_only`]). Only they and the files
/// the manifest names steer file numbering: every other file of Weft's
/// kinds is an orphan of a job that never committed, or not Weft's at all,
/// and the writer's open removes it before a number is handed out, so a
/// stray name (`18446744073709551614.tmp`) can neither wrap the numbering
/// nor make a new file take the number of a live one.
pub(super) fn list_live_wals(fs: &dyn FileSystem, dir: &Path, log_number: u64) -> Result<Vec<u64>> {
    let mut wals = Vec::new();
    for path in fs
        .read_dir(dir)
        .context(|| format!("listing {}", dir.display()))?
    {
        let Some(FileKind::Wal(n)) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(filename::parse_file_name)
        else {
            continue;
        };
        if n < log_number {
            continue;
        }
        if n >= filename::MAX_FILE_NUMBER {
            return Err(Error::corruption(
                path,
                0,
                format!(
                    "log number {n} is past any number Weft hands out ({}): not a log this \
                     database wrote; move it out of the directory",
                    filename::MAX_FILE_NUMBER
                ),
            ));
        }
        wals.push(n);
    }
    wals.sort_unstable();
    Ok(wals)
}

/// Opens every table and value log `state` names (holding a descriptor of
/// each, so a file deleted later stays readable), restores each
/// partition's hash index, and checks that the partitions tile the key
/// space: the store version of a recovered state, for the writer's open
/// and the read-only view alike. `manifest_number` names the manifest in
/// errors.
pub(super) fn open_version(
    fs: &crate::util::fs::Fs,
    dir: &Path,
    options: &Options,
    cache: &Arc<BlockCache>,
    state: &ManifestState,
    manifest_number: u64,
) -> Result<Version> {
    let mut partitions = Vec::new();
    for (id, pm) in &state.partitions {
        let mut p = Partition::new(*id, pm.lower.clone(), pm.upper.clone());
        for m in pm.unsorted.values() {
            p.unsorted.push(TableFile::open(
                fs,
                dir,
                m.clone(),
                cache,
                options.block_reads(),
            )?);
        }
        for m in pm.sorted.values() {
            p.sorted.push(TableFile::open(
                fs,
                dir,
                m.clone(),
                cache,
                options.block_reads(),
            )?);
        }
        p.sorted
            .sort_by(|a, b| a.meta.smallest_user_key().cmp(b.meta.smallest_user_key()));
        // The hash index: its checkpoint plus the tables flushed after it,
        // or, without a usable checkpoint, rebuilt from all the tables.
        let checkpoint = state.index_checkpoints.get(id).copied();
        crate::store::replace_index(
            &p.index,
            restore_index(&**fs, dir, checkpoint, &p.unsorted, options.unsorted_limit)?,
        );
        partitions.push(Arc::new(p));
    }
    partitions.sort_by(|a, b| a.lower.cmp(&b.lower));
    check_partitions(dir, manifest_number, &partitions)?;
    let mut value_logs = std::collections::BTreeMap::new();
    for (n, meta) in &state.value_logs {
        value_logs.insert(
            *n,
            LiveValueLog {
                file: ValueLogFile::open(fs, dir, *n, meta.size)?,
                garbage: meta.garbage,
                refs: meta.refs.clone(),
                shares: Default::default(),
            },
        );
    }
    Ok(Version {
        partitions,
        value_logs,
        range_tombstones: Arc::new(state.range_tombstones.clone()),
    })
}

/// Keeps for the change feed what recovery replayed of the WALs a hold
/// needs (`replayed`: each WAL's number, the bytes of records replayed and
/// its batches' sequences), so that the feed serves exactly the recovered
/// prefix: the manifest records each with the size replayed, and the feed
/// never reads past it, so a record past a torn one is never served. Each
/// is fdatasynced first (after a process crash its records may be in the
/// page cache only), as every file is before an edit names it (§5.1).
///
/// Holds past the recovered history (a consumer released writes that a
/// machine crash then took, and whose sequences will be handed out again)
/// come back to its end, so the writes that reuse those sequences are not
/// skipped.
fn retain_replayed_wals(
    fs: &dyn FileSystem,
    dir: &Path,
    state: &mut ManifestState,
    replayed: &[(u64, RetainedWal)],
) -> Result<()> {
    let next = state.last_sequence + 1;
    for seq in state.holds.values_mut() {
        *seq = (*seq).min(next);
    }
    for (n, w) in replayed {
        if !state.holds_pin(w.last_seq) {
            continue;
        }
        let path = filename::wal_path(dir, *n);
        fs.sync_file(&path).context(|| {
            format!(
                "syncing {} to retain it for the change feed",
                path.display()
            )
        })?;
        state.retained_wals.insert(*n, *w);
    }
    Ok(())
}

/// A partition's hash index from its checkpoint (UniKV §III-G): tables
/// merged since the checkpoint are forgotten, tables flushed after it are
/// added in flush order. A checkpoint that is missing or fails its checksum
/// is only an optimisation lost: the index is rebuilt from the tables.
fn restore_index(
    fs: &dyn FileSystem,
    dir: &Path,
    checkpoint: Option<u64>,
    unsorted: &[Arc<TableFile>],
    unsorted_limit: u64,
) -> Result<HashIndex> {
    let restored = checkpoint.and_then(|n| {
        let bytes = fs.read(&filename::index_checkpoint_path(dir, n)).ok()?;
        HashIndex::decode(&bytes).ok()
    });
    let Some(mut index) = restored else {
        return build_index(unsorted);
    };
    let live: std::collections::HashSet<u64> = unsorted.iter().map(|t| t.meta.number).collect();
    let stale: Vec<u64> = index
        .tables()
        .into_iter()
        .filter(|t| !live.contains(t))
        .collect();
    if !stale.is_empty() {
        index.remove_tables(&stale);
    }
    for (i, t) in unsorted.iter().enumerate() {
        if !index.contains_table(t.meta.number) {
            let keys = table_user_keys(t)?;
            index_add_table(&mut index, &unsorted[..i], &t.meta, &keys, unsorted_limit)?;
        }
    }
    Ok(index)
}

/// Partitions must tile the key space: first unbounded below, each upper
/// bound the next lower bound, last unbounded above.
fn check_partitions(dir: &Path, manifest_number: u64, ps: &[Arc<Partition>]) -> Result<()> {
    let bad = |why: &str| {
        Err(Error::corruption(
            filename::manifest_path(dir, manifest_number),
            0,
            why.to_string(),
        ))
    };
    let Some(first) = ps.first() else {
        return bad("no partitions");
    };
    if !first.lower.is_empty() {
        return bad("first partition does not start at the empty key");
    }
    for w in ps.windows(2) {
        if w[0].upper.as_deref() != Some(w[1].lower.as_slice()) {
            return bad("partitions leave a gap or overlap");
        }
    }
    if ps.last().is_some_and(|p| p.upper.is_some()) {
        return bad("last partition is bounded above");
    }
    Ok(())
}

/// What recovery does with a memtable replay filled: the writer flushes
/// it into tables recorded in the state, a read-only view keeps it.
pub(super) type KeepMemtable<'a> =
    dyn FnMut(&mut ManifestState, Arc<dyn Memtable>) -> Result<()> + 'a;

/// Replays `wals` into memtables, handing each to `keep` once it reaches
/// the write buffer size, and the last one (if it holds a write) at the
/// end: the writer's open flushes them into UnsortedStore tables recorded
/// in `state`, the read-only view keeps them in memory. Returns the highest sequence seen, and what was
/// replayed of each WAL that held a batch: the bytes of the records kept
/// (up to a torn record, if one ended the history there) and the
/// sequences of its first and last batch, for the change feed.
pub(super) fn replay_wals(
    dir: &Path,
    options: &Options,
    state: &mut ManifestState,
    wals: &[u64],
    counters: &Counters,
    keep: &mut KeepMemtable<'_>,
) -> Result<(u64, Vec<(u64, RetainedWal)>)> {
    let mut last_seq = state.last_sequence;
    let fs = &*options.file_system;
    let mut mem = new_memtable(options.memtable, options.write_buffer_size);
    // The previous WAL replayed and the bytes of records it held.
    let mut previous: Option<(u64, u64)> = None;
    let mut replayed = Vec::new();
    'logs: for (i, &n) in wals.iter().enumerate() {
        let path = filename::wal_path(dir, n);
        let mut reader = LogReader::open(fs, &path)?.with_lost_pages();
        // The sequences of this WAL's first and last batch.
        let mut batches: Option<(u64, u64)> = None;
        let mut note_replayed = |size: u64, batches: Option<(u64, u64)>| {
            if let Some((first_seq, last_seq)) = batches {
                let w = RetainedWal {
                    size,
                    first_seq,
                    last_seq,
                };
                replayed.push((n, w));
            }
        };
        loop {
            match reader.read()? {
                LogRead::Record { offset, payload } => {
                    if let Some(link) = LogLink::decode(&payload) {
                        let link = link.map_err(|r| Error::corruption(&path, offset, r))?;
                        if offset == 0 && !previous_is_whole(&path, link, previous)? {
                            // The previous WAL lost records a crash took
                            // before this one's: the history ends there.
                            for &newer in &wals[i..] {
                                let dropped = record_bytes(fs, &filename::wal_path(dir, newer))?;
                                Counters::add(&counters.wal_truncated, dropped);
                            }
                            break 'logs;
                        }
                        continue;
                    }
                    let batch = WriteBatch::decode(payload).map_err(|r| {
                        Error::corruption(&path, offset, format!("bad write batch: {r}"))
                    })?;
                    let seq = batch.sequence();
                    for (j, op) in batch.iter().enumerate() {
                        let op = op.map_err(|e| Error::corruption(&path, offset, e.to_string()))?;
                        if let Some(end) = op.range_end {
                            mem.range_tombstones().add(RangeTombstone {
                                start: op.key.to_vec(),
                                end: end.to_vec(),
                                seq: seq + j as u64,
                            });
                            continue;
                        }
                        let value = (op.decoded_value())
                            .map_err(|r| Error::corruption(&path, offset, r))?;
                        mem.insert(op.key, seq + j as u64, op.kind, &value);
                    }
                    if !batch.is_empty() {
                        let batch_last = seq + batch.len() as u64 - 1;
                        last_seq = last_seq.max(batch_last);
                        let first = batches.map_or(seq, |(first, _)| first);
                        batches = Some((first, batch_last));
                    }
                    if mem.approximate_memory() >= options.write_buffer_size {
                        let full = std::mem::replace(
                            &mut mem,
                            new_memtable(options.memtable, options.write_buffer_size),
                        );
                        keep(state, full)?;
                    }
                }
                LogRead::End => {
                    previous = Some((n, reader.offset()));
                    note_replayed(reader.offset(), batches);
                    break;
                }
                LogRead::Bad {
                    offset,
                    at_tail: true,
                    ..
                } => {
                    check_wal_tail(fs, &path, offset)?;
                    // The first torn record: the end of the history kept.
                    note_replayed(offset, batches);
                    let len = fs.file_size(&path).unwrap_or(offset);
                    Counters::add(&counters.wal_truncated, len.saturating_sub(offset));
                    for &newer in &wals[i + 1..] {
                        let dropped = record_bytes(fs, &filename::wal_path(dir, newer))?;
                        Counters::add(&counters.wal_truncated, dropped);
                    }
                    break 'logs;
                }
                LogRead::Bad { offset, reason, .. } => {
                    return Err(Error::corruption(&path, offset, reason))
                }
            }
        }
    }
    if mem.holds_writes() {
        keep(state, mem)?;
    }
    Ok((last_seq, replayed))
}

/// Whether `previous` (the WAL replayed before the one at `path`, and the
/// bytes of records it held) is the whole WAL `link` says came before: the
/// same WAL, as long as it was when the rotation started this one. Shorter
/// is a crash artefact (`LogLink`); another WAL or a longer one is damage.
fn previous_is_whole(path: &Path, link: LogLink, previous: Option<(u64, u64)>) -> Result<bool> {
    let Some((number, size)) = previous else {
        // The first WAL replayed: its predecessor was flushed and deleted.
        return Ok(true);
    };
    let name = |n| crate::util::fs::file_name(&filename::wal_path(Path::new(""), n));
    if number != link.previous {
        // A rotation fsyncs the directory before the new WAL takes a
        // record, so no crash loses a WAL between two others.
        return Err(Error::corruption(
            path,
            0,
            format!(
                "this log's link record names {} as the log before it, but {} came before it",
                name(link.previous),
                name(number)
            ),
        ));
    }
    if size > link.previous_size {
        return Err(Error::corruption(
            path,
            0,
            format!(
                "the log before this one ({}) holds {size} bytes of records, more than the \
                 {} this one's link record says",
                name(number),
                link.previous_size
            ),
        ));
    }
    Ok(size == link.previous_size)
}

/// Most bytes after a bad record's header read to check its length field
/// ([`check_wal_tail`]); a damaged length whose true record is longer is
/// still taken for a torn tail.
const TAIL_CHECK_BYTES: u64 = 64 << 20;

/// Checks that the bad record at `offset` of the WAL at `path`, which the
/// reader took for a torn tail, is not a whole record whose *length field*
/// was damaged: that one's bytes still hold a write batch (or link record)
/// that ends where its own encoding says, with the stored checksum holding
/// over exactly those bytes — a chance of 2⁻³² for a torn record. A flipped
/// length that makes a record end past the file, or where only zeros
/// follow, otherwise reads as a crash's torn tail, and every synced record
/// inside its claimed extent would be dropped without a word (found by the
/// `wal_round_trip` fuzz target).
pub(crate) fn check_wal_tail(fs: &dyn FileSystem, path: &Path, offset: u64) -> Result<()> {
    use crate::util::crc;
    let file = fs
        .open(path)
        .map_err(|e| Error::io(format!("opening log {}", path.display()), e))?;
    let len = file
        .metadata()
        .map_err(|e| Error::io(format!("reading size of log {}", path.display()), e))?
        .len();
    let header_end = offset + crc::RECORD_HEADER_SIZE as u64;
    if header_end > len {
        return Ok(()); // an incomplete header: torn
    }
    let read = |n: u64, at: u64| {
        crate::util::pread::read_exact_at(&file, n as usize, at)
            .map_err(|e| Error::io(format!("reading log {}", path.display()), e))
    };
    let header = read(crc::RECORD_HEADER_SIZE as u64, offset)?;
    let Ok(header) = <[u8; crc::RECORD_HEADER_SIZE]>::try_from(header.as_slice()) else {
        return Ok(());
    };
    let (stored, claimed) = crc::parse_record_header(&header);
    let bytes = read((len - header_end).min(TAIL_CHECK_BYTES), header_end)?;
    let Some(true_len) = crate::batch::encoded_len(&bytes).or_else(|| LogLink::encoded_len(&bytes))
    else {
        return Ok(());
    };
    let Ok(true_len32) = u32::try_from(true_len) else {
        return Ok(());
    };
    if true_len32 != claimed && crc::record_checksum(true_len32, &bytes[..true_len]) == stored {
        return Err(Error::corruption(
            path,
            offset,
            format!(
                "record length field says {claimed} bytes, but the record's checksum holds over \
                 the {true_len} its batch spans: the length is damaged (not a torn write), and \
                 the records after it would be lost"
            ),
        ));
    }
    Ok(())
}

/// Bytes of the whole records at the start of the log at `path`: what
/// recovery drops when an older log was torn.
fn record_bytes(fs: &dyn FileSystem, path: &Path) -> Result<u64> {
    let mut reader = LogReader::open(fs, path)?;
    while let LogRead::Record { .. } = reader.read()? {}
    Ok(reader.offset())
}

fn flush_recovered(
    dir: &Path,
    options: &Options,
    state: &mut ManifestState,
    mem: &Arc<dyn Memtable>,
) -> Result<()> {
    let table_options = options.table_options();
    let bounds: Vec<_> = state
        .partitions
        .iter()
        .map(|(id, p)| (*id, p.lower.clone(), p.upper.clone()))
        .collect();
    let mut next = state.next_file_number;
    let mut new_file = || {
        let n = next;
        next += 1;
        n
    };
    let files = write_memtable(
        &options.file_system,
        dir,
        table_options,
        mem,
        &bounds,
        Vec::new(),
        None,
        // The registry is read after recovery: the replayed keys of every
        // keyspace get the database's codec here (DESIGN §4.14).
        None,
        &mut new_file,
        &mut JobStats::default(),
    )?;
    state.next_file_number = next;
    let edit = VersionEdit {
        added_files: files
            .into_iter()
            .map(|(p, f)| (p, Placement::Unsorted, f))
            .collect(),
        range_tombstones: (mem.range_tombstones().all().into_iter())
            .filter_map(|t| state.stored_range_tombstone(t))
            .collect(),
        ..Default::default()
    };
    state
        .apply(&edit)
        .map_err(|r| Error::corruption(dir.to_path_buf(), 0, r))
}

/// Tells a torn last manifest record from a damaged one, before anything
/// is deleted or written. A record torn by a crash was never acted on, so
/// the state before it still matches the files: its oldest needed WAL
/// exists (a later edit that moved the log number past it is what lets it
/// be deleted), and so does every table and value log it names (an edit
/// that dropped one is what lets it be deleted). A record that fails
/// verification although it had taken effect is damage, and recovering
/// without it would serve old values or lose files: that is
/// `Error::Corruption` at the record, and nothing in the directory changes.
fn check_dropped_tail_was_torn(
    fs: &dyn FileSystem,
    dir: &Path,
    state: &ManifestState,
    tail: &DroppedTail,
) -> Result<()> {
    let damaged = |gone: String| {
        Err(Error::corruption(
            &tail.path,
            tail.offset,
            format!(
                "{}; the edit there had taken effect ({gone}), so the record is damaged, not \
                 torn by a crash",
                tail.reason
            ),
        ))
    };
    let wal = filename::wal_path(dir, state.log_number);
    if !fs.exists(&wal) {
        return damaged(format!("{} is gone", wal.display()));
    }
    for n in state.live_tables() {
        let t = filename::table_path(dir, n);
        if !fs.exists(&t) {
            return damaged(format!("{} is gone", t.display()));
        }
    }
    for n in state.value_logs.keys() {
        let l = filename::value_log_path(dir, *n);
        if !fs.exists(&l) && !fs.exists(&filename::wal_path(dir, *n)) {
            return damaged(format!("{} is gone", l.display()));
        }
    }
    // Only an edit that raises or drops the holds pinning one lets a
    // retained WAL be deleted.
    for n in state.retained_wals.keys() {
        let w = filename::wal_path(dir, *n);
        if !fs.exists(&w) {
            return damaged(format!("{} is gone", w.display()));
        }
    }
    Ok(())
}

/// Deletes files no longer referenced: manifests other than `manifest`,
/// WALs numbered below `wals_below` (flushed), tables, value logs and
/// index checkpoints not in `state` (a job that crashed before its edit, or
/// not Weft's), temp files (`STATS.tmp` too; `STATS` stays). Run before recovery hands out a number (with
/// the recovered manifest and its log number) and again once the new
/// manifest is durable (with it and the new WAL's number).
fn remove_obsolete_files(
    fs: &dyn FileSystem,
    dir: &Path,
    state: &ManifestState,
    manifest: Option<u64>,
    wals_below: u64,
) {
    let live: std::collections::HashSet<u64> = state.live_tables().collect();
    let Ok(paths) = fs.read_dir(dir) else {
        return;
    };
    for path in paths {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let remove = match filename::parse_file_name(name) {
            Some(FileKind::Manifest(n)) => Some(n) != manifest,
            // A flushed WAL tables point into is a value log now; one a
            // change-feed hold needs is retained.
            Some(FileKind::Wal(n)) => {
                n < wals_below
                    && !state.value_logs.contains_key(&n)
                    && !state.retained_wals.contains_key(&n)
            }
            Some(FileKind::Table(n)) => !live.contains(&n),
            Some(FileKind::ValueLog(n)) => !state.value_logs.contains_key(&n),
            Some(FileKind::IndexCheckpoint(n)) => {
                !state.index_checkpoints.values().any(|c| *c == n)
            }
            // A torn next STATS is never read; STATS itself stays.
            Some(FileKind::Temp(_) | FileKind::StatsTemp) => true,
            Some(FileKind::Stats) => false,
            _ => name == "CURRENT.tmp",
        };
        if remove {
            let _ = fs.remove_file(&path);
        }
    }
}
