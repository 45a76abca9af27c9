//! Read-only open (`Db::open_read_only`) and `Db::refresh`: a view of a
//! database another process may be writing (RocksDB's secondary
//! instance), built from the same pieces as the writer's open
//! (`db::open`): manifest recovery, [`open::list_live_wals`],
//! [`open::replay_wals`] and [`open::open_version`]. See
//! `docs/DESIGN.md` §4.13.
//!
//! A view never writes: no LOCK, no manifest, no CURRENT, no STATS, no
//! tables from replay (the replayed WALs stay in memtables), no orphan
//! removal, no WAL. The writer may delete any file between the moment
//! the view reads the manifest and the moment it opens that file (a
//! compaction, a flush, a new manifest). Every table, value log and WAL of
//! the view is opened while it is built and held open from then on, so
//! once built it reads them whatever the writer deletes; a file found gone
//! while building, or a race the checks below catch, makes the build start
//! over from CURRENT, a bounded number of times.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::core::{ActiveWal, Core, Counters, EngineState, FeedState, ImmutableMemtable};
use super::open;
use crate::error::{Error, Result};
use crate::filename;
use crate::manifest::{self, ManifestState, ManifestWriter};
use crate::memtable::{new_memtable, Memtable};
use crate::options::Options;
use crate::stats_file::Lifetime;
use crate::store::Version;
use crate::table::BlockCache;
use crate::wal::LogWriter;

/// Builds of a view tried before the last error is returned: each failed
/// one met the writer deleting or rewriting a file between two steps,
/// which takes it a few milliseconds at most, so a handful of retries
/// outlast any writer that is not deleting files continuously.
const VIEW_ATTEMPTS: u32 = 20;

/// What a read-only engine reads: the store version of one manifest state
/// and the WALs at or above its log number, replayed into memtables.
struct View {
    version: Arc<Version>,
    /// Memtables of the replayed WALs, oldest first.
    mems: Vec<Arc<dyn Memtable>>,
    /// The last sequence replayed (or the manifest's): the view's visible
    /// sequence.
    last_seq: u64,
    manifest_number: u64,
    /// The newest WAL replayed, or the manifest's log number.
    last_wal: u64,
    state: ManifestState,
}

/// Builds a view, starting over while the writer's deletions get in the
/// way ([`VIEW_ATTEMPTS`]).
fn build_view(dir: &Path, options: &Options, cache: &Arc<BlockCache>) -> Result<View> {
    let mut attempt = 1;
    loop {
        match build_view_once(dir, options, cache) {
            Ok(view) => return Ok(view),
            Err(e) if attempt < VIEW_ATTEMPTS && is_writer_race(&e) => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(u64::from(attempt)));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Whether `e` may be the writer's doing rather than a fault of the
/// database: a file gone (deleted after the manifest or listing named
/// it), a file shorter than its size said a moment before (a WAL the
/// writer truncated to its records when it sealed it, between the reader's
/// size and its read), or a WAL whose link record names a WAL the listing
/// lacked (one flushed and deleted in between). Real damage fails every
/// attempt and is returned after the last.
fn is_writer_race(e: &Error) -> bool {
    use std::io::ErrorKind::{NotFound, UnexpectedEof};
    match e {
        Error::Io { source, .. } => matches!(source.kind(), NotFound | UnexpectedEof),
        Error::Corruption { .. } => true,
        _ => false,
    }
}

fn build_view_once(dir: &Path, options: &Options, cache: &Arc<BlockCache>) -> Result<View> {
    let fs = &options.file_system;
    // A torn last record is an edit the writer is appending now: the
    // state before it is the last committed one, whose files all exist
    // until a later edit drops them.
    let (manifest_number, mut state, _appending) = manifest::recover_noting_tail(&**fs, dir)?;
    let wals = open::list_live_wals(&**fs, dir, state.log_number)?;
    // The manifest's oldest live WAL exists as long as the manifest is
    // current; gone, the writer flushed it (and its records are in a table
    // a newer manifest names): start over from CURRENT.
    if wals.first() != Some(&state.log_number) {
        let path = filename::wal_path(dir, state.log_number);
        return Err(Error::io(
            format!(
                "opening {} read-only (the writer flushed it since the manifest was read)",
                path.display()
            ),
            std::io::Error::from(std::io::ErrorKind::NotFound),
        ));
    }
    let mut mems = Vec::new();
    let mut keep = |_: &mut ManifestState, mem: Arc<dyn Memtable>| {
        mems.push(mem);
        Ok(())
    };
    // The writer's own replay: it stops at the first torn record (the
    // writer's append in progress, or the zeros a mapped WAL reserves
    // past its last record) and keeps what came before.
    let (last_seq, _) = open::replay_wals(
        dir,
        options,
        &mut state,
        &wals,
        &Counters::default(),
        &mut keep,
    )?;
    let version = open::open_version(fs, dir, options, cache, &state, manifest_number)?;
    Ok(View {
        version: Arc::new(version),
        mems,
        last_seq,
        manifest_number,
        last_wal: wals.last().copied().unwrap_or(state.log_number),
        state,
    })
}

/// Memtables of `view` as the engine state's active memtable and
/// immutable ones (never flushed: no background thread runs).
fn memtables(
    view: &mut View,
    options: &Options,
) -> (Arc<dyn Memtable>, VecDeque<ImmutableMemtable>) {
    let mem = view
        .mems
        .pop()
        .unwrap_or_else(|| new_memtable(options.memtable, options.write_buffer_size));
    let imms = view
        .mems
        .drain(..)
        .map(|mem| ImmutableMemtable {
            mem,
            wal_number: view.last_wal,
            made_immutable: Instant::now(),
            last_sequence: view.last_seq,
            wal_size: 0,
            wal_has_logged_puts: false,
            first_sequence: 0,
        })
        .collect();
    (mem, imms)
}

/// True when a range delete is in the view: gets skip the range checks
/// until one is (`Core::range_deletes_seen`).
fn has_range_deletes(mem: &Arc<dyn Memtable>, imms: &VecDeque<ImmutableMemtable>) -> bool {
    std::iter::once(mem)
        .chain(imms.iter().map(|i| &i.mem))
        .any(|m| !m.range_tombstones().is_empty())
}

/// Opens the database in `dir` read-only (see the module docs).
pub(crate) fn open_read_only(dir: &Path, mut options: Options) -> Result<Arc<Core>> {
    options.validate()?;
    // Caches a write would refresh: nothing writes here, and a refresh
    // replaces the whole view, so a cached value could outlive its key.
    options.row_cache_size = 0;
    options.munk_cache_size = 0;
    let fs = Arc::clone(&options.file_system);
    if !fs.exists(&filename::current_path(dir)) {
        return Err(Error::InvalidArgument(format!(
            "no database in {} (a read-only open creates none)",
            dir.display()
        )));
    }
    let dir = dir
        .canonicalize()
        .map_err(|e| Error::io(format!("resolving {}", dir.display()), e))?;
    let cache = Arc::new(BlockCache::new(options.block_cache_size));
    let mut view = build_view(&dir, &options, &cache)?;
    let (mem, imms) = memtables(&mut view, &options);
    let range_deletes = has_range_deletes(&mem, &imms);
    let state = &view.state;
    let engine = EngineState {
        mem,
        mem_wal: view.last_wal,
        imms,
        version: Arc::clone(&view.version),
        next_file_number: state.next_file_number,
        log_number: state.log_number,
        imm_created: 0,
        imm_flushed: 0,
        manual_merges: Default::default(),
        next_partition_id: 0,
        index_checkpoints: state.index_checkpoints.clone(),
        flushed_since_checkpoint: Default::default(),
        flushing: false,
        restructuring: 0,
        busy_partitions: Default::default(),
        shutting_down: true,
        feed: FeedState {
            holds: state.holds.clone(),
            persisted: state.holds.clone(),
            retained: state.retained_wals.clone(),
            active_first_seq: view.last_seq + 1,
        },
    };
    let manifest = ManifestWriter::refusing(&*fs, &dir, view.manifest_number)?;
    let wal = ActiveWal {
        writer: LogWriter::refusing(&*fs, &dir, filename::wal_path(&dir, view.last_wal))?,
        number: view.last_wal,
        has_logged_puts: false,
    };
    // The writer's counters as of its last save, read only.
    let lifetime = Lifetime::at_open(crate::stats_file::load(&*fs, &dir), true);
    let mut core = Core::new(
        dir,
        options,
        cache,
        engine,
        manifest,
        wal,
        view.last_seq,
        Counters::default(),
        lifetime,
    );
    core.read_only = true;
    if range_deletes {
        core.range_deletes_seen.store(true, Ordering::Release);
    }
    Ok(Arc::new(core))
}

/// Replaces the view of the read-only engine `core` with one built now.
///
/// The visible sequence is raised before the new super version goes in:
/// a read that pins the old super version with the new sequence sees the
/// old view whole (nothing in it is newer). Readers holding the old super
/// version (iterators) keep reading it, and its files, which stay open.
pub(crate) fn refresh(core: &Core) -> Result<()> {
    core.check_open()?;
    let _serial = core.refresh_lock.lock();
    let mut view = build_view(&core.dir, &core.options, &core.cache)?;
    let (mem, imms) = memtables(&mut view, &core.options);
    if has_range_deletes(&mem, &imms) {
        core.range_deletes_seen.store(true, Ordering::Release);
    }
    // The writer's sequences only rise; a view never goes back.
    if view.last_seq > core.visible() {
        core.last_seq.store(view.last_seq, Ordering::Release);
        core.durable_seq.fetch_max(view.last_seq, Ordering::AcqRel);
        let ticket = core.publication.ticket();
        core.publication.complete(ticket, view.last_seq);
    }
    let mut st = core.state.lock();
    st.mem = mem;
    st.imms = imms;
    st.mem_wal = view.last_wal;
    st.version = Arc::clone(&view.version);
    st.next_file_number = view.state.next_file_number;
    st.log_number = view.state.log_number;
    st.feed.holds = view.state.holds.clone();
    st.feed.persisted = view.state.holds.clone();
    st.feed.retained = view.state.retained_wals.clone();
    st.feed.active_first_seq = view.last_seq + 1;
    core.install_super_version(&st);
    Ok(())
}
